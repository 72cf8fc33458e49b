/* Handlers of the exact copy probes, shared by the fentry/fexit (copy_fentry.bpf.c) and the
 * kprobe/kretprobe (copy_kprobe.bpf.c) rungs: the programs there only fetch arguments and
 * return values and call these. All counts come from return values, never from a size
 * argument (partial sends and EAGAIN make arguments lie). */
#ifndef NETIO_COPY_COMMON_H
#define NETIO_COPY_COMMON_H

#include "maps.bpf.h"
#include "receive.bpf.h"

#ifndef PAGE_SIZE
#define PAGE_SIZE 4096
#endif

#define NETIO_MSG_SPLICE_PAGES 0x8000000	/* 6.5+: sendfile/splice hand pages, not an iov */

/* tcp_sendmsg() / udp_sendmsg() entry: open the send scope of this thread if its process is
 * followed, noting whether the send splices pages (sendfile, splice on 6.5+). */
static __always_inline void on_sendmsg_enter(struct sock *sk, struct msghdr *msg)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct send_scope sc = { .tgid = tgid, .sk = (u64)sk };

	if (!tgid_followed(tgid))
		return;
	sc.spliced = !!(BPF_CORE_READ(msg, msg_flags) & NETIO_MSG_SPLICE_PAGES);
	sc.slot1 = sock_slot_read(sk, tgid) + 1;	/* -1: none */
	count_update_error(bpf_map_update_elem(&in_send, &tid, &sc, BPF_ANY));
}

/* The record of the socket the current send scope sends on (sockets.bpf.h), or NULL. */
static __always_inline struct sock_stats *scope_sock(struct send_scope *sc)
{
	return sc && sc->slot1 ? sock_rec(sc->slot1 - 1) : NULL;
}

/* tcp_sendmsg() return: count the bytes it reports sent, close the scope. */
static __always_inline void on_sendmsg_exit(long ret)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct send_scope *sc = bpf_map_lookup_elem(&in_send, &tid);
	struct sock_stats *r;
	struct proc_stats *ps;

	if (!sc)
		return;
	if (ret > 0) {
		ps = proc_get(sc->tgid);
		if (ps) {
			COUNT_ADD(ps->tx_bytes, ret);
			COUNT_ADD(ps->tx_calls, 1);
			if (sc->spliced)
				COUNT_ADD(ps->tx_spliced_bytes, ret);
			r = scope_sock(sc);
			if (r)
				sock_count_send(r, ret, sc->spliced ? SEND_SPLICED : SEND_PLAIN);
		}
		struct sock *sk = (struct sock *)sc->sk;
		unsigned long skflags = BPF_CORE_READ(sk, __sk_common.skc_flags);
		if ((skflags >> SOCK_ZEROCOPY_BIT) & 1)
			note_zc_owner(sc->sk, sc->tgid, NULL, sc->slot1);
	}
	bpf_map_delete_elem(&in_send, &tid);
}

static __always_inline struct send_scope *current_send_scope(void)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();

	return bpf_map_lookup_elem(&in_send, &tid);
}

/* The counters of the process whose send the current thread is inside, for a probe whose
 * positive return value is what it adds; NULL outside a followed send or on ret <= 0. *sock:
 * the record of the socket it sends on (NULL: none). */
static __always_inline struct proc_stats *send_scope_stats(long ret, struct sock_stats **sock)
{
	struct send_scope *sc;

	*sock = NULL;
	if (ret <= 0)
		return NULL;
	sc = current_send_scope();
	if (!sc)
		return NULL;
	*sock = scope_sock(sc);
	return proc_get(sc->tgid);
}

/* _copy_from_iter() and friends return the bytes copied from the user's iov. */
static __always_inline void on_copy_from_user(long ret)
{
	struct sock_stats *r;
	struct proc_stats *ps = send_scope_stats(ret, &r);

	if (ps) {
		COUNT_ADD(ps->tx_copy_bytes, ret);
		if (r)
			__sync_fetch_and_add(&r->tx_copy_bytes, ret);
	}
}

/* skb_zerocopy_iter_stream() returns the bytes it attached as user pages. */
static __always_inline void on_zerocopy_stream(long ret)
{
	struct sock_stats *r;
	struct proc_stats *ps = send_scope_stats(ret, &r);

	if (ps) {
		COUNT_ADD(ps->zc_tx_bytes, ret);
		if (r)
			__sync_fetch_and_add(&r->zc_tx_bytes, ret);
	}
}

/* get_user_pages_fast()/pin_user_pages_fast() return the number of user pages they pinned
 * (called by iov_iter_get_pages2()/iov_iter_extract_pages() for MSG_ZEROCOPY). */
static __always_inline void on_pages_pinned(long ret)
{
	struct sock_stats *r;
	struct proc_stats *ps = send_scope_stats(ret, &r);

	if (ps)
		COUNT_ADD(ps->pinned_pages, ret);
}

/* __check_object_size(ptr, n, to_user): the hardened-usercopy check that copy_from_iter()
 * makes right before copying n bytes in. Used where the copy routines themselves cannot be
 * probed (lib/iov_iter.c is notrace on some kernels); a copy that faults after the check is
 * counted too (the send then fails with EFAULT). */
static __always_inline void on_copy_check(unsigned long n, bool to_user)
{
	if (!to_user)
		on_copy_from_user((long)n);
}

/* tcp_sendpage() (sendfile/splice before 6.5): bytes sent from page-cache pages, no copy; sk:
 * its socket where the rung gives its arguments at return (fexit), else NULL (no record). */
static __always_inline void on_sendpage_exit(long ret, struct sock *sk)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sock_stats *r;
	struct proc_stats *ps;
	s32 slot;

	if (ret <= 0 || !tgid_followed(tgid))
		return;
	ps = proc_get(tgid);
	if (ps) {
		COUNT_ADD(ps->tx_bytes, ret);
		COUNT_ADD(ps->tx_calls, 1);
		COUNT_ADD(ps->tx_spliced_bytes, ret);
		slot = sock_slot_read(sk, tgid);
		r = slot >= 0 ? sock_rec(slot) : NULL;
		if (r)
			sock_count_send(r, ret, SEND_SPLICED);
	}
}

/* A zerocopy skb of TCP socket sk copied back, the entry of that socket si: the bytes it had
 * been copied with before are copied again (maps.bpf.h, zc_rx_again). Its TCP header: where xmit
 * put it (loopback and veth hand the same skb over), or where IP's receive set it (6.17+). */
static __always_inline void tcp_copy_again(struct sk_buff *skb, u64 sk, struct sk_info *si,
					   struct netns_stats *ns, u32 len)
{
	u16 th = BPF_CORE_READ(skb, transport_header);
	__be32 seq;

	if (!si || th == (u16)~0U || !sock_is_tcp(sk) ||
	    bpf_probe_read_kernel(&seq, sizeof(seq), BPF_CORE_READ(skb, head) + th +
				  bpf_core_field_offset(struct tcphdr, seq)))
		return;
	zc_rx_again(si, ns, bpf_ntohl(seq), len);
}

/* skb_copy_ubufs(): the user pages of a zerocopy skb are copied into kernel pages (local
 * delivery of a MSG_ZEROCOPY skb). Softirq context: filtered by the device's netns. */
static __always_inline void on_copy_ubufs(struct sk_buff *skb)
{
	struct netns_stats *ns = netns_stats_of(BPF_CORE_READ(skb, dev, nd_net.net));
	unsigned char *sh = BPF_CORE_READ(skb, head);
	u32 len = BPF_CORE_READ(skb, data_len);
	struct skb_shared_info *shinfo;
	struct sk_info *si;
	void *uarg;
	u64 sk;

	/* for the record of the socket that sent it (maps.bpf.h, sock_zc_seen) */
	if (bpf_core_field_size(skb->end) == 4)
		shinfo = (void *)(sh + BPF_CORE_READ(skb, end));
	else
		shinfo = (void *)(unsigned long)BPF_CORE_READ(skb, end);
	uarg = BPF_CORE_READ(shinfo, destructor_arg);
	sk = zc_uarg_sock(uarg);
	if (!socks_off())
		si = sock_zc_seen(sk, len, false);
	else
		si = sk ? bpf_map_lookup_elem(&sk_owner, &sk) : NULL;
	tcp_copy_again(skb, sk, si, ns, len);
	if (ns) {
		ns->fallback_copy_bytes += len;
		ns->fallback_copy_skbs++;
	}
}

/* A UDP receive in progress (udp_recvmsg, udpv6_recvmsg), per thread: the caller's buffer size
 * and flags. udp_recvmsg copies a datagram held in a linear skb with copy_linear_skb(), which
 * nothing can probe, so a UDP receive counts at its return; skb_copy_datagram_iter() within it
 * is not counted again. */
struct udp_recv {
	u64 len;
	u64 flags;
	u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);
	__type(value, struct udp_recv);
} udp_recving SEC(".maps");

/* udp_recvmsg(sk, msg, len, [noblock,] flags, addr_len) entered by a followed thread */
static __always_inline void on_udp_recv_enter(struct sock *sk, u64 len, u64 flags)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct udp_recv r = { .len = len, .flags = flags, .sk = (u64)sk };

	if (tgid_followed(id >> 32))
		count_update_error(bpf_map_update_elem(&udp_recving, &tid, &r, BPF_ANY));
}

/* ... returned ret: what it copied (with MSG_TRUNC ret is the datagram's whole length, of
 * which it copied the caller's buffer's worth at most). */
static __always_inline void on_udp_recv_exit(long ret)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct udp_recv *r = bpf_map_lookup_elem(&udp_recving, &tid);
	struct sock *sk;
	long copied = ret;

	if (!r)
		return;
	if ((r->flags & NETIO_MSG_TRUNC) && (u64)copied > r->len)
		copied = r->len;
	sk = (struct sock *)r->sk;
	bpf_map_delete_elem(&udp_recving, &tid);
	if (copied > 0)
		count_rx(id >> 32, copied, sk);
}

/* skb_copy_datagram_iter() returned 0: len bytes were copied to the user, from a skb of
 * socket sk (NULL: not known: a UDP skb carries none); a UDP receive counts at its return
 * instead. */
static __always_inline void on_rx_copy(long len, struct sock *sk)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;

	if (len <= 0 || !tgid_followed(tgid) || bpf_map_lookup_elem(&udp_recving, &tid))
		return;
	count_rx(tgid, len, sk);
}

/* One completion notification for the sends [id, id + len) of the socket whose notification
 * skb holds uarg in its cb[] (uarg's struct depends on the kernel: below), attributed to the
 * netns of that socket; copied: the pages were copied (SO_EE_CODE_ZEROCOPY_COPIED). */
static __always_inline void count_zc_completion(void *uarg, u32 len, bool copied)
{
	struct sk_buff *skb = (struct sk_buff *)((char *)uarg -
						 bpf_core_field_offset(struct sk_buff, cb));
	struct netns_stats *ns = netns_stats_of(BPF_CORE_READ(skb, sk, __sk_common.skc_net.net));

	if (!ns)
		return;
	ns->zc_completions++;
	ns->zc_completed_sends += len;
	if (copied)
		ns->zc_copied_sends += len;
}

/* __msg_zerocopy_callback(struct ubuf_info_msgzc *uarg) (6.0+: ubuf_info_msgzc): zerocopy == 0
 * means the pages were copied. */
static __always_inline void on_zc_completion(struct ubuf_info_msgzc *uarg)
{
	count_zc_completion(uarg, BPF_CORE_READ(uarg, len),
			    !BPF_CORE_READ_BITFIELD_PROBED(uarg, zerocopy));
}

/* Before 5.12: sock_zerocopy_callback(struct ubuf_info *uarg, bool success), called once the
 * last reference to uarg goes, with the fields in struct ubuf_info itself; !success means
 * copied. */
struct ubuf_info___pre512 {
	u32 id;
	u16 len;
} __attribute__((preserve_access_index));

static __always_inline void on_zc_completion_pre512(struct ubuf_info___pre512 *uarg,
						    bool success)
{
	count_zc_completion(uarg, BPF_CORE_READ(uarg, len), !success);
}

#endif
