"""bench/windows.py: the tracer attached and detached in turn within one run, and throughput
read per window (section 1w). A fake tracer and a fake device counter whose rate depends on
whether the fake is attached: the pairs must be in the flipped order, their ratios exact."""
import time
import types

import pytest

from bench import config, markdown, markdown_overhead, windows
from bench.config import WindowCase

TRACED_GBPS, UNTRACED_GBPS = 8.0, 10.0


class FakeCounter:
    """Bytes a receiver got: TRACED_GBPS while attached, UNTRACED_GBPS while detached."""

    def __init__(self):
        self.attached = True
        self.total = 0.0
        self.last = time.monotonic()

    def read(self, pid):
        now = time.monotonic()
        rate = TRACED_GBPS if self.attached else UNTRACED_GBPS
        self.total += rate * 1e9 / 8 * (now - self.last)
        self.last = now
        return int(self.total)


class FakeTracer:
    name = "fake"

    def __init__(self, counter):
        self.counter, self.commands, self.aborted = counter, [], False

    def start(self, bench, topo, pids):
        self.tr = types.SimpleNamespace(
            attach_probes=lambda: self._do("attach"),
            detach_probes=lambda: self._do("detach"),
            netns_add=lambda ns: self.commands.append(f"netns {ns}"),
            pid_add=lambda pid: self.commands.append(f"pid {pid}"),
            snapshot=lambda path: {"self": {"programs": {"tp_send_length": {"ns": 900,
                                                                            "runs": 10}}}})
        self.dir = "/nonexistent"

    def _do(self, what):
        self.counter.read(0)        # what was received so far, at the old rate
        self.counter.attached = what == "attach"
        self.commands.append(what)

    def abort(self):
        self.aborted = True


@pytest.fixture
def fast(monkeypatch):
    counter = FakeCounter()
    monkeypatch.setattr(windows, "rx_bytes", counter.read)
    for name, value in (("WARMUP_S", 0.0), ("SETTLE_S", 0.002), ("WINDOW_S", 0.02),
                        ("TOGGLE_S", 0.002)):
        monkeypatch.setattr(windows, name, value)
    return counter


def run_windows(counter, npairs, seconds):
    tracer = FakeTracer(counter)
    w = windows.Windows(tracer, npairs)
    w.start(None, types.SimpleNamespace(namespaces=["ns-a", "ns-b"]), [11, 12])
    w.during(receiver=12, end=time.monotonic() + seconds)
    run = {}
    w.stop(run)
    return tracer, run


def test_windows_alternate_in_flipped_order_and_measure_each_state(fast):
    tracer, run = run_windows(fast, 4, windows.run_seconds(4))
    # detached before the workload starts, then T U | U T | T U | U T, detached at the end
    follow = ["netns ns-a", "netns ns-b", "pid 11", "pid 12"]
    assert tracer.commands == (["detach", "attach", *follow, "detach", "attach", *follow,
                                "detach", "attach", *follow, "detach"])
    assert len(run["windows"]) == 4 and tracer.aborted
    for traced, untraced in run["windows"]:
        assert traced == pytest.approx(TRACED_GBPS, rel=0.05)
        assert untraced == pytest.approx(UNTRACED_GBPS, rel=0.05)
    assert run["window_programs"] == {"fake": {"tp_send_length": (900, 10)}}
    assert windows.ns_per_run([run], "fake") == {"tp_send_length": 90}
    s = windows.summary(run["windows"])
    assert s["n"] == 4 and s["median"] == pytest.approx(TRACED_GBPS / UNTRACED_GBPS, rel=0.05)


def test_windows_stop_when_the_workload_stops_sending(fast):
    tracer, run = run_windows(fast, 50, 3 * windows.pair_seconds())
    assert 1 <= len(run["windows"]) <= 3
    assert tracer.commands[-1] == "detach"


def test_windows_stop_when_the_receiver_ends_inside_a_pair(fast, monkeypatch):
    """A toggle that outlasts its allowance can take a pair past the workload's end: its
    receiver gone, the windows end with the pairs complete so far, and no traceback."""
    reads = {"n": 0}

    def read(pid):
        reads["n"] += 1
        if reads["n"] > 9:          # pair 3's second window: the process is gone
            raise FileNotFoundError(f"/proc/{pid}/net/dev")
        return fast.read(pid)

    monkeypatch.setattr(windows, "rx_bytes", read)
    tracer, run = run_windows(fast, 10, windows.run_seconds(10))
    assert len(run["windows"]) == 2 and tracer.commands[-1] == "detach"


def test_run_seconds_hold_every_pair():
    assert windows.run_seconds(10) >= windows.WARMUP_S + 10 * 2 * (windows.SETTLE_S
                                                                  + windows.WINDOW_S)


def test_a_verdict_counts_runs_not_windows():
    runs = [[(9.0, 10.0)] * 5, [(8.0, 10.0)] * 5, [(9.5, 10.0)] * 5]
    s = windows.runs_summary(runs)
    assert s["n"] == 3 and s["median"] == pytest.approx(0.9)
    assert markdown.verdict(s, 0.85) == "undecided (n=3: a verdict needs 5)"


def test_with_a_reference_the_two_tracers_take_turns_never_together(fast):
    log = []

    class Named(FakeTracer):
        def __init__(self, name, counter):
            super().__init__(counter)
            self.name = name

        def _do(self, what):
            log.append(f"{self.name} {what}")
            if self.name == "new":
                super()._do(what)

    new, old = Named("new", fast), Named("old", fast)
    w = windows.Windows(new, 2, reference=old)
    w.start(None, types.SimpleNamespace(namespaces=["ns"]), [11])
    w.during(receiver=11, end=time.monotonic() + windows.run_seconds(2))
    run = {}
    w.stop(run)
    assert log == ["new detach",                    # both followed at start: new off
                   "old detach", "new attach",      # pair 1: new, then old
                   "new detach", "old attach",
                   "old detach", "new attach",      # pair 2: old, then new
                   "new detach", "old attach"]      # the end: as at the start
    assert len(run["windows"]) == 2 and new.aborted and old.aborted


def test_a_missed_case_shows_where_its_bpf_time_went():
    """Section 1w's profile of a miss: each program's ns per run over the case's runs,
    costliest first; a case that met its target gets none."""
    runs = [[(9.0, 10.0)] * 5] * 5                     # 0.9 in every run: below 0.95
    progs = [{"tp_send_length": (1800, 10), "tp_xmit": (900, 10)}] * 5
    missed = WindowCase("veth two-copy 16 KiB", "counting", runs, [], progs)
    met = WindowCase("veth two-copy 64 KiB", "counting", [[(10.0, 10.0)] * 5] * 5, [],
                           progs)
    args = types.SimpleNamespace(window_runs=5, window_pairs=5)
    md = markdown_overhead.section_windows(args, [missed, met])
    profile = [line for line in md.splitlines() if line.startswith("- ")]
    assert profile == ["- veth two-copy 16 KiB, counting: `tp_send_length` 180, `tp_xmit` 90"]


def test_the_headline_case_is_also_held_to_its_headline_target():
    c = config.WindowCase("loopback one-copy 16 KiB", "counting", [], [])
    assert markdown_overhead.window_targets(c) == [config.TARGET_COUNTING,
                                                   config.TARGET_COUNTING_HEADLINE]
    c = config.WindowCase("veth one-copy 16 KiB", "full", [], [])
    assert markdown_overhead.window_targets(c) == [config.TARGET_OVERHEAD]
