"""Integration tests of netio-server / netio-client over loopback and a veth pair (needs root).

Every strategy at 1 KiB and 64 KiB with --verify on both transports, zero-copy accounting,
usage errors, a port in use, a refused connection, a peer that goes away, and zero-copy
under a small net.core.optmem_max. Binaries come from $NETIO_BUILD (default <repo>/build).
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import CLIENT, SERVER, namespaces, needs_built, needs_root
from netio_trace.system.netns import Topology
from netio_trace.system.procs import wait_listening

STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field")
THREADS = 2
# Messages per connection: ~20 MB at 1 KiB, ~130 MB at 64 KiB over both connections.
COUNTS = {1024: 10000, 65536: 1000}

pytestmark = [needs_root("network namespaces"), needs_built("netio-server", "netio-client")]


class Server:
    """netio-server started in the background; ended only through its own pid."""

    def __init__(self, args, ns):
        argv = [SERVER, "--netns", ns, "--port", "0", *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = None
        self.stderr_head = ""

    def wait_listening(self, timeout=5):
        """Port from the `listening <port>` line, or None if the server ended first.
        Reads the raw pipe so that select() sees everything not yet consumed."""
        try:
            self.port, self.stderr_head = wait_listening(self.proc.stderr.fileno(), timeout)
        except TimeoutError as e:
            raise AssertionError(f"server did not say 'listening': {e}") from None
        return self.port

    def finish(self, timeout=30):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, self.stderr_head + err

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def run_client(args, ns, timeout=30):
    return subprocess.run([CLIENT, "--netns", ns, *args], capture_output=True, text=True,
                          timeout=timeout)


def run_pair(topo, server_args, client_args, timeout=30):
    srv = Server(server_args, topo.sender_ns)
    try:
        port = srv.wait_listening()
        assert port, f"server ended before listening: {srv.finish()}"
        cli = run_client(["--addr", topo.server_addr, "--port", str(port), *client_args],
                         topo.receiver_ns, timeout)
        rc, out, err = srv.finish(timeout)
    finally:
        srv.kill()
    assert rc == 0, f"server exit {rc}: {err}"
    assert cli.returncode == 0, f"client exit {cli.returncode}: {cli.stderr}"
    return json.loads(out), json.loads(cli.stdout)


topo = namespaces("loopback", "veth")
lo_topo = namespaces("loopback")


@pytest.mark.parametrize("size", [1024, 65536])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_verify(topo, strategy, size):
    count = COUNTS[size]
    s, c = run_pair(topo,
                    ["--strategy", strategy, "--size", str(size), "--threads", str(THREADS),
                     "--count", str(count), "--verify"],
                    ["--threads", str(THREADS), "--size", str(size), "--verify"])
    total = count * THREADS * size
    assert s["bytes"] == c["bytes"] == total > 0
    assert s["messages"] == c["messages"] == count * THREADS
    assert c["verify_errors"] == 0 and c["verify_bad_messages"] == 0
    assert s["error"] is None and c["error"] is None and s["errors"] == c["errors"] == 0
    assert s["strategy"] == strategy and s["size"] == size
    assert len(s["per_thread"]) == len(c["per_thread"]) == THREADS
    assert sorted(t["conn"] for t in s["per_thread"]) == list(range(THREADS))
    for t in s["per_thread"]:
        assert t["bytes"] == count * size and t["messages"] == count
        assert t["tcp"]["cc"] == "cubic", t["tcp"]
        assert t["throughput_gbps"] > 0
    assert s["throughput_gbps"] > 0 and c["throughput_gbps"] > 0
    zc = s["zerocopy"]
    if strategy == "zero-copy":
        # Every send completes, and local delivery (loopback and veth alike) copies.
        assert zc["sends"] >= s["messages"]
        assert zc["completions"] == zc["sends"], zc
        assert zc["copied"] == zc["completions"], zc
        assert zc["unexpected"] == 0
        assert s["send_calls"] == zc["sends"] + s["enobufs_retries"]
    else:
        assert zc["sends"] == zc["completions"] == 0
    if strategy in ("one-copy", "two-copy", "zero-copy"):
        assert s["send_calls"] == s["messages"] + s["partial_retries"] + s["enobufs_retries"]
    else:
        assert s["send_calls"] == 8 * s["messages"] + s["partial_retries"]


@pytest.mark.parametrize("size,count", [(8, 3000), (1031, 500), ((1 << 20) + 7, 20)])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_odd_sizes(lo_topo, strategy, size, count):
    """Smallest message, fields with a remainder, a message larger than any socket buffer."""
    s, c = run_pair(lo_topo,
                    ["--strategy", strategy, "--size", str(size), "--threads", "3",
                     "--count", str(count), "--verify"],
                    ["--threads", "3", "--size", str(size), "--verify"])
    assert s["bytes"] == c["bytes"] == 3 * count * size
    assert c["verify_errors"] == 0 and c["messages"] == 3 * count
    if strategy == "zero-copy":
        zc = s["zerocopy"]
        assert zc["completions"] == zc["sends"] >= 3 * count and zc["unexpected"] == 0


def test_duration(lo_topo):
    s, c = run_pair(lo_topo,
                    ["--strategy", "one-copy", "--size", "64K", "--threads", "1",
                     "--duration", "0.5"],
                    ["--threads", "1", "--size", "64K"])
    assert s["bytes"] == c["bytes"] > 0
    assert 0.45 < s["seconds"] < 1.5, s["seconds"]
    assert c["verify_errors"] is None
    assert s["tcp"]["cc"] == "cubic" and s["tcp"]["segs_out"] > 0
    # data resent is resent in segments, and never more than was sent
    t = s["tcp"]
    assert (t["bytes_retrans"] > 0) <= (t["retrans"] > 0) and t["bytes_retrans"] <= s["bytes"], t


@pytest.mark.parametrize("strategy", ["one-copy", "zero-copy", "sendfile"])
def test_verify_on_one_side_only(lo_topo, strategy):
    """A client with --verify against a server without it: one line saying the sides
    disagree, not a count of every byte the server never rewrote (one message, or a ring)."""
    srv = Server(["--strategy", strategy, "--size", "4K", "--threads", "2", "--count", "500"],
                 lo_topo.sender_ns)
    try:
        port = srv.wait_listening()
        assert port, f"server ended before listening: {srv.finish()}"
        cli = run_client(["--addr", lo_topo.server_addr, "--port", str(port), "--threads", "2",
                          "--size", "4K", "--verify"], lo_topo.receiver_ns)
        rc, out, err = srv.finish()
    finally:
        srv.kill()
    assert rc == 0, err
    assert cli.returncode == 1, cli
    lines = cli.stderr.splitlines()
    assert len(lines) == 1 and "disagree" in lines[0] and "without --verify" in lines[0], \
        cli.stderr
    assert "differ from the pattern" not in lines[0]
    c = json.loads(cli.stdout)
    assert c["bytes"] == 2 * 500 * 4096 and c["verify_bad_messages"] > 0, c


def test_verify_mismatch_still_counted(lo_topo):
    """A client with --verify and a server with it, but of another size (every message
    boundary off): bytes that are not resent messages are still counted as differing."""
    srv = Server(["--strategy", "one-copy", "--size", "4K", "--threads", "1", "--count", "100",
                  "--verify"], lo_topo.sender_ns)
    try:
        port = srv.wait_listening()
        cli = run_client(["--addr", lo_topo.server_addr, "--port", str(port), "--threads", "1",
                          "--size", "1K", "--verify"], lo_topo.receiver_ns)
        srv.finish()
    finally:
        srv.kill()
    assert cli.returncode == 1, cli
    lines = cli.stderr.splitlines()
    assert len(lines) == 1 and "differ from the pattern" in lines[0], cli.stderr


def test_cc_option(lo_topo):
    s, c = run_pair(lo_topo,
                    ["--strategy", "one-copy", "--size", "1K", "--threads", "1", "--count", "100",
                     "--cc", "reno"],
                    ["--threads", "1", "--size", "1K", "--cc", "reno"])
    assert s["tcp"]["cc"] == "reno" and c["per_thread"][0]["tcp"]["cc"] == "reno"


BAD_SERVER_ARGS = [
    ["--size", "0"], ["--size", "7"], ["--size", "abc"], ["--size", "67108865"],
    ["--threads", "0"], ["--threads", "257"], ["--strategy", "zerocopy"],
]


@pytest.mark.parametrize("bad", BAD_SERVER_ARGS, ids=lambda a: " ".join(a))
def test_bad_usage(bad):
    args = {"--strategy": "one-copy", "--size": "1K", "--threads": "1", "--port": "1",
            "--count": "1"}
    args[bad[0]] = bad[1]
    argv = [SERVER] + [x for kv in args.items() for x in kv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    assert r.returncode == 2, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and bad[0] in lines[0], r.stderr
    if bad[0] in ("--size", "--threads"):
        cargs = {"--addr": "127.0.0.1", "--port": "1", "--threads": "1", "--size": "1K"}
        cargs[bad[0]] = bad[1]
        r = subprocess.run([CLIENT] + [x for kv in cargs.items() for x in kv],
                           capture_output=True, text=True, timeout=5)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r


def test_port_in_use(lo_topo):
    first = Server(["--strategy", "one-copy", "--size", "1K", "--threads", "1", "--count", "1"],
                   lo_topo.sender_ns)
    try:
        port = first.wait_listening()
        r = subprocess.run([SERVER, "--netns", lo_topo.sender_ns, "--port", str(port),
                            "--strategy", "one-copy", "--size", "1K", "--threads", "1",
                            "--count", "1"], capture_output=True, text=True, timeout=5)
    finally:
        first.kill()
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Address already in use" in lines[0] and str(port) in lines[0], r.stderr
    assert "already in use" in json.loads(r.stdout)["error"]


def test_connection_refused(lo_topo):
    t0 = time.monotonic()
    r = run_client(["--addr", "127.0.0.1", "--port", "9", "--threads", "1", "--size", "1K"],
                   lo_topo.receiver_ns, timeout=10)
    assert r.returncode == 1
    assert "refused" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert "refused" in json.loads(r.stdout)["error"]
    assert time.monotonic() - t0 < 5


def test_peer_goes_away(lo_topo):
    srv = Server(["--strategy", "one-copy", "--size", "64K", "--threads", "1", "--duration", "20"],
                 lo_topo.sender_ns)
    try:
        port = srv.wait_listening()
        cli = subprocess.Popen([CLIENT, "--netns", lo_topo.receiver_ns, "--addr", "127.0.0.1",
                                "--port", str(port), "--threads", "1", "--size", "64K"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        rc, out, err = srv.finish(timeout=10)
    finally:
        srv.kill()
    assert rc == 1, err
    s = json.loads(out)
    assert s["bytes"] > 0 and s["errors"] == 1 and s["error"], s
    assert s["per_thread"][0]["error"]


def _optmem(ns=None):
    cmd = ["sysctl", "-n", "net.core.optmem_max"]
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    return int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def test_zero_copy_small_optmem():
    """ENOBUFS from a tiny optmem_max is drained and retried, never dropped."""
    host_before = _optmem()
    with Topology("loopback") as t:
        try:
            subprocess.run(["ip", "netns", "exec", t.sender_ns, "sysctl", "-qw",
                            "net.core.optmem_max=1024"], check=True)
            s, c = run_pair(t, ["--strategy", "zero-copy", "--size", "64K", "--threads", "1",
                                "--count", "1500", "--verify"],
                            ["--threads", "1", "--size", "64K", "--verify"])
        finally:
            if _optmem() != host_before:  # the sysctl is global on this kernel
                subprocess.run(["sysctl", "-qw", f"net.core.optmem_max={host_before}"], check=True)
    assert _optmem() == host_before
    assert s["bytes"] == c["bytes"] == 1500 * 65536
    assert c["verify_errors"] == 0
    zc = s["zerocopy"]
    assert zc["completions"] == zc["sends"] and zc["copied"] == zc["completions"]
    print(f"optmem_max=1024: enobufs_retries={s['enobufs_retries']} sends={zc['sends']} "
          f"notifications={zc['notifications']}")
    assert s["enobufs_retries"] > 0, "optmem_max=1024 should have made the sender see ENOBUFS"
    assert s["send_calls"] == zc["sends"] + s["enobufs_retries"]
