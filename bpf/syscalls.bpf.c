// SPDX-License-Identifier: GPL-2.0
/* Per-process socket syscall counts, bytes and log2 latency histograms. A call starts at the
 * raw_syscalls sys_enter tracepoint (tp_btf, or raw_tp where BTF-typed attach is refused) and
 * ends where the kernel marks it (maps.bpf.h, sc_finish): send and receive calls at the socket
 * layer's sock_send_length / sock_recv_length (copy_tp.bpf.c), the others (poll, epoll_wait,
 * sendfile) at sys_exit. Where those socket tracepoints exist, the tracer attaches sys_exit
 * only once a followed thread made such a call (exit_wanted below): measured here, a program
 * on sys_exit costs as much as one on sys_enter, and every syscall of the machine pays both.
 * Every syscall of every process passes sys_enter, so the order is: syscall id (a switch, no
 * map access), then whether the thread is followed (cached in its task storage), then one
 * clock read. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "thread.bpf.h"
#include "exit_wanted.bpf.h"
#include "syscall_nr.bpf.h"
#include "fd_sock.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define NETIO_MSG_ERRQUEUE 0x2000

/* syscall number -> class, -1 for syscalls we do not follow */
static __always_inline int sc_class(long id)
{
	switch (id) {
#ifdef NETIO_SYSCALL_NRS	/* else no case: every number is -2 (syscall_nr.bpf.h) */
	case NR_SENDTO: return SC_SENDTO;
	case NR_SENDMSG: return SC_SENDMSG;
	case NR_RECVFROM: return SC_RECVFROM;
	case NR_RECVMSG: return SC_RECVMSG;
	case NR_WRITE: return SC_WRITE;
	case NR_READ: return SC_READ;
	case NR_SENDFILE: return SC_SENDFILE;
#ifdef NR_POLL
	case NR_POLL:
#endif
	case NR_PPOLL: return SC_POLL;
#ifdef NR_EPOLL_WAIT
	case NR_EPOLL_WAIT:
#endif
	case NR_EPOLL_PWAIT:
	case NR_EPOLL_PWAIT2: return SC_EPOLL_WAIT;
#endif
	default: return -1;
	}
}


/* [0]: time 1 traced call in N of each class per thread (--latency-sample N; 0 or 1: every
 * call). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} latency_sample SEC(".maps");

/* The start of the thread's next traced call, of class cls: the clock, or NETIO_UNTIMED for
 * the calls --latency-sample leaves untimed. Each class keeps its own count and times the
 * first of every N of its calls: with one count for all classes, a thread whose calls repeat
 * in a cycle of a length that divides N (poll, recv, send, send) would time one class only. */
static __always_inline u64 call_start(struct task_state *st, u32 cls)
{
	u32 zero = 0, *n = bpf_map_lookup_elem(&latency_sample, &zero);
	u32 since;

	if (n && *n > 1 && cls < SC_NR_CLASSES) {
		since = st->untimed[cls];
		st->untimed[cls] = since + 1 < *n ? since + 1 : 0;
		if (since)
			return NETIO_UNTIMED;
	}
	return bpf_ktime_get_ns();
}

#define NETIO_AF_INET 2
#define NETIO_AF_INET6 10

/* What file descriptor fd of task (current) is, for a call's class: not a socket, a socket, or
 * a TCP or UDP socket over IP (whose bytes sent are tx_bytes). */
enum fd_kind { FD_OTHER, FD_SOCKET, FD_IP_SOCKET };

static __always_inline enum fd_kind fd_kind(struct task_struct *task, long fd)
{
	struct sock *sk = fd_sock(task, fd);
	u16 family, proto;

	if (!sk)
		return FD_OTHER;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	proto = BPF_CORE_READ(sk, sk_protocol);
	if ((family == NETIO_AF_INET || family == NETIO_AF_INET6) &&
	    (proto == 6 /* TCP */ || proto == 17 /* UDP */))
		return FD_IP_SOCKET;
	return FD_SOCKET;
}

static __always_inline bool exit_state(u32 which)
{
	u32 *v = bpf_map_lookup_elem(&exit_wanted, &which);

	return v && *v;
}

/* Where the socket layer does not mark the end of send and receive calls (before 6.3, or the
 * compat build), their descriptor tells what the call is: a read or write of a file is no
 * socket call, and the bytes of a send on a TCP or UDP socket are tx_bytes if no other rung
 * counts them (EXIT_TX_BYTES). Returns false for a call not to trace. */
static __always_inline bool classify_fd(struct task_state *st, int cls, struct task_struct *task,
					long fd)
{
	enum fd_kind kind;

	st->tx_counted = 0;
	if (cls != SC_READ && cls != SC_WRITE && !sc_is_send(cls) && cls != SC_SENDFILE)
		return true;
	if (exit_state(EXIT_SOCKET_END))
		return true;
	kind = fd_kind(task, fd);
	if (kind == FD_OTHER && (cls == SC_READ || cls == SC_WRITE))
		return false;
	st->tx_counted = kind == FD_IP_SOCKET && cls != SC_READ && exit_state(EXIT_TX_BYTES);
	return true;
}

/* id: syscall number; fd: the first argument (a descriptor for every class but poll's);
 * flags: recvmsg's flags argument, else 0 (each read by the caller, directly or by a probe
 * read) */
static __always_inline int on_enter(int cls, long id, long fd, u64 flags)
{
	struct task_struct *task = current_task();
	struct task_state *st = followed_thread(task);
	struct thread_counts *c;
	bool counted;

	if (!st)
		return 0;
	if (!classify_fd(st, cls, task, fd)) {
		if (thread_spilled(st))
			thread_counted(st, task);	/* the CPU's spill slot, freed */
		return 0;
	}
	if (cls == SC_RECVMSG && (flags & NETIO_MSG_ERRQUEUE))
		cls = SC_RECVMSG_ERRQUEUE;
	counted = sc_counted_at_enter(cls) && cls < SC_NR_CLASSES;
	if (counted) {
		u32 key = EXIT_WANTED, *wanted = bpf_map_lookup_elem(&exit_wanted, &key);

		c = thread_counts_of(st);
		if (c) {
			COUNT_ADD(c->sc[cls].count, 1);
			thread_sc_touched(st, cls);
		}
		if (wanted && !*wanted)
			*wanted = 1;
	}
	st->cls = cls;
	st->nr = id;
	st->ts = call_start(st, cls);
	if (counted || thread_spilled(st))
		thread_counted(st, task);
	return 0;
}

/* A send on a TCP or UDP socket returned ret > 0 where its bytes are tx_bytes (classify_fd):
 * sendfile's were spliced from the page cache, not copied. */
static __always_inline void count_tx(struct task_state *st, int cls, long ret)
{
	struct thread_counts *c = thread_counts_of(st);

	if (!c)
		return;
	COUNT_ADD(c->p.tx_bytes, ret);
	COUNT_ADD(c->p.tx_calls, 1);
	if (cls == SC_SENDFILE)
		COUNT_ADD(c->p.tx_spliced_bytes, ret);
}

/* cls: the class of the syscall returning (sc_class), known before any map is looked at:
 * every syscall of the machine passes sys_exit, and a send or receive call that reaches a
 * socket ends there (a send or receive that never reached one is then left open: the next
 * call's sys_enter starts afresh, and a socket event checks the syscall it is in). */
static __always_inline int on_exit(int cls, long ret)
{
	struct task_struct *task;
	struct task_state *st;

	if (cls < 0)
		return 0;
	if (!sc_counted_at_enter(cls)) {
		u32 key = EXIT_SOCKET_END, *socket_end = bpf_map_lookup_elem(&exit_wanted, &key);

		if (socket_end && *socket_end)
			return 0;
	}
	/* a process not followed (most of a host's) leaves at its bucket; no state: a thread
	 * never followed; ts 0: not in a traced call */
	task = current_task();
	if (surely_unfollowed(TASK_READ(task, tgid)))
		return 0;
	st = ending_thread(task);
	if (!st)
		return 0;
	if (!st->ts) {
		if (thread_spilled(st))
			thread_counted(st, task);	/* the CPU's spill slot, freed */
		return 0;
	}
	if (st->tx_counted && ret > 0)
		count_tx(st, cls, ret);
	sc_finish(st, ret);
	thread_counted(st, task);
	return 0;
}

/* A followed thread enters splice(2): from now on the spliced bytes' program (copy_tp,
 * tp_rcv_space_adjust) does its work; set before the splice reads the socket. */
static __always_inline int on_splice_enter(void)
{
	u32 key = EXIT_SPLICE, *wanted = bpf_map_lookup_elem(&exit_wanted, &key);

	if (wanted && !*wanted && followed_thread(current_task()))
		*wanted = 1;
	return 0;
}

/* The raw_syscalls tracepoints, in two builds of one body: tp_btf, where regs is a typed kernel
 * pointer read directly, and raw_tp, which probe-reads it (READ: the suffix of libbpf's
 * PT_REGS_PARMn macros, and of SYSCALL_NR) */
#define SYS_ENTER_EXIT(sec, enter, exit, READ)					\
SEC(sec "/sys_enter")								\
int BPF_PROG(enter, struct pt_regs *regs, long id)				\
{										\
	int cls = sc_class(id);							\
										\
	if (cls < 0)								\
		return id == NR_SPLICE ? on_splice_enter() : 0;		\
	return on_enter(cls, id, PT_REGS_PARM1##READ(regs),			\
			cls == SC_RECVMSG ? PT_REGS_PARM3##READ(regs) : 0);	\
}										\
SEC(sec "/sys_exit")								\
int BPF_PROG(exit, struct pt_regs *regs, long ret)				\
{										\
	return on_exit(sc_class(SYSCALL_NR##READ(regs)), ret);			\
}

SYS_ENTER_EXIT("tp_btf", sc_enter, sc_exit, )
SYS_ENTER_EXIT("raw_tp", sc_enter_raw, sc_exit_raw, _CORE)

/* fentry/fexit on the syscall functions themselves (the attach ladder's first rung for
 * syscalls): only the calls we follow run a program, where sys_enter/sys_exit put every
 * syscall of every task on the slow path. The attach table (attach.c) names each
 * program's function (__x64_sys_sendto, __arm64_sys_sendto, ...). The function's one argument
 * is the user's registers (the syscall number, recvmsg's flags); fexit gets the return value
 * after it. */
#define SYSCALL_FENTRY(name, cls)						\
SEC("fentry")									\
int BPF_PROG(fs_##name##_in, struct pt_regs *regs)				\
{										\
	return on_enter(cls, SYSCALL_NR(regs),					\
			PT_REGS_PARM1_CORE(regs),				\
			cls == SC_RECVMSG ? PT_REGS_PARM3_CORE(regs) : 0);	\
}										\
SEC("fexit")									\
int BPF_PROG(fs_##name##_out, struct pt_regs *regs, long ret)			\
{										\
	return on_exit(cls, ret);						\
}

SYSCALL_FENTRY(sendto, SC_SENDTO)
SYSCALL_FENTRY(sendmsg, SC_SENDMSG)
SYSCALL_FENTRY(recvfrom, SC_RECVFROM)
SYSCALL_FENTRY(recvmsg, SC_RECVMSG)
SYSCALL_FENTRY(write, SC_WRITE)
SYSCALL_FENTRY(read, SC_READ)
SYSCALL_FENTRY(sendfile, SC_SENDFILE)
SYSCALL_FENTRY(poll, SC_POLL)
SYSCALL_FENTRY(ppoll, SC_POLL)
SYSCALL_FENTRY(epoll_wait, SC_EPOLL_WAIT)
SYSCALL_FENTRY(epoll_pwait, SC_EPOLL_WAIT)
SYSCALL_FENTRY(epoll_pwait2, SC_EPOLL_WAIT)
