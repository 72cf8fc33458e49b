/* Per-socket accounting, user space (the BPF side is bpf/sockets.bpf.h): the records'
 * free slots at every reset, the records into the snapshot, and the trace object's `sockets`
 * list. */
#ifndef NETIO_SOCKETS_USER_H
#define NETIO_SOCKETS_USER_H
#include <stdbool.h>
#include "netio.h"
#include "attach.h"

struct snapshot;
struct json;

/* --no-sockets: the programs count no socket (what the rest of the tracer costs alone). */
int sockets_set_off(const struct tracer_bpf *t, bool off);
/* Forget every record and give every slot back (stats_reset). */
int sockets_reset(const struct tracer_bpf *t);
/* The records into s->socks (stats_read). */
int sockets_read(const struct tracer_bpf *t, struct snapshot *s);
/* --prune-exited (prune.c): the records of processes that ended, gathered before a snapshot
 * and given back to the free slots after it (that snapshot holds their last counts). */
struct ended_sock;
struct ended_socks {
	struct ended_sock *one;
	int n, cap;
};
void sockets_gather_ended(const struct tracer_bpf *t, bool (*ended)(u32 tgid),
			  struct ended_socks *e);
void sockets_free_ended(const struct tracer_bpf *t, const struct ended_socks *e);
void sockets_open_ends(struct tracer_bpf *t);
void sockets_keep_ends(const struct tracer_bpf *t);

/* sock_stats.peer_local where the peer was not found and the ring lost connections */
#define NETIO_PEER_UNKNOWN 2
/* The trace object's "sockets", "sockets_untracked" and "sockets_unattributed". */
void sockets_write_json(const struct tracer_bpf *t, const struct snapshot *s, struct json *j);
/* Its entry of "unavailable", where sockets are not counted (else nothing). */
void sockets_write_unavailable(const struct tracer_bpf *t, const struct snapshot *s,
			       struct json *j);

#endif
