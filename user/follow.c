// SPDX-License-Identifier: GPL-2.0
/* What the tracer follows (--pid and `pid add`, --netns and `netns add`, --cgroup), and
 * starting over: `clear` empties the followed set, `reset` zeroes the counts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include "cgroups.h"
#include "netio.h"
#include "trace_helpers.h"
#include "tracer.h"

static int tgid_of(unsigned int pid, unsigned int *tgid)
{
	char path[64], line[256];
	FILE *f;
	int ok = -1;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %u", tgid) == 1) {
			ok = 0;
			break;
		}
	fclose(f);
	return ok;
}

int follow_pid(struct tracer *tr, unsigned int pid, char *err, size_t errlen)
{
	unsigned int tgid;
	u64 since = monotonic_ns();

	if (tgid_of(pid, &tgid)) {
		snprintf(err, errlen, "no such process %u", pid);
		return -1;
	}
	if (tracer_bpf_follow_tgid(&tr->bpf, tgid, since)) {
		snprintf(err, errlen, "cannot follow %u: %s", tgid, strerror(errno));
		return -1;
	}
	if (stats_make_process(&tr->bpf, tgid) && tr->verbose)
		fprintf(stderr, "netio-tracer: statistics of %u left to its threads\n", tgid);
	tracer_bpf_filter_changed(&tr->bpf);
	tracer_bpf_flush_threads(&tr->bpf);	/* its threads' kernel counters start now */
	bool known = false;
	for (int i = 0; i < tr->npids; i++)
		known |= tr->pids[i] == tgid;
	if (known)
		return 0;
	if (tr->npids < MAX_PIDS)
		tr->pids[tr->npids++] = tgid;
	if (tr->pc && perf_counters_add_pid(tr->pc, tgid) < 0 && tr->verbose)
		fprintf(stderr, "netio-tracer: perf counters for %u: %s\n", tgid, strerror(errno));
	if (tr->prof && profiler_add_pid(tr->prof, tgid) < 0 && tr->verbose)
		fprintf(stderr, "netio-tracer: sampling %u: %s\n", tgid, strerror(errno));
	return 0;
}

int follow_netns(struct tracer *tr, const char *spec, char *err, size_t errlen)
{
	unsigned int inum;

	if (netns_inum(spec, &inum, err, errlen))
		return -1;
	if (tracer_bpf_follow_netns(&tr->bpf, inum)) {
		if (errno == ENOSPC)
			snprintf(err, errlen, "cannot follow netns %s: %d namespaces followed since "
				 "the last reset, the most there can be", spec, NETIO_MAX_NETNS);
		else
			snprintf(err, errlen, "cannot follow netns %s: %s", spec, strerror(errno));
		return -1;
	}
	return 0;
}

static int follow_cgroup_proc(pid_t pid, void *ctx)
{
	struct tracer *tr = ctx;
	unsigned int tgid = pid;	/* cgroup.procs lists processes */
	u64 since = monotonic_ns();

	tracer_bpf_follow_tgid(&tr->bpf, tgid, since);
	return 0;
}

/* --cgroup: the cgroup's id goes into the filter first, then the processes already in it and
 * below it: one forked or moved there meanwhile is followed by the BPF side. */
int follow_cgroup(struct tracer *tr, const char *dir, char *err, size_t errlen)
{
	uint64_t id, any = NETIO_ANY_CGROUP;
	u8 one = 1;

	if (cgroup_dir_id(dir, &id, err, errlen) ||
	    tracer_bpf_follow_cgroups(&tr->bpf, err, errlen))
		return -1;
	if (bpf_map_update_elem(tr->bpf.followed_cgroups, &id, &one, BPF_ANY) ||
	    bpf_map_update_elem(tr->bpf.followed_cgroups, &any, &one, BPF_ANY)) {
		snprintf(err, errlen, "--cgroup %s: %s", dir, strerror(errno));
		return -1;
	}
	tracer_bpf_cgroups_followed(&tr->bpf);
	cgroup_for_each_proc(dir, follow_cgroup_proc, tr);
	tracer_bpf_filter_changed(&tr->bpf);
	return 0;
}

static void clear_map(int fd)
{
	char key[64];

	while (fd >= 0 && bpf_map_get_next_key(fd, NULL, key) == 0)
		if (bpf_map_delete_elem(fd, key))
			break;
}

void clear_all(struct tracer *tr)
{
	tracer_bpf_unfollow_all(&tr->bpf);
	clear_map(tr->bpf.followed_netns);
	tracer_bpf_filter_changed(&tr->bpf);
	tracer_bpf_flush_threads(&tr->bpf);	/* the kernel counters stop for the unfollowed */
	stats_clear_state(&tr->bpf);
	if (tr->pc)
		perf_counters_clear(tr->pc);
	if (tr->prof)
		profiler_clear_pids(tr->prof);
	tr->npids = 0;
}

void reset_all(struct tracer *tr)
{
	tr->bpf.skb_always = tr->skb_always;	/* the driver's `skb-programs always` ends */
	tracer_bpf_rearm(&tr->bpf);
	stats_restart(tr);
	stats_reset(&tr->bpf, &tr->base);
	if (tr->prof)
		profiler_reset(tr->prof);
	if (tr->pc)
		perf_counters_reset(tr->pc);
}
