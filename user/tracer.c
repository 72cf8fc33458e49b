// SPDX-License-Identifier: GPL-2.0
/* netio-tracer: where the bytes get copied, and what each copy costs.
 * CLI and --control protocol: docs/tracer.md; probe points and the trace object:
 * docs/DESIGN.md. */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "cgroups.h"
#include "json.h"
#include "perf_counters.h"
#include "probe.h"
#include "profile.h"
#include "sockets.h"
#include "stats.h"
#include "sysctl.h"
#include "trace_helpers.h"

#define MAX_PIDS 256
#define MAX_NETNS 64

static volatile sig_atomic_t stop_signal;

struct tracer {
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
	bool no_sockets;	/* --no-sockets: per process only (issue 28: its cost apart) */
	unsigned long latency_sample;	/* --latency-sample N (0: not given) */
	enum stats_mode { STATS_SAMPLED, STATS_ALWAYS, STATS_OFF } stats_mode;
	double duration;
	double json_every;	/* one-shot: rewrite --json every so many seconds (0: at the end) */
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

static void usage(FILE *f)
{
	fprintf(f,
"usage: netio-tracer [--attach auto|fentry|kprobe|tracepoint] [--pid PID]... [--cgroup DIR]...\n"
"                    [--netns NAME|PATH]...\n"
"                    [--json FILE] [--folded FILE] [--freq HZ] [--sample-source SRC]\n"
"                    [--sample-cgroup DIR] [--no-sample] [--no-counters] [--no-latency]\n"
"                    [--latency-sample N] [--no-sockets]\n"
"                    [--duration S] [--json-every S] [--control]\n"
"                    [--bpf-stats sampled|always|off]\n"
"                    [--verbose] [-- CMD ARGS...]\n"
"       netio-tracer --probe\n"
"\n"
"Counts, per process, the bytes sent, copied from user space, sent zero-copy, copied back on\n"
"local delivery and copied to user space, and the socket syscalls' latency, with the first\n"
"attach rung this kernel allows (fentry > kprobe > tp_btf/tracepoint > inferred).\n"
"  --attach MODE   force a rung (exit 2 if it cannot attach here)\n"
"  --pid PID       follow PID, its threads and the children it forks from now on\n"
"  --cgroup DIR    follow every process of the cgroup v2 directory DIR and below it: those\n"
"                  there now, forked there or moved there later (not with --control); the\n"
"                  trace then ends with -- CMD, --duration or a signal\n"
"  --netns NS      network namespaces whose devices' softirq events count (default: ours)\n"
"  --json FILE     write the trace JSON there (default stdout)\n"
"  --folded FILE   folded on-CPU stacks of the followed processes\n"
"  --freq HZ       stack sampling frequency (default 999; tick: at most CONFIG_HZ)\n"
"  --sample-source auto|cycles|cpu-clock|tick\n"
"                  what stack samples are taken on: auto (default) is cycles where a PMU\n"
"                  exists, else tick; tick samples on the scheduler tick (no timer of\n"
"                  its own, CONFIG_HZ per busy CPU: far cheaper in a VM); a source named\n"
"                  explicitly exits 2 if it cannot be used here\n"
"  --sample-cgroup DIR\n"
"                  a cgroup2 directory the followed processes run in: cycles or cpu-clock\n"
"                  samples come from one event per CPU that runs only while a task of it\n"
"                  is on that CPU, not from per-task events, whose timers re-arm at every\n"
"                  context switch (a VM exit each in a VM); pids outside it keep per-task\n"
"                  events; -- CMD starts in it\n"
"  --no-latency    count bytes and calls without timing them: no syscall hook (every\n"
"                  syscall of the machine would pass it), no latency histogram\n"
"  --latency-sample N\n"
"                  time 1 call in N of each thread (default 1: every call); every call is\n"
"                  still counted, and the histograms hold the timed ones\n"
"  --no-sockets    count per process only, not per socket\n"
"  --json-every S  also rewrite --json FILE every S seconds while tracing (atomically), for\n"
"                  a reader that follows the counts live (trace --openmetrics :PORT)\n"
"  --control       read commands on stdin (pid add, netns add, clear, reset, detach, attach,\n"
"                  snapshot, quit)\n"
"  --bpf-stats M   BPF run-time stats for the self cost: sampled (default: on 10%% of the\n"
"                  time, scaled), always (exact, costs ~2 clock reads per program run), off\n"
"  --probe         print what this kernel allows as JSON and exit\n"
"  -- CMD ARGS     run CMD, followed from its first instruction; stop when it exits\n");
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: a blocking read returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ---- kernel.bpf_stats_enabled ------------------------------------------------------- */

#define STATS_SYSCTL "kernel/bpf_stats_enabled"

/* Run-time stats cost every BPF program run two sched_clock() reads (what that costs here:
 * bench/NOTES.md), several runs per message, so by default they are on for 100 ms of every
 * second, from the start of each run (reset), and the program run times are scaled by the
 * share of time they were on (self.sampled_share). --bpf-stats always keeps them on for the
 * whole run. Each switch patches the kernel's text (a static key in every BPF program run):
 * twice a second is nothing on hardware, but QEMU/TCG guests can livelock on frequent
 * patching of so hot a site, which is why the VM tests use --bpf-stats always.
 * BPF_ENABLE_STATS keeps them on while its fd is open: the kernel restores the previous state
 * when we close it or exit, however we exit. The sysctl is the fallback (kernels < 5.8). */
#define STATS_ON_S 0.100
#define STATS_PERIOD_S 1.000

static void stats_window(struct tracer *tr, bool on)
{
	double now = monotonic_s();

	if (on == tr->stats_on)
		return;
	if (on) {
		tr->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (tr->stats_fd < 0)
			return;
		tr->stats_on = true;
		tr->stats_on_since = now;
	} else {
		close(tr->stats_fd);
		tr->stats_fd = -1;
		tr->stats_on = false;
		tr->stats_on_total += now - tr->stats_on_since;
		tr->stats_off_since = now;
	}
}

static void stats_enable(struct tracer *tr)
{
	tr->sysctl_prev = -1;
	if (tr->stats_mode == STATS_OFF)
		return;
	stats_window(tr, true);
	if (tr->stats_on) {
		tr->base.stats_how = tr->stats_mode == STATS_SAMPLED ? "BPF_ENABLE_STATS, sampled" :
				     "BPF_ENABLE_STATS";
		return;
	}
	/* no BPF_ENABLE_STATS: the sysctl, for the whole run */
	tr->stats_mode = STATS_ALWAYS;
	int prev = sysctl_read_int(STATS_SYSCTL);
	if (prev == 0 && sysctl_write_int(STATS_SYSCTL, 1) == 0)
		tr->sysctl_prev = prev;
	if (prev > 0 || tr->sysctl_prev == 0)	/* on: already, or by us */
		tr->base.stats_how = "sysctl";
}

static unsigned long long our_runs(struct tracer *tr)
{
	unsigned long long sum = 0;

	for (int i = 0; i < tr->bpf.nprogs; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		if (!bpf_obj_get_info_by_fd(tr->bpf.progs[i].prog_fd, &info, &len))
			sum += info.run_cnt;
	}
	return sum;
}

/* every ~50 ms: open and close the sampling windows (their real length is measured) */
static void stats_tick(struct tracer *tr)
{
	double now;

	if (tr->stats_mode != STATS_SAMPLED)
		return;
	now = monotonic_s();
	if (tr->stats_on) {
		if (now - tr->stats_on_since >= STATS_ON_S) {
			stats_window(tr, false);
			tr->stats_off_runs_taken = false;
		}
		return;
	}
	if (!tr->stats_off_runs_taken && now - tr->stats_off_since >= 0.04) {
		/* a little after closing: runs that started inside the window are counted */
		tr->stats_off_runs = our_runs(tr);
		tr->stats_off_runs_taken = true;
	}
	if (now - tr->stats_off_since >= STATS_PERIOD_S - STATS_ON_S) {
		if (tr->stats_off_runs_taken && our_runs(tr) > tr->stats_off_runs)
			tr->stats_external = true;	/* counted while our window was closed */
		stats_window(tr, true);
	}
}

/* a run starts: a window opens now */
static void stats_restart(struct tracer *tr)
{
	if (tr->stats_mode != STATS_SAMPLED)
		return;
	stats_window(tr, false);
	tr->stats_on_total = 0;
	tr->stats_external = false;
	tr->stats_off_runs_taken = false;
	stats_window(tr, true);
}

/* share of the time since the last reset that the stats were on */
static double stats_share(struct tracer *tr)
{
	if (tr->stats_mode == STATS_SAMPLED && tr->base.stats_how)
		tr->base.stats_how = tr->stats_external ?
			"BPF_ENABLE_STATS, sampled; also on outside our windows (another holder): not scaled" :
			"BPF_ENABLE_STATS, sampled";
	double now = monotonic_s(), on, all;

	if (tr->stats_mode == STATS_OFF || !tr->base.stats_how)
		return 0;
	if (tr->stats_mode == STATS_ALWAYS || tr->stats_external)
		return 1;	/* always on (ours or someone else's): nothing to scale */
	on = tr->stats_on_total + (tr->stats_on ? now - tr->stats_on_since : 0);
	all = now - tr->base.t0;
	return all > 0 && on > 0 ? (on < all ? on / all : 1) : 0;
}

static void stats_restore(struct tracer *tr)
{
	if (tr->stats_fd >= 0)
		close(tr->stats_fd);
	tr->stats_fd = -1;
	tr->stats_on = false;
	if (tr->sysctl_prev >= 0)
		sysctl_write_int(STATS_SYSCTL, tr->sysctl_prev);
	tr->sysctl_prev = -1;
}

static void periodic(struct tracer *tr)
{
	if (tr->detached)
		return;
	stats_tick(tr);
	tracer_bpf_poll(&tr->bpf);
}

/* ---- following ----------------------------------------------------------------------- */

static int tgid_of(unsigned int pid, unsigned int *tgid)
{
	char path[64], line[256];
	FILE *f;
	int ok = -1;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %u", tgid) == 1) {
			ok = 0;
			break;
		}
	fclose(f);
	return ok;
}

static int follow_pid(struct tracer *tr, unsigned int pid, char *err, size_t errlen)
{
	unsigned int tgid;
	u8 one = 1;

	if (tgid_of(pid, &tgid)) {
		snprintf(err, errlen, "no such process %u", pid);
		return -1;
	}
	if (bpf_map_update_elem(tr->bpf.followed_tgids, &tgid, &one, BPF_ANY)) {
		snprintf(err, errlen, "cannot follow %u: %s", tgid, strerror(errno));
		return -1;
	}
	if (stats_make_process(&tr->bpf, tgid) && tr->verbose)
		fprintf(stderr, "netio-tracer: statistics of %u left to its threads\n", tgid);
	tracer_bpf_filter_changed(&tr->bpf);
	tracer_bpf_flush_threads(&tr->bpf);	/* its threads' kernel counters start now */
	bool known = false;
	for (int i = 0; i < tr->npids; i++)
		known |= tr->pids[i] == tgid;
	if (known)
		return 0;
	if (tr->npids < MAX_PIDS)
		tr->pids[tr->npids++] = tgid;
	if (tr->pc && perf_counters_add_pid(tr->pc, tgid) < 0 && tr->verbose)
		fprintf(stderr, "netio-tracer: perf counters for %u: %s\n", tgid, strerror(errno));
	if (tr->prof && profiler_add_pid(tr->prof, tgid) < 0 && tr->verbose)
		fprintf(stderr, "netio-tracer: sampling %u: %s\n", tgid, strerror(errno));
	return 0;
}

static int follow_netns(struct tracer *tr, const char *spec, char *err, size_t errlen)
{
	unsigned int inum;

	if (netns_inum(spec, &inum, err, errlen))
		return -1;
	if (tracer_bpf_follow_netns(&tr->bpf, inum)) {
		if (errno == ENOSPC)
			snprintf(err, errlen, "cannot follow netns %s: %d namespaces followed since "
				 "the last reset, the most there can be", spec, NETIO_MAX_NETNS);
		else
			snprintf(err, errlen, "cannot follow netns %s: %s", spec, strerror(errno));
		return -1;
	}
	return 0;
}

static int follow_cgroup_proc(pid_t pid, void *ctx)
{
	struct tracer *tr = ctx;
	unsigned int tgid = pid;	/* cgroup.procs lists processes */
	u8 one = 1;

	bpf_map_update_elem(tr->bpf.followed_tgids, &tgid, &one, BPF_ANY);
	return 0;
}

/* --cgroup: the cgroup's id goes into the filter first, then the processes already in it and
 * below it: one forked or moved there meanwhile is followed by the BPF side. */
static int follow_cgroup(struct tracer *tr, const char *dir, char *err, size_t errlen)
{
	uint64_t id, any = NETIO_ANY_CGROUP;
	u8 one = 1;

	if (cgroup_dir_id(dir, &id, err, errlen) ||
	    tracer_bpf_follow_cgroups(&tr->bpf, err, errlen))
		return -1;
	if (bpf_map_update_elem(tr->bpf.followed_cgroups, &id, &one, BPF_ANY) ||
	    bpf_map_update_elem(tr->bpf.followed_cgroups, &any, &one, BPF_ANY)) {
		snprintf(err, errlen, "--cgroup %s: %s", dir, strerror(errno));
		return -1;
	}
	cgroup_for_each_proc(dir, follow_cgroup_proc, tr);
	tracer_bpf_filter_changed(&tr->bpf);
	return 0;
}

static void clear_map(int fd, size_t key_size)
{
	char key[64];

	while (fd >= 0 && bpf_map_get_next_key(fd, NULL, key) == 0)
		if (bpf_map_delete_elem(fd, key))
			break;
	(void)key_size;
}

static void clear_all(struct tracer *tr)
{
	clear_map(tr->bpf.followed_tgids, sizeof(u32));
	clear_map(tr->bpf.followed_netns, sizeof(u32));
	tracer_bpf_filter_changed(&tr->bpf);
	tracer_bpf_flush_threads(&tr->bpf);	/* the kernel counters stop for the unfollowed */
	stats_clear_state(&tr->bpf);
	if (tr->pc)
		perf_counters_clear(tr->pc);
	if (tr->prof)
		profiler_clear_pids(tr->prof);
	tr->npids = 0;
}

static void reset_all(struct tracer *tr)
{
	tracer_bpf_rearm(&tr->bpf);
	stats_restart(tr);
	stats_reset(&tr->bpf, &tr->base);
	if (tr->prof)
		profiler_reset(tr->prof);
	if (tr->pc)
		perf_counters_reset(tr->pc);
}

/* ---- snapshot ------------------------------------------------------------------------ */

static void write_trace_json(struct tracer *tr, FILE *out, const char *folded, struct snapshot *s)
{
	struct json j;

	json_init(&j, out);
	json_begin_object(&j);
	stats_write_json(&tr->bpf, s, &j);
	json_key(&j, "perf");
	if (tr->pc) {
		char *buf = NULL;
		size_t len = 0;
		FILE *ms = open_memstream(&buf, &len);
		if (ms) {
			perf_counters_write_json(tr->pc, &s->k, ms);
			fclose(ms);
			json_raw(&j, buf);
			free(buf);
		} else {
			json_null(&j);
		}
	} else {
		json_null(&j);
	}
	json_key(&j, "samples");
	if (tr->prof) {
		long lost = 0, total = 0;
		if (folded) {
			FILE *ff = fopen(folded, "w");
			if (ff) {
				profiler_write_folded(tr->prof, ff);
				fclose(ff);
			} else {
				fprintf(stderr, "netio-tracer: %s: %s\n", folded, strerror(errno));
			}
		}
		total = profiler_samples(tr->prof, &lost);
		json_begin_object(&j);
		json_kv_int(&j, "total", total);
		json_kv_int(&j, "lost", lost);
		profiler_write_json(tr->prof, &j);
		json_end(&j);
	} else {
		json_null(&j);
		if (folded) {
			/* no sampling: an empty stack file rather than none */
			FILE *ff = fopen(folded, "w");
			if (ff)
				fclose(ff);
		}
	}
	json_end(&j);
	json_finish(&j);
}

/* Write the snapshot to path atomically (tmp + rename). */
static int snapshot_to(struct tracer *tr, const char *path, const char *folded, char *err,
		       size_t errlen, bool view)
{
	struct snapshot s;
	char tmp[4096];
	FILE *f;

	tr->base.share = stats_share(tr);
	if (stats_read(&tr->bpf, &tr->base, tr->pids, tr->npids, &s)) {
		snprintf(err, errlen, "cannot read the maps");
		return -1;
	}
	if (!path || !strcmp(path, "-")) {
		write_trace_json(tr, stdout, folded, &s);
	} else {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, getpid());
		f = fopen(tmp, "w");
		if (!f) {
			snprintf(err, errlen, "%.400s: %s", tmp, strerror(errno));
			stats_free(&s);
			return -1;
		}
		write_trace_json(tr, f, folded, &s);
		if (fclose(f) || rename(tmp, path)) {
			snprintf(err, errlen, "%.400s: %s", path, strerror(errno));
			unlink(tmp);
			stats_free(&s);
			return -1;
		}
	}
	if (view)
		view_print(stdout, &tr->bpf, &s);
	stats_free(&s);
	return 0;
}

/* ---- attach and detach (the two passes, issue 13) ----------------------------------- */

/* Nothing of ours stays attached: no program link, no sampling event, no BPF run-time stats;
 * the followed set is emptied (an untraced run starts new processes anyway). */
static void detach_all(struct tracer *tr)
{
	clear_all(tr);
	tracer_bpf_detach(&tr->bpf);
	if (tr->prof)
		profiler_detach(tr->prof);
	if (tr->stats_mode == STATS_SAMPLED)
		stats_window(tr, false);
	tr->detached = true;
}

static int attach_all(struct tracer *tr, char *err, size_t errlen)
{
	if (!tr->detached)
		return 0;
	if (tracer_bpf_attach(&tr->bpf, err, errlen))
		return -1;
	if (tr->prof && profiler_attach(tr->prof, err, errlen)) {
		tracer_bpf_detach(&tr->bpf);
		return -1;
	}
	tr->detached = false;
	stats_restart(tr);
	return 0;
}

/* ---- control loop -------------------------------------------------------------------- */

static void reply(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static void print_ready(struct tracer *tr)
{
	struct json j;

	fputs("ready ", stdout);
	json_init(&j, stdout);
	json_begin_object(&j);
	stats_write_attach(&tr->bpf, &j);
	json_key(&j, "samples");
	if (tr->prof) {
		json_begin_object(&j);
		profiler_write_json(tr->prof, &j);
		json_end(&j);
	} else {
		json_null(&j);
	}
	json_end(&j);
	json_finish(&j);
}

/* One line from stdin (without its newline) into line; 1 if a line, 0 on EOF or a stop
 * signal. While waiting, polls the attach-on-demand programs every 20 ms. */
static int read_command(struct tracer *tr, char *line, size_t len)
{
	static char buf[8192];
	static size_t have;
	static bool eof;

	for (;;) {
		char *nl = memchr(buf, '\n', have);
		if (nl || (eof && have)) {
			size_t n = nl ? (size_t)(nl - buf) : have;
			size_t c = n < len - 1 ? n : len - 1;
			memcpy(line, buf, c);
			line[c] = 0;
			n += nl ? 1 : 0;
			memmove(buf, buf + n, have - n);
			have -= n;
			return 1;
		}
		if (eof || stop_signal)
			return 0;
		if (have == sizeof(buf))
			have = 0;	/* a line longer than the buffer: drop it */
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		int r = poll(&pfd, 1, 50);
		periodic(tr);
		if (r < 0 && errno != EINTR)
			return 0;
		if (r <= 0)
			continue;
		ssize_t got = read(STDIN_FILENO, buf + have, sizeof(buf) - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			eof = true;
		else
			have += got;
	}
}

static int control_loop(struct tracer *tr)
{
	char line[8192], err[512];

	print_ready(tr);
	while (!stop_signal && read_command(tr, line, sizeof(line))) {
		char *argv[8] = { 0 }, *save = NULL, *tok;
		int argc = 0;

		for (tok = strtok_r(line, " \t\r\n", &save); tok && argc < 8;
		     tok = strtok_r(NULL, " \t\r\n", &save))
			argv[argc++] = tok;
		if (!argc)
			continue;
		err[0] = 0;
		if (!strcmp(argv[0], "quit")) {
			reply("ok");
			break;
		} else if (!strcmp(argv[0], "pid") && argc == 3 && !strcmp(argv[1], "add")) {
			char *end;
			long pid = strtol(argv[2], &end, 10);
			if (*end || pid <= 0)
				reply("error bad pid %s", argv[2]);
			else if (tr->detached)
				reply("error detached: attach before adding a pid");
			else if (follow_pid(tr, pid, err, sizeof(err)))
				reply("error %s", err);
			else
				reply("ok");
		} else if (!strcmp(argv[0], "netns") && argc == 3 && !strcmp(argv[1], "add")) {
			if (follow_netns(tr, argv[2], err, sizeof(err)))
				reply("error %s", err);
			else
				reply("ok");
		} else if (!strcmp(argv[0], "clear") && argc == 1) {
			clear_all(tr);
			reply("ok");
		} else if (!strcmp(argv[0], "reset") && argc == 1) {
			reset_all(tr);
			reply("ok");
		} else if (!strcmp(argv[0], "detach") && argc == 1) {
			detach_all(tr);
			reply("ok");
		} else if (!strcmp(argv[0], "attach") && argc == 1) {
			if (attach_all(tr, err, sizeof(err)))
				reply("error %s", err);
			else
				reply("ok");
		} else if (!strcmp(argv[0], "snapshot") && (argc == 2 || argc == 3)) {
			if (snapshot_to(tr, argv[1], argc == 3 ? argv[2] : NULL, err, sizeof(err), false))
				reply("error %s", err);
			else
				reply("ok");
		} else {
			reply("error unknown command (pid add PID | netns add NAME | clear | reset | "
			      "detach | attach | snapshot JSON [FOLDED] | quit)");
		}
	}
	return 0;
}

/* ---- one-shot mode ------------------------------------------------------------------- */

static bool process_gone(unsigned int pid)
{
	char path[64], buf[512];
	FILE *f;
	bool gone = true;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f)) {
		char *p = strrchr(buf, ')');
		gone = p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
	}
	fclose(f);
	return gone;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);	/* a signal ends it early */
}

/* Moves pid into the cgroup2 directory dir, for --sample-cgroup's events to sample it; where
 * that fails it is sampled by per-task events (profiler_add_pid checks). */
static void join_cgroup(const char *dir, pid_t pid)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "we");
	if (!f)
		return;
	fprintf(f, "%d\n", (int)pid);
	fclose(f);
}

/* fork; the child waits on a pipe until it is in the filter (and, with --sample-cgroup, in
 * that cgroup), then execs CMD (same pid). */
static pid_t launch_gated(struct tracer *tr, char **cmd, char *err, size_t errlen)
{
	int gate[2];
	pid_t pid;
	char c;

	if (pipe(gate)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(gate[1]);
		signal(SIGPIPE, SIG_DFL);
		if (read(gate[0], &c, 1) != 1)
			_exit(127);
		close(gate[0]);
		execvp(cmd[0], cmd);
		fprintf(stderr, "netio-tracer: %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	close(gate[0]);
	if (tr->sample_cgroup)
		join_cgroup(tr->sample_cgroup, pid);
	if (follow_pid(tr, pid, err, errlen)) {
		close(gate[1]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	reset_all(tr);
	c = 'g';
	if (write(gate[1], &c, 1) != 1) { /* the child died: waitpid tells */ }
	close(gate[1]);
	return pid;
}

static int run_oneshot(struct tracer *tr)
{
	char err[512];
	pid_t child = -1;
	int status = 0;
	double t0, next_json;

	if (tr->cmd) {
		child = launch_gated(tr, tr->cmd, err, sizeof(err));
		if (child < 0) {
			fprintf(stderr, "netio-tracer: %s\n", err);
			return 1;
		}
	}
	t0 = monotonic_s();
	next_json = t0 + tr->json_every;
	while (!stop_signal) {
		if (tr->json_every > 0 && monotonic_s() >= next_json) {
			if (snapshot_to(tr, tr->json_path, NULL, err, sizeof(err), false))
				fprintf(stderr, "netio-tracer: %s\n", err);
			next_json += tr->json_every;
		}
		if (tr->duration > 0 && monotonic_s() - t0 >= tr->duration)
			break;
		if (child > 0) {
			pid_t r = waitpid(child, &status, WNOHANG);
			if (r == child) {
				child = -1;
				break;
			}
		} else if (tr->npids && !tr->ncgroups) {	/* a cgroup may get processes later */
			bool all_gone = true;
			for (int i = 0; i < tr->npids; i++)
				all_gone &= process_gone(tr->pids[i]);
			if (all_gone)
				break;
		}
		periodic(tr);
		sleep_ms(child > 0 ? 20 : 50);
	}
	if (child > 0) {
		/* stopped by a signal or --duration: the command keeps running untraced */
		fprintf(stderr, "netio-tracer: stopping; pid %d keeps running\n", child);
	}
	if (snapshot_to(tr, tr->json_path, tr->folded_path, err, sizeof(err),
			isatty(STDOUT_FILENO) && tr->json_path)) {
		fprintf(stderr, "netio-tracer: %s\n", err);
		return 1;
	}
	if (isatty(STDOUT_FILENO) && !tr->json_path) {
		/* JSON went to the terminal: add the human view after it */
		struct snapshot s;
		tr->base.share = stats_share(tr);
		if (!stats_read(&tr->bpf, &tr->base, tr->pids, tr->npids, &s)) {
			view_print(stdout, &tr->bpf, &s);
			stats_free(&s);
		}
	}
	return 0;
}

/* ---- main ---------------------------------------------------------------------------- */

enum { OPT_ATTACH = 256, OPT_PID, OPT_NETNS, OPT_JSON, OPT_FOLDED, OPT_FREQ, OPT_NO_SAMPLE,
       OPT_NO_COUNTERS, OPT_DURATION, OPT_CONTROL, OPT_PROBE, OPT_VERBOSE, OPT_NO_BPF_STATS,
       OPT_SAMPLE_SOURCE, OPT_SAMPLE_CGROUP, OPT_NO_LATENCY, OPT_CGROUP, OPT_JSON_EVERY,
       OPT_LATENCY_SAMPLE, OPT_NO_SOCKETS };

static const struct option long_opts[] = {
	{ "attach", required_argument, NULL, OPT_ATTACH },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "netns", required_argument, NULL, OPT_NETNS },
	{ "json", required_argument, NULL, OPT_JSON },
	{ "folded", required_argument, NULL, OPT_FOLDED },
	{ "freq", required_argument, NULL, OPT_FREQ },
	{ "sample-source", required_argument, NULL, OPT_SAMPLE_SOURCE },
	{ "sample-cgroup", required_argument, NULL, OPT_SAMPLE_CGROUP },
	{ "no-sample", no_argument, NULL, OPT_NO_SAMPLE },
	{ "no-latency", no_argument, NULL, OPT_NO_LATENCY },
	{ "latency-sample", required_argument, NULL, OPT_LATENCY_SAMPLE },
	{ "no-sockets", no_argument, NULL, OPT_NO_SOCKETS },
	{ "no-counters", no_argument, NULL, OPT_NO_COUNTERS },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "json-every", required_argument, NULL, OPT_JSON_EVERY },
	{ "control", no_argument, NULL, OPT_CONTROL },
	{ "probe", no_argument, NULL, OPT_PROBE },
	{ "verbose", no_argument, NULL, OPT_VERBOSE },
	{ "bpf-stats", required_argument, NULL, OPT_NO_BPF_STATS },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* What the command line asks beyond the tracer's own settings. */
struct cli {
	bool probe;			/* --probe: print what this kernel allows, and exit */
	unsigned int pids[MAX_PIDS];	/* --pid, followed once the programs are loaded */
	int npids;
};

static int parse_bpf_stats(const char *arg, enum stats_mode *mode)
{
	if (!strcmp(arg, "sampled"))
		*mode = STATS_SAMPLED;
	else if (!strcmp(arg, "always"))
		*mode = STATS_ALWAYS;
	else if (!strcmp(arg, "off"))
		*mode = STATS_OFF;
	else
		return -1;
	return 0;
}

/* One option from getopt_long into tr or cli: -1 to go on, else the exit status (2 with one
 * line on stderr for a bad value, 0 after --help). */
static int parse_option(int opt, char *arg, struct tracer *tr, struct cli *cli)
{
	char *end;

	switch (opt) {
	case OPT_ATTACH:
		if (parse_attach_mode(arg, &tr->mode)) {
			fprintf(stderr, "netio-tracer: --attach %s: choose auto, fentry, kprobe or tracepoint\n",
				arg);
			return 2;
		}
		return -1;
	case OPT_PID: {
		long p = strtol(arg, &end, 10);
		if (*end || p <= 0 || cli->npids == MAX_PIDS) {
			fprintf(stderr, "netio-tracer: --pid %s: not a pid\n", arg);
			return 2;
		}
		cli->pids[cli->npids++] = p;
		return -1;
	}
	case OPT_CGROUP:
		if (tr->ncgroups == NETIO_MAX_CGROUPS) {
			fprintf(stderr, "netio-tracer: too many --cgroup\n");
			return 2;
		}
		tr->cgroups[tr->ncgroups++] = arg;
		return -1;
	case OPT_NETNS:
		if (tr->nnetns_specs == MAX_NETNS) {
			fprintf(stderr, "netio-tracer: too many --netns\n");
			return 2;
		}
		tr->netns_specs[tr->nnetns_specs++] = arg;
		return -1;
	case OPT_JSON:
		tr->json_path = arg;
		return -1;
	case OPT_FOLDED:
		tr->folded_path = arg;
		return -1;
	case OPT_FREQ:
		tr->freq = strtol(arg, &end, 10);
		if (*end || tr->freq <= 0 || tr->freq > 100000) {
			fprintf(stderr, "netio-tracer: --freq %s: not a frequency in Hz\n", arg);
			return 2;
		}
		return -1;
	case OPT_SAMPLE_SOURCE:
		if (profile_source_parse(arg, &tr->sample_source)) {
			fprintf(stderr, "netio-tracer: --sample-source %s: choose auto, cycles, "
				"cpu-clock or tick\n", arg);
			return 2;
		}
		return -1;
	case OPT_SAMPLE_CGROUP:
		tr->sample_cgroup = arg;
		return -1;
	case OPT_NO_SAMPLE:
		tr->no_sample = true;
		return -1;
	case OPT_NO_LATENCY:
		tr->no_latency = true;
		return -1;
	case OPT_LATENCY_SAMPLE:
		tr->latency_sample = strtoul(arg, &end, 10);
		if (*end || *arg == '-' || tr->latency_sample < 1 || tr->latency_sample > 65536) {
			fprintf(stderr, "netio-tracer: --latency-sample %s: a whole number from 1 "
				"to 65536\n", arg);
			return 2;
		}
		return -1;
	case OPT_NO_COUNTERS:
		tr->no_counters = true;
		return -1;
	case OPT_NO_SOCKETS:
		tr->no_sockets = true;
		return -1;
	case OPT_DURATION:
		tr->duration = strtod(arg, &end);
		if (*end || tr->duration <= 0) {
			fprintf(stderr, "netio-tracer: --duration %s: not a number of seconds\n", arg);
			return 2;
		}
		return -1;
	case OPT_JSON_EVERY:
		tr->json_every = strtod(arg, &end);
		if (*end || !(tr->json_every >= 0.05)) {
			fprintf(stderr, "netio-tracer: --json-every %s: not a number of seconds "
				"(>= 0.05)\n", arg);
			return 2;
		}
		return -1;
	case OPT_CONTROL:
		tr->control = true;
		return -1;
	case OPT_PROBE:
		cli->probe = true;
		return -1;
	case OPT_NO_BPF_STATS:
		if (parse_bpf_stats(arg, &tr->stats_mode)) {
			fprintf(stderr, "netio-tracer: --bpf-stats %s: choose sampled, always or off\n",
				arg);
			return 2;
		}
		return -1;
	case 'v':
	case OPT_VERBOSE:
		tr->verbose = true;
		return -1;
	case 'h':
		usage(stdout);
		return 0;
	default:
		usage(stderr);
		return 2;
	}
}

/* The command line into tr and cli: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct tracer *tr, struct cli *cli)
{
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "+hv", long_opts, NULL)) != -1)
		if ((ret = parse_option(opt, optarg, tr, cli)) >= 0)
			return ret;
	if (optind < argc)
		tr->cmd = &argv[optind];
	if (tr->no_latency && tr->latency_sample) {
		fprintf(stderr, "netio-tracer: --latency-sample: nothing is timed with --no-latency\n");
		return 2;
	}
	return -1;
}

/* --latency-sample N into the syscall programs' map; 0, or -1 (said) where nothing times
 * syscalls. */
static int set_latency_sample(struct tracer *tr)
{
	u32 zero = 0, n = tr->latency_sample;

	if (!tr->latency_sample)
		return 0;
	if (tr->bpf.latency_sample < 0 || bpf_map_update_elem(tr->bpf.latency_sample, &zero, &n, 0)) {
		fprintf(stderr, "netio-tracer: --latency-sample: no syscall timing here\n");
		return -1;
	}
	tr->bpf.sampled_1_in = n;
	return 0;
}

/* The network namespaces whose softirq events count: those given, or our own. */
static int follow_given_netns(struct tracer *tr, char *err, size_t errlen)
{
	unsigned int self;

	for (int i = 0; i < tr->nnetns_specs; i++)
		if (follow_netns(tr, tr->netns_specs[i], err, errlen))
			return -1;
	if (tr->nnetns_specs)
		return 0;
	self = netns_inum_self();
	if (self && tracer_bpf_follow_netns(&tr->bpf, self)) {
		snprintf(err, errlen, "cannot follow this netns: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The stack sampler, unless --no-sample: 0, or the exit status when a source or cgroup asked
 * for by name cannot be had (like a forced rung); otherwise sampling is just unavailable. */
static int open_sampler(struct tracer *tr, char *err, size_t errlen)
{
	if (!tr->no_sample) {
		/* one --cgroup: its events sample whoever joins it later (-- CMD is not moved) */
		const char *cgroup = tr->sample_cgroup ? tr->sample_cgroup :
				     tr->ncgroups == 1 ? tr->cgroups[0] : NULL;

		tr->prof = profiler_open(tr->freq, tr->sample_source, tr->bpf.followed_tgids,
					 cgroup, err, errlen);
		if (!tr->prof && (tr->sample_source != PROFILE_SRC_AUTO || tr->sample_cgroup)) {
			fprintf(stderr, "netio-tracer: %s\n", err);
			if (tr->control)
				printf("error %s\n", err);
			return 2;
		}
		if (!tr->prof)
			fprintf(stderr, "netio-tracer: stack sampling unavailable: %s\n", err);
		else if (profiler_freq(tr->prof) <= 0)
			fprintf(stderr, "netio-tracer: CONFIG_HZ not found in /proc/config.gz or "
				"/boot/config-*: every tick is sampled, at a rate reported unknown\n");
	}
	tr->bpf.rung[PP_STACKS] = !tr->prof ? RUNG_UNAVAILABLE :
				  !strcmp(profiler_source(tr->prof), "tick") ? RUNG_TP_BTF : RUNG_PERF_EVENT;
	return 0;
}

/* After the programs are loaded: what to follow, the counters and the sampler. 0, or the
 * exit status. */
static int follow_and_sample(struct tracer *tr, const struct cli *cli)
{
	char err[1024];
	int ret;

	if (follow_given_netns(tr, err, sizeof(err))) {
		fprintf(stderr, "netio-tracer: %s\n", err);
		return 2;
	}
	if (!tr->no_counters)	/* software counters from the kernel's where the flush runs */
		tr->pc = perf_counters_new(tr->bpf.kernel_counts);
	ret = open_sampler(tr, err, sizeof(err));
	if (ret)
		return ret;
	for (int i = 0; i < cli->npids; i++) {
		if (follow_pid(tr, cli->pids[i], err, sizeof(err))) {
			fprintf(stderr, "netio-tracer: --pid: %s\n", err);
			return 2;
		}
		/* everything is attached: what the process does from now on is counted */
		fprintf(stderr, "netio-tracer: following pid %u\n", cli->pids[i]);
	}
	for (int i = 0; i < tr->ncgroups; i++) {
		if (follow_cgroup(tr, tr->cgroups[i], err, sizeof(err))) {
			fprintf(stderr, "netio-tracer: %s\n", err);
			return 2;
		}
		/* everything is attached: what starts in the cgroup from now on is counted */
		fprintf(stderr, "netio-tracer: following cgroup %s\n", tr->cgroups[i]);
	}
	return 0;
}

static void close_all(struct tracer *tr)
{
	if (tr->prof)
		profiler_close(tr->prof);
	if (tr->pc)
		perf_counters_free(tr->pc);
	tracer_bpf_close(&tr->bpf);
	stats_restore(tr);
}

int main(int argc, char **argv)
{
	struct tracer tr = { .mode = ATTACH_AUTO, .freq = 999, .stats_fd = -1, .sysctl_prev = -1 };
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct cli cli = { 0 };
	char err[1024];
	int ret = parse_args(argc, argv, &tr, &cli);

	if (ret >= 0)
		return ret;
	if (cli.probe)
		return probe_write_json(stdout) ? 1 : 0;
	if (tr.cmd && tr.control) {
		fprintf(stderr, "netio-tracer: -- CMD and --control exclude each other\n");
		return 2;
	}
	if (tr.json_every > 0 && (!tr.json_path || tr.control)) {
		fprintf(stderr, "netio-tracer: --json-every needs --json FILE (and no --control)\n");
		return 2;
	}
	if (tr.ncgroups && tr.control) {
		fprintf(stderr, "netio-tracer: --cgroup and --control exclude each other\n");
		return 2;
	}
	if (geteuid() != 0)
		fprintf(stderr, "netio-tracer: not root: loading BPF programs will probably fail\n");

	install_signals();
	setrlimit(RLIMIT_MEMLOCK, &rl);
	if (tracer_bpf_open(&tr.bpf, tr.mode, tr.verbose, tr.no_latency, err, sizeof(err))) {
		fprintf(stderr, "netio-tracer: %s\n", err);
		if (tr.control)
			printf("error %s\n", err);
		return tr.mode == ATTACH_AUTO ? 1 : 2;
	}
	if (set_latency_sample(&tr))
		return 2;
	sockets_set_off(&tr.bpf, tr.no_sockets);
	stats_enable(&tr);
	/* one-shot: the counts start from zero before --pid and --cgroup are followed, since a
	 * process followed is counted from then on (a reset after it would drop its first sends) */
	if (!tr.control)
		reset_all(&tr);
	ret = follow_and_sample(&tr, &cli);
	if (!ret && tr.control) {
		reset_all(&tr);
		ret = control_loop(&tr);
	} else if (!ret) {
		ret = run_oneshot(&tr);
	}
	close_all(&tr);
	return ret;
}
