"""`netio-trace run` end to end on this machine (root, built binaries): --quick, and an
interrupted sweep finished with --resume. Skipped where either is missing."""
import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from analysis import files

from netio_trace.system import paths
from netio_trace.system.machine import has_pmu
from conftest import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(paths.have_binary(b) for b in
                                 ("netio-server", "netio-client", "netio-tracer"))
    or not files.find_tool("ip"),
    reason="needs root and the built binaries (NETIO_BUILD)")

DESIGN_COLUMNS = ["strategy", "msg_size", "threads", "transport", "repeat", "throughput_gbps",
                  "latency_us", "cycles", "L1_cache_misses", "LLC_load_misses", "context_switches"]


def _env():
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO
    e["NETIO_ROOT"] = REPO
    e["NETIO_BUILD"] = paths.build_dir()
    return e


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "netio_trace.cli", *args], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _left_behind(pid, out):
    """Namespaces and processes that the driver with this pid started and left: namespaces and
    workloads carry `netio-<pid>-` in their names and arguments, the tracer writes its stderr
    to OUT/tracer.log."""
    ns = os.listdir("/var/run/netns") if os.path.isdir("/var/run/netns") else []
    ns = [n for n in ns if n.startswith(f"netio-{pid}-")]
    log = str(out / "tracer.log")
    procs = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            if any(a.startswith(f"netio-{pid}-".encode()) for a in args):
                procs.append(int(p))
            elif os.readlink(f"/proc/{p}/fd/2") == log:
                procs.append(int(p))
        except OSError:
            continue
    return ns, procs


def _runs(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def test_quick_end_to_end(tmp_path):
    out = tmp_path / "q"
    t0 = time.monotonic()
    p = _start("run", "--quick", "--out", str(out))
    stdout, stderr = p.communicate(timeout=180)
    wall = time.monotonic() - t0
    assert p.returncode == 0, stderr[-3000:]
    assert wall <= 60, f"--quick took {wall:.1f} s"
    runs = _runs(out / "runs.jsonl")
    scheduled = [r for r in runs if r["repeat"] < 3]
    assert len(scheduled) == 36            # 18 configurations' rounds, untraced and traced
    assert sum(r["traced"] for r in scheduled) == 18
    assert all(r["traced"] is False for r in runs if r["repeat"] >= 3)   # extra rounds
    for r in runs:
        assert r["status"] == "ok", r.get("error")
        assert r["bytes_sent"] == r["bytes_received"] > 0
        assert r["tcp"]["cc"] == "cubic"
        assert r["warmup_s"] > 0 and r["throughput_whole_gbps"] > 0
        for k in ("latency_us", "throughput_gbps", "duration_s", "messages_sent", "zerocopy",
                  "perf", "repeat", "msg_size", "threads", "transport"):
            assert k in r
        if not r["traced"]:
            assert r["trace"] is None and r["attribution"] is None
            continue
        assert r["trace"]["tx_bytes"] == r["bytes_sent"]
        assert r["trace"]["rx_copy_bytes"] == r["bytes_received"]
        assert r["attribution"] and abs(sum(r["attribution"]["share"].values()) - 1) < 1e-3
        assert r["attribution"]["source"] == ("tick" if not has_pmu() else "cycles")
        if r["strategy"] == "zero-copy":
            assert r["zerocopy"]["completions"] == r["zerocopy"]["sends"] > 0
    with open(out / "results.csv") as f:
        header = next(csv.reader(f))
    assert header[:len(DESIGN_COLUMNS)] == DESIGN_COLUMNS
    for f in ("report.md", "report.html", "sweep.json"):
        assert (out / f).stat().st_size > 0
    assert len(list((out / "plots").glob("*.png"))) >= 6
    assert list((out / "flamegraphs").glob("*.folded"))
    assert list((out / "flamegraphs").glob("*.svg"))
    assert _left_behind(p.pid, out) == ([], [])
    md = (out / "report.md").read_text()
    assert os.uname().release in md and "zero-copy" in md
    assert "What the instrument cost in this sweep" in md
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["traced"] for r in rows} == {"true", "false"}
    _check_tracer_kept(rows, scheduled)


def _check_tracer_kept(rows, runs):
    """Every traced row of a scheduled round carries tracer_kept, its throughput over the
    untraced run's of the same configuration and round; no bound on the value, since identical
    short runs here differ up to 2x."""
    cfg = ("strategy", "msg_size", "threads", "transport", "repeat")
    tput = {(tuple(str(r[k]) for k in cfg), r["traced"]): r["throughput_gbps"] for r in runs}
    traced_rows = [r for r in rows if r["traced"] == "true" and int(r["repeat"]) < 3]
    assert len(traced_rows) == 18
    for row in traced_rows:
        key = tuple(row[k] for k in cfg)
        expect = tput[(key, True)] / tput[(key, False)]
        assert float(row["tracer_kept"]) == pytest.approx(expect, rel=1e-5), key
        assert float(row["tracer_kept"]) > 0, key
    assert all(r["tracer_kept"] == "" for r in rows if r["traced"] == "false")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_then_resume(tmp_path, sig):
    out = tmp_path / "i"
    args = ["run", "--strategies", "two-copy,one-copy", "--sizes", "4K", "--threads", "1",
            "--repeat", "4", "--duration", "0.3", "--out", str(out)]
    p = _start(*args)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / "runs.jsonl").exists() and len(_runs(out / "runs.jsonl")) >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.15)                     # land in the middle of a run
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, stderr[-2000:]
    assert "--resume" in stderr
    assert _left_behind(p.pid, out) == ([], [])
    done = _runs(out / "runs.jsonl")
    assert 2 <= len(done) < 16
    assert not (out / "report.md").exists()
    r = _start("run", "--resume", str(out))
    stdout, stderr = r.communicate(timeout=120)
    assert r.returncode == 0, stderr[-2000:]
    assert f"{16 - len(done)} run(s) to do of 16" in stderr
    runs = _runs(out / "runs.jsonl")
    scheduled = {x["key"] for x in runs if x["repeat"] < 4}
    assert len(scheduled) == 16 and len({x["key"] for x in runs}) == len(runs)
    assert all(x["status"] == "ok" for x in runs)
    assert (out / "report.html").exists()
    assert _left_behind(r.pid, out) == ([], [])
