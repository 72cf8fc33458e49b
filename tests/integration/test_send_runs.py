"""A thread's plain sends on one socket wait in its own storage, a run, until it changes socket
or size, exits, or a snapshot or reset is taken (bpf/send_run.bpf.h); every byte still reaches
its socket's record once (needs root). Two threads share one socket, one thread switches
sockets and sizes at every send, a thread exits with its run not flushed, and snapshots are
taken while they send: each socket's bytes and calls never fall from one snapshot to the next
and never pass what was sent, and at the end they are exactly what was sent, and sum to the
process's. A reset between two parts, with the threads alive, starts every record afresh."""
import json
import select
import subprocess
import sys

import pytest

from conftest import needs_built, needs_root
from test_socket_sums import check_sums, sockets_of
from test_tracer import VMTEST, Tracer

pytestmark = [needs_root("BPF"), needs_built("netio-tracer")]

MID_SNAPSHOTS = 5
EARLY_SENDS = 100 if VMTEST else 1000   # QEMU/TCG runs a guest's calls about ten times slower

# Three TCP connections over loopback, drained by threads of the same process. Threads a and b
# both send 1 000-byte messages on connection 0; thread c alternates connections 1 and 2 and
# cycles through sizes of three send_size slots; thread d sends EARLY_SENDS 5 000-byte
# messages on connection 2 and exits (a new d each part). a, b and c live through both parts,
# so that their runs span the reset between them, and send until told to stop. The client
# sockets' local ports go to stdout. A part starts on "g" from stdin (the tracer follows the
# process first) and stops on "s"; once all it sent is received, it prints the bytes it sent
# on each connection.
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
stop = threading.Event()
sent = [[0, 0, 0] for _ in range(4)]        # per sending thread, per connection
def each_part(send, me):
    def run():
        for _ in range(2):
            parts.wait(); send(me); parts.wait()
    return run
def shared(me):
    while not stop.is_set():
        conns[0].sendall(b"a" * 1000); sent[me][0] += 1000
def switching(me):
    sizes, i = (100, 3000, 3000, 70000), 0
    while not stop.is_set():
        conns[1 + i % 2].sendall(b"c" * sizes[i % 4]); sent[me][1 + i % 2] += sizes[i % 4]
        i += 1
def early():
    for _ in range({EARLY_SENDS}):
        conns[2].sendall(b"d" * 5000); sent[3][2] += 5000
ts = [threading.Thread(target=each_part(f, me)) for me, f in enumerate((shared, shared, switching))]
[t.start() for t in ts]
print(json.dumps([c.getsockname()[1] for c in conns]), flush=True)
for part in range(2):
    if sys.stdin.read(1) != "g":
        break
    before = [sum(s[i] for s in sent) for i in range(3)]
    stop.clear(); parts.wait()
    d = threading.Thread(target=early); d.start(); d.join()
    if sys.stdin.read(1) != "s":
        break
    stop.set(); parts.wait()
    total = [sum(s[i] for s in sent) for i in range(3)]
    deadline = time.monotonic() + 60
    while got != total:                     # all received: the process is quiet
        assert time.monotonic() < deadline, (got, total)
        time.sleep(0.01)
    print(json.dumps([t - b for t, b in zip(total, before)]), flush=True)
stop.set()
[t.join() for t in ts]
[c.close() for c in conns]
[t.join() for t in drains]
"""


def sent_on(snap, pid, ports):
    """Per connection (by local port): its record's bytes, send calls and size histogram's
    sum."""
    by_port = {int(s["local"].rsplit(":", 1)[1]): s for s in sockets_of(snap, pid)}
    out = []
    for port in ports:
        s = by_port.get(port)
        out.append((s["tx_bytes"], s["tx_calls"], sum(s["send_size_log2"].values()))
                   if s else (0, 0, 0))
    return out


def run_part(t, p, ports, tmp_path):
    """One part of the script, MID_SNAPSHOTS snapshots taken while it sends: those, what it
    sent per connection, and the snapshot after it."""
    p.stdin.write(b"g")
    p.stdin.flush()
    mid = [sent_on(t.snapshot(str(tmp_path / "mid.json")), p.pid, ports)
           for _ in range(MID_SNAPSHOTS)]
    p.stdin.write(b"s")
    p.stdin.flush()
    ready, _, _ = select.select([p.stdout], [], [], 120)
    assert ready, "the script did not end its part"
    sent = json.loads(p.stdout.readline())
    return mid, sent, t.snapshot(str(tmp_path / "end.json"))


def check_part(mid, sent, end_snap, pid, ports):
    end = sent_on(end_snap, pid, ports)
    assert [b for b, _, _ in end] == sent, (end, sent)
    for _, calls, hist in end:
        assert hist == calls >= 1       # every send in its size histogram once
    for before, after in zip(mid, mid[1:] + [end]):
        for (b0, c0, _), (b1, c1, _), whole in zip(before, after, sent):
            assert b0 <= b1 <= whole and c0 <= c1, (before, after, sent)
    assert end_snap["drops"] == 0, end_snap.get("drops_by_cause")
    check_sums(end_snap)


def test_runs_of_sends_reach_their_sockets_exactly(tmp_path):
    t = Tracer("--no-latency", log=str(tmp_path / "tracer.log"))
    p = subprocess.Popen([sys.executable, "-B", "-c", SCRIPT], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        ports = json.loads(p.stdout.readline())
        t.ok(f"pid add {p.pid}")
        mid, sent, end_snap = run_part(t, p, ports, tmp_path)
        assert mid[0] != mid[-1], f"nothing was sent between the snapshots: {mid}"
        check_part(mid, sent, end_snap, p.pid, ports)
        # a reset zeroes the records the threads' runs name: the second part's bytes are
        # counted afresh, none of them lost to a run begun before the reset
        t.ok("reset")
        mid, sent, end_snap = run_part(t, p, ports, tmp_path)
        check_part(mid, sent, end_snap, p.pid, ports)
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        assert t.close() == 0
