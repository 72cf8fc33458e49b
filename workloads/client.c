/* netio-client: the receiver. One thread and one TCP connection per --threads; each says its
 * connection index, then recv()s into one buffer until the server closes, checking every
 * byte against the --verify pattern if asked. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "message.h"
#include "netutil.h"
#include "options.h"
#include "tcp_stats.h"

#define PROG "netio-client"

#define CONNECT_RETRY_S  2.0           /* keep retrying ECONNREFUSED this long */
/* One recv() asks for up to this much, whatever the message size (the receiver reads a byte
 * stream). Measured here in interleaved rounds, 64 KiB messages: 64 KiB reads keep veth in its
 * fast mode (8 of 8 runs ~38 Gbit/s, no retransmits) where 1 MiB reads drain the socket, sleep
 * more often and fall into the slow, reordering mode in 3 of 8; loopback is equal. It is also
 * what iperf3's receiver reads with -l 64K, so the bench compares like with like. */
#ifndef RECV_BUF
#define RECV_BUF         (64u << 10)
#endif

struct conn {
	uint32_t idx;
	const struct wl_options *o;
	const struct sockaddr_storage *ss;
	socklen_t sslen;
	double deadline;                /* of connect retries */
	pthread_t thread;

	double t_first, t_end;
	uint64_t bytes, recv_calls;
	struct wl_verifier v;
	struct wl_tcp_stats tcp;
	char error[256];
};

static int conn_fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wl_conn_error(c->error, sizeof(c->error), c->idx, fmt, ap);
	va_end(ap);
	return -1;
}

static int connect_retry(struct conn *c)
{
	char where[80];

	wl_format_addr((const struct sockaddr *)c->ss, where, sizeof(where));
	for (;;) {
		int fd = socket(c->ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return conn_fail(c, "socket: %s", strerror(errno));
		if (wl_tcp_apply_cc(fd, c->o->cc) < 0) {
			close(fd);
			return conn_fail(c, "--cc %s: %s", c->o->cc, strerror(errno));
		}
		if (connect(fd, (const struct sockaddr *)c->ss, c->sslen) == 0)
			return fd;
		if (errno != ECONNREFUSED && errno != EINTR) {
			conn_fail(c, "connect to %s: %s", where, strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
		if (wl_now() > c->deadline)
			return conn_fail(c, "connect to %s: %s", where, strerror(ECONNREFUSED));
		usleep(20000);
	}
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	const struct wl_options *o = c->o;
	size_t bufsize = RECV_BUF;
	uint32_t hello = htonl(c->idx);
	uint8_t *buf;
	int fd;

	wl_verifier_init(&c->v, o->size, c->idx);
	buf = malloc(bufsize);
	if (!buf) {
		conn_fail(c, "cannot allocate %zu bytes", bufsize);
		return NULL;
	}
	memset(buf, 0, bufsize);   /* fault it in before the clock starts */

	fd = connect_retry(c);
	if (fd < 0)
		goto out;
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
		conn_fail(c, "sending the hello: %s", strerror(errno));
		goto out_close;
	}
	for (;;) {
		ssize_t r = recv(fd, buf, bufsize, 0);

		c->recv_calls++;
		if (r > 0) {
			if (!c->bytes)
				c->t_first = wl_now();
			c->bytes += (uint64_t)r;
			if (o->verify)
				wl_verifier_feed(&c->v, buf, (size_t)r);
			continue;
		}
		c->t_end = wl_now();
		if (r == 0)
			break;
		if (errno == EINTR)
			continue;
		conn_fail(c, "recv: %s", strerror(errno));
		break;
	}
	if (!c->error[0] && c->bytes == 0)
		conn_fail(c, "the server closed the connection without sending anything");
	else if (!c->error[0] && c->bytes % o->size)
		conn_fail(c, "the server closed in the middle of a message (%llu of %zu bytes)",
			  (unsigned long long)(c->bytes % o->size), o->size);
	wl_tcp_stats_read(fd, &c->tcp);
out_close:
	close(fd);
out:
	free(buf);
	return NULL;
}

static int print_json(const struct wl_options *o, struct conn *conns, int nconns,
		      const char *global_error)
{
	uint64_t bytes = 0, calls = 0, bad = 0, bad_msgs = 0;
	double t0 = 0, t1 = 0;
	int i, errors = global_error ? 1 : 0;
	const char *first_error = global_error;
	struct jw w;

	for (i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];

		bytes += c->bytes;
		calls += c->recv_calls;
		bad += c->v.bad_bytes;
		bad_msgs += c->v.bad_messages + (uint64_t)c->v.cur_bad;
		if (c->bytes && (!t0 || c->t_first < t0))
			t0 = c->t_first;
		if (c->bytes && c->t_end > t1)
			t1 = c->t_end;
		if (c->error[0]) {
			errors++;
			if (!first_error)
				first_error = c->error;
		}
	}
	jw_init(&w, stdout);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "role", "client");
	jw_u64(&w, "size", o->size);
	jw_int(&w, "threads", o->threads);
	jw_bool(&w, "verify", o->verify);
	jw_u64(&w, "bytes", bytes);
	jw_u64(&w, "messages", bytes / o->size);
	jw_double(&w, "seconds", t1 > t0 ? t1 - t0 : 0);
	jw_double(&w, "throughput_gbps", wl_gbps(bytes, t1 > t0 ? t1 - t0 : 0));
	jw_u64(&w, "recv_calls", calls);
	jw_arr_begin(&w, "per_thread");
	for (i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];
		double s = c->bytes && c->t_end > c->t_first ? c->t_end - c->t_first : 0;

		jw_obj_begin(&w, NULL);
		jw_u64(&w, "conn", c->idx);
		jw_u64(&w, "bytes", c->bytes);
		jw_u64(&w, "messages", c->bytes / o->size);
		jw_double(&w, "seconds", s);
		jw_double(&w, "throughput_gbps", wl_gbps(c->bytes, s));
		jw_u64(&w, "recv_calls", c->recv_calls);
		if (o->verify) {
			jw_u64(&w, "verify_errors", c->v.bad_bytes);
			jw_u64(&w, "verify_bad_messages", c->v.bad_messages + (uint64_t)c->v.cur_bad);
		} else {
			jw_null(&w, "verify_errors");
			jw_null(&w, "verify_bad_messages");
		}
		wl_tcp_stats_json(&w, &c->tcp);
		jw_str(&w, "error", c->error[0] ? c->error : NULL);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	/* verify_errors counts bytes that differ from the pattern; verify_bad_messages the
	 * messages holding at least one of them. null without --verify. */
	if (o->verify) {
		jw_u64(&w, "verify_errors", bad);
		jw_u64(&w, "verify_bad_messages", bad_msgs);
	} else {
		jw_null(&w, "verify_errors");
		jw_null(&w, "verify_bad_messages");
	}
	jw_str(&w, "verify_unit", "bytes");
	jw_int(&w, "errors", errors);
	jw_str(&w, "error", first_error);
	jw_obj_end(&w);
	jw_finish(&w);
	if (first_error)
		fprintf(stderr, PROG ": %s\n", first_error);
	else if (o->verify && bad)
		fprintf(stderr, PROG ": --verify: %llu bytes in %llu messages differ from the pattern\n",
			(unsigned long long)bad, (unsigned long long)bad_msgs);
	return errors || (o->verify && bad) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct wl_options o;
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct conn *conns;
	char err[300];
	double deadline;
	int i, r;

	r = wl_options_parse(WL_CLIENT, argc, argv, &o, err, sizeof(err));
	if (r == 1) {
		fputs(wl_usage(WL_CLIENT), stdout);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, PROG ": %s (try --help)\n", err);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);

	if (o.netns && wl_enter_netns(o.netns, err, sizeof(err)) < 0)
		return print_json(&o, NULL, 0, err);
	if (wl_resolve(o.addr, o.port, 0, &ss, &sslen, err, sizeof(err)) < 0)
		return print_json(&o, NULL, 0, err);
	if (o.cc) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0 && wl_tcp_set_cc(fd, o.cc) < 0) {
			fprintf(stderr, PROG ": --cc %s: not available here (%s)\n", o.cc, strerror(errno));
			return 2;
		}
		if (fd >= 0)
			close(fd);
	}

	conns = calloc((size_t)o.threads, sizeof(*conns));
	if (!conns)
		return print_json(&o, NULL, 0, "out of memory");
	deadline = wl_now() + CONNECT_RETRY_S;
	for (i = 0; i < o.threads; i++) {
		conns[i].idx = (uint32_t)i;
		conns[i].o = &o;
		conns[i].ss = &ss;
		conns[i].sslen = sslen;
		conns[i].deadline = deadline;
		r = pthread_create(&conns[i].thread, NULL, conn_thread, &conns[i]);
		if (r) {
			snprintf(err, sizeof(err), "pthread_create: %s", strerror(r));
			for (int j = 0; j < i; j++)
				pthread_join(conns[j].thread, NULL);
			return print_json(&o, conns, i, err);
		}
	}
	for (i = 0; i < o.threads; i++)
		pthread_join(conns[i].thread, NULL);
	return print_json(&o, conns, o.threads, NULL);
}
