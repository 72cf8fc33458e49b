/* Reading and writing a kernel setting in /proc/sys, shared by the tracer and the workloads. */
#ifndef NETIO_SYSCTL_H
#define NETIO_SYSCTL_H

/* The integer value of /proc/sys/NAME (e.g. "kernel/bpf_stats_enabled"), or -1 where the
 * setting is absent or unreadable. */
int sysctl_read_int(const char *name);

/* Sets /proc/sys/NAME to v: 0, or -1 where it cannot be written. */
int sysctl_write_int(const char *name, int v);

#endif
