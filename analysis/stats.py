"""Statistics over repeats (median with min and max), paired ratios between strategies that ran
next to each other, and crossover detection along message size."""
import math
import statistics


def spread(values):
    """{median, min, max, n} of the numbers in values (None and NaN left out); None if empty."""
    xs = [float(v) for v in values
          if v is not None and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def group_spread(runs, value, by=("strategy", "msg_size", "threads", "transport")):
    """{key tuple: spread} of value(run) over the runs that share the `by` fields."""
    groups = {}
    for r in runs:
        groups.setdefault(tuple(r[b] for b in by), []).append(value(r))
    out = {}
    for k, vs in groups.items():
        s = spread(vs)
        if s is not None:
            out[k] = s
    return out


def paired_ratios(runs, a, b, value, size, threads, transport):
    """value(b)/value(a) for every repeat where both strategies ran (same round: next to each
    other in time, so the machine's drift cancels)."""
    by_rep = {}
    for r in runs:
        if r["msg_size"] == size and r["threads"] == threads and r["transport"] == transport \
                and r["strategy"] in (a, b):
            by_rep.setdefault(r["repeat"], {})[r["strategy"]] = value(r)
    out = []
    for rep in sorted(by_rep):
        va, vb = by_rep[rep].get(a), by_rep[rep].get(b)
        if va and vb is not None and va > 0:
            out.append(vb / va)
    return out


def crossover(sizes, a, b):
    """Where does b overtake a along sizes?

    sizes: ascending message sizes; a, b: the two strategies' values at those sizes (medians;
    None where missing). Returns a dict:
      kind: "crosses"     b is below a at smaller sizes and at or above from some size on
            "always"      b is at or above a at every size of the range
            "never"       b stays below a within the range ("not within the range")
            "unclear"     b goes above and below again (no single crossover)
            "no-data"
      size:    the first size from which b stays ahead (crosses), else None
      between: (last size where b is behind, first size where it stays ahead) for "crosses"
      estimate: log-interpolated size where b/a crosses 1 (crosses only)
    """
    pts = [(s, x, y) for s, x, y in zip(sizes, a, b) if x is not None and y is not None]
    if not pts:
        return {"kind": "no-data", "size": None, "between": None, "estimate": None}
    ahead = [y >= x for _, x, y in pts]
    if all(ahead):
        return {"kind": "always", "size": pts[0][0], "between": None, "estimate": None}
    if not any(ahead):
        return {"kind": "never", "size": None, "between": None, "estimate": None}
    # first index from which b stays ahead until the end
    i = len(ahead)
    while i > 0 and ahead[i - 1]:
        i -= 1
    if i == len(ahead):
        # ahead somewhere but behind at the largest size
        return {"kind": "unclear", "size": None, "between": None, "estimate": None}
    if not all(not h for h in ahead[:i]):
        kind = "unclear"
    else:
        kind = "crosses"
    s0, x0, y0 = pts[i - 1]
    s1, x1, y1 = pts[i]
    est = None
    if x0 > 0 and x1 > 0 and y0 > 0 and y1 > 0:
        r0, r1 = math.log(y0 / x0), math.log(y1 / x1)
        if r1 != r0:
            t = -r0 / (r1 - r0)
            est = math.exp(math.log(s0) + t * (math.log(s1) - math.log(s0)))
    return {"kind": kind, "size": s1, "between": (s0, s1), "estimate": est}


def ranges_overlap(sa, sb):
    """Do two spreads' [min, max] overlap (then a difference of medians is within the noise)?"""
    if not sa or not sb:
        return True
    return not (sa["max"] < sb["min"] or sb["max"] < sa["min"])


def fmt_spread(s, fmt="{:.2f}", unit=""):
    """'12.3 (10.1–14.0)' ; 'n/a' for None."""
    if not s:
        return "n/a"
    if s["n"] == 1 or s["min"] == s["max"]:
        return fmt.format(s["median"]) + unit
    return f"{fmt.format(s['median'])}{unit} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"
