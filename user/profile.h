/* On-CPU stack sampling of the followed processes: a perf_event BPF program per CPU on
 * hardware cycles where a PMU exists, on software cpu-clock where none does. Stacks are
 * counted in the kernel (stack map + counts map) and read once per snapshot. */
#ifndef NETIO_PROFILE_H
#define NETIO_PROFILE_H
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>

struct profiler;

/* filter_map_fd: the tracer's map of followed tgids (bpf/filter.h), shared so that one
 * `pid add` covers tracing and sampling. Returns NULL and fills err on failure. */
struct profiler *profiler_open(int freq_hz, int filter_map_fd, char *err, size_t errlen);
/* Sample pid (every thread it has now, and inherited by the ones it makes later): call at
 * `pid add`, before the process starts its threads. 0, or -1 with errno. */
int profiler_add_pid(struct profiler *p, pid_t pid);
/* Stop sampling every pid added (ksoftirqd stays sampled). */
void profiler_clear_pids(struct profiler *p);
/* "cycles" or "cpu-clock": what the samples are taken on. */
const char *profiler_source(const struct profiler *p);
int profiler_freq(const struct profiler *p);
/* Zero the stack counts (start of a run). */
void profiler_reset(struct profiler *p);
/* Symbolize and write folded stacks, one "frame;frame;... count" line per distinct stack,
 * outermost frame first, kernel frames suffixed "_[k]". Returns the number of samples
 * written, or -1. */
long profiler_write_folded(struct profiler *p, FILE *out);
/* Samples counted since the last reset, and samples lost (stack map full etc.). */
long profiler_samples(struct profiler *p, long *lost);
/* The sampling BPF program's fd (for its run time in the tracer's "self" accounting:
 * bpf_prog_get_info_by_fd run_time_ns / run_cnt with kernel.bpf_stats_enabled). */
int profiler_prog_fd(const struct profiler *p);
void profiler_close(struct profiler *p);

#endif
