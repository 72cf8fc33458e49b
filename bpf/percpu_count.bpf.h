/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NETIO_PERCPU_COUNT_H
#define NETIO_PERCPU_COUNT_H

/* One more in slot idx of a per-CPU array of u64 counters: the tracer's own (filter.bpf.h,
 * netio_counters) and the profiler's (profile.bpf.c, stats). Inlined, so that each call
 * names its map to the verifier as a constant. */
static __always_inline void percpu_count(void *counters, u32 idx)
{
	u64 *c = bpf_map_lookup_elem(counters, &idx);

	if (c)
		(*c)++;
}

#endif
