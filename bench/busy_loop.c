/* netio-busy-loop: pure computation for --seconds S (default 1), then prints how many blocks
 * of it ran, as JSON. No syscall, no memory traffic: what a sampler costs it is the cost of
 * the sampling interrupt itself (timer expiry, program, re-arm), which the bench's "timer
 * floor" measures beside the workloads (bench/measure_overhead.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loops.h"

#define BLOCK 100000	/* additions between two clock reads: ~0.2 ms here */

int main(int argc, char **argv)
{
	double seconds = 1.0, start, end, t;
	volatile uint64_t sink = 0;
	uint64_t blocks = 0;

	if (argc == 3 && !strcmp(argv[1], "--seconds"))
		seconds = strtod(argv[2], NULL);
	else if (argc != 1) {
		fprintf(stderr, "usage: netio-busy-loop [--seconds S]\n");
		return 2;
	}
	if (!bench_seconds_ok("netio-busy-loop", seconds))
		return 2;
	start = bench_now();
	end = start + seconds;
	do {
		for (int i = 0; i < BLOCK; i++)
			sink += (uint64_t)i;
		blocks++;
		t = bench_now();
	} while (t < end);
	printf("{\"blocks\": %llu, \"seconds\": %.6f, \"blocks_per_s\": %.3f}\n",
	       (unsigned long long)blocks, t - start, (double)blocks / (t - start));
	return 0;
}
