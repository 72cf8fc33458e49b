"""A report never claims `--no-trace` for a sweep that asked for the tracer: with
fabricated run records (the committed fixture's runs as the untraced pass, and a traced pass
that failed, or was never recorded) the report says what the sweep asked for and, where its
traced runs failed, how many and the first error."""
import json
import os

from analysis import passes
from conftest import FIXTURES
from report import build as report
from report import plots, untraced

ERROR = ("tracer could not attach: cannot load the filter and fork handler "
         "(sched_process_fork): Invalid argument")


def _fixture_runs():
    with open(os.path.join(FIXTURES, "runs.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _untraced_pass():
    """The fixture's ok runs as an untraced pass (what --no-trace records)."""
    return [dict(r, traced=False, trace=None, attribution=None, perf=None)
            for r in _fixture_runs() if r.get("status", "ok") == "ok"]


def _failed_traced_pass(n):
    """n traced runs that could not start, as the sweep records them (record.failed_run)."""
    out = []
    for r in _untraced_pass()[:n]:
        keep = {k: r[k] for k in ("strategy", "msg_size", "threads", "transport", "repeat")}
        out.append(dict(keep, duration_requested_s=0.5, status="failed", traced=True,
                        error=ERROR if not out else "tracer could not attach: later",
                        wall_s=0.0))
    return out


def _markdown(runs, sweep):
    d = report.compose("/nonexistent", runs, {}, [], {}, [], sweep)
    return d.markdown()


TWO_PASSES = {"passes": ["untraced", "traced"], "trace": True}
NO_TRACE = {"passes": ["untraced"], "trace": False}


def test_no_trace_sweep_says_no_trace():
    md = _markdown(_untraced_pass(), NO_TRACE)
    assert "Measured without the tracer (`--no-trace`)" in md
    assert "No run was traced: measured without the tracer (`--no-trace`)." in md
    assert "No configuration ran both untraced and traced (`--no-trace`)" in md


def test_traced_runs_that_failed_are_counted_with_the_first_error():
    runs = _untraced_pass() + _failed_traced_pass(5)
    md = _markdown(runs, TWO_PASSES)
    assert "--no-trace" not in md
    assert (f"The sweep asked for the tracer, but its 5 traced run(s) all failed (the first "
            f"error: `{ERROR}`): throughput and latency are the workloads' own") in md
    assert "No run was traced: the sweep asked for the tracer, but its 5 traced" in md
    assert "the sweep asked for both passes: the runs of one failed or were not recorded" in md


def test_without_sweep_json_the_run_records_say_what_was_asked():
    runs = _untraced_pass() + _failed_traced_pass(3)
    md = _markdown(runs, None)
    assert "--no-trace" not in md and "its 3 traced run(s) all failed" in md
    assert passes.asked(runs) == {"untraced", "traced"}
    assert passes.asked(_untraced_pass()) == {"untraced"}


def test_traced_pass_asked_but_never_recorded():
    md = _markdown(_untraced_pass(), TWO_PASSES)
    assert "--no-trace" not in md
    assert "no traced run was recorded" in md and "--resume DIR" in md
    # a sweep.json from before the two passes: "trace" alone says it was traced
    assert passes.asked([], {"trace": True}) == {"traced"}
    assert passes.asked([], {"trace": False}) == {"untraced"}


def test_trace_only_sweep_without_a_second_pass():
    traced = [dict(r, traced=True) for r in _fixture_runs()]
    assert untraced.why_untraced(traced, {"passes": ["traced"]}) is None
    assert untraced.one_pass_why(traced, {"passes": ["traced"]}) == "(`--trace-only`)"


def test_cache_miss_plot_says_why_there_is_no_traced_run():
    runs = _untraced_pass() + _failed_traced_pass(2)
    why = untraced.short_why(runs, TWO_PASSES)
    assert why == "every traced run failed"
    title, detail = plots._no_cache_misses_reason([], why)
    assert detail.startswith("every traced run failed: no traced run") and "--no-trace" not in detail
    _, detail = plots._no_cache_misses_reason([], untraced.short_why(_untraced_pass(), NO_TRACE))
    assert detail.startswith("--no-trace: no traced run")
    assert untraced.short_why(_untraced_pass(), TWO_PASSES) == "no traced run recorded"


def test_build_reads_sweep_json(tmp_path):
    """The whole report from a results directory: sweep.json asked for both passes, every
    traced run failed."""
    runs = _untraced_pass()[:6] + _failed_traced_pass(4)
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    (tmp_path / "sweep.json").write_text(json.dumps(TWO_PASSES))
    report.build(str(tmp_path))
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "--no-trace" not in md and "--no-trace" not in html
    assert "its 4 traced run(s) all failed" in md and ERROR in md
