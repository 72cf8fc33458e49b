/* netio-tracer's own state, shared by the files of its main program: tracer.c (main, options,
 * setup and teardown), follow.c (what is followed; clear and reset), snapshot.c (the trace
 * object), runstats.c (BPF run-time stats), loop.c (signals, and the wait both modes share),
 * control.c (--control), oneshot.c (-- CMD, --pid, --cgroup, --duration) and prune.c
 * (--prune-exited). CLI and --control protocol: docs/tracer.md. */
#ifndef NETIO_TRACER_H
#define NETIO_TRACER_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include "attach.h"
#include "perf_counters.h"
#include "profile.h"
#include "sockets.h"
#include "stats.h"

#define MAX_PIDS 256
#define MAX_NETNS 64
/* --latency-sample's default: each thread times the first of every 16 calls of each class.
 * The clock reads and histogram adds of every call are much of what the full level costs
 * (bench/NOTES.md, "Latency sampled by default"); --latency-sample 1 times every call. */
#define NETIO_LATENCY_SAMPLE 16

struct tracer {
	pid_t parent;		/* who started us, at our start: a different getppid() later
				 * means it died (oneshot.c) */
	/* options */
	enum attach_mode mode;
	unsigned int pids[MAX_PIDS];
	int npids;
	char *netns_specs[MAX_NETNS];
	int nnetns_specs;
	const char *json_path, *folded_path;
	int freq;
	enum profile_source sample_source;
	const char *sample_cgroup;
	const char *cgroups[NETIO_MAX_CGROUPS];	/* --cgroup */
	int ncgroups;
	bool no_sample, no_counters, no_latency, control, verbose;
	/* --skb-programs; by level: always, or on demand with --no-latency */
	enum { SKB_PROGRAMS_BY_LEVEL, SKB_PROGRAMS_ON_DEMAND, SKB_PROGRAMS_ALWAYS } skb_programs;
	bool skb_always;	/* what it came to: every reset attaches them again */
	bool no_sockets;	/* --no-sockets: per process only (what the records cost apart) */
	unsigned long latency_sample;	/* --latency-sample N (0: not given, NETIO_LATENCY_SAMPLE) */
	enum stats_mode { STATS_SAMPLED, STATS_ALWAYS, STATS_OFF } stats_mode;
	double duration;
	double json_every;	/* one-shot: rewrite --json every so many seconds (0: at the end) */
	bool prune_exited;	/* --prune-exited: forget ended processes after each rewrite */
	char **cmd;
	/* state */
	struct tracer_bpf bpf;
	struct profiler *prof;
	struct perf_counters *pc;
	struct stats_baseline base;
	int stats_fd;		/* BPF_ENABLE_STATS: run-time stats on while it is open */
	int sysctl_prev;	/* previous kernel.bpf_stats_enabled if we wrote it, else -1 */
	bool stats_on;		/* sampled mode: inside an on-window */
	double stats_on_since, stats_off_since, stats_on_total;
	/* sampled mode: our programs' run count some time after a window closed; if it grew by
	 * the next window, someone else holds the stats on (then nothing is scaled) */
	unsigned long long stats_off_runs;
	bool stats_off_runs_taken, stats_external;
	bool detached;		/* `detach`: loaded, nothing of ours attached (an untraced run) */
};

/* loop.c: the signal that asked us to stop (SIGINT, SIGTERM, SIGHUP), 0 until one does; the
 * handlers that set it (no SA_RESTART: a blocking read returns EINTR; SIGPIPE ignored); and
 * what both modes do every few tens of ms while they wait */
extern volatile sig_atomic_t stop_signal;
void install_signals(void);
void periodic(struct tracer *tr);

/* runstats.c: BPF run-time stats for the self cost (--bpf-stats) */
void stats_enable(struct tracer *tr);
void stats_window(struct tracer *tr, bool on);
void stats_tick(struct tracer *tr);
void stats_restart(struct tracer *tr);
double stats_share(struct tracer *tr);
void stats_restore(struct tracer *tr);

/* prune.c: --prune-exited, the processes that ended gathered before a snapshot, deleted once
 * the reader took it */
struct pruned_one {
	u32 tgid;
	u64 since;	/* its followed-since value; 0: it had statistics only */
};
struct pruned {
	struct pruned_one *one;
	int n, cap;
	struct ended_socks socks;	/* their socket records (sockets.c) */
};
void prune_gather(const struct tracer *tr, struct pruned *p);
void prune_apply(const struct tracer *tr, const struct pruned *p);
void prune_forget(struct pruned *p);

/* follow.c: what is followed (0, or -1 with err filled), and starting over */
int follow_pid(struct tracer *tr, unsigned int pid, char *err, size_t errlen);
int follow_netns(struct tracer *tr, const char *spec, char *err, size_t errlen);
int follow_cgroup(struct tracer *tr, const char *dir, char *err, size_t errlen);
void clear_all(struct tracer *tr);
void reset_all(struct tracer *tr);

/* snapshot.c: the trace object into path ("-" or NULL: stdout), atomically, and the folded
 * stacks into folded (NULL: none); view: the terminal view after it. 0, or -1 with err. */
int snapshot_to(struct tracer *tr, const char *path, const char *folded, char *err,
		size_t errlen, bool view);

/* control.c: --control, commands on stdin until quit, EOF or a signal; the exit status */
int control_loop(struct tracer *tr);

/* oneshot.c: -- CMD, --pid, --cgroup until they end, --duration or a signal; the exit status */
int run_oneshot(struct tracer *tr);

#endif
