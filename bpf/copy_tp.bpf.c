// SPDX-License-Identifier: GPL-2.0
/* The tracepoint rung's send and receive calls (tp_rung.bpf.h): tx_bytes and tx_spliced at
 * sock_send_length, TCP MSG_ZEROCOPY bytes at their send, rx_copy and rx_discarded at
 * sock_recv_length (skb_copy_datagram_iovec before it), rx_spliced where splice(2) returns.
 * Each ends the thread's traced call (syscalls.bpf.c). */
#include "tp_rung.bpf.h"

char LICENSE[] SEC("license") = "GPL";

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

	if (TASK_READ(task, flags) & NETIO_PF_IO_WORKER)
		return SEND_IO_URING;
	nr = thread_syscall_nr(st, task);
	if (nr == NR_SENDFILE || nr == NR_SPLICE) {
		COUNT_ADD(c->p.tx_spliced_bytes, ret);
		return SEND_SPLICED;
	}
	return nr == NR_IO_URING_ENTER ? SEND_IO_URING : SEND_PLAIN;
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

/* Whether a send of kind `kind` on socket sk, not counted as zero-copy at its end, can have
 * made zero-copy skbs that only xmit counts: io_uring's (SEND_ZC needs no SOCK_ZEROCOPY), or a
 * UDP MSG_ZEROCOPY send (any send on a SOCK_ZEROCOPY UDP socket whose flags are out of reach). */
static __always_inline bool zc_uncounted_send(struct sock *sk, struct pt_regs *regs, u32 kind)
{
	if (kind == SEND_IO_URING)
		return true;
	if (sk->sk_protocol != NETIO_IPPROTO_UDP ||
	    !((sk->__sk_common.skc_flags >> SOCK_ZEROCOPY_BIT) & 1))
		return false;
	return kind != SEND_PLAIN || (send_call_flags(regs) & NETIO_MSG_ZEROCOPY);
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

/* A send of kind `kind` on socket sk (SOCK_ZEROCOPY set) returned ret: its zero-copy bytes
 * counted where they count at the send (for c and r, NULL: not followed), and the per-skb
 * programs asked for where it can have made zero-copy skbs. */
static __always_inline void zc_send_end(struct sock *sk, struct pt_regs *regs, u32 kind,
					struct thread_counts *c, struct sock_stats *r, int ret)
{
	if (zc_pinned_by_send(sk, regs, kind)) {
		count_zc_send(sk, c, r, ret);
		zc_skbs_made(true);
	} else if (zc_uncounted_send(sk, regs, kind)) {
		zc_skbs_made(false);
	}
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
	zc_send_end(sk, regs, kind, NULL, NULL, ret);
}

/* A followed thread's send of kind `kind` returned ret on socket sk, which has SOCK_ZEROCOPY:
 * its zero-copy bytes counted where they count at the send, the per-skb programs asked for. */
static __always_inline void zc_send(struct sock *sk, struct pt_regs *regs, u32 kind,
				    struct thread_counts *c, struct sock_stats *r,
				    struct task_state *st, int ret)
{
	note_zc_send(sk, st, c);
	zc_send_end(sk, regs, kind, c, r, ret);
}

/* A followed thread's send of kind `kind` returned ret on socket sk: what its socket's record
 * counts of it, and its zero-copy bytes. A plain copying send continues the thread's run of
 * sends on the socket (send_run.bpf.h) where it can, with no look at the record; else it
 * counts on the record, and begins a run. */
static __always_inline void count_socket_send(struct sock *sk, struct task_state *st,
					      struct thread_counts *c, struct task_struct *task,
					      u32 kind, int ret)
{
	bool zc = (sk->__sk_common.skc_flags >> SOCK_ZEROCOPY_BIT) & 1;
	bool runs = kind == SEND_PLAIN && !zc && !socks_off();
	struct sock_stats *r;

	/* the size slot found twice, not kept: a value live across the rest of the program
	 * multiplied the verifier's states by its ranges */
	if (runs && thread_send_continues(st, sk, sk->__sk_common.skc_portpair,
					  sk->__sk_common.skc_daddr, send_size_slot(ret), ret))
		return;
	r = sock_of_thread(st, sk);	/* first: the owner's record for a claim below */
	if (kind == SEND_IO_URING)
		claim_io_uring_zc(sk, st, c);
	if (zc)
		zc_send(sk, thread_regs(st, task), kind, c, r, st, ret);
	else if (kind == SEND_IO_URING)
		zc_skbs_made(false);
	if (!r)
		return;
	sock_count_send(r, ret, kind);
	if (runs)
		thread_send_begins(st, r, send_size_slot(ret));
}

/* A send returns at the socket layer: bytes and calls of the followed thread, counted in its
 * own storage, and the end of its traced send call. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(tp_send_length, struct sock *sk, int ret, int flags)
{
	struct task_struct *task = current_task();
	struct task_state *st = followed_thread(task);
	struct thread_counts *c;
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
		if (!ends)
			kind = other_send(sk, ret, st, c, task);
		count_socket_send(sk, st, c, task, kind, ret);
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
