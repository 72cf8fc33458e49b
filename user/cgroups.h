/* --cgroup: cgroup v2 directories whose processes are followed (bpf/follow.bpf.c). */
#ifndef NETIO_CGROUPS_H
#define NETIO_CGROUPS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The cgroup id of a cgroup2 directory (what bpf_get_current_cgroup_id() returns for a task
 * in it). 0, or -1 with a one-line message in err. */
int cgroup_dir_id(const char *dir, uint64_t *id, char *err, size_t errlen);

/* Calls fn(pid, ctx) for every process of dir and of the cgroups below it; stops at and
 * returns fn's first non-zero result. */
int cgroup_for_each_proc(const char *dir, int (*fn)(pid_t pid, void *ctx), void *ctx);

/* The cgroup2 mount point (from /proc/self/mountinfo) into root; 0, or -1. */
int cgroup2_root(char *root, size_t len);
/* Whether pid lives in the cgroup (its path below the cgroup2 root) or below it. */
int pid_in_cgroup(pid_t pid, const char *cgroup);

#endif
