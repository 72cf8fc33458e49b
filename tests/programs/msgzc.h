/* MSG_ZEROCOPY completions as a program reads them from its socket's error queue
 * (Documentation/networking/msg_zerocopy.rst): each send that returned > 0 takes the next id
 * (from 0); a notification covers the ids [ee_info, ee_data], with SO_EE_CODE_ZEROCOPY_COPIED
 * when the kernel copied the data after all. The account keeps each id's bytes, so that the
 * bytes left in user pages to the end and the bytes copied can be compared with the tracer's.
 * The account is the programs' own; the kernel's interface it reads (common/msg_zerocopy.h)
 * is the one the workloads read too. Shared by udp-sender.c and tcp-zc-late.c. */
#ifndef NETIO_TEST_MSGZC_H
#define NETIO_TEST_MSGZC_H

#include <poll.h>

#include "msg_zerocopy.h"

struct zc_account {
	unsigned long long *bytes;	/* of each id */
	unsigned long long cap;		/* ids the array holds */
	unsigned long long sends;	/* ids given out */
	unsigned long long notifications;	/* error-queue messages read */
	unsigned long long completed;	/* ids they covered */
	unsigned long long copied;	/* of those, in notifications marked COPIED */
	unsigned long long zc_bytes;	/* bytes of ids not marked COPIED: user pages to the end */
	unsigned long long copied_bytes;	/* bytes of ids marked COPIED */
	unsigned long long unexpected;	/* ids outside [0, sends), or covered twice */
	unsigned long long other_errors;	/* error-queue messages of another origin */
	unsigned char *done;		/* each id, once covered */
};

static inline int zc_account_init(struct zc_account *a, unsigned long long cap)
{
	memset(a, 0, sizeof(*a));
	a->bytes = calloc(cap ? cap : 1, sizeof(*a->bytes));
	a->done = calloc(cap ? cap : 1, 1);
	a->cap = cap;
	return a->bytes && a->done ? 0 : -1;
}

/* A send of n > 0 bytes took the next id. */
static inline void zc_sent(struct zc_account *a, unsigned long long n)
{
	if (a->sends < a->cap)
		a->bytes[a->sends] = n;
	a->sends++;
}

static inline void zc_cover(struct zc_account *a, unsigned lo, unsigned hi, bool copied)
{
	if (hi < lo || hi - lo >= a->cap) {	/* no range this program's ids can make */
		a->unexpected++;
		return;
	}
	for (unsigned long long id = lo; id <= hi; id++) {
		if (id >= a->sends || id >= a->cap || a->done[id]) {
			a->unexpected++;
			continue;
		}
		a->done[id] = 1;
		a->completed++;
		if (copied) {
			a->copied++;
			a->copied_bytes += a->bytes[id];
		} else {
			a->zc_bytes += a->bytes[id];
		}
	}
}

/* Read every notification queued now (never blocks). -1 on an unexpected error. */
static inline int zc_drain(int fd, struct zc_account *a)
{
	for (;;) {
		char control[128];
		struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
		struct cmsghdr *cm;

		if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		a->notifications++;
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct sock_extended_err serr;

			if (!cmsg_recverr(cm, &serr))
				continue;
			if (!is_zc_completion(&serr)) {
				a->other_errors++;
				continue;
			}
			zc_cover(a, serr.ee_info, serr.ee_data,
				 serr.ee_code & SO_EE_CODE_ZEROCOPY_COPIED);
		}
	}
}

/* Drain until every id is covered, sleeping in poll() for POLLERR; -1 after timeout_s. */
static inline int zc_wait_all(int fd, struct zc_account *a, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = 0 };

		if (zc_drain(fd, a) < 0)
			return -1;
		if (a->completed + a->unexpected >= a->sends)
			return 0;
		if (now_s() > deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		poll(&p, 1, 10);
	}
}

static inline void zc_print(const struct zc_account *a, const char *sep)
{
	printf("\"zerocopy\":{\"sends\":%llu,\"notifications\":%llu,\"completed\":%llu,"
	       "\"copied\":%llu,\"zc_bytes\":%llu,\"copied_bytes\":%llu,\"unexpected\":%llu,"
	       "\"other_errors\":%llu}%s", a->sends, a->notifications, a->completed, a->copied,
	       a->zc_bytes, a->copied_bytes, a->unexpected, a->other_errors, sep);
}

#endif
