/* HUNT ONLY (not for merge): a log of the skbs of followed zerocopy sockets at xmit and of
 * zerocopy skbs received, with kernel stacks of the odd ones, in maps pinned by name so that
 * they outlive the tracer of a failed test. Built with -DNETIO_SHORTFALL_DEBUG only. */
#ifndef NETIO_SHORTFALL_DEBUG_H
#define NETIO_SHORTFALL_DEBUG_H

#ifdef NETIO_SHORTFALL_DEBUG
#define DBG_LOG_N 262144
#define DBG_STACKS_N 256
#define DBG_DEPTH 40

enum dbg_kind {
	DBG_XMIT_ZC = 1,	/* zerocopy skb at xmit, fresh counted */
	DBG_XMIT_PLAIN,		/* data skb without the zerocopy mark, of a zerocopy socket */
	DBG_RX_ZC,		/* zerocopy skb at netif_receive_skb */
	DBG_XMIT_JUMP,		/* zerocopy skb whose seq jumped ahead of max_end_seq */
	DBG_XMIT_OLD,		/* zerocopy skb called old (fresh < data_len) */
	DBG_XMIT_RAW = 12,	/* any TCP skb over 100 bytes at tp_xmit's entry */
	DBG_RX_RAW = 13,	/* any skb over 100 bytes at tp_netif_receive's entry */
};

struct dbg_ev {
	u64 ts;
	u64 sk;
	u32 kind;
	u32 cpu;
	u32 seq;
	u32 len;
	u32 data_len;
	u32 max_end;		/* before this skb */
	u32 fresh;
	u32 pid;
	u32 stack;		/* +1 index into dbg_stacks, 0 none */
	u32 shflags;
	u64 skb;
};

struct dbg_stack {
	u64 ips[DBG_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DBG_LOG_N);
	__type(key, u32);
	__type(value, struct dbg_ev);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dbg_log SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DBG_STACKS_N);
	__type(key, u32);
	__type(value, struct dbg_stack);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dbg_stacks SEC(".maps");

/* [0] events logged, [1] stacks taken */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dbg_idx SEC(".maps");

/* what tp_xmit saw last on this CPU, before any check (the hunt's netif_rx compares) */
struct dbg_ours {
	u64 skb;
	u64 sk;
	u32 data_len;
	u32 len;
	u32 zc;
	u32 pad;
	u64 ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct dbg_ours);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dbg_ours SEC(".maps");

static __always_inline void dbg_ours_saw(struct sk_buff *skb, bool zc)
{
	u32 zero = 0;
	struct dbg_ours *o = bpf_map_lookup_elem(&dbg_ours, &zero);

	if (!o)
		return;
	o->skb = (u64)skb;
	o->sk = (u64)skb->sk;
	o->data_len = skb->data_len;
	o->len = skb->len;
	o->zc = zc;
	o->ts = bpf_ktime_get_ns();
}

static __always_inline u32 dbg_take_stack(void *ctx)
{
	u32 one = 1, slot;
	u64 *n = bpf_map_lookup_elem(&dbg_idx, &one);
	struct dbg_stack *st;

	if (!n)
		return 0;
	slot = __sync_fetch_and_add(n, 1) % DBG_STACKS_N;
	st = bpf_map_lookup_elem(&dbg_stacks, &slot);
	if (!st)
		return 0;
	bpf_get_stack(ctx, st->ips, sizeof(st->ips), 0);
	return slot + 1;
}

static __always_inline void dbg_log_ev(void *ctx, u32 kind, struct sk_buff *skb, u64 sk, u32 seq,
				       u32 max_end, u32 fresh, bool stack, u32 shflags)
{
	u32 zero = 0, slot;
	u64 *n = bpf_map_lookup_elem(&dbg_idx, &zero);
	struct dbg_ev *e;

	if (!n)
		return;
	slot = __sync_fetch_and_add(n, 1) % DBG_LOG_N;
	e = bpf_map_lookup_elem(&dbg_log, &slot);
	if (!e)
		return;
	e->ts = bpf_ktime_get_ns();
	e->sk = sk;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->seq = seq;
	e->len = skb->len;
	e->data_len = skb->data_len;
	e->max_end = max_end;
	e->fresh = fresh;
	e->pid = bpf_get_current_pid_tgid();
	e->shflags = shflags;
	e->skb = (u64)skb;
	e->stack = stack ? dbg_take_stack(ctx) : 0;
}
#endif

#endif
