/* perf counters of the followed processes (see perf_counters.h).
 *
 * Every event is opened per pid (cpu -1, inherit 1: the threads and children it starts
 * later are counted into it) with TOTAL_TIME_ENABLED/RUNNING. What the machine can count is
 * found once, by opening each event on ourselves: an event that fails there is "unsupported"
 * and reported null, never 0.
 *
 * Hybrid CPUs (Intel cpu_core + cpu_atom) have one core PMU per CPU type; a hardware event
 * is opened on each (extended type: PMU type << 32) and the two are summed. A task-bound
 * event of one type is "enabled" but not "running" while the task runs on the other type, so
 * the multiplexing scale is enabled / (sum of running over the PMUs), not per PMU.
 * reset keeps a baseline (value, enabled, running) per fd rather than PERF_EVENT_IOC_RESET,
 * which does not reset the times. */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "json.h"
#include "netio.h"
#include "perf_counters.h"
#include "pmu.h"

#ifndef PERF_PMU_TYPE_SHIFT
#define PERF_PMU_TYPE_SHIFT 32
#endif

#define CACHE(c, op, res) \
	((PERF_COUNT_HW_CACHE_##c) | (PERF_COUNT_HW_CACHE_OP_##op << 8) | \
	 (PERF_COUNT_HW_CACHE_RESULT_##res << 16))

static const struct pc_event {
	const char *name;
	uint32_t type;
	uint64_t config;
} EVENTS[] = {
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	{ "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
	{ "L1-dcache-load-misses", PERF_TYPE_HW_CACHE, CACHE(L1D, READ, MISS) },
	{ "LLC-load-misses", PERF_TYPE_HW_CACHE, CACHE(LL, READ, MISS) },
	{ "LLC-store-misses", PERF_TYPE_HW_CACHE, CACHE(LL, WRITE, MISS) },
	{ "context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
	{ "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
};
#define NEV ((int)(sizeof(EVENTS) / sizeof(EVENTS[0])))
#define MAXPMU PMU_MAX_CORE

struct pc_fd {
	int fd;
	uint64_t base[3]; /* value, enabled, running at the last reset */
};

struct pc_task {
	pid_t tid;
	struct pc_fd ev[NEV][MAXPMU];
};

/* A followed process: one set of counters per thread it had when added (a per-task counter
 * counts one thread, and inherit covers only threads and children created later). */
struct pc_pid {
	struct pc_pid *next;
	pid_t pid;
	int ntasks;
	struct pc_task *tasks;
};

struct perf_counters {
	bool kernel_sw;            /* software events from struct kernel_counts, none opened */
	int npmu;                  /* core PMUs: 1, or 2+ on hybrid CPUs */
	uint32_t pmu_type[MAXPMU]; /* their types (0: legacy, not extended) */
	bool supported[NEV][MAXPMU];
	bool failed[NEV]; /* supported, but could not be opened for some pid */
	struct pc_pid *pids;
	double tsc_hz;
};

static int perf_open(struct perf_event_attr *a, pid_t pid)
{
	return (int)syscall(SYS_perf_event_open, a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void event_attr(const struct perf_counters *pc, int e, int pmu, struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = EVENTS[e].type;
	a->config = EVENTS[e].config;
	if (EVENTS[e].type != PERF_TYPE_SOFTWARE && pc->pmu_type[pmu])
		a->config |= (uint64_t)pc->pmu_type[pmu] << PERF_PMU_TYPE_SHIFT;
	a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	a->inherit = 1;
}

/* Hybrid CPUs: one core PMU per CPU type, each reached through its extended type. */
static void find_core_pmus(struct perf_counters *pc)
{
	pc->npmu = pmu_hybrid_core_types(pc->pmu_type);
	if (pc->npmu < 2) { /* not hybrid: the legacy types reach the one core PMU */
		pc->npmu = 1;
		pc->pmu_type[0] = 0;
	}
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The TSC rate: rdtsc against CLOCK_MONOTONIC_RAW over ~20 ms (x86), else /proc/cpuinfo's
 * "cpu MHz"; 0 when neither works. */
static double tsc_hz(void)
{
#if defined(__x86_64__) || defined(__i386__)
	struct timespec d = { 0, 20 * 1000 * 1000 };
	double t0, t1;
	uint64_t c0, c1;

	t0 = now_ns();
	c0 = __rdtsc();
	nanosleep(&d, NULL);
	t1 = now_ns();
	c1 = __rdtsc();
	if (t1 > t0 && c1 > c0)
		return (double)(c1 - c0) * 1e9 / (t1 - t0);
#endif
	{
		FILE *f = fopen("/proc/cpuinfo", "re");
		char line[256];
		double mhz = 0;

		if (!f)
			return 0;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
				break;
		fclose(f);
		return mhz * 1e6;
	}
}

/* Whether event e is read from the kernel's own counters instead of a perf event. */
static bool from_kernel(const struct perf_counters *pc, int e)
{
	return pc->kernel_sw && EVENTS[e].type == PERF_TYPE_SOFTWARE;
}

static unsigned long long kernel_value(int e, const struct kernel_counts *k)
{
	switch (EVENTS[e].config) {
	case PERF_COUNT_SW_CONTEXT_SWITCHES: return k->switches;
	case PERF_COUNT_SW_CPU_MIGRATIONS: return k->migrations;
	case PERF_COUNT_SW_PAGE_FAULTS: return k->faults;
	default: return k->run_ns;	/* PERF_COUNT_SW_TASK_CLOCK */
	}
}

struct perf_counters *perf_counters_new(bool kernel_software)
{
	struct perf_counters *pc = calloc(1, sizeof(*pc));
	struct perf_event_attr a;
	int e, m;

	if (!pc)
		return NULL;
	pc->kernel_sw = kernel_software;
	find_core_pmus(pc);
	for (e = 0; e < NEV; e++) {
		int npmu = EVENTS[e].type == PERF_TYPE_SOFTWARE ? 1 : pc->npmu;

		if (from_kernel(pc, e))
			continue;

		for (m = 0; m < npmu; m++) {
			int fd;

			event_attr(pc, e, m, &a);
			a.disabled = 1;
			fd = perf_open(&a, 0);
			if (fd >= 0) {
				pc->supported[e][m] = true;
				close(fd);
			}
		}
	}
	pc->tsc_hz = tsc_hz();
	return pc;
}

static void read_fd(int fd, uint64_t v[3])
{
	v[0] = v[1] = v[2] = 0;
	if (fd >= 0 && read(fd, v, 3 * sizeof(uint64_t)) != 3 * sizeof(uint64_t))
		v[0] = v[1] = v[2] = 0;
}

static void close_task(struct pc_task *t)
{
	int e, m;

	for (e = 0; e < NEV; e++)
		for (m = 0; m < MAXPMU; m++)
			if (t->ev[e][m].fd >= 0) {
				close(t->ev[e][m].fd);
				t->ev[e][m].fd = -1;
			}
}

static void free_pid(struct pc_pid *p)
{
	int i;

	for (i = 0; i < p->ntasks; i++)
		close_task(&p->tasks[i]);
	free(p->tasks);
	free(p);
}

/* Opens every supported counter on thread tid. Returns the number opened, or -1 with errno
 * ESRCH when the thread is gone. */
static int open_task(struct perf_counters *pc, struct pc_task *t, pid_t tid, int *last_err)
{
	struct perf_event_attr a;
	int e, m, opened = 0;

	t->tid = tid;
	for (e = 0; e < NEV; e++)
		for (m = 0; m < MAXPMU; m++)
			t->ev[e][m].fd = -1;
	for (e = 0; e < NEV; e++) {
		int npmu = EVENTS[e].type == PERF_TYPE_SOFTWARE ? 1 : pc->npmu;

		for (m = 0; m < npmu; m++) {
			if (!pc->supported[e][m])
				continue;
			event_attr(pc, e, m, &a);
			t->ev[e][m].fd = perf_open(&a, tid);
			if (t->ev[e][m].fd >= 0) {
				opened++;
				continue;
			}
			*last_err = errno;
			if (errno == ESRCH) {
				close_task(t);
				errno = ESRCH;
				return -1;
			}
			pc->failed[e] = true;
		}
	}
	return opened;
}

/* The thread ids of pid (pid itself first); NULL when it has none left. */
static pid_t *list_tasks(pid_t pid, int *n)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	pid_t *v = malloc(sizeof(pid_t) * 16);
	int cap = 16;

	*n = 0;
	if (!v)
		return NULL;
	v[(*n)++] = pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return v;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || tid == pid)
			continue;
		if (*n == cap) {
			pid_t *nv = realloc(v, sizeof(pid_t) * cap * 2);

			if (!nv)
				break;
			v = nv;
			cap *= 2;
		}
		v[(*n)++] = tid;
	}
	closedir(d);
	return v;
}

int perf_counters_add_pid(struct perf_counters *pc, pid_t pid)
{
	struct pc_pid *p = calloc(1, sizeof(*p));
	int ntids = 0, i, opened = 0, last_err = 0, r;
	pid_t *tids;

	for (struct pc_pid *q = pc->pids; q; q = q->next)
		if (q->pid == pid) { /* already counted (a second `pid add`) */
			free(p);
			return 0;
		}
	if (!p)
		return -1;
	p->pid = pid;
	tids = list_tasks(pid, &ntids);
	if (!tids) {
		free(p);
		errno = ENOMEM;
		return -1;
	}
	p->tasks = calloc(ntids, sizeof(*p->tasks));
	if (!p->tasks) {
		free(tids);
		free(p);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < ntids; i++) {
		r = open_task(pc, &p->tasks[p->ntasks], tids[i], &last_err);
		if (r < 0) {
			if (i == 0) { /* the process itself is gone */
				free(tids);
				free_pid(p);
				errno = ESRCH;
				return -1;
			}
			continue; /* a thread that exited meanwhile */
		}
		opened += r;
		p->ntasks++;
	}
	free(tids);
	p->next = pc->pids;
	pc->pids = p;
	if (!opened && last_err) {
		errno = last_err;
		return -1;
	}
	return 0;
}

void perf_counters_clear(struct perf_counters *pc)
{
	struct pc_pid *p, *n;

	for (p = pc->pids; p; p = n) {
		n = p->next;
		free_pid(p);
	}
	pc->pids = NULL;
	memset(pc->failed, 0, sizeof(pc->failed));
}

void perf_counters_reset(struct perf_counters *pc)
{
	struct pc_pid *p;
	int e, m, i;

	for (p = pc->pids; p; p = p->next)
		for (i = 0; i < p->ntasks; i++)
			for (e = 0; e < NEV; e++)
				for (m = 0; m < MAXPMU; m++)
					if (p->tasks[i].ev[e][m].fd >= 0)
						read_fd(p->tasks[i].ev[e][m].fd,
							p->tasks[i].ev[e][m].base);
}

/* Event e of one thread (and what it inherited) since the last reset, summed over the core
 * PMUs and scaled for multiplexing. 1 and *out, 0 when it never ran, -1 when it ran but the
 * counter never got on a PMU. */
static int task_value(const struct perf_counters *pc, const struct pc_task *t, int e,
		      double *out, bool *scaled)
{
	int npmu = EVENTS[e].type == PERF_TYPE_SOFTWARE ? 1 : pc->npmu, m;
	uint64_t value = 0, enabled = 0, running = 0;

	for (m = 0; m < npmu; m++) {
		const struct pc_fd *f = &t->ev[e][m];
		uint64_t v[3];

		if (f->fd < 0)
			continue;
		read_fd(f->fd, v);
		value += v[0] - f->base[0];
		if (v[1] - f->base[1] > enabled)
			enabled = v[1] - f->base[1];
		running += v[2] - f->base[2];
	}
	if (enabled == 0)
		return 0;
	if (running == 0)
		return -1;
	*out = (double)value;
	if (running < enabled) {
		/* multiplexed (a 0.1% margin for the skew between the two times' updates) */
		if ((double)(enabled - running) > 1e-3 * (double)enabled)
			*scaled = true;
		*out = (double)value * (double)enabled / (double)running;
	}
	return 1;
}

/* Event e summed over every followed thread since the last reset: 0 and *out, or -1 when
 * it cannot be told (unsupported, not opened for some pid, or never got on a PMU). */
static int event_value(const struct perf_counters *pc, int e, double *out, bool *scaled)
{
	int npmu = EVENTS[e].type == PERF_TYPE_SOFTWARE ? 1 : pc->npmu, m, any = 0, i;
	const struct pc_pid *p;
	double total = 0, v;

	for (m = 0; m < npmu; m++)
		any |= pc->supported[e][m];
	if (!any || pc->failed[e])
		return -1;
	for (p = pc->pids; p; p = p->next) {
		for (i = 0; i < p->ntasks; i++) {
			int r = task_value(pc, &p->tasks[i], e, &v, scaled);

			if (r < 0)
				return -1;
			if (r > 0)
				total += v;
		}
	}
	*out = total;
	return 0;
}

void perf_counters_write_json(struct perf_counters *pc, const struct kernel_counts *k,
			      FILE *out)
{
	struct json j;
	bool scaled = false;
	int e, m;

	json_init(&j, out);
	json_begin_object(&j);
	for (e = 0; e < NEV; e++) {
		double v;

		json_key(&j, EVENTS[e].name);
		if (from_kernel(pc, e))
			json_uint(&j, kernel_value(e, k));
		else if (event_value(pc, e, &v, &scaled) == 0)
			json_uint(&j, (unsigned long long)(v + 0.5));
		else
			json_null(&j);
	}
	json_key(&j, "unsupported");
	json_begin_array(&j);
	for (e = 0; e < NEV; e++) {
		int npmu = EVENTS[e].type == PERF_TYPE_SOFTWARE ? 1 : pc->npmu, any = 0;

		for (m = 0; m < npmu; m++)
			any |= pc->supported[e][m];
		if (!any && !from_kernel(pc, e))
			json_string(&j, EVENTS[e].name);
	}
	json_end(&j);
	/* supported here, but a pid's counter could not be opened (null above) */
	for (e = 0; e < NEV && !pc->failed[e]; e++)
		;
	if (e < NEV) {
		json_key(&j, "failed");
		json_begin_array(&j);
		for (e = 0; e < NEV; e++)
			if (pc->failed[e])
				json_string(&j, EVENTS[e].name);
		json_end(&j);
	}
	json_kv_bool(&j, "scaled", scaled);
	json_kv_string(&j, "software_from", pc->kernel_sw ? "task_struct" : "perf_event");
	json_key(&j, "tsc_hz");
	if (pc->tsc_hz > 0)
		json_uint(&j, (unsigned long long)(pc->tsc_hz + 0.5));
	else
		json_null(&j);
	json_end(&j);
	fflush(out);
}

void perf_counters_free(struct perf_counters *pc)
{
	if (!pc)
		return;
	perf_counters_clear(pc);
	free(pc);
}
