/* Command-line parsing for netio-server and netio-client (see docs/workloads.md). */
#ifndef NETIO_OPTIONS_H
#define NETIO_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define WL_SIZE_MIN      8ULL
#define WL_SIZE_MAX      (64ULL << 20)
#define WL_THREADS_MIN   1
#define WL_THREADS_MAX   256
#define WL_DURATION_MAX  86400.0
#define WL_COUNT_MAX     (1ULL << 40)

enum wl_role { WL_SERVER, WL_CLIENT };

enum wl_strategy {
	STRAT_TWO_COPY,
	STRAT_ONE_COPY,
	STRAT_ZERO_COPY,
	STRAT_PER_FIELD,
	STRAT_SENDFILE,
	STRAT_IO_URING,
	STRAT_IO_URING_ZC,
	STRAT_NONE = -1,
};

/* How the client receives (--receive; receive.c). */
enum wl_receive {
	RECV_COPY,		/* recv() into a buffer: one copy per byte */
	RECV_DISCARD,		/* recv(MSG_TRUNC): TCP drops the bytes, nothing copied */
	RECV_MMAP,		/* TCP_ZEROCOPY_RECEIVE: pages mapped, leftovers copied */
	RECV_SPLICE,		/* splice socket -> pipe -> /dev/null */
	RECV_NR,
};

/* TCP_MAXSEG's range (the kernel's TCP_MIN_MSS and MAX_TCP_WINDOW) */
#define WL_MSS_MIN       88
#define WL_MSS_MAX       32767

struct wl_options {
	enum wl_role role;
	enum wl_strategy strategy;
	size_t size;
	int threads;
	int port;               /* server: 0 = any free port (printed on stderr) */
	const char *addr;       /* server: NULL = all addresses */
	const char *netns;      /* NULL = stay in the current namespace */
	double duration;        /* seconds; 0 = not given */
	uint64_t count;         /* messages per connection; 0 = not given */
	int verify;
	const char *cc;         /* NULL = cubic if available, else the system default */
	int udp;                /* server: datagrams to --addr:--port, no receiver (--udp) */
	int check;              /* server: only check that the strategy can run here (--check) */
	int ready_fd;           /* server: also say `listening <port>` there, then close it; -1 */
	enum wl_receive receive;	/* client: --receive, RECV_COPY by default */
	int mss;                /* --mss: TCP_MAXSEG before connect / listen; 0 = not given */
	int align_page;         /* server: --align page, every field starts on a page; 0 = malloc's */
};

/* The parsers below return 0 on success, -1 with a one-line reason in err. */
int wl_parse_size(const char *s, size_t *out, char *err, size_t errlen);
int wl_parse_threads(const char *s, int *out, char *err, size_t errlen);
int wl_parse_port(const char *s, int allow_zero, int *out, char *err, size_t errlen);
int wl_parse_duration(const char *s, double *out, char *err, size_t errlen);
int wl_parse_count(const char *s, uint64_t *out, char *err, size_t errlen);
int wl_parse_strategy(const char *s, enum wl_strategy *out, char *err, size_t errlen);
int wl_parse_cc(const char *s, const char **out, char *err, size_t errlen);
int wl_parse_ready_fd(const char *s, int *out, char *err, size_t errlen);
int wl_parse_receive(const char *s, enum wl_receive *out, char *err, size_t errlen);
int wl_parse_mss(const char *s, int *out, char *err, size_t errlen);
int wl_parse_align(const char *s, int *page, char *err, size_t errlen);

const char *wl_strategy_name(enum wl_strategy s);
const char *wl_receive_name(enum wl_receive r);

/* Parse argv for role. Returns 0 ok, 1 if --help was asked (usage printed to stdout),
 * -1 on bad usage (err holds the reason, without the program name). */
int wl_options_parse(enum wl_role role, int argc, char **argv, struct wl_options *o,
		     char *err, size_t errlen);

const char *wl_usage(enum wl_role role);

#endif
