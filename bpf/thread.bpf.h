/* The state of each followed thread, in the build the kernel allows (compat.bpf.h):
 * thread_storage.bpf.h (task-local storage, counts flushed to the process) or
 * thread_hash.bpf.h (a hash by thread id, counts straight into the process). Both give:
 *   followed_thread(task)  the state of current if its process is followed (made if missing)
 *   thread_state(task)     the state of current if it has one
 *   ending_thread(task)    the state of current's call at a syscall's end
 *   thread_counts_of(st)   where its events count (NULL: a drop)
 *   thread_counted(st, t)  after an event
 *   thread_spilled(st)     the state lasts this event only (its call waits in thread_pending)
 *   thread_sc_touched(st, c) its counts of syscall class c were written
 *   thread_flush(t, iter)  at the thread's exit, or from the tracer's iterator
 *   thread_hist_count(st, c, s)  a timed call of class c ended in histogram slot s
 * and sc_finish below, the end of a traced call. */
#ifndef NETIO_THREAD_H
#define NETIO_THREAD_H

#include "maps.bpf.h"

#ifdef NETIO_COMPAT
#include "thread_hash.bpf.h"
#else
#include "thread_storage.bpf.h"
#endif

/* task_state.ts of a traced call that is counted but not timed (--latency-sample): no clock
 * read at either end (what the clock reads cost: bench/NOTES.md). */
#define NETIO_UNTIMED 1

/* The thread's traced call ends with return value ret: its class statistics, and its
 * histogram slot (thread_hist_count) if it was timed. */
static __always_inline void sc_finish(struct task_state *st, long ret)
{
	u64 start = st->ts, now, delta;
	struct thread_counts *c;
	u32 cls = st->cls, slot;
	struct sc_counts *s;

	st->ts = 0;
	if (cls >= SC_NR_CLASSES)
		return;
	c = thread_counts_of(st);
	if (!c)
		return;
	s = &c->sc[cls];
	thread_sc_touched(st, cls);
	if (!sc_counted_at_enter(cls))
		COUNT_ADD(s->count, 1);
	if (ret < 0)
		COUNT_ADD(s->errors, 1);
	else if (cls != SC_POLL && cls != SC_EPOLL_WAIT)
		COUNT_ADD(s->bytes, ret);
	if (start == NETIO_UNTIMED)
		return;
	now = bpf_ktime_get_ns();
	delta = now > start ? now - start : 0;
	COUNT_ADD(s->total_ns, delta);
	slot = log2_slot(delta);
	if (slot >= NETIO_HIST_SLOTS)
		slot = NETIO_HIST_SLOTS - 1;
	thread_hist_count(st, cls, slot);
}

#endif
