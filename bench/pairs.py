"""Interleaved rounds and their statistics, in one place for every bench section.

Runs on this machine differ by up to 2x from one to the next (DESIGN.md, measurement hygiene),
so a comparison is never one run against another: every round runs each variant once, the
order flips every other round (A B C, C B A, ...) so slow drift hits all variants alike, and
results are compared within a round (paired ratios) and summarized as median, min and max.
"""
import math
import statistics


def run_interleaved(rounds, variants, log=None):
    """variants: [(name, fn)], fn() -> result (any object). Returns {name: [result per round]}."""
    results = {name: [] for name, _ in variants}
    for r in range(rounds):
        order = variants if r % 2 == 0 else list(reversed(variants))
        for name, fn in order:
            res = fn()
            results[name].append(res)
            if log:
                log(f"round {r + 1}/{rounds} {name}: {res}")
    return results


# how sure an interval of the median must be for a verdict (median_interval)
INTERVAL_LEVEL = 0.90


def summary(values):
    """{median, min, max, n, lo, hi} of a list of numbers (None values are left out): lo and
    hi bound the median (median_interval)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0, "lo": None, "hi": None}
    lo, hi = median_interval(vals)
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "lo": lo, "hi": hi}


def median_interval(vals, level=INTERVAL_LEVEL):
    """(lo, hi): the k-th smallest and k-th largest value, with the largest k for which the
    median lies between them with probability >= level, whatever the distribution (the
    chance is 1 - 2 P(Binomial(n, 1/2) < k)). Min and max when no k reaches the level (fewer
    than 5 values); with 5 to 8 values that is min and max too."""
    xs = sorted(vals)
    n, best, below = len(xs), 1, 0.0
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2 ** n      # P(X < k)
        if 1 - 2 * below < level:
            break
        best = k
    return xs[best - 1], xs[n - best]


def classify(s, target):
    """'met' when the median's interval is at or above target, 'missed' when it is below,
    'undecided' when it straddles the target (or nothing was measured)."""
    lo = s.get("lo", s.get("min"))
    hi = s.get("hi", s.get("max"))
    if s.get("median") is None or lo is None:
        return "undecided"
    if lo >= target:
        return "met"
    return "missed" if hi < target else "undecided"


def paired_ratios(ours, ref):
    """ours[i] / ref[i] for every round where both are known and ref is non-zero."""
    return [a / b for a, b in zip(ours, ref) if a is not None and b]


def fmt(s, digits=2, unit=""):
    """'median (min .. max, n=N)' of a summary()."""
    if not s["n"]:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(s['median'])}{unit} (min {f.format(s['min'])}, max {f.format(s['max'])}, "
            f"n={s['n']})")
