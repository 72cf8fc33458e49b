/* On-CPU stack sampling of the followed processes (see profile.h and bpf/profile.bpf.c).
 *
 * User stacks are named against /proc/PID/maps (user/frames.c). The processes usually exit
 * before the snapshot that asks for their stacks, so their maps are read while they live:
 * when the sampler tells (ring buffer image_events) that a process runs code in a mapping of
 * an image it has not told about before, which happens at its first samples after each exec
 * and when it first runs in a library mapped later. The tracer's loop waits on the ring
 * buffer (profiler_events_fd) and calls profiler_poll. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cgroups.h"
#include "frames.h"
#include "irqframes.h"
#include "json.h"
#include "pmu.h"
#include "profile.h"
#include "profile.skel.h"
#include "profile.compat.skel.h"
#include "builds.h"
#include "tick.h"
#include "trace_helpers.h"

OPEN_IN_BUILD(profile)

/* Must match bpf/profile.bpf.c (checked against the map's key size at load). */
#define PROFILE_MAX_DEPTH 127
#define PROFILE_OVERFLOW_ID (1 << 24)
enum {
	PROFILE_STAT_SEEN,
	PROFILE_STAT_COUNTED,
	PROFILE_STAT_LOST,
	PROFILE_STAT_PARTIAL,
	PROFILE_NR_STATS,
};
#define PROFILE_F_SOFTIRQ 1
#define PROFILE_F_PARTIAL 2
struct profile_key {
	uint32_t tgid;
	int32_t kstack;
	int32_t ustack;
	uint32_t flags;
	char comm[16];
	uint64_t image;
};
struct profile_image_event {
	uint32_t tgid;
	uint32_t pad;
	uint64_t image;
	char comm[16];
	uint64_t vm_start;
};

/* One sampling event: on one task (pid = tid, cpu = -1), or, with a cgroup, on one CPU for
 * the tasks of that cgroup. Not on a CPU for every task: a per-CPU cpu-clock timer keeps
 * firing on a vCPU that would otherwise idle, and in a VM every such wake is an exit (the
 * measurements: bench/NOTES.md, "Choosing the sampler"). Followed processes get inherited events
 * (their later threads and children are sampled too) unless the cgroup's cover them;
 * ksoftirqd threads get their own, for the softirq work they take over. */
struct task_event {
	pid_t tid;
	int fd;
	int softirqd;
	struct bpf_link *link;
};

struct profiler {
	struct profile_bpf *skel;
	struct task_event *tev;
	int ntev, cap_tev;
	int hw;
	const char *source;
	int freq;		/* requested */
	double eff_freq;	/* effective, 0 when unknown */
	/* tick source: one tp_btf link, no per-task events */
	int tick;
	struct bpf_link *tick_link;
	/* cgroup scope: one event per CPU counting only while a task of the cgroup runs there */
	char cgroup[PATH_MAX];	/* its path below the cgroup2 root ("/netio-trace-1"), or "" */
	char cgroup_dir[PATH_MAX];	/* as given to profiler_open, for profiler_attach() */
	struct task_event *cev;	/* one per CPU (tid = the CPU) */
	int ncev;
	struct frames *frames;		/* user frames' names, and the maps of each image */
	struct kaddrs *kaddrs;		/* kernel frames' names, during one snapshot */
	struct ring_buffer *events;	/* image_events */
};

/* ---- images ------------------------------------------------------------------------- */

/* pid's comm (the main thread's), "" when unknown. */
static void read_comm(pid_t pid, char comm[16])
{
	char path[64];
	FILE *f;

	comm[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, 16, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

static void forget_image(struct profiler *p, const struct profile_image_event *ev)
{
	struct { uint32_t tgid, pad; uint64_t image, vm_start; } key = {
		.tgid = ev->tgid, .image = ev->image, .vm_start = ev->vm_start };

	bpf_map_delete_elem(bpf_map__fd(p->skel->maps.images_seen), &key);
}

/* An image_events record: the process runs code of this image in a mapping not told about
 * before; its maps now are the image's, unless it has exec'd since (its comm changed). */
static int on_image(void *ctx, void *data, size_t len)
{
	struct profiler *p = ctx;
	const struct profile_image_event *ev = data;
	struct proc_maps *m;
	char comm[16];

	if (len < sizeof(*ev))
		return 0;
	m = proc_maps_read((pid_t)ev->tgid);
	read_comm((pid_t)ev->tgid, comm);
	if (m && !strncmp(comm, ev->comm, 15)) {
		frames_set_image(p->frames, (pid_t)ev->tgid, ev->image, m);
		return 0;
	}
	proc_maps_free(m);
	if (m)	/* told mid-exec (the new image under the old name): the next sample tells again */
		forget_image(p, ev);
	return 0;
}

int profiler_events_fd(const struct profiler *p)
{
	return p->events ? ring_buffer__epoll_fd(p->events) : -1;
}

void profiler_poll(struct profiler *p)
{
	uint32_t k;

	if (p->events)
		ring_buffer__consume(p->events);
	/* ksoftirqd samples count while anything is followed: the program reads this hint
	 * instead of walking the map (a process may also leave the map in the kernel) */
	p->skel->bss->followed_hint =
		!bpf_map_get_next_key(bpf_map__fd(p->skel->maps.followed_tgids), NULL, &k);
}

/* ---- open / close ---------------------------------------------------------------------- */

static int perf_open(struct perf_event_attr *attr, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void sample_attr(struct perf_event_attr *a, int hw, int freq)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = hw ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
	a->config = hw ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = freq;
}

static int perf_open_sample(struct perf_event_attr *attr, pid_t pid, int cpu, unsigned long flags)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, flags | PERF_FLAG_FD_CLOEXEC);
}

/* Opens a sampling event (pid, cpu, flags as perf_event_open takes them): cycles (through
 * whichever core PMU answers on a hybrid CPU) where the machine has a PMU, else cpu-clock.
 * -1 with errno on failure. */
static int open_sample_event(struct profiler *p, pid_t pid, int cpu, unsigned long flags,
			     int inherit)
{
	struct perf_event_attr attr;
	uint32_t types[PMU_MAX_CORE];
	int ntypes, fd, t;

	sample_attr(&attr, p->hw, p->freq);
	attr.inherit = inherit;
	fd = perf_open_sample(&attr, pid, cpu, flags);
	if (fd >= 0 || !p->hw)
		return fd;
	ntypes = pmu_hybrid_core_types(types);
	for (t = 0; fd < 0 && t < ntypes; t++) {
		sample_attr(&attr, 1, p->freq);
		attr.inherit = inherit;
		attr.config |= (uint64_t)types[t] << 32; /* PERF_PMU_TYPE_SHIFT */
		fd = perf_open_sample(&attr, pid, cpu, flags);
	}
	return fd;
}

/* The sampling program on event fd; the link, or NULL with errno (fd closed). */
static struct bpf_link *attach_sample(struct profiler *p, int fd)
{
	struct bpf_link *link = bpf_program__attach_perf_event(p->skel->progs.sample, fd);

	if (!link) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return link;
}

static int add_task_event(struct profiler *p, pid_t tid, int inherit, int softirqd)
{
	struct task_event *te;
	int fd;

	for (int i = 0; i < p->ntev; i++)
		if (p->tev[i].tid == tid)
			return 0;
	if (p->ntev == p->cap_tev) {
		int cap = p->cap_tev ? p->cap_tev * 2 : 64;
		struct task_event *nt = realloc(p->tev, cap * sizeof(*nt));

		if (!nt)
			return -1;
		p->tev = nt;
		p->cap_tev = cap;
	}
	fd = open_sample_event(p, tid, -1, 0, inherit);
	if (fd < 0)
		return -1;
	te = &p->tev[p->ntev];
	te->link = attach_sample(p, fd);
	if (!te->link)
		return -1;
	te->tid = tid;
	te->fd = fd;
	te->softirqd = softirqd;
	p->ntev++;
	return 0;
}

static void drop_task_event(struct task_event *te)
{
	bpf_link__destroy(te->link);
	close(te->fd);
}

/* Every ksoftirqd/N thread: sampled so that softirq work they take over is seen. */
static int add_softirqd_events(struct profiler *p)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char comm[16];
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 0)
			continue;
		read_comm(pid, comm);
		if (strncmp(comm, "ksoftirqd/", 10))
			continue;
		if (add_task_event(p, pid, 0, 1) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* "what: strerror(e)" into err, formatted by fmt; -1, for `return fail(...)`. */
static int fail(char *err, size_t errlen, const char *fmt, const char *what, int e)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, what, strerror(e));
	return -1;
}

/* dir is a cgroup2 directory: its real path into real, its path below the cgroup2 mount into
 * rel ("/netio-trace-1"); 0, or -1 with err filled. */
static int check_cgroup_dir(const char *dir, char real[PATH_MAX], char rel[PATH_MAX], char *err,
			    size_t errlen)
{
	char root[PATH_MAX];
	size_t n;

	if (cgroup2_root(root, PATH_MAX) || !realpath(dir, real)) {
		snprintf(err, errlen, "--sample-cgroup %s: not a cgroup2 directory", dir);
		return -1;
	}
	n = strlen(root);
	if (strncmp(real, root, n) || (real[n] && real[n] != '/')) {
		snprintf(err, errlen, "--sample-cgroup %s: not below the cgroup2 mount %s", dir, root);
		return -1;
	}
	snprintf(rel, PATH_MAX, "%s", real[n] ? real + n : "/");
	return 0;
}

/* One event per CPU on the cgroup dir: it counts (and its timer runs) only while a task of
 * the cgroup is on that CPU, so a switch between two tasks of the cgroup costs nothing, where
 * per-task events re-arm their timer at every switch. 0, or -1 with err filled. */
static int open_cgroup_events(struct profiler *p, const char *dir, char *err, size_t errlen)
{
	char real[PATH_MAX];
	int ncpu = libbpf_num_possible_cpus(), cgfd, cpu;

	if (check_cgroup_dir(dir, real, p->cgroup, err, errlen))
		return -1;
	cgfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	p->cev = ncpu > 0 ? calloc(ncpu, sizeof(*p->cev)) : NULL;
	if (cgfd < 0 || !p->cev) {
		fail(err, errlen, "--sample-cgroup %s: %s", dir, cgfd < 0 ? errno : ENOMEM);
		if (cgfd >= 0)
			close(cgfd);
		return -1;
	}
	for (cpu = 0; cpu < ncpu; cpu++) {
		int fd = open_sample_event(p, cgfd, cpu, PERF_FLAG_PID_CGROUP, 0);
		struct task_event *te = &p->cev[p->ncev];

		if (fd < 0 && errno == ENODEV)
			continue;	/* a possible CPU that is offline */
		if (fd < 0 || !(te->link = attach_sample(p, fd))) {
			fail(err, errlen, "--sample-cgroup %s: %s", dir, errno);
			close(cgfd);
			return -1;
		}
		te->tid = cpu;
		te->fd = fd;
		p->ncev++;
	}
	close(cgfd);
	return 0;
}

int profiler_add_pid(struct profiler *p, pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0, e = 0;

	if (p->tick)
		return 0;
	if (p->ncev && pid_in_cgroup(pid, p->cgroup))
		return 0;	/* the cgroup's events sample it (and the children it makes) */
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return add_task_event(p, pid, 1, 0);
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0)
			continue;
		if (add_task_event(p, tid, 1, 0) == 0)
			n++;
		else
			e = errno;
	}
	closedir(d);
	if (!n && e) {
		errno = e;
		return -1;
	}
	return 0;
}

void profiler_clear_pids(struct profiler *p)
{
	int kept = 0;

	for (int i = 0; i < p->ntev; i++) {
		if (p->tev[i].softirqd)
			p->tev[kept++] = p->tev[i];
		else
			drop_task_event(&p->tev[i]);
	}
	p->ntev = kept;
}

int profile_source_parse(const char *s, enum profile_source *out)
{
	static const char *const names[] = {
		[PROFILE_SRC_AUTO] = "auto", [PROFILE_SRC_CYCLES] = "cycles",
		[PROFILE_SRC_CPU_CLOCK] = "cpu-clock", [PROFILE_SRC_TICK] = "tick",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum profile_source)i;
			return 0;
		}
	return -1;
}

/* Tick source, before load: the handler's address and the decimation in the program's
 * rodata. HZ unknown: every tick is kept and the effective frequency is reported unknown. */
static int tick_setup(struct profiler *p, char *err, size_t errlen)
{
	uint64_t fn = tick_handler_addr();
	int hz = kernel_config_hz();
	unsigned int every = 1;

	if (!fn) {
		snprintf(err, errlen, "--sample-source tick: no tick handler (tick_nohz_handler, "
			 "tick_sched_timer) with an address in /proc/kallsyms");
		return -1;
	}
	if (tick_lowres()) {
		snprintf(err, errlen, "--sample-source tick: the tick runs in low-resolution mode "
			 "here (hres_active 0 in /proc/timer_list), so timer:hrtimer_expire_entry "
			 "never sees it");
		return -1;
	}
	if (hz > 0) {
		/* N = round(HZ / freq), at least 1: above HZ the rate is HZ */
		every = (unsigned int)((hz + p->freq / 2) / p->freq);
		if (every < 1)
			every = 1;
		p->eff_freq = (double)hz / every;
	}
	p->skel->rodata->tick_fn = fn;
	p->skel->rodata->tick_every = every;
	return 0;
}

static int open_events(struct profiler *p, char *err, size_t errlen);


/* A hardware cycles sampling event opens here (there is a PMU). */
static bool have_cycles(int freq)
{
	struct perf_event_attr attr;
	int fd;

	sample_attr(&attr, 1, freq);
	fd = perf_open(&attr, 0);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* The profile BPF object with only the program this source runs (a kernel without the
 * tracepoint's BTF can still sample on perf events, and the reverse), loaded on the tracer's
 * map of followed processes. 0, or -1 with err. */
static int load_sampler(struct profiler *p, int filter_map_fd, char *err, size_t errlen)
{
	const char *env = getenv("NETIO_PROFILE_STACKS");
	int e, small_stacks = env ? atoi(env) : 0;

	p->skel = profile_open_build();
	if (p->skel)
		p->skel->rodata->kernel_stack_size = kernel_stack_size();
	if (!p->skel)
		return fail(err, errlen, "%s: %s", "open profile BPF object", errno);
	if (filter_map_fd >= 0) {
		e = bpf_map__reuse_fd(p->skel->maps.followed_tgids, filter_map_fd);
		if (e)
			return fail(err, errlen, "%s: %s", "reuse followed_tgids map fd", -e);
	}
	/* Tests: a small `stacks` map, whose buckets collide (NETIO_PROFILE_STACKS entries) */
	if (small_stacks > 0)
		bpf_map__set_max_entries(p->skel->maps.stacks, small_stacks);
	bpf_program__set_autoload(p->skel->progs.tick_sample, p->tick);
	bpf_program__set_autoload(p->skel->progs.sample, !p->tick);
	if (p->tick && tick_setup(p, err, errlen))
		return -1;
	e = profile_bpf__load(p->skel);
	if (e && p->tick)
		return fail(err, errlen, "%s: %s", "--sample-source tick: load the "
			    "tp_btf/hrtimer_expire_entry program", -e);
	if (e)
		return fail(err, errlen, "%s: %s", "load profile BPF program", -e);
	if (bpf_map__key_size(p->skel->maps.counts) != sizeof(struct profile_key))
		return fail(err, errlen, "%s: %s", "profile_key differs between BPF and user space",
			    EINVAL);
	return 0;
}

/* Samples start coming: the tick program attached, or the perf events opened. */
static int start_sampling(struct profiler *p, enum profile_source src, const char *cgroup_dir,
			  char *err, size_t errlen)
{
	if (p->tick) {
		p->source = "tick";
		p->tick_link = bpf_program__attach(p->skel->progs.tick_sample);
		if (!p->tick_link)
			return fail(err, errlen, "%s: %s", "--sample-source tick: attach "
				    "tp_btf/hrtimer_expire_entry", errno);
		return 0;
	}
	/* hardware cycles where the machine has a PMU, else software cpu-clock (one source for
	 * the whole profile; docs/DESIGN.md's results name these two). In a VM the tick is far
	 * cheaper (a cpu-clock timer's every expiry and re-arm is a VM exit; bench/results.md
	 * has both side by side), but it is asked for by name. */
	p->hw = have_cycles(p->freq);
	if (src == PROFILE_SRC_CYCLES && !p->hw) {
		snprintf(err, errlen, "--sample-source cycles: no hardware cycles event "
			 "here (no PMU); use cpu-clock or tick");
		return -1;
	}
	if (src == PROFILE_SRC_CPU_CLOCK)
		p->hw = 0;
	p->source = p->hw ? "cycles" : "cpu-clock";
	p->eff_freq = p->freq;
	if (cgroup_dir)
		snprintf(p->cgroup_dir, sizeof(p->cgroup_dir), "%s", cgroup_dir);
	return open_events(p, err, errlen);
}

struct profiler *profiler_open(int freq_hz, enum profile_source src, int filter_map_fd,
			       const char *cgroup_dir, char *err, size_t errlen)
{
	struct profiler *p = calloc(1, sizeof(*p));

	if (!p) {
		fail(err, errlen, "%s: %s", "profiler", ENOMEM);
		return NULL;
	}
	p->freq = freq_hz > 0 ? freq_hz : 999;
	/* auto: cycles where a PMU exists; else the tick, which fires anyway (a cpu-clock timer
	 * of our own costs a VM exit per sample: bench/results.md has both side by side) */
	if (src == PROFILE_SRC_AUTO && !have_cycles(p->freq))
		src = PROFILE_SRC_TICK;
	p->tick = src == PROFILE_SRC_TICK;
	if (cgroup_dir && p->tick) {	/* not used by the tick, but never wrong in silence */
		char real[PATH_MAX], rel[PATH_MAX];

		if (check_cgroup_dir(cgroup_dir, real, rel, err, errlen))
			goto out;
	}
	if (load_sampler(p, filter_map_fd, err, errlen))
		goto out;
	p->frames = frames_new();
	if (!p->frames) {
		fail(err, errlen, "%s: %s", "symbolizer (blazesym, libelf)", ENOMEM);
		goto out;
	}
	p->events = ring_buffer__new(bpf_map__fd(p->skel->maps.image_events), on_image, p, NULL);
	if (!p->events) {
		fail(err, errlen, "%s: %s", "ring buffer image_events", errno);
		goto out;
	}
	if (start_sampling(p, src, cgroup_dir, err, errlen))
		goto out;
	return p;
out:
	profiler_close(p);
	return NULL;
}

/* The events every perf-event source keeps for the whole trace: the cgroup's per-CPU events
 * (with --sample-cgroup) and ksoftirqd's. */
static int open_events(struct profiler *p, char *err, size_t errlen)
{
	if (p->cgroup_dir[0] && open_cgroup_events(p, p->cgroup_dir, err, errlen))
		return -1;
	if (add_softirqd_events(p) < 0) {
		int e = errno;

		if (e == EINVAL)
			snprintf(err, errlen, "perf_event_open(%s, %d Hz): %s (above "
				 "kernel.perf_event_max_sample_rate?)", p->source, p->freq, strerror(e));
		else
			fail(err, errlen, "%s: %s", "sampling events on ksoftirqd", e);
		return -1;
	}
	return 0;
}

void profiler_detach(struct profiler *p)
{
	for (int i = 0; i < p->ntev; i++)
		drop_task_event(&p->tev[i]);
	p->ntev = 0;
	for (int i = 0; i < p->ncev; i++)
		drop_task_event(&p->cev[i]);
	free(p->cev);
	p->cev = NULL;
	p->ncev = 0;
	bpf_link__destroy(p->tick_link);
	p->tick_link = NULL;
}

int profiler_attach(struct profiler *p, char *err, size_t errlen)
{
	if (p->tick) {
		if (!p->tick_link)
			p->tick_link = bpf_program__attach(p->skel->progs.tick_sample);
		if (!p->tick_link) {
			fail(err, errlen, "%s: %s", "attach tp_btf/hrtimer_expire_entry", errno);
			return -1;
		}
		return 0;
	}
	if (p->ntev || p->ncev)
		return 0;	/* attached already */
	if (open_events(p, err, errlen)) {
		profiler_detach(p);
		return -1;
	}
	return 0;
}

void profiler_close(struct profiler *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < p->ntev; i++)
		drop_task_event(&p->tev[i]);
	free(p->tev);
	for (i = 0; i < p->ncev; i++)
		drop_task_event(&p->cev[i]);
	free(p->cev);
	bpf_link__destroy(p->tick_link);
	ring_buffer__free(p->events);
	profile_bpf__destroy(p->skel);
	frames_free(p->frames);
	free(p);
}

const char *profiler_source(const struct profiler *p)
{
	return p->source;
}

double profiler_freq(const struct profiler *p)
{
	return p->eff_freq;
}

void profiler_write_json(const struct profiler *p, struct json *j)
{
	double f = profiler_freq(p);

	json_kv_string(j, "source", profiler_source(p));
	json_kv_string(j, "scope", p->tick ? "cpu" : p->ncev ? "cgroup" : "task");
	if (f <= 0)
		json_kv_null(j, "freq");
	else if (f == (double)(long long)f)
		json_kv_int(j, "freq", (long long)f);
	else
		json_kv_double(j, "freq", f);
}

int profiler_prog_fd(const struct profiler *p)
{
	return bpf_program__fd(p->tick ? p->skel->progs.tick_sample : p->skel->progs.sample);
}

/* ---- reset and counts ------------------------------------------------------------------ */

/* Deletes every key of a map (collect, then delete: a hash changes under iteration). */
static void clear_map(int fd, size_t key_size)
{
	size_t cap = 1024, n = 0, i;
	char *keys = malloc(cap * key_size), *prev = NULL, *next;

	if (!keys)
		return;
	for (;;) {
		if (n == cap) {
			char *nk = realloc(keys, cap * 2 * key_size);

			if (!nk)
				break;
			keys = nk;
			cap *= 2;
			prev = n ? keys + (n - 1) * key_size : NULL;
		}
		next = keys + n * key_size;
		if (bpf_map_get_next_key(fd, prev, next))
			break;
		prev = next;
		n++;
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, keys + i * key_size);
	free(keys);
}

void profiler_reset(struct profiler *p)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *zero;
	uint32_t i;

	/* nothing followed any more (a `clear` before this reset): ksoftirqd stops counting
	 * now, not at the tracer loop's next poll */
	profiler_poll(p);
	clear_map(bpf_map__fd(p->skel->maps.counts), sizeof(struct profile_key));
	clear_map(bpf_map__fd(p->skel->maps.stacks), sizeof(uint32_t));
	clear_map(bpf_map__fd(p->skel->maps.stacks_overflow), sizeof(uint32_t));
	clear_map(bpf_map__fd(p->skel->maps.leaf_ret), sizeof(uint32_t));
	/* the images told about so far: a process still running tells its mappings again (its
	 * maps are read again), a gone one's maps are dropped */
	clear_map(bpf_map__fd(p->skel->maps.images_seen), bpf_map__key_size(p->skel->maps.images_seen));
	frames_forget_gone(p->frames);
	zero = ncpu > 0 ? calloc(ncpu, sizeof(uint64_t)) : NULL;
	if (zero) {
		for (i = 0; i < PROFILE_NR_STATS; i++)
			bpf_map_update_elem(bpf_map__fd(p->skel->maps.stats), &i, zero, BPF_ANY);
		free(zero);
	}
}

static int read_stats(struct profiler *p, uint64_t out[PROFILE_NR_STATS])
{
	int ncpu = libbpf_num_possible_cpus(), c;
	uint64_t *v;
	uint32_t i;

	memset(out, 0, PROFILE_NR_STATS * sizeof(uint64_t));
	if (ncpu <= 0)
		return -1;
	v = calloc(ncpu, sizeof(uint64_t));
	if (!v)
		return -1;
	for (i = 0; i < PROFILE_NR_STATS; i++) {
		if (bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.stats), &i, v))
			continue;
		for (c = 0; c < ncpu; c++)
			out[i] += v[c];
	}
	free(v);
	return 0;
}

long profiler_samples(struct profiler *p, long *lost)
{
	uint64_t st[PROFILE_NR_STATS];

	if (read_stats(p, st)) {
		if (lost)
			*lost = -1;
		return -1;
	}
	if (lost)
		*lost = (long)st[PROFILE_STAT_LOST];
	return (long)st[PROFILE_STAT_COUNTED];
}

/* ---- folded stacks --------------------------------------------------------------------- */

struct line {
	char *s;
	uint64_t count;
};

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_putc(struct sbuf *b, char c)
{
	if (b->oom)
		return;
	if (b->len + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		char *np = realloc(b->p, cap);

		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	b->p[b->len++] = c;
	b->p[b->len] = 0;
}

/* Appends ";frame" (no ';' before the first), with ';' and blanks in names made '_', and
 * suffix appended. */
static void sb_frame(struct sbuf *b, const char *name, const char *suffix)
{
	const char *s;

	if (b->len)
		sb_putc(b, ';');
	for (s = name; *s; s++)
		sb_putc(b, (*s == ';' || *s == ' ' || *s == '\t' || *s == '\n') ? '_' : *s);
	for (s = suffix; *s; s++)
		sb_putc(b, *s);
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->s, ((const struct line *)b)->s);
}

static void emit_frame(void *b, const char *name)
{
	sb_frame(b, name, "");
}

static void add_kernel_frames(struct profiler *p, struct sbuf *b, const uint64_t *ips, int n)
{
	const char *names[PROFILE_MAX_DEPTH];
	uint64_t addrs[PROFILE_MAX_DEPTH];
	int i, skip = 0;

	for (i = 0; i < n; i++)
		addrs[i] = i ? ips[i] - 1 : ips[i];
	kaddrs_names(p->kaddrs, addrs, n, names);
	if (p->tick) {
		/* A tick sample's stack begins inside the interrupt (the BPF program, the
		 * tracepoint, __hrtimer_run_queues, hrtimer_interrupt, ..., the entry
		 * asm_sysvec_apic_timer_interrupt): drop those, as a perf sample (taken from
		 * the interrupted registers) never has them. The frame outside the entry is
		 * the interrupted instruction, not a return address: no "- 1" there. */
		skip = irq_frames_inner(names, n);
		if (skip > 0 && skip < n) {
			addrs[skip] = ips[skip];
			kaddrs_names(p->kaddrs, addrs, n, names);
		}
	}
	for (i = n - 1; i >= skip; i--)
		sb_frame(b, names[i] ? names[i] : "[unknown]", "_[k]");
}

/* The stack of a sample key's id (bpf/profile.bpf.c's stack_id): its frames, 0 for no stack,
 * -1 when it is gone. */
static int stack_ips(const struct profiler *p, int32_t id, uint64_t *ips)
{
	int fd = bpf_map__fd(p->skel->maps.stacks), n;

	if (id < 0)
		return 0;
	if (id >= PROFILE_OVERFLOW_ID) {
		fd = bpf_map__fd(p->skel->maps.stacks_overflow);
		id -= PROFILE_OVERFLOW_ID;
	}
	memset(ips, 0, PROFILE_MAX_DEPTH * sizeof(*ips));
	if (bpf_map_lookup_elem(fd, &id, ips))
		return -1;
	for (n = 0; n < PROFILE_MAX_DEPTH && ips[n]; n++)
		;
	return n;
}

/* One sample key's stack as a folded line into b: comm, user frames, kernel frames. */
static void fold_stack(struct profiler *p, const struct profile_key *key, struct sbuf *b)
{
	uint64_t kips[PROFILE_MAX_DEPTH], uips[PROFILE_MAX_DEPTH], ret = 0;
	const struct proc_maps *m;
	char comm[17];
	char *slash;
	int nk, nu, have_ret;

	memcpy(comm, key->comm, 16);
	comm[16] = 0;
	/* the per-CPU softirq threads are one flame */
	if (!strncmp(comm, "ksoftirqd/", 10) && (slash = strchr(comm, '/')))
		*slash = 0;
	sb_frame(b, comm[0] ? comm : "[unknown]", "");

	nu = stack_ips(p, key->ustack, uips);
	nk = stack_ips(p, key->kstack, kips);

	if (key->ustack < 0 && key->ustack != -EFAULT && !(key->flags & PROFILE_F_SOFTIRQ))
		sb_frame(b, "[user stack lost]", "");
	else if (nu < 0)
		sb_frame(b, "[user stack lost]", "");
	else if (nu > 0) {
		have_ret = bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.leaf_ret), &key->ustack,
					       &ret) == 0;
		m = frames_image(p->frames, (pid_t)key->tgid, key->image);
		if (!m) {	/* never told about (the ring buffer was full): read it if alive */
			struct proc_maps *now = proc_maps_read((pid_t)key->tgid);

			if (now)
				frames_set_image(p->frames, (pid_t)key->tgid, key->image, now);
			m = now;
		}
		frames_user_stack(p->frames, m, uips, nu, have_ret, ret, emit_frame, b);
	}

	if (key->kstack < 0 && key->kstack != -EFAULT)
		sb_frame(b, "[kernel stack lost]", "_[k]");
	else if (nk < 0)
		sb_frame(b, "[kernel stack lost]", "_[k]");
	else if (nk > 0)
		add_kernel_frames(p, b, kips, nk);
}

/* Sorts lines, merges equal stacks and writes "stack count" lines to out (NULL: only
 * count); the samples in all, and frees the lines. */
static long write_merged(struct line *lines, size_t nlines, FILE *out)
{
	long total = 0;
	size_t i, j;

	qsort(lines, nlines, sizeof(*lines), line_cmp);
	for (i = 0; i < nlines; i = j) {
		uint64_t c = lines[i].count;

		for (j = i + 1; j < nlines && !strcmp(lines[i].s, lines[j].s); j++)
			c += lines[j].count;
		if (out)
			fprintf(out, "%s %llu\n", lines[i].s, (unsigned long long)c);
		total += (long)c;
	}
	for (i = 0; i < nlines; i++)
		free(lines[i].s);
	free(lines);
	return total;
}

long profiler_write_folded(struct profiler *p, FILE *out)
{
	int counts_fd = bpf_map__fd(p->skel->maps.counts);
	struct profile_key key, next, *prev = NULL;
	struct line *lines = NULL;
	size_t nlines = 0, cap = 0;
	long total;

	/* the maps of the images told about until now; kallsyms read afresh (modules and BPF
	 * programs come and go) */
	profiler_poll(p);
	p->kaddrs = kaddrs_new();
	if (!p->kaddrs)
		return -1;

	while (bpf_map_get_next_key(counts_fd, prev, &next) == 0) {
		struct sbuf b = { 0 };
		uint64_t count = 0;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(counts_fd, &key, &count) || count == 0)
			continue;
		fold_stack(p, &key, &b);
		if (b.oom) {
			free(b.p);
			continue;
		}
		if (nlines == cap) {
			struct line *nl;

			cap = cap ? cap * 2 : 1024;
			nl = realloc(lines, cap * sizeof(*nl));
			if (!nl) {
				free(b.p);
				break;
			}
			lines = nl;
		}
		lines[nlines].s = b.p;
		lines[nlines].count = count;
		nlines++;
	}
	kaddrs_free(p->kaddrs);	/* kallsyms' names take memory: not kept */
	p->kaddrs = NULL;
	total = write_merged(lines, nlines, out);
	if (out && ferror(out))
		return -1;
	return total;
}
