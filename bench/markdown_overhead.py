"""The Markdown of sections 1 and 2 (the tracer's overhead, its parts, its own cost and
bpftrace beside it), the timer floor, 1w (the levels in windows of one run) and 8 (unrelated
syscalls in the guest), each written from what bench/measure_overhead.py handed over."""
from bench import pairs, windows
from bench.config import (AIM_OVERHEAD, COUNTING_ARGS, DECOMPOSED, DECOMPOSITION,
                          HEADLINE_CASE, TARGET_HEADLINE, TARGET_OVERHEAD, TARGET_PEER,
                          TARGET_SAMPLING, WINDOW_TARGETS, config_tag, size_name)
from bench.markdown import judged, median_of, misses_md, verdict
from bench.observers import SYSCALLS
from bench import unrelated


def _sources(every, variant):
    """'tick at 250 Hz' etc.: the sampling source and rate the tracer reported in the runs of
    one variant."""
    seen = sorted({f"{r.get('sample_source')} at {r.get('sample_freq'):g} Hz"
                   if r.get("sample_freq") else str(r.get("sample_source"))
                   for _, res in every for r in res.get(variant, [])})
    return ", ".join(seen) or "n/a"


def section_overhead(args, cases, profiles, floor):
    """Sections 1 and 2. cases: [config.OverheadCase] in run order; profiles: the misses'
    (profiles.Profile); floor: the timer floor's Markdown lines."""
    every = [(c.tag, c.res) for c in cases]
    parts = [c for c in cases if c.strategy in DECOMPOSED]
    lines = [*_md_overhead_table(args, cases, every), "",
             *_md_headline(cases), "",
             *_md_sampling(every, parts), "",
             *floor, "",
             *_md_decomposition(parts), "",
             *_md_self_cost(cases, every), "",
             *_md_peer(cases), ""]
    lines += misses_md(profiles)
    lines += ["Every run, in round order (receiver Gbit/s):", ""]
    for tag, res in every:
        lines.append(f"- {tag}: " + "; ".join(
            f"{name} [" + ", ".join(f"{r['recv_gbps']:.2f}" for r in runs) + "]"
            for name, runs in res.items()))
    return "\n".join(lines) + "\n"


def _md_overhead_table(args, cases, every):
    dur, rounds = args.duration, args.rounds
    return [
        "## 1. Tracer overhead",
        "",
        f"Receiver throughput (netio-client, first byte to EOF), 1 thread, cubic, {dur:g} s per "
        f"run, {rounds} interleaved rounds per configuration ({max(rounds, args.one_copy_rounds)} "
        "for one-copy, whose comparisons below measure effects of a few percent). Each round "
        "runs every variant "
        "once, the order reversed every other round; ratios are taken within a round, from "
        "the rounds where the machine kept its speed (Targets at a glance), and summarized "
        "as median (min, max).",
        "",
        "- **untraced**: no BPF program of ours is loaded.",
        "- **full**: `netio-tracer --control --freq 999` (copy accounting, syscall histograms, "
        f"stack sampling on its default source ({_sources(every, 'full')} in these runs), "
        "perf counters, BPF run-time stats sampled 10% of the time, "
        "its default), **loaded and attached for each traced run and unloaded after it**: loading "
        "happens before the workloads are released from their launch gate, so its cost is not "
        "inside their measured time, while the untraced baseline really has none of our programs "
        "attached. (Keeping one tracer loaded and toggling `pid add` would leave its "
        "`sys_enter`/`sys_exit`, xmit and receive programs running, filtered out, in the "
        "baseline too, and so hide part of the cost.)",
        "- **programs** (every configuration): `--no-sample --no-counters`, the BPF programs "
        "alone (copy accounting and syscall histograms): section 2 compares it with bpftrace.",
        "- **no-sample** (one-copy and zero-copy): the same with `--no-sample`; full / "
        "no-sample is what sampling at 999 Hz costs on top of everything else.",
        "- **sampling** (one-copy and zero-copy): stack sampling alone, at 999 Hz on the "
        "default source, no counters, and of the probe points only rx_copy (the tracer needs "
        "one; a count per "
        "skb on the receiver): every other program left out with `NETIO_TRACER_SKIP`, checked "
        "in every run. sampling / untraced is issue 4's target as worded.",
        "- **bpftrace-timer** (one-copy and zero-copy): a peer's sampler doing nothing, bpftrace "
        "`profile:hz:999 { @n = count(); }`: a cpu-clock event at 999 Hz on every CPU; what "
        "any 999 Hz sampler pays here before it records a stack.",
        "",
        f"Target: full / untraced ≥ {TARGET_OVERHEAD} (aim {AIM_OVERHEAD}); verdicts are on the "
        "median's interval (see Targets at a glance); the aim on the median.",
        "",
        "| transport | strategy | size | untraced Gbit/s | full Gbit/s | **full / untraced** | "
        f"≥ {TARGET_OVERHEAD} |",
        "|---|---|---|---|---|---|---|",
        *[_overhead_row(c) for c in cases],
    ]


# the samplers of the timer floor, and what the table calls them
TIMER_FLOOR = (("bpftrace-timer", "bpftrace `profile:hz:999` counting only (a cpu-clock event "
                "per CPU, for every task)"),
               ("sampling", "ours, sampling alone at 999 Hz on a timer of its own (cycles where "
                "a PMU exists, else cpu-clock)"),
               ("tick", "ours, sampling alone on the tick (`--sample-source tick`)"))


def _timer_floor_row(args, res, v, what):
    ratio = pairs.ratio(res, v, "untraced", "blocks_per_s")
    rates, costs = [], []
    for run, base in zip(res[v], res["untraced"]):
        # samples per second on the loop's CPU: ours counted them; bpftrace's count
        # covers every CPU, so its nominal rate stands in
        rate = 999.0 if v == "bpftrace-timer" else (run.get("samples") or 0) / args.duration
        rates.append(rate)
        if rate and v != "tick":    # the untraced loop takes the tick too: nothing to split
            costs.append((1 - run["blocks_per_s"] / base["blocks_per_s"]) * 1e6 / rate)
    return (f"| {what} | {median_of(res[v], 'blocks_per_s', 0)} | "
            f"{judged(ratio, TARGET_SAMPLING, 3)} | "
            f"{pairs.fmt(pairs.summary(rates), 0)} | "
            f"{pairs.fmt(pairs.summary(costs), 1)} |")


def timer_floor_md(args, res):
    """The timer floor's paragraph and table (Markdown lines); res: the busy loop's Rounds
    of untraced and the TIMER_FLOOR samplers."""
    dur, rounds = args.duration, args.rounds
    return [
        f"**Timer floor** (issue 4): what a sampling interrupt costs here with no network work "
        f"around it. `netio-busy-loop` (bench/busy_loop.c: computation only, no syscalls, in "
        f"the workloads' cgroup) runs {dur:g} s under each sampler, {rounds} interleaved "
        "rounds; ratio = the loop's blocks per second / untraced. Cost per sample = the "
        "loop's lost share ÷ samples per second on its CPU (ours: the samples it took; "
        "bpftrace: 999, nominal), an estimate; not given for the tick, which interrupts the "
        "untraced loop too (its program's own cost is below the noise). Untraced: "
        f"{median_of(res['untraced'], 'blocks_per_s', 0)} blocks/s.",
        "",
        f"| sampler | busy loop blocks/s | **/ untraced** | ≥ {TARGET_SAMPLING} | "
        "samples/s on the loop | µs per sample (est.) |",
        "|---|---|---|---|---|---|",
        *[_timer_floor_row(args, res, v, what) for v, what in TIMER_FLOOR],
    ]


def _exact(runs, key):
    """How many runs counted exactly the workloads' send calls (server `send_calls` plus one
    index send per client connection): the observer really did the counting."""
    ok = sum(1 for r in runs if r.get(key) == r.get("expected_sends"))
    return f"{ok}/{len(runs)}"


def _overhead_row(c):
    res, full = c.res, pairs.ratio(c.res, "full", "untraced")
    aim = 'aim 0.99 met' if (full['median'] or 0) >= AIM_OVERHEAD else 'aim 0.99 not met'
    return (f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
            f"{median_of(res['untraced'], 'recv_gbps')} | "
            f"{median_of(res['full'], 'recv_gbps')} | "
            f"{judged(full, TARGET_OVERHEAD, 3)}"
            f" ({aim}) |")


def _md_headline(cases):
    headline = next((pairs.ratio(c.res, "full", "untraced") for c in cases
                     if (c.transport, c.strategy, c.size) == HEADLINE_CASE), None)
    return [f"**Issue 3 headline** (one-copy 16 KiB loopback, 1 thread, ≥ {TARGET_HEADLINE}): "
            + (f"{pairs.fmt(headline, 3)}: {verdict(headline, TARGET_HEADLINE)}."
               if headline else "not run (loopback not selected).")]


def _md_sampling(every, parts):
    return [
        f"**Issue 4, sampling** (one-copy, ≥ {TARGET_SAMPLING}): what stack sampling keeps, "
        "alone against untraced and on top of the rest of the tracer, on the default source "
        f"({_sources(every, 'full')}), and with `--sample-source tick` "
        f"({_sources(every, 'tick')}: no timer of its own):",
        "",
        "| transport | size | sampling alone / untraced | verdict | "
        "full / no-sample (default source) | verdict | tick / no-sample | verdict | "
        "peer: bpftrace `profile:hz:999` counting only / untraced | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[f"| {c.transport} | {size_name(c.size)} | " + " | ".join(
            f"{pairs.fmt(r, 3)} | {verdict(r, TARGET_SAMPLING)}"
            for r in (pairs.ratio(c.res, "sampling", "untraced"),
                      pairs.ratio(c.res, "full", "no-sample"),
                      pairs.ratio(c.res, "tick", "no-sample"),
                      pairs.ratio(c.res, "bpftrace-timer", "untraced"))) + " |"
          for c in parts if c.strategy == "one-copy"],
    ]


def _md_decomposition(parts):
    return [
        f"### Where the cost goes ({' and '.join(DECOMPOSED)})",
        "",
        "The same rounds with parts of the tracer: **sampling** = stack sampling alone (above); "
        "**xmit-receive** = the per-skb programs only (xmit, receive, and the receiver's copies "
        "counted per skb on `skb_copy_datagram_iovec`); **counting** (`--no-latency`) adds the "
        "socket-layer events (`sock_send_length`, `sock_recv_length`: bytes and calls per "
        "process), so it is the copy accounting without per-call latency; "
        "**programs** = `--no-sample --no-counters` "
        "(the BPF programs alone: copy accounting and syscall histograms, so programs / "
        "counting is what exact per-call latency costs); **no-sample** adds "
        "the perf counters; **full** adds stack sampling on the default source (one event per "
        "CPU on the workloads' cgroup, as `netio-trace run` samples: it runs only while a "
        "workload is on that CPU, so a switch between two workload threads re-arms no timer); "
        "**exact-latency** is full with `--latency-sample 1` (every call timed; full times "
        "the first of every 16 calls of each class and counts every call: exact-latency / full "
        "is what the clock reads of exact latency cost); "
        "**tick** is full with `--sample-source tick` (samples on the scheduler tick); "
        "**bpftrace-timer** is the peer's 999 Hz sampler doing nothing. Each "
        "cell: throughput / untraced, then the workloads' CPU s/GB / untraced.",
        "",
        "| transport | strategy | size | " + " | ".join(DECOMPOSITION) + " |",
        "|---|---|---|" + "---|" * len(DECOMPOSITION),
        *[f"| {c.transport} | {c.strategy} | {size_name(c.size)} | " + " | ".join(
            _decomposition_cell(c.res, v) for v in DECOMPOSITION) + " |"
          for c in parts],
    ]


def _decomposition_cell(res, variant):
    """One variant's throughput and CPU per GB against untraced; "–" for a variant the runs
    lack (a bench recorded before the variant was added)."""
    if variant not in res:
        return "–"
    return (f"{pairs.fmt(pairs.ratio(res, variant, 'untraced'), 3)}; CPU/GB "
            f"{pairs.fmt(pairs.ratio(res, variant, 'untraced', 'cpu_s_per_gb'), 2)}")


def _md_self_cost(cases, every):
    return [
        "### The tracer's own cost, from BPF run-time stats",
        "",
        "Stats taken via: " + (", ".join(sorted({str(r.get("bpf_stats_via")) for _, res in every
                                                 for r in res["full"]})) or "n/a")
        + ". `BPF_ENABLE_STATS` is system-wide: while another process (another tracer, "
        "another engineer's test) holds it on, our programs are timed outside our sampling "
        "windows too and the scaled estimate comes out high; 'always' stats are exact but cost "
        "two clock reads per program run.",
        "",
        "Run time of all our BPF programs over the traced run (`self.bpf_ns` of the snapshot: "
        "`BPF_ENABLE_STATS`, on for 100 ms of every second and scaled, so it is an estimate), "
        "per message sent and as a share of the workloads' CPU time (user + system of "
        "netio-server and netio-client, from their rusage). Noise in throughput does not blur "
        "these. CPU s/GB of the workloads with and without the tracer beside them (less noisy "
        "than throughput: the extra CPU per GB is what the tracer costs the workloads, hooks "
        "and sampling interrupts included, which BPF run time alone does not count); tracer "
        "process CPU: user + system time of netio-tracer itself between `pid add` and the "
        "snapshot (its user-space side during the run); drops: ring-buffer drops summed over "
        "the traced runs.",
        "",
        "| transport | strategy | size | BPF ns / message | BPF % of workload CPU | "
        "CPU s/GB traced | CPU s/GB untraced | CPU/GB traced / untraced | "
        "tracer process CPU ms | drops |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[_self_cost_row(c) for c in cases],
    ]


def _scaled(runs, key, factor, digits):
    """'median (min, max, n)' of one field over runs, each value times factor."""
    return pairs.fmt(pairs.summary([x * factor if x is not None else None
                                    for x in pairs.column(runs, key)]), digits)


def _self_cost_row(c):
    res, fr = c.res, c.res["full"]
    return (
        f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
        f"{median_of(fr, 'bpf_ns_per_msg', 0)} | "
        f"{_scaled(fr, 'bpf_cpu_share', 100, 2)} | "
        f"{median_of(fr, 'cpu_s_per_gb', 3)} | "
        f"{median_of(res['untraced'], 'cpu_s_per_gb', 3)} | "
        f"{pairs.fmt(pairs.ratio(res, 'full', 'untraced', 'cpu_s_per_gb'), 2)} | "
        f"{_scaled(fr, 'tracer_cpu_s', 1e3, 0)} | "
        f"{sum(x or 0 for x in pairs.column(fr, 'drops'))} |")


def _md_peer(cases):
    return [
        "## 2. The same counting by a peer: bpftrace",
        "",
        "bpftrace 0.17 in the same rounds as section 1, with `tracepoint:syscalls:sys_enter_*` / "
        f"`sys_exit_*` for {', '.join(SYSCALLS)}, filtered by the same two pids (server, "
        "client): a count per pid and syscall, bytes from return values, and a log2 latency "
        "histogram per syscall (the script is `BPFTRACE_SCRIPT` in bench/observers.py). The last "
        "column checks that both counted every send call of the workloads. bpftrace does less "
        "than our full tracer (no copy accounting, sampling or counters), so ours is shown "
        "twice: **full**, and **counting only** (`--no-sample --no-counters`: the same "
        "syscalls counted and timed into histograms, plus the copy accounting bpftrace does "
        "not do), which is the like-for-like comparison. Target: ours / bpftrace ≥ "
        f"{TARGET_PEER:g}, the two throughputs of each round paired (as every comparison here: "
        "a round's runs share the machine's state), verdict on the median.",
        "",
        "| transport | strategy | size | ours full / untraced | bpftrace / untraced | "
        f"**full / bpftrace** | ≥ {TARGET_PEER:g} | ours counting only / untraced | "
        f"**counting only / bpftrace** | ≥ {TARGET_PEER:g} "
        "| send calls counted exactly: bpftrace / ours |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *[_peer_row(c) for c in cases],
    ]


def _peer_row(c):
    res = c.res
    full, peer = pairs.ratio(res, "full", "untraced"), pairs.ratio(res, "bpftrace", "untraced")
    full_vs_peer = pairs.ratio(res, "full", "bpftrace")
    counting = pairs.ratio(res, "programs", "untraced")
    counting_vs_peer = pairs.ratio(res, "programs", "bpftrace")
    return (f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
            f"{pairs.fmt(full, 3)} | {pairs.fmt(peer, 3)} | "
            f"{judged(full_vs_peer, TARGET_PEER, 3)} | "
            f"{pairs.fmt(counting, 3)} | "
            f"{judged(counting_vs_peer, TARGET_PEER, 3)} | "
            f"{_exact(res['bpftrace'], 'bt_send_calls')} / "
            f"{_exact(res['full'], 'sc_send_calls')} |")


def section_windows(args, cases):
    """Section 1w. cases: [config.WindowCase], each configuration's levels in turn."""
    lines = ["## 1w. The levels' cost in windows of one run", "",
             f"{args.window_runs} workload runs per configuration and level (the levels in "
             f"turn), 1 thread, cubic; in each, the tracer loaded once, then attached and "
             f"detached in turn (its `attach` and `detach` commands: detached, no program of "
             f"ours is attached and no sampling event is open). After each toggle "
             f"{windows.SETTLE_S * 1000:.0f} ms pass, then the receiver's namespace's device "
             f"counters are read over a {windows.WINDOW_S * 1000:.0f} ms window. Two adjacent "
             f"windows, one in each state, form a pair (order flipped every pair); ratio = "
             f"traced / untraced throughput, {args.window_pairs} pairs per run. Section 1 "
             f"pairs whole runs a few seconds apart, which a host changing this VM's speed from "
             f"second to second (bench/NOTES.md) spreads; a window cannot hold what a run pays "
             f"once (loading, a thread's first events), which section 1 keeps. The runs of one "
             f"configuration differ more than their windows do (each run places the sender and "
             f"the receiver on the two vCPUs, which the host slows unequally), so the verdict "
             f"is on the median of the runs' medians (interval as in section 1: min to max "
             f"below 9 runs); the pooled pairs are shown beside it. **full** is the default "
             f"tracer (as section 1), **counting** `{' '.join(COUNTING_ARGS)}`. Machine speed: "
             f"`netio-busy-loop` blocks/s per CPU, lowest and highest probe before and after "
             f"the runs.", "",
             "| configuration | level | untraced Gbit/s | **traced / untraced, median of runs** "
             "| each run's median | verdict | all pairs pooled | machine speed |",
             "|---|---|---|---|---|---|---|---|"]
    targets = {lv: t for lv, t, _ in WINDOW_TARGETS}
    for c in cases:
        s = windows.runs_summary(c.runs)
        pooled = [p for w in c.runs for p in w]
        each = ", ".join(f"{m:.3f}" for m in windows.run_medians(c.runs) if m is not None)
        lines.append(f"| {c.tag} | {c.level} | {pairs.fmt(windows.rates(pooled, False))} | "
                     f"**{pairs.fmt(s, 3)}** | {each} | {verdict(s, targets[c.level])} | "
                     f"{pairs.fmt(windows.summary(pooled), 3)} | {_speed_range(c.speeds)} |")
    missed = [c for c in cases if any(pairs.classify(windows.runs_summary(c.runs), t) == "missed"
                                      for t in window_targets(c))]
    return "\n".join(lines + _md_window_misses(missed)) + "\n"


def window_targets(c):
    """The targets a 1w case is held to: its level's, and the headline's at the headline."""
    headline = config_tag(*HEADLINE_CASE)
    return [t for lv, target, head in WINDOW_TARGETS if lv == c.level
            for t in ((target, head) if c.tag == headline else (target,))]


def _md_window_misses(missed):
    """Where a missed case's traced windows spent BPF time: ns per run of each program (the
    tracer's own sampled statistics, median over the runs), costliest first. The counting
    level takes no stack samples, so this is its profile."""
    if not missed:
        return []
    lines = ["", "Where the BPF time of each missed case went (traced windows, ns per program "
             "run, median over its runs; the tracer's own statistics, sampled):", ""]
    for c in missed:
        top = sorted(windows.median_ns_per_run(c.programs).items(), key=lambda kv: -kv[1])
        lines.append(f"- {c.tag}, {c.level}: "
                     + (", ".join(f"`{k}` {v:.0f}" for k, v in top) or "no statistics"))
    return lines


def _speed_range(speeds):
    """'lo–hi / lo–hi': each CPU's slowest and fastest probe over (before, after) pairs."""
    probes = [p for run in speeds for p in run if p is not None]
    if not probes:
        return "n/a"
    return " / ".join(f"{min(r):.0f}–{max(r):.0f}" for r in zip(*probes))


def unrelated_md(res, rungs):
    """Section 8's text and table; rungs: {state: (steady pairs' summary, pairs left out,
    per-block summary)}."""
    (fentry, f_out, f_block), (sys_enter, s_out, s_block) = rungs["fentry"], rungs["sys_enter"]
    untraced = pairs.summary([r["untraced"]["calls_per_s"] / 1e3 for r in res["rounds"]])
    speed = pairs.summary([r[st]["blocks_per_s"] for r in res["rounds"] for st in r])
    return "\n".join([
        f"Guest kernel {res['kernel']} under QEMU/TCG (absolute rates mean nothing there; "
        f"ratios within one boot do). `netio-getpid-loop` makes only getpid(2) calls, which no "
        f"program of ours hooks; each of {len(res['rounds'])} rounds runs it for "
        f"{res['seconds']:g} s untraced, under the full default tracer with its latency hooks "
        f"on the syscall functions (fentry rung: {res['attach']['fentry']}) and under the "
        f"same tracer on the sys_enter rung ({res['attach']['sys_enter']}: every syscall of the "
        f"machine passes its hook), in turn, the order rotated every round, "
        f"{unrelated.SETTLE_S:g} s after each toggle; both tracers are loaded once and "
        f"attached in turn. Ratio = the round's traced rate / its untraced rate. The loop "
        f"times a block of computation after each batch of calls (`--reference`: the "
        f"machine's speed during the run); a pair whose two speeds differ by more than "
        f"{pairs.STEADY_TOLERANCE:.0%} is left out, as in the sections above. Sampling: "
        f"{res.get('samples') or 'none'}; BPF statistics off (TCG can livelock on their code "
        f"patching).", "",
        "| rung | traced / untraced | pairs left out (unsteady) | target | verdict | per "
        "reference block, every pair (estimate) |",
        "|---|---|---|---|---|---|",
        f"| fentry (the default where allowed) | {pairs.fmt(fentry, 3)} | {f_out} | ≥ "
        f"{unrelated.TARGET} | {verdict(fentry, unrelated.TARGET)} | {pairs.fmt(f_block, 3)} |",
        f"| sys_enter (beside it, to show the difference) | {pairs.fmt(sys_enter, 3)} | "
        f"{s_out} | — | — | {pairs.fmt(s_block, 3)} |",
        "", "The last column divides each run's call rate by its reference rate and keeps "
        "every pair: the host's speed divided out, an estimate (it would also divide out a "
        "cost that slowed computation as much as the calls); the verdict is on the steady "
        "pairs' plain ratios.",
        "", f"Untraced rate: {pairs.fmt(untraced)} thousand calls/s; reference blocks/s in "
        f"every run: {pairs.fmt(speed, 0)}.", ""])
