// SPDX-License-Identifier: GPL-2.0
/* Exact copy accounting, kprobe/kretprobe rung: the same handlers as copy_fentry.bpf.c.
 * The tracer attaches each program by hand (bpf_program__attach_kprobe) to the function
 * name found in /proc/kallsyms (suffixes such as .isra.0 included). Arguments needed at
 * return are stashed per thread at entry. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "copy_common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* skb_copy_datagram_iter's length and its skb's socket, for its return */
struct rx_call {
	u64 len;
	u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);
	__type(value, struct rx_call);
} rx_stash SEC(".maps");

/* the length of a UDP zero-copy send's __zerocopy_sg_from_iter call, for its return */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);
	__type(value, u64);
} sg_stash SEC(".maps");

static __always_inline void stash(void *map, u64 v)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();

	count_update_error(bpf_map_update_elem(map, &tid, &v, BPF_ANY));
}

static __always_inline bool unstash(void *map, u64 *v)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 *p = bpf_map_lookup_elem(map, &tid);

	if (!p)
		return false;
	*v = *p;
	bpf_map_delete_elem(map, &tid);
	return true;
}

/* tcp_sendmsg(sk, msg, size); udp_sendmsg(sk, msg, len) attaches the same pair */
SEC("kprobe")
int BPF_KPROBE(kp_sendmsg_in, struct sock *sk, struct msghdr *msg)
{
	on_sendmsg_enter(sk, msg);
	return 0;
}

/* A kretprobe program that passes its function's return value to a handler of
 * copy_common.bpf.h. A kprobe program attaches to any number of functions: one serves each kind of
 * return value. */
#define KRETPROBE_RET(prog, handler, type)					\
SEC("kretprobe")								\
int BPF_KRETPROBE(prog, type ret)						\
{										\
	handler(ret);								\
	return 0;								\
}

/* tx_bytes: tcp_sendmsg, udp_sendmsg */
KRETPROBE_RET(kp_sendmsg_out, on_sendmsg_exit, int)
/* tx_bytes: tcp_sendpage (sendfile, splice before 6.5): no socket at a kretprobe */
SEC("kretprobe")
int BPF_KRETPROBE(kp_sendpage_out, int ret)
{
	on_sendpage_exit(ret, NULL);
	return 0;
}
/* tx_copy: _copy_from_iter, _copy_from_iter_nocache */
KRETPROBE_RET(kp_copy_from_iter, on_copy_from_user, long)
/* pinning: skb_zerocopy_iter_stream (bytes), *_user_pages_fast (pages) */
KRETPROBE_RET(kp_zc_stream, on_zerocopy_stream, int)
KRETPROBE_RET(kp_pages_out, on_pages_pinned, int)

/* pinning of a UDP zero-copy send (MSG_ZEROCOPY or io_uring's): __zerocopy_sg_from_iter
 * returns 0 when length bytes went in as user pages. Its arguments are (msg, sk, skb, from,
 * length) from 6.0 and (sk, skb, from, length) before: one entry program each, the tracer
 * attaches the one whose first parameter the kernel's BTF names (user/attach.c, .arg0). TCP
 * counts at skb_zerocopy_iter_stream, which calls it too; io_uring's callback calls it again
 * with msg NULL for the same bytes: only the call with a msg counts. */
static __always_inline void zc_sg_enter(struct sock *sk, u64 length)
{
	if (sk && BPF_CORE_READ(sk, sk_protocol) == 17 /* UDP */ && current_send_scope())
		stash(&sg_stash, length);
}

SEC("kprobe")
int BPF_KPROBE(kp_zc_sg_in, void *msg, struct sock *sk, void *skb, void *from, size_t length)
{
	if (msg)
		zc_sg_enter(sk, length);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(kp_zc_sg_in_pre60, struct sock *sk, void *skb, void *from, size_t length)
{
	zc_sg_enter(sk, length);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_zc_sg_out, int ret)
{
	u64 len;

	if (unstash(&sg_stash, &len) && ret == 0)
		on_zerocopy_stream((long)len);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(kp_check_object_size, const void *ptr, unsigned long n, bool to_user)
{
	on_copy_check(n, to_user);
	return 0;
}

/* skb_copy_ubufs(skb, gfp): counted at entry (it fails only on allocation failure) */
SEC("kprobe")
int BPF_KPROBE(kp_copy_ubufs, struct sk_buff *skb)
{
	on_copy_ubufs(skb);
	return 0;
}

/* skb_copy_datagram_iter(skb, offset, to, len) */
SEC("kprobe")
int BPF_KPROBE(kp_rx_copy_in, struct sk_buff *skb, int offset, void *to, int len)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct rx_call call = { .len = len };

	if (!tgid_followed(bpf_get_current_pid_tgid() >> 32))
		return 0;
	call.sk = (u64)BPF_CORE_READ(skb, sk);
	count_update_error(bpf_map_update_elem(&rx_stash, &tid, &call, BPF_ANY));
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_rx_copy_out, int ret)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct rx_call *call = bpf_map_lookup_elem(&rx_stash, &tid), c;

	if (!call)
		return 0;
	c = *call;
	bpf_map_delete_elem(&rx_stash, &tid);
	if (ret == 0)
		on_rx_copy((long)c.len, (struct sock *)c.sk);
	return 0;
}

/* rx_copy of UDP: udp_recvmsg/udpv6_recvmsg, with or without noblock (as on the fentry rung) */
#define KPROBE_UDP_RECV(prog, ...)						\
SEC("kprobe")									\
int BPF_KPROBE(prog, struct sock *sk, struct msghdr *msg, size_t len, __VA_ARGS__)	\
{										\
	on_udp_recv_enter(sk, len, flags);						\
	return 0;								\
}

KPROBE_UDP_RECV(kp_udp_recv_in, int flags)
KPROBE_UDP_RECV(kp_udp_recv_in_noblock, int noblock, int flags)

KRETPROBE_RET(kp_udp_recv_out, on_udp_recv_exit, int)

SEC("kprobe")
int BPF_KPROBE(kp_zc_callback, struct ubuf_info_msgzc *uarg)
{
	on_zc_completion(uarg);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(kp_zc_callback_pre512, struct ubuf_info___pre512 *uarg, bool success)
{
	on_zc_completion_pre512(uarg, success);
	return 0;
}
