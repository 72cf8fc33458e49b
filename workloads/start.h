/* How netio-server and netio-client start: the opening both mains share. */
#ifndef NETIO_START_H
#define NETIO_START_H

#include "options.h"

/* "netio-server" or "netio-client", the prefix of every stderr line. */
const char *wl_prog(enum wl_role role);

/* Parses argv into o and ignores SIGPIPE (a peer that goes away is an error of the send or
 * recv, reported in the JSON). --help: the usage on stdout, exit 0; bad usage: one line on
 * stderr, exit 2. Returns only with good options. */
void wl_start(enum wl_role role, int argc, char **argv, struct wl_options *o);

/* Sets --cc NAME on fd, or exits 2 with one line when this kernel does not have it. */
void wl_require_cc(enum wl_role role, int fd, const char *cc);

/* Says `listening <port>` on stderr and, with --ready-fd, on that descriptor, then closes it:
 * a driver reading a pipe learns it without polling. */
void wl_say_listening(const struct wl_options *o, int port);

#endif
