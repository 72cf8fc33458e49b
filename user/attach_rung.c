// SPDX-License-Identifier: GPL-2.0
/* One rung of the ladder tried (try_rung): every row's target on this kernel resolved, the
 * rung's object opened with only the programs of the probe points tried, loaded, and those
 * programs attached; a probe point that fails on the rung leaves nothing attached there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "attach_internal.h"
#include "kretprobes.h"
#include "builds.h"
#include "cgroups.h"
#include "copy_fentry.skel.h"
#include "copy_kprobe.skel.h"
#include "copy_tp.skel.h"
#include "zc_skb.skel.h"
#include "rx_mapped.skel.h"
#include "syscalls.skel.h"
#include "copy_fentry.compat.skel.h"
#include "copy_kprobe.compat.skel.h"
#include "copy_tp.compat.skel.h"
#include "zc_skb.compat.skel.h"
#include "rx_mapped.compat.skel.h"
#include "syscalls.compat.skel.h"

OPEN_IN_BUILD(copy_fentry)
OPEN_IN_BUILD(copy_kprobe)
OPEN_IN_BUILD(copy_tp)
OPEN_IN_BUILD(zc_skb)
OPEN_IN_BUILD(rx_mapped)
OPEN_IN_BUILD(syscalls)

/* A skeleton of any kind through one interface: the ladder opens several kinds alike. */
#define SKELETON(x)								\
	static void *x##_open(void) { return x##_open_build(); }		\
	static struct bpf_object *x##_object(void *skel)			\
	{									\
		return ((struct x##_bpf *)skel)->obj;				\
	}									\
	static void x##_destroy(void *skel) { x##_bpf__destroy(skel); }
SKELETON(copy_fentry)
SKELETON(copy_kprobe)
SKELETON(copy_tp)
SKELETON(zc_skb)
SKELETON(rx_mapped)
SKELETON(syscalls)

static const struct objdef {
	void *(*open)(void);
	struct bpf_object *(*object)(void *skel);
	void (*destroy)(void *skel);
} objdefs[OBJ_NR] = {
	[OBJ_FENTRY] = { copy_fentry_open, copy_fentry_object, copy_fentry_destroy },
	[OBJ_KPROBE] = { copy_kprobe_open, copy_kprobe_object, copy_kprobe_destroy },
	[OBJ_TP] = { copy_tp_open, copy_tp_object, copy_tp_destroy },
	[OBJ_TP_SKB] = { zc_skb_open, zc_skb_object, zc_skb_destroy },
	[OBJ_TP_RXMAP] = { rx_mapped_open, rx_mapped_object, rx_mapped_destroy },
	[OBJ_SYSCALLS] = { syscalls_open, syscalls_object, syscalls_destroy },
};

/* A loaded object whose programs attached is kept in t, in its kind's slot. Each kind is
 * kept at most once: a copy object belongs to one rung, tried once, and the syscalls object
 * is tried rung after rung only until one attaches. */
static void keep_obj(struct tracer_bpf *t, enum objkind k, void *skel)
{
	void **slot = k == OBJ_FENTRY ? (void **)&t->copy_fentry :
		      k == OBJ_KPROBE ? (void **)&t->copy_kprobe :
		      k == OBJ_TP ? (void **)&t->copy_tp :
		      k == OBJ_TP_SKB ? (void **)&t->zc_skb :
		      k == OBJ_TP_RXMAP ? (void **)&t->rx_mapped : (void **)&t->syscalls;

	if (!*slot)
		*slot = skel;
	/* else (never): leaked rather than freed under the records of its attached programs */
}

/* enum how by name, for messages and the records' targets */
static const char *how_names[] = { "fentry", "fexit", "kprobe", "kretprobe", "tp_btf", "raw_tp",
				   "cgroup", "tracepoint" };

/* Whether tracefs has event "category/name" (CONFIG_FTRACE_SYSCALLS for the syscalls'). */
static bool tracefs_event_exists(const char *event)
{
	char category[64];
	const char *slash = strchr(event, '/');

	if (!slash || slash - event >= (long)sizeof(category))
		return false;
	snprintf(category, sizeof(category), "%.*s", (int)(slash - event), event);
	return tracefs_event_id(category, slash + 1) >= 0;
}

static struct bpf_program *row_prog(const struct row *r, void *skel)
{
	return *(struct bpf_program **)((char *)skel + r->prog_off);
}

/* Why probe point pp failed at rung r, added to what failed before it:
 * "fentry: <why>; kprobe: <why>" (the snapshot's attach_why, a forced rung's message). */
void note_failure(struct ladder *l, enum probe_point pp, enum rung r, const char *fmt, ...)
{
	char *why = l->fail_reason[pp];
	size_t len = strlen(why), size = sizeof(l->fail_reason[pp]);
	va_list ap;

	if (len >= size - 1)
		return;
	len += snprintf(why + len, size - len, "%s%s: ", len ? "; " : "",
			r == RUNG_FENTRY ? "fentry" : rung_name(r));
	if (len >= size - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(why + len, size - len, fmt, ap);
	va_end(ap);
}

static bool is_traceable(const struct ladder *l, const char *name)
{
	return !l->traceable || ksyms_has(l->traceable, name);
}

/* Experiments (the overhead of one program, a lower rung): NETIO_TRACER_SKIP lists programs
 * to leave out, comma separated; an entry also leaves out its other builds (tp_xmit,
 * tp_xmit_pre62). */
static bool skipped(const char *prog)
{
	const char *skip = getenv("NETIO_TRACER_SKIP"), *p = skip;

	while (p && *p) {
		size_t n = strcspn(p, ",");
		if (n && !strncmp(prog, p, n) && (!prog[n] || !strcmp(prog + n, "_pre62")))
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* What the compat build cannot load (bpf/compat.bpf.h): fexit programs that read the return value
 * with bpf_get_func_ret (5.17), and programs calling a kfunc (bpf_rdonly_cast is 6.2, later
 * than any kernel the compat build is for; on one that has it, the build is forced for a
 * test and must behave as on the kernels it is for). */
static bool compat_excludes(const struct row *r)
{
	return bpf_build() == BUILD_COMPAT && (r->obj == OBJ_FENTRY || r->kfunc);
}

static const char *resolve_row(const struct ladder *l, const struct row *r)
{
	const struct btf *btf = vmlinux_btf();

	if (skipped(r->prog) || compat_excludes(r) || (r->kfunc && !btf_func_exists(btf, r->kfunc)) ||
	    (r->full_level && l->no_latency))
		return NULL;

	for (int i = 0; r->targets[i]; i++) {
		const char *t = r->targets[i];

		if (r->param.name && !btf_func_param_is(btf, t, r->param.idx, r->param.name))
			continue;
		switch (r->how) {
		case H_FENTRY:
		case H_FEXIT:
			/* BTF says the function exists with this name, kallsyms that it is
			 * not inlined away */
			if (btf_func_exists(btf, t) && ksyms_has(l->ksyms, t) && is_traceable(l, t))
				return t;
			break;
		case H_KPROBE:
		case H_KRETPROBE: {
			const char *s = l->kprobes ? ksyms_find_func(l->ksyms, t) : NULL;
			if (s && is_traceable(l, s))
				return s;
			break;
		}
		case H_TP_BTF:
			if (btf_tracepoint_exists(btf, t))
				return t;
			break;
		case H_TRACEPOINT:
			/* one syscall's tracepoint puts every syscall of the machine on the slow
			 * path (bench/NOTES.md), as sys_enter does: only where that is paid anyway */
			if (!strncmp(t, "syscalls/", 9) && l->no_latency)
				break;
			if (tracefs_event_exists(t))
				return t;
			break;
		case H_RAW_TP:
		case H_CGROUP:
			return t;	/* the attach tells */
		}
	}
	return NULL;
}

/* Every row's target on this kernel; a fallback row stands in only for a group none of
 * whose other rows resolved. */
void resolve_rows(struct ladder *l)
{
	const struct row *rows = ladder_rows;

	for (int i = 0; i < ladder_nrows; i++)
		l->resolved[i] = resolve_row(l, &rows[i]);
	for (int i = 0; i < ladder_nrows; i++) {
		if (!rows[i].fallback || !l->resolved[i])
			continue;
		for (int k = 0; k < ladder_nrows; k++)
			if (k != i && !rows[k].fallback && rows[k].rung == rows[i].rung &&
			    rows[k].pp == rows[i].pp && rows[k].group == rows[i].group &&
			    l->resolved[k])
				l->resolved[i] = NULL;
	}
}

/* The send scope (in_send map) is opened by the tx_bytes programs of the fentry and kprobe
 * rungs; tx_copy and pinning at those rungs count only inside it. */
unsigned deps_of(enum probe_point pp, enum rung r)
{
	if ((r == RUNG_FENTRY || r == RUNG_KPROBE) && (pp == PP_TX_COPY || pp == PP_PINNING))
		return 1u << PP_TX_BYTES;
	return 0;
}

bool scope_available(const struct tracer_bpf *t)
{
	return t->rung[PP_TX_BYTES] == RUNG_FENTRY || t->rung[PP_TX_BYTES] == RUNG_KPROBE;
}

/* Can pp be tried at rung r: the required rows resolve, each group has a member, and at
 * least one row resolves. */
bool pp_resolvable(const struct ladder *l, enum probe_point pp, enum rung r)
{
	const struct row *rows = ladder_rows;
	bool any = false, group_seen[4] = { 0 }, group_hit[4] = { 0 };

	for (int i = 0; i < ladder_nrows; i++) {
		if (rows[i].pp != pp || rows[i].rung != r)
			continue;
		if (rows[i].required && !l->resolved[i])
			return false;
		group_seen[rows[i].group] = true;
		if (l->resolved[i]) {
			group_hit[rows[i].group] = true;
			any = true;
		}
	}
	for (int g = 1; g < 4; g++)
		if (group_seen[g] && !group_hit[g])
			return false;	/* no member of the group resolved */
	return any;
}

/* The probe points of mask whose rows at rung r are in objects of kind k (a point's rows at a
 * rung are in one object). */
static unsigned obj_pps(enum rung r, enum objkind k, unsigned mask)
{
	unsigned in = 0;

	for (int i = 0; i < ladder_nrows; i++)
		if (ladder_rows[i].rung == r && ladder_rows[i].obj == k)
			in |= 1u << ladder_rows[i].pp;
	return in & mask;
}

/* Open the object of kind k for rung r with the programs of the probe points in mask, load
 * it. Returns its skeleton, or NULL (-errno in *errp). */
static void *load_rung(struct ladder *l, enum rung r, enum objkind k, unsigned mask, int *errp)
{
	const struct row *rows = ladder_rows;
	void *skel = objdefs[k].open();
	struct bpf_object *obj;
	struct bpf_program *prog;
	int err;

	*errp = 0;
	if (!skel) {
		*errp = -errno ? -errno : -EINVAL;
		return NULL;
	}
	obj = objdefs[k].object(skel);
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, false);
	for (int i = 0; i < ladder_nrows; i++) {
		if (rows[i].rung != r || rows[i].obj != k || !(mask & (1u << rows[i].pp)) ||
		    !l->resolved[i])
			continue;
		prog = row_prog(&rows[i], skel);
		bpf_program__set_autoload(prog, true);
		if (rows[i].how == H_FENTRY || rows[i].how == H_FEXIT)
			bpf_program__set_attach_target(prog, 0, l->resolved[i]);
	}
	if (obj_reuse_maps(l->t, obj)) {
		*errp = -errno ? -errno : -EINVAL;
		objdefs[k].destroy(skel);
		return NULL;
	}
	err = bpf_object__load(obj);
	if (err) {
		*errp = err;
		objdefs[k].destroy(skel);
		return NULL;
	}
	obj_register_maps(l->t, obj);
	return skel;
}

struct bpf_link *attach_root_cgroup(struct bpf_program *prog)
{
	char root[PATH_MAX];
	struct bpf_link *link;
	int fd, e;

	if (cgroup2_root(root, sizeof(root))) {
		errno = ENOENT;		/* no cgroup2 mount */
		return NULL;
	}
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	link = bpf_program__attach_cgroup(prog, fd);
	e = errno;
	close(fd);	/* the link holds the cgroup */
	errno = e;
	return link;
}

static struct bpf_link *attach_row(const struct ladder *l, void *skel, int i, int *errp)
{
	const struct row *rows = ladder_rows;
	struct bpf_program *prog = row_prog(&rows[i], skel);
	struct bpf_link *link;

	switch (rows[i].how) {
	case H_KPROBE:
	case H_KRETPROBE:
		link = kprobe_attach(prog, rows[i].how == H_KRETPROBE, l->resolved[i]);
		break;
	case H_CGROUP:
		link = attach_root_cgroup(prog);
		break;
	default:
		link = bpf_program__attach(prog);
	}
	if (!link) {
		*errp = errno ? -errno : -EINVAL;
		return NULL;
	}
	return link;
}

static void drop_pp_links(struct tracer_bpf *t, enum probe_point pp, int from)
{
	for (int j = from; j < t->nprogs; j++) {
		if (t->progs[j].pp == pp && t->progs[j].lazy)
			t->progs[j].lazy = false;	/* the point failed: never attach it */
		if (t->progs[j].pp == pp && t->progs[j].link) {
			bpf_link__destroy(t->progs[j].link);
			t->progs[j].link = NULL;
		}
	}
}

/* The record of row i's program, attached by link (NULL: on demand, by tracer_bpf_poll()). */
static void record_prog(struct ladder *l, void *skel, int i, struct bpf_link *link)
{
	const struct row *r = &ladder_rows[i];
	struct attached_prog *ap = &l->t->progs[l->t->nprogs++];

	memset(ap, 0, sizeof(*ap));
	snprintf(ap->name, sizeof(ap->name), "%s", r->prog);
	snprintf(ap->target, sizeof(ap->target), "%s:%s%s", how_names[r->how], l->resolved[i],
		 link ? "" : " (on demand)");
	ap->prog_fd = bpf_program__fd(row_prog(r, skel));
	ap->pp = r->pp;
	ap->link = link;
	if (!link) {
		ap->lazy = true;
		ap->bpf_prog = row_prog(r, skel);
		ap->wanted_fd = -1;	/* set once the shared maps are known */
		return;
	}
	ap->prog = row_prog(r, skel);
	ap->cgroup = r->how == H_CGROUP;
	if (r->how == H_KPROBE || r->how == H_KRETPROBE) {
		snprintf(ap->kfunc, sizeof(ap->kfunc), "%s", l->resolved[i]);
		ap->kretprobe = r->how == H_KRETPROBE;
	}
}

/* Attach the rows of probe point pp at rung r from a loaded skeleton of kind k. Returns the
 * rows attached (0 with the reason in fail_reason when a required row or every row of a
 * group failed). */
static int attach_pp(struct ladder *l, void *skel, enum rung r, enum objkind k,
		     enum probe_point pp)
{
	const struct row *rows = ladder_rows;
	struct tracer_bpf *t = l->t;
	int attached = 0, group_hits[4] = { 0 }, group_seen[4] = { 0 };

	for (int i = 0; i < ladder_nrows; i++) {
		int err = 0;
		struct bpf_link *link;

		if (rows[i].rung != r || rows[i].obj != k || rows[i].pp != pp || !l->resolved[i])
			continue;
		if (rows[i].group)
			group_seen[rows[i].group]++;
		if (rows[i].lazy) {
			if (t->nprogs < MAX_ATTACHED)
				record_prog(l, skel, i, NULL);
			if (rows[i].group)	/* attached later: it stands for its group */
				group_hits[rows[i].group]++;
			continue;
		}
		link = attach_row(l, skel, i, &err);
		if (!link && rows[i].required) {
			note_failure(l, pp, r, "attaching %s %s failed: %s",
				     how_names[rows[i].how], l->resolved[i], strerror(-err));
			return 0;
		}
		if (!link)
			continue;
		if (t->nprogs == MAX_ATTACHED) {
			bpf_link__destroy(link);
			return 0;
		}
		record_prog(l, skel, i, link);
		attached++;
		if (rows[i].group)
			group_hits[rows[i].group]++;
	}
	for (int g = 1; g < 4; g++)
		if (group_seen[g] && !group_hits[g]) {
			note_failure(l, pp, r, "no function of its group %d could be attached", g);
			return 0;
		}
	return attached;
}

/* Page pinning counts pages where a *_user_pages_fast function is probed. */
static void note_pinned_pages(struct tracer_bpf *t, int first)
{
	for (int j = first; j < t->nprogs; j++)
		if (t->progs[j].pp == PP_PINNING && t->progs[j].link &&
		    strstr(t->progs[j].target, "user_pages_fast"))
			t->pinned_pages_counted = true;
}

/* Attach the rows of the probe points in mask from a loaded skeleton; returns the mask of
 * probe points that attached completely. */
static unsigned attach_rung(struct ladder *l, void *skel, enum rung r, enum objkind k,
			    unsigned mask)
{
	struct tracer_bpf *t = l->t;
	unsigned ok = 0;
	int first = t->nprogs, w;

	for (int pp = 0; pp < PP_NR; pp++) {
		if (!(mask & (1u << pp)))
			continue;
		/* a dependency that did not attach in this rung nor before */
		if ((deps_of(pp, r) & (1u << PP_TX_BYTES)) && !scope_available(t) &&
		    !(ok & (1u << PP_TX_BYTES))) {
			note_failure(l, pp, r, "needs tx_bytes at the fentry or kprobe rung");
			continue;
		}
		if (!attach_pp(l, skel, r, k, pp)) {
			drop_pp_links(t, pp, first);
			continue;
		}
		ok |= 1u << pp;
		t->rung[pp] = r;
		if (pp == PP_PINNING && (r == RUNG_FENTRY || r == RUNG_KPROBE))
			note_pinned_pages(t, first);
	}
	/* compact: forget entries whose link was dropped (and lazy ones of failed points) */
	w = first;
	for (int j = first; j < t->nprogs; j++)
		if (t->progs[j].link || (t->progs[j].lazy && (ok & (1u << t->progs[j].pp))))
			t->progs[w++] = t->progs[j];
	t->nprogs = w;
	return ok;
}

/* When the probe points of mask do not load together: those that load on their own (with
 * their dependencies), the others' reasons noted. */
static unsigned loadable_alone(struct ladder *l, enum rung r, enum objkind k, unsigned mask)
{
	unsigned ok = 0;
	int err;

	for (int pp = 0; pp < PP_NR; pp++) {
		if (!(mask & (1u << pp)))
			continue;
		unsigned m = (1u << pp) | (deps_of(pp, r) & mask);
		void *skel = load_rung(l, r, k, m, &err);
		if (skel) {
			ok |= 1u << pp;
			objdefs[k].destroy(skel);
		} else {
			note_failure(l, pp, r, "loading its programs failed: %s", strerror(-err));
		}
	}
	return ok;
}

/* Try the probe points in mask at rung r from the object of kind k; returns those that
 * attached. */
static unsigned try_obj(struct ladder *l, enum rung r, enum objkind k, unsigned mask)
{
	unsigned ok;
	void *skel;
	int err;

	if (!mask)
		return 0;
	skel = load_rung(l, r, k, mask, &err);
	if (!skel && !(mask & (mask - 1))) {	/* one probe point: alone is what failed */
		note_failure(l, __builtin_ctz(mask), r, "loading its programs failed: %s",
			     strerror(-err));
		return 0;
	}
	if (!skel) {
		mask = loadable_alone(l, r, k, mask);
		if (!mask)
			return 0;
		skel = load_rung(l, r, k, mask, &err);
		if (!skel)
			return 0;
	}
	ok = attach_rung(l, skel, r, k, mask);
	if (ok)
		keep_obj(l->t, k, skel);
	else
		objdefs[k].destroy(skel);
	return ok;
}

/* Try the probe points in mask at rung r, each from the object its rows are in; returns those
 * that attached. */
unsigned try_rung(struct ladder *l, enum rung r, unsigned mask)
{
	unsigned ok = 0;

	for (int k = OBJ_FENTRY; k < OBJ_NR; k++)
		ok |= try_obj(l, r, k, obj_pps(r, k, mask));
	return ok;
}
