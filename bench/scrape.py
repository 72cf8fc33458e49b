"""The agent's scrape cost (section 11 of `make bench`; alone: `python -m bench.scrape`): what
the exposition costs per series, at label-set counts from a service to a busy host's worth.

The agent renders its OpenMetrics text once per snapshot (netio_trace/agent/exposition.py)
and a scrape gets those bytes as they are (agent/server.py). So two figures per size, each
the median of REPEAT with its min and max:
- ingest: one snapshot's gains added to the label sets' totals (Aggregator.add);
- render: the exposition made from them (exposition.render), in ns per series;
- serve: one GET /metrics over loopback from the agent's own server, in ns per series.
The label sets are synthetic, made as the tracer's snapshot would show them (a process per
label set with the figures of PROCESS_COUNTERS and two syscalls' histograms, a socket per
label set): the cost depends on how many series there are, not on where they came from.

    python -m bench.scrape [--sets N,N,...] [--repeat R]

Needs no root and no build.
"""
import argparse
import statistics
import sys
import time
import urllib.request

from bench import harness
from bench.harness import srso_state
from netio_trace.agent import exposition
from netio_trace.agent.labels import PROCESS_COUNTERS, SOCKET_COUNTERS, Aggregator
from netio_trace.agent.server import MetricsServer

SETS = (10, 100, 1000, 5000)
REPEAT = 7
SYSCALLS = ("sendmsg", "recvmsg")
HIST = {str(1 << k): 3 * k + 1 for k in range(10, 20)}     # {lower bound ns: count}


class _Whois:
    """procinfo.Whois's interface, answering without /proc: label set i is cgroup i."""

    def of(self, pid, comm=None):
        return {"cgroup": f"/system.slice/svc-{pid}.service", "netns": 4026531840}

    def forget(self, pid):
        pass

    def keep(self, pids):
        pass


def snapshot(nsets, step):
    """A trace object whose nsets processes and sockets each gained something at `step`."""
    procs, socks = {}, []
    for pid in range(1000, 1000 + nsets):
        p = {k: step * (1 << 20) for k, _ in PROCESS_COUNTERS}
        p.update(comm=f"svc{pid}", syscalls={
            s: {"hist_log2_ns": {lo: n * step for lo, n in HIST.items()}, "timed": 10 * step,
                "mean_us": 12.5} for s in SYSCALLS})
        procs[str(pid)] = p
        socks.append(dict({k: step * (1 << 20) for k, _ in SOCKET_COUNTERS}, pid=pid,
                          comm=f"svc{pid}", proto="tcp", family="inet", local="10.0.0.1:80",
                          peer=f"10.0.1.{pid % 250}:4000", netns=4026531840, path="veth"))
    return {"processes": procs, "sockets": socks}


def series_in(text):
    """The samples of an exposition: its lines that are not comments."""
    return sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))


def _spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(nsets, repeat=REPEAT):
    """{sets, series, bytes, ingest_ns, render_ns, serve_ns}: ns per series, median/min/max
    of repeat snapshots."""
    agg = Aggregator(_Whois())
    ingest, render, serve = [], [], []
    server = MetricsServer("127.0.0.1:0", lambda: (True, "ok"))
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        for step in range(1, repeat + 1):
            snap = snapshot(nsets, step)
            t0 = time.perf_counter_ns()
            agg.add(snap)
            t1 = time.perf_counter_ns()
            text = exposition.render(agg, snap, {"agent": 1.0, "tracer": 1.0})
            ingest.append(t1 - t0)
            render.append(time.perf_counter_ns() - t1)
            server.publish(text)
            t0 = time.perf_counter_ns()
            with urllib.request.urlopen(url, timeout=30) as r:
                got = r.read()
            serve.append(time.perf_counter_ns() - t0)
            assert got == text, "the scrape got other bytes than were published"
    finally:
        server.close()
    n = series_in(text)
    return {"sets": nsets, "series": n, "bytes": len(text),
            "ingest_ns": _spread([v / n for v in ingest]),
            "render_ns": _spread([v / n for v in render]),
            "serve_ns": _spread([v / n for v in serve])}


def _cell(s):
    return f"{s['median']:.0f} [{s['min']:.0f}–{s['max']:.0f}]"


def markdown(rows, machine, srso, repeat=REPEAT):
    out = ["## 11. The agent's scrape: ns per series", "",
           f"Machine: {machine}; SRSO: {srso}. Synthetic label sets (bench/scrape.py); "
           f"median [min–max] of {repeat} snapshots each.", "",
           "| label sets | series | bytes | ingest ns/series | render ns/series "
           "| serve ns/series |", "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['sets']} | {r['series']} | {r['bytes']} | {_cell(r['ingest_ns'])} "
                   f"| {_cell(r['render_ns'])} | {_cell(r['serve_ns'])} |")
    return "\n".join(out) + "\n"


def section_scrape(b):
    """`make bench`'s section 11."""
    return markdown([measure(n) for n in SETS], harness.machine(), srso_state())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.scrape",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(map(str, SETS)),
                    help="label-set counts, comma separated")
    ap.add_argument("--repeat", type=int, default=REPEAT)
    a = ap.parse_args(argv)
    try:
        sets = [int(x) for x in a.sets.split(",")]
    except ValueError:
        ap.error(f"--sets: whole numbers, comma separated, not {a.sets!r}")
    if min(sets) < 1 or a.repeat < 1:
        ap.error("--sets and --repeat must be more than 0")
    rows = [measure(n, a.repeat) for n in sets]
    print(markdown(rows, harness.machine(), srso_state(), a.repeat))


if __name__ == "__main__":
    sys.exit(main())
