/* The opening netio-server and netio-client share: see start.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "start.h"
#include "tcp_stats.h"

const char *wl_prog(enum wl_role role)
{
	return role == WL_SERVER ? "netio-server" : "netio-client";
}

void wl_start(enum wl_role role, int argc, char **argv, struct wl_options *o)
{
	char err[300];
	int r = wl_options_parse(role, argc, argv, o, err, sizeof(err));

	if (r == 1) {
		fputs(wl_usage(role), stdout);
		exit(0);
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s (try --help)\n", wl_prog(role), err);
		exit(2);
	}
	signal(SIGPIPE, SIG_IGN);
}

void wl_require_cc(enum wl_role role, int fd, const char *cc)
{
	if (cc && wl_tcp_set_cc(fd, cc) < 0) {
		fprintf(stderr, "%s: --cc %s: not available here (%s)\n", wl_prog(role), cc,
			strerror(errno));
		exit(2);
	}
}

void wl_say_listening(const struct wl_options *o, int port)
{
	fprintf(stderr, "listening %d\n", port);
	if (o->ready_fd >= 0) {
		dprintf(o->ready_fd, "listening %d\n", port);
		close(o->ready_fd);
	}
}
