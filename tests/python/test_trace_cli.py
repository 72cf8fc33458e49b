"""`netio-trace trace`'s bad input for --report and --baseline: one line on stderr,
exit 2, before anything runs."""
import json

from conftest import run_cli


def _one_line(cp, *needles):
    assert cp.returncode == 2, (cp.returncode, cp.stderr)
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for n in needles:
        assert n in lines[0], lines[0]


def test_report_into_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line(run_cli("trace", "--report", str(f), "--", "true"), "is a file, not a directory")
    _one_line(run_cli("trace", "--report", str(tmp_path / "no" / "dir"), "--", "true"),
              "does not exist")


def test_report_into_a_sweep(tmp_path):
    (tmp_path / "runs.jsonl").write_text("")
    _one_line(run_cli("trace", "--report", str(tmp_path), "--", "true"), "holds a sweep")


def test_unreadable_baseline(tmp_path):
    _one_line(run_cli("trace", "--baseline", str(tmp_path / "nope"), "--", "true"),
              "--baseline", "no such directory")
    _one_line(run_cli("trace", "--baseline", str(tmp_path), "--", "true"),
              "no runs.jsonl there")
    # runs, but no forward comparison of a zero-copy strategy with its copy
    run = {"strategy": "one-copy", "msg_size": 4096, "threads": 1, "transport": "veth",
           "repeat": 0, "status": "ok", "throughput_gbps": 1.0}
    (tmp_path / "runs.jsonl").write_text(json.dumps(run) + "\n")
    _one_line(run_cli("trace", "--baseline", str(tmp_path), "--", "true"),
              "no forward runs of a zero-copy strategy")
