/* On-CPU stack sampling of the followed processes: a perf_event BPF program on per-task
 * events or on per-CPU events of their cgroup (hardware cycles where a PMU exists, software
 * cpu-clock where none does), or a
 * tp_btf program on the scheduler tick (source "tick": no timer of its own, HZ samples per
 * second of busy CPU at most). Stacks are counted in the kernel (stack map + counts map) and
 * read once per snapshot. */
#ifndef NETIO_PROFILE_H
#define NETIO_PROFILE_H
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>

struct profiler;

enum profile_source {
	PROFILE_SRC_AUTO,      /* cycles where a PMU exists, else the tick: in a VM, a cpu-clock
				* timer of our own costs a VM exit a sample */
	PROFILE_SRC_CYCLES,
	PROFILE_SRC_CPU_CLOCK,
	PROFILE_SRC_TICK,
};
/* "auto", "cycles", "cpu-clock" or "tick"; 0, or -1 for anything else. */
int profile_source_parse(const char *s, enum profile_source *out);

/* filter_map_fd: the tracer's map of followed tgids (bpf/followed.bpf.h), shared so that one
 * `pid add` covers tracing and sampling. freq_hz: wanted samples per second of CPU; the tick
 * source keeps every round(HZ / freq_hz)-th tick (all of them at freq_hz >= HZ). cgroup_dir
 * (perf event sources; NULL for none): a cgroup2 directory the followed processes live in,
 * sampled by one event per CPU that runs only while a task of the cgroup is on it, instead of
 * one event per task (which re-arms its timer at every context switch). Returns NULL and
 * fills err on failure, including a source other than auto that this machine cannot sample
 * on. */
struct profiler *profiler_open(int freq_hz, enum profile_source src, int filter_map_fd,
			       const char *cgroup_dir, char *err, size_t errlen);
/* Sample pid (every thread it has now, and inherited by the ones it makes later): call at
 * `pid add`, before the process starts its threads. A pid inside the cgroup given at open is
 * sampled by the cgroup's events already. 0, or -1 with errno. Nothing to do for the tick
 * source (the followed-tgid filter in the program decides). */
int profiler_add_pid(struct profiler *p, pid_t pid);
/* An untraced run: close every sampling event and detach the tick program, so
 * nothing of ours samples anywhere; pids added before are forgotten. profiler_attach() opens
 * them again (0, or -1 with err filled). */
void profiler_detach(struct profiler *p);
int profiler_attach(struct profiler *p, char *err, size_t errlen);
/* Stop sampling every pid added (ksoftirqd stays sampled). */
void profiler_clear_pids(struct profiler *p);
/* "cycles", "cpu-clock" or "tick": what the samples are taken on. */
const char *profiler_source(const struct profiler *p);
/* Effective sampling frequency in Hz: the requested one for perf events, HZ / N for the
 * tick; 0 when unknown (tick source on a kernel whose CONFIG_HZ cannot be read). */
double profiler_freq(const struct profiler *p);
struct json;
/* Into the JSON object being written: "source", "scope" ("task": per-task events, "cgroup":
 * per-CPU events on the cgroup, "cpu": the tick) and "freq" (the effective rate in Hz, an
 * integer when whole; null when unknown). */
void profiler_write_json(const struct profiler *p, struct json *j);
/* The sampler's notifications of new process images (a file descriptor to poll for input:
 * -1 when none), and their handling: call profiler_poll when it is readable, and every few
 * tens of ms anyway (it also refreshes the sampler's "anything followed" hint). */
int profiler_events_fd(const struct profiler *p);
void profiler_poll(struct profiler *p);
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
