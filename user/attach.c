// SPDX-License-Identifier: GPL-2.0
/* The attach ladder: see attach.h and docs/DESIGN.md.
 *
 * Each BPF object is opened through its skeleton. The ladder's table names each program as a
 * field of its object's skeleton (ROW below), so a program that does not exist does not
 * compile; the ladder then loads, for the rung it tries, only the programs of the probe points
 * it tries, and attaches them to the first target of theirs this kernel has. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "netio.h"
#include "trace_helpers.h"
#include "builds.h"
#include "follow.skel.h"
#include "copy_fentry.skel.h"
#include "copy_kprobe.skel.h"
#include "copy_tp.skel.h"
#include "syscalls.skel.h"
#include "flush.skel.h"
#include "follow.compat.skel.h"
#include "copy_fentry.compat.skel.h"
#include "copy_kprobe.compat.skel.h"
#include "copy_tp.compat.skel.h"
#include "syscalls.compat.skel.h"
#include "flush.compat.skel.h"

static const char *rung_names[RUNG_NR] = {
	[RUNG_FENTRY] = "fentry", [RUNG_KPROBE] = "kprobe", [RUNG_TP_BTF] = "tp_btf",
	[RUNG_TRACEPOINT] = "tracepoint", [RUNG_INFERRED] = "inferred",
	[RUNG_UNAVAILABLE] = "unavailable", [RUNG_PERF_EVENT] = "perf_event",
};

static const char *pp_names[PP_NR] = {
	[PP_TX_BYTES] = "tx_bytes", [PP_TX_COPY] = "tx_copy", [PP_PINNING] = "pinning",
	[PP_FALLBACK_COPY] = "fallback_copy", [PP_ZC_COMPLETION] = "zc_completion",
	[PP_RX_COPY] = "rx_copy", [PP_SYSCALLS] = "syscalls", [PP_STACKS] = "stacks",
};

const char *rung_name(enum rung r)
{
	return r < RUNG_NR ? rung_names[r] : "?";
}

const char *pp_name(enum probe_point pp)
{
	return pp < PP_NR ? pp_names[pp] : "?";
}

int parse_attach_mode(const char *s, enum attach_mode *mode)
{
	if (!strcmp(s, "auto"))
		*mode = ATTACH_AUTO;
	else if (!strcmp(s, "fentry"))
		*mode = ATTACH_FENTRY;
	else if (!strcmp(s, "kprobe"))
		*mode = ATTACH_KPROBE;
	else if (!strcmp(s, "tracepoint") || !strcmp(s, "tp_btf"))
		*mode = ATTACH_TRACEPOINT;
	else
		return -1;
	return 0;
}

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

/* ---- objects: the skeletons ------------------------------------------------------------ */

enum objkind { OBJ_FOLLOW, OBJ_FENTRY, OBJ_KPROBE, OBJ_TP, OBJ_SYSCALLS, OBJ_NR };

OPEN_IN_BUILD(follow)
OPEN_IN_BUILD(copy_fentry)
OPEN_IN_BUILD(copy_kprobe)
OPEN_IN_BUILD(copy_tp)
OPEN_IN_BUILD(syscalls)
OPEN_IN_BUILD(flush)

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
SKELETON(syscalls)

static const struct objdef {
	void *(*open)(void);
	struct bpf_object *(*object)(void *skel);
	void (*destroy)(void *skel);
} objdefs[OBJ_NR] = {
	[OBJ_FENTRY] = { copy_fentry_open, copy_fentry_object, copy_fentry_destroy },
	[OBJ_KPROBE] = { copy_kprobe_open, copy_kprobe_object, copy_kprobe_destroy },
	[OBJ_TP] = { copy_tp_open, copy_tp_object, copy_tp_destroy },
	[OBJ_SYSCALLS] = { syscalls_open, syscalls_object, syscalls_destroy },
};

/* The object kind of each skeleton, for ROW. */
#define KIND_copy_fentry OBJ_FENTRY
#define KIND_copy_kprobe OBJ_KPROBE
#define KIND_copy_tp OBJ_TP
#define KIND_syscalls OBJ_SYSCALLS

/* A loaded object whose programs attached is kept in t, in its kind's slot. Each kind is
 * kept at most once: a copy object belongs to one rung, tried once, and the syscalls object
 * is tried rung after rung only until one attaches. */
static void keep_obj(struct tracer_bpf *t, enum objkind k, void *skel)
{
	void **slot = k == OBJ_FENTRY ? (void **)&t->copy_fentry :
		      k == OBJ_KPROBE ? (void **)&t->copy_kprobe :
		      k == OBJ_TP ? (void **)&t->copy_tp : (void **)&t->syscalls;

	if (!*slot)
		*slot = skel;
	/* else (never): leaked rather than freed under the records of its attached programs */
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
static int obj_reuse_maps(const struct tracer_bpf *t, struct bpf_object *obj)
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
static void obj_register_maps(struct tracer_bpf *t, struct bpf_object *obj)
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

/* ---- the ladder's table ------------------------------------------------------------------ */

enum how { H_FENTRY, H_FEXIT, H_KPROBE, H_KRETPROBE, H_TP_BTF, H_RAW_TP };
static const char *how_names[] = { "fentry", "fexit", "kprobe", "kretprobe", "tp_btf", "raw_tp" };

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
	const char *kfunc;	/* a kfunc the program calls: the row resolves only with it */
	/* a parameter of the target as the kernel's BTF names it: the row resolves only there
	 * (a prototype that changed) */
	struct { int idx; const char *name; } param;
};

/* A row's rung, probe point, program (a field of skeleton skel's progs), how it attaches and
 * its candidate targets; the flags follow by name. */
#define ROW(rung_, pp_, skel, prog_, how_, ...)					\
	.rung = rung_, .pp = pp_, .obj = KIND_##skel, .prog = #prog_,		\
	.prog_off = offsetof(struct skel##_bpf, progs.prog_), .how = how_,	\
	.targets = { __VA_ARGS__, NULL }

#define CAST "bpf_rdonly_cast"

static const struct row rows[] = {
	/* fentry/fexit */
	{ ROW(RUNG_FENTRY, PP_TX_BYTES, copy_fentry, fx_sendmsg_in, H_FENTRY, "tcp_sendmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_TX_BYTES, copy_fentry, fx_sendmsg_out, H_FEXIT, "tcp_sendmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_TX_BYTES, copy_fentry, fx_sendpage_out, H_FEXIT, "tcp_sendpage") },
	{ ROW(RUNG_FENTRY, PP_TX_BYTES, copy_fentry, fx_udp_sendmsg_in, H_FENTRY, "udp_sendmsg") },
	{ ROW(RUNG_FENTRY, PP_TX_BYTES, copy_fentry, fx_udp_sendmsg_out, H_FEXIT, "udp_sendmsg") },
	{ ROW(RUNG_FENTRY, PP_TX_COPY, copy_fentry, fx_copy_from_iter, H_FEXIT, "_copy_from_iter"), .group = 1 },
	{ ROW(RUNG_FENTRY, PP_TX_COPY, copy_fentry, fx_copy_from_iter_nc, H_FEXIT, "_copy_from_iter_nocache"), .group = 1 },
	{ ROW(RUNG_FENTRY, PP_TX_COPY, copy_fentry, fx_check_object_size, H_FENTRY, "__check_object_size"), .group = 1, .fallback = true },
	{ ROW(RUNG_FENTRY, PP_PINNING, copy_fentry, fx_zc_stream, H_FEXIT, "skb_zerocopy_iter_stream"), .required = true },
	{ ROW(RUNG_FENTRY, PP_PINNING, copy_fentry, fx_zc_sg, H_FEXIT, "__zerocopy_sg_from_iter") },
	{ ROW(RUNG_FENTRY, PP_PINNING, copy_fentry, fx_gup_fast, H_FEXIT, "get_user_pages_fast") },
	{ ROW(RUNG_FENTRY, PP_PINNING, copy_fentry, fx_pup_fast, H_FEXIT, "pin_user_pages_fast") },
	{ ROW(RUNG_FENTRY, PP_FALLBACK_COPY, copy_fentry, fx_copy_ubufs, H_FEXIT, "skb_copy_ubufs"), .required = true },
	{ ROW(RUNG_FENTRY, PP_ZC_COMPLETION, copy_fentry, fx_zc_callback, H_FENTRY, "__msg_zerocopy_callback"), .required = true },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_rx_copy, H_FEXIT, "skb_copy_datagram_iter"), .required = true },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp_recv_in, H_FENTRY, "udp_recvmsg"), .param = { 3, "flags" }, .group = 1 },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp_recv_in_noblock, H_FENTRY, "udp_recvmsg"), .param = { 3, "noblock" }, .group = 1 },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp_recv_out, H_FEXIT, "udp_recvmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp6_recv_in, H_FENTRY, "udpv6_recvmsg"), .param = { 3, "flags" } },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp6_recv_in_noblock, H_FENTRY, "udpv6_recvmsg"), .param = { 3, "noblock" } },
	{ ROW(RUNG_FENTRY, PP_RX_COPY, copy_fentry, fx_udp6_recv_out, H_FEXIT, "udpv6_recvmsg") },
	/* kprobe/kretprobe */
	{ ROW(RUNG_KPROBE, PP_TX_BYTES, copy_kprobe, kp_sendmsg_in, H_KPROBE, "tcp_sendmsg"), .required = true },
	{ ROW(RUNG_KPROBE, PP_TX_BYTES, copy_kprobe, kp_sendmsg_out, H_KRETPROBE, "tcp_sendmsg"), .required = true },
	{ ROW(RUNG_KPROBE, PP_TX_BYTES, copy_kprobe, kp_sendpage_out, H_KRETPROBE, "tcp_sendpage") },
	{ ROW(RUNG_KPROBE, PP_TX_BYTES, copy_kprobe, kp_sendmsg_in, H_KPROBE, "udp_sendmsg") },
	{ ROW(RUNG_KPROBE, PP_TX_BYTES, copy_kprobe, kp_sendmsg_out, H_KRETPROBE, "udp_sendmsg") },
	{ ROW(RUNG_KPROBE, PP_TX_COPY, copy_kprobe, kp_copy_from_iter, H_KRETPROBE, "_copy_from_iter"), .group = 1 },
	{ ROW(RUNG_KPROBE, PP_TX_COPY, copy_kprobe, kp_copy_from_iter, H_KRETPROBE, "_copy_from_iter_nocache"), .group = 1 },
	{ ROW(RUNG_KPROBE, PP_TX_COPY, copy_kprobe, kp_check_object_size, H_KPROBE, "__check_object_size"), .group = 1, .fallback = true },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_zc_stream, H_KRETPROBE, "skb_zerocopy_iter_stream"), .required = true },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_zc_sg_in, H_KPROBE, "__zerocopy_sg_from_iter"), .param = { 0, "msg" } },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_zc_sg_in_pre60, H_KPROBE, "__zerocopy_sg_from_iter"), .param = { 0, "sk" } },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_zc_sg_out, H_KRETPROBE, "__zerocopy_sg_from_iter") },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_pages_out, H_KRETPROBE, "get_user_pages_fast") },
	{ ROW(RUNG_KPROBE, PP_PINNING, copy_kprobe, kp_pages_out, H_KRETPROBE, "pin_user_pages_fast") },
	{ ROW(RUNG_KPROBE, PP_FALLBACK_COPY, copy_kprobe, kp_copy_ubufs, H_KPROBE, "skb_copy_ubufs"), .required = true },
	{ ROW(RUNG_KPROBE, PP_ZC_COMPLETION, copy_kprobe, kp_zc_callback, H_KPROBE, "__msg_zerocopy_callback"), .group = 1 },
	{ ROW(RUNG_KPROBE, PP_ZC_COMPLETION, copy_kprobe, kp_zc_callback_pre512, H_KPROBE, "sock_zerocopy_callback"), .group = 1, .fallback = true },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_rx_copy_in, H_KPROBE, "skb_copy_datagram_iter"), .required = true },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_rx_copy_out, H_KRETPROBE, "skb_copy_datagram_iter"), .required = true },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_in, H_KPROBE, "udp_recvmsg"), .param = { 3, "flags" }, .group = 1 },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_in_noblock, H_KPROBE, "udp_recvmsg"), .param = { 3, "noblock" }, .group = 1 },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_out, H_KRETPROBE, "udp_recvmsg"), .required = true },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_in, H_KPROBE, "udpv6_recvmsg"), .param = { 3, "flags" } },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_in_noblock, H_KPROBE, "udpv6_recvmsg"), .param = { 3, "noblock" } },
	{ ROW(RUNG_KPROBE, PP_RX_COPY, copy_kprobe, kp_udp_recv_out, H_KRETPROBE, "udpv6_recvmsg") },
	/* BTF-typed tracepoints */
	{ ROW(RUNG_TP_BTF, PP_TX_BYTES, copy_tp, tp_send_length, H_TP_BTF, "sock_send_length"), .required = true, .kfunc = CAST },
	/* the per-skb programs: reading through bpf_rdonly_cast (6.2+), else probe reads */
	{ ROW(RUNG_TP_BTF, PP_PINNING, copy_tp, tp_xmit, H_TP_BTF, "net_dev_start_xmit"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_PINNING, copy_tp, tp_xmit_pre62, H_TP_BTF, "net_dev_start_xmit"), .group = 1, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_PINNING, copy_tp, tp_sock_state, H_TP_BTF, "inet_sock_set_state") },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_netif_receive, H_TP_BTF, "netif_receive_skb"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_netif_receive_pre62, H_TP_BTF, "netif_receive_skb"), .group = 1, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_tcp_probe, H_TP_BTF, "tcp_probe"), .group = 2, .lazy = true, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_tcp_probe_pre62, H_TP_BTF, "tcp_probe"), .group = 2, .lazy = true, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_kfree_skb, H_TP_BTF, "kfree_skb"), .group = 3, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, copy_tp, tp_kfree_skb_pre62, H_TP_BTF, "kfree_skb"), .group = 3, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_RX_COPY, copy_tp, tp_recv_length, H_TP_BTF, "sock_recv_length"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_RX_COPY, copy_tp, tp_rx_copy, H_TP_BTF, "skb_copy_datagram_iovec"), .group = 1, .fallback = true },
	/* syscalls on fentry/fexit of the syscall functions (issue 15); sys_enter/sys_exit below */
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendto_in, H_FENTRY, "__x64_sys_sendto", "__arm64_sys_sendto"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendto_out, H_FEXIT, "__x64_sys_sendto", "__arm64_sys_sendto"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendmsg_in, H_FENTRY, "__x64_sys_sendmsg", "__arm64_sys_sendmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendmsg_out, H_FEXIT, "__x64_sys_sendmsg", "__arm64_sys_sendmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_recvfrom_in, H_FENTRY, "__x64_sys_recvfrom", "__arm64_sys_recvfrom"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_recvfrom_out, H_FEXIT, "__x64_sys_recvfrom", "__arm64_sys_recvfrom"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_recvmsg_in, H_FENTRY, "__x64_sys_recvmsg", "__arm64_sys_recvmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_recvmsg_out, H_FEXIT, "__x64_sys_recvmsg", "__arm64_sys_recvmsg"), .required = true },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_write_in, H_FENTRY, "__x64_sys_write", "__arm64_sys_write") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_write_out, H_FEXIT, "__x64_sys_write", "__arm64_sys_write") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_read_in, H_FENTRY, "__x64_sys_read", "__arm64_sys_read") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_read_out, H_FEXIT, "__x64_sys_read", "__arm64_sys_read") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendfile_in, H_FENTRY, "__x64_sys_sendfile64", "__arm64_sys_sendfile64") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_sendfile_out, H_FEXIT, "__x64_sys_sendfile64", "__arm64_sys_sendfile64") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_poll_in, H_FENTRY, "__x64_sys_poll", "__arm64_sys_poll") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_poll_out, H_FEXIT, "__x64_sys_poll", "__arm64_sys_poll") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_ppoll_in, H_FENTRY, "__x64_sys_ppoll", "__arm64_sys_ppoll") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_ppoll_out, H_FEXIT, "__x64_sys_ppoll", "__arm64_sys_ppoll") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_wait_in, H_FENTRY, "__x64_sys_epoll_wait", "__arm64_sys_epoll_wait") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_wait_out, H_FEXIT, "__x64_sys_epoll_wait", "__arm64_sys_epoll_wait") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_pwait_in, H_FENTRY, "__x64_sys_epoll_pwait", "__arm64_sys_epoll_pwait") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_pwait_out, H_FEXIT, "__x64_sys_epoll_pwait", "__arm64_sys_epoll_pwait") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_pwait2_in, H_FENTRY, "__x64_sys_epoll_pwait2", "__arm64_sys_epoll_pwait2") },
	{ ROW(RUNG_FENTRY, PP_SYSCALLS, syscalls, fs_epoll_pwait2_out, H_FEXIT, "__x64_sys_epoll_pwait2", "__arm64_sys_epoll_pwait2") },
	{ ROW(RUNG_TP_BTF, PP_SYSCALLS, syscalls, sc_enter, H_TP_BTF, "sys_enter"), .required = true },
	{ ROW(RUNG_TP_BTF, PP_SYSCALLS, syscalls, sc_exit, H_TP_BTF, "sys_exit"), .required = true },
	/* raw tracepoints (no BTF needed) */
	{ ROW(RUNG_TRACEPOINT, PP_SYSCALLS, syscalls, sc_enter_raw, H_RAW_TP, "sys_enter"), .required = true },
	{ ROW(RUNG_TRACEPOINT, PP_SYSCALLS, syscalls, sc_exit_raw, H_RAW_TP, "sys_exit"), .required = true },
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static struct bpf_program *row_prog(const struct row *r, void *skel)
{
	return *(struct bpf_program **)((char *)skel + r->prog_off);
}

/* Climbing the ladder (tracer_bpf_open): the target each row resolved to on this kernel
 * (NULL: absent), the kernel's symbols, and why each probe point failed. */
struct ladder {
	struct tracer_bpf *t;
	const char *resolved[NROWS];
	struct ksyms *ksyms;
	/* functions ftrace can patch (fentry needs it; kprobe events refuse notrace functions);
	 * NULL when tracefs does not let us read the list: then the attach tells */
	struct ksyms *traceable;
	char fail_reason[PP_NR][512];	/* for the message of a forced rung */
	bool kprobes;			/* the kernel has kprobes at all */
};

/* Why probe point pp failed at rung r, added to what failed before it:
 * "fentry: <why>; kprobe: <why>" (the snapshot's attach_why, a forced rung's message). */
static void note_failure(struct ladder *l, enum probe_point pp, enum rung r, const char *fmt,
			 ...)
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

/* What the compat build cannot load (bpf/compat.h): fexit programs that read the return value
 * with bpf_get_func_ret (5.17), and programs calling a kfunc (bpf_rdonly_cast is 6.2, later
 * than any kernel the compat build is for; on one that has it, the build is forced for a
 * test and must behave as on the kernels it is for). */
static bool compat_excludes(const struct row *r)
{
	return bpf_build() == BUILD_COMPAT && (r->obj == OBJ_FENTRY || r->kfunc);
}

#define COMPAT_FENTRY_WHY "the compat build has no fexit return values (bpf_get_func_ret, 5.17)"

static const char *resolve_row(const struct ladder *l, const struct row *r)
{
	const struct btf *btf = vmlinux_btf();

	if (skipped(r->prog) || compat_excludes(r) || (r->kfunc && !btf_func_exists(btf, r->kfunc)))
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
		case H_RAW_TP:
			return t;	/* the attach tells */
		}
	}
	return NULL;
}

/* Every row's target on this kernel; a fallback row stands in only for a group none of
 * whose other rows resolved. */
static void resolve_rows(struct ladder *l)
{
	for (int i = 0; i < NROWS; i++)
		l->resolved[i] = resolve_row(l, &rows[i]);
	for (int i = 0; i < NROWS; i++) {
		if (!rows[i].fallback || !l->resolved[i])
			continue;
		for (int k = 0; k < NROWS; k++)
			if (k != i && !rows[k].fallback && rows[k].rung == rows[i].rung &&
			    rows[k].pp == rows[i].pp && rows[k].group == rows[i].group &&
			    l->resolved[k])
				l->resolved[i] = NULL;
	}
}

/* The send scope (in_send map) is opened by the tx_bytes programs of the fentry and kprobe
 * rungs; tx_copy and pinning at those rungs count only inside it. */
static unsigned deps_of(enum probe_point pp, enum rung r)
{
	if ((r == RUNG_FENTRY || r == RUNG_KPROBE) && (pp == PP_TX_COPY || pp == PP_PINNING))
		return 1u << PP_TX_BYTES;
	return 0;
}

static bool scope_available(const struct tracer_bpf *t)
{
	return t->rung[PP_TX_BYTES] == RUNG_FENTRY || t->rung[PP_TX_BYTES] == RUNG_KPROBE;
}

/* Can pp be tried at rung r: the required rows resolve, each group has a member, and at
 * least one row resolves. */
static bool pp_resolvable(const struct ladder *l, enum probe_point pp, enum rung r)
{
	bool any = false, group_seen[4] = { 0 }, group_hit[4] = { 0 };

	for (int i = 0; i < NROWS; i++) {
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

static enum objkind rung_obj(enum rung r, unsigned mask)
{
	if (mask == (1u << PP_SYSCALLS))
		return OBJ_SYSCALLS;
	if (r == RUNG_FENTRY)
		return OBJ_FENTRY;
	if (r == RUNG_KPROBE)
		return OBJ_KPROBE;
	return OBJ_TP;
}

/* Open the object of kind k for rung r with the programs of the probe points in mask, load
 * it. Returns its skeleton, or NULL (-errno in *errp). */
static void *load_rung(struct ladder *l, enum rung r, enum objkind k, unsigned mask, int *errp)
{
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
	for (int i = 0; i < NROWS; i++) {
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

static struct bpf_link *attach_row(const struct ladder *l, void *skel, int i, int *errp)
{
	struct bpf_program *prog = row_prog(&rows[i], skel);
	struct bpf_link *link;

	switch (rows[i].how) {
	case H_KPROBE:
	case H_KRETPROBE:
		link = bpf_program__attach_kprobe(prog, rows[i].how == H_KRETPROBE, l->resolved[i]);
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
	const struct row *r = &rows[i];
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
	struct tracer_bpf *t = l->t;
	int attached = 0, group_hits[4] = { 0 }, group_seen[4] = { 0 };

	for (int i = 0; i < NROWS; i++) {
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

/* Try the probe points in mask at rung r; returns those that attached. */
static unsigned try_rung(struct ladder *l, enum rung r, unsigned mask)
{
	enum objkind k = rung_obj(r, mask);
	unsigned ok;
	void *skel;
	int err;

	if (!mask)
		return 0;
	skel = load_rung(l, r, k, mask, &err);
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
static int open_follow(struct tracer_bpf *t, char *err, size_t errlen)
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

/* ---- climbing ------------------------------------------------------------------------------ */

static const unsigned copy_pps = (1u << PP_TX_BYTES) | (1u << PP_TX_COPY) | (1u << PP_PINNING) |
				 (1u << PP_FALLBACK_COPY) | (1u << PP_ZC_COMPLETION) |
				 (1u << PP_RX_COPY);

static enum rung forced_rung(enum attach_mode mode)
{
	return mode == ATTACH_FENTRY ? RUNG_FENTRY : mode == ATTACH_KPROBE ? RUNG_KPROBE :
	       mode == ATTACH_TRACEPOINT ? RUNG_TP_BTF : RUNG_NR;
}

static const char *unresolved_why(const struct ladder *l, enum rung r)
{
	if (r == RUNG_FENTRY && bpf_build() == BUILD_COMPAT)
		return COMPAT_FENTRY_WHY;
	if (r == RUNG_KPROBE && !l->kprobes)
		return "this kernel has no kprobes (CONFIG_KPROBES unset)";
	return "no target on this kernel";
}

/* The copy probe points, each on the first rung (fentry, kprobe, tp_btf) that resolves and
 * attaches it; only the forced rung when there is one (RUNG_NR: none). */
static void climb_copy_rungs(struct ladder *l, enum rung forced)
{
	static const enum rung auto_rungs[] = { RUNG_FENTRY, RUNG_KPROBE, RUNG_TP_BTF };
	unsigned assigned = 0;

	for (size_t ri = 0; ri < sizeof(auto_rungs) / sizeof(auto_rungs[0]); ri++) {
		enum rung r = auto_rungs[ri];
		unsigned mask = 0;

		if (forced != RUNG_NR && r != forced)
			continue;
		for (int pp = 0; pp < PP_NR; pp++) {
			if (!(copy_pps & (1u << pp)) || (assigned & (1u << pp)))
				continue;
			if (!pp_resolvable(l, pp, r)) {
				note_failure(l, pp, r, "%s", unresolved_why(l, r));
				continue;
			}
			mask |= 1u << pp;
		}
		/* tx_copy and pinning need the send scope of tx_bytes at this rung or before */
		for (int pp = 0; pp < PP_NR; pp++)
			if ((mask & (1u << pp)) && (deps_of(pp, r) & (1u << PP_TX_BYTES)) &&
			    !scope_available(l->t) && !(mask & (1u << PP_TX_BYTES)))
				mask &= ~(1u << pp);
		assigned |= try_rung(l, r, mask);
	}
}

/* syscalls: fentry/fexit on the syscall functions, else the raw_syscalls tracepoints
 * (BTF-typed first). --no-latency leaves them out (every syscall of the machine passes
 * sys_enter/sys_exit) unless nothing else counts the bytes sent. */
static void attach_syscalls(struct ladder *l, bool no_latency)
{
	static const enum rung sc_rungs[] = { RUNG_FENTRY, RUNG_TP_BTF, RUNG_TRACEPOINT };
	struct tracer_bpf *t = l->t;

	t->no_latency = no_latency && t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE;
	for (size_t i = 0; i < sizeof(sc_rungs) / sizeof(sc_rungs[0]); i++)
		if (!t->no_latency && t->rung[PP_SYSCALLS] == RUNG_UNAVAILABLE &&
		    pp_resolvable(l, PP_SYSCALLS, sc_rungs[i]))
			try_rung(l, sc_rungs[i], 1u << PP_SYSCALLS);
}

/* What cannot be measured is inferred where it can be. */
static void infer(struct tracer_bpf *t)
{
	if (t->rung[PP_TX_BYTES] == RUNG_UNAVAILABLE && t->rung[PP_SYSCALLS] != RUNG_UNAVAILABLE) {
		t->rung[PP_TX_BYTES] = RUNG_TRACEPOINT;	/* sys_exit of sendto/sendmsg/write */
		t->tx_from_syscalls = true;
	}
	if (t->rung[PP_TX_COPY] == RUNG_UNAVAILABLE && t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE)
		t->rung[PP_TX_COPY] = RUNG_INFERRED;	/* tx_bytes - zc_tx_bytes */
}

/* The copy probe points not on the forced rung (zc_completion aside: the error queue tells),
 * each with a reason. */
static unsigned missed_forced(struct ladder *l, enum rung forced)
{
	const struct tracer_bpf *t = l->t;
	unsigned failed = 0;

	for (int pp = 0; pp < PP_NR; pp++) {
		if (!(copy_pps & (1u << pp)) || pp == PP_ZC_COMPLETION || t->rung[pp] == forced)
			continue;
		if (forced == RUNG_TP_BTF && (t->rung[pp] == RUNG_TRACEPOINT ||
					      t->rung[pp] == RUNG_INFERRED))
			continue;
		if (!l->fail_reason[pp][0])
			snprintf(l->fail_reason[pp], sizeof(l->fail_reason[pp]), "not attached");
		failed |= 1u << pp;
	}
	return failed;
}

/* "tx_bytes, rx_copy: <why>; pinning: <why>": one clause per distinct reason. */
static void reasons_message(const struct ladder *l, unsigned failed, char *msg, size_t len)
{
	unsigned done = 0;
	size_t off = 0;

	msg[0] = 0;
	for (int pp = 0; pp < PP_NR && off < len; pp++) {
		if (!(failed & (1u << pp)) || (done & (1u << pp)))
			continue;
		off += snprintf(msg + off, len - off, "%s", off ? "; " : "");
		for (int q = pp, n = 0; q < PP_NR && off < len; q++) {
			if (!(failed & (1u << q)) || strcmp(l->fail_reason[q], l->fail_reason[pp]))
				continue;
			done |= 1u << q;
			off += snprintf(msg + off, len - off, "%s%s", n++ ? ", " : "", pp_name(q));
		}
		if (off < len)
			off += snprintf(msg + off, len - off, ": %s", l->fail_reason[pp]);
	}
}

/* A forced rung (--attach) that did not take every copy probe point: 0, or -1 with the
 * reasons in err. */
static int check_forced(struct ladder *l, enum attach_mode mode, enum rung forced, char *err,
			size_t errlen)
{
	char msg[1024];

	reasons_message(l, missed_forced(l, forced), msg, sizeof(msg));
	if (msg[0]) {
		snprintf(err, errlen, "--attach %s: this kernel does not allow the %s rung (%s)",
			 mode == ATTACH_TRACEPOINT ? "tracepoint" : rung_name(forced),
			 forced == RUNG_FENTRY ? "fentry/fexit" : forced == RUNG_KPROBE ?
			 "kprobe/kretprobe" : "tracepoint", msg);
		return -1;
	}
	if (l->t->rung[PP_ZC_COMPLETION] != forced)
		fprintf(stderr, "netio-tracer: zc_completion: %s\n",
			l->fail_reason[PP_ZC_COMPLETION]);
	return 0;
}

static void defer_sys_exit(struct tracer_bpf *t);

/* Where no rung counts the bytes sent, the send calls' return values on TCP and UDP sockets
 * do (syscalls.bpf.c, EXIT_TX_BYTES): sendto, sendmsg, write and sendfile. */
static void count_tx_at_syscalls(struct tracer_bpf *t)
{
	uint32_t key = EXIT_TX_BYTES, one = 1;
	char *why = t->why[PP_TX_BYTES];
	size_t len = strlen(why);

	if (!t->tx_from_syscalls || t->exit_wanted < 0 ||
	    bpf_map_update_elem(t->exit_wanted, &key, &one, BPF_ANY))
		return;
	snprintf(why + len, sizeof(t->why[0]) - len, "%stracepoint: counted from sendto, sendmsg, "
		 "write and sendfile on TCP/UDP sockets (io_uring's, writev's and sendmmsg's sends "
		 "are not seen)", len ? "; " : "");
}

/* Tests: NETIO_TEST_NO_THREAD_STORAGE=1 makes every thread's storage fail (filter_gen[1],
 * bpf/filter.h), so that every event goes through the CPU's spill slot (bpf/maps.h). */
static void refuse_thread_storage_for_tests(struct tracer_bpf *t)
{
	uint32_t key = 1, on = 1;
	const char *v = getenv("NETIO_TEST_NO_THREAD_STORAGE");

	if (v && !strcmp(v, "1") && t->filter_gen >= 0)
		bpf_map_update_elem(t->filter_gen, &key, &on, BPF_ANY);
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
static void find_shared_maps(struct tracer_bpf *t)
{
	t->followed_tgids = shared_map_fd(t, "followed_tgids");
	t->followed_netns = shared_map_fd(t, "followed_netns");
	t->followed_cgroups = shared_map_fd(t, "followed_cgroups");
	t->filter_gen = shared_map_fd(t, "filter_gen");
	t->counters = shared_map_fd(t, "netio_counters");
	t->tgid_stats = shared_map_fd(t, "tgid_stats");
	t->tgid_spill = shared_map_fd(t, "tgid_spill");
	t->netns_stats = shared_map_fd(t, "netns_stats");
	t->in_send = shared_map_fd(t, "in_send");
	t->sk_owner = shared_map_fd(t, "sk_owner");
	t->zc_state = shared_map_fd(t, "zc_state");
	t->exit_wanted = shared_map_fd(t, "exit_wanted");
	t->latency_sample = shared_map_fd(t, "latency_sample");
	t->tgid_stats_copies = map_value_copies(t->tgid_stats);
	for (int i = 0; i < t->nprogs; i++)
		if (t->progs[i].lazy && !strncmp(t->progs[i].name, "tp_tcp_probe",
							   sizeof("tp_tcp_probe") - 1))
			t->progs[i].wanted_fd = t->zc_state;
}

/* The syscall hooks and the tracepoint rung's socket-layer programs count in the thread's
 * storage (bpf/maps.h, thread_counts): flush.bpf.c adds it to the thread's process when the
 * thread exits, and over every live thread before each snapshot and reset (its task iterator,
 * run by tracer_bpf_flush_threads). 0, or -1 with err filled: without the flush those counts would be lost. */
static int attach_thread_flush(struct tracer_bpf *t, char *err, size_t errlen)
{
	struct flush_bpf *skel;
	struct attached_prog *ap;

	if (!t->copy_tp && !t->syscalls)
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

/* The ladder from fentry down (or the forced rung only), then what the rungs taken allow. */
static int climb(struct ladder *l, enum attach_mode mode, bool no_latency, char *err,
		 size_t errlen)
{
	struct tracer_bpf *t = l->t;
	enum rung forced = forced_rung(mode);

	resolve_rows(l);
	if (open_follow(t, err, errlen))
		return -1;
	climb_copy_rungs(l, forced);
	attach_syscalls(l, no_latency);
	infer(t);
	if (forced != RUNG_NR && check_forced(l, mode, forced, err, errlen))
		return -1;
	if (attach_thread_flush(t, err, errlen))
		return -1;
	if (t->rung[PP_TX_BYTES] == RUNG_UNAVAILABLE && t->rung[PP_RX_COPY] == RUNG_UNAVAILABLE &&
	    t->rung[PP_SYSCALLS] == RUNG_UNAVAILABLE) {
		snprintf(err, errlen, "no probe point could be attached (%s)",
			 l->fail_reason[PP_TX_BYTES]);
		return -1;
	}
	return 0;
}

int tracer_bpf_open(struct tracer_bpf *t, enum attach_mode mode, bool verbose, bool no_latency,
		    char *err, size_t errlen)
{
	struct ladder *l = calloc(1, sizeof(*l));
	int ret;

	memset(t, 0, sizeof(*t));
	for (int pp = 0; pp < PP_NR; pp++)
		t->rung[pp] = RUNG_UNAVAILABLE;
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);
	l->t = t;
	l->ksyms = ksyms_load();
	l->traceable = ftrace_funcs_load();
	l->kprobes = kprobes_available();
	ret = climb(l, mode, no_latency, err, errlen);
	for (int pp = 0; pp < PP_NR; pp++)
		snprintf(t->why[pp], sizeof(t->why[pp]), "%s", l->fail_reason[pp]);
	ksyms_free(l->ksyms);
	ksyms_free(l->traceable);
	free(l);
	if (ret) {
		tracer_bpf_close(t);
		return -1;
	}
	find_shared_maps(t);
	count_tx_at_syscalls(t);
	defer_sys_exit(t);
	refuse_thread_storage_for_tests(t);
	return 0;
}

static struct attached_prog *find_attached(struct tracer_bpf *t, const char *name)
{
	for (int i = 0; i < t->nprogs; i++)
		if (!strcmp(t->progs[i].name, name) && (t->progs[i].link || t->progs[i].lazy))
			return &t->progs[i];
	return NULL;
}

/* Where the socket layer marks the end of send and receive calls (sock_send_length and
 * sock_recv_length attached), sys_exit is only needed for poll, epoll_wait and sendfile:
 * detach it until a followed thread makes such a call (syscalls.bpf.c, exit_wanted). */
static void defer_sys_exit(struct tracer_bpf *t)
{
	struct attached_prog *ap;
	uint32_t socket_end = EXIT_SOCKET_END, one = 1;

	if (t->rung[PP_SYSCALLS] == RUNG_FENTRY) {
		/* each call has its own fexit: nothing to defer; a write or read that never
		 * reached a socket is still not a socket call */
		if (t->exit_wanted >= 0 && find_attached(t, "tp_send_length") &&
		    find_attached(t, "tp_recv_length") &&
		    !bpf_map_update_elem(t->exit_wanted, &socket_end, &one, BPF_ANY))
			t->sc_end_at_socket = true;
		return;
	}

	if (t->exit_wanted < 0 || !find_attached(t, "tp_send_length") ||
	    !find_attached(t, "tp_recv_length") || !t->syscalls)
		return;
	ap = find_attached(t, "sc_exit");
	if (!ap)
		ap = find_attached(t, "sc_exit_raw");
	if (!ap || !ap->link)
		return;
	ap->bpf_prog = ap->prog;	/* t->syscalls->progs.sc_exit or .sc_exit_raw */
	if (bpf_map_update_elem(t->exit_wanted, &socket_end, &one, BPF_ANY))
		return;
	bpf_link__destroy(ap->link);
	ap->link = NULL;
	ap->lazy = true;
	ap->wanted_fd = t->exit_wanted;
	snprintf(ap->target + strlen(ap->target), sizeof(ap->target) - strlen(ap->target),
		 " (on demand)");
	t->sc_end_at_socket = true;
}

void tracer_bpf_close(struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs; i++)
		bpf_link__destroy(t->progs[i].link);
	t->nprogs = 0;
	bpf_link__destroy(t->flush_iter);
	t->flush_iter = NULL;
	flush_bpf__destroy(t->flush);
	t->flush = NULL;
	follow_bpf__destroy(t->follow);
	follow_bpf__destroy(t->follow_cgroups);
	copy_fentry_bpf__destroy(t->copy_fentry);
	copy_kprobe_bpf__destroy(t->copy_kprobe);
	copy_tp_bpf__destroy(t->copy_tp);
	syscalls_bpf__destroy(t->syscalls);
	t->follow = NULL;
	t->copy_fentry = NULL;
	t->copy_kprobe = NULL;
	t->copy_tp = NULL;
	t->syscalls = NULL;
	for (int i = 0; i < t->nshared; i++)
		close(t->shared[i].fd);
	t->nshared = 0;
}

void tracer_bpf_filter_changed(struct tracer_bpf *t)
{
	uint32_t zero = 0, gen = 0;

	if (t->filter_gen < 0)
		return;
	bpf_map_lookup_elem(t->filter_gen, &zero, &gen);
	gen++;
	bpf_map_update_elem(t->filter_gen, &zero, &gen, BPF_ANY);
}

int tracer_bpf_follow_netns(struct tracer_bpf *t, unsigned int inum)
{
	int slot = -1;

	for (int i = 0; i < NETIO_MAX_NETNS; i++) {
		if (t->netns_inum[i] == inum) {
			slot = i;
			break;
		}
		if (slot < 0 && !t->netns_inum[i])
			slot = i;
	}
	if (slot < 0) {
		errno = ENOSPC;
		return -1;
	}
	uint32_t v = slot;
	if (bpf_map_update_elem(t->followed_netns, &inum, &v, BPF_ANY))
		return -1;
	t->netns_inum[slot] = inum;
	tracer_bpf_filter_changed(t);
	return 0;
}

void tracer_bpf_poll(struct tracer_bpf *t)
{
	if (t->detached)
		return;
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];
		uint32_t zero = 0, wanted = 0;
		struct bpf_link *link;

		if (!ap->lazy || ap->link || !ap->bpf_prog || ap->wanted_fd < 0 ||
		    bpf_map_lookup_elem(ap->wanted_fd, &zero, &wanted) || !wanted)
			continue;
		link = bpf_program__attach(ap->bpf_prog);
		if (!link) {
			ap->bpf_prog = NULL;	/* do not retry forever */
			continue;
		}
		ap->link = link;
	}
}

void tracer_bpf_rearm(struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];
		uint32_t zero = 0, val = 0;

		if (!ap->lazy)
			continue;
		if (ap->link) {
			bpf_link__destroy(ap->link);
			ap->link = NULL;
		}
		if (ap->wanted_fd >= 0)
			bpf_map_update_elem(ap->wanted_fd, &zero, &val, BPF_ANY);
	}
}

void tracer_bpf_flush_threads(const struct tracer_bpf *t)
{
	char buf[64];
	int fd;

	if (!t->flush_iter)
		return;
	fd = bpf_iter_create(bpf_link__fd(t->flush_iter));
	if (fd < 0) {
		fprintf(stderr, "netio-tracer: flushing per-thread counts: %s\n", strerror(errno));
		return;
	}
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

void tracer_bpf_detach(struct tracer_bpf *t)
{
	tracer_bpf_flush_threads(t);	/* the iterator's link goes too: nothing of ours stays */
	bpf_link__destroy(t->flush_iter);
	t->flush_iter = NULL;
	tracer_bpf_rearm(t);	/* the on-demand ones: detached, waiting for their condition */
	for (int i = 0; i < t->nprogs; i++) {
		bpf_link__destroy(t->progs[i].link);
		t->progs[i].link = NULL;
	}
	t->detached = true;
}

static struct bpf_link *attach_again(const struct attached_prog *ap)
{
	if (ap->kfunc[0])
		return bpf_program__attach_kprobe(ap->prog, ap->kretprobe, ap->kfunc);
	return bpf_program__attach(ap->prog);
}

int tracer_bpf_attach(struct tracer_bpf *t, char *err, size_t errlen)
{
	for (int i = 0; i < t->nprogs; i++) {
		struct attached_prog *ap = &t->progs[i];

		if (ap->lazy || ap->link || !ap->prog)
			continue;
		ap->link = attach_again(ap);
		if (!ap->link) {
			snprintf(err, errlen, "attaching %s (%s) again: %s", ap->name, ap->target,
				 strerror(errno));
			tracer_bpf_detach(t);
			return -1;
		}
	}
	if (t->flush && !t->flush_iter)
		t->flush_iter = bpf_program__attach_iter(t->flush->progs.flush_threads, NULL);
	if (t->flush && !t->flush_iter) {
		snprintf(err, errlen, "attaching iter/task (flush_threads) again: %s", strerror(errno));
		tracer_bpf_detach(t);
		return -1;
	}
	t->detached = false;
	return 0;
}

const char *tracer_bpf_targets(const struct tracer_bpf *t, enum probe_point pp, char *buf,
			       size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < t->nprogs && off < len; i++)
		if (t->progs[i].pp == pp)
			off += snprintf(buf + off, len - off, "%s%s", off ? "," : "", t->progs[i].target);
	return buf;
}
