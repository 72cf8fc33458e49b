// SPDX-License-Identifier: GPL-2.0
/* netio-tracer: where the bytes get copied, and what each copy costs.
 * CLI and --control protocol: docs/tracer.md; probe points and the trace object:
 * docs/DESIGN.md. This file: main, the options, setup and teardown; the rest is in the files
 * tracer.h lists. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "probe.h"
#include "sockets.h"
#include "trace_helpers.h"
#include "tracer.h"

/* ---- the options: one table, from which getopt_long's arrays and --help are made -------- */

enum { OPT_ATTACH = 256, OPT_PID, OPT_CGROUP, OPT_NETNS, OPT_JSON, OPT_FOLDED, OPT_FREQ,
       OPT_SAMPLE_SOURCE, OPT_SAMPLE_CGROUP, OPT_NO_SAMPLE, OPT_NO_LATENCY, OPT_LATENCY_SAMPLE,
       OPT_NO_SOCKETS, OPT_SKB_PROGRAMS, OPT_NO_COUNTERS, OPT_DURATION, OPT_JSON_EVERY,
       OPT_CONTROL, OPT_PROBE, OPT_BPF_STATS, OPT_PRUNE_EXITED };

struct option_doc {
	const char *name;	/* --name */
	const char *arg;	/* its argument as --help names it; NULL: it takes none */
	int val;		/* what getopt_long returns: an OPT_*, or the short option's letter */
	const char *help;	/* lines apart by \n, each indented under the first by --help */
};

/* Every option, in --help's order: none can be parsed without being described. */
static const struct option_doc options[] = {
	{ "attach", "MODE", OPT_ATTACH,
	  "force a rung: auto (default), fentry, kprobe or tracepoint (exit 2\n"
	  "if it cannot attach here)" },
	{ "pid", "PID", OPT_PID,
	  "follow PID, its threads and the children it forks from now on\n"
	  "(repeatable)" },
	{ "cgroup", "DIR", OPT_CGROUP,
	  "follow every process of the cgroup v2 directory DIR and below it: those\n"
	  "there now, forked there or moved there later (not with --control); the\n"
	  "trace then ends with -- CMD, --duration or a signal (repeatable)" },
	{ "netns", "NS", OPT_NETNS,
	  "a network namespace (a name in /var/run/netns, or a path) whose devices'\n"
	  "softirq events count (repeatable; default: ours)" },
	{ "json", "FILE", OPT_JSON, "write the trace JSON there (default stdout)" },
	{ "folded", "FILE", OPT_FOLDED, "folded on-CPU stacks of the followed processes" },
	{ "freq", "HZ", OPT_FREQ, "stack sampling frequency (default 999; tick: at most CONFIG_HZ)" },
	{ "sample-source", "auto|cycles|cpu-clock|tick", OPT_SAMPLE_SOURCE,
	  "what stack samples are taken on: auto (default) is cycles where a PMU\n"
	  "exists, else tick; tick samples on the scheduler tick (no timer of\n"
	  "its own, CONFIG_HZ per busy CPU: far cheaper in a VM); a source named\n"
	  "explicitly exits 2 if it cannot be used here" },
	{ "sample-cgroup", "DIR", OPT_SAMPLE_CGROUP,
	  "a cgroup2 directory the followed processes run in: cycles or cpu-clock\n"
	  "samples come from one event per CPU that runs only while a task of it\n"
	  "is on that CPU, not from per-task events, whose timers re-arm at every\n"
	  "context switch (a VM exit each in a VM); pids outside it keep per-task\n"
	  "events; -- CMD starts in it" },
	{ "no-sample", NULL, OPT_NO_SAMPLE, "no stack sampling (so no folded stacks)" },
	{ "no-counters", NULL, OPT_NO_COUNTERS,
	  "no perf counters (cycles, instructions, cache misses, context switches)" },
	{ "no-latency", NULL, OPT_NO_LATENCY,
	  "count bytes and calls without timing them: no syscall hook (every\n"
	  "syscall of the machine would pass it), no latency histogram" },
	{ "latency-sample", "N", OPT_LATENCY_SAMPLE,
	  "time the first of every N calls of each class and thread (default 16;\n"
	  "1: every call); every call is still counted, and the histograms hold\n"
	  "the timed ones" },
	{ "no-sockets", NULL, OPT_NO_SOCKETS, "count per process only, not per socket" },
	{ "skb-programs", "on-demand|always", OPT_SKB_PROGRAMS,
	  "where zero-copy bytes count at their send: attach the programs that look\n"
	  "at every skb only once a send whose zero-copy bytes only they count (UDP,\n"
	  "io_uring SEND_ZC) is seen (on-demand, the default with --no-latency: the\n"
	  "fallback copy of zero-copy sends before, TCP's among them, is then null),\n"
	  "or from the start (always, the default otherwise)" },
	{ "duration", "S", OPT_DURATION,
	  "stop after S seconds, or earlier when what is followed ends or a signal\n"
	  "comes (not with --control)" },
	{ "json-every", "S", OPT_JSON_EVERY,
	  "also rewrite --json FILE every S seconds while tracing (atomically), for\n"
	  "a reader that follows the counts live (trace --openmetrics :PORT)" },
	{ "prune-exited", NULL, OPT_PRUNE_EXITED,
	  "with --json-every: forget the processes that had ended before a rewrite\n"
	  "once the reader took it (renamed it away: their last counts are in it),\n"
	  "so that a tracer that runs for days does not fill its maps\n"
	  "(netio-trace agent)" },
	{ "control", NULL, OPT_CONTROL,
	  "read commands on stdin (pid add, netns add, clear, reset, detach, attach,\n"
	  "snapshot, quit)" },
	{ "bpf-stats", "M", OPT_BPF_STATS,
	  "BPF run-time stats for the self cost: sampled (default: on 10% of the\n"
	  "time, scaled), always (exact, costs ~2 clock reads per program run), off" },
	{ "probe", NULL, OPT_PROBE, "print what this kernel allows as JSON and exit" },
	{ "verbose", NULL, 'v', "libbpf's messages on stderr, and more of ours" },
	{ "help", NULL, 'h', "this help" },
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))
#define HELP_COLUMN 18

/* getopt_long's arrays, made from options[] before the first getopt_long */
static struct option long_opts[NOPTIONS + 1];
static char short_opts[NOPTIONS + 2] = "+";	/* +: the options end where CMD starts */

static void make_option_arrays(void)
{
	size_t n = 1;

	for (size_t i = 0; i < NOPTIONS; i++) {
		long_opts[i] = (struct option){ options[i].name,
			options[i].arg ? required_argument : no_argument, NULL, options[i].val };
		if (options[i].val < 256)
			short_opts[n++] = (char)options[i].val;
	}
}

/* One option's lines of --help: its name (and letter) and argument, then its help at
 * HELP_COLUMN, below them where they reach it. */
static void usage_option(FILE *f, const struct option_doc *o)
{
	const char *h = o->help, *nl;
	int w;

	if (o->val < 256)
		w = fprintf(f, "  -%c, --%s", o->val, o->name);
	else
		w = fprintf(f, "  --%s", o->name);
	if (o->arg)
		w += fprintf(f, " %s", o->arg);
	if (w >= HELP_COLUMN) {
		fputc('\n', f);
		w = 0;
	}
	fprintf(f, "%*s", HELP_COLUMN - w, "");
	for (; (nl = strchr(h, '\n')); h = nl + 1)
		fprintf(f, "%.*s\n%*s", (int)(nl - h), h, HELP_COLUMN, "");
	fprintf(f, "%s\n", h);
}

static void usage(FILE *f)
{
	fputs("usage: netio-tracer [OPTION]... [-- CMD ARGS...]\n"
	      "       netio-tracer --probe\n"
	      "\n"
	      "Counts, per process, the bytes sent, copied from user space, sent zero-copy, copied\n"
	      "back on local delivery and copied to user space, and the socket syscalls' latency,\n"
	      "with the first attach rung this kernel allows (fentry > kprobe > tp_btf/tracepoint >\n"
	      "inferred).\n", f);
	for (size_t i = 0; i < NOPTIONS; i++)
		usage_option(f, &options[i]);
	fprintf(f, "  -- CMD ARGS%*srun CMD, followed from its first instruction; stop when it "
		"exits\n", HELP_COLUMN - 13, "");
}

/* ---- main ---------------------------------------------------------------------------- */

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

/* The one line on stderr for a bad value of --option; 2, the exit status it calls for. */
static int bad_value(const char *option, const char *arg, const char *why)
{
	fprintf(stderr, "netio-tracer: --%s %s: %s\n", option, arg, why);
	return 2;
}

/* One option from getopt_long into tr or cli: -1 to go on, else the exit status (2 with one
 * line on stderr for a bad value, 0 after --help). */
static int parse_option(int opt, char *arg, struct tracer *tr, struct cli *cli)
{
	char *end;

	switch (opt) {
	case OPT_ATTACH:
		if (parse_attach_mode(arg, &tr->mode))
			return bad_value("attach", arg, "choose auto, fentry, kprobe or tracepoint");
		return -1;
	case OPT_PID: {
		long p = strtol(arg, &end, 10);
		if (*end || p <= 0 || cli->npids == MAX_PIDS)
			return bad_value("pid", arg, "not a pid");
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
		if (*end || tr->freq <= 0 || tr->freq > 100000)
			return bad_value("freq", arg, "not a frequency in Hz");
		return -1;
	case OPT_SAMPLE_SOURCE:
		if (profile_source_parse(arg, &tr->sample_source))
			return bad_value("sample-source", arg, "choose auto, cycles, cpu-clock or tick");
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
		if (*end || *arg == '-' || tr->latency_sample < 1 || tr->latency_sample > 65536)
			return bad_value("latency-sample", arg, "a whole number from 1 to 65536");
		return -1;
	case OPT_NO_COUNTERS:
		tr->no_counters = true;
		return -1;
	case OPT_NO_SOCKETS:
		tr->no_sockets = true;
		return -1;
	case OPT_SKB_PROGRAMS:
		if (strcmp(arg, "on-demand") && strcmp(arg, "always"))
			return bad_value("skb-programs", arg, "on-demand or always");
		tr->skb_programs = !strcmp(arg, "always") ? SKB_PROGRAMS_ALWAYS : SKB_PROGRAMS_ON_DEMAND;
		return -1;
	case OPT_DURATION:
		tr->duration = strtod(arg, &end);
		if (*end || tr->duration <= 0)
			return bad_value("duration", arg, "not a number of seconds");
		return -1;
	case OPT_JSON_EVERY:
		tr->json_every = strtod(arg, &end);
		if (*end || !(tr->json_every >= 0.05))
			return bad_value("json-every", arg, "not a number of seconds (>= 0.05)");
		return -1;
	case OPT_CONTROL:
		tr->control = true;
		return -1;
	case OPT_PRUNE_EXITED:
		tr->prune_exited = true;
		return -1;
	case OPT_PROBE:
		cli->probe = true;
		return -1;
	case OPT_BPF_STATS:
		if (parse_bpf_stats(arg, &tr->stats_mode))
			return bad_value("bpf-stats", arg, "choose sampled, always or off");
		return -1;
	case 'v':
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

	make_option_arrays();
	while ((opt = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1)
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

/* --latency-sample N into the syscall programs' map, else the default where calls are timed;
 * -1 (said) where N was given and nothing times syscalls here. */
static int set_latency_sample(struct tracer *tr)
{
	u32 zero = 0, n = tr->latency_sample ? tr->latency_sample : NETIO_LATENCY_SAMPLE;

	if (tr->no_latency || (!tr->latency_sample && tr->bpf.latency_sample < 0))
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
	if (tr.prune_exited && !(tr.json_every > 0)) {
		fprintf(stderr, "netio-tracer: --prune-exited needs --json-every\n");
		return 2;
	}
	if (tr.ncgroups && tr.control) {
		fprintf(stderr, "netio-tracer: --cgroup and --control exclude each other\n");
		return 2;
	}
	if (geteuid() != 0)
		fprintf(stderr, "netio-tracer: not root: loading BPF programs will probably fail\n");

	tr.parent = getppid();
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
	/* the counting level gives up what the skbs of zero-copy sends feed while the per-skb
	 * programs wait (bpf/maps.bpf.h, zc_skbs_made), not the full */
	tr.skb_always = tr.skb_programs == SKB_PROGRAMS_ALWAYS ||
			(tr.skb_programs == SKB_PROGRAMS_BY_LEVEL && !tr.no_latency);
	defer_skb_programs(&tr.bpf, !tr.skb_always);
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
