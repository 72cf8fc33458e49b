// SPDX-License-Identifier: GPL-2.0
/* Owner of the filter maps (filter.h) and the fork handler: a child forked by a followed
 * process is followed too (threads share the tgid and need nothing). The tracepoint fires
 * in kernel_clone() before the child is woken, so the child's first event is already seen. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "filter.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 ctgid;
	u8 one = 1;
	long err;

	if (!tgid_followed(ptgid))
		return 0;
	ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == ptgid)
		return 0;
	err = bpf_map_update_elem(&followed_tgids, &ctgid, &one, BPF_NOEXIST);
	if (!err)
		count_event(CNT_FORKS_FOLLOWED);
	count_update_error(err);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}
