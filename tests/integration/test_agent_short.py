"""`netio-trace agent` and processes shorter than a snapshot (needs root): each has ended, and
been reaped, before the agent first sees it, so /proc has nothing of it; its bytes must still
land on its cgroup's labels, exactly. Two kinds: processes moved into the cgroup that exec and
end (labels read at their exec), and children forked there that never exec (their parent's)."""
import os
import socket
import subprocess
import sys
import threading

import pytest

from test_agent import by_cgroup, get, start_agent, stop
from conftest import in_cgroup, made_cgroups, needs_cgroup2, needs_root, wait_for

N, SIZE = 5, 100_003                # processes of each kind, bytes each sends

pytestmark = [needs_root("BPF, cgroups"), needs_cgroup2()]

# connects, sends SIZE bytes, ends: well under a snapshot
SHORT = ("import socket, sys\n"
         "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
         "s.sendall(b'x' * int(sys.argv[2]))\n")
# forks N children that never exec, each sends SIZE bytes and ends; the parent waits
FORKER = ("import os, socket, sys\n"
          "port, n, size = map(int, sys.argv[1:4])\n"
          "for _ in range(n):\n"
          "    if os.fork() == 0:\n"
          "        s = socket.create_connection(('127.0.0.1', port))\n"
          "        s.sendall(b'x' * size)\n"
          "        s.close()\n"
          "        os._exit(0)\n"
          "    os.wait()\n")


@pytest.fixture
def cgroup_dir():
    with made_cgroups(f"netio-agent-short-{os.getpid()}") as (path,):
        yield path


def _receiver():
    """A listener that reads every connection to its end: (port, bytes received, stop)."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=64)
    got, done = [0], threading.Event()

    def serve():
        lsock.settimeout(0.2)
        while not done.is_set():
            try:
                c, _ = lsock.accept()
            except socket.timeout:
                continue
            with c:
                while chunk := c.recv(1 << 16):
                    got[0] += len(chunk)
        lsock.close()
    threading.Thread(target=serve, daemon=True).start()
    return lsock.getsockname()[1], got, done


def _in(cg, script, *args):
    return subprocess.run(in_cgroup(cg, sys.executable, "-c", script, *args),
                          timeout=60).returncode


def test_processes_ended_before_a_snapshot_keep_their_cgroup(cgroup_dir):
    port, got, done = _receiver()
    agent, aport = start_agent("--cgroup", cgroup_dir)
    try:
        for _ in range(N):
            assert _in(cgroup_dir, SHORT, port, SIZE) == 0
        assert _in(cgroup_dir, FORKER, port, N, SIZE) == 0
        want = (2 * N) * SIZE
        cg = "/" + os.path.basename(cgroup_dir)
        wait_for("every byte counted", lambda: (lambda d: sum(d.values()) >= want)(
            by_cgroup(get(aport, "/metrics")[1], "netio_tx_bytes_total")))
        text = get(aport, "/metrics")[1]
        assert by_cgroup(text, "netio_tx_bytes_total") == {cg: want}
        assert by_cgroup(text, "netio_socket_tx_bytes_total") == {cg: want}
        assert got[0] == want
        assert stop(agent) == 0
    finally:
        stop(agent, 9)
        done.set()
