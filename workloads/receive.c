/* The client's receive strategies: see receive.h and docs/workloads.md ("Receive strategies").
 * Each one counts its bytes by what became of them; --verify checks every byte that reaches
 * user memory (copied or mapped), in stream order. */
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "receive.h"

/* The socket's mapping: TCP_ZEROCOPY_RECEIVE maps at most this much per call (the kernel's
 * tcp_mmap selftest maps 512 KiB chunks too). */
#define MAP_CHUNK   (512u << 10)
/* splice's pipe: room for a 64 KiB read in 4 KiB pages (the default pipe has 16 slots) */
#define PIPE_BYTES  (256u << 10)

static long page_size(void)
{
	static long ps;

	if (!ps)
		ps = sysconf(_SC_PAGESIZE);
	return ps;
}

int wl_zerocopy_receive_supported(char *why, size_t len)
{
	struct tcp_zerocopy_receive zc;
	socklen_t zl = sizeof(zc);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r, e;

	if (fd < 0) {
		snprintf(why, len, "socket: %s", strerror(errno));
		return 0;
	}
	/* on a socket never connected it maps nothing and returns 0 where the kernel has it */
	memset(&zc, 0, sizeof(zc));
	r = getsockopt(fd, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &zc, &zl);
	e = errno;
	close(fd);
	if (r != 0) {
		snprintf(why, len, "TCP_ZEROCOPY_RECEIVE: %s (Linux 4.18+)", strerror(e));
		return 0;
	}
	/* the kernel answers with the struct it knows: before 5.11 without the copy buffer,
	 * where data under a page is left for recv_skip_hint alone */
	if (zl < offsetof(struct tcp_zerocopy_receive, copybuf_len) + sizeof(zc.copybuf_len)) {
		snprintf(why, len, "TCP_ZEROCOPY_RECEIVE has no copy buffer here (Linux 5.11+)");
		return 0;
	}
	return 1;
}

int wl_receiver_init(struct wl_receiver *r, enum wl_receive how, size_t bufsize,
		     struct wl_verifier *verify, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->how = how;
	r->fd = r->devnull = r->pipe[0] = r->pipe[1] = -1;
	r->verify = verify;
	r->bufsize = bufsize;
	r->buf = malloc(bufsize);
	/* under a page: TCP_ZEROCOPY_RECEIVE copies into it whenever what is queued fits, so a
	 * bigger one would take what could be mapped */
	r->copybuf_len = (size_t)page_size() - 1;
	r->copybuf = how == RECV_MMAP ? malloc(r->copybuf_len) : NULL;
	if (!r->buf || (how == RECV_MMAP && !r->copybuf)) {
		snprintf(err, errlen, "cannot allocate %zu bytes", bufsize);
		return -1;
	}
	memset(r->buf, 0, bufsize);   /* fault it in before the clock starts */
	if (r->copybuf)
		memset(r->copybuf, 0, r->copybuf_len);
	if (how != RECV_SPLICE)
		return 0;
	if (pipe2(r->pipe, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	fcntl(r->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);	/* a smaller pipe still works */
	r->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (r->devnull < 0) {
		snprintf(err, errlen, "/dev/null: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int wl_receiver_attach(struct wl_receiver *r, int fd, char *err, size_t errlen)
{
	r->fd = fd;
	if (r->how != RECV_MMAP)
		return 0;
	r->map_len = MAP_CHUNK;
	r->map = mmap(NULL, r->map_len, PROT_READ, MAP_SHARED, fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		snprintf(err, errlen, "mmap of the socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void verify(struct wl_receiver *r, const void *p, size_t n)
{
	if (r->verify && n)
		wl_verifier_feed(r->verify, p, n);
}

/* recv() into the buffer, up to max bytes: counted as copied. */
static long recv_copy(struct wl_receiver *r, size_t max)
{
	ssize_t n = recv(r->fd, r->buf, max < r->bufsize ? max : r->bufsize, 0);

	r->calls++;
	if (n > 0) {
		r->rx.copied += (uint64_t)n;
		verify(r, r->buf, (size_t)n);
	}
	return n;
}

static long recv_discard(struct wl_receiver *r)
{
	/* TCP with MSG_TRUNC: the bytes are dropped from the queue, the buffer untouched */
	ssize_t n = recv(r->fd, r->buf, r->bufsize, MSG_TRUNC);

	r->calls++;
	if (n > 0)
		r->rx.discarded += (uint64_t)n;
	return n;
}

/* splice socket -> pipe, then pipe -> /dev/null until the pipe is empty. */
static long recv_splice(struct wl_receiver *r)
{
	ssize_t n = splice(r->fd, NULL, r->pipe[1], NULL, r->bufsize, SPLICE_F_MOVE);
	ssize_t left = n;

	r->calls++;
	while (left > 0) {
		ssize_t m = splice(r->pipe[0], NULL, r->devnull, NULL, (size_t)left, SPLICE_F_MOVE);

		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			return -1;
		left -= m;
	}
	if (n > 0)
		r->rx.spliced += (uint64_t)n;
	return n;
}

/* One TCP_ZEROCOPY_RECEIVE: pages mapped, or a little copied into the copy buffer; then what
 * recv_skip_hint says cannot be mapped (it does not start or end on a page) read by recv().
 * The stream's end: EIO, then recv() says 0. Returns the bytes (0: nothing queued yet). */
static long zc_receive_once(struct wl_receiver *r)
{
	struct tcp_zerocopy_receive zc;
	socklen_t zl = sizeof(zc);
	long got = 0, n;

	memset(&zc, 0, sizeof(zc));
	zc.address = (uint64_t)(uintptr_t)r->map;
	zc.length = (uint32_t)r->map_len;
	zc.copybuf_address = (uint64_t)(uintptr_t)r->copybuf;
	zc.copybuf_len = (int32_t)r->copybuf_len;
	r->calls++;
	r->zc_calls++;
	if (getsockopt(r->fd, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &zc, &zl) < 0) {
		if (errno != EIO)
			return -1;
		n = recv_copy(r, r->bufsize);	/* 0 at the end of the stream */
		return n == 0 ? -2 : n;
	}
	/* an older kernel knows a shorter struct (5.10: no copy buffer) and says so in zl: the
	 * fields it did not write are not answers */
	if (zl < sizeof(zc))
		memset((char *)&zc + zl, 0, sizeof(zc) - zl);
	if (zc.err) {
		errno = zc.err < 0 ? -zc.err : zc.err;
		return -1;
	}
	if (zc.copybuf_len < 0) {
		errno = -zc.copybuf_len;
		return -1;
	}
	if (zc.length) {
		r->rx.mapped += zc.length;
		verify(r, r->map, zc.length);
		got += zc.length;
	}
	if (zc.copybuf_len > 0) {
		r->rx.copied += (uint64_t)zc.copybuf_len;
		verify(r, r->copybuf, (size_t)zc.copybuf_len);
		got += zc.copybuf_len;
	}
	if (zc.recv_skip_hint) {
		r->skip_reads++;
		n = recv_copy(r, zc.recv_skip_hint);
		if (n < 0)
			return -1;
		got += n;
	}
	return got;
}

/* Until some bytes came (or the end, or an error): when nothing is queued, poll() waits for
 * bytes or the end without taking any (a MSG_PEEK would copy one). */
static long recv_mmap(struct wl_receiver *r)
{
	for (;;) {
		long n = zc_receive_once(r);
		struct pollfd p = { .fd = r->fd, .events = POLLIN };

		if (n == -2)
			return 0;
		if (n != 0)
			return n;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

long wl_receive_once(struct wl_receiver *r)
{
	switch (r->how) {
	case RECV_DISCARD:
		return recv_discard(r);
	case RECV_MMAP:
		return recv_mmap(r);
	case RECV_SPLICE:
		return recv_splice(r);
	default:
		return recv_copy(r, r->bufsize);
	}
}

uint64_t wl_rx_total(const struct wl_rx_bytes *b)
{
	return b->copied + b->mapped + b->discarded + b->spliced;
}

void wl_rx_add(struct wl_rx_bytes *sum, const struct wl_rx_bytes *b)
{
	sum->copied += b->copied;
	sum->mapped += b->mapped;
	sum->discarded += b->discarded;
	sum->spliced += b->spliced;
}

void wl_rx_json(struct json *w, const struct wl_rx_bytes *b)
{
	json_key(w, "received");
	json_begin_object(w);
	json_kv_uint(w, "copied", b->copied);
	json_kv_uint(w, "mapped", b->mapped);
	json_kv_uint(w, "discarded", b->discarded);
	json_kv_uint(w, "spliced", b->spliced);
	json_end_object(w);
}

void wl_receiver_free(struct wl_receiver *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	for (int i = 0; i < 2; i++)
		if (r->pipe[i] >= 0)
			close(r->pipe[i]);
	if (r->devnull >= 0)
		close(r->devnull);
	free(r->buf);
	free(r->copybuf);
	r->buf = r->copybuf = NULL;
	r->map = NULL;
}
