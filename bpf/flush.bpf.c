// SPDX-License-Identifier: GPL-2.0
/* The flushes of the per-thread counts (thread.bpf.h): what a followed thread counted in its own
 * storage goes to its process's statistics (tgid_stats) when the thread exits and, for the
 * threads alive, when the tracer runs the task iterator before every snapshot and reset
 * (tracer_bpf_flush_threads in user/attach_runtime.c), with the kernel's own per-thread counters.
 * In the compat build (thread_hash.bpf.h) a thread's exit only drops its state. Loaded over the
 * shared maps like every other object. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "thread.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* A thread exits (its storage goes with it). Every thread exit of the machine passes here. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(tp_thread_exit, struct task_struct *task)
{
	thread_flush(task, false);
	return 0;
}

#ifndef NETIO_COMPAT	/* bpf_for_each_map_elem is 5.13; nothing is pending there anyway */
static long claim_socket(struct bpf_map *map, u64 *sk, struct sk_info *si, void *ctx)
{
	claim_zc_bytes(si);
	return 0;
}
#endif

/* Every task, then (the iterator's last call, with no task) the zerocopy bytes still pending
 * on sockets whose owner is known: what xmit counted after the owner's last send. */
SEC("iter/task")
int flush_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;	/* read once: each read may be NULL */

	if (task)
		thread_flush(task, true);
#ifndef NETIO_COMPAT
	else
		bpf_for_each_map_elem(&sk_owner, claim_socket, NULL, 0);
#endif
	return 0;
}
