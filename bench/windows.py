"""Traced and untraced windows within one run: the tracer's cost where the machine's own speed
changes from second to second (bench/NOTES.md, "The machine's own speed").

Section 1 pairs whole runs, 0.5 s each and a few seconds apart (the tracer is loaded for each
traced run): a host that slows this VM between the two runs of a pair bends the ratio, and the
speed probe can only leave such pairs out. Here one workload runs for the whole measurement
with the tracer loaded once; the tracer is attached and detached in turn (its `attach` and
`detach` commands: when detached, no program of ours is attached and no sampling event is
open), and the receiver's throughput is read over a short window in each state, from its
namespace's device counters. Adjacent windows, a fraction of a second apart, form a pair; the
order flips every pair (traced-untraced, untraced-traced, ...) so a steady drift hits both
alike. What a window cannot hold: a cost paid once per run (loading, first events of a thread),
which section 1 keeps.
"""
import os
import time

from bench import pairs

WARMUP_S = 0.5      # the connection's start (slow start, first allocations) before window 1
SETTLE_S = 0.05     # after a toggle, before a window: the tracer's own attach work done
WINDOW_S = 0.1      # one window of throughput
TOGGLE_S = 0.03     # an allowance per toggle when sizing the run (bench/NOTES.md)


def rx_bytes(pid):
    """Bytes received by every device of pid's network namespace (/proc/PID/net/dev)."""
    total = 0
    with open(f"/proc/{pid}/net/dev") as f:
        for line in f.readlines()[2:]:
            total += int(line.split(":", 1)[1].split()[0])
    return total


def pair_seconds():
    return 2 * (SETTLE_S + WINDOW_S + TOGGLE_S)


def run_seconds(npairs):
    """How long the workload must run for npairs pairs of windows."""
    return WARMUP_S + npairs * pair_seconds() + 0.5


class Windows:
    """An observer for Bench.netio: a tracer (bench.observers.OurTracer, which loads and starts
    it) toggled while the workload runs. stop() puts into the run `windows`: [(traced Gbit/s,
    other Gbit/s)] per pair. The other windows are untraced, or, given a reference tracer
    (another build: bench.ab --windows), traced by the reference; the two are never attached
    at once."""

    def __init__(self, tracer, npairs, reference=None):
        self.tracer = tracer        # an OurTracer: its start() loads and follows
        self.reference = reference
        self.name = f"windows-{tracer.name}"
        self.npairs = npairs
        self.pairs = []
        self._on = {}

    def start(self, bench, topo, pids):
        self.topo, self.pids = topo, pids
        for t in self._tracers():
            t.start(bench, topo, pids)
            self._on[t] = True
        self._set(False)

    def _tracers(self):
        return [self.tracer] + ([self.reference] if self.reference else [])

    def _follow(self, t, on):
        tr = t.tr
        if on == self._on[t]:
            return
        if on:
            tr.attach_probes()
            for ns in self.topo.namespaces:
                tr.netns_add(ns)
            for pid in self.pids:
                tr.pid_add(pid)
        else:
            tr.detach_probes()
        self._on[t] = on

    def _set(self, traced):
        """traced: the tracer attached, else the reference (if any); detaching first."""
        off, on = (self.reference, self.tracer) if traced else (self.tracer, self.reference)
        if off:
            self._follow(off, False)
        if on:
            self._follow(on, True)

    def _window(self, traced, receiver):
        self._set(traced)
        time.sleep(SETTLE_S)
        b0, t0 = rx_bytes(receiver), time.monotonic()
        time.sleep(WINDOW_S)
        b1, t1 = rx_bytes(receiver), time.monotonic()
        return (b1 - b0) * 8 / (t1 - t0) / 1e9

    def during(self, receiver, end):
        """Called by Bench.netio once the workload runs; end: when it stops sending."""
        time.sleep(WARMUP_S)
        for i in range(self.npairs):
            if time.monotonic() + pair_seconds() > end:
                break       # the workload stops sending: fewer pairs, and the count says so
            order = (True, False) if i % 2 == 0 else (False, True)
            try:
                rates = {t: self._window(t, receiver) for t in order}
            except FileNotFoundError:
                break       # the receiver ended inside the pair: toggles outlasted their allowance
            self.pairs.append((rates[True], rates[False]))
        self._set(False)

    def stop(self, run):
        """The pairs, and each tracer's BPF time per program run over its windows
        (run["window_programs"][tracer name][program] = (ns, runs), its own sampled BPF
        statistics): two builds' programs, measured in turn under the same host."""
        run["windows"] = self.pairs
        run["window_programs"] = {}
        try:
            for t in self._tracers():
                snap = t.tr.snapshot(os.path.join(t.dir, "windows.json"))
                progs = (snap.get("self") or {}).get("programs") or {}
                run["window_programs"][t.name] = {k: (v.get("ns", 0), v.get("runs", 0))
                                                  for k, v in progs.items()}
        finally:
            self.abort()

    def abort(self):
        for t in self._tracers():
            t.abort()


def summary(pairs_list):
    """pairs.summary of traced / untraced over every pair of windows."""
    return pairs.summary([t / u for t, u in pairs_list if u])


def ns_per_run(runs, name):
    """{program: median over runs of ns per program run} of tracer `name` (Windows.stop)."""
    return median_ns_per_run(run.get("window_programs", {}).get(name, {}) for run in runs)


def median_ns_per_run(per_run):
    """{program: median of ns per program run}, from one {program: (ns, runs)} per run."""
    per = {}
    for progs in per_run:
        for prog, (ns, n) in progs.items():
            if n:
                per.setdefault(prog, []).append(ns / n)
    return {k: pairs.summary(v)["median"] for k, v in per.items()}


def rates(pairs_list, traced):
    """pairs.summary of the traced (or untraced) windows' Gbit/s."""
    return pairs.summary([p[0 if traced else 1] for p in pairs_list])


def run_medians(runs):
    """Each run's median of traced / untraced (None for a run without a pair); runs: each
    run's pairs of windows."""
    return [summary(w)["median"] for w in runs]


def runs_summary(runs):
    """pairs.summary of the runs' medians: a run is the unit a verdict counts (its windows
    share the run's placement of threads on the CPUs)."""
    return pairs.summary(run_medians(runs))
