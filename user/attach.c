// SPDX-License-Identifier: GPL-2.0
/* The attach ladder: see attach.h and docs/DESIGN.md. This file is its vocabulary and its
 * table; attach_internal.h lists the files that climb it.
 *
 * Each BPF object is opened through its skeleton. The ladder's table names each program as a
 * field of its object's skeleton (ROW below), so a program that does not exist does not
 * compile; the ladder then loads, for the rung it tries, only the programs of the probe points
 * it tries, and attaches them to the first target of theirs this kernel has. */
#include <stddef.h>
#include <string.h>
#include "attach_internal.h"
#include "copy_fentry.skel.h"
#include "copy_kprobe.skel.h"
#include "copy_tp.skel.h"
#include "zc_skb.skel.h"
#include "rx_mapped.skel.h"
#include "syscalls.skel.h"

static const char *rung_names[RUNG_NR] = {
	[RUNG_FENTRY] = "fentry", [RUNG_KPROBE] = "kprobe", [RUNG_TP_BTF] = "tp_btf",
	[RUNG_TRACEPOINT] = "tracepoint", [RUNG_INFERRED] = "inferred",
	[RUNG_UNAVAILABLE] = "unavailable", [RUNG_PERF_EVENT] = "perf_event",
};

static const char *pp_names[PP_NR] = {
	[PP_TX_BYTES] = "tx_bytes", [PP_TX_COPY] = "tx_copy", [PP_PINNING] = "pinning",
	[PP_FALLBACK_COPY] = "fallback_copy", [PP_ZC_COMPLETION] = "zc_completion",
	[PP_RX_COPY] = "rx_copy", [PP_RX_MAPPED] = "rx_mapped", [PP_RX_DISCARDED] = "rx_discarded",
	[PP_RX_SPLICED] = "rx_spliced", [PP_SYSCALLS] = "syscalls", [PP_STACKS] = "stacks",
};

const char *rung_name(enum rung r)
{
	return r < RUNG_NR ? rung_names[r] : "?";
}

bool is_tcp_probe(const char *name)
{
	return strncmp(name, "tp_tcp_probe", strlen("tp_tcp_probe")) == 0;
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

/* ---- the ladder's table ------------------------------------------------------------------ */

/* The object kind of each skeleton, for ROW. */
#define KIND_copy_fentry OBJ_FENTRY
#define KIND_copy_kprobe OBJ_KPROBE
#define KIND_copy_tp OBJ_TP
#define KIND_zc_skb OBJ_TP_SKB
#define KIND_rx_mapped OBJ_TP_RXMAP
#define KIND_syscalls OBJ_SYSCALLS

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
	/* the receive kinds: tcp_recvmsg's flags moved after 5.18 (noblock went) */
	{ ROW(RUNG_FENTRY, PP_RX_MAPPED, copy_fentry, fx_zc_receive, H_FEXIT, "tcp_zerocopy_receive"), .required = true },
	{ ROW(RUNG_FENTRY, PP_RX_DISCARDED, copy_fentry, fx_tcp_recv_out, H_FEXIT, "tcp_recvmsg"), .param = { 3, "flags" }, .group = 1 },
	{ ROW(RUNG_FENTRY, PP_RX_DISCARDED, copy_fentry, fx_tcp_recv_out_nb, H_FEXIT, "tcp_recvmsg"), .param = { 4, "flags" }, .group = 1 },
	{ ROW(RUNG_FENTRY, PP_RX_SPLICED, copy_fentry, fx_splice_read, H_FEXIT, "tcp_splice_read"), .required = true },
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
	{ ROW(RUNG_TP_BTF, PP_PINNING, zc_skb, tp_xmit, H_TP_BTF, "net_dev_start_xmit"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_PINNING, zc_skb, tp_xmit_pre62, H_TP_BTF, "net_dev_start_xmit"), .group = 1, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_PINNING, zc_skb, tp_sock_state, H_TP_BTF, "inet_sock_set_state") },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_netif_receive, H_TP_BTF, "netif_receive_skb"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_netif_receive_pre62, H_TP_BTF, "netif_receive_skb"), .group = 1, .fallback = true },
	/* tcp_probe confirms the inference (zc_skbs_at_tcp, a diagnostic): optional, and not
	 * at the counting level, where it would run for every TCP segment of the machine */
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_tcp_probe, H_TP_BTF, "tcp_probe"), .lazy = true, .kfunc = CAST, .full_level = true },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_tcp_probe_pre62, H_TP_BTF, "tcp_probe"), .lazy = true, .fallback = true, .full_level = true },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_kfree_skb, H_TP_BTF, "kfree_skb"), .group = 3, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_FALLBACK_COPY, zc_skb, tp_kfree_skb_pre62, H_TP_BTF, "kfree_skb"), .group = 3, .fallback = true },
	{ ROW(RUNG_TP_BTF, PP_RX_COPY, copy_tp, tp_recv_length, H_TP_BTF, "sock_recv_length"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_RX_COPY, copy_tp, tp_rx_copy, H_TP_BTF, "skb_copy_datagram_iovec"), .group = 1, .fallback = true },
	/* rx_discarded on this rung is tp_recv_length's (attach_climb.c, infer) */
	{ ROW(RUNG_TP_BTF, PP_RX_MAPPED, rx_mapped, cg_zc_receive, H_CGROUP, "getsockopt"), .required = true },
	{ ROW(RUNG_TP_BTF, PP_RX_SPLICED, copy_tp, tp_splice_exit, H_TRACEPOINT, "syscalls/sys_exit_splice"), .group = 1, .kfunc = CAST },
	{ ROW(RUNG_TP_BTF, PP_RX_SPLICED, copy_tp, tp_rcv_space_adjust, H_TP_BTF, "tcp_rcv_space_adjust"), .group = 1, .fallback = true, .kfunc = CAST, .full_level = true },
	/* syscalls on fentry/fexit of the syscall functions, so that other syscalls pay nothing;
	 * sys_enter/sys_exit below */
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

_Static_assert(NROWS <= LADDER_MAX_ROWS, "the ladder's table outgrew LADDER_MAX_ROWS");
const struct row *const ladder_rows = rows;
const int ladder_nrows = NROWS;
