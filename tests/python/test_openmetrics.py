"""trace --openmetrics (issue 18): prometheus_client's own parser reads what we write, with
the tracer's bytes and its log2 histogram's counts."""
import json
import os

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
