"""The path categories on live runs: "other" stays under 10% of the samples at 64 KiB and 20% at 256 B,
for every strategy, over loopback and veth, with the tracer's default stack sampling; the
shares are printed (pytest -s, or -rP under make vmtest).

- On the host: a `netio-trace run --trace-only` sweep of every strategy this kernel runs, read
  back from runs.jsonl as users' scripts read it.
- In the 6.1 guest (NETIO_VMTEST=1, make vmtest): one sampling tracer, the copy strategies run
  under it for half a second each, their folded stacks attributed here (the driver's report is
  too slow under emulation).
"""
import json
import os
import subprocess

import pytest

from analysis import attribution
from conftest import BUILD, REPO, needs_built, needs_root
from test_tracer import VMTEST, Tracer, run_workload, topologies  # noqa: F401 (a fixture)

OTHER_TARGET = {65536: 0.10, 256: 0.20}
SIZES = (256, 65536)
TRANSPORTS = ("loopback", "veth")
COPY_STRATEGIES = ("two-copy", "one-copy", "zero-copy")
MIN_SAMPLES = 50

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]


def _line(where, strategy, size, a):
    top = sorted(((v, c) for c, v in a["share"].items() if c != "other"), reverse=True)[:4]
    lo, hi = a["share_ci95"]["other"]
    return (f"{where:14} {strategy:11} {size:>6} n={a['samples']:5}  other "
            f"{a['share']['other']:6.1%} [{lo:.1%}-{hi:.1%}]  "
            + " ".join(f"{c} {v:.0%}" for v, c in top))


def _other_stacks(folded, n=8):
    """The n commonest stacks of "other" in a folded file, their last frames: what a run over
    its target left unclassified."""
    stacks = {}
    with open(folded) as f:
        for line in f:
            parsed = attribution.parse_folded_line(line)
            if parsed and attribution.classify(parsed[0]) == "other":
                key = ";".join(parsed[0][-5:])
                stacks[key] = stacks.get(key, 0) + parsed[1]
    return [f"    {v:4} {k}" for k, v in sorted(stacks.items(), key=lambda kv: -kv[1])[:n]]


def _check(rows, capsys, title):
    """Print every run's shares; every run's "other" under its target, on enough samples."""
    with capsys.disabled():
        print(f"\n{title} (other's 95% interval in brackets):")
        for row in rows:
            print("  " + _line(*row))
    # over: the whole 95% interval above the target; a point over it whose interval still
    # holds the target is undecided (a run of a hundred samples under emulation), said so
    over = [r for r in rows if r[3]["share_ci95"]["other"][0] > OTHER_TARGET[r[2]]]
    close = [r for r in rows if r not in over and r[3]["share"]["other"] > OTHER_TARGET[r[2]]]
    with capsys.disabled():     # a run over its target: what its "other" was
        for r in over + close:
            verdict = "over" if r in over else "undecided"
            if r[3].get("folded"):
                print("\n".join([f"  other of {_line(*r)} ({verdict}):"] +
                                _other_stacks(r[3]["folded"])))
    assert not over, "\n".join(_line(*r) for r in over)
    few = [_line(*r) for r in rows if r[3]["samples"] < MIN_SAMPLES]
    assert not few, "too few samples:\n" + "\n".join(few)


def _strategies():
    """Every strategy this machine runs (io_uring's may be refused: doctor says why)."""
    cp = subprocess.run([os.path.join(REPO, "netio-trace"), "doctor", "--json"],
                        capture_output=True, text=True, timeout=120,
                        env={**os.environ, "NETIO_BUILD": BUILD})
    uring = (json.loads(cp.stdout) if cp.stdout.strip().startswith("{") else {}).get(
        "io_uring") or {}
    return COPY_STRATEGIES + ("per-field", "sendfile") + tuple(
        s for s in ("io-uring", "io-uring-zc") if s in uring and uring[s] is None)


@pytest.mark.skipif(VMTEST, reason="the host's sweep (the guest runs the tracer directly)")
def test_live_sweep_keeps_other_under_target(tmp_path, capsys):
    out = tmp_path / "results"
    strategies = _strategies()
    cp = subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--strategies",
                         ",".join(strategies), "--sizes", "256,64K", "--threads", "1",
                         "--transport", ",".join(TRANSPORTS), "--duration", "1", "--repeat", "1",
                         "--trace-only", "--out", str(out)],
                        capture_output=True, text=True, timeout=900,
                        env={**os.environ, "NETIO_BUILD": BUILD})
    assert cp.returncode == 0, cp.stderr[-2000:]
    with open(out / "runs.jsonl") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    assert sorted((r["strategy"], r["msg_size"], r["transport"]) for r in runs) == sorted(
        (s, z, t) for s in strategies for z in SIZES for t in TRANSPORTS)
    rows = [(f"host {r['transport']}", r["strategy"], r["msg_size"], r["attribution"])
            for r in runs]
    _check(rows, capsys, "shares on a live sweep, host")


@pytest.fixture(scope="module")
def sampling_tracer(tmp_path_factory):
    os.environ["NETIO_TEST_SAMPLE"] = "1"      # Tracer() adds --no-sample without it
    try:
        t = Tracer(log=str(tmp_path_factory.mktemp("tracer") / "tracer.log"))
    finally:
        del os.environ["NETIO_TEST_SAMPLE"]
    yield t
    assert t.close() == 0


@pytest.mark.skipif(not VMTEST, reason="runs inside the VM (make vmtest)")
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_vm_live_runs_keep_other_under_target(sampling_tracer, topologies, tmp_path, capsys,
                                              transport):
    rows = []
    for strategy in COPY_STRATEGIES:
        for size in SIZES:
            tmp = tmp_path / f"{strategy}-{size}"
            tmp.mkdir()
            *_, snap, _, _ = run_workload(sampling_tracer, topologies[transport], tmp, strategy,
                                          size, None, duration=0.5)
            folded = tmp / "stacks.folded"
            sampling_tracer.ok(f"snapshot {tmp / 'again.json'} {folded}")
            source = (snap.get("samples") or {}).get("source") or "tick"
            a = attribution.attribute_file(str(folded), source, None, None, None, None)
            a["folded"] = str(folded)
            rows.append((f"guest {transport}", strategy, size, a))
    _check(rows, capsys, f"shares on live runs, 6.1 guest, {transport}")
