"""The bench's Markdown: results.md's header and summary, verdicts, profiles, and sections 3
to 7, each written from what its measuring (bench/measure_*.py) handed over. Nothing here
runs anything; sections 1, 2, 1w and 8 are in markdown_overhead.py."""
import time

from bench import pairs
from bench.config import (DETACHED_BAND, PASSES_CFG, PROBE_S, SCALE_SIZE, SWEEP_LIMIT_S,
                          TARGET_IPERF3, TARGET_OVERHEAD, TARGET_SENDFILE, ZC_PAIRS, size_name)


def verdict(s, target):
    """A summary of paired ratios (pairs.summary) against a lower bound: 'met', 'missed by X'
    (the median's distance) or 'undecided' when the median's interval straddles the target."""
    if s is None or s.get("median") is None:
        return "n/a"
    c = pairs.classify(s, target)
    if c == "met":
        return "met"
    if c == "missed":
        return f"**missed by {target - s['median']:.3f}**"
    if s["n"] < pairs.MIN_VERDICT_VALUES:
        return f"undecided (n={s['n']}: a verdict needs {pairs.MIN_VERDICT_VALUES})"
    return f"undecided ({s['lo']:.3f}–{s['hi']:.3f} spans {target:g})"


def judged(s, target, digits=2):
    """A ratio's two cells: its summary in bold, and its verdict against target."""
    return f"**{pairs.fmt(s, digits)}** | {verdict(s, target)}"


def fmt_run(r):
    cpu = r.get("cpu_s_per_gb")
    cpu = f", {cpu:.3f} CPU s/GB" if cpu is not None else ""
    return f"{r['recv_gbps']:.2f} Gbit/s (retrans {r['retrans']}, {r['cc']}{cpu})"


def median_of(runs, key, digits=2):
    """'median (min, max, n)' of one field over runs."""
    return pairs.fmt(pairs.summary(pairs.column(runs, key)), digits)


# ---- results.md around the sections ----------------------------------------------------------
def header(facts):
    """results.md's opening lines: the machine, the binaries and the command. facts: machine
    (harness.machine()), start_load, bpf_programs, build, built (a struct_time), commit,
    command, full."""
    m = facts["machine"]
    return ["# netio-trace bench results", "",
            f"- machine: {m['nproc']} CPUs, {m['model']}",
            f"- kernel: {m['kernel']} (system default congestion control: {m['default_cc']})",
            f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average at start: "
            f"{facts['start_load']} (other work on the machine skews every number)",
            f"- BPF programs loaded at start: {facts['bpf_programs']} (anyone's; a tracer "
            "attached elsewhere slows every run alike)",
            f"- binaries: {facts['build']} (netio-tracer built "
            f"{time.strftime('%Y-%m-%d %H:%M', facts['built'])}"
            f" UTC), source commit {facts['commit']}",
            f"- command: `python -m bench.run {facts['command']}`"
            f"{'' if facts['full'] else ' (FULL=0: default sweep not timed)'}",
            ""]


def summary_md(verdicts, speeds):
    """Targets at a glance: each group of verdicts ((group, item, summary, target), as
    Bench.record keeps them) counted met, undecided and missed, with its worst median."""
    groups = {}
    for g, item, sm, target in verdicts:
        groups.setdefault(g, []).append((item, sm, target))
    lines = ["## Targets at a glance", "",
             f"A target is **met** when the whole interval of the median of the paired "
             f"ratios is at or above it, **missed** when the interval is below it, and "
             f"**undecided** when the interval spans it: the interval holds the median with "
             f"≥ {pairs.INTERVAL_LEVEL:.0%} probability whatever the distribution (with fewer "
             f"than 9 rounds it is min to max; details in the sections below).", "",
             speed_md(speeds), "",
             "| target | met | undecided | missed | worst median (where) |",
             "|---|---|---|---|---|"]
    for g, items in groups.items():
        verdicts = [pairs.classify(sm, t) for _, sm, t in items]
        known = [(it, sm["median"], t) for it, sm, t in items if sm.get("median") is not None]
        worst = min(known, key=lambda x: x[1] - x[2]) if known else None
        w = (f"{worst[1]:.3f} vs {worst[2]:g} ({worst[0]})" if worst else "n/a")
        n = len(items)
        lines.append(f"| {g} (≥ {items[0][2]:g}) | {verdicts.count('met')}/{n} | "
                     f"{verdicts.count('undecided')}/{n} | {verdicts.count('missed')}/{n} | "
                     f"{w} |")
    return "\n".join(lines) + "\n"


def speed_md(speeds):
    """How the ratios leave out what an unsteady machine measured, and how steady it was;
    speeds: every run's (before, after) probes (harness.SPEEDS)."""
    probes = [p for run in speeds for p in run if p is not None]
    if not probes:
        return "No machine speed probe ran."
    per_cpu = ", ".join(f"CPU {i} {pairs.fmt(pairs.summary(list(r)), 0)}"
                        for i, r in enumerate(zip(*probes)))
    unsteady = sum(1 for run in speeds if not pairs.steady_speeds(run))
    return (f"Ratios of whole runs come only from pairs whose runs saw one machine speed: "
            f"`netio-busy-loop` runs {PROBE_S * 1000:.0f} ms on each CPU at once before and "
            f"after every run (no tracer loaded), and a pair is left out (counted in its cell "
            f"as \"unsteady left out\") when any of those rates on a CPU is below "
            f"{1 - pairs.STEADY_TOLERANCE:.0%} of that CPU's fastest (section 1w pairs "
            f"adjacent windows of one run instead, and leaves none out). Busy loop blocks/s in "
            f"this bench: {per_cpu}; {unsteady} of {len(speeds)} runs saw the speed change "
            f"between their start and end.")


def footer(retries, total_s, start_load, end_load, bpf_programs):
    """The runs retried, and the bench's time and load."""
    text = ""
    if retries:
        text += "\nRuns that failed once and were retried:\n\n" + "\n".join(
            f"- {r}" for r in retries) + "\n"
    return text + (f"\n_total bench time: {total_s:.0f} s; load average at start: "
                   f"{start_load}, at the end: {end_load}; BPF programs loaded at the end: "
                   f"{bpf_programs}_\n")


def profile_lines(p):
    """A missed target's profile (profiles.Profile): one Markdown list item."""
    if p.folded is None:
        return [f"- {p.what}: no profile (the traced run kept no stacks)"]
    svg_note = (f"[{p.svg}](profiles/{p.svg})" if p.svg
                else f"(flame graph not rendered: {p.svg_error})")
    progs = p.run.get("bpf_programs") or {}
    top_progs = sorted(progs.items(), key=lambda kv: -kv[1])[:4]
    msgs = p.run.get("messages") or 1
    top_leaf = sorted(p.leaves.items(), key=lambda kv: -kv[1])[:5]
    total = p.total
    return [f"- {p.what}: profile of the traced run with the median ratio "
            f"({p.ratio:.3f}): [{p.folded}](profiles/{p.folded}),"
            f" {svg_note}. Of its {total} samples: "
            + "; ".join(f"{v / max(total, 1) * 100:.1f}% {k}" for k, v in p.classes.items())
            + ". Our BPF programs took "
            f"{p.run.get('bpf_ns_per_msg') or 0:.0f} ns per message, "
            f"{(p.run.get('bpf_cpu_share') or 0) * 100:.1f}% of the workloads' CPU; the "
            "costliest: " + ", ".join(f"{k} {v / msgs:.0f} ns/msg" for k, v in top_progs)
            + ". Hottest leaf frames: "
            + ", ".join(f"`{k}` {v / max(total, 1) * 100:.1f}%" for k, v in top_leaf) + "."]


def misses_md(profiles):
    """The "Missed targets: profiles" block of a section ([] when nothing was missed)."""
    if not profiles:
        return []
    return ["### Missed targets: profiles", "",
            "_The folded stacks and flame graphs linked below are not committed: `make bench` "
            "writes them to `bench/profiles/`._", "",
            *[line for p in profiles for line in profile_lines(p)], ""]


# ---- section 3: our workloads beside iperf3 ------------------------------------------------
def section_iperf3(args, data):
    """data: [(transport, size, Rounds of one-copy, iperf3, two-copy)] in run order."""
    dur, rounds = args.iperf3_duration, args.rounds
    lines = [
        "## 3. Workloads beside iperf3",
        "",
        f"4, 16 and 64 KiB messages (iperf3 `-l`), 1 thread/stream (`-P 1`), cubic on both "
        f"(`-C cubic`), {dur:g} s per run, {rounds} rounds per size. Each round runs one-copy, "
        "iperf3, two-copy (reversed every other round), so iperf3 is always next to both. "
        "Throughput is the receiver's (netio-client: first byte to EOF; iperf3: "
        "`sum_received`); the ratio is ours / iperf3 within a round: median (min, max). "
        "CPU s/GB: user + system time of sender and receiver per GB received (lower is better). "
        "Both senders write one message per call and both receivers read up to 64 KiB per "
        "call (iperf3 reads `-l` bytes per call: smaller reads at 4 and 16 KiB). two-copy "
        "makes one more user-space copy per message by design (its serialization memcpy), so it "
        f"should sit a little below one-copy. Target ≥ {TARGET_IPERF3}.",
        "",
        "| transport | size | strategy | ours Gbit/s | iperf3 Gbit/s | **ours / iperf3** | "
        f"≥ {TARGET_IPERF3} | CPU s/GB ours | CPU s/GB iperf3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    misses = []
    for transport, size, res in data:
        tag = f"{transport} {size_name(size)}"
        for st in ("one-copy", "two-copy"):
            ratio = pairs.ratio(res, st, "iperf3")
            if ratio["median"] is not None and ratio["median"] < TARGET_IPERF3:
                misses.append(f"- {tag} {st}: {pairs.fmt(ratio)} (the untraced "
                              "workload has no profile of its own here; see the note "
                              "below)")
            lines.append(
                f"| {transport} | {size_name(size)} | {st} | "
                f"{median_of(res[st], 'recv_gbps')} | {median_of(res['iperf3'], 'recv_gbps')} | "
                f"{judged(ratio, TARGET_IPERF3)} | "
                f"{median_of(res[st], 'cpu_s_per_gb', 3)} | "
                f"{median_of(res['iperf3'], 'cpu_s_per_gb', 3)} |")
    if misses:
        lines += ["", "Below target (median):", "", *misses]
    lines += ["", "Every run, in round order (receiver Gbit/s, sender retransmits, congestion "
              "control, CPU s/GB):", ""]
    for transport, size, res in data:
        for name, runs in res.items():
            lines.append(f"- {transport} {size_name(size)} {name}: "
                         + "; ".join(fmt_run(r) for r in runs))
    return "\n".join(lines) + "\n"


# ---- section 4: scale ----------------------------------------------------------------------
def section_scale(args, transport, by_threads, res8, profiles):
    """by_threads: [(threads, Rounds of untraced, full, tick)]; res8: untraced and full at
    the smallest size; profiles: the misses' (profiles.Profile)."""
    lines = [*_scale_table(args, transport, by_threads), ""]
    mem = next((res["full"] for n, res in by_threads if n == 128), None)
    if mem:
        lines += [_scale_memory(mem), ""]
    lines += [_scale_events(args, transport, res8), ""]
    lines += misses_md(profiles)
    return "\n".join(lines) + "\n"


def _scale_row(n, res):
    full = res["full"]
    return (f"| {n} | {median_of(res['untraced'], 'recv_gbps')} | "
            f"{median_of(full, 'recv_gbps')} | "
            f"{judged(pairs.ratio(res, 'full', 'untraced'), TARGET_OVERHEAD, 3)} | "
            f"{pairs.fmt(pairs.ratio(res, 'tick', 'untraced'), 3)} | "
            f"{median_of(full, 'bpf_ns_per_msg', 0)} | "
            f"{sum(x or 0 for x in pairs.column(full, 'drops'))} |")


def _scale_table(args, transport, by_threads):
    return [
        "## 4. Scale",
        "",
        f"one-copy {size_name(SCALE_SIZE)} over {transport}, N threads = N connections, "
        f"{args.scale_duration:g} s per "
        f"run, {args.rounds} interleaved rounds of untraced / full tracer / full tracer with "
        "`--sample-source tick` (loaded per traced run, as in section 1). Throughput is the "
        "receiver's total.",
        "",
        "| threads | untraced Gbit/s | full Gbit/s | **full / untraced** | "
        f"≥ {TARGET_OVERHEAD} | tick / untraced | BPF ns / message | drops |",
        "|---|---|---|---|---|---|---|---|",
        *[_scale_row(n, res) for n, res in by_threads],
    ]


def _mib(mem, key):
    return pairs.fmt(pairs.summary([x / 1024 if x else None for x in pairs.column(mem, key)]), 1)


def _scale_memory(mem):
    m0 = mem[pairs.median_index(pairs.column(mem, "rss_kib")) or 0]
    return (
        "**Tracer memory at 128 threads** (each traced 128-thread run, read after the run "
        "and before the snapshot; peak = VmHWM after the snapshot, which symbolizes stacks): "
        f"RSS {_mib(mem, 'rss_kib')} MiB, "
        f"peak {_mib(mem, 'hwm_kib')} MiB; "
        f"BPF maps: {m0.get('maps')} maps held by the tracer, "
        f"{m0.get('map_bytes', 0) / 2**20:.1f} MiB (`bytes_memlock` of `bpftool map show "
        "--json` for the map ids in the tracer's fdinfo); biggest: "
        + ", ".join(f"{n} {v / 2**20:.2f} MiB" for n, v in m0.get("biggest_maps", [])) + ".")


def _scale_events(args, transport, res8):
    ev = res8["full"]
    ratio8 = pairs.ratio(res8, "full", "untraced")
    exact = all(r["sc_send_calls"] == r["expected_sends"] for r in ev)
    evs = [r["sc_calls"] / r["seconds"] for r in ev]
    return (
        f"**Events per second at the smallest message size** (one-copy 8 B, 1 thread, "
        f"{transport}, {args.duration:g} s runs, {args.rounds} traced runs in pairs with "
        "untraced ones): the tracer counted "
        f"{pairs.fmt(pairs.summary([x / 1e6 for x in evs]), 2)} M syscalls/s of the workloads "
        f"(every one into its histograms; the packets' xmit/receive events come on top), with "
        f"{sum(r.get('drops') or 0 for r in ev)} ring-buffer drops and "
        f"{sum(r.get('samples_lost') or 0 for r in ev)} lost samples in all; its send count "
        f"{'equals' if exact else 'does NOT equal'} the workloads' own count in every run "
        "(server `send_calls` + one index `send` per client connection). "
        f"Overhead at 8 B: full / untraced {pairs.fmt(ratio8, 3)} "
        f"(untraced {median_of(res8['untraced'], 'recv_gbps', 3)} Gbit/s), "
        f"BPF {median_of(ev, 'bpf_ns_per_msg', 0)} ns per message.")


# ---- sections 5 and 6: the driver's sweeps ---------------------------------------------------
def section_sweep(cfg, one, default):
    """one: (wall s, runs) of the sweep of cfg; default: the same of the default sweep, or
    None when it was not timed."""
    wall, runs = one
    ok = [r for r in runs if r.get("status") == "ok"]
    g = [r["throughput_gbps"] for r in ok]
    s = pairs.summary(g)
    lines = ["## 5. The sweep", "",
             f"**Spread over 3 repeats of one config** (`netio-trace run {' '.join(cfg)}`: "
             f"one-copy 64 KiB, 1 thread, veth, 0.5 s per run, traced): "
             + ", ".join(f"{x:.2f}" for x in g) + f" Gbit/s; median {s['median']:.2f}, "
             f"max / min = {s['max'] / s['min']:.3f} ({len(ok)}/{len(runs)} runs ok); that "
             f"sweep took {wall:.1f} s end to end (report included).",
             ""]
    lines += _default_sweep(default) if default else [
        "The default sweep (`./netio-trace run`, 360 runs, ~4 min) was not timed in this "
        "bench run: it was switched off (`make bench FULL=0`, `NETIO_BENCH_FULL=0` or "
        "`--no-full`). It is on by default: the whole bench stays within ~15 minutes "
        "with it.",
        "",
    ]
    return "\n".join(lines) + "\n"


def _default_sweep(default):
    wall, runs = default
    ok = [r for r in runs if r.get("status") == "ok"]
    groups = {}
    for r in ok:
        groups.setdefault((r["strategy"], r["msg_size"], r["threads"], r["transport"]),
                          []).append(r["throughput_gbps"])
    spreads = [max(v) / min(v) for v in groups.values() if len(v) > 1 and min(v) > 0]
    one = groups.get(("one-copy", 65536, 1, "veth"), [])
    ss = pairs.summary(spreads)
    return [
        f"**Default sweep** (`./netio-trace run`, 3 strategies × 256 B–64 KiB × 1, 2, 4, 8 "
        f"threads × veth × 3 rounds × untraced and traced, 0.5 s per run, plus the extra "
        f"rounds of undecided comparisons): **{wall:.0f} s** wall time "
        f"({wall / 60:.1f} min) for {len(runs)} runs ({len(ok)} ok), report included; "
        f"target ≤ {SWEEP_LIMIT_S} s: **{'met' if wall <= SWEEP_LIMIT_S else 'missed'}**. "
        f"Spread of throughput (max / min over the 3 repeats) across its "
        f"{len(groups)} configs: {pairs.fmt(ss, 3)}; one-copy 64 KiB 1 thread veth: "
        + ", ".join(f"{x:.2f}" for x in one) + " Gbit/s.",
        "",
    ]


def _spread(values):
    vals = [v for v in values if v]
    return max(vals) / min(vals) if vals else None


def section_passes(args, detached, band_verdict, whole, steady):
    """detached: pairs.summary of the two-pass / no-trace ratios, judged band_verdict; whole
    and steady: 5 sweeps' medians over whole runs and over the steady window."""
    lo, hi = DETACHED_BAND
    lines = ["## 6. The two passes", "",
             f"**Untraced runs inside a two-pass sweep against a `--no-trace` sweep** "
             f"(`netio-trace run {' '.join(PASSES_CFG)} --repeat 3`, the two sweeps alternating "
             f"over {args.rounds} rounds; per round the ratio of their untraced medians): "
             f"{pairs.fmt(detached, 3)}. Target: median within {lo:.2f}–{hi:.2f} (the loaded "
             f"but detached tracer disturbs nothing): **{band_verdict}**.", "",
             f"**Spread of one configuration's median over 5 sweeps** (one-copy 16 KiB, "
             f"loopback, untraced, 3 rounds of 0.5 s each): over whole runs "
             + ", ".join(f"{x:.2f}" for x in whole if x)
             + f" Gbit/s, max / min {_spread(whole):.3f}; over the steady-state window (the "
             f"first 20% left out) " + ", ".join(f"{x:.2f}" for x in steady if x)
             + f" Gbit/s, max / min {_spread(steady):.3f}.", ""]
    return "\n".join(lines) + "\n"


# ---- section 7: where zero-copy wins ---------------------------------------------------
def first_win(sizes, ratios):
    """The smallest size from which every larger size's median ratio is >= 1, or None."""
    win = None
    for size, r in zip(sizes, ratios):
        if r["median"] is not None and r["median"] >= 1.0:
            win = size if win is None else win
        else:
            win = None
    return win


def section_zerocopy(args, forward, sendfile):
    """forward: [(size, Rounds of the ZC_PAIRS' strategies)] on the forward path; sendfile:
    [(transport, size, Rounds of sendfile and iperf3 -Z)]."""
    lines = ["## 7. Where zero-copy wins (forward path) and sendfile", "",
             "On forward nothing receives the datagrams (the second namespace forwards them to a "
             "blackhole route), so no local delivery copies a zero-copy skb back: the one place "
             "on a single host where zero-copy can be seen to win.", ""]
    lines += _forward_md(args.duration, args.rounds, forward)
    lines += _sendfile_md(max(1, int(round(args.duration))), args.rounds, sendfile)
    return "\n".join(lines) + "\n"


def _forward_row(size, res, copy, zc):
    r = pairs.ratio(res, zc, copy, key="send_gbps")
    comp = sum(x["completions"] for x in res[zc])
    copied = sum(x["copied"] for x in res[zc])
    lost = sum(x["messages"] - x["seen"] for st in (copy, zc) for x in res[st])
    return (f"| {size_name(size)} | {zc} / {copy} | {median_of(res[copy], 'send_gbps')} | "
            f"{median_of(res[zc], 'send_gbps')} | **{pairs.fmt(r)}** | {copied} of {comp} | "
            f"{lost} |")


def _forward_md(dur, rounds, forward):
    lines = [
        "### Zero-copy against copy on forward, by size",
        "",
        f"UDP, one datagram per message, 1 thread, {dur:g} s per run, {rounds} rounds per size, "
        "untraced; each round runs one-copy, zero-copy, io-uring, io-uring-zc (reversed every "
        "other round). Throughput is the sender's over its steady-state window; datagrams that "
        "did not reach the forwarding namespace's interface are counted as lost. The ratio is "
        "zero-copy / copy within a round: median (min, max).",
        "",
        "| size | pair | copy Gbit/s | zero-copy Gbit/s | **zero-copy / copy** | COPIED | "
        "datagrams lost |",
        "|---|---|---|---|---|---|---|",
        *[_forward_row(size, res, copy, zc) for size, res in forward for copy, zc in ZC_PAIRS],
        "",
    ]
    sizes = [size for size, _ in forward]
    for copy, zc in ZC_PAIRS:
        win = first_win(sizes, [pairs.ratio(res, zc, copy, key="send_gbps")
                                for _, res in forward])
        lines.append(f"- {zc} overtakes {copy} on forward "
                     + (f"from {size_name(win)} up (every larger size's median ratio ≥ 1)."
                        if win is not None else "at no size from this range."))
    return lines


def _sendfile_md(dur, rounds, sendfile):
    return [
        "",
        "### sendfile against iperf3 -Z",
        "",
        f"Our sendfile strategy beside iperf3 `-Z` (which sends with sendfile(2) too) at the "
        f"same size, 1 stream, cubic, {dur:g} s per run, {rounds} rounds, untraced; the ratio "
        f"is ours / iperf3 within a round (receiver's throughput). Target ≥ {TARGET_SENDFILE}.",
        "",
        "| transport | size | ours Gbit/s | iperf3 -Z Gbit/s | **ours / iperf3 -Z** | "
        f"≥ {TARGET_SENDFILE} |",
        "|---|---|---|---|---|---|",
        *[f"| {transport} | {size_name(size)} | {median_of(res['sendfile'], 'recv_gbps')} | "
          f"{median_of(res['iperf3 -Z'], 'recv_gbps')} | "
          f"{judged(pairs.ratio(res, 'sendfile', 'iperf3 -Z'), TARGET_SENDFILE)} |"
          for transport, size, res in sendfile],
    ]
