"""Interleaved rounds and their statistics, in one place for every bench section.

Runs on this machine differ by up to 2x from one to the next (docs/DESIGN.md, measurement hygiene),
so a comparison is never one run against another: every round runs each variant once, the
order flips every other round (A B C, C B A, ...) so slow drift hits all variants alike, and
results are compared within a round (paired ratios) and summarized as median, min and max.
The machine's own speed changes too, with the host's other tenants (bench/NOTES.md, "The
machine's own speed"): a probe measures it before and after every run, and a pair whose runs
saw different speeds is left out of the ratios, and counted as left out.
"""
import math
import statistics


# A pair is compared only where the machine kept one speed around both of its runs: every
# probe taken before and after the two runs within this share of the fastest (per CPU).
STEADY_TOLERANCE = 0.10


class Rounds(dict):
    """{variant: [result per round]}, and the machine's speed around each run where a probe
    measured it (speeds[variant][round] = (before, after), each a tuple of per-CPU rates)."""

    def __init__(self, names):
        super().__init__({name: [] for name in names})
        self.speeds = {name: [] for name in names}

    def steady(self, a, b):
        """Per round, whether the machine ran at one speed around a's run and b's (True
        everywhere when no probe ran)."""
        sa, sb = self.speeds.get(a, []), self.speeds.get(b, [])
        return [steady_speeds([*x, *y]) for x, y in zip(sa, sb)] or [True] * len(self[a])


def steady_speeds(probes):
    """Whether per-CPU rates measured at several moments all lie within STEADY_TOLERANCE of
    the fastest, CPU by CPU; None (no probe) counts as steady."""
    probes = [p for p in probes if p is not None]
    for cpu_rates in zip(*probes):
        if min(cpu_rates) < (1 - STEADY_TOLERANCE) * max(cpu_rates):
            return False
    return True


def run_interleaved(rounds, variants, log=None, probe=None):
    """variants: [(name, fn)], fn() -> result (any object). Returns Rounds: {name: [result per
    round]}. probe() -> the machine's speed (a tuple of per-CPU rates), taken before every
    run and after each round's last, for Rounds.steady."""
    results = Rounds([name for name, _ in variants])
    for r in range(rounds):
        order = variants if r % 2 == 0 else list(reversed(variants))
        before = probe() if probe else None
        for name, fn in order:
            res = fn()
            after = probe() if probe else None
            results[name].append(res)
            results.speeds[name].append((before, after))
            before = after
            if log:
                log(f"round {r + 1}/{rounds} {name}: {res}"
                    + (f" (machine speed {_speed_str(after)})" if after else ""))
    return results


def _speed_str(speed):
    return "/".join(f"{x:.0f}" for x in speed)


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


# the fewest values whose min to max holds the median with INTERVAL_LEVEL (1 - 2/2^n): a
# verdict needs at least as many
MIN_VERDICT_VALUES = 5


def classify(s, target):
    """'met' when the median's interval is at or above target, 'missed' when it is below,
    'undecided' when it straddles the target, or when fewer than MIN_VERDICT_VALUES were
    measured (the unsteady pairs left out, or a quick look's few rounds)."""
    lo = s.get("lo", s.get("min"))
    hi = s.get("hi", s.get("max"))
    if (s.get("median") is None or lo is None
            or s.get("n", MIN_VERDICT_VALUES) < MIN_VERDICT_VALUES):
        return "undecided"
    if lo >= target:
        return "met"
    return "missed" if hi < target else "undecided"


def paired_ratios(ours, ref, keep=None):
    """ours[i] / ref[i] for every round where both are known, ref is non-zero and keep[i]
    (Rounds.steady) is true."""
    keep = keep or [True] * len(ours)
    return [a / b for a, b, k in zip(ours, ref, keep) if k and a is not None and b]


def ratio_summary(ours, ref, keep=None):
    """summary() of the paired ratios of the rounds keep allows, with left_out: how many
    pairs an unsteady machine took out."""
    s = summary(paired_ratios(ours, ref, keep))
    s["left_out"] = len(paired_ratios(ours, ref)) - s["n"]
    return s


def fmt(s, digits=2, unit=""):
    """'median (min .. max, n=N)' of a summary()."""
    if not s["n"]:
        return f"n/a ({s['left_out']} unsteady left out)" if s.get("left_out") else "n/a"
    f = f"{{:.{digits}f}}"
    out = s.get("left_out") and f", {s['left_out']} unsteady left out"
    return (f"{f.format(s['median'])}{unit} (min {f.format(s['min'])}, max {f.format(s['max'])}, "
            f"n={s['n']}{out or ''})")


def column(runs, key):
    """Each run's value of key (None where it has none), in round order."""
    return [r.get(key) for r in runs]


def ratio(res, a, b, key="recv_gbps"):
    """summary of the paired ratios a/b of a Rounds within each round where the machine kept
    its speed (Rounds.steady)."""
    return ratio_summary(column(res[a], key), column(res[b], key), res.steady(a, b))


def median_index(values):
    """Index of the element nearest the median (for picking a representative run)."""
    vals = [(v, i) for i, v in enumerate(values) if v is not None]
    if not vals:
        return None
    vals.sort()
    return vals[(len(vals) - 1) // 2][1]
