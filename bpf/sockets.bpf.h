/* Per-socket accounting: the bytes, calls and copies of each socket of a followed
 * process, in a record of its own, with the socket's protocol, addresses, the device its route
 * leaves by and a log2 histogram of its send sizes.
 *
 * A record is a slot of sock_stats (an array: a record found is one inlined lookup), taken
 * from the sock_free queue (the tracer fills it with every slot) at the first event a followed
 * process counts on the socket, and found again through sock_slot, keyed by the socket's
 * address, its ports and peer address as read then, and the process: a socket whose memory a
 * new socket takes after a close has other ports or another peer, and gets a record of its
 * own. Records outlive their sockets until the next reset, so that what a socket counted is
 * there after it closes. No socket-local storage (BPF_MAP_TYPE_SK_STORAGE): its value goes
 * with the socket at close, and kprobe programs (the exact rungs' second rung) cannot use it.
 * A thread remembers the slot of the socket it last counted on (copy_tp.bpf.c, its record
 * checked against the socket's identity), so that its next send or receive there makes no
 * lookup. Counts are added atomically: threads of a process may share a socket. A thread's
 * runs of plain sends on one socket wait in its storage (send_run.bpf.h) and come to the
 * record together.
 * Included by maps.bpf.h, so every object has these maps (the tracer shares them by name). */
#ifndef NETIO_SOCKETS_H
#define NETIO_SOCKETS_H

#include <bpf/bpf_endian.h>
#include "filter.bpf.h"
#include "log2.bpf.h"

#define NETIO_AF_INET 2
#define NETIO_AF_INET6 10
#define NETIO_IFF_LOOPBACK 0x8
#define NETIO_TCP_ESTABLISHED 1

struct sock_key {
	u64 sk;
	u32 ports;
	u32 daddr;
	u32 tgid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_SOCK_RECORDS);
	__type(key, struct sock_key);
	__type(value, u32);		/* its slot in sock_stats */
} sock_slot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NETIO_MAX_SOCK_RECORDS);
	__type(key, u32);
	__type(value, struct sock_stats);
} sock_stats SEC(".maps");

/* The free slots of sock_stats (the tracer fills it at load and at every reset). */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, NETIO_MAX_SOCK_RECORDS);
	__type(value, u32);
} sock_free SEC(".maps");

/* [0] = 1: no per-socket accounting (netio-tracer --no-sockets: what the rest costs alone). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} sock_off SEC(".maps");

/* TCP connections seen established on this host (struct tcp_end, netio.h): a followed socket
 * whose mirror (the peer's view) is here has its other end on this host. Kept by the tracer
 * (user/sockets.c), which drains them from tcp_ends_ring: a hash update at each connection of
 * the host cost several times the rest of the socket-state program (bench/NOTES.md). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);	/* ~5 000 connections between two drains */
} tcp_ends_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETIO_MAX_TCP_ENDS);
	__type(key, struct tcp_end);
	__type(value, u8);
} tcp_ends SEC(".maps");

static __always_inline bool socks_off(void)
{
	u32 zero = 0, *off = bpf_map_lookup_elem(&sock_off, &zero);

	return off && *off;
}

static __always_inline struct sock_stats *sock_rec(u32 slot)
{
	return bpf_map_lookup_elem(&sock_stats, &slot);
}

/* An IPv6 socket's IPv4-mapped addresses (::ffff:a.b.c.d, a dual-stack listener's IPv4
 * connections) as IPv4, so that its connection matches its IPv4 peer's (tcp_ends). */
static __always_inline void v4_mapped(struct tcp_end *e)
{
	u32 *l = (u32 *)e->laddr, *r = (u32 *)e->raddr;
	u32 prefix = bpf_htonl(0xffff);

	if (l[0] | l[1] | r[0] | r[1] || l[2] != prefix || r[2] != prefix)
		return;
	e->family = NETIO_AF_INET;
	l[0] = l[3];
	r[0] = r[3];
	l[1] = l[2] = l[3] = r[1] = r[2] = r[3] = 0;
}

/* sk's addresses and ports into an end of a connection (trusted: FIELD_READ). */
static __always_inline void sock_end(struct sock *sk, struct tcp_end *e, const bool trusted)
{
	e->family = FIELD_READ(sk, __sk_common.skc_family, trusted);
	e->lport = FIELD_READ(sk, __sk_common.skc_num, trusted);
	e->rport = bpf_ntohs(FIELD_READ(sk, __sk_common.skc_dport, trusted));
	if (e->family == NETIO_AF_INET6) {
		struct in6_addr l = FIELD_READ(sk, __sk_common.skc_v6_rcv_saddr, trusted);
		struct in6_addr r = FIELD_READ(sk, __sk_common.skc_v6_daddr, trusted);

		__builtin_memcpy(e->laddr, &l, sizeof(e->laddr));
		__builtin_memcpy(e->raddr, &r, sizeof(e->raddr));
		v4_mapped(e);
	} else {
		*(u32 *)e->laddr = FIELD_READ(sk, __sk_common.skc_rcv_saddr, trusted);
		*(u32 *)e->raddr = FIELD_READ(sk, __sk_common.skc_daddr, trusted);
	}
}

/* The device sk's cached route leaves by (enum netio_path), and its ifindex. */
static __always_inline u32 sock_path(struct sock *sk, u32 *ifindex)
{
	struct dst_entry *dst = BPF_CORE_READ(sk, sk_dst_cache);
	struct net_device *dev;
	const struct rtnl_link_ops *ops;
	const char *kind;
	char name[5] = {};

	if (!dst)
		return PATH_UNKNOWN;
	dev = BPF_CORE_READ(dst, dev);
	if (!dev)
		return PATH_UNKNOWN;
	*ifindex = BPF_CORE_READ(dev, ifindex);
	if (BPF_CORE_READ(dev, flags) & NETIO_IFF_LOOPBACK)
		return PATH_LOOPBACK;
	ops = BPF_CORE_READ(dev, rtnl_link_ops);
	if (!ops)
		return PATH_DEVICE;
	kind = BPF_CORE_READ(ops, kind);
	if (kind && bpf_probe_read_kernel_str(name, sizeof(name), kind) > 0 &&
	    name[0] == 'v' && name[1] == 'e' && name[2] == 't' && name[3] == 'h' && !name[4])
		return PATH_VETH;
	return PATH_VIRTUAL;
}

/* A new record's identity: what it is and where it goes. Whether its TCP peer is on this host
 * the tracer reads from tcp_ends at the snapshot: the peer's end may reach ESTABLISHED after
 * the socket's first send (its handshake's last ACK still in a backlog). */
static __always_inline void sock_fill(struct sock_stats *r, struct sock *sk, u32 tgid, u32 ports,
				      u32 daddr)
{
	struct tcp_end e = {};

	sock_end(sk, &e, false);	/* sk may come from a probe read (the kprobe rung) */
	r->sk = (u64)sk;
	r->tgid = tgid;
	r->ports = ports;
	r->daddr = daddr;
	r->family = e.family;
	r->proto = BPF_CORE_READ(sk, sk_protocol);
	r->lport = e.lport;
	r->rport = e.rport;
	__builtin_memcpy(r->laddr, e.laddr, sizeof(r->laddr));
	__builtin_memcpy(r->raddr, e.raddr, sizeof(r->raddr));
	r->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	r->ifindex = 0;
	r->path = sock_path(sk, &r->ifindex);
	r->peer_local = 0;
}

/* The slot of (sk, tgid)'s record, made if missing; -1 when none can be had (the table full:
 * the event counts for its process only). ports, daddr: the socket's identity words. */
static __always_inline s32 sock_slot_of(struct sock *sk, u32 tgid, u32 ports, u32 daddr)
{
	struct sock_key k = { .sk = (u64)sk, .ports = ports, .daddr = daddr, .tgid = tgid };
	struct sock_stats *r;
	u32 *p = bpf_map_lookup_elem(&sock_slot, &k), s;

	if (p)
		return *p;
	if (bpf_map_pop_elem(&sock_free, &s)) {
		count_event(CNT_SOCK_UNTRACKED);
		return -1;
	}
	r = sock_rec(s);
	if (!r)
		return -1;
	sock_fill(r, sk, tgid, ports, daddr);
	if (bpf_map_update_elem(&sock_slot, &k, &s, BPF_NOEXIST)) {
		/* another CPU made it first (or the map is full): give the slot back */
		bpf_map_push_elem(&sock_free, &s, 0);
		p = bpf_map_lookup_elem(&sock_slot, &k);
		if (!p)
			count_event(CNT_SOCK_UNTRACKED);
		return p ? *p : -1;
	}
	return s;
}

/* The same from a socket address only (probe reads): the exact rungs and softirq paths. */
static __always_inline s32 sock_slot_read(struct sock *sk, u32 tgid)
{
	if (!sk || socks_off())
		return -1;
	return sock_slot_of(sk, tgid, BPF_CORE_READ(sk, __sk_common.skc_portpair),
			    BPF_CORE_READ(sk, __sk_common.skc_daddr));
}

static __always_inline u32 send_size_slot(u64 v)
{
	u32 r = log2_slot(v);

	return r < NETIO_SEND_SIZE_SLOTS ? r : NETIO_SEND_SIZE_SLOTS - 1;
}
/* A send of ret bytes (ret > 0) on the record's socket: its calls are the histogram's sum (an
 * atomic add less per send: bench/NOTES.md, "What the per-socket accounting costs"). */
static __always_inline void sock_count_send(struct sock_stats *r, long ret, u32 kind)
{
	__sync_fetch_and_add(&r->tx_bytes, ret);
	if (kind == SEND_SPLICED)
		__sync_fetch_and_add(&r->tx_spliced_bytes, ret);
	else if (kind == SEND_IO_URING)
		__sync_fetch_and_add(&r->io_uring_sends, 1);
	__sync_fetch_and_add(&r->send_size[send_size_slot(ret) & (NETIO_SEND_SIZE_SLOTS - 1)], 1);
}

static __always_inline void sock_count_recv(struct sock_stats *r, long ret)
{
	__sync_fetch_and_add(&r->rx_copy_bytes, ret);
	__sync_fetch_and_add(&r->rx_calls, 1);
}

/* slot1: a record's slot + 1 (0: none), as sk_info keeps it (maps.bpf.h). */
static __always_inline void sock_add_zc(u32 slot1, u64 bytes)
{
	struct sock_stats *r;

	if (!slot1 || !bytes)
		return;
	r = sock_rec(slot1 - 1);
	if (r)
		__sync_fetch_and_add(&r->zc_tx_bytes, bytes);
}

/* A TCP connection reaches ESTABLISHED on this host (sk trusted: tp_btf): its ends, for the
 * tracer to keep in tcp_ends. No wakeup: the tracer drains the ring on its own tick. */
static __always_inline void tcp_end_seen(struct sock *sk)
{
	struct tcp_end *e = bpf_ringbuf_reserve(&tcp_ends_ring, sizeof(*e), 0);

	if (!e) {
		count_event(CNT_TCP_ENDS_LOST);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	sock_end(sk, e, true);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

#endif
