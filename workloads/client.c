/* netio-client: the receiver. One thread and one TCP connection per --threads; each says its
 * connection index, then receives by its --receive strategy (receive.c) until the server
 * closes, checking every byte that reaches user memory against the --verify pattern if asked. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "message.h"
#include "netutil.h"
#include "options.h"
#include "receive.h"
#include "runjson.h"
#include "start.h"
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
	struct wl_receiver r;
	struct wl_verifier v;
	struct wl_tcp_stats tcp;
	char error[256];
};

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
		/* before connect: the MSS this end advertises, which the sender's segments obey */
		if (c->o->mss &&
		    setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &c->o->mss, sizeof(c->o->mss)) < 0) {
			close(fd);
			return conn_fail(c, "--mss %d: %s", c->o->mss, strerror(errno));
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

/* The MSS this end receives (tcpi_rcv_mss), 0 where TCP_INFO says nothing. */
static uint32_t rcv_mss(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	return ti.tcpi_rcv_mss;
}

/* Receives until the server closes: the bytes, their kinds and the span they took. */
static void receive_all(struct conn *c, int fd)
{
	for (;;) {
		long r = wl_receive_once(&c->r);

		if (r > 0) {
			if (!c->bytes)
				c->t_first = wl_now();
			c->bytes += (uint64_t)r;
			continue;
		}
		c->t_end = wl_now();
		if (r == 0)
			break;
		if (errno == EINTR)
			continue;
		conn_fail(c, "%s: %s", c->r.how == RECV_MMAP ? "TCP_ZEROCOPY_RECEIVE" :
			  c->r.how == RECV_SPLICE ? "splice" : "recv", strerror(errno));
		break;
	}
	c->recv_calls = c->r.calls;
	c->r.rcv_mss = rcv_mss(fd);
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	const struct wl_options *o = c->o;
	uint32_t hello = htonl(c->idx);
	char err[200];
	int fd;

	wl_verifier_init(&c->v, o->size, c->idx);
	if (wl_receiver_init(&c->r, o->receive, RECV_BUF, o->verify ? &c->v : NULL, err,
			     sizeof(err)) < 0) {
		conn_fail(c, "%s", err);
		goto out;
	}
	fd = connect_retry(c);
	if (fd < 0)
		goto out;
	if (wl_receiver_attach(&c->r, fd, err, sizeof(err)) < 0) {
		conn_fail(c, "%s", err);
		goto out_close;
	}
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
		conn_fail(c, "sending the hello: %s", strerror(errno));
		goto out_close;
	}
	receive_all(c, fd);
	if (!c->error[0] && c->bytes == 0)
		conn_fail(c, "the server closed the connection without sending anything");
	else if (!c->error[0] && c->bytes % o->size)
		conn_fail(c, "the server closed in the middle of a message (%llu of %zu bytes)",
			  (unsigned long long)(c->bytes % o->size), o->size);
	else if (!c->error[0] && wl_rx_total(&c->r.rx) != c->bytes)
		conn_fail(c, "the receive kinds add up to %llu bytes, not the %llu received",
			  (unsigned long long)wl_rx_total(&c->r.rx), (unsigned long long)c->bytes);
	wl_tcp_stats_read(fd, &c->tcp);
out_close:
	close(fd);
out:
	wl_receiver_free(&c->r);
	return NULL;
}

/* One line on what --verify found wrong. When every wrong byte is a message sent again
 * unchanged, the sides disagree: the server was started without --verify (it fills its
 * messages once), so the bytes are not worth counting one by one. */
static void report_mismatch(const struct conn *conns, int nconns, uint64_t bad, uint64_t bad_msgs)
{
	const struct conn *first = NULL;
	int i;

	for (i = 0; i < nconns; i++) {
		if (!conns[i].v.bad_bytes)
			continue;
		if (!wl_verifier_resends(&conns[i].v))
			break;
		if (!first)
			first = &conns[i];
	}
	if (first && i == nconns)
		fprintf(stderr, PROG ": --verify: the server and this client disagree: the server "
			"sends its messages unchanged (connection %u: message %llu is message 0 again), "
			"as it does when started without --verify; give --verify to both or neither\n",
			first->idx, (unsigned long long)first->v.period);
	else
		fprintf(stderr, PROG ": --verify: %llu bytes in %llu messages differ from the pattern\n",
			(unsigned long long)bad, (unsigned long long)bad_msgs);
}

/* The whole run: the connections' counters summed, the span from the first byte to the
 * last, and the first error. */
struct totals {
	uint64_t bytes, calls, bad, bad_msgs, zc_calls, skip_reads;
	struct wl_rx_bytes rx;
	struct wl_outcome run;
};

/* The counters are the client's own; the span and the errors, wl_outcome's as in the server. */
static void sum_conns(const struct conn *conns, int nconns, const char *global_error,
		      struct totals *t)
{
	memset(t, 0, sizeof(*t));
	wl_outcome_start(&t->run, global_error);
	for (int i = 0; i < nconns; i++) {
		const struct conn *c = &conns[i];

		t->bytes += c->bytes;
		t->calls += c->recv_calls;
		t->zc_calls += c->r.zc_calls;
		t->skip_reads += c->r.skip_reads;
		wl_rx_add(&t->rx, &c->r.rx);
		t->bad += c->v.bad_bytes;
		t->bad_msgs += c->v.bad_messages + (uint64_t)c->v.cur_bad;
		/* a connection that received nothing has no span of its own */
		wl_outcome_add(&t->run, c->bytes ? c->t_first : 0, c->bytes ? c->t_end : 0,
			       c->error);
	}
}

/* verify_errors counts bytes that differ from the pattern; verify_bad_messages the messages
 * holding at least one of them. null without --verify. */
static void put_verify(struct json *w, int verify, uint64_t bad, uint64_t bad_msgs)
{
	if (verify) {
		json_kv_uint(w, "verify_errors", bad);
		json_kv_uint(w, "verify_bad_messages", bad_msgs);
	} else {
		json_kv_null(w, "verify_errors");
		json_kv_null(w, "verify_bad_messages");
	}
}

static void put_conn(struct json *w, const struct wl_options *o, const struct conn *c)
{
	double s = c->bytes && c->t_end > c->t_first ? c->t_end - c->t_first : 0;

	json_begin_object(w);
	json_kv_uint(w, "conn", c->idx);
	wl_json_figures(w, c->bytes, c->bytes / o->size, s);
	json_kv_uint(w, "recv_calls", c->recv_calls);
	wl_rx_json(w, &c->r.rx);
	if (c->r.rcv_mss)
		json_kv_uint(w, "rcv_mss", c->r.rcv_mss);
	else
		json_kv_null(w, "rcv_mss");
	put_verify(w, o->verify, c->v.bad_bytes, c->v.bad_messages + (uint64_t)c->v.cur_bad);
	wl_tcp_stats_json(w, &c->tcp);
	json_kv_string(w, "error", c->error[0] ? c->error : NULL);
	json_end_object(w);
}

/* The process's CPU time, user and system, from its start to here (getrusage): what receiving
 * cost the receiver, whatever the receive strategy. */
static void put_cpu(struct json *w)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0) {
		json_kv_null(w, "cpu_user_s");
		json_kv_null(w, "cpu_sys_s");
		return;
	}
	json_kv_double(w, "cpu_user_s", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
	json_kv_double(w, "cpu_sys_s", ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
}

/* The client's JSON object on stdout (docs/workloads.md), and one line on stderr for an error or
 * a --verify mismatch; the exit status. */
static int print_json(const struct wl_options *o, struct conn *conns, int nconns,
		      const char *global_error)
{
	struct totals t;
	double secs;
	struct json w;

	sum_conns(conns, nconns, global_error, &t);
	secs = wl_outcome_seconds(&t.run);
	wl_json_open(&w, "client");
	put_cpu(&w);
	json_kv_uint(&w, "size", o->size);
	json_kv_int(&w, "threads", o->threads);
	json_kv_bool(&w, "verify", o->verify);
	wl_json_figures(&w, t.bytes, t.bytes / o->size, secs);
	json_kv_uint(&w, "recv_calls", t.calls);
	json_kv_string(&w, "receive", wl_receive_name(o->receive));
	if (o->mss)
		json_kv_int(&w, "mss", o->mss);
	else
		json_kv_null(&w, "mss");
	wl_rx_json(&w, &t.rx);
	json_kv_uint(&w, "zc_receive_calls", t.zc_calls);
	json_kv_uint(&w, "skip_reads", t.skip_reads);
	json_key(&w, "per_thread");
	json_begin_array(&w);
	for (int i = 0; i < nconns; i++)
		put_conn(&w, o, &conns[i]);
	json_end_array(&w);
	put_verify(&w, o->verify, t.bad, t.bad_msgs);
	json_kv_string(&w, "verify_unit", "bytes");
	wl_json_close(&w, PROG, t.run.errors, t.run.first_error);
	if (!t.run.first_error && o->verify && t.bad)
		report_mismatch(conns, nconns, t.bad, t.bad_msgs);
	return t.run.errors || (o->verify && t.bad) ? 1 : 0;
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

	wl_start(WL_CLIENT, argc, argv, &o);
	if (o.receive == RECV_MMAP && !wl_zerocopy_receive_supported(err, sizeof(err))) {
		fprintf(stderr, PROG ": --receive mmap: not on this kernel: %s\n", err);
		return 2;
	}
	if (o.netns && wl_enter_netns(o.netns, err, sizeof(err)) < 0)
		return print_json(&o, NULL, 0, err);
	if (wl_resolve(o.addr, o.port, 0, &ss, &sslen, err, sizeof(err)) < 0)
		return print_json(&o, NULL, 0, err);
	if (o.cc) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0) {
			wl_require_cc(WL_CLIENT, fd, o.cc);
			close(fd);
		}
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
