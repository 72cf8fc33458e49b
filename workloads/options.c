/* Strict command-line parsing: every value is checked in full, every option at most once,
 * nothing positional. One reason per error, which main() prints as one stderr line. */
#include <errno.h>
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
	unsigned long long v;
	const char *end;

	if (!s || parse_digits(s, &v, &end) < 0 || *end)
		return fail(err, errlen, "--threads '%s': not a number", s ? s : "");
	if (v < WL_THREADS_MIN || v > WL_THREADS_MAX)
		return fail(err, errlen, "--threads %s: must be between %d and %d", s,
			    WL_THREADS_MIN, WL_THREADS_MAX);
	*out = (int)v;
	return 0;
}

int wl_parse_port(const char *s, int allow_zero, int *out, char *err, size_t errlen)
{
	unsigned long long v;
	const char *end;

	if (!s || parse_digits(s, &v, &end) < 0 || *end)
		return fail(err, errlen, "--port '%s': not a number", s ? s : "");
	if (v > 65535 || (v == 0 && !allow_zero))
		return fail(err, errlen, "--port %s: must be between %d and 65535", s, allow_zero ? 0 : 1);
	*out = (int)v;
	return 0;
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
	const char *end;

	if (!s || parse_digits(s, &v, &end) < 0 || *end)
		return fail(err, errlen, "--count '%s': not a number", s ? s : "");
	if (v < 1 || v > WL_COUNT_MAX)
		return fail(err, errlen, "--count %s: must be between 1 and %llu", s, WL_COUNT_MAX);
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

const char *wl_usage(enum wl_role role)
{
	if (role == WL_SERVER)
		return "usage: netio-server --strategy STRATEGY --size BYTES --threads N\n"
		       "                    --port P [--addr A] [--netns NAME] "
		       "(--duration S | --count MSGS) [--verify] [--cc NAME] [--udp] [--check]\n"
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
		       "         not with sendfile\n"
		       "  --check: only check that the strategy can run on this machine (io_uring\n"
		       "           enabled and new enough): exit 0, or 2 with one line\n";
	return "usage: netio-client --addr A --port P --threads N --size BYTES [--netns NAME] "
	       "[--verify] [--cc NAME]\n";
}

enum opt_id {
	O_STRATEGY, O_SIZE, O_THREADS, O_PORT, O_ADDR, O_NETNS, O_DURATION, O_COUNT,
	O_VERIFY, O_CC, O_UDP, O_CHECK, O_HELP, O_NUM,
};

static const struct {
	const char *name;
	int has_arg;
	unsigned roles;          /* bit 0 server, bit 1 client */
} opt_table[O_NUM] = {
	[O_STRATEGY] = { "strategy", 1, 1 },
	[O_SIZE]     = { "size", 1, 3 },
	[O_THREADS]  = { "threads", 1, 3 },
	[O_PORT]     = { "port", 1, 3 },
	[O_ADDR]     = { "addr", 1, 3 },
	[O_NETNS]    = { "netns", 1, 3 },
	[O_DURATION] = { "duration", 1, 1 },
	[O_COUNT]    = { "count", 1, 1 },
	[O_VERIFY]   = { "verify", 0, 3 },
	[O_CC]       = { "cc", 1, 3 },
	[O_UDP]      = { "udp", 0, 1 },
	[O_CHECK]    = { "check", 0, 1 },
	[O_HELP]     = { "help", 0, 3 },
};

int wl_options_parse(enum wl_role role, int argc, char **argv, struct wl_options *o,
		     char *err, size_t errlen)
{
	unsigned role_bit = role == WL_SERVER ? 1 : 2;
	int seen[O_NUM] = { 0 };
	int i;

	memset(o, 0, sizeof(*o));
	o->role = role;
	o->strategy = STRAT_NONE;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *val = NULL, *eq;
		size_t namelen;
		int id;

		if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
			return fail(err, errlen, "unexpected argument '%s'", arg);
		name = arg + 2;
		eq = strchr(name, '=');
		namelen = eq ? (size_t)(eq - name) : strlen(name);
		for (id = 0; id < O_NUM; id++)
			if ((opt_table[id].roles & role_bit) && strlen(opt_table[id].name) == namelen &&
			    strncmp(opt_table[id].name, name, namelen) == 0)
				break;
		if (id == O_NUM)
			return fail(err, errlen, "unknown option '%.*s'", (int)(namelen + 2), arg);
		if (seen[id]++)
			return fail(err, errlen, "option --%s given twice", opt_table[id].name);
		if (opt_table[id].has_arg) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return fail(err, errlen, "option --%s needs a value", opt_table[id].name);
		} else if (eq) {
			return fail(err, errlen, "option --%s takes no value", opt_table[id].name);
		}

		switch (id) {
		case O_STRATEGY:
			if (wl_parse_strategy(val, &o->strategy, err, errlen) < 0)
				return -1;
			break;
		case O_SIZE:
			if (wl_parse_size(val, &o->size, err, errlen) < 0)
				return -1;
			break;
		case O_THREADS:
			if (wl_parse_threads(val, &o->threads, err, errlen) < 0)
				return -1;
			break;
		case O_PORT:
			if (wl_parse_port(val, role == WL_SERVER, &o->port, err, errlen) < 0)
				return -1;
			break;
		case O_ADDR:
			if (!*val)
				return fail(err, errlen, "--addr: empty address");
			o->addr = val;
			break;
		case O_NETNS:
			if (!*val || strchr(val, '/') || strcmp(val, ".") == 0 || strcmp(val, "..") == 0)
				return fail(err, errlen, "--netns '%s': not a namespace name", val);
			o->netns = val;
			break;
		case O_DURATION:
			if (wl_parse_duration(val, &o->duration, err, errlen) < 0)
				return -1;
			break;
		case O_COUNT:
			if (wl_parse_count(val, &o->count, err, errlen) < 0)
				return -1;
			break;
		case O_VERIFY:
			o->verify = 1;
			break;
		case O_CC:
			if (wl_parse_cc(val, &o->cc, err, errlen) < 0)
				return -1;
			break;
		case O_UDP:
			o->udp = 1;
			break;
		case O_CHECK:
			o->check = 1;
			break;
		case O_HELP:
			return 1;
		}
	}

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
	if (o->udp && o->strategy == STRAT_SENDFILE)
		return fail(err, errlen, "--strategy sendfile cannot run over --udp (sendfile has no "
			    "datagram boundaries)");
	return 0;
}
