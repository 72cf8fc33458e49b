"""Two sweeps compared configuration by configuration (`netio-trace diff A B`).

Throughput comes from each sweep's answer runs (the untraced pass, analysis/passes.py). Where
both sweeps ran the same rounds of a configuration, B/A is paired round by round; otherwise it
is B's median over A's, with both ranges. A change is beyond the noise when every paired ratio
lies on the same side of 1 (unpaired: when the two ranges do not overlap). A configuration
regressed when B/A is below 1 - threshold and the change is beyond the noise. A category
moved when the 95% intervals of its share, pooled over each sweep's traced runs, are disjoint.
"""
import json
import os

from analysis import attribution, passes, results, stats

CONFIG = ("transport", "threads", "msg_size", "strategy")


class DiffError(ValueError):
    """A directory that is not a results directory: one line, exit 2."""


def load(path):
    runs_path = os.path.join(path, results.RUNS)
    if not os.path.isdir(path):
        raise DiffError(f"{path}: no such directory")
    if not os.path.isfile(runs_path):
        raise DiffError(f"{path}: no runs.jsonl there (not a netio-trace results directory)")
    runs = results.read_runs(runs_path)
    if not any(results.ok(r) for r in runs):
        raise DiffError(f"{path}: no successful run in runs.jsonl")
    return runs


def differing_parameters(a_dir, b_dir):
    """[(parameter, A's value, B's value)] where the two sweeps' sweep.json differ (a sweep
    without one: nothing to say)."""
    def params(d):
        try:
            with open(os.path.join(d, "sweep.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    pa, pb = params(a_dir), params(b_dir)
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return []
    return [(k, pa.get(k), pb.get(k)) for k in sorted(set(pa) | set(pb))
            if pa.get(k) != pb.get(k)]


def _by_config(runs):
    out = {}
    for r in runs:
        out.setdefault(tuple(r[k] for k in CONFIG), []).append(r)
    return out


def _throughput(rs):
    return {r["repeat"]: r["throughput_gbps"] for r in rs
            if isinstance(r.get("throughput_gbps"), (int, float))}


def compare_throughput(a_runs, b_runs):
    """(ratio spread, paired?, beyond the noise?, direction) of B against A."""
    ta, tb = _throughput(a_runs), _throughput(b_runs)
    if not ta or not tb:
        return None
    if set(ta) == set(tb) and all(ta.values()):
        ratios = [tb[k] / ta[k] for k in sorted(ta)]
        beyond = max(ratios) < 1 or min(ratios) > 1
        return stats.spread(ratios), True, beyond
    sa, sb = stats.spread(ta.values()), stats.spread(tb.values())
    ratio = {"median": sb["median"] / sa["median"] if sa["median"] else None,
             "min": sb["min"] / sa["max"] if sa["max"] else None,
             "max": sb["max"] / sa["min"] if sa["min"] else None, "n": min(sa["n"], sb["n"])}
    beyond = sb["max"] < sa["min"] or sb["min"] > sa["max"]
    return ratio, False, beyond


def _pooled_counts(traced_runs):
    counts, total = {}, 0
    for r in traced_runs:
        a = r.get("attribution") or {}
        for c, n in (a.get("samples_by_category") or {}).items():
            counts[c] = counts.get(c, 0) + n
            total += n
    return counts, total


def moved_categories(a_traced, b_traced):
    """[(category, share in A, share in B)] whose pooled 95% intervals are disjoint."""
    ca, na = _pooled_counts(a_traced)
    cb, nb = _pooled_counts(b_traced)
    if not na or not nb:
        return []
    out = []
    for c in sorted(set(ca) | set(cb)):
        ia = attribution.share_interval(ca.get(c, 0), na)
        ib = attribution.share_interval(cb.get(c, 0), nb)
        if ia[1] < ib[0] or ib[1] < ia[0]:
            out.append((c, ca.get(c, 0) / na, cb.get(c, 0) / nb))
    return out


def compare(a_all, b_all, threshold=0.05):
    """The comparison: {"rows": [...], "only_a": [...], "only_b": [...], "regressed": [...],
    "answers_traced": (a?, b?)}. Each row: config, ratio, paired, beyond_noise, verdict,
    moved categories."""
    a_ans, a_tr, a_traced = passes.split(a_all)
    b_ans, b_tr, b_traced = passes.split(b_all)
    ga, gb = _by_config(a_ans), _by_config(b_ans)
    ta, tb = _by_config(a_tr), _by_config(b_tr)
    rows = []
    for cfg in sorted(set(ga) & set(gb), key=lambda k: tuple(str(x) for x in k)):
        cmp = compare_throughput(ga[cfg], gb[cfg])
        if cmp is None:
            continue
        ratio, paired, beyond = cmp
        med = ratio["median"]
        if med is not None and beyond and med < 1 - threshold:
            verdict = "regressed"
        elif med is not None and beyond and med > 1 + threshold:
            verdict = "improved"
        else:
            verdict = "same" if not beyond else "changed within the threshold"
        rows.append({"config": dict(zip(CONFIG, cfg)), "ratio": ratio, "paired": paired,
                     "beyond_noise": beyond, "verdict": verdict,
                     "moved": moved_categories(ta.get(cfg, []), tb.get(cfg, []))})
    return {"rows": rows, "only_a": sorted(set(ga) - set(gb), key=str),
            "only_b": sorted(set(gb) - set(ga), key=str),
            "regressed": [r for r in rows if r["verdict"] == "regressed"],
            "answers_traced": (a_traced, b_traced), "threshold": threshold}
