/* The client's receive strategies (--receive): how one connection's bytes reach it, and what
 * became of each byte (copied to user memory, mapped, discarded, spliced). */
#ifndef NETIO_RECEIVE_H
#define NETIO_RECEIVE_H

#include <stddef.h>
#include <stdint.h>

#include "message.h"
#include "options.h"

struct json;

/* What became of the bytes received; their sum is the connection's bytes. */
struct wl_rx_bytes {
	uint64_t copied;	/* copied into user memory (recv, the mmap copy buffer and reads) */
	uint64_t mapped;	/* mapped into user memory by TCP_ZEROCOPY_RECEIVE, not copied */
	uint64_t discarded;	/* dropped by recv(MSG_TRUNC) */
	uint64_t spliced;	/* moved socket -> pipe -> /dev/null by splice(2) */
};

struct wl_receiver {
	enum wl_receive how;
	int fd;
	uint8_t *buf;		/* copy: recv's buffer; mmap: recv_skip_hint reads */
	size_t bufsize;
	uint8_t *copybuf;	/* mmap: TCP_ZEROCOPY_RECEIVE's copy buffer (under a page) */
	size_t copybuf_len;
	void *map;		/* mmap: the socket's mapping */
	size_t map_len;
	int pipe[2];		/* splice */
	int devnull;
	struct wl_verifier *verify;	/* NULL without --verify */
	struct wl_rx_bytes rx;
	uint64_t calls;		/* receive calls: recv, getsockopt and splice from the socket */
	uint64_t zc_calls;	/* mmap: TCP_ZEROCOPY_RECEIVE calls */
	uint64_t skip_reads;	/* mmap: recv() calls that read what recv_skip_hint said */
	uint32_t rcv_mss;	/* tcpi_rcv_mss at the end (0: unknown) */
};

/* Whether this kernel has TCP_ZEROCOPY_RECEIVE: 1, or 0 with the reason in why. */
int wl_zerocopy_receive_supported(char *why, size_t len);
/* The buffers of r->how (before connecting, so that nothing faults in while timed). 0, or -1
 * with the reason in err. */
int wl_receiver_init(struct wl_receiver *r, enum wl_receive how, size_t bufsize,
		     struct wl_verifier *verify, char *err, size_t errlen);
/* The socket's own setup (mmap's mapping), once connected. 0, or -1 with the reason. */
int wl_receiver_attach(struct wl_receiver *r, int fd, char *err, size_t errlen);
/* Receives once: the bytes received (> 0), 0 at the end of the stream, -1 with errno. */
long wl_receive_once(struct wl_receiver *r);
uint64_t wl_rx_total(const struct wl_rx_bytes *b);
void wl_rx_add(struct wl_rx_bytes *sum, const struct wl_rx_bytes *b);
/* "received": {copied, mapped, discarded, spliced} */
void wl_rx_json(struct json *w, const struct wl_rx_bytes *b);
void wl_receiver_free(struct wl_receiver *r);

#endif
