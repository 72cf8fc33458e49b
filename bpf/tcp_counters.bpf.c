// SPDX-License-Identifier: GPL-2.0
/* The kernel's own per-socket TCP counters, read by iterators (bench/tcp_counters.c loads
 * them, bench/tcp_counters.py measures them; the tracer never loads this object): what it
 * would cost a snapshot to learn every socket's bytes and owner, instead of running a program
 * per send and receive call, and whether those counters say, to the byte, what the socket's
 * user wrote and read.
 *
 * A read runs socket_owners, then tcp_counters, as a snapshot would:
 * - socket_owners (iter/task_file): one run per open file of each process; a socket's owner
 *   is the process holding it, or "shared" when two processes hold it (a fork, a passed fd).
 * - tcp_counters (iter/tcp): one run per TCP socket of the reader's netns. For a full socket
 *   that is not listening: the bytes its user wrote (bytes_acked, and write_seq - snd_una not
 *   acked yet; on the side that connected, its SYN as well) and read (bytes_received less what waits in its queue, rcv_nxt - copied_seq),
 *   each less the one a FIN takes in sequence space, put in the socket's entry as the owner's
 *   record would get them.
 * With `print` set both write their findings on the iterator's seq. Nothing in it differs
 * between the storage and the compat build. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define TCPF(state) (1U << (state))
/* the states in which the socket's FIN is in write_seq (tcp_close_state, tcp_send_fin) */
#define FIN_SENT (TCPF(TCP_FIN_WAIT1) | TCPF(TCP_FIN_WAIT2) | TCPF(TCP_CLOSING) | \
		  TCPF(TCP_LAST_ACK))
#define NETIO_S_IFMT 00170000
#define NETIO_S_IFSOCK 0140000

struct sock_owner {
	u32 tgid;
	u32 shared;	/* held by more than one process */
	u32 gen;	/* the read that found it: an entry of an earlier read is stale */
};

struct sock_bytes {
	u64 tx;
	u64 rx;
	u32 tgid;	/* the owner's, 0: none found (another netns's process, or shared) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);	/* struct sock * */
	__type(value, struct sock_owner);
} sock_owner SEC(".maps");

/* what a snapshot would add its reading into: one entry per socket */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);	/* struct sock * */
	__type(value, struct sock_bytes);
} sock_bytes SEC(".maps");

bool print = false;	/* the loader's --print: each finding on the seq */
__u64 sockets = 0;	/* full TCP sockets read, all reads together */
__u64 files = 0;	/* open files visited, all reads together */
__u32 gen = 0;		/* the read in progress (the loader counts them) */

SEC("iter/task_file")
int socket_owners(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct sock_owner n = {}, *o;
	struct file *file = ctx->file;
	struct socket *so;
	u64 key;

	if (!file || !task)
		return 0;
	files++;
	if ((BPF_CORE_READ(file, f_inode, i_mode) & NETIO_S_IFMT) != NETIO_S_IFSOCK)
		return 0;
	so = BPF_CORE_READ(file, private_data);
	key = (u64)BPF_CORE_READ(so, sk);
	if (!key)
		return 0;
	n.tgid = BPF_CORE_READ(task, tgid);
	n.gen = gen;
	o = bpf_map_lookup_elem(&sock_owner, &key);
	if (!o)
		bpf_map_update_elem(&sock_owner, &key, &n, BPF_NOEXIST);
	else if (o->gen != gen)
		*o = n;
	else if (o->tgid != n.tgid)
		o->shared = 1;
	if (print)
		BPF_SEQ_PRINTF(ctx->meta->seq, "fd %lu %u\n", BPF_CORE_READ(file, f_inode, i_ino),
			       n.tgid);
	return 0;
}

/* The bytes tp's user wrote: acked, and in flight or queued, less a FIN sent; where the
 * socket connected, its SYN too (the SYN-ACK's ack moved bytes_acked: bench/tcp_counters.py,
 * Tally). In CLOSE, a FIN sent and a reset look alike; a design would read it at the state
 * change instead. */
static __always_inline u64 bytes_written(struct tcp_sock *tp, u8 state)
{
	u64 n = tp->bytes_acked + (u32)(tp->write_seq - tp->snd_una);

	return (TCPF(state) & FIN_SENT) && n ? n - 1 : n;
}

/* The bytes tp's user read: received in order less what is queued; a FIN read counts one in
 * bytes_received (tcp_rcv_nxt_update) and moves copied_seq past it. */
static __always_inline u64 bytes_read(struct tcp_sock *tp)
{
	u64 n = tp->bytes_received - (u32)(tp->rcv_nxt - tp->copied_seq);
	bool fin_read = ((tp->inet_conn.icsk_inet.sk.__sk_common.skc_flags >> SOCK_DONE) & 1) &&
			tp->copied_seq == tp->rcv_nxt;

	return fin_read && n ? n - 1 : n;
}

SEC("iter/tcp")
int tcp_counters(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct sock_bytes b = {}, *old;
	struct sock_owner *o;
	struct tcp_sock *tp;
	struct socket *so;
	u64 key, ino = 0;
	u8 state;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;	/* a request or time-wait socket */
	state = tp->inet_conn.icsk_inet.sk.__sk_common.skc_state;
	if (state == TCP_LISTEN)
		return 0;
	key = (u64)tp;
	o = bpf_map_lookup_elem(&sock_owner, &key);
	b.tgid = o && o->gen == gen && !o->shared ? o->tgid : 0;
	b.tx = bytes_written(tp, state);
	b.rx = bytes_read(tp);
	old = bpf_map_lookup_elem(&sock_bytes, &key);
	if (old)
		*old = b;
	else
		bpf_map_update_elem(&sock_bytes, &key, &b, BPF_ANY);
	sockets++;
	if (!print)
		return 0;
	so = tp->inet_conn.icsk_inet.sk.sk_socket;
	if (so)
		ino = BPF_CORE_READ(so, file, f_inode, i_ino);
	BPF_SEQ_PRINTF(ctx->meta->seq, "sock %llu %u %llu %llu %u\n", ino, state, b.tx, b.rx,
		       b.tgid);
	return 0;
}
