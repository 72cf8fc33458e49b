/* MSG_ZEROCOPY bookkeeping.
 *
 * The kernel numbers every sendmsg(MSG_ZEROCOPY) that returns > 0 on a socket with a 32-bit
 * id (0, 1, 2, ... wrapping), and reports completions on the socket's error queue as ranges
 * lo..hi (SO_EE_ORIGIN_ZEROCOPY, ee_info = lo, ee_data = hi), flagged
 * SO_EE_CODE_ZEROCOPY_COPIED when the kernel copied the data after all. A buffer may be
 * written or freed only once every send that used it has completed: the tracker maps each
 * in-flight id to the ring slot (message) it sent from and counts what each slot still waits
 * for. */
#ifndef NETIO_ZEROCOPY_H
#define NETIO_ZEROCOPY_H

#include <stdint.h>

struct wl_zc_counters {
	uint64_t sends;          /* successful MSG_ZEROCOPY sendmsg calls (ids used) */
	uint64_t completions;    /* ids inside every reported range */
	uint64_t copied;         /* ids inside ranges flagged COPIED */
	uint64_t notifications;  /* ranges read from the error queue */
	uint64_t unexpected;     /* reported ids that were not in flight (duplicates, strays) */
};

struct wl_zc_tracker {
	uint32_t next_id;        /* id of the next successful send */
	uint32_t oldest;         /* lowest id not completed yet (== next_id: none in flight) */
	uint32_t cap, mask;      /* id window, a power of two */
	int32_t *id_slot;        /* slot of each in-flight id, -1 once completed */
	uint32_t nslots;
	uint32_t *pending;       /* in-flight ids per slot */
	struct wl_zc_counters c;
};

/* Ids inside the range lo..hi, inclusive, with 32-bit wrap-around (1 .. 2^32). */
static inline uint64_t wl_zc_range_len(uint32_t lo, uint32_t hi)
{
	return (uint64_t)(uint32_t)(hi - lo) + 1;
}

/* id_cap is rounded up to a power of two; first_id is 0 for a fresh socket. 0 or -1. */
int wl_zc_init(struct wl_zc_tracker *t, uint32_t nslots, uint32_t id_cap, uint32_t first_id);
void wl_zc_free(struct wl_zc_tracker *t);

static inline uint32_t wl_zc_inflight(const struct wl_zc_tracker *t)
{
	return t->next_id - t->oldest;
}

static inline int wl_zc_window_full(const struct wl_zc_tracker *t)
{
	return wl_zc_inflight(t) >= t->cap;
}

static inline int wl_zc_slot_busy(const struct wl_zc_tracker *t, uint32_t slot)
{
	return t->pending[slot] != 0;
}

/* A send from slot returned > 0: it used the next id. The window must not be full. */
void wl_zc_sent(struct wl_zc_tracker *t, uint32_t slot);
/* The kernel reported lo..hi. Returns the number of in-flight ids it completed. */
uint64_t wl_zc_complete(struct wl_zc_tracker *t, uint32_t lo, uint32_t hi, int copied);

/* setsockopt(SO_ZEROCOPY, 1). 0 or -1 with errno. */
int wl_zc_enable(int fd);
/* Reads every notification queued on fd's error queue without blocking.
 * Returns the number read, or -1 with errno (EPROTO for an error-queue message that is not
 * a zerocopy notification). */
int wl_zc_drain(int fd, struct wl_zc_tracker *t);
/* Waits up to timeout_ms for the error queue, then drains it. Returns the number of
 * notifications read (0: timed out), or -1 with errno (also for a socket error). */
int wl_zc_wait(int fd, struct wl_zc_tracker *t, int timeout_ms);

#endif
