/* The io-uring and io-uring-zc strategies' ring.
 *
 * One send is in flight per connection at a time (two sends in flight on one stream socket may
 * complete out of order). io-uring sends with IORING_OP_SENDMSG from the message's own 8-field
 * iovec; io-uring-zc with IORING_OP_SENDMSG_ZC and IORING_SEND_ZC_REPORT_USAGE: its result
 * comes first, flagged IORING_CQE_F_MORE, then a notification (IORING_CQE_F_NOTIF) once the
 * kernel let go of the pages, whose res carries IORING_NOTIF_USAGE_ZC_COPIED when it copied
 * them after all. A buffer is reused only after its notification: sends take ids in the
 * MSG_ZEROCOPY tracker (zerocopy.h), carried as user_data, and each notification completes its
 * id exactly as an error-queue range of one would. */
#ifndef NETIO_URING_H
#define NETIO_URING_H

#include <stddef.h>
#include <stdint.h>
#include <liburing.h>

#include "message.h"
#include "uring_zc.h"
#include "zerocopy.h"

struct wl_uring {
	struct io_uring ring;
	int ready;
	int zc;
	struct msghdr mh;               /* the send in flight */
	struct iovec iov[WL_FIELDS];    /* its iovec (what is left of a message after a partial send) */
};

/* Can this kernel and machine run the strategy (zc: io-uring-zc)? 0, or -1 with one line in
 * err: io_uring disabled (kernel.io_uring_disabled) or missing, the operation unknown, or
 * (zc) IORING_SEND_ZC_REPORT_USAGE not understood (Linux 6.2+). */
int wl_uring_check(int zc, char *err, size_t errlen);

/* A ring whose completion queue holds inflight notifications. 0, or -1 with errno. */
int wl_uring_init(struct wl_uring *u, int zc, unsigned inflight);
void wl_uring_free(struct wl_uring *u);

/* Sends cnt entries of iov (copied: the caller's stay untouched) on fd and waits for the
 * result, handing the notifications met on the way to t (zc). id: the tracker id the send
 * takes (t->next_id); after a result flagged MORE the caller marks it sent. Returns the
 * result (bytes, or -errno) and sets *more. -1 with errno if the ring itself fails. */
int wl_uring_sendmsg(struct wl_uring *u, int fd, const struct iovec *iov, size_t cnt,
		     struct wl_zc_tracker *t, int *res, int *more);

/* Waits up to timeout_ms for notifications and hands them to t. Returns the number handled
 * (0: timed out), or -1 with errno. */
int wl_uring_reap(struct wl_uring *u, struct wl_zc_tracker *t, int timeout_ms);

#endif
