"""What the per-socket accounting costs: the tracer against itself with
`--no-sockets`, paired, in alternating windows of one run (bench/windows.py: the tracer with
sockets and the one without take turns, never attached together, and each one's BPF time per
program run is read over its own windows). Section 9 of `make bench`; on its own, the short
A/B: `python -m bench.sockets [--runs N] [--pairs N] [--configs loopback-one-copy-16K,...]`
(root), which prints the Markdown.

Why windows and not whole runs: the difference sought is a few ns per event, well under what
the host's changes of speed between two runs move (bench/NOTES.md, "The machine's own
speed"); the host's CPU model and its SRSO mitigation (which makes every helper call and
return dearer here) are written beside the figures.
"""
import argparse
import collections
import sys

from bench import harness, pairs, windows
from analysis.sizes import format_size
from bench.config import COUNTING_ARGS, KiB, size_name
from bench.markdown import verdict
from netio_trace.system.netns import Topology
from bench.observers import OurTracer

# the configurations: the headline, the sends where a per-send cost shows most (small
# messages), and zero-copy over veth (the per-skb paths that find a socket's record)
CONFIGS = (("loopback", "one-copy", 16 * KiB), ("loopback", "two-copy", 256),
           ("veth", "zero-copy", 16 * KiB))
LEVELS = {"counting": list(COUNTING_ARGS), "full": []}
# with sockets / without, throughput: what "not noticeably slower" is held to
TARGET = 0.98
PROGRAMS = ("tp_send_length", "tp_recv_length", "tp_xmit", "tp_netif_receive", "sc_enter")
Case = collections.namedtuple("Case", "tag level runs programs")


def tag_of(transport, strategy, size):
    return f"{transport} {strategy} {size_name(size)}"


def measure(b, configs, nruns, npairs, log=harness.log):
    """[Case] for each configuration and level: nruns runs, in each the tracer with sockets and
    the one without (`--no-sockets`) in alternating windows."""
    cases = []
    for transport, strategy, size in configs:
        tag = tag_of(transport, strategy, size)
        found = {lv: Case(tag, lv, [], []) for lv in LEVELS}
        with Topology(transport) as topo:
            for r in range(nruns):
                for lv, args in LEVELS.items():
                    on = OurTracer(args, label=f"{lv}-sockets")
                    off = OurTracer(args + ["--no-sockets"], label=f"{lv}-no-sockets")
                    run = b.netio(topo, strategy, size, 1, windows.run_seconds(npairs),
                                  windows.Windows(on, npairs, reference=off))
                    found[lv].runs.append(run["windows"])
                    found[lv].programs.append(run.get("window_programs", {}))
                    log(f"[sockets {tag} {lv} run {r + 1}/{nruns}] with / without "
                        f"{pairs.fmt(windows.summary(run['windows']), 3)}")
        cases += list(found.values())
    return cases


def _ns(case, side):
    return windows.median_ns_per_run(p.get(f"{case.level}-{side}", {}) for p in case.programs)


def markdown(cases, nruns, npairs, machine):
    lines = ["## 9. What the per-socket accounting costs", "",
             f"The tracer with its per-socket records (the default) against the same build "
             f"with `--no-sockets`, in alternating windows of one run (as section 1w, the "
             f"tracer without sockets in the other windows instead of none): {nruns} runs per "
             f"configuration and level, {npairs} pairs of windows each; ratio = throughput "
             f"with sockets / without, verdict against {TARGET} on the median of the runs' "
             f"medians. **full** is the default tracer, **counting** "
             f"`{' '.join(COUNTING_ARGS)}`. ns per program run: each tracer's own sampled BPF "
             f"statistics over its windows, median over the runs.", "",
             f"Host CPU: {machine['model']} ({machine['nproc']} vCPUs), kernel "
             f"{machine['kernel']}; SRSO: `{harness.srso_state()}`.", "",
             "| configuration | level | **with / without sockets, median of runs** | each "
             "run's median | verdict | ns per program run, with / without |",
             "|---|---|---|---|---|---|"]
    for c in cases:
        s = windows.runs_summary(c.runs)
        each = ", ".join(f"{m:.3f}" for m in windows.run_medians(c.runs) if m is not None)
        on, off = _ns(c, "sockets"), _ns(c, "no-sockets")
        progs = ", ".join(f"`{p}` {on[p]:.0f} / {off[p]:.0f}" for p in PROGRAMS
                          if p in on and off.get(p))
        lines.append(f"| {c.tag} | {c.level} | **{pairs.fmt(s, 3)}** | {each} | "
                     f"{verdict(s, TARGET)} | {progs} |")
    return "\n".join(lines) + "\n"


def section_sockets(b):
    """`make bench`'s section 9: every configuration, the bench's window runs and pairs."""
    cases = measure(b, CONFIGS, b.args.window_runs, b.args.window_pairs)
    for c in cases:
        b.record("9. per-socket accounting: with / without sockets, in windows", f"{c.tag}, "
                 f"{c.level}", windows.runs_summary(c.runs), TARGET)
    return markdown(cases, b.args.window_runs, b.args.window_pairs, harness.machine())


def _configs(text):
    known = {f"{t}-{s}-{format_size(z)}": (t, s, z) for t, s, z in CONFIGS}
    out = []
    for name in text.split(","):
        if name not in known:
            raise argparse.ArgumentTypeError(f"{name}: one of {', '.join(known)}")
        out.append(known[name])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.sockets", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per configuration and level")
    ap.add_argument("--pairs", type=int, default=20, help="pairs of windows per run")
    ap.add_argument("--configs", type=_configs, default=list(CONFIGS),
                    help="comma separated, of " + ", ".join(
                        f"{t}-{s}-{format_size(z)}" for t, s, z in CONFIGS))
    a = ap.parse_args(argv)
    if a.runs < 1 or a.pairs < 1:
        ap.error("--runs and --pairs must be more than 0")
    b = harness.Bench(argparse.Namespace(duration=1.0, rounds=1))
    try:
        cases = measure(b, a.configs, a.runs, a.pairs)
    finally:
        b.cleanup()
    print(markdown(cases, a.runs, a.pairs, harness.machine()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
