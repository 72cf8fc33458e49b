"""A TCP MSG_ZEROCOPY send's zero-copy bytes count when the send returns on the tracepoint
rung (bpf/copy_tp.bpf.c, zc_pinned_by_send), not as its skbs leave a device: an skb can reach
its receiver with no program of ours run for it at xmit, nor at its receive (bench/NOTES.md,
the end of "Drops"). The tests make both programs pass over skbs and check the bytes stay
exact, per process and per namespace, and that a sender the tracer does not follow still
counts for its followed namespace."""
import pytest

from conftest import needs_built, needs_root
from test_tracer import COUNTS, Tracer, check_exact, run_workload, topologies  # noqa: F401

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]


def netns_zc(snap):
    """The zero-copy bytes of each namespace that counted any."""
    return [n["zc_tx_bytes"] for n in snap["netns"].values() if n["zc_tx_bytes"]]


def start_tracer(tmp_path, monkeypatch, **env):
    """A tracer started with test switches env (NETIO_TEST_*), skipped where zero-copy bytes
    are not counted on the tracepoint rung."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    t = Tracer(log=str(tmp_path / "tracer.log"))
    for k in env:
        monkeypatch.delenv(k)
    if t.attach["pinning"] != "tp_btf":
        assert t.close() == 0
        pytest.skip(f"zero-copy bytes count at xmit or at the send on the tracepoint rung "
                    f"only (pinning: {t.attach['pinning']})")
    return t


@pytest.mark.parametrize("rx_miss", (False, True), ids=("xmit-missed", "both-missed"))
@pytest.mark.parametrize("transport,size", (("loopback", 65536), ("veth", 1024)))
def test_zc_skbs_no_program_saw_stay_exact(topologies, tmp_path, monkeypatch, transport, size,  # noqa: F811
                                           rx_miss):
    """xmit passes over about one zero-copy skb in 50 (NETIO_TEST_XMIT_MISS), and their
    receive too (NETIO_TEST_RX_MISS): the bytes stay exact per process and per namespace; the
    snapshot tells how many skbs xmit missed and their receive saw."""
    t = start_tracer(tmp_path, monkeypatch, NETIO_TEST_XMIT_MISS="50",
                     NETIO_TEST_RX_MISS="1" if rx_miss else "0")
    if rx_miss and t.build == "compat":
        assert t.close() == 0
        pytest.skip("the compat build counts zero-copy bytes at xmit, per namespace, as on the "
                    "kernels it is for, which have no sock_send_length (6.3): bytes neither "
                    "program saw are missed there")
    try:
        s, c, snap, spid, cpid = run_workload(t, topologies[transport], tmp_path, "zero-copy",
                                              size, COUNTS[size])
        check_exact(s, c, snap, spid, cpid, "zero-copy")
        zc = snap["zerocopy"]
        assert snap["zc_tx_bytes"] == s["bytes"], (snap["zc_tx_bytes"], s["bytes"], zc)
        assert netns_zc(snap) == [s["bytes"]], (netns_zc(snap), s["bytes"])
        # what each program saw: the receive tells what xmit missed, unless it missed it too
        seen = zc["zc_bytes_seen_at_xmit"] + zc["zc_bytes_unseen_at_xmit"]
        assert zc["zc_bytes_no_program_saw"] == s["bytes"] - seen, zc
        if rx_miss:
            assert zc["zc_skbs_unseen_at_xmit"] == 0, zc
            assert 0 < seen < s["bytes"], zc
        else:
            assert zc["zc_skbs_unseen_at_xmit"] > 0, zc
            assert 0 < zc["zc_bytes_unseen_at_xmit"] < s["bytes"], zc
            assert seen == s["bytes"], zc
    finally:
        assert t.close() == 0


@pytest.mark.parametrize("transport", ("loopback", "veth"))
def test_unfollowed_sender_counts_for_its_namespace(topologies, tmp_path, monkeypatch,  # noqa: F811
                                                    transport):
    """Only the namespaces followed, not the sending process: its MSG_ZEROCOPY bytes, which
    xmit leaves to the send, still count for the namespace, exactly, and for no process."""
    t = start_tracer(tmp_path, monkeypatch)
    try:
        s, c, snap, spid, cpid = run_workload(t, topologies[transport], tmp_path, "zero-copy",
                                              65536, COUNTS[65536], follow_server=False)
        assert str(spid) not in snap["processes"]
        assert netns_zc(snap) == [s["bytes"]], (netns_zc(snap), s["bytes"], snap["zerocopy"])
        assert all(not p["zc_tx_bytes"] for p in snap["processes"].values())
    finally:
        assert t.close() == 0
