"""Two builds of the tracer side by side: `python -m bench.ab --old DIR --new DIR` (root).
Or one build with and without an option: `--old DIR --new DIR --new-args "--latency-sample 16"`.

For a change to the tracer's cost (measure before choosing, and keep what the bench proves):
one configuration, each level (counting: --no-latency --no-sample --no-counters;
full: the default) with the old build's tracer and the new one's, in the same interleaved
rounds beside an untraced run. Prints each variant / untraced, new / old paired within the
rounds, the workloads' CPU per GB, and the BPF time per message of the costliest programs
(the tracer's own, sampled BPF stats). The workloads are the new build's.

With `--windows RUNS`: instead of whole runs, RUNS runs per level in which the new tracer and
the old one take turns in alternating windows of the same run (bench/windows.py: the host's
changes of speed between runs do not reach the pairs); prints new / old as the median of the
runs' medians, each run's median, and all pairs pooled.
"""
import argparse
import sys

from netio_trace.system.netns import Topology
from bench import harness, pairs, windows
from bench.config import BUILD, COUNTING_ARGS, KiB, size_name
from bench.observers import OurTracer, Untraced

LEVELS = {"counting": list(COUNTING_ARGS), "full": []}


def _args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="build directory of the reference tracer")
    ap.add_argument("--new", default=BUILD, help="build directory of the changed tracer")
    ap.add_argument("--transport", choices=("loopback", "veth"), default="loopback")
    ap.add_argument("--strategy", default="one-copy")
    ap.add_argument("--size", type=int, default=16 * KiB)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--duration", type=float, default=0.5, help="seconds per run")
    ap.add_argument("--new-args", default="", help="extra netio-tracer arguments of the new "
                    "side only, space separated")
    ap.add_argument("--windows", type=int, metavar="RUNS",
                    help="compare in alternating windows of RUNS runs per level")
    ap.add_argument("--window-pairs", type=int, default=20, help="pairs of windows per run")
    ap.add_argument("--levels", default="counting,full", help="comma separated: " +
                    ", ".join(LEVELS))
    a = ap.parse_args(argv)
    a.levels = a.levels.split(",")
    a.new_args = a.new_args.split()
    if any(lv not in LEVELS for lv in a.levels) or a.rounds < 1 or a.window_pairs < 1 \
            or (a.windows is not None and a.windows < 1):
        ap.error(f"--levels: of {', '.join(LEVELS)}; --rounds, --windows, --window-pairs >= 1")
    return a


def _top_programs(runs, n=6):
    """'prog ns/msg, ...': the costliest programs by median BPF time per message."""
    per = {}
    for run in runs:
        for prog, ns in run.get("bpf_programs", {}).items():
            per.setdefault(prog, []).append(ns / run["messages"])
    med = {k: pairs.summary(v)["median"] for k, v in per.items()}
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(med.items(), key=lambda kv: -kv[1])[:n])


def _windows_ab(a):
    """New against old in windows of a.windows runs per level, the levels in turn."""
    b = harness.Bench(argparse.Namespace(duration=a.duration, rounds=a.rounds))
    found = {lv: [] for lv in a.levels}
    try:
        with Topology(a.transport) as topo:
            for r in range(a.windows):
                for lv in a.levels:
                    new = OurTracer(LEVELS[lv] + a.new_args, label=f"{lv}-new", build=a.new)
                    old = OurTracer(LEVELS[lv], label=f"{lv}-old", build=a.old)
                    run = b.netio(topo, a.strategy, a.size, 1,
                                  windows.run_seconds(a.window_pairs),
                                  windows.Windows(new, a.window_pairs, reference=old))
                    found[lv].append(run)
                    print(f"run {r + 1}/{a.windows} {lv}: new / old "
                          f"{pairs.fmt(windows.summary(run['windows']), 3)}", file=sys.stderr)
    finally:
        b.cleanup()
    print(f"{a.transport} {a.strategy} {size_name(a.size)}, {a.windows} runs of "
          f"{a.window_pairs} pairs of windows per level; old {a.old}, new {a.new} "
          f"{' '.join(a.new_args)}")
    for lv in a.levels:
        meds = [windows.summary(r["windows"])["median"] for r in found[lv]]
        pooled = [p for r in found[lv] for p in r["windows"]]
        print(f"  {lv}: new / old, median of the runs' medians {pairs.fmt(pairs.summary(meds), 3)}"
              f"; each run: {', '.join(f'{m:.3f}' for m in meds if m is not None)}; all pairs "
              f"{pairs.fmt(windows.summary(pooled), 3)}")
        new, old = (windows.ns_per_run(found[lv], f"{lv}-{side}") for side in ("new", "old"))
        print(f"    ns per program run, new / old (medians over runs): " + ", ".join(
            f"{p} {new[p]:.0f} / {old[p]:.0f}" for p in sorted(new, key=lambda p: -new[p])
            if p in old and old[p]))
    return 0


def main(argv=None):
    a = _args(argv)
    if a.windows:
        return _windows_ab(a)
    b = harness.Bench(argparse.Namespace(duration=a.duration, rounds=a.rounds))
    try:
        with Topology(a.transport) as topo:
            def mk(observer):
                return lambda: b.netio(topo, a.strategy, a.size, 1, a.duration, observer())
            variants = [("untraced", mk(Untraced))]
            for lv in a.levels:
                for side, build, extra in (("old", a.old, []), ("new", a.new, a.new_args)):
                    variants.append((f"{lv}-{side}", mk(
                        lambda lv=lv, side=side, build=build, extra=extra: OurTracer(
                            LEVELS[lv] + extra, label=f"{lv}-{side}", build=build))))
            res = pairs.run_interleaved(a.rounds, variants, probe=harness.machine_speed,
                                        log=lambda m: print(m, file=sys.stderr))
    finally:
        b.cleanup()
    print(f"{a.transport} {a.strategy} {size_name(a.size)}, {a.rounds} rounds of "
          f"{a.duration:g} s; old {a.old}, new {a.new} {' '.join(a.new_args)}")
    for v, _ in variants[1:]:
        print(f"  {v:14s} / untraced {pairs.fmt(pairs.ratio(res, v, 'untraced'), 3)}; CPU/GB "
              f"{pairs.fmt(pairs.ratio(res, v, 'untraced', 'cpu_s_per_gb'), 3)}; BPF ns/msg: "
              f"{_top_programs(res[v])}")
    for lv in a.levels:
        print(f"  {lv}: new / old {pairs.fmt(pairs.ratio(res, f'{lv}-new', f'{lv}-old'), 3)}; "
              f"CPU/GB {pairs.fmt(pairs.ratio(res, f'{lv}-new', f'{lv}-old', 'cpu_s_per_gb'), 3)}; "
              f"BPF ns/msg new / old "
              f"{pairs.fmt(pairs.ratio(res, f'{lv}-new', f'{lv}-old', 'bpf_ns_per_msg'), 3)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
