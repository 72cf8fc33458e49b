"""trace --openmetrics: prometheus_client's own parser reads what we write, with
the tracer's bytes and its log2 histogram's counts."""
import json
import os
import socket
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import REPO
from report import openmetrics

# a tracer snapshot from a traced one-copy 4 KiB veth run (netio-trace run --quick, 6.18 host)
FIXTURE = os.path.join(REPO, "tests", "python", "fixtures", "trace.json")


def _trace():
    with open(FIXTURE) as f:
        return json.load(f)


def test_openmetrics_parses_with_bytes_and_histograms():
    t = _trace()
    fams = {f.name: f for f in text_string_to_metric_families(openmetrics.text(t).decode())}
    tx = {s.labels["pid"]: s.value for s in fams["netio_tx_bytes"].samples
          if s.name == "netio_tx_bytes_total"}
    for pid, p in t["processes"].items():
        assert tx[pid] == p["tx_bytes"]
    hist = fams["netio_syscall_latency_seconds"]
    counts = {(s.labels["pid"], s.labels["syscall"]): s.value for s in hist.samples
              if s.name.endswith("_count")}
    for pid, p in t["processes"].items():
        for name, sc in (p.get("syscalls") or {}).items():
            if sc.get("hist_log2_ns"):
                assert counts[(pid, name)] == sum(sc["hist_log2_ns"].values())
    les = [float(s.labels["le"]) for s in hist.samples if s.name.endswith("_bucket")]
    assert les and min(les) > 0


def test_every_call_is_counted_beside_the_timed_ones():
    """netio_syscalls_total is each class's count, every call; the histogram's _count is its
    timed calls, fewer where the tracer sampled them."""
    t = _trace()
    pid, p = next((pid, p) for pid, p in t["processes"].items() if p.get("syscalls"))
    name, sc = next(iter(p["syscalls"].items()))
    sc["timed"] = max(1, sc["count"] // 16)
    sc["hist_log2_ns"] = {"1024": sc["timed"]}
    fams = _families(openmetrics.text(t).decode())
    calls = {(s.labels["pid"], s.labels["syscall"]): s.value
             for s in fams["netio_syscalls"].samples if s.name == "netio_syscalls_total"}
    assert calls[(pid, name)] == sc["count"]
    counts = {(s.labels["pid"], s.labels["syscall"]): s.value
              for s in fams["netio_syscall_latency_seconds"].samples if s.name.endswith("_count")}
    assert counts[(pid, name)] == sc["timed"]


def _families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_every_histogram_has_the_tracers_log2_buckets():
    """The same buckets for every series (empty ones too), le = 2^(i+1) ns, the last +Inf,
    each cumulative count the tracer's slots summed up to it."""
    t = _trace()
    hist = _families(openmetrics.text(t).decode())["netio_syscall_latency_seconds"]
    series = {}
    for s in hist.samples:
        if s.name.endswith("_bucket"):
            key = (s.labels["pid"], s.labels["syscall"])
            series.setdefault(key, []).append((float(s.labels["le"]), s.value))
    expected_les = [2.0 ** (i + 1) / 1e9 for i in range(39)] + [float("inf")]
    assert series
    for (pid, name), buckets in series.items():
        assert [le for le, _ in buckets] == expected_les
        hist_ns = t["processes"][pid]["syscalls"][name]["hist_log2_ns"]
        for le, cum in buckets:
            assert cum == sum(n for lo, n in hist_ns.items() if int(lo) < le * 1e9)


def test_copies_are_counted_per_process():
    t = _trace()
    fams = _families(openmetrics.text(t).decode())
    rx = {s.labels["pid"]: s.value for s in fams["netio_rx_copies"].samples
          if s.name == "netio_rx_copies_total"}
    assert rx and all(rx[pid] == p["rx_copy_calls"] for pid, p in t["processes"].items())


def test_served_on_a_port_from_the_json_the_tracer_rewrites(tmp_path):
    """:PORT serves what the trace JSON holds at each scrape, as OpenMetrics when asked."""
    path = tmp_path / "trace.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = openmetrics.serve(str(path), port)
    try:
        def scrape():
            req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={
                "Accept": "application/openmetrics-text; version=1.0.0"})
            with urllib.request.urlopen(req, timeout=10) as r:
                return _families(r.read().decode())
        assert "netio_tx_bytes" not in scrape()     # nothing before the tracer wrote it
        t = _trace()
        path.write_text(json.dumps(t))
        pid = next(iter(t["processes"]))
        tx = {s.labels["pid"]: s.value for s in scrape()["netio_tx_bytes"].samples}
        assert tx[pid] == t["processes"][pid]["tx_bytes"]
        t["processes"][pid]["tx_bytes"] += 1000
        path.write_text(json.dumps(t))
        tx = {s.labels["pid"]: s.value for s in scrape()["netio_tx_bytes"].samples}
        assert tx[pid] == t["processes"][pid]["tx_bytes"]
    finally:
        server.shutdown()
