"""The per-skb programs on demand (needs root): where zero-copy bytes count at their send
(the tracepoint rung, storage build), the programs that look at every skb for zero-copy ones
(net_dev_start_xmit, netif_receive_skb, kfree_skb) are attached only once a followed or
unfollowed thread makes a send whose zero-copy bytes only they count: on a UDP SO_ZEROCOPY
socket, or through io_uring (bpf/maps.bpf.h, zc_skbs_made). A copying sender runs none of
them, and its figures stay exact; so does a TCP MSG_ZEROCOPY sender, whose bytes count at
the send. A zero-copy sender's skbs pass unseen, so the figures they feed are null, with
why, never short; `skb-programs always` (the sweep's, before a zero-copy run)
attaches them before the first send, until the next reset. The sweep's tracer waits for
them at either level, and asks for them before each zero-copy run."""
import json
import os
import pty
import re
import socket
import subprocess

import pytest

from conftest import BUILD, REPO, needs_built, needs_root
from test_tracer import (COUNTS, Tracer, check_exact, check_skbs_at_tcp, proc,  # noqa: F401
                         run_workload, topologies)

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]

PER_SKB = ("tp_xmit", "tp_netif_receive", "tp_kfree_skb")


@pytest.fixture(scope="module")
def tracer(tmp_path_factory):
    """A counting-level tracer with exact run counts, skipped where the per-skb programs do
    not wait (they count what no send counts there)."""
    t = Tracer("--no-latency", "--bpf-stats", "always",
               log=str(tmp_path_factory.mktemp("tracer") / "tracer.log"))
    snap = t.snapshot(str(tmp_path_factory.mktemp("snap") / "first.json"))
    mode = snap["zerocopy"]["skb_programs"]["mode"]
    if mode != "on-demand":
        assert t.close() == 0
        pytest.skip(f"per-skb programs {mode} here (pinning: {t.attach['pinning']}, build "
                    f"{t.build}): only where zero-copy bytes count at their send")
    yield t
    assert t.close() == 0


def per_skb_runs(snap):
    return {k: v["runs"] for k, v in snap["self"]["programs"].items()
            if k.startswith(PER_SKB) and v["runs"]}


@pytest.mark.parametrize("transport", ("loopback", "veth"))
def test_a_copying_sender_runs_no_per_skb_program(tracer, topologies, tmp_path,  # noqa: F811
                                                  transport):
    s, c, snap, spid, cpid = run_workload(tracer, topologies[transport], tmp_path, "one-copy",
                                          65536, COUNTS[65536])
    check_exact(s, c, snap, spid, cpid, "one-copy")
    skb = snap["zerocopy"]["skb_programs"]
    assert skb == {"mode": "on-demand", "attached": False, "zc_sends_before": 0,
                   "zc_uncounted_sends_before": 0}, skb
    assert per_skb_runs(snap) == {}
    assert "fallback_copy_bytes" not in snap["unavailable"], snap["unavailable"]
    targets = {k: v["target"] for k, v in snap["self"]["programs"].items()
               if k.startswith(PER_SKB)}
    assert targets and all(t.endswith("(on demand)") for t in targets.values()), targets


SKB_COUNTS = ("zc_skbs_sent", "fallback_copy_skbs", "fallback_copy_again_skbs", "zc_skbs_again",
              "zc_skbs_unseen_at_xmit", "zc_bytes_unseen_at_xmit", "zc_bytes_seen_at_xmit",
              "zc_bytes_no_program_saw")


def test_a_tcp_zero_copy_sender_runs_no_per_skb_program(tracer, topologies,  # noqa: F811
                                                        tmp_path):
    """TCP MSG_ZEROCOPY on demand: its zero-copy bytes count at the send, exact, and ask for
    no per-skb program; its skbs went by unseen, so the fallback copy and the skb counts are
    null, and said why, never short or zero."""
    s, c, snap, spid, cpid = run_workload(tracer, topologies["veth"], tmp_path, "zero-copy",
                                          65536, None, duration=1, skb_on_demand=True)
    sent = s["bytes"]
    skb = snap["zerocopy"]["skb_programs"]
    assert not skb["attached"] and skb["zc_sends_before"] >= 1, skb
    assert skb["zc_uncounted_sends_before"] == 0, skb
    assert per_skb_runs(snap) == {}
    assert proc(snap, spid)["tx_bytes"] == sent and snap["zc_tx_bytes"] == sent
    assert proc(snap, spid)["zc_tx_bytes"] == sent
    assert snap["fallback_copy_bytes"] is None
    assert snap["zerocopy"]["fallback_copy_again_bytes"] is None
    assert "zero-copy sends passed" in snap["unavailable"]["fallback_copy_bytes"]
    assert "TCP MSG_ZEROCOPY" in snap["unavailable"]["fallback_copy_bytes"]
    assert {k: snap["zerocopy"][k] for k in SKB_COUNTS} == dict.fromkeys(SKB_COUNTS)
    assert "zerocopy.skb_counts" in snap["unavailable"], snap["unavailable"]
    for n in snap["netns"].values():
        assert n["fallback_copy_bytes"] is None and n["zc_tx_skbs"] is None, n
        assert n["zc_rx_kept_bytes"] is None, n


def test_always_until_the_next_reset(tracer, topologies, tmp_path):  # noqa: F811
    """`skb-programs always` (run_workload's for a zero-copy strategy): attached before the
    first send, every figure exact; the next reset leaves them waiting again."""
    s, c, snap, spid, cpid = run_workload(tracer, topologies["loopback"], tmp_path, "zero-copy",
                                          65536, COUNTS[65536])
    check_exact(s, c, snap, spid, cpid, "zero-copy")
    skb = snap["zerocopy"]["skb_programs"]
    assert skb["attached"] and skb["zc_sends_before"] == 0, skb
    check_skbs_at_tcp(snap)     # the counting level: no tcp_probe, the diagnostic null
    assert "counting level" in snap["unavailable"]["zerocopy.zc_skbs_at_tcp"]
    tracer.ok("reset")
    after = tracer.snapshot(str(tmp_path / "after-reset.json"))
    assert after["zerocopy"]["skb_programs"]["attached"] is False
    assert per_skb_runs(after) == {}


def test_the_sweep_runs_them_for_zero_copy_senders_only(tmp_path):
    """A sweep's traced copying run passes no per-skb program; its zero-copy run has them
    from its first send, so its fallback copy is counted, not null. Where they never wait
    (the exact rungs, the compat build), both runs have them."""
    out = tmp_path / "results"
    cp = subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--strategies",
                         "one-copy,zero-copy", "--sizes", "4K", "--threads", "1", "--repeat",
                         "1", "--duration", "0.3", "--out", str(out)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    with open(out / "runs.jsonl") as f:
        runs = [json.loads(line) for line in f]
    assert all(r["status"] == "ok" for r in runs)
    traces = {r["strategy"]: json.loads((out / r["files"]["raw"] / "trace.json").read_text())
              for r in runs if r["traced"]}
    assert sorted(traces) == ["one-copy", "zero-copy"], sorted(traces)
    copying, zc = traces["one-copy"], traces["zero-copy"]
    # they can wait where zero-copy bytes count at their send (that figure is not null there)
    waits = copying["zerocopy"]["zc_bytes_no_program_saw"] is not None
    assert copying["zerocopy"]["skb_programs"]["mode"] == ("on-demand" if waits else "always")
    assert copying["zerocopy"]["skb_programs"]["attached"] is not waits
    assert (per_skb_runs(copying) == {}) is waits, per_skb_runs(copying)
    skb = zc["zerocopy"]["skb_programs"]
    assert skb["attached"] and skb["zc_sends_before"] == 0, skb
    assert "fallback_copy_bytes" not in zc["unavailable"], zc["unavailable"]
    assert zc["fallback_copy_bytes"] >= zc["zc_tx_bytes"] > 0


def view_of(args, json_path):
    """netio-tracer's own run of a zero-copy pair over loopback with its stderr a terminal,
    which then gets the human view beside the JSON: the view's text."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    pair = (f"{BUILD}/netio-server --strategy zero-copy --size 16K --threads 1 --port {port} "
            f"--addr 127.0.0.1 --count 2000 >/dev/null & sleep 0.3; {BUILD}/netio-client "
            f"--addr 127.0.0.1 --port {port} --threads 1 --size 16K >/dev/null; wait")
    master, slave = pty.openpty()
    p = subprocess.Popen([f"{BUILD}/netio-tracer", "--no-sample", *args, "--json", json_path,
                          "--", "sh", "-c", pair], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:         # EIO: the tracer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert p.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("level", (("--skb-programs", "always"), ("--no-latency",)))
def test_the_view_shows_what_the_json_counts(tmp_path, level):
    """The human view's zero-copy rows: a figure the JSON leaves null (the fallback copy and
    the skb counts of a TCP zero-copy sender at the counting level, whose skbs no per-skb
    program saw; tcp_probe's diagnostic there) is shown as unavailable or left out, never as
    the short count."""
    text = view_of(level, str(tmp_path / "t.json"))
    snap = json.loads((tmp_path / "t.json").read_text())
    row = re.search(r"fallback copy \(zc received, copied\)\s+\S+\s+(\S+)", text)
    assert row, text
    fallback = snap["fallback_copy_bytes"]
    assert row.group(1) == ("-" if fallback is None else str(fallback)), (row.group(0), fallback)
    skbs = re.search(r"zerocopy skbs: .*", text)
    sent = snap["zerocopy"]["zc_skbs_sent"]
    assert (skbs is not None) is bool(sent), (text, sent)
    if level == ("--no-latency",) and snap["zerocopy"]["skb_programs"]["mode"] == "on-demand":
        assert fallback is None and sent is None, snap["zerocopy"]
    if not skbs:
        return
    at_tcp = snap["zerocopy"]["zc_skbs_at_tcp"]
    assert ("still zerocopy" in skbs.group(0)) is (at_tcp is not None), (skbs.group(0), at_tcp)
