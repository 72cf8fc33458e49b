"""The bench's timer floor (section 1): netio-busy-loop under each sampler.

Needs root, the built binaries ($NETIO_BUILD) and bpftrace (make deps). Checks that each
sampler really sampled the loop at its rate, that the table is built from those runs, and
that nothing of ours is left loaded afterwards.
"""
import argparse
import json
import os
import shutil
import subprocess

import pytest

from bench import harness, markdown_overhead, measure_overhead, observers
from conftest import BUILD, needs_built, needs_root

BUSY = os.path.join(BUILD, "netio-busy-loop")

pytestmark = [needs_root("BPF, perf_event_open, cgroups"), needs_built("netio-busy-loop")]


def test_busy_loop_reports_its_rate_and_refuses_bad_input():
    r = subprocess.run([BUSY, "--seconds", "0.2"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["blocks"] > 0 and out["seconds"] >= 0.2
    assert out["blocks_per_s"] == pytest.approx(out["blocks"] / out["seconds"], rel=1e-3)
    for bad in (["--seconds", "0"], ["--seconds", "x"], ["--sekonds", "1"]):
        r = subprocess.run([BUSY, *bad], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.fixture
def small_bench():
    b = harness.Bench(argparse.Namespace(duration=0.4, rounds=1))
    yield b
    b.cleanup()


@pytest.mark.skipif(not shutil.which("bpftrace"), reason="bpftrace not installed (make deps)")
def test_each_sampler_samples_the_loop_at_its_rate(small_bench):
    before = harness.bpf_programs()
    dur = small_bench.args.duration
    ours = small_bench.busy_loop(dur, observers.sampling_alone(observers.timer_source()))
    # sampling alone: only the stack sampler (and the one probe point it keeps) attached
    assert set(ours["attached"]) == observers.SAMPLING_ALONE_ATTACHED
    # 999 Hz on the loop's CPU for the loop's time (the loop is on-CPU the whole run)
    assert 0.5 * 999 * dur < ours["samples"] < 1.5 * 999 * dur, ours
    tick = small_bench.busy_loop(dur, observers.sampling_alone("tick"))
    assert tick["sample_source"] == "tick"
    assert 0 < tick["samples"] < 0.6 * 999 * dur, tick     # CONFIG_HZ <= 1000 on a busy CPU
    peer = small_bench.busy_loop(dur, observers.BpftraceTimer())
    assert peer["samples"] >= 0.5 * 999 * dur, peer     # every CPU's events, the loop's among them
    for run in (ours, tick, peer):
        assert run["blocks_per_s"] > 0
    assert harness.bpf_programs() == before


@pytest.mark.skipif(not shutil.which("bpftrace"), reason="bpftrace not installed (make deps)")
def test_timer_floor_table_has_every_sampler_and_records_its_verdicts(small_bench):
    lines = measure_overhead.timer_floor(small_bench)
    rows = lines[lines.index("|---|---|---|---|---|---|") + 1:]
    assert len(rows) == len(markdown_overhead.TIMER_FLOOR)
    for (variant, what), row in zip(markdown_overhead.TIMER_FLOOR, rows):
        assert row.startswith(f"| {what} |")
        assert "n=1" in row         # one round: every cell is a measured summary, no n/a
    assert "Untraced: " in lines[0]
    recorded = {g for g, *_ in small_bench.verdicts}
    assert any("bpftrace" in g for g in recorded) and any("our sampling" in g for g in recorded)
