/* Structures shared by the BPF programs (bpf/) and the tracer (user/).
 * Plain C types only: this file is included both with vmlinux.h and with libc headers. */
#ifndef NETIO_NETIO_H
#define NETIO_NETIO_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
#endif

#define NETIO_COMM_LEN 16
/* log2 latency histogram: slot 0 holds [0, 2) ns, slot i holds [2^i, 2^(i+1)) ns, the last
 * slot also everything above it (2^39 ns is ~9 minutes). */
#define NETIO_HIST_SLOTS 40

#define NETIO_MAX_PROCS   8192
#define NETIO_COMPAT_MAX_PROCS 2048	/* the compat build's tgid_stats, preallocated (maps.bpf.h) */
#define NETIO_MAX_NETNS   256
#define NETIO_SPILL_PROCS 512	/* tgid_spill (bpf/maps.bpf.h), preallocated */
#define NETIO_MAX_THREADS 16384
#define NETIO_MAX_SOCKS   4096
/* --cgroup: directories followed, and how deep below the root the filter looks for them */
#define NETIO_MAX_CGROUPS 16
#define NETIO_MAX_CGROUP_DEPTH 32
#define NETIO_ANY_CGROUP 0	/* key of followed_cgroups set while any is followed (ids are > 0) */

/* How many followed processes each bucket of tgids (tgid % NETIO_FOLLOW_BUCKETS) holds
 * (bpf/filter.bpf.h, follow_buckets): raised before followed_tgids gains a tgid, lowered after
 * it lost one, by the BPF side (a fork, a move into a followed cgroup) and by the tracer
 * through mmap (user/followed_tgids.c). on: the tracer keeps them; 0, every event looks the
 * map up. cgroups: 1 once a cgroup is followed (--cgroup), as followed_cgroups' key
 * NETIO_ANY_CGROUP says, with no lookup. */
#define NETIO_FOLLOW_BUCKETS 16384
struct follow_buckets {
	u32 on;
	u32 cgroups;
	u32 n[NETIO_FOLLOW_BUCKETS];
};

/* Syscall classes counted per process. */
enum netio_sc_class {
	SC_SENDTO = 0,
	SC_SENDMSG,
	SC_RECVFROM,
	SC_RECVMSG,
	SC_RECVMSG_ERRQUEUE,	/* recvmsg(..., MSG_ERRQUEUE): zerocopy completions */
	SC_WRITE,
	SC_READ,
	SC_SENDFILE,
	SC_POLL,		/* poll, ppoll */
	SC_EPOLL_WAIT,		/* epoll_wait, epoll_pwait, epoll_pwait2 */
	SC_NR_CLASSES,
};

/* Indices of the exit_wanted array (syscalls.bpf.c). EXIT_WANTED: set by BPF once a followed
 * thread entered a call that ends at sys_exit (the tracer then attaches sys_exit);
 * EXIT_SOCKET_END: set by the tracer when send and receive calls end at the socket layer;
 * EXIT_TX_BYTES: set by the tracer when no other rung counts the bytes sent, which then come
 * from the send calls' return values (on TCP and UDP sockets); EXIT_SPLICE: set by BPF once a
 * followed thread entered splice(2) (until then copy_tp's tp_rcv_space_adjust, the fallback of
 * tp_splice_exit, which every TCP receive of the machine runs, leaves at its first test), or by
 * the tracer where no sys_enter program runs. */
enum netio_exit_state {
	EXIT_WANTED = 0,
	EXIT_SOCKET_END,
	EXIT_TX_BYTES,
	EXIT_SPLICE,
	EXIT_NR,
};

/* Per process (tgid), per CPU. */
struct proc_stats {
	u64 tx_bytes;		/* tcp_sendmsg / sock_send_length return values > 0 (TCP) */
	u64 tx_calls;		/* calls that sent at least one byte */
	u64 tx_copy_bytes;	/* copies from the user iov under tcp_sendmsg */
	u64 zc_tx_bytes;	/* bytes attached to skbs as user pages (MSG_ZEROCOPY) */
	u64 pinned_pages;	/* user pages pinned for those skbs */
	u64 rx_copy_bytes;	/* skb -> user copies (skb_copy_datagram_iter) */
	u64 rx_calls;		/* receives that copied (sock_recv_length), or skb copies */
	u64 tx_spliced_bytes;	/* part of tx_bytes sent from page-cache pages (sendfile, splice):
				 * no copy from the user */
	u64 rx_unsized_calls;	/* UDP receives with MSG_TRUNC whose buffer could not be read
				 * (io_uring, recvmmsg): what they copied is not in rx_copy_bytes */
	/* the receive side's other kinds (bpf/receive.bpf.h) */
	u64 rx_mapped_bytes;	/* mapped into user memory by TCP_ZEROCOPY_RECEIVE, not copied */
	u64 rx_discarded_bytes;	/* dropped by recv(MSG_TRUNC) on TCP */
	u64 rx_spliced_bytes;	/* moved from a TCP socket into a pipe by splice(2) */
	u64 rx_unsized_splices;	/* splices the tracepoint rung could not size (the socket had
				 * no record): rx_spliced_bytes is then unknown */
};

/* Per network namespace (inode number), per CPU: softirq-side events. */
struct netns_stats {
	u64 zc_tx_bytes;	/* zerocopy bytes of this netns: a TCP MSG_ZEROCOPY send's when it
				 * returns, others' as their skbs leave a device of it */
	u64 zc_tx_skbs;		/* zerocopy skbs seen leaving (or unseen: below) */
	u64 fallback_copy_bytes;	/* zerocopy payload copied on local delivery (skb_copy_ubufs) */
	u64 fallback_copy_skbs;
	u64 zc_skbs_at_tcp;	/* zerocopy skbs still flagged when TCP receives them (tcp_probe) */
	u64 zc_completions;	/* completion notifications (one per ubuf_info) */
	u64 zc_completed_sends;	/* sends they cover */
	u64 zc_copied_sends;	/* sends whose notification says "copied" */
	u64 zc_rx_kept_bytes;	/* of fallback_copy_bytes: zerocopy skbs received here and freed
				 * with their user pages, never copied (forwarded, dropped) */
	u64 zc_rx_kept_skbs;
	u64 zc_skbs_again;	/* TCP zerocopy skbs leaving with bytes that had left before
				 * (retransmits): those bytes are counted once */
	u64 zc_skbs_unseen_at_xmit;	/* of zc_tx_skbs: TCP zerocopy skbs of a socket of this
					 * netns received with bytes net_dev_start_xmit never
					 * showed, counted at their receive (bench/NOTES.md, Drops) */
	u64 zc_bytes_unseen_at_xmit;	/* their bytes */
	u64 zc_bytes_seen_at_xmit;	/* zerocopy bytes net_dev_start_xmit saw leave (once per
					 * TCP sequence range), counted there or at their send */
	u64 fallback_copy_again_bytes;	/* of fallback_copy_bytes: TCP bytes received before,
					 * copied again (retransmits of segments that arrived) */
	u64 fallback_copy_again_skbs;	/* the skbs that brought them */
};

/* One class of syscalls of one process. count: calls (send and receive classes: counted when
 * they end; poll, epoll_wait, sendfile: when they start); bytes, errors and total_ns: calls
 * that ended (total_ns: the timed ones, whose histogram is the process's struct tgid_hist). */
struct sc_counts {
	u64 count;
	u64 bytes;		/* sum of positive return values (data classes only) */
	u64 errors;		/* negative return values */
	u64 total_ns;		/* summed latency of the timed calls */
};

/* The latency histograms of a process's timed calls, one per class, per CPU (the tgid_hist
 * map): apart from its counts, and made only at its first timed call, so that a thread's
 * counts (and the storage a new thread needs) stay small at every level. */
struct tgid_hist {
	u64 hist[SC_NR_CLASSES][NETIO_HIST_SLOTS];
};

/* One class's figures as the snapshot gives them: its counts and its histogram. */
struct sc_stats {
	u64 count;
	u64 bytes;
	u64 errors;
	u64 total_ns;
	u64 hist[NETIO_HIST_SLOTS];
};

/* What the kernel itself counts for every thread (task_struct), added per process at the
 * thread's exit and before every snapshot: the perf "software" counters without a perf event
 * on any task, which every context switch of a followed thread would pay. */
struct kernel_counts {
	u64 switches;		/* nvcsw + nivcsw: context-switches */
	u64 migrations;		/* se.nr_migrations: cpu-migrations */
	u64 faults;		/* min_flt + maj_flt: page-faults */
	u64 run_ns;		/* se.sum_exec_runtime: task-clock */
};

/* What a followed thread counts on its own send, receive and syscall paths: in its own storage
 * where the kernel has task-local storage (bpf/thread.bpf.h), flushed word by word into the same
 * struct at the head of its process's statistics; straight into those where it has none
 * (bpf/thread_hash.bpf.h). u64 words only. */
struct thread_counts {
	struct proc_stats p;
	struct sc_counts sc[SC_NR_CLASSES];
};

/* Everything counted per process (tgid), per CPU: one map lookup serves a syscall's exit, its
 * class statistics and the copy counters. */
struct tgid_stats {
	struct thread_counts c;
	struct kernel_counts k;
	char comm[NETIO_COMM_LEN];	/* set when the entry is created (last: not summed) */
};

/* skb_progs[0] (bpf/maps.bpf.h): the per-skb programs of the tracepoint rung, attached on
 * demand where zero-copy bytes count at their send (user/attach_runtime.c). */
enum skb_progs_state {
	SKB_PROGS_IDLE = 0,	/* not attached: no send since the last reset whose zero-copy
				 * bytes only they count (UDP's, io_uring's SEND_ZC) */
	SKB_PROGS_WANTED,	/* such a send was seen, or the driver asked for them: the
				 * tracer attaches them at its poll */
	SKB_PROGS_ATTACHED,
};

/* Per-CPU counters of the tracer itself (array indices). */
enum netio_counter {
	/* an event was not counted, by cause (their sum is the snapshot's "drops") */
	CNT_DROP_THREAD_STORAGE = 0,	/* a thread's storage could not be created */
	CNT_DROP_PROCESS_STATS,	/* a process's statistics could not be created */
	CNT_DROP_MAP_BUSY,	/* a hash map update found its bucket locked (EBUSY, EDEADLK,
				 * ETIMEDOUT) */
	CNT_DROP_MAP_FULL,	/* any other failed map update (map full, no memory) */
	CNT_DROPS_NR,
	CNT_FORKS_FOLLOWED = CNT_DROPS_NR,	/* children added to the filter by the fork handler */
	CNT_CGROUP_FOLLOWED,	/* processes the filter added because they started in or moved
				 * into a followed cgroup (--cgroup) */
	CNT_THREAD_SPILLED,	/* events of a thread without storage, counted in the CPU's
				 * thread_spill (maps.bpf.h) instead of lost */
	CNT_SOCK_UNTRACKED,	/* events of a socket that got no record (sockets.bpf.h: the table
				 * full): in its process's counts only */
	CNT_TCP_ENDS_LOST,	/* TCP connections established that tcp_ends_ring had no room
				 * for (sockets.bpf.h): a peer not found may be on this host */
	CNT_ZC_SENT_BEFORE_SKB_PROGS,	/* zero-copy sends counted at their end while the per-skb
					 * programs were not attached (skb_progs): the fallback copy
					 * of their skbs went unseen */
	CNT_ZC_UNCOUNTED_BEFORE_SKB_PROGS,	/* sends whose zero-copy bytes only xmit counts
						 * (UDP, io_uring's SEND_ZC), made then: those
						 * bytes went uncounted */
	CNT_NR,
};

/* Per-socket accounting (bpf/sockets.bpf.h): one record per (socket, process), made at the
 * first event a followed process counts on the socket and kept until the next reset, after the
 * socket closes. */
#define NETIO_MAX_SOCK_RECORDS 4096
#define NETIO_MAX_TCP_ENDS 16384	/* TCP connections seen established (tcp_ends) */
#define NETIO_SEND_SIZE_SLOTS 32	/* log2 slots of send sizes: [2^i, 2^(i+1)) bytes */

/* The device a socket's route leaves by, when its record was made. */
enum netio_path {
	PATH_UNKNOWN = 0,	/* no route cached on the socket (an unconnected UDP socket) */
	PATH_LOOPBACK,		/* IFF_LOOPBACK */
	PATH_VETH,		/* a veth: into another namespace of this host */
	PATH_VIRTUAL,		/* another device with link ops (bridge, tunnel, macvlan...) */
	PATH_DEVICE,		/* a device without link ops: a NIC's driver */
};

/* What a send was, beside its bytes (sockets.bpf.h, sock_count_send). */
enum netio_send_kind { SEND_PLAIN = 0, SEND_SPLICED, SEND_IO_URING };

struct sock_stats {
	/* identity: the socket, its process and its addresses, set when the record is made */
	u64 sk;			/* struct sock address */
	u32 tgid;
	u32 netns;		/* its network namespace's inode number */
	u32 ports;		/* skc_portpair and skc_daddr as read then: a socket whose memory */
	u32 daddr;		/* another takes later does not match them */
	u16 family, proto, lport, rport;	/* ports in host order */
	u8 laddr[16], raddr[16];	/* IPv4: the first 4 bytes */
	u32 path;		/* enum netio_path */
	u32 ifindex;		/* of that device, in the socket's namespace */
	u32 peer_local;		/* TCP: the other end's connection was seen established on this
				 * host (tcp_ends, looked up by the tracer): delivered locally */
	u32 pad;
	/* counters (u64 words, added atomically) */
	u64 tx_bytes;		/* as proc_stats (its send calls: the sum of send_size) */
	u64 tx_copy_bytes;	/* the exact rungs' (else inferred by the tracer) */
	u64 tx_spliced_bytes;
	u64 zc_tx_bytes;	/* given to the process from this socket */
	u64 io_uring_sends;	/* sends io_uring made */
	u64 rx_copy_bytes;
	u64 rx_calls;
	u64 zc_rx_bytes;	/* its zerocopy skbs' bytes seen received (netif_receive_skb) or
				 * copied (skb_copy_ubufs) */
	u64 zc_kept_bytes;	/* of those, freed still zerocopy after their receive: not
				 * copied (forwarded, dropped) */
	u64 zc_again_bytes;	/* of zc_rx_bytes: received before, copied again (TCP
				 * retransmits of segments that arrived: maps.bpf.h, zc_rx_again) */
	u64 rx_mapped_bytes;	/* as proc_stats */
	u64 rx_discarded_bytes;
	u64 rx_spliced_bytes;
	u64 send_size[NETIO_SEND_SIZE_SLOTS];
};

/* A TCP connection seen established on this host, by its local and peer address and port
 * (bpf/sockets.bpf.h, tcp_ends). */
struct tcp_end {
	u16 family;
	u16 lport;
	u16 rport;
	u16 pad;
	u8 laddr[16];
	u8 raddr[16];
};

#endif
