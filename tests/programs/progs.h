/* What the test programs of tests/programs/ share: strict option parsing, entering a network
 * namespace, the ready line, addresses and the clock. Nothing here comes from workloads/ or
 * common/: these programs check the tracer against counts of their own, so they must not
 * share the code (or the mistakes) of the workloads the tracer was built around.
 *
 * Every program prints one JSON object on stdout with what it counted itself. Exit status: 0
 * done, 1 runtime failure (the JSON still printed, with "error"), 2 bad usage (one line on
 * stderr, nothing on stdout). */
#ifndef NETIO_TEST_PROGS_H
#define NETIO_TEST_PROGS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "program";

static inline void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see the top of tests/programs/%s.c)\n", prog_name);
	exit(2);
}

enum opt_kind { OPT_FLAG, OPT_NUM, OPT_STR };

struct opt {
	const char *name;	/* without the leading "--" */
	enum opt_kind kind;
	void *value;		/* bool *, unsigned long long *, const char ** */
	unsigned long long min, max;	/* OPT_NUM */
	bool required;
	bool seen;
};

/* Entries of an option table, which ends with OPT_END. */
#define OPT_FLAG_(n, p) { .name = (n), .kind = OPT_FLAG, .value = (p) }
#define OPT_STR_(n, p, req) { .name = (n), .kind = OPT_STR, .value = (p), .required = (req) }
#define OPT_NUM_(n, p, lo, hi, req) \
	{ .name = (n), .kind = OPT_NUM, .value = (p), .min = (lo), .max = (hi), .required = (req) }
#define OPT_END { .name = NULL }

/* A decimal number, digits only, within [min, max]. */
static inline unsigned long long parse_num(const char *name, const char *s,
					   unsigned long long min, unsigned long long max)
{
	unsigned long long v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		usage_error("--%s '%s': not a number", name, s);
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (max - (unsigned)(*p - '0')) / 10)
			usage_error("--%s '%s': larger than %llu", name, s, max);
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (*p)
		usage_error("--%s '%s': not a number", name, s);
	if (v < min)
		usage_error("--%s '%s': smaller than %llu", name, s, min);
	return v;
}

static inline struct opt *find_opt(struct opt *opts, const char *name, size_t len)
{
	for (struct opt *o = opts; o->name; o++)
		if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return o;
	return NULL;
}

/* `--name value` or `--name=value`, each option at most once, nothing positional. */
static inline void parse_options(struct opt *opts, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq, *val = NULL;
		struct opt *o;

		if (strncmp(arg, "--", 2) != 0)
			usage_error("unexpected argument '%s'", arg);
		eq = strchr(arg + 2, '=');
		o = find_opt(opts, arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
		if (!o)
			usage_error("unknown option '%s'", arg);
		if (o->seen)
			usage_error("--%s given twice", o->name);
		o->seen = true;
		if (o->kind == OPT_FLAG) {
			if (eq)
				usage_error("--%s takes no value", o->name);
			*(bool *)o->value = true;
			continue;
		}
		val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!val)
			usage_error("--%s needs a value", o->name);
		if (o->kind == OPT_NUM)
			*(unsigned long long *)o->value = parse_num(o->name, val, o->min, o->max);
		else
			*(const char **)o->value = val;
	}
	for (struct opt *o = opts; o->name; o++)
		if (o->required && !o->seen)
			usage_error("--%s is required", o->name);
}

/* --netns NAME: enter /var/run/netns/NAME (as `ip netns` names them) before any socket. */
static inline void enter_netns(const char *name)
{
	char path[256];
	int fd;

	if (!name)
		return;
	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "%s: cannot enter network namespace %s: %s\n", prog_name, name,
			strerror(errno));
		exit(1);
	}
	close(fd);
}

static inline struct sockaddr_in ipv4_addr(const char *addr, unsigned long long port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };

	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		usage_error("--addr '%s': not an IPv4 address", addr);
	return a;
}

/* One line to the ready descriptor (--ready-fd, > 2, or 0: none), e.g. "listening 5301". */
static inline void say_ready(unsigned long long fd, const char *fmt, ...)
{
	char line[128];
	va_list ap;
	int n;

	if (!fd)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	if (write((int)fd, line, (size_t)n) != n) {
		fprintf(stderr, "%s: cannot write to --ready-fd %llu: %s\n", prog_name, fd,
			strerror(errno));
		exit(1);
	}
}

/* Segments a TCP socket retransmitted (a retransmitted zero-copy skb received again is copied
 * again), or -1. */
static inline long long tcp_retrans(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	return ti.tcpi_total_retrans;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "what: strerror(errnum)" in a static buffer, or NULL when what is NULL (no error). */
static inline const char *error_text(const char *what, int errnum)
{
	static char text[192];

	if (!what)
		return NULL;
	snprintf(text, sizeof(text), "%s: %s", what, strerror(errnum));
	return text;
}

/* The exit status, after the error's one line on stderr: 1 on an error, else 0. */
static inline int report_error(const char *what, int errnum)
{
	if (!what)
		return 0;
	fprintf(stderr, "%s: %s\n", prog_name, error_text(what, errnum));
	return 1;
}

/* A JSON string value: the programs' own error messages (strerror and fixed text only). */
static inline void json_str_or_null(const char *key, const char *s, const char *sep)
{
	if (!s) {
		printf("\"%s\":null%s", key, sep);
		return;
	}
	printf("\"%s\":\"", key);
	for (; *s; s++)
		printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	printf("\"%s", sep);
}

#endif
