/* uring-send-zc: io_uring IORING_OP_SEND_ZC over TCP, counted from its own completions.
 *
 *   uring-send-zc --addr A --port P --count N --size BYTES [--fixed] [--netns NAME]
 *                 [--timeout S]
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

#include "progs.h"

#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

struct sender {
	struct io_uring ring;
	int fd;
	bool fixed, report_usage;
	char *buf;
	unsigned long long size, cap;
	unsigned long long *sent;	/* bytes of each send (its user_data) */
	unsigned long long bytes, sends, notifs_due, notifications, copied, copied_bytes;
	const char *error;
	int error_errno;
};

static int fail(struct sender *s, const char *what, int err)
{
	s->error = what;
	s->error_errno = err;
	return -1;
}

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
		return fail(s, "io_uring_wait_cqe", -r);
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

	if (s->fixed)
		io_uring_prep_send_zc_fixed(sqe, s->fd, p, len, 0, zc_flags, 0);
	else
		io_uring_prep_send_zc(sqe, s->fd, p, len, 0, zc_flags);
	sqe->user_data = s->sends;
	r = io_uring_submit(&s->ring);
	if (r != 1)
		return fail(s, "io_uring_submit", r < 0 ? -r : EIO), INT32_MIN;
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
		if (res <= 0)
			return fail(s, "IORING_OP_SEND_ZC", res < 0 ? -res : EIO);
		if (s->sends < s->cap)
			s->sent[s->sends] = (unsigned long long)res;
		s->sends++;
		s->bytes += (unsigned long long)res;
		off += (unsigned long long)res;
	}
	return 0;
}

static int connect_retrying(struct sender *s, const struct sockaddr_in *a)
{
	for (double end = now_s() + 5;; usleep(10000)) {
		s->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (s->fd >= 0 && connect(s->fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
			return 0;
		if (s->fd < 0 || errno != ECONNREFUSED || now_s() > end)
			return fail(s, "connect", errno);
		close(s->fd);
	}
}

static void run(struct sender *s, const struct sockaddr_in *a, unsigned long long count)
{
	struct iovec iov = { .iov_base = s->buf, .iov_len = count * s->size };
	int res = 0, r;

	if (s->fixed && (r = io_uring_register_buffers(&s->ring, &iov, 1)) < 0) {
		fail(s, "io_uring_register_buffers", -r);
		return;
	}
	if (connect_retrying(s, a) < 0)
		return;
	for (unsigned long long i = 0; i < count; i++)
		if (send_message(s, i) < 0)
			return;
	if (shutdown(s->fd, SHUT_WR) < 0) {
		fail(s, "shutdown", errno);
		return;
	}
	while (s->notifications < s->notifs_due) {
		r = reap(s, &res);
		if (r == 1)
			fail(s, "a send's result after every send ended", EPROTO);
		if (r != 0)
			return;
	}
}

static void print_json(const struct sender *s, double seconds)
{
	printf("{\"program\":\"uring-send-zc\",\"unsupported\":null,\"fixed\":%s,"
	       "\"report_usage\":%s,\"bytes\":%llu,\"sends\":%llu,\"notifications\":%llu,",
	       s->fixed ? "true" : "false", s->report_usage ? "true" : "false", s->bytes,
	       s->sends, s->notifications);
	if (s->report_usage)
		printf("\"copied\":%llu,\"copied_bytes\":%llu,\"zc_bytes\":%llu,", s->copied,
		       s->copied_bytes, s->bytes - s->copied_bytes);
	else
		printf("\"copied\":null,\"copied_bytes\":null,\"zc_bytes\":null,");
	printf("\"retrans\":%lld,\"seconds\":%.6f,", tcp_retrans(s->fd), seconds);
	json_str_or_null("error", error_text(s->error, s->error_errno), "}\n");
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, count = 0, size = 0, timeout = 30;
	const char *addr = NULL, *netns = NULL, *why;
	struct sender s = { .fd = -1, .report_usage = true };
	bool check = false;
	struct opt opts[] = {
		OPT_STR_("addr", &addr, false),
		OPT_NUM_("port", &port, 1, 65535, false),
		OPT_NUM_("count", &count, 1, 100000, false),
		OPT_NUM_("size", &size, 1, 1 << 20, false),
		OPT_FLAG_("fixed", &s.fixed),
		OPT_FLAG_("check", &check),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in a = { 0 };
	double t0;

	prog_name = "uring-send-zc";
	parse_options(opts, argc, argv);
	if (!check && (!addr || !port || !count || !size))
		usage_error("--addr, --port, --count and --size are required (or --check)");
	if (!check)
		a = ipv4_addr(addr, port);
	enter_netns(netns);
	why = unsupported(&s.ring);
	if (check) {
		printf("{\"program\":\"uring-send-zc\",");
		json_str_or_null("unsupported", why, "}\n");
		return 0;
	}
	if (why) {
		printf("{\"program\":\"uring-send-zc\",");
		json_str_or_null("unsupported", why, "}\n");
		fprintf(stderr, "uring-send-zc: unsupported: %s\n", why);
		return 3;
	}
	s.size = size;
	s.cap = 8 * count + 64;
	s.sent = calloc(s.cap, sizeof(*s.sent));
	s.buf = aligned_alloc(4096, (count * size + 4095) / 4096 * 4096);
	if (!s.sent || !s.buf) {
		fprintf(stderr, "uring-send-zc: out of memory\n");
		return 1;
	}
	memset(s.buf, 'u', count * size);
	alarm((unsigned)timeout);
	t0 = now_s();
	run(&s, &a, count);
	print_json(&s, now_s() - t0);
	return report_error(s.error, s.error_errno);
}
