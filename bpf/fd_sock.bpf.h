/* The socket behind a file descriptor of a task, read through its file table (probe reads:
 * task may be any task pointer). Shared by the syscall hooks (whether a read or write is a
 * socket call) and the spliced bytes' program (the socket splice(2) read from). */
#ifndef NETIO_FD_SOCK_H
#define NETIO_FD_SOCK_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define NETIO_S_IFMT 00170000
#define NETIO_S_IFSOCK 0140000

/* The struct sock of task's descriptor fd, or NULL where fd is no socket. */
static __always_inline struct sock *fd_sock(struct task_struct *task, long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds, *f = NULL;
	struct socket *sock;

	if (!fdt || fd < 0 || (unsigned long)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return NULL;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & NETIO_S_IFMT) != NETIO_S_IFSOCK)
		return NULL;
	sock = BPF_CORE_READ(f, private_data);
	return BPF_CORE_READ(sock, sk);
}

#endif
