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

/* bit of SOCK_ZEROCOPY in sk->sk_flags on the running kernel */
#define SOCK_ZEROCOPY_BIT bpf_core_enum_value(enum sock_flags, SOCK_ZEROCOPY)

/* Remember the owner of a zerocopy socket of a followed process (first send only); the
 * caller checked SOCK_ZEROCOPY. */
static __always_inline void note_zc_owner(u64 sk, u32 tgid)
{
	struct sk_info *si, n = { .tgid = tgid };

	si = bpf_map_lookup_elem(&sk_owner, &sk);
	if (si && si->tgid == tgid)
		return;
	count_update_error(bpf_map_update_elem(&sk_owner, &sk, &n, BPF_ANY));
}

#endif
