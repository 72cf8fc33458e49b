/* The C unit tests' one assertion macro. CHECK(cond, fmt, ...) counts a pass, or prints the
 * failure with its place, its condition and the message; check_report(name) prints
 * "name: N passed, N failed" and returns the exit status (non-zero on any failure). */
#ifndef NETIO_TESTS_CHECK_H
#define NETIO_TESTS_CHECK_H
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (cond) {                                                           \
			check_passed++;                                               \
		} else {                                                              \
			check_failed++;                                               \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
			printf(__VA_ARGS__);                                          \
			printf("\n");                                                 \
		}                                                                     \
	} while (0)

static inline int check_report(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif
