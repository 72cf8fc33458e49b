"""`netio-trace diff A B`: a planted regression is flagged and exits 1; identical
sweeps give none; the differential flame graph names its sides; bad input exits 2."""
import json
import os
import shutil
import subprocess
import sys

from conftest import REPO
from analysis import diff
from report import build

FIXTURE = os.path.join(REPO, "tests", "python", "fixtures")


def _sweep(tmp_path, name, slower=None):
    """A copy of the fixture sweep, with the report's merged stacks; slower = (strategy,
    size): that configuration's throughput x 0.7 in every round."""
    d = tmp_path / name
    shutil.copytree(FIXTURE, d)
    if slower:
        runs = [json.loads(line) for line in (d / "runs.jsonl").read_text().splitlines()]
        for r in runs:
            if (r["strategy"], r["msg_size"]) == slower and r.get("throughput_gbps"):
                r["throughput_gbps"] *= 0.7
        (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return d


def _diff(a, b, *extra):
    return subprocess.run([sys.executable, "-m", "netio_trace.cli", "diff", str(a), str(b),
                           *extra], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                          capture_output=True, text=True, timeout=300)


def test_planted_regression_is_flagged(tmp_path):
    a = _sweep(tmp_path, "a")
    b = _sweep(tmp_path, "b", slower=("one-copy", 65536))
    result = diff.compare(diff.load(str(a)), diff.load(str(b)))
    regressed = {(r["config"]["strategy"], r["config"]["msg_size"]) for r in result["regressed"]}
    assert regressed == {("one-copy", 65536)}
    row = result["regressed"][0]
    assert row["paired"] and abs(row["ratio"]["median"] - 0.7) < 1e-6
    cp = _diff(a, b)
    assert cp.returncode == 1, cp.stderr
    md = (b / "diff.md").read_text()
    assert "regressed" in md and "one-copy" in md and (b / "diff.html").stat().st_size > 0


def test_identical_sweeps_do_not_regress(tmp_path):
    a, b = _sweep(tmp_path, "a"), _sweep(tmp_path, "b")
    result = diff.compare(diff.load(str(a)), diff.load(str(b)))
    assert result["rows"] and not result["regressed"]
    assert all(r["verdict"] == "same" and r["moved"] == [] for r in result["rows"])
    assert _diff(a, b, "--out", str(tmp_path / "o")).returncode == 0


def test_differential_flame_graph_names_its_sides(tmp_path):
    a, b = _sweep(tmp_path, "a"), _sweep(tmp_path, "b", slower=("one-copy", 65536))
    for d in (a, b):
        build.build(str(d))
    out = tmp_path / "o"
    assert _diff(a, b, "--out", str(out)).returncode == 1
    svgs = list((out / "flamegraphs").glob("diff-*.svg"))
    assert svgs
    text = svgs[0].read_text()
    assert "A → B" in text and "more samples in B" in text and str(a) in text


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    a = _sweep(tmp_path, "a")
    for args in ([a, tmp_path / "nope"], [a, tmp_path], [a, a, "--threshold", "x"]):
        cp = _diff(*args)
        assert cp.returncode == 2, (args, cp.stderr)
        assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_different_parameters_are_compared_on_what_they_share(tmp_path):
    """B ran without 256 B messages and with another duration: the shared configurations are
    compared, and diff.md names the parameters that differ and the configurations left out."""
    a, b = _sweep(tmp_path, "a"), _sweep(tmp_path, "b")
    runs = [json.loads(line) for line in (b / "runs.jsonl").read_text().splitlines()]
    (b / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs
                                          if r["msg_size"] != 256))
    params = json.loads((b / "sweep.json").read_text())
    params["sizes"], params["duration"] = [4096, 65536], 1.0
    (b / "sweep.json").write_text(json.dumps(params))
    result = diff.compare(diff.load(str(a)), diff.load(str(b)))
    assert result["rows"] and all(r["config"]["msg_size"] != 256 for r in result["rows"])
    assert result["only_a"] and all(k[2] == 256 for k in result["only_a"])
    assert not result["only_b"] and not result["regressed"]
    assert _diff(a, b).returncode == 0
    md = (b / "diff.md").read_text()
    assert "parameters differ" in md and "duration: A 0.5 / B 1.0" in md
    assert "Left out (only in one sweep): A: loopback, 1 thread(s), 256, one-copy;" in md
