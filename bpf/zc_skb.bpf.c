// SPDX-License-Identifier: GPL-2.0
/* The tracepoint rung's zero-copy skbs (tp_rung.bpf.h): pinned user pages where a zerocopy skb
 * leaves a device (net_dev_start_xmit), the fallback copy where one is received in a followed
 * netns (netif_receive_skb), less those freed uncopied after it (kfree_skb, confirmed by
 * tcp_probe), and a closed socket's owner forgotten (inet_sock_set_state). */
#include "tp_rung.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* 1 (set by the tracer after the climb, as copy_tp.bpf.c's) where TCP MSG_ZEROCOPY bytes count
 * at their send: xmit only tells those skbs' ranges then. */
u32 zc_at_send = 0;

/* [0] = 1 once a zerocopy skb was received in a followed netns: the tracer then attaches
 * tp_tcp_probe (until then it would run for every TCP segment with nothing to confirm), and
 * detaches it again at `reset`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} zc_state SEC(".maps");

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

/* The socket whose notification holds uarg (maps.bpf.h, zc_uarg_sock): in the cast build a
 * load, not a probe read. */
static __always_inline u64 zc_sock_of(void *uarg, const bool cast)
{
	struct sk_buff *nskb;

	if (!cast || !uarg)
		return zc_uarg_sock(uarg);
	nskb = bpf_rdonly_cast((char *)uarg - bpf_core_field_offset(struct sk_buff, cb),
			       bpf_core_type_id_kernel(struct sk_buff));
	return (u64)nskb->sk;
}

/* Socket sk (a zc_sock_of, not 0) as a read-only pointer of the cast build. */
static __always_inline struct sock *sock_cast(u64 sk)
{
	return bpf_rdonly_cast((void *)sk, bpf_core_type_id_kernel(struct sock));
}

static __always_inline bool zc_sock_is_tcp(u64 sk, const bool cast)
{
	if (!cast)
		return sock_is_tcp(sk);
	return sk && sock_cast(sk)->sk_protocol == NETIO_IPPROTO_TCP;
}

static __always_inline void *zc_sock_net(u64 sk, const bool cast)
{
	if (!cast)
		return BPF_CORE_READ((struct sock *)sk, __sk_common.skc_net.net);
	return sk ? sock_cast(sk)->__sk_common.skc_net.net : NULL;
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
	return zc_at_send && zc_sock_of(zc_skb_uarg(skb, cast), cast) == (u64)sk;
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
static __always_inline void tcp_zc_unseen(struct sk_buff *skb, u64 sk, struct sk_info *si,
					  const bool cast)
{
	struct netns_stats *ns;
	u32 seq, unseen;

	if (!si || !si->seq.valid || skb->transport_header == (u16)~0U ||
	    tcp_seq(skb, cast, &seq) || test_rx_miss())
		return;
	unseen = zc_seq_unseen(&si->seq, seq, skb->data_len);
	if (!unseen)
		return;
#ifndef NETIO_COMPAT	/* nothing is kept pending there: maps.bpf.h, claim_zc_bytes */
	if (!zc_at_send)	/* else counted at their send: here only told */
		__sync_fetch_and_add(&si->pending, unseen);
#endif
	ns = netns_stats_of(zc_sock_net(sk, cast));
	if (ns) {
		if (!zc_at_send)
			ns->zc_tx_bytes += unseen;
		ns->zc_tx_skbs++;
		ns->zc_bytes_unseen_at_xmit += unseen;
		ns->zc_skbs_unseen_at_xmit++;
	}
}

/* A zerocopy skb's bytes seen received, for the record of socket sk, which sent it (its
 * MSG_ZEROCOPY notification holds the skb's ubuf_info), whatever namespace received it;
 * returns that socket's entry (sk_owner), or NULL. */
static __always_inline struct sk_info *sock_zc_rx(struct sk_buff *skb, u64 sk)
{
	if (!socks_off())
		return sock_zc_seen(sk, skb->data_len, false);
	return sk ? bpf_map_lookup_elem(&sk_owner, &sk) : NULL;
}

/* A received zerocopy skb of socket sk, whose entry is si: if that is a TCP socket, the
 * bytes it had been received with before are copied again (zc_rx_again), for ns. Its TCP
 * header is where xmit put it (tcp_zc_unseen). */
static __always_inline void tcp_zc_again(struct sk_buff *skb, u64 sk, struct sk_info *si,
					 struct netns_stats *ns, const bool cast)
{
	u32 seq;

	if (si && skb->transport_header != (u16)~0U && zc_sock_is_tcp(sk, cast) &&
	    !tcp_seq(skb, cast, &seq))
		zc_rx_again(si, ns, seq, skb->data_len);
}

static __always_inline int on_netif_receive(struct sk_buff *skb, const bool cast)
{
	struct netns_stats *ns;
	struct sk_info *si;
	u32 zero = 0, *seen;
	u64 sk;

	if (!skb_zc(skb, cast))
		return 0;
	sk = zc_sock_of(zc_skb_uarg(skb, cast), cast);	/* read once, for the three below */
	si = sock_zc_rx(skb, sk);
	tcp_zc_unseen(skb, sk, si, cast);
	ns = netns_stats_of(skb->dev->nd_net.net);
	tcp_zc_again(skb, sk, si, ns, cast);
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
		sock_zc_seen(zc_sock_of(zc_skb_uarg(skb, cast), cast), skb->data_len, true);
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
