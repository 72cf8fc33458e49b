/* The followed processes: the one definition of followed_tgids, included by filter.bpf.h
 * (the tracer's objects) and profile.bpf.c (the sampler), which has no use for the rest of
 * the filter. The tracer creates the map once and hands its fd to every object before load
 * (bpf_map__reuse_fd: user/attach_objects.c, user/profile.c), so one `pid add` covers tracing
 * and sampling.
 *
 * A process's value is when it was followed from (CLOCK_MONOTONIC ns, the clock of
 * task_struct.start_time; a forked child's is its birth): a thread born at or after it is
 * followed from its birth, so nothing need be done for it at its fork (thread_storage.bpf.h,
 * born_followed). */
#ifndef NETIO_FOLLOWED_H
#define NETIO_FOLLOWED_H

#include "netio.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, u64);	/* followed since (ns, CLOCK_MONOTONIC) */
} followed_tgids SEC(".maps");

static __always_inline bool tgid_followed(u32 tgid)
{
	return bpf_map_lookup_elem(&followed_tgids, &tgid) != NULL;
}

#endif
