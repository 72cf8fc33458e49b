"""The agent's OpenMetrics text, made whole from the aggregator's totals and the tracer's own
figures, at the first scrape after a snapshot (server.py: under the lock the snapshot's add
holds, so a scrape never sees half of one).

The names are `trace --openmetrics`'s (report/openmetrics.py), labelled by label set instead
of pid; what only the agent has is added under new names (docs/DESIGN.md, "netio-trace
agent"): per-socket bytes by peer and protocol, and the agent's own drops and CPU time."""
from prometheus_client.utils import floatToGoString

from netio_trace.agent import labels
from netio_trace.agent.labels import PROCESS_COUNTERS, SOCKET_COUNTERS
from report.openmetrics import COUNTERS, bucket_bounds

HELP = {name: what for _key, name, what in COUNTERS}
HELP["fallback_copy_bytes"] = "bytes sent zero-copy that the kernel copied back at delivery"
BOUNDS = ["+Inf" if b == float("inf") else repr(b) for b in bucket_bounds()]


def _escape(text):
    """OpenMetrics' escapes in a label value or a HELP text."""
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _number(v):
    """prometheus_client's floatToGoString, with its commonest case (a whole number below a
    million: "12.0") written at once."""
    if type(v) is int and -1000000 < v < 1000000:
        return f"{v}.0"
    return floatToGoString(v)


def _labels(pairs):
    """{name="value",...} in the order of the names, as prometheus_client writes them."""
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(pairs)) + "}"


class Family:
    """One metric family's text, as prometheus_client's generate_latest writes it, written
    here because that one checks every label name rune by rune: ten times slower, seconds a
    snapshot at a busy host's label sets (bench/NOTES.md, "The agent's scrape")."""

    def __init__(self, name, kind, help_text, labelnames=()):
        self.name, self.kind, self.labelnames = name, kind, tuple(labelnames)
        self.lines = [f"# HELP {name} {_escape(help_text)}\n# TYPE {name} {kind}\n"]

    def sample(self, suffix, values, value, extra=()):
        pairs = list(zip(self.labelnames, values)) + list(extra)
        self.lines.append(f"{self.name}{suffix}{_labels(pairs)} {_number(value)}\n")

    def add_metric(self, values, value):
        """A counter's or gauge's sample (a counter's name gets _total)."""
        self.sample("_total" if self.kind == "counter" else "", values, value)

    def add_histogram(self, values, cumulative, sum_value):
        """A histogram's buckets [(le, count so far)], then its _count and _sum. The bucket
        lines differ only in le: their labels are escaped and sorted once."""
        marker = "\0"
        head, tail = _labels(list(zip(self.labelnames, values)) + [("le", marker)]).split(marker)
        self.lines.extend(f"{self.name}_bucket{head}{le}{tail} {_number(n)}\n"
                          for le, n in cumulative)
        self.sample("_count", values, cumulative[-1][1])
        self.sample("_sum", values, sum_value)

    def text(self):
        return "".join(self.lines)


def counter(name, help_text, labelnames=(), value=None):
    f = Family(name, "counter", help_text, labelnames)
    if value is not None:
        f.add_metric((), value)
    return f


def gauge(name, help_text, labelnames=()):
    return Family(name, "gauge", help_text, labelnames)


def _counters(sets, pairs, prefix, what):
    for _key, name in pairs:
        m = counter(f"{prefix}{name}", f"netio-trace agent: {HELP[name]}{what}", sets.names)
        for key, t in sorted(sets.live.items()):
            if name in t.counters:
                m.add_metric(key, t.counters[name])
        yield m


def _syscalls(sets):
    m = counter("netio_syscalls", "netio-trace agent: socket syscalls, every call (the latency "
                "histogram holds the timed ones)", list(sets.names) + ["syscall"])
    for key, t in sorted(sets.live.items()):
        for syscall, n in sorted(t.calls.items()):
            m.add_metric(key + (syscall,), n)
    yield m


def _latency(sets):
    m = Family("netio_syscall_latency_seconds", "histogram",
               "netio-trace agent: socket syscall latency (log2 buckets)",
               list(sets.names) + ["syscall"])
    for key, t in sorted(sets.live.items()):
        for syscall, (slots, secs) in sorted(t.hists.items()):
            cum, total = [], 0
            for le, n in zip(BOUNDS, slots):
                total += n
                cum.append((le, total))
            m.add_histogram(key + (syscall,), cum, secs)
    yield m


def _own(trace, cpu, agg):
    """The agent's own figures: what the tracer could not count, and what the agent costs."""
    drops = counter("netio_agent_drops", "netio-trace agent: events the tracer could not "
                    "count, by cause (the snapshot's drops_by_cause)", ["cause"])
    for cause, n in sorted((trace.get("drops_by_cause") or {}).items()):
        drops.add_metric([cause], n or 0)
    yield drops
    for key, what in (("sockets_untracked", "events of sockets that got no record"),
                      ("tcp_ends_lost", "TCP connections whose ends could not be recorded")):
        yield counter(f"netio_agent_{key}", f"netio-trace agent: {what}",
                      value=trace.get(key) or 0)
    events = getattr(agg.whois, "events", None)      # procevents.ProcEvents, when listening
    yield counter("netio_agent_proc_events_lost", "netio-trace agent: process event reads "
                  "that found events lost (the labels of processes that ended unseen may then "
                  "be unknown)", value=events.lost if events is not None else 0)
    c = counter("netio_agent_cpu_seconds", "netio-trace agent: CPU time (user + system) of "
                "the agent's Python process and of its tracer", ["process"])
    for proc, secs in sorted(cpu.items()):
        c.add_metric([proc], secs)
    yield c
    yield counter("netio_agent_bpf_seconds", "netio-trace agent: time spent in the tracer's "
                  "BPF programs (estimated where run-time stats were on part of the time)",
                  value=agg.bpf_ns / 1e9)
    series = gauge("netio_agent_series", "netio-trace agent: label sets exposed", ["kind"])
    folded = counter("netio_agent_series_folded", "netio-trace agent: label sets summed into "
                     "the _overflow set (past --max-series)", ["kind"])
    for kind, sets in (("process", agg.processes), ("socket", agg.sockets)):
        series.add_metric([kind], len(sets.live))
        folded.add_metric([kind], sets.folded)
    yield series
    yield folded


def _verdicts(found):
    m = gauge("netio_zerocopy_verdict", "netio-trace agent: whether MSG_ZEROCOPY would pay "
              "off (trace's verdicts, no stacks, no baseline), 1 per verdict a cgroup and "
              "command's flows got", ["cgroup", "comm", "verdict"])
    for key in sorted(found):
        m.add_metric([labels.bound(x) for x in key], 1)
    yield m


def _families(agg, trace, cpu, verdicts):
    yield from _counters(agg.processes, PROCESS_COUNTERS, "netio_", "")
    yield from _syscalls(agg.processes)
    yield from _latency(agg.processes)
    yield from _counters(agg.sockets, SOCKET_COUNTERS, "netio_socket_",
                         " (per socket, by peer and protocol)")
    yield from _verdicts(verdicts)
    yield from _own(trace, cpu, agg)


def render(agg, trace, cpu, verdicts=()):
    """The whole exposition (bytes, ends with `# EOF`): the aggregator's label sets, the
    tracer's drops from the last snapshot `trace`, `cpu` {process: seconds} and the verdicts
    {(cgroup, comm, verdict)}."""
    text = "".join(f.text() for f in _families(agg, trace or {}, cpu, verdicts))
    return (text + "# EOF\n").encode()
