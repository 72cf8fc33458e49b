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
#include "stream.h"

struct sender {
	struct stream_send out;	/* MSG_ZEROCOPY, each send taking an id of zc */
	struct zc_account zc;
	char *buf;
	unsigned long long size;
	struct prog_error err;
};

static void took_id(void *zc, unsigned long long n)
{
	zc_sent(zc, n);
}

static void run(struct sender *s, const struct sockaddr_in *a, unsigned long long count)
{
	int one = 1;

	s->out.fd = tcp_connect_retrying(a, &s->err);
	if (s->out.fd < 0)
		return;
	if (setsockopt(s->out.fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0) {
		fail(&s->err, "SO_ZEROCOPY");
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		if (send_whole(&s->out, s->buf, s->size) < 0) {
			fail(&s->err, "send");
			return;
		}
	if (shutdown(s->out.fd, SHUT_WR) < 0)
		fail(&s->err, "shutdown");
	else if (zc_wait_all(s->out.fd, &s->zc, s->out.deadline - now_s()) < 0)
		fail(&s->err, "waiting for the zero-copy completions");
}

int main(int argc, char **argv)
{
	unsigned long long count = 0, size = 0;
	struct place pl = { .timeout = 30 };
	struct opt opts[] = {
		OPTS_SEND_TO(&pl),
		OPT_NUM_("count", &count, 1, 1000000, true),
		OPT_NUM_("size", &size, 1, 16 << 20, true),
		OPTS_RUN(&pl),
		OPT_END,
	};
	struct sender s = { .out = { .fd = -1, .flags = MSG_ZEROCOPY, .took = took_id } };
	struct sockaddr_in a;
	double t0;

	prog_start("tcp-zc-late", opts, argc, argv);
	a = place_enter(&pl);
	s.size = size;
	s.buf = page_buffer(size, 'z');
	s.out.ctx = &s.zc;
	/* a partial send takes one more id: room for every message to be split a few times */
	if (zc_account_init(&s.zc, 8 * count + 64) < 0)
		out_of_memory();
	t0 = now_s();
	s.out.deadline = t0 + (double)pl.timeout;
	run(&s, &a, count);
	json_begin();
	printf("\"bytes\":%llu,\"send_calls\":%llu,\"enobufs_retries\":%llu,\"retrans\":%lld,",
	       s.out.bytes, s.out.calls, s.out.enobufs_retries, tcp_retrans(s.out.fd));
	if (s.out.fd >= 0)
		close(s.out.fd);
	zc_print(&s.zc, ",");
	return json_end(now_s() - t0, &s.err);
}
