// SPDX-License-Identifier: GPL-2.0
/* The BPF objects beside the ladder's rows, and what all of them share: libbpf's messages,
 * the maps shared by name between objects, the filter's fork and cgroup handlers
 * (follow.bpf.c), the flush of per-thread counts (flush.bpf.c); and closing everything. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach_internal.h"
#include "kretprobes.h"
#include "sockets.h"
#include "builds.h"
#include "follow.skel.h"
#include "copy_fentry.skel.h"
#include "copy_kprobe.skel.h"
#include "copy_tp.skel.h"
#include "zc_skb.skel.h"
#include "rx_mapped.skel.h"
#include "syscalls.skel.h"
#include "flush.skel.h"
#include "follow.compat.skel.h"
#include "flush.compat.skel.h"

OPEN_IN_BUILD(follow)
OPEN_IN_BUILD(flush)

/* ---- libbpf messages: shown with --verbose, the last warning kept for error messages ---
 * (module state: libbpf_set_print() takes a function and no context of ours) */

static bool libbpf_verbose;
static char last_libbpf_warning[256];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !libbpf_verbose)
		return 0;
	if (level == LIBBPF_WARN) {
		va_list aq;
		va_copy(aq, ap);
		vsnprintf(last_libbpf_warning, sizeof(last_libbpf_warning), fmt, aq);
		va_end(aq);
		last_libbpf_warning[strcspn(last_libbpf_warning, "\n")] = 0;
	}
	if (!libbpf_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* From now on libbpf's messages go through libbpf_print (verbose: all of them on stderr). */
void route_libbpf_messages(bool verbose)
{
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);
}

/* ---- maps shared by name between objects ----------------------------------------------- */

static int shared_map_fd(const struct tracer_bpf *t, const char *name)
{
	for (int i = 0; i < t->nshared; i++)
		if (!strcmp(t->shared[i].name, name))
			return t->shared[i].fd;
	return -1;
}

/* Before obj loads: its maps that an earlier object created are those, not new ones. */
int obj_reuse_maps(const struct tracer_bpf *t, struct bpf_object *obj)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		int fd;
		if (bpf_map__is_internal(map))
			continue;
		fd = shared_map_fd(t, bpf_map__name(map));
		if (fd >= 0 && bpf_map__reuse_fd(map, fd))
			return -1;
	}
	return 0;
}

/* After obj loaded: the maps it created, for the objects that load after it. */
void obj_register_maps(struct tracer_bpf *t, struct bpf_object *obj)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		if (bpf_map__is_internal(map) || shared_map_fd(t, bpf_map__name(map)) >= 0)
			continue;
		if (t->nshared == MAX_SHARED_MAPS)
			break;
		snprintf(t->shared[t->nshared].name, sizeof(t->shared[0].name), "%s",
			 bpf_map__name(map));
		t->shared[t->nshared].fd = dup(bpf_map__fd(map));
		t->nshared++;
	}
}

/* A follow.bpf.c handler: its tp_btf program, else its raw tracepoint twin. */
struct follow_handler {
	const char *tp;
	size_t btf_off, raw_off;	/* where the skeleton holds each program */
};
#define FOLLOW_HANDLER(tp_, btf, raw)						\
	{ .tp = tp_, .btf_off = offsetof(struct follow_bpf, progs.btf),		\
	  .raw_off = offsetof(struct follow_bpf, progs.raw) }
static const struct follow_handler fork_handler =
	FOLLOW_HANDLER("sched_process_fork", fork_btf, fork_raw);
static const struct follow_handler cgroup_handler =
	FOLLOW_HANDLER("cgroup_attach_task", cgroup_attach_btf, cgroup_attach_raw);

static struct bpf_program *follow_prog(struct follow_bpf *skel, size_t off)
{
	return *(struct bpf_program **)((char *)skel + off);
}

/* Loads one instance of follow.bpf.c with only h's program, over the maps already shared
 * (the first instance creates them), and attaches it. Returns the skeleton, or NULL. */
static struct follow_bpf *attach_follow(struct tracer_bpf *t, const struct follow_handler *h)
{
	for (int raw = 0; raw < 2 && t->nprogs < MAX_ATTACHED; raw++) {
		struct follow_bpf *skel = follow_open_build();
		struct bpf_program *prog, *p;
		struct bpf_link *link;
		struct attached_prog *ap;

		if (!skel)
			break;
		prog = follow_prog(skel, raw ? h->raw_off : h->btf_off);
		bpf_object__for_each_program(p, skel->obj)
			bpf_program__set_autoload(p, p == prog);
		link = obj_reuse_maps(t, skel->obj) || follow_bpf__load(skel) ? NULL :
		       bpf_program__attach(prog);
		if (!link) {
			follow_bpf__destroy(skel);
			continue;
		}
		obj_register_maps(t, skel->obj);
		ap = &t->progs[t->nprogs++];
		snprintf(ap->name, sizeof(ap->name), "%s", bpf_program__name(prog));
		snprintf(ap->target, sizeof(ap->target), "%s:%s", raw ? "raw_tp" : "tp_btf", h->tp);
		ap->prog_fd = bpf_program__fd(prog);
		ap->prog = prog;
		ap->pp = PP_NR;
		ap->link = link;
		return skel;
	}
	return NULL;
}

/* The filter's maps and the fork handler. */
int open_follow(struct tracer_bpf *t, char *err, size_t errlen)
{
	t->follow = attach_follow(t, &fork_handler);
	if (t->follow)
		return 0;
	snprintf(err, errlen, "cannot load the filter and fork handler (sched_process_fork): %s%s%s",
		 strerror(errno), last_libbpf_warning[0] ? " -- libbpf: " : "", last_libbpf_warning);
	return -1;
}

int tracer_bpf_follow_cgroups(struct tracer_bpf *t, char *err, size_t errlen)
{
	if (t->follow_cgroups)
		return 0;	/* a second --cgroup */
	if (t->followed_cgroups < 0) {
		snprintf(err, errlen, "--cgroup: no followed_cgroups map");
		return -1;
	}
	t->follow_cgroups = attach_follow(t, &cgroup_handler);
	if (t->follow_cgroups)
		return 0;
	snprintf(err, errlen, "--cgroup: cannot attach the cgroup handler (cgroup_attach_task): "
		 "%s%s%s", strerror(errno), last_libbpf_warning[0] ? " -- libbpf: " : "",
		 last_libbpf_warning);
	return -1;
}

/* How many copies of a value the map holds: one per possible CPU for the per-CPU types. */
static int map_value_copies(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return 1;
	if (info.type == BPF_MAP_TYPE_PERCPU_HASH || info.type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	    info.type == BPF_MAP_TYPE_LRU_PERCPU_HASH)
		return libbpf_num_possible_cpus();
	return 1;
}

/* The shared maps the rest of the tracer reads and writes, and the on-demand programs'
 * conditions. */
void find_shared_maps(struct tracer_bpf *t)
{
#define MAP_FD(field, name) { offsetof(struct tracer_bpf, field), name }
	static const struct { size_t off; const char *name; } fds[] = {
		MAP_FD(followed_tgids, "followed_tgids"), MAP_FD(followed_netns, "followed_netns"),
		MAP_FD(followed_cgroups, "followed_cgroups"), MAP_FD(filter_gen, "filter_gen"),
		MAP_FD(counters, "netio_counters"), MAP_FD(tgid_stats, "tgid_stats"),
		MAP_FD(tgid_hist, "tgid_hist"), MAP_FD(tgid_hist_spill, "tgid_hist_spill"),
		MAP_FD(tgid_spill, "tgid_spill"),
		MAP_FD(netns_stats, "netns_stats"),
		MAP_FD(in_send, "in_send"), MAP_FD(sk_owner, "sk_owner"),
		MAP_FD(zc_state, "zc_state"), MAP_FD(exit_wanted, "exit_wanted"),
		MAP_FD(latency_sample, "latency_sample"), MAP_FD(skb_progs, "skb_progs"),
	};
#undef MAP_FD

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		*(int *)((char *)t + fds[i].off) = shared_map_fd(t, fds[i].name);
	followed_tgids_open(t, shared_map_fd(t, "follow_buckets"));
	t->tgid_stats_copies = map_value_copies(t->tgid_stats);
	t->tgid_hist_copies = map_value_copies(t->tgid_hist);
	sockets_open_ends(t);
	for (int i = 0; i < t->nprogs; i++)
		if (t->progs[i].lazy && is_tcp_probe(t->progs[i].name))
			t->progs[i].wanted_fd = t->zc_state;
}

/* The syscall hooks and the tracepoint rung's socket-layer programs count in the thread's
 * storage (bpf/maps.bpf.h, thread_counts): flush.bpf.c adds it to the thread's process when the
 * thread exits, and over every live thread before each snapshot and reset (its task iterator,
 * run by tracer_bpf_flush_threads). 0, or -1 with err filled: without the flush those counts would be lost. */
int attach_thread_flush(struct tracer_bpf *t, char *err, size_t errlen)
{
	struct flush_bpf *skel;
	struct attached_prog *ap;

	if (!t->copy_tp && !t->zc_skb && !t->syscalls)
		return 0;
	skel = flush_open_build();
	if (!skel || obj_reuse_maps(t, skel->obj) || flush_bpf__load(skel))
		goto fail;
	if (t->nprogs == MAX_ATTACHED) {
		errno = E2BIG;
		goto fail;
	}
	ap = &t->progs[t->nprogs];
	memset(ap, 0, sizeof(*ap));
	ap->link = bpf_program__attach(skel->progs.tp_thread_exit);
	t->flush_iter = ap->link ? bpf_program__attach_iter(skel->progs.flush_threads, NULL) : NULL;
	if (!t->flush_iter) {
		bpf_link__destroy(ap->link);
		ap->link = NULL;
		goto fail;
	}
	t->nprogs++;
	t->kernel_counts = bpf_build() == BUILD_STORAGE;
	snprintf(ap->name, sizeof(ap->name), "tp_thread_exit");
	snprintf(ap->target, sizeof(ap->target), "tp_btf:sched_process_exit");
	ap->prog = skel->progs.tp_thread_exit;
	ap->prog_fd = bpf_program__fd(ap->prog);
	ap->pp = PP_NR;
	t->flush = skel;
	return 0;
fail:
	snprintf(err, errlen, "cannot attach the flush of per-thread counts (sched_process_exit, "
		 "iter/task): %s%s%s", strerror(errno), last_libbpf_warning[0] ? " -- libbpf: " : "",
		 last_libbpf_warning);
	flush_bpf__destroy(skel);
	return -1;
}

/* *pp destroyed and forgotten (GLib's g_clear_pointer): a failed climb closes, and the
 * tracer's teardown closes again, which must then find nothing left to destroy. */
#define CLEAR_POINTER(pp, destroy)		\
	do {					\
		destroy(*(pp));			\
		*(pp) = NULL;			\
	} while (0)

void tracer_bpf_close(struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs; i++)
		bpf_link__destroy(t->progs[i].link);
	t->nprogs = 0;
	CLEAR_POINTER(&t->flush_iter, bpf_link__destroy);
	CLEAR_POINTER(&t->flush, flush_bpf__destroy);
	CLEAR_POINTER(&t->follow, follow_bpf__destroy);
	CLEAR_POINTER(&t->follow_cgroups, follow_bpf__destroy);
	CLEAR_POINTER(&t->copy_fentry, copy_fentry_bpf__destroy);
	CLEAR_POINTER(&t->copy_kprobe, copy_kprobe_bpf__destroy);
	CLEAR_POINTER(&t->copy_tp, copy_tp_bpf__destroy);
	CLEAR_POINTER(&t->zc_skb, zc_skb_bpf__destroy);
	CLEAR_POINTER(&t->rx_mapped, rx_mapped_bpf__destroy);
	CLEAR_POINTER(&t->syscalls, syscalls_bpf__destroy);
	CLEAR_POINTER(&t->tcp_ends_ring, ring_buffer__free);
	kretprobes_remove();	/* their links are gone: the events are free */
	followed_tgids_close(t);
	for (int i = 0; i < t->nshared; i++)
		close(t->shared[i].fd);
	t->nshared = 0;
}
