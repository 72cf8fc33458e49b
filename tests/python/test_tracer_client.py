"""The --control client against a stand-in tracer (no root needed)."""
import json
import os

import pytest

from netio_trace.run import params as P
from netio_trace.run.instrument import Instrument
from netio_trace.tracer import ControlTracer, trace_argv, TracerError

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_tracer.py")


def test_protocol_roundtrip(tmp_path):
    t = ControlTracer(binary=FAKE, log_path=str(tmp_path / "tracer.log"))
    with t:
        assert t.attach == {"tx_bytes": "tracepoint", "stacks": "perf_event"}
        t.clear()
        t.reset()
        t.netns_add("netio-1-0-snd")
        t.pid_add(1234)
        snap = t.snapshot(str(tmp_path / "trace.json"), str(tmp_path / "stacks.folded"))
        assert snap["pids"] == [1234] and snap["netns_names"] == ["netio-1-0-snd"]
        assert (tmp_path / "stacks.folded").read_text() == "a;b;c 3\n"
        with pytest.raises(TracerError, match="unknown command"):
            t.command("frobnicate")
        pid = t.pid
    assert t.proc.returncode == 0
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


@pytest.mark.parametrize("mode", ("", "old"))
def test_the_per_skb_programs_are_asked_for_zero_copy_and_io_uring_senders(tmp_path, monkeypatch,
                                                                          mode):
    """skb_programs_for: `skb-programs always` before a run whose sender may make zero-copy
    skbs, nothing before a copying one; an older build that knows no such command (it attaches
    them always) is no error."""
    asked = tmp_path / "commands"
    monkeypatch.setenv("FAKE_TRACER_COMMANDS", str(asked))
    monkeypatch.setenv("FAKE_TRACER_MODE", mode)
    with ControlTracer(binary=FAKE, log_path=str(tmp_path / "tracer.log")) as t:
        for strategy in ("two-copy", "one-copy", "zero-copy", "per-field", "sendfile",
                         "io-uring", "io-uring-zc"):
            t.skb_programs_for(strategy)
    lines = asked.read_text().splitlines() if asked.exists() else []
    assert lines == ([] if mode == "old" else ["skb-programs always"] * 3)


def test_start_failure_is_reported(tmp_path):
    log = tmp_path / "tracer.log"
    t = ControlTracer(binary=FAKE, log_path=str(log))
    os.environ["FAKE_TRACER_MODE"] = "fail-start"
    try:
        with pytest.raises(TracerError, match="Operation not permitted"):
            t.start(timeout=10)
    finally:
        del os.environ["FAKE_TRACER_MODE"]
        t.close()


def test_tracer_dying_mid_sweep(tmp_path):
    os.environ["FAKE_TRACER_MODE"] = "die-on-snapshot"
    try:
        t = ControlTracer(binary=FAKE, log_path=str(tmp_path / "tracer.log")).start(timeout=10)
    finally:
        del os.environ["FAKE_TRACER_MODE"]
    try:
        with pytest.raises(TracerError, match="exited"):
            t.snapshot(str(tmp_path / "x.json"))
        assert not t.alive()
        with pytest.raises(TracerError, match="not running"):
            t.reset()
    finally:
        t.close()


def test_missing_binary(tmp_path):
    with pytest.raises(TracerError, match="not found"):
        ControlTracer(binary=str(tmp_path / "none")).start()


def test_trace_argv_passes_flags_through():
    argv = trace_argv(pid=42, attach="tracepoint", freq=99, json_path="/tmp/t.json",
                      netns=["a"], duration=2.0)
    assert argv[0].endswith("netio-tracer")
    assert argv[1:] == ["--attach", "tracepoint", "--freq", "99", "--json", "/tmp/t.json",
                        "--netns", "a", "--duration", "2.0", "--pid", "42"]
    argv = trace_argv(pid=42, freq=99, sample_source="tick")
    assert argv[1:] == ["--attach", "auto", "--freq", "99", "--sample-source", "tick",
                        "--pid", "42"]
    assert "--sample-source" not in trace_argv(pid=42, sample_source="auto")
    argv = trace_argv(cmd=["iperf3", "-c", "127.0.0.1"])
    assert argv[-4:] == ["--", "iperf3", "-c", "127.0.0.1"]
    json.dumps(argv)


def test_the_sweep_passes_latency_sample_to_its_tracer(tmp_path, monkeypatch):
    """run --latency-sample N reaches the sweep's tracer; without it the tracer keeps its own
    default."""
    build = tmp_path / "build"
    build.mkdir()
    os.symlink(FAKE, build / "netio-tracer")
    monkeypatch.setenv("NETIO_BUILD", str(build))
    calls = tmp_path / "calls"
    monkeypatch.setenv("FAKE_TRACER_CALLS", str(calls))
    for n in (1, None):
        inst = Instrument(P.SweepParams(**P.QUICK, latency_sample=n), str(tmp_path))
        inst.open()
        inst.close()
    given, default = calls.read_text().splitlines()
    assert "--latency-sample 1" in given and "--latency-sample" not in default


def test_control_argv_and_ready_samples(tmp_path):
    t = ControlTracer(binary=FAKE, sample_source="tick", freq=50)
    assert t.argv[1:] == ["--control", "--attach", "auto", "--freq", "50",
                          "--sample-source", "tick"]
    assert "--sample-source" not in ControlTracer(binary=FAKE).argv
    with ControlTracer(binary=FAKE, log_path=str(tmp_path / "tracer.log")) as t:
        # the stand-in's ready line has no "samples": nothing is invented
        assert t.samples is None
