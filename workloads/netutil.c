#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netutil.h"

double wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int wl_enter_netns(const char *name, char *err, size_t errlen)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "--netns %s: cannot open %s: %s", name, path, strerror(errno));
		return -1;
	}
	if (setns(fd, CLONE_NEWNET) < 0) {
		snprintf(err, errlen, "--netns %s: setns: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int wl_resolve(const char *addr, int port, int passive, struct sockaddr_storage *ss,
	       socklen_t *len, char *err, size_t errlen)
{
	struct addrinfo hints = { 0 }, *res, *ai, *pick = NULL;
	char portstr[16];
	int r;

	if (!addr && passive) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		memset(ss, 0, sizeof(*ss));
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
		sin->sin_port = htons((unsigned short)port);
		*len = sizeof(*sin);
		return 0;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	r = getaddrinfo(addr, portstr, &hints, &res);
	if (r != 0) {
		snprintf(err, errlen, "--addr %s: %s", addr, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET) {
			pick = ai;
			break;
		}
	if (!pick)
		pick = res;
	memcpy(ss, pick->ai_addr, pick->ai_addrlen);
	*len = pick->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

void wl_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%d", host, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%d", host, ntohs(s4->sin_port));
	}
}

double wl_gbps(uint64_t bytes, double seconds)
{
	return seconds > 0 ? (double)bytes * 8 / seconds / 1e9 : 0.0;
}

int wl_conn_error(char *buf, size_t len, unsigned idx, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (buf[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(buf, len, "connection %u: %s", idx, msg);
	return -1;
}
