// SPDX-License-Identifier: GPL-2.0
/* The flushes of the per-thread counts (maps.h, struct thread_counts): what a followed thread
 * counted in its own storage goes to its process's statistics (tgid_stats) when the thread
 * exits, and, for the threads alive, when the tracer runs the task iterator before every
 * snapshot and reset (tracer_bpf_flush_threads in user/attach.c), with the kernel's own
 * per-thread counters (maps.h, flush_kernel_counts). Loaded over the shared maps like every
 * other object. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.h"

char LICENSE[] SEC("license") = "GPL";

/* task's counts, if it has any (a storage lookup, empty for threads never followed), and
 * what the kernel counted for it (struct kernel_counts). From the iterator, a thread of a
 * followed process that has no storage yet (it was there before `pid add`, which runs the
 * iterator right after) gets one: its kernel counters are counted from then on. */
static __always_inline void flush_task(struct task_struct *task, bool iterating)
{
	struct task_state *st = bpf_task_storage_get(&task_state, task, 0, 0);
	u32 tgid;

	if (st) {
		flush_thread_counts(st);
		flush_kernel_counts(task, st, !iterating);
		if (!iterating && st->tgid)
			name_process(st->tgid);
		return;
	}
	tgid = task->tgid;
	if (iterating && tgid_followed(tgid))
		adopt_thread(task, tgid, false);
}

/* A thread exits (its storage goes with it). Every thread exit of the machine passes here. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(tp_thread_exit, struct task_struct *task)
{
	flush_task(task, false);
	return 0;
}

static long claim_socket(struct bpf_map *map, u64 *sk, struct sk_info *si, void *ctx)
{
	claim_zc_bytes(si);
	return 0;
}

/* Every task, then (the iterator's last call, with no task) the zerocopy bytes still pending
 * on sockets whose owner is known: what xmit counted after the owner's last send. */
SEC("iter/task")
int flush_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;	/* read once: each read may be NULL */

	if (task)
		flush_task(task, true);
	else
		bpf_for_each_map_elem(&sk_owner, claim_socket, NULL, 0);
	return 0;
}
