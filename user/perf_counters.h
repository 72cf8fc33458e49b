/* Hardware and software perf counters for the followed processes (perf_event_open, inherited
 * to threads and children). A counter the machine cannot count is reported as null and listed
 * in "unsupported", never as 0. */
#ifndef NETIO_PERF_COUNTERS_H
#define NETIO_PERF_COUNTERS_H
#include <stdio.h>
#include <sys/types.h>

struct perf_counters;

struct perf_counters *perf_counters_new(void);
/* Open every counter for pid (inherit = 1). Call before the process starts its threads. */
int perf_counters_add_pid(struct perf_counters *pc, pid_t pid);
/* Close every counter (forget every pid). */
void perf_counters_clear(struct perf_counters *pc);
/* Zero every open counter. */
void perf_counters_reset(struct perf_counters *pc);
/* Write a JSON object: {"cycles": n|null, ..., "unsupported": [..], "scaled": bool,
 * "tsc_hz": n} summed over every pid, scaled for multiplexing. */
void perf_counters_write_json(struct perf_counters *pc, FILE *out);
void perf_counters_free(struct perf_counters *pc);

#endif
