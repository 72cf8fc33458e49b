"""`netio-trace run --receive` end to end: each run record names its receive and
MSS, the client's bytes by kind and the tracer's agree, mmap maps at least 90% behind a
zero-copy sender at MSS 4108 over loopback and nothing behind a one-copy sender, and the
report answers in its Receive section. Needs root; about 20 s."""
import json
import os

from conftest import needs_built, needs_root, run_cli

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]


def test_receive_sweep(tmp_path):
    out = tmp_path / "out"
    cp = run_cli("run", "--strategies", "one-copy,zero-copy", "--receive", "copy,mmap",
                 "--mss", "4108", "--sizes", "64K", "--threads", "1", "--transport",
                 "loopback", "--duration", "0.3", "--repeat", "1", "--out", str(out))
    assert cp.returncode == 0, cp.stderr[-3000:]
    with open(out / "runs.jsonl") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    assert len(runs) == 8 and all(r["status"] == "ok" for r in runs), [
        (r["key"], r.get("error")) for r in runs]
    by = {(r["strategy"], r["receive"], r["traced"]): r for r in runs}
    for (strategy, receive, traced), r in by.items():
        assert r["mss"] == 4108 and r["received"]["rcv_mss"] == 4096
        assert r["key"].startswith(strategy + ("" if receive == "copy" else "+mmap") + "/")
        share = r["received"]["mapped"] / r["bytes_received"]
        if receive == "mmap" and strategy == "zero-copy":
            assert share >= 0.90, (r["key"], share)
        else:
            assert share == 0, (r["key"], share)
        if traced:
            # every kind the tracer counted is the client's own count (record.check)
            assert r["checks"]["tracer_rx_eq_received"] is True
            assert r["checks"]["tracer_rx_mapped_bytes_eq_client"] is True
            assert r["trace"]["rx_mapped_bytes"] == r["received"]["mapped"]
    with open(out / "report.md") as f:
        md = f.read()
    assert "## Receive: where receive zero-copy wins, and why it falls back" in md
    assert "| loopback | one-copy | 64K | 4096 | 0.0% | the sender's pages are not its own" in md
    assert os.path.getsize(out / "plots" / "receive_throughput.png") > 1000
    with open(out / "results.csv") as f:
        header = f.readline().strip().split(",")
    assert {"receive", "mss", "rx_mapped", "rx_mapped_bytes", "share_page_mapping"} <= set(header)


def test_rx_xdp_and_align_sweep(tmp_path):
    """run --rx-xdp --align page: every record says both (`rx_xdp`, `align`), the key names the
    aligned sender, mmap maps nothing behind the XDP program, and the report gives that as the
    reason, with the mapped share."""
    out = tmp_path / "out"
    cp = run_cli("run", "--strategies", "zero-copy", "--align", "page", "--receive", "copy,mmap",
                 "--mss", "4108", "--sizes", "64K", "--threads", "1", "--transport", "veth",
                 "--rx-xdp", "--no-trace", "--duration", "0.3", "--repeat", "2",
                 "--out", str(out))
    assert cp.returncode == 0, cp.stderr[-3000:]
    with open(out / "runs.jsonl") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    assert len(runs) == 4 and all(r["status"] == "ok" for r in runs), [
        (r["key"], r.get("error")) for r in runs]
    for r in runs:
        assert r["rx_xdp"] is True and r["align"] == "page"
        assert r["key"].startswith("zero-copy@page" + ("+mmap/" if r["receive"] == "mmap"
                                                       else "/"))
        assert r["received"]["mapped"] == 0 and r["bytes_received"] > 0
    with open(out / "report.md") as f:
        md = f.read()
    assert ("| veth + XDP | zero-copy@page | 64K | 1448 | 0.0% | an XDP program on the "
            "receiving device") in md
    with open(out / "sweep.json") as f:
        sweep = json.load(f)
    assert sweep["rx_xdp"] is True and sweep["aligns"] == ["page"]


def test_rx_xdp_needs_veth(tmp_path):
    cp = run_cli("run", "--rx-xdp", "--transport", "loopback", "--out", str(tmp_path / "o"))
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    assert "--rx-xdp attaches to the receiving veth: loopback has none" in cp.stderr
