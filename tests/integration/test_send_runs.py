"""A thread's plain sends on one socket wait in its own storage, a run, until it changes socket
or size, exits, or a snapshot or reset is taken (bpf/send_run.bpf.h); every byte still reaches
its socket's record once (needs root). Two threads share one socket, one thread switches
sockets and sizes at every send, threads exit with runs not flushed, and snapshots are taken
mid-send: each socket's bytes and calls never fall from one snapshot to the next and never
pass what was sent, and at the end they are exactly what was sent, and sum to the process's."""
import json
import select
import subprocess
import sys

import pytest

from conftest import needs_built, needs_root
from test_socket_sums import check_sums, sockets_of
from test_tracer import VMTEST, Tracer

pytestmark = [needs_root("BPF"), needs_built("netio-tracer")]

ROUNDS = 300 if VMTEST else 3000    # QEMU/TCG runs a guest's calls about ten times slower

def expected_bytes():
    """Bytes sent on each connection in one part."""
    per = [2 * ROUNDS * 1000, 0, 0]
    sizes = (100, 3000, 3000, 70000)
    for i in range(ROUNDS):
        per[1 + i % 2] += sizes[i % 4]
    per[2] += ROUNDS // 3 * 5000
    return per


# Three TCP connections over loopback, drained by threads of the same process. Threads a and b
# both send 1 000-byte messages on connection 0; thread c alternates connections 1 and 2 and
# cycles through sizes of three send_size slots; thread d sends 5 000-byte messages on
# connection 2 for a third of the rounds and exits (a new d each part). a, b and c live through
# both parts, so that their runs span the reset between them. The client sockets' local ports
# go to stdout; each part starts on a "g" from stdin (the tracer follows the process first)
# and prints "done" once its bytes are all received.
SCRIPT = f"""
import json, socket, sys, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
conns = [socket.create_connection(srv.getsockname()) for _ in range(3)]
got = [0, 0, 0]
def drain(i, s):
    while True:
        n = len(s.recv(1 << 16))
        if not n:
            break
        got[i] += n
drains = [threading.Thread(target=drain, args=(i, srv.accept()[0])) for i in range(3)]
[t.start() for t in drains]
parts = threading.Barrier(4)
def each_part(send):
    def run():
        for _ in range(2):
            parts.wait(); send(); parts.wait()
    return run
def shared():
    for _ in range({ROUNDS}):
        conns[0].sendall(b"a" * 1000)
def switching():
    sizes = (100, 3000, 3000, 70000)
    for i in range({ROUNDS}):
        conns[1 + i % 2].sendall(b"c" * sizes[i % 4])
def early():
    for _ in range({ROUNDS} // 3):
        conns[2].sendall(b"d" * 5000)
ts = [threading.Thread(target=each_part(f)) for f in (shared, shared, switching)]
[t.start() for t in ts]
print(json.dumps([c.getsockname()[1] for c in conns]), flush=True)
for part in range(2):
    if sys.stdin.read(1) != "g":
        break
    parts.wait()
    d = threading.Thread(target=early); d.start(); d.join()
    parts.wait()
    deadline = time.monotonic() + 60
    while got != [(part + 1) * n for n in {expected_bytes()}]:    # all received: quiet
        assert time.monotonic() < deadline, got
        time.sleep(0.01)
    print("done", flush=True)
[t.join() for t in ts]
[c.close() for c in conns]
[t.join() for t in drains]
"""


def sent_on(snap, pid, ports):
    """Per connection (by local port): its record's bytes and send calls."""
    by_port = {int(s["local"].rsplit(":", 1)[1]): s for s in sockets_of(snap, pid)}
    out = []
    for port in ports:
        s = by_port.get(port)
        out.append((s["tx_bytes"], s["tx_calls"], sum(s["send_size_log2"].values()))
                   if s else (0, 0, 0))
    return out


def run_part(t, p, ports, tmp_path):
    """One part of the script, snapshots taken while it sends; the end snapshot."""
    p.stdin.write(b"g")
    p.stdin.flush()
    mid = []
    while not select.select([p.stdout], [], [], 0)[0]:
        mid.append(sent_on(t.snapshot(str(tmp_path / "mid.json")), p.pid, ports))
    assert p.stdout.readline() == b"done\n"
    end_snap = t.snapshot(str(tmp_path / "end.json"))
    return mid, end_snap


def check_part(mid, end_snap, pid, ports):
    want = expected_bytes()
    end = sent_on(end_snap, pid, ports)
    assert [b for b, _, _ in end] == want, (end, want)
    for bytes_, calls, hist in end:
        assert hist == calls >= 1       # every send in its size histogram once
    for before, after in zip(mid, mid[1:] + [end]):
        for (b0, c0, _), (b1, c1, _), w in zip(before, after, want):
            assert b0 <= b1 <= w and c0 <= c1, (before, after, want)
    assert end_snap["drops"] == 0, end_snap.get("drops_by_cause")
    check_sums(end_snap)


def test_runs_of_sends_reach_their_sockets_exactly(tmp_path):
    t = Tracer("--no-latency", log=str(tmp_path / "tracer.log"))
    p = subprocess.Popen([sys.executable, "-B", "-c", SCRIPT], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        ports = json.loads(p.stdout.readline())
        t.ok(f"pid add {p.pid}")
        mid, end_snap = run_part(t, p, ports, tmp_path)
        assert len(mid) >= 3, f"the part ended before three snapshots: {mid}"
        check_part(mid, end_snap, p.pid, ports)
        # a reset zeroes the records the threads' runs name: the second part's bytes are
        # counted afresh, none of them lost to a run begun before the reset
        t.ok("reset")
        mid, end_snap = run_part(t, p, ports, tmp_path)
        check_part(mid, end_snap, p.pid, ports)
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        assert t.close() == 0
