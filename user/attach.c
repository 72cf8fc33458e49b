// SPDX-License-Identifier: GPL-2.0
/* The attach ladder: see attach.h and DESIGN.md. */
#include <errno.h>
#include <stdarg.h>
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
#include "follow.skel.h"
#include "copy_fentry.skel.h"
#include "copy_kprobe.skel.h"
#include "copy_tp.skel.h"
#include "syscalls.skel.h"

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

/* ---- libbpf messages: shown with --verbose, the last warning kept for error messages --- */

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

/* ---- objects ------------------------------------------------------------------------- */

enum objkind { OBJ_FOLLOW, OBJ_FENTRY, OBJ_KPROBE, OBJ_TP, OBJ_SYSCALLS, OBJ_NR };

static const struct {
	const char *name;
	const void *(*elf)(size_t *sz);
} objdefs[OBJ_NR] = {
	[OBJ_FOLLOW] = { "follow", follow_bpf__elf_bytes },
	[OBJ_FENTRY] = { "copy_fentry", copy_fentry_bpf__elf_bytes },
	[OBJ_KPROBE] = { "copy_kprobe", copy_kprobe_bpf__elf_bytes },
	[OBJ_TP] = { "copy_tp", copy_tp_bpf__elf_bytes },
	[OBJ_SYSCALLS] = { "syscalls", syscalls_bpf__elf_bytes },
};

static struct bpf_object *obj_open(enum objkind k)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = objdefs[k].name);
	size_t sz;
	const void *bytes = objdefs[k].elf(&sz);
	struct bpf_object *obj = bpf_object__open_mem(bytes, sz, &opts);

	if (libbpf_get_error(obj))
		return NULL;
	return obj;
}

/* Maps shared by name between objects: created by the first object that loads, reused by
 * every later one. */
struct shared_map {
	char name[64];
	int fd;
};
static struct shared_map shared_maps[32];
static int nshared_maps;

static int shared_map_fd(const char *name)
{
	for (int i = 0; i < nshared_maps; i++)
		if (!strcmp(shared_maps[i].name, name))
			return shared_maps[i].fd;
	return -1;
}

static int obj_reuse_maps(struct bpf_object *obj)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		int fd;
		if (bpf_map__is_internal(map))
			continue;
		fd = shared_map_fd(bpf_map__name(map));
		if (fd >= 0 && bpf_map__reuse_fd(map, fd))
			return -1;
	}
	return 0;
}

static void obj_register_maps(struct bpf_object *obj)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		if (bpf_map__is_internal(map) || shared_map_fd(bpf_map__name(map)) >= 0)
			continue;
		if (nshared_maps == (int)(sizeof(shared_maps) / sizeof(shared_maps[0])))
			break;
		snprintf(shared_maps[nshared_maps].name, sizeof(shared_maps[0].name), "%s",
			 bpf_map__name(map));
		shared_maps[nshared_maps].fd = dup(bpf_map__fd(map));
		nshared_maps++;
	}
}

/* ---- the ladder's table -------------------------------------------------------------- */

enum how { H_FENTRY, H_FEXIT, H_KPROBE, H_KRETPROBE, H_TP_BTF, H_RAW_TP };
static const char *how_names[] = { "fentry", "fexit", "kprobe", "kretprobe", "tp_btf", "raw_tp" };

struct row {
	enum rung rung;
	enum probe_point pp;
	enum objkind obj;
	const char *prog;
	enum how how;
	const char *targets[4];	/* candidates, in order; the first present is used */
	bool required;		/* the probe point needs it at this rung */
	int group;		/* optional rows of one group: at least one must attach */
	bool fallback;		/* used only if no other row of its group resolves */
	bool lazy;		/* loaded with its probe point, attached by tracer_bpf_poll() */
};

#define FUNCS(...) { __VA_ARGS__, NULL }

static const struct row rows[] = {
	/* fentry/fexit */
	{ RUNG_FENTRY, PP_TX_BYTES, OBJ_FENTRY, "fx_sendmsg_in", H_FENTRY, FUNCS("tcp_sendmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_TX_BYTES, OBJ_FENTRY, "fx_sendmsg_out", H_FEXIT, FUNCS("tcp_sendmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_TX_BYTES, OBJ_FENTRY, "fx_sendpage_out", H_FEXIT, FUNCS("tcp_sendpage"), false, 0, false, false },
	{ RUNG_FENTRY, PP_TX_BYTES, OBJ_FENTRY, "fx_udp_sendmsg_in", H_FENTRY, FUNCS("udp_sendmsg"), false, 0, false, false },
	{ RUNG_FENTRY, PP_TX_BYTES, OBJ_FENTRY, "fx_udp_sendmsg_out", H_FEXIT, FUNCS("udp_sendmsg"), false, 0, false, false },
	{ RUNG_FENTRY, PP_TX_COPY, OBJ_FENTRY, "fx_copy_from_iter", H_FEXIT, FUNCS("_copy_from_iter"), false, 1, false, false },
	{ RUNG_FENTRY, PP_TX_COPY, OBJ_FENTRY, "fx_copy_from_iter_nc", H_FEXIT, FUNCS("_copy_from_iter_nocache"), false, 1, false, false },
	{ RUNG_FENTRY, PP_TX_COPY, OBJ_FENTRY, "fx_check_object_size", H_FENTRY, FUNCS("__check_object_size"), false, 1, true, false },
	{ RUNG_FENTRY, PP_PINNING, OBJ_FENTRY, "fx_zc_stream", H_FEXIT, FUNCS("skb_zerocopy_iter_stream"), true, 0, false, false },
	{ RUNG_FENTRY, PP_PINNING, OBJ_FENTRY, "fx_zc_sg", H_FEXIT, FUNCS("__zerocopy_sg_from_iter"), false, 0, false, false },
	{ RUNG_FENTRY, PP_PINNING, OBJ_FENTRY, "fx_gup_fast", H_FEXIT, FUNCS("get_user_pages_fast"), false, 0, false, false },
	{ RUNG_FENTRY, PP_PINNING, OBJ_FENTRY, "fx_pup_fast", H_FEXIT, FUNCS("pin_user_pages_fast"), false, 0, false, false },
	{ RUNG_FENTRY, PP_FALLBACK_COPY, OBJ_FENTRY, "fx_copy_ubufs", H_FEXIT, FUNCS("skb_copy_ubufs"), true, 0, false, false },
	{ RUNG_FENTRY, PP_ZC_COMPLETION, OBJ_FENTRY, "fx_zc_callback", H_FENTRY, FUNCS("__msg_zerocopy_callback"), true, 0, false, false },
	{ RUNG_FENTRY, PP_RX_COPY, OBJ_FENTRY, "fx_rx_copy", H_FEXIT, FUNCS("skb_copy_datagram_iter"), true, 0, false, false },
	/* kprobe/kretprobe */
	{ RUNG_KPROBE, PP_TX_BYTES, OBJ_KPROBE, "kp_sendmsg_in", H_KPROBE, FUNCS("tcp_sendmsg"), true, 0, false, false },
	{ RUNG_KPROBE, PP_TX_BYTES, OBJ_KPROBE, "kp_sendmsg_out", H_KRETPROBE, FUNCS("tcp_sendmsg"), true, 0, false, false },
	{ RUNG_KPROBE, PP_TX_BYTES, OBJ_KPROBE, "kp_sendpage_out", H_KRETPROBE, FUNCS("tcp_sendpage"), false, 0, false, false },
	{ RUNG_KPROBE, PP_TX_BYTES, OBJ_KPROBE, "kp_sendmsg_in", H_KPROBE, FUNCS("udp_sendmsg"), false, 0, false, false },
	{ RUNG_KPROBE, PP_TX_BYTES, OBJ_KPROBE, "kp_sendmsg_out", H_KRETPROBE, FUNCS("udp_sendmsg"), false, 0, false, false },
	{ RUNG_KPROBE, PP_TX_COPY, OBJ_KPROBE, "kp_copy_from_iter", H_KRETPROBE, FUNCS("_copy_from_iter"), false, 1, false, false },
	{ RUNG_KPROBE, PP_TX_COPY, OBJ_KPROBE, "kp_copy_from_iter_nc", H_KRETPROBE, FUNCS("_copy_from_iter_nocache"), false, 1, false, false },
	{ RUNG_KPROBE, PP_TX_COPY, OBJ_KPROBE, "kp_check_object_size", H_KPROBE, FUNCS("__check_object_size"), false, 1, true, false },
	{ RUNG_KPROBE, PP_PINNING, OBJ_KPROBE, "kp_zc_stream", H_KRETPROBE, FUNCS("skb_zerocopy_iter_stream"), true, 0, false, false },
	{ RUNG_KPROBE, PP_PINNING, OBJ_KPROBE, "kp_pages_out", H_KRETPROBE, FUNCS("get_user_pages_fast"), false, 0, false, false },
	{ RUNG_KPROBE, PP_PINNING, OBJ_KPROBE, "kp_pages_out", H_KRETPROBE, FUNCS("pin_user_pages_fast"), false, 0, false, false },
	{ RUNG_KPROBE, PP_FALLBACK_COPY, OBJ_KPROBE, "kp_copy_ubufs", H_KPROBE, FUNCS("skb_copy_ubufs"), true, 0, false, false },
	{ RUNG_KPROBE, PP_ZC_COMPLETION, OBJ_KPROBE, "kp_zc_callback", H_KPROBE, FUNCS("__msg_zerocopy_callback"), true, 0, false, false },
	{ RUNG_KPROBE, PP_RX_COPY, OBJ_KPROBE, "kp_rx_copy_in", H_KPROBE, FUNCS("skb_copy_datagram_iter"), true, 0, false, false },
	{ RUNG_KPROBE, PP_RX_COPY, OBJ_KPROBE, "kp_rx_copy_out", H_KRETPROBE, FUNCS("skb_copy_datagram_iter"), true, 0, false, false },
	/* BTF-typed tracepoints */
	{ RUNG_TP_BTF, PP_TX_BYTES, OBJ_TP, "tp_send_length", H_TP_BTF, FUNCS("sock_send_length"), true, 0, false, false },
	{ RUNG_TP_BTF, PP_PINNING, OBJ_TP, "tp_xmit", H_TP_BTF, FUNCS("net_dev_start_xmit"), true, 0, false, false },
	{ RUNG_TP_BTF, PP_PINNING, OBJ_TP, "tp_sock_state", H_TP_BTF, FUNCS("inet_sock_set_state"), false, 0, false, false },
	{ RUNG_TP_BTF, PP_FALLBACK_COPY, OBJ_TP, "tp_netif_receive", H_TP_BTF, FUNCS("netif_receive_skb"), true, 0, false, false },
	{ RUNG_TP_BTF, PP_FALLBACK_COPY, OBJ_TP, "tp_tcp_probe", H_TP_BTF, FUNCS("tcp_probe"), false, 0, false, true },
	{ RUNG_TP_BTF, PP_FALLBACK_COPY, OBJ_TP, "tp_kfree_skb", H_TP_BTF, FUNCS("kfree_skb"), false, 0, false, false },
	{ RUNG_TP_BTF, PP_RX_COPY, OBJ_TP, "tp_recv_length", H_TP_BTF, FUNCS("sock_recv_length"), false, 1, false, false },
	{ RUNG_TP_BTF, PP_RX_COPY, OBJ_TP, "tp_rx_copy", H_TP_BTF, FUNCS("skb_copy_datagram_iovec"), false, 1, true, false },
	/* syscalls on fentry/fexit of the syscall functions (issue 15); sys_enter/sys_exit below */
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendto_in", H_FENTRY, FUNCS("__x64_sys_sendto", "__arm64_sys_sendto"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendto_out", H_FEXIT, FUNCS("__x64_sys_sendto", "__arm64_sys_sendto"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendmsg_in", H_FENTRY, FUNCS("__x64_sys_sendmsg", "__arm64_sys_sendmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendmsg_out", H_FEXIT, FUNCS("__x64_sys_sendmsg", "__arm64_sys_sendmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_recvfrom_in", H_FENTRY, FUNCS("__x64_sys_recvfrom", "__arm64_sys_recvfrom"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_recvfrom_out", H_FEXIT, FUNCS("__x64_sys_recvfrom", "__arm64_sys_recvfrom"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_recvmsg_in", H_FENTRY, FUNCS("__x64_sys_recvmsg", "__arm64_sys_recvmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_recvmsg_out", H_FEXIT, FUNCS("__x64_sys_recvmsg", "__arm64_sys_recvmsg"), true, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_write_in", H_FENTRY, FUNCS("__x64_sys_write", "__arm64_sys_write"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_write_out", H_FEXIT, FUNCS("__x64_sys_write", "__arm64_sys_write"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_read_in", H_FENTRY, FUNCS("__x64_sys_read", "__arm64_sys_read"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_read_out", H_FEXIT, FUNCS("__x64_sys_read", "__arm64_sys_read"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendfile_in", H_FENTRY, FUNCS("__x64_sys_sendfile64", "__arm64_sys_sendfile64"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_sendfile_out", H_FEXIT, FUNCS("__x64_sys_sendfile64", "__arm64_sys_sendfile64"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_poll_in", H_FENTRY, FUNCS("__x64_sys_poll", "__arm64_sys_poll"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_poll_out", H_FEXIT, FUNCS("__x64_sys_poll", "__arm64_sys_poll"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_ppoll_in", H_FENTRY, FUNCS("__x64_sys_ppoll", "__arm64_sys_ppoll"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_ppoll_out", H_FEXIT, FUNCS("__x64_sys_ppoll", "__arm64_sys_ppoll"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_wait_in", H_FENTRY, FUNCS("__x64_sys_epoll_wait", "__arm64_sys_epoll_wait"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_wait_out", H_FEXIT, FUNCS("__x64_sys_epoll_wait", "__arm64_sys_epoll_wait"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_pwait_in", H_FENTRY, FUNCS("__x64_sys_epoll_pwait", "__arm64_sys_epoll_pwait"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_pwait_out", H_FEXIT, FUNCS("__x64_sys_epoll_pwait", "__arm64_sys_epoll_pwait"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_pwait2_in", H_FENTRY, FUNCS("__x64_sys_epoll_pwait2", "__arm64_sys_epoll_pwait2"), false, 0, false, false },
	{ RUNG_FENTRY, PP_SYSCALLS, OBJ_SYSCALLS, "fs_epoll_pwait2_out", H_FEXIT, FUNCS("__x64_sys_epoll_pwait2", "__arm64_sys_epoll_pwait2"), false, 0, false, false },
	{ RUNG_TP_BTF, PP_SYSCALLS, OBJ_SYSCALLS, "sc_enter", H_TP_BTF, FUNCS("sys_enter"), true, 0, false, false },
	{ RUNG_TP_BTF, PP_SYSCALLS, OBJ_SYSCALLS, "sc_exit", H_TP_BTF, FUNCS("sys_exit"), true, 0, false, false },
	/* raw tracepoints (no BTF needed) */
	{ RUNG_TRACEPOINT, PP_SYSCALLS, OBJ_SYSCALLS, "sc_enter_raw", H_RAW_TP, FUNCS("sys_enter"), true, 0, false, false },
	{ RUNG_TRACEPOINT, PP_SYSCALLS, OBJ_SYSCALLS, "sc_exit_raw", H_RAW_TP, FUNCS("sys_exit"), true, 0, false, false },
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

/* per row: the target found on this kernel (NULL: absent) */
static const char *resolved[NROWS];
static struct ksyms *ksyms;
/* functions ftrace can patch (fentry needs it; kprobe events refuse notrace functions);
 * NULL when tracefs does not let us read the list: then the attach tells */
static struct ksyms *traceable;

static bool is_traceable(const char *name)
{
	return !traceable || ksyms_has(traceable, name);
}

static const char *resolve_row(const struct row *r)
{
	const struct btf *btf = vmlinux_btf();
	/* experiments (overhead of one program, a lower rung): program names to leave out */
	const char *skip = getenv("NETIO_TRACER_SKIP");

	if (skip && strstr(skip, r->prog))
		return NULL;

	for (int i = 0; r->targets[i]; i++) {
		const char *t = r->targets[i];
		switch (r->how) {
		case H_FENTRY:
		case H_FEXIT:
			/* BTF says the function exists with this name, kallsyms that it is
			 * not inlined away */
			if (btf_func_exists(btf, t) && ksyms_has(ksyms, t) && is_traceable(t))
				return t;
			break;
		case H_KPROBE:
		case H_KRETPROBE: {
			const char *s = ksyms_find_func(ksyms, t);
			if (s && is_traceable(s))
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
static bool pp_resolvable(enum probe_point pp, enum rung r)
{
	bool any = false, group_seen[4] = { 0 }, group_hit[4] = { 0 };

	for (int i = 0; i < NROWS; i++) {
		if (rows[i].pp != pp || rows[i].rung != r)
			continue;
		if (rows[i].required && !resolved[i])
			return false;
		group_seen[rows[i].group] = true;
		if (resolved[i]) {
			group_hit[rows[i].group] = true;
			any = true;
		}
	}
	for (int g = 1; g < 4; g++)
		if (group_seen[g] && !group_hit[g])
			return false;	/* no member of the group resolved */
	return any;
}

/* why a probe point failed at the forced rung, for the error message */
static char fail_reason[PP_NR][512];

static enum objkind rung_obj(enum rung r, unsigned mask)
{
	if (mask == (1u << PP_SYSCALLS))
		return OBJ_SYSCALLS;
	if (r == RUNG_FENTRY)
		return OBJ_FENTRY;
	if (r == RUNG_KPROBE)
		return OBJ_KPROBE;
	if (mask == (1u << PP_SYSCALLS))
		return OBJ_SYSCALLS;
	return OBJ_TP;
}

/* Open obj for rung r with the programs of the probe points in mask, load it.
 * Returns the loaded object or NULL (err = -errno in *errp). */
static struct bpf_object *load_rung(enum rung r, enum objkind k, unsigned mask, int *errp)
{
	struct bpf_object *obj = obj_open(k);
	struct bpf_program *prog;
	int err;

	*errp = 0;
	if (!obj) {
		*errp = -errno ? -errno : -EINVAL;
		return NULL;
	}
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, false);
	for (int i = 0; i < NROWS; i++) {
		if (rows[i].rung != r || rows[i].obj != k || !(mask & (1u << rows[i].pp)) || !resolved[i])
			continue;
		prog = bpf_object__find_program_by_name(obj, rows[i].prog);
		if (!prog)
			continue;
		bpf_program__set_autoload(prog, true);
		if (rows[i].how == H_FENTRY || rows[i].how == H_FEXIT)
			bpf_program__set_attach_target(prog, 0, resolved[i]);
	}
	if (obj_reuse_maps(obj)) {
		*errp = -errno ? -errno : -EINVAL;
		bpf_object__close(obj);
		return NULL;
	}
	err = bpf_object__load(obj);
	if (err) {
		*errp = err;
		bpf_object__close(obj);
		return NULL;
	}
	obj_register_maps(obj);
	return obj;
}

static struct bpf_link *attach_row(struct bpf_object *obj, int i, int *errp)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, rows[i].prog);
	struct bpf_link *link;

	if (!prog) {
		*errp = -ENOENT;
		return NULL;
	}
	switch (rows[i].how) {
	case H_KPROBE:
	case H_KRETPROBE:
		link = bpf_program__attach_kprobe(prog, rows[i].how == H_KRETPROBE, resolved[i]);
		break;
	default:
		link = bpf_program__attach(prog);
	}
	if (libbpf_get_error(link)) {
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

/* Attach the rows of the probe points in mask from a loaded obj; returns the mask of probe
 * points that attached completely. */
static unsigned attach_rung(struct tracer_bpf *t, struct bpf_object *obj, enum rung r,
			    enum objkind k, unsigned mask)
{
	unsigned ok = 0;
	int first = t->nprogs;

	for (int pp = 0; pp < PP_NR; pp++) {
		bool failed = false;
		int attached = 0, group_hits[4] = { 0 }, group_seen[4] = { 0 };

		if (!(mask & (1u << pp)))
			continue;
		/* a dependency that did not attach in this rung nor before */
		unsigned deps = deps_of(pp, r);
		if ((deps & (1u << PP_TX_BYTES)) && !scope_available(t) && !(ok & (1u << PP_TX_BYTES))) {
			snprintf(fail_reason[pp], sizeof(fail_reason[pp]),
				 "needs tx_bytes at the fentry or kprobe rung");
			continue;
		}
		for (int i = 0; i < NROWS; i++) {
			int err = 0;
			struct bpf_link *link;
			if (rows[i].rung != r || rows[i].obj != k || (int)rows[i].pp != pp || !resolved[i])
				continue;
			if (rows[i].group)
				group_seen[rows[i].group]++;
			if (rows[i].lazy) {
				struct bpf_program *lp = bpf_object__find_program_by_name(obj, rows[i].prog);
				if (!lp || t->nprogs == MAX_ATTACHED)
					continue;
				struct attached_prog *ap = &t->progs[t->nprogs++];
				snprintf(ap->name, sizeof(ap->name), "%s", rows[i].prog);
				snprintf(ap->target, sizeof(ap->target), "%s:%s (on demand)",
					 how_names[rows[i].how], resolved[i]);
				ap->prog_fd = bpf_program__fd(lp);
				ap->pp = pp;
				ap->link = NULL;
				ap->lazy = true;
				ap->bpf_prog = lp;
				ap->wanted_fd = -1;	/* set once the shared maps are known */
				continue;
			}
			link = attach_row(obj, i, &err);
			if (!link) {
				if (rows[i].required) {
					snprintf(fail_reason[pp], sizeof(fail_reason[pp]),
						 "attaching %s %s failed: %s", how_names[rows[i].how],
						 resolved[i], strerror(-err));
					failed = true;
					break;
				}
				continue;
			}
			if (t->nprogs == MAX_ATTACHED) {
				bpf_link__destroy(link);
				failed = true;
				break;
			}
			struct attached_prog *ap = &t->progs[t->nprogs++];
			snprintf(ap->name, sizeof(ap->name), "%s", rows[i].prog);
			snprintf(ap->target, sizeof(ap->target), "%s:%s", how_names[rows[i].how], resolved[i]);
			ap->prog = bpf_object__find_program_by_name(obj, rows[i].prog);
			ap->prog_fd = bpf_program__fd(ap->prog);
			ap->pp = pp;
			ap->link = link;
			if (rows[i].how == H_KPROBE || rows[i].how == H_KRETPROBE) {
				snprintf(ap->kfunc, sizeof(ap->kfunc), "%s", resolved[i]);
				ap->kretprobe = rows[i].how == H_KRETPROBE;
			}
			attached++;
			if (rows[i].group)
				group_hits[rows[i].group]++;
		}
		for (int g = 1; g < 4; g++)
			if (group_seen[g] && !group_hits[g]) {
				snprintf(fail_reason[pp], sizeof(fail_reason[pp]),
					 "no copy function could be attached");
				failed = true;
			}
		if (failed || !attached) {
			drop_pp_links(t, pp, first);
			continue;
		}
		ok |= 1u << pp;
		t->rung[pp] = r;
		if (pp == PP_PINNING && (r == RUNG_FENTRY || r == RUNG_KPROBE)) {
			for (int j = first; j < t->nprogs; j++)
				if (t->progs[j].pp == PP_PINNING && t->progs[j].link &&
				    strstr(t->progs[j].target, "user_pages_fast"))
					t->pinned_pages_counted = true;
		}
	}
	/* compact: forget entries whose link was dropped (and lazy ones of failed points) */
	int w = first;
	for (int j = first; j < t->nprogs; j++)
		if (t->progs[j].link || (t->progs[j].lazy && (ok & (1u << t->progs[j].pp))))
			t->progs[w++] = t->progs[j];
	t->nprogs = w;
	return ok;
}

static void keep_obj(struct tracer_bpf *t, struct bpf_object *obj)
{
	if (t->nobjs < (int)(sizeof(t->objs) / sizeof(t->objs[0])))
		t->objs[t->nobjs++] = obj;
	else
		bpf_object__close(obj);
}

/* Try the probe points in mask at rung r; returns those that attached. */
static unsigned try_rung(struct tracer_bpf *t, enum rung r, unsigned mask)
{
	enum objkind k = rung_obj(r, mask);
	struct bpf_object *obj;
	unsigned ok_load = 0, ok;
	int err;

	if (!mask)
		return 0;
	obj = load_rung(r, k, mask, &err);
	if (!obj) {
		/* find out which probe points load on their own (with their dependencies) */
		for (int pp = 0; pp < PP_NR; pp++) {
			if (!(mask & (1u << pp)))
				continue;
			unsigned m = (1u << pp) | (deps_of(pp, r) & mask);
			struct bpf_object *o = load_rung(r, k, m, &err);
			if (o) {
				ok_load |= 1u << pp;
				bpf_object__close(o);
			} else {
				snprintf(fail_reason[pp], sizeof(fail_reason[pp]),
					 "loading %s programs failed: %s", r == RUNG_FENTRY ?
					 "fentry/fexit" : r == RUNG_KPROBE ? "kprobe" : rung_name(r),
					 strerror(-err));
			}
		}
		if (!ok_load)
			return 0;
		obj = load_rung(r, k, ok_load, &err);
		if (!obj)
			return 0;
		mask = ok_load;
	}
	ok = attach_rung(t, obj, r, k, mask);
	if (ok)
		keep_obj(t, obj);
	else
		bpf_object__close(obj);
	return ok;
}

/* Loads and attaches one program of follow.bpf.c over the maps already shared: progs[0] on
 * tp_btf, else its twin progs[1] on the raw tracepoint tp. 0, or -1. */
static int attach_follow(struct tracer_bpf *t, const char *const progs[2], const char *tp)
{
	for (int i = 0; i < 2; i++) {
		struct bpf_object *obj = obj_open(OBJ_FOLLOW);
		struct bpf_program *prog;
		struct bpf_link *link;

		if (!obj)
			break;
		bpf_object__for_each_program(prog, obj)
			bpf_program__set_autoload(prog, !strcmp(bpf_program__name(prog), progs[i]));
		if (obj_reuse_maps(obj) || bpf_object__load(obj)) {
			bpf_object__close(obj);
			continue;
		}
		prog = bpf_object__find_program_by_name(obj, progs[i]);
		link = bpf_program__attach(prog);
		if (libbpf_get_error(link) || t->nprogs == MAX_ATTACHED) {
			if (!libbpf_get_error(link))
				bpf_link__destroy(link);
			bpf_object__close(obj);
			continue;
		}
		obj_register_maps(obj);
		keep_obj(t, obj);
		struct attached_prog *ap = &t->progs[t->nprogs++];
		snprintf(ap->name, sizeof(ap->name), "%s", progs[i]);
		snprintf(ap->target, sizeof(ap->target), "%s:%s", i == 0 ? "tp_btf" : "raw_tp", tp);
		ap->prog_fd = bpf_program__fd(prog);
		ap->prog = prog;
		ap->pp = PP_NR;
		ap->link = link;
		return 0;
	}
	return -1;
}

static int open_follow(struct tracer_bpf *t, char *err, size_t errlen)
{
	static const char *const progs[] = { "fork_btf", "fork_raw" };

	if (!attach_follow(t, progs, "sched_process_fork"))
		return 0;
	snprintf(err, errlen, "cannot load the filter and fork handler (sched_process_fork): %s%s%s",
		 strerror(errno), last_libbpf_warning[0] ? " -- libbpf: " : "", last_libbpf_warning);
	return -1;
}

int tracer_bpf_follow_cgroups(struct tracer_bpf *t, char *err, size_t errlen)
{
	static const char *const progs[] = { "cgroup_attach_btf", "cgroup_attach_raw" };

	for (int i = 0; i < t->nprogs; i++)
		if (!strcmp(t->progs[i].name, progs[0]) || !strcmp(t->progs[i].name, progs[1]))
			return 0;	/* a second --cgroup */
	if (t->followed_cgroups < 0) {
		snprintf(err, errlen, "--cgroup: no followed_cgroups map");
		return -1;
	}
	if (!attach_follow(t, progs, "cgroup_attach_task"))
		return 0;
	snprintf(err, errlen, "--cgroup: cannot attach the cgroup handler (cgroup_attach_task): "
		 "%s%s%s", strerror(errno), last_libbpf_warning[0] ? " -- libbpf: " : "",
		 last_libbpf_warning);
	return -1;
}

static void defer_sys_exit(struct tracer_bpf *t);

int tracer_bpf_open(struct tracer_bpf *t, enum attach_mode mode, bool verbose, bool no_latency,
		    char *err, size_t errlen)
{
	static const enum rung auto_rungs[] = { RUNG_FENTRY, RUNG_KPROBE, RUNG_TP_BTF };
	const unsigned copy_pps = (1u << PP_TX_BYTES) | (1u << PP_TX_COPY) | (1u << PP_PINNING) |
				  (1u << PP_FALLBACK_COPY) | (1u << PP_ZC_COMPLETION) |
				  (1u << PP_RX_COPY);
	enum rung forced = RUNG_NR;
	unsigned assigned = 0;

	memset(t, 0, sizeof(*t));
	for (int pp = 0; pp < PP_NR; pp++)
		t->rung[pp] = RUNG_UNAVAILABLE;
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);

	ksyms = ksyms_load();
	traceable = ftrace_funcs_load();
	for (int i = 0; i < NROWS; i++)
		resolved[i] = resolve_row(&rows[i]);
	/* a fallback row stands in only for a group none of whose other rows resolved */
	for (int i = 0; i < NROWS; i++) {
		if (!rows[i].fallback || !resolved[i])
			continue;
		for (int k = 0; k < NROWS; k++)
			if (k != i && !rows[k].fallback && rows[k].rung == rows[i].rung &&
			    rows[k].pp == rows[i].pp && rows[k].group == rows[i].group && resolved[k])
				resolved[i] = NULL;
	}

	if (open_follow(t, err, errlen))
		return -1;

	if (mode == ATTACH_FENTRY)
		forced = RUNG_FENTRY;
	else if (mode == ATTACH_KPROBE)
		forced = RUNG_KPROBE;
	else if (mode == ATTACH_TRACEPOINT)
		forced = RUNG_TP_BTF;

	for (size_t ri = 0; ri < sizeof(auto_rungs) / sizeof(auto_rungs[0]); ri++) {
		enum rung r = auto_rungs[ri];
		unsigned mask = 0;

		if (forced != RUNG_NR && r != forced)
			continue;
		for (int pp = 0; pp < PP_NR; pp++) {
			if (!(copy_pps & (1u << pp)) || (assigned & (1u << pp)))
				continue;
			if (!pp_resolvable(pp, r)) {
				if (!fail_reason[pp][0] || forced == r)
					snprintf(fail_reason[pp], sizeof(fail_reason[pp]),
						 "no %s target on this kernel", rung_name(r));
				continue;
			}
			mask |= 1u << pp;
		}
		/* tx_copy and pinning need the send scope of tx_bytes at this rung or before */
		for (int pp = 0; pp < PP_NR; pp++)
			if ((mask & (1u << pp)) && (deps_of(pp, r) & (1u << PP_TX_BYTES)) &&
			    !scope_available(t) && !(mask & (1u << PP_TX_BYTES)))
				mask &= ~(1u << pp);
		assigned |= try_rung(t, r, mask);
	}

	/* syscalls: fentry/fexit on the syscall functions, else the raw_syscalls tracepoints
	 * (BTF-typed first). --no-latency leaves them out (every
	 * syscall of the machine passes sys_enter/sys_exit) unless nothing else counts the bytes
	 * sent */
	t->no_latency = no_latency && t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE;
	if (!t->no_latency && pp_resolvable(PP_SYSCALLS, RUNG_FENTRY))
		try_rung(t, RUNG_FENTRY, 1u << PP_SYSCALLS);
	if (!t->no_latency && t->rung[PP_SYSCALLS] == RUNG_UNAVAILABLE &&
	    pp_resolvable(PP_SYSCALLS, RUNG_TP_BTF))
		try_rung(t, RUNG_TP_BTF, 1u << PP_SYSCALLS);
	if (!t->no_latency && t->rung[PP_SYSCALLS] == RUNG_UNAVAILABLE &&
	    pp_resolvable(PP_SYSCALLS, RUNG_TRACEPOINT))
		try_rung(t, RUNG_TRACEPOINT, 1u << PP_SYSCALLS);

	/* what cannot be measured is inferred where it can be */
	if (t->rung[PP_TX_BYTES] == RUNG_UNAVAILABLE && t->rung[PP_SYSCALLS] != RUNG_UNAVAILABLE) {
		t->rung[PP_TX_BYTES] = RUNG_TRACEPOINT;	/* sys_exit of sendto/sendmsg/write */
		t->tx_from_syscalls = true;
	}
	if (t->rung[PP_TX_COPY] == RUNG_UNAVAILABLE && t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE)
		t->rung[PP_TX_COPY] = RUNG_INFERRED;	/* tx_bytes - zc_tx_bytes */

	ksyms_free(ksyms);
	ksyms = NULL;
	ksyms_free(traceable);
	traceable = NULL;

	if (forced != RUNG_NR) {
		/* one clause per distinct reason: "tx_bytes, rx_copy: <why>" */
		char msg[1024] = "";
		size_t off = 0;
		unsigned failed = 0, done = 0;
		for (int pp = 0; pp < PP_NR; pp++) {
			if (!(copy_pps & (1u << pp)) || pp == PP_ZC_COMPLETION || t->rung[pp] == forced)
				continue;
			if (forced == RUNG_TP_BTF && (t->rung[pp] == RUNG_TRACEPOINT ||
						      t->rung[pp] == RUNG_INFERRED))
				continue;
			if (!fail_reason[pp][0])
				snprintf(fail_reason[pp], sizeof(fail_reason[pp]), "not attached");
			failed |= 1u << pp;
		}
		for (int pp = 0; pp < PP_NR && off < sizeof(msg); pp++) {
			if (!(failed & (1u << pp)) || (done & (1u << pp)))
				continue;
			off += snprintf(msg + off, sizeof(msg) - off, "%s", off ? "; " : "");
			for (int q = pp, n = 0; q < PP_NR && off < sizeof(msg); q++) {
				if (!(failed & (1u << q)) || strcmp(fail_reason[q], fail_reason[pp]))
					continue;
				done |= 1u << q;
				off += snprintf(msg + off, sizeof(msg) - off, "%s%s", n++ ? ", " : "", pp_name(q));
			}
			if (off < sizeof(msg))
				off += snprintf(msg + off, sizeof(msg) - off, ": %s", fail_reason[pp]);
		}
		if (msg[0]) {
			snprintf(err, errlen, "--attach %s: this kernel does not allow the %s rung (%s)",
				 mode == ATTACH_TRACEPOINT ? "tracepoint" : rung_name(forced),
				 forced == RUNG_FENTRY ? "fentry/fexit" : forced == RUNG_KPROBE ?
				 "kprobe/kretprobe" : "tracepoint", msg);
			tracer_bpf_close(t);
			return -1;
		}
		if (t->rung[PP_ZC_COMPLETION] != forced)
			fprintf(stderr, "netio-tracer: zc_completion: %s\n", fail_reason[PP_ZC_COMPLETION]);
	}
	if (t->rung[PP_TX_BYTES] == RUNG_UNAVAILABLE && t->rung[PP_RX_COPY] == RUNG_UNAVAILABLE &&
	    t->rung[PP_SYSCALLS] == RUNG_UNAVAILABLE) {
		snprintf(err, errlen, "no probe point could be attached (%s)", fail_reason[PP_TX_BYTES]);
		tracer_bpf_close(t);
		return -1;
	}

#define SHARED(field, name) t->field = shared_map_fd(name)
	SHARED(followed_tgids, "followed_tgids");
	SHARED(followed_netns, "followed_netns");
	SHARED(followed_cgroups, "followed_cgroups");
	SHARED(filter_gen, "filter_gen");
	SHARED(counters, "netio_counters");
	SHARED(tgid_stats, "tgid_stats");
	SHARED(netns_stats, "netns_stats");
	SHARED(in_send, "in_send");
	SHARED(sk_owner, "sk_owner");
	SHARED(zc_state, "zc_state");
	SHARED(exit_wanted, "exit_wanted");
#undef SHARED
	for (int i = 0; i < t->nprogs; i++)
		if (t->progs[i].lazy && !strcmp(t->progs[i].name, "tp_tcp_probe"))
			t->progs[i].wanted_fd = t->zc_state;
	defer_sys_exit(t);
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
	    !find_attached(t, "tp_recv_length"))
		return;
	ap = find_attached(t, "sc_exit");
	if (!ap)
		ap = find_attached(t, "sc_exit_raw");
	if (!ap || !ap->link)
		return;
	for (int i = 0; i < t->nobjs && !ap->bpf_prog; i++)
		ap->bpf_prog = bpf_object__find_program_by_name(t->objs[i], ap->name);
	if (!ap->bpf_prog)
		return;
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
	for (int i = 0; i < t->nobjs; i++)
		bpf_object__close(t->objs[i]);
	t->nobjs = 0;
	for (int i = 0; i < nshared_maps; i++)
		close(shared_maps[i].fd);
	nshared_maps = 0;
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
		if (libbpf_get_error(link)) {
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

void tracer_bpf_detach(struct tracer_bpf *t)
{
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
