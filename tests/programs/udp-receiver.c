/* udp-receiver: receives N UDP datagrams and counts what recvmsg(2) copied to it.
 *
 *   udp-receiver --count N --size BYTES [--addr A] [--port P] [--trunc] [--netns NAME]
 *                [--ready-fd FD] [--timeout S]
 *
 * Binds A:P (default 0.0.0.0, P 0: any port), writes `listening PORT` to FD and to stderr,
 * then receives until N datagrams came, each into a buffer of BYTES. --trunc passes
 * MSG_TRUNC, as programs do that want a datagram's real length (the call then returns it even
 * where the buffer was shorter): the bytes copied are still at most BYTES per datagram. The
 * receive buffer is made large (SO_RCVBUFFORCE) so that a burst is not dropped; drops are
 * counted anyway (SO_RXQ_OVFL).
 *
 * JSON: {"program","port","datagrams","bytes" (copied to the buffer),"reported_bytes" (what
 *        the calls returned),"truncated","recv_calls","drops","seconds","error"} */
#include <poll.h>
#include <sys/socket.h>

#include "progs.h"

#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

struct receiver {
	int fd;
	char *buf;
	unsigned long long size, datagrams, bytes, reported, truncated, recv_calls;
	unsigned drops;		/* the socket's drop counter, from the last datagram's cmsg */
	const char *error;
	int error_errno;
};

static int fail(struct receiver *r, const char *what)
{
	r->error = what;
	r->error_errno = errno;
	return -1;
}

static int receive_one(struct receiver *r, int flags)
{
	char control[64];
	struct iovec iov = { .iov_base = r->buf, .iov_len = r->size };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(r->fd, &msg, flags);

	r->recv_calls++;
	if (n < 0)
		return errno == EINTR ? 0 : fail(r, "recvmsg");
	r->datagrams++;
	r->reported += (unsigned long long)n;
	r->bytes += (unsigned long long)n < r->size ? (unsigned long long)n : r->size;
	if (msg.msg_flags & MSG_TRUNC)
		r->truncated++;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL)
			memcpy(&r->drops, CMSG_DATA(cm), sizeof(r->drops));
	return 0;
}

static int run(struct receiver *r, unsigned long long count, bool trunc, double deadline)
{
	while (r->datagrams < count) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		double left = deadline - now_s();

		if (left <= 0) {
			errno = ETIMEDOUT;
			return fail(r, "fewer datagrams than --count");
		}
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return fail(r, "poll");
		if ((p.revents & POLLIN) && receive_one(r, trunc ? MSG_TRUNC : 0) < 0)
			return -1;
	}
	return 0;
}

/* The socket, bound, with a receive buffer large enough for a burst; its port. */
static int open_socket(struct receiver *r, struct sockaddr_in *a)
{
	int big = 32 << 20, one = 1;
	socklen_t len = sizeof(*a);

	r->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (r->fd < 0)
		return fail(r, "socket");
	if (setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(r->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) < 0)
		return fail(r, "SO_RXQ_OVFL");
	if (bind(r->fd, (struct sockaddr *)a, sizeof(*a)) < 0)
		return fail(r, "bind");
	if (getsockname(r->fd, (struct sockaddr *)a, &len) < 0)
		return fail(r, "getsockname");
	return ntohs(a->sin_port);
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, count = 0, size = 0, ready_fd = 0, timeout = 20;
	const char *addr = "0.0.0.0", *netns = NULL;
	struct receiver r = { .fd = -1 };
	bool trunc = false;
	struct opt opts[] = {
		OPT_STR_("addr", &addr, false),
		OPT_NUM_("port", &port, 0, 65535, false),
		OPT_NUM_("count", &count, 1, 1000000, true),
		OPT_NUM_("size", &size, 1, 65536, true),
		OPT_FLAG_("trunc", &trunc),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("ready-fd", &ready_fd, 3, 1023, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in a;
	double t0;
	int bound;

	prog_name = "udp-receiver";
	parse_options(opts, argc, argv);
	a = ipv4_addr(addr, port);
	enter_netns(netns);
	r.size = size;
	r.buf = malloc(size);
	if (!r.buf) {
		fprintf(stderr, "udp-receiver: out of memory\n");
		return 1;
	}
	bound = open_socket(&r, &a);
	t0 = now_s();
	if (bound >= 0) {
		say_ready(ready_fd, "listening %d", bound);
		fprintf(stderr, "listening %d\n", bound);
		run(&r, count, trunc, t0 + (double)timeout);
	}
	printf("{\"program\":\"udp-receiver\",\"port\":%d,\"datagrams\":%llu,\"bytes\":%llu,"
	       "\"reported_bytes\":%llu,\"truncated\":%llu,\"recv_calls\":%llu,\"drops\":%u,"
	       "\"seconds\":%.6f,", bound, r.datagrams, r.bytes, r.reported, r.truncated,
	       r.recv_calls, r.drops, now_s() - t0);
	json_str_or_null("error", error_text(r.error, r.error_errno), "}\n");
	return report_error(r.error, r.error_errno);
}
