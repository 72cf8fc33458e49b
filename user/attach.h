/* The attach ladder (docs/DESIGN.md): for every probe point, the first rung the running kernel
 * allows, fentry/fexit > kprobe/kretprobe > tp_btf (or raw tracepoint) > inferred. A rung is
 * available when its programs load and attach here, which is what is tried; nothing is
 * decided from a kernel version. */
#ifndef NETIO_ATTACH_H
#define NETIO_ATTACH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "netio.h"

enum rung {
	RUNG_FENTRY,
	RUNG_KPROBE,
	RUNG_TP_BTF,
	RUNG_TRACEPOINT,
	RUNG_INFERRED,
	RUNG_UNAVAILABLE,
	RUNG_PERF_EVENT,	/* stacks only */
	RUNG_NR,
};

enum probe_point {
	PP_TX_BYTES,
	PP_TX_COPY,
	PP_PINNING,
	PP_FALLBACK_COPY,
	PP_ZC_COMPLETION,
	PP_RX_COPY,
	PP_RX_MAPPED,		/* the receive kinds beside rx_copy */
	PP_RX_DISCARDED,
	PP_RX_SPLICED,
	PP_SYSCALLS,
	PP_STACKS,
	PP_NR,
};

enum attach_mode {
	ATTACH_AUTO,
	ATTACH_FENTRY,
	ATTACH_KPROBE,
	ATTACH_TRACEPOINT,
};

#define MAX_ATTACHED 96

struct attached_prog {
	char name[64];		/* program name, e.g. fx_sendmsg_out */
	char target[96];	/* "fexit:tcp_sendmsg", "tp_btf:sock_send_length", ... */
	int prog_fd;
	enum probe_point pp;
	struct bpf_link *link;	/* NULL: loaded, attached on demand */
	bool lazy;		/* attached on demand by tracer_bpf_poll() */
	struct bpf_program *bpf_prog;	/* lazy: the program to attach */
	int wanted_fd;		/* lazy: array map whose [0] != 0 asks for the attach */
	struct bpf_program *prog;	/* what tracer_bpf_attach() attaches again */
	char kfunc[64];		/* kprobe rows: the function; "" for the others */
	bool kretprobe;
	bool cgroup;		/* a cgroup program: attached to the root cgroup */
};

/* A map shared by name between the BPF objects: created by the first that loads, reused by
 * every later one (its fd is owned here). */
struct shared_map {
	char name[64];
	int fd;
};

#define MAX_SHARED_MAPS 48

/* The tracer's BPF side: the objects loaded (through their skeletons; NULL: not loaded), the
 * rung each probe point is on, the programs attached, the maps shared between objects. */
struct tracer_bpf {
	struct follow_bpf *follow;		/* the filter and the fork handler */
	struct follow_bpf *follow_cgroups;	/* --cgroup: the handler of moved processes */
	struct copy_fentry_bpf *copy_fentry;	/* the copy probe points on each rung */
	struct copy_kprobe_bpf *copy_kprobe;
	struct copy_tp_bpf *copy_tp;		/* the tracepoint rung's, in three by job */
	struct zc_skb_bpf *zc_skb;
	struct rx_mapped_bpf *rx_mapped;
	struct syscalls_bpf *syscalls;		/* syscall counts and latency */
	struct flush_bpf *flush;		/* per-thread counts to their process */
	enum rung rung[PP_NR];
	bool pinned_pages_counted;	/* a page pinning function is probed */
	bool tx_from_syscalls;		/* tx_bytes from sys_exit of sendto/sendmsg/write */
	bool zc_at_send;		/* TCP MSG_ZEROCOPY bytes counted at the send (copy_tp,
					 * zc_skb) */
	struct attached_prog progs[MAX_ATTACHED];
	int nprogs;
	struct shared_map shared[MAX_SHARED_MAPS];
	int nshared;
	struct follow_buckets *buckets;	/* mapped (followed_tgids.c), NULL where not */
	/* fds of the shared maps the rest of the tracer uses (-1: none) */
	int followed_tgids, followed_netns, followed_cgroups, filter_gen, counters, tgid_stats,
	    tgid_hist, tgid_hist_spill, tgid_spill, netns_stats, in_send, sk_owner, zc_state,
	    exit_wanted, latency_sample, skb_progs;
	/* the per-skb programs wait for a zero-copy send (skb_progs, bpf/maps.bpf.h); and, when
	 * skb_always, are attached anyway until the next reset (tracer_bpf_skb_programs) */
	bool skb_on_demand, skb_always;
	/* copies of each tgid_stats and tgid_hist value: one per CPU, or one where the map is
	 * not per-CPU (the compat build's: bpf/maps.bpf.h) */
	int tgid_stats_copies, tgid_hist_copies;
	/* the TCP connections the BPF side saw established, drained into tcp_ends (sockets.c) */
	struct ring_buffer *tcp_ends_ring;
	/* send and receive calls end at the socket layer; sys_exit is attached on demand */
	bool sc_end_at_socket;
	bool detached;		/* tracer_bpf_detach(): loaded, nothing attached */
	bool no_latency;	/* --no-latency: no syscall hook, calls counted, not timed */
	unsigned int sampled_1_in;	/* --latency-sample N: 1 call in N timed (1: every call) */
	/* iter/task flushing every thread's counts to its process (stats.c, before a snapshot
	 * or reset); NULL where nothing counts per thread */
	struct bpf_link *flush_iter;
	/* the kernel's per-thread counters (switches, faults, run time) are added per process
	 * (bpf/thread_storage.bpf.h); else perf events count them */
	bool kernel_counts;
	/* why each probe point is not on a higher rung (or not at all): the last failure seen
	 * while climbing, "" where none */
	char why[PP_NR][512];
	/* the inode number of the namespace in each slot of netns_stats (0: free); a slot is
	 * given at `netns add` and freed at the first reset after `clear` */
	unsigned int netns_inum[NETIO_MAX_NETNS];
};

const char *rung_name(enum rung r);
/* Whether program `name` is tcp_probe's (either build): it counts only the diagnostic
 * zc_skbs_at_tcp, and waits for the first zero-copy skb received (zc_state). */
bool is_tcp_probe(const char *name);
const char *pp_name(enum probe_point pp);
int parse_attach_mode(const char *s, enum attach_mode *mode);

/* Load and attach. Returns 0, or -1 with a message in err (a forced rung that cannot attach,
 * or nothing that can count at all). verbose: libbpf's messages on stderr. */
int tracer_bpf_open(struct tracer_bpf *t, enum attach_mode mode, bool verbose,
		    bool no_latency, char *err, size_t errlen);
void tracer_bpf_close(struct tracer_bpf *t);
/* --cgroup: attach the handler that follows a process moved into a followed cgroup (the
 * fork handler, always attached, looks at a child's cgroup). 0, or -1 with err filled. */
int tracer_bpf_follow_cgroups(struct tracer_bpf *t, char *err, size_t errlen);
/* The followed set changed: threads decide again whether they are followed. */
void tracer_bpf_filter_changed(struct tracer_bpf *t);
/* The followed processes (followed_tgids.c): tgid followed from since (a new `pid add` of a
 * followed one moves its since); 0, or -1 with errno. Unfollowed: 0, or -1 with errno (ENOENT:
 * it was not followed). All of them unfollowed. */
int tracer_bpf_follow_tgid(const struct tracer_bpf *t, u32 tgid, u64 since);
int tracer_bpf_unfollow_tgid(const struct tracer_bpf *t, u32 tgid);
void tracer_bpf_unfollow_all(const struct tracer_bpf *t);
/* A cgroup is followed (followed_cgroups holds it and NETIO_ANY_CGROUP): forks look. */
void tracer_bpf_cgroups_followed(const struct tracer_bpf *t);
/* Follow network namespace inum: its softirq events count in a slot of netns_stats (its
 * own again if it had one). 0, or -1 with errno (ENOSPC: NETIO_MAX_NETNS followed since
 * the last reset). */
int tracer_bpf_follow_netns(struct tracer_bpf *t, unsigned int inum);

/* Attach the programs that wait for a condition (tcp_probe: the first zerocopy skb received;
 * sys_exit: the first poll, epoll_wait or sendfile of a followed thread, where send and
 * receive calls end at the socket layer); cheap, call it every few tens of ms. */
void tracer_bpf_poll(struct tracer_bpf *t);
/* Detach them again and re-arm the condition (at `reset`). */
void tracer_bpf_rearm(struct tracer_bpf *t);
/* Where they wait for a zero-copy send, the per-skb programs: on demand, else attached from
 * the start (--skb-programs always, which every later reset keeps) or, with always, at once
 * and until the next reset that is not always (the driver's `skb-programs always`). */
void defer_skb_programs(struct tracer_bpf *t, bool on_demand);
void tracer_bpf_skb_programs(struct tracer_bpf *t, bool always);

/* An untraced run: destroy every link, so no program of ours runs anywhere; the
 * programs and maps stay loaded. tracer_bpf_attach() attaches them again as they were (the
 * on-demand ones re-armed); 0, or -1 with err filled (everything detached again). */
void tracer_bpf_detach(struct tracer_bpf *t);
/* What every live thread counted in its storage, and the kernel's counters of the thread,
 * added to its process's statistics (one pass of flush.bpf.c's task iterator; exited threads
 * flushed themselves). Before each snapshot and reset, and after the followed set changes
 * (threads of a process just followed start their kernel counters there). */
void tracer_bpf_flush_threads(const struct tracer_bpf *t);
int tracer_bpf_attach(struct tracer_bpf *t, char *err, size_t errlen);

/* Targets attached for a probe point, comma separated, into buf. */
const char *tracer_bpf_targets(const struct tracer_bpf *t, enum probe_point pp, char *buf,
			       size_t len);

#endif
