/* The state of each followed thread where the kernel has no task-local storage (before 5.11),
 * or lacks something else the storage build needs (compat.bpf.h): the NETIO_COMPAT build. A
 * followed thread's state (its traced call in progress) is an entry of a hash keyed by thread
 * id, made at its first event and deleted at its exit; what it counts goes straight into its
 * process's per-CPU statistics (one hash lookup per event). There is nothing to flush: the
 * flush of per-thread counts needs atomic exchange (5.12). The kernel's per-thread counters
 * (context switches, faults, run time) are left to perf events here (user/attach_objects.c,
 * kernel_counts), since adding them per thread at its exit and before a snapshot would need
 * it as well. Included through thread.bpf.h. */
#ifndef NETIO_THREAD_HASH_H
#define NETIO_THREAD_HASH_H

#include "maps.bpf.h"
#include "thread_spill.bpf.h"

struct task_state {
	u64 ts;			/* start of the traced syscall in progress, 0 if none */
	u32 cls;		/* its class */
	s32 nr;			/* its syscall number (thread_storage.bpf.h) */
	u32 tgid;
	u16 untimed[SC_NR_CLASSES];	/* as in thread_storage.bpf.h */
	u64 zc_sk;		/* as in thread_storage.bpf.h: unused here (note_zc_owner, maps.bpf.h) */
	u32 zc_gen;
	u32 tx_counted;		/* as in thread_storage.bpf.h */
	u32 sock_slot1;		/* as in thread_storage.bpf.h */
	u64 regs;		/* unused here: the socket tracepoints that read it are 6.3+ */
};

/* Preallocated: an entry is there until NETIO_MAX_THREADS followed threads live at once. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);	/* thread id */
	__type(value, struct task_state);
} task_state SEC(".maps");

/* The state of current (task) if its process is followed, else NULL: made at its first event
 * (a drop, counted, if the map is full). "Followed" is looked up at every event: there is no
 * state to cache it in for the threads never followed. */
static __always_inline struct task_state *followed_thread(struct task_struct *task)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, tgid = id >> 32;
	struct task_state *st, fresh = { .tgid = tgid };

	if (surely_unfollowed(tgid) || !tgid_followed(tgid))
		return NULL;
	st = bpf_map_lookup_elem(&task_state, &tid);
	if (st && st->tgid == tgid)
		return st;
	/* a new thread, or an entry an exited thread left to this tid (its exit missed) */
	count_update_error(bpf_map_update_elem(&task_state, &tid, &fresh, BPF_ANY));
	st = bpf_map_lookup_elem(&task_state, &tid);
	if (!st)
		count_event(CNT_DROP_THREAD_STORAGE);
	tgid_stats_try(tgid);	/* named now, after current */
	return st;
}

/* The thread's counts: its process's statistics on this CPU (NULL, a drop, if they cannot be
 * made). */
static __always_inline struct thread_counts *thread_counts_of(struct task_state *st)
{
	struct tgid_stats *ts = tgid_stats_get(st->tgid);

	return ts ? &ts->c : NULL;
}

/* Counts go straight to the process: no flush to tell. */
static __always_inline void thread_sc_touched(struct task_state *st, u32 cls)
{
}

static __always_inline bool thread_spilled(const struct task_state *st)
{
	return false;
}

static __always_inline struct task_state *thread_state(struct task_struct *task)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();

	return bpf_map_lookup_elem(&task_state, &tid);
}

/* The state of current at the end of a syscall: its entry (nothing spills here). */
static __always_inline struct task_state *ending_thread(struct task_struct *task)
{
	return thread_state(task);
}

/* Counted where it happened: nothing left to do after an event. */
static __always_inline void thread_counted(struct task_state *st, struct task_struct *task)
{
}

/* No runs of sends here (send_run.bpf.h): every send counts on its socket's record. */
static __always_inline bool thread_send_continues(struct task_state *st, struct sock *sk,
						  u32 ports, u32 daddr, u32 size, long ret)
{
	return false;
}

static __always_inline void thread_send_begins(struct task_state *st, const struct sock_stats *r,
					       u32 size)
{
}

/* A timed call ended: straight into its process's histograms, as its counts go. */
static __always_inline void thread_hist_count(struct task_state *st, u32 cls, u32 slot)
{
	hist_count(st->tgid, cls, slot);
}

/* At a thread's exit (task is current) of a followed process its entry goes (if it had an
 * event), and it names its process's statistics if they have no name (made at its fork, in
 * its parent's context); the iterator has nothing to flush. */
static __always_inline void thread_flush(struct task_struct *task, bool iterating)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id, tgid = id >> 32;

	if (iterating || surely_unfollowed(tgid) || !tgid_followed(tgid))
		return;
	bpf_map_delete_elem(&task_state, &tid);
	name_process(tgid);
}

#endif
