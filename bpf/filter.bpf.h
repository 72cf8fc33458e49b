/* BPF side of "whom do we follow": the followed-tgid map (processes and, through the fork
 * handler in follow.bpf.c, their children) and the followed network namespaces (softirq
 * events have no useful pid: they are filtered by the netns of the device or socket, and
 * counted in the namespace's slot of netns_stats, maps.bpf.h).
 *
 * Every skeleton that includes this header has its own definition of the maps; the tracer
 * creates them once and hands the same fds to every skeleton (bpf_map__reuse_fd), so one
 * `pid add` covers every program, including the profiler's (followed.bpf.h). */
#ifndef NETIO_FILTER_H
#define NETIO_FILTER_H

#include "netio.h"
#include "followed.bpf.h"
#include "percpu_count.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_NETNS);
	__type(key, u32);	/* netns inode number */
	__type(value, u32);	/* its slot in netns_stats, given by the tracer */
} followed_netns SEC(".maps");

/* One value, mapped by the tracer (struct follow_buckets in netio.h): an event of a thread
 * whose tgid's bucket is 0 leaves on one load, before any helper call or map lookup
 * (followed_thread). On a host where a few processes are followed, most events are the others'. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct follow_buckets);
} follow_buckets SEC(".maps");

/* The buckets where the tracer keeps them, else NULL (nothing is known from them). */
static __always_inline struct follow_buckets *follow_buckets_kept(void)
{
	u32 zero = 0;
	struct follow_buckets *b = bpf_map_lookup_elem(&follow_buckets, &zero);

	return b && b->on ? b : NULL;
}

/* tgid's bucket, or NULL. */
static __always_inline u32 *follow_bucket(u32 tgid)
{
	struct follow_buckets *b = follow_buckets_kept();

	return b ? &b->n[tgid % NETIO_FOLLOW_BUCKETS] : NULL;
}

/* Whether no followed process has tgid: its bucket holds none. A bucket is raised before a
 * tgid is followed and lowered after it is not, so a 0 is never wrong; a bucket shared with a
 * followed tgid says nothing, and the caller looks further. */
static __always_inline bool surely_unfollowed(u32 tgid)
{
	u32 *n = follow_bucket(tgid);

	return n && !*n;
}

/* [0]: generation of the filter, bumped by the tracer whenever followed_tgids or
 * followed_netns changes, so that a thread's cached "followed" (task_state in maps.bpf.h) and a
 * CPU's cached namespace slots (netns_slot) are checked again. [1]: tests only
 * (NETIO_TEST_NO_THREAD_STORAGE): 1 makes every thread's storage fail (maps.bpf.h,
 * adopt_thread). [2]: tests only (NETIO_TEST_XMIT_MISS): N > 0 makes the tracepoint rung's
 * xmit pass over about one zerocopy TCP skb in N (zc_skb.bpf.c, test_xmit_miss). [3]: tests
 * only (NETIO_TEST_RX_MISS): 1 makes their receive pass over them too (test_rx_miss). [4]:
 * tests only (NETIO_TEST_CLAIM_TO_SPILL): 1 makes a claim of pending zerocopy bytes find its
 * process's statistics refused (maps.bpf.h, claim_zc_bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
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
	percpu_count(&netio_counters, which);
}

/* A map update that fails for any reason but "already there" loses an event. */
static __always_inline void count_update_error(long err)
{
	if (!err || err == -17 /* EEXIST */)
		return;
	if (err == -16 /* EBUSY */ || err == -35 /* EDEADLK */ || err == -110 /* ETIMEDOUT */)
		count_event(CNT_DROP_MAP_BUSY);
	else
		count_event(CNT_DROP_MAP_FULL);
}

/* The last namespaces a CPU looked up, by struct net address: a zerocopy skb passes two (the
 * sender's device, then the receiver's), each several times, and the inode number is a
 * pointer chase and a hash lookup away. Valid for one filter generation; refilled round
 * robin, so two namespaces met in turn both stay. */
#define NETNS_CACHE_WAYS 4

struct netns_cache {
	u64 net[NETNS_CACHE_WAYS];
	u64 tag[NETNS_CACHE_WAYS];	/* filter generation << 32 | slot + 1 (0: not followed) */
	u32 next;			/* the way refilled next */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct netns_cache);
} netns_cache SEC(".maps");

#define netio_barrier() asm volatile("" ::: "memory")

/* The slot of a followed namespace, or -1. net: a kernel pointer read directly or with
 * BPF_CORE_READ; its inode number is read only on a cache miss. The generation is read before
 * the map lookup: a change racing with it leaves an entry that is already stale. A softirq's
 * program may interrupt a program refilling or reading the same way on this CPU: a way is
 * written net cleared first and set last, and its tag is trusted only if the way held net both
 * before and after the tag was read (a refill between a tag read first and a net read last
 * could pair the new net with the old net's slot). */
static __always_inline s32 netns_slot(struct net *net)
{
	u32 zero = 0, gen = current_filter_gen(), inum, w, *slot;
	struct netns_cache *c = bpf_map_lookup_elem(&netns_cache, &zero);
	u64 tag;
	s32 s;

	if (!c || !net)
		return -1;
#pragma unroll
	for (w = 0; w < NETNS_CACHE_WAYS; w++) {
		if (c->net[w] != (u64)net)
			continue;
		netio_barrier();
		tag = c->tag[w];
		netio_barrier();
		if (c->net[w] == (u64)net && (u32)(tag >> 32) == gen)
			return (s32)(u32)tag - 1;
	}
	inum = BPF_CORE_READ(net, ns.inum);
	slot = inum ? bpf_map_lookup_elem(&followed_netns, &inum) : NULL;
	s = slot && *slot < NETIO_MAX_NETNS ? *slot : -1;
	w = c->next++ % NETNS_CACHE_WAYS;
	c->net[w] = 0;
	netio_barrier();
	c->tag[w] = (u64)gen << 32 | (u32)(s + 1);
	netio_barrier();
	c->net[w] = (u64)net;
	return s;
}

#endif
