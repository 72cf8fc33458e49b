// SPDX-License-Identifier: GPL-2.0
/* Exact copy accounting, fentry/fexit rung. Attach targets are chosen at run time by the
 * tracer (bpf_program__set_attach_target): function names move between kernels. Return
 * values are read with bpf_get_func_ret() so that a changed argument count does not move
 * them. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "copy_common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline long func_ret(void *ctx)
{
	u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	return (long)ret;
}

static __always_inline u64 func_arg(void *ctx, u32 n)
{
	u64 v = 0;

	bpf_get_func_arg(ctx, n, &v);
	return v;
}

/* tx_bytes: tcp_sendmsg(sk, msg, size) and udp_sendmsg(sk, msg, len); a program for each
 * target (an fentry program is loaded for one function) */
SEC("fentry")
int BPF_PROG(fx_sendmsg_in, struct sock *sk, struct msghdr *msg)
{
	on_sendmsg_enter(sk, msg);
	return 0;
}

SEC("fentry")
int BPF_PROG(fx_udp_sendmsg_in, struct sock *sk, struct msghdr *msg)
{
	on_sendmsg_enter(sk, msg);
	return 0;
}

/* An fexit program that passes its function's return value to a handler of copy_common.bpf.h. */
#define FEXIT_RET(prog, handler, type)						\
SEC("fexit")									\
int prog(u64 *ctx)								\
{										\
	handler((type)func_ret(ctx));						\
	return 0;								\
}

/* tx_bytes: what tcp_sendmsg/udp_sendmsg and, before 6.5, tcp_sendpage (sendfile, splice)
 * report sent */
FEXIT_RET(fx_sendmsg_out, on_sendmsg_exit, int)
FEXIT_RET(fx_udp_sendmsg_out, on_sendmsg_exit, int)
SEC("fexit")
int fx_sendpage_out(u64 *ctx)	/* int tcp_sendpage(sk, page, offset, size, flags) */
{
	on_sendpage_exit((int)func_ret(ctx), (struct sock *)func_arg(ctx, 0));
	return 0;
}
/* tx_copy: size_t _copy_from_iter{,_nocache}(addr, bytes, i): bytes copied from the user */
FEXIT_RET(fx_copy_from_iter, on_copy_from_user, long)
FEXIT_RET(fx_copy_from_iter_nc, on_copy_from_user, long)
/* pinning: int skb_zerocopy_iter_stream(sk, skb, msg, len, uarg[, binding]): bytes attached as
 * user pages; long get_user_pages_fast() / pin_user_pages_fast(): pages pinned */
FEXIT_RET(fx_zc_stream, on_zerocopy_stream, int)
FEXIT_RET(fx_gup_fast, on_pages_pinned, int)
FEXIT_RET(fx_pup_fast, on_pages_pinned, int)

/* pinning of a UDP zero-copy send (MSG_ZEROCOPY or io_uring's): int
 * __zerocopy_sg_from_iter(msg, sk, skb, from, length) returns 0 when length bytes went in as
 * user pages. skb_zerocopy_iter_dgram, its caller for UDP, is inline (Debian's 6.1); TCP's
 * bytes are counted at skb_zerocopy_iter_stream, which calls it too. io_uring's callback
 * (msg->sg_from_iter) calls it again with msg NULL for the same bytes: only the outer call, with
 * a msg, counts. */
SEC("fexit")
int fx_zc_sg(u64 *ctx)
{
	struct sock *sk = (struct sock *)func_arg(ctx, 1);

	if ((int)func_ret(ctx) == 0 && func_arg(ctx, 0) && sk &&
	    BPF_CORE_READ(sk, sk_protocol) == 17 /* UDP */)
		on_zerocopy_stream((int)func_arg(ctx, 4));
	return 0;
}

/* tx_copy where lib/iov_iter.c cannot be probed:
 * void __check_object_size(const void *ptr, unsigned long n, bool to_user) */
SEC("fentry")
int BPF_PROG(fx_check_object_size, const void *ptr, unsigned long n, bool to_user)
{
	on_copy_check(n, to_user);
	return 0;
}

/* fallback_copy: int skb_copy_ubufs(skb, gfp) */
SEC("fexit")
int fx_copy_ubufs(u64 *ctx)
{
	if ((int)func_ret(ctx) == 0)
		on_copy_ubufs((struct sk_buff *)func_arg(ctx, 0));
	return 0;
}

/* rx_copy: int skb_copy_datagram_iter(skb, offset, to, len): 0 means len bytes copied */
SEC("fexit")
int fx_rx_copy(u64 *ctx)
{
	if ((int)func_ret(ctx) == 0)
		on_rx_copy((int)func_arg(ctx, 3),
			   BPF_CORE_READ((struct sk_buff *)func_arg(ctx, 0), sk));
	return 0;
}

/* rx_copy of UDP: udp_recvmsg/udpv6_recvmsg(sk, msg, len, flags, addr_len) (5.19+), and
 * before 5.19 with noblock before flags: one entry program each per function (an fentry
 * program is loaded for one; user/attach.c picks by the kernel's BTF); the return is the
 * same */
#define FENTRY_UDP_RECV(prog, ...)						\
SEC("fentry")									\
int BPF_PROG(prog, struct sock *sk, struct msghdr *msg, size_t len, __VA_ARGS__)	\
{										\
	on_udp_recv_enter(sk, len, flags);						\
	return 0;								\
}

FENTRY_UDP_RECV(fx_udp_recv_in, int flags)
FENTRY_UDP_RECV(fx_udp_recv_in_noblock, int noblock, int flags)
FENTRY_UDP_RECV(fx_udp6_recv_in, int flags)
FENTRY_UDP_RECV(fx_udp6_recv_in_noblock, int noblock, int flags)

FEXIT_RET(fx_udp_recv_out, on_udp_recv_exit, int)
FEXIT_RET(fx_udp6_recv_out, on_udp_recv_exit, int)

/* The receive kinds beside rx_copy (receive.bpf.h), each counted for a followed process and
 * its socket. */

/* rx_mapped: int tcp_zerocopy_receive(sk, zc[, tss]) returned 0: zc->length bytes mapped (what
 * it copied into the copy buffer went through skb_copy_datagram_iter: rx_copy) */
SEC("fexit")
int fx_zc_receive(u64 *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	struct tcp_zerocopy_receive *zc = (void *)func_arg(ctx, 1);

	if ((int)func_ret(ctx) == 0 && tgid_followed(id >> 32))
		count_rx_kind(id >> 32, RX_MAPPED, BPF_CORE_READ(zc, length),
			      (struct sock *)func_arg(ctx, 0));
	return 0;
}

/* rx_discarded: int tcp_recvmsg(sk, msg, len, flags, addr_len) (5.19+; before, nonblock came
 * before flags: flags_arg says where) returned what it received; with MSG_TRUNC nothing was
 * copied */
static __always_inline void on_tcp_recv_exit(u64 *ctx, u32 flags_arg)
{
	u64 id = bpf_get_current_pid_tgid();
	int ret = (int)func_ret(ctx);

	if (ret > 0 && (func_arg(ctx, flags_arg) & NETIO_MSG_TRUNC) && tgid_followed(id >> 32))
		count_rx_kind(id >> 32, RX_DISCARDED, ret, (struct sock *)func_arg(ctx, 0));
}

SEC("fexit")
int fx_tcp_recv_out(u64 *ctx)
{
	on_tcp_recv_exit(ctx, 3);
	return 0;
}

SEC("fexit")
int fx_tcp_recv_out_nb(u64 *ctx)
{
	on_tcp_recv_exit(ctx, 4);
	return 0;
}

/* rx_spliced: ssize_t tcp_splice_read(sock, ppos, pipe, len, flags): bytes moved into the pipe */
SEC("fexit")
int fx_splice_read(u64 *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	long ret = func_ret(ctx);
	struct socket *sock = (void *)func_arg(ctx, 0);

	if (ret > 0 && tgid_followed(id >> 32))
		count_rx_kind(id >> 32, RX_SPLICED, ret, BPF_CORE_READ(sock, sk));
	return 0;
}

/* zc_completion: void __msg_zerocopy_callback(struct ubuf_info_msgzc *uarg) */
SEC("fentry")
int fx_zc_callback(u64 *ctx)
{
	on_zc_completion((struct ubuf_info_msgzc *)ctx[0]);
	return 0;
}
