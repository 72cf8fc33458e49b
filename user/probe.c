// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "json.h"
#include "msg_zerocopy.h"
#include "pmu.h"
#include "probe.h"
#include "profile.h"
#include "builds.h"
#include "trace_helpers.h"

/* r0 = 0; exit */
static const struct bpf_insn trivial[] = {
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
	{ .code = BPF_JMP | BPF_EXIT },
};

static int load_trivial(enum bpf_prog_type type, enum bpf_attach_type eat, int btf_id)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = eat, .attach_btf_id = btf_id);

	return bpf_prog_load(type, "netio_probe", "GPL", trivial, 2, &opts);
}

static int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static bool attach_perf(int prog, int pfd)
{
	bool ok = pfd >= 0 && ioctl(pfd, PERF_EVENT_IOC_SET_BPF, prog) == 0;

	if (pfd >= 0)
		close(pfd);
	return ok;
}

/* A trivial BPF_PROG_TYPE_TRACING program of that attach type loads and attaches to the
 * vmlinux BTF type of that name and kind. */
static bool tracing_prog_attaches(enum bpf_attach_type type, const char *name, __u32 kind)
{
	const struct btf *btf = vmlinux_btf();
	int btf_id, prog, link;

	if (!btf)
		return false;
	btf_id = btf__find_by_name_kind(btf, name, kind);
	if (btf_id <= 0)
		return false;
	prog = load_trivial(BPF_PROG_TYPE_TRACING, type, btf_id);
	if (prog < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, prog);
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}

static bool probe_fentry(void)
{
	return tracing_prog_attaches(BPF_TRACE_FENTRY, "tcp_sendmsg", BTF_KIND_FUNC);
}

static bool probe_tp_btf(void)
{
	return tracing_prog_attaches(BPF_TRACE_RAW_TP, "btf_trace_sched_process_fork",
				     BTF_KIND_TYPEDEF);
}

static bool probe_kprobe(void)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .sample_period = 1 };
	int type = pmu_type("kprobe"), prog, pfd;
	bool ok = false;

	prog = load_trivial(BPF_PROG_TYPE_KPROBE, 0, 0);
	if (prog < 0)
		return false;
	if (type >= 0) {
		attr.type = type;
		attr.config1 = (uint64_t)(uintptr_t)"tcp_sendmsg";
		attr.config2 = 0;
		pfd = perf_open(&attr, -1, 0);
		ok = attach_perf(prog, pfd);
	}
	if (!ok) {
		/* legacy: a kprobe event through tracefs */
		char name[64], def[128], path[256];
		long id;
		int fd;
		snprintf(name, sizeof(name), "netio_probe_%d", getpid());
		tracefs_event_id("sched", "sched_process_fork");	/* mounts tracefs if needed */
		fd = open("/sys/kernel/tracing/kprobe_events", O_WRONLY | O_APPEND);
		if (fd >= 0) {
			snprintf(def, sizeof(def), "p:kprobes/%s tcp_sendmsg\n", name);
			if (write(fd, def, strlen(def)) > 0) {
				id = tracefs_event_id("kprobes", name);
				if (id >= 0) {
					struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_TRACEPOINT,
								     .config = id, .sample_period = 1 };
					ok = attach_perf(prog, perf_open(&a, -1, 0));
				}
				snprintf(def, sizeof(def), "-:kprobes/%s\n", name);
				snprintf(path, sizeof(path), "%s", def);
				if (write(fd, path, strlen(path)) < 0) { /* best effort */ }
			}
			close(fd);
		}
	}
	close(prog);
	return ok;
}

static bool probe_tracepoint(void)
{
	long id = tracefs_event_id("sched", "sched_process_fork");
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_TRACEPOINT,
					.sample_period = 1 };
	int prog;
	bool ok;

	if (id < 0)
		return false;
	attr.config = id;
	prog = load_trivial(BPF_PROG_TYPE_TRACEPOINT, 0, 0);
	if (prog < 0)
		return false;
	ok = attach_perf(prog, perf_open(&attr, -1, 0));
	close(prog);
	return ok;
}

static bool probe_perf_event(void)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
					.config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1,
					.sample_freq = 49 };
	int prog = load_trivial(BPF_PROG_TYPE_PERF_EVENT, 0, 0);
	bool ok;

	if (prog < 0)
		return false;
	ok = attach_perf(prog, perf_open(&attr, -1, 0));
	close(prog);
	return ok;
}

/* a function of this binary to put a uprobe on */
__attribute__((noinline)) int netio_uprobe_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static bool probe_uprobe(void)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .sample_period = 1 };
	int type = pmu_type("uprobe"), prog;
	char exe[512], line[1024], path[512];
	unsigned long start, end, off, addr = (unsigned long)&netio_uprobe_target, foff = 0;
	bool found = false, ok;
	ssize_t n;
	FILE *f;

	if (type < 0)
		return false;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = 0;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char perms[8];
		path[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %511s", &start, &end, perms, &off, path) < 4)
			continue;
		if (addr >= start && addr < end && strchr(perms, 'x')) {
			foff = addr - start + off;
			found = true;
			break;
		}
	}
	fclose(f);
	if (!found)
		return false;
	prog = load_trivial(BPF_PROG_TYPE_KPROBE, 0, 0);
	if (prog < 0)
		return false;
	attr.type = type;
	attr.config1 = (uint64_t)(uintptr_t)exe;
	attr.config2 = foff;
	ok = attach_perf(prog, perf_open(&attr, 0, -1));
	close(prog);
	return ok;
}

static bool probe_hw(uint32_t type, uint64_t config)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .type = type, .config = config,
					.disabled = 1 };
	int fd = perf_open(&attr, 0, -1);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool probe_zerocopy(void)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0;
	close(fd);
	return ok;
}

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
	(void)l; (void)f; (void)ap;
	return 0;
}

/* "sampling": what the default (auto) stack sampler takes its samples on here, opened and
 * closed again, or null with "sampling_error". */
static void write_sampling(struct json *j)
{
	char err[256] = "";
	struct profiler *p = profiler_open(999, PROFILE_SRC_AUTO, -1, NULL, err, sizeof(err));

	if (!p) {
		json_kv_null(j, "sampling");
		json_kv_string(j, "sampling_error", err);
		return;
	}
	json_key(j, "sampling");
	json_begin_object(j);
	profiler_write_json(p, j);
	json_end(j);
	profiler_close(p);
}

int probe_write_json(FILE *out)
{
	struct json j;
	struct utsname u;
	const uint64_t l1d_miss = PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
				  ((uint64_t)PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
	const uint64_t ll_miss = PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
				 ((uint64_t)PERF_COUNT_HW_CACHE_RESULT_MISS << 16);

	char missing[256];

	libbpf_set_print(silent);
	uname(&u);
	json_init(&j, out);
	json_begin_object(&j);
	json_kv_string(&j, "kernel", u.release);
	json_kv_bool(&j, "btf", vmlinux_btf() != NULL);
	json_key(&j, "bpf_build");
	json_begin_object(&j);
	json_kv_string(&j, "name", bpf_build_name(bpf_build()));
	json_kv_string(&j, "missing", bpf_build_missing(missing, sizeof(missing)));
	json_end(&j);
	json_key(&j, "attach");
	json_begin_object(&j);
	json_kv_bool(&j, "fentry", probe_fentry());
	json_kv_bool(&j, "kprobe", probe_kprobe());
	json_kv_bool(&j, "tp_btf", probe_tp_btf());
	json_kv_bool(&j, "tracepoint", probe_tracepoint());
	json_kv_bool(&j, "perf_event", probe_perf_event());
	json_kv_bool(&j, "uprobe", probe_uprobe());
	json_end(&j);
	json_key(&j, "pmu");
	json_begin_object(&j);
	json_kv_bool(&j, "cycles", probe_hw(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES));
	json_kv_bool(&j, "instructions", probe_hw(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS));
	json_kv_bool(&j, "cache-misses", probe_hw(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES));
	json_kv_bool(&j, "L1-dcache-load-misses", probe_hw(PERF_TYPE_HW_CACHE, l1d_miss));
	json_kv_bool(&j, "LLC-load-misses", probe_hw(PERF_TYPE_HW_CACHE, ll_miss));
	json_end(&j);
	json_kv_bool(&j, "msg_zerocopy", probe_zerocopy());
	write_sampling(&j);
	json_end(&j);
	json_finish(&j);
	return 0;
}
