/* The tracer's per-thread storage (task_state: a followed thread's traced call and its own
 * counts) and aggregation maps (per-CPU, keyed by tgid or netns inum), with helpers to find
 * or create an entry and to flush a thread's counts. Shared by every copy_*.bpf.c,
 * syscalls.bpf.c and flush.bpf.c skeleton: the tracer creates the maps once and reuses the
 * fds. */
#ifndef NETIO_MAPS_H
#define NETIO_MAPS_H

#include "filter.h"

/* allocated on first use: ~3.5 KiB per CPU per followed process */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_stats);
} tgid_stats SEC(".maps");

/* A process's statistics where tgid_stats cannot make its entry at once: that map allocates
 * them from an element cache refilled by an irq_work, which a burst of new processes outruns.
 * Preallocated, so an entry is there until all are taken; one copy for all CPUs, for the
 * flushes only (they add atomically). The tracer adds both maps' figures per process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_SPILL_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_stats);
} tgid_spill SEC(".maps");

/* What a followed thread counts per call, in its own storage (task_state): added with no map
 * lookup on the send, receive and syscall paths, and flushed into its process's tgid_stats
 * when the thread exits and before every snapshot (flush.bpf.c). Only the thread writes
 * counts; only flushes write flushed, exchanging it atomically, so that a thread's exit and
 * a snapshot flushing it at once add each event once. u64 words only: the flush walks sc
 * word by word. */
struct thread_counts {
	u64 tx_bytes;		/* the socket layer's (tracepoint rung), as in proc_stats */
	u64 tx_calls;
	u64 tx_spliced_bytes;
	u64 rx_copy_bytes;
	u64 rx_calls;
	u64 zc_tx_bytes;	/* zerocopy bytes of its process's sockets, claimed at its sends */
	struct sc_stats sc[SC_NR_CLASSES];
};

#define NETIO_SC_WORDS (sizeof(struct sc_stats) * SC_NR_CLASSES / 8)

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
	u32 calls;		/* traced calls opened, for --latency-sample */
	u32 kfollowed;		/* kbase is being counted for tgid (flush_kernel_counts) */
	u32 active;		/* the thread had an event: it has counts to flush */
	u64 regs;		/* its saved user registers (copy_tp.bpf.c, thread_syscall_nr) */
	u64 zc_sk;		/* the zerocopy socket it last named its process's (note_zc_send) */
	u32 zc_gen;		/* zc_owner_gen then */
	u32 zc_pad;
	u64 spill;		/* this is a CPU's thread_spill slot, held by the event (u64:
				 * exchanged atomically) */
	struct thread_counts counts;
	struct thread_counts flushed;
	struct kernel_counts kbase;	/* the kernel's counters already added (or left out) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_state SEC(".maps");

/* A CPU's stand-in for the storage of a thread that could not get one: the kernel allocates
 * task storage from a per-CPU element cache that an irq_work refills, and an event that finds
 * it empty would be lost. The event counts here instead, and thread_counted() adds it to the
 * process at once and frees the slot (spill_thread). Preallocated; counts == flushed between
 * events, as after any flush. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct task_state);
} thread_spill SEC(".maps");

/* Where a spilled event's flush goes when its process has no statistics (a drop, counted):
 * never read, so that the slot leaves clean. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tgid_stats);
} spill_discard SEC(".maps");

/* One slot per followed namespace (followed_netns holds the slot; the tracer gives them out
 * and knows each slot's inode number): an array lookup, inlined, instead of a hash lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETIO_MAX_NETNS);
	__type(key, u32);	/* slot */
	__type(value, struct netns_stats);
} netns_stats SEC(".maps");

/* Threads currently inside tcp_sendmsg of a followed process: the scope in which copies
 * from the user iov and page pinning belong to a send. */
struct send_scope {
	u32 tgid;
	u32 spliced;		/* MSG_SPLICE_PAGES: pages handed over, nothing copied */
	u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);	/* tid */
	__type(value, struct send_scope);
} in_send SEC(".maps");

/* Zerocopy sockets: who owns them (skbs leave the host in softirq context where current is
 * anybody), the highest sequence counted (retransmits of a zerocopy skb are not new zerocopy
 * bytes), and the zerocopy bytes counted on the socket and not yet given to its owner. xmit
 * adds to pending, with no lookup of the owner's statistics per skb; a thread's first send on
 * the socket names the owner and claims what is pending into the thread's counts
 * (note_zc_owner; a socket's first skbs leave inside its first send, before sock_send_length
 * names the owner), and the rest is claimed for the owner's process when the socket closes
 * and before every snapshot (claim_zc_bytes). A thread remembers the socket it named
 * (task_state.zc_sk) and names it again only after any socket's entry was made, deleted or
 * given another owner (zc_owner_gen). */
struct sk_info {
	u32 tgid;		/* 0: not known yet */
	u32 max_end_seq;
	u32 seq_valid;
	u32 pad;
	u64 pending;		/* bytes counted, not yet claimed */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETIO_MAX_SOCKS);
	__type(key, u64);	/* struct sock * */
	__type(value, struct sk_info);
} sk_owner SEC(".maps");

/* [0]: bumped whenever an entry of sk_owner is made, deleted or changes owner. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} zc_owner_gen SEC(".maps");

static __always_inline u32 *zc_owner_gen_slot(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&zc_owner_gen, &zero);
}

static __always_inline void zc_owners_changed(void)
{
	u32 *gen = zc_owner_gen_slot();

	if (gen)
		__sync_fetch_and_add(gen, 1);
}

static const struct tgid_stats zero_tgid_stats;

/* Statistics ts of process tgid, unnamed, get the name of current if current is of that
 * process (not whoever runs a softirq, nor the tracer). */
static __always_inline void name_if_own(struct tgid_stats *ts, u32 tgid)
{
	if (ts && !ts->comm[0] && (bpf_get_current_pid_tgid() >> 32) == tgid)
		bpf_get_current_comm(ts->comm, sizeof(ts->comm));
}

/* tgid's entry in map (tgid_stats or tgid_spill), made if missing; NULL if it cannot be made
 * now (the map full, or tgid_stats's element cache empty for a moment). */
static __always_inline struct tgid_stats *stats_entry_try(void *map, u32 tgid)
{
	struct tgid_stats *ts = bpf_map_lookup_elem(map, &tgid);

	if (ts)
		return ts;
	bpf_map_update_elem(map, &tgid, &zero_tgid_stats, BPF_NOEXIST);
	ts = bpf_map_lookup_elem(map, &tgid);
	name_if_own(ts, tgid);
	return ts;
}

static __always_inline struct tgid_stats *tgid_stats_try(u32 tgid)
{
	return stats_entry_try(&tgid_stats, tgid);
}

/* The same where a NULL loses what the caller was adding: a drop. */
static __always_inline struct tgid_stats *tgid_stats_get(u32 tgid)
{
	struct tgid_stats *ts = tgid_stats_try(tgid);

	if (!ts)
		count_event(CNT_DROP_PROCESS_STATS);
	return ts;
}

/* Where a flush adds tgid's figures: its statistics, else its spill entry; NULL (a drop) if
 * neither can be had. */
static __always_inline struct tgid_stats *flush_target(u32 tgid)
{
	struct tgid_stats *ts = tgid_stats_try(tgid);

	if (!ts)
		ts = stats_entry_try(&tgid_spill, tgid);
	if (!ts)
		count_event(CNT_DROP_PROCESS_STATS);
	return ts;
}

static __always_inline struct proc_stats *proc_get(u32 tgid)
{
	struct tgid_stats *ts = tgid_stats_get(tgid);

	return ts ? &ts->p : NULL;
}

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

/* This CPU's thread_spill slot for an event of a thread of tgid without storage, or NULL
 * (a drop) while another event holds it (one preempted on this CPU). Its calls are not
 * timed and its kernel counters not read: the slot lasts one event. */
static __always_inline struct task_state *spill_thread(u32 tgid)
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
	count_event(CNT_THREAD_SPILLED);
	return st;
}

/* task's storage for a thread of followed process tgid that had none: its kernel counters
 * are counted from now on (from zero for a thread just forked). Without storage an event
 * counts in the CPU's spill slot; a thread adopted ahead of its events (fork, `pid add`)
 * that cannot get it then gets it at its first event, and only its kernel counters start
 * later. */
static __always_inline struct task_state *adopt_thread(struct task_struct *task, u32 tgid,
						       bool event)
{
	struct task_state *st = NULL;

	if (!thread_storage_refused())
		st = bpf_task_storage_get(&task_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return event ? spill_thread(tgid) : NULL;
	st->gen = current_filter_gen();
	st->followed = 1;
	st->tgid = tgid;
	read_kernel_counts(task, &st->kbase);
	st->kfollowed = 1;
	return st;
}

/* The state of thread `task` if its process is followed, else NULL. `task` is current, from
 * the event's one bpf_get_current_task_btf() (a helper call each: passed on, not asked
 * again). "Followed" is cached in the task's storage and decided again when the filter
 * generation changed. The storage is created on a followed thread's first event, with its
 * process's statistics (named after the process, which is current here). */
static __always_inline struct task_state *followed_thread(struct task_struct *task)
{
	struct task_state *st = bpf_task_storage_get(&task_state, task, 0, 0);
	u32 gen = current_filter_gen(), tgid;

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
	u64 now = *(volatile u64 *)count;

	/* a concurrent flush may have taken more: the difference then wraps, and the sum of the
	 * two flushes is still right */
	return now - __sync_lock_test_and_set(flushed, now);
}

struct flush_ctx {
	u64 *from, *done, *to;
};

/* One word of the thread's syscall class statistics (a bpf_loop callback: the loop is
 * verified once, not once per word and per program). */
static long flush_sc_word(u32 i, struct flush_ctx *c)
{
	u64 d;

	if (i >= NETIO_SC_WORDS)
		return 1;
	d = flush_one(&c->from[i], &c->done[i]);
	if (d)
		__sync_fetch_and_add(&c->to[i], d);
	return 0;
}

/* Adds what the thread counted since its last flush to its process's statistics (on this
 * CPU's copy, atomically: a softirq here may be adding to them). */
static __always_inline void flush_thread_counts(struct task_state *st)
{
	struct tgid_stats *ts;
	struct flush_ctx c;
	u64 d;

	if (!st->tgid || !st->active)
		return;		/* no event yet (adopted ahead of them): nothing to add */
	ts = flush_target(st->tgid);
	if (!ts && st->spill) {
		u32 zero = 0;

		ts = bpf_map_lookup_elem(&spill_discard, &zero);
	}
	if (!ts)
		return;
#define NETIO_FLUSH(f)							\
	d = flush_one(&st->counts.f, &st->flushed.f);			\
	if (d)								\
		__sync_fetch_and_add(&ts->p.f, d);
	NETIO_FLUSH(tx_bytes);
	NETIO_FLUSH(tx_calls);
	NETIO_FLUSH(tx_spliced_bytes);
	NETIO_FLUSH(rx_copy_bytes);
	NETIO_FLUSH(rx_calls);
	NETIO_FLUSH(zc_tx_bytes);
#undef NETIO_FLUSH
	c.from = (u64 *)st->counts.sc;
	c.done = (u64 *)st->flushed.sc;
	c.to = (u64 *)ts->sc;
	bpf_loop(NETIO_SC_WORDS, flush_sc_word, &c, 0);
}

/* A followed process's statistics made by the tracer (stats_make_process) or at its fork,
 * in another's context, have no name: its exiting thread (current) gives them its own. */
static __always_inline void name_process(u32 tgid)
{
	struct tgid_stats *ts = bpf_map_lookup_elem(&tgid_stats, &tgid);

	if (!ts)
		ts = bpf_map_lookup_elem(&tgid_spill, &tgid);
	name_if_own(ts, tgid);
}

/* What the kernel counted for the thread since the last flush goes to its process while the
 * process is followed; outside that (before, between `clear` and `pid add`) it is skipped.
 * Exchanged field by field: a racing flush takes the rest (as flush_one). The process's
 * statistics are made for them only at the thread's exit (a process with no event of its own
 * has none before); until then the counts wait in the thread. */
static __always_inline void flush_kernel_counts(struct task_struct *task, struct task_state *st,
						bool exiting)
{
	struct kernel_counts now;
	struct tgid_stats *ts = NULL;
	u32 tgid = st->tgid;
	bool followed = tgid && tgid_followed(tgid);
	u64 d;

	if (followed && st->kfollowed) {
		ts = exiting ? flush_target(tgid) : bpf_map_lookup_elem(&tgid_stats, &tgid);
		if (!ts)
			return;
	}
	read_kernel_counts(task, &now);
#define NETIO_KFLUSH(f)							\
	d = now.f - __sync_lock_test_and_set(&st->kbase.f, now.f);		\
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
		netio_barrier();
		st->spill = 0;
		return;
	}
	if (task->flags & NETIO_PF_EXITING)
		flush_thread_counts(st);
}

/* The syscall number saved in a thread's user registers: a direct, CO-RE relocated load where
 * regs is trusted (tp_btf, bpf_task_pt_regs), SYSCALL_NR_READ (a probe read) where it is not. */
#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#define SYSCALL_NR_READ(regs) BPF_CORE_READ(regs, orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) ((regs)->syscallno)
#define SYSCALL_NR_READ(regs) BPF_CORE_READ(regs, syscallno)
#else
#define SYSCALL_NR(regs) (-1L)
#define SYSCALL_NR_READ(regs) (-1L)
#endif

/* The number of the syscall the current thread is in. */
static __always_inline long current_syscall_nr(void)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

	return regs ? SYSCALL_NR(regs) : -1;
}

/* Classes whose end the socket layer marks; the others end at sys_exit and are counted at
 * sys_enter (so that their count is exact even before sys_exit is attached). */
static __always_inline bool sc_is_send(u32 cls)
{
	return cls == SC_SENDTO || cls == SC_SENDMSG || cls == SC_WRITE;
}

static __always_inline bool sc_is_recv(u32 cls)
{
	return cls == SC_RECVFROM || cls == SC_RECVMSG || cls == SC_RECVMSG_ERRQUEUE ||
	       cls == SC_READ;
}

static __always_inline bool sc_counted_at_enter(u32 cls)
{
	return cls == SC_SENDFILE || cls == SC_POLL || cls == SC_EPOLL_WAIT;
}

static __always_inline u32 log2_slot(u64 v)
{
	u32 r = 0, shift;

	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r = shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* task_state.ts of a traced call that is counted but not timed (--latency-sample): no clock
 * read at either end (what the clock reads cost: bench/NOTES.md). */
#define NETIO_UNTIMED 1

/* The thread's traced call ends with return value ret: its class statistics, in the thread's
 * counts. */
static __always_inline void sc_finish(struct task_state *st, long ret)
{
	u64 start = st->ts, now, delta;
	u32 cls = st->cls, slot;
	struct sc_stats *s;

	st->ts = 0;
	if (cls >= SC_NR_CLASSES)
		return;
	s = &st->counts.sc[cls];
	if (!sc_counted_at_enter(cls))
		s->count++;
	if (ret < 0)
		s->errors++;
	else if (cls != SC_POLL && cls != SC_EPOLL_WAIT)
		s->bytes += ret;
	if (start == NETIO_UNTIMED)
		return;
	now = bpf_ktime_get_ns();
	delta = now > start ? now - start : 0;
	s->total_ns += delta;
	slot = log2_slot(delta);
	if (slot >= NETIO_HIST_SLOTS)
		slot = NETIO_HIST_SLOTS - 1;
	s->hist[slot]++;
}

/* The statistics of the namespace net belongs to, if it is followed, else NULL. */
static __always_inline struct netns_stats *netns_stats_of(struct net *net)
{
	s32 slot = netns_slot(net);

	if (slot < 0)
		return NULL;
	return bpf_map_lookup_elem(&netns_stats, &slot);
}
#ifndef SKBFL_ZEROCOPY_ENABLE_BIT
#define SKBFL_ZEROCOPY_ENABLE_BIT 1	/* SKBFL_ZEROCOPY_ENABLE: same value on every kernel */
#endif

/* bit of SOCK_ZEROCOPY in sk->sk_flags on the running kernel */
#define SOCK_ZEROCOPY_BIT bpf_core_enum_value(enum sock_flags, SOCK_ZEROCOPY)

/* The bytes pending on socket si go to its owner's process: where no thread of it is at hand
 * (the socket closes, a snapshot, another process takes the socket over). */
static __always_inline void claim_zc_bytes(struct sk_info *si)
{
	struct proc_stats *ps;
	u64 pending;

	if (!si->tgid || !si->pending)
		return;
	pending = __sync_lock_test_and_set(&si->pending, 0);
	ps = proc_get(si->tgid);
	if (ps)	/* a socket's close (softirq) may interrupt a snapshot's claim here */
		__sync_fetch_and_add(&ps->zc_tx_bytes, pending);
}

/* The end of a send of process tgid on a zerocopy socket (the caller checked SOCK_ZEROCOPY,
 * or io_uring sent on it): name tgid its owner, and give the bytes xmit counted on the socket
 * (pending) to the sending thread's counts (st, on the tracepoint rung; else NULL: to the
 * process). A socket seen with another owner before (passed to another process) gives that
 * one its bytes and starts again. An xmit racing with this on another CPU may still add to
 * pending after the exchange: a later claim takes it. */
static __always_inline void note_zc_owner(u64 sk, u32 tgid, struct task_state *st)
{
	struct sk_info *si, n = { .tgid = tgid };

	si = bpf_map_lookup_elem(&sk_owner, &sk);
	if (!si) {
		count_update_error(bpf_map_update_elem(&sk_owner, &sk, &n, BPF_NOEXIST));
		zc_owners_changed();
		return;
	}
	if (si->tgid != tgid) {
		if (si->tgid) {
			claim_zc_bytes(si);
			count_update_error(bpf_map_update_elem(&sk_owner, &sk, &n, BPF_ANY));
			zc_owners_changed();
			return;
		}
		si->tgid = tgid;
	}
	if (!si->pending)
		return;
	if (st)
		st->counts.zc_tx_bytes += __sync_lock_test_and_set(&si->pending, 0);
	else
		claim_zc_bytes(si);
}

#endif
