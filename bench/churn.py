"""The churn bench (section 10 of `make bench`; alone: `python -m bench.churn`): what the
tracer's BPF costs where processes, threads and TCP connections come and go by the thousand,
which the per-message benches never see. netio-churn (bench/churn.c) forks short-lived
processes whose threads open short TCP connections over loopback, each sending a little; the
tracer follows it at the counting level with run-time stats always on, loaded for each run.
Each program's ns per run and runs, dearest first, against the targets (TARGETS: a fork and a
thread exit at most 1 µs of BPF each, a socket's state change at most 150 ns), with the host's
CPU and SRSO state beside them, and beside them what an empty program costs a run on the same
hooks here (the floor: on a host with the SRSO return thunk most of a cheap program's time);
and in every run the tracer's byte totals against the load's own accounting: exact, churn or
not.

    python -m bench.churn [--runs N] [--processes P] [--threads T] [--connections C]
                          [--bytes B] [--parallel N] [--json FILE] [--no-floor]

Prints the section's Markdown; exit 1 when a run's byte totals were not exact, 2 on bad
arguments. Needs root and a build ($NETIO_BUILD, default build).
"""
import argparse
import json
import os
import sys

from bench import floor as floors
from bench import harness, pairs
from bench.config import COUNTING_ARGS
from bench.observers import OurTracer
from bench.harness import srso_state

# 300 processes (8 alive at once) x 4 threads opening 2 400 connections of 1 000 bytes
LOAD = {"processes": 300, "threads": 4, "connections": 2400, "bytes": 1000, "parallel": 8}
# (program, at most ns of BPF per run, what one run of it is)
TARGETS = (("fork_btf", 1000, "a fork"), ("tp_thread_exit", 1000, "a thread exit"),
           ("tp_sock_state", 150, "a socket's state change"))
TRACER_ARGS = ("--bpf-stats", "always", *COUNTING_ARGS)
GROUP = "10. churn: BPF time per run within its bound (bound / ns per run)"
EXACT_GROUP = "10. churn: the tracer's byte totals equal the load's (exact runs / runs)"


def run_record(run, snap):
    """One run's figures: the load's accounting, the tracer's totals, whether they agree, and
    each program's runs and ns (the snapshot's self.programs)."""
    load = {k: run[k] for k in ("processes", "threads", "connections", "bytes_sent",
                                "bytes_received", "seconds")}
    tracer = {k: snap.get(k) for k in ("tx_bytes", "rx_copy_bytes", "forks_followed",
                                       "sockets_untracked", "thread_storage_spilled", "drops")}
    programs = {n: {"runs": p.get("runs", 0), "ns": p.get("ns", 0), "target": p.get("target")}
                for n, p in ((snap.get("self") or {}).get("programs") or {}).items()}
    return {"load": load, "tracer": tracer, "programs": programs,
            "exact": (tracer["tx_bytes"] == load["bytes_sent"]
                      and tracer["rx_copy_bytes"] == load["bytes_received"])}


def bounded_hooks(programs):
    """The hooks of the programs with a bound, from a run's programs (their targets)."""
    bounded = {name for name, _, _ in TARGETS}
    return floors.targets({n: p for n, p in programs.items() if n in bounded})


def floor_of(floor, programs, before):
    """{program: the empty program's ns per run on its hooks} over a run: the floor's counts
    since `before` (its read() then); None without a floor."""
    if floor is None:
        return None
    return floors.per_program(programs, floors.delta(before, floor.read()))


def measure(b, load, nruns, log=harness.log, with_floor=True):
    """nruns runs of the load, each under a counting-level tracer loaded for it, the machine's
    speed probed around each: [run_record() with "speeds" and "floor"]. From the second run
    on, an empty program sits on the hooks of the programs with a bound (the first run names
    them), so that each reads as this host's cost of a run plus its own work."""
    from netio_trace.system.netns import Topology
    records, floor = [], None
    try:
        with Topology("loopback") as topo:
            for r in range(nruns):
                before = harness.machine_speed()
                floor_before = floor.read() if floor else None
                run = b.churn(topo, load, OurTracer(TRACER_ARGS, label="counting"))
                speeds = (before, harness.machine_speed())
                harness.SPEEDS.append(speeds)
                with open(run["trace_json"]) as f:
                    rec = run_record(run, json.load(f))
                rec["speeds"] = speeds
                rec["floor"] = floor_of(floor, rec["programs"], floor_before)
                records.append(rec)
                log(f"[churn run {r + 1}/{nruns}] {run}; bytes "
                    f"{'exact' if rec['exact'] else 'NOT exact'}")
                if with_floor and floor is None and r + 1 < nruns:
                    floor = floors.Floor(bounded_hooks(rec["programs"]),
                                         os.path.join(b.rundir(), "floor.log")).start()
    finally:
        if floor:
            floor.close()
    return records


def ns_per_run(records, program):
    """Each run's ns per run of program (None where it did not run)."""
    out = []
    for rec in records:
        p = rec["programs"].get(program) or {}
        out.append(p["ns"] / p["runs"] if p.get("runs") else None)
    return out


def headroom(records, program, bound):
    """pairs.summary of bound / ns per run over the runs: at or above 1 is within the bound,
    so the bench's verdicts (pairs.classify, results.md's summary) read it as every ratio."""
    return pairs.summary([bound / v if v else None for v in ns_per_run(records, program)])


def bound_verdict(records, program, bound):
    """'met', '**missed**' or 'undecided (...)' for ns per run at most bound."""
    s = headroom(records, program, bound)
    if not s["n"]:
        return "n/a (no run)"
    c = pairs.classify(s, 1.0)
    if c != "undecided":
        return "met" if c == "met" else f"**missed** (over by {bound / s['median'] - bound:.0f} ns)"
    if s["n"] < pairs.MIN_VERDICT_VALUES:
        return f"undecided (n={s['n']}: a verdict needs {pairs.MIN_VERDICT_VALUES})"
    return f"undecided ({bound / s['hi']:.0f}–{bound / s['lo']:.0f} ns spans {bound} ns)"


def exact_summary(records):
    """pairs.summary of 1 for each run whose byte totals were exact, 0 for the others."""
    return pairs.summary([1.0 if rec["exact"] else 0.0 for rec in records])


def record_verdicts(b, records):
    for program, bound, _ in TARGETS:
        b.record(GROUP, f"`{program}` ≤ {bound} ns", headroom(records, program, bound), 1.0)
    b.record(EXACT_GROUP, "tx and rx bytes", exact_summary(records), 1.0)


def programs_by_cost(records):
    """The programs that ran, dearest first (median BPF time per load run): [(name, median
    runs, summary of ns per run, median ns)]."""
    names = {n for rec in records for n, p in rec["programs"].items() if p["runs"]}
    rows = []
    for n in names:
        runs = pairs.summary([rec["programs"].get(n, {}).get("runs") for rec in records])
        ns = pairs.summary([rec["programs"].get(n, {}).get("ns") for rec in records])
        rows.append((n, runs["median"], pairs.summary(ns_per_run(records, n)), ns["median"]))
    return sorted(rows, key=lambda r: -r[3])


def floor_ns(records, program):
    """Each run's empty-program ns per run on program's hooks (None where it had no floor)."""
    return [(rec.get("floor") or {}).get(program) for rec in records]


def own_ns(records, program):
    """Each run's ns per run of program less the floor's, where both are known."""
    return [None if t is None or f is None else t - f
            for t, f in zip(ns_per_run(records, program), floor_ns(records, program))]


def _targets_md(records):
    lines = ["| what | program | **ns per run** | bound | verdict | floor ns per run | "
             "own ns per run |", "|---|---|---|---|---|---|---|"]
    for program, bound, what in TARGETS:
        fl, own = pairs.summary(floor_ns(records, program)), pairs.summary(own_ns(records, program))
        lines.append(f"| {what} | `{program}` | "
                     f"**{pairs.fmt(pairs.summary(ns_per_run(records, program)), 0)}** | "
                     f"≤ {bound} ns | {bound_verdict(records, program, bound)} | "
                     f"{pairs.fmt(fl, 0) if fl['n'] else 'not measured'} | "
                     f"{pairs.fmt(own, 0) if own['n'] else 'not measured'} |")
    return lines


def _programs_md(records):
    lines = ["| program | runs per load run | ns per run | BPF ms per load run |",
             "|---|---|---|---|"]
    for name, runs, per_run, ns in programs_by_cost(records):
        lines.append(f"| `{name}` | {runs:.0f} | {pairs.fmt(per_run, 0)} | {ns / 1e6:.2f} |")
    return lines


def _accounting_md(records):
    lines = ["| run | processes | threads | connections | bytes sent / received | tracer tx / "
             "rx bytes | exact | forks followed | sockets untracked | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for i, rec in enumerate(records, 1):
        ld, tr = rec["load"], rec["tracer"]
        lines.append(f"| {i} | {ld['processes']} | {ld['threads']} | {ld['connections']} | "
                     f"{ld['bytes_sent']} / {ld['bytes_received']} | {tr['tx_bytes']} / "
                     f"{tr['rx_copy_bytes']} | {'yes' if rec['exact'] else '**NO**'} | "
                     f"{tr['forks_followed']} | {tr['sockets_untracked']} | "
                     f"{ld['seconds']:.2f} |")
    return lines


def markdown(records, load, machine, srso):
    """The section's Markdown, from measure()'s records; nothing here runs anything."""
    exact = sum(rec["exact"] for rec in records)
    speeds = [p for rec in records for p in rec.get("speeds", ()) if p]
    per_cpu = ", ".join(f"CPU {i} {pairs.fmt(pairs.summary(list(r)), 0)}"
                        for i, r in enumerate(zip(*speeds)))
    return "\n".join([
        "## 10. Churn: processes, threads and connections", "",
        f"`netio-churn` (bench/churn.c): {load['processes']} short-lived processes (at most "
        f"{load['parallel']} alive at once) of {load['threads']} threads each, which open {load['connections']} "
        f"TCP connections over loopback between them, {load['bytes']} bytes each, to one "
        f"acceptor thread of their parent. The tracer, loaded for each run, follows the parent "
        f"(its children through the fork handler) at the counting level "
        f"(`{' '.join(COUNTING_ARGS)}`) with run-time stats always on (`--bpf-stats always`). "
        f"{len(records)} runs; ns per run is each run's BPF time over its runs, median (min, "
        f"max) over the runs; `fork_btf` and `tp_thread_exit` also run, cheaply, for every "
        f"other process of the machine. A bound is met when the median's interval is within "
        f"it (min to max with fewer than 9 runs; 5 runs at least), missed when it is over it. "
        f"The floor is an empty program on the same hooks from the second run on "
        f"(bench/floor.py): what a run costs on this host before any work, which the bound "
        f"includes; own is the rest.",
        "", f"Host CPU: {machine['model']} ({machine['nproc']} vCPUs), kernel "
        f"{machine['kernel']}; SRSO: `{srso}`. Busy loop blocks/s around the runs: "
        f"{per_cpu or 'not probed'}.", "",
        *_targets_md(records), "", "Every program that ran, dearest first:", "",
        *_programs_md(records), "",
        f"The load's own accounting against the tracer's totals: **exact in {exact} of "
        f"{len(records)} runs**.", "", *_accounting_md(records), ""])


def section_churn(b):
    """`make bench`'s section 10: the default load, b.args.churn_runs runs."""
    records = measure(b, LOAD, b.args.churn_runs)
    record_verdicts(b, records)
    return markdown(records, LOAD, harness.machine(), srso_state())


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.churn",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of the load (a verdict needs 5)")
    for key, default in LOAD.items():
        ap.add_argument(f"--{key}", type=int, default=default)
    ap.add_argument("--json", metavar="FILE", help="also write every run's figures as JSON")
    ap.add_argument("--no-floor", action="store_true",
                    help="no empty programs beside the tracer's (no floor columns)")
    a = ap.parse_args(argv)
    if min(a.runs, a.processes, a.threads, a.bytes, a.parallel) < 1 or a.connections < 0:
        ap.error("--runs, --processes, --threads, --bytes and --parallel must be more than 0, "
                 "--connections 0 or more")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, BPF)")
    return a


def main(argv=None):
    a = parse_args(argv)
    load = {k: getattr(a, k) for k in LOAD}
    b = harness.Bench(argparse.Namespace(duration=1.0, rounds=1))
    try:
        records = measure(b, load, a.runs, with_floor=not a.no_floor)
    finally:
        b.cleanup()
    machine, srso = harness.machine(), srso_state()
    print(markdown(records, load, machine, srso))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"load": load, "machine": machine, "srso": srso,
                       "targets": [list(t) for t in TARGETS], "runs": records}, f, indent=1)
    return 0 if all(rec["exact"] for rec in records) else 1


if __name__ == "__main__":
    sys.exit(main())
