"""What the bench's floor is made of: an empty program's run as the workload pays it, with BPF
run-time stats off and on (`python -m bench.stats_cost`; docs/bench.md, "The floor").

bench.per_message reads each program's time from the kernel's run-time stats, and its floor
(an empty program on the same hooks) is what the stats report for a run that does nothing. The
stats report only what lies between their two clock reads, and those reads cost the workload
too. So this runs netio-getpid-loop (getpid(2) in a loop, one CPU) untraced, with an empty
program on `sys_enter` and the stats off, and with the stats on, in turn, the order rotated
every round, and gives per round what each state adds to a call against the untraced run of
the same round: the run's cost without the stats (the dispatch and an empty program, what a
tracer pays with `--bpf-stats off`, and 90% of the time with the default `sampled`), and with
them, and what the stats themselves report for the same runs (the bench's floor). The stats'
own cost (on less off) is every hook's; the stats-off figure is sys_enter's alone: a program
there also sends every syscall down the kernel's slow path of syscall entry.
Differences within a round, median (min-max) over the rounds: the host's speed changes between
rounds, not within a pair of adjacent one-second runs, most of the time."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from analysis.stats import fmt_spread, spread
from bench import harness
from bench.config import BUILD
from bench.floor import Floor
from bench.harness import srso_state

HOOK = "tp_btf:sys_enter"
STATES = ("untraced", "stats off", "stats on")


def getpid_rate(seconds, cpu):
    """netio-getpid-loop's calls per second over `seconds`, pinned to cpu."""
    argv = [os.path.join(BUILD, "netio-getpid-loop"), "--seconds", f"{seconds:g}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 30,
                         preexec_fn=lambda: os.sched_setaffinity(0, {cpu})).stdout
    return json.loads(out)["calls_per_s"]


def one_state(state, seconds, cpu, log):
    """One run in state: {"ns_per_call", "reported_ns_per_run"} (the latter with stats on)."""
    if state == "untraced":
        return {"ns_per_call": 1e9 / getpid_rate(seconds, cpu)}
    with Floor([HOOK], log, stats=state == "stats on") as floor:
        if HOOK not in floor.attached:
            raise RuntimeError(f"netio-bench-floor could not attach {HOOK}: {floor.missing}")
        before = floor.read().get(HOOK, {})
        rate = getpid_rate(seconds, cpu)
        after = floor.read().get(HOOK, {})
    runs = after.get("runs", 0) - before.get("runs", 0)
    ns = after.get("ns", 0) - before.get("ns", 0)
    if state == "stats off" and runs:
        raise RuntimeError("BPF run-time stats are on without us (another tool, or the "
                           "kernel.bpf_stats_enabled sysctl): no run can be measured without them")
    return {"ns_per_call": 1e9 / rate, "reported_ns_per_run": ns / runs if runs else None}


def rounds(n, seconds, cpu, log):
    """n rounds of every state, the order rotated each round: [{state: one_state()}]."""
    out = []
    for r in range(n):
        order = STATES[r % len(STATES):] + STATES[:r % len(STATES)]
        out.append({s: one_state(s, seconds, cpu, log) for s in order})
    return out


def summary(results):
    """Per state, ns per call added to the same round's untraced call (a program run each:
    one sys_enter per getpid), what turning the stats on added to a run (on less off, the same
    round) and what the stats reported a run, over the rounds."""
    added = {s: spread([r[s]["ns_per_call"] - r["untraced"]["ns_per_call"] for r in results])
             for s in STATES[1:]}
    return {"untraced_ns_per_call": spread([r["untraced"]["ns_per_call"] for r in results]),
            "added_ns_per_run": added,
            "stats_ns_per_run": spread([r["stats on"]["ns_per_call"]
                                        - r["stats off"]["ns_per_call"] for r in results]),
            "reported_ns_per_run": spread([r["stats on"].get("reported_ns_per_run")
                                           for r in results]),
            "rounds": len(results)}


def fmt(s):
    return fmt_spread(s, "{:.1f}")


def text(summ, machine, srso):
    a = summ["added_ns_per_run"]
    return "\n".join([
        f"machine: {machine['model']}, kernel {machine['kernel']}, SRSO: {srso}",
        f"an empty program on {HOOK}, netio-getpid-loop on one CPU, {summ['rounds']} rounds, "
        "median (min-max)",
        f"  untraced getpid: {fmt(summ['untraced_ns_per_call'])} ns a call",
        f"  added a run, stats off: {fmt(a['stats off'])} ns",
        f"  added a run, stats on:  {fmt(a['stats on'])} ns",
        f"  the stats' own, on less off: {fmt(summ['stats_ns_per_run'])} ns a run",
        f"  reported by the stats:  {fmt(summ['reported_ns_per_run'])} ns a run (the floor)"])


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.stats_cost",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9, help="rounds of the three states (>= 1)")
    p.add_argument("--seconds", type=float, default=1.0, help="per getpid loop run")
    p.add_argument("--cpu", type=int, default=0, help="the CPU the loop runs on")
    p.add_argument("--json", metavar="FILE", help="write the rounds and the summary here")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.seconds <= 0:
        p.error("--rounds must be >= 1 and --seconds > 0")
    if a.cpu not in os.sched_getaffinity(0):
        p.error(f"--cpu {a.cpu}: not a CPU this process may run on")
    if os.geteuid() != 0:
        p.error("needs root (BPF)")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.NamedTemporaryFile(prefix="netio-stats-cost.", suffix=".log") as log:
        try:
            results = rounds(a.rounds, a.seconds, a.cpu, log.name)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            print(f"bench.stats_cost: {e}", file=sys.stderr)
            return 1
    summ = summary(results)
    machine, srso = harness.machine(), srso_state()
    print(text(summ, machine, srso))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine, "srso": srso, "hook": HOOK, "results": results,
                       "summary": summ}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
