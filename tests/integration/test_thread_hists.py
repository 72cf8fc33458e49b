"""Every timed call is in its process's latency histogram once, however it got there (needs
root): a thread's calls of its first two timed classes wait in its own storage until a flush
(its exit, or the iterator before a snapshot) takes them, those of its other classes go to
the process at once (bpf/thread_storage.bpf.h, thread_hist_count). Threads that time three
classes, exit at different moments with calls not flushed, while snapshots are taken
mid-run: each snapshot's timed calls of a class are close to its counted ones (calls end
during the snapshot), never fewer than the snapshot before, and at the end exactly."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import needs_built, needs_root
from test_tracer import VMTEST, Tracer

pytestmark = [needs_root("BPF"), needs_built("netio-tracer")]

THREADS = 6
CALLS = 600 if VMTEST else 3000      # QEMU/TCG runs a guest's calls about ten times slower

# Each thread sends CALLS datagrams with sendto and CALLS with sendmsg to its own UDP socket
# over loopback, and receives them with recvfrom: three timed classes a thread. Thread i stops
# after (i + 1) / THREADS of its calls, so that threads exit all through the run; it starts on
# a byte from stdin, so that the tracer follows the process before its first call.
SCRIPT = f"""
import socket, sys, threading
def work(i):
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", 0))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); addr = r.getsockname()
    for _ in range({CALLS} * (i + 1) // {THREADS}):
        s.sendto(b"x" * 100, addr); r.recvfrom(2048)
        s.sendmsg([b"y" * 100], [], 0, addr); r.recvfrom(2048)
sys.stdin.read(1)
ts = [threading.Thread(target=work, args=(i,)) for i in range({THREADS})]
[t.start() for t in ts]; [t.join() for t in ts]
"""
CLASSES = ("sendto", "sendmsg", "recvfrom")
PER_CLASS = {"sendto": 1, "sendmsg": 1, "recvfrom": 2}     # calls per iteration
ITERATIONS = sum(CALLS * (i + 1) // THREADS for i in range(THREADS))


def classes(snap, pid):
    sc = snap["processes"][str(pid)]["syscalls"]
    return {c: (sc[c]["count"], sc[c]["timed"], sum(sc[c]["hist_log2_ns"].values()))
            for c in CLASSES if c in sc}


@pytest.mark.parametrize("storage", ("made", "refused"))
def test_every_timed_call_is_in_the_histogram_once(tmp_path, monkeypatch, storage):
    """storage "refused": the kernel makes no thread's storage (as when its element cache is
    empty at a thread's first event), every event spills, and a call started in one spilled
    event ends in another (bpf/thread_spill.bpf.h, thread_pending): still counted and timed
    once each."""
    if storage == "refused":
        monkeypatch.setenv("NETIO_TEST_NO_THREAD_STORAGE", "1")
    # every call timed, so that each class's histogram must hold each of its calls
    t = Tracer("--latency-sample", "1", log=str(tmp_path / "tracer.log"))
    p = subprocess.Popen([sys.executable, "-B", "-c", SCRIPT], stdin=subprocess.PIPE)
    try:
        t.ok(f"pid add {p.pid}")
        p.stdin.write(b"g")
        p.stdin.close()
        mid = []
        while p.poll() is None:
            mid.append(classes(t.snapshot(str(tmp_path / "mid.json")), p.pid))
            time.sleep(0.02)
        assert p.wait() == 0
        end = classes(t.snapshot(str(tmp_path / "end.json")), p.pid)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        assert t.close() == 0
    assert len(mid) >= 3, f"the run ended before three snapshots: {mid}"
    for c in CLASSES:
        n = PER_CLASS[c] * ITERATIONS
        assert end[c] == (n, n, n), (c, end[c], n)
    before = {c: 0 for c in CLASSES}
    for m in mid:
        for c, (count, timed, in_hist) in m.items():
            assert timed == in_hist
            # calls that end between the snapshot's flush and its reading of the maps are in
            # one and not yet in the other (as they were before threads kept histograms);
            # spilled calls reach the maps as they end, all through the reading, so the bound
            # holds only where threads keep their counts (bench/NOTES.md, "A call started in a
            # spilled event")
            if storage == "made":
                assert abs(count - timed) <= 0.05 * count + 50, (c, m)
            assert timed >= before[c], (c, timed, before[c])
            before[c] = timed
    with open(tmp_path / "end.json") as f:
        snap = json.load(f)
    assert snap["drops"] == 0           # nothing lost that would excuse a miss
    if storage == "refused" and t.build != "compat":
        assert snap["thread_storage_spilled"] >= sum(end[c][0] for c in CLASSES)
