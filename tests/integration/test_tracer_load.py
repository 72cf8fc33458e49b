"""`doctor` loads the tracer for real before it says yes, and `run` checks once,
before its first run, that the tracer can load (root, built binaries).

Free of host-only assumptions: these run on the host and inside each kernel of the matrix
(NETIO_VMTEST=1), where the three that test no more than the driver's logic, with a stand-in
tracer, are left out (every command started under QEMU/TCG is slow). A tracer that cannot
load is the stand-in of tests/python/fake_tracer.py (FAKE_TRACER_MODE=fail-load) as the
netio-tracer of a build tree whose workloads are the real ones (NETIO_BUILD)."""
import json
import os
import time

import pytest

from conftest import BUILD, REPO, needs_built, needs_root, run_cli
from netio_trace import doctor_ladder as ladder
from netio_trace.run import params as P

pytestmark = [needs_root("BPF, namespaces"),
              needs_built("netio-server", "netio-client", "netio-tracer")]

VMTEST = os.environ.get("NETIO_VMTEST") == "1"
RUNGS = {"fentry", "kprobe", "tp_btf", "tracepoint", "inferred", "unavailable"}
FAKE = os.path.join(REPO, "tests", "python", "fake_tracer.py")
REASON = "cannot load the filter and fork handler (sched_process_fork): Invalid argument"
TINY = ["--strategies", "two-copy", "--sizes", "4K", "--threads", "1", "--repeat", "1",
        "--duration", "0.2"]


def _doctor_json():
    """`doctor --json`'s object. In a guest, the one the guest's script ran just before the
    tests (tests/vm/run-vmtest.sh: NETIO_VM_DOCTOR_JSON), whose exit status that script
    checks: under QEMU/TCG a doctor takes minutes."""
    done = os.environ.get("NETIO_VM_DOCTOR_JSON")
    if VMTEST and done:
        with open(done) as f:
            return json.load(f)
    cp = run_cli("doctor", "--json", env={"NETIO_BUILD": BUILD})
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def test_doctor_loads_the_tracer_and_reports_its_ladder():
    d = _doctor_json()
    t = d["tracer"]
    assert t["loaded"] is True and t["error"] is None, t
    assert set(t["attach"]) == set(ladder.POINTS), t["attach"]
    for point, rung in t["attach"].items():
        assert rung in RUNGS, (point, rung)
        if rung != "fentry":      # below the best rung, or nothing: the tracer says why
            assert t["attach_why"].get(point), (point, rung, t["attach_why"])
    # the ladder the tracer loaded keeps to what --probe found attachable here
    used = set(t["attach"].values())
    for kind in ("fentry", "kprobe"):
        if d["attach"][kind] is False:
            assert kind not in used, (kind, t["attach"])
    assert t["bpf_build"]["name"] in ("storage", "compat")
    assert t["bpf_build"] == d["bpf_build"], "--probe and the loaded tracer chose other builds"
    if t["bpf_build"]["name"] == "compat":
        assert t["bpf_build"]["missing"] or os.environ.get("NETIO_BPF_BUILD") == "compat"
        assert t["software_from"] == "perf_event"    # the compat build has no flush
    assert t["software_from"] in ("task_struct", "perf_event")
    assert isinstance(t["unavailable"], dict)
    print(f"\n{d['kernel']}: {t['bpf_build']['name']} build, "
          + ", ".join(f"{p}={r}" for p, r in t["attach"].items()))


def _failing_build(tmp_path):
    d = tmp_path / "build"
    d.mkdir()
    for b in ("netio-server", "netio-client"):
        os.symlink(os.path.join(BUILD, b), d / b)
    os.symlink(FAKE, d / "netio-tracer")
    return {"NETIO_BUILD": str(d), "FAKE_TRACER_MODE": "fail-load",
            "FAKE_TRACER_CALLS": str(tmp_path / "calls")}


def _loads_tried(tmp_path):
    """How many times the tracer was started to load (not to --probe)."""
    calls = (tmp_path / "calls").read_text().splitlines()
    return sum("--control" in line.split() for line in calls)


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.skipif(VMTEST, reason="a stand-in tracer, kernel or not: the host runs it")
def test_run_stops_once_when_the_tracer_cannot_load(tmp_path):
    env = _failing_build(tmp_path)
    out = tmp_path / "out"
    t0 = time.monotonic()
    cp = run_cli("run", "--quick", "--trace-only", "--out", str(out), env=env)
    wall = time.monotonic() - t0
    assert cp.returncode == 2, cp.stderr
    assert _lines(cp.stderr) == [
        f"netio-trace run: the tracer cannot load on this kernel ({os.uname().release}): "
        f"{REASON}; `--no-trace` runs untraced"], cp.stderr
    assert not out.exists(), sorted(os.listdir(out))      # no partial sweep, no directory
    assert _loads_tried(tmp_path) == 1
    assert wall < 60, f"{wall:.1f} s"


@pytest.mark.skipif(VMTEST, reason="the check above, resumed, kernel or not: the host runs it")
def test_resume_of_a_traced_sweep_stops_once_and_leaves_it_as_it_was(tmp_path):
    env = _failing_build(tmp_path)
    out = tmp_path / "traced"
    out.mkdir()
    params = P.SweepParams(strategies=("two-copy",), sizes=(4096,), threads=(1,),
                           transports=("veth",), duration=0.2, repeat=1, passes=("traced",))
    (out / "sweep.json").write_text(json.dumps(params.to_dict()))
    before = (out / "sweep.json").read_text()
    cp = run_cli("run", "--resume", str(out), env=env)
    assert cp.returncode == 2, cp.stderr
    assert len(_lines(cp.stderr)) == 1 and REASON in cp.stderr, cp.stderr
    assert sorted(os.listdir(out)) == ["sweep.json"]
    assert (out / "sweep.json").read_text() == before
    assert _loads_tried(tmp_path) == 1


@pytest.mark.skipif(VMTEST, reason="no tracer in it: the host runs it")
def test_no_trace_runs_without_a_tracer_that_cannot_load(tmp_path):
    env = _failing_build(tmp_path)
    out = tmp_path / "untraced"
    cp = run_cli("run", *TINY, "--no-trace", "--no-report", "--out", str(out), env=env)
    assert cp.returncode == 0, cp.stderr
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert [(r["status"], r["traced"]) for r in runs] == [("ok", False)]
    assert json.loads((out / "sweep.json").read_text())["passes"] == ["untraced"]
