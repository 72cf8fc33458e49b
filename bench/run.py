"""netio-trace benchmarks. Run from the repo root as root: `python -m bench.run` (`make bench`).

Each section is a function taking a Bench and returning markdown; the sections' output is
printed and written to bench/results.md with the machine it ran on. Add a section by writing
a function and listing it in SECTIONS.
"""
import argparse
import json
import os
import platform
import select
import signal
import subprocess
import sys
import time

from analysis.netns import Topology, VETH_RECEIVER_ADDR, LOOPBACK_ADDR
from bench import pairs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("NETIO_BUILD", os.path.join(REPO, "build"))
RESULTS = os.path.join(REPO, "bench", "results.md")
IPERF3_PORT = 5201  # inside the run's own namespaces only


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _children_cpu():
    t = os.times()
    return t.children_user + t.children_system


def bpf_programs():
    """Number of BPF programs loaded (a tracer attached elsewhere slows every packet)."""
    try:
        r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                           timeout=10)
        return len(json.loads(r.stdout)) if r.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cc = "unknown"
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            cc = f.read().strip()
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "default_cc": cc}


class Proc:
    """A child process we started; ended only through its own pid."""

    def __init__(self, argv, **kw):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  **kw)
        self.pid = self.p.pid
        self.early = {"stdout": "", "stderr": ""}

    def wait_line(self, stream, prefix, timeout=5.0):
        """The first line of stream (stdout|stderr) starting with prefix; None if it ended.

        Reads the raw pipe (no buffered readline that select() cannot see into); what it
        read past that line is kept in self.early[stream]."""
        fd = getattr(self.p, stream).fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(prefix.encode()):
                    self.early[stream] = buf.decode(errors="replace")
                    return line.decode(errors="replace")
        raise RuntimeError(f"{self.p.args[0]}: no '{prefix}' line within {timeout} s")

    def finish(self, timeout):
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.p.communicate()
        return self.p.returncode, self.early["stdout"] + out, self.early["stderr"] + err

    def kill(self):
        if self.p.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.p.wait()


class Bench:
    def __init__(self, args):
        self.args = args
        self.server = os.path.join(BUILD, "netio-server")
        self.client = os.path.join(BUILD, "netio-client")

    # ---- runners: each returns {"recv_gbps", "send_gbps", "retrans", "cc"} ----------------
    def ours(self, topo, strategy, size, duration):
        cpu0 = _children_cpu()
        srv = Proc([self.server, "--netns", topo.sender_ns, "--port", "0", "--strategy", strategy,
                    "--size", str(size), "--threads", "1", "--duration", str(duration)])
        try:
            line = srv.wait_line("stderr", "listening ")
            if not line:
                raise RuntimeError(f"netio-server ended: {srv.finish(5)}")
            port = line.split()[1]
            cli = subprocess.run([self.client, "--netns", topo.receiver_ns, "--addr",
                                  topo.server_addr, "--port", port, "--threads", "1",
                                  "--size", str(size)],
                                 capture_output=True, text=True, timeout=duration + 30)
            rc, out, err = srv.finish(duration + 30)
        finally:
            srv.kill()
        if rc != 0 or cli.returncode != 0:
            raise RuntimeError(f"netio {strategy}: server {rc} {err.strip()} / client "
                               f"{cli.returncode} {cli.stderr.strip()}")
        s, c = json.loads(out), json.loads(cli.stdout)
        return {"recv_gbps": c["throughput_gbps"], "send_gbps": s["throughput_gbps"],
                "retrans": s["tcp"]["retrans"], "cc": s["tcp"]["cc"],
                "cpu_s_per_gb": _per_gb(_children_cpu() - cpu0, c["bytes"])}

    def iperf3(self, topo, size, duration):
        addr = VETH_RECEIVER_ADDR if topo.transport == "veth" else LOOPBACK_ADDR
        cpu0 = _children_cpu()
        srv = Proc(["ip", "netns", "exec", topo.receiver_ns, "iperf3", "-s", "-1", "--forceflush",
                    "-p", str(IPERF3_PORT)])
        try:
            if not srv.wait_line("stdout", "Server listening"):
                raise RuntimeError(f"iperf3 -s ended: {srv.finish(5)}")
            cli = subprocess.run(["ip", "netns", "exec", topo.sender_ns, "iperf3", "-c", addr,
                                  "-p", str(IPERF3_PORT), "-l", f"{size // 1024}K", "-C", "cubic",
                                  "-t", str(duration), "-J"],
                                 capture_output=True, text=True, timeout=duration + 30)
            srv.finish(5)
        finally:
            srv.kill()
        if cli.returncode != 0:
            raise RuntimeError(f"iperf3 -c: exit {cli.returncode}: {cli.stdout[-300:]} {cli.stderr}")
        end = json.loads(cli.stdout)["end"]
        return {"recv_gbps": end["sum_received"]["bits_per_second"] / 1e9,
                "send_gbps": end["sum_sent"]["bits_per_second"] / 1e9,
                "retrans": end["sum_sent"].get("retransmits"),
                "cc": end.get("sender_tcp_congestion"),
                "cpu_s_per_gb": _per_gb(_children_cpu() - cpu0, end["sum_received"]["bytes"])}


def _per_gb(cpu_s, nbytes):
    return cpu_s / (nbytes / 1e9) if nbytes else None


def _fmt_run(r):
    cpu = r.get("cpu_s_per_gb")
    cpu = f", {cpu:.3f} CPU s/GB" if cpu is not None else ""
    return f"{r['recv_gbps']:.2f} Gbit/s (retrans {r['retrans']}, {r['cc']}{cpu})"


def section_iperf3(b):
    """Our one-copy and two-copy beside iperf3 -l 64K -C cubic, 64 KiB, 1 thread."""
    size, dur, rounds = 65536, b.args.duration, b.args.rounds
    strategies = ("one-copy", "two-copy")
    lines = [
        "## Workloads beside iperf3",
        "",
        f"64 KiB messages, 1 thread/stream, cubic on both, {dur:g} s per run, {rounds} rounds. "
        "Each round runs one-copy, iperf3, two-copy (reversed every other round), so iperf3 is "
        "always next to both. Throughput is the receiver's (netio-client: first byte to EOF; "
        "iperf3: `sum_received`); the ratio is ours / iperf3 within a round: median (min, max). "
        "CPU s/GB: user + system time of sender and receiver per GB received (lower is better); "
        "its ratio is ours / iperf3 within a round. Both senders write 64 KiB per call and both "
        "receivers read up to 64 KiB per call. two-copy makes one more user-space copy per "
        "message by design (its serialization memcpy), so it should sit a little below one-copy.",
        "",
        "| transport | strategy | ours Gbit/s | iperf3 Gbit/s | **ratio ours/iperf3** | "
        "sender-side ratio | CPU s/GB ours | CPU s/GB iperf3 | CPU ratio ours/iperf3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    data = {}
    for transport in b.args.transports:
        with Topology(transport) as topo:
            variants = [
                ("one-copy", lambda t=topo: b.ours(t, "one-copy", size, dur)),
                ("iperf3", lambda t=topo: b.iperf3(t, size, dur)),
                ("two-copy", lambda t=topo: b.ours(t, "two-copy", size, dur)),
            ]
            res = pairs.run_interleaved(rounds, variants,
                                        log=lambda m, tr=transport: log(f"[{tr}] {m}"))
        data[transport] = res
        ref = {k: [r[k] for r in res["iperf3"]] for k in ("recv_gbps", "send_gbps", "cpu_s_per_gb")}
        for st in strategies:
            ours = {k: [r[k] for r in res[st]] for k in ref}
            cells = [
                pairs.fmt(pairs.summary(ours["recv_gbps"])),
                pairs.fmt(pairs.summary(ref["recv_gbps"])),
                "**" + pairs.fmt(pairs.summary(pairs.paired_ratios(ours["recv_gbps"],
                                                                   ref["recv_gbps"]))) + "**",
                pairs.fmt(pairs.summary(pairs.paired_ratios(ours["send_gbps"], ref["send_gbps"]))),
                pairs.fmt(pairs.summary(ours["cpu_s_per_gb"]), 3),
                pairs.fmt(pairs.summary(ref["cpu_s_per_gb"]), 3),
                pairs.fmt(pairs.summary(pairs.paired_ratios(ours["cpu_s_per_gb"],
                                                            ref["cpu_s_per_gb"]))),
            ]
            lines.append(f"| {transport} | {st} | " + " | ".join(cells) + " |")
    lines += ["", "Every run, in round order (receiver Gbit/s, sender retransmits, congestion "
              "control, CPU s/GB):", ""]
    for transport, res in data.items():
        for name, runs in res.items():
            lines.append(f"- {transport} {name}: " + "; ".join(_fmt_run(r) for r in runs))
    return "\n".join(lines) + "\n"


SECTIONS = [
    ("iperf3", section_iperf3),
]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="interleaved rounds (>= 5)")
    ap.add_argument("--duration", type=int, default=2,
                    help="whole seconds per run (iperf3 -t takes whole seconds)")
    ap.add_argument("--transports", nargs="+", default=["loopback", "veth"],
                    choices=["loopback", "veth"], help="transports to measure")
    ap.add_argument("--only", action="append", choices=[n for n, _ in SECTIONS],
                    help="run only this section (repeatable)")
    ap.add_argument("--out", default=RESULTS, help="markdown file to write")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.duration <= 0:
        ap.error("--rounds and --duration must be positive")
    if args.rounds < 5:
        log(f"note: {args.rounds} rounds; comparisons on this machine want at least 5")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces)")
    for exe in ("netio-server", "netio-client"):
        if not os.access(os.path.join(BUILD, exe), os.X_OK):
            ap.error(f"{BUILD}/{exe} is not built (make, or set NETIO_BUILD)")

    m = machine()
    head = ["# netio-trace bench results", "",
            f"- machine: {m['nproc']} CPUs, {m['model']}",
            f"- kernel: {m['kernel']} (system default congestion control: {m['default_cc']})",
            f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average at start: "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the machine skews "
            "every number)",
            f"- BPF programs loaded at start: {bpf_programs()}",
            f"- command: `python -m bench.run {' '.join(argv if argv is not None else sys.argv[1:])}`",
            ""]
    b = Bench(args)
    body = []
    t0 = time.monotonic()
    for name, fn in SECTIONS:
        if args.only and name not in args.only:
            continue
        log(f"== section {name}")
        body.append(fn(b))
    text = "\n".join(head) + "\n" + "\n".join(body)
    text += (f"\n_total bench time: {time.monotonic() - t0:.0f} s; load average at the end: "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; BPF programs loaded at the end: "
             f"{bpf_programs()}_\n")
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
