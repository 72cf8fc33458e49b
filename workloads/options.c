/* Strict command-line parsing with getopt_long: every value is checked in full, every option
 * name whole and at most once, nothing positional. One reason per error, which main() prints
 * as one stderr line. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "options.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Unsigned decimal, digits only (no sign, space, or base prefix). *end points past them. */
static int parse_digits(const char *s, unsigned long long *out, const char **end)
{
	unsigned long long v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (ULLONG_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	*end = p;
	return 0;
}

/* --NAME's value s: a whole number from lo to hi, or -1 with the reason in err. */
static int parse_whole(const char *name, const char *s, unsigned long long lo,
		       unsigned long long hi, unsigned long long *out, char *err, size_t errlen)
{
	const char *end;

	if (!s || parse_digits(s, out, &end) < 0 || *end)
		return fail(err, errlen, "--%s '%s': not a number", name, s ? s : "");
	if (*out < lo || *out > hi)
		return fail(err, errlen, "--%s %s: must be between %llu and %llu", name, s, lo, hi);
	return 0;
}

/* parse_whole for an option the workloads keep in an int (its bounds are never negative). */
static int parse_whole_int(const char *name, const char *s, int lo, int hi, int *out,
			   char *err, size_t errlen)
{
	unsigned long long v;

	if (parse_whole(name, s, lo, hi, &v, err, errlen) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int wl_parse_size(const char *s, size_t *out, char *err, size_t errlen)
{
	static const struct { const char *suffix; unsigned shift; } units[] = {
		{ "", 0 }, { "B", 0 }, { "K", 10 }, { "KiB", 10 }, { "M", 20 }, { "MiB", 20 },
	};
	unsigned long long v;
	const char *end;
	size_t i;

	if (!s || parse_digits(s, &v, &end) < 0)
		goto bad;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcasecmp(end, units[i].suffix) == 0)
			break;
	if (i == sizeof(units) / sizeof(units[0]))
		goto bad;
	if (v > (WL_SIZE_MAX >> units[i].shift))
		return fail(err, errlen, "--size '%s': larger than 64 MiB (%llu bytes)", s, WL_SIZE_MAX);
	v <<= units[i].shift;
	if (v < WL_SIZE_MIN)
		return fail(err, errlen, "--size '%s': smaller than %llu bytes", s, WL_SIZE_MIN);
	*out = (size_t)v;
	return 0;
bad:
	return fail(err, errlen, "--size '%s': not a size (bytes, optionally with K, KiB, M or MiB)",
		    s ? s : "");
}

int wl_parse_threads(const char *s, int *out, char *err, size_t errlen)
{
	return parse_whole_int("threads", s, WL_THREADS_MIN, WL_THREADS_MAX, out, err, errlen);
}

int wl_parse_port(const char *s, int allow_zero, int *out, char *err, size_t errlen)
{
	return parse_whole_int("port", s, allow_zero ? 0 : 1, 65535, out, err, errlen);
}

/* Seconds: digits with an optional fraction ("2", "0.5", ".25"), optionally ending in "s". */
int wl_parse_duration(const char *s, double *out, char *err, size_t errlen)
{
	const char *p = s;
	char *end;
	double v;
	int digits = 0;

	if (!s)
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++)
		digits++;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	if (!digits || (*p && strcmp(p, "s") != 0))
		goto bad;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end != p || !isfinite(v))
		goto bad;
	if (v <= 0 || v > WL_DURATION_MAX)
		return fail(err, errlen, "--duration %s: must be more than 0 and at most %.0f seconds",
			    s, WL_DURATION_MAX);
	*out = v;
	return 0;
bad:
	return fail(err, errlen, "--duration '%s': not a number of seconds", s ? s : "");
}

int wl_parse_count(const char *s, uint64_t *out, char *err, size_t errlen)
{
	unsigned long long v;

	if (parse_whole("count", s, 1, WL_COUNT_MAX, &v, err, errlen) < 0)
		return -1;
	*out = v;
	return 0;
}

static const char *const strategy_names[] = {
	[STRAT_TWO_COPY] = "two-copy",
	[STRAT_ONE_COPY] = "one-copy",
	[STRAT_ZERO_COPY] = "zero-copy",
	[STRAT_PER_FIELD] = "per-field",
	[STRAT_SENDFILE] = "sendfile",
	[STRAT_IO_URING] = "io-uring",
	[STRAT_IO_URING_ZC] = "io-uring-zc",
};

const char *wl_strategy_name(enum wl_strategy s)
{
	if ((int)s < 0 || (size_t)s >= sizeof(strategy_names) / sizeof(strategy_names[0]))
		return "none";
	return strategy_names[s];
}

int wl_parse_strategy(const char *s, enum wl_strategy *out, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; s && i < sizeof(strategy_names) / sizeof(strategy_names[0]); i++) {
		if (strcmp(s, strategy_names[i]) == 0) {
			*out = (enum wl_strategy)i;
			return 0;
		}
	}
	return fail(err, errlen, "--strategy '%s': unknown (choose two-copy, one-copy, zero-copy, "
		    "per-field, sendfile, io-uring or io-uring-zc)", s ? s : "");
}

static const char *const receive_names[RECV_NR] = {
	[RECV_COPY] = "copy",
	[RECV_DISCARD] = "discard",
	[RECV_MMAP] = "mmap",
	[RECV_SPLICE] = "splice",
};

const char *wl_receive_name(enum wl_receive r)
{
	return (int)r >= 0 && r < RECV_NR ? receive_names[r] : "none";
}

int wl_parse_receive(const char *s, enum wl_receive *out, char *err, size_t errlen)
{
	for (int i = 0; s && i < RECV_NR; i++) {
		if (strcmp(s, receive_names[i]) == 0) {
			*out = (enum wl_receive)i;
			return 0;
		}
	}
	return fail(err, errlen, "--receive '%s': unknown (choose copy, discard, mmap or splice)",
		    s ? s : "");
}

int wl_parse_mss(const char *s, int *out, char *err, size_t errlen)
{
	return parse_whole_int("mss", s, WL_MSS_MIN, WL_MSS_MAX, out, err, errlen);
}

/* --align: none (malloc's placement, the default) or page (each field starts on a page). */
int wl_parse_align(const char *s, int *page, char *err, size_t errlen)
{
	if (s && (strcmp(s, "none") == 0 || strcmp(s, "page") == 0)) {
		*page = strcmp(s, "page") == 0;
		return 0;
	}
	return fail(err, errlen, "--align '%s': unknown (choose none or page)", s ? s : "");
}

/* Congestion control names are short kernel identifiers (TCP_CA_NAME_MAX = 16). */
int wl_parse_cc(const char *s, const char **out, char *err, size_t errlen)
{
	size_t n = s ? strlen(s) : 0;
	size_t i;

	if (n == 0 || n >= 16)
		goto bad;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			goto bad;
	}
	*out = s;
	return 0;
bad:
	return fail(err, errlen, "--cc '%s': not a congestion control name", s ? s : "");
}

/* An open descriptor above stderr (the driver's pipe, see --ready-fd). */
int wl_parse_ready_fd(const char *s, int *out, char *err, size_t errlen)
{
	unsigned long long v;
	const char *end;

	if (!s || parse_digits(s, &v, &end) < 0 || *end || v < 3 || v > INT_MAX)
		return fail(err, errlen, "--ready-fd '%s': not a descriptor number above 2", s ? s : "");
	if (fcntl((int)v, F_GETFD) < 0)
		return fail(err, errlen, "--ready-fd %s: not an open file descriptor", s);
	*out = (int)v;
	return 0;
}

const char *wl_usage(enum wl_role role)
{
	if (role == WL_SERVER)
		return "usage: netio-server --strategy STRATEGY --size BYTES --threads N\n"
		       "                    --port P [--addr A] [--netns NAME] "
		       "(--duration S | --count MSGS) [--verify] [--cc NAME] [--udp] [--check]\n"
		       "                    [--ready-fd FD] [--mss BYTES] [--align none|page]\n"
		       "  BYTES: 8 .. 64MiB (suffixes K, KiB, M, MiB); N: 1 .. 256; P: 0 = any free port\n"
		       "  STRATEGY, per message of 8 heap fields:\n"
		       "    two-copy     serialize the fields into one buffer, send() it\n"
		       "    one-copy     one sendmsg() with an iovec of the 8 fields\n"
		       "    zero-copy    sendmsg(MSG_ZEROCOPY), a ring of messages, each reused after its completion\n"
		       "    per-field    8 send() calls (over --udp: 7 with MSG_MORE, one datagram)\n"
		       "    io-uring     IORING_OP_SENDMSG with the 8-field iovec, one send in flight\n"
		       "    io-uring-zc  IORING_OP_SENDMSG_ZC with IORING_SEND_ZC_REPORT_USAGE, a ring of\n"
		       "                 messages, each reused after its notification (Linux 6.2+)\n"
		       "  and one that does not send heap fields:\n"
		       "    sendfile     the message serialized into a memfd once (with --verify: each message\n"
		       "                 to fresh file pages) and sent from the page cache with sendfile(2)\n"
		       "  --udp: one datagram per message to A:P on a connected UDP socket, nobody receives\n"
		       "         (no listening, no client); BYTES must fit the path MTU unfragmented;\n"
		       "         not with sendfile. netio-trace's forward transport sends them to\n"
		       "         10.77.1.1, held by the run's own netio-<pid>-<n>-dst namespace; the\n"
		       "         -fwd namespace between drops them by a blackhole route, none arrive\n"
		       "  --check: only check that the strategy can run on this machine (io_uring\n"
		       "           enabled and new enough): exit 0, or 2 with one line\n"
		       "  --ready-fd FD: once listening, the `listening <port>` line goes to the open\n"
		       "                descriptor FD too, which is then closed (a driver's pipe)\n"
		       "  --mss BYTES: TCP_MAXSEG on the listening socket (88 .. 32767)\n"
		       "  --align page: each heap field starts on a page (none: where malloc puts it,\n"
		       "                the default); not with sendfile, which sends no heap fields\n";
	return "usage: netio-client --addr A --port P --threads N --size BYTES [--netns NAME] "
	       "[--verify] [--cc NAME]\n"
	       "                    [--receive copy|discard|mmap|splice] [--mss BYTES]\n"
	       "  --receive: copy     recv() into a 64 KiB buffer (the default)\n"
	       "             discard  recv(MSG_TRUNC): the kernel drops the bytes, none copied\n"
	       "             mmap     TCP_ZEROCOPY_RECEIVE into a mapping of the socket, what cannot\n"
	       "                      be mapped read by recv() (recv_skip_hint)\n"
	       "             splice   splice(2) socket -> pipe -> /dev/null\n"
	       "  --mss BYTES: TCP_MAXSEG before connecting (88 .. 32767): the MSS this end\n"
	       "               advertises, so the sender's segments carry BYTES less TCP options\n";
}

enum opt_id {
	O_STRATEGY, O_SIZE, O_THREADS, O_PORT, O_ADDR, O_NETNS, O_DURATION, O_COUNT,
	O_VERIFY, O_CC, O_UDP, O_CHECK, O_READY_FD, O_RECEIVE, O_MSS, O_ALIGN,
	O_HELP, O_NUM,
};

/* getopt_long's val of option id: above every character, so never '?' or ':' */
#define OPT_VAL(id) (256 + (id))

#define SERVER 1u
#define CLIENT 2u

static const struct {
	struct option opt;
	unsigned roles;
} opt_table[O_NUM] = {
	[O_STRATEGY] = { { "strategy", required_argument, NULL, OPT_VAL(O_STRATEGY) }, SERVER },
	[O_SIZE]     = { { "size", required_argument, NULL, OPT_VAL(O_SIZE) }, SERVER | CLIENT },
	[O_THREADS]  = { { "threads", required_argument, NULL, OPT_VAL(O_THREADS) }, SERVER | CLIENT },
	[O_PORT]     = { { "port", required_argument, NULL, OPT_VAL(O_PORT) }, SERVER | CLIENT },
	[O_ADDR]     = { { "addr", required_argument, NULL, OPT_VAL(O_ADDR) }, SERVER | CLIENT },
	[O_NETNS]    = { { "netns", required_argument, NULL, OPT_VAL(O_NETNS) }, SERVER | CLIENT },
	[O_DURATION] = { { "duration", required_argument, NULL, OPT_VAL(O_DURATION) }, SERVER },
	[O_COUNT]    = { { "count", required_argument, NULL, OPT_VAL(O_COUNT) }, SERVER },
	[O_VERIFY]   = { { "verify", no_argument, NULL, OPT_VAL(O_VERIFY) }, SERVER | CLIENT },
	[O_CC]       = { { "cc", required_argument, NULL, OPT_VAL(O_CC) }, SERVER | CLIENT },
	[O_UDP]      = { { "udp", no_argument, NULL, OPT_VAL(O_UDP) }, SERVER },
	[O_CHECK]    = { { "check", no_argument, NULL, OPT_VAL(O_CHECK) }, SERVER },
	[O_READY_FD] = { { "ready-fd", required_argument, NULL, OPT_VAL(O_READY_FD) }, SERVER },
	[O_RECEIVE]  = { { "receive", required_argument, NULL, OPT_VAL(O_RECEIVE) }, CLIENT },
	[O_MSS]      = { { "mss", required_argument, NULL, OPT_VAL(O_MSS) }, SERVER | CLIENT },
	[O_ALIGN]    = { { "align", required_argument, NULL, OPT_VAL(O_ALIGN) }, SERVER },
	[O_HELP]     = { { "help", no_argument, NULL, OPT_VAL(O_HELP) }, SERVER | CLIENT },
};

/* The long options of role, ended by a zero entry. */
static void role_options(enum wl_role role, struct option out[O_NUM + 1])
{
	unsigned bit = role == WL_SERVER ? SERVER : CLIENT;
	int n = 0;

	for (int id = 0; id < O_NUM; id++)
		if (opt_table[id].roles & bit)
			out[n++] = opt_table[id].opt;
	memset(&out[n], 0, sizeof(out[n]));
}

/* getopt_long also takes a unique prefix (--siz): the workloads want every name whole. */
static int whole_name(const char *token, int id)
{
	const char *name = opt_table[id].opt.name;
	size_t n = strlen(name);

	return strncmp(token, "--", 2) == 0 && strncmp(token + 2, name, n) == 0 &&
	       (token[2 + n] == '\0' || token[2 + n] == '=');
}

/* The one-line reason getopt_long's '?' or ':' stands for, for the token at argv[at]. */
static int getopt_failure(int c, const char *token, const int seen[O_NUM], char *err,
			  size_t errlen)
{
	int id = optopt - OPT_VAL(0);

	if (strncmp(token, "--", 2) != 0 || token[2] == '\0')
		return fail(err, errlen, "unexpected argument '%s'", token);
	if (c == ':' && seen[id])
		return fail(err, errlen, "option --%s given twice", opt_table[id].opt.name);
	if (c == ':')
		return fail(err, errlen, "option --%s needs a value", opt_table[id].opt.name);
	if (id >= 0 && id < O_NUM && whole_name(token, id))
		return fail(err, errlen, "option --%s takes no value", opt_table[id].opt.name);
	return fail(err, errlen, "unknown option '%.*s'", (int)strcspn(token, "="), token);
}

/* The value of option id into o; 0, or -1 with the reason in err. */
static int set_option(enum wl_role role, int id, const char *val, struct wl_options *o,
		      char *err, size_t errlen)
{
	switch (id) {
	case O_STRATEGY:
		return wl_parse_strategy(val, &o->strategy, err, errlen);
	case O_SIZE:
		return wl_parse_size(val, &o->size, err, errlen);
	case O_THREADS:
		return wl_parse_threads(val, &o->threads, err, errlen);
	case O_PORT:
		return wl_parse_port(val, role == WL_SERVER, &o->port, err, errlen);
	case O_ADDR:
		if (!*val)
			return fail(err, errlen, "--addr: empty address");
		o->addr = val;
		return 0;
	case O_NETNS:
		if (!*val || strchr(val, '/') || strcmp(val, ".") == 0 || strcmp(val, "..") == 0)
			return fail(err, errlen, "--netns '%s': not a namespace name", val);
		o->netns = val;
		return 0;
	case O_DURATION:
		return wl_parse_duration(val, &o->duration, err, errlen);
	case O_COUNT:
		return wl_parse_count(val, &o->count, err, errlen);
	case O_VERIFY:
		o->verify = 1;
		return 0;
	case O_CC:
		return wl_parse_cc(val, &o->cc, err, errlen);
	case O_UDP:
		o->udp = 1;
		return 0;
	case O_CHECK:
		o->check = 1;
		return 0;
	case O_READY_FD:
		return wl_parse_ready_fd(val, &o->ready_fd, err, errlen);
	case O_RECEIVE:
		return wl_parse_receive(val, &o->receive, err, errlen);
	case O_MSS:
		return wl_parse_mss(val, &o->mss, err, errlen);
	case O_ALIGN:
		return wl_parse_align(val, &o->align_page, err, errlen);
	}
	return 0;
}

int wl_options_parse(enum wl_role role, int argc, char **argv, struct wl_options *o,
		     char *err, size_t errlen)
{
	struct option longopts[O_NUM + 1];
	int seen[O_NUM] = { 0 };

	memset(o, 0, sizeof(*o));
	o->role = role;
	o->strategy = STRAT_NONE;
	o->ready_fd = -1;
	role_options(role, longopts);
	optind = 0;	/* start over (glibc): the unit tests parse many command lines */
	opterr = 0;	/* the reasons are ours, one line each */
	for (;;) {
		/* "+": stop at the first argument that is not an option, in place */
		int at = optind < 1 ? 1 : optind, c = getopt_long(argc, argv, "+:", longopts, NULL);
		int id = c - OPT_VAL(0);

		if (c == -1) {
			if (at < argc && strcmp(argv[at], "--") == 0)
				return fail(err, errlen, "unexpected argument '--'");
			break;
		}
		if (c == '?' || c == ':')
			return getopt_failure(c, argv[at], seen, err, errlen);
		if (!whole_name(argv[at], id))
			return fail(err, errlen, "unknown option '%.*s'", (int)strcspn(argv[at], "="),
				    argv[at]);
		if (seen[id]++)
			return fail(err, errlen, "option --%s given twice", opt_table[id].opt.name);
		if (id == O_HELP)
			return 1;
		if (set_option(role, id, optarg, o, err, errlen) < 0)
			return -1;
	}
	if (optind < argc)
		return fail(err, errlen, "unexpected argument '%s'", argv[optind]);

	if (role == WL_SERVER && !seen[O_STRATEGY])
		return fail(err, errlen, "missing --strategy");
	if (!seen[O_SIZE])
		return fail(err, errlen, "missing --size");
	if (!seen[O_THREADS])
		return fail(err, errlen, "missing --threads");
	if (!seen[O_PORT])
		return fail(err, errlen, "missing --port");
	if (role == WL_CLIENT && !seen[O_ADDR])
		return fail(err, errlen, "missing --addr");
	if (role == WL_SERVER && seen[O_DURATION] == seen[O_COUNT])
		return fail(err, errlen, "give exactly one of --duration and --count");
	if (o->udp && !seen[O_ADDR])
		return fail(err, errlen, "--udp needs --addr (where the datagrams go)");
	if (o->udp && o->port == 0)
		return fail(err, errlen, "--udp needs a --port between 1 and 65535");
	if (o->udp && o->cc)
		return fail(err, errlen, "--cc is for TCP, not --udp");
	if (o->udp && o->mss)
		return fail(err, errlen, "--mss is for TCP, not --udp");
	if (o->udp && seen[O_READY_FD])
		return fail(err, errlen, "--ready-fd is for TCP: over --udp nothing listens");
	if (o->align_page && o->strategy == STRAT_SENDFILE)
		return fail(err, errlen, "--align is for the heap fields: sendfile sends a file's pages");
	if (o->udp && o->strategy == STRAT_SENDFILE)
		return fail(err, errlen, "--strategy sendfile cannot run over --udp (sendfile has no "
			    "datagram boundaries)");
	return 0;
}
