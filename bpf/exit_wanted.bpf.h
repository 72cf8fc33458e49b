/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NETIO_EXIT_WANTED_H
#define NETIO_EXIT_WANTED_H

/* enum netio_exit_state. [EXIT_WANTED] = 1 once a followed thread entered a call that ends
 * at sys_exit: the tracer then attaches sc_exit if it left it out (until then such calls are
 * counted, not timed), and detaches it again at `reset`. [EXIT_SOCKET_END] = 1 (set by the
 * tracer) when send and receive calls end at the socket layer: sys_exit then leaves them
 * alone (one that did not reach a socket, a write to a file, is not a socket call).
 * [EXIT_SPLICE] = 1 once a followed thread entered splice(2): copy_tp.bpf.c's rx_spliced
 * program then does its work. One array for both objects, shared by name (the first object
 * loaded makes it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EXIT_NR);
	__type(key, u32);
	__type(value, u32);
} exit_wanted SEC(".maps");

#endif
