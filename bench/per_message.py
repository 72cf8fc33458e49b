"""Where the tracer's BPF time goes per message: one workload run under one tracer with its
run-time statistics always on (`--bpf-stats always`), each program's runs and time divided by
the messages the server sent. No ratio and no verdict (bench/windows.py gives those): the
table says which program to make cheaper first.

    python -m bench.per_message [--strategy S] [--size BYTES] [--transport loopback|veth]
                                [--seconds S] [--level counting|full]

Prints a Markdown table, with the host's CPU and SRSO state; exit 2 on bad arguments. Needs
root and a build ($NETIO_BUILD, default build).
"""
import argparse
import json
import os
import sys
import tempfile

from bench.config import COUNTING_ARGS
from bench.sockets import srso_state
from bench import harness
from netio_trace.system.netns import Topology
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening
from netio_trace.tracer import ControlTracer

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
    a = p.parse_args(argv)
    if not 1 <= a.size <= 1 << 20 or not 0 < a.seconds <= 60:
        p.error("--size 1..1048576, --seconds 0..60")
    if os.geteuid() != 0:
        p.error("needs root (network namespaces, BPF)")
    return a


def workload(tracer, topo, a, tmp):
    """One gated server/client run, both followed; returns the server's JSON and the
    snapshot."""
    srv = GatedProcess([os.path.join(BUILD, "netio-server"), "--strategy", a.strategy,
                        "--size", str(a.size), "--threads", "1", "--port", "0", "--addr",
                        "0.0.0.0", "--netns", topo.sender_ns, "--duration", str(a.seconds),
                        *READY_ARGS], f"{tmp}/s.json", f"{tmp}/s.err", ready=True)
    harness.release_followed(tracer, topo, srv)
    cli = None
    try:
        port, _ = wait_listening(srv.ready, TIMEOUT)
        if not port:
            raise RuntimeError(open(f"{tmp}/s.err").read().strip())
        cli = GatedProcess([os.path.join(BUILD, "netio-client"), "--addr", topo.server_addr,
                            "--port", str(port), "--threads", "1", "--size", str(a.size),
                            "--netns", topo.receiver_ns], f"{tmp}/c.json", f"{tmp}/c.err")
        tracer.pid_add(cli.pid)
        cli.release()
        if srv.wait(TIMEOUT) != 0 or cli.wait(TIMEOUT) != 0:
            raise RuntimeError(open(f"{tmp}/s.err").read() + open(f"{tmp}/c.err").read())
    finally:
        srv.kill()
        if cli:
            cli.kill()
    with open(f"{tmp}/s.json") as f:
        return json.load(f), tracer.snapshot(f"{tmp}/snap.json")


def table(server, snap, a):
    msgs, m = server["messages"], harness.machine()
    rows = sorted(((n, p) for n, p in snap["self"]["programs"].items() if p["runs"]),
                  key=lambda kv: -kv[1]["ns"])
    out = [f"{a.transport} {a.strategy} {a.size} B, {a.level} level, {msgs} messages in "
           f"{a.seconds:g} s; CPU {m['model']}, kernel {m['kernel']}, SRSO: {srso_state()}",
           "",
           "| program | runs per message | ns per run | ns per message |", "|---|---|---|---|"]
    for name, p in rows:
        out.append(f"| `{name}` | {p['runs'] / msgs:.2f} | {p['ns'] / p['runs']:.0f} | "
                   f"{p['ns'] / msgs:.1f} |")
    total = sum(p["ns"] for _, p in rows)
    out.append(f"| all | | | {total / msgs:.1f} |")
    return "\n".join(out)


def main(argv=None):
    a = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="per-message-") as tmp, \
            Topology(a.transport) as topo:
        tracer = ControlTracer(binary=os.path.join(BUILD, "netio-tracer"),
                               extra_args=("--bpf-stats", "always", *LEVELS[a.level]),
                               log_path=f"{tmp}/tracer.log").start()
        try:
            server, snap = workload(tracer, topo, a, tmp)
        finally:
            tracer.close()
    print(table(server, snap, a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
