#include <errno.h>
#include <time.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "msg_zerocopy.h"
#include "zerocopy.h"

int wl_zc_init(struct wl_zc_tracker *t, uint32_t nslots, uint32_t id_cap, uint32_t first_id)
{
	uint32_t cap = 1, i;

	memset(t, 0, sizeof(*t));
	if (nslots == 0 || id_cap == 0 || id_cap > (1u << 30)) {
		errno = EINVAL;
		return -1;
	}
	while (cap < id_cap)
		cap <<= 1;
	t->id_slot = malloc(sizeof(*t->id_slot) * cap);
	t->pending = calloc(nslots, sizeof(*t->pending));
	if (!t->id_slot || !t->pending) {
		wl_zc_free(t);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < cap; i++)
		t->id_slot[i] = -1;
	t->cap = cap;
	t->mask = cap - 1;
	t->nslots = nslots;
	t->next_id = t->oldest = first_id;
	return 0;
}

void wl_zc_free(struct wl_zc_tracker *t)
{
	free(t->id_slot);
	free(t->pending);
	t->id_slot = NULL;
	t->pending = NULL;
}

void wl_zc_sent(struct wl_zc_tracker *t, uint32_t slot)
{
	t->id_slot[t->next_id & t->mask] = (int32_t)slot;
	t->pending[slot]++;
	t->next_id++;
	t->c.sends++;
}

uint64_t wl_zc_complete(struct wl_zc_tracker *t, uint32_t lo, uint32_t hi, int copied)
{
	uint64_t len = wl_zc_range_len(lo, hi), in_window = 0, done = 0, k;
	uint32_t inflight = wl_zc_inflight(t);
	uint32_t ahead = lo - t->oldest;   /* where lo sits in the window */
	uint32_t behind = t->oldest - lo;  /* ids of the range before the window */
	uint32_t first = lo;

	t->c.notifications++;
	t->c.completions += len;
	if (copied)
		t->c.copied += len;

	if (ahead < inflight) {
		in_window = len < (uint64_t)(inflight - ahead) ? len : inflight - ahead;
	} else if (behind < len) {
		first = t->oldest;
		in_window = len - behind < inflight ? len - behind : inflight;
	}
	for (k = 0; k < in_window; k++) {
		int32_t *s = &t->id_slot[(first + (uint32_t)k) & t->mask];

		if (*s < 0)
			continue;         /* completed before: counted as unexpected below */
		t->pending[*s]--;
		*s = -1;
		done++;
	}
	t->c.unexpected += len - done;
	while (t->oldest != t->next_id && t->id_slot[t->oldest & t->mask] < 0)
		t->oldest++;
	return done;
}

int wl_zc_enable(int fd)
{
	int one = 1;

	return setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one));
}

int wl_zc_drain(int fd, struct wl_zc_tracker *t)
{
	int n = 0;

	for (;;) {
		char control[128];
		struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
		struct cmsghdr *cm;
		int found = 0;

		if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return n;
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (msg.msg_flags & MSG_CTRUNC) {
			errno = EMSGSIZE;
			return -1;
		}
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct sock_extended_err serr;

			if (!cmsg_recverr(cm, &serr) || !is_zc_completion(&serr))
				continue;
			wl_zc_complete(t, serr.ee_info, serr.ee_data,
				       !!(serr.ee_code & SO_EE_CODE_ZEROCOPY_COPIED));
			found = 1;
			n++;
		}
		if (!found) {
			errno = EPROTO;
			return -1;
		}
	}
}

int wl_zc_wait(int fd, struct wl_zc_tracker *t, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	int r, n, err;
	socklen_t len = sizeof(err);

	r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -1;
	if (r == 0)
		return 0;
	n = wl_zc_drain(fd, t);
	if (n != 0)
		return n;
	/* POLLERR without a notification: a socket error (the peer reset). */
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
		errno = err;
		return -1;
	}
	if (p.revents & (POLLHUP | POLLNVAL)) {
		errno = p.revents & POLLNVAL ? EBADF : EPIPE;
		return -1;
	}
	return 0;
}
