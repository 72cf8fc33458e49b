/* The receive side's kinds beside rx_copy: bytes mapped by TCP_ZEROCOPY_RECEIVE,
 * discarded by recv(MSG_TRUNC) on TCP, spliced from a TCP socket into a pipe. Each counts per
 * process and on the socket's record (sockets.bpf.h). Included by copy_common.bpf.h (the
 * exact rungs) and tp_rung.bpf.h (the tracepoint rung). */
#ifndef NETIO_RECEIVE_H
#define NETIO_RECEIVE_H

#include "maps.bpf.h"

#define NETIO_SOL_TCP 6
#define NETIO_TCP_ZEROCOPY_RECEIVE 35

enum rx_kind { RX_MAPPED, RX_DISCARDED, RX_SPLICED };

/* len bytes copied to the user by process tgid from socket sk (NULL: not known) */
static __always_inline void count_rx(u32 tgid, long len, struct sock *sk)
{
	struct proc_stats *ps = proc_get(tgid);
	struct sock_stats *r;
	s32 slot;

	if (!ps)
		return;
	COUNT_ADD(ps->rx_copy_bytes, len);
	COUNT_ADD(ps->rx_calls, 1);
	slot = sock_slot_read(sk, tgid);
	r = slot >= 0 ? sock_rec(slot) : NULL;
	if (r)
		sock_count_recv(r, len);
}

/* len bytes of kind k on socket record r (NULL: none); atomic, threads may share a socket */
static __always_inline void sock_count_rx_kind(struct sock_stats *r, enum rx_kind k, long len)
{
	if (!r || len <= 0)
		return;
	if (k == RX_MAPPED)
		__sync_fetch_and_add(&r->rx_mapped_bytes, len);
	else if (k == RX_DISCARDED)
		__sync_fetch_and_add(&r->rx_discarded_bytes, len);
	else
		__sync_fetch_and_add(&r->rx_spliced_bytes, len);
}

/* len bytes of kind k into a process's (or a thread's) counts */
static __always_inline void proc_count_rx_kind(struct proc_stats *p, enum rx_kind k, long len)
{
	if (!p || len <= 0)
		return;
	if (k == RX_MAPPED)
		COUNT_ADD(p->rx_mapped_bytes, len);
	else if (k == RX_DISCARDED)
		COUNT_ADD(p->rx_discarded_bytes, len);
	else
		COUNT_ADD(p->rx_spliced_bytes, len);
}

/* The exact rungs and the cgroup program (no thread state): straight into process tgid's
 * statistics and the record of socket sk (NULL: not known). */
static __always_inline void count_rx_kind(u32 tgid, enum rx_kind k, long len, struct sock *sk)
{
	s32 slot;

	if (len <= 0)
		return;
	proc_count_rx_kind(proc_get(tgid), k, len);
	slot = sock_slot_read(sk, tgid);
	sock_count_rx_kind(slot >= 0 ? sock_rec(slot) : NULL, k, len);
}

#endif
