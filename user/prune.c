// SPDX-License-Identifier: GPL-2.0
/* --prune-exited: forget the processes that ended, so that a tracer running for days on a
 * busy host (netio-trace agent) does not fill followed_tgids and tgid_stats (NETIO_MAX_PROCS
 * each), nor sock_slot and sock_stats with their sockets' records (NETIO_MAX_SOCK_RECORDS),
 * whose entries otherwise go only at a reset.
 *
 * The ended processes are gathered before a snapshot and deleted once the reader took it
 * (oneshot.c): their last counts (a thread's exit flushes them) are in that snapshot, and a
 * reader adding up snapshots loses nothing. A pid followed again in between (reused, its followed-since value changed) keeps
 * its entries. The filter generation is not bumped: a process that ended has no thread whose
 * cached decision could be stale, and a reused pid's threads have storage of their own. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <bpf/bpf.h>
#include "netio.h"
#include "tracer.h"

static bool ended(u32 tgid)
{
	return kill((pid_t)tgid, 0) && errno == ESRCH;
}

static int add(struct pruned *p, u32 tgid, u64 since)
{
	struct pruned_one *n;

	if (p->n == p->cap) {
		n = realloc(p->one, (p->cap ? p->cap * 2 : 64) * sizeof(*n));
		if (!n)
			return -1;
		p->one = n;
		p->cap = p->cap ? p->cap * 2 : 64;
	}
	p->one[p->n++] = (struct pruned_one){ .tgid = tgid, .since = since };
	return 0;
}

/* The followed processes that ended, with their followed-since values; then those with
 * statistics only (a process counted through a socket it owned, never followed itself); then
 * the socket records of ended processes. */
void prune_gather(const struct tracer *tr, struct pruned *p)
{
	u32 key, next;
	u64 since;
	void *prev;

	p->n = 0;
	if (!tr->no_sockets)
		sockets_gather_ended(&tr->bpf, ended, &p->socks);
	for (prev = NULL; tr->bpf.followed_tgids >= 0 &&
	     bpf_map_get_next_key(tr->bpf.followed_tgids, prev, &next) == 0; prev = &key) {
		key = next;
		if (ended(key) && !bpf_map_lookup_elem(tr->bpf.followed_tgids, &key, &since) &&
		    add(p, key, since))
			return;
	}
	for (prev = NULL; tr->bpf.tgid_stats >= 0 &&
	     bpf_map_get_next_key(tr->bpf.tgid_stats, prev, &next) == 0; prev = &key) {
		key = next;
		if (ended(key) && bpf_map_lookup_elem(tr->bpf.followed_tgids, &key, &since) &&
		    add(p, key, 0))
			return;
	}
}

/* Nothing gathered (its snapshot was not written). */
void prune_forget(struct pruned *p)
{
	p->n = 0;
	p->socks.n = 0;
}

/* Delete what prune_gather found, once the snapshot that holds its last counts was read. */
void prune_apply(const struct tracer *tr, const struct pruned *p)
{
	const int maps[] = { tr->bpf.tgid_stats, tr->bpf.tgid_hist, tr->bpf.tgid_spill };
	u64 since;

	sockets_free_ended(&tr->bpf, &p->socks);
	for (int i = 0; i < p->n; i++) {
		u32 tgid = p->one[i].tgid;
		bool followed = !bpf_map_lookup_elem(tr->bpf.followed_tgids, &tgid, &since);

		if (followed ? since != p->one[i].since : p->one[i].since != 0)
			continue;	/* followed again meanwhile: a new process on that pid */
		if (followed)
			tracer_bpf_unfollow_tgid(&tr->bpf, tgid);
		for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++)
			if (maps[m] >= 0)
				bpf_map_delete_elem(maps[m], &tgid);
	}
}
