// SPDX-License-Identifier: GPL-2.0
/* BPF run-time stats for the tracer's self cost (--bpf-stats): BPF_ENABLE_STATS, sampled in
 * windows or always on, or the kernel.bpf_stats_enabled sysctl where the kernel has no
 * BPF_ENABLE_STATS; and the share of the time they were on, which scales the run times. */
#include <stdbool.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "sysctl.h"
#include "tracer.h"

#define STATS_SYSCTL "kernel/bpf_stats_enabled"

/* Run-time stats cost every BPF program run two sched_clock() reads (what that costs here:
 * bench/NOTES.md), several runs per message, so by default they are on for 100 ms of every
 * second, from the start of each run (reset), and the program run times are scaled by the
 * share of time they were on (self.sampled_share). --bpf-stats always keeps them on for the
 * whole run. Each switch patches the kernel's text (a static key in every BPF program run):
 * twice a second is nothing on hardware, but QEMU/TCG guests can livelock on frequent
 * patching of so hot a site, which is why the VM tests use --bpf-stats always.
 * BPF_ENABLE_STATS keeps them on while its fd is open: the kernel restores the previous state
 * when we close it or exit, however we exit. The sysctl is the fallback (kernels < 5.8). */
#define STATS_ON_S 0.100
#define STATS_PERIOD_S 1.000

void stats_window(struct tracer *tr, bool on)
{
	double now = monotonic_s();

	if (on == tr->stats_on)
		return;
	if (on) {
		tr->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (tr->stats_fd < 0)
			return;
		tr->stats_on = true;
		tr->stats_on_since = now;
	} else {
		close(tr->stats_fd);
		tr->stats_fd = -1;
		tr->stats_on = false;
		tr->stats_on_total += now - tr->stats_on_since;
		tr->stats_off_since = now;
	}
}

void stats_enable(struct tracer *tr)
{
	tr->sysctl_prev = -1;
	if (tr->stats_mode == STATS_OFF)
		return;
	stats_window(tr, true);
	if (tr->stats_on) {
		tr->base.stats_how = tr->stats_mode == STATS_SAMPLED ? "BPF_ENABLE_STATS, sampled" :
				     "BPF_ENABLE_STATS";
		return;
	}
	/* no BPF_ENABLE_STATS: the sysctl, for the whole run */
	tr->stats_mode = STATS_ALWAYS;
	int prev = sysctl_read_int(STATS_SYSCTL);
	if (prev == 0 && sysctl_write_int(STATS_SYSCTL, 1) == 0)
		tr->sysctl_prev = prev;
	if (prev > 0 || tr->sysctl_prev == 0)	/* on: already, or by us */
		tr->base.stats_how = "sysctl";
}

static unsigned long long our_runs(struct tracer *tr)
{
	unsigned long long sum = 0;

	for (int i = 0; i < tr->bpf.nprogs; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		if (!bpf_obj_get_info_by_fd(tr->bpf.progs[i].prog_fd, &info, &len))
			sum += info.run_cnt;
	}
	return sum;
}

/* every ~50 ms: open and close the sampling windows (their real length is measured) */
void stats_tick(struct tracer *tr)
{
	double now;

	if (tr->stats_mode != STATS_SAMPLED)
		return;
	now = monotonic_s();
	if (tr->stats_on) {
		if (now - tr->stats_on_since >= STATS_ON_S) {
			stats_window(tr, false);
			tr->stats_off_runs_taken = false;
		}
		return;
	}
	if (!tr->stats_off_runs_taken && now - tr->stats_off_since >= 0.04) {
		/* a little after closing: runs that started inside the window are counted */
		tr->stats_off_runs = our_runs(tr);
		tr->stats_off_runs_taken = true;
	}
	if (now - tr->stats_off_since >= STATS_PERIOD_S - STATS_ON_S) {
		if (tr->stats_off_runs_taken && our_runs(tr) > tr->stats_off_runs)
			tr->stats_external = true;	/* counted while our window was closed */
		stats_window(tr, true);
	}
}

/* a run starts: a window opens now */
void stats_restart(struct tracer *tr)
{
	if (tr->stats_mode != STATS_SAMPLED)
		return;
	stats_window(tr, false);
	tr->stats_on_total = 0;
	tr->stats_external = false;
	tr->stats_off_runs_taken = false;
	stats_window(tr, true);
}

/* share of the time since the last reset that the stats were on */
double stats_share(struct tracer *tr)
{
	if (tr->stats_mode == STATS_SAMPLED && tr->base.stats_how)
		tr->base.stats_how = tr->stats_external ?
			"BPF_ENABLE_STATS, sampled; also on outside our windows (another holder): not scaled" :
			"BPF_ENABLE_STATS, sampled";
	double now = monotonic_s(), on, all;

	if (tr->stats_mode == STATS_OFF || !tr->base.stats_how)
		return 0;
	if (tr->stats_mode == STATS_ALWAYS || tr->stats_external)
		return 1;	/* always on (ours or someone else's): nothing to scale */
	on = tr->stats_on_total + (tr->stats_on ? now - tr->stats_on_since : 0);
	all = now - tr->base.t0;
	return all > 0 && on > 0 ? (on < all ? on / all : 1) : 0;
}

void stats_restore(struct tracer *tr)
{
	if (tr->stats_fd >= 0)
		close(tr->stats_fd);
	tr->stats_fd = -1;
	tr->stats_on = false;
	if (tr->sysctl_prev >= 0)
		sysctl_write_int(STATS_SYSCTL, tr->sysctl_prev);
	tr->sysctl_prev = -1;
}
