// SPDX-License-Identifier: GPL-2.0
/* The empty-program floor of the bench (bench/floor.c loads it, docs/bench.md): one program
 * that does nothing per hook the tracer's programs use. With BPF run-time stats on, what an
 * empty program's run costs is what the stats and the hook's dispatch cost every program
 * there, so a program of the tracer reads as this floor plus its own work.
 *
 * The tracer never loads this object. Each program's section names its hook: the loader
 * attaches the ones it is asked for by that name ("tp_btf:<tracepoint>", as the tracer's
 * snapshot names its targets), so a hook added here needs nothing else. Nothing in it differs
 * between the storage and the compat build. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* tp_btf programs return 0; each is its own program so that each hook has its own stats */
#define FLOOR_TP(tp)						\
	SEC("tp_btf/" #tp)					\
	int floor_##tp(void *ctx)				\
	{							\
		return 0;					\
	}

/* the socket layer and the receive kinds */
FLOOR_TP(sock_send_length)
FLOOR_TP(sock_recv_length)
FLOOR_TP(tcp_rcv_space_adjust)
FLOOR_TP(skb_copy_datagram_iovec)
/* every skb of the machine */
FLOOR_TP(net_dev_start_xmit)
FLOOR_TP(netif_receive_skb)
FLOOR_TP(kfree_skb)
FLOOR_TP(tcp_probe)
FLOOR_TP(inet_sock_set_state)
/* processes and threads: the filter's fork handler, the exit flush, the cgroup follower */
FLOOR_TP(sched_process_fork)
FLOOR_TP(sched_process_exit)
FLOOR_TP(cgroup_attach_task)
/* the syscall hooks of the full level, and the tick sampler */
FLOOR_TP(sys_enter)
FLOOR_TP(sys_exit)
FLOOR_TP(hrtimer_expire_entry)

/* the root cgroup's getsockopt (the tracer's TCP_ZEROCOPY_RECEIVE program): 1 lets the call go
 * on unchanged */
SEC("cgroup/getsockopt")
int floor_getsockopt(struct bpf_sockopt *ctx)
{
	return 1;
}
