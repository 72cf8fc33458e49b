#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sysctl.h"
#include "uring.h"

static int ring_error(int r, char *err, size_t errlen)
{
	/* kernel.io_uring_disabled (6.6+): 0 allowed, 1 only for its group, 2 for nobody */
	int disabled = sysctl_read_int("kernel/io_uring_disabled");

	if (r == -ENOSYS)
		snprintf(err, errlen, "io_uring is not available in this kernel");
	else if (r == -EPERM && disabled > 0)
		snprintf(err, errlen, "io_uring is disabled on this machine "
			 "(kernel.io_uring_disabled = %d)", disabled);
	else
		snprintf(err, errlen, "cannot create an io_uring: %s", strerror(-r));
	return -1;
}

/* A SEND_ZC asking for the usage report: a kernel that does not know the flag refuses it when
 * preparing the request (EINVAL), before the socket is looked at. */
static int report_usage_known(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	char byte = 0;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), res;

	if (fd < 0)
		return -1;
	sqe = io_uring_get_sqe(ring);
	io_uring_prep_send_zc(sqe, fd, &byte, 1, 0, IORING_SEND_ZC_REPORT_USAGE);
	if (io_uring_submit_and_wait(ring, 1) < 0 || io_uring_wait_cqe(ring, &cqe) < 0) {
		close(fd);
		return -1;
	}
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	close(fd);
	return res != -EINVAL;
}

int wl_uring_check(int zc, char *err, size_t errlen)
{
	int op = zc ? IORING_OP_SENDMSG_ZC : IORING_OP_SENDMSG;
	struct io_uring_probe *probe;
	struct io_uring ring;
	int r = io_uring_queue_init(4, &ring, 0), ok;

	if (r < 0)
		return ring_error(r, err, errlen);
	probe = io_uring_get_probe_ring(&ring);
	ok = probe && io_uring_opcode_supported(probe, op);
	if (probe)
		io_uring_free_probe(probe);
	if (!ok) {
		snprintf(err, errlen, "this kernel's io_uring has no %s (Linux %s)",
			 zc ? "IORING_OP_SENDMSG_ZC" : "IORING_OP_SENDMSG", zc ? "6.1+" : "5.3+");
		io_uring_queue_exit(&ring);
		return -1;
	}
	if (zc && report_usage_known(&ring) != 1) {
		snprintf(err, errlen, "this kernel's io_uring does not report whether a zero-copy "
			 "send was copied (IORING_SEND_ZC_REPORT_USAGE, Linux 6.2+)");
		io_uring_queue_exit(&ring);
		return -1;
	}
	io_uring_queue_exit(&ring);
	return 0;
}

int wl_uring_init(struct wl_uring *u, int zc, unsigned inflight)
{
	struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE };
	int r;

	memset(u, 0, sizeof(*u));
	u->zc = zc;
	/* room for every notification in flight and the result of the send */
	p.cq_entries = inflight + 8;
	r = io_uring_queue_init_params(8, &u->ring, &p);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	u->ready = 1;
	return 0;
}

void wl_uring_free(struct wl_uring *u)
{
	if (u->ready)
		io_uring_queue_exit(&u->ring);
	u->ready = 0;
}

/* A notification: the kernel let go of the pages of send id. */
static void notified(struct wl_zc_tracker *t, const struct io_uring_cqe *cqe)
{
	uint32_t id = (uint32_t)cqe->user_data;

	wl_zc_complete(t, id, id, !!((uint32_t)cqe->res & IORING_NOTIF_USAGE_ZC_COPIED));
}

int wl_uring_sendmsg(struct wl_uring *u, int fd, const struct iovec *iov, size_t cnt,
		     struct wl_zc_tracker *t, int *res, int *more)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t id = u->zc ? t->next_id : 0;
	int r;

	if (!sqe) {
		errno = EBUSY;
		return -1;
	}
	memcpy(u->iov, iov, cnt * sizeof(*iov));
	u->mh = (struct msghdr){ .msg_iov = u->iov, .msg_iovlen = cnt };
	if (u->zc) {
		io_uring_prep_sendmsg_zc(sqe, fd, &u->mh, MSG_NOSIGNAL);
		sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
	} else {
		io_uring_prep_sendmsg(sqe, fd, &u->mh, MSG_NOSIGNAL);
	}
	io_uring_sqe_set_data64(sqe, id);
	r = io_uring_submit(&u->ring);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	for (;;) {
		struct io_uring_cqe *cqe;

		r = io_uring_wait_cqe(&u->ring, &cqe);
		if (r == -EINTR)
			continue;
		if (r < 0) {
			errno = -r;
			return -1;
		}
		if (cqe->flags & IORING_CQE_F_NOTIF) {
			notified(t, cqe);
			io_uring_cqe_seen(&u->ring, cqe);
			continue;
		}
		*res = cqe->res;
		*more = !!(cqe->flags & IORING_CQE_F_MORE);
		io_uring_cqe_seen(&u->ring, cqe);
		return 0;
	}
}

int wl_uring_reap(struct wl_uring *u, struct wl_zc_tracker *t, int timeout_ms)
{
	struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000,
					.tv_nsec = (long long)(timeout_ms % 1000) * 1000000 };
	struct io_uring_cqe *cqe;
	int n = 0, r;

	r = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
	if (r == -ETIME || r == -EINTR)
		return 0;
	if (r < 0) {
		errno = -r;
		return -1;
	}
	while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		if (!(cqe->flags & IORING_CQE_F_NOTIF)) {
			/* only notifications are outstanding between sends */
			io_uring_cqe_seen(&u->ring, cqe);
			errno = EPROTO;
			return -1;
		}
		notified(t, cqe);
		io_uring_cqe_seen(&u->ring, cqe);
		n++;
	}
	return n;
}
