/* What the test programs of tests/programs/ share: strict option parsing (and the options
 * they have in common), entering a network namespace, the ready line, addresses, the clock,
 * the error kept for the JSON line, and that line's first and last members (stream.h: TCP).
 * Nothing here comes from workloads/: these programs check the tracer against counts of
 * their own, so they must not share the code (or the mistakes) of the workloads the tracer was
 * built around. Of common/ they take only the kernel's interface, which is no one's counting
 * (msg_zerocopy.h, uring_zc.h: constants older headers lack, where a completion sits).
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

/* Where a program sends or listens, in which namespace, and for how long. */
struct place {
	const char *addr, *netns;
	unsigned long long port, ready_fd, timeout;
};

/* --addr A --port P of a sender (both required) or of a listener (A 0.0.0.0, as its struct
 * place is initialised, and P 0, any port, unless given); --netns NAME and --timeout S of
 * every program; --ready-fd FD of one that says when it is ready (say_ready). */
#define OPTS_SEND_TO(pl) \
	OPT_STR_("addr", &(pl)->addr, true), OPT_NUM_("port", &(pl)->port, 1, 65535, true)
#define OPTS_LISTEN_ON(pl) \
	OPT_STR_("addr", &(pl)->addr, false), OPT_NUM_("port", &(pl)->port, 0, 65535, false)
#define OPTS_RUN(pl) \
	OPT_STR_("netns", &(pl)->netns, false), OPT_NUM_("timeout", &(pl)->timeout, 1, 3600, false)
#define OPT_READY_FD(pl) OPT_NUM_("ready-fd", &(pl)->ready_fd, 3, 1023, false)

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

/* The start of a main: the program's name, for its messages, and its options (exit 2 on bad
 * usage). */
static inline void prog_start(const char *name, struct opt *opts, int argc, char **argv)
{
	prog_name = name;
	parse_options(opts, argc, argv);
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

/* The address of --addr and --port, and --netns entered. */
static inline struct sockaddr_in place_enter(const struct place *pl)
{
	struct sockaddr_in a = ipv4_addr(pl->addr, pl->port);

	enter_netns(pl->netns);
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

/* A listener's line, to the ready descriptor and to stderr (for a reader of either). */
static inline void say_listening(unsigned long long ready_fd, int port)
{
	say_ready(ready_fd, "listening %d", port);
	fprintf(stderr, "listening %d\n", port);
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

/* What failed (the first step that did, and its errno), for the JSON's "error" and the exit
 * status; what NULL: nothing did. */
struct prog_error {
	const char *what;
	int errnum;
};

/* Keeps what failed with errnum, unless something failed before (the cause); -1, for the
 * caller to return. */
static inline int fail_with(struct prog_error *e, const char *what, int errnum)
{
	if (!e->what) {
		e->what = what;
		e->errnum = errnum;
	}
	return -1;
}

static inline int fail(struct prog_error *e, const char *what)
{
	return fail_with(e, what, errno);
}

/* "what: strerror(errnum)" in a static buffer, or NULL when nothing failed. */
static inline const char *error_text(const struct prog_error *e)
{
	static char text[192];

	if (!e->what)
		return NULL;
	snprintf(text, sizeof(text), "%s: %s", e->what, strerror(e->errnum));
	return text;
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

/* The JSON line's first member; the program's own members follow, each ending in ','. */
static inline void json_begin(void)
{
	printf("{\"program\":\"%s\",", prog_name);
}

/* The JSON line's last members, "seconds" and "error", and the exit status: 1 after the
 * error's one line on stderr, else 0. */
static inline int json_end(double seconds, const struct prog_error *e)
{
	printf("\"seconds\":%.6f,", seconds);
	json_str_or_null("error", error_text(e), "}\n");
	if (!e->what)
		return 0;
	fprintf(stderr, "%s: %s\n", prog_name, error_text(e));
	return 1;
}

/* Exit 1 before any run: no JSON (nothing was counted). */
static inline void out_of_memory(void)
{
	fprintf(stderr, "%s: out of memory\n", prog_name);
	exit(1);
}

/* n bytes of c, from the start of a page (zero-copy sends pin the buffer's pages). */
static inline char *page_buffer(unsigned long long n, char c)
{
	char *buf = aligned_alloc(4096, (n + 4095) / 4096 * 4096);

	if (!buf)
		out_of_memory();
	memset(buf, c, n);
	return buf;
}

#endif
