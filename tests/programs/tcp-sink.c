/* tcp-sink: one TCP connection, received until the peer closes it, counted by itself.
 *
 *   tcp-sink [--port P] [--addr A] [--connect] [--netns NAME] [--ready-fd FD] [--timeout S]
 *
 * Listens on A:P (default 0.0.0.0, P 0: any port), writes `listening PORT` to FD and to
 * stderr and accepts one connection; with --connect it connects to A:P instead (retrying for
 * 5 s while refused). Then recv(2)s into 64 KiB until end-of-file, within S seconds (default
 * 60).
 *
 * JSON: {"program","port","bytes","recv_calls","seconds","error"} */
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "progs.h"
#include "stream.h"

#define SINK_BUF (64 << 10)

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
}

/* recv(2) into buf until end-of-file; the bytes in *bytes, the calls in *calls. */
static void receive_all(int fd, char *buf, unsigned long long *bytes, unsigned long long *calls,
			struct prog_error *e)
{
	for (;;) {
		ssize_t n = recv(fd, buf, SINK_BUF, 0);

		++*calls;
		if (n > 0)
			*bytes += (unsigned long long)n;
		else if (n == 0)
			return;
		else if (errno != EINTR || timed_out) {
			fail(e, "recv");
			return;
		}
	}
}

int main(int argc, char **argv)
{
	unsigned long long bytes = 0, calls = 0;
	struct place pl = { .addr = "0.0.0.0", .timeout = 60 };
	struct prog_error err = { 0 };
	bool do_connect = false;
	struct opt opts[] = {
		OPTS_LISTEN_ON(&pl),
		OPT_FLAG_("connect", &do_connect),
		OPTS_RUN(&pl),
		OPT_READY_FD(&pl),
		OPT_END,
	};
	struct sockaddr_in a;
	char *buf;
	double t0;
	int fd;

	prog_start("tcp-sink", opts, argc, argv);
	if (do_connect && !pl.port)
		usage_error("--connect needs a --port of 1..65535");
	a = place_enter(&pl);
	buf = malloc(SINK_BUF);
	if (!buf)
		out_of_memory();
	/* a peer that never comes or never closes: the blocked call fails with EINTR */
	sigaction(SIGALRM, &(struct sigaction){ .sa_handler = on_alarm }, NULL);
	alarm((unsigned)pl.timeout);
	fd = do_connect ? tcp_connect_retrying(&a, &err) : tcp_accept_one(&a, pl.ready_fd, &err);
	t0 = now_s();
	if (fd >= 0)
		receive_all(fd, buf, &bytes, &calls, &err);
	json_begin();
	printf("\"port\":%d,\"bytes\":%llu,\"recv_calls\":%llu,", ntohs(a.sin_port), bytes,
	       calls);
	return json_end(now_s() - t0, &err);
}
