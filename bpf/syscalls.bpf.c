// SPDX-License-Identifier: GPL-2.0
/* Per-process socket syscall counts, bytes and log2 latency histograms. A call starts at the
 * raw_syscalls sys_enter tracepoint (tp_btf, or raw_tp where BTF-typed attach is refused) and
 * ends where the kernel marks it (maps.h, sc_finish): send and receive calls at the socket
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
#include "maps.h"

char LICENSE[] SEC("license") = "GPL";

#define NETIO_MSG_ERRQUEUE 0x2000

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

/* enum netio_exit_state. [EXIT_WANTED] = 1 once a followed thread entered a call that ends
 * at sys_exit: the tracer then attaches sc_exit if it left it out (until then such calls are
 * counted, not timed), and detaches it again at `reset`. [EXIT_SOCKET_END] = 1 (set by the
 * tracer) when send and receive calls end at the socket layer: sys_exit then leaves them
 * alone (one that did not reach a socket, a write to a file, is not a socket call). */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EXIT_NR);
	__type(key, u32);
	__type(value, u32);
} exit_wanted SEC(".maps");

/* [0]: time 1 traced call in N per thread (--latency-sample N; 0 or 1: every call). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} latency_sample SEC(".maps");

/* The start of the thread's next traced call: the clock, or NETIO_UNTIMED for the calls
 * --latency-sample leaves untimed (the first of every N is timed). */
static __always_inline u64 call_start(struct task_state *st)
{
	u32 zero = 0, *n = bpf_map_lookup_elem(&latency_sample, &zero);

	if (n && *n > 1 && st->calls++ % *n)
		return NETIO_UNTIMED;
	return bpf_ktime_get_ns();
}

/* id: syscall number; flags: recvmsg's flags argument, read by the caller (directly or by a
 * probe read), else 0 */
static __always_inline int on_enter(int cls, long id, u64 flags)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_state *st = followed_thread(task);
	bool counted;

	if (!st)
		return 0;
	if (cls == SC_RECVMSG && (flags & NETIO_MSG_ERRQUEUE))
		cls = SC_RECVMSG_ERRQUEUE;
	counted = sc_counted_at_enter(cls) && cls < SC_NR_CLASSES;
	if (counted) {
		u32 key = EXIT_WANTED, *wanted = bpf_map_lookup_elem(&exit_wanted, &key);

		st->counts.sc[cls].count++;
		if (wanted && !*wanted)
			*wanted = 1;
	}
	if (!st->spill) {	/* a spill slot lasts one event: its calls are not timed */
		st->cls = cls;
		st->nr = id;
		st->ts = call_start(st);
	}
	if (counted || st->spill)
		thread_counted(st, task);
	return 0;
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
	/* no storage: a thread never followed; ts 0: not in a traced call */
	task = bpf_get_current_task_btf();
	st = bpf_task_storage_get(&task_state, task, 0, 0);
	if (!st || !st->ts)
		return 0;
	sc_finish(st, ret);
	thread_counted(st, task);
	return 0;
}

/* tp_btf: regs is a typed kernel pointer, read directly */
SEC("tp_btf/sys_enter")
int BPF_PROG(sc_enter, struct pt_regs *regs, long id)
{
	int cls = sc_class(id);

	if (cls < 0)
		return 0;
	return on_enter(cls, id, cls == SC_RECVMSG ? PT_REGS_PARM3(regs) : 0);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sc_exit, struct pt_regs *regs, long ret)
{
	return on_exit(sc_class(SYSCALL_NR(regs)), ret);
}

/* raw_tp: the same with probe reads */
SEC("raw_tp/sys_enter")
int BPF_PROG(sc_enter_raw, struct pt_regs *regs, long id)
{
	int cls = sc_class(id);

	if (cls < 0)
		return 0;
	return on_enter(cls, id, cls == SC_RECVMSG ? PT_REGS_PARM3_CORE(regs) : 0);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sc_exit_raw, struct pt_regs *regs, long ret)
{
	return on_exit(sc_class(SYSCALL_NR_READ(regs)), ret);
}

/* fentry/fexit on the syscall functions themselves (the attach ladder's first rung for
 * syscalls, issue 15): only the calls we follow run a program, where sys_enter/sys_exit put
 * every syscall of every task on the slow path. The attach table (attach.c) names each
 * program's function (__x64_sys_sendto, __arm64_sys_sendto, ...). The function's argument is
 * the user's registers. */
#define SYSCALL_FENTRY(name, cls)						\
SEC("fentry")									\
int BPF_PROG(fs_##name##_in, struct pt_regs *regs)				\
{										\
	return on_enter(cls, current_syscall_nr(),				\
			cls == SC_RECVMSG ? PT_REGS_PARM3_CORE(regs) : 0);	\
}										\
SEC("fexit")									\
int fs_##name##_out(u64 *ctx)							\
{										\
	u64 ret = 0;								\
										\
	bpf_get_func_ret(ctx, &ret);						\
	return on_exit(cls, (long)ret);						\
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
