/* What the files of the attach ladder share, and the rest of the tracer does not see (that is
 * attach.h): attach.c (the names and the table of rows), attach_rung.c (one rung tried:
 * targets resolved, an object loaded, its programs attached), attach_climb.c (the ladder
 * climbed at load), attach_objects.c (the objects beside the ladder's, the maps they share,
 * closing) and attach_runtime.c (what changes once loaded: detach, attach again, on demand). */
#ifndef NETIO_ATTACH_INTERNAL_H
#define NETIO_ATTACH_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "trace_helpers.h"

/* The BPF objects the ladder's rows live in. */
/* The objects the ladder loads: a copy object per rung (the tracepoint rung's in three, by
 * job: OBJ_TP its send and receive calls, OBJ_TP_SKB its zero-copy skbs, OBJ_TP_RXMAP its
 * getsockopt receive), and the syscall hooks'. */
enum objkind { OBJ_FOLLOW, OBJ_FENTRY, OBJ_KPROBE, OBJ_TP, OBJ_TP_SKB, OBJ_TP_RXMAP, OBJ_SYSCALLS,
	       OBJ_NR };

/* H_CGROUP: a cgroup program (cgroup/getsockopt), attached to the root cgroup: every
 * process's calls pass it, the program itself keeps the followed ones. H_TRACEPOINT: a
 * tracefs event ("category/name"), such as one syscall's own (syscalls/sys_exit_splice). */
enum how { H_FENTRY, H_FEXIT, H_KPROBE, H_KRETPROBE, H_TP_BTF, H_RAW_TP, H_CGROUP, H_TRACEPOINT };

struct row {
	enum rung rung;
	enum probe_point pp;
	enum objkind obj;
	const char *prog;	/* the program's name, for messages and the records */
	size_t prog_off;	/* where the skeleton of obj holds the program */
	enum how how;
	const char *targets[4];	/* candidates, in order; the first present is used */
	bool required;		/* the probe point needs it at this rung */
	int group;		/* optional rows of one group: at least one must attach */
	bool fallback;		/* used only if no other row of its group resolves */
	bool lazy;		/* loaded with its probe point, attached by tracer_bpf_poll() */
	bool full_level;	/* runs for every event of its kind on the machine, to find a
				 * rare one: not at the counting level (--no-latency) */
	const char *kfunc;	/* a kfunc the program calls: the row resolves only with it */
	/* a parameter of the target as the kernel's BTF names it: the row resolves only there
	 * (a prototype that changed) */
	struct { int idx; const char *name; } param;
};

/* attach.c: the table, ladder_nrows rows (at most LADDER_MAX_ROWS, checked where it is) */
#define LADDER_MAX_ROWS 128
extern const struct row *const ladder_rows;
extern const int ladder_nrows;

/* Climbing the ladder (tracer_bpf_open): the target each row resolved to on this kernel
 * (NULL: absent), the kernel's symbols, and why each probe point failed. */
struct ladder {
	struct tracer_bpf *t;
	const char *resolved[LADDER_MAX_ROWS];
	struct ksyms *ksyms;
	/* functions ftrace can patch (fentry needs it; kprobe events refuse notrace functions);
	 * NULL when tracefs does not let us read the list: then the attach tells */
	struct ksyms *traceable;
	char fail_reason[PP_NR][512];	/* for the message of a forced rung */
	bool kprobes;			/* the kernel has kprobes at all */
	bool no_latency;		/* --no-latency: no syscall tracepoint is wanted */
};

/* attach_rung.c */
void note_failure(struct ladder *l, enum probe_point pp, enum rung r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void resolve_rows(struct ladder *l);
bool pp_resolvable(const struct ladder *l, enum probe_point pp, enum rung r);
unsigned deps_of(enum probe_point pp, enum rung r);
bool scope_available(const struct tracer_bpf *t);
unsigned try_rung(struct ladder *l, enum rung r, unsigned mask);

/* attach_objects.c */
void route_libbpf_messages(bool verbose);
int obj_reuse_maps(const struct tracer_bpf *t, struct bpf_object *obj);
void obj_register_maps(struct tracer_bpf *t, struct bpf_object *obj);
int open_follow(struct tracer_bpf *t, char *err, size_t errlen);
int attach_thread_flush(struct tracer_bpf *t, char *err, size_t errlen);
void find_shared_maps(struct tracer_bpf *t);

/* A cgroup program attached to the root of the cgroup v2 hierarchy (NULL with errno). */
struct bpf_link *attach_root_cgroup(struct bpf_program *prog);

/* attach_runtime.c */
void defer_sys_exit(struct tracer_bpf *t);
void mark_splices_without_sys_enter(struct tracer_bpf *t);

/* followed_tgids.c: the buckets of followed tgids mapped once the objects loaded (their map's
 * fd, -1 where none), and unmapped at close */
void followed_tgids_open(struct tracer_bpf *t, int buckets_fd);
void followed_tgids_close(struct tracer_bpf *t);

#endif
