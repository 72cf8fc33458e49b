"""The plots of a trace report (`trace --report DIR`): send sizes and syscall latency
as log2 histograms, and each process's CPU by attribution category with its 95% interval.
PNG in DIR/plots/; each function returns the file name it wrote, or None (nothing to draw)."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analysis import attribution  # noqa: E402
from analysis.sizes import format_size  # noqa: E402
from report.colors import CAT_COLORS  # noqa: E402
from report.plots import _save  # noqa: E402

MAX_PANELS = 6


def _log2_hist(h):
    """[(lo, n)] of a {"<lo>": n} histogram, ascending, empty slots left out."""
    return sorted((max(int(k), 1), int(v)) for k, v in (h or {}).items() if int(v))


def _bars(ax, pairs, color):
    xs = list(range(len(pairs)))
    total = sum(n for _, n in pairs) or 1
    ax.bar(xs, [n / total for _, n in pairs], color=color, width=0.8)
    ax.set_xticks(xs)
    return xs


def send_sizes(flows, out_dir):
    """One panel per flow with a send-size histogram (the largest first): share of its sends
    by log2 size slot."""
    fs = [f for f in flows if _log2_hist(f.get("send_sizes"))][:MAX_PANELS]
    if not fs:
        return None
    fig, axes = plt.subplots(1, len(fs), figsize=(3.6 * len(fs), 3.2), squeeze=False)
    for ax, f in zip(axes[0], fs):
        pairs = _log2_hist(f["send_sizes"])
        _bars(ax, pairs, "#1f77b4")
        ax.set_xticklabels([format_size(lo) for lo, _ in pairs], rotation=45, fontsize=7)
        ax.set_title(f"pid {f['pid']} {f.get('proto') or ''} {f.get('peer') or ''}", fontsize=8)
        ax.set_xlabel("send size (log2 slot, from)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of sends")
    fig.suptitle("Send sizes per socket", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "send_sizes.png")


def syscall_latency(trace, out_dir):
    """One panel per process (the busiest first), a step line per syscall class: share of its
    timed calls by log2 latency slot."""
    procs = sorted((trace.get("processes") or {}).items(),
                   key=lambda kv: -sum((s or {}).get("count", 0)
                                       for s in (kv[1].get("syscalls") or {}).values()))
    procs = [(pid, p) for pid, p in procs if (p.get("tx_bytes") or p.get("rx_copy_bytes"))
             and any(_log2_hist(s.get("hist_log2_ns")) for s in (p.get("syscalls") or {}).values())]
    procs = procs[:MAX_PANELS]
    if not procs:
        return None
    fig, axes = plt.subplots(1, len(procs), figsize=(4.0 * len(procs), 3.3), squeeze=False,
                             sharey=True)
    for ax, (pid, p) in zip(axes[0], procs):
        for name, s in sorted((p.get("syscalls") or {}).items()):
            pairs = _log2_hist(s.get("hist_log2_ns"))
            if not pairs:
                continue
            total = sum(n for _, n in pairs)
            ax.step([lo for lo, _ in pairs], [n / total for _, n in pairs], where="post",
                    label=f"{name} ({s.get('count')})", linewidth=1.5)
        ax.set_xscale("log", base=2)
        ax.set_title(f"pid {pid} ({p.get('comm')})", fontsize=9)
        ax.set_xlabel("latency (ns, log2 slots)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("share of timed calls")
    fig.suptitle("Syscall latency per process", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "syscall_latency.png")


def category_shares(atts, out_dir):
    """One horizontal bar chart per command (at most MAX_PANELS): each category's share of its
    samples, with its 95% interval as an error bar."""
    items = [(comm, a) for comm, a in atts.items() if a and a.get("samples")][:MAX_PANELS]
    if not items:
        return None
    cats = attribution.CATEGORIES
    fig, axes = plt.subplots(1, len(items), figsize=(4.6 * len(items), 5.0), squeeze=False,
                             sharey=True)
    for ax, (comm, a) in zip(axes[0], items):
        share = [a["share"].get(c, 0.0) for c in cats]
        ci = [a["share_ci95"].get(c, [0, 0]) for c in cats]
        err = [[max(s - lo, 0) for s, (lo, _) in zip(share, ci)],
               [max(hi - s, 0) for s, (_, hi) in zip(share, ci)]]
        ax.barh(range(len(cats)), share, xerr=err, color=[CAT_COLORS[c] for c in cats],
                ecolor="#333333", capsize=2)
        ax.set_yticks(range(len(cats)))
        ax.set_yticklabels([attribution.LABELS.get(c, c) for c in cats], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{comm}: {a['samples']} samples", fontsize=9)
        ax.set_xlabel("share of samples (95% interval)")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Where the CPU went, per command", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "categories.png")


def make_all(trace, flows, atts, out_dir):
    """{plot: file or None}, [errors]."""
    os.makedirs(out_dir, exist_ok=True)
    written, errors = {}, []
    for name, fn in (("send_sizes", lambda: send_sizes(flows, out_dir)),
                     ("syscall_latency", lambda: syscall_latency(trace, out_dir)),
                     ("categories", lambda: category_shares(atts, out_dir))):
        try:
            written[name] = fn()
        except Exception as e:       # one bad plot must not cost the report
            plt.close("all")
            written[name] = None
            errors.append(f"{name}: {type(e).__name__}: {e}")
    return written, errors
