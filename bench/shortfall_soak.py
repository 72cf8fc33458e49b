"""The zero-copy shortfall soak (bench/NOTES.md, the end of "Drops"): the zero-copy cases of
test_exact_bytes (loopback and veth, 1 KiB and 64 KiB) run over and over under one
`netio-tracer --control`, as the test runs them, each checked for the bytes the test checks:
the server's zero-copy bytes, the snapshot's, the sum of the namespaces', drops. Far cheaper than pytest rounds (no
collection, namespaces made once).

    .venv/bin/python -m bench.shortfall_soak [--runs N] [--build DIR] [--log FILE]
                                             [--cases loopback:1024,veth:65536,...]
                                             [--keep-going] [--restart-every N] [--small]
                                             [--seconds S]

A run's line in the log: its number, case, seconds, and on a failure what was short. With a
debug build (make BUILD=build-dbg BPF_DEFS=-DNETIO_SHORTFALL_DEBUG, bpf/shortfall_debug.h)
the events its programs logged are written after the run that made them, kernel stacks
symbolized. The last line: runs, failures, seconds. Exit 0 when none failed, 1 when one did,
2 on bad arguments. Needs root and a build.
"""
import argparse
import bisect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from netio_trace.system.netns import Topology
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening
from netio_trace.tracer import ControlTracer, TracerError

CASES = ("loopback:1024", "loopback:65536", "veth:1024", "veth:65536")
COUNTS = {1024: 10000, 65536: 1000}     # the test's (tests/integration/test_tracer.py)
SMALL_COUNTS = {1024: 500, 65536: 150}  # its counts in the kernel matrix
PIN = "/sys/fs/bpf"
SFD_MAPS = ("sfd_conns", "sfd_events", "sfd_misc")
FTRACE = "/sys/kernel/tracing/instances/netio-shortfall"
# a witness that is not BPF (--ftrace): the kernel's own trace events of the xmit path, in a
# tracefs instance of ours, on the clock bpf_ktime_get_ns reads
FTRACE_EVENTS = ("net/net_dev_queue", "net/net_dev_start_xmit", "net/netif_rx",
                 "net/netif_receive_skb")
TIMEOUT = 60


def parse_args(argv):
    p = argparse.ArgumentParser(prog="shortfall_soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10000)
    p.add_argument("--build", default=os.environ.get("NETIO_BUILD", "build"))
    p.add_argument("--log", default="bench/shortfall-soak.log")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--keep-going", action="store_true", help="count a failure and go on")
    p.add_argument("--ftrace", action="store_true",
                   help="also record the xmit path's trace events in a tracefs instance; its "
                        "buffer is saved beside the log after a run with debug events")
    p.add_argument("--seconds", type=float, default=0,
                   help="stop after the run that ends past this many seconds (0: after --runs)")
    p.add_argument("--small", action="store_true",
                   help="the kernel matrix's message counts (NETIO_VMTEST=1 in the test), for "
                        "a guest under QEMU/TCG")
    p.add_argument("--restart-every", type=int, default=200,
                   help="start a new tracer after this many runs (as pytest rounds do)")
    a = p.parse_args(argv)
    cases = []
    for c in a.cases.split(","):
        transport, _, size = c.partition(":")
        if transport not in ("loopback", "veth") or not size.isdigit() or int(size) not in COUNTS:
            p.error(f"case {c!r}: TRANSPORT:SIZE, TRANSPORT loopback or veth, SIZE 1024 or 65536")
        cases.append((transport, int(size)))
    if a.runs < 1:
        p.error("--runs must be at least 1")
    if not os.access(os.path.join(a.build, "netio-tracer"), os.X_OK):
        p.error(f"no netio-tracer in {a.build} (make BUILD={a.build} all)")
    if os.geteuid() != 0:
        p.error("needs root (BPF, namespaces)")
    a.case_list = cases
    a.counts = SMALL_COUNTS if a.small else COUNTS
    return a


class Kallsyms:
    """Kernel addresses to function+offset, from /proc/kallsyms."""

    def __init__(self):
        addrs, names = [], []
        with open("/proc/kallsyms") as f:
            for line in f:
                addr, kind, name = line.split()[:3]
                if kind in "tTwW":
                    addrs.append(int(addr, 16))
                    names.append(name)
        order = sorted(range(len(addrs)), key=addrs.__getitem__)
        self.addrs = [addrs[i] for i in order]
        self.names = [names[i] for i in order]

    def name(self, ip):
        i = bisect.bisect_right(self.addrs, ip) - 1
        return f"{self.names[i]}+{ip - self.addrs[i]:#x}" if i >= 0 else hex(ip)


def bpftool_json(*args):
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def key_words(n):
    return [str(b) for b in n.to_bytes(4, "little")]


def debug_events(syms):
    """The events the debug build logged since the last call (and forgets them), or None
    where the build has none."""
    if not os.path.exists(f"{PIN}/sfd_misc"):
        return None
    n = bpftool_json("map", "lookup", "pinned", f"{PIN}/sfd_misc", "key", *key_words(0))
    count = n["formatted"]["value"]
    events = []
    for i in range(min(count, 64)):
        e = bpftool_json("map", "lookup", "pinned", f"{PIN}/sfd_events", "key", *key_words(i))
        ev = e["formatted"]["value"]
        ev["stack"] = [syms.name(ip) for ip in ev["stack"] if ip]
        events.append(ev)
    if count:
        subprocess.run(["bpftool", "map", "update", "pinned", f"{PIN}/sfd_misc", "key",
                        *key_words(0), "value", *["0"] * 8], check=True)
    return {"count": count, "events": events}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def ftrace_start():
    """Our tracefs instance, its events of the xmit path on (len > 100: data skbs only)."""
    os.makedirs(FTRACE, exist_ok=True)
    write(f"{FTRACE}/trace_clock", "mono")
    write(f"{FTRACE}/buffer_size_kb", "65536")
    if os.path.exists(f"{FTRACE}/options/hash-ptr"):
        write(f"{FTRACE}/options/hash-ptr", "0")
    for ev in FTRACE_EVENTS:
        write(f"{FTRACE}/events/{ev}/filter", "len > 100")
        write(f"{FTRACE}/events/{ev}/enable", "1")


def ftrace_stop():
    if not os.path.isdir(FTRACE):
        return
    for ev in FTRACE_EVENTS:
        write(f"{FTRACE}/events/{ev}/enable", "0")
    os.rmdir(FTRACE)


def ftrace_save(path):
    with open(f"{FTRACE}/trace") as src, open(path, "w") as dst:
        dst.write(src.read())
    write(f"{FTRACE}/trace", "")


def one_run(tracer, topo, size, count, tmp, build):
    """One zero-copy run as test_exact_bytes makes it; returns (failure text or None, info)."""
    srv_out, srv_err, cli_out, cli_err = (os.path.join(tmp, n) for n in
                                          ("s.json", "s.err", "c.json", "c.err"))
    srv = GatedProcess([os.path.join(build, "netio-server"), "--strategy", "zero-copy", "--size",
                        str(size), "--threads", "1", "--port", "0", "--addr", "0.0.0.0",
                        "--netns", topo.sender_ns, "--count", str(count), "--cc", "cubic",
                        *READY_ARGS], srv_out, srv_err, ready=True)
    tracer.clear()
    for ns in topo.namespaces:
        tracer.netns_add(ns)
    tracer.pid_add(srv.pid)
    tracer.reset()
    t_reset = time.monotonic_ns()       # bpf_ktime_get_ns's clock: the debug events' ts
    srv.release()
    cli = None
    try:
        port, _ = wait_listening(srv.ready, TIMEOUT)
        if not port:
            return f"server exited: {open(srv_err).read().strip()}", {}
        cli = GatedProcess([os.path.join(build, "netio-client"), "--addr", topo.server_addr,
                            "--port", str(port), "--threads", "1", "--size", str(size),
                            "--netns", topo.receiver_ns], cli_out, cli_err)
        tracer.pid_add(cli.pid)
        cli.release()
        if srv.wait(TIMEOUT) != 0 or cli.wait(TIMEOUT) != 0:
            return f"workload failed: {open(srv_err).read()} {open(cli_err).read()}", {}
    finally:
        srv.kill()
        if cli:
            cli.kill()
    snap = tracer.snapshot(os.path.join(tmp, "snap.json"))
    why, info = check(snap, srv.pid, srv_out, port)
    info["t_reset_ns"] = t_reset
    return why, info


def check(snap, spid, srv_out, port):
    """What test_exact_bytes checks of a zero-copy run's bytes (check_exact)."""
    with open(srv_out) as f:
        s = json.load(f)
    sent = s["bytes"]
    sp = snap["processes"].get(str(spid), {})
    netns_zc = sum(n["zc_tx_bytes"] for n in snap["netns"].values())
    info = {"port": port, "sent": sent, "process_zc": sp.get("zc_tx_bytes"),
            "zc": snap["zc_tx_bytes"], "netns_zc": netns_zc,
            "fallback": snap["fallback_copy_bytes"],
            "zerocopy": snap["zerocopy"], "drops": snap["drops"], "tcp": s.get("tcp"),
            "server_zc": s.get("zerocopy"),
            "skipped": {k: v["skipped"] for k, v in snap["self"]["programs"].items()
                        if v["skipped"]}}
    zc = snap["zerocopy"]
    if snap["attach"]["pinning"] == "tp_btf":     # bytes no program of ours saw leave
        info["missed_by_both"] = (sent - zc.get("zc_bytes_seen_at_xmit", sent)
                                  - zc["zc_bytes_unseen_at_xmit"])
    if snap["drops"]:
        return f"drops {snap['drops_by_cause']}", info
    if sp.get("zc_tx_bytes") != sent:
        return f"process zc_tx_bytes {sp.get('zc_tx_bytes')} != sent {sent}", info
    if snap["zc_tx_bytes"] != sent:
        return f"zc_tx_bytes {snap['zc_tx_bytes']} != sent {sent}", info
    if snap["attach"]["pinning"] == "tp_btf" and netns_zc != sent:   # else not per netns
        return f"netns zc_tx_bytes {netns_zc} != sent {sent}", info
    return None, info


def start_tracer(build, log_dir):
    t = ControlTracer(binary=os.path.join(build, "netio-tracer"), extra_args=("--no-sample",),
                      log_path=os.path.join(log_dir, "tracer.log"))
    return t.start()


def soak(a, log):
    syms = Kallsyms()
    for m in SFD_MAPS:
        if os.path.exists(f"{PIN}/{m}"):
            os.unlink(f"{PIN}/{m}")
    failed, start = 0, time.monotonic()
    runs = unseen_runs = unseen_skbs = dropped = both_runs = both_bytes = 0
    with tempfile.TemporaryDirectory(prefix="shortfall-") as tmp, \
            Topology("loopback") as lo, Topology("veth") as veth:
        topos = {"loopback": lo, "veth": veth}
        tracer = None
        if a.ftrace:
            ftrace_start()
        try:
            while runs < a.runs and not (a.seconds and time.monotonic() - start > a.seconds):
                if tracer is None or runs % a.restart_every == 0:
                    if tracer:
                        tracer.close()
                    tracer = start_tracer(a.build, tmp)
                transport, size = a.case_list[runs % len(a.case_list)]
                t0 = time.monotonic()
                why, info = one_run(tracer, topos[transport], size, a.counts[size], tmp, a.build)
                runs += 1
                dbg = debug_events(syms)
                line = {"run": runs, "case": f"{transport}:{size}",
                        "s": round(time.monotonic() - t0, 3), "load": os.getloadavg()[0]}
                unseen = info.get("zerocopy", {}).get("zc_skbs_unseen_at_xmit", 0)
                if unseen:      # seen at their receive (bpf/copy_tp.bpf.c, tcp_zc_unseen)
                    unseen_runs += 1
                    unseen_skbs += unseen
                    line.update(unseen_skbs=unseen, info=info)
                both = info.get("missed_by_both", 0)
                if both:        # the second kind: counted at the send all the same
                    both_runs += 1
                    both_bytes += both
                    line.update(missed_by_both=both, info=info)
                if why:
                    failed += 1
                    dropped += why.startswith("drops")
                    line.update(failure=why, info=info)
                if dbg and dbg["count"]:
                    line["debug"] = dbg
                    if a.ftrace:
                        line["ftrace"] = f"{a.log}.run{runs}.ftrace"
                        ftrace_save(line["ftrace"])
                elif a.ftrace:
                    write(f"{FTRACE}/trace", "")   # each run's events from its start
                log.write(json.dumps(line) + "\n")
                log.flush()
                if why and not a.keep_going:
                    break
        finally:
            if tracer:
                tracer.close()
            if a.ftrace:
                ftrace_stop()
    secs = time.monotonic() - start
    summary = (f"{runs} runs, {failed} failed ({failed - dropped} short, {dropped} on drops), "
               f"{unseen_runs} runs with {unseen_skbs} skbs unseen at xmit, seen at their "
               f"receive; {both_runs} runs with {both_bytes} bytes neither saw; {secs:.0f} s")
    log.write(json.dumps({"end": summary}) + "\n")
    return failed, summary


def main(argv=None):
    a = parse_args(argv)
    # SIGTERM ends the soak as ^C does: namespaces, tracer and tracefs instance cleaned up
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with open(a.log, "a") as log:
        log.write(json.dumps({"start": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": a.runs,
                              "build": a.build, "cases": a.cases,
                              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                                       capture_output=True, text=True).stdout.strip(),
                              "loadavg": os.getloadavg()}) + "\n")
        try:
            failed, summary = soak(a, log)
        except (TracerError, OSError, subprocess.CalledProcessError, TimeoutError) as e:
            print(f"shortfall_soak: {e}", file=sys.stderr)
            return 2
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
