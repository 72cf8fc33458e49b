// SPDX-License-Identifier: GPL-2.0
/* Per-process socket syscall counts, bytes and log2 latency histograms, from the raw_syscalls
 * tracepoints (tp_btf, or raw_tp where BTF-typed attach is refused). Every syscall of every
 * process passes here, so the order is: syscall id (a switch, no map access), then whether
 * the thread is followed (cached in its task storage), then the work: one clock read at each
 * end and, at the exit, one lookup of the process's statistics. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.h"

char LICENSE[] SEC("license") = "GPL";

#define NETIO_MSG_ERRQUEUE 0x2000
#define NETIO_MSG_ZEROCOPY 0x4000000

#define NETIO_S_IFMT 00170000
#define NETIO_S_IFSOCK 0140000

/* syscall number -> class, -1 for syscalls we do not follow */
static __always_inline int sc_class(long id)
{
	switch (id) {
#if defined(__TARGET_ARCH_x86)
	case 44: return SC_SENDTO;
	case 46: return SC_SENDMSG;
	case 45: return SC_RECVFROM;
	case 47: return SC_RECVMSG;
	case 1: return SC_WRITE;
	case 0: return SC_READ;
	case 40: return SC_SENDFILE;
	case 7:			/* poll */
	case 271: return SC_POLL;	/* ppoll */
	case 232:		/* epoll_wait */
	case 281:		/* epoll_pwait */
	case 441: return SC_EPOLL_WAIT;	/* epoll_pwait2 */
#elif defined(__TARGET_ARCH_arm64)
	case 206: return SC_SENDTO;
	case 211: return SC_SENDMSG;
	case 207: return SC_RECVFROM;
	case 212: return SC_RECVMSG;
	case 64: return SC_WRITE;
	case 63: return SC_READ;
	case 71: return SC_SENDFILE;
	case 73: return SC_POLL;
	case 22:
	case 441: return SC_EPOLL_WAIT;
#endif
	default: return -1;
	}
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

/* A MSG_ZEROCOPY send of a followed process: name the owner of the socket behind fd before
 * its first skb leaves (skbs leave in softirq context too, where current is anybody; the
 * tp_btf rung attributes zerocopy bytes per process through this). Only zerocopy sends pay. */
static __always_inline void note_zc_fd(u32 tgid, long fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file **fds, *f = NULL;
	struct socket *sock;
	u64 sk;

	if (fd < 0 || fd >= BPF_CORE_READ(task, files, fdt, max_fds))
		return;
	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & NETIO_S_IFMT) != NETIO_S_IFSOCK)
		return;		/* not a socket: the send fails with ENOTSOCK */
	sock = BPF_CORE_READ(f, private_data);
	sk = (u64)BPF_CORE_READ(sock, sk);
	if (sk)
		note_zc_owner(sk, tgid);
}

/* The thread's state if its process is followed, else NULL. "Followed" is cached in the
 * task's storage and decided again when the filter generation changed. */
static __always_inline struct task_state *followed_thread(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_state *st = bpf_task_storage_get(&task_state, task, 0, 0);
	u32 gen = current_filter_gen(), tgid;

	if (st && st->gen == gen)
		return st->followed ? st : NULL;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_followed(tgid)) {
		if (st) {
			st->gen = gen;
			st->followed = 0;
		}
		return NULL;	/* no storage is created for threads never followed */
	}
	if (!st) {
		st = bpf_task_storage_get(&task_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st) {
			count_event(CNT_DROPS);
			return NULL;
		}
	}
	st->gen = gen;
	st->followed = 1;
	st->tgid = tgid;
	return st;
}

/* fd, arg3, arg4: syscall arguments, read by the caller (directly or by probe reads) */
static __always_inline int on_enter(int cls, long fd, u64 arg3, u64 arg4)
{
	struct task_state *st = followed_thread();

	if (!st)
		return 0;
	if (cls == SC_RECVMSG && (arg3 & NETIO_MSG_ERRQUEUE))
		cls = SC_RECVMSG_ERRQUEUE;
	else if (cls == SC_SENDMSG && (arg3 & NETIO_MSG_ZEROCOPY))
		note_zc_fd(st->tgid, fd);
	else if (cls == SC_SENDTO && (arg4 & NETIO_MSG_ZEROCOPY))
		note_zc_fd(st->tgid, fd);
	st->cls = cls;
	st->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_exit(long ret)
{
	struct task_state *st;
	struct tgid_stats *ts;
	struct sc_stats *s;
	u64 now, delta;
	u32 slot, cls;

	/* no storage: a thread never followed; ts 0: not in a traced syscall */
	st = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->ts)
		return 0;
	now = bpf_ktime_get_ns();
	delta = now > st->ts ? now - st->ts : 0;
	st->ts = 0;
	cls = st->cls;
	ts = tgid_stats_get(st->tgid);
	if (!ts)
		return 0;
	/* bytes that sock_send_length / skb_copy_datagram_iovec counted during the call */
	if (st->pending_tx_calls) {
		ts->p.tx_bytes += st->pending_tx_bytes;
		ts->p.tx_calls += st->pending_tx_calls;
		st->pending_tx_bytes = 0;
		st->pending_tx_calls = 0;
	}
	if (st->pending_rx_calls) {
		ts->p.rx_copy_bytes += st->pending_rx_bytes;
		ts->p.rx_calls += st->pending_rx_calls;
		st->pending_rx_bytes = 0;
		st->pending_rx_calls = 0;
	}
	if (cls >= SC_NR_CLASSES)
		return 0;
	s = &ts->sc[cls];
	s->count++;
	if (ret < 0)
		s->errors++;
	else if (cls != SC_POLL && cls != SC_EPOLL_WAIT)
		s->bytes += ret;
	s->total_ns += delta;
	slot = log2_slot(delta);
	if (slot >= NETIO_HIST_SLOTS)
		slot = NETIO_HIST_SLOTS - 1;
	s->hist[slot]++;
	return 0;
}

static __always_inline bool needs_args(int cls)
{
	return cls == SC_RECVMSG || cls == SC_SENDMSG || cls == SC_SENDTO;
}

/* tp_btf: regs is a typed kernel pointer, read directly */
SEC("tp_btf/sys_enter")
int BPF_PROG(sc_enter, struct pt_regs *regs, long id)
{
	int cls = sc_class(id);

	if (cls < 0)
		return 0;
	if (!needs_args(cls))
		return on_enter(cls, -1, 0, 0);
	return on_enter(cls, PT_REGS_PARM1(regs), PT_REGS_PARM3(regs),
			PT_REGS_PARM4_SYSCALL(regs));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sc_exit, struct pt_regs *regs, long ret)
{
	return on_exit(ret);
}

/* raw_tp: the same with probe reads */
SEC("raw_tp/sys_enter")
int BPF_PROG(sc_enter_raw, struct pt_regs *regs, long id)
{
	int cls = sc_class(id);

	if (cls < 0)
		return 0;
	if (!needs_args(cls))
		return on_enter(cls, -1, 0, 0);
	return on_enter(cls, PT_REGS_PARM1_CORE(regs), PT_REGS_PARM3_CORE(regs),
			PT_REGS_PARM4_CORE_SYSCALL(regs));
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sc_exit_raw, struct pt_regs *regs, long ret)
{
	return on_exit(ret);
}
