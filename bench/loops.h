/* What the bench's own C programs (busy_loop.c, getpid_loop.c, churn.c) share: the clock
 * they time themselves by, and the bounds of a --seconds. */
#ifndef NETIO_BENCH_LOOPS_H
#define NETIO_BENCH_LOOPS_H

#include <stdio.h>
#include <time.h>

static inline double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A --seconds a loop may run: (0, 3600]; otherwise prog says so on stderr. */
static inline int bench_seconds_ok(const char *prog, double seconds)
{
	if (seconds > 0 && seconds <= 3600)
		return 1;
	fprintf(stderr, "%s: --seconds must be in (0, 3600]\n", prog);
	return 0;
}

#endif
