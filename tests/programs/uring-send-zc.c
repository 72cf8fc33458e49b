/* uring-send-zc: io_uring IORING_OP_SEND_ZC over TCP, counted from its own completions.
 *
 *   uring-send-zc --addr A --port P --count N --size BYTES [--fixed | --msg-zerocopy]
 *                 [--netns NAME] [--timeout S]
 *   uring-send-zc --check
 *
 * Connects to A:P (retrying for 5 s while refused) and sends N messages of BYTES, each from
 * its own part of one buffer (never reused, so no send waits for another's notification),
 * one send in flight at a time; the rest of a short send is sent again. --fixed registers
 * the buffer with the ring first (IORING_RECVSEND_FIXED_BUF: its pages pinned once, not per
 * send). Each send's first CQE gives the bytes sent; with IORING_CQE_F_MORE a notification
 * CQE (IORING_CQE_F_NOTIF) follows once the kernel let go of the pages, which says whether it
 * copied them (IORING_NOTIF_USAGE_ZC_COPIED, asked for with IORING_SEND_ZC_REPORT_USAGE where
 * the kernel knows it, 6.2+; "copied" is null where it does not).
 * --msg-zerocopy sends with IORING_OP_SEND and MSG_ZEROCOPY on a SO_ZEROCOPY socket instead:
 * the socket's own MSG_ZEROCOPY, its completions read from its error queue at the end
 * (msgzc.h; "zerocopy" in the JSON, copied and zc_bytes from it).
 *
 * A kernel without io_uring, with io_uring disabled, or without IORING_OP_SEND_ZC (6.0+):
 * `uring-send-zc: unsupported: WHY` on stderr, {"program","unsupported":WHY} on stdout, exit
 * 3. --check only checks: {"program","unsupported":null|WHY}, exit 0.
 *
 * JSON: {"program","unsupported":null,"fixed","report_usage","bytes","sends","notifications",
 *        "copied","copied_bytes","zc_bytes","retrans","seconds","error"} (copied, copied_bytes and
 *        zc_bytes null without the usage report) */
#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "uring_zc.h"
#include "progs.h"
#include "stream.h"
#include "msgzc.h"

struct sender {
	struct io_uring ring;
	int fd;
	bool fixed, report_usage, msg_zc;
	struct zc_account zc;		/* --msg-zerocopy: the error queue's account */
	char *buf;
	unsigned long long size, cap;
	unsigned long long *sent;	/* bytes of each send (its user_data) */
	unsigned long long bytes, sends, notifs_due, notifications, copied, copied_bytes;
	struct prog_error err;
};

/* Why this kernel cannot run IORING_OP_SEND_ZC (the ring is then torn down), or NULL. */
static const char *unsupported(struct io_uring *ring)
{
	static char why[128];
	struct io_uring_probe *probe;
	int r = io_uring_queue_init(16, ring, 0), ok;

	if (r < 0) {
		snprintf(why, sizeof(why), "cannot create an io_uring: %s%s", strerror(-r),
			 r == -EPERM ? " (kernel.io_uring_disabled?)" : "");
		return why;
	}
	probe = io_uring_get_probe_ring(ring);
	ok = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);
	if (probe)
		io_uring_free_probe(probe);
	if (ok)
		return NULL;
	io_uring_queue_exit(ring);
	return probe ? "IORING_OP_SEND_ZC is not supported by this kernel (6.0+)"
		     : "cannot probe io_uring's opcodes (5.6+)";
}

/* One CQE: the send's result (returned through *res, and 1) or a notification (0). */
static int reap(struct sender *s, int *res)
{
	struct io_uring_cqe *cqe;
	int r = io_uring_wait_cqe(&s->ring, &cqe), first;
	unsigned long long id;

	if (r < 0)
		return fail_with(&s->err, "io_uring_wait_cqe", -r);
	id = cqe->user_data;
	first = !(cqe->flags & IORING_CQE_F_NOTIF);
	if (first) {
		*res = cqe->res;
		if (cqe->flags & IORING_CQE_F_MORE)
			s->notifs_due++;
	} else {
		s->notifications++;
		if (s->report_usage && (cqe->res & IORING_NOTIF_USAGE_ZC_COPIED) && id < s->cap) {
			s->copied++;
			s->copied_bytes += s->sent[id];
		}
	}
	io_uring_cqe_seen(&s->ring, cqe);
	return first;
}

/* One send of len bytes at p; its result (bytes, or -errno), or INT32_MIN on a ring error. */
static int send_once(struct sender *s, char *p, unsigned long long len)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	unsigned zc_flags = s->report_usage ? IORING_SEND_ZC_REPORT_USAGE : 0;
	int res = 0, r;

	if (s->msg_zc)
		io_uring_prep_send(sqe, s->fd, p, len, MSG_ZEROCOPY);
	else if (s->fixed)
		io_uring_prep_send_zc_fixed(sqe, s->fd, p, len, 0, zc_flags, 0);
	else
		io_uring_prep_send_zc(sqe, s->fd, p, len, 0, zc_flags);
	sqe->user_data = s->sends;
	r = io_uring_submit(&s->ring);
	if (r != 1)
		return fail_with(&s->err, "io_uring_submit", r < 0 ? -r : EIO), INT32_MIN;
	while ((r = reap(s, &res)) == 0)
		;
	return r < 0 ? INT32_MIN : res;
}

/* Message i; the first send tells whether the kernel knows the usage report (EINVAL). */
static int send_message(struct sender *s, unsigned long long i)
{
	char *p = s->buf + i * s->size;

	for (unsigned long long off = 0; off < s->size;) {
		int res = send_once(s, p + off, s->size - off);

		if (res == INT32_MIN)
			return -1;
		if (res == -EINVAL && s->report_usage && !s->bytes) {
			s->report_usage = false;
			continue;
		}
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res == -ENOBUFS && s->msg_zc) {	/* completions due first */
			if (zc_drain(s->fd, &s->zc) < 0)
				return fail(&s->err, "recvmsg(MSG_ERRQUEUE)");
			continue;
		}
		if (res <= 0)
			return fail_with(&s->err, s->msg_zc ? "IORING_OP_SEND" : "IORING_OP_SEND_ZC",
					 res < 0 ? -res : EIO);
		if (s->msg_zc)
			zc_sent(&s->zc, (unsigned long long)res);
		if (s->sends < s->cap)
			s->sent[s->sends] = (unsigned long long)res;
		s->sends++;
		s->bytes += (unsigned long long)res;
		off += (unsigned long long)res;
	}
	return 0;
}

static void run(struct sender *s, const struct sockaddr_in *a, unsigned long long count)
{
	struct iovec iov = { .iov_base = s->buf, .iov_len = count * s->size };
	int res = 0, r;

	if (s->fixed && (r = io_uring_register_buffers(&s->ring, &iov, 1)) < 0) {
		fail_with(&s->err, "io_uring_register_buffers", -r);
		return;
	}
	s->fd = tcp_connect_retrying(a, &s->err);
	if (s->fd < 0)
		return;
	if (s->msg_zc && setsockopt(s->fd, SOL_SOCKET, SO_ZEROCOPY, &(int){ 1 }, sizeof(int))) {
		fail(&s->err, "setsockopt(SO_ZEROCOPY)");
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		if (send_message(s, i) < 0)
			return;
	if (shutdown(s->fd, SHUT_WR) < 0) {
		fail(&s->err, "shutdown");
		return;
	}
	if (s->msg_zc && zc_wait_all(s->fd, &s->zc, 10) < 0)
		fail(&s->err, "the MSG_ZEROCOPY completions");
	while (s->notifications < s->notifs_due) {
		r = reap(s, &res);
		if (r == 1)
			fail_with(&s->err, "a send's result after every send ended", EPROTO);
		if (r != 0)
			return;
	}
}

static void print_json(const struct sender *s)
{
	json_begin();
	printf("\"unsupported\":null,\"fixed\":%s,"
	       "\"report_usage\":%s,\"bytes\":%llu,\"sends\":%llu,\"notifications\":%llu,",
	       s->fixed ? "true" : "false", s->report_usage ? "true" : "false", s->bytes,
	       s->sends, s->notifications);
	if (s->msg_zc) {
		printf("\"copied\":%llu,\"copied_bytes\":%llu,\"zc_bytes\":%llu,", s->zc.copied,
		       s->zc.copied_bytes, s->zc.zc_bytes);
		zc_print(&s->zc, ",");
	} else if (s->report_usage)
		printf("\"copied\":%llu,\"copied_bytes\":%llu,\"zc_bytes\":%llu,", s->copied,
		       s->copied_bytes, s->bytes - s->copied_bytes);
	else
		printf("\"copied\":null,\"copied_bytes\":null,\"zc_bytes\":null,");
	printf("\"retrans\":%lld,", tcp_retrans(s->fd));
}

/* The JSON line and the exit status of a kernel that cannot run the program (why), or of
 * --check. */
static int print_unsupported(const char *why, bool check)
{
	json_begin();
	json_str_or_null("unsupported", why, "}\n");
	if (check)
		return 0;
	fprintf(stderr, "%s: unsupported: %s\n", prog_name, why);
	return 3;
}

int main(int argc, char **argv)
{
	unsigned long long count = 0, size = 0;
	const char *why;
	struct place pl = { .timeout = 30 };
	struct sender s = { .fd = -1, .report_usage = true };
	bool check = false;
	struct opt opts[] = {
		/* not required: --check alone */
		OPT_STR_("addr", &pl.addr, false),
		OPT_NUM_("port", &pl.port, 1, 65535, false),
		OPT_NUM_("count", &count, 1, 100000, false),
		OPT_NUM_("size", &size, 1, 1 << 20, false),
		OPT_FLAG_("fixed", &s.fixed),
		OPT_FLAG_("msg-zerocopy", &s.msg_zc),
		OPT_FLAG_("check", &check),
		OPTS_RUN(&pl),
		OPT_END,
	};
	struct sockaddr_in a = { 0 };
	double t0;

	prog_start("uring-send-zc", opts, argc, argv);
	if (!check && (!pl.addr || !pl.port || !count || !size))
		usage_error("--addr, --port, --count and --size are required (or --check)");
	if (s.fixed && s.msg_zc)
		usage_error("--fixed and --msg-zerocopy: one way to send");
	if (!check)
		a = ipv4_addr(pl.addr, pl.port);
	enter_netns(pl.netns);
	why = unsupported(&s.ring);
	if (check || why)
		return print_unsupported(why, check);
	s.size = size;
	s.cap = 8 * count + 64;
	s.sent = calloc(s.cap, sizeof(*s.sent));
	if (!s.sent || zc_account_init(&s.zc, s.cap) < 0)
		out_of_memory();
	s.buf = page_buffer(count * size, 'u');
	alarm((unsigned)pl.timeout);
	t0 = now_s();
	run(&s, &a, count);
	print_json(&s);
	return json_end(now_s() - t0, &s.err);
}
