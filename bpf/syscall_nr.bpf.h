/* The syscall numbers the objects compare against, one name per syscall, for every object
 * (syscalls.bpf.c's classes and splice, copy_tp.bpf.c's send and receive calls). Syscall
 * numbers are per architecture, and no header a BPF object can include gives them (vmlinux.h
 * has types only; <asm/unistd.h> is the host's, not the target's): these are x86_64's, and
 * arm64's (its generic table) for the other architecture the tracer builds for. Elsewhere
 * every number is -2, which no syscall has: nothing is classed, nothing matches.
 * poll(2) and epoll_wait(2) exist on x86_64 only (arm64 has ppoll and epoll_pwait alone), so
 * NR_POLL and NR_EPOLL_WAIT are defined there only. */
#ifndef NETIO_SYSCALL_NR_H
#define NETIO_SYSCALL_NR_H

#if defined(__TARGET_ARCH_x86)
#define NETIO_SYSCALL_NRS 1	/* the numbers below are this architecture's */
#define NR_READ 0
#define NR_WRITE 1
#define NR_POLL 7
#define NR_SENDFILE 40
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47
#define NR_EPOLL_WAIT 232
#define NR_PPOLL 271
#define NR_SPLICE 275
#define NR_EPOLL_PWAIT 281
#define NR_SENDMMSG 307
#define NR_IO_URING_ENTER 426
#define NR_EPOLL_PWAIT2 441
#elif defined(__TARGET_ARCH_arm64)
#define NETIO_SYSCALL_NRS 1
#define NR_EPOLL_PWAIT 22
#define NR_READ 63
#define NR_WRITE 64
#define NR_SENDFILE 71
#define NR_PPOLL 73
#define NR_SPLICE 76
#define NR_SENDTO 206
#define NR_RECVFROM 207
#define NR_SENDMSG 211
#define NR_RECVMSG 212
#define NR_SENDMMSG 269
#define NR_IO_URING_ENTER 426
#define NR_EPOLL_PWAIT2 441
#else
#define NR_READ -2
#define NR_WRITE -2
#define NR_SENDFILE -2
#define NR_SENDTO -2
#define NR_RECVFROM -2
#define NR_SENDMSG -2
#define NR_RECVMSG -2
#define NR_PPOLL -2
#define NR_SPLICE -2
#define NR_EPOLL_PWAIT -2
#define NR_SENDMMSG -2
#define NR_IO_URING_ENTER -2
#define NR_EPOLL_PWAIT2 -2
#endif

#endif
