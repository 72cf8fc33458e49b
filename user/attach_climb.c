// SPDX-License-Identifier: GPL-2.0
/* Climbing the ladder at load (tracer_bpf_open): the copy probe points from fentry down (or
 * the forced rung only), the syscalls, what is inferred where nothing measures, and a forced
 * rung's verdict; then what the rungs taken allow. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "attach_internal.h"
#include "kretprobes.h"
#include "builds.h"
#include "netio.h"
#include "copy_tp.skel.h"
#include "zc_skb.skel.h"
#include "rx_mapped.skel.h"

/* The receive kinds beside rx_copy: climbed with the copy points, but a forced
 * rung that lacks one of them does not fail for it (it says why in attach_why). */
static const unsigned rx_kind_pps = (1u << PP_RX_MAPPED) | (1u << PP_RX_DISCARDED) |
				    (1u << PP_RX_SPLICED);
static const unsigned copy_pps = (1u << PP_TX_BYTES) | (1u << PP_TX_COPY) | (1u << PP_PINNING) |
				 (1u << PP_FALLBACK_COPY) | (1u << PP_ZC_COMPLETION) |
				 (1u << PP_RX_COPY) | rx_kind_pps;

static enum rung forced_rung(enum attach_mode mode)
{
	return mode == ATTACH_FENTRY ? RUNG_FENTRY : mode == ATTACH_KPROBE ? RUNG_KPROBE :
	       mode == ATTACH_TRACEPOINT ? RUNG_TP_BTF : RUNG_NR;
}

/* why no fentry row resolves in the compat build (compat_excludes, attach_rung.c) */
#define COMPAT_FENTRY_WHY "the compat build has no fexit return values (bpf_get_func_ret, 5.17)"

static const char *unresolved_why(const struct ladder *l, enum rung r, int pp)
{
	if (r == RUNG_FENTRY && bpf_build() == BUILD_COMPAT)
		return COMPAT_FENTRY_WHY;
	if (r == RUNG_KPROBE && !l->kprobes)
		return "this kernel has no kprobes (CONFIG_KPROBES unset)";
	if (r == RUNG_KPROBE && (rx_kind_pps & (1u << pp)))
		return "no kprobe program counts it (the kernels of the matrix take fentry)";
	if (r == RUNG_TP_BTF && pp == PP_RX_SPLICED && l->no_latency)
		return "the counting level (--no-latency) gives it up on this rung: only "
		       "tcp_rcv_space_adjust, which every TCP receive of the machine would run, "
		       "counts it here; the full level counts it at sys_exit_splice";
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
				note_failure(l, pp, r, "%s", unresolved_why(l, r, pp));
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

static bool prog_attached(const struct tracer_bpf *t, const char *name)
{
	for (int i = 0; i < t->nprogs; i++)
		if (!strcmp(t->progs[i].name, name) && t->progs[i].link)
			return true;
	return false;
}

/* The tracepoint rung's switches (bpf/tp_rung.bpf.h), set from what the climb attached, in
 * each object that reads them. Through the map: the skeleton's view of .bss is not the map's
 * where the ladder loads the object itself. */
static void set_tp_switches(struct tracer_bpf *t)
{
	struct copy_tp_bpf__bss send = {};
	struct zc_skb_bpf__bss skb = {};
	struct rx_mapped_bpf__bss mapped = {};
	uint32_t zero = 0;

	/* a TCP socket's MSG_ZEROCOPY bytes count where its send returns, with the thread's
	 * own counts, which only the storage build keeps there */
	t->zc_at_send = t->rung[PP_PINNING] == RUNG_TP_BTF && bpf_build() == BUILD_STORAGE &&
			prog_attached(t, "tp_send_length");
	send.zc_at_send = skb.zc_at_send = t->zc_at_send;
	/* the copy buffer of TCP_ZEROCOPY_RECEIVE never passes sock_recv_length: the cgroup
	 * program adds it to rx_copy */
	mapped.rx_copybuf_uncounted = t->rung[PP_RX_MAPPED] == RUNG_TP_BTF &&
				      prog_attached(t, "tp_recv_length");
	if (t->copy_tp)
		bpf_map_update_elem(bpf_map__fd(t->copy_tp->maps.bss), &zero, &send, BPF_ANY);
	if (t->zc_skb)
		bpf_map_update_elem(bpf_map__fd(t->zc_skb->maps.bss), &zero, &skb, BPF_ANY);
	if (t->rx_mapped)
		bpf_map_update_elem(bpf_map__fd(t->rx_mapped->maps.bss), &zero, &mapped, BPF_ANY);
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
	/* sock_recv_length's flags say MSG_TRUNC: tp_recv_length counts discards too */
	if (t->rung[PP_RX_DISCARDED] == RUNG_UNAVAILABLE && prog_attached(t, "tp_recv_length"))
		t->rung[PP_RX_DISCARDED] = RUNG_TP_BTF;
	set_tp_switches(t);
}

/* The copy probe points not on the forced rung (zc_completion aside: the error queue tells),
 * each with a reason. */
static unsigned missed_forced(struct ladder *l, enum rung forced)
{
	const struct tracer_bpf *t = l->t;
	unsigned failed = 0;

	for (int pp = 0; pp < PP_NR; pp++) {
		if (!(copy_pps & (1u << pp)) || pp == PP_ZC_COMPLETION || t->rung[pp] == forced ||
		    (rx_kind_pps & (1u << pp)))
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

/* Tests only, each an entry of filter_gen (bpf/filter.bpf.h) set from the environment:
 * NETIO_TEST_NO_THREAD_STORAGE=1 makes every thread's storage fail, so that every event goes
 * through the CPU's spill slot (bpf/maps.bpf.h); NETIO_TEST_XMIT_MISS=N makes the tracepoint
 * rung's xmit program pass over about one zerocopy TCP skb in N, for their receive to count
 * them; NETIO_TEST_RX_MISS=1 makes their receive pass over them too;
 * NETIO_TEST_CLAIM_TO_SPILL=1 makes a claim of a socket's pending zerocopy bytes find its
 * process's statistics refused. */
static void set_test_knobs(struct tracer_bpf *t)
{
	static const char *const knobs[] = { [1] = "NETIO_TEST_NO_THREAD_STORAGE",
		[2] = "NETIO_TEST_XMIT_MISS", [3] = "NETIO_TEST_RX_MISS",
		[4] = "NETIO_TEST_CLAIM_TO_SPILL" };
	const char *v;
	uint32_t n;

	for (uint32_t key = 1; key < sizeof(knobs) / sizeof(knobs[0]) && t->filter_gen >= 0;
	     key++) {
		v = getenv(knobs[key]);
		if (v && sscanf(v, "%u", &n) == 1)
			bpf_map_update_elem(t->filter_gen, &key, &n, BPF_ANY);
	}
}

/* The ladder from fentry down (or the forced rung only), then what the rungs taken allow. */
static int climb(struct ladder *l, enum attach_mode mode, bool no_latency, char *err,
		 size_t errlen)
{
	struct tracer_bpf *t = l->t;
	enum rung forced = forced_rung(mode);

	l->no_latency = no_latency;
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
	route_libbpf_messages(verbose);
	l->t = t;
	l->ksyms = ksyms_load();
	l->traceable = ftrace_funcs_load();
	l->kprobes = kprobes_available();
	if (l->kprobes)
		kretprobes_remove_stale();
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
	mark_splices_without_sys_enter(t);
	set_test_knobs(t);
	return 0;
}
