/* Every BPF object is built twice (Makefile): as is, for kernels with task-local storage
 * (5.11), atomic exchange (5.12), bpf_task_pt_regs (5.15) and bpf_loop (5.17); and with
 * NETIO_COMPAT, for the kernels before those (5.10 and up). The tracer picks the build the
 * running kernel allows (user/builds.c, bpf_build) and opens it through the same
 * skeleton: both builds define the same programs and maps (the Makefile checks). What differs
 * is said where it differs; these are the few words both builds write alike. */
#ifndef NETIO_COMPAT_H
#define NETIO_COMPAT_H

/* A field of p: a direct load where p is trusted (a tp_btf argument), else a probe read, a
 * helper call. `trusted` is a constant at every use: only one of the two is built. */
#define FIELD_READ(p, field, trusted) ((trusted) ? (p)->field : BPF_CORE_READ(p, field))

#ifdef NETIO_COMPAT
/* current as an untrusted pointer (bpf_get_current_task_btf is 5.11): fields by probe read */
#define current_task() ((struct task_struct *)bpf_get_current_task())
#define TASK_READ(task, field) BPF_CORE_READ(task, field)
/* Counts go straight into the process's statistics, one copy for all CPUs there (maps.bpf.h): an
 * atomic add that returns nothing, which every kernel has. */
#define COUNT_ADD(lvalue, v) __sync_fetch_and_add(&(lvalue), (v))
#else
#define current_task() bpf_get_current_task_btf()
#define TASK_READ(task, field) ((task)->field)
/* Counts go into the thread's own storage: only the thread writes them. */
#define COUNT_ADD(lvalue, v) ((lvalue) += (v))
#endif

#endif
