/* udp-sender: UDP datagrams to one address, optionally MSG_ZEROCOPY, counted by itself.
 *
 *   udp-sender --addr A --port P --count N --size BYTES [--zerocopy] [--after M]
 *              [--gso SEG] [--batch K] [--netns NAME] [--ready-fd FD] [--timeout S]
 *
 * Sends N messages of BYTES (connected socket, send(2); --batch: K messages per sendmmsg(2)
 * call), each one datagram, or with --gso one datagram per SEG bytes (UDP_SEGMENT: the kernel
 * cuts the message, as QUIC stacks have it do). Then it reads SIOCOUTQ: the bytes of
 * its datagrams the kernel still holds. On a route whose neighbour is not resolved yet they
 * wait in the neighbour's queue and leave later, from softirq, when the ARP reply comes. It
 * writes `sent N OUTQ` to FD, waits until they have left (SIOCOUTQ 0), sends M more
 * messages (the neighbour is known by then), and waits for those too. With --zerocopy each
 * send is MSG_ZEROCOPY and it also waits for every completion (msgzc.h), reading the error
 * queue only then.
 *
 * "sock" is the kernel's address of its socket, from /proc/net/udp (null where
 * kernel.kptr_restrict hides it): a socket made after another one closed may get its memory,
 * and what a tracer keeps per socket address must not outlive the socket.
 *
 * JSON: {"program","messages","datagrams" (on the wire),"bytes","send_calls",
 *        "enobufs_retries","outq_after_first","zerocopy":{...}|null,"sock","seconds","error"}
 */
#include <linux/sockios.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "progs.h"
#include "msgzc.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#define MAX_BATCH 64

struct sender {
	int fd;
	bool zerocopy;
	char *buf;
	unsigned long long size, segments, batch;	/* segments: datagrams per message */
	unsigned long long messages, datagrams, bytes, send_calls, enobufs_retries;
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

static int outq(struct sender *s)
{
	int n = -1;

	return ioctl(s->fd, SIOCOUTQ, &n) < 0 ? -1 : n;
}

/* One call sending k messages (k > 1: sendmmsg); the messages it sent, or -1. */
static int send_call(struct sender *s, unsigned long long k, int flags)
{
	struct iovec iov = { .iov_base = s->buf, .iov_len = s->size };
	struct mmsghdr v[MAX_BATCH];
	ssize_t r;
	int n;

	s->send_calls++;
	if (k == 1) {
		r = send(s->fd, s->buf, s->size, flags);
		n = r < 0 ? -1 : 1;
		v[0].msg_len = (unsigned)r;
	} else {
		memset(v, 0, k * sizeof(v[0]));
		for (unsigned long long i = 0; i < k; i++) {
			v[i].msg_hdr.msg_iov = &iov;
			v[i].msg_hdr.msg_iovlen = 1;
		}
		n = sendmmsg(s->fd, v, (unsigned)k, flags);
	}
	for (int i = 0; i < n; i++)
		if (v[i].msg_len != s->size) {
			errno = EMSGSIZE;
			return -1;
		}
	return n;
}

/* n messages; ENOBUFS (zero-copy notifications hold the socket's option memory) is retried
 * after reading the completions queued so far. */
static int send_datagrams(struct sender *s, unsigned long long n, double deadline)
{
	int flags = s->zerocopy ? MSG_ZEROCOPY : 0;

	for (unsigned long long i = 0; i < n;) {
		unsigned long long k = s->batch && n - i > 1 ? (n - i < s->batch ? n - i : s->batch) : 1;
		int sent = send_call(s, k, flags);

		if (sent < 0 && errno == ENOBUFS && now_s() < deadline) {
			s->enobufs_retries++;
			if (s->zerocopy && zc_drain(s->fd, &s->zc) < 0)
				return fail(s, "reading the error queue");
			usleep(1000);
			continue;
		}
		if (sent < 0)
			return fail(s, errno == EMSGSIZE ? "a send returned part of a message" : "send");
		for (int j = 0; j < sent; j++) {
			s->messages++;
			s->datagrams += s->segments;
			s->bytes += s->size;
			if (s->zerocopy)
				zc_sent(&s->zc, s->size);
		}
		i += (unsigned long long)sent;
	}
	return 0;
}

/* Until the kernel holds none of our datagrams (sleeping a millisecond at a time). */
static int wait_left(struct sender *s, double deadline)
{
	int q;

	while ((q = outq(s)) != 0) {
		if (q < 0)
			return fail(s, "SIOCOUTQ");
		if (now_s() > deadline) {
			errno = ETIMEDOUT;
			return fail(s, "datagrams still held by the kernel");
		}
		usleep(1000);
	}
	return 0;
}

static int run(struct sender *s, unsigned long long count, unsigned long long after,
	       unsigned long long ready_fd, double deadline, int *first_outq)
{
	if (send_datagrams(s, count, deadline) < 0)
		return -1;
	*first_outq = outq(s);
	say_ready(ready_fd, "sent %llu %d", count, *first_outq);
	if (wait_left(s, deadline) < 0 || send_datagrams(s, after, deadline) < 0 ||
	    wait_left(s, deadline) < 0)
		return -1;
	if (s->zerocopy && zc_wait_all(s->fd, &s->zc, deadline - now_s()) < 0)
		return fail(s, "waiting for the zero-copy completions");
	return 0;
}

/* The socket's kernel address as /proc/net/udp prints it (its "pointer" column), found by
 * inode; "" when not found or hidden (all zeros). */
static void sock_address(int fd, char *out, size_t len)
{
	char line[512], ptr[32];
	unsigned long inode;
	struct stat st;
	FILE *f;

	out[0] = '\0';
	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/self/net/udp", "re")))
		return;
	while (fgets(line, sizeof(line), f))
		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops */
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %*s %31s", &inode,
			   ptr) == 2 && inode == st.st_ino && strspn(ptr, "0") != strlen(ptr)) {
			snprintf(out, len, "%s", ptr);
			break;
		}
	fclose(f);
}

static void print_json(const struct sender *s, int first_outq, double seconds)
{
	char sock[32];

	printf("{\"program\":\"udp-sender\",\"messages\":%llu,\"datagrams\":%llu,\"bytes\":%llu,"
	       "\"send_calls\":%llu,\"enobufs_retries\":%llu,\"outq_after_first\":%d,",
	       s->messages, s->datagrams, s->bytes, s->send_calls, s->enobufs_retries, first_outq);
	if (s->zerocopy)
		zc_print(&s->zc, ",");
	else
		printf("\"zerocopy\":null,");
	sock_address(s->fd, sock, sizeof(sock));
	json_str_or_null("sock", sock[0] ? sock : NULL, ",");
	printf("\"seconds\":%.6f,", seconds);
	json_str_or_null("error", error_text(s->error, s->error_errno), "}\n");
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, count = 0, size = 0, after = 0, ready_fd = 0, timeout = 20;
	unsigned long long gso = 0;
	const char *addr = NULL, *netns = NULL;
	struct sender s = { .fd = -1 };
	struct opt opts[] = {
		OPT_STR_("addr", &addr, true),
		OPT_NUM_("port", &port, 1, 65535, true),
		OPT_NUM_("count", &count, 1, 1000000, true),
		OPT_NUM_("size", &size, 1, 65507, true),
		OPT_NUM_("after", &after, 0, 1000000, false),
		OPT_FLAG_("zerocopy", &s.zerocopy),
		OPT_NUM_("gso", &gso, 1, 65507, false),
		OPT_NUM_("batch", &s.batch, 2, MAX_BATCH, false),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("ready-fd", &ready_fd, 3, 1023, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in to;
	int first_outq = -1, one = 1;
	double t0;

	prog_name = "udp-sender";
	parse_options(opts, argc, argv);
	to = ipv4_addr(addr, port);
	enter_netns(netns);
	s.size = size;
	s.segments = gso ? (size + gso - 1) / gso : 1;
	s.buf = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
	if (!s.buf || zc_account_init(&s.zc, count + after) < 0) {
		fprintf(stderr, "udp-sender: out of memory\n");
		return 1;
	}
	for (unsigned long long i = 0; i < size; i++)
		s.buf[i] = (char)('a' + i % 26);
	t0 = now_s();
	s.fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (s.fd < 0 || connect(s.fd, (struct sockaddr *)&to, sizeof(to)) < 0)
		fail(&s, "socket/connect");
	else if (s.zerocopy && setsockopt(s.fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0)
		fail(&s, "SO_ZEROCOPY");
	else if (gso && setsockopt(s.fd, SOL_UDP, UDP_SEGMENT, &(int){ (int)gso }, sizeof(int)) < 0)
		fail(&s, "UDP_SEGMENT");
	else
		run(&s, count, after, ready_fd, t0 + (double)timeout, &first_outq);
	print_json(&s, first_outq, now_s() - t0);
	return report_error(s.error, s.error_errno);
}
