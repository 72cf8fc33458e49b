// SPDX-License-Identifier: GPL-2.0
/* kretprobes with room for every caller. A kretprobe made through perf's kprobe PMU (what
 * libbpf's bpf_program__attach_kprobe makes) gets the kernel's default number of instances,
 * one per call in flight: the number of CPUs where the kernel is built without
 * CONFIG_PREEMPTION (Debian's 5.10). A return whose call began while all were in use is
 * missed, its bytes uncounted, and nothing says so (docs/probes.md). So the tracer makes its
 * kretprobes as tracefs events of its own, "r4096:netio/p<pid>_<n> FUNC" (4096: the most the
 * kernel allows), attaches the program through a perf event of that event, and removes the
 * events when it closes; events left by a tracer that was killed are removed at the next
 * start. Where tracefs refuses, libbpf's kretprobe stands in. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include "kretprobes.h"
#include "trace_helpers.h"

#define KRETPROBE_MAXACTIVE 4096
#define MAX_EVENTS 32
#define KPROBE_EVENTS "/sys/kernel/tracing/kprobe_events"

/* The events this process made: their function and tracefs id (module state: they outlive
 * any one link, an attach after a detach reuses them). */
static struct {
	char func[128];
	long id;
} events[MAX_EVENTS];
static int nevents;

static int write_kprobe_events(const char *line)
{
	int fd = open(KPROBE_EVENTS, O_WRONLY | O_APPEND | O_CLOEXEC);
	ssize_t n;
	int e;

	if (fd < 0)
		return -errno;
	n = write(fd, line, strlen(line));
	e = errno;
	close(fd);
	return n < 0 ? -e : 0;
}

/* The tracefs id of this process's kretprobe event on func, made if missing; -1 if tracefs
 * will not make it. */
static long event_id(const char *func)
{
	char line[256], name[64];

	for (int i = 0; i < nevents; i++)
		if (!strcmp(events[i].func, func))
			return events[i].id;
	if (nevents == MAX_EVENTS || strlen(func) >= sizeof(events[0].func))
		return -1;
	tracefs_event_id("sched", "sched_process_fork");	/* mounts tracefs if needed */
	snprintf(name, sizeof(name), "p%d_%d", getpid(), nevents);
	snprintf(line, sizeof(line), "r%d:netio/%s %s\n", KRETPROBE_MAXACTIVE, name, func);
	if (write_kprobe_events(line))
		return -1;
	snprintf(events[nevents].func, sizeof(events[0].func), "%s", func);
	events[nevents].id = tracefs_event_id("netio", name);
	if (events[nevents].id < 0) {
		snprintf(line, sizeof(line), "-:netio/%s\n", name);
		write_kprobe_events(line);
		return -1;
	}
	return events[nevents++].id;
}

static struct bpf_link *attach_event(struct bpf_program *prog, long id)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT,
		.size = sizeof(attr),
		.config = id,
		.sample_period = 1,
		.wakeup_events = 1,
	};
	struct bpf_link *link;
	int pfd, e;

	/* the program runs on every CPU: it hangs on the event, not on this perf event */
	pfd = syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return NULL;
	link = bpf_program__attach_perf_event(prog, pfd);
	if (!link) {
		e = errno;
		close(pfd);
		errno = e;
	}
	return link;	/* owns pfd */
}

struct bpf_link *kprobe_attach(struct bpf_program *prog, bool retprobe, const char *func)
{
	struct bpf_link *link;
	long id;

	if (!retprobe || (id = event_id(func)) < 0)
		return bpf_program__attach_kprobe(prog, retprobe, func);
	link = attach_event(prog, id);
	return link ? link : bpf_program__attach_kprobe(prog, retprobe, func);
}

void kretprobes_remove(void)
{
	char line[128];

	for (int i = 0; i < nevents; i++) {
		snprintf(line, sizeof(line), "-:netio/p%d_%d\n", getpid(), i);
		write_kprobe_events(line);
	}
	nevents = 0;
}

/* Our events in kprobe_events ("r4096:netio/p<pid>_<n> FUNC"): those whose tracer is gone,
 * removed. */
void kretprobes_remove_stale(void)
{
	FILE *f = fopen(KPROBE_EVENTS, "re");
	char line[512], stale[MAX_EVENTS][64], proc[32];
	int n = 0, pid, idx;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && n < MAX_EVENTS) {
		const char *ev = strstr(line, ":netio/p");
		if (!ev || sscanf(ev, ":netio/p%d_%d", &pid, &idx) != 2)
			continue;
		snprintf(proc, sizeof(proc), "/proc/%d", pid);
		if (access(proc, F_OK) == 0)
			continue;
		snprintf(stale[n++], sizeof(stale[0]), "-:netio/p%d_%d\n", pid, idx);
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		write_kprobe_events(stale[i]);
}
