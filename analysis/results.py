"""runs.jsonl (append one run atomically, read them back) and results.csv."""
import csv
import json
import os

from analysis import attribution, files
from analysis.contract import RECEIVES, STRATEGIES, TRANSPORTS, align_of, receive_of
from analysis.passes import kept_by_run
# a run's key and state are record.py's (passes.py reads them too); named here as well, for
# the readers of runs.jsonl
from analysis.record import key_of, ok, traced  # noqa: F401

RUNS = "runs.jsonl"
CSV = "results.csv"
# docs/DESIGN.md's columns first (names kept exactly), then more: a data list, alike in shape
# to attribution's frame lists and no copy of them.
CSV_COLUMNS = ["strategy", "msg_size", "threads", "transport", "repeat", "throughput_gbps",
               "latency_us", "cycles", "L1_cache_misses", "LLC_load_misses", "context_switches",
               "status", "error", "duration_s", "bytes_sent", "bytes_received", "messages_sent",
               "cycles_estimated", "instructions", "cache_misses", "cpu_migrations",
               "page_faults", "task_clock_ns",
               "tcp_cc", "tcp_retrans", "tcp_segs_out", "tcp_rtt_us",
               "zc_sends", "zc_completions", "zc_copied",
               "tx_bytes", "tx_copy_bytes", "zc_tx_bytes", "fallback_copy_bytes", "rx_copy_bytes",
               "pinned_pages", "send_p99_us", "attribution_source", "samples",
               "share_user_copy", "share_kernel_tx_copy", "share_pinning", "share_fallback_copy",
               "share_completion", "share_kernel_rx_copy", "share_other",
               "cpb_user_copy", "cpb_kernel_tx_copy", "cpb_pinning", "cpb_fallback_copy",
               "cpb_completion", "cpb_kernel_rx_copy", "cpb_other", "cpb_estimated",
               "traced", "tracer_kept", "throughput_whole_gbps", "warmup_s",
               "tx_spliced_bytes", "datagrams_seen", "datagrams_lost", "packet_sockets"]
# The attribution's categories (analysis/attribution.py): the copies, the send and receive
# path, other. The path categories' columns come after every earlier column, then
# each share's 95% interval.
CATEGORIES = attribution.CATEGORIES
COPY_CATEGORIES = attribution.COPY_CATEGORIES
PATH_CATEGORIES = attribution.PATH_CATEGORIES
CSV_COLUMNS += ([f"share_{c}" for c in PATH_CATEGORIES] + [f"cpb_{c}" for c in PATH_CATEGORIES]
                + [f"share_{c}_ci95_{end}" for c in CATEGORIES for end in ("lo", "hi")]
                + ["idle_samples"])
# the receive side's categories, the client's bytes by kind and the tracer's
RECEIVE_CATEGORIES = attribution.RECEIVE_CATEGORIES
CSV_COLUMNS += [f"share_{c}" for c in RECEIVE_CATEGORIES] + [f"cpb_{c}" for c in RECEIVE_CATEGORIES]
RX_KINDS = ("copied", "mapped", "discarded", "spliced")
CSV_COLUMNS += (["receive", "mss", "rcv_mss"] + [f"rx_{k}" for k in RX_KINDS]
                + ["rx_mapped_bytes", "rx_discarded_bytes", "rx_spliced_bytes"])
# the sender's field placement (--align) and an XDP program on the receiving veth (--rx-xdp)
CSV_COLUMNS += ["align", "rx_xdp"]
# of fallback_copy_bytes, the bytes copied a second time (TCP retransmits of segments that had
# arrived)
CSV_COLUMNS += ["fallback_copy_again_bytes"]

# perf event names as the tracer writes them, and the aliases we accept (older records and
# perf's own spellings).
PERF_ALIASES = {
    "cycles": ("cycles", "cpu-cycles"),
    "instructions": ("instructions",),
    "cache_misses": ("cache-misses", "cache_misses"),
    "L1_cache_misses": ("L1-dcache-load-misses", "L1_cache_misses", "L1-dcache-misses"),
    "LLC_load_misses": ("LLC-load-misses", "LLC_load_misses"),
    "LLC_store_misses": ("LLC-store-misses", "LLC_store_misses"),
    "context_switches": ("context-switches", "context_switches", "cs"),
    "cpu_migrations": ("cpu-migrations", "cpu_migrations"),
    "page_faults": ("page-faults", "page_faults"),
    "task_clock_ns": ("task-clock", "task_clock", "task_clock_ns"),
}


def perf_value(perf, name):
    """A counter from a run's perf object by our column name; None when not countable."""
    if not isinstance(perf, dict):
        return None
    for alias in PERF_ALIASES.get(name, (name,)):
        if alias in perf:
            v = perf[alias]
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return None


def append_run(path, run):
    """One write of one line, flushed and fsynced: a crash leaves whole lines only."""
    line = json.dumps(run, separators=(",", ":"), allow_nan=False) + "\n"
    data = line.encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A previous crash could have left a partial last line: start on a fresh line.
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        n = os.write(fd, data)
        if n != len(data):
            raise OSError(f"short write to {path} ({n} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_runs(path, dedup=True):
    """Every complete run in runs.jsonl. A damaged line (an interrupted write) is skipped.
    With dedup, the last record of each run key wins (a resumed sweep retries failed runs)."""
    runs = []
    try:
        with open(path, "rb") as f:
            for raw in f:
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    d = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(d, dict) and all(k in d for k in
                                               ("strategy", "msg_size", "threads", "transport",
                                                "repeat")):
                    runs.append(d)
    except FileNotFoundError:
        return []
    if not dedup:
        return runs
    last = {}
    for r in runs:
        last[key_of(r)] = r
    return list(last.values())


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def send_syscall(run):
    """The send syscall of the run's strategy, as the tracer names it."""
    return {"two-copy": "sendto", "per-field": "sendto",
            "sendfile": "sendfile"}.get(run.get("strategy"), "sendmsg")


def send_stats(run):
    """The sender's own send-syscall figures {count, bytes, p50_us, p99_us, hist_log2_ns}:
    from the server process when the tracer told processes apart (the client's 4-byte
    connection index is a sendto too), else from the run's totals."""
    trace = run.get("trace") or {}
    name = send_syscall(run)
    sc = _get(trace, "by_role", "server", "syscalls", name)
    if not isinstance(sc, dict):
        sc = _get(trace, "syscalls", name)
    return sc if isinstance(sc, dict) else {}


def csv_row(run):
    perf = run.get("perf")
    attr = run.get("attribution") or {}
    share = attr.get("share") or {}
    cpb = attr.get("cycles_per_byte") or {}
    trace = run.get("trace") or {}
    sc = send_stats(run)
    cycles = perf_value(perf, "cycles")
    row = {
        "strategy": run.get("strategy"), "msg_size": run.get("msg_size"),
        "threads": run.get("threads"), "transport": run.get("transport"),
        "repeat": run.get("repeat"), "throughput_gbps": _num(run.get("throughput_gbps")),
        "latency_us": _num(run.get("latency_us")),
        "cycles": cycles,
        "L1_cache_misses": perf_value(perf, "L1_cache_misses"),
        "LLC_load_misses": perf_value(perf, "LLC_load_misses"),
        "context_switches": perf_value(perf, "context_switches"),
        "status": run.get("status", "ok"), "error": run.get("error"),
        "duration_s": _num(run.get("duration_s")), "bytes_sent": run.get("bytes_sent"),
        "bytes_received": run.get("bytes_received"), "messages_sent": run.get("messages_sent"),
        "cycles_estimated": (cycles is None and attr.get("estimated")) or None,
        "instructions": perf_value(perf, "instructions"),
        "cache_misses": perf_value(perf, "cache_misses"),
        "cpu_migrations": perf_value(perf, "cpu_migrations"),
        "page_faults": perf_value(perf, "page_faults"),
        "task_clock_ns": perf_value(perf, "task_clock_ns"),
        "tcp_cc": _get(run, "tcp", "cc"), "tcp_retrans": _get(run, "tcp", "retrans"),
        "tcp_segs_out": _get(run, "tcp", "segs_out"), "tcp_rtt_us": _get(run, "tcp", "rtt_us"),
        "zc_sends": _get(run, "zerocopy", "sends"),
        "zc_completions": _get(run, "zerocopy", "completions"),
        "zc_copied": _get(run, "zerocopy", "copied"),
        "tx_bytes": trace.get("tx_bytes"), "tx_copy_bytes": trace.get("tx_copy_bytes"),
        "zc_tx_bytes": trace.get("zc_tx_bytes"),
        "fallback_copy_bytes": trace.get("fallback_copy_bytes"),
        "rx_copy_bytes": trace.get("rx_copy_bytes"), "pinned_pages": trace.get("pinned_pages"),
        "send_p99_us": sc.get("p99_us"),
        "attribution_source": attr.get("source"), "samples": attr.get("samples"),
        "cpb_estimated": attr.get("estimated") if attr else None,
        "traced": traced(run), "tracer_kept": None,
        "throughput_whole_gbps": _num(run.get("throughput_whole_gbps")),
        "warmup_s": _num(run.get("warmup_s")),
        "tx_spliced_bytes": trace.get("tx_spliced_bytes"),
        "datagrams_seen": _get(run, "forward", "datagrams_seen"),
        "datagrams_lost": _get(run, "forward", "datagrams_lost"),
        "packet_sockets": _get(run, "forward", "packet_sockets"),
    }
    ci = attr.get("share_ci95") or {}
    for c in CATEGORIES:
        row[f"share_{c}"] = _num(share.get(c))
        row[f"cpb_{c}"] = _num(cpb.get(c))
        lo, hi = (ci.get(c) or (None, None))[:2]
        row[f"share_{c}_ci95_lo"], row[f"share_{c}_ci95_hi"] = _num(lo), _num(hi)
    row["idle_samples"] = _num(attr.get("idle_samples")) if attr else None
    received = run.get("received") or {}
    rcv_mss = received.get("rcv_mss")
    row.update(receive=receive_of(run), mss=run.get("mss"),
               rcv_mss=rcv_mss if not isinstance(rcv_mss, list) else None,
               align=align_of(run), rx_xdp=bool(run.get("rx_xdp")))
    for k in RX_KINDS:
        row[f"rx_{k}"] = _num(received.get(k))
    for f in ("rx_mapped_bytes", "rx_discarded_bytes", "rx_spliced_bytes",
              "fallback_copy_again_bytes"):
        row[f] = _num(trace.get(f))
    return row


def _cell(v):
    if v is None:
        return ""        # not countable / not applicable: empty, never 0
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def write_csv(path, runs):
    with files.atomic_open(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in csv_rows(runs):
            w.writerow({k: _cell(v) for k, v in row.items()})


def csv_rows(runs):
    """csv_row of every run, sorted, with tracer_kept (traced / untraced throughput of the
    same configuration and round) on the traced runs that have their untraced pair."""
    kept = kept_by_run(runs)
    rows = []
    for r in sort_runs(runs):
        row = csv_row(r)
        row["tracer_kept"] = kept.get(key_of(r))
        rows.append(row)
    return rows


def sort_runs(runs):
    so = {s: i for i, s in enumerate(STRATEGIES)}
    to = {t: i for i, t in enumerate(TRANSPORTS)}
    ro = {s: i for i, s in enumerate(RECEIVES)}
    return sorted(runs, key=lambda r: (to.get(r["transport"], 9), r["threads"], r["msg_size"],
                                       so.get(r["strategy"], 9), align_of(r),
                                       ro.get(receive_of(r), 9),
                                       r["repeat"], traced(r)))


def dataframe(runs):
    """pandas DataFrame of csv_row() for every run (numbers, None as NaN)."""
    import pandas as pd     # deferred on purpose: heavy, and only the report's plots need it
    df = pd.DataFrame(csv_rows(runs), columns=CSV_COLUMNS)
    return df
