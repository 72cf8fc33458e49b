/* Reading the tracer's maps into one snapshot (per process, per netns, totals), resetting
 * them, and writing the snapshot as docs/DESIGN.md's `trace` object. */
#ifndef NETIO_STATS_H
#define NETIO_STATS_H
#include <stdbool.h>
#include <stdio.h>
#include "netio.h"
#include "attach.h"

struct json;

struct proc_snap {
	u32 tgid;
	char comm[NETIO_COMM_LEN];
	struct proc_stats st;
	struct sc_stats sc[SC_NR_CLASSES];
	bool has_sc[SC_NR_CLASSES];
	struct kernel_counts k;
};

struct netns_snap {
	u32 inum;
	struct netns_stats st;
};

struct prog_snap {
	int fd;			/* the program's (one entry per program: stats.c, same_program) */
	char name[64];
	char target[96];
	unsigned long long ns, runs, skipped;
};

struct snapshot {
	struct proc_snap *procs;
	int nprocs;
	struct netns_snap *netns;
	int nnetns;
	unsigned long long drops, forks_followed, cgroup_followed, thread_storage_spilled;
	unsigned long long drops_by_cause[CNT_DROPS_NR];	/* enum netio_counter */
	/* totals (docs/DESIGN.md trace object) */
	unsigned long long tx_bytes, tx_calls, tx_copy_bytes, tx_spliced_bytes, zc_tx_bytes,
			   fallback_copy_bytes, rx_copy_bytes, pinned_pages;
	bool tx_copy_inferred, pinned_pages_null, tx_from_syscalls, zc_at_send;
	/* zc_at_send: the namespaces' zero-copy bytes no program saw leave or arrive (or not
	 * left yet), which the fallback copy, counted at the receive, can miss */
	unsigned long long zc_bytes_no_program_saw;
	/* each process's zero-copy bytes are known (else null per process: stats.c,
	 * zc_per_process; the totals come from the namespaces) */
	bool zc_per_process;
	/* sends that made zero-copy skbs before the per-skb programs were attached (on demand):
	 * their fallback copy went unseen; of those, sends whose zero-copy bytes only xmit
	 * counts (UDP, io_uring's SEND_ZC). Either makes the figures they feed null. */
	unsigned long long zc_sends_before_skb_progs, zc_uncounted_before_skb_progs;
	bool skb_on_demand, skb_progs_attached;
	bool zc_bytes_null, fallback_null;
	/* zc_skbs_at_tcp is counted: a tcp_probe program is loaded (the tracepoint rung's full
	 * level); else null, with why */
	bool skbs_at_tcp_counted;
	unsigned long long rx_unsized_calls;	/* rx_copy_bytes unknown (proc_stats) */
	/* the receive kinds beside rx_copy, [enum rx_kind of bpf/receive.bpf.h]: totals,
	 * whether a rung counts each, and splices no record could size */
	unsigned long long rx_kind_bytes[3], rx_unsized_splices;
	bool rx_kind_counted[3];
	struct sc_stats sc[SC_NR_CLASSES];
	bool has_sc[SC_NR_CLASSES];
	struct kernel_counts k;	/* the kernel's per-thread counters, summed (perf_counters) */
	unsigned long long zc_completions, zc_completed_sends, zc_copied_sends, zc_skbs_at_tcp,
			   zc_skbs_again, fallback_copy_skbs, zc_tx_skbs, zc_skbs_unseen_at_xmit,
			   zc_bytes_unseen_at_xmit, zc_bytes_seen_at_xmit;
	/* of fallback_copy_bytes (skbs): TCP bytes received before, copied again */
	unsigned long long fallback_copy_again_bytes, fallback_copy_again_skbs;
	/* self cost since the last reset */
	struct prog_snap progs[MAX_ATTACHED];
	int nprogs;
	unsigned long long bpf_ns, bpf_runs;
	unsigned long long programs_skipped;	/* runs the kernel skipped (recursion): drops */
	bool stats_enabled;
	const char *stats_how;
	double stats_share;	/* measured run times are scaled by 1/share */
	double duration_s;
	/* per-socket records (user/sockets.c), and events no record could take */
	struct sock_stats *socks;
	int nsocks;
	unsigned long long sock_untracked;
	unsigned long long tcp_ends_lost;	/* connections established the BPF side could not
						 * report (its ring full) */
	bool socks_off;		/* --no-sockets, or no record maps */
};

struct stats_baseline {
	unsigned long long ns[MAX_ATTACHED], runs[MAX_ATTACHED], skipped[MAX_ATTACHED];
	double t0;		/* CLOCK_MONOTONIC seconds at reset */
	const char *stats_how;	/* how run-time stats are on: "BPF_ENABLE_STATS", "sysctl", NULL */
	double share;		/* share of the time they were on since the reset (0..1) */
};

extern const char *sc_class_names[SC_NR_CLASSES];
extern const char *const drop_cause_names[CNT_DROPS_NR];
const char *sc_class_name(int cls);
/* Copies the latency histogram of sc into h and returns its sum: the timed calls (poll,
 * epoll_wait and sendfile are counted from their start, timed once sys_exit is attached). */
unsigned long long sc_hist(const struct sc_stats *sc, unsigned long long h[NETIO_HIST_SLOTS]);

double monotonic_s(void);
u64 monotonic_ns(void);
/* Zero every counter and histogram (not the filter), remember the program run-time baseline. */
int stats_make_process(const struct tracer_bpf *t, u32 tgid);
int stats_reset(struct tracer_bpf *t, struct stats_baseline *base);
/* Read everything. extra_pids: processes to list even if nothing was counted for them. */
int stats_read(const struct tracer_bpf *t, const struct stats_baseline *base,
	       const unsigned int *extra_pids, int nextra, struct snapshot *s);
void stats_free(struct snapshot *s);
/* Whether the totals zc_tx_bytes, fallback_copy_bytes and rx_copy_bytes are counted (else
 * null, with why in "unavailable"): for the JSON and the view alike. */
bool zc_tx_counted(const struct tracer_bpf *t, const struct snapshot *s);
bool fallback_counted(const struct tracer_bpf *t, const struct snapshot *s);
bool rx_copy_counted(const struct tracer_bpf *t, const struct snapshot *s);
/* Forget every per-socket and per-thread state too (on `clear`). */
void stats_clear_state(const struct tracer_bpf *t);

/* Write the trace object's fields into an open JSON object (the caller adds perf, samples). */
void stats_write_json(const struct tracer_bpf *t, const struct snapshot *s, struct json *j);
/* The "attach", "probes", "attach_why" and "bpf_build" members (the snapshot's and the ready
 * line's). */
void stats_write_attach(const struct tracer_bpf *t, struct json *j);

/* view.c: the human view (copy table, log2 histograms, self cost). */
void view_print(FILE *f, const struct tracer_bpf *t, const struct snapshot *s);

#endif
