/* take_up_to: how two flushes of one thread's counts, its own and the tracer's iterator, take
 * each event once (thread_storage.bpf.h, send_run.bpf.h). */
#ifndef NETIO_FLUSH_TAKE_H
#define NETIO_FLUSH_TAKE_H

#include "maps.bpf.h"

/* What a counter read as `now` adds to what the flushes took of it (*taken), which becomes
 * now; 0 where a racing flush read it later and took as much or more. By compare-and-exchange:
 * with a plain exchange the flush that read less set *taken back and took a wrapped
 * difference, right in sum only until a later flush, and there is none after the exit's. Two
 * flushes of a thread at most run at once (its own, at its exit or after a spilled event, and
 * the tracer's iterator), each taking a word once, so a second try always settles it; a drop,
 * counted, otherwise. Straight-line, not a loop: it is inlined for every word a flush takes,
 * in programs that run cold (a thread's exit). */
static __always_inline u64 take_up_to(u64 *taken, u64 now)
{
	u64 old = *(volatile u64 *)taken, seen;

	if (old >= now)
		return 0;
	seen = __sync_val_compare_and_swap(taken, old, now);
	if (seen == old)
		return now - old;
	if (seen >= now)
		return 0;	/* the other flush took more */
	old = seen;
	seen = __sync_val_compare_and_swap(taken, old, now);
	if (seen == old)
		return now - old;
	if (seen < now)
		count_event(CNT_DROP_THREAD_STORAGE);
	return 0;
}

#endif
