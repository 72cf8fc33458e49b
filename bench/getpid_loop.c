/* netio-getpid-loop: getpid(2) in a loop for --seconds S (default 1), then how many calls it
 * made, as JSON. A process making only syscalls the tracer does not follow: what a syscall hook
 * on every syscall of the machine costs it, the tracer's syscall rung shows.
 * --reference: each batch of calls is followed by a block of pure computation, timed apart:
 * "blocks_per_s" is the machine's speed over the same period, so that a comparison can leave
 * out runs the host slowed (bench/unrelated.py); "calls_per_s" counts the calls' time only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loops.h"

#define BATCH 1000	/* calls between two clock reads */
#define BLOCK 20000	/* additions in a reference block */

static uint64_t getpid_batch(void)
{
	for (int i = 0; i < BATCH; i++)
		syscall(SYS_getpid);	/* the raw call: no libc caching */
	return BATCH;
}

static void reference_block(void)
{
	volatile uint64_t sink = 0;

	for (int i = 0; i < BLOCK; i++)
		sink += (uint64_t)i;
}

static int usage(void)
{
	fprintf(stderr, "usage: netio-getpid-loop [--seconds S] [--reference]\n");
	return 2;
}

int main(int argc, char **argv)
{
	double seconds = 1.0, end, t, t0, in_calls = 0, in_blocks = 0;
	uint64_t calls = 0, blocks = 0;
	int reference = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--reference"))
			reference = 1;
		else
			return usage();
	}
	if (!bench_seconds_ok("netio-getpid-loop", seconds))
		return 2;
	t = bench_now();
	end = t + seconds;
	do {
		t0 = t;
		calls += getpid_batch();
		t = bench_now();
		in_calls += t - t0;
		if (reference) {
			t0 = t;
			reference_block();
			blocks++;
			t = bench_now();
			in_blocks += t - t0;
		}
	} while (t < end);
	printf("{\"calls\": %llu, \"seconds\": %.6f, \"calls_per_s\": %.1f",
	       (unsigned long long)calls, in_calls, (double)calls / in_calls);
	if (reference)
		printf(", \"blocks\": %llu, \"blocks_per_s\": %.1f", (unsigned long long)blocks,
		       (double)blocks / in_blocks);
	printf("}\n");
	return 0;
}
