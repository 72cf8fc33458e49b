"""A UDP socket's first MSG_ZEROCOPY datagrams (needs root): counted zero-copy, never copied
from user space.

The sender is tests/programs/udp-zc-sockets (no code of the workloads): sockets one after
another, each sending its datagrams with MSG_ZEROCOPY and reading every completion before it
closes. It sends over the forward path (netio_trace/system/netns.py): its route goes through a
second namespace that drops every datagram by a blackhole route, so nothing receives it. A
socket's first datagram leaves inside its first send, before that send's end names the
socket's owner; on the tracepoint rung it was counted for nobody where the sender's namespace
was not followed (`trace -- CMD`, `--pid`), so the tracer said that first datagram was copied.
The cases:
- a socket's first datagram among many (20,000 of 1,400 B on the host);
- a socket that sends exactly one datagram;
- 1,000 sockets that send one datagram each (unconnected: each is bound by its first send);
each with the run's namespaces followed and not, on the rung the tracer picks and on the
tracepoint rung forced (test_programs.RUNGS). Per process: tx_copy_bytes 0 and zc_tx_bytes
every byte sent, exactly (before 5.18 the kernel copies each datagram's first 148 B into its
linear part, all of them, which the exact rungs count); a figure the tracer says it cannot
count must be null. Since 6.17 the forwarding namespace keeps the pages (no completion says
COPIED, no fallback copy); before, every skb received was copied first: every completion says
COPIED, and the fallback copy is every pinned byte. NETIO_VMTEST=1 (the kernel matrix's
guests): fewer datagrams and sockets, the namespaces followed only for the first case.
"""
import platform

import pytest

from conftest import needs_built, needs_root
from netio_trace.system.netns import Topology
from test_programs import Checks, Programs, TIMEOUT, VMTEST, kernel_copies_heads
from test_programs import tracer  # noqa: F401 (the fixture)

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "tests/programs/udp-zc-sockets")]

SIZE = 1400
# (sockets, datagrams per socket, unconnected)
CASES = {
    "first-of-many": (1, 200 if VMTEST else 20000, False),
    "one-datagram": (1, 1, True),
    "many-sockets": (100 if VMTEST else 1000, 1, True),
}
PARAMS = [(case, netns) for case in sorted(CASES) for netns in ("followed", "unfollowed")
          if not (VMTEST and netns == "followed" and case != "first-of-many")]


def forward_copies():
    """Before 6.17 every zero-copy skb received is copied (skb_orphan_frags_rx in
    __netif_receive_skb_core), forwarded or not; since, only at local delivery (docs/DESIGN.md,
    "Facts to build on"). No feature tells it but the release."""
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) < (6, 17)


@pytest.fixture(scope="module")
def forward():
    with Topology("forward") as t:
        yield t


class Unfollowed:
    """The run's namespaces as Programs sees them where the tracer must not follow them: the
    processes alone, as `netio-trace trace -- CMD` follows them."""
    namespaces = []


@pytest.mark.parametrize("case,netns", PARAMS, ids=[f"{c}-{n}" for c, n in PARAMS])
def test_udp_zerocopy_first_datagrams(tracer, forward, tmp_path, request, case, netns):  # noqa: F811
    sockets, count, unconnected = CASES[case]
    seen0 = forward.datagrams_seen()
    with Programs(tracer, tmp_path, forward if netns == "followed" else Unfollowed) as run:
        snd = run.start("udp-zc-sockets", "--netns", forward.sender_ns, "--addr",
                        forward.server_addr, "--port", "9", "--sockets", str(sockets),
                        "--count", str(count), "--size", str(SIZE), "--timeout", str(TIMEOUT),
                        *(("--unconnected",) if unconnected else ()), ready=False)
        (s,), snap = run.finish()
    sent, zc, n = s["bytes"], s["zerocopy"], sockets * count
    assert (s["sockets"], s["datagrams"], sent) == (sockets, n, n * SIZE), s
    assert zc["completed"] == zc["sends"] == n, zc
    assert zc["unexpected"] == zc["other_errors"] == 0, zc
    copied = forward_copies()
    assert zc["copied"] == (n if copied else 0), f"completions: {zc}"
    assert forward.datagrams_seen() - seen0 == n, "the forwarding namespace missed datagrams"
    heads = Checks.UDP_HEAD * n if kernel_copies_heads() else 0
    c = Checks(request, snap)
    c.sent(snd.pid, sent, copied=heads, pinned=sent - heads)
    if snap["sockets"] is not None and "processes.zc_tx_bytes" not in snap["unavailable"]:
        c.equal("the sockets' zc_tx_bytes", sum(r["zc_tx_bytes"] for r in snap["sockets"]
                                                if r["pid"] == snd.pid), sent - heads)
    if netns == "followed":
        if c.null_where_unavailable("pinning", "zc_tx_bytes", snap["zc_tx_bytes"]):
            c.equal("zc_tx_bytes (the namespaces')", snap["zc_tx_bytes"], sent - heads)
        # nothing is delivered: the pinned bytes are copied where every receive copies
        if c.null_where_unavailable("fallback_copy", "fallback_copy_bytes",
                                    snap["fallback_copy_bytes"]):
            c.equal("fallback_copy_bytes", snap["fallback_copy_bytes"],
                    sent - heads if copied else 0)
        c.completions(n, n if copied else 0)
    c.done()
