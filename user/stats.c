// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "json.h"
#include "sockets.h"
#include "stats.h"
#include "builds.h"
#include "trace_helpers.h"

const char *sc_class_names[SC_NR_CLASSES] = {
	[SC_SENDTO] = "sendto", [SC_SENDMSG] = "sendmsg", [SC_RECVFROM] = "recvfrom",
	[SC_RECVMSG] = "recvmsg", [SC_RECVMSG_ERRQUEUE] = "recvmsg_errqueue",
	[SC_WRITE] = "write", [SC_READ] = "read", [SC_SENDFILE] = "sendfile",
	[SC_POLL] = "poll", [SC_EPOLL_WAIT] = "epoll_wait",
};

const char *sc_class_name(int cls)
{
	return cls >= 0 && cls < SC_NR_CLASSES ? sc_class_names[cls] : "?";
}

double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CLOCK_MONOTONIC in ns: bpf_ktime_get_ns()'s and task_struct.start_time's clock. */
u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int ncpus(void)
{
	static int n;

	if (!n) {
		n = libbpf_num_possible_cpus();
		if (n <= 0)
			n = 1;
	}
	return n;
}

/* Sum the copies (one per CPU) of a value made of nwords u64 counters (then other bytes). */
static void sum_copies(const void *percpu, int copies, size_t value_size, size_t nwords,
		       void *out)
{
	size_t stride = (value_size + 7) & ~(size_t)7;
	u64 *o = out;

	memcpy(out, percpu, value_size);	/* cpu 0, including non-counter bytes */
	for (int c = 1; c < copies; c++) {
		const u64 *v = (const u64 *)((const char *)percpu + c * stride);
		for (size_t w = 0; w < nwords; w++)
			o[w] += v[w];
	}
}

static void delete_all(int fd, size_t key_size)
{
	char key[64], next[64];
	void *prev = NULL;

	if (fd < 0 || key_size > sizeof(key))
		return;
	/* collect then delete: deleting while walking restarts the walk */
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(key, next, key_size);
		bpf_map_delete_elem(fd, key);
		prev = NULL;	/* start over: the deleted key cannot be a cursor */
	}
}

/* The namespaces' statistics start again from zero; the slots of namespaces no longer
 * followed (after `clear`) are free again. */
static void reset_netns(struct tracer_bpf *t)
{
	size_t stride = (sizeof(struct netns_stats) + 7) & ~7UL;
	void *zero = calloc(ncpus(), stride);
	u32 slot;

	for (u32 i = 0; zero && t->netns_stats >= 0 && i < NETIO_MAX_NETNS; i++) {
		if (!t->netns_inum[i])
			continue;
		bpf_map_update_elem(t->netns_stats, &i, zero, BPF_ANY);
		if (bpf_map_lookup_elem(t->followed_netns, &t->netns_inum[i], &slot))
			t->netns_inum[i] = 0;
	}
	free(zero);
}

/* A program's run time and runs (while run-time stats are on), and the runs the kernel
 * skipped because it was already running on that CPU (always counted: events lost). */
static int prog_stats(int fd, unsigned long long *ns, unsigned long long *runs,
		      unsigned long long *skipped)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	*ns = info.run_time_ns;
	*runs = info.run_cnt;
	*skipped = info.recursion_misses;
	return 0;
}

/* tgid's zeroed entry in map fd (values of size bytes, copies of them), made here where a
 * failure can be waited out. */
static int make_entry(int fd, int copies, size_t size, u32 tgid)
{
	void *zero = calloc(copies, (size + 7) & ~7UL);
	int err = -ENOMEM;

	for (int i = 0; zero && fd >= 0 && i < 100; i++) {
		err = bpf_map_update_elem(fd, &tgid, zero, BPF_NOEXIST) ? -errno : 0;
		if (err != -ENOMEM && err != -EBUSY)
			break;
		usleep(1000);	/* the cache refills from an irq_work */
	}
	free(zero);
	return err == -EEXIST ? 0 : err;
}

/* tgid's statistics (and its histograms where calls are timed), made here where a failure
 * can be waited out: the maps allocate their entries on demand, and a BPF program making one
 * fails while the map's element cache is being refilled (many followed processes starting or
 * ending at once: the spill maps, else a drop). The name is left to the process's exit flush
 * (bpf/maps.bpf.h) and to the snapshot (read_comm). */
int stats_make_process(const struct tracer_bpf *t, u32 tgid)
{
	int err = make_entry(t->tgid_stats, t->tgid_stats_copies, sizeof(struct tgid_stats), tgid);

	if (!err && !t->no_latency)
		err = make_entry(t->tgid_hist, t->tgid_hist_copies, sizeof(struct tgid_hist), tgid);
	return err;
}

/* The statistics of every followed process still there (after a reset emptied them). */
static void make_followed_processes(const struct tracer_bpf *t)
{
	u32 key, next;
	void *prev = NULL;

	while (t->followed_tgids >= 0 && bpf_map_get_next_key(t->followed_tgids, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (kill((pid_t)key, 0) == 0)
			stats_make_process(t, key);
	}
}

int stats_reset(struct tracer_bpf *t, struct stats_baseline *base)
{
	size_t vsz = (sizeof(u64)) * ncpus();
	u64 *zero = calloc(1, vsz);

	tracer_bpf_flush_threads(t);	/* what threads counted so far goes, too */
	sockets_reset(t);
	/* a thread's run of sends names a record the reset zeroed: it begins again
	 * (bpf/send_run.bpf.h) */
	tracer_bpf_filter_changed(t);
	delete_all(t->tgid_stats, sizeof(u32));
	delete_all(t->tgid_hist, sizeof(u32));
	delete_all(t->tgid_hist_spill, sizeof(u32));
	delete_all(t->tgid_spill, sizeof(u32));
	make_followed_processes(t);
	reset_netns(t);
	if (zero && t->counters >= 0)
		for (u32 i = 0; i < CNT_NR; i++)
			bpf_map_update_elem(t->counters, &i, zero, BPF_ANY);
	free(zero);
	for (int i = 0; i < t->nprogs && i < MAX_ATTACHED; i++)
		if (prog_stats(t->progs[i].prog_fd, &base->ns[i], &base->runs[i],
			       &base->skipped[i]))
			base->ns[i] = base->runs[i] = base->skipped[i] = 0;
	base->t0 = monotonic_s();
	return 0;
}

void stats_clear_state(const struct tracer_bpf *t)
{
	delete_all(t->sk_owner, sizeof(u64));
	delete_all(t->in_send, sizeof(u32));
}

static struct proc_snap *find_proc(struct snapshot *s, u32 tgid, bool create)
{
	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].tgid == tgid)
			return &s->procs[i];
	if (!create)
		return NULL;
	struct proc_snap *p = realloc(s->procs, (s->nprocs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	s->procs = p;
	p = &s->procs[s->nprocs++];
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	return p;
}

static void read_comm(struct proc_snap *p)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", p->tgid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = 0;
			snprintf(p->comm, sizeof(p->comm), "%s", buf);
		}
		fclose(f);
	}
}

/* Inferred copy: what was sent, less what left as user pages or spliced pages. */
static unsigned long long not_copied_rest(unsigned long long tx, unsigned long long zc,
					  unsigned long long spliced)
{
	return tx > zc + spliced ? tx - zc - spliced : 0;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct proc_snap *x = a, *y = b;
	return x->tgid < y->tgid ? -1 : x->tgid > y->tgid;
}

static void add_words(void *to, const void *from, size_t size)
{
	u64 *t = to;
	const u64 *f = from;

	for (size_t w = 0; w < size / 8; w++)
		t[w] += f[w];
}

/* One map entry's figures added to its process's (a process may have one in each map). */
static void add_figures(struct proc_snap *p, const struct tgid_stats *v)
{
	add_words(&p->st, &v->c.p, sizeof(v->c.p));
	add_words(&p->k, &v->k, sizeof(v->k));
	for (int c = 0; c < SC_NR_CLASSES; c++) {
		add_words(&p->sc[c], &v->c.sc[c], sizeof(v->c.sc[c]));
		p->has_sc[c] = p->sc[c].count > 0;
	}
	if (!p->comm[0]) {
		memcpy(p->comm, v->comm, sizeof(p->comm));
		p->comm[sizeof(p->comm) - 1] = 0;
	}
}

/* Per process: copy counters and syscalls, summed over the CPUs (buf holds one value per
 * CPU, stride bytes apart), the comm from the first CPU copy that has one. */
static int read_procs(const struct tracer_bpf *t, void *buf, size_t stride, struct snapshot *s)
{
	struct tgid_stats *sum = malloc(sizeof(*sum));
	u32 key, next;
	void *prev;

	if (!sum)
		return -ENOMEM;
	for (prev = NULL; t->tgid_stats >= 0 && bpf_map_get_next_key(t->tgid_stats, prev, &next) == 0;
	     prev = &key) {
		key = next;
		if (bpf_map_lookup_elem(t->tgid_stats, &key, buf))
			continue;
		struct proc_snap *p = find_proc(s, key, true);
		if (!p)
			continue;
		sum_copies(buf, t->tgid_stats_copies, sizeof(struct tgid_stats),
			   offsetof(struct tgid_stats, comm) / 8, sum);
		for (int c = 0; c < t->tgid_stats_copies && !sum->comm[0]; c++)
			memcpy(sum->comm, ((struct tgid_stats *)((char *)buf + c * stride))->comm,
			       sizeof(sum->comm));
		add_figures(p, sum);
	}
	free(sum);
	return 0;
}

/* Per process with figures in the spill map (bpf/maps.bpf.h, tgid_spill): added to the others. */
static void read_spill(const struct tracer_bpf *t, struct snapshot *s)
{
	struct tgid_stats *v = malloc(sizeof(*v));
	u32 key, next;
	void *prev;

	for (prev = NULL; v && t->tgid_spill >= 0 &&
	     bpf_map_get_next_key(t->tgid_spill, prev, &next) == 0; prev = &key) {
		key = next;
		struct proc_snap *p;
		if (!bpf_map_lookup_elem(t->tgid_spill, &key, v) && (p = find_proc(s, key, true)))
			add_figures(p, v);
	}
	free(v);
}

/* Per network namespace with a slot: the softirq side's counters, summed over the CPUs. */
static void read_netns(const struct tracer_bpf *t, void *buf, struct snapshot *s)
{
	for (u32 i = 0; t->netns_stats >= 0 && i < NETIO_MAX_NETNS; i++) {
		if (!t->netns_inum[i] || bpf_map_lookup_elem(t->netns_stats, &i, buf))
			continue;
		struct netns_snap *n = realloc(s->netns, (s->nnetns + 1) * sizeof(*n));
		if (!n)
			break;
		s->netns = n;
		n = &s->netns[s->nnetns++];
		n->inum = t->netns_inum[i];
		sum_copies(buf, ncpus(), sizeof(struct netns_stats), sizeof(struct netns_stats) / 8,
			   &n->st);
	}
}

/* The global counters: events lost (by cause) and forks followed. */
static void read_counters(const struct tracer_bpf *t, struct snapshot *s)
{
	u64 *vals;

	if (t->counters < 0)
		return;
	vals = calloc(ncpus(), sizeof(u64));
	for (u32 i = 0; vals && i < CNT_NR; i++) {
		unsigned long long sum = 0;
		if (bpf_map_lookup_elem(t->counters, &i, vals))
			continue;
		for (int c = 0; c < ncpus(); c++)
			sum += vals[c];
		if (i < CNT_DROPS_NR) {
			s->drops_by_cause[i] = sum;
			s->drops += sum;
		} else if (i == CNT_FORKS_FOLLOWED)
			s->forks_followed = sum;
		else if (i == CNT_CGROUP_FOLLOWED)
			s->cgroup_followed = sum;
		else if (i == CNT_THREAD_SPILLED)
			s->thread_storage_spilled = sum;
		else if (i == CNT_ZC_SENT_BEFORE_SKB_PROGS)
			s->zc_sends_before_skb_progs = sum;
		else if (i == CNT_ZC_UNCOUNTED_BEFORE_SKB_PROGS)
			s->zc_uncounted_before_skb_progs = sum;
	}
	free(vals);
}

/* Per process: the latency histograms of its timed calls in map fd (tgid_hist, or its spill
 * map), summed over the value's copies (one per CPU, or one). */
static void read_hist_map(int fd, int copies, struct snapshot *s)
{
	const size_t stride = (sizeof(struct tgid_hist) + 7) & ~7UL;
	void *buf = malloc(stride * ncpus());
	struct tgid_hist *sum = malloc(sizeof(*sum));
	u32 key, next;
	void *prev;

	for (prev = NULL; buf && sum && fd >= 0 && bpf_map_get_next_key(fd, prev, &next) == 0;
	     prev = &key) {
		struct proc_snap *p;

		key = next;
		if (bpf_map_lookup_elem(fd, &key, buf) || !(p = find_proc(s, key, true)))
			continue;
		sum_copies(buf, copies, sizeof(*sum), sizeof(*sum) / 8, sum);
		for (int c = 0; c < SC_NR_CLASSES; c++)
			add_words(p->sc[c].hist, sum->hist[c], sizeof(sum->hist[c]));
	}
	free(sum);
	free(buf);
}

static void read_hists(const struct tracer_bpf *t, struct snapshot *s)
{
	read_hist_map(t->tgid_hist, t->tgid_hist_copies, s);
	read_hist_map(t->tgid_hist_spill, 1, s);
}

/* The maps into s, processes sorted by pid. */
static int read_maps(const struct tracer_bpf *t, const unsigned int *extra, int nextra,
		     struct snapshot *s)
{
	const size_t tstride = (sizeof(struct tgid_stats) + 7) & ~7UL;
	const size_t nstride = (sizeof(struct netns_stats) + 7) & ~7UL;
	size_t tsz = tstride * ncpus(), nsz = nstride * ncpus();
	void *buf = malloc(tsz > nsz ? tsz : nsz);

	if (!buf || read_procs(t, buf, tstride, s)) {
		free(buf);
		return -ENOMEM;
	}
	read_spill(t, s);
	read_hists(t, s);
	for (int i = 0; i < nextra; i++)
		find_proc(s, extra[i], true);
	read_netns(t, buf, s);
	read_counters(t, s);
	free(buf);
	qsort(s->procs, s->nprocs, sizeof(*s->procs), cmp_proc);
	return 0;
}

/* One process's figures where the rung infers them (bytes sent from the syscalls, the copy
 * from what did not leave as user or spliced pages), added to the totals. Returns its
 * zero-copy bytes. */
static unsigned long long total_proc(struct snapshot *s, struct proc_snap *p)
{
	read_comm(p);
	if (s->tx_copy_inferred && s->zc_per_process) {
		p->st.tx_copy_bytes = not_copied_rest(p->st.tx_bytes, p->st.zc_tx_bytes,
						      p->st.tx_spliced_bytes);
	}
	s->tx_bytes += p->st.tx_bytes;
	s->tx_spliced_bytes += p->st.tx_spliced_bytes;
	s->tx_calls += p->st.tx_calls;
	s->rx_copy_bytes += p->st.rx_copy_bytes;
	s->rx_unsized_calls += p->st.rx_unsized_calls;
	s->rx_kind_bytes[0] += p->st.rx_mapped_bytes;
	s->rx_kind_bytes[1] += p->st.rx_discarded_bytes;
	s->rx_kind_bytes[2] += p->st.rx_spliced_bytes;
	s->rx_unsized_splices += p->st.rx_unsized_splices;
	s->pinned_pages += p->st.pinned_pages;
	s->k.switches += p->k.switches;
	s->k.migrations += p->k.migrations;
	s->k.faults += p->k.faults;
	s->k.run_ns += p->k.run_ns;
	for (int c = 0; c < SC_NR_CLASSES; c++) {
		if (!p->has_sc[c])
			continue;
		s->has_sc[c] = true;
		s->sc[c].count += p->sc[c].count;
		s->sc[c].bytes += p->sc[c].bytes;
		s->sc[c].errors += p->sc[c].errors;
		s->sc[c].total_ns += p->sc[c].total_ns;
		for (int k = 0; k < NETIO_HIST_SLOTS; k++)
			s->sc[c].hist[k] += p->sc[c].hist[k];
	}
	return p->st.zc_tx_bytes;
}

/* One namespace's fallback copy (on the tracepoint rung: received zerocopy skbs, less those
 * freed uncopied), added to the totals. Returns its zero-copy bytes. */
static unsigned long long total_netns(struct snapshot *s, struct netns_stats *n)
{
	n->fallback_copy_bytes -= n->zc_rx_kept_bytes < n->fallback_copy_bytes ?
				  n->zc_rx_kept_bytes : n->fallback_copy_bytes;
	n->fallback_copy_skbs -= n->zc_rx_kept_skbs < n->fallback_copy_skbs ?
				 n->zc_rx_kept_skbs : n->fallback_copy_skbs;
	/* copied again, of what was copied: a skb freed uncopied after its receive may have
	 * counted as received again */
	if (n->fallback_copy_again_bytes > n->fallback_copy_bytes)
		n->fallback_copy_again_bytes = n->fallback_copy_bytes;
	if (n->fallback_copy_again_skbs > n->fallback_copy_skbs)
		n->fallback_copy_again_skbs = n->fallback_copy_skbs;
	s->fallback_copy_bytes += n->fallback_copy_bytes;
	s->fallback_copy_skbs += n->fallback_copy_skbs;
	s->fallback_copy_again_bytes += n->fallback_copy_again_bytes;
	s->fallback_copy_again_skbs += n->fallback_copy_again_skbs;
	s->zc_tx_skbs += n->zc_tx_skbs;
	s->zc_skbs_at_tcp += n->zc_skbs_at_tcp;
	s->zc_skbs_again += n->zc_skbs_again;
	s->zc_skbs_unseen_at_xmit += n->zc_skbs_unseen_at_xmit;
	s->zc_bytes_unseen_at_xmit += n->zc_bytes_unseen_at_xmit;
	s->zc_bytes_seen_at_xmit += n->zc_bytes_seen_at_xmit;
	s->zc_completions += n->zc_completions;
	s->zc_completed_sends += n->zc_completed_sends;
	s->zc_copied_sends += n->zc_copied_sends;
	return n->zc_tx_bytes;
}

/* Whether each process's zero-copy bytes are known: the exact rungs count them in the
 * sender's context; the tracepoint rung counts them at the device, per socket, and gives them
 * to the socket's owner, whom a send names (sock_send_length, or tcp_sendmsg's return on the
 * exact rungs), which the compat build cannot do (bpf/maps.bpf.h, claim_zc_bytes). */
static bool zc_per_process(const struct tracer_bpf *t)
{
	enum rung pin = t->rung[PP_PINNING];

	if (pin == RUNG_FENTRY || pin == RUNG_KPROBE)
		return true;
	return pin == RUNG_TP_BTF && bpf_build() == BUILD_STORAGE && !t->tx_from_syscalls;
}

#define ZC_PER_PROCESS_WHY "per process: zero-copy skbs are counted at the device, per " \
	"namespace, and no send names their socket's owner on this kernel (sock_send_length is " \
	"6.3+; the exact rungs' tcp_sendmsg could not be attached)"

/* The receive kinds beside rx_copy, in enum rx_kind's order (bpf/receive.bpf.h). */
const char *const rx_kind_field[3] = { "rx_mapped_bytes", "rx_discarded_bytes", "rx_spliced_bytes" };
static const enum probe_point rx_kind_pp[3] = { PP_RX_MAPPED, PP_RX_DISCARDED, PP_RX_SPLICED };

/* Why a receive kind is null: no rung counts it here (the ladder's reasons), or, spliced,
 * splices the tracepoint rung could not size. */
static void rx_kinds_unavailable(const struct tracer_bpf *t, const struct snapshot *s,
				 struct json *j)
{
	char why[600];

	for (int k = 0; k < 3; k++) {
		if (!s->rx_kind_counted[k]) {
			snprintf(why, sizeof(why), "no rung counts it on this kernel: %s",
				 t->why[rx_kind_pp[k]][0] ? t->why[rx_kind_pp[k]] : "not attached");
			json_kv_string(j, rx_kind_field[k], why);
		}
	}
	if (s->rx_kind_counted[2] && s->rx_unsized_splices) {
		snprintf(why, sizeof(why), "%llu splices from a socket without a per-socket record "
			 "(--no-sockets, or the table full): the tracepoint rung sizes a splice from "
			 "the socket's record", s->rx_unsized_splices);
		json_kv_string(j, "rx_spliced_bytes", why);
	}
}

/* Why the figures the per-skb programs feed are null: zero-copy sends passed while they were
 * not attached (on demand: attached at the first send whose zero-copy bytes only they
 * count). */
static void skb_programs_unavailable(const struct snapshot *s, struct json *j)
{
	char why[600];

	if (s->zc_bytes_null) {
		snprintf(why, sizeof(why), "%llu sends whose zero-copy bytes only the per-skb "
			 "programs count (UDP, io_uring's SEND_ZC) came before those programs were "
			 "attached (on demand, at the first such send; netio-tracer "
			 "--skb-programs always attaches them from the start)",
			 s->zc_uncounted_before_skb_progs);
		json_kv_string(j, "zc_tx_bytes", why);
	}
	if (!s->fallback_null)
		return;
	snprintf(why, sizeof(why), "%llu zero-copy sends passed while the per-skb programs were "
		 "not attached (on demand: attached at the first UDP or io_uring SEND_ZC send; a "
		 "TCP MSG_ZEROCOPY send counts its bytes at its end and asks for none): their "
		 "skbs' fallback copy went unseen (netio-tracer --skb-programs always attaches "
		 "them from the start)",
		 s->zc_sends_before_skb_progs + s->zc_uncounted_before_skb_progs);
	json_kv_string(j, "fallback_copy_bytes", why);
	json_kv_string(j, "zerocopy.skb_counts", "zc_skbs_sent, fallback_copy_skbs, "
		       "fallback_copy_again_skbs, zc_skbs_again, zc_skbs_unseen_at_xmit, "
		       "zc_bytes_unseen_at_xmit, zc_bytes_seen_at_xmit and zc_bytes_no_program_saw "
		       "(and per namespace zc_tx_skbs and zc_rx_kept_*) are null as "
		       "fallback_copy_bytes is: the per-skb programs that count them did not see "
		       "every zero-copy skb");
}

/* Whether a tcp_probe program is loaded (attached or waiting for the first zero-copy skb
 * received): only then is zc_skbs_at_tcp counted. */
static bool skbs_at_tcp_counted(const struct tracer_bpf *t)
{
	for (int i = 0; i < t->nprogs && i < MAX_ATTACHED; i++)
		if (is_tcp_probe(t->progs[i].name))
			return true;
	return false;
}

/* Why zc_skbs_at_tcp, which confirms that zero-copy skbs were copied before TCP received
 * them, is null. */
static void skbs_at_tcp_unavailable(const struct tracer_bpf *t, const struct snapshot *s,
				    struct json *j)
{
	const char *why;

	if (s->skbs_at_tcp_counted || t->rung[PP_FALLBACK_COPY] == RUNG_UNAVAILABLE)
		return;
	if (t->rung[PP_FALLBACK_COPY] != RUNG_TP_BTF)
		why = "the fallback copy is counted where skb_copy_ubufs copies, not inferred at "
		      "netif_receive_skb: nothing for tcp_probe to confirm";
	else if (t->no_latency)
		why = "not counted at the counting level (--no-latency): tcp_probe would run for "
		      "every TCP segment of the machine";
	else
		why = "no tcp_probe tracepoint on this kernel";
	json_kv_string(j, "zerocopy.zc_skbs_at_tcp", why);
}

/* "unavailable": what the trace does not count on this kernel, and why (its figures are
 * null). */
static void write_unavailable(const struct tracer_bpf *t, const struct snapshot *s,
			      struct json *j)
{
	json_key(j, "unavailable");
	json_begin_object(j);
	sockets_write_unavailable(t, s, j);
	rx_kinds_unavailable(t, s, j);
	if (s->rx_unsized_calls) {
		char why[160];

		snprintf(why, sizeof(why), "%llu UDP receives with MSG_TRUNC through io_uring or "
			 "recvmmsg: the buffer they filled could not be read", s->rx_unsized_calls);
		json_kv_string(j, "rx_copy_bytes", why);
	}
	skb_programs_unavailable(s, j);
	skbs_at_tcp_unavailable(t, s, j);
	if (!s->zc_per_process) {
		json_kv_string(j, "processes.zc_tx_bytes", ZC_PER_PROCESS_WHY);
		if (s->tx_copy_inferred)
			json_kv_string(j, "processes.tx_copy_bytes", "inferred from zc_tx_bytes, "
				       "which is not counted per process here");
	}
	json_end(j);
}

/* The per-skb programs, where they wait for a zero-copy send: whether they are attached, and
 * which figures the sends they missed leave incomplete (null). */
static void skb_programs_state(const struct tracer_bpf *t, struct snapshot *s)
{
	u32 zero = 0, state = SKB_PROGS_ATTACHED;

	s->skb_on_demand = t->skb_on_demand;
	if (t->skb_progs >= 0)
		bpf_map_lookup_elem(t->skb_progs, &zero, &state);
	s->skb_progs_attached = state == SKB_PROGS_ATTACHED;
	s->zc_bytes_null = s->zc_uncounted_before_skb_progs > 0;
	s->fallback_null = s->zc_bytes_null || s->zc_sends_before_skb_progs > 0;
}

/* The docs/DESIGN.md totals over processes and namespaces. */
static void total(const struct tracer_bpf *t, struct snapshot *s)
{
	unsigned long long zc_procs = 0, zc_netns = 0, seen;

	s->tx_from_syscalls = t->tx_from_syscalls;
	s->tx_copy_inferred = t->rung[PP_TX_COPY] == RUNG_INFERRED;
	s->zc_per_process = zc_per_process(t);
	for (int k = 0; k < 3; k++)
		s->rx_kind_counted[k] = t->rung[rx_kind_pp[k]] != RUNG_UNAVAILABLE;
	s->pinned_pages_null = !t->pinned_pages_counted;
	for (int i = 0; i < s->nprocs; i++)
		zc_procs += total_proc(s, &s->procs[i]);
	for (int i = 0; i < s->nnetns; i++)
		zc_netns += total_netns(s, &s->netns[i].st);
	/* zerocopy bytes: exact rungs count them in the sender's context (per process); the
	 * tracepoint rung at the send (TCP MSG_ZEROCOPY) or the device, per netns and per
	 * owning socket */
	if (t->rung[PP_PINNING] == RUNG_FENTRY || t->rung[PP_PINNING] == RUNG_KPROBE)
		s->zc_tx_bytes = zc_procs;
	else
		s->zc_tx_bytes = zc_procs > zc_netns ? zc_procs : zc_netns;
	s->zc_at_send = t->zc_at_send;
	s->skbs_at_tcp_counted = skbs_at_tcp_counted(t);
	skb_programs_state(t, s);
	seen = s->zc_bytes_seen_at_xmit + s->zc_bytes_unseen_at_xmit;
	s->zc_bytes_no_program_saw = s->zc_at_send && zc_netns > seen ? zc_netns - seen : 0;
	if (s->tx_copy_inferred)
		s->tx_copy_bytes = not_copied_rest(s->tx_bytes, s->zc_tx_bytes, s->tx_spliced_bytes);
	else
		for (int i = 0; i < s->nprocs; i++)
			s->tx_copy_bytes += s->procs[i].st.tx_copy_bytes;
}

/* The snapshot's entry of a program attached before under another row (a kprobe program
 * serves several functions: its run-time stats are one), its target added; else NULL. */
static struct prog_snap *same_program(const struct tracer_bpf *t, int i, struct snapshot *s)
{
	for (int n = 0; n < s->nprogs; n++) {
		size_t len;

		if (s->progs[n].fd != t->progs[i].prog_fd)
			continue;
		len = strlen(s->progs[n].target);
		snprintf(s->progs[n].target + len, sizeof(s->progs[n].target) - len, ",%s",
			 t->progs[i].target);
		return &s->progs[n];
	}
	return NULL;
}

/* Whether a skipped run of program `name` loses a counted event: tcp_probe's only count the
 * zerocopy skbs TCP saw (zc_skbs_at_tcp, a diagnostic), and the kernel skips it now and then
 * as recursion (a softirq interrupting its run in process context: bench/NOTES.md, "Drops");
 * its skips stay in its own `skipped`, not in the drops. */
static bool skip_is_drop(const char *name)
{
	return !is_tcp_probe(name);
}

/* Our programs' run time and runs since the reset, scaled up when run-time stats were on
 * only part of the time. */
static void read_self_cost(const struct tracer_bpf *t, const struct stats_baseline *base,
			   struct snapshot *s)
{
	for (int i = 0; i < t->nprogs && i < MAX_ATTACHED; i++) {
		struct prog_snap *ps;
		unsigned long long ns = 0, runs = 0, skipped = 0;

		if (same_program(t, i, s))
			continue;
		ps = &s->progs[s->nprogs++];
		ps->fd = t->progs[i].prog_fd;
		prog_stats(t->progs[i].prog_fd, &ns, &runs, &skipped);
		snprintf(ps->name, sizeof(ps->name), "%s", t->progs[i].name);
		snprintf(ps->target, sizeof(ps->target), "%s", t->progs[i].target);
		ps->ns = ns >= base->ns[i] ? ns - base->ns[i] : ns;
		ps->runs = runs >= base->runs[i] ? runs - base->runs[i] : runs;
		ps->skipped = skipped >= base->skipped[i] ? skipped - base->skipped[i] : skipped;
		if (skip_is_drop(ps->name))
			s->programs_skipped += ps->skipped;
		if (base->share > 0 && base->share < 1) {
			/* measured during the sampling windows only */
			ps->ns = (unsigned long long)(ps->ns / base->share + 0.5);
			ps->runs = (unsigned long long)(ps->runs / base->share + 0.5);
		}
		s->bpf_ns += ps->ns;
		s->bpf_runs += ps->runs;
	}
	s->stats_how = base->stats_how;
	s->stats_share = base->share;
	s->stats_enabled = base->stats_how != NULL && base->share > 0;
}

int stats_read(const struct tracer_bpf *t, const struct stats_baseline *base,
	       const unsigned int *extra, int nextra, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	tracer_bpf_flush_threads(t);
	if (read_maps(t, extra, nextra, s))
		return -ENOMEM;
	total(t, s);
	if (sockets_read(t, s))
		return -ENOMEM;
	read_self_cost(t, base, s);
	s->drops += s->programs_skipped;
	s->duration_s = monotonic_s() - base->t0;
	return 0;
}

void stats_free(struct snapshot *s)
{
	free(s->procs);
	free(s->netns);
	free(s->socks);
	s->procs = NULL;
	s->netns = NULL;
	s->socks = NULL;
}

unsigned long long sc_hist(const struct sc_stats *sc, unsigned long long h[NETIO_HIST_SLOTS])
{
	unsigned long long timed = 0;

	for (int k = 0; k < NETIO_HIST_SLOTS; k++) {
		h[k] = sc->hist[k];
		timed += h[k];
	}
	return timed;
}

static void write_sc(struct json *j, const struct sc_stats *sc)
{
	unsigned long long h[NETIO_HIST_SLOTS], timed = sc_hist(sc, h);

	json_begin_object(j);
	json_kv_uint(j, "count", sc->count);
	json_kv_uint(j, "timed", timed);	/* calls whose end was seen */
	json_kv_uint(j, "bytes", sc->bytes);
	json_kv_uint(j, "errors", sc->errors);
	json_kv_double(j, "mean_us", timed ? sc->total_ns / 1e3 / timed : NAN);
	json_kv_double(j, "p50_us", log2_hist_percentile(h, NETIO_HIST_SLOTS, 0.50) / 1e3);
	json_kv_double(j, "p99_us", log2_hist_percentile(h, NETIO_HIST_SLOTS, 0.99) / 1e3);
	json_key(j, "hist_log2_ns");
	json_begin_object(j);
	for (int k = 0; k < NETIO_HIST_SLOTS; k++) {
		char lo[32];
		if (!h[k])
			continue;
		snprintf(lo, sizeof(lo), "%llu", log2_slot_lo(k));
		json_kv_uint(j, lo, h[k]);
	}
	json_end(j);
	json_end(j);
}

static void write_syscalls(struct json *j, const struct sc_stats *sc, const bool *has)
{
	json_begin_object(j);
	for (int c = 0; c < SC_NR_CLASSES; c++) {
		if (!has[c])
			continue;
		json_key(j, sc_class_names[c]);
		write_sc(j, &sc[c]);
	}
	json_end(j);
}

/* "attach": the rung of each probe point; "probes": the functions or events it uses;
 * "attach_why": why a point is on no higher rung, or on none; "bpf_build": the build of the
 * BPF objects loaded (user/builds.h) and what the kernel lacks for the storage build. */
void stats_write_attach(const struct tracer_bpf *t, struct json *j)
{
	char buf[512];

	json_key(j, "attach");
	json_begin_object(j);
	for (int pp = 0; pp < PP_NR; pp++)
		json_kv_string(j, pp_name(pp), rung_name(t->rung[pp]));
	json_end(j);
	json_key(j, "probes");
	json_begin_object(j);
	for (int pp = 0; pp < PP_NR; pp++) {
		tracer_bpf_targets(t, pp, buf, sizeof(buf));
		if (buf[0])
			json_kv_string(j, pp_name(pp), buf);
	}
	json_end(j);
	json_key(j, "attach_why");
	json_begin_object(j);
	for (int pp = 0; pp < PP_NR; pp++)
		if (t->why[pp][0])
			json_kv_string(j, pp_name(pp), t->why[pp]);
	json_end(j);
	json_key(j, "bpf_build");
	json_begin_object(j);
	json_kv_string(j, "name", bpf_build_name(bpf_build()));
	json_kv_string(j, "missing", bpf_build_missing(buf, sizeof(buf)));
	json_end(j);
}

bool zc_tx_counted(const struct tracer_bpf *t, const struct snapshot *s)
{
	return t->rung[PP_PINNING] != RUNG_UNAVAILABLE && !s->zc_bytes_null;
}

bool fallback_counted(const struct tracer_bpf *t, const struct snapshot *s)
{
	return t->rung[PP_FALLBACK_COPY] != RUNG_UNAVAILABLE && !s->fallback_null;
}

bool rx_copy_counted(const struct tracer_bpf *t, const struct snapshot *s)
{
	return t->rung[PP_RX_COPY] != RUNG_UNAVAILABLE && !s->rx_unsized_calls;
}

/* The bytes of docs/DESIGN.md's trace object, over every followed process and namespace. */
static void write_bytes(const struct tracer_bpf *t, const struct snapshot *s, struct json *j)
{
	json_kv_uint(j, "tx_bytes", s->tx_bytes);
	json_kv_uint(j, "tx_calls", s->tx_calls);
	json_kv_uint(j, "tx_copy_bytes", s->tx_copy_bytes);
	json_kv_bool(j, "tx_copy_inferred", s->tx_copy_inferred);
	json_kv_uint(j, "tx_spliced_bytes", s->tx_spliced_bytes);
	json_kv_count(j, "zc_tx_bytes", zc_tx_counted(t, s), s->zc_tx_bytes);
	json_kv_count(j, "fallback_copy_bytes", fallback_counted(t, s), s->fallback_copy_bytes);
	json_kv_count(j, "rx_copy_bytes", rx_copy_counted(t, s), s->rx_copy_bytes);
	json_kv_count(j, "pinned_pages", !s->pinned_pages_null, s->pinned_pages);
	for (int k = 0; k < 3; k++)
		json_kv_count(j, rx_kind_field[k], s->rx_kind_counted[k] &&
			      !(k == 2 && s->rx_unsized_splices), s->rx_kind_bytes[k]);
}

/* "skb_programs": when the per-skb programs run, and the zero-copy sends made before they
 * did (docs/tracer.md). */
static void write_skb_programs(const struct snapshot *s, struct json *j)
{
	json_key(j, "skb_programs");
	json_begin_object(j);
	json_kv_string(j, "mode", s->skb_on_demand ? "on-demand" : "always");
	json_kv_bool(j, "attached", s->skb_progs_attached);
	json_kv_uint(j, "zc_sends_before", s->zc_sends_before_skb_progs);
	json_kv_uint(j, "zc_uncounted_sends_before", s->zc_uncounted_before_skb_progs);
	json_end(j);
}

/* "zerocopy": zero-copy skbs and completions, as the kernel saw them. */
static void write_zerocopy(const struct tracer_bpf *t, const struct snapshot *s, struct json *j)
{
	bool completions = t->rung[PP_ZC_COMPLETION] != RUNG_UNAVAILABLE;
	bool skbs_whole = !s->fallback_null;	/* the per-skb programs saw every zero-copy skb */

	json_key(j, "zerocopy");
	json_begin_object(j);
	json_kv_count(j, "zc_skbs_sent", skbs_whole, s->zc_tx_skbs);
	json_kv_count(j, "fallback_copy_skbs", skbs_whole, s->fallback_copy_skbs);
	/* of the fallback copy, what was copied a second time: TCP retransmits of segments that
	 * had arrived (their pages pinned once) */
	json_kv_count(j, "fallback_copy_again_bytes", t->rung[PP_FALLBACK_COPY] != RUNG_UNAVAILABLE &&
		      !s->fallback_null, s->fallback_copy_again_bytes);
	json_kv_count(j, "fallback_copy_again_skbs", t->rung[PP_FALLBACK_COPY] != RUNG_UNAVAILABLE &&
		      !s->fallback_null, s->fallback_copy_again_skbs);
	json_kv_count(j, "zc_skbs_at_tcp", s->skbs_at_tcp_counted, s->zc_skbs_at_tcp);
	json_kv_count(j, "zc_skbs_again", skbs_whole, s->zc_skbs_again);
	json_kv_count(j, "zc_skbs_unseen_at_xmit", skbs_whole, s->zc_skbs_unseen_at_xmit);
	json_kv_count(j, "zc_bytes_unseen_at_xmit", skbs_whole, s->zc_bytes_unseen_at_xmit);
	json_kv_count(j, "zc_bytes_seen_at_xmit", skbs_whole, s->zc_bytes_seen_at_xmit);
	json_kv_count(j, "zc_bytes_no_program_saw", s->zc_at_send && skbs_whole,
		      s->zc_bytes_no_program_saw);
	json_kv_count(j, "completions", completions, s->zc_completions);
	json_kv_count(j, "completed_sends", completions, s->zc_completed_sends);
	json_kv_count(j, "copied_sends", completions, s->zc_copied_sends);
	write_skb_programs(s, j);
	json_end(j);
}

/* "syscalls" with how their latency was taken. */
static void write_latency(const struct tracer_bpf *t, const struct snapshot *s, struct json *j)
{
	json_key(j, "syscalls");
	write_syscalls(j, s->sc, s->has_sc);
	json_kv_string(j, "percentiles", "p50_us/p99_us are interpolated inside log2 histogram buckets");
	/* where a call's latency ends: "socket" (send/receive calls at sock_send_length /
	 * sock_recv_length, the rest at sys_exit) or "sys_exit" */
	json_kv_string(j, "syscalls_end", t->sc_end_at_socket ? "socket" : "sys_exit");
	/* --no-latency: calls counted at the socket layer, none timed (no histogram) */
	json_key(j, "latency");
	json_begin_object(j);
	json_kv_bool(j, "timed", !t->no_latency);
	if (!t->no_latency)	/* --latency-sample: each thread times 1 call in N */
		json_kv_uint(j, "sampled_1_in", t->sampled_1_in > 1 ? t->sampled_1_in : 1);
	json_end(j);
}

static void write_process(const struct snapshot *s, const struct proc_snap *p, struct json *j)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%u", p->tgid);
	json_key(j, pid);
	json_begin_object(j);
	json_kv_string(j, "comm", p->comm);
	json_kv_uint(j, "tx_bytes", p->st.tx_bytes);
	json_kv_uint(j, "tx_calls", p->st.tx_calls);
	json_kv_count(j, "tx_copy_bytes", !s->tx_copy_inferred || s->zc_per_process,
		      p->st.tx_copy_bytes);
	json_kv_bool(j, "tx_copy_inferred", s->tx_copy_inferred);
	json_kv_uint(j, "tx_spliced_bytes", p->st.tx_spliced_bytes);
	json_kv_count(j, "zc_tx_bytes", s->zc_per_process && !s->zc_bytes_null, p->st.zc_tx_bytes);
	json_kv_count(j, "rx_copy_bytes", !p->st.rx_unsized_calls, p->st.rx_copy_bytes);
	json_kv_uint(j, "rx_copy_calls", p->st.rx_calls);
	json_kv_count(j, "rx_mapped_bytes", s->rx_kind_counted[0], p->st.rx_mapped_bytes);
	json_kv_count(j, "rx_discarded_bytes", s->rx_kind_counted[1], p->st.rx_discarded_bytes);
	json_kv_count(j, "rx_spliced_bytes", s->rx_kind_counted[2] && !p->st.rx_unsized_splices,
		      p->st.rx_spliced_bytes);
	json_kv_count(j, "pinned_pages", !s->pinned_pages_null, p->st.pinned_pages);
	json_key(j, "syscalls");
	write_syscalls(j, p->sc, p->has_sc);
	json_end(j);
}

static void write_netns(const struct snapshot *s, const struct netns_snap *ns, struct json *j)
{
	const struct netns_stats *n = &ns->st;
	bool skbs_whole = !s->fallback_null;	/* the per-skb programs saw every zero-copy skb */
	char inum[16];

	snprintf(inum, sizeof(inum), "%u", ns->inum);
	json_key(j, inum);
	json_begin_object(j);
	json_kv_count(j, "zc_tx_bytes", !s->zc_bytes_null, n->zc_tx_bytes);
	json_kv_count(j, "zc_tx_skbs", skbs_whole, n->zc_tx_skbs);
	json_kv_count(j, "fallback_copy_bytes", !s->fallback_null, n->fallback_copy_bytes);
	json_kv_count(j, "fallback_copy_skbs", skbs_whole, n->fallback_copy_skbs);
	json_kv_count(j, "fallback_copy_again_bytes", !s->fallback_null,
		      n->fallback_copy_again_bytes);
	json_kv_count(j, "fallback_copy_again_skbs", skbs_whole, n->fallback_copy_again_skbs);
	json_kv_count(j, "zc_skbs_at_tcp", s->skbs_at_tcp_counted, n->zc_skbs_at_tcp);
	json_kv_count(j, "zc_skbs_again", skbs_whole, n->zc_skbs_again);
	json_kv_count(j, "zc_skbs_unseen_at_xmit", skbs_whole, n->zc_skbs_unseen_at_xmit);
	json_kv_count(j, "zc_bytes_unseen_at_xmit", skbs_whole, n->zc_bytes_unseen_at_xmit);
	json_kv_count(j, "zc_bytes_seen_at_xmit", skbs_whole, n->zc_bytes_seen_at_xmit);
	json_kv_uint(j, "zc_completions", n->zc_completions);
	json_kv_uint(j, "zc_completed_sends", n->zc_completed_sends);
	json_kv_uint(j, "zc_copied_sends", n->zc_copied_sends);
	json_kv_count(j, "zc_rx_kept_bytes", skbs_whole, n->zc_rx_kept_bytes);
	json_kv_count(j, "zc_rx_kept_skbs", skbs_whole, n->zc_rx_kept_skbs);
	json_end(j);
}

/* "self": what our programs cost, per program and per message sent. */
static void write_self(const struct snapshot *s, struct json *j)
{
	unsigned long long msgs = s->tx_calls;

	json_key(j, "self");
	json_begin_object(j);
	json_kv_uint(j, "bpf_ns", s->bpf_ns);
	json_kv_uint(j, "bpf_runs", s->bpf_runs);
	if (msgs && s->stats_enabled)
		json_kv_double(j, "ns_per_message", (double)s->bpf_ns / msgs);
	else
		json_kv_null(j, "ns_per_message");
	json_kv_bool(j, "stats_enabled", s->stats_enabled);
	json_kv_string(j, "stats_via", s->stats_how);
	json_kv_double(j, "sampled_share", s->stats_share);
	json_kv_bool(j, "estimated", s->stats_share > 0 && s->stats_share < 1);
	json_key(j, "programs");
	json_begin_object(j);
	for (int i = 0; i < s->nprogs; i++) {
		json_key(j, s->progs[i].name);
		json_begin_object(j);
		json_kv_uint(j, "ns", s->progs[i].ns);
		json_kv_uint(j, "runs", s->progs[i].runs);
		json_kv_uint(j, "skipped", s->progs[i].skipped);
		json_kv_string(j, "target", s->progs[i].target);
		json_end(j);
	}
	json_end(j);
	json_end(j);
}

/* Names of enum netio_counter's drop causes, in its order. */
const char *const drop_cause_names[CNT_DROPS_NR] = {
	"thread_storage", "process_stats", "map_busy", "map_full",
};

static void write_drops_by_cause(const struct snapshot *s, struct json *j)
{
	json_key(j, "drops_by_cause");
	json_begin_object(j);
	for (int i = 0; i < CNT_DROPS_NR; i++)
		json_kv_uint(j, drop_cause_names[i], s->drops_by_cause[i]);
	json_kv_uint(j, "program_skipped", s->programs_skipped);
	json_end(j);
}

void stats_write_json(const struct tracer_bpf *t, const struct snapshot *s, struct json *j)
{
	stats_write_attach(t, j);
	write_bytes(t, s, j);
	write_unavailable(t, s, j);
	write_zerocopy(t, s, j);
	write_latency(t, s, j);
	json_kv_uint(j, "drops", s->drops);
	write_drops_by_cause(s, j);
	json_kv_uint(j, "forks_followed", s->forks_followed);
	json_kv_uint(j, "cgroup_followed", s->cgroup_followed);
	json_kv_uint(j, "thread_storage_spilled", s->thread_storage_spilled);
	json_kv_double(j, "duration_s", s->duration_s);
	json_key(j, "processes");
	json_begin_object(j);
	for (int i = 0; i < s->nprocs; i++)
		write_process(s, &s->procs[i], j);
	json_end(j);
	sockets_write_json(t, s, j);
	json_key(j, "netns");
	json_begin_object(j);
	for (int i = 0; i < s->nnetns; i++)
		write_netns(s, &s->netns[i], j);
	json_end(j);
	write_self(s, j);
}
