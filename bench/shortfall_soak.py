"""The zero-copy shortfall soak (bench/NOTES.md, the end of "Drops"): the zero-copy cases of
test_exact_bytes (loopback and veth, 1 KiB and 64 KiB) run over and over under one
`netio-tracer --control`, as the test runs them, each checked for the bytes the test checks:
the server's zero-copy bytes, the snapshot's, the sum of the namespaces', drops. Far cheaper than pytest rounds (no
collection, namespaces made once).

    .venv/bin/python -m bench.shortfall_soak [--runs N] [--build DIR] [--log FILE]
                                             [--cases loopback:1024,veth:65536,...]
                                             [--keep-going] [--restart-every N] [--small]
                                             [--seconds S]

A run's line in the log: its number, case, seconds, and on a failure what was short. The last
line: runs, failures, seconds. Exit 0 when none failed, 1 when one did, 2 on bad arguments.
Needs root and a build. The debug build that logged, per connection, what each of its
programs saw (and this soak's reader of its maps, and `--ftrace`) is kept on the git branch
`wip-shortfall-debug`, not here.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from bench import harness
from netio_trace.system.netns import Topology
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening
from netio_trace.tracer import ControlTracer, TracerError

CASES = ("loopback:1024", "loopback:65536", "veth:1024", "veth:65536")
COUNTS = {1024: 10000, 65536: 1000}     # the test's (tests/integration/test_tracer.py)
SMALL_COUNTS = {1024: 500, 65536: 150}  # its counts in the kernel matrix
TIMEOUT = 60


def parse_args(argv):
    p = argparse.ArgumentParser(prog="shortfall_soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10000)
    p.add_argument("--build", default=os.environ.get("NETIO_BUILD", "build"))
    p.add_argument("--log", default="bench/shortfall-soak.log")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--keep-going", action="store_true", help="count a failure and go on")
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


def one_run(tracer, topo, size, count, tmp, build):
    """One zero-copy run as test_exact_bytes makes it; returns (failure text or None, info)."""
    srv_out, srv_err, cli_out, cli_err = (os.path.join(tmp, n) for n in
                                          ("s.json", "s.err", "c.json", "c.err"))
    srv = GatedProcess([os.path.join(build, "netio-server"), "--strategy", "zero-copy", "--size",
                        str(size), "--threads", "1", "--port", "0", "--addr", "0.0.0.0",
                        "--netns", topo.sender_ns, "--count", str(count), "--cc", "cubic",
                        *READY_ARGS], srv_out, srv_err, ready=True)
    harness.release_followed(tracer, topo, srv, "zero-copy")
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
    return check(snap, srv.pid, srv_out, port)


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
    failed, start = 0, time.monotonic()
    runs = unseen_runs = unseen_skbs = dropped = both_runs = both_bytes = 0
    with tempfile.TemporaryDirectory(prefix="shortfall-") as tmp, \
            Topology("loopback") as lo, Topology("veth") as veth:
        topos = {"loopback": lo, "veth": veth}
        tracer = None
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
                line = {"run": runs, "case": f"{transport}:{size}",
                        "s": round(time.monotonic() - t0, 3), "load": os.getloadavg()[0]}
                unseen = info.get("zerocopy", {}).get("zc_skbs_unseen_at_xmit", 0)
                if unseen:      # seen at their receive (bpf/zc_skb.bpf.c, tcp_zc_unseen)
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
                log.write(json.dumps(line) + "\n")
                log.flush()
                if why and not a.keep_going:
                    break
        finally:
            if tracer:
                tracer.close()
    secs = time.monotonic() - start
    summary = (f"{runs} runs, {failed} failed ({failed - dropped} short, {dropped} on drops), "
               f"{unseen_runs} runs with {unseen_skbs} skbs unseen at xmit, seen at their "
               f"receive; {both_runs} runs with {both_bytes} bytes neither saw; {secs:.0f} s")
    log.write(json.dumps({"end": summary}) + "\n")
    return failed, summary


def main(argv=None):
    a = parse_args(argv)
    # SIGTERM ends the soak as ^C does: namespaces and tracer cleaned up
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
