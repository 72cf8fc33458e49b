// SPDX-License-Identifier: GPL-2.0
/* Per-socket accounting, user space (bpf/sockets.bpf.h has how the records are kept).
 * The records are read through sock_slot (every record in use has its key there), written as
 * the trace object's `sockets` list (docs/tracer.md), and what a process counted on no record
 * (the table full, a send counted at sys_exit) as `sockets_unattributed`. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "json.h"
#include "sockets.h"
#include "stats.h"

struct sock_key {		/* bpf/sockets.bpf.h */
	u64 sk;
	u32 ports;
	u32 daddr;
	u32 tgid;
	u32 pad;
};

static int map_fd(const struct tracer_bpf *t, const char *name)
{
	for (int i = 0; i < t->nshared; i++)
		if (!strcmp(t->shared[i].name, name))
			return t->shared[i].fd;
	return -1;
}

static bool sockets_off(const struct tracer_bpf *t)
{
	int fd = map_fd(t, "sock_off");
	u32 zero = 0, off = 1;

	if (fd < 0 || bpf_map_lookup_elem(fd, &zero, &off))
		return true;
	return off != 0;
}

int sockets_set_off(const struct tracer_bpf *t, bool off)
{
	int fd = map_fd(t, "sock_off");
	u32 zero = 0, v = off;

	return fd < 0 ? -ENOENT : bpf_map_update_elem(fd, &zero, &v, BPF_ANY);
}

/* Every slot is in the free queue or named in sock_slot (a record in use): a reset zeroes the
 * records in use and gives their slots back; the first (both empty) fills the queue. A few
 * syscalls per socket counted since the last reset, not per slot: `run` resets per run. */
int sockets_reset(const struct tracer_bpf *t)
{
	int slots = map_fd(t, "sock_slot"), recs = map_fd(t, "sock_stats");
	int free_q = map_fd(t, "sock_free");
	struct sock_key key, next;
	struct sock_stats zero = {};
	bool any = false;
	u32 slot;

	if (slots < 0 || recs < 0 || free_q < 0)
		return -ENOENT;
	while (bpf_map_get_next_key(slots, NULL, &next) == 0) {
		key = next;
		any = true;
		if (!bpf_map_lookup_elem(slots, &key, &slot)) {
			bpf_map_update_elem(recs, &slot, &zero, BPF_ANY);
			bpf_map_update_elem(free_q, NULL, &slot, BPF_ANY);
		}
		bpf_map_delete_elem(slots, &key);
	}
	if (any || bpf_map_lookup_elem(free_q, NULL, &slot) == 0)	/* peek: not the first */
		return 0;
	for (slot = 0; slot < NETIO_MAX_SOCK_RECORDS; slot++)
		if (bpf_map_update_elem(free_q, NULL, &slot, BPF_ANY))
			return -errno;
	return 0;
}

struct ended_sock {
	struct sock_key key;
	u32 slot;
};

/* The records whose process ended (its tgid in their key). A record of a live process stays
 * until a reset: whether its socket closed is not known from here. */
void sockets_gather_ended(const struct tracer_bpf *t, bool (*ended)(u32 tgid),
			  struct ended_socks *e)
{
	int slots = map_fd(t, "sock_slot");
	struct sock_key key, next;
	void *prev = NULL;
	u32 slot;

	e->n = 0;
	for (; slots >= 0 && bpf_map_get_next_key(slots, prev, &next) == 0; prev = &key) {
		key = next;
		if (!ended(key.tgid) || bpf_map_lookup_elem(slots, &key, &slot))
			continue;
		if (e->n == e->cap) {
			int cap = e->cap ? e->cap * 2 : 64;
			struct ended_sock *grown = realloc(e->one, cap * sizeof(*grown));

			if (!grown)
				return;
			e->one = grown;
			e->cap = cap;
		}
		e->one[e->n++] = (struct ended_sock){ .key = key, .slot = slot };
	}
}

/* Each gathered record still in place is forgotten, then zeroed, then its slot freed: in that
 * order, so that no lookup finds it half made. Its process is gone, so no thread of it holds
 * the slot; a thread that cached the slot checks the record's identity, which no longer
 * matches once zeroed. */
void sockets_free_ended(const struct tracer_bpf *t, const struct ended_socks *e)
{
	int slots = map_fd(t, "sock_slot"), recs = map_fd(t, "sock_stats");
	int free_q = map_fd(t, "sock_free");
	struct sock_stats zero = {};
	u32 slot;

	if (slots < 0 || recs < 0 || free_q < 0)
		return;
	for (int i = 0; i < e->n; i++) {
		if (bpf_map_lookup_elem(slots, &e->one[i].key, &slot) || slot != e->one[i].slot ||
		    bpf_map_delete_elem(slots, &e->one[i].key))
			continue;	/* gone meanwhile (a reset): not ours to give back */
		bpf_map_update_elem(recs, &slot, &zero, BPF_ANY);
		bpf_map_update_elem(free_q, NULL, &slot, BPF_ANY);
	}
}

/* Counter i of netio_counters (enum netio_counter), summed over the CPUs. */
static unsigned long long counter_sum(const struct tracer_bpf *t, u32 i)
{
	int n = libbpf_num_possible_cpus();
	unsigned long long sum = 0;
	u64 *vals = calloc(n > 0 ? n : 1, sizeof(u64));

	if (vals && t->counters >= 0 && !bpf_map_lookup_elem(t->counters, &i, vals))
		for (int c = 0; c < n; c++)
			sum += vals[c];
	free(vals);
	return sum;
}

/* One connection the BPF side saw established (tcp_ends_ring), kept in tcp_ends. */
static int keep_end(void *ctx, void *data, size_t size)
{
	const struct tracer_bpf *t = ctx;
	u8 one = 1;

	if (size >= sizeof(struct tcp_end))
		bpf_map_update_elem(map_fd(t, "tcp_ends"), data, &one, BPF_ANY);
	return 0;
}

void sockets_open_ends(struct tracer_bpf *t)
{
	int fd = map_fd(t, "tcp_ends_ring");

	if (fd >= 0 && !t->tcp_ends_ring)
		t->tcp_ends_ring = ring_buffer__new(fd, keep_end, t, NULL);
}

/* On the tracer's tick and before a snapshot: what the ring holds goes to tcp_ends. */
void sockets_keep_ends(const struct tracer_bpf *t)
{
	if (t->tcp_ends_ring)
		ring_buffer__consume(t->tcp_ends_ring);
}

/* Whether the other end of TCP socket r was seen established on this host: its mirror (the
 * peer's local and remote ends) is in tcp_ends. NETIO_PEER_UNKNOWN where it is not and some
 * connection found the ring full. */
static u32 peer_on_host(const struct tracer_bpf *t, const struct sock_stats *r,
			unsigned long long ends_lost)
{
	int fd = map_fd(t, "tcp_ends");
	struct tcp_end m = { .family = r->family, .lport = r->rport, .rport = r->lport };
	u8 v;

	if (fd < 0 || r->proto != 6)
		return 0;
	memcpy(m.laddr, r->raddr, sizeof(m.laddr));
	memcpy(m.raddr, r->laddr, sizeof(m.raddr));
	if (bpf_map_lookup_elem(fd, &m, &v) == 0)
		return 1;
	return ends_lost ? NETIO_PEER_UNKNOWN : 0;
}

/* Its send calls: every send counts in one slot of its size histogram. */
static unsigned long long tx_calls(const struct sock_stats *r)
{
	unsigned long long n = 0;

	for (int i = 0; i < NETIO_SEND_SIZE_SLOTS; i++)
		n += r->send_size[i];
	return n;
}

static bool counted(const struct sock_stats *r)
{
	return r->tx_bytes || r->rx_calls || r->zc_rx_bytes;
}

int sockets_read(const struct tracer_bpf *t, struct snapshot *s)
{
	int slots = map_fd(t, "sock_slot"), recs = map_fd(t, "sock_stats");
	struct sock_key key, next;
	void *prev = NULL;
	struct sock_stats r;
	u32 slot;

	s->socks_off = sockets_off(t);
	if (slots < 0 || recs < 0 || s->socks_off)
		return 0;
	s->sock_untracked = counter_sum(t, CNT_SOCK_UNTRACKED);
	sockets_keep_ends(t);
	s->tcp_ends_lost = counter_sum(t, CNT_TCP_ENDS_LOST);
	while (bpf_map_get_next_key(slots, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(slots, &key, &slot) || bpf_map_lookup_elem(recs, &slot, &r) ||
		    !counted(&r))
			continue;
		struct sock_stats *grown = realloc(s->socks, (s->nsocks + 1) * sizeof(r));
		if (!grown)
			return -ENOMEM;
		r.peer_local = peer_on_host(t, &r, s->tcp_ends_lost);
		s->socks = grown;
		s->socks[s->nsocks++] = r;
	}
	return 0;
}

static const char *path_name(u32 path)
{
	static const char *names[] = { "unknown", "loopback", "veth", "virtual", "device" };

	return path < sizeof(names) / sizeof(names[0]) ? names[path] : "unknown";
}

/* "127.0.0.1:5201" or "[::1]:5201" */
static void endpoint(const struct sock_stats *r, const u8 *addr, u16 port, char *out, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (r->family == 10 /* AF_INET6 */) {
		inet_ntop(AF_INET6, addr, a, sizeof(a));
		snprintf(out, len, "[%s]:%u", a, port);
	} else {
		inet_ntop(AF_INET, addr, a, sizeof(a));
		snprintf(out, len, "%s:%u", a, port);
	}
}

static const struct proc_snap *proc_of(const struct snapshot *s, u32 tgid)
{
	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].tgid == tgid)
			return &s->procs[i];
	return NULL;
}

static unsigned long long copy_rest(const struct sock_stats *r)
{
	unsigned long long moved = r->zc_tx_bytes + r->tx_spliced_bytes;

	return r->tx_bytes > moved ? r->tx_bytes - moved : 0;
}

static void write_sizes(const struct sock_stats *r, struct json *j)
{
	char lo[24];

	json_key(j, "send_size_log2");
	json_begin_object(j);
	for (int i = 0; i < NETIO_SEND_SIZE_SLOTS; i++) {
		if (!r->send_size[i])
			continue;
		snprintf(lo, sizeof(lo), "%llu", i ? 1ULL << i : 0ULL);
		json_kv_uint(j, lo, r->send_size[i]);
	}
	json_end(j);
}

static void write_socket(const struct tracer_bpf *t, const struct snapshot *s,
			 const struct sock_stats *r, struct json *j)
{
	const struct proc_snap *p = proc_of(s, r->tgid);
	bool inferred = t->rung[PP_TX_COPY] == RUNG_INFERRED;
	char ep[INET6_ADDRSTRLEN + 16];
	unsigned long long fallback;

	json_begin_object(j);
	json_kv_uint(j, "pid", r->tgid);
	json_kv_string(j, "comm", p ? p->comm : "");
	if (r->proto == 6 || r->proto == 17)
		json_kv_string(j, "proto", r->proto == 6 ? "tcp" : "udp");
	else
		json_kv_uint(j, "proto", r->proto);
	json_kv_string(j, "family", r->family == 10 ? "ipv6" : "ipv4");
	endpoint(r, r->laddr, r->lport, ep, sizeof(ep));
	json_kv_string(j, "local", ep);
	endpoint(r, r->raddr, r->rport, ep, sizeof(ep));
	json_kv_string(j, "peer", r->rport ? ep : NULL);
	json_kv_uint(j, "netns", r->netns);
	json_kv_string(j, "path", path_name(r->path));
	json_kv_uint(j, "ifindex", r->ifindex);
	if (r->peer_local == NETIO_PEER_UNKNOWN)
		json_kv_null(j, "peer_local");	/* see tcp_ends_lost */
	else
		json_kv_bool(j, "peer_local", r->peer_local);
	json_kv_uint(j, "tx_bytes", r->tx_bytes);
	json_kv_uint(j, "tx_calls", tx_calls(r));
	if (!inferred || s->zc_per_process)
		json_kv_uint(j, "tx_copy_bytes", inferred ? copy_rest(r) : r->tx_copy_bytes);
	else
		json_kv_null(j, "tx_copy_bytes");
	json_kv_bool(j, "tx_copy_inferred", inferred);
	json_kv_uint(j, "tx_spliced_bytes", r->tx_spliced_bytes);
	json_kv_count(j, "zc_tx_bytes", s->zc_per_process && !s->zc_bytes_null, r->zc_tx_bytes);
	json_kv_uint(j, "io_uring_sends", r->io_uring_sends);
	json_kv_uint(j, "rx_copy_bytes", r->rx_copy_bytes);
	json_kv_uint(j, "rx_calls", r->rx_calls);
	/* the receive kinds: null where no rung counts the kind */
	json_kv_count(j, "rx_mapped_bytes", s->rx_kind_counted[0], r->rx_mapped_bytes);
	json_kv_count(j, "rx_discarded_bytes", s->rx_kind_counted[1], r->rx_discarded_bytes);
	json_kv_count(j, "rx_spliced_bytes", s->rx_kind_counted[2], r->rx_spliced_bytes);
	json_kv_uint(j, "zc_rx_bytes", r->zc_rx_bytes);
	json_kv_uint(j, "zc_kept_bytes", r->zc_kept_bytes);
	fallback = r->zc_rx_bytes > r->zc_kept_bytes ? r->zc_rx_bytes - r->zc_kept_bytes : 0;
	json_kv_count(j, "fallback_copy_bytes", !s->fallback_null, fallback);
	/* of those, copied a second time (TCP retransmits of segments that had arrived) */
	json_kv_count(j, "fallback_copy_again_bytes", !s->fallback_null,
		      r->zc_again_bytes < fallback ? r->zc_again_bytes : fallback);
	write_sizes(r, j);
	json_end(j);
}

/* What each process counted that its sockets' records do not hold: {pid: {field: bytes}},
 * processes and fields with nothing left out omitted. */
static void write_unattributed(const struct snapshot *s, struct json *j)
{
	json_key(j, "sockets_unattributed");
	json_begin_object(j);
	for (int i = 0; i < s->nprocs; i++) {
		const struct proc_snap *p = &s->procs[i];
		unsigned long long tx = 0, calls = 0, rx = 0, sp = 0;
		char pid[16];

		for (int k = 0; k < s->nsocks; k++) {
			if (s->socks[k].tgid != p->tgid)
				continue;
			tx += s->socks[k].tx_bytes;
			calls += tx_calls(&s->socks[k]);
			rx += s->socks[k].rx_copy_bytes;
			sp += s->socks[k].tx_spliced_bytes;
		}
		if (tx == p->st.tx_bytes && rx == p->st.rx_copy_bytes && sp == p->st.tx_spliced_bytes)
			continue;
		snprintf(pid, sizeof(pid), "%u", p->tgid);
		json_key(j, pid);
		json_begin_object(j);
		json_kv_int(j, "tx_bytes", (long long)(p->st.tx_bytes - tx));
		json_kv_int(j, "tx_calls", (long long)(p->st.tx_calls - calls));
		json_kv_int(j, "rx_copy_bytes", (long long)(p->st.rx_copy_bytes - rx));
		json_kv_int(j, "tx_spliced_bytes", (long long)(p->st.tx_spliced_bytes - sp));
		json_end(j);
	}
	json_end(j);
}

void sockets_write_json(const struct tracer_bpf *t, const struct snapshot *s, struct json *j)
{
	json_key(j, "sockets");
	if (s->socks_off) {
		json_null(j);
		return;
	}
	json_begin_array(j);
	for (int i = 0; i < s->nsocks; i++)
		write_socket(t, s, &s->socks[i], j);
	json_end(j);
	json_kv_uint(j, "sockets_untracked", s->sock_untracked);
	json_kv_uint(j, "tcp_ends_lost", s->tcp_ends_lost);
	write_unattributed(s, j);
}

void sockets_write_unavailable(const struct tracer_bpf *t, const struct snapshot *s,
			       struct json *j)
{
	if (s->socks_off)
		json_kv_string(j, "sockets", "not counted (netio-tracer --no-sockets)");
	else if (t->tx_from_syscalls)
		json_kv_string(j, "sockets.tx_bytes", "the bytes sent are counted at sys_exit here "
			       "(no socket-layer tracepoint, no exact rung): no socket is known; "
			       "they are in sockets_unattributed");
}
