/* The state of each followed thread where the kernel has task-local storage (5.11) and the
 * rest this build needs (compat.bpf.h): a followed thread counts in its own storage, with no map
 * lookup on the send, receive and syscall paths, and its counts are flushed into its process's
 * tgid_stats when the thread exits and before every snapshot (flush.bpf.c). Only the thread
 * writes counts; only flushes write flushed, by compare-and-exchange (take_up_to), so that a
 * thread's exit and a snapshot flushing it at once add each event once. Included through
 * thread.bpf.h. */
#ifndef NETIO_THREAD_STORAGE_H
#define NETIO_THREAD_STORAGE_H

#include "maps.bpf.h"
#include "thread_spill.bpf.h"
#include "send_run.bpf.h"

/* A thread's own latency histograms: a timed call of one of its first two classes adds to
 * its storage, with no lookup, and the flushes take them to its process's tgid_hist; its
 * other classes' calls go there at once (hist_count). Most threads time one or two classes
 * (a send or a receive, and a poll), and the storage stays in the allocator's 2 KiB class. */
#define NETIO_THREAD_HISTS 2

/* Per thread of a followed process (task-local storage: no hash lookup, and absent for
 * threads never followed). sys_enter opens a traced call here; it ends where the kernel
 * marks its end: the socket layer's sock_send_length / sock_recv_length for send and receive
 * calls (one hook per call instead of sys_exit, which every syscall of the machine would pay),
 * sys_exit for the rest (poll, epoll_wait, sendfile), or for all of them on kernels without
 * those tracepoints. */
struct task_state {
	u64 ts;			/* start of the traced syscall in progress, 0 if none */
	u32 cls;		/* its class */
	s32 nr;			/* its syscall number (a socket event of an untraced syscall,
				 * sendmmsg or io_uring, must not end it) */
	u32 gen;		/* filter generation "followed" was decided at */
	u32 tgid;
	u32 followed;
	u16 untimed[SC_NR_CLASSES];	/* per class: calls since its last timed one
					 * (--latency-sample, syscalls.bpf.c) */
	u32 kfollowed;		/* kbase is being counted for tgid (flush_kernel_counts) */
	u32 active;		/* the thread had an event: it has counts to flush */
	u64 regs;		/* its saved user registers (copy_tp.bpf.c, thread_syscall_nr) */
	u64 zc_sk;		/* the zerocopy socket it last named its process's (note_zc_send) */
	u32 zc_gen;		/* zc_owner_gen then */
	u32 sock_slot1;		/* the record of the socket it last counted on, + 1 (copy_tp.bpf.c,
				 * sock_of_thread) */
	u32 tx_counted;		/* the call in progress sends on TCP/UDP: its bytes are tx_bytes
				 * (syscalls.bpf.c, EXIT_TX_BYTES) */
	u64 spill;		/* this is a CPU's thread_spill slot, held by the event (u64:
				 * exchanged atomically) */
	u32 sc_touched;		/* bit c: counts.sc[c] was written (thread_sc_touched), so that
				 * a flush reads only the classes the thread used */
	struct send_run run;	/* its plain sends on one socket not yet in its record */
	struct thread_counts counts;	/* written by the thread only */
	struct thread_counts flushed;	/* what flushes took of counts */
	struct kernel_counts kbase;	/* the kernel's counters already added (or left out) */
	/* The histograms of its first NETIO_THREAD_HISTS timed classes (thread_hist_count):
	 * class + 1 of each, in the order taken (0: free); bit s of hist_used[i]: slot s of
	 * hist[i] was counted in; hist[i][s] its calls not flushed yet. */
	u32 hist_cls[NETIO_THREAD_HISTS];
	u64 hist_used[NETIO_THREAD_HISTS];
	u64 hist[NETIO_THREAD_HISTS][NETIO_HIST_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_state SEC(".maps");

static __always_inline void read_kernel_counts(struct task_struct *task, struct kernel_counts *k)
{
	k->switches = task->nvcsw + task->nivcsw;
	k->migrations = task->se.nr_migrations;
	k->faults = task->min_flt + task->maj_flt;
	k->run_ns = task->se.sum_exec_runtime;
}

static __always_inline bool thread_storage_refused(void)
{
	u32 key = 1, *v = bpf_map_lookup_elem(&filter_gen, &key);

	return v && *v;
}

/* Moves the call kept for thread `task` (thread_pending) into st: its new storage, or a spill
 * slot. Of two takers at once (the tracer's iterator adopting the thread while one of its
 * events spills), the one whose delete removes the entry has it. Nothing if no call is kept,
 * or if it is older than the thread (an exited thread's of the same id). */
static __always_inline void take_pending_call(struct task_struct *task, struct task_state *st)
{
	u32 tid = TASK_READ(task, pid);
	struct pending_call *p = bpf_map_lookup_elem(&thread_pending, &tid), call;

	if (!p)
		return;
	call = *p;
	if (bpf_map_delete_elem(&thread_pending, &tid) || call.kept < TASK_READ(task, start_time))
		return;
	st->ts = call.ts;
	st->cls = call.cls;
	st->nr = call.nr;
	st->tx_counted = call.tx_counted;
}

/* At the end of a spilled event of `task` (current): the call it leaves in progress is kept for
 * the thread's next event (a drop, counted, where thread_pending is full). If the tracer's
 * iterator made the thread's storage meanwhile, the call goes there now: the iterator takes
 * kept calls after it makes a storage, and one of the two finds it. */
static __always_inline void keep_pending_call(struct task_struct *task, struct task_state *st)
{
	struct pending_call call = { .ts = st->ts, .cls = st->cls, .nr = st->nr,
				     .tx_counted = st->tx_counted };
	u32 tid = TASK_READ(task, pid);
	struct task_state *own;

	if (!call.ts)
		return;
	call.kept = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&thread_pending, &tid, &call, BPF_ANY)) {
		count_event(CNT_DROP_THREAD_STORAGE);
		return;
	}
	own = bpf_task_storage_get(&task_state, task, 0, 0);
	if (own)
		take_pending_call(task, own);
}

/* This CPU's thread_spill slot for an event of thread `task` (current) of tgid without
 * storage, or NULL (a drop) while another event holds it (one preempted on this CPU). It holds
 * the thread's call in progress (take_pending_call), and the next event takes it from there
 * (keep_pending_call), so that every call is counted and timed; its kernel counters are not
 * read: the slot lasts one event. */
static __always_inline struct task_state *spill_thread(struct task_struct *task, u32 tgid)
{
	u32 zero = 0;
	struct task_state *st = bpf_map_lookup_elem(&thread_spill, &zero);

	if (!st || __sync_lock_test_and_set(&st->spill, 1)) {
		count_event(CNT_DROP_THREAD_STORAGE);
		return NULL;
	}
	st->tgid = tgid;
	st->followed = 1;
	st->active = 1;
	st->ts = 0;
	st->regs = 0;		/* the last user's registers, another thread's */
	st->zc_sk = 0;
	st->sock_slot1 = 0;
	st->tx_counted = 0;
	take_pending_call(task, st);
	count_event(CNT_THREAD_SPILLED);
	return st;
}

/* Whether thread task of followed process tgid was born while its process was followed
 * (followed.bpf.h: since when): its kernel counters then count from zero, its birth. */
static __always_inline bool born_followed(struct task_struct *task, u32 tgid)
{
	u64 *since = bpf_map_lookup_elem(&followed_tgids, &tgid);

	return since && task->start_time >= *since;
}

/* task's storage for a thread of followed process tgid that had none: its kernel counters
 * are counted from its birth if it was born followed, else from now. Without storage an
 * event counts in the CPU's spill slot, and a thread found ahead of its events (`pid add`'s
 * iterator pass) that cannot get it gets it at its first event. */
static __always_inline struct task_state *adopt_thread(struct task_struct *task, u32 tgid,
						       bool event)
{
	struct task_state *st = NULL;

	if (!thread_storage_refused())
		st = bpf_task_storage_get(&task_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return event ? spill_thread(task, tgid) : NULL;
	st->gen = current_filter_gen();
	st->followed = 1;
	st->tgid = tgid;
	if (!born_followed(task, tgid))
		read_kernel_counts(task, &st->kbase);	/* new storage is zeroed: else from birth */
	st->kfollowed = 1;
	take_pending_call(task, st);	/* a call its events spilled in */
	return st;
}

/* The state of thread `task` if its process is followed, else NULL. `task` is current, from
 * the event's one bpf_get_current_task_btf() (a helper call each: passed on, not asked
 * again). A thread whose tgid's bucket is empty leaves first (surely_unfollowed). "Followed"
 * is cached in the task's storage and decided again when the filter generation changed.
 * The storage is created on a followed thread's first event, with its process's statistics
 * (named after the process, which is current here). */
static __always_inline struct task_state *followed_thread(struct task_struct *task)
{
	struct task_state *st;
	u32 gen, tgid;

	if (surely_unfollowed(TASK_READ(task, tgid)))
		return NULL;	/* most threads of a host: one load, no storage lookup */
	st = bpf_task_storage_get(&task_state, task, 0, 0);
	gen = current_filter_gen();
	if (st && st->gen == gen) {
		if (!st->followed)
			return NULL;
		if (!st->active)	/* adopted ahead of its events: a store once, not per event */
			st->active = 1;
		return st;
	}
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_followed(tgid)) {
		if (st) {
			st->gen = gen;
			st->followed = 0;
		}
		return NULL;	/* no storage is created for threads never followed */
	}
	if (!st) {
		st = adopt_thread(task, tgid, true);
		if (!st)
			return NULL;
		tgid_stats_try(tgid);	/* named now; made by the flush if not now */
		if (st->spill)
			return st;
	}
	st->gen = gen;
	st->followed = 1;
	st->tgid = tgid;
	st->active = 1;
	return st;
}

#define NETIO_PF_EXITING 0x00000004

static __always_inline u64 flush_one(u64 *count, u64 *flushed)
{
	return take_up_to(flushed, *(volatile u64 *)count);
}

struct flush_ctx {
	u64 *from, *done, *to;
	u32 classes;		/* the classes of the thread's sc_touched not flushed yet */
};

#define NETIO_COUNT_WORDS (sizeof(struct thread_counts) / 8)
#define NETIO_PROC_WORDS (sizeof(struct proc_stats) / 8)
#define NETIO_SC_WORDS (sizeof(struct sc_counts) / 8)

/* Word i of the thread's counts: what it counted since the last flush goes to its process.
 * Compared first, with plain loads: most words never change, and those cost no atomic. */
static __always_inline void flush_word(struct flush_ctx *c, u32 i)
{
	u64 d;

	asm volatile("" : "+r"(i));	/* the bound below is the verifier's: kept */
	if (i >= NETIO_COUNT_WORDS || *(volatile u64 *)&c->from[i] == c->done[i])
		return;
	d = flush_one(&c->from[i], &c->done[i]);
	if (d)
		__sync_fetch_and_add(&c->to[i], d);
}

/* The number of bits set in v (no popcount instruction in BPF, and no branch: one path to
 * verify). */
static __always_inline u32 bits_set(u32 v)
{
	v = v - ((v >> 1) & 0x55555555);
	v = (v & 0x33333333) + ((v >> 2) & 0x33333333);
	return (((v + (v >> 4)) & 0x0f0f0f0f) * 0x01010101) >> 24;
}

/* Part k of the thread's counts: 0 its proc_stats, k > 0 the statistics of the lowest class
 * left in c->classes, which it takes off, so that the loop makes one call per class the
 * thread used rather than one per class (a bpf_loop callback). The class is found without a
 * branch per class: each would be a path of its own for the verifier, in every program. */
static long flush_part(u32 k, struct flush_ctx *c)
{
	u32 first = 0, n = NETIO_PROC_WORDS, low, cls;

	if (k > 0) {
		low = c->classes & -c->classes;		/* the lowest class left, alone */
		cls = bits_set(low - 1);		/* its number */
		if (!low || cls >= SC_NR_CLASSES)
			return 1;
		c->classes &= ~low;
		first = NETIO_PROC_WORDS + cls * NETIO_SC_WORDS;
		n = NETIO_SC_WORDS;
	}
	for (u32 i = 0; i < NETIO_PROC_WORDS && i < n; i++)
		flush_word(c, first + i);
	return 0;
}

struct hist_flush_ctx {
	u64 *from;		/* one of the thread's histograms */
	u64 used;		/* its slots counted in and not flushed yet by this flush */
	struct tgid_hist *to;	/* its process's, looked up at the first slot with calls */
	u32 tgid, cls;
};

/* The lowest slot left in c->used: its calls, taken by exchange (the thread adds to it
 * atomically meanwhile), go to the process's histogram of the class. Stops where the
 * process has no histograms to take them (they wait for the next flush). */
static long flush_hist_slot(u32 k, struct hist_flush_ctx *c)
{
	u64 low = c->used & -c->used, d;
	u32 s = bits_set((u32)(low - 1)) + bits_set((u32)((low - 1) >> 32)), cls = c->cls;

	if (!low || s >= NETIO_HIST_SLOTS || cls >= SC_NR_CLASSES)
		return 1;
	c->used &= ~low;
	if (!*(volatile u64 *)&c->from[s])
		return 0;
	if (!c->to)
		c->to = hist_target(c->tgid);
	if (!c->to) {
		count_event(CNT_DROP_PROCESS_STATS);
		return 1;
	}
	d = __sync_lock_test_and_set(&c->from[s], 0);
	if (d)
		__sync_fetch_and_add(&c->to->hist[cls][s], d);
	return 0;
}

/* The thread's own histograms go to its process's (the slots it ever counted in). */
static __always_inline void flush_thread_hists(struct task_state *st)
{
	struct hist_flush_ctx c = { .tgid = st->tgid };

	for (u32 i = 0; i < NETIO_THREAD_HISTS; i++) {
		u32 cls1 = *(volatile u32 *)&st->hist_cls[i];

		if (!cls1)
			return;		/* taken in order: none after a free one */
		c.from = st->hist[i];
		c.cls = cls1 - 1;
		c.used = *(volatile u64 *)&st->hist_used[i];
		bpf_loop(NETIO_HIST_SLOTS, flush_hist_slot, &c, 0);
	}
}

/* Adds what the thread counted since its last flush to its process's statistics (on this
 * CPU's copy, atomically: a softirq here may be adding to them): those statistics (flush_target:
 * tgid_stats' entry or tgid_spill's), or NULL where it had nothing to add or no place for it. */
static __always_inline struct tgid_stats *flush_thread_counts(struct task_state *st)
{
	struct tgid_stats *ts, *to;
	struct flush_ctx c;

	if (!st->tgid || !st->active)
		return NULL;	/* no event yet (adopted ahead of them): nothing to add */
	send_run_flush(&st->run);
	flush_thread_hists(st);
	to = ts = flush_target(st->tgid);
	if (!to && st->spill) {
		u32 zero = 0;

		to = bpf_map_lookup_elem(&spill_discard, &zero);
	}
	if (!to)
		return NULL;
	c.from = (u64 *)&st->counts;
	c.done = (u64 *)&st->flushed;
	c.to = (u64 *)&to->c;
	c.classes = *(volatile u32 *)&st->sc_touched & ((1u << SC_NR_CLASSES) - 1);
	bpf_loop(1 + bits_set(c.classes), flush_part, &c, 0);
	return ts;
}

/* What the kernel counted for the thread since the last flush goes to its process while the
 * process is followed; outside that (before, between `clear` and `pid add`) it is skipped.
 * Taken field by field: a racing flush takes the rest (take_up_to). The process's
 * statistics are made for them only at the thread's exit (a process with no event of its own
 * has none before); until then the counts wait in the thread. found: at the exit, the
 * statistics the thread's counts just went to, if any (no second lookup). */
static __always_inline void flush_kernel_counts(struct task_struct *task, struct task_state *st,
						bool exiting, struct tgid_stats *found)
{
	struct kernel_counts now;
	struct tgid_stats *ts = NULL;
	u32 tgid = st->tgid;
	bool followed = tgid && tgid_followed(tgid);
	u64 d;

	if (followed && st->kfollowed) {
		if (exiting)
			ts = found ?: flush_target(tgid);
		else
			ts = bpf_map_lookup_elem(&tgid_stats, &tgid);
		if (!ts)
			return;
	}
	read_kernel_counts(task, &now);
#define NETIO_KFLUSH(f)							\
	d = take_up_to(&st->kbase.f, now.f);					\
	if (d && ts)							\
		__sync_fetch_and_add(&ts->k.f, d);
	NETIO_KFLUSH(switches);
	NETIO_KFLUSH(migrations);
	NETIO_KFLUSH(faults);
	NETIO_KFLUSH(run_ns);
#undef NETIO_KFLUSH
	st->kfollowed = followed;
}

/* After thread `task` (current) added to its counts, at the end of every event that got st
 * from followed_thread(): an exiting thread's exit flush may have run already (io_uring's
 * task work can still send after it), so its counts go to its process now; a spill slot's
 * go at once, and the slot is freed. */
static __always_inline void thread_counted(struct task_state *st, struct task_struct *task)
{
	if (st->spill) {
		flush_thread_counts(st);
		keep_pending_call(task, st);
		netio_barrier();
		st->spill = 0;
		return;
	}
	if (task->flags & NETIO_PF_EXITING)
		flush_thread_counts(st);
}

/* Whether the thread's plain send of ret bytes (send_size slot `size`) on socket sk, identity
 * ports and daddr, continued its run of sends there (send_run.bpf.h): counted, then. A spill
 * slot has no run (it lasts one event). */
static __always_inline bool thread_send_continues(struct task_state *st, struct sock *sk,
						  u32 ports, u32 daddr, u32 size, long ret)
{
	return !st->spill && send_run_add(&st->run, sk, ports, daddr, size, st->gen, ret);
}

/* The thread's plain send counted on record r (its sock_slot1) begins its next run. */
static __always_inline void thread_send_begins(struct task_state *st, const struct sock_stats *r,
					       u32 size)
{
	if (!st->spill)
		send_run_begin(&st->run, r, st->sock_slot1, size, st->gen);
}

/* The thread wrote its counts' statistics of class cls (< SC_NR_CLASSES): flushes read them
 * from now on. */
static __always_inline void thread_sc_touched(struct task_state *st, u32 cls)
{
	st->sc_touched |= 1u << cls;
}

/* A timed call of class cls ended in histogram slot `slot`: into the thread's own histogram
 * of cls, taken at the class's first timed call while one is free (only the thread takes
 * them), else into its process's. Atomic: a flush takes the slot by exchange meanwhile. */
static __always_inline void thread_hist_count(struct task_state *st, u32 cls, u32 slot)
{
	u32 i;

	for (i = 0; i < NETIO_THREAD_HISTS; i++) {
		u32 mine = st->hist_cls[i];

		if (mine == cls + 1)
			break;
		if (!mine) {
			st->hist_cls[i] = cls + 1;
			break;
		}
	}
	if (i >= NETIO_THREAD_HISTS || slot >= NETIO_HIST_SLOTS) {
		hist_count(st->tgid, cls, slot);
		return;
	}
	if (!(st->hist_used[i] & (1ull << slot)))
		st->hist_used[i] |= 1ull << slot;
	__sync_fetch_and_add(&st->hist[i][slot], 1);
}

/* The thread's counts: its storage's. */
static __always_inline struct thread_counts *thread_counts_of(struct task_state *st)
{
	return &st->counts;
}

static __always_inline bool thread_spilled(const struct task_state *st)
{
	return st->spill;
}

/* The state of a thread, if it has any (no storage is made for threads never followed). */
static __always_inline struct task_state *thread_state(struct task_struct *task)
{
	return bpf_task_storage_get(&task_state, task, 0, 0);
}

/* The state of `task` (current) at the end of a syscall: its storage, else a spill slot with
 * the call its spilled events kept (take_pending_call), else NULL. */
static __always_inline struct task_state *ending_thread(struct task_struct *task)
{
	struct task_state *st = thread_state(task);
	u32 tid;

	if (st)
		return st;
	tid = TASK_READ(task, pid);
	if (!bpf_map_lookup_elem(&thread_pending, &tid))
		return NULL;
	return spill_thread(task, TASK_READ(task, tgid));
}

/* A thread born followed that exits with no storage (no event, and no snapshot since its
 * birth): all the kernel counted for it goes to its process. */
static __always_inline void flush_unadopted(struct task_struct *task, u32 tgid)
{
	struct kernel_counts k;
	struct tgid_stats *ts;

	if (!born_followed(task, tgid))
		return;
	ts = flush_target(tgid);
	if (!ts)
		return;
	read_kernel_counts(task, &k);
	__sync_fetch_and_add(&ts->k.switches, k.switches);
	__sync_fetch_and_add(&ts->k.migrations, k.migrations);
	__sync_fetch_and_add(&ts->k.faults, k.faults);
	__sync_fetch_and_add(&ts->k.run_ns, k.run_ns);
}

/* task's counts, if it has any, and what the kernel counted for it (struct kernel_counts):
 * at its exit (the storage goes with it), or from the tracer's iterator before a snapshot,
 * where a thread of a followed process that has no storage yet gets one (adopt_thread: its
 * kernel counters from its birth if it was born followed, else from now: it was there before
 * `pid add`, which runs the iterator right after). */
static __always_inline void thread_flush(struct task_struct *task, bool iterating)
{
	struct task_state *st;
	u32 tgid;

	/* an exit of a process not followed (most of a host's): nothing of it is counted */
	if (!iterating && surely_unfollowed(task->tgid))
		return;
	st = thread_state(task);
	if (st) {
		/* at an exit, the statistics the counts went to take the kernel's and the name,
		 * with no second lookup */
		struct tgid_stats *ts = flush_thread_counts(st);

		flush_kernel_counts(task, st, !iterating, iterating ? NULL : ts);
		if (iterating || !st->tgid)
			return;
		if (ts)
			name_if_own(ts, st->tgid);
		else
			name_process(st->tgid);
		return;
	}
	tgid = task->tgid;
	if (!iterating) {
		u32 tid = task->pid;

		/* a call its spilled events kept; looked up first: a delete takes the bucket's
		 * lock even where there is nothing to delete, and most exits have nothing */
		if (bpf_map_lookup_elem(&thread_pending, &tid))
			bpf_map_delete_elem(&thread_pending, &tid);
		flush_unadopted(task, tgid);
		return;
	}
	if (tgid_followed(tgid)) {
		st = adopt_thread(task, tgid, false);
		if (st)
			flush_kernel_counts(task, st, false, NULL);
	}
}

#endif
