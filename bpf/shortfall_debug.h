/* HUNT ONLY (bench/shortfall_soak.py): per TCP connection (its 4-tuple from the headers, so
 * that the receiver's skb finds the sender's entry), what xmit saw of its payload skbs (the
 * last SFD_RING of them) and counted as zerocopy, and what netif_receive_skb then received
 * flagged; a received range xmit never counted, or a counted range that jumps ahead, is logged
 * with its kernel stack and the connection's ring. Maps pinned by name: they outlive a
 * one-shot tracer. Built with -DNETIO_SHORTFALL_DEBUG only (make BPF_DEFS=...). */
#ifndef NETIO_SHORTFALL_DEBUG_H
#define NETIO_SHORTFALL_DEBUG_H

#ifdef NETIO_SHORTFALL_DEBUG
#define SFD_RING 16
#define SFD_EVENTS 64
#define SFD_DEPTH 32

enum sfd_kind {
	SFD_RX_UNSEEN = 1,	/* a zerocopy skb received past the end xmit counted */
	SFD_XMIT_JUMP,		/* a counted zerocopy skb starting past the end counted before */
	SFD_RX_NOCONN,		/* a zerocopy skb received of a connection xmit never saw */
	SFD_XMIT_NONS,		/* a payload skb of a known connection, its netns not found */
	SFD_NETIF_RX_UNSEEN,	/* a zerocopy skb entering a backlog (netif_rx) past the end
				 * xmit counted: the stack says how it got there */
};

struct sfd_key {
	u32 saddr, daddr;
	u16 sport, dport;
};

struct sfd_xmit {
	u64 ts;
	u32 seq, payload, data_len, fresh;
	u8 shflags, nr_frags, zc, cpu;
	u8 ns, si, pad[2];
};

struct sfd_q {
	u64 ts;
	u32 seq, payload;
	u8 zc, cpu, pad[6];
};

#define SFD_QRING 8

struct sfd_conn {
	u32 zc_end;		/* the highest end of the zerocopy bytes xmit counted */
	u32 any_end;		/* the highest end of any payload xmit saw */
	u32 valid, ring_i;
	u64 xmit_skbs, xmit_zc_skbs, xmit_zc_bytes, xmit_plain_paged, xmit_jumps, xmit_again;
	u64 rx_zc_skbs, rx_zc_bytes, rx_unseen, xmit_nons;
	struct sfd_xmit ring[SFD_RING];
	u32 q_i, q_zc_end;	/* net_dev_queue: the next slot, the highest zerocopy end */
	struct sfd_q qring[SFD_QRING];
};

struct sfd_event {
	u32 kind, cpu;
	u64 ts;
	u64 pid_tgid;
	u64 skb;
	u32 seq, payload, data_len, shflags;
	struct sfd_key key;
	struct sfd_conn conn;
	u64 stack[SFD_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sfd_key);
	__type(value, struct sfd_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfd_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFD_EVENTS);
	__type(key, u32);
	__type(value, struct sfd_event);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfd_events SEC(".maps");

/* an empty connection, to make entries from (too big for the stack) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sfd_conn);
} sfd_zero SEC(".maps");

/* [0] events logged, [1] last tcp_probe run (ns), [2] rx without a connection */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfd_misc SEC(".maps");

/* The 4-tuple, sequence number and payload length of a TCP/IPv4 skb whose IP header is at ip
 * (l3off bytes past skb->data); false for anything else or no payload. */
static __always_inline bool sfd_parse(struct sk_buff *skb, unsigned char *ip, u32 l3off,
				      struct sfd_key *k, u32 *seq, u32 *payload)
{
	u8 *b = bpf_rdonly_cast(ip, 0), *th;
	u32 ihl, doff;

	if ((b[0] >> 4) != 4 || b[9] != 6)
		return false;
	ihl = (b[0] & 15) * 4;
	k->saddr = *(u32 *)(b + 12);
	k->daddr = *(u32 *)(b + 16);
	th = bpf_rdonly_cast(ip + ihl, 0);
	k->sport = *(u16 *)th;
	k->dport = *(u16 *)(th + 2);
	*seq = bpf_ntohl(*(u32 *)(th + 4));
	doff = (th[12] >> 4) * 4;
	if (skb->len <= l3off + ihl + doff)
		return false;
	*payload = skb->len - l3off - ihl - doff;
	return true;
}

static __always_inline u8 sfd_shflags(struct sk_buff *skb, u8 *nr_frags)
{
	struct skb_shared_info *sh = bpf_rdonly_cast(skb->head + skb->end,
						     bpf_core_type_id_kernel(struct skb_shared_info));

	*nr_frags = sh->nr_frags;
	return sh->flags;
}

static __always_inline void sfd_log(void *ctx, u32 kind, struct sk_buff *skb, struct sfd_key *k,
				    u32 seq, u32 payload, struct sfd_conn *c)
{
	u32 zero = 0, slot;
	u64 *n = bpf_map_lookup_elem(&sfd_misc, &zero);
	struct sfd_event *e;
	u8 nr;

	if (!n)
		return;
	slot = __sync_fetch_and_add(n, 1);
	if (slot >= SFD_EVENTS)
		return;		/* the first ones are the ones to read */
	e = bpf_map_lookup_elem(&sfd_events, &slot);
	if (!e)
		return;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->ts = bpf_ktime_get_ns();
	e->pid_tgid = bpf_get_current_pid_tgid();
	e->skb = (u64)skb;
	e->seq = seq;
	e->payload = payload;
	e->data_len = skb->data_len;
	e->shflags = sfd_shflags(skb, &nr);
	e->key = *k;
	if (c)
		__builtin_memcpy(&e->conn, c, sizeof(*c));
	bpf_get_stack(ctx, e->stack, sizeof(e->stack), 0);
}

/* Every payload skb of a TCP connection at xmit (zc: flagged; fresh: the bytes on_xmit
 * counted; ns: its device's netns statistics, found or not; si: its socket's entry found): a
 * connection is known from its first skb in a followed netns on. */
static __always_inline void sfd_xmit(void *ctx, struct sk_buff *skb, const bool cast, bool zc,
				     u32 fresh, struct netns_stats *ns, bool si)
{
	struct sfd_key k = {};
	struct sfd_conn *c, *n;
	struct sfd_xmit *x;
	u32 seq, payload, end, i, zero = 0;
	u8 nr;

	if (!cast || !sfd_parse(skb, skb->head + skb->network_header,
		       skb->network_header - (u32)(skb->data - skb->head), &k, &seq, &payload))
		return;
	c = bpf_map_lookup_elem(&sfd_conns, &k);
	if (!c) {
		if (!ns)
			return;
		n = bpf_map_lookup_elem(&sfd_zero, &zero);
		if (!n)
			return;
		bpf_map_update_elem(&sfd_conns, &k, n, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&sfd_conns, &k);
		if (!c)
			return;
	}
	end = seq + payload;
	i = c->ring_i++ % SFD_RING;
	x = &c->ring[i & (SFD_RING - 1)];
	x->ts = bpf_ktime_get_ns();
	x->seq = seq;
	x->payload = payload;
	x->data_len = skb->data_len;
	x->fresh = fresh;
	x->shflags = sfd_shflags(skb, &nr);
	x->nr_frags = nr;
	x->zc = zc;
	x->cpu = bpf_get_smp_processor_id();
	x->ns = !!ns;
	x->si = si;
	c->xmit_skbs++;
	if (!ns) {
		c->xmit_nons++;
		sfd_log(ctx, SFD_XMIT_NONS, skb, &k, seq, payload, c);
	}
	if (!c->valid || (s32)(end - c->any_end) > 0)
		c->any_end = end;
	if (!zc) {
		if (skb->data_len)
			c->xmit_plain_paged++;
		if (!c->valid)
			c->valid = 2;	/* any_end only */
		return;
	}
	c->xmit_zc_skbs++;
	c->xmit_zc_bytes += fresh;
	if (fresh < skb->data_len)
		c->xmit_again++;
	if (!fresh)
		return;
	if (c->valid == 1 && (s32)(seq - c->zc_end) > 0) {
		c->xmit_jumps++;
		sfd_log(ctx, SFD_XMIT_JUMP, skb, &k, seq, payload, c);
	}
	if (c->valid != 1 || (s32)(end - c->zc_end) > 0)
		c->zc_end = end;
	c->valid = 1;
}

/* A zerocopy skb at netif_receive_skb (its IP header at skb->data). */
static __always_inline void sfd_rx(void *ctx, struct sk_buff *skb, const bool cast)
{
	struct sfd_key k = {};
	struct sfd_conn *c;
	u32 seq, payload, end, two = 2;
	u64 *m;

	if (!cast || !sfd_parse(skb, skb->data, 0, &k, &seq, &payload))
		return;
	end = seq + payload;
	c = bpf_map_lookup_elem(&sfd_conns, &k);
	if (!c) {
		m = bpf_map_lookup_elem(&sfd_misc, &two);
		if (m)
			__sync_fetch_and_add(m, 1);
		sfd_log(ctx, SFD_RX_NOCONN, skb, &k, seq, payload, NULL);
		return;
	}
	c->rx_zc_skbs++;
	c->rx_zc_bytes += skb->data_len;
	if (c->valid != 1 || (s32)(end - c->zc_end) > 0) {
		c->rx_unseen++;
		sfd_log(ctx, SFD_RX_UNSEEN, skb, &k, seq, payload, c);
	}
}

/* An skb entering __dev_queue_xmit (net_dev_queue), before net_dev_start_xmit: a second
 * witness of the xmit path, in a program of its own. */
static __always_inline void sfd_queue(struct sk_buff *skb)
{
	struct sfd_key k = {};
	struct sfd_conn *c;
	struct sfd_q *q;
	u32 seq, payload, i;
	u8 nr;

	if (!sfd_parse(skb, skb->head + skb->network_header,
		       skb->network_header - (u32)(skb->data - skb->head), &k, &seq, &payload))
		return;
	c = bpf_map_lookup_elem(&sfd_conns, &k);
	if (!c)
		return;
	i = c->q_i++ % SFD_QRING;
	q = &c->qring[i & (SFD_QRING - 1)];
	q->ts = bpf_ktime_get_ns();
	q->seq = seq;
	q->payload = payload;
	q->zc = skb->data_len && (sfd_shflags(skb, &nr) & 1);
	q->cpu = bpf_get_smp_processor_id();
	if (q->zc && (s32)(seq + payload - c->q_zc_end) > 0)
		c->q_zc_end = seq + payload;
}

/* An skb entering a CPU's backlog (netif_rx: loopback's and veth's xmit), its IP header at
 * skb->data. */
static __always_inline void sfd_netif_rx(void *ctx, struct sk_buff *skb)
{
	struct sfd_key k = {};
	struct sfd_conn *c;
	u32 seq, payload;
	u8 nr;

	if (!skb->data_len || !(sfd_shflags(skb, &nr) & 1) ||
	    !sfd_parse(skb, skb->data, 0, &k, &seq, &payload))
		return;
	c = bpf_map_lookup_elem(&sfd_conns, &k);
	if (c && (c->valid != 1 || (s32)(seq + payload - c->zc_end) > 0))
		sfd_log(ctx, SFD_NETIF_RX_UNSEEN, skb, &k, seq, payload, c);
}

static __always_inline void sfd_tcp_probe(void)
{
	u32 one = 1;
	u64 *m = bpf_map_lookup_elem(&sfd_misc, &one);

	if (m)
		*m = bpf_ktime_get_ns();
}

#define SFD_XMIT(ctx, skb, cast, zc, fresh, ns, si) sfd_xmit(ctx, skb, cast, zc, fresh, ns, si)
#define SFD_RX(ctx, skb, cast) sfd_rx(ctx, skb, cast)
#define SFD_TCP_PROBE() sfd_tcp_probe()
#else
#define SFD_XMIT(ctx, skb, cast, zc, fresh, ns, si) do { } while (0)
#define SFD_RX(ctx, skb, cast) do { } while (0)
#define SFD_TCP_PROBE() do { } while (0)
#endif

#endif
