/* The aggregation maps of the tracer (per-CPU, keyed by tgid or netns inum) and helpers to
 * find or create an entry. Shared by every copy_*.bpf.c and syscalls.bpf.c skeleton: the
 * tracer creates them once and reuses the fds. */
#ifndef NETIO_MAPS_H
#define NETIO_MAPS_H

#include "filter.h"

/* allocated on first use: ~3.5 KiB per CPU per followed process */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_stats);
} tgid_stats SEC(".maps");

/* Per thread of a followed process (task-local storage: no hash lookup, and absent for
 * threads never followed). The hot paths (syscall entry and exit, sock_send_length,
 * skb_copy_datagram_iovec in process context) find everything they need here; bytes counted
 * inside a traced syscall wait in pending_* until its exit, which has the process's
 * statistics at hand anyway. */
struct task_state {
	u64 ts;			/* start of the traced syscall in progress, 0 if none */
	u32 cls;		/* its class */
	u32 gen;		/* filter generation "followed" was decided at */
	u32 tgid;
	u32 followed;
	u64 pending_tx_bytes;
	u64 pending_rx_bytes;
	u32 pending_tx_calls;
	u32 pending_rx_calls;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_state SEC(".maps");

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

static const struct tgid_stats zero_tgid_stats;
static const struct netns_stats zero_netns_stats;

static __always_inline struct tgid_stats *tgid_stats_get(u32 tgid)
{
	struct tgid_stats *ts = bpf_map_lookup_elem(&tgid_stats, &tgid);

	if (ts)
		return ts;
	count_update_error(bpf_map_update_elem(&tgid_stats, &tgid, &zero_tgid_stats, BPF_NOEXIST));
	ts = bpf_map_lookup_elem(&tgid_stats, &tgid);
	/* the comm of the process itself, not of whoever runs a softirq */
	if (ts && (bpf_get_current_pid_tgid() >> 32) == tgid)
		bpf_get_current_comm(ts->comm, sizeof(ts->comm));
	return ts;
}

static __always_inline struct proc_stats *proc_get(u32 tgid)
{
	struct tgid_stats *ts = tgid_stats_get(tgid);

	return ts ? &ts->p : NULL;
}

/* The current thread's state if it is inside a traced syscall of a followed process (then
 * its bytes can wait in pending_*), else NULL. */
static __always_inline struct task_state *current_traced_syscall(void)
{
	struct task_state *st = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, 0);

	return st && st->ts ? st : NULL;
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
