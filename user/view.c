// SPDX-License-Identifier: GPL-2.0
/* The human view: where the bytes were copied (per copy site, with the rung that measured
 * it), the socket syscalls as bcc-style log2 histograms, and what tracing cost. */
#include <math.h>
#include <string.h>
#include "stats.h"
#include "trace_helpers.h"

static void copy_row(FILE *f, const char *site, const char *how, bool available,
		     unsigned long long bytes, unsigned long long msgs, bool inferred)
{
	char hb[32], per[32];

	if (!available) {
		fprintf(f, "  %-38s %-12s %16s %12s  %s\n", site, how, "-", "-", "(unavailable)");
		return;
	}
	human_bytes((double)bytes, hb, sizeof(hb));
	if (msgs)
		snprintf(per, sizeof(per), "%.1f", (double)bytes / msgs);
	else
		snprintf(per, sizeof(per), "-");
	fprintf(f, "  %-38s %-12s %16llu %12s  %s%s\n", site, how, bytes, per, hb,
		inferred ? "  (inferred)" : "");
}

void view_print(FILE *f, const struct tracer_bpf *t, const struct snapshot *s)
{
	unsigned long long msgs = s->tx_calls;
	char hb[32];

	fprintf(f, "\nnetio-tracer: %.2f s, %d process(es), %llu send calls with data\n",
		s->duration_s, s->nprocs, msgs);
	fprintf(f, "\nWhere the bytes were copied (bytes/msg = bytes per send call):\n");
	fprintf(f, "  %-38s %-12s %16s %12s\n", "copy site", "rung", "bytes", "bytes/msg");
	copy_row(f, "tx: bytes sent (TCP and UDP)", rung_name(t->rung[PP_TX_BYTES]),
		 t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE, s->tx_bytes, msgs, false);
	copy_row(f, "tx: copy from user (kernel)", rung_name(t->rung[PP_TX_COPY]),
		 t->rung[PP_TX_COPY] != RUNG_UNAVAILABLE, s->tx_copy_bytes, msgs, s->tx_copy_inferred);
	copy_row(f, "tx: spliced (sendfile, splice)", rung_name(t->rung[PP_TX_BYTES]),
		 t->rung[PP_TX_BYTES] != RUNG_UNAVAILABLE, s->tx_spliced_bytes, msgs, false);
	copy_row(f, "tx: zero-copy (user pages)", rung_name(t->rung[PP_PINNING]),
		 zc_tx_counted(t, s), s->zc_tx_bytes, msgs, false);
	if (!s->pinned_pages_null)
		fprintf(f, "  %-38s %-12s %16llu pages\n", "tx: pinned pages", rung_name(t->rung[PP_PINNING]),
			s->pinned_pages);
	copy_row(f, "fallback copy (zc received, copied)", rung_name(t->rung[PP_FALLBACK_COPY]),
		 fallback_counted(t, s), s->fallback_copy_bytes, msgs, false);
	copy_row(f, "rx: copy to user", rung_name(t->rung[PP_RX_COPY]),
		 rx_copy_counted(t, s), s->rx_copy_bytes, msgs, false);
	if ((s->zc_tx_skbs || s->fallback_copy_skbs) && !s->fallback_null) {
		fprintf(f, "  zerocopy skbs: %llu sent, %llu copied on local delivery",
			s->zc_tx_skbs, s->fallback_copy_skbs);
		if (s->skbs_at_tcp_counted)
			fprintf(f, ", %llu still zerocopy when TCP received them", s->zc_skbs_at_tcp);
		fputc('\n', f);
	}
	if (t->rung[PP_ZC_COMPLETION] != RUNG_UNAVAILABLE && s->zc_completions)
		fprintf(f, "  zerocopy completions (%s): %llu notifications for %llu sends, %llu "
			"sends copied\n", rung_name(t->rung[PP_ZC_COMPLETION]), s->zc_completions,
			s->zc_completed_sends, s->zc_copied_sends);

	if (s->nprocs > 1) {
		fprintf(f, "\nPer process:\n  %8s %-16s %14s %14s %14s %14s\n", "pid", "comm",
			"tx_bytes", "tx_copy", "zc_tx", "rx_copy");
		for (int i = 0; i < s->nprocs; i++) {
			const struct proc_snap *p = &s->procs[i];
			fprintf(f, "  %8u %-16s %14llu %14llu %14llu %14llu\n", p->tgid,
				p->comm[0] ? p->comm : "?",
				p->st.tx_bytes, p->st.tx_copy_bytes, p->st.zc_tx_bytes,
				p->st.rx_copy_bytes);
		}
	}

	fprintf(f, "\nSocket syscalls (%s, %s; p50/p99 interpolated inside log2 buckets):\n",
		rung_name(t->rung[PP_SYSCALLS]), t->sc_end_at_socket ?
		"send/receive timed from sys_enter to the socket layer's return" :
		"timed from sys_enter to sys_exit");
	if (t->sampled_1_in > 1)
		fprintf(f, "Latency sampled: each thread timed the first of every %u calls of each "
			"class (--latency-sample 1 times every call); calls, bytes and errors are "
			"every call's\n", t->sampled_1_in);
	for (int c = 0; c < SC_NR_CLASSES; c++) {
		unsigned long long h[NETIO_HIST_SLOTS], timed;
		const struct sc_stats *sc = &s->sc[c];
		if (!s->has_sc[c] || !sc->count)
			continue;
		timed = sc_hist(sc, h);
		fprintf(f, "\n%s: %llu calls (%llu timed), %s, %llu errors, mean %.2f us, p50 %.2f us, "
			"p99 %.2f us\n", sc_class_name(c), sc->count, timed,
			human_bytes((double)sc->bytes, hb, sizeof(hb)), sc->errors, timed ? sc->total_ns / 1e3 / timed : 0.0,
			log2_hist_percentile(h, NETIO_HIST_SLOTS, 0.5) / 1e3,
			log2_hist_percentile(h, NETIO_HIST_SLOTS, 0.99) / 1e3);
		print_log2_hist(f, h, NETIO_HIST_SLOTS, "nsecs");
	}

	fprintf(f, "\nTracer cost: %llu ns in %llu BPF program runs", s->bpf_ns, s->bpf_runs);
	if (msgs)
		fprintf(f, " = %.1f ns per send call", (double)s->bpf_ns / msgs);
	if (!s->stats_enabled)
		fprintf(f, " (BPF run-time stats were off)");
	else if (s->stats_share < 1)
		fprintf(f, " (measured %.0f%% of the time, scaled)", 100 * s->stats_share);
	fprintf(f, "; %llu drops", s->drops);
	for (int i = 0; i < CNT_DROPS_NR; i++)
		if (s->drops_by_cause[i])
			fprintf(f, " (%s %llu)", drop_cause_names[i], s->drops_by_cause[i]);
	if (s->programs_skipped)
		fprintf(f, " (program_skipped %llu)", s->programs_skipped);
	fputc('\n', f);
}
