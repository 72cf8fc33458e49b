/* TCP for the test programs: a connection made or taken, and a buffer sent whole, counted.
 * Shared by tcp-sink.c, file-server.c, tcp-zc-late.c and uring-send-zc.c. */
#ifndef NETIO_TEST_STREAM_H
#define NETIO_TEST_STREAM_H

#include <sys/socket.h>

#include "progs.h"

/* A connection to a, retried every 10 ms for 5 s while refused (the peer may not listen
 * yet): its descriptor, or -1 (e has why). */
static inline int tcp_connect_retrying(const struct sockaddr_in *a, struct prog_error *e)
{
	for (double end = now_s() + 5;; usleep(10000)) {
		int fd = socket(AF_INET, SOCK_STREAM, 0), err;

		if (fd < 0)
			return fail(e, "socket");
		if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
			return fd;
		err = errno;
		close(fd);
		if (err != ECONNREFUSED || now_s() > end)
			return fail_with(e, "connect", err);
	}
}

/* Listens on a (its port filled in: 0 asks for any), says `listening PORT` (say_listening)
 * and takes one connection: its descriptor, or -1 (e has why). */
static inline int tcp_accept_one(struct sockaddr_in *a, unsigned long long ready_fd,
				 struct prog_error *e)
{
	socklen_t len = sizeof(*a);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), c;

	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)a, &len) < 0)
		return fail(e, "listen");
	say_listening(ready_fd, ntohs(a->sin_port));
	c = accept(lfd, NULL, NULL);
	if (c < 0)
		fail(e, "accept");
	close(lfd);
	return c;
}

/* The sends of one stream socket, and what they counted. */
struct stream_send {
	int fd, flags;
	double deadline;	/* ENOBUFS is retried until then (0: never) */
	unsigned long long bytes, calls, enobufs_retries;
	/* told of each send that took n > 0 bytes (MSG_ZEROCOPY: an id), when not NULL */
	void (*took)(void *ctx, unsigned long long n);
	void *ctx;
};

/* buf[0..len) sent whole: the rest of a short send in another call, EINTR retried, ENOBUFS
 * (MSG_ZEROCOPY notifications not read yet hold the socket's option memory) retried after a
 * millisecond until the deadline. 0, or -1 with errno. */
static inline int send_whole(struct stream_send *s, const char *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t r = send(s->fd, buf + off, len - off, s->flags);

		s->calls++;
		if (r < 0 && errno == ENOBUFS && now_s() < s->deadline) {
			s->enobufs_retries++;
			usleep(1000);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;	/* no progress, and no error of send(2)'s */
			return -1;
		}
		if (s->took)
			s->took(s->ctx, (unsigned long long)r);
		s->bytes += (unsigned long long)r;
		off += (size_t)r;
	}
	return 0;
}

#endif
