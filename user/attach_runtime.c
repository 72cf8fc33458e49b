// SPDX-License-Identifier: GPL-2.0
/* The ladder's programs once loaded: the on-demand ones attached when their condition holds
 * and re-armed, every link destroyed and made again (the untraced and traced passes), the
 * thread flush run, the followed namespaces' slots, the targets listed. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach_internal.h"
#include "kretprobes.h"
#include "sockets.h"
#include "netio.h"
#include "flush.skel.h"

static struct attached_prog *find_attached(struct tracer_bpf *t, const char *name)
{
	for (int i = 0; i < t->nprogs; i++)
		if (!strcmp(t->progs[i].name, name) && (t->progs[i].link || t->progs[i].lazy))
			return &t->progs[i];
	return NULL;
}

/* An attached program made one of the on-demand ones: detached until map wanted_fd's [0] asks
 * for it (tracer_bpf_poll), and its target says so. */
static void make_on_demand(struct attached_prog *ap, int wanted_fd)
{
	bpf_link__destroy(ap->link);
	ap->link = NULL;
	ap->lazy = true;
	ap->wanted_fd = wanted_fd;
	snprintf(ap->target + strlen(ap->target), sizeof(ap->target) - strlen(ap->target),
		 " (on demand)");
}

/* Where the socket layer marks the end of send and receive calls (sock_send_length and
 * sock_recv_length attached), sys_exit is only needed for poll, epoll_wait and sendfile:
 * detach it until a followed thread makes such a call (syscalls.bpf.c, exit_wanted). */
void defer_sys_exit(struct tracer_bpf *t)
{
	struct attached_prog *ap;
	uint32_t socket_end = EXIT_SOCKET_END, one = 1;

	if (t->rung[PP_SYSCALLS] == RUNG_FENTRY) {
		/* each call has its own fexit: nothing to defer; a write or read that never
		 * reached a socket is still not a socket call */
		if (t->exit_wanted >= 0 && find_attached(t, "tp_send_length") &&
		    find_attached(t, "tp_recv_length") &&
		    !bpf_map_update_elem(t->exit_wanted, &socket_end, &one, BPF_ANY))
			t->sc_end_at_socket = true;
		return;
	}

	if (t->exit_wanted < 0 || !find_attached(t, "tp_send_length") ||
	    !find_attached(t, "tp_recv_length") || !t->syscalls)
		return;
	ap = find_attached(t, "sc_exit");
	if (!ap)
		ap = find_attached(t, "sc_exit_raw");
	if (!ap || !ap->link)
		return;
	ap->bpf_prog = ap->prog;	/* t->syscalls->progs.sc_exit or .sc_exit_raw */
	if (bpf_map_update_elem(t->exit_wanted, &socket_end, &one, BPF_ANY))
		return;
	make_on_demand(ap, t->exit_wanted);
	t->sc_end_at_socket = true;
}

void tracer_bpf_filter_changed(struct tracer_bpf *t)
{
	uint32_t zero = 0, gen = 0;

	if (t->filter_gen < 0)
		return;
	bpf_map_lookup_elem(t->filter_gen, &zero, &gen);
	gen++;
	bpf_map_update_elem(t->filter_gen, &zero, &gen, BPF_ANY);
}

int tracer_bpf_follow_netns(struct tracer_bpf *t, unsigned int inum)
{
	int slot = -1;

	for (int i = 0; i < NETIO_MAX_NETNS; i++) {
		if (t->netns_inum[i] == inum) {
			slot = i;
			break;
		}
		if (slot < 0 && !t->netns_inum[i])
			slot = i;
	}
	if (slot < 0) {
		errno = ENOSPC;
		return -1;
	}
	uint32_t v = slot;
	if (bpf_map_update_elem(t->followed_netns, &inum, &v, BPF_ANY))
		return -1;
	t->netns_inum[slot] = inum;
	tracer_bpf_filter_changed(t);
	return 0;
}

/* The spliced bytes' program does its work only once a followed thread entered splice(2),
 * which sys_enter marks (syscalls.bpf.c, EXIT_SPLICE) before the splice reads the socket:
 * where no sys_enter program runs (syscalls on fentry, or --no-latency), the mark is set now,
 * for good. */
void mark_splices_without_sys_enter(struct tracer_bpf *t)
{
	uint32_t key = EXIT_SPLICE, one = 1;

	if (!find_attached(t, "tp_rcv_space_adjust") || find_attached(t, "sc_enter") ||
	    find_attached(t, "sc_enter_raw") || t->exit_wanted < 0)
		return;
	bpf_map_update_elem(t->exit_wanted, &key, &one, BPF_ANY);
}

/* The per-skb programs of the tracepoint rung: xmit, receive and free of zero-copy skbs. */
static bool per_skb_prog(const struct attached_prog *ap)
{
	static const char *const names[] = { "tp_xmit", "tp_netif_receive", "tp_kfree_skb" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(ap->name, names[i], strlen(names[i])))
			return true;
	return false;
}

static void set_skb_progs(const struct tracer_bpf *t, uint32_t state)
{
	uint32_t zero = 0;

	if (t->skb_progs >= 0)
		bpf_map_update_elem(t->skb_progs, &zero, &state, BPF_ANY);
}

/* Where zero-copy bytes count at their send (zc_at_send), the per-skb programs run only once
 * a send that can make zero-copy skbs is seen (bpf/maps.bpf.h, skb_progs): a tracer that
 * follows copying programs then costs nothing per skb. Elsewhere they count what nothing
 * else counts, and stay attached. on_demand false: attached from the start (--skb-programs
 * always). */
void defer_skb_programs(struct tracer_bpf *t, bool on_demand)
{
	if (!on_demand || !t->zc_at_send || t->skb_progs < 0) {
		set_skb_progs(t, SKB_PROGS_ATTACHED);
		return;
	}
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];

		if (!per_skb_prog(ap) || !ap->link)
			continue;
		ap->bpf_prog = ap->prog;
		make_on_demand(ap, t->skb_progs);
	}
	t->skb_on_demand = true;
	set_skb_progs(t, SKB_PROGS_IDLE);
}

static bool skb_programs_linked(const struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs; i++)
		if (per_skb_prog(&t->progs[i]) && t->progs[i].lazy && !t->progs[i].link)
			return false;
	return true;
}

/* The per-skb programs all attached, wanted since a zero-copy send: the sends that find them
 * so no longer count as unseen. linked_before: they were attached by an earlier poll, so a
 * send that began before they were (its first skbs unseen) has ended since, and counted as
 * unseen, unless it outlasts a poll's interval; at_once: the driver asked for them, with no
 * zero-copy sender running. */
static void skb_programs_attached(const struct tracer_bpf *t, bool linked_before, bool at_once)
{
	uint32_t zero = 0, state = SKB_PROGS_IDLE;

	if (!t->skb_on_demand || bpf_map_lookup_elem(t->skb_progs, &zero, &state) ||
	    state != SKB_PROGS_WANTED || !skb_programs_linked(t) || !(linked_before || at_once))
		return;
	set_skb_progs(t, SKB_PROGS_ATTACHED);
}

/* The on-demand programs whose condition holds, attached; at_once: see
 * skb_programs_attached. */
static void poll_lazy(struct tracer_bpf *t, bool at_once)
{
	bool skb_linked;

	if (t->detached)
		return;
	skb_linked = t->skb_on_demand && skb_programs_linked(t);
	sockets_keep_ends(t);
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];
		uint32_t zero = 0, wanted = 0;
		struct bpf_link *link;

		if (!ap->lazy || ap->link || !ap->bpf_prog || ap->wanted_fd < 0 ||
		    bpf_map_lookup_elem(ap->wanted_fd, &zero, &wanted) || !wanted)
			continue;
		link = bpf_program__attach(ap->bpf_prog);
		if (!link) {
			if (per_skb_prog(ap))
				fprintf(stderr, "netio-tracer: %s could not be attached: the zero-copy "
					"figures it feeds stay null\n", ap->name);
			ap->bpf_prog = NULL;	/* do not retry forever */
			continue;
		}
		ap->link = link;
	}
	skb_programs_attached(t, skb_linked, at_once);
}

void tracer_bpf_poll(struct tracer_bpf *t)
{
	poll_lazy(t, false);
}

void tracer_bpf_skb_programs(struct tracer_bpf *t, bool always)
{
	uint32_t zero = 0, state = SKB_PROGS_IDLE;

	t->skb_always = always;
	if (!t->skb_on_demand || !always)
		return;
	bpf_map_lookup_elem(t->skb_progs, &zero, &state);
	if (state == SKB_PROGS_IDLE)
		set_skb_progs(t, SKB_PROGS_WANTED);
	poll_lazy(t, true);
}

void tracer_bpf_rearm(struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];
		uint32_t zero = 0, val = 0;

		if (!ap->lazy)
			continue;
		if (ap->link) {
			bpf_link__destroy(ap->link);
			ap->link = NULL;
		}
		if (ap->wanted_fd >= 0)
			bpf_map_update_elem(ap->wanted_fd, &zero, &val, BPF_ANY);
	}
	if (t->skb_on_demand && t->skb_always) {
		set_skb_progs(t, SKB_PROGS_WANTED);
		poll_lazy(t, true);	/* now, not at the next tick: a workload may start at once */
	}
}

void tracer_bpf_flush_threads(const struct tracer_bpf *t)
{
	char buf[64];
	int fd;

	if (!t->flush_iter)
		return;
	fd = bpf_iter_create(bpf_link__fd(t->flush_iter));
	if (fd < 0) {
		fprintf(stderr, "netio-tracer: flushing per-thread counts: %s\n", strerror(errno));
		return;
	}
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

void tracer_bpf_detach(struct tracer_bpf *t)
{
	t->detached = true;	/* first: the re-arm below must attach nothing */
	tracer_bpf_flush_threads(t);	/* the iterator's link goes too: nothing of ours stays */
	bpf_link__destroy(t->flush_iter);
	t->flush_iter = NULL;
	tracer_bpf_rearm(t);	/* the on-demand ones: detached, waiting for their condition */
	for (int i = 0; i < t->nprogs; i++) {
		bpf_link__destroy(t->progs[i].link);
		t->progs[i].link = NULL;
	}
	t->detached = true;
}

static struct bpf_link *attach_again(const struct attached_prog *ap)
{
	if (ap->kfunc[0])
		return kprobe_attach(ap->prog, ap->kretprobe, ap->kfunc);
	if (ap->cgroup)
		return attach_root_cgroup(ap->prog);
	return bpf_program__attach(ap->prog);
}

int tracer_bpf_attach(struct tracer_bpf *t, char *err, size_t errlen)
{
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];

		if (ap->lazy || ap->link || !ap->prog)
			continue;
		ap->link = attach_again(ap);
		if (!ap->link) {
			snprintf(err, errlen, "attaching %s (%s) again: %s", ap->name, ap->target,
				 strerror(errno));
			tracer_bpf_detach(t);
			return -1;
		}
	}
	if (t->flush && !t->flush_iter)
		t->flush_iter = bpf_program__attach_iter(t->flush->progs.flush_threads, NULL);
	if (t->flush && !t->flush_iter) {
		snprintf(err, errlen, "attaching iter/task (flush_threads) again: %s", strerror(errno));
		tracer_bpf_detach(t);
		return -1;
	}
	t->detached = false;
	poll_lazy(t, true);	/* what was wanted before the detach (--skb-programs always) */
	return 0;
}

const char *tracer_bpf_targets(const struct tracer_bpf *t, enum probe_point pp, char *buf,
			       size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < t->nprogs && off < len; i++)
		if (t->progs[i].pp == pp)
			off += snprintf(buf + off, len - off, "%s%s", off ? "," : "", t->progs[i].target);
	return buf;
}
