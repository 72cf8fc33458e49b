"""Where the tracer's BPF time goes per message: one workload run under one tracer with its
run-time statistics always on (`--bpf-stats always`), each program's runs and time divided by
the messages the server sent, beside the empty-program floor on the same hooks (bench/floor.py:
an empty program's ns per run, attached during the same run; a program's own work is its ns per
run less the floor's). No ratio and no verdict on time (bench/windows.py gives those): the
table says which program to make cheaper first. Runs per message are read against their target
where it applies (config.TARGET_RUNS_PER_MESSAGE). With --unfollowed the tracer follows a
process of the bench's that makes no event, not the workload: what the tracer costs the other
processes of a host, whose events its programs run for all the same.

    python -m bench.per_message [--strategy S] [--size BYTES] [--transport loopback|veth]
                                [--seconds S] [--level counting|full] [--unfollowed]
                                [--skb-programs sweep|trace] [--no-floor] [--json FILE]

Prints a Markdown table, with the host's CPU and SRSO state; --json writes the same figures
for machines. Exit 2 on bad arguments. Needs root and a build ($NETIO_BUILD, default build).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench.config import (COUNTING_ARGS, RUNS_PER_MESSAGE_CASES, TARGET_RUNS_PER_MESSAGE,
                          size_name)
from bench.harness import srso_state
from bench import floor as floors
from bench import harness
from netio_trace.system.netns import Topology
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening
from netio_trace.tracer import ControlTracer, set_pdeathsig

BUILD = os.environ.get("NETIO_BUILD", "build")
STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field", "io-uring", "io-uring-zc")
LEVELS = {"counting": tuple(COUNTING_ARGS), "full": ()}
TIMEOUT = 60


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.per_message",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--strategy", default="one-copy", choices=STRATEGIES)
    p.add_argument("--size", type=int, default=16384)
    p.add_argument("--transport", default="loopback", choices=("loopback", "veth"))
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--level", default="counting", choices=sorted(LEVELS))
    p.add_argument("--unfollowed", action="store_true",
                   help="the tracer follows another process, not the workload")
    p.add_argument("--skb-programs", default="sweep", choices=("sweep", "trace"),
                   help="the per-skb programs as the sweep has them (attached before a "
                   "zero-copy run: its fallback copy counted) or as `trace` has them (the "
                   "level's default: on demand at the counting level)")
    p.add_argument("--no-floor", action="store_true",
                   help="no empty programs beside the tracer's (no floor columns)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--floor-build", metavar="DIR", default=BUILD,
                   help="where netio-bench-floor is (default NETIO_BUILD): the bench's "
                   "instrument, for a tracer built before it")
    a = p.parse_args(argv)
    if not 1 <= a.size <= 1 << 20 or not 0 < a.seconds <= 60:
        p.error("--size 1..1048576, --seconds 0..60")
    if os.geteuid() != 0:
        p.error("needs root (network namespaces, BPF)")
    return a


def workload(tracer, topo, a, tmp, floor=None, bystander=None):
    """One gated server/client run, both followed (or neither, with bystander: the process
    followed instead); returns the server's JSON, the snapshot and the floor's runs and time
    over the run (None without a floor)."""
    srv = GatedProcess([os.path.join(BUILD, "netio-server"), "--strategy", a.strategy,
                        "--size", str(a.size), "--threads", "1", "--port", "0", "--addr",
                        "0.0.0.0", "--netns", topo.sender_ns, "--duration", str(a.seconds),
                        *READY_ARGS], f"{tmp}/s.json", f"{tmp}/s.err", ready=True)
    at_zero = floor.read if floor else None
    before = (harness.release_unfollowed(tracer, srv, bystander, at_zero) if bystander else
              harness.release_followed(tracer, topo, srv, a.strategy, at_zero,
                                       skb_on_demand=a.skb_programs == "trace"))
    cli = None
    try:
        port, _ = wait_listening(srv.ready, TIMEOUT)
        if not port:
            raise RuntimeError(open(f"{tmp}/s.err").read().strip())
        cli = GatedProcess([os.path.join(BUILD, "netio-client"), "--addr", topo.server_addr,
                            "--port", str(port), "--threads", "1", "--size", str(a.size),
                            "--netns", topo.receiver_ns], f"{tmp}/c.json", f"{tmp}/c.err")
        if not bystander:
            tracer.pid_add(cli.pid)
        cli.release()
        if srv.wait(TIMEOUT) != 0 or cli.wait(TIMEOUT) != 0:
            raise RuntimeError(open(f"{tmp}/s.err").read() + open(f"{tmp}/c.err").read())
    finally:
        srv.kill()
        if cli:
            cli.kill()
    after = floor.read() if floor else None
    with open(f"{tmp}/s.json") as f:
        return (json.load(f), tracer.snapshot(f"{tmp}/snap.json"),
                floors.delta(before, after) if floor else None)


def figures(messages, programs, floor_runs=None):
    """The table's numbers, and the --json output's: per program that ran (dearest first)
    its runs, ns, runs and ns per message, ns per run, the floor's ns per run on its hooks
    and its own (the difference; None without a floor there), and the totals per message.
    programs: the snapshot's self.programs; floor_runs: floor.delta() over the run."""
    if not messages:
        raise ValueError("the server sent no message: nothing to divide by")
    floor_ns = floors.per_program(programs, floor_runs) if floor_runs is not None else {}
    rows = []
    for name, p in sorted(programs.items(), key=lambda kv: -kv[1]["ns"]):
        if not p["runs"]:
            continue
        per_run, fl = p["ns"] / p["runs"], floor_ns.get(name)
        rows.append({"program": name, "target": p.get("target"), "runs": p["runs"],
                     "ns": p["ns"], "runs_per_message": p["runs"] / messages,
                     "ns_per_run": per_run, "floor_ns_per_run": fl,
                     "own_ns_per_run": per_run - fl if fl is not None else None,
                     "ns_per_message": p["ns"] / messages})
    return {"messages": messages,
            "runs_per_message": sum(r["runs"] for r in rows) / messages,
            "ns_per_message": sum(r["ns"] for r in rows) / messages, "programs": rows}


def runs_target(transport, strategy, size, level, unfollowed=False):
    """TARGET_RUNS_PER_MESSAGE where it applies to this configuration, else None."""
    applies = (level == "counting" and not unfollowed
               and (transport, strategy, size) in RUNS_PER_MESSAGE_CASES)
    return TARGET_RUNS_PER_MESSAGE if applies else None


def runs_line(fig, target):
    """The runs per message, read against their target (or where the target applies)."""
    n = fig["runs_per_message"]
    where = ("the counting level's one-copy 16 KiB over loopback and veth")
    if target is None:
        return (f"Runs per message: {n:.2f} (the target, ≤ {TARGET_RUNS_PER_MESSAGE:g}, is "
                f"for {where}).")
    word = "within the target" if n <= target else "**above the target**"
    return f"Runs per message: **{n:.2f}**, {word} ≤ {target:g} ({where})."


def _cell(v, fmt):
    return "–" if v is None else format(v, fmt)


def table(result):
    """The Markdown of result (result(): the configuration, the machine, figures())."""
    c, m, fig = result["config"], result["machine"], result
    whose = ", not followed (the tracer follows another process)" if c.get("unfollowed") else ""
    if c.get("skb_programs") == "trace":
        whose += ", per-skb programs as `trace` has them"
    out = [f"{c['transport']} {c['strategy']} {c['size']} B, {c['level']} level{whose}, "
           f"{fig['messages']} messages in {c['seconds']:g} s; CPU {m['model']}, kernel "
           f"{m['kernel']}, SRSO: {result['srso']}", "",
           "| program | runs per message | ns per run | floor ns per run | own ns per run | "
           "ns per message |", "|---|---|---|---|---|---|"]
    for r in fig["programs"]:
        out.append(f"| `{r['program']}` | {r['runs_per_message']:.2f} | "
                   f"{r['ns_per_run']:.0f} | {_cell(r['floor_ns_per_run'], '.0f')} | "
                   f"{_cell(r['own_ns_per_run'], '.0f')} | {r['ns_per_message']:.1f} |")
    out += [f"| all | {fig['runs_per_message']:.2f} | | | | {fig['ns_per_message']:.1f} |", "",
            runs_line(fig, result["runs_per_message_target"])]
    fl = result.get("floor")
    if fl is None:
        out.append("No floor (`--no-floor`).")
    elif fl["missing"]:
        out.append("No floor on: " + ", ".join(f"`{h}` ({why})"
                                                for h, why in fl["missing"].items()) + ".")
    return "\n".join(out)


def result(a, server, snap, floor_runs, floor_hooks):
    """Everything the table and --json say; floor_hooks: {"attached", "missing"} or None."""
    fig = figures(server["messages"], snap["self"]["programs"], floor_runs)
    return {"config": {"transport": a.transport, "strategy": a.strategy, "size": a.size,
                       "size_name": size_name(a.size), "level": a.level, "seconds": a.seconds,
                       "unfollowed": a.unfollowed, "skb_programs": a.skb_programs},
            "machine": harness.machine(), "srso": srso_state(),
            "runs_per_message_target": runs_target(a.transport, a.strategy, a.size, a.level,
                                                   a.unfollowed),
            "floor": floor_hooks, **fig}


def measure(a, tmp, topo):
    """One run under a tracer started for it, the floor beside it unless --no-floor."""
    tracer = ControlTracer(binary=os.path.join(BUILD, "netio-tracer"),
                           extra_args=("--bpf-stats", "always", *LEVELS[a.level]),
                           log_path=f"{tmp}/tracer.log").start()
    floor = None
    # ends with the bench, however the bench ends
    bystander = (subprocess.Popen(["sleep", "3600"], preexec_fn=set_pdeathsig)
                 if a.unfollowed else None)
    try:
        if not a.no_floor:      # on the hooks the tracer's programs are on
            progs = tracer.snapshot(f"{tmp}/hooks.json")["self"]["programs"]
            floor = floors.Floor(floors.targets(progs), f"{tmp}/floor.log",
                                 os.path.join(a.floor_build, "netio-bench-floor")).start()
        server, snap, floor_runs = workload(tracer, topo, a, tmp, floor, bystander)
    finally:
        if floor:
            floor.close()
        tracer.close()
        if bystander:
            bystander.kill()
            bystander.wait()
    hooks = {"attached": floor.attached, "missing": floor.missing} if floor else None
    return result(a, server, snap, floor_runs, hooks)


def main(argv=None):
    a = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="per-message-") as tmp, \
            Topology(a.transport) as topo:
        res = measure(a, tmp, topo)
    print(table(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
