"""The empty-program floor (bench/floor.py, build/netio-bench-floor): it counts runs on the hooks
it is given, says which it could not attach, and leaves nothing loaded after a close or a
SIGINT; bench.per_message puts its ns per run beside the tracer's programs.

Needs root and the built binaries ($NETIO_BUILD). A smoke test: no timing is checked."""
import json
import os
import signal
import subprocess
import sys
import time

from bench import floor
from conftest import BUILD, REPO, needs_built, needs_root

pytestmark = [needs_root("BPF"), needs_built("netio-bench-floor")]

HOOKS = ["tp_btf:sched_process_fork", "tp_btf:sched_process_exit", "cgroup:getsockopt",
         "tp_btf:no_such_tracepoint"]


def _floor_programs():
    """Ids of the floor's programs loaded now (their names begin floor_)."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [p["id"] for p in json.loads(out) if p.get("name", "").startswith("floor_")]


def _gone():
    """Whether the floor's programs are unloaded (the kernel frees them a moment later)."""
    deadline = time.monotonic() + 10
    while _floor_programs() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _floor_programs()


def test_floor_counts_its_hooks_and_leaves_nothing(tmp_path):
    assert _gone(), "a floor was loaded before the test"
    with floor.Floor(HOOKS, str(tmp_path / "floor.log")) as fl:
        assert fl.attached == HOOKS[:3]
        assert list(fl.missing) == ["tp_btf:no_such_tracepoint"]
        before = fl.read()
        for _ in range(3):
            subprocess.run(["true"], check=True)
        d = floor.delta(before, fl.read())
        assert _floor_programs()
    assert d["tp_btf:sched_process_fork"]["runs"] >= 3
    assert d["tp_btf:sched_process_exit"]["runs"] >= 3
    assert d["tp_btf:sched_process_fork"]["ns"] > 0
    assert _gone()


def test_sigint_ends_the_floor_and_unloads_it(tmp_path):
    fl = floor.Floor(HOOKS[:1], str(tmp_path / "floor.log")).start()
    try:
        os.kill(fl.proc.pid, signal.SIGINT)
        assert fl.proc.wait(timeout=10) == 0
    finally:
        fl.close()
    assert _gone()


def test_per_message_puts_the_floor_beside_each_program(tmp_path):
    out = tmp_path / "pm.json"
    r = subprocess.run([sys.executable, "-m", "bench.per_message", "--seconds", "0.3",
                        "--json", str(out)], cwd=REPO, env=dict(os.environ, NETIO_BUILD=BUILD),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    rows = {p["program"]: p for p in res["programs"]}
    send = rows["tp_send_length"]
    assert send["floor_ns_per_run"] > 0
    assert send["own_ns_per_run"] == send["ns_per_run"] - send["floor_ns_per_run"]
    assert res["runs_per_message_target"] == 2.0
    assert res["runs_per_message"] == sum(p["runs"] for p in res["programs"]) / res["messages"]
    assert "| all | " in r.stdout and "floor ns per run" in r.stdout
    assert _gone()


def test_per_message_unfollowed_runs_the_programs_for_another_process(tmp_path):
    out = tmp_path / "pm.json"
    r = subprocess.run([sys.executable, "-m", "bench.per_message", "--seconds", "0.3",
                        "--unfollowed", "--json", str(out)], cwd=REPO,
                       env=dict(os.environ, NETIO_BUILD=BUILD), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    rows = {p["program"]: p for p in res["programs"]}
    assert res["config"]["unfollowed"] and res["runs_per_message_target"] is None
    assert rows["tp_send_length"]["runs_per_message"] >= 1      # every send runs it
    assert rows["tp_send_length"]["floor_ns_per_run"] > 0
    assert "not followed" in r.stdout.splitlines()[0]
    assert _gone()


def test_floor_without_stats_attaches_and_counts_nothing(tmp_path):
    with floor.Floor(HOOKS[:1], str(tmp_path / "floor.log"), stats=False) as fl:
        assert fl.stats == "off" and fl.attached == HOOKS[:1]
        before = fl.read()
        subprocess.run(["true"], check=True)
        d = floor.delta(before, fl.read())
        assert _floor_programs()
    assert d["tp_btf:sched_process_fork"] == {"runs": 0, "ns": 0}
    assert _gone()


def test_stats_cost_measures_each_state(tmp_path):
    out = tmp_path / "sc.json"
    r = subprocess.run([sys.executable, "-m", "bench.stats_cost", "--rounds", "3", "--seconds",
                        "0.2", "--json", str(out)], cwd=REPO,
                       env=dict(os.environ, NETIO_BUILD=BUILD), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert len(res["results"]) == 3
    assert all(set(rd) == {"untraced", "stats off", "stats on"} for rd in res["results"])
    assert res["summary"]["reported_ns_per_run"]["median"] > 0
    assert "stats off" in r.stdout and "reported by the stats" in r.stdout
    assert _gone()
