/* netio-bench-tcp-counters [--print] [--reads N]: the kernel's own per-socket TCP counters
 * and the sockets' owners, read by iterators (bpf/tcp_counters.bpf.c, bench/tcp_counters.py).
 * Loads them, turns BPF run-time stats on while its fd is open, and reads N times (default 1)
 * as a snapshot would: every process's open files (the sockets' owners), then every TCP
 * socket of the namespace it runs in.
 * --print: from one read, a line per socket file a process holds, "fd INODE TGID", and per TCP
 *          socket, "sock INODE STATE TX RX TGID" (the bytes its user wrote and read; TGID 0:
 *          no one process holds it), and nothing else.
 * else one JSON line: {"reads": N, "sockets": S, "files": F, "wall_ns": W, "tcp": {"runs": R,
 * "ns": T}, "task_file": {...}}: S and F the TCP sockets and the open files read over the N
 * reads, each program's runs and run time (a read runs it once per item its iterator visits,
 * and once at its end), W the reads' wall time together.
 * Nothing is pinned: the links are the process's own. Exit 0, 1 on a failure, 2 on usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tcp_counters.skel.h"

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One pass of an iterator, its text to out (NULL: read and dropped). */
static int read_iter(struct bpf_link *link, FILE *out)
{
	char buf[65536];
	ssize_t n;
	int fd = bpf_iter_create(bpf_link__fd(link));

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (out)
			fwrite(buf, 1, n, out);
	close(fd);
	return n < 0 ? -1 : 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: netio-bench-tcp-counters [--print] [--reads N]\n");
	return 2;
}

/* A snapshot's read: the owners first, then the sockets' bytes. */
static int read_once(struct tcp_counters_bpf *skel, struct bpf_link *owners,
		     struct bpf_link *counters, FILE *out)
{
	skel->bss->gen++;
	return read_iter(owners, out) || read_iter(counters, out) ? -1 : 0;
}

static int prog_stats(const struct bpf_program *prog, struct bpf_prog_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(bpf_program__fd(prog), info, &len);
}

static int report(struct tcp_counters_bpf *skel, int reads, long long wall)
{
	struct bpf_prog_info tcp, files;

	if (prog_stats(skel->progs.tcp_counters, &tcp) ||
	    prog_stats(skel->progs.socket_owners, &files))
		return -1;
	printf("{\"reads\": %d, \"sockets\": %llu, \"files\": %llu, \"wall_ns\": %lld, "
	       "\"tcp\": {\"runs\": %llu, \"ns\": %llu}, "
	       "\"task_file\": {\"runs\": %llu, \"ns\": %llu}}\n",
	       reads, (unsigned long long)skel->bss->sockets,
	       (unsigned long long)skel->bss->files, wall,
	       (unsigned long long)tcp.run_cnt, (unsigned long long)tcp.run_time_ns,
	       (unsigned long long)files.run_cnt, (unsigned long long)files.run_time_ns);
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_link *counters = NULL, *owners = NULL;
	struct tcp_counters_bpf *skel;
	int reads = 1, print = 0, stats = -1, rc = 1;
	long long wall = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--print"))
			print = 1;
		else if (!strcmp(argv[i], "--reads") && i + 1 < argc)
			reads = atoi(argv[++i]);
		else
			return usage();
	}
	if (reads < 1 || (print && reads != 1))
		return usage();
	skel = tcp_counters_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "netio-bench-tcp-counters: loading the iterators: %s\n",
			strerror(errno));
		return 1;
	}
	skel->bss->print = print;
	counters = bpf_program__attach_iter(skel->progs.tcp_counters, NULL);
	owners = counters ? bpf_program__attach_iter(skel->progs.socket_owners, NULL) : NULL;
	if (!owners) {
		fprintf(stderr, "netio-bench-tcp-counters: attaching the iterators: %s\n",
			strerror(errno));
		goto out;
	}
	stats = print ? -1 : bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (!print && stats < 0) {
		fprintf(stderr, "netio-bench-tcp-counters: BPF_ENABLE_STATS: %s\n", strerror(errno));
		goto out;
	}
	for (int i = 0; i < reads; i++) {
		long long t0 = now_ns();

		if (read_once(skel, owners, counters, print ? stdout : NULL)) {
			fprintf(stderr, "netio-bench-tcp-counters: reading: %s\n", strerror(errno));
			goto out;
		}
		wall += now_ns() - t0;
	}
	rc = print ? 0 : (report(skel, reads, wall) ? 1 : 0);
out:
	if (stats >= 0)
		close(stats);
	bpf_link__destroy(owners);
	bpf_link__destroy(counters);
	tcp_counters_bpf__destroy(skel);
	return rc;
}
