/* netio-getpid-loop: getpid(2) in a loop for --seconds S (default 1), then how many calls it
 * made, as JSON. A process making only syscalls the tracer does not follow: what a syscall hook
 * on every syscall of the machine costs it, the tracer's syscall rung shows (issue 15). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000	/* calls between two clock reads */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double seconds = 1.0, start, end, t;
	uint64_t calls = 0;

	if (argc == 3 && !strcmp(argv[1], "--seconds"))
		seconds = strtod(argv[2], NULL);
	else if (argc != 1) {
		fprintf(stderr, "usage: netio-getpid-loop [--seconds S]\n");
		return 2;
	}
	if (!(seconds > 0 && seconds <= 3600)) {
		fprintf(stderr, "netio-getpid-loop: --seconds must be in (0, 3600]\n");
		return 2;
	}
	start = now();
	end = start + seconds;
	do {
		for (int i = 0; i < BATCH; i++)
			syscall(SYS_getpid);	/* the raw call: no libc caching */
		calls += BATCH;
		t = now();
	} while (t < end);
	printf("{\"calls\": %llu, \"seconds\": %.6f, \"calls_per_s\": %.1f}\n",
	       (unsigned long long)calls, t - start, (double)calls / (t - start));
	return 0;
}
