"""Report generation from the committed fixture (tests/python/fixtures/runs.jsonl)."""
import base64
import csv
import json
import os
import re

import pytest

from analysis import passes, summary
from report import build as report
from conftest import copy_fixture, run_cli


@pytest.fixture
def built(fixture_dir):
    """The fixture's report, for a test that changes its directory."""
    info = report.build(str(fixture_dir))
    return fixture_dir, info


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    """The fixture's report, built once for the tests that only read it (a build is the
    slow part of each)."""
    d = copy_fixture(tmp_path_factory.mktemp("report"))
    return d, report.build(str(d))


def test_every_file_is_written(built_once):
    d, info = built_once
    for f in ("results.csv", "report.md", "report.html"):
        assert (d / f).stat().st_size > 0
    pngs = sorted(p.name for p in (d / "plots").glob("*.png"))
    for name in ("throughput_vs_size.png", "latency_vs_threads.png", "cycles_per_byte.png",
                 "cache_misses.png", "syscall_latency.png", "zerocopy_fallback.png"):
        assert name in pngs
    for p in (d / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert info["plot_errors"] == []
    folded = sorted(p.name for p in (d / "flamegraphs").glob("*.folded"))
    assert "veth-one-copy-64K.folded" in folded and "veth-zero-copy-64K.folded" in folded


def test_report_answers_from_the_data(built_once):
    d, _ = built_once
    md = (d / "report.md").read_text()
    # machine, kernel, rungs, missing counters, estimated
    assert "6.18.44-fc-v669" in md and "2 core(s)" in md and "Firecracker" in md
    assert "tp_btf (71)" in md and "tracepoint (71)" in md
    assert "`cycles`" in md and "`LLC-load-misses`" in md and "never 0" in md
    assert "**estimated**" in md and "(est.)" in md
    # crossovers, computed: one-copy overtakes two-copy between 256 and 4K on veth, 1 thread
    assert re.search(r"veth, 1 thread\(s\): one-copy overtakes two-copy between 256 and 4K", md)
    assert "veth, 1 thread(s): zero-copy does not overtake one-copy within the range 256–64K" in md
    # paired ratios with their spread
    assert re.search(r"Paired one-copy/two-copy by size, median \(min–max\): 256 \d\.\d\d "
                     r"\(\d\.\d\d–\d\.\d\d\), 4K 1\.\d\d", md)
    # why zero-copy loses: COPIED completions, fallback bytes, the fallback's share of cycles
    zsec = md.split("Why zero-copy loses")[1].split("### Threads")[0]
    assert "zero-copy loses to one-copy" in zsec
    assert "SO_EE_CODE_ZEROCOPY_COPIED" in zsec and "100.0% of completions" in zsec
    assert re.search(r"the fallback copy \d+\.\d% of the samples", zsec)
    assert "skb_copy_ubufs" in zsec
    # threads vs throughput and context switches
    assert re.search(r"veth, one-copy, 64K\*\*: Gbit/s by threads — 1: \d+\.\d \(\d+\.\d–\d+\.\d\), "
                     r"2: \d+\.\d", md)
    assert re.search(r"Context switches rise from \d+\.\d to \d+\.\d per MiB", md)
    # flags: the run with 3% retransmits and the failed run
    assert "one-copy/4096/2/veth/1" in md and "3.0%" in md
    assert "two-copy/256/2/loopback/1" in md and "Connection reset by peer" in md


def test_summary_table_medians(built_once):
    d, _ = built_once
    md = (d / "report.md").read_text()
    row = next(l for l in md.splitlines() if l.startswith("| veth | zero-copy | 64K |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-2] == "100"                     # COPIED %
    assert re.match(r"\d+\.\d\d \(\d+\.\d\d–\d+\.\d\d\)", cells[3])


def test_html_is_self_contained(built_once):
    d, _ = built_once
    html = (d / "report.html").read_text()
    imgs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) >= 6
    assert base64.b64decode(imgs[0])[:4] == b"\x89PNG"
    assert "<table>" in html and "one-copy overtakes two-copy" in html
    assert 'src="plots/' not in html


def test_rebuild_from_runs_and_folded_alone(built):
    d, _ = built
    first = (d / "report.md").read_text()
    for f in ("results.csv", "report.md", "report.html"):
        (d / f).unlink()
    for p in (d / "plots").glob("*"):
        p.unlink()
    for p in (d / "flamegraphs").glob("*"):
        p.unlink()
    (d / "sweep.json").unlink()
    cp = run_cli("report", str(d))
    assert cp.returncode == 0, cp.stderr
    again = (d / "report.md").read_text()
    strip = lambda t: re.sub(r"Report built [^\n]*", "", t)   # noqa: E731
    assert strip(again) == strip(first)
    assert len(list((d / "plots").glob("*.png"))) >= 6
    with open(d / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 72


def test_flame_graphs_when_renderer_present(built_once):
    pytest.importorskip("report.flamegraph")
    d, info = built_once
    svgs = {p.name for p in (d / "flamegraphs").glob("*.svg")}
    assert "veth-zero-copy-64K.svg" in svgs
    assert "veth-diff-one-copy-vs-zero-copy-64K.svg" in svgs


def test_report_cli_refuses_non_results(tmp_path):
    cp = run_cli("report", str(tmp_path))
    assert cp.returncode == 2 and "no runs.jsonl" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
    cp = run_cli("report", str(tmp_path / "nope"))
    assert cp.returncode == 2 and "no such directory" in cp.stderr


def test_no_pmu_image_says_not_countable(built_once):
    d, _ = built_once
    md = (d / "report.md").read_text()
    assert "plots/cache_misses.png" in md
    assert os.path.getsize(d / "plots" / "cache_misses.png") > 1000


def test_report_says_the_figures_were_measured_traced(built, fixture_dir):
    d, _ = built
    md = (d / "report.md").read_text()
    # the fixture is a sweep of the traced pass only (as --trace-only makes)
    assert "measured with the tracer attached" in md and "without `--trace-only`" in md
    assert re.search(r"its BPF programs alone took \d+( \(\d+–\d+\))? ns per message", md)
    assert "`--sample-source tick`" in md       # the fixture sampled on cpu-clock (no PMU)
    # the same sweep run with --no-trace says so instead
    lines = (fixture_dir / "runs.jsonl").read_text().splitlines()
    untraced = []
    for line in lines:
        r = json.loads(line)
        r["traced"] = False
        untraced.append(json.dumps(r))
    (fixture_dir / "runs.jsonl").write_text("\n".join(untraced) + "\n")
    sweep = json.loads((fixture_dir / "sweep.json").read_text())
    sweep.update(trace=False, passes=["untraced"])
    (fixture_dir / "sweep.json").write_text(json.dumps(sweep))
    report.build(str(fixture_dir))
    md = (fixture_dir / "report.md").read_text()
    assert "Measured without the tracer (`--no-trace`)" in md
    assert "measured with the tracer attached" not in md


def test_two_pass_sweep_answers_from_the_untraced_pass(fixture_dir):
    """Every traced run of the fixture gets an untraced twin 1.25x as fast: the answers take
    the twins' throughput, the tracer's cost is 0.80 per configuration, in the report and in
    results.csv."""
    runs = [json.loads(line) for line in (fixture_dir / "runs.jsonl").read_text().splitlines()]
    twins = []
    for r in runs:
        u = dict(r, traced=False, trace=None, attribution=None)
        if r.get("throughput_gbps"):
            u["throughput_gbps"] = r["throughput_gbps"] * 1.25
        twins.append(u)
    (fixture_dir / "runs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in runs + twins))
    report.build(str(fixture_dir))
    md = (fixture_dir / "report.md").read_text()
    assert "comes from the **untraced pass**" in md
    assert "What the instrument cost in this sweep" in md
    assert "| 0.80 (0.80–0.80) |" in md
    assert (fixture_dir / "plots" / "tracer_cost.png").stat().st_size > 1000
    with open(fixture_dir / "results.csv") as f:
        rows = list(csv.DictReader(f))
    kept = [float(r["tracer_kept"]) for r in rows if r["traced"] == "true" and r["tracer_kept"]]
    assert kept and all(abs(k - 0.8) < 1e-6 for k in kept)
    assert all(r["tracer_kept"] == "" for r in rows if r["traced"] == "false")
    # the summary's throughput is the untraced twins'
    answers, traced, answers_traced = passes.split(runs + twins)
    assert not answers_traced and all(r["traced"] is False for r in answers)
    row = summary.rows(answers, traced=traced)[0]
    assert row["cpb_total"] is not None


def test_report_names_the_causes_of_drops(fixture_dir):
    """Drops over the sweep are summed per cause (the snapshot's drops_by_cause); a sweep
    without any says nothing of them."""
    path = fixture_dir / "runs.jsonl"
    report.build(str(fixture_dir))
    assert "dropped" not in (fixture_dir / "report.md").read_text()
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    for r, cause in zip(runs[:2], ("thread_storage", "process_stats")):
        r["trace"]["drops"] = 2
        r["trace"]["drops_by_cause"] = {"thread_storage": 0, "process_stats": 0, cause: 2}
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    report.build(str(fixture_dir))
    md = (fixture_dir / "report.md").read_text()
    assert "dropped 4 event(s) over the sweep (thread_storage 2, process_stats 2)" in md
