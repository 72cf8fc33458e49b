"""A peer that agrees: bcc's tcptop and netio-trace trace the same workload
and count the same TCP bytes per process, within tcptop's rounding.

tcptop (Debian's bpfcc-tools) compiles its BPF program at start against the running kernel's
headers (/lib/modules/$(uname -r)/build), which Debian ships for its own kernels only: this
runs in Debian's 6.1 guest (tests/vm/run-vmtest.sh, NETIO_VMTEST=1), never on the host, where
it is skipped with the reason. In the guest, bcc or headers missing is a failure, not a skip
(make deps installs python3-bpfcc, bpfcc-tools and linux-headers for the 6.1 image).

tcptop counts per (pid, comm, addresses, ports) what tcp_sendmsg returned and what
tcp_cleanup_rbuf was told was copied, and prints each in KiB rounded down (int(bytes / 1024));
its per-process count is the sum of its rows, each short of the bytes by less than 1 KiB.
The test prints which tool counted what.
"""
import os
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import needs_built, needs_root
from netio_trace.system.netns import Topology
from test_tracer import Tracer, proc, run_workload

VMTEST = os.environ.get("NETIO_VMTEST") == "1"
TCPTOP = "/usr/sbin/tcptop-bpfcc"
HEADERS = f"/lib/modules/{os.uname().release}/build"
# bcc compiles tcptop at start, slow under QEMU/TCG (bench/NOTES.md, "The guest")
READY_TIMEOUT = 400
STRATEGY, SIZE, THREADS, COUNT = "one-copy", 1000, 2, 300
HELLO = 4        # bytes each netio-client connection sends first (its index)
ROW = re.compile(r"^(\d+)\s+(.*?)\s+(\S+:\d+)\s+(\S+:\d+)\s+(\d+)\s+(\d+)\s*$")

pytestmark = [pytest.mark.skipif(not VMTEST, reason="vm-only: needs the running kernel's "
                                 "headers, which exist for Debian's 6.1 guest (make vmtest)"),
              needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]


def require_bcc():
    """Fail loudly (this runs only where make deps put bcc and the headers) with what is
    missing."""
    missing = []
    if not os.access(TCPTOP, os.X_OK):
        missing.append(f"{TCPTOP} (bpfcc-tools)")
    if not os.path.isdir(os.path.join(HEADERS, "include")):
        missing.append(f"{HEADERS}/include (linux-headers-{os.uname().release})")
    r = subprocess.run(["/usr/bin/python3", "-c", "import bcc"], capture_output=True, text=True)
    if r.returncode != 0:
        missing.append(f"python3's bcc module (python3-bpfcc): {r.stderr.strip()[-200:]}")
    if missing:
        pytest.fail("the peer check needs " + "; ".join(missing) + " (make deps)")


class Tcptop:
    """tcptop-bpfcc with one interval longer than the test: its totals are printed when it is
    interrupted (SIGINT), once."""

    def __init__(self, log):
        self.log = log
        err = open(log, "wb")
        self.proc = subprocess.Popen([TCPTOP, "-C", "-S", "3600", "1"], stdout=subprocess.PIPE,
                                     stderr=err, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        err.close()
        self.started = time.monotonic()

    def wait_ready(self):
        """Seconds bcc took to compile and attach; fails with tcptop's stderr if it did not."""
        r, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT)
        line = self.proc.stdout.readline() if r else f"nothing in {READY_TIMEOUT} s"
        waited = time.monotonic() - self.started
        assert line.startswith("Tracing..."), \
            f"tcptop did not start ({waited:.0f} s): {line!r} {self.stderr()}"
        return waited

    def stderr(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-2000:]

    def totals(self):
        """{pid: [rx_kib, tx_kib, rows]} from the one table it prints when interrupted."""
        os.kill(self.proc.pid, signal.SIGINT)
        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, f"tcptop status {self.proc.returncode}: {self.stderr()}"
        by_pid = {}
        for line in out.splitlines():
            m = ROW.match(line)
            if m:
                t = by_pid.setdefault(int(m.group(1)), [0, 0, 0])
                t[0] += int(m.group(5))
                t[1] += int(m.group(6))
                t[2] += 1
        return by_pid, out

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def within_rounding(nbytes, kib, rows):
    """tcptop's rows each floor their bytes to KiB: the sum is short by less than 1 KiB a row."""
    return 0 <= nbytes - 1024 * kib < 1024 * max(rows, 1)


def table(s, c, snap, spid, cpid, peer, compile_s):
    lines = [f"peer check on {os.uname().release}: {STRATEGY}, {THREADS} connections x {COUNT} "
             f"x {SIZE} B over veth; bcc's tcptop compiled and attached in {compile_s:.0f} s",
             f"{'process':<13} {'pid':>6}  {'counted by':<24} {'sent':>16} {'received':>16}"]
    for name, pid, own in (("netio-server", spid, s), ("netio-client", cpid, c)):
        p = proc(snap, pid)
        rx, tx, rows = peer.get(pid, [0, 0, 0])
        lines += [
            f"{name:<13} {pid:>6}  {'the workload itself':<24} "
            + (f"{own['bytes']:>14} B {'':>16}" if own is s else f"{'':>16} {own['bytes']:>14} B"),
            f"{'':<13} {'':>6}  {'netio-trace':<24} {p['tx_bytes']:>14} B "
            f"{p['rx_copy_bytes']:>14} B",
            f"{'':<13} {'':>6}  {f'bcc tcptop ({rows} rows)':<24} {tx:>12} KiB {rx:>12} KiB"]
    return "\n".join(lines)


def test_tcptop_and_netio_trace_agree_per_process(tmp_path):
    require_bcc()
    top = Tcptop(str(tmp_path / "tcptop.err"))
    tracer = None
    try:
        compile_s = top.wait_ready()
        tracer = Tracer(log=str(tmp_path / "tracer.log"))
        with Topology("veth") as topo:
            s, c, snap, spid, cpid = run_workload(tracer, topo, tmp_path, STRATEGY, SIZE, COUNT,
                                                  threads=THREADS)
        peer, raw = top.totals()
    finally:
        top.stop()
        if tracer is not None:
            assert tracer.close() == 0
    print(table(s, c, snap, spid, cpid, peer, compile_s))
    print("tcptop's own output:\n" + raw)
    sent, hello = THREADS * COUNT * SIZE, THREADS * HELLO
    assert s["bytes"] == c["bytes"] == sent
    sp, cp = proc(snap, spid), proc(snap, cpid)
    # netio-trace: exact, to the byte (the messages one way, the clients' hellos the other)
    assert (sp["tx_bytes"], cp["rx_copy_bytes"]) == (sent, sent)
    assert (cp["tx_bytes"], sp["rx_copy_bytes"]) == (hello, hello)
    # tcptop: the same bytes per process, each of its rows rounded down to KiB
    assert spid in peer and cpid in peer, f"tcptop saw not both workload processes:\n{raw}"
    for p, (rx_kib, tx_kib, rows) in ((sp, peer[spid]), (cp, peer[cpid])):
        assert within_rounding(p["tx_bytes"], tx_kib, rows), (p["tx_bytes"], tx_kib, rows)
        assert within_rounding(p["rx_copy_bytes"], rx_kib, rows), \
            (p["rx_copy_bytes"], rx_kib, rows)
