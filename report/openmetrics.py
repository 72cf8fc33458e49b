"""A trace object (the tracer's JSON) as OpenMetrics text, written by prometheus_client:
bytes, copies and syscalls per process as counters, each syscall's latency as a histogram
whose buckets are the tracer's log2 buckets, so a Prometheus server scrapes them as they are.

Every histogram has the same buckets, one per log2 slot of the tracer (bpf/netio.h,
NETIO_HIST_SLOTS): slot i holds [2^i, 2^(i+1)) ns (slot 0 from 0), so its `le` is 2^(i+1) ns;
the last slot also holds everything above it, so it is `+Inf`. Empty slots are written too: the
bucket set never changes between scrapes, as Prometheus's quantiles over time need.

`serve(json_path, port)` serves the same on 127.0.0.1:PORT (prometheus_client's own HTTP
server, which answers in the text format its scraper asks for), read from the trace JSON the
tracer rewrites while it runs (netio-tracer --json-every)."""
import json

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

HIST_SLOTS = 40     # NETIO_HIST_SLOTS
# (key in a process of the trace object, metric name, help)
COUNTERS = (("tx_bytes", "tx_bytes", "bytes sent"),
            ("tx_copy_bytes", "tx_copy_bytes", "bytes copied from user space on send"),
            ("tx_spliced_bytes", "tx_spliced_bytes",
             "bytes sent from page-cache pages (sendfile, splice): not copied from the user"),
            ("zc_tx_bytes", "zc_tx_bytes", "bytes sent zero-copy (user pages pinned)"),
            ("rx_copy_bytes", "rx_copy_bytes", "bytes copied to user space on receive"),
            ("tx_calls", "tx_calls", "send calls that sent at least one byte"),
            ("rx_copy_calls", "rx_copies", "receives that copied bytes to user space"))


def _processes(trace):
    for pid, p in sorted((trace.get("processes") or {}).items()):
        if isinstance(p, dict):
            yield pid, p.get("comm") or "", p


def _counter_metrics(trace):
    for key, name, what in COUNTERS:
        m = CounterMetricFamily(f"netio_{name}", f"netio-trace: {what}", labels=["pid", "comm"])
        for pid, comm, p in _processes(trace):
            if isinstance(p.get(key), int):
                m.add_metric([pid, comm], p[key])
        yield m


def _syscall_metrics(trace):
    m = CounterMetricFamily("netio_syscalls", "netio-trace: socket syscalls, every call (the "
                            "latency histogram holds the timed ones)",
                            labels=["pid", "comm", "syscall"])
    for pid, comm, p in _processes(trace):
        for name, sc in sorted((p.get("syscalls") or {}).items()):
            if isinstance(sc, dict) and isinstance(sc.get("count"), int):
                m.add_metric([pid, comm, name], sc["count"])
    yield m


def bucket_bounds():
    """The `le` of every bucket in seconds, the last one +Inf."""
    return [2.0 ** (i + 1) / 1e9 for i in range(HIST_SLOTS - 1)] + [float("inf")]


def _buckets(hist):
    """[(le, cumulative count)] of every slot, from {lower bound ns: count}."""
    by_slot = [0] * HIST_SLOTS
    for lo, n in hist.items():
        slot = min(max(int(lo).bit_length() - 1, 0), HIST_SLOTS - 1)
        by_slot[slot] += n
    out, total = [], 0
    for le, n in zip(bucket_bounds(), by_slot):
        total += n
        out.append(("+Inf" if le == float("inf") else repr(le), total))
    return out, total


def _latency_metrics(trace):
    m = HistogramMetricFamily("netio_syscall_latency_seconds",
                              "netio-trace: socket syscall latency (log2 buckets)",
                              labels=["pid", "comm", "syscall"])
    for pid, comm, p in _processes(trace):
        for name, sc in sorted((p.get("syscalls") or {}).items()):
            hist = sc.get("hist_log2_ns") if isinstance(sc, dict) else None
            if not hist:
                continue
            buckets, total = _buckets(hist)
            mean_s = (sc.get("mean_us") or 0) * 1e-6
            m.add_metric([pid, comm, name], buckets, sum_value=mean_s * total)
    yield m


class _TraceCollector:
    """The metrics of a trace object, or of the trace JSON at a path, read at each collect
    (nothing before the tracer wrote it)."""

    def __init__(self, trace=None, path=None):
        self.trace, self.path = trace, path

    def collect(self):
        trace = self.trace
        if self.path:
            try:
                with open(self.path) as f:
                    trace = json.load(f)
            except (OSError, ValueError):
                return
        yield from _counter_metrics(trace)
        yield from _syscall_metrics(trace)
        yield from _latency_metrics(trace)


def text(trace):
    """The OpenMetrics exposition (bytes, ends with `# EOF`) of a trace object."""
    registry = CollectorRegistry()
    registry.register(_TraceCollector(trace))
    return generate_latest(registry)


def write(trace, path):
    with open(path, "wb") as f:
        f.write(text(trace))


def serve(json_path, port):
    """Serve the metrics of the trace JSON at json_path on 127.0.0.1:port; returns the
    server (call .shutdown()). OSError when the port cannot be bound."""
    registry = CollectorRegistry()
    registry.register(_TraceCollector(path=json_path))
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    return server
