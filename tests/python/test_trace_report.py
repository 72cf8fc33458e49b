"""The report of `trace --report DIR` from a real trace
(tests/python/fixtures/trace-report/, README there): its sections and verdicts, a
self-contained report.html, `netio-trace report DIR` rebuilding it, and headless Chromium
showing it."""
import json
import os
import re
import shutil

import pytest
import numpy as np

from conftest import FIXTURES, run_cli
from report import trace_report
from screenshot import render

MACHINE = {"hostname": "vm", "cpu": "Intel(R) Xeon(R) Processor", "kernel": "6.18.44-fc-v669"}


def _baseline(d):
    """A zerocopy preset's forward runs: behind up to 16K, ahead at 63K, every round."""
    runs = []
    for rep in range(3):
        for size, ratio in ((1024, 0.6), (4096, 0.7), (16384, 0.9), (64512, 1.25)):
            for st, gbps in (("one-copy", 10.0), ("zero-copy", 10.0 * ratio)):
                runs.append({"strategy": st, "msg_size": size, "threads": 1,
                             "transport": "forward", "repeat": rep, "traced": False,
                             "status": "ok", "throughput_gbps": gbps, "machine": MACHINE})
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return str(d)


@pytest.fixture
def trace_dir(tmp_path):
    d = tmp_path / "report"
    d.mkdir()
    for f in ("trace.json", "stacks.folded"):
        shutil.copy(os.path.join(FIXTURES, "trace-report", f), d / f)
    trace_report.write_meta(str(d), ["sh", "run.sh"], _baseline(tmp_path / "base"), "given", [],
                            MACHINE)
    return d


def test_report_sections_and_verdicts(trace_dir):
    info = trace_report.build(str(trace_dir))
    md = (trace_dir / "report.md").read_text()
    for heading in ("## The trace", "## Verdicts: would zero-copy pay off, flow by flow?",
                    "## Processes and sockets: bytes and copies by kind",
                    "### Send sizes and syscall latency", "## Where the CPU went",
                    "## Counters, estimates and the tracer's cost"):
        assert heading in md
    assert "Command: `sh run.sh`" in md and "kernel `6.18.44-fc-v669`" in md
    # the baseline the verdicts stand on, with its ratios and their verdicts
    assert re.search(r"zero-copy against one-copy: 1K 0\.60 \(0\.60–0\.60, behind\)", md)
    # the zero-copy sender: delivered locally, with its own evidence
    server = next(v for v in info["verdicts"] if v["flow"]["comm"] == "netio-server")
    assert server["verdicts"]["zero-copy"][1].startswith(
        "would not help: delivered locally: the kernel copied 1.2 GiB of its 1.2 GiB sent "
        "zero-copy back")
    assert "would not help: delivered locally: the kernel copied" in md
    # sockets with their route, copies by kind, and the tracer's cost per event
    assert re.search(r"\| \d+ \| tcp \| 127\.0\.0\.1:\d+ \| 127\.0\.0\.1:\d+ \| loopback \| "
                     r"1\.2 GiB \| 20000 \|", md)
    assert re.search(r"ran \d+ times for [\d.]+ ms: \d+ ns per event", md)
    assert "kernel rx copy (_copy_to_iter)" in md and "[95%]" in md
    assert info["plots"]["send_sizes"] and info["plots"]["categories"]
    assert info["flame"] == "flamegraph.svg" and (trace_dir / "flamegraph.svg").exists()
    v = json.loads((trace_dir / "verdicts.json").read_text())
    assert {f["comm"] for f in v["flows"]} == {"netio-server", "netio-client"}


def test_html_is_self_contained(trace_dir):
    trace_report.build(str(trace_dir))
    html = (trace_dir / "report.html").read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) >= 3
    assert '<img src="data:image/svg+xml;base64,' in html       # the flame graph
    assert 'src="plots/' not in html and "would not help: delivered locally" in html


def test_report_dir_rebuilds_a_trace_report(trace_dir):
    trace_report.build(str(trace_dir))
    for f in ("report.md", "report.html", "verdicts.json"):
        (trace_dir / f).unlink()
    cp = run_cli("report", str(trace_dir))
    assert cp.returncode == 0, cp.stderr
    assert "trace report rebuilt (2 flow(s) judged)" in cp.stderr
    assert "would not help: delivered locally" in (trace_dir / "report.md").read_text()
    assert (trace_dir / "verdicts.json").exists()


def test_rebuild_says_when_the_baseline_is_gone(trace_dir, tmp_path):
    shutil.rmtree(tmp_path / "base")
    trace_report.build(str(trace_dir))
    md = (trace_dir / "report.md").read_text()
    assert "The baseline could not be read again" in md and "No baseline" in md


def test_trace_report_renders_in_chromium(trace_dir):
    trace_report.build(str(trace_dir))
    rgb = render(trace_dir / "report.html", trace_dir / "screenshot.png")
    assert (rgb < 0.95).any(axis=2).mean() > 0.05            # text, tables, plots
    assert (rgb.max(axis=2) - rgb.min(axis=2) > 0.25).mean() > 0.005   # colour: plots
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 200
    # the verdict boxes' green border (the doc's "answer" style) is on the page
    assert (np.abs(rgb * 255 - np.array([44, 160, 44])).max(axis=2) < 8).sum() > 100


def test_what_the_sockets_miss_is_said():
    t = {"sockets_untracked": 3, "unavailable": {},
         "sockets_unattributed": {"42": {"tx_bytes": 100, "tx_calls": 1, "rx_copy_bytes": 0,
                                         "tx_spliced_bytes": 100}}}
    notes = trace_report._socket_gaps(t)
    assert notes[0].startswith("3 event(s) found no socket record")
    assert notes[1].startswith("pid 42: tx_bytes 100, tx_calls 1, tx_spliced_bytes 100 "
                               "counted for the process and no socket")
    assert trace_report._socket_gaps({"sockets_unattributed": {}, "sockets_untracked": 0}) == []


def test_what_the_fallback_copy_can_miss_is_said():
    base = {"perf": {"cycles": 1}, "zerocopy": {"zc_bytes_no_program_saw": 0}}
    assert trace_report._estimated(base) == []
    missed = dict(base, zerocopy={"zc_bytes_no_program_saw": 24816})
    (note,) = trace_report._estimated(missed)
    assert "can miss up to 24816 B" in note and "fallback copy" in note
    assert trace_report._estimated(dict(base, zerocopy={"zc_bytes_no_program_saw": None})) == []


def test_the_per_skb_programs_on_demand_are_said():
    """At the counting level the per-skb programs wait for a send whose zero-copy bytes only
    they count: the report says so, whether they were attached, and if not, the TCP zero-copy
    sends whose fallback copy went unseen; at the full level nothing is said."""
    base = {"perf": {"cycles": 1}}
    skb = {"mode": "on-demand", "attached": False, "zc_sends_before": 0,
           "zc_uncounted_sends_before": 0}
    (note,) = trace_report._estimated(dict(base, zerocopy={"skb_programs": skb}))
    assert "waited for a send whose zero-copy bytes only they count" in note
    assert note.endswith("never attached, none seen")
    (note,) = trace_report._estimated(dict(base, zerocopy={"skb_programs": dict(skb, attached=True)}))
    assert note.endswith("attached then")
    tcp = dict(skb, zc_sends_before=812)
    (note,) = trace_report._estimated(dict(base, zerocopy={"skb_programs": tcp}))
    assert "never attached; 812 zero-copy sends (TCP MSG_ZEROCOPY)" in note
    assert note.endswith("their fallback copy unseen")
    always = dict(skb, mode="always", attached=True)
    assert trace_report._estimated(dict(base, zerocopy={"skb_programs": always})) == []


def test_the_bytes_copied_again_are_said():
    """A socket's fallback copy with a part copied twice (retransmitted segments that had
    arrived): its cell says so."""
    s = {"fallback_copy_bytes": 13 << 20, "fallback_copy_again_bytes": 300 << 10}
    assert trace_report._copied_back(s) == "13.0 MiB (300.0 KiB again)"
    assert trace_report._copied_back(dict(s, fallback_copy_again_bytes=0)) == "13.0 MiB"
    assert trace_report._copied_back({"fallback_copy_bytes": 5}) == "5 B"
