"""The agent's OpenMetrics text, made whole from the aggregator's totals and the tracer's own
figures, once per snapshot (server.py swaps it in at once: a scrape never sees half of one).

The names are `trace --openmetrics`'s (report/openmetrics.py), labelled by label set instead
of pid; what only the agent has is added under new names (docs/DESIGN.md, "netio-trace
agent"): per-socket bytes by peer and protocol, and the agent's own drops and CPU time."""
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from netio_trace.agent import labels
from netio_trace.agent.labels import PROCESS_COUNTERS, SOCKET_COUNTERS
from report.openmetrics import COUNTERS, bucket_bounds

HELP = {name: what for _key, name, what in COUNTERS}
HELP["fallback_copy_bytes"] = "bytes sent zero-copy that the kernel copied back at delivery"


def _counters(sets, pairs, prefix, what):
    for _key, name in pairs:
        m = CounterMetricFamily(f"{prefix}{name}", f"netio-trace agent: {HELP[name]}{what}",
                                labels=list(sets.names))
        for key, t in sorted(sets.live.items()):
            if name in t.counters:
                m.add_metric(list(key), t.counters[name])
        yield m


def _latency(sets):
    m = HistogramMetricFamily("netio_syscall_latency_seconds",
                              "netio-trace agent: socket syscall latency (log2 buckets)",
                              labels=list(sets.names) + ["syscall"])
    bounds = ["+Inf" if b == float("inf") else repr(b) for b in bucket_bounds()]
    for key, t in sorted(sets.live.items()):
        for syscall, (slots, secs) in sorted(t.hists.items()):
            cum, total = [], 0
            for le, n in zip(bounds, slots):
                total += n
                cum.append((le, total))
            m.add_metric(list(key) + [syscall], cum, sum_value=secs)
    yield m


def _own(trace, cpu, agg):
    """The agent's own figures: what the tracer could not count, and what the agent costs."""
    drops = CounterMetricFamily("netio_agent_drops", "netio-trace agent: events the tracer "
                                "could not count, by cause (the snapshot's drops_by_cause)",
                                labels=["cause"])
    for cause, n in sorted((trace.get("drops_by_cause") or {}).items()):
        drops.add_metric([cause], n or 0)
    yield drops
    for key, what in (("sockets_untracked", "events of sockets that got no record"),
                      ("tcp_ends_lost", "TCP connections whose ends could not be recorded")):
        yield CounterMetricFamily(f"netio_agent_{key}", f"netio-trace agent: {what}",
                                  value=trace.get(key) or 0)
    events = getattr(agg.whois, "events", None)      # procevents.ProcEvents, when listening
    yield CounterMetricFamily("netio_agent_proc_events_lost", "netio-trace agent: process "
                              "event reads that found events lost (the labels of processes "
                              "that ended unseen may then be unknown)",
                              value=events.lost if events is not None else 0)
    c = CounterMetricFamily("netio_agent_cpu_seconds", "netio-trace agent: CPU time (user + "
                            "system) of the agent's Python process and of its tracer",
                            labels=["process"])
    for proc, secs in sorted(cpu.items()):
        c.add_metric([proc], secs)
    yield c
    yield CounterMetricFamily("netio_agent_bpf_seconds", "netio-trace agent: time spent in "
                              "the tracer's BPF programs", value=((trace.get("self") or {})
                                                                  .get("bpf_ns") or 0) / 1e9)
    series = GaugeMetricFamily("netio_agent_series", "netio-trace agent: label sets exposed",
                               labels=["kind"])
    folded = CounterMetricFamily("netio_agent_series_folded", "netio-trace agent: label sets "
                                 "summed into the _overflow set (past --max-series)",
                                 labels=["kind"])
    for kind, sets in (("process", agg.processes), ("socket", agg.sockets)):
        series.add_metric([kind], len(sets.live))
        folded.add_metric([kind], sets.folded)
    yield series
    yield folded


def _verdicts(found):
    m = GaugeMetricFamily("netio_zerocopy_verdict", "netio-trace agent: whether MSG_ZEROCOPY "
                          "would pay off (trace's verdicts, no stacks, no baseline), 1 per "
                          "verdict a cgroup and command's flows got", labels=["cgroup", "comm",
                                                                              "verdict"])
    for key in sorted(found):
        m.add_metric([labels.bound(x) for x in key], 1)
    yield m


class _Collector:
    def __init__(self, agg, trace, cpu, verdicts):
        self.agg, self.trace, self.cpu, self.verdicts = agg, trace, cpu, verdicts

    def collect(self):
        yield from _counters(self.agg.processes, PROCESS_COUNTERS, "netio_", "")
        yield from _latency(self.agg.processes)
        yield from _counters(self.agg.sockets, SOCKET_COUNTERS, "netio_socket_",
                             " (per socket, by peer and protocol)")
        yield from _verdicts(self.verdicts)
        yield from _own(self.trace, self.cpu, self.agg)


def render(agg, trace, cpu, verdicts=()):
    """The whole exposition (bytes, ends with `# EOF`): the aggregator's label sets, the
    tracer's drops from the last snapshot `trace`, `cpu` {process: seconds} and the verdicts
    {(cgroup, comm, verdict)}."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(agg, trace or {}, cpu, verdicts))
    return generate_latest(registry)
