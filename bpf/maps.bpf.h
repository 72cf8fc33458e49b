/* The tracer's aggregation maps (per-CPU, keyed by tgid or netns slot) and the zerocopy
 * sockets' owners, with helpers to find or create an entry. The per-thread state is in
 * thread.bpf.h. Shared by every object: the tracer creates the maps once and reuses the fds. */
#ifndef NETIO_MAPS_H
#define NETIO_MAPS_H

#include "filter.bpf.h"
#include "compat.bpf.h"
#include "log2.bpf.h"
#include "zc_seq.h"
#include "sockets.bpf.h"

#ifdef NETIO_COMPAT
/* One copy for all CPUs, preallocated, added to atomically (COUNT_ADD): before 5.11 the kernel
 * warns at load, tainting itself, when a tracing program uses a map that allocates at run
 * time, and a per-CPU copy of every entry preallocated would take NETIO_MAX_PROCS entries per
 * CPU (what an entry weighs: bench/NOTES.md, "Churn"). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_COMPAT_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_stats);
} tgid_stats SEC(".maps");
#else
/* allocated on first use: an entry per CPU per followed process */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_stats);
} tgid_stats SEC(".maps");
#endif

/* Each process's latency histograms (struct tgid_hist), made at its first timed call: the
 * counting level never makes them. */
#ifdef NETIO_COMPAT
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_COMPAT_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_hist);
} tgid_hist SEC(".maps");
#else
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, NETIO_MAX_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_hist);
} tgid_hist SEC(".maps");
#endif

/* A process's histograms where tgid_hist cannot make its entry at once (as tgid_spill for
 * tgid_stats: an element cache that a burst of new processes outruns). Preallocated, one copy
 * for all CPUs, added to atomically; the tracer adds both maps' figures per process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_SPILL_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct tgid_hist);
} tgid_hist_spill SEC(".maps");

/* [0]: all zeros, never written: what a process's new histograms are made from (as
 * zero_stats). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tgid_hist);
} zero_hist SEC(".maps");

/* tgid's entry in map (tgid_hist or tgid_hist_spill), made if missing; NULL if it cannot be
 * made now. */
static __always_inline struct tgid_hist *hist_entry_try(void *map, u32 tgid)
{
	struct tgid_hist *h = bpf_map_lookup_elem(map, &tgid);
	void *zero;
	u32 first = 0;

	if (h)
		return h;
	zero = bpf_map_lookup_elem(&zero_hist, &first);
	if (zero)
		bpf_map_update_elem(map, &tgid, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &tgid);
}

/* Where process tgid's timed calls count: its tgid_hist entry, else its tgid_hist_spill one,
 * made if missing; NULL if neither can be made now. */
static __always_inline struct tgid_hist *hist_target(u32 tgid)
{
	struct tgid_hist *h = hist_entry_try(&tgid_hist, tgid);

	return h ?: hist_entry_try(&tgid_hist_spill, tgid);
}

/* A timed call of class cls of process tgid fell in histogram slot `slot`. */
static __always_inline void hist_count(u32 tgid, u32 cls, u32 slot)
{
	struct tgid_hist *h = hist_target(tgid);

	if (!h) {
		count_event(CNT_DROP_PROCESS_STATS);
		return;
	}
	/* atomic: another task's call may end on this CPU meanwhile, and the spill map's one
	 * copy is every CPU's */
	if (cls < SC_NR_CLASSES && slot < NETIO_HIST_SLOTS)
		__sync_fetch_and_add(&h->hist[cls][slot], 1);
}

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
	u32 slot1;		/* the socket's record (sockets.bpf.h), its slot + 1; 0: none */
	u32 pad;
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
	u32 slot1;		/* the owner's record of this socket (sockets.bpf.h), its slot + 1 */
	struct zc_seq seq;	/* TCP: the bytes counted, by sequence number (zc_seq.h) */
	u64 pending;		/* bytes counted, not yet claimed */
	u64 ino;		/* a UDP socket's inode number (zc_skb.bpf.c, udp_socket_renewed) */
	u64 rx_pending;		/* its zerocopy bytes seen received, and freed uncopied, before */
	u64 kept_pending;	/* the record was known (sock_zc_seen): for the record */
	u32 zckey;		/* the socket's sk_zckey at its last send seen (copy_tp.bpf.c, */
	u32 zckey_known;	/* zc_pinned_by_send); 0: none seen yet */
	struct zc_seq rx_seq;	/* TCP: the bytes its skbs were received (copied) with */
	u64 again_pending;	/* of rx_pending: received again (zc_rx_again) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NETIO_MAX_SOCKS);
	__type(key, u64);	/* struct sock * */
	__type(value, struct sk_info);
} sk_owner SEC(".maps");

/* [0]: bumped whenever an entry of sk_owner is made, deleted or changes owner; 0 while it never
 * had one (zc_owners_none), which spares every TCP close of the machine a hash lookup. */
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

/* [0]: enum skb_progs_state. Where zero-copy bytes count at their send (zc_at_send), the
 * per-skb programs (zc_skb.bpf.c) are needed only for the fallback copy and for the zero-copy
 * bytes no send counts, so on demand they run only once a send whose zero-copy bytes only they
 * count was seen (UDP's, io_uring's SEND_ZC): every other skb of the machine then costs
 * nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} skb_progs SEC(".maps");

/* A send that can have made zero-copy skbs returns (its bytes counted here if counted_here):
 * if the per-skb programs are not attached, the send is counted as one whose skbs they did
 * not see (the snapshot's figures that need them are then null), and they are asked for where
 * its bytes need them. A send whose bytes count here does not ask: its skbs' fallback copy is
 * null either way (its first skbs pass before the attach), and the per-skb programs would run
 * for every skb of the machine from then on. */
static __always_inline void zc_skbs_made(bool counted_here)
{
	u32 zero = 0, *st = bpf_map_lookup_elem(&skb_progs, &zero);

	if (!st || *st == SKB_PROGS_ATTACHED)
		return;
	if (*st == SKB_PROGS_IDLE && !counted_here)
		*st = SKB_PROGS_WANTED;
	count_event(counted_here ? CNT_ZC_SENT_BEFORE_SKB_PROGS : CNT_ZC_UNCOUNTED_BEFORE_SKB_PROGS);
}

/* Whether sk_owner never had an entry since the tracer loaded (no zero-copy send yet). */
static __always_inline bool zc_owners_none(void)
{
	u32 *gen = zc_owner_gen_slot();

	return gen && !*gen;
}

static __always_inline void zc_owners_changed(void)
{
	u32 *gen = zc_owner_gen_slot();

	if (gen)
		__sync_fetch_and_add(gen, 1);
}

/* The socket whose MSG_ZEROCOPY notification skb holds ubuf_info uarg (a zerocopy skb's
 * destructor_arg) in its cb[], or 0. io_uring's notifications are not in an skb: what this
 * reads for them matches no socket. */
static __always_inline u64 zc_uarg_sock(void *uarg)
{
	struct sk_buff *nskb;

	if (!uarg)
		return 0;
	nskb = (struct sk_buff *)((char *)uarg - bpf_core_field_offset(struct sk_buff, cb));
	return (u64)BPF_CORE_READ(nskb, sk);
}

static __always_inline bool sock_is_tcp(u64 sk)
{
	return sk && BPF_CORE_READ((struct sock *)sk, sk_protocol) == 6;
}

/* Bytes of the zerocopy skbs of socket sk (zc_uarg_sock) seen received (kept: freed uncopied
 * after their receive), for its record; returns its entry (sk_owner), NULL where there is
 * none or it was just made: the socket's owner names the record (note_zc_owner); until then
 * (its first skbs are received inside its first send) they wait on the socket. */
static __always_inline struct sk_info *sock_zc_seen(u64 sk, u64 bytes, bool kept)
{
	struct sock_stats *r = NULL;
	struct sk_info *si;

	si = sk ? bpf_map_lookup_elem(&sk_owner, &sk) : NULL;
	if (!si && sk) {
		/* its first skbs, received before the first send returned (the exact rungs make
		 * the socket's entry there): wait on a new one, if that is a TCP or UDP socket */
		struct sk_info n = {};
		u16 proto = BPF_CORE_READ((struct sock *)sk, sk_protocol);

		if (proto != 6 && proto != 17)
			return NULL;
		if (kept)
			n.kept_pending = bytes;
		else
			n.rx_pending = bytes;
		if (!bpf_map_update_elem(&sk_owner, &sk, &n, BPF_NOEXIST)) {
			zc_owners_changed();
			return NULL;
		}
		si = bpf_map_lookup_elem(&sk_owner, &sk);
	}
	if (!si)
		return NULL;
	if (si->slot1)
		r = sock_rec(si->slot1 - 1);
	if (r)
		__sync_fetch_and_add(kept ? &r->zc_kept_bytes : &r->zc_rx_bytes, bytes);
	else
		__sync_fetch_and_add(kept ? &si->kept_pending : &si->rx_pending, bytes);
	return si;
}

/* What waited on socket si for its record (sock_zc_seen) goes to it; an atomic add of the
 * amount taken, as no exchange is needed for that. */
static __always_inline void sock_take_pending(struct sk_info *si)
{
	struct sock_stats *r = si->slot1 ? sock_rec(si->slot1 - 1) : NULL;
	u64 rx = si->rx_pending, kept = si->kept_pending, again = si->again_pending;

	if (!r || !(rx | kept | again))
		return;
	__sync_fetch_and_add(&si->rx_pending, -rx);
	__sync_fetch_and_add(&si->kept_pending, -kept);
	__sync_fetch_and_add(&si->again_pending, -again);
	__sync_fetch_and_add(&r->zc_rx_bytes, rx);
	__sync_fetch_and_add(&r->zc_kept_bytes, kept);
	__sync_fetch_and_add(&r->zc_again_bytes, again);
}

/* A zerocopy skb of TCP socket si received (the tracepoint rung) or copied back (the exact
 * rungs) with payload [seq, seq + len): the bytes it had been received with before (a
 * retransmit of a segment that arrived: zc_seq.h, zc_seq_again) are copied a second time, of
 * the fallback copy of ns (NULL: not followed) and of the socket's record. Their pages were
 * pinned once: the fallback copy less these is at most the zero-copy bytes. */
static __always_inline void zc_rx_again(struct sk_info *si, struct netns_stats *ns, u32 seq,
					u32 len)
{
	u32 again = zc_seq_again(&si->rx_seq, seq, len);
	struct sock_stats *r;

	if (!again)
		return;
	if (ns) {
		ns->fallback_copy_again_bytes += again;
		ns->fallback_copy_again_skbs++;
	}
	r = si->slot1 ? sock_rec(si->slot1 - 1) : NULL;
	__sync_fetch_and_add(r ? &r->zc_again_bytes : &si->again_pending, again);
}

/* [0]: all zeros, never written: what a process's new statistics are made from. A map, not a
 * static constant, so that no build of an object has a .rodata section only because of it
 * (the two builds must have the same sections: compat.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tgid_stats);
} zero_stats SEC(".maps");

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
	struct tgid_stats *ts = bpf_map_lookup_elem(map, &tgid), *zero;
	u32 first = 0;

	if (ts)
		return ts;
	zero = bpf_map_lookup_elem(&zero_stats, &first);
	if (!zero)
		return NULL;
	bpf_map_update_elem(map, &tgid, zero, BPF_NOEXIST);
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

/* A followed process's statistics made by the tracer (stats_make_process) or at its fork,
 * in another's context, have no name: its exiting thread (current) gives them its own. */
static __always_inline void name_process(u32 tgid)
{
	struct tgid_stats *ts = bpf_map_lookup_elem(&tgid_stats, &tgid);

	if (!ts)
		ts = bpf_map_lookup_elem(&tgid_spill, &tgid);
	name_if_own(ts, tgid);
}

static __always_inline struct proc_stats *proc_get(u32 tgid)
{
	struct tgid_stats *ts = tgid_stats_get(tgid);

	return ts ? &ts->c.p : NULL;
}

/* The syscall number saved in a thread's user registers: a direct, CO-RE relocated load where
 * regs is trusted (tp_btf, bpf_task_pt_regs), SYSCALL_NR_READ (a probe read) where it is not. */
#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#define SYSCALL_NR_READ(regs) BPF_CORE_READ(regs, orig_ax)
#define SYSCALL_NR_CORE(regs) SYSCALL_NR_READ(regs)
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) ((regs)->syscallno)
#define SYSCALL_NR_READ(regs) BPF_CORE_READ(regs, syscallno)
#define SYSCALL_NR_CORE(regs) SYSCALL_NR_READ(regs)
#else
#define SYSCALL_NR(regs) (-1L)
#define SYSCALL_NR_READ(regs) (-1L)
#define SYSCALL_NR_CORE(regs) (-1L)
#endif

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

/* The statistics of the namespace net belongs to, if it is followed, else NULL. */
static __always_inline struct netns_stats *netns_stats_of(struct net *net)
{
	s32 slot = netns_slot(net);

	if (slot < 0)
		return NULL;
	return bpf_map_lookup_elem(&netns_stats, &slot);
}
#define NETIO_MSG_TRUNC 0x20	/* recvmsg's flag: a stream discards, a datagram says its length */

#ifndef SKBFL_ZEROCOPY_ENABLE_BIT
#define SKBFL_ZEROCOPY_ENABLE_BIT 1	/* SKBFL_ZEROCOPY_ENABLE: same value on every kernel */
#endif

/* bit of SOCK_ZEROCOPY in sk->sk_flags on the running kernel */
#define SOCK_ZEROCOPY_BIT bpf_core_enum_value(enum sock_flags, SOCK_ZEROCOPY)

#ifdef NETIO_COMPAT
/* Without atomic exchange (5.12) two claims of one socket could both take its pending bytes:
 * this build keeps none pending (on_xmit in zc_skb.bpf.c), so the zerocopy bytes seen only at
 * xmit count per namespace, and a process's come from the exact rungs
 * (skb_zerocopy_iter_stream, copy_common.bpf.h). */
static __always_inline void claim_zc_bytes(struct sk_info *si)
{
}

/* Only who owns the socket, and its record (for the copy back, sock_slot1_of_uarg). */
static __always_inline void note_zc_owner(u64 sk, u32 tgid, struct thread_counts *c, u32 slot1)
{
	struct sk_info *si = bpf_map_lookup_elem(&sk_owner, &sk), n = { .tgid = tgid,
									 .slot1 = slot1 };

	if (si && si->tgid == tgid && si->slot1 == slot1)
		return;
	if (!si) {
		count_update_error(bpf_map_update_elem(&sk_owner, &sk, &n, BPF_ANY));
		zc_owners_changed();
		return;
	}
	si->tgid = tgid;
	if (slot1)
		si->slot1 = slot1;
	sock_take_pending(si);
}
#else
/* Tests (NETIO_TEST_CLAIM_TO_SPILL=1, filter_gen[4]): a claim finds its process's statistics
 * refused, as a burst of new processes can leave tgid_stats' element cache empty, and takes
 * the spill entry a flush would. */
static __always_inline bool claim_refused_for_tests(void)
{
	u32 key = 4, *on = bpf_map_lookup_elem(&filter_gen, &key);

	return on && *on;
}

static __always_inline struct tgid_stats *claim_target_for_tests(u32 tgid)
{
	struct tgid_stats *ts = stats_entry_try(&tgid_spill, tgid);

	if (!ts)
		count_event(CNT_DROP_PROCESS_STATS);
	return ts;
}

/* The bytes pending on socket si go to its owner's process: where no thread of it is at hand
 * (the socket closes, a snapshot, another process takes the socket over). */
static __always_inline void claim_zc_bytes(struct sk_info *si)
{
	struct tgid_stats *ts;
	u64 pending;

	if (!si->tgid || !si->pending)
		return;
	pending = __sync_lock_test_and_set(&si->pending, 0);
	/* where a flush adds: the claim is one, of bytes already taken from the socket */
	ts = claim_refused_for_tests() ? claim_target_for_tests(si->tgid) : flush_target(si->tgid);
	if (!ts)
		return;
	/* atomic: a socket's close (softirq) may interrupt a snapshot's claim here, and the
	 * spill map's one copy is every CPU's */
	__sync_fetch_and_add(&ts->c.p.zc_tx_bytes, pending);
	sock_add_zc(si->slot1, pending);
}

/* The end of a send of process tgid on a zerocopy socket (the caller checked SOCK_ZEROCOPY,
 * or io_uring sent on it): name tgid its owner, and give the bytes xmit counted on the socket
 * (pending) to the sending thread's counts (c, on the tracepoint rung; else NULL: to the
 * process). A socket seen with another owner before (passed to another process) gives that
 * one its bytes and starts again. An xmit racing with this on another CPU may still add to
 * pending after the exchange: a later claim takes it. */
static __always_inline void note_zc_owner(u64 sk, u32 tgid, struct thread_counts *c, u32 slot1)
{
	struct sk_info *si, n = { .tgid = tgid, .slot1 = slot1 };
	u64 pending;

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
	if (slot1)
		si->slot1 = slot1;
	sock_take_pending(si);
	if (!si->pending)
		return;
	if (c) {
		pending = __sync_lock_test_and_set(&si->pending, 0);
		c->p.zc_tx_bytes += pending;
		sock_add_zc(si->slot1, pending);
	} else {
		claim_zc_bytes(si);
	}
}
#endif

#endif
