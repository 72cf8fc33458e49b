/* udp-zc-sockets: UDP sockets opened one after another, each sending its datagrams with
 * MSG_ZEROCOPY, each socket's completions read before it closes.
 *
 *   udp-zc-sockets --addr A --port P --sockets S --count N --size BYTES [--unconnected]
 *                  [--netns NAME] [--timeout S]
 *
 * Each of the S sockets: socket(), SO_ZEROCOPY, connect() (or, with --unconnected, no
 * connect: every datagram is a sendto() naming A:P, and the socket is bound by its first
 * send), N sends of BYTES with MSG_ZEROCOPY, every completion read from the error queue
 * (msgzc.h), close(). A send refused with ENOBUFS (the completions queued hold the socket's
 * option memory) is retried after reading them. Nothing needs to receive: the route may end
 * in a blackhole, where no page is ever copied.
 *
 * JSON: {"program","sockets","datagrams","bytes","send_calls","enobufs_retries",
 *        "zerocopy":{...} (the sum of every socket's account),"seconds","error"}
 */
#include <sys/socket.h>

#include "progs.h"
#include "msgzc.h"

struct run {
	struct sockaddr_in to;
	bool unconnected;
	char *buf;
	unsigned long long size, count;
	unsigned long long sockets, datagrams, bytes, send_calls, enobufs_retries;
	struct zc_account total;	/* the sums of every socket's account */
	struct prog_error err;
};

static void add_account(struct zc_account *t, const struct zc_account *a)
{
	t->sends += a->sends;
	t->notifications += a->notifications;
	t->completed += a->completed;
	t->copied += a->copied;
	t->zc_bytes += a->zc_bytes;
	t->copied_bytes += a->copied_bytes;
	t->unexpected += a->unexpected;
	t->other_errors += a->other_errors;
}

static ssize_t send_one(struct run *r, int fd)
{
	r->send_calls++;
	if (r->unconnected)
		return sendto(fd, r->buf, r->size, MSG_ZEROCOPY, (const struct sockaddr *)&r->to,
			      sizeof(r->to));
	return send(fd, r->buf, r->size, MSG_ZEROCOPY);
}

/* One socket's datagrams, and all their completions; 0, or -1. */
static int send_all(struct run *r, int fd, struct zc_account *a, double deadline)
{
	for (unsigned long long i = 0; i < r->count;) {
		ssize_t n = send_one(r, fd);

		if (n < 0 && errno == ENOBUFS && now_s() < deadline) {
			r->enobufs_retries++;
			if (zc_drain(fd, a) < 0)
				return fail(&r->err, "reading the error queue");
			usleep(1000);
			continue;
		}
		if (n < 0)
			return fail(&r->err, "send");
		if ((unsigned long long)n != r->size) {
			errno = EMSGSIZE;
			return fail(&r->err, "a send returned part of a datagram");
		}
		r->datagrams++;
		r->bytes += (unsigned long long)n;
		zc_sent(a, (unsigned long long)n);
		i++;
	}
	if (zc_wait_all(fd, a, deadline - now_s()) < 0)
		return fail(&r->err, "waiting for the zero-copy completions");
	return 0;
}

/* One socket, from socket() to close(); 0, or -1. */
static int one_socket(struct run *r, double deadline)
{
	struct zc_account a;
	int one = 1, fd, rc = -1;

	if (zc_account_init(&a, r->count) < 0)
		out_of_memory();
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fail(&r->err, "socket");
	else if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0)
		fail(&r->err, "SO_ZEROCOPY");
	else if (!r->unconnected &&
		 connect(fd, (const struct sockaddr *)&r->to, sizeof(r->to)) < 0)
		fail(&r->err, "connect");
	else
		rc = send_all(r, fd, &a, deadline);
	if (fd >= 0) {
		r->sockets++;
		close(fd);
	}
	add_account(&r->total, &a);
	free(a.bytes);
	free(a.done);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long long sockets = 0;
	struct place pl = { .timeout = 20 };
	struct run r = { 0 };
	struct opt opts[] = {
		OPTS_SEND_TO(&pl),
		OPT_NUM_("sockets", &sockets, 1, 100000, true),
		OPT_NUM_("count", &r.count, 1, 1000000, true),
		OPT_NUM_("size", &r.size, 1, 65507, true),
		OPT_FLAG_("unconnected", &r.unconnected),
		OPTS_RUN(&pl),
		OPT_END,
	};
	double t0, deadline;

	prog_start("udp-zc-sockets", opts, argc, argv);
	r.to = place_enter(&pl);
	r.buf = page_buffer(r.size, 'z');
	t0 = now_s();
	deadline = t0 + (double)pl.timeout;
	for (unsigned long long i = 0; i < sockets; i++)
		if (one_socket(&r, deadline) < 0)
			break;
	json_begin();
	printf("\"sockets\":%llu,\"datagrams\":%llu,\"bytes\":%llu,\"send_calls\":%llu,"
	       "\"enobufs_retries\":%llu,", r.sockets, r.datagrams, r.bytes, r.send_calls,
	       r.enobufs_retries);
	zc_print(&r.total, ",");
	return json_end(now_s() - t0, &r.err);
}
