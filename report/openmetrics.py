"""A trace object (the tracer's JSON) as OpenMetrics text, written by prometheus_client
(issue 18): bytes and copies per process as counters, each syscall's latency as a histogram
whose buckets are the tracer's log2 buckets, so a Prometheus server scrapes them as they are."""
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

BYTES = (("tx_bytes", "bytes sent"), ("tx_copy_bytes", "bytes copied from user space on send"),
         ("zc_tx_bytes", "bytes sent zero-copy (pages pinned)"),
         ("rx_copy_bytes", "bytes copied to user space on receive"))


def _processes(trace):
    for pid, p in sorted((trace.get("processes") or {}).items()):
        if isinstance(p, dict):
            yield pid, p.get("comm") or "", p


def _bytes_metrics(trace):
    for key, what in BYTES:
        m = CounterMetricFamily(f"netio_{key}", f"netio-trace: {what}", labels=["pid", "comm"])
        for pid, comm, p in _processes(trace):
            if isinstance(p.get(key), int):
                m.add_metric([pid, comm], p[key])
        yield m


def _buckets(hist):
    """[(le in seconds, cumulative count)] from {lower bound ns: count} log2 buckets."""
    out, total = [], 0
    for lo in sorted(hist, key=int):
        total += hist[lo]
        out.append((repr(2 * int(lo) / 1e9), total))
    out.append(("+Inf", total))
    return out, total


def _latency_metrics(trace):
    m = HistogramMetricFamily("netio_syscall_latency_seconds",
                              "netio-trace: socket syscall latency (log2 buckets)",
                              labels=["pid", "comm", "syscall"])
    for pid, comm, p in _processes(trace):
        for name, sc in sorted((p.get("syscalls") or {}).items()):
            hist = (sc or {}).get("hist_log2_ns") if isinstance(sc, dict) else None
            if not hist:
                continue
            buckets, total = _buckets(hist)
            mean_s = (sc.get("mean_us") or 0) * 1e-6
            m.add_metric([pid, comm, name], buckets, sum_value=mean_s * total)
    yield m


class _TraceCollector:
    def __init__(self, trace):
        self.trace = trace

    def collect(self):
        yield from _bytes_metrics(self.trace)
        yield from _latency_metrics(self.trace)


def text(trace):
    """The OpenMetrics exposition (bytes, ends with `# EOF`) of a trace object."""
    registry = CollectorRegistry()
    registry.register(_TraceCollector(trace))
    return generate_latest(registry)


def write(trace, path):
    with open(path, "wb") as f:
        f.write(text(trace))
