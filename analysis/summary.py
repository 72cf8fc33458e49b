"""Per strategy and size figures (medians over repeats) shared by the end-of-sweep table and the
report: throughput, cycles/byte per category, zero-copy COPIED %, p99 send latency."""
from rich import box
from rich.console import Console
from rich.table import Table

from analysis import passes, results, stats
from analysis.contract import STRATEGIES, TRANSPORTS, ZEROCOPY_STRATEGIES
from analysis.sizes import format_size

SHORT = {"user_copy": "user", "kernel_tx_copy": "k-tx", "pinning": "pin",
         "fallback_copy": "fallback", "completion": "compl", "kernel_rx_copy": "k-rx",
         "syscall": "sys", "splice": "splice", "tcp_tx": "tcp-tx", "ip_tx": "ip-tx", "net_rx": "rx",
         "checksum": "csum", "skb_mem": "skb", "sched": "sched", "locks": "lock", "bpf": "bpf", "startup": "start",
         "zc_receive": "zc-rx", "page_mapping": "map", "copy_buffer": "copybuf",
         "other": "other", "path": "path"}
# Below this width the terminal table shows the send and receive path as one column.
WIDE = 210


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def copied_pct(run):
    zc = run.get("zerocopy") or {}
    c = _num(zc.get("completions"))
    if not c:
        return None
    return 100.0 * (_num(zc.get("copied")) or 0) / c


def send_p99(run):
    sc = results.send_stats(run)
    return _num(sc.get("p99_us"))


def cpb(run, cat):
    a = run.get("attribution") or {}
    return _num((a.get("cycles_per_byte") or {}).get(cat))


def cpb_path(run):
    """Cycles per byte of the send and receive path (every category but the copies and
    other), None when the run has none of them."""
    vals = [cpb(run, c) for c in results.PATH_CATEGORIES]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


def cpb_total(run):
    a = run.get("attribution") or {}
    vals = [_num(v) for v in (a.get("cycles_per_byte") or {}).values()]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


def rows(runs, threads=None, traced=None):
    """One dict per (transport, strategy, size) at the given thread count (default: the
    smallest in the data), with spreads over repeats: throughput and latency from runs (the
    answer runs), cycles, COPIED and syscall latency from traced (default: the traced runs
    among runs, else runs)."""
    ok = [r for r in runs if results.ok(r)]
    if not ok:
        return []
    if traced is None:
        traced = [r for r in ok if results.traced(r)] or ok
    if threads is None:
        threads = min(r["threads"] for r in ok)
    ok = [r for r in ok if r["threads"] == threads]
    so = {s: i for i, s in enumerate(STRATEGIES)}
    to = {t: i for i, t in enumerate(TRANSPORTS)}
    keys = sorted({(r["transport"], r["strategy"], r["msg_size"]) for r in ok},
                  key=lambda k: (to.get(k[0], 9), so.get(k[1], 9), k[2]))
    out = []
    for tr, st, sz in keys:
        key = (tr, st, sz, threads)
        rs = [r for r in ok if (r["transport"], r["strategy"], r["msg_size"]) == key[:3]]
        ts = [r for r in traced
              if (r["transport"], r["strategy"], r["msg_size"], r["threads"]) == key] or rs
        out.append({"transport": tr, "strategy": st, "msg_size": sz, "threads": threads,
                    "n": len(rs),
                    "throughput": stats.spread(r.get("throughput_gbps") for r in rs),
                    "latency": stats.spread(r.get("latency_us") for r in rs),
                    "cpb": {c: stats.spread(cpb(r, c) for r in ts) for c in results.CATEGORIES},
                    "cpb_total": stats.spread(cpb_total(r) for r in ts),
                    "cpb_path": stats.spread(cpb_path(r) for r in ts),
                    "estimated": any((r.get("attribution") or {}).get("estimated") for r in ts),
                    "copied_pct": stats.spread(copied_pct(r) for r in ts),
                    "send_p99": stats.spread(send_p99(r) for r in ts),
                    "syscall": results.send_syscall(ts[0])})
    return out


def _m(s, fmt="{:.2f}"):
    return "–" if not s else fmt.format(s["median"])


def _shown_categories(width):
    """The category columns of the terminal table: every one on a wide terminal; else the
    copies, the path summed ("path") and other; on a narrow one without completion and other."""
    if width >= WIDE:
        return list(results.CATEGORIES)
    cats = list(results.COPY_CATEGORIES) + ["path", "other"]
    if width < 128:
        cats = [c for c in cats if c not in ("completion", "other")]
    return cats


def print_summary(runs, console):
    answers, traced, _ = passes.split(runs)
    rs = rows(answers, traced=traced)
    if not rs:
        console.print("[red]no successful run: nothing to summarize[/]")
        return
    if not console.is_terminal:      # a log file: no reason to squeeze into 80 columns
        console = Console(file=console.file, width=max(console.width, WIDE + 20))
    est = any(r["estimated"] for r in rs)
    multi = len({r["transport"] for r in rs}) > 1
    narrow = console.width < 128
    cats = _shown_categories(console.width)
    t = Table(title=f"summary: medians over repeats, {rs[0]['threads']} thread(s); cycles/byte "
              f"per category" + (" (estimated: task-clock × TSC, no PMU)" if est else "")
              + (" (widen the terminal for all columns)" if console.width < WIDE else ""),
              box=None if narrow else box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
              title_justify="left", header_style="bold underline" if narrow else "bold")
    if multi:
        t.add_column("transport")
    t.add_column("strategy", no_wrap=True)
    t.add_column("size", justify="right")
    t.add_column("Gbit/s", justify="right")
    if not narrow:
        t.add_column("min–max", justify="right", style="dim")
    for c in cats:
        t.add_column("fb" if narrow and c == "fallback_copy" else SHORT[c], justify="right")
    t.add_column("total", justify="right", style="bold")
    t.add_column("COPIED" if not narrow else "cp", justify="right")
    t.add_column("p99 send", justify="right", no_wrap=True)
    for r in rs:
        th = r["throughput"]
        cells = ([r["transport"]] if multi else []) + [
            r["strategy"], format_size(r["msg_size"]), _m(th)]
        if not narrow:
            cells.append(f"{th['min']:.2f}–{th['max']:.2f}" if th else "–")
        cells += [_m(r["cpb_path"] if c == "path" else r["cpb"][c]) for c in cats]
        cells += [_m(r["cpb_total"]),
                  (_m(r["copied_pct"], "{:.0f}%") if r["strategy"] in ZEROCOPY_STRATEGIES
                   else "–"),
                  _m(r["send_p99"], "{:.0f} µs")]
        t.add_row(*cells)
    console.print(t)
