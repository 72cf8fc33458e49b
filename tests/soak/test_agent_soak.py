"""The agent's soak (needs root; `make soak`, which `make test` runs beside `vmtest`): the agent
on a cgroup of ours, idle first, then NETIO_SOAK_S seconds (default 600) of churn in its two
child cgroups (tests/soak/load.py: tens of thousands of short-lived processes, threads, TCP
and UDP sockets). It asserts:
- idle, nothing to follow: the agent and its tracer under 1% of one CPU;
- every scrape a whole exposition whose counters never went backwards;
- at the end each cgroup's bytes exact against the load's own accounting (TCP and UDP, per
  process and per socket), none on `unknown`, no socket event unrecorded;
- the tracer's RSS and every hash map's fill flat over the last half;
- the series bounded by the label sets, not by the pids."""
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [REPO, os.path.join(REPO, "tests", "integration")]

from test_agent import _children, _tracers, by_cgroup, get, samples, start_agent, stop  # noqa: E402
from conftest import (fdinfo_ids, in_cgroup, made_cgroups, needs_cgroup2, needs_root,  # noqa: E402
                      wait_for)

SOAK_S = float(os.environ.get("NETIO_SOAK_S", "600"))
IDLE_S = float(os.environ.get("NETIO_SOAK_IDLE_S", "60"))
RATE, THREADS, BYTES, DATAGRAMS, SIZE = 20, 2, 3000, 4, 500    # per cgroup's load
SAMPLE_S = 10.0
MAX_SERIES = 8              # process label sets: a few (cgroup, comm, netns), not pids
RSS_SLACK_KIB = 1024        # the tracer's growth allowed over the last half
FILL_GROWTH, FILL_SLACK = 1.2, 64      # a hash map's median fill in the last quarter at most
                                        # this over the second quarter's (a leak of 1% of the
                                        # sockets would be ~500 more)

pytestmark = [needs_root("BPF, cgroups"), needs_cgroup2()]


@pytest.fixture
def cgroups():
    """Our parent cgroup (the agent follows it) and its children a and b (the loads')."""
    name = f"netio-soak-{os.getpid()}"
    with made_cgroups(name, f"{name}/a", f"{name}/b", timeout=30) as (top, a, b):
        yield top, {"a": a, "b": b}


class Receivers:
    """A TCP and a UDP receiver here (outside the traced cgroup: not counted), in a thread."""

    def __init__(self):
        self.tcp = socket.create_server(("127.0.0.1", 0), backlog=4096)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def ports(self):
        return self.tcp.getsockname()[1], self.udp.getsockname()[1]

    def _serve(self):
        sel = selectors.DefaultSelector()
        for s in (self.tcp, self.udp):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        while not self.done.is_set():
            for key, _ in sel.select(0.2):
                s = key.fileobj
                try:
                    if s is self.tcp:
                        c, _ = s.accept()
                        c.setblocking(False)
                        sel.register(c, selectors.EVENT_READ)
                    elif s is self.udp:
                        s.recv(65536)
                    elif not s.recv(1 << 16):
                        sel.unregister(s)
                        s.close()
                except (BlockingIOError, ConnectionError):
                    pass
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def close(self):
        self.done.set()
        self.thread.join()


class Scraper(threading.Thread):
    """GET /metrics every 2 s: each parsed whole (the OpenMetrics parser, `# EOF` included),
    each counter sample compared with its last value."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.last = port, threading.Event(), {}
        self.scrapes, self.backwards, self.broken, self.max_series = 0, [], [], {}

    def run(self):
        while not self.stop.wait(2):
            status, text = get(self.port, "/metrics")
            try:
                families = list(text_string_to_metric_families(text))
            except ValueError as e:
                self.broken.append(repr(e))
                continue
            self.scrapes += 1
            for fam in families:
                self._check(fam)

    def _check(self, fam):
        for s in fam.samples:
            if fam.name == "netio_agent_series":
                kind = s.labels["kind"]
                self.max_series[kind] = max(self.max_series.get(kind, 0), s.value)
            if fam.type not in ("counter", "histogram"):
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            if s.value < self.last.get(key, 0):
                self.backwards.append((key, self.last[key], s.value))
            self.last[key] = s.value


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def hash_fills(pid):
    """{map name: (entries, max_entries, type)} of the hash maps pid holds."""
    out = {}
    for i in sorted(fdinfo_ids(pid, "map_id")):
        show = json.loads(subprocess.run(["bpftool", "map", "show", "id", str(i), "--json"],
                                         capture_output=True, text=True).stdout or "{}")
        if "hash" not in show.get("type", ""):
            continue
        dump = subprocess.run(["bpftool", "map", "dump", "id", str(i), "--json"],
                              capture_output=True, text=True).stdout
        out[show.get("name", str(i))] = (len(json.loads(dump or "[]")), show["max_entries"],
                                         show["type"])
    return out


def cpu_of(text):
    """{process: CPU seconds} from the agent's own metric."""
    return {dict(k)["process"]: v
            for k, v in samples(text, "netio_agent_cpu_seconds_total").items()}


def idle_share(port):
    """The agent's and tracer's CPU over IDLE_S with nothing to follow, as a share of one CPU
    (from the first exposition that has both)."""
    c0 = wait_for("the agent's CPU metric", lambda: (lambda c: c if set(c) == {
        "agent", "tracer"} else None)(cpu_of(get(port, "/metrics")[1])))
    t0 = time.monotonic()
    time.sleep(IDLE_S)
    t1, c1 = time.monotonic(), cpu_of(get(port, "/metrics")[1])
    return {p: (c1[p] - c0[p]) / (t1 - t0) for p in c0}


def start_loads(kids, ports):
    """A load in each child cgroup (moved there, then exec'd): their Popen by cgroup."""
    loader = os.path.join(HERE, "load.py")
    return {k: subprocess.Popen(in_cgroup(d, sys.executable, loader, *ports, SOAK_S, RATE, THREADS,
                                          BYTES, DATAGRAMS, SIZE),
                                stdout=subprocess.PIPE, text=True)
            for k, d in kids.items()}


def watch(loads, agent_pid, tracer):
    """Until the loads end: (seconds since the start, tracer RSS, hash map fills, agent RSS)
    every SAMPLE_S."""
    t0, out = time.monotonic(), []
    while any(p.poll() is None for p in loads.values()):
        out.append((time.monotonic() - t0, rss_kib(tracer), hash_fills(tracer),
                    rss_kib(agent_pid)))
        time.sleep(SAMPLE_S)
    return out


def check_flat(marks):
    """The tracer's RSS over the last half of the load against its value at the half; each hash
    map's fill in the last quarter against the second quarter (medians: the processes ended
    and not yet pruned vary with the agent's pace, a leak grows with time); the table printed
    either way."""
    end = marks[-1][0]
    last = [m for m in marks if m[0] >= end / 2]
    q2 = [m for m in marks if end / 4 <= m[0] < end / 2]
    q4 = [m for m in marks if m[0] >= end * 3 / 4]
    print(f"tracer RSS KiB: {last[0][1]} at the half, {min(m[1] for m in last)}.."
          f"{max(m[1] for m in last)} after; agent RSS KiB {last[0][3]} at the half, "
          f"{last[-1][3]} at the end")
    assert max(m[1] for m in last) - last[0][1] <= RSS_SLACK_KIB, [m[1] for m in marks]
    for name, (_n, cap, kind) in marks[-1][2].items():
        before = statistics.median(m[2].get(name, (0,))[0] for m in q2)
        after = statistics.median(m[2].get(name, (0,))[0] for m in q4)
        hi = max(m[2].get(name, (0,))[0] for m in last)
        print(f"  {name:16} {kind:12} median {before:7.0f} (2nd quarter) {after:7.0f} (last), "
              f"last half max {hi:6} of {cap}")
        if "lru" in kind:
            continue    # fills to its size by design (the oldest go): tcp_ends, every connection
        assert after <= before * FILL_GROWTH + FILL_SLACK and hi <= cap // 2, (name, before,
                                                                               after, hi, cap)


def check_totals(text, want, top):
    """Each cgroup's bytes exact, per process and per socket by protocol; none unknown."""
    name = "/" + os.path.basename(top)
    got = by_cgroup(text, "netio_tx_bytes_total")
    assert "unknown" not in got, got
    assert {c: v for c, v in got.items() if c.startswith(name)} == {
        f"{name}/{k}": w["tcp_bytes"] + w["udp_bytes"] for k, w in want.items()}
    for proto in ("tcp", "udp"):
        per_sock = by_cgroup(text, "netio_socket_tx_bytes_total", proto=proto)
        assert {c: v for c, v in per_sock.items() if c.startswith(name)} == {
            f"{name}/{k}": w[f"{proto}_bytes"] for k, w in want.items()}, proto


def test_soak(cgroups):
    top, kids = cgroups
    rx = Receivers()
    agent, port = start_agent("--cgroup", top)
    scraper = Scraper(port)
    try:
        tracer = (_children(agent.pid) & _tracers()).pop()
        idle = idle_share(port)
        print(f"idle, nothing followed: {idle} of one CPU")
        assert set(idle) == {"agent", "tracer"} and sum(idle.values()) < 0.01, idle
        scraper.start()
        loads = start_loads(kids, rx.ports())
        marks = watch(loads, agent.pid, tracer)
        want = {k: json.loads(p.stdout.read()) for k, p in loads.items()}
        assert all(p.wait() == 0 for p in loads.values()), want
        print(f"load: {want}")
        assert sum(w["processes"] for w in want.values()) >= 10_000 * SOAK_S / 600
        time.sleep(5)       # a few snapshots: the last processes' last counts
        text = get(port, "/metrics")[1]
        check_totals(text, want, top)
        assert not samples(text, "netio_agent_sockets_untracked_total").get(frozenset()), text
        check_flat(marks)
        scraper.stop.set()
        scraper.join()
        print(f"{scraper.scrapes} scrapes, series high marks {scraper.max_series}")
        assert scraper.scrapes and not scraper.broken and not scraper.backwards, (
            scraper.broken[:3], scraper.backwards[:3])
        assert scraper.max_series["process"] <= MAX_SERIES, scraper.max_series
        assert stop(agent) == 0
    finally:
        scraper.stop.set()
        stop(agent, 9)
        rx.close()
