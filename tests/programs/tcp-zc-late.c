/* tcp-zc-late: MSG_ZEROCOPY sends over TCP whose completions are read late: every send
 * first, the error queue only at the end (as a program does that checks completions once,
 * before it exits).
 *
 *   tcp-zc-late --addr A --port P --count N --size BYTES [--netns NAME] [--timeout S]
 *
 * Connects to A:P (retrying for 5 s while refused), sends N messages of BYTES from one
 * buffer with MSG_ZEROCOPY (blocking; the rest of a partial send is sent again, taking a new
 * id), shuts its side down, then reads every completion (msgzc.h). ENOBUFS (completions not
 * yet read hold the socket's option memory) is retried after a millisecond, without reading
 * them, and counted.
 *
 * JSON: {"program","bytes","send_calls","enobufs_retries","retrans","zerocopy":{...},
 *        "seconds","error"} */
#include <netinet/in.h>
#include <sys/socket.h>

#include "progs.h"
#include "msgzc.h"

struct sender {
	int fd;
	char *buf;
	unsigned long long size, bytes, send_calls, enobufs_retries;
	struct zc_account zc;
	const char *error;
	int error_errno;
};

static int fail(struct sender *s, const char *what)
{
	s->error = what;
	s->error_errno = errno;
	return -1;
}

static int connect_retrying(struct sender *s, const struct sockaddr_in *a)
{
	for (double end = now_s() + 5;; usleep(10000)) {
		s->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (s->fd >= 0 && connect(s->fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
			return 0;
		if (s->fd < 0 || errno != ECONNREFUSED || now_s() > end)
			return fail(s, "connect");
		close(s->fd);
	}
}

static int send_message(struct sender *s, double deadline)
{
	for (unsigned long long off = 0; off < s->size;) {
		ssize_t r = send(s->fd, s->buf + off, s->size - off, MSG_ZEROCOPY);

		s->send_calls++;
		if (r < 0 && errno == ENOBUFS && now_s() < deadline) {
			s->enobufs_retries++;
			usleep(1000);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return fail(s, "send");
		zc_sent(&s->zc, (unsigned long long)r);
		s->bytes += (unsigned long long)r;
		off += (unsigned long long)r;
	}
	return 0;
}

static void run(struct sender *s, const struct sockaddr_in *a, unsigned long long count,
		double deadline)
{
	int one = 1;

	if (connect_retrying(s, a) < 0)
		return;
	if (setsockopt(s->fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0) {
		fail(s, "SO_ZEROCOPY");
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		if (send_message(s, deadline) < 0)
			return;
	if (shutdown(s->fd, SHUT_WR) < 0)
		fail(s, "shutdown");
	else if (zc_wait_all(s->fd, &s->zc, deadline - now_s()) < 0)
		fail(s, "waiting for the zero-copy completions");
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, count = 0, size = 0, timeout = 30;
	const char *addr = NULL, *netns = NULL;
	struct sender s = { .fd = -1 };
	struct opt opts[] = {
		OPT_STR_("addr", &addr, true),
		OPT_NUM_("port", &port, 1, 65535, true),
		OPT_NUM_("count", &count, 1, 1000000, true),
		OPT_NUM_("size", &size, 1, 16 << 20, true),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in a;
	double t0;

	prog_name = "tcp-zc-late";
	parse_options(opts, argc, argv);
	a = ipv4_addr(addr, port);
	enter_netns(netns);
	s.size = size;
	s.buf = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
	/* a partial send takes one more id: room for every message to be split a few times */
	if (!s.buf || zc_account_init(&s.zc, 8 * count + 64) < 0) {
		fprintf(stderr, "tcp-zc-late: out of memory\n");
		return 1;
	}
	memset(s.buf, 'z', size);
	t0 = now_s();
	run(&s, &a, count, t0 + (double)timeout);
	printf("{\"program\":\"tcp-zc-late\",\"bytes\":%llu,\"send_calls\":%llu,"
	       "\"enobufs_retries\":%llu,\"retrans\":%lld,", s.bytes, s.send_calls,
	       s.enobufs_retries, tcp_retrans(s.fd));
	if (s.fd >= 0)
		close(s.fd);
	zc_print(&s.zc, ",");
	printf("\"seconds\":%.6f,", now_s() - t0);
	json_str_or_null("error", error_text(s.error, s.error_errno), "}\n");
	return report_error(s.error, s.error_errno);
}
