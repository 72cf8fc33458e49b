/* Helpers shared by server and client: clock, network namespace, addresses. */
#ifndef NETIO_NETUTIL_H
#define NETIO_NETUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* CLOCK_MONOTONIC in seconds. */
double wl_now(void);
/* Gbit/s of bytes over seconds (0 when no time passed). */
double wl_gbps(uint64_t bytes, double seconds);

/* setns(CLONE_NEWNET) into /var/run/netns/NAME. 0, or -1 with a reason in err. */
int wl_enter_netns(const char *name, char *err, size_t errlen);

/* Resolves addr (NULL with passive: 0.0.0.0) and port, IPv4 preferred.
 * 0, or -1 with a reason in err. */
int wl_resolve(const char *addr, int port, int passive, struct sockaddr_storage *ss,
	       socklen_t *len, char *err, size_t errlen);

/* "a.b.c.d:port" or "[v6]:port". */
void wl_format_addr(const struct sockaddr *sa, char *buf, size_t len);
/* Records "connection IDX: <message>" in buf unless an earlier error is already there (the
 * first error of a connection is the one worth reporting). Returns -1, for `return`. */
int wl_conn_error(char *buf, size_t len, unsigned idx, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The same for a connection c of either workload (its `error` and `idx`). */
#define conn_fail(c, ...) wl_conn_error((c)->error, sizeof((c)->error), (c)->idx, __VA_ARGS__)

#endif
