"""The two passes of a sweep (docs/DESIGN.md, "Two passes"): which runs answer which
question, the tracer's cost per configuration, and the comparisons the noise cannot decide.

Throughput, latency, retransmits and every comparison between strategies come from the
untraced runs; copy bytes, attribution, histograms and flame graphs from the traced ones. A
sweep with no untraced run (--trace-only) answers from its traced runs, and says so.
"""
from analysis import record, stats
from analysis.contract import DEFAULT_ALIGN, DEFAULT_RECEIVE, align_of, receive_of

CONFIG = ("strategy", "msg_size", "threads", "transport")


def split(runs):
    """(answer runs, traced runs, answers_traced) of the ok runs: the answers are the untraced
    runs, or the traced ones where the sweep has no untraced run (answers_traced True)."""
    ok = [r for r in runs if record.ok(r)]
    traced = [r for r in ok if record.traced(r)]
    untraced = [r for r in ok if not record.traced(r)]
    if untraced:
        return untraced, traced, False
    return traced, traced, True


def asked(runs, sweep=None):
    """The passes the sweep asked for, a subset of ("untraced", "traced"): sweep.json's
    `passes` (its `trace` in files from before the two passes), else the passes its runs were
    recorded in (a run that failed is recorded in its pass too)."""
    if isinstance(sweep, dict):
        if isinstance(sweep.get("passes"), list):
            return {p for p in sweep["passes"] if p in ("untraced", "traced")}
        if "trace" in sweep:
            return {"traced" if sweep["trace"] else "untraced"}
    return {"traced" if record.traced(r) else "untraced" for r in runs}


def traced_failures(runs):
    """The traced pass's runs that did not succeed, in the order they were recorded."""
    return [r for r in runs if record.traced(r) and not record.ok(r)]


def _config(r):
    return tuple(r[k] for k in CONFIG)


def _pair_key(r):
    """A run's configuration with its receive strategy and field placement: what pairs a
    traced run with its untraced twin."""
    return _config(r) + (receive_of(r), align_of(r), r["repeat"])


def copy_receive(runs):
    """The runs whose receiver copies (recv()): every run recorded before there were receive strategies, and what the report's
    sections other than "Receive" compare strategies on. A strategy that also ran with its
    fields page-aligned (--align) is compared there as it runs by default (the Receive section
    shows the aligned one); one that ran aligned only is compared as it ran."""
    copy = [r for r in runs if receive_of(r) == DEFAULT_RECEIVE]
    unaligned = {r["strategy"] for r in copy if align_of(r) == DEFAULT_ALIGN}
    return [r for r in copy if align_of(r) == DEFAULT_ALIGN or r["strategy"] not in unaligned]


def kept_by_run(runs):
    """{key of a traced run: its throughput / the untraced run's of the same configuration and
    round}: what the tracer let the workload keep, paired within a round."""
    untraced = {_pair_key(r): r for r in runs if record.ok(r) and not record.traced(r)}
    out = {}
    for r in runs:
        if not (record.ok(r) and record.traced(r)):
            continue
        u = untraced.get(_pair_key(r))
        t_tr, t_un = r.get("throughput_gbps"), (u or {}).get("throughput_gbps")
        if t_tr is not None and t_un:
            out[record.key_of(r)] = t_tr / t_un
    return out


def tracer_cost(runs):
    """{configuration tuple (CONFIG order): spread of traced / untraced throughput, paired
    within rounds} for every configuration that ran in both passes."""
    ratios = {}
    by_key = kept_by_run(runs)
    for r in runs:
        k = record.key_of(r)
        if k in by_key:
            ratios.setdefault(_config(r), []).append(by_key[k])
    return {c: stats.spread(v) for c, v in ratios.items()}


def comparisons(runs, pairs):
    """[(transport, threads, size, a, b, [paired b/a ratios])] for each pair of strategies
    (a, b) in pairs at each configuration where both ran, from the given (answer) runs."""
    out = []
    keys = sorted({(r["transport"], r["threads"], r["msg_size"]) for r in runs})
    have = {(r["transport"], r["threads"], r["msg_size"], r["strategy"]) for r in runs}
    for tr, th, size in keys:
        for a, b in pairs:
            if (tr, th, size, a) in have and (tr, th, size, b) in have:
                rs = stats.paired_ratios(runs, a, b, lambda r: r.get("throughput_gbps"),
                                         size, th, tr)
                out.append((tr, th, size, a, b, rs))
    return out


def undecided(ratios):
    """Paired ratios that straddle 1: b is ahead in some rounds and behind in others."""
    return bool(ratios) and min(ratios) < 1 < max(ratios)


def verdict(ratios):
    """"ahead", "behind" or "undecided" for b against a, from the paired ratios b/a."""
    if not ratios or undecided(ratios):
        return "undecided"
    return "ahead" if min(ratios) >= 1 else "behind"
