/* A followed thread's run of plain sends: consecutive sends on one socket whose sizes fall in
 * one slot of its record's send_size histogram, counted in the thread's storage with plain
 * adds, where each send would otherwise make two atomic adds to the record and read its
 * identity (bench/NOTES.md, "Runs of sends"). The run goes to its record when
 * it ends (the thread's next send on another socket, of another size slot, or after the
 * filter generation changed: a `pid` change or a reset, which zeroes the records), when the
 * thread exits, and before every snapshot (the flush iterator). A run's first send counts on
 * the record directly, so a thread that changes socket or size at every send pays what it
 * did, and a run of one costs no flush.
 *
 * Only the thread writes a run; its bytes and sends only grow, and flushes take them up to
 * what they read (take_up_to), as the thread's other counts. The iterator, on another CPU,
 * must not take bytes of a run begun after it read the run's record: the thread makes epoch
 * odd while it ends one run and begins the next, and the iterator takes what it read only
 * where epoch was even and unchanged around its reads (a run it skips goes at the next flush,
 * and the thread's exit flush, on the thread itself, never skips). A record is checked against
 * the run's socket before a flush adds to it: a reset may have given its slot to another.
 * Storage build only: the compat build's counts go straight to the record. Only receives are
 * not run this way: the splice count (copy_tp.bpf.c, count_splice) reads a record's received
 * bytes, which would miss another thread's run. */
#ifndef NETIO_SEND_RUN_H
#define NETIO_SEND_RUN_H

#include "flush_take.bpf.h"

struct send_run {
	u64 sk;			/* the socket's identity, as its record has it (sock_stats) */
	u32 ports, daddr, tgid;
	u32 slot1;		/* its record's slot + 1; 0: no run */
	u32 size;		/* the send_size slot of its sends */
	u32 gen;		/* the thread's filter generation at its start (task_state.gen) */
	u64 epoch;		/* odd while the thread ends one run and begins another (u64:
				 * added to atomically) */
	u64 bytes, sends;	/* written by the thread only, never made smaller */
	u64 bytes_done, sends_done;	/* what flushes took of them */
};

/* Whether a plain send of ret bytes (size slot `size`) on socket sk, identity ports and daddr,
 * of a thread at filter generation gen, continues its run: then it is counted there. */
static __always_inline bool send_run_add(struct send_run *run, struct sock *sk, u32 ports,
					 u32 daddr, u32 size, u32 gen, long ret)
{
	if (run->sk != (u64)sk || run->ports != ports || run->daddr != daddr ||
	    run->size != size || run->gen != gen || !run->slot1)
		return false;
	run->bytes += ret;
	run->sends++;
	return true;
}

/* The run's epoch, read with a full barrier (an atomic add of 0): the reads it brackets are
 * not moved across it. */
static __always_inline u64 send_run_epoch(struct send_run *run)
{
	return __sync_fetch_and_add(&run->epoch, 0);
}

struct send_run_take_ctx {
	struct send_run *run;
	u64 racing;		/* the tracer's iterator may be taking it, or the thread ending it */
};

/* What the run counted and no flush took yet goes to its record, if the record is still its
 * socket's (a reset zeroes it and may give its slot to another: then the bytes counted for
 * the process only, as CNT_SOCK_UNTRACKED says). A flush that may race the thread (racing)
 * takes what it read only where the epoch was even and unchanged around its reads; the next
 * flush takes the rest. A bpf_loop callback: one path to verify, where inlined its branches
 * multiplied the send program's paths past the verifier's limit, and its locals are off the
 * callers' stacks. */
static long send_run_take_one(u32 i, struct send_run_take_ctx *c)
{
	struct send_run *run = c->run;
	u64 before = c->racing ? send_run_epoch(run) : 0, sk = run->sk;
	u64 now_bytes = *(volatile u64 *)&run->bytes, now_sends = *(volatile u64 *)&run->sends;
	u32 slot1 = run->slot1, ports = run->ports, daddr = run->daddr, tgid = run->tgid;
	u32 size = run->size;
	struct sock_stats *r;
	u64 bytes, sends;

	if (c->racing && ((before & 1) || send_run_epoch(run) != before))
		return 1;
	bytes = take_up_to(&run->bytes_done, now_bytes);
	sends = take_up_to(&run->sends_done, now_sends);
	if (!bytes && !sends)
		return 1;
	r = slot1 ? sock_rec(slot1 - 1) : NULL;
	if (!r || r->sk != sk || r->ports != ports || r->daddr != daddr || r->tgid != tgid) {
		count_event(CNT_SOCK_UNTRACKED);
		return 1;
	}
	if (bytes)
		__sync_fetch_and_add(&r->tx_bytes, bytes);
	if (sends)
		__sync_fetch_and_add(&r->send_size[size & (NETIO_SEND_SIZE_SLOTS - 1)], sends);
	return 1;
}

/* Whether the run counted anything no flush took yet (plain loads: most flushes find
 * nothing). */
static __always_inline bool send_run_pending(struct send_run *run)
{
	return *(volatile u64 *)&run->bytes != *(volatile u64 *)&run->bytes_done ||
	       *(volatile u64 *)&run->sends != *(volatile u64 *)&run->sends_done;
}

/* A flush of the run from the thread's exit or the tracer's iterator: what it counted since
 * the last goes to its record, unless the thread was ending it meanwhile (the next flush takes
 * what the new run counts; the thread took the old one's itself). */
static __always_inline void send_run_flush(struct send_run *run)
{
	struct send_run_take_ctx c = { .run = run, .racing = 1 };

	if (send_run_pending(run))
		bpf_loop(1, send_run_take_one, &c, 0);
}

/* The thread's plain send that did not continue its run was counted on record r (slot slot1 -
 * 1) and begins the next: the run before it goes to its record first. */
static __always_inline void send_run_begin(struct send_run *run, const struct sock_stats *r,
					   u32 slot1, u32 size, u32 gen)
{
	struct send_run_take_ctx c = { .run = run };

	__sync_fetch_and_add(&run->epoch, 1);
	if (send_run_pending(run))
		bpf_loop(1, send_run_take_one, &c, 0);
	run->sk = r->sk;
	run->ports = r->ports;
	run->daddr = r->daddr;
	run->tgid = r->tgid;
	run->slot1 = slot1;
	run->size = size;
	run->gen = gen;
	__sync_fetch_and_add(&run->epoch, 1);
}

#endif
