"""The report's plots (seaborn, PNG, DIR/plots/). Every figure shows medians over repeats with
their min–max range; each function returns the file name it wrote (or None: no data)."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
# loaded now, not at the first figure, so that importing this module loads every extension
# the plots use (netio_trace.system.signals.import_whole holds signals over that)
from matplotlib.backends import backend_agg  # noqa: E402,F401
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis import attribution, passes, results
from analysis.contract import STRATEGIES, TRANSPORTS, ZEROCOPY_STRATEGIES  # noqa: E402
from analysis.sizes import format_size  # noqa: E402

PALETTE = {"two-copy": "#d62728", "one-copy": "#1f77b4", "zero-copy": "#2ca02c",
           "per-field": "#9467bd", "sendfile": "#8c564b", "io-uring": "#17becf",
           "io-uring-zc": "#bcbd22"}
from report.colors import CAT_COLORS  # noqa: E402  (one colour per category)
CAT_LABELS = attribution.LABELS
MINMAX = ("pi", 100)   # seaborn: the 0–100 percentile interval = min..max over repeats
DPI = 90


def _order(values, ref):
    rank = {v: i for i, v in enumerate(ref)}
    return sorted(set(values), key=lambda v: (rank.get(v, 99), v))


def _frame(runs):
    ok = [r for r in runs if results.ok(r)]
    if not ok:
        return None
    df = results.dataframe(ok)
    numeric = [c for c in df.columns
               if c not in ("strategy", "transport", "status", "error", "tcp_cc",
                            "attribution_source", "traced")]
    df[numeric] = df[numeric].apply(pd.to_numeric, errors="coerce")
    df = df.copy()      # one block per dtype again (pandas warns of a fragmented frame)
    df["size"] = df["msg_size"].map(format_size)
    return df


def _size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([format_size(s) for s in sizes])
    ax.minorticks_off()


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    tmp = os.path.join(out_dir, f".{name}.tmp")
    try:         # whole files only: an interrupted report leaves no truncated PNG
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name


def _by_strategy(df, x, y, height, aspect, **panels):
    """A median line per strategy with its min–max band, a panel per column of panels (col=,
    col_order=), a row per transport where there are several, each panel its own y scale."""
    transports = _order(df["transport"], TRANSPORTS)
    return sns.relplot(data=df, x=x, y=y, hue="strategy",
                       hue_order=_order(df["strategy"], STRATEGIES), palette=PALETTE,
                       row="transport" if len(transports) > 1 else None, row_order=transports,
                       kind="line", estimator="median", errorbar=MINMAX, marker="o",
                       height=height, aspect=aspect, facet_kws={"sharey": False}, **panels)


def throughput_vs_size(df, out_dir):
    sizes = sorted(df["msg_size"].unique())
    g = _by_strategy(df, "msg_size", "throughput_gbps", 3.2, 1.1, col="threads")
    for ax in g.axes.flat:
        _size_axis(ax, sizes)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    g.set_axis_labels("message size (bytes)", "throughput (Gbit/s)")
    g.set_titles(row_template="{row_name}", col_template="{col_name} thread(s)")
    g.figure.suptitle("Throughput vs message size — median, band = min–max over repeats",
                      y=1.03)
    return _save(g.figure, out_dir, "throughput_vs_size.png")


def latency_vs_threads(df, out_dir):
    threads = sorted(df["threads"].unique())
    g = _by_strategy(df, "threads", "latency_us", 3.0, 0.95, col="size",
                     col_order=[format_size(s) for s in sorted(df["msg_size"].unique())])
    for ax in g.axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    g.set_axis_labels("threads (connections)", "µs per message per connection")
    g.set_titles(row_template="{row_name}", col_template="{col_name}")
    g.figure.suptitle("Latency (duration × threads / messages) vs threads — median, "
                      "band = min–max", y=1.03)
    return _save(g.figure, out_dir, "latency_vs_threads.png")


def cycles_per_byte(df, out_dir):
    """The headline: cycles per payload byte, stacked by copy category, per strategy and size."""
    cols = [f"cpb_{c}" for c in results.CATEGORIES]
    d = df.dropna(subset=cols, how="all")
    if d.empty:
        return None
    threads = int(d["threads"].min())
    d = d[d["threads"] == threads]
    sizes = sorted(d["msg_size"].unique())
    transports = _order(d["transport"], TRANSPORTS)
    strategies = _order(d["strategy"], STRATEGIES)
    med = d.groupby(["transport", "msg_size", "strategy"])[cols].median()
    tot = d.assign(total=d[cols].sum(axis=1, min_count=1)).groupby(
        ["transport", "msg_size", "strategy"])["total"].agg(["min", "max", "median"])
    estimated = bool(d["cpb_estimated"].fillna(False).astype(bool).any())
    sources = (sorted(set(d["attribution_source"].dropna())) if "attribution_source" in d
               else [])
    fig, axes = plt.subplots(len(transports), len(sizes), squeeze=False,
                             figsize=(2.2 * len(sizes) + 1.5, 3.4 * len(transports)))
    for i, tr in enumerate(transports):
        for j, sz in enumerate(sizes):
            ax = axes[i][j]
            bottom = [0.0] * len(strategies)
            for c in results.CATEGORIES:
                vals = []
                for s in strategies:
                    try:
                        v = med.loc[(tr, sz, s), f"cpb_{c}"]
                    except KeyError:
                        v = float("nan")
                    vals.append(0.0 if v != v else float(v))
                ax.bar(range(len(strategies)), vals, bottom=bottom, color=CAT_COLORS[c],
                       label=CAT_LABELS[c], width=0.7, edgecolor="white", linewidth=0.5)
                bottom = [b + v for b, v in zip(bottom, vals)]
            for k, s in enumerate(strategies):
                if (tr, sz, s) in tot.index:
                    lo, hi = tot.loc[(tr, sz, s), "min"], tot.loc[(tr, sz, s), "max"]
                    ax.plot([k, k], [lo, hi], color="black", linewidth=1)
            ax.set_xticks(range(len(strategies)))
            ax.set_xticklabels(strategies, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{tr}, {format_size(sz)}", fontsize=9)
            ax.grid(axis="x", visible=False)
            ax.grid(axis="y", alpha=0.3)
            if j == 0:
                ax.set_ylabel("cycles per byte" + (" (estimated)" if estimated else ""))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="center left", bbox_to_anchor=(1.0, 0.5),
               fontsize=8, title="category (top of the bar first)", title_fontsize=8,
               frameon=False)
    title = (f"Cycles per byte by category ({threads} thread(s); median of repeats, "
             f"whisker = min–max of the total; y scale differs per size)")
    if estimated:
        title += ("\nestimated: no PMU, cycles = task-clock × TSC rate, samples on "
                  + (", ".join(sources) or "cpu-clock"))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "cycles_per_byte.png")


def _no_cache_misses_reason(traced_runs, why_untraced=None):
    """Why no cache miss was counted: (title, detail); why_untraced: why no traced run
    succeeded, in a few words (report/untraced.py, short_why)."""
    if not traced_runs:
        return ("Cache misses: not counted in this sweep",
                f"{why_untraced or 'no traced run'}: no traced run, and perf counters run "
                "only beside the tracer")
    perfs = [r.get("perf") for r in traced_runs]
    if all(p is None for p in perfs):
        return ("Cache misses: not counted in this sweep",
                "perf counters were off (--no-counters)")
    return ("Cache misses: not countable on this machine",
            "no hardware PMU: L1-dcache-load-misses and LLC-load-misses are unsupported here "
            "(never reported as 0)")


def cache_misses(df, out_dir, traced_runs=(), why_untraced=None):
    have = [c for c in ("L1_cache_misses", "LLC_load_misses")
            if df is not None and df[c].notna().any()]
    if not have:
        title, detail = _no_cache_misses_reason(list(traced_runs), why_untraced)
        fig, ax = plt.subplots(figsize=(7, 2.2))
        ax.axis("off")
        ax.text(0.5, 0.6, title, ha="center", va="center", fontsize=14, weight="bold")
        ax.text(0.5, 0.25, detail, ha="center", va="center", fontsize=9)
        return _save(fig, out_dir, "cache_misses.png")
    d = df.copy()
    long = []
    for c in have:
        x = d[["strategy", "msg_size", "threads", "transport", "bytes_sent", c]].copy()
        x["counter"] = c
        x["per_kib"] = x[c] / (x["bytes_sent"] / 1024.0)
        long.append(x)
    long = pd.concat(long)
    threads = int(long["threads"].min())
    long = long[long["threads"] == threads]
    sizes = sorted(long["msg_size"].unique())
    g = sns.relplot(data=long, x="msg_size", y="per_kib", hue="strategy",
                    hue_order=_order(long["strategy"], STRATEGIES), palette=PALETTE,
                    col="counter", row="transport" if long["transport"].nunique() > 1 else None,
                    kind="line", estimator="median", errorbar=MINMAX, marker="o", height=3.0,
                    facet_kws={"sharey": False})
    for ax in g.axes.flat:
        _size_axis(ax, sizes)
        ax.grid(alpha=0.3)
    g.set_axis_labels("message size (bytes)", "misses per KiB sent")
    g.figure.suptitle(f"Cache misses vs message size ({threads} thread(s))", y=1.03)
    return _save(g.figure, out_dir, "cache_misses.png")


def _hist_rows(runs):
    rows = []
    for r in runs:
        if not results.ok(r):
            continue
        sc = results.send_stats(r)
        h = sc.get("hist_log2_ns") or {}
        for lo, n in h.items():
            try:
                lo = int(lo)
            except ValueError:
                continue
            rows.append({"strategy": r["strategy"], "msg_size": r["msg_size"],
                         "threads": r["threads"], "transport": r["transport"],
                         "syscall": results.send_syscall(r), "lo": max(lo, 1), "n": n})
    return pd.DataFrame(rows)


def syscall_latency(runs, out_dir):
    h = _hist_rows(runs)
    if h.empty:
        return None
    threads = int(h["threads"].min())
    transport = _order(h["transport"], TRANSPORTS)[0]
    h = h[(h["threads"] == threads) & (h["transport"] == transport)]
    h = h.groupby(["strategy", "syscall", "msg_size", "lo"], as_index=False)["n"].sum()
    h["share"] = h["n"] / h.groupby(["strategy", "msg_size"])["n"].transform("sum")
    h["size"] = h["msg_size"].map(format_size)
    strategies = _order(h["strategy"], STRATEGIES)
    sizes = [format_size(s) for s in sorted(h["msg_size"].unique())]
    fig, axes = plt.subplots(1, len(strategies), figsize=(4.0 * len(strategies), 3.4),
                             sharey=True, squeeze=False)
    pal = sns.color_palette("viridis", len(sizes))
    for ax, s in zip(axes[0], strategies):
        d = h[h["strategy"] == s]
        for color, size in zip(pal, sizes):
            x = d[d["size"] == size].sort_values("lo")
            if x.empty:
                continue
            ax.step(x["lo"], x["share"], where="post", color=color, label=size, linewidth=1.6)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{s}: {d['syscall'].iloc[0] if not d.empty else ''}()", fontsize=10)
        ax.set_xlabel("latency (ns, log2 buckets)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of calls")
    axes[0][-1].legend(title="message size", fontsize=8)
    fig.suptitle(f"Send syscall latency histograms (tracer, {transport}, {threads} thread(s), "
                 f"repeats summed)", fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "syscall_latency.png")


def zerocopy_fallback(df, out_dir):
    d = df[df["strategy"].isin(ZEROCOPY_STRATEGIES)].copy()
    if d.empty:
        return None
    d["zc bytes (% of sent)"] = 100 * d["zc_tx_bytes"] / d["bytes_sent"]
    d["fallback-copied bytes (% of sent)"] = 100 * d["fallback_copy_bytes"] / d["bytes_sent"]
    d["COPIED completions (% of completions)"] = 100 * d["zc_copied"] / d["zc_completions"]
    metrics = ["zc bytes (% of sent)", "fallback-copied bytes (% of sent)",
               "COPIED completions (% of completions)"]
    d["where"] = d["transport"] + ", " + d["strategy"]
    long = d.melt(id_vars=["where", "transport", "msg_size", "threads", "size"],
                  value_vars=metrics, var_name="evidence",
                  value_name="percent").dropna(subset=["percent"])
    if long.empty:
        return None
    sizes = [format_size(s) for s in sorted(long["msg_size"].unique())]
    wheres = sorted(long["where"].unique(), key=lambda w: (
        _order(long["transport"], TRANSPORTS).index(w.split(", ")[0]), w))
    g = sns.catplot(data=long, x="size", order=sizes, y="percent", hue="evidence",
                    hue_order=metrics, col="where", col_order=wheres, col_wrap=min(3, len(wheres)),
                    kind="bar",
                    estimator="median", errorbar=MINMAX, height=3.4, aspect=1.2,
                    palette=["#2ca02c", "#d62728", "#7f7f7f"])
    for ax in g.axes.flat:
        ax.set_ylim(0, 110)
        ax.axhline(100, color="black", linewidth=0.6, linestyle=":")
        ax.grid(axis="y", alpha=0.3)
    g.set_axis_labels("message size", "% (median, min–max)")
    g.set_titles(col_template="{col_name}")
    g.figure.suptitle("Zero-copy fallback evidence: pages pinned for zero-copy, then copied "
                      "(at local delivery; never on forward, where nothing receives)", y=1.04)
    return _save(g.figure, out_dir, "zerocopy_fallback.png")


def threads_scaling(df, out_dir, traced_df=None):
    """Throughput by threads from df (the answer runs), context switches from traced_df (the
    traced runs: their perf counters count them)."""
    if df["threads"].nunique() < 2:
        return None
    size = int(df["msg_size"].max())
    d = df[df["msg_size"] == size].copy()
    t = (traced_df if traced_df is not None else df)
    t = t[t["msg_size"] == size].copy()
    t["cs_per_mib"] = t["context_switches"] / (t["bytes_sent"] / 2 ** 20)
    d["cs_per_mib"] = float("nan")
    d = pd.concat([d, t[["strategy", "threads", "transport", "cs_per_mib"]]], ignore_index=True)
    threads = sorted(d["threads"].unique())
    has_cs = d["cs_per_mib"].notna().any()
    fig, axes = plt.subplots(1, 2 if has_cs else 1, figsize=(10 if has_cs else 5.5, 3.4),
                             squeeze=False)
    strategies = _order(d["strategy"], STRATEGIES)
    sns.lineplot(data=d, x="threads", y="throughput_gbps", hue="strategy",
                 hue_order=strategies, palette=PALETTE, style="transport", estimator="median",
                 errorbar=MINMAX, marker="o", ax=axes[0][0], legend=not has_cs)
    axes[0][0].set_ylabel("throughput (Gbit/s)")
    axes[0][0].set_ylim(bottom=0)
    if has_cs:
        sns.lineplot(data=d, x="threads", y="cs_per_mib", hue="strategy",
                     hue_order=strategies, palette=PALETTE, style="transport",
                     estimator="median", errorbar=MINMAX, marker="o", ax=axes[0][1])
        axes[0][1].set_ylabel("context switches per MiB sent")
    sns.move_legend(axes[0][-1], "upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    fig.suptitle(f"Threads vs throughput and context switches at {format_size(size)}",
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "threads_scaling.png")


def tracer_cost(df, out_dir):
    """What the workloads kept with the tracer attached, per configuration."""
    d = df[df["tracer_kept"].notna()].copy()
    if d.empty:
        return None
    sizes = sorted(d["msg_size"].unique())
    g = sns.relplot(data=d, x="msg_size", y="tracer_kept", hue="strategy",
                    hue_order=_order(d["strategy"], STRATEGIES), palette=PALETTE,
                    col="threads", row="transport" if d["transport"].nunique() > 1 else None,
                    kind="line", estimator="median", errorbar=MINMAX, marker="o", height=3.0,
                    aspect=1.1)
    for ax in g.axes.flat:
        _size_axis(ax, sizes)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    g.set_axis_labels("message size (bytes)", "traced / untraced throughput")
    g.figure.suptitle("What the tracer cost: throughput kept with it attached, paired within "
                      "rounds (median, min–max)", y=1.04)
    return _save(g.figure, out_dir, "tracer_cost.png")


PLOTS = ("throughput_vs_size", "latency_vs_threads", "cycles_per_byte", "cache_misses",
         "syscall_latency", "zerocopy_fallback", "threads_scaling", "tracer_cost")


def _draw(name, answers, traced, all_runs, frames, out_dir, why_untraced=None):
    """One plot from the pass its figures come from (docs/DESIGN.md, "Two passes")."""
    df_answers, df_traced, df_all = frames
    fn = globals()[name]
    if name in ("throughput_vs_size", "latency_vs_threads"):
        return fn(df_answers, out_dir)
    if name == "threads_scaling":
        return fn(df_answers, out_dir, df_traced)
    if name == "tracer_cost":
        return fn(df_all, out_dir)
    if name == "cache_misses":
        return fn(df_traced, out_dir, traced, why_untraced)
    if name == "syscall_latency":
        return fn(traced, out_dir) if traced else None
    return fn(df_traced, out_dir) if df_traced is not None else None


def make_all(runs, out_dir, why_untraced=None):
    """Write every plot; returns {plot name: file name or None} and a list of errors.
    why_untraced: why no traced run succeeded, in a few words (report/untraced.py,
    short_why), for the plot it empties."""
    os.makedirs(out_dir, exist_ok=True)
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.85)
    answers, traced, _ = passes.split(runs)
    frames = (_frame(answers), _frame(traced), _frame(runs))
    written, errors = {}, []
    if frames[0] is None:
        return {p: None for p in PLOTS}, ["no successful run to plot"]
    for name in PLOTS:
        try:
            written[name] = _draw(name, answers, traced, runs, frames, out_dir, why_untraced)
        except Exception as e:   # one bad plot must not cost the report
            plt.close("all")
            written[name] = None
            errors.append(f"{name}: {type(e).__name__}: {e}")
    return written, errors
