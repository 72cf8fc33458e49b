"""doctor loads the tracer for real before it says "tracer: yes" (a probe alone said yes where loading failed), and the sweep loads
it once before its first run: against the stand-in tracer (tests/python/fake_tracer.py, no
root), as the build tree's netio-tracer (NETIO_BUILD)."""
import io
import json
import os
import types

import pytest
from rich.console import Console

from netio_trace import doctor, doctor_ladder as ladder, tracer
from netio_trace.run import instrument, params as P, sweep

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_tracer.py")
REASON = "cannot load the filter and fork handler (sched_process_fork): Invalid argument"


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    d = tmp_path / "build"
    d.mkdir()
    os.symlink(FAKE, d / "netio-tracer")
    monkeypatch.setenv("NETIO_BUILD", str(d))
    # the namespace probe needs root; what it says is not what these tests are about
    monkeypatch.setattr(doctor, "probe_netns", lambda: (True, None))
    return d


def test_check_load_reads_the_ready_line_and_an_empty_snapshot(fake_build, monkeypatch):
    monkeypatch.setenv("FAKE_TRACER_MODE", "compat")
    info = tracer.check_load(timeout=10)
    assert info["attach"]["tx_bytes"] == "kprobe" and info["attach"]["syscalls"] == "tracepoint"
    assert info["bpf_build"] == {"name": "compat", "missing": "task-local storage (5.11)"}
    assert info["unavailable"] == {"processes.zc_tx_bytes":
                                   "per process: no send names the owner here"}
    assert info["software_from"] == "perf_event"


def test_check_load_gives_the_tracers_own_reason(fake_build, monkeypatch):
    monkeypatch.setenv("FAKE_TRACER_MODE", "fail-load")
    with pytest.raises(tracer.TracerError) as e:
        tracer.check_load(timeout=10)
    assert str(e.value) == REASON      # its last line, not the libbpf line before it


def test_doctor_json_carries_the_loaded_tracer(fake_build, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_TRACER_MODE", "compat")
    assert doctor.main(as_json=True) == 0
    d = json.loads(capsys.readouterr().out)
    t = d["tracer"]
    assert t["loaded"] is True and t["error"] is None
    assert t["path"] == str(fake_build / "netio-tracer")
    # every probe point but stacks (doctor loads with --no-sample; `sampling` says instead)
    assert set(t["attach"]) == set(ladder.POINTS) and "stacks" not in t["attach_why"]
    assert t["attach"]["rx_copy"] == "kprobe"
    assert t["attach_why"]["syscalls"] == ("loading fentry/fexit programs failed: Operation "
                                           "not permitted")
    assert t["bpf_build"]["name"] == "compat" and t["software_from"] == "perf_event"
    assert t["probes"] == {"tx_bytes": "kprobe:tcp_sendmsg"}
    assert list(t["unavailable"]) == ["processes.zc_tx_bytes"]
    # the names doctor had before stay: --probe's attach types, its bpf_build, the sampler
    assert d["attach"]["fentry"] is False and d["attach"]["kprobe"] is True
    assert d["bpf_build"]["name"] == "compat" and d["sampling"]["source"] == "tick"


def test_doctor_says_no_and_exits_2_when_the_tracer_cannot_load(fake_build, monkeypatch,
                                                                 capsys):
    """--probe says yes (as it once did on 5.10), loading fails: the tracer is "no"."""
    monkeypatch.setenv("FAKE_TRACER_MODE", "fail-load")
    assert doctor.main(as_json=True) == 2
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert d["tracer"] == {"path": str(fake_build / "netio-tracer"), "error": REASON,
                           "loaded": False}
    assert d["attach"]["kprobe"] is True          # what --probe said, still there
    lines = [line for line in out.err.splitlines() if "tracer" in line]
    assert lines == [f"netio-trace doctor: the tracer cannot load on this kernel: {REASON}; "
                     "`run --no-trace` measures without it"]


def _table(d):
    buf = io.StringIO()
    doctor.print_table(d, Console(file=buf, width=400, color_system=None))
    return buf.getvalue()


def test_table_shows_rung_why_and_what_it_costs(fake_build, monkeypatch):
    monkeypatch.setenv("FAKE_TRACER_MODE", "compat")
    d, errors = doctor.collect()
    assert errors == []
    rows, notes = doctor.tracer_rows(d["tracer"])
    by = {r[0]: r[1:] for r in rows}
    assert by["tracer"][0] == "[green]yes[/]"
    assert "probe: stacks" not in by
    rung, detail = by["probe: syscalls"]
    assert rung == "tracepoint" and detail.startswith("loading fentry/fexit programs failed")
    assert notes[int(detail.rsplit("note ", 1)[1]) - 1] == ladder.SYS_ENTER
    rung, detail = by["probe: tx_bytes"]
    assert rung == "kprobe" and notes[int(detail.rsplit("note ", 1)[1]) - 1] == ladder.KPROBE
    assert by["BPF build"][0] == "compat"
    assert by["BPF build"][1].startswith("this kernel lacks task-local storage (5.11); cost: note")
    assert ladder.COMPAT in notes and ladder.PERF_SOFTWARE in notes
    assert by["software counters"][0] == "perf_event"
    assert by["null: processes.zc_tx_bytes"] == ("unavailable",
                                                  "per process: no send names the owner here")
    assert len(notes) == len(set(notes))          # each cost once, however many rows cite it
    text = _table(d)
    assert "probe: zc_completion" in text and "note 1: " in text
    # the measured figures say where they were measured
    assert "0.610" in ladder.SYS_ENTER and "bench/results.md section 8" in ladder.SYS_ENTER
    assert "not measured" in ladder.KPROBE


def test_table_on_the_best_rung_says_nothing_more():
    tr = {"loaded": True, "path": "/x", "attach": {p: "fentry" for p in ladder.POINTS},
          "attach_why": {}, "bpf_build": {"name": "storage", "missing": ""},
          "software_from": "task_struct", "unavailable": {}}
    rows, notes = doctor.tracer_rows(tr)
    assert notes == []
    assert all(r[2] == "" for r in rows if r[0].startswith("probe: "))
    assert [r[0] for r in rows if r[0].startswith("probe: ")] == [f"probe: {p}" for p in
                                                                  ladder.POINTS]


def test_what_the_counting_level_gives_up_is_said():
    """Where zero-copy bytes count at the send (tracepoint rung, storage build) the counting
    level's per-skb programs wait for a zero-copy send, and rx_spliced on the tracepoint rung
    is null there: doctor says so; on the fentry rung it gives up nothing."""
    tp = {"attach": {**{p: "tp_btf" for p in ladder.POINTS}, "rx_discarded": "inferred"},
          "bpf_build": {"name": "storage"}}
    assert [r[:2] for r in ladder.counting_rows(tp)] == [("per-skb programs", "on demand"),
                                                         ("rx_spliced_bytes", "null")]
    compat = dict(tp, bpf_build={"name": "compat"})
    assert [r[0] for r in ladder.counting_rows(compat)] == ["rx_spliced_bytes"]
    best = {"attach": {p: "fentry" for p in ladder.POINTS}, "bpf_build": {"name": "storage"}}
    assert ladder.counting_rows(best) == []
    rows, _ = doctor.tracer_rows({"loaded": True, "path": "/x", **tp, "attach_why": {},
                                  "software_from": "task_struct", "unavailable": {}})
    by = {r[0]: r[1:] for r in rows}
    assert by["counting level: per-skb programs"][0] == "on demand"
    assert "3.10 -> 1.40" in by["counting level: per-skb programs"][1]


def test_how_latency_is_timed_is_said():
    """doctor says whether the full level times every call or samples them, and how to time
    every call; a tracer whose load said nothing of it gets no row."""
    rung = {"loaded": True, "path": "/x", "attach": {p: "tp_btf" for p in ladder.POINTS},
            "attach_why": {}, "bpf_build": {"name": "storage"}, "software_from": "task_struct",
            "unavailable": {}}
    sampled = dict(rung, latency={"timed": True, "sampled_1_in": 16})
    by = {r[0]: r[1:] for r in doctor.tracer_rows(sampled)[0]}
    result, why = by["latency histograms"]
    assert result == "1 call in 16 timed (default)"
    assert "first of every 16 calls of each syscall class" in why and "--latency-sample 1" in why
    exact = dict(rung, latency={"timed": True, "sampled_1_in": 1})
    assert ladder.latency_row(exact)[0] == "every call timed"
    assert ladder.latency_row(rung) is None
    assert ladder.latency_row(dict(rung, latency={"timed": False})) is None


def test_table_of_a_tracer_that_cannot_load(fake_build, monkeypatch):
    monkeypatch.setenv("FAKE_TRACER_MODE", "fail-load")
    d, errors = doctor.collect()
    rows, notes = doctor.tracer_rows(d["tracer"])
    assert rows == [("tracer", "[red]no[/]", REASON)] and notes == []
    assert "tracer" in _table(d) and REASON in _table(d)
    assert len(errors) == 1 and REASON in errors[0]


def _sweep_of(tmp_path, **kw):
    p = P.SweepParams(strategies=("two-copy",), sizes=(4096,), threads=(1,),
                      transports=("veth",), duration=0.2, repeat=1, passes=("traced",), **kw)
    buf = io.StringIO()
    return types.SimpleNamespace(params=p, instrument=instrument.Instrument(p, str(tmp_path)),
                                 console=Console(file=buf, width=80, color_system=None)), buf


def test_sweep_stops_once_with_the_tracers_reason(fake_build, monkeypatch, tmp_path):
    """The check `run` makes before its first run: one line, however narrow the console, the
    tracer's own reason and the way out."""
    monkeypatch.setenv("FAKE_TRACER_MODE", "fail-load")
    monkeypatch.setattr(instrument, "samples_on_perf_events", lambda source: False)
    s, buf = _sweep_of(tmp_path)
    assert sweep._open_instrument(s) == 2
    lines = buf.getvalue().splitlines()
    assert lines == [f"netio-trace run: the tracer cannot load on this kernel "
                     f"({os.uname().release}): {REASON}; `--no-trace` runs untraced"]
    s.instrument.close()
    s, buf = _sweep_of(tmp_path, attach="kprobe")
    assert sweep._open_instrument(s) == 2
    assert buf.getvalue().splitlines() == [f"netio-trace run: --attach kprobe: {REASON}"]
