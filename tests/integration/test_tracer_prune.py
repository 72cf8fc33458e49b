"""netio-tracer --prune-exited (needs root): rounds of a process in a cgroup that opens many TCP
sockets, sends on each and ends. Each round's bytes are exact in the rewrites; the ended
process and its socket records stay while the reader takes no rewrite, and leave the tracer's
maps once it took one; the rounds together open
more sockets than the tracer has records (NETIO_MAX_SOCK_RECORDS): every one is recorded all
the same, because the ended rounds' records were given back. Without pruning the last round's
sockets would find no record (sockets_untracked)."""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from conftest import (TRACER, drain, in_cgroup, made_cgroups, needs_built,  # noqa: E402
                      needs_cgroup2, needs_root, read_trace, wait_for, wait_line)

ROUNDS, SOCKETS, BYTES = 3, 1600, 1000      # 4800 sockets: more than the 4096 records
TIMEOUT = 120

pytestmark = [needs_root("BPF, cgroups"), needs_built("netio-tracer"), needs_cgroup2()]

# SOCKETS connections to argv[1], BYTES each, all open at once; then it waits for a line
SENDER = ("import socket, sys\n"
          "port, n, size = map(int, sys.argv[1:4])\n"
          "socks = [socket.create_connection(('127.0.0.1', port)) for _ in range(n)]\n"
          "for s in socks:\n"
          "    s.sendall(b'x' * size)\n"
          "print('sent', flush=True)\n"
          "sys.stdin.readline()\n")


def _max_records():
    with open(os.path.join(REPO, "bpf", "netio.h")) as f:
        return int(re.search(r"#define NETIO_MAX_SOCK_RECORDS (\d+)", f.read()).group(1))


@pytest.fixture
def cgroup_dir():
    with made_cgroups(f"netio-prune-test-{os.getpid()}") as (path,):
        yield path


def _receive_all(lsock, stop):
    """Accept and read every connection to its end (a thread: the sender's sends complete)."""
    lsock.settimeout(0.2)
    conns = []
    while not stop.is_set():
        try:
            c, _ = lsock.accept()
            c.setblocking(False)
            conns.append(c)
        except socket.timeout:
            pass
        for c in list(conns):
            try:
                while c.recv(65536):
                    pass
                conns.remove(c)
                c.close()
            except BlockingIOError:
                pass
    for c in conns:
        c.close()


def _trace(path):
    """The last rewrite, taken (renamed away) as --prune-exited's reader takes it: the
    tracer forgets ended processes only once the rewrite holding their last counts was."""
    taken = f"{path}.taken"
    try:
        os.rename(path, taken)
    except FileNotFoundError:
        pass
    return read_trace(taken)


def _one_round(cg, port, out):
    """One sender in cg: its sockets' bytes in a rewrite while it lives, then nothing of it
    left in the maps (process or sockets) once it ended."""
    sender = subprocess.Popen(in_cgroup(cg, sys.executable, "-c", SENDER, port, SOCKETS, BYTES),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sender.stdout.readline() == "sent\n"
        pid = sender.pid

        def mine():
            t = _trace(out)
            socks = [s for s in t.get("sockets") or [] if s.get("pid") == pid]
            return (t, socks) if len(socks) == SOCKETS and all(
                s.get("tx_bytes") == BYTES for s in socks) else None
        t, _ = wait_for(f"round of pid {pid}: {SOCKETS} sockets of {BYTES} bytes", mine,
                        TIMEOUT, every=0.2)
        assert t["processes"][str(pid)]["tx_bytes"] == SOCKETS * BYTES
        sender.stdin.close()
        assert sender.wait(timeout=TIMEOUT) == 0
        # not taken for a few rewrites: nothing of it forgotten, all of it in the last one
        time.sleep(2)
        with open(out) as f:
            peek = json.load(f)
        assert peek["processes"][str(pid)]["tx_bytes"] == SOCKETS * BYTES
        assert len([s for s in peek["sockets"] if s.get("pid") == pid]) == SOCKETS
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait()
    wait_for(f"pid {pid} and its sockets pruned", lambda: (lambda t: t and str(pid) not in (
        t.get("processes") or {}) and not [s for s in t.get("sockets") or []
                                           if s.get("pid") == pid])(_trace(out)),
             TIMEOUT, every=0.2)
    return _trace(out)


def test_ended_processes_and_their_socket_records_are_pruned(cgroup_dir, tmp_path):
    assert ROUNDS * SOCKETS > _max_records()
    out = tmp_path / "trace.json"
    lsock = socket.create_server(("127.0.0.1", 0), backlog=4096)
    stop = threading.Event()
    receiver = threading.Thread(target=_receive_all, args=(lsock, stop), daemon=True)
    receiver.start()
    tracer = subprocess.Popen([TRACER, "--cgroup", cgroup_dir, "--json", str(out),
                               "--json-every", "0.5", "--prune-exited", "--no-sample",
                               "--no-counters"], stderr=subprocess.PIPE, text=True)
    try:
        wait_line(tracer, "following cgroup", TIMEOUT)
        drain(tracer.stderr)
        for _ in range(ROUNDS):
            last = _one_round(cgroup_dir, lsock.getsockname()[1], out)
            assert not last.get("sockets_untracked"), last.get("sockets_untracked")
    finally:
        tracer.terminate()
        assert tracer.wait(timeout=30) == 0
        stop.set()
        receiver.join()
        lsock.close()
