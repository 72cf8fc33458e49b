"""Per-socket accounting against the process's: every socket's bytes,
calls, spliced and zero-copy bytes sum exactly to its process's, for every strategy over veth
and loopback, on every rung the kernel gives (this file runs in the guests of `make vmtest`
too: tests/vm/run-vmtest.sh). What a rung cannot give a socket is in `sockets_unattributed`,
exactly the difference, and the snapshot's `unavailable` says why; on the host's tracepoint
rung nothing is left unattributed. Each socket knows its route's device and, where the
socket-state tracepoint is attached, that its TCP peer is on this host; its send-size
histogram counts every send."""
import json
import subprocess
import sys

import pytest

from conftest import TRACER, needs_built, needs_root
from test_tracer import COUNTS, Tracer, run_workload, tracer, topologies  # noqa: F401

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]
FIELDS = (("tx_bytes", "tx_bytes"), ("tx_calls", "tx_calls"),
          ("rx_copy_bytes", "rx_copy_bytes"), ("tx_spliced_bytes", "tx_spliced_bytes"))


def sockets_of(snap, pid):
    return [s for s in snap["sockets"] if s["pid"] == pid]


def check_sums(snap):
    """Per process: the sum of its sockets plus what is unattributed is its own count."""
    un = snap["sockets_unattributed"]
    assert snap["sockets_untracked"] == 0
    for pid, p in snap["processes"].items():
        mine = sockets_of(snap, int(pid))
        for field, sfield in FIELDS:
            left = un.get(pid, {}).get(field, 0)
            assert sum(s[sfield] for s in mine) + left == p[field], (pid, field, un)
        if p["zc_tx_bytes"] is not None:
            assert sum(s["zc_tx_bytes"] for s in mine) == p["zc_tx_bytes"], pid
    if snap["attach"]["tx_bytes"] == "tp_btf":
        assert un == {}, un             # the socket-layer tracepoints name every socket


@pytest.mark.parametrize("transport", ("loopback", "veth"))
@pytest.mark.parametrize("strategy", ("one-copy", "zero-copy", "sendfile"))
def test_sockets_sum_to_their_process(tracer, topologies, tmp_path, strategy, transport):  # noqa: F811
    size = 65536
    s, c, snap, spid, cpid = run_workload(tracer, topologies[transport], tmp_path, strategy,
                                          size, COUNTS[size])
    assert snap["sockets"] is not None, snap["unavailable"]
    check_sums(snap)
    un = snap["sockets_unattributed"]
    if str(spid) in un:
        # a send this rung cannot give its socket (tcp_sendpage at a kretprobe): said so
        assert snap["attach"]["tx_bytes"] == "kprobe" and strategy == "sendfile", un
        return
    (ss,) = [x for x in sockets_of(snap, spid) if x["tx_bytes"] > 4]
    # calls as the process counts them (tcp_sendpage before 6.5: one per page sent)
    assert ss["tx_bytes"] == s["bytes"]
    assert ss["tx_calls"] == snap["processes"][str(spid)]["tx_calls"]
    assert sum(ss["send_size_log2"].values()) == ss["tx_calls"]
    assert ss["proto"] == "tcp" and ss["path"] == transport
    if str(cpid) not in un:
        (cs,) = [x for x in sockets_of(snap, cpid) if x["rx_copy_bytes"]]
        assert cs["rx_copy_bytes"] == c["bytes"]
        assert (cs["local"], cs["peer"]) == (ss["peer"], ss["local"])
    if snap["attach"]["pinning"] == "tp_btf":
        assert ss["peer_local"]         # tcp_ends: the socket-state tracepoint is attached
    if strategy == "zero-copy" and ss["zc_tx_bytes"] is not None:
        # every zero-copy byte sent, and copied back at local delivery (a retransmitted
        # segment's pages are copied again: counted apart)
        assert ss["zc_tx_bytes"] == s["bytes"] <= ss["fallback_copy_bytes"], ss
        assert ss["fallback_copy_bytes"] - ss["fallback_copy_again_bytes"] <= s["bytes"], ss
    elif strategy == "sendfile":
        assert ss["tx_spliced_bytes"] == s["bytes"]


def test_no_sockets_counts_per_process_only(topologies, tmp_path):  # noqa: F811
    t = Tracer("--no-sockets", log=str(tmp_path / "tracer.log"))
    try:
        s, _, snap, spid, _ = run_workload(t, topologies["loopback"], tmp_path, "one-copy",
                                           1024, COUNTS[1024])
    finally:
        assert t.close() == 0
    assert snap["sockets"] is None and "--no-sockets" in snap["unavailable"]["sockets"]
    assert snap["processes"][str(spid)]["tx_bytes"] == s["bytes"]


# one TCP connection over ::1 and one from 127.0.0.1 to a dual-stack listener (its accepted
# socket's addresses are IPv4-mapped), each sending both ways
DUAL_STACK = ("import socket\n"
              "for addr, listen in (('::1', '::1'), ('127.0.0.1', '::')):\n"
              "    l = socket.socket(socket.AF_INET6)\n"
              "    l.bind((listen, 0))\n"
              "    l.listen()\n"
              "    c = socket.create_connection((addr, l.getsockname()[1]))\n"
              "    a, _ = l.accept()\n"
              "    c.sendall(b'x' * 1000)\n"
              "    assert len(a.recv(4096)) == 1000\n"
              "    a.sendall(b'y' * 10)\n"
              "    assert len(c.recv(100)) == 10\n")


def test_tcp_peers_on_this_host_over_ipv6_and_ipv4_mapped(tmp_path):
    """Each end of an IPv6 connection, and of an IPv4 one whose listener is dual-stack, is
    seen with its peer on this host, its addresses as the other end sees them reversed."""
    out = tmp_path / "t.json"
    cp = subprocess.run([TRACER, "--no-sample", "--json", str(out), "--", sys.executable, "-c",
                         DUAL_STACK], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    snap = json.loads(out.read_text())
    socks = {s["local"]: s for s in snap["sockets"] if s["proto"] == "tcp"}
    assert sum(s["local"].startswith("[::1]:") for s in socks.values()) == 2, socks
    assert sum(s["local"].startswith("127.0.0.1:") for s in socks.values()) == 2, socks
    for s in socks.values():
        assert socks[s["peer"]]["peer"] == s["local"]
        assert sorted((s["tx_bytes"], s["rx_copy_bytes"])) == [10, 1000], s
        if snap["attach"]["pinning"] == "tp_btf":
            assert s["peer_local"] is True, s
