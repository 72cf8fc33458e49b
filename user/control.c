// SPDX-License-Identifier: GPL-2.0
/* --control: the driver's commands on stdin, one reply line each (docs/tracer.md), and the
 * two passes' detach and attach. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "json.h"
#include "tracer.h"

/* ---- attach and detach (the two passes) --------------------------------------------- */

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
		struct pollfd pfd[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = tr->prof ? profiler_events_fd(tr->prof) : -1, .events = POLLIN } };
		int r = poll(pfd, 2, 50);
		periodic(tr);
		if (r < 0 && errno != EINTR)
			return 0;
		if (r <= 0 || !pfd[0].revents)
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

int control_loop(struct tracer *tr)
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
		} else if (!strcmp(argv[0], "skb-programs") && argc == 2 &&
			   (!strcmp(argv[1], "always") || !strcmp(argv[1], "on-demand"))) {
			tracer_bpf_skb_programs(&tr->bpf, !strcmp(argv[1], "always"));
			reply("ok");
		} else if (!strcmp(argv[0], "snapshot") && (argc == 2 || argc == 3)) {
			if (snapshot_to(tr, argv[1], argc == 3 ? argv[2] : NULL, err, sizeof(err), false))
				reply("error %s", err);
			else
				reply("ok");
		} else {
			reply("error unknown command (pid add PID | netns add NAME | clear | reset | "
			      "detach | attach | skb-programs always|on-demand | snapshot JSON [FOLDED] | quit)");
		}
	}
	return 0;
}
