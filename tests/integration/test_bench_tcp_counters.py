"""The kernel's per-socket TCP counters and the sockets' owners, read by iterators
(bench/tcp_counters.py, build/netio-bench-tcp-counters): on this kernel they say, to the byte,
what the bench's own loopback sockets wrote and read, and which process holds each (none for
a socket two hold), in each of its cases; a read leaves nothing loaded. Needs root and the
built reader ($NETIO_BUILD). No timing is checked."""
import json
import subprocess
import time

from bench import tcp_counters
from conftest import needs_built, needs_root

pytestmark = [needs_root("BPF"), needs_built("netio-bench-tcp-counters")]


def _loaded():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [p["id"] for p in json.loads(out)
            if p.get("name") in ("tcp_counters", "socket_owners")]


def test_counters_say_the_bytes_written_and_read_and_the_owner():
    rows = tcp_counters.exactness()
    assert len(rows) == 5
    for case, n, exact, misses in rows:
        assert n == exact == 2, (case, misses)


def test_a_read_visits_every_socket_and_file_and_leaves_nothing_loaded():
    assert tcp_counters.open_files(200)
    (r,) = tcp_counters.read_costs(50, 1)
    assert r["sockets_per_read"] >= 100     # ours, and any other of this netns
    assert r["files_per_read"] >= 100       # this process holds ours
    assert r["ns_per_socket"] > 0 and r["ns_per_file"] > 0 and r["wall_us_per_read"] > 0
    deadline = time.monotonic() + 10
    while _loaded() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _loaded()
