/* The spill slots of the per-thread state, defined once for both builds (thread.bpf.h):
 * thread_storage.bpf.h uses them, thread_hash.bpf.h does not, and both include them so that
 * both builds have the same maps (the tracer opens either through one skeleton, by name).
 *
 * thread_spill: a CPU's stand-in for the storage of a thread that could not get one: the
 * kernel allocates task storage from a per-CPU element cache that an irq_work refills, and an
 * event that finds it empty would be lost. The event counts here instead, and thread_counted()
 * adds it to the process at once and frees the slot (spill_thread). Preallocated; counts ==
 * flushed between events, as after any flush. spill_discard: where a spilled event's flush
 * goes when its process has no statistics (a drop, counted): never read, so that the slot
 * leaves clean. */
#ifndef NETIO_THREAD_SPILL_H
#define NETIO_THREAD_SPILL_H

#include "maps.bpf.h"

/* defined by the build's thread header after this one; a map names its value type by pointer,
 * so the type is complete in the object's BTF */
struct task_state;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct task_state);
} thread_spill SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tgid_stats);
} spill_discard SEC(".maps");

/* thread_pending: the traced call in progress of a thread whose events spill, by thread id,
 * from the spilled event that started it to the thread's next event, which ends it in a spill
 * slot or in the storage it gets by then. A spill slot lasts one event, and without this a call
 * started in one would never end: neither counted nor timed, silently. Preallocated; a drop,
 * counted, only when NETIO_PENDING_CALLS threads without storage are in a call at once. */
#define NETIO_PENDING_CALLS 1024

struct pending_call {
	u64 ts;			/* task_state's ts, cls, nr and tx_counted of the call */
	u64 kept;		/* when it was kept: older than its thread, an exited one's */
	u32 cls;
	s32 nr;
	u32 tx_counted;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_PENDING_CALLS);
	__type(key, u32);
	__type(value, struct pending_call);
} thread_pending SEC(".maps");

#endif
