/* BPF side of "whom do we follow": the followed-tgid map (processes and, through the fork
 * handler in follow.bpf.c, their children) and the followed network namespaces (softirq
 * events have no useful pid: they are filtered by the netns of the device or socket).
 *
 * Every skeleton that includes this header has its own definition of the maps; the tracer
 * creates them once and hands the same fds to every skeleton (bpf_map__reuse_fd), so one
 * `pid add` covers every program, including the profiler's. */
#ifndef NETIO_FILTER_H
#define NETIO_FILTER_H

#include "netio.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, u8);
} followed_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_NETNS);
	__type(key, u32);	/* netns inode number */
	__type(value, u8);
} followed_netns SEC(".maps");

/* [0]: generation of the filter, bumped by the tracer whenever followed_tgids changes, so
 * that a thread's cached "followed" (task_state in maps.h) is checked again. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} filter_gen SEC(".maps");

static __always_inline u32 current_filter_gen(void)
{
	u32 zero = 0, *g = bpf_map_lookup_elem(&filter_gen, &zero);

	return g ? *g : 0;
}

/* Per-CPU counters of the tracer itself (drops etc., enum netio_counter). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_NR);
	__type(key, u32);
	__type(value, u64);
} netio_counters SEC(".maps");

static __always_inline void count_event(u32 which)
{
	u64 *c = bpf_map_lookup_elem(&netio_counters, &which);

	if (c)
		(*c)++;
}

/* A map update that fails for any reason but "already there" loses an event. */
static __always_inline void count_update_error(long err)
{
	if (err && err != -17 /* EEXIST */)
		count_event(CNT_DROPS);
}

static __always_inline bool tgid_followed(u32 tgid)
{
	return bpf_map_lookup_elem(&followed_tgids, &tgid) != NULL;
}

static __always_inline bool netns_followed(u32 inum)
{
	return inum && bpf_map_lookup_elem(&followed_netns, &inum) != NULL;
}

static __always_inline u32 dev_netns(struct net_device *dev)
{
	return BPF_CORE_READ(dev, nd_net.net, ns.inum);
}

static __always_inline u32 sk_netns(struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

#endif
