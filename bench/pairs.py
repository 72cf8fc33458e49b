"""Interleaved rounds and their statistics, in one place for every bench section.

Runs on this machine differ by up to 2x from one to the next (DESIGN.md, measurement hygiene),
so a comparison is never one run against another: every round runs each variant once, the
order flips every other round (A B C, C B A, ...) so slow drift hits all variants alike, and
results are compared within a round (paired ratios) and summarized as median, min and max.
"""
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


def summary(values):
    """{median, min, max, n} of a list of numbers (None values are left out)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


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
