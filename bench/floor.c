/* netio-bench-floor [--no-stats] TARGET...: the bench's empty-program floor (bpf/floor.bpf.c,
 * docs/bench.md). Attaches an empty program to each hook named, as the tracer's snapshot names
 * its programs' targets ("tp_btf:sock_send_length", "cgroup:getsockopt"), turns BPF run-time
 * stats on (not with --no-stats: what a run costs without the stats' clock reads, which
 * bench.stats_cost measures from the workload's side; reads then give zeros, unless something
 * else turns the stats on), and prints one line
 *     ready {"attached": [TARGET...], "missing": {"TARGET": "why"}, "stats": "how"}
 * then answers each line "read" on stdin with the programs' cumulative stats,
 *     {"TARGET": {"runs": N, "ns": N}, ...}
 * and ends on "quit", end of input, SIGINT or SIGTERM (bench/floor.py also has it sent
 * SIGTERM when the bench dies: PR_SET_PDEATHSIG, set before the exec). Nothing is
 * pinned: the links and the stats' fd are the process's own, so the kernel detaches the
 * programs and restores the stats however it ends (the sysctl fallback, for kernels before
 * 5.8, is set back on every end but SIGKILL). Exit 0, 1 on a failure to load, 2 on usage. */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "floor.skel.h"
#include "sysctl.h"

#define STATS_SYSCTL "kernel/bpf_stats_enabled"
#define MAX_HOOKS 64

struct hook {
	char target[96];		/* kind:name, as the tracer's snapshot writes it */
	struct bpf_program *prog;	/* the floor's program for it, NULL if none */
	struct bpf_link *link;
	const char *why;		/* why it is not attached */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* "tp_btf/x" -> "tp_btf:x", the snapshot's spelling of a program's target */
static void target_of(const struct bpf_program *prog, char *buf, size_t len)
{
	const char *sec = bpf_program__section_name(prog);
	const char *slash = strchr(sec, '/');

	if (!slash)
		snprintf(buf, len, "%s", sec);
	else
		snprintf(buf, len, "%.*s:%s", (int)(slash - sec), sec, slash + 1);
}

/* A tp_btf program whose tracepoint this kernel lacks would fail the whole object's load. */
static bool kernel_has(const struct btf *vmlinux, const char *target)
{
	char name[128];

	if (strncmp(target, "tp_btf:", 7))
		return true;
	snprintf(name, sizeof(name), "btf_trace_%s", target + 7);
	return vmlinux && btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF) >= 0;
}

/* Only the programs asked for, and present here, are loaded. */
static void choose(struct floor_bpf *skel, struct hook *hooks, int n)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	struct bpf_program *prog;
	char t[96];

	bpf_object__for_each_program(prog, skel->obj) {
		int i;

		target_of(prog, t, sizeof(t));
		for (i = 0; i < n && strcmp(hooks[i].target, t); i++)
			;
		bool want = i < n && kernel_has(vmlinux, t);
		bpf_program__set_autoload(prog, want);
		if (i < n && want)
			hooks[i].prog = prog;
		else if (i < n)
			hooks[i].why = "no such tracepoint on this kernel";
	}
	for (int i = 0; i < n; i++)
		if (!hooks[i].prog && !hooks[i].why)
			hooks[i].why = "the floor has no program for this hook";
	btf__free(vmlinux);
}

/* the cgroup v2 mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1's) */
static int cgroup2_root_fd(void)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;
	int fd = -1;

	while (f && (m = getmntent(f)))
		if (!strcmp(m->mnt_type, "cgroup2")) {
			fd = open(m->mnt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			break;
		}
	if (f)
		endmntent(f);
	if (fd < 0 && !errno)
		errno = ENOENT;
	return fd;
}

static struct bpf_link *attach(struct bpf_program *prog, const char *target)
{
	struct bpf_link *link;
	int fd, e;

	if (strncmp(target, "cgroup:", 7))
		return bpf_program__attach(prog);
	/* the tracer's getsockopt program sits on the root cgroup: so does the floor's */
	errno = 0;
	fd = cgroup2_root_fd();
	if (fd < 0)
		return NULL;
	link = bpf_program__attach_cgroup(prog, fd);
	e = errno;
	close(fd);
	errno = e;
	return link;
}

/* BPF_ENABLE_STATS while its fd is open; else the sysctl, *restore set to its old value. */
static const char *stats_on(int *restore)
{
	int prev;

	*restore = -1;
	if (bpf_enable_stats(BPF_STATS_RUN_TIME) >= 0)
		return "BPF_ENABLE_STATS";
	prev = sysctl_read_int(STATS_SYSCTL);
	if (prev > 0)
		return "sysctl";
	if (prev == 0 && sysctl_write_int(STATS_SYSCTL, 1) == 0) {
		*restore = prev;
		return "sysctl";
	}
	return NULL;
}

static void print_ready(const struct hook *hooks, int n, const char *stats)
{
	const char *sep = "";

	printf("ready {\"attached\": [");
	for (int i = 0; i < n; i++)
		if (hooks[i].link) {
			printf("%s\"%s\"", sep, hooks[i].target);
			sep = ", ";
		}
	printf("], \"missing\": {");
	sep = "";
	for (int i = 0; i < n; i++)
		if (!hooks[i].link) {
			printf("%s\"%s\": \"%s\"", sep, hooks[i].target, hooks[i].why);
			sep = ", ";
		}
	printf("}, \"stats\": \"%s\"}\n", stats);
	fflush(stdout);
}

static void print_stats(const struct hook *hooks, int n)
{
	const char *sep = "";

	printf("{");
	for (int i = 0; i < n; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (!hooks[i].link ||
		    bpf_obj_get_info_by_fd(bpf_program__fd(hooks[i].prog), &info, &len))
			continue;
		printf("%s\"%s\": {\"runs\": %llu, \"ns\": %llu}", sep, hooks[i].target,
		       (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns);
		sep = ", ";
	}
	printf("}\n");
	fflush(stdout);
}

/* "read" answered until "quit", end of input or a signal */
static void serve(const struct hook *hooks, int n)
{
	char line[64];

	while (!stop && fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "read\n"))
			print_stats(hooks, n);
		else if (!strcmp(line, "quit\n"))
			break;
		else {
			printf("error unknown command\n");
			fflush(stdout);
		}
	}
}

static int parse(int argc, char **argv, struct hook *hooks, bool *with_stats)
{
	int n = 0, first = 1;

	*with_stats = !(argc > 1 && !strcmp(argv[1], "--no-stats"));
	if (!*with_stats)
		first = 2;
	if (argc - first < 1 || argc - first > MAX_HOOKS) {
		fprintf(stderr, "usage: netio-bench-floor [--no-stats] TARGET... (tp_btf:NAME or "
			"cgroup:getsockopt, at most %d)\n", MAX_HOOKS);
		return -1;
	}
	for (int a = first; a < argc; a++) {
		int i;

		for (i = 0; i < n && strcmp(hooks[i].target, argv[a]); i++)
			;
		if (i == n)	/* each hook once */
			snprintf(hooks[n++].target, sizeof(hooks[0].target), "%s", argv[a]);
	}
	return n;
}

int main(int argc, char **argv)
{
	static struct hook hooks[MAX_HOOKS];
	struct sigaction sa = { .sa_handler = on_signal };	/* no SA_RESTART: fgets returns */
	struct floor_bpf *skel;
	const char *stats = "off";
	int n, restore = -1;
	bool with_stats;

	n = parse(argc, argv, hooks, &with_stats);
	if (n < 0)
		return 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	skel = floor_bpf__open();
	if (!skel) {
		fprintf(stderr, "netio-bench-floor: open: %s\n", strerror(errno));
		return 1;
	}
	choose(skel, hooks, n);
	if (floor_bpf__load(skel)) {
		fprintf(stderr, "netio-bench-floor: load: %s\n", strerror(errno));
		floor_bpf__destroy(skel);
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (hooks[i].prog && !(hooks[i].link = attach(hooks[i].prog, hooks[i].target)))
			hooks[i].why = strerror(errno);
	if (with_stats)
		stats = stats_on(&restore);
	if (!stats) {
		fprintf(stderr, "netio-bench-floor: cannot turn BPF run-time stats on\n");
		floor_bpf__destroy(skel);
		return 1;
	}
	if (!stop)
		print_ready(hooks, n, stats);
	serve(hooks, n);
	if (restore >= 0)
		sysctl_write_int(STATS_SYSCTL, restore);
	for (int i = 0; i < n; i++)
		bpf_link__destroy(hooks[i].link);
	floor_bpf__destroy(skel);
	return 0;
}
