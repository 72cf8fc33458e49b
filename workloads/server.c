/* netio-server: the sender. One thread and one TCP connection per --threads (with --udp, one
 * connected UDP socket sending a datagram per message to a path where nobody receives), each
 * sending messages with the chosen copy strategy (see docs/workloads.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "filesend.h"
#include "json.h"
#include "message.h"
#include "netutil.h"
#include "options.h"
#include "runjson.h"
#include "start.h"
#include "tcp_stats.h"
#include "uring.h"
#include "zerocopy.h"

#define PROG "netio-server"

/* Zero-copy ring: this many bytes of messages per connection (at least 2 messages). Measured
 * here (64 KiB, loopback and veth): a ring that stays in cache costs less CPU per byte than
 * one that covers the whole send buffer (256 KiB: 0.76 s/GB, 16 MiB: 0.93 s/GB on loopback),
 * and completions come back fast enough that the sender does not stall on it. */
#define ZC_RING_BYTES    (256u << 10)
#define ZC_RING_MIN      2u
#define ZC_RING_MAX      1024u
#define ZC_DRAIN_EVERY   32u          /* sends between two error-queue drains */
#define ZC_STALL_S       10.0         /* no completion for this long while waiting: fail */
#define ZC_ENOBUFS_S     5.0          /* ENOBUFS without any progress for this long: fail */
#define ZC_FINAL_WAIT_S  5.0          /* at the end, wait this long for missing completions */
#define HELLO_TIMEOUT_S  10
#define UDP_IP_HEADERS   28u          /* IPv4 + UDP headers of a datagram */

struct conn {
	uint32_t idx;
	int fd;
	const struct wl_options *o;
	pthread_t thread;

	/* buffers */
	struct wl_message msg;          /* two-copy, one-copy, per-field, io-uring */
	struct iovec iov[WL_FIELDS];
	uint8_t *flat;                  /* two-copy: the serialization buffer */
	struct wl_message *ring;        /* zero-copy, io-uring-zc: ring of messages */
	struct iovec (*ring_iov)[WL_FIELDS];
	uint32_t nring, slot;           /* slot: the next message's */
	struct wl_zc_tracker zc;
	int zc_ready;
	struct wl_filemsg file;         /* sendfile */
	int file_ready;
	struct wl_uring uring;          /* io-uring, io-uring-zc */

	/* results */
	double t_start, t_end;
	uint64_t bytes, messages, send_calls, partial_retries, enobufs_retries;
	double enobufs_since;           /* start of the current ENOBUFS streak, 0 if none */
	struct wl_tcp_stats tcp;
	char error[256];
};

static size_t g_page_size;
static pthread_barrier_t g_barrier;
static atomic_int g_stop;
static int g_running;                   /* threads still sending, under g_lock */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done;           /* signalled when g_running drops to 0 */

/* ---- setup ---------------------------------------------------------------- */

/* Strategies whose buffers the kernel may still hold after the send returns: a ring of
 * messages, each reused only after its completion. */
static int uses_ring(enum wl_strategy s)
{
	return s == STRAT_ZERO_COPY || s == STRAT_IO_URING_ZC;
}

static int is_uring(enum wl_strategy s)
{
	return s == STRAT_IO_URING || s == STRAT_IO_URING_ZC;
}

static int conn_setup_file(struct conn *c)
{
	if (wl_filemsg_init(&c->file, c->o->size, c->idx, c->o->verify) < 0)
		return conn_fail(c, "sendfile: cannot prepare the message file: %s", strerror(errno));
	c->file_ready = 1;
	return 0;
}

static int conn_setup_uring(struct conn *c)
{
	int zc = c->o->strategy == STRAT_IO_URING_ZC;

	if (wl_uring_init(&c->uring, zc, zc ? c->zc.cap : 0) < 0)
		return conn_fail(c, "io_uring: %s", strerror(errno));
	return 0;
}

static int conn_setup_one(struct conn *c)
{
	const struct wl_options *o = c->o;

	if (wl_message_init_aligned(&c->msg, o->size, o->align_page ? g_page_size : 0) < 0)
		return conn_fail(c, "cannot allocate a %zu-byte message", o->size);
	wl_message_fill(&c->msg, c->idx, 0);
	wl_message_iov(&c->msg, c->iov);
	if (o->strategy == STRAT_TWO_COPY) {
		c->flat = malloc(o->size);
		if (!c->flat)
			return conn_fail(c, "cannot allocate %zu bytes", o->size);
		/* Touch it now so page faults are not measured. */
		wl_message_serialize(&c->msg, c->flat);
	}
	return 0;
}

static int conn_setup(struct conn *c)
{
	const struct wl_options *o = c->o;
	uint32_t i;

	if (o->strategy == STRAT_SENDFILE)
		return conn_setup_file(c);
	if (!uses_ring(o->strategy)) {
		if (conn_setup_one(c) < 0)
			return -1;
		return is_uring(o->strategy) ? conn_setup_uring(c) : 0;
	}

	c->nring = (uint32_t)(ZC_RING_BYTES / o->size);   /* size >= 8: fits */
	if (c->nring < ZC_RING_MIN)
		c->nring = ZC_RING_MIN;
	if (c->nring > ZC_RING_MAX)
		c->nring = ZC_RING_MAX;
	c->ring = calloc(c->nring, sizeof(*c->ring));
	c->ring_iov = calloc(c->nring, sizeof(*c->ring_iov));
	if (!c->ring || !c->ring_iov)
		return conn_fail(c, "cannot allocate the zero-copy ring");
	for (i = 0; i < c->nring; i++) {
		/* a zero-copy datagram's fields start on pages: see udp_frags_fit() */
		if (wl_message_init_aligned(&c->ring[i], o->size,
					    o->udp || o->align_page ? g_page_size : 0) < 0)
			return conn_fail(c, "cannot allocate %u messages of %zu bytes", c->nring, o->size);
		wl_message_fill(&c->ring[i], c->idx, i);
		wl_message_iov(&c->ring[i], c->ring_iov[i]);
	}
	if (wl_zc_init(&c->zc, c->nring, c->nring * 4 + 256, 0) < 0)
		return conn_fail(c, "cannot allocate the zero-copy tracker");
	c->zc_ready = 1;
	return is_uring(o->strategy) ? conn_setup_uring(c) : 0;
}

static void conn_free(struct conn *c)
{
	uint32_t i;

	wl_message_free(&c->msg);
	free(c->flat);
	if (c->ring)
		for (i = 0; i < c->nring; i++)
			wl_message_free(&c->ring[i]);
	free(c->ring);
	free(c->ring_iov);
	if (c->zc_ready)
		wl_zc_free(&c->zc);
	if (c->file_ready)
		wl_filemsg_free(&c->file);
	wl_uring_free(&c->uring);
	c->file_ready = 0;
	c->flat = NULL;
	c->ring = NULL;
	c->ring_iov = NULL;
	c->zc_ready = 0;
}

/* ---- sending -------------------------------------------------------------- */

/* send() until len bytes are gone (flags: MSG_MORE for a UDP datagram built by several). */
static int send_buf(struct conn *c, const uint8_t *p, size_t len, int flags)
{
	while (len) {
		ssize_t r = send(c->fd, p, len, MSG_NOSIGNAL | flags);

		c->send_calls++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return conn_fail(c, "send: %s", strerror(errno));
		}
		c->bytes += (uint64_t)r;
		p += r;
		len -= (size_t)r;
		if (len)
			c->partial_retries++;
	}
	return 0;
}

/* Waits up to timeout_ms for completions: MSG_ZEROCOPY's on the error queue, io_uring's
 * notifications on the ring. The number read, or -1 with errno. */
static int zc_poll(struct conn *c, int timeout_ms)
{
	if (c->o->strategy == STRAT_IO_URING_ZC)
		return wl_uring_reap(&c->uring, &c->zc, timeout_ms);
	return wl_zc_wait(c->fd, &c->zc, timeout_ms);
}

/* Waits for completions until slot is free and the id window has room. */
static int zc_wait_for(struct conn *c, int slot)
{
	double stall = 0;

	while ((slot >= 0 && wl_zc_slot_busy(&c->zc, (uint32_t)slot)) || wl_zc_window_full(&c->zc)) {
		int r = zc_poll(c, 100);

		if (r < 0)
			return conn_fail(c, "zero-copy: waiting for completions: %s", strerror(errno));
		if (r > 0) {
			stall = 0;
		} else if (!stall) {
			stall = wl_now() + ZC_STALL_S;
		} else if (wl_now() > stall) {
			return conn_fail(c, "zero-copy: no completion for %.0f s with %u sends in flight",
					 ZC_STALL_S, wl_zc_inflight(&c->zc));
		}
	}
	return 0;
}

/* ENOBUFS from a MSG_ZEROCOPY send: the socket's optmem is full of notifications that are
 * in flight or unread. Drain and let the caller retry. */
static int zc_enobufs(struct conn *c)
{
	double now = wl_now();
	int r;

	c->enobufs_retries++;
	if (!c->enobufs_since)
		c->enobufs_since = now;
	else if (now - c->enobufs_since > ZC_ENOBUFS_S)
		return conn_fail(c, "zero-copy: ENOBUFS for %.0f s with %u sends in flight "
				 "(net.core.optmem_max too small?)", ZC_ENOBUFS_S,
				 wl_zc_inflight(&c->zc));
	if (wl_zc_inflight(&c->zc))
		r = wl_zc_wait(c->fd, &c->zc, 10);
	else if ((r = wl_zc_drain(c->fd, &c->zc)) == 0)
		usleep(1000);
	if (r < 0)
		return conn_fail(c, "zero-copy: error queue: %s", strerror(errno));
	return 0;
}

/* One sendmsg() per call of iov (8 entries) until all of it is gone; zc_slot >= 0 sends with
 * MSG_ZEROCOPY from that ring slot. */
static int send_iov(struct conn *c, const struct iovec *base, size_t len, int zc_slot)
{
	struct iovec scratch[WL_FIELDS];
	struct msghdr mh = { .msg_iov = (struct iovec *)base, .msg_iovlen = WL_FIELDS };
	int flags = MSG_NOSIGNAL | (zc_slot >= 0 ? MSG_ZEROCOPY : 0);
	int in_scratch = 0;

	while (len) {
		ssize_t r;

		if (zc_slot >= 0 && wl_zc_window_full(&c->zc) && zc_wait_for(c, -1) < 0)
			return -1;
		r = sendmsg(c->fd, &mh, flags);
		c->send_calls++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS && zc_slot >= 0) {
				if (zc_enobufs(c) < 0)
					return -1;
				continue;
			}
			return conn_fail(c, "sendmsg: %s", strerror(errno));
		}
		if (zc_slot >= 0) {
			wl_zc_sent(&c->zc, (uint32_t)zc_slot);
			c->enobufs_since = 0;
		}
		c->bytes += (uint64_t)r;
		len -= (size_t)r;
		if (!len)
			break;
		c->partial_retries++;
		/* Skip the r bytes sent, in a copy: base is the message's own iovec. */
		if (!in_scratch) {
			memcpy(scratch, base, sizeof(scratch));
			mh.msg_iov = scratch;
			in_scratch = 1;
		}
		wl_iov_advance(&mh.msg_iov, &mh.msg_iovlen, (size_t)r);
	}
	return 0;
}

/* sendfile() from off until len bytes are gone. */
static int send_file(struct conn *c, off_t off, size_t len)
{
	while (len) {
		ssize_t r = sendfile(c->fd, c->file.fd, &off, len);

		c->send_calls++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return conn_fail(c, "sendfile: %s", strerror(errno));
		}
		if (r == 0)
			return conn_fail(c, "sendfile: the message file ended early");
		c->bytes += (uint64_t)r;
		len -= (size_t)r;
		if (len)
			c->partial_retries++;
	}
	return 0;
}

/* One IORING_OP_SENDMSG(_ZC) at a time until len bytes of the 8-field iovec base are gone;
 * zc_slot >= 0: zero-copy from that ring slot, each send an id of the tracker. */
static int uring_send_iov(struct conn *c, const struct iovec *base, size_t len, int zc_slot)
{
	struct iovec scratch[WL_FIELDS], *iov = scratch;
	size_t cnt = WL_FIELDS;

	memcpy(scratch, base, sizeof(scratch));
	while (len) {
		int res, more;

		if (zc_slot >= 0 && wl_zc_window_full(&c->zc) && zc_wait_for(c, -1) < 0)
			return -1;
		if (wl_uring_sendmsg(&c->uring, c->fd, iov, cnt, &c->zc, &res, &more) < 0)
			return conn_fail(c, "io_uring: %s", strerror(errno));
		c->send_calls++;
		if (more)
			wl_zc_sent(&c->zc, (uint32_t)zc_slot);
		if (res < 0)
			return conn_fail(c, "io_uring sendmsg: %s", strerror(-res));
		c->bytes += (uint64_t)res;
		len -= (size_t)res;
		if (len) {
			c->partial_retries++;
			wl_iov_advance(&iov, &cnt, (size_t)res);
		}
	}
	return 0;
}

/* ---- the strategies: one message each, in the loop they share -------------- */

/* Message n written into m, only with --verify: without it every message is message 0,
 * written once at setup, and the measured loop writes nothing. */
static inline void fill(struct conn *c, struct wl_message *m, uint64_t n)
{
	if (c->o->verify)
		wl_message_fill(m, c->idx, n);
}

static int send_two_copy(struct conn *c, uint64_t n)
{
	fill(c, &c->msg, n);
	wl_message_serialize(&c->msg, c->flat);
	return send_buf(c, c->flat, c->o->size, 0);
}

static int send_one_copy(struct conn *c, uint64_t n)
{
	fill(c, &c->msg, n);
	return send_iov(c, c->iov, c->o->size, -1);
}

static int send_per_field(struct conn *c, uint64_t n)
{
	/* over UDP the 8 sends build one datagram: MSG_MORE on all but the last */
	int more = c->o->udp ? MSG_MORE : 0;

	fill(c, &c->msg, n);
	for (int i = 0; i < WL_FIELDS; i++)
		if (send_buf(c, c->msg.field[i], c->msg.len[i], i < WL_FIELDS - 1 ? more : 0) < 0)
			return -1;
	return 0;
}

static int send_sendfile(struct conn *c, uint64_t n)
{
	off_t off;

	if (wl_filemsg_prepare(&c->file, c->idx, n, &off) < 0)
		return conn_fail(c, "sendfile: writing message %llu to the file: %s",
				 (unsigned long long)n, strerror(errno));
	return send_file(c, off, c->o->size);
}

static int send_io_uring(struct conn *c, uint64_t n)
{
	fill(c, &c->msg, n);
	return uring_send_iov(c, c->iov, c->o->size, -1);
}

/* The ring slot message n goes out from, once the kernel no longer holds the slot's previous
 * message (its completion came), with message n written into it; -1 if waiting failed. */
static inline int ring_slot(struct conn *c, uint64_t n)
{
	uint32_t slot = c->slot;

	if (wl_zc_slot_busy(&c->zc, slot) && zc_wait_for(c, (int)slot) < 0)
		return -1;
	fill(c, &c->ring[slot], n);
	if (++c->slot == c->nring)
		c->slot = 0;
	return (int)slot;
}

static int send_zero_copy(struct conn *c, uint64_t n)
{
	int slot = ring_slot(c, n);

	return slot < 0 ? -1 : send_iov(c, c->ring_iov[slot], c->o->size, slot);
}

static int send_io_uring_zc(struct conn *c, uint64_t n)
{
	int slot = ring_slot(c, n);

	return slot < 0 ? -1 : uring_send_iov(c, c->ring_iov[slot], c->o->size, slot);
}

static inline int keep_going(const struct wl_options *o, uint64_t n)
{
	if (o->count)
		return n < o->count;
	return !atomic_load_explicit(&g_stop, memory_order_relaxed);
}

/* The loop every strategy runs: message n by send_one() until the duration or --count ends,
 * counted once all of it is sent; drain_every > 0 reads MSG_ZEROCOPY's error queue after
 * every drain_every messages. Always inlined with a constant send_one, so each strategy's
 * loop is as tight as one written out: no call through a pointer per message. */
static inline __attribute__((always_inline)) int
send_messages(struct conn *c, int (*send_one)(struct conn *, uint64_t), uint32_t drain_every)
{
	uint32_t since_drain = 0;
	uint64_t n;

	for (n = 0; keep_going(c->o, n); n++) {
		if (send_one(c, n) < 0)
			return -1;
		c->messages++;
		if (drain_every && ++since_drain >= drain_every) {
			since_drain = 0;
			if (wl_zc_drain(c->fd, &c->zc) < 0)
				return conn_fail(c, "zero-copy: error queue: %s", strerror(errno));
		}
	}
	return 0;
}

/* One case per strategy on purpose: each inlines its own copy of the loop (see above). */
static void run_strategy(struct conn *c)
{
	switch (c->o->strategy) {
	case STRAT_TWO_COPY:
		send_messages(c, send_two_copy, 0);
		break;
	case STRAT_ONE_COPY:
		send_messages(c, send_one_copy, 0);
		break;
	case STRAT_PER_FIELD:
		send_messages(c, send_per_field, 0);
		break;
	case STRAT_ZERO_COPY:
		send_messages(c, send_zero_copy, ZC_DRAIN_EVERY);
		break;
	case STRAT_SENDFILE:
		send_messages(c, send_sendfile, 0);
		break;
	case STRAT_IO_URING:
		send_messages(c, send_io_uring, 0);
		break;
	case STRAT_IO_URING_ZC:
		send_messages(c, send_io_uring_zc, 0);
		break;
	default:
		break;
	}
}

/* Every notification, or fail loudly after a bounded wait. */
static void zc_finish(struct conn *c, double max_wait)
{
	double deadline = wl_now() + max_wait;

	while (wl_zc_inflight(&c->zc)) {
		double left = deadline - wl_now();
		int r;

		if (left <= 0)
			break;
		r = zc_poll(c, (int)(left * 1000) + 1);
		if (r < 0) {
			conn_fail(c, "zero-copy: waiting for completions: %s", strerror(errno));
			break;
		}
	}
	if (wl_zc_inflight(&c->zc))
		conn_fail(c, "zero-copy: %u of %llu completions missing after %.1f s",
			  wl_zc_inflight(&c->zc), (unsigned long long)c->zc.c.sends, max_wait);
	else if (c->zc.c.unexpected)
		conn_fail(c, "zero-copy: %llu completions for sends not in flight",
			  (unsigned long long)c->zc.c.unexpected);
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	int ok = conn_setup(c) == 0;

	pthread_barrier_wait(&g_barrier);
	c->t_start = wl_now();
	if (ok)
		run_strategy(c);
	c->t_end = wl_now();
	if (c->zc_ready)
		zc_finish(c, c->error[0] ? 0.5 : ZC_FINAL_WAIT_S);
	if (!c->o->udp) {
		wl_tcp_stats_read(c->fd, &c->tcp);
		shutdown(c->fd, SHUT_WR);
	}
	close(c->fd);
	c->fd = -1;
	conn_free(c);
	pthread_mutex_lock(&g_lock);
	if (--g_running == 0)
		pthread_cond_signal(&g_done);
	pthread_mutex_unlock(&g_lock);
	return NULL;
}

/* ---- output --------------------------------------------------------------- */

/* The sender's own count of its zero-copy sends (the tracer's, from the kernel's side, is
 * user/stats.c's "zerocopy": alike in shape, other fields). */
static void put_zc(struct json *w, const struct wl_zc_counters *z)
{
	json_key(w, "zerocopy");
	json_begin_object(w);
	json_kv_uint(w, "sends", z->sends);
	json_kv_uint(w, "completions", z->completions);
	json_kv_uint(w, "copied", z->copied);
	json_kv_uint(w, "notifications", z->notifications);
	json_kv_uint(w, "unexpected", z->unexpected);
	json_end_object(w);
}

/* The steady-state window: bytes sent between the end of the warm-up (connection
 * setup, slow start) and the deadline, read from the senders' counters at both marks. */
struct steady {
	double warmup_s, seconds;
	uint64_t bytes;
};

#define WARMUP_SHARE 0.2	/* of the duration, */
#define WARMUP_MAX_S 1.0	/* at most */

static uint64_t bytes_so_far(const struct conn *conns, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += __atomic_load_n(&conns[i].bytes, __ATOMIC_RELAXED);
	return sum;
}

static struct timespec after(const struct timespec *t0, double s)
{
	struct timespec t = *t0;

	t.tv_sec += (time_t)s;
	t.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* Sleep until when (or until every thread has given up), without waking in between: a
 * periodic wakeup here moves the senders between CPUs. 0 at the deadline, -1 if they gave up. */
static int sleep_until(const struct timespec *when)
{
	int gave_up;

	pthread_mutex_lock(&g_lock);
	while (g_running > 0 && pthread_cond_timedwait(&g_done, &g_lock, when) != ETIMEDOUT)
		;
	gave_up = g_running == 0;
	pthread_mutex_unlock(&g_lock);
	return gave_up ? -1 : 0;
}

/* Let the senders run for the duration, marking the steady-state window; then stop them. */
static void run_for(const struct wl_options *o, const struct conn *conns, struct steady *st)
{
	struct timespec start, warm, end;
	double w = o->duration * WARMUP_SHARE;
	uint64_t b0;

	st->warmup_s = w < WARMUP_MAX_S ? w : WARMUP_MAX_S;
	clock_gettime(CLOCK_MONOTONIC, &start);
	warm = after(&start, st->warmup_s);
	end = after(&start, o->duration);
	if (sleep_until(&warm) == 0) {
		b0 = bytes_so_far(conns, o->threads);
		double t0 = wl_now();
		if (sleep_until(&end) == 0) {
			st->bytes = bytes_so_far(conns, o->threads) - b0;
			st->seconds = wl_now() - t0;
		}
	}
	atomic_store(&g_stop, 1);
}

/* The whole run: the connections' counters summed, the TCP figures merged, the span from
 * the first start to the last end, and the first error. */
struct totals {
	uint64_t bytes, messages, calls, partial, enobufs;
	struct wl_zc_counters zc;
	struct wl_tcp_stats tcp;
	struct wl_outcome run;
};

static void add_tcp(struct wl_tcp_stats *tt, const struct wl_tcp_stats *t, int *ntcp,
		    uint64_t *rtt_sum)
{
	if (!t->valid)
		return;
	if (!(*ntcp)++)
		memcpy(tt->cc, t->cc, sizeof(tt->cc));
	else if (strcmp(tt->cc, t->cc) != 0)
		strcpy(tt->cc, "mixed");
	tt->retrans += t->retrans;
	tt->segs_out += t->segs_out;
	tt->bytes_retrans += t->bytes_retrans;
	*rtt_sum += t->rtt_us;
	tt->valid = 1;
}

/* The counters are the server's own; the span and the errors, wl_outcome's as in the client. */
static void sum_conns(const struct conn *conns, int nconns, const char *global_error,
		      struct totals *t)
{
	uint64_t rtt_sum = 0;
	int ntcp = 0;

	memset(t, 0, sizeof(*t));
	wl_outcome_start(&t->run, global_error);
	for (int i = 0; i < nconns; i++) {
		const struct conn *c = &conns[i];

		t->bytes += c->bytes;
		t->messages += c->messages;
		t->calls += c->send_calls;
		t->partial += c->partial_retries;
		t->enobufs += c->enobufs_retries;
		t->zc.sends += c->zc.c.sends;
		t->zc.completions += c->zc.c.completions;
		t->zc.copied += c->zc.c.copied;
		t->zc.notifications += c->zc.c.notifications;
		t->zc.unexpected += c->zc.c.unexpected;
		add_tcp(&t->tcp, &c->tcp, &ntcp, &rtt_sum);
		wl_outcome_add(&t->run, c->t_start, c->t_end, c->error);
	}
	if (ntcp)
		t->tcp.rtt_us = (uint32_t)(rtt_sum / (uint64_t)ntcp);
}

static void put_conn(struct json *w, const struct conn *c)
{
	double s = c->t_end > c->t_start ? c->t_end - c->t_start : 0;

	json_begin_object(w);
	json_kv_uint(w, "conn", c->idx);
	wl_json_figures(w, c->bytes, c->messages, s);
	json_kv_uint(w, "send_calls", c->send_calls);
	json_kv_uint(w, "partial_retries", c->partial_retries);
	json_kv_uint(w, "enobufs_retries", c->enobufs_retries);
	wl_tcp_stats_json(w, &c->tcp);
	put_zc(w, &c->zc.c);
	json_kv_string(w, "error", c->error[0] ? c->error : NULL);
	json_end_object(w);
}

static void put_steady(struct json *w, const struct steady *steady)
{
	if (!steady || steady->seconds <= 0)
		return;
	json_key(w, "steady");
	json_begin_object(w);
	json_kv_double(w, "warmup_s", steady->warmup_s);
	json_kv_uint(w, "bytes", steady->bytes);
	json_kv_double(w, "seconds", steady->seconds);
	json_end_object(w);
}

/* The server's JSON object on stdout (docs/workloads.md), and its first error on stderr; the
 * exit status. */
static int print_json(const struct wl_options *o, struct conn *conns, int nconns, int port,
		      const char *global_error, const struct steady *steady)
{
	struct totals t;
	double secs;
	struct json w;

	sum_conns(conns, nconns, global_error, &t);
	secs = wl_outcome_seconds(&t.run);
	wl_json_open(&w, "server");
	json_kv_string(&w, "strategy", wl_strategy_name(o->strategy));
	json_kv_string(&w, "align", o->align_page ? "page" : "none");
	json_kv_string(&w, "proto", o->udp ? "udp" : "tcp");
	json_kv_uint(&w, "size", o->size);
	json_kv_int(&w, "threads", o->threads);
	json_kv_int(&w, "port", port);
	json_kv_bool(&w, "verify", o->verify);
	wl_json_figures(&w, t.bytes, t.messages, secs);
	put_steady(&w, steady);
	json_kv_uint(&w, "send_calls", t.calls);
	json_kv_uint(&w, "partial_retries", t.partial);
	json_kv_uint(&w, "enobufs_retries", t.enobufs);
	wl_tcp_stats_json(&w, &t.tcp);
	put_zc(&w, &t.zc);
	json_key(&w, "per_thread");
	json_begin_array(&w);
	for (int i = 0; i < nconns; i++)
		put_conn(&w, &conns[i]);
	json_end_array(&w);
	wl_json_close(&w, PROG, t.run.errors, t.run.first_error);
	return t.run.errors ? 1 : 0;
}

/* ---- main ----------------------------------------------------------------- */

static int fatal(const struct wl_options *o, int port, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return print_json(o, NULL, 0, port, msg, NULL);
}

/* Reads the 4-byte connection index; -1 if the peer does not say a valid one in time. */
static int read_hello(int fd, int threads, uint32_t *idx)
{
	struct timeval tv = { .tv_sec = HELLO_TIMEOUT_S };
	uint32_t be;
	size_t got = 0;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(be)) {
		ssize_t r = recv(fd, (char *)&be + got, sizeof(be) - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	*idx = ntohl(be);
	tv.tv_sec = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return *idx < (uint32_t)threads ? 0 : -1;
}

/* Listens on --addr:--port, says `listening <port>`, and accepts one connection per thread,
 * each placed by the index its client says. 0 with *port set, or what fatal() returns. */
static int accept_tcp(const struct wl_options *o, struct conn *conns, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	char err[300], where[80];
	int lfd, one = 1, accepted = 0;

	*port = o->port;
	if (wl_resolve(o->addr, o->port, 1, &ss, &sslen, err, sizeof(err)) < 0)
		return fatal(o, o->port, "%s", err);
	wl_format_addr((struct sockaddr *)&ss, where, sizeof(where));

	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return fatal(o, o->port, "socket: %s", strerror(errno));
	wl_require_cc(WL_SERVER, lfd, o->cc);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* inherited by the accepted sockets: the MSS this end advertises and sends with */
	if (o->mss && setsockopt(lfd, IPPROTO_TCP, TCP_MAXSEG, &o->mss, sizeof(o->mss)) < 0)
		return fatal(o, o->port, "--mss %d: %s", o->mss, strerror(errno));
	if (bind(lfd, (struct sockaddr *)&ss, sslen) < 0)
		return fatal(o, o->port, "cannot listen on %s: %s", where, strerror(errno));
	if (listen(lfd, o->threads < 128 ? 128 : o->threads) < 0)
		return fatal(o, o->port, "listen on %s: %s", where, strerror(errno));
	sslen = sizeof(ss);
	getsockname(lfd, (struct sockaddr *)&ss, &sslen);
	*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					       : ((struct sockaddr_in *)&ss)->sin_port);
	wl_say_listening(o, *port);

	while (accepted < o->threads) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		uint32_t idx;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return fatal(o, *port, "accept: %s", strerror(errno));
		}
		if (read_hello(fd, o->threads, &idx) < 0 || conns[idx].fd >= 0) {
			fprintf(stderr, PROG ": dropped a connection without a valid, unused index\n");
			close(fd);
			continue;
		}
		if (wl_tcp_apply_cc(fd, o->cc) < 0) {
			close(fd);
			return fatal(o, *port, "--cc %s: %s", o->cc, strerror(errno));
		}
		if (o->strategy == STRAT_ZERO_COPY && wl_zc_enable(fd) < 0) {
			close(fd);
			return fatal(o, *port, "SO_ZEROCOPY: %s", strerror(errno));
		}
		conns[idx].fd = fd;
		accepted++;
	}
	close(lfd);
	return 0;
}

/* A zero-copy datagram carries the user's pages as at most MAX_SKB_FRAGS fragments (the
 * default of net.core.max_skb_frags), else the send fails with EMSGSIZE. Fields starting on
 * pages span the fewest. */
static int udp_frags_fit(const struct wl_options *o, char *err, size_t errlen)
{
	size_t pages = wl_message_pages(o->size, g_page_size);
	FILE *f = fopen("/proc/sys/net/core/max_skb_frags", "r");
	unsigned frags = 17;

	if (f) {
		if (fscanf(f, "%u", &frags) != 1)
			frags = 17;
		fclose(f);
	}
	if (pages <= frags)
		return 0;
	snprintf(err, errlen, "--size %zu: a zero-copy datagram holds at most %u page fragments, "
		 "and 8 fields of this size span %zu pages", o->size, frags, pages);
	return -1;
}

/* --udp: a UDP socket per thread connected to --addr:--port that never fragments
 * (IP_PMTUDISC_DO): a message must fit the path MTU in one datagram, else exit 2. */
static int connect_udp(const struct wl_options *o, struct conn *conns)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	char err[300], where[80];
	int i, pmtu = IP_PMTUDISC_DO, mtu = 0;
	socklen_t mlen = sizeof(mtu);

	if (wl_resolve(o->addr, o->port, 0, &ss, &sslen, err, sizeof(err)) < 0)
		return fatal(o, o->port, "%s", err);
	wl_format_addr((struct sockaddr *)&ss, where, sizeof(where));
	if (ss.ss_family != AF_INET)
		return fatal(o, o->port, "--udp: %s is not an IPv4 address", where);
	if (uses_ring(o->strategy) && udp_frags_fit(o, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		exit(2);
	}
	for (i = 0; i < o->threads; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return fatal(o, o->port, "socket: %s", strerror(errno));
		conns[i].fd = fd;
		if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0 ||
		    connect(fd, (struct sockaddr *)&ss, sslen) < 0 ||
		    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &mlen) < 0)
			return fatal(o, o->port, "UDP to %s: %s", where, strerror(errno));
		if (o->size + UDP_IP_HEADERS > (size_t)mtu) {
			fprintf(stderr, PROG ": --size %zu: a datagram to %s must fit the path MTU %d "
				"unfragmented (at most %d bytes)\n", o->size, where, mtu,
				mtu - (int)UDP_IP_HEADERS);
			exit(2);
		}
		if (o->strategy == STRAT_ZERO_COPY && wl_zc_enable(fd) < 0)
			return fatal(o, o->port, "SO_ZEROCOPY: %s", strerror(errno));
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct wl_options o;
	struct conn *conns;
	struct steady steady = { 0 };
	char err[300];
	int port, i, r;

	wl_start(WL_SERVER, argc, argv, &o);
	if (is_uring(o.strategy) &&
	    wl_uring_check(o.strategy == STRAT_IO_URING_ZC, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": --strategy %s: %s\n", wl_strategy_name(o.strategy), err);
		return 2;
	}
	if (o.check)
		return 0;
	g_page_size = (size_t)sysconf(_SC_PAGESIZE);

	if (o.netns && wl_enter_netns(o.netns, err, sizeof(err)) < 0)
		return fatal(&o, o.port, "%s", err);
	conns = calloc((size_t)o.threads, sizeof(*conns));
	if (!conns)
		return fatal(&o, o.port, "out of memory");
	for (i = 0; i < o.threads; i++)
		conns[i].fd = -1;
	port = o.port;
	r = o.udp ? connect_udp(&o, conns) : accept_tcp(&o, conns, &port);
	if (r)
		return r;

	pthread_barrier_init(&g_barrier, NULL, (unsigned)o.threads + 1);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&g_done, &ca);
	}
	g_running = o.threads;
	for (i = 0; i < o.threads; i++) {
		conns[i].idx = (uint32_t)i;
		conns[i].o = &o;
		r = pthread_create(&conns[i].thread, NULL, conn_thread, &conns[i]);
		if (r)
			/* Threads already started wait at the barrier forever: give up. */
			return fatal(&o, port, "pthread_create: %s", strerror(r));
	}
	pthread_barrier_wait(&g_barrier);
	if (o.duration)
		run_for(&o, conns, &steady);
	for (i = 0; i < o.threads; i++)
		pthread_join(conns[i].thread, NULL);
	return print_json(&o, conns, o.threads, port, NULL, o.duration ? &steady : NULL);
}
