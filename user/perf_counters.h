/* Hardware and software perf counters for the followed processes (perf_event_open, inherited
 * to threads and children). A counter the machine cannot count is reported as null and listed
 * in "unsupported", never as 0. */
#ifndef NETIO_PERF_COUNTERS_H
#define NETIO_PERF_COUNTERS_H
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct perf_counters;
struct kernel_counts;

/* kernel_software: the software counters (context-switches, cpu-migrations, page-faults,
 * task-clock) come from the kernel's own per-thread counters, which the tracer's BPF side
 * sums (bpf/netio.h, struct kernel_counts), not from perf events: no perf event is opened
 * for them. */
struct perf_counters *perf_counters_new(bool kernel_software);
/* Open every counter for pid (inherit = 1). Call before the process starts its threads. */
int perf_counters_add_pid(struct perf_counters *pc, pid_t pid);
/* Close every counter (forget every pid). */
void perf_counters_clear(struct perf_counters *pc);
/* Zero every open counter. */
void perf_counters_reset(struct perf_counters *pc);
/* Write a JSON object: {"cycles": n|null, ..., "unsupported": [..], "scaled": bool,
 * "tsc_hz": n, "software_from": "task_struct"|"perf_event"} summed over every pid, scaled
 * for multiplexing. k: the kernel's counters (used with kernel_software). */
void perf_counters_write_json(struct perf_counters *pc, const struct kernel_counts *k,
			      FILE *out);
void perf_counters_free(struct perf_counters *pc);

#endif
