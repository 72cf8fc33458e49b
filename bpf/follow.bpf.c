// SPDX-License-Identifier: GPL-2.0
/* Owner of the filter maps (filter.bpf.h) and the fork handler: a child forked by a followed
 * process is followed too (threads share the tgid and need nothing). The tracepoint fires
 * in kernel_clone() before the child is woken, so the child's first event is already seen.
 *
 * --cgroup: a process whose cgroup (v2) is a followed cgroup or below one is followed too,
 * whether it was forked there (the fork handler looks at the child's cgroup, which
 * CLONE_INTO_CGROUP may have chosen) or moved there later (cgroup_attach_task). Those present
 * when the tracer started are added by the tracer from cgroup.procs, after the cgroup is in
 * followed_cgroups, so no process falls between the two. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "thread.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* cgroup ids (kernfs node id = the directory's inode number on cgroup2) of --cgroup; key
 * NETIO_ANY_CGROUP is set while there is at least one (and follow_buckets' cgroups), so that
 * forks without --cgroup pay no walk. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_CGROUPS + 1);
	__type(key, u64);
	__type(value, u8);
} followed_cgroups SEC(".maps");

static __always_inline bool cgroups_followed(void)
{
	struct follow_buckets *b = follow_buckets_kept();
	u64 any = NETIO_ANY_CGROUP;

	if (b)
		return b->cgroups;	/* the same, with no lookup */
	return bpf_map_lookup_elem(&followed_cgroups, &any) != NULL;
}

/* Whether task's cgroup v2 (its default hierarchy cgroup) is followed or below a followed one:
 * a walk up the parents, at most NETIO_MAX_CGROUP_DEPTH levels. */
static __always_inline bool task_in_followed_cgroup(struct task_struct *task)
{
	struct cgroup *cg = BPF_CORE_READ(task, cgroups, dfl_cgrp);

	for (int i = 0; i < NETIO_MAX_CGROUP_DEPTH && cg; i++) {
		u64 id = BPF_CORE_READ(cg, kn, id);

		if (bpf_map_lookup_elem(&followed_cgroups, &id))
			return true;
		/* self is the first member of struct cgroup: the parent css is the parent cgroup */
		cg = (struct cgroup *)BPF_CORE_READ(cg, self.parent);
	}
	return false;
}

/* tgid followed from `since` (followed.bpf.h): a forked child's birth, so that its threads,
 * all born since, count from their birth. Its bucket is raised first (filter.bpf.h), and
 * lowered again if the tgid was followed already or could not be. */
static __always_inline long follow_tgid(u32 tgid, u64 since)
{
	u32 *n = follow_bucket(tgid);
	long err;

	if (n)
		__sync_fetch_and_add(n, 1);
	err = bpf_map_update_elem(&followed_tgids, &tgid, &since, BPF_NOEXIST);
	if (err && n)
		__sync_fetch_and_add(n, (u32)-1);
	return err;
}

/* Every fork of the machine passes here, so it does no more than the filter needs: a thread
 * or child of a followed process gets its storage and statistics at its first event, and
 * its kernel counters count from its birth all the same (born_followed). trusted: tp_btf's
 * tasks, read with loads, not probe reads (FIELD_READ). */

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child,
				   bool trusted)
{
	u32 ptgid = FIELD_READ(parent, tgid, trusted);
	u32 ctgid = FIELD_READ(child, tgid, trusted);
	long err;

	if (ctgid == ptgid)
		return 0;
	if (!surely_unfollowed(ptgid) && tgid_followed(ptgid)) {
		err = follow_tgid(ctgid, FIELD_READ(child, start_time, trusted));
		if (!err)
			count_event(CNT_FORKS_FOLLOWED);
		count_update_error(err);
		return 0;
	}
	if (!cgroups_followed() || !task_in_followed_cgroup(child))
		return 0;
	err = follow_tgid(ctgid, FIELD_READ(child, start_time, trusted));
	if (!err)
		count_event(CNT_CGROUP_FOLLOWED);
	count_update_error(err);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child, true);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child, false);
}

/* A process (or, in a threaded cgroup, a thread) moved to another cgroup: the tracepoint
 * fires after the move, so task's cgroup v2 is the new one (a move in a v1 hierarchy leaves it
 * as it was). A thread of the process that cached "not followed" decides again: the filter
 * generation changes. */
static __always_inline int on_cgroup_attach(struct task_struct *task)
{
	u32 tgid = BPF_CORE_READ(task, tgid), zero = 0, *gen;
	long err;

	if (!cgroups_followed() || (!surely_unfollowed(tgid) && tgid_followed(tgid)) ||
	    !task_in_followed_cgroup(task))
		return 0;
	err = follow_tgid(tgid, bpf_ktime_get_ns());
	count_update_error(err);
	if (err)
		return 0;
	count_event(CNT_CGROUP_FOLLOWED);
	gen = bpf_map_lookup_elem(&filter_gen, &zero);
	if (gen)
		__sync_fetch_and_add(gen, 1);
	return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(cgroup_attach_btf, struct cgroup *dst, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	return on_cgroup_attach(task);
}

SEC("raw_tp/cgroup_attach_task")
int BPF_PROG(cgroup_attach_raw, struct cgroup *dst, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	return on_cgroup_attach(task);
}
