"""How the reports say the syscalls were timed (report/latency.py): nothing where every call
was, the N and what the figures then are where calls were sampled, in the sweep's report and
in trace's."""
import json
import os
import shutil

from report import build as report, latency, trace_report

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def test_the_sentence_names_n_only_where_calls_were_sampled():
    assert latency.sampling_sentence([{"timed": True, "sampled_1_in": 1}]) is None
    assert latency.sampling_sentence([{"timed": False}, None, {}]) is None
    one = latency.sampling_sentence([{"timed": True, "sampled_1_in": 16}, None])
    assert "the first of every 16 calls of each syscall class" in one
    assert "(`--latency-sample`; 1 times every call)" in one
    both = latency.sampling_sentence([{"timed": True, "sampled_1_in": 16},
                                      {"timed": True, "sampled_1_in": 4},
                                      {"timed": True, "sampled_1_in": 1}])
    assert "the first of every 4 or 16 calls" in both


def _trace_report(tmp_path, sampled_1_in):
    d = tmp_path / f"trace-{sampled_1_in}"
    d.mkdir()
    trace = json.loads(open(os.path.join(FIXTURES, "trace-report", "trace.json")).read())
    trace["latency"] = {"timed": True, "sampled_1_in": sampled_1_in}
    (d / "trace.json").write_text(json.dumps(trace))
    shutil.copy(os.path.join(FIXTURES, "trace-report", "stacks.folded"), d / "stacks.folded")
    trace_report.write_meta(str(d), ["sh", "run.sh"], None, "none", [], {})
    trace_report.build(str(d))
    return (d / "report.md").read_text()


def test_trace_report_says_the_calls_were_sampled(tmp_path):
    md = _trace_report(tmp_path, 16)
    assert "Syscall latency is sampled: each thread timed the first of every 16 calls" in md
    assert "| pid | comm | syscall | calls | timed | bytes |" in md
    assert "Syscall latency is sampled" not in _trace_report(tmp_path, 1)


def test_sweep_report_says_the_calls_were_sampled(fixture_dir):
    lines = (fixture_dir / "runs.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    for r in runs:
        if isinstance(r.get("trace"), dict):
            r["trace"]["latency"] = {"timed": True, "sampled_1_in": 16}
    (fixture_dir / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    report.build(str(fixture_dir))
    md = (fixture_dir / "report.md").read_text()
    assert "Syscall latency is sampled: each thread timed the first of every 16 calls" in md
