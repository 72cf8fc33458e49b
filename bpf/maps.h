/* The aggregation maps of the tracer (per-CPU, keyed by tgid or netns inum) and helpers to
 * find or create an entry. Shared by every copy_*.bpf.c and syscalls.bpf.c skeleton: the
 * tracer creates them once and reuses the fds. */
#ifndef NETIO_MAPS_H
#define NETIO_MAPS_H

#include "filter.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct proc_stats);
} proc_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETIO_MAX_NETNS);
	__type(key, u32);	/* netns inum */
	__type(value, struct netns_stats);
} netns_stats SEC(".maps");

/* Threads currently inside tcp_sendmsg of a followed process: the scope in which copies
 * from the user iov and page pinning belong to a send. */
struct send_scope {
	u32 tgid;
	u32 pad;
	u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);	/* tid */
	__type(value, struct send_scope);
} in_send SEC(".maps");

/* Zerocopy sockets of followed processes: who owns them (skbs leave the host in softirq
 * context where current is anybody), and the highest sequence counted (retransmits of a
 * zerocopy skb are not new zerocopy bytes). */
struct sk_info {
	u32 tgid;
	u32 max_end_seq;
	u32 seq_valid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETIO_MAX_SOCKS);
	__type(key, u64);	/* struct sock * */
	__type(value, struct sk_info);
} sk_owner SEC(".maps");

static const struct proc_stats zero_proc_stats;
static const struct netns_stats zero_netns_stats;

static __always_inline struct proc_stats *proc_get(u32 tgid)
{
	struct proc_stats *ps = bpf_map_lookup_elem(&proc_stats, &tgid);

	if (ps)
		return ps;
	count_update_error(bpf_map_update_elem(&proc_stats, &tgid, &zero_proc_stats, BPF_NOEXIST));
	ps = bpf_map_lookup_elem(&proc_stats, &tgid);
	/* the comm of the process itself, not of whoever runs a softirq */
	if (ps && (bpf_get_current_pid_tgid() >> 32) == tgid)
		bpf_get_current_comm(ps->comm, sizeof(ps->comm));
	return ps;
}

static __always_inline struct netns_stats *netns_get(u32 inum)
{
	struct netns_stats *ns = bpf_map_lookup_elem(&netns_stats, &inum);

	if (ns)
		return ns;
	count_update_error(bpf_map_update_elem(&netns_stats, &inum, &zero_netns_stats, BPF_NOEXIST));
	return bpf_map_lookup_elem(&netns_stats, &inum);
}

#ifndef SKBFL_ZEROCOPY_ENABLE_BIT
#define SKBFL_ZEROCOPY_ENABLE_BIT 1	/* SKBFL_ZEROCOPY_ENABLE: same value on every kernel */
#endif

/* skb_shinfo(skb) with CO-RE: skb->end is an offset from head on 64-bit kernels
 * (NET_SKBUFF_DATA_USES_OFFSET) and a pointer elsewhere. */
static __always_inline struct skb_shared_info *skb_shinfo_core(struct sk_buff *skb)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	u64 end = 0;

	if (bpf_core_field_size(skb->end) == 4) {
		u32 off = BPF_CORE_READ(skb, end);
		return (struct skb_shared_info *)(head + off);
	}
	bpf_core_read(&end, bpf_core_field_size(skb->end), &skb->end);
	return (struct skb_shared_info *)end;
}

static __always_inline bool skb_zerocopy_flagged(struct sk_buff *skb)
{
	struct skb_shared_info *sh = skb_shinfo_core(skb);

	return BPF_CORE_READ(sh, flags) & SKBFL_ZEROCOPY_ENABLE_BIT;
}

static __always_inline bool sk_is_zerocopy(struct sock *sk)
{
	unsigned long flags = BPF_CORE_READ(sk, __sk_common.skc_flags);
	int bit = bpf_core_enum_value(enum sock_flags, SOCK_ZEROCOPY);

	return (flags >> bit) & 1;
}

/* Remember the owner of a zerocopy socket of a followed process (first send only). */
static __always_inline void note_zc_owner(struct sock *sk, u32 tgid)
{
	u64 key = (u64)sk;
	struct sk_info *si, n = { .tgid = tgid };

	if (!sk || !sk_is_zerocopy(sk))
		return;
	si = bpf_map_lookup_elem(&sk_owner, &key);
	if (si && si->tgid == tgid)
		return;
	count_update_error(bpf_map_update_elem(&sk_owner, &key, &n, BPF_ANY));
}

/* A zerocopy skb leaves a device (tp rung of zc_tx_bytes): attribute it to the socket's
 * owner and the device's netns, counting each sequence range once. */
static __always_inline void count_zc_xmit(struct sk_buff *skb, u32 dev_inum)
{
	u32 data_len = BPF_CORE_READ(skb, data_len);
	u64 key = (u64)BPF_CORE_READ(skb, sk);
	struct sk_info *si = key ? bpf_map_lookup_elem(&sk_owner, &key) : NULL;
	u32 fresh = data_len;

	if (!data_len)
		return;
	if (si) {
		unsigned char *head = BPF_CORE_READ(skb, head);
		u16 thoff = BPF_CORE_READ(skb, transport_header);
		struct tcphdr th = {};
		u32 seq, end;

		if (bpf_probe_read_kernel(&th, sizeof(th), head + thoff) == 0) {
			seq = bpf_ntohl(th.seq);
			end = seq + data_len;
			if (!si->seq_valid) {
				si->seq_valid = 1;
				si->max_end_seq = end;
			} else if ((s32)(end - si->max_end_seq) > 0) {
				if ((s32)(seq - si->max_end_seq) < 0)
					fresh = end - si->max_end_seq;
				si->max_end_seq = end;
			} else {
				fresh = 0;
			}
		}
		if (fresh) {
			struct proc_stats *ps = proc_get(si->tgid);
			if (ps)
				ps->zc_tx_bytes += fresh;
		}
	}
	if (fresh && netns_followed(dev_inum)) {
		struct netns_stats *ns = netns_get(dev_inum);
		if (ns) {
			ns->zc_tx_bytes += fresh;
			ns->zc_tx_skbs++;
		}
	}
}

#endif
