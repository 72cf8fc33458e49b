// SPDX-License-Identifier: GPL-2.0
/* Copy accounting from tracepoints only (tp_btf): the rung every kernel since 5.5 allows.
 *   tx_bytes      sock:sock_send_length (6.3+), TCP and UDP sockets, ret > 0
 *   tx_spliced    of those, the sends made inside sendfile(2) or splice(2): page-cache or pipe
 *                 pages spliced into the socket (MSG_SPLICE_PAGES), not copied. The tracepoint's
 *                 flags are 0 for every send (sock_sendmsg_nosec passes 0: seen on 6.18 with
 *                 sendfile and with MSG_DONTWAIT), so the syscall the thread is in tells
 *   rx_copy       sock:sock_recv_length (6.3+), ret > 0 unless MSG_TRUNC (a receive returns
 *                 what it copied to the user); else skb:skb_copy_datagram_iovec (len about to
 *                 be copied), one event per skb instead of one per call
 *   sock_send_length and sock_recv_length also end the traced send or receive call of the
 *   current thread (syscalls.bpf.c): its latency runs from sys_enter to there.
 *   zc_tx_bytes   a TCP send with MSG_ZEROCOPY (flags from the thread's saved registers):
 *                 sock_send_length's ret, per thread, socket and the socket's netns
 *                 (zc_pinned_by_send); other zerocopy skbs (io_uring's, UDP's) at
 *                 net:net_dev_start_xmit, flagged SKBFL_ZEROCOPY_ENABLE: data_len (their
 *                 user pages), per device netns and per owning socket
 *   fallback copy net:netif_receive_skb, a flagged skb received in a followed netns, less those
 *                 skb:kfree_skb frees still flagged after they were received (forwarded to a
 *                 blackhole, dropped): since 6.17 only local delivery copies, before it every
 *                 received skb was copied first; tcp:tcp_probe confirms the flag is gone when
 *                 TCP sees the segment
 *   tx_copy       inferred in user space: tx_bytes - zc_tx_bytes - tx_spliced_bytes
 *   rx_discarded  sock:sock_recv_length with MSG_TRUNC on a TCP socket: ret bytes dropped
 *   rx_mapped     a cgroup/getsockopt program: TCP_ZEROCOPY_RECEIVE's own result (length
 *                 mapped, copybuf_len copied, which sock_recv_length never sees)
 *   rx_spliced    tcp:tcp_rcv_space_adjust in a thread inside splice(2): what the socket's
 *                 reader consumed (bytes_received less what is queued) less what its record
 *                 counted of every other receive kind
 * The owner of a zerocopy socket whose skbs xmit counts is named at every sock_send_length
 * of a followed process; the bytes of skbs that left before (inside the socket's first send)
 * wait on the socket (maps.bpf.h, sk_info) and are claimed then. Without sock_send_length
 * (before 6.3) they are never claimed on this rung: zerocopy bytes are counted per netns
 * only, as tx_bytes is not counted at all.
 * Arguments are typed kernel pointers: fields are read directly (CO-RE relocated loads), a
 * probe read is needed only for the computed skb_shinfo() pointer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "thread.bpf.h"
#include "receive.bpf.h"
#include "exit_wanted.bpf.h"
#include "syscall_nr.bpf.h"
#include "fd_sock.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define NETIO_IPPROTO_TCP 6
#define NETIO_IPPROTO_UDP 17
#define NETIO_PF_IO_WORKER 0x00000010	/* io_uring's worker and SQPOLL threads */

#define NETIO_MSG_ZEROCOPY 0x4000000
#define NETIO_NETIF_F_SG 1	/* NETIF_F_SG_BIT is 0 on every kernel */

static __always_inline bool counted_proto(u16 proto)
{
	return proto == NETIO_IPPROTO_TCP || proto == NETIO_IPPROTO_UDP;
}

/* [0] = 1 once a zerocopy skb was received in a followed netns: the tracer then attaches
 * tp_tcp_probe (until then it would run for every TCP segment with nothing to confirm), and
 * detaches it again at `reset`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} zc_state SEC(".maps");

/* bpf_rdonly_cast (6.2+) makes a computed kernel address a typed read-only pointer: loads
 * through it are single fault-safe instructions where bpf_probe_read_kernel is a helper call
 * (each call and return costs here: bench/NOTES.md). The per-skb programs come in two builds
 * from one body, `cast` a constant: the plain name casts, the *_pre62 one probe-reads; the
 * tracer loads the one the kernel allows (user/attach.c, rows with .kfunc). Weak: before 6.2
 * the kfunc is absent and only the *_pre62 programs are loaded. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* Before 5.12 the zerocopy mark was SKBTX_DEV_ZEROCOPY in the shared info's tx_flags. */
struct skb_shared_info___pre512 {
	__u8 tx_flags;
} __attribute__((preserve_access_index));
#define NETIO_SKBTX_DEV_ZEROCOPY (1 << 3)

/* skb_shinfo(skb)->flags & SKBFL_ZEROCOPY_ENABLE (tx_flags & SKBTX_DEV_ZEROCOPY before 5.12),
 * for an skb with paged data: user pages are always frags, so an skb without (an ACK, say) has
 * none to count or to copy, and is dismissed with one load before its shared info is read.
 * skb->end is an offset from head on 64-bit kernels (NET_SKBUFF_DATA_USES_OFFSET), a pointer
 * elsewhere. The cast build runs on 6.2+ only, where the flags are `flags`. */
static __always_inline unsigned char *skb_shinfo_addr(struct sk_buff *skb)
{
	if (bpf_core_field_size(skb->end) == 4)
		return skb->head + skb->end;
	return (unsigned char *)(unsigned long)skb->end;
}

static __always_inline bool skb_zc(struct sk_buff *skb, const bool cast)
{
	struct skb_shared_info *shinfo;
	unsigned char *sh;
	u8 flags = 0, bit = SKBFL_ZEROCOPY_ENABLE_BIT;
	u32 off;

	if (!skb->data_len)
		return false;
	sh = skb_shinfo_addr(skb);
	if (cast) {
		shinfo = bpf_rdonly_cast(sh, bpf_core_type_id_kernel(struct skb_shared_info));
		flags = shinfo->flags;
	} else {
		if (bpf_core_field_exists(struct skb_shared_info, flags)) {
			off = bpf_core_field_offset(struct skb_shared_info, flags);
		} else {
			off = bpf_core_field_offset(struct skb_shared_info___pre512, tx_flags);
			bit = NETIO_SKBTX_DEV_ZEROCOPY;
		}
		bpf_probe_read_kernel(&flags, 1, sh + off);
	}
	return flags & bit;
}

/* The ubuf_info of zerocopy skb skb (its shared info's destructor_arg): which socket sent it
 * (maps.bpf.h, sock_zc_seen). Only for zerocopy skbs: a few loads more. */
static __always_inline void *zc_skb_uarg(struct sk_buff *skb, const bool cast)
{
	unsigned char *sh = skb_shinfo_addr(skb);
	struct skb_shared_info *shinfo;
	void *uarg = NULL;

	if (cast) {
		shinfo = bpf_rdonly_cast(sh, bpf_core_type_id_kernel(struct skb_shared_info));
		uarg = shinfo->destructor_arg;
	} else {
		bpf_probe_read_kernel(&uarg, sizeof(uarg), sh + bpf_core_field_offset(
					      struct skb_shared_info, destructor_arg));
	}
	return uarg;
}

/* The sequence number in the TCP header of an skb on its way out; -1 if it cannot be read. */
static __always_inline int tcp_seq(struct sk_buff *skb, const bool cast, u32 *seq)
{
	unsigned char *p = skb->head + skb->transport_header;
	struct tcphdr *th;
	__be32 be = 0;

	if (cast) {
		th = bpf_rdonly_cast(p, bpf_core_type_id_kernel(struct tcphdr));
		be = th->seq;
	} else if (bpf_probe_read_kernel(&be, sizeof(be),
					 p + bpf_core_field_offset(struct tcphdr, seq))) {
		return -1;
	}
	*seq = bpf_ntohl(be);
	return 0;
}

/* The number of the syscall the followed thread st (task, current) is in, with one load: the
 * address of its saved user registers is fixed for its life (the top of its kernel stack) and
 * kept in its storage, where current_syscall_nr() makes two helper calls per event (what a
 * helper call costs here: bench/NOTES.md). The socket tracepoints are 6.3+, where
 * bpf_rdonly_cast exists (the rows of these programs require it: user/attach.c), and so does
 * everything else the storage build needs: the compat build has these programs only so that
 * both builds have the same, and the tracer never loads them from it. */
static __always_inline struct pt_regs *regs_at(u64 addr)
{
	return bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct pt_regs));
}

/* A task's saved user registers: a helper that only computes their address. */
static __always_inline struct pt_regs *task_regs(struct task_struct *task)
{
	return regs_at((u64)bpf_task_pt_regs(task));
}

static __always_inline struct pt_regs *thread_regs(struct task_state *st, struct task_struct *task)
{
	if (!st->regs)
		st->regs = (u64)bpf_task_pt_regs(task);
	return regs_at(st->regs);
}

static __always_inline long thread_syscall_nr(struct task_state *st, struct task_struct *task)
{
	return SYSCALL_NR(thread_regs(st, task));
}

#define NETIO_MAX_IOV 8

/* The buffer the thread's receive syscall offered, from its saved user registers: read's and
 * recvfrom's length, recvmsg's iovec summed (NETIO_MAX_IOV entries at most); -1 where it is
 * another call (io_uring, recvmmsg) or a longer iovec. */
static __always_inline long recv_buffer_len(struct task_state *st, struct task_struct *task)
{
	struct pt_regs *regs = thread_regs(st, task);
	long nr = SYSCALL_NR(regs), sum = 0;
	struct user_msghdr m;
	struct iovec iov;

	if (nr == NR_READ || nr == NR_RECVFROM)
		return PT_REGS_PARM3(regs);
	if (nr != NR_RECVMSG ||
	    bpf_probe_read_user(&m, sizeof(m), (void *)PT_REGS_PARM2(regs)) ||
	    m.msg_iovlen > NETIO_MAX_IOV)
		return -1;
	for (int i = 0; i < NETIO_MAX_IOV && i < m.msg_iovlen; i++) {
		if (bpf_probe_read_user(&iov, sizeof(iov), &m.msg_iov[i]))
			return -1;
		sum += iov.iov_len;
	}
	return sum;
}

/* What a receive that returned ret > 0 copied to the user: ret, but with MSG_TRUNC a stream
 * discards (nothing) and a datagram returns its whole length, of which the buffer's worth
 * was copied; -1 where that buffer is unknown. */
static __always_inline long recv_copied(struct sock *sk, int ret, int flags,
					struct task_state *st, struct task_struct *task)
{
	long buf;

	if (!(flags & NETIO_MSG_TRUNC))
		return ret;
	if (sk->sk_protocol != NETIO_IPPROTO_UDP)
		return 0;
	buf = recv_buffer_len(st, task);
	return buf < 0 ? -1 : buf < ret ? buf : ret;
}

/* Whether a socket event of direction `send` ends the thread's traced call: one is open, of
 * that direction, and the syscall the thread is really in (not a stale call). */
static __always_inline bool socket_call_ending(struct task_state *st, struct task_struct *task,
					       bool send)
{
	if (!st->ts || !(send ? sc_is_send(st->cls) : sc_is_recv(st->cls)))
		return false;
	return thread_syscall_nr(st, task) == st->nr;
}

/* The record of socket sk for the followed thread st (sockets.bpf.h), or NULL: the one it counted
 * on last, if that is still sk's (the same socket, ports and peer), else found or made. The
 * socket's identity words are two loads (sk is a trusted pointer here). */
static __always_inline struct sock_stats *sock_of_thread(struct task_state *st, struct sock *sk)
{
	u32 ports = sk->__sk_common.skc_portpair, daddr = sk->__sk_common.skc_daddr;
	struct sock_stats *r;
	s32 slot;

	if (socks_off())
		return NULL;
	if (st->sock_slot1) {
		r = sock_rec(st->sock_slot1 - 1);
		if (r && r->sk == (u64)sk && r->ports == ports && r->daddr == daddr &&
		    r->tgid == st->tgid)
			return r;
	}
	slot = sock_slot_of(sk, st->tgid, ports, daddr);
	if (slot < 0)
		return NULL;
	st->sock_slot1 = slot + 1;
	return sock_rec(slot);
}

/* A followed thread's bytes of kind k on socket sk. */
static __always_inline void thread_rx_kind(struct task_state *st, struct thread_counts *c,
					   struct sock *sk, enum rx_kind k, long len)
{
	proc_count_rx_kind(&c->p, k, len);
	sock_count_rx_kind(sock_of_thread(st, sk), k, len);
}

/* An io_uring zero-copy send leaves SOCK_ZEROCOPY unset: the bytes xmit kept pending on a
 * socket it saw zerocopy skbs of go to the process whose io_uring sends on it. */
static __always_inline void claim_io_uring_zc(struct sock *sk, struct task_state *st,
					      struct thread_counts *c)
{
	u64 key = (u64)sk;

	if (bpf_map_lookup_elem(&sk_owner, &key))
		note_zc_owner(key, st->tgid, c, st->sock_slot1);
}

/* A zerocopy send of the thread: its process is named the socket's owner at the thread's
 * first send on it, and again only after an owner of any socket changed (zc_owner_gen in
 * bpf/maps.bpf.h); what xmit keeps pending in between is claimed at the close or the snapshot. */
static __always_inline void note_zc_send(struct sock *sk, struct task_state *st,
					 struct thread_counts *c)
{
	u32 *gen = zc_owner_gen_slot(), now = gen ? *gen : 0;

	if (gen && st->zc_sk == (u64)sk && st->zc_gen == now)
		return;
	note_zc_owner((u64)sk, st->tgid, c, st->sock_slot1);
	st->zc_sk = (u64)sk;
	st->zc_gen = now;
}

/* A send that is not the thread's own send, sendmsg or write: inside sendfile or splice
 * (spliced pages), or made by io_uring (inside io_uring_enter, or on one of its workers).
 * Costs a load from the thread's saved registers (thread_syscall_nr). Returns what it was
 * (enum netio_send_kind). */
static __always_inline u32 other_send(struct sock *sk, int ret, struct task_state *st,
				      struct thread_counts *c, struct task_struct *task)
{
	long nr;

	if (TASK_READ(task, flags) & NETIO_PF_IO_WORKER) {
		claim_io_uring_zc(sk, st, c);
		return SEND_IO_URING;
	}
	nr = thread_syscall_nr(st, task);
	if (nr == NR_SENDFILE || nr == NR_SPLICE) {
		COUNT_ADD(c->p.tx_spliced_bytes, ret);
		return SEND_SPLICED;
	}
	if (nr == NR_IO_URING_ENTER) {
		claim_io_uring_zc(sk, st, c);
		return SEND_IO_URING;
	}
	return SEND_PLAIN;
}

/* 1 (set by the tracer where sock_send_length ends the sends, storage build) where a TCP
 * socket's MSG_ZEROCOPY bytes count when its send returns (zc_pinned_by_send), as the exact
 * rungs count them at skb_zerocopy_iter_stream, not as they leave a device: a skb can reach
 * its receiver with no program of ours run for it, at its xmit or at its receive
 * (bench/NOTES.md, the end of "Drops"). xmit then counts only the other zerocopy skbs
 * (io_uring's, UDP's). */
u32 zc_at_send = 0;

/* The flags of the thread's own send call (sendto, sendmsg, sendmmsg) from regs, its saved
 * user registers (sock_send_length's are 0); 0 in any other call. */
static __always_inline long send_call_flags(struct pt_regs *regs)
{
	long nr = SYSCALL_NR(regs);

	if (nr == NR_SENDTO || nr == NR_SENDMMSG)
		return PT_REGS_PARM4_SYSCALL(regs);
	if (nr == NR_SENDMSG)
		return PT_REGS_PARM3_SYSCALL(regs);
	return 0;
}

/* Whether a send of kind `kind` that returned on TCP socket sk (SOCK_ZEROCOPY set) attached
 * all it sent as user pages, on a route whose device takes pages (NETIF_F_SG: else
 * tcp_sendmsg copies, and its skbs carry no user page): the thread's own send call with
 * MSG_ZEROCOPY in its flags; an io_uring send, whose flags are out of reach, when the socket
 * numbered a MSG_ZEROCOPY send since the last send seen on it (sk_zckey, one per send:
 * msg_zerocopy_realloc; from 0 on a socket not seen before). Its skbs are the ones whose
 * ubuf_info is the socket's own (zc_counted_at_send); io_uring's SEND_ZC numbers none. */
static __always_inline bool zc_pinned_by_send(struct sock *sk, struct pt_regs *regs, u32 kind)
{
	u64 key = (u64)sk;
	struct sk_info *si;
	u32 now, last = 0;

	if (!zc_at_send || sk->sk_protocol != NETIO_IPPROTO_TCP ||
	    !(sk->sk_route_caps & NETIO_NETIF_F_SG))
		return false;
	si = bpf_map_lookup_elem(&sk_owner, &key);
	now = sk->sk_zckey.counter;
	if (si) {
		if (si->zckey_known)
			last = si->zckey;
		si->zckey = now;
		si->zckey_known = 1;
	}
	if (kind == SEND_PLAIN)
		return send_call_flags(regs) & NETIO_MSG_ZEROCOPY;
	return kind == SEND_IO_URING && si && now != last;
}

/* ret bytes sent zero-copy on socket sk: for the thread (c, NULL: not followed), the
 * socket's record and the socket's netns, whose device its skbs leave by first. */
static __always_inline void count_zc_send(struct sock *sk, struct thread_counts *c,
					  struct sock_stats *r, int ret)
{
	struct netns_stats *ns = netns_stats_of(sk->__sk_common.skc_net.net);

	if (c)
		COUNT_ADD(c->p.zc_tx_bytes, ret);
	if (r)
		__sync_fetch_and_add(&r->zc_tx_bytes, ret);
	if (ns)
		ns->zc_tx_bytes += ret;
}

/* A send of a thread not followed: xmit does not count its MSG_ZEROCOPY skbs either, so its
 * zero-copy bytes count here for a followed netns. Every other send leaves at the first test.
 * Its socket gets an entry for zc_pinned_by_send, as a followed thread's gets at its send. */
static __always_inline void unfollowed_send(struct sock *sk, int ret, struct task_struct *task)
{
	struct sk_info n = {};
	struct pt_regs *regs;
	u32 kind = SEND_PLAIN;
	u64 key = (u64)sk;
	long nr;

	if (!((sk->__sk_common.skc_flags >> SOCK_ZEROCOPY_BIT) & 1) || ret <= 0 || !zc_at_send)
		return;
	regs = task_regs(task);
	nr = SYSCALL_NR(regs);
	if ((TASK_READ(task, flags) & NETIO_PF_IO_WORKER) || nr == NR_IO_URING_ENTER)
		kind = SEND_IO_URING;
	if (bpf_map_update_elem(&sk_owner, &key, &n, BPF_NOEXIST) == 0)
		zc_owners_changed();
	if (zc_pinned_by_send(sk, regs, kind))
		count_zc_send(sk, NULL, NULL, ret);
}

/* A send returns at the socket layer: bytes and calls of the followed thread, counted in its
 * own storage, and the end of its traced send call. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(tp_send_length, struct sock *sk, int ret, int flags)
{
	struct task_struct *task = current_task();
	struct task_state *st = followed_thread(task);
	struct thread_counts *c;
	struct sock_stats *r;
	u32 kind = SEND_PLAIN;
	bool ends;

	if (!st) {
		unfollowed_send(sk, ret, task);
		return 0;
	}
	ends = socket_call_ending(st, task, true);
	c = thread_counts_of(st);
	if (c && ret > 0 && counted_proto(sk->sk_protocol)) {
		COUNT_ADD(c->p.tx_bytes, ret);
		COUNT_ADD(c->p.tx_calls, 1);
		r = sock_of_thread(st, sk);	/* first: the owner's record for a claim below */
		if (!ends)
			kind = other_send(sk, ret, st, c, task);
		if ((sk->__sk_common.skc_flags >> SOCK_ZEROCOPY_BIT) & 1) {
			note_zc_send(sk, st, c);
			if (zc_pinned_by_send(sk, thread_regs(st, task), kind))
				count_zc_send(sk, c, r, ret);
		}
		if (r)
			sock_count_send(r, ret, kind);
	}
	if (ends)
		sc_finish(st, ret);
	thread_counted(st, task);
	return 0;
}


/* A receive returns at the socket layer: what it copied to the user (recv_copied), and the
 * end of the followed thread's traced receive call. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(tp_recv_length, struct sock *sk, int ret, int flags)
{
	struct task_struct *task = current_task();
	struct task_state *st = followed_thread(task);
	struct thread_counts *c;
	struct sock_stats *r;
	long copied;

	if (!st)
		return 0;
	c = thread_counts_of(st);
	copied = c && ret > 0 ? recv_copied(sk, ret, flags, st, task) : 0;
	if (copied > 0) {
		COUNT_ADD(c->p.rx_copy_bytes, copied);
		COUNT_ADD(c->p.rx_calls, 1);
		r = sock_of_thread(st, sk);
		if (r)
			sock_count_recv(r, copied);
	} else if (copied < 0) {
		COUNT_ADD(c->p.rx_unsized_calls, 1);
	}
	/* rx_discarded: a stream's MSG_TRUNC drops ret bytes */
	if (c && ret > 0 && (flags & NETIO_MSG_TRUNC) && sk->sk_protocol == NETIO_IPPROTO_TCP)
		thread_rx_kind(st, c, sk, RX_DISCARDED, ret);
	if (socket_call_ending(st, task, false))
		sc_finish(st, ret);
	thread_counted(st, task);
	return 0;
}

/* The receive kinds beside rx_copy (receive.bpf.h) ---------------------------------------- */

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

/* What socket sk's reader has consumed since it connected (bytes_received less what is
 * queued) less what st's process counted on it of every kind: the bytes the splice in
 * progress just took. Nothing without the socket's record. */
static __always_inline void count_splice(struct task_state *st, struct thread_counts *c,
					 struct sock *sk)
{
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	struct sock_stats *r = sock_of_thread(st, sk);
	u64 consumed, counted;

	if (!r) {
		COUNT_ADD(c->p.rx_unsized_splices, 1);
		return;
	}
	consumed = tp->bytes_received - (u32)(tp->rcv_nxt - tp->copied_seq);
	/* a FIN counts one in bytes_received (tcp_rcv_nxt_update): once read, take it off */
	if (((sk->__sk_common.skc_flags >> SOCK_DONE) & 1) && tp->copied_seq == tp->rcv_nxt && consumed)
		consumed--;
	counted = r->rx_copy_bytes + r->rx_mapped_bytes + r->rx_discarded_bytes +
		  r->rx_spliced_bytes;
	if (consumed > counted) {
		COUNT_ADD(c->p.rx_spliced_bytes, consumed - counted);
		__sync_fetch_and_add(&r->rx_spliced_bytes, consumed - counted);
	}
}

/* rx_spliced: tcp_read_sock (under tcp_splice_read) moved copied_seq, then calls
 * tcp_rcv_space_adjust; only a followed thread inside splice(2) counts. Every TCP receive of
 * the machine passes here: until some followed thread spliced, one array load and out. */
SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(tp_rcv_space_adjust, struct sock *sk)
{
	u32 key = EXIT_SPLICE, *spliced = bpf_map_lookup_elem(&exit_wanted, &key);
	struct task_struct *task;
	struct task_state *st;
	struct thread_counts *c;

	if (!spliced || !*spliced)
		return 0;
	task = current_task();
	/* a receive outside splice(2), most of them: out before the thread's storage is looked
	 * up */
	if (SYSCALL_NR(task_regs(task)) != NR_SPLICE)
		return 0;
	st = followed_thread(task);
	if (!st)
		return 0;
	c = thread_counts_of(st);
	if (c)
		count_splice(st, c, sk);
	thread_counted(st, task);
	return 0;
}

/* syscalls:sys_exit_splice's record (its format file) */
struct splice_exit {
	u64 common;
	s32 nr;
	s64 ret;
};

/* rx_spliced where the kernel has the syscalls' own tracepoints: splice(2) returns, and what
 * the socket it read from (its first descriptor) consumed that no other kind counted is
 * spliced (count_splice). Only splice calls run it; no other receive of the machine does. */
SEC("tracepoint/syscalls/sys_exit_splice")
int tp_splice_exit(struct splice_exit *ctx)
{
	struct task_struct *task;
	struct task_state *st;
	struct thread_counts *c;
	struct sock *sk;

	if (ctx->ret <= 0)
		return 0;
	task = current_task();
	st = followed_thread(task);
	if (!st)
		return 0;
	sk = fd_sock(task, PT_REGS_PARM1(task_regs(task)));
	if (sk && BPF_CORE_READ(sk, sk_protocol) == NETIO_IPPROTO_TCP) {
		sk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock));
		c = thread_counts_of(st);
		if (c)
			count_splice(st, c, sk);
	}
	thread_counted(st, task);
	return 0;
}

/* Kernels before sock_recv_length: every skb -> user copy. */
SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(tp_rx_copy, const struct sk_buff *skb, int len)
{
	struct sock *sk = skb->sk;	/* read once: the verifier knows only this copy not NULL */
	struct task_struct *task;
	struct thread_counts *c;
	struct task_state *st;
	struct sock_stats *r;

	if (len <= 0)
		return 0;
	task = current_task();
	st = followed_thread(task);
	if (!st)
		return 0;
	c = thread_counts_of(st);
	if (c) {
		COUNT_ADD(c->p.rx_copy_bytes, len);
		COUNT_ADD(c->p.rx_calls, 1);
		r = sk ? sock_of_thread(st, sk) : NULL;
		if (r)
			sock_count_recv(r, len);
	}
	thread_counted(st, task);
	return 0;
}

/* The bytes of a zerocopy TCP skb not counted before (zc_seq.h): a retransmit is not new
 * zerocopy data. */
static __always_inline u32 tcp_fresh_bytes(struct sk_info *si, struct sk_buff *skb, u32 data_len,
					   const bool cast)
{
	u32 seq;

	if (tcp_seq(skb, cast, &seq))
		return data_len;
	return zc_seq_fresh(&si->seq, seq, data_len);
}

/* A UDP socket's entry outlives it (inet_sock_set_state, which forgets a closed socket's, is
 * TCP's): a new socket at the same address is told by its inode number, and its entry starts
 * over, what was pending going to the old socket's owner. 0 where the socket is gone already
 * (a datagram a neighbour held, leaving after the close): then nothing is decided. */
static __always_inline void udp_socket_renewed(struct sk_info *si, struct sock *sk)
{
	u64 ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);

	if (!ino || ino == si->ino)
		return;
	if (si->ino) {
		claim_zc_bytes(si);
		si->tgid = 0;
		si->slot1 = 0;	/* the old socket's record */
		zc_owners_changed();
	}
	si->ino = ino;
}

/* Tests (NETIO_TEST_XMIT_MISS=N, filter_gen[2]): about one zerocopy TCP skb in N leaves
 * unseen, as the shortfall's skbs did (bench/NOTES.md, the end of "Drops"), for their
 * receive to count (tcp_zc_unseen); with NETIO_TEST_RX_MISS=1 (filter_gen[3]) their receive
 * passes over them too, as in the shortfall's second kind. */
static __always_inline bool test_xmit_miss(void)
{
	u32 key = 2, *n = bpf_map_lookup_elem(&filter_gen, &key);

	return n && *n && bpf_get_prandom_u32() % *n == 0;
}

static __always_inline bool test_rx_miss(void)
{
	u32 key = 3, *on = bpf_map_lookup_elem(&filter_gen, &key);

	return on && *on;
}

/* Whether a TCP zerocopy skb's bytes counted when its send returned (zc_pinned_by_send): a
 * MSG_ZEROCOPY skb, whose ubuf_info is its socket's own (io_uring's is not). */
static __always_inline bool zc_counted_at_send(struct sk_buff *skb, struct sock *sk,
					       const bool cast)
{
	void *uarg;
	struct sk_buff *nskb;

	if (!zc_at_send)
		return false;
	uarg = zc_skb_uarg(skb, cast);
	if (!cast || !uarg)
		return zc_uarg_sock(uarg) == (u64)sk;
	/* zc_uarg_sock with a load for its probe read */
	nskb = bpf_rdonly_cast((char *)uarg - bpf_core_field_offset(struct sk_buff, cb),
			       bpf_core_type_id_kernel(struct sk_buff));
	return nskb->sk == sk;
}

/* A zerocopy skb leaves a device: count its user pages, for the device's netns and, for a TCP
 * or UDP socket (the sockets tx_bytes counts), for the socket's owner; before the owner is
 * known (the first send of a socket has not returned yet), as pending on the socket. TCP's
 * once per sequence range; a UDP datagram is never sent twice. */
static __always_inline int on_xmit(struct sk_buff *skb, struct net_device *dev, const bool cast)
{
	struct netns_stats *ns;
	struct sk_info *si = NULL;
	struct sock *sk;
	u32 data_len, fresh;
	bool at_send = false;
	u16 proto = 0;
	u64 key;

	if (!skb_zc(skb, cast))
		return 0;
	data_len = skb->data_len;
	fresh = data_len;
	ns = netns_stats_of(dev->nd_net.net);
	sk = skb->sk;
	if (sk)
		proto = sk->sk_protocol;
	if (counted_proto(proto)) {
		key = (u64)sk;
		si = bpf_map_lookup_elem(&sk_owner, &key);
		/* A socket's first skbs leave inside its first send, before that send's end
		 * names its owner and makes its entry: made here, to keep them pending, where
		 * the device's netns is followed, and for every UDP socket, whose datagrams are
		 * counted for their process only here, whichever netns they leave (a followed
		 * process in a netns not followed: trace -- CMD) and whichever task sends them
		 * (a qdisc run by another CPU). A TCP MSG_ZEROCOPY send counts at its end. */
		if (!si && (ns || proto == NETIO_IPPROTO_UDP)) {
			struct sk_info n = {};

			count_update_error(bpf_map_update_elem(&sk_owner, &key, &n, BPF_NOEXIST));
			zc_owners_changed();
			si = bpf_map_lookup_elem(&sk_owner, &key);
		}
	}
	if (si) {
		if (proto == NETIO_IPPROTO_TCP) {
			if (si->seq.valid && test_xmit_miss())
				return 0;
			fresh = tcp_fresh_bytes(si, skb, data_len, cast);
			at_send = fresh && zc_counted_at_send(skb, sk, cast);
		} else
			udp_socket_renewed(si, sk);
		if (fresh < data_len && ns)
			ns->zc_skbs_again++;
#ifndef NETIO_COMPAT	/* nothing is kept pending there: maps.bpf.h, claim_zc_bytes */
		if (fresh && !at_send)
			__sync_fetch_and_add(&si->pending, fresh);
#endif
	}
	if (fresh && ns) {
		if (!at_send)
			ns->zc_tx_bytes += fresh;
		ns->zc_tx_skbs++;
		ns->zc_bytes_seen_at_xmit += fresh;
	}
	return 0;
}

/* A received zerocopy skb of the socket whose entry is si, with bytes xmit never counted
 * (zc_seq_unseen; a UDP socket's entry has no sequence numbers): they count now, as on_xmit
 * would have, for the socket and its namespace; where zc_at_send they counted at their send,
 * and are only told (zc_skbs_unseen_at_xmit). Its TCP header is where xmit put it (loopback
 * and veth hand the same skb over). */
static __always_inline void tcp_zc_unseen(struct sk_buff *skb, struct sk_info *si,
					  const bool cast)
{
	struct netns_stats *ns;
	u32 seq, unseen;
	u64 sk;

	if (!si || !si->seq.valid || skb->transport_header == (u16)~0U ||
	    tcp_seq(skb, cast, &seq) || test_rx_miss())
		return;
	unseen = zc_seq_unseen(&si->seq, seq, skb->data_len);
	if (!unseen)
		return;
	sk = zc_uarg_sock(zc_skb_uarg(skb, cast));
#ifndef NETIO_COMPAT	/* nothing is kept pending there: maps.bpf.h, claim_zc_bytes */
	if (!zc_at_send)	/* else counted at their send: here only told */
		__sync_fetch_and_add(&si->pending, unseen);
#endif
	ns = netns_stats_of(BPF_CORE_READ((struct sock *)sk, __sk_common.skc_net.net));
	if (ns) {
		if (!zc_at_send)
			ns->zc_tx_bytes += unseen;
		ns->zc_tx_skbs++;
		ns->zc_bytes_unseen_at_xmit += unseen;
		ns->zc_skbs_unseen_at_xmit++;
	}
}

/* A zerocopy skb's bytes seen received, for the record of the socket that sent it (its
 * MSG_ZEROCOPY notification holds uarg), whatever namespace received it; returns that socket's
 * entry (sk_owner), or NULL. */
static __always_inline struct sk_info *sock_zc_rx(struct sk_buff *skb, void *uarg)
{
	u64 sk;

	if (!socks_off())
		return sock_zc_seen(uarg, skb->data_len, false);
	sk = zc_uarg_sock(uarg);
	return sk ? bpf_map_lookup_elem(&sk_owner, &sk) : NULL;
}

/* A received zerocopy skb of the socket whose entry is si: if that is a TCP socket, the
 * bytes it had been received with before are copied again (zc_rx_again), for ns. Its TCP
 * header is where xmit put it (tcp_zc_unseen). */
static __always_inline void tcp_zc_again(struct sk_buff *skb, void *uarg, struct sk_info *si,
					 struct netns_stats *ns, const bool cast)
{
	u32 seq;

	if (si && skb->transport_header != (u16)~0U && sock_is_tcp(zc_uarg_sock(uarg)) &&
	    !tcp_seq(skb, cast, &seq))
		zc_rx_again(si, ns, seq, skb->data_len);
}

static __always_inline int on_netif_receive(struct sk_buff *skb, const bool cast)
{
	struct netns_stats *ns;
	struct sk_info *si;
	u32 zero = 0, *seen;
	void *uarg;

	if (!skb_zc(skb, cast))
		return 0;
	uarg = zc_skb_uarg(skb, cast);
	si = sock_zc_rx(skb, uarg);
	tcp_zc_unseen(skb, si, cast);
	ns = netns_stats_of(skb->dev->nd_net.net);
	tcp_zc_again(skb, uarg, si, ns, cast);
	if (!ns)
		return 0;
	seen = bpf_map_lookup_elem(&zc_state, &zero);
	if (seen && !*seen)
		*seen = 1;
	ns->fallback_copy_bytes += skb->data_len;
	ns->fallback_copy_skbs++;
	return 0;
}

/* A zerocopy skb freed with its user pages after it was received in a followed netns (its
 * skb_iif set): forwarded to a blackhole, or dropped before local delivery. It was never
 * copied, so netif_receive_skb counted it as a fallback copy for nothing. */
static __always_inline int on_kfree_skb(struct sk_buff *skb, const bool cast)
{
	struct net_device *dev;
	struct netns_stats *ns;

	if (!skb->skb_iif || !skb_zc(skb, cast))
		return 0;
	if (!socks_off())
		sock_zc_seen(zc_skb_uarg(skb, cast), skb->data_len, true);
	dev = skb->dev;
	if (!dev)
		return 0;
	ns = netns_stats_of(dev->nd_net.net);
	if (ns) {
		ns->zc_rx_kept_bytes += skb->data_len;
		ns->zc_rx_kept_skbs++;
	}
	return 0;
}

static __always_inline int on_tcp_probe(struct sock *sk, struct sk_buff *skb, const bool cast)
{
	struct netns_stats *ns;

	if (!skb_zc(skb, cast))
		return 0;
	ns = netns_stats_of(sk->__sk_common.skc_net.net);
	if (ns)
		ns->zc_skbs_at_tcp++;
	return 0;
}

/* The per-skb programs, each in its two builds (bpf_rdonly_cast above). */
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(tp_xmit, struct sk_buff *skb, struct net_device *dev)
{
	return on_xmit(skb, dev, true);
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(tp_xmit_pre62, struct sk_buff *skb, struct net_device *dev)
{
	return on_xmit(skb, dev, false);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(tp_netif_receive, struct sk_buff *skb)
{
	return on_netif_receive(skb, true);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(tp_netif_receive_pre62, struct sk_buff *skb)
{
	return on_netif_receive(skb, false);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(tp_kfree_skb, struct sk_buff *skb)
{
	return on_kfree_skb(skb, true);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(tp_kfree_skb_pre62, struct sk_buff *skb)
{
	return on_kfree_skb(skb, false);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tp_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	return on_tcp_probe(sk, skb, true);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tp_tcp_probe_pre62, struct sock *sk, struct sk_buff *skb)
{
	return on_tcp_probe(sk, skb, false);
}

/* A closed socket's memory may become another process's socket: its owner gets what is
 * pending, and is forgotten. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tp_sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	u64 key = (u64)sk;
	struct sk_info *si;

	if (newstate == NETIO_TCP_ESTABLISHED && !socks_off())
		tcp_end_seen((struct sock *)sk);
	if (newstate != 7 /* TCP_CLOSE */ || zc_owners_none())
		return 0;
	si = bpf_map_lookup_elem(&sk_owner, &key);
	if (si) {
		claim_zc_bytes(si);
		bpf_map_delete_elem(&sk_owner, &key);
		zc_owners_changed();
	}
	return 0;
}
