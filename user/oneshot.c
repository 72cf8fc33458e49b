// SPDX-License-Identifier: GPL-2.0
/* One-shot mode: -- CMD (launched behind a gate, followed from its first instruction), --pid
 * and --cgroup, until they end, --duration passes or a signal comes; then one snapshot. */
#include <errno.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tracer.h"

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

/* Sleeps ms, less when the sampler tells of a new process image (periodic() reads it). */
static void sleep_ms(struct tracer *tr, int ms)
{
	struct pollfd pfd = { .fd = tr->prof ? profiler_events_fd(tr->prof) : -1, .events = POLLIN };

	poll(&pfd, 1, ms);	/* a signal ends it early */
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

/* --json-every's rewrite. With --prune-exited the reader takes each rewrite by renaming it
 * away, and only once the last one was taken (the file is gone) are the processes gathered
 * before it forgotten: their last counts were read. Those that ended since are gathered for
 * this one. Until it is taken they all stay, and are in the next rewrite too: a reader that
 * falls behind, or reads only every other rewrite, loses nothing (prune.c). */
static void rewrite_json(struct tracer *tr, struct pruned *pruned)
{
	char err[512];

	if (tr->prune_exited && access(tr->json_path, F_OK) != 0) {
		prune_apply(tr, pruned);
		prune_gather(tr, pruned);
	}
	if (snapshot_to(tr, tr->json_path, NULL, err, sizeof(err), false)) {
		fprintf(stderr, "netio-tracer: %s\n", err);
		prune_forget(pruned);	/* not written: not read, so not to be forgotten */
	}
}

int run_oneshot(struct tracer *tr)
{
	struct pruned pruned = { 0 };
	char err[512];
	pid_t child = -1;
	int status = 0;
	double t0, next_json;

	if (tr->cmd && !stop_signal) {	/* a signal while we loaded: the trace never began */
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
			rewrite_json(tr, &pruned);
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
		sleep_ms(tr, child > 0 ? 20 : 50);
	}
	free(pruned.one);
	free(pruned.socks.one);
	if (child > 0 && getppid() != tr->parent) {
		/* whoever started us died (SIGTERM from PR_SET_PDEATHSIG): nobody is left to end
		 * the command it asked for */
		kill(child, SIGTERM);
		fprintf(stderr, "netio-tracer: our parent died; pid %d ended\n", child);
	} else if (child > 0) {
		/* stopped by a signal or --duration: the command keeps running untraced */
		fprintf(stderr, "netio-tracer: stopping; pid %d keeps running\n", child);
	}
	/* the table, with the JSON in a file, goes to stderr: stdout is the traced command's */
	if (snapshot_to(tr, tr->json_path, tr->folded_path, err, sizeof(err),
			isatty(STDERR_FILENO) && tr->json_path)) {
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
