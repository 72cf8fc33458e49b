// SPDX-License-Identifier: GPL-2.0
/* The tracepoint rung's receive through TCP_ZEROCOPY_RECEIVE (tp_rung.bpf.h): a
 * cgroup/getsockopt program, its own object so that a rung's accounting loads without it. */
#include "tp_rung.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* 1 (set by the tracer after the climb) where rx_copy counts at sock_recv_length, which a
 * TCP_ZEROCOPY_RECEIVE never passes: the bytes its copy buffer took are added here instead. */
u32 rx_copybuf_uncounted = 0;

/* rx_mapped: getsockopt(TCP_ZEROCOPY_RECEIVE) as the kernel answered it (do_tcp_getsockopt runs
 * the cgroup programs on its own copy of the struct, optval a kernel address): length bytes
 * mapped, copybuf_len copied. Attached to the root cgroup; every other getsockopt leaves at the
 * first test. Returns 1: the call goes on unchanged. */
SEC("cgroup/getsockopt")
int cg_zc_receive(struct bpf_sockopt *ctx)
{
	struct tcp_zerocopy_receive *zc = ctx->optval;
	struct sock *sk = NULL;
	u64 id;
	u32 tgid;
	s32 copied = 0;

	if (ctx->level != NETIO_SOL_TCP || ctx->optname != NETIO_TCP_ZEROCOPY_RECEIVE ||
	    ctx->retval != 0)
		return 1;
	/* the uapi's layout: length ends at 12, copybuf_len (5.11+) at 36 */
	if ((void *)((char *)zc + 12) > ctx->optval_end)
		return 1;
	id = bpf_get_current_pid_tgid();
	tgid = id >> 32;
	if (!tgid_followed(tgid))
		return 1;
	/* ctx->sk is a socket pointer the verifier keeps from arithmetic (the record reads it
	 * by probe reads): its address from the kernel's own context, struct bpf_sockopt_kern */
	if (bpf_probe_read_kernel(&sk, sizeof(sk), &((struct bpf_sockopt_kern *)ctx)->sk))
		sk = NULL;
	count_rx_kind(tgid, RX_MAPPED, zc->length, sk);
	if ((void *)((char *)zc + 36) <= ctx->optval_end)
		copied = zc->copybuf_len;
	if (rx_copybuf_uncounted && copied > 0)
		count_rx(tgid, copied, sk);
	return 1;
}
