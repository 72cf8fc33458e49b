"""What the tracer costs, measured and judged: sections 1 and 2 (each level and part of the
tracer, and bpftrace, against untraced runs in interleaved rounds; the timer floor), 1w (the
levels in alternating windows of one run) and 8 (unrelated syscalls, in the 6.1 guest). Each
section function measures, records its verdicts (Bench.record) and hands its numbers to
bench/markdown_overhead.py."""
from netio_trace.system.netns import Topology
from bench import markdown_overhead, pairs, profiles, unrelated, windows
from bench.config import (BUILD, DECOMPOSED, HEADLINE_CASE, KiB, OVERHEAD_SIZES,
                          OVERHEAD_STRATEGIES, TARGET_COUNTING, TARGET_COUNTING_HEADLINE,
                          TARGET_HEADLINE, TARGET_OVERHEAD, TARGET_OVERHEAD_HEADLINE,
                          TARGET_PEER, TARGET_SAMPLING, UNRELATED_TARGET_NAME, WINDOW_TARGETS,
                          OverheadCase, WindowCase, config_tag)
from bench.harness import SPEEDS, interleaved, log, machine_speed
from bench.observers import (Bpftrace, BpftraceTimer, OurTracer, Untraced, counting_level,
                             counting_only, programs_on_skbs_only, sampling_alone, timer_source)


def section_overhead(b):
    """Full tracer / untraced and bpftrace / untraced, interleaved in the same rounds:
    measured, judged against the targets, then written up (sections 1 and 2)."""
    cases = _measure_overhead(b)
    missed = []
    for c in cases:
        missed += _overhead_verdicts(b, c)
        if c.strategy == "one-copy":
            missed += _sampling_verdicts(b, c)
    floor = timer_floor(b)
    return markdown_overhead.section_overhead(b.args, cases, missed, floor)


# ---- section 1, measuring ------------------------------------------------------------------
def _overhead_variants(b, topo, strategy, size):
    """The section's variants of one configuration: (name, a function running it once)."""
    def mk(obs_factory):
        return lambda: b.netio(topo, strategy, size, 1, b.args.duration, obs_factory())
    variants = [("untraced", mk(Untraced)),
                ("full", mk(OurTracer)),
                ("bpftrace", mk(Bpftrace)),
                # ours doing what bpftrace does (section 2), and more: copy
                # accounting and syscall histograms, no sampling or counters
                ("programs", mk(counting_only))]
    variants.append(("counting", mk(counting_level)))
    if strategy in DECOMPOSED:   # where the cost goes: a part at a time
        variants.append(("xmit-receive", mk(programs_on_skbs_only)))
        variants.append(("no-sample",
                         mk(lambda: OurTracer(["--no-sample"], label="no-sample"))))
        variants.append(("sampling", mk(sampling_alone)))
        # a peer's sampler that does nothing but take its 999 Hz interrupt
        variants.append(("bpftrace-timer", mk(BpftraceTimer)))
        # the cheaper source in a VM: the scheduler tick
        variants.append(("tick", mk(lambda: OurTracer(
            ["--sample-source", "tick"], label="tick"))))
        # every call timed (full samples 1 in 16): what exact latency's clock reads cost
        variants.append(("exact-latency", mk(lambda: OurTracer(
            ["--latency-sample", "1"], label="exact-latency"))))
    return variants


def each_overhead_config(b, fn):
    """[fn(topo, transport, strategy, size, tag)] for every configuration of sections 1 and
    1w, in run order, each inside its transport's namespaces."""
    out = []
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for strategy in OVERHEAD_STRATEGIES:
                for size in OVERHEAD_SIZES:
                    out.append(fn(topo, transport, strategy, size,
                                  config_tag(transport, strategy, size)))
    return out


def _measure_overhead(b):
    """Every configuration's variants in interleaved rounds: [OverheadCase], in run order."""
    def measure(topo, transport, strategy, size, tag):
        # one-copy carries the small effects (sampling, the parts of the tracer): more
        # rounds for a steadier median
        n = (max(b.args.rounds, b.args.one_copy_rounds) if strategy == "one-copy"
             else b.args.rounds)
        res = interleaved(n, _overhead_variants(b, topo, strategy, size), tag)
        return OverheadCase(transport, strategy, size, tag, res)
    return each_overhead_config(b, measure)


def timer_floor(b):
    """What a sampling interrupt costs on this machine with no network work around it: a busy
    loop under samplers that do little but take their interrupt. Markdown lines."""
    dur, rounds = b.args.duration, b.args.rounds
    variants = [("untraced", lambda: b.busy_loop(dur, Untraced())),
                ("bpftrace-timer", lambda: b.busy_loop(dur, BpftraceTimer())),
                ("sampling", lambda: b.busy_loop(dur, sampling_alone(timer_source()))),
                ("tick", lambda: b.busy_loop(dur, sampling_alone("tick")))]
    res = interleaved(rounds, variants, "timer floor")
    b.record("issue 4 floor: busy loop under a 999 Hz timer that only counts "
             "(bpftrace), / untraced", "busy loop",
             pairs.ratio(res, "bpftrace-timer", "untraced", "blocks_per_s"), TARGET_SAMPLING)
    b.record("issue 4 floor: busy loop under our sampling alone at 999 Hz "
             "(default source), / untraced", "busy loop",
             pairs.ratio(res, "sampling", "untraced", "blocks_per_s"), TARGET_SAMPLING)
    return markdown_overhead.timer_floor_md(b.args, res)


# ---- sections 1 and 2, verdicts ------------------------------------------------------------
def below(s, target):
    """A median under target: its profile is kept. None (nothing measured, or every pair left
    out as unsteady) has no run to profile."""
    return s["median"] is not None and s["median"] < target


def _overhead_verdicts(b, c):
    """Records one configuration's overhead and peer verdicts; the profiles of the targets it
    missed (profiles.Profile)."""
    res, tag = c.res, c.tag
    full = pairs.ratio(res, "full", "untraced")
    b.record("1. tracer overhead, full / untraced", tag, full, TARGET_OVERHEAD)
    b.record("1a. counting level (--no-latency --no-sample) / untraced", tag,
             pairs.ratio(res, "counting", "untraced"), TARGET_COUNTING)
    if (c.transport, c.strategy, c.size) == HEADLINE_CASE:
        b.record("1b. headline one-copy 16K loopback, full / untraced", tag,
                 full, TARGET_OVERHEAD_HEADLINE)
        b.record("1b. headline one-copy 16K loopback, counting / untraced",
                 tag, pairs.ratio(res, "counting", "untraced"),
                 TARGET_COUNTING_HEADLINE)
    # ours against the peer: paired within each round, as every comparison
    full_vs_peer = pairs.ratio(res, "full", "bpftrace")
    b.record("2. ours full / bpftrace, paired", tag, full_vs_peer, TARGET_PEER)
    b.record("2. ours counting only (no sampling, no counters) / bpftrace, paired",
             tag, pairs.ratio(res, "programs", "bpftrace"), TARGET_PEER)
    name = f"overhead-{c.transport}-{c.strategy}-{c.size // KiB}k"
    if below(full, TARGET_OVERHEAD):
        return [profiles.capture(name, res, "full", "untraced",
                                 f"{tag}: full/untraced {pairs.fmt(full, 3)} "
                                 f"< {TARGET_OVERHEAD}")]
    if below(full_vs_peer, TARGET_PEER):
        return [profiles.capture(name, res, "full", "untraced",
                                 f"{tag}: ours / bpftrace "
                                 f"{pairs.fmt(full_vs_peer, 3)} < {TARGET_PEER:g}")]
    return []


def _sampling_verdicts(b, c):
    """Records what sampling costs in a one-copy configuration (and the headline case's
    full / untraced); the profile if it missed (profiles.Profile)."""
    res, tag = c.res, c.tag
    b.record("issue 4: sampling alone at 999 Hz (default source) / untraced",
             tag, pairs.ratio(res, "sampling", "untraced"), TARGET_SAMPLING)
    sampling = pairs.ratio(res, "full", "no-sample")
    b.record("issue 4: sampling at 999 Hz (default source), full / no-sample",
             tag, sampling, TARGET_SAMPLING)
    b.record("sampling on the tick (--sample-source tick), / no-sample", tag,
             pairs.ratio(res, "tick", "no-sample"), TARGET_SAMPLING)
    missed = []
    if below(sampling, TARGET_SAMPLING):
        missed = [profiles.capture(f"sampling-{c.transport}-{c.size // KiB}k", res,
                                   "full", "no-sample",
                                   f"{tag}: sampling (full/no-sample) "
                                   f"{pairs.fmt(sampling, 3)} "
                                   f"< {TARGET_SAMPLING}")]
    if c.transport == "loopback" and c.size == 16 * KiB:
        b.record("issue 3 headline: one-copy 16 KiB loopback, full / untraced",
                 tag, pairs.ratio(res, "full", "untraced"), TARGET_HEADLINE)
    return missed


# ---- section 1w: the levels' cost in windows of one run ------------------------------------
# each level of config.WINDOW_TARGETS and its tracer
WINDOW_TRACERS = {"full": OurTracer, "counting": counting_level}


def section_windows(b):
    """Each level / untraced in alternating windows of one run (bench/windows.py), several
    runs per configuration with the levels in turn: the same targets as section 1, measured
    where the machine's drift between runs cannot reach the pairs. A run is the unit a verdict
    counts (its windows share the run's placement of threads on the two vCPUs, which the host
    slows unequally): the verdict is on the median of the runs' medians."""
    def measure(topo, transport, strategy, size, tag):
        found = _window_runs(b, topo, (strategy, size), tag)
        for level, target, headline in WINDOW_TARGETS:
            s = windows.runs_summary(found[level].runs)
            b.record(f"1w. {level} / untraced, in windows of one run", tag, s, target)
            if (transport, strategy, size) == HEADLINE_CASE:
                b.record(f"1w. headline one-copy 16K loopback, {level} / untraced, in windows",
                         tag, s, headline)
        return [found[level] for level, *_ in WINDOW_TARGETS]
    cases = [c for cs in each_overhead_config(b, measure) for c in cs]
    return markdown_overhead.section_windows(b.args, cases)


def _window_runs(b, topo, config, tag):
    """b.args.window_runs runs of config per level, the levels in turn: {level: WindowCase}."""
    strategy, size = config
    n = b.args.window_pairs
    found = {lv: WindowCase(tag, lv, [], [], []) for lv, *_ in WINDOW_TARGETS}
    for r in range(b.args.window_runs):
        for level, *_ in WINDOW_TARGETS:
            before = machine_speed()
            run = b.netio(topo, strategy, size, 1, windows.run_seconds(n),
                          windows.Windows(WINDOW_TRACERS[level](), n))
            speeds = (before, machine_speed())
            SPEEDS.append(speeds)
            found[level].runs.append(run["windows"])
            found[level].speeds.append(speeds)
            # the run's one tracer's statistics (Windows.stop keys them by tracer name)
            found[level].programs.append(next(iter(run.get("window_programs", {}).values()),
                                              {}))
            log(f"[windows {tag} {level} run {r + 1}/{b.args.window_runs}] "
                f"{pairs.fmt(windows.summary(run['windows']), 3)}")
    return found


# ---- section 8: unrelated syscalls, in the guest -------------------------------------------
def section_unrelated(b):
    """A process making only syscalls the tracer does not hook keeps its rate where
    the latency hooks sit on the send and receive syscall functions (fentry), in the 6.1 guest;
    the sys_enter rung measured beside it (bench/unrelated.py)."""
    title = "## 8. Unrelated syscalls, in the 6.1 guest"
    try:
        res = unrelated.measure(BUILD, b.args.guest_rounds, b.args.guest_seconds, log=log)
    except unrelated.GuestError as e:
        log(f"unrelated: {e}")
        b.record(UNRELATED_TARGET_NAME, "not measured", {}, unrelated.TARGET)
        return f"{title}\n\nNot measured: {e}\n"
    rungs = {}
    for state in ("fentry", "sys_enter"):
        kept, left_out = unrelated.ratios(res, state)
        rungs[state] = (pairs.summary(kept), left_out,
                        pairs.summary(unrelated.normalized_ratios(res, state)))
    b.record(UNRELATED_TARGET_NAME, "6.1 guest", rungs["fentry"][0], unrelated.TARGET)
    return title + "\n\n" + markdown_overhead.unrelated_md(res, rungs)
