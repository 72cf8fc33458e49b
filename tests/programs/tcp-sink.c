/* tcp-sink: one TCP connection, received until the peer closes it, counted by itself.
 *
 *   tcp-sink --port P [--addr A] [--connect] [--netns NAME] [--ready-fd FD] [--timeout S]
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

#define SINK_BUF (64 << 10)

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
}

/* The connection: accepted (after the listening line), or connected with retries. */
static int open_connection(struct sockaddr_in *a, bool do_connect, unsigned long long ready_fd,
			   int *port, const char **what)
{
	socklen_t len = sizeof(*a);
	int one = 1, lfd, c;

	if (do_connect) {
		for (double end = now_s() + 5;; usleep(10000)) {
			c = socket(AF_INET, SOCK_STREAM, 0);
			if (c >= 0 && connect(c, (struct sockaddr *)a, sizeof(*a)) == 0)
				return c;
			*what = "connect";
			if (c < 0 || errno != ECONNREFUSED || now_s() > end)
				return -1;
			close(c);
		}
	}
	*what = "listen";
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)a, &len) < 0)
		return -1;
	*port = ntohs(a->sin_port);
	say_ready(ready_fd, "listening %d", *port);
	fprintf(stderr, "listening %d\n", *port);
	*what = "accept";
	c = accept(lfd, NULL, NULL);
	close(lfd);
	return c;
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, ready_fd = 0, timeout = 60, bytes = 0, calls = 0;
	const char *addr = "0.0.0.0", *netns = NULL, *what = NULL;
	bool do_connect = false;
	struct opt opts[] = {
		OPT_STR_("addr", &addr, false),
		OPT_NUM_("port", &port, 0, 65535, true),
		OPT_FLAG_("connect", &do_connect),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("ready-fd", &ready_fd, 3, 1023, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in a;
	int fd, bound, err = 0;
	char *buf = malloc(SINK_BUF);
	double t0;

	prog_name = "tcp-sink";
	parse_options(opts, argc, argv);
	if (do_connect && !port)
		usage_error("--connect needs a --port of 1..65535");
	a = ipv4_addr(addr, port);
	bound = (int)port;
	enter_netns(netns);
	if (!buf) {
		fprintf(stderr, "tcp-sink: out of memory\n");
		return 1;
	}
	/* a peer that never comes or never closes: the blocked call fails with EINTR */
	sigaction(SIGALRM, &(struct sigaction){ .sa_handler = on_alarm }, NULL);
	alarm((unsigned)timeout);
	fd = open_connection(&a, do_connect, ready_fd, &bound, &what);
	t0 = now_s();
	if (fd < 0)
		err = errno;
	while (fd >= 0) {
		ssize_t n = recv(fd, buf, SINK_BUF, 0);

		calls++;
		if (n > 0) {
			bytes += (unsigned long long)n;
			continue;
		}
		if (n < 0 && errno == EINTR && !timed_out)
			continue;
		if (n < 0) {
			what = "recv";
			err = errno;
		}
		break;
	}
	printf("{\"program\":\"tcp-sink\",\"port\":%d,\"bytes\":%llu,\"recv_calls\":%llu,"
	       "\"seconds\":%.6f,", bound, bytes, calls, now_s() - t0);
	json_str_or_null("error", error_text(err ? what : NULL, err), "}\n");
	return report_error(err ? what : NULL, err);
}
