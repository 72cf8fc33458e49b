/* The tracepoint rung (tp_btf): copy accounting from tracepoints only, the rung every kernel
 * since 5.5 allows. Its programs are three objects by job, over the maps every object shares:
 * copy_tp.bpf.c the send and receive calls, zc_skb.bpf.c the zero-copy skbs, rx_mapped.bpf.c
 * the getsockopt receive; this header is what they have in common.
 *   tx_bytes      sock:sock_send_length (6.3+), TCP and UDP sockets, ret > 0
 *   tx_spliced    of those, the sends made inside sendfile(2) or splice(2): page-cache or pipe
 *                 pages spliced into the socket (MSG_SPLICE_PAGES), not copied. The tracepoint's
 *                 flags are 0 for every send (sock_sendmsg_nosec passes 0: seen on 6.18 with
 *                 sendfile and with MSG_DONTWAIT), so the syscall the thread is in tells
 *   rx_copy       sock:sock_recv_length (6.3+), ret > 0 unless MSG_TRUNC (a receive returns
 *                 what it copied to the user); else skb:skb_copy_datagram_iovec (len about to
 *                 be copied), one event per skb instead of one per call
 *   sock_send_length and sock_recv_length also end the traced send or receive call of the
 *   current thread (syscalls.bpf.c): its latency runs from sys_enter to there.
 *   zc_tx_bytes   a TCP send with MSG_ZEROCOPY (flags from the thread's saved registers):
 *                 sock_send_length's ret, per thread, socket and the socket's netns
 *                 (zc_pinned_by_send); other zerocopy skbs (io_uring's, UDP's) at
 *                 net:net_dev_start_xmit, flagged SKBFL_ZEROCOPY_ENABLE: data_len (their
 *                 user pages), per device netns and per owning socket
 *   fallback copy net:netif_receive_skb, a flagged skb received in a followed netns, less those
 *                 skb:kfree_skb frees still flagged after they were received (forwarded to a
 *                 blackhole, dropped): since 6.17 only local delivery copies, before it every
 *                 received skb was copied first; tcp:tcp_probe confirms the flag is gone when
 *                 TCP sees the segment
 *   tx_copy       inferred in user space: tx_bytes - zc_tx_bytes - tx_spliced_bytes
 *   rx_discarded  sock:sock_recv_length with MSG_TRUNC on a TCP socket: ret bytes dropped
 *   rx_mapped     a cgroup/getsockopt program: TCP_ZEROCOPY_RECEIVE's own result (length
 *                 mapped, copybuf_len copied, which sock_recv_length never sees)
 *   rx_spliced    syscalls:sys_exit_splice (else tcp:tcp_rcv_space_adjust in a thread inside
 *                 splice(2)): what the socket's reader consumed (bytes_received less what is
 *                 queued) less what its record counted of every other receive kind
 * The owner of a zerocopy socket whose skbs xmit counts is named at every sock_send_length
 * of a followed process; the bytes of skbs that left before (inside the socket's first send)
 * wait on the socket (maps.bpf.h, sk_info) and are claimed then. Without sock_send_length
 * (before 6.3) they are never claimed on this rung: zerocopy bytes are counted per netns
 * only, as tx_bytes is not counted at all.
 * Arguments are typed kernel pointers: fields are read directly (CO-RE relocated loads), a
 * probe read is needed only for the computed skb_shinfo() pointer. */
#ifndef NETIO_TP_RUNG_H
#define NETIO_TP_RUNG_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "thread.bpf.h"
#include "receive.bpf.h"
#include "exit_wanted.bpf.h"
#include "syscall_nr.bpf.h"
#include "fd_sock.bpf.h"

#define NETIO_IPPROTO_TCP 6
#define NETIO_IPPROTO_UDP 17
#define NETIO_PF_IO_WORKER 0x00000010	/* io_uring's worker and SQPOLL threads */

#define NETIO_MSG_ZEROCOPY 0x4000000
#define NETIO_NETIF_F_SG 1	/* NETIF_F_SG_BIT is 0 on every kernel */

static __always_inline bool counted_proto(u16 proto)
{
	return proto == NETIO_IPPROTO_TCP || proto == NETIO_IPPROTO_UDP;
}


/* bpf_rdonly_cast (6.2+) makes a computed kernel address a typed read-only pointer: loads
 * through it are single fault-safe instructions where bpf_probe_read_kernel is a helper call
 * (each call and return costs here: bench/NOTES.md). The per-skb programs come in two builds
 * from one body, `cast` a constant: the plain name casts, the *_pre62 one probe-reads; the
 * tracer loads the one the kernel allows (user/attach.c, rows with .kfunc). Weak: before 6.2
 * the kfunc is absent and only the *_pre62 programs are loaded. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#endif
