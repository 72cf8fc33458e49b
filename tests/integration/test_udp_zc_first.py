"""A UDP socket's first MSG_ZEROCOPY datagrams (needs root): counted zero-copy, never copied.

The sender is tests/programs/udp-zc-sockets (no code of the workloads): sockets one after
another, each sending its datagrams with MSG_ZEROCOPY and reading every completion before it
closes. It sends over the forward path (netio_trace/system/netns.py): its route goes through a
second namespace that drops every datagram by a blackhole route, so nothing receives and no page
is ever copied (the program checks that no completion says COPIED). A socket's first datagram
leaves inside its first send, before that send's end names the socket's owner; on the
tracepoint rung it was counted for nobody where the sender's namespace was not followed
(`trace -- CMD`, `--pid`), so the tracer said that first datagram was copied. The cases:
- a socket's first datagram among many (20,000 of 1,400 B on the host);
- a socket that sends exactly one datagram;
- 1,000 sockets that send one datagram each (unconnected: each is bound by its first send);
each with the run's namespaces followed and not, on the rung the tracer picks and on the
tracepoint rung forced (test_programs.RUNGS). Per process: tx_copy_bytes 0 and zc_tx_bytes
every byte sent, exactly (before 5.18 the kernel copies each datagram's first 148 B into its
linear part, all of them, which the exact rungs count); a figure the tracer says it cannot
count must be null. NETIO_VMTEST=1 (the kernel matrix's guests): fewer datagrams.
"""
import pytest

from conftest import needs_built, needs_root
from netio_trace.system.netns import Topology
from test_programs import Checks, Programs, TIMEOUT, VMTEST, kernel_copies_heads
from test_programs import tracer  # noqa: F401 (the fixture)
from test_tracer import proc

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "tests/programs/udp-zc-sockets")]

SIZE = 1400
# (sockets, datagrams per socket, unconnected)
CASES = {
    "first-of-many": (1, 200 if VMTEST else 20000, False),
    "one-datagram": (1, 1, True),
    "many-sockets": (200 if VMTEST else 1000, 1, True),
}


class Unfollowed:
    """The run's namespaces as Programs sees them where the tracer must not follow them: the
    processes alone, as `netio-trace trace -- CMD` follows them."""

    def __init__(self, topo):
        self.topo = topo
        self.namespaces = []


@pytest.mark.parametrize("netns", ("followed", "unfollowed"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_udp_zerocopy_first_datagrams(tracer, tmp_path, request, case, netns):  # noqa: F811
    sockets, count, unconnected = CASES[case]
    with Topology("forward") as t:
        topo = t if netns == "followed" else Unfollowed(t)
        with Programs(tracer, tmp_path, topo) as run:
            snd = run.start("udp-zc-sockets", "--netns", t.sender_ns, "--addr", t.server_addr,
                            "--port", "9", "--sockets", str(sockets), "--count", str(count),
                            "--size", str(SIZE), "--timeout", str(TIMEOUT),
                            *(("--unconnected",) if unconnected else ()), ready=False)
            (s,), snap = run.finish()
        seen = t.datagrams_seen()
    sent, zc = s["bytes"], s["zerocopy"]
    assert s["sockets"] == sockets and s["datagrams"] == sockets * count, s
    assert sent == sockets * count * SIZE, s
    assert zc["completed"] == zc["sends"] == sockets * count, zc
    assert zc["copied"] == 0 and zc["zc_bytes"] == sent, f"the kernel copied: {zc}"
    assert zc["unexpected"] == zc["other_errors"] == 0, zc
    assert seen == sockets * count, f"the forwarding namespace saw {seen} datagrams"
    heads = Checks.UDP_HEAD * sockets * count if kernel_copies_heads() else 0
    c = Checks(request, snap)
    c.sent(snd.pid, sent, copied=heads, pinned=sent - heads)
    sock_zc = sum(r["zc_tx_bytes"] or 0 for r in snap.get("sockets") or []
                  if r.get("pid") == snd.pid)
    if snap.get("sockets") is not None and proc(snap, snd.pid)["zc_tx_bytes"] is not None:
        c.equal("the sockets' zc_tx_bytes", sock_zc, sent - heads)
    if netns == "followed":
        # nothing was received anywhere: no fallback copy
        if c.null_where_unavailable("pinning", "zc_tx_bytes", snap["zc_tx_bytes"]):
            c.equal("zc_tx_bytes (the namespaces')", snap["zc_tx_bytes"], sent - heads)
        if c.null_where_unavailable("fallback_copy", "fallback_copy_bytes",
                                    snap["fallback_copy_bytes"]):
            c.equal("fallback_copy_bytes", snap["fallback_copy_bytes"], 0)
        c.completions(zc["completed"], 0)
    c.done()
