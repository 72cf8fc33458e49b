"""The fallback copy against the zero-copy bytes sent (needs root). A TCP segment sent
zero-copy and retransmitted after it had arrived is received, and copied at local delivery, a
second time: its pages were pinned once and copied twice. The tracer counts those bytes as
`fallback_copy_again_bytes` (in the snapshot's `zerocopy` object, per namespace and per
socket), so that the fallback copy less them is at most the zero-copy bytes sent.

Zero-copy over loopback, on the rung the tracer picks (the exact rungs count at
`skb_copy_ubufs`, the tracepoint rung at `netif_receive_skb`): a run as it comes (a
retransmit is rare there; with none, nothing is copied again), and a run whose receiver's ACKs
are dropped for a while (tc in the run's namespace), so that the sender retransmits segments.
Not every segment resent had arrived (bench/NOTES.md, "What the ACK blackout resends"); the
receiver's TCP says whether some had (its D-SACKs). When some had, bytes were copied again,
and never more than were resent. NETIO_VMTEST=1 (the kernel matrix's
guests): the second run only, longer, the guest being slower.
"""
import subprocess
import threading

import pytest

from conftest import needs_built, needs_root
from netio_trace.system.netns import Topology
from test_tracer import COUNTS, TIMEOUT, VMTEST, check_exact, lent, proc, run_workload

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]

SIZE = 65536
# the ACK blackout: (run seconds, start, length)
BLACKOUT = (8, 3, 2) if VMTEST else (3, 1, 1)


def tc(ns, commands):
    """tc commands (one a line) in namespace ns, in one tc process."""
    subprocess.run(["tc", "-n", ns, "-batch", "-"], input=commands, check=True,
                   capture_output=True, text=True, timeout=TIMEOUT)


def drop_acks(ns, start, length):
    """A thread that, start seconds from now, drops every pure ACK on ns's loopback for length
    seconds: HTB sends everything by class 1:1, and by 1:2, whose pfifo holds nothing (limit 0),
    every IPv4 packet under 256 B (the data segments here are 64 KiB; no tc action module is
    needed). Its `error` holds what failed, if anything."""
    stop = threading.Event()

    def run():
        try:
            if stop.wait(start):
                return
            tc(ns, "qdisc add dev lo root handle 1: htb default 1\n"
                   "class add dev lo parent 1: classid 1:1 htb rate 100gbit\n"
                   "class add dev lo parent 1: classid 1:2 htb rate 100gbit\n"
                   "qdisc add dev lo parent 1:2 handle 20: pfifo limit 0\n"
                   "filter add dev lo parent 1: protocol ip prio 1 u32 "
                   "match u16 0x0000 0xff00 at 2 flowid 1:2\n")
            try:
                stop.wait(length)
            finally:
                tc(ns, "qdisc del dev lo root\n")
        except (subprocess.SubprocessError, OSError) as e:
            t.error = getattr(e, "stderr", None) or repr(e)

    t = threading.Thread(target=run)
    t.error, t.stop = None, stop
    t.start()
    return t


def duplicates_received(ns):
    """The data segments ns's TCP received a second time (whole or in part), by its own
    count: each is answered with a D-SACK (TcpExt TCPDSACKOldSent: below rcv_nxt,
    TCPDSACKOfoSent: in the out-of-order queue). A resend of a segment that had not
    arrived is not among them."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/netstat"], check=True,
                         capture_output=True, text=True, timeout=TIMEOUT).stdout
    names, values = [line.split()[1:] for line in out.splitlines() if line.startswith("TcpExt:")]
    ext = dict(zip(names, map(int, values)))
    return ext["TCPDSACKOldSent"] + ext["TCPDSACKOfoSent"]


def check_again(snap, s, spid):
    """The fallback copy less what was copied again is at most the zero-copy bytes: in total,
    per namespace and for the sender's socket. Returns the bytes copied again (None: the rung
    does not count the fallback copy)."""
    z = snap["zerocopy"]
    fb, again = snap["fallback_copy_bytes"], z["fallback_copy_again_bytes"]
    if fb is None:
        assert again is None and z["fallback_copy_again_skbs"] is None, z
        return None
    zc = snap["zc_tx_bytes"]
    assert fb - again <= zc, (fb, again, zc, z)
    assert (again > 0) == (z["fallback_copy_again_skbs"] > 0), z
    for inum, n in snap["netns"].items():
        assert n["fallback_copy_again_bytes"] <= n["fallback_copy_bytes"], (inum, n)
    assert sum(n["fallback_copy_again_bytes"] for n in snap["netns"].values()) == again
    if snap["sockets"] is not None:
        (ss,) = [x for x in snap["sockets"] if x["pid"] == spid and x["tx_bytes"] > 4]
        assert ss["fallback_copy_again_bytes"] <= ss["fallback_copy_bytes"], ss
        if ss["zc_tx_bytes"] is not None:
            assert ss["fallback_copy_bytes"] - ss["fallback_copy_again_bytes"] <= \
                ss["zc_tx_bytes"] == s["bytes"], ss
    return again


@pytest.fixture(scope="module")
def tracer(default_tracer):
    with lent(default_tracer) as t:
        yield t


@pytest.mark.skipif(VMTEST, reason="host suite (the guests run the forced retransmits only)")
def test_loopback_zerocopy_fallback_less_again_within_zc(tracer, tmp_path):
    with Topology("loopback") as topo:
        s, c, snap, spid, cpid = run_workload(tracer, topo, tmp_path, "zero-copy", SIZE,
                                              COUNTS[SIZE])
    check_exact(s, c, snap, spid, cpid, "zero-copy")
    again = check_again(snap, s, spid)
    if s["tcp"]["bytes_retrans"] == 0 and again is not None:
        assert again == 0, snap["zerocopy"]     # nothing was sent twice


def _run_with_blackout(tracer, tmp):
    seconds, start, length = BLACKOUT
    tmp.mkdir()
    with Topology("loopback") as topo:
        blackout = drop_acks(topo.sender_ns, start, length)
        try:
            got = run_workload(tracer, topo, tmp, "zero-copy", SIZE, None, duration=seconds)
        finally:
            blackout.stop.set()
            blackout.join()
        assert blackout.error is None, blackout.error
        return got, duplicates_received(topo.receiver_ns)


def test_retransmits_of_arrived_segments_are_copied_again(tracer, tmp_path):
    (s, c, snap, spid, cpid), dups = _run_with_blackout(tracer, tmp_path / "1")
    if dups == 0:
        # the blackout missed the data: a slow guest's start outlasted its delay (no resend),
        # or reached into it (the handshake's resends only, which carry no data), or none of
        # the segments resent had arrived: once more
        (s, c, snap, spid, cpid), dups = _run_with_blackout(tracer, tmp_path / "2")
    assert dups > 0, f"no segment received twice while the ACKs were dropped: {s['tcp']}"
    check_exact(s, c, snap, spid, cpid, "zero-copy")
    again = check_again(snap, s, spid)
    print(f"bytes resent {s['tcp']['bytes_retrans']}, segments received twice {dups}, "
          f"bytes copied again {again}")
    if again is not None:
        # the receiver's TCP saw segments twice: each was copied at local delivery again;
        # a byte copied again was resent, but not every byte resent had arrived
        assert 0 < again <= s["tcp"]["bytes_retrans"], (dups, s["tcp"], snap["zerocopy"])
    assert proc(snap, spid)["tx_bytes"] == s["bytes"]
