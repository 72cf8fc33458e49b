"""Where one strategy overtakes another along message size, claimed only as far as the paired
ratios allow.

Each size gets the verdict of its paired ratios b/a (analysis/passes.py: "ahead" when every
ratio is at or above 1, "behind" when every one is below, else "undecided"). "b overtakes a
between s0 and s1" needs b decided behind at s0 and at every size below it, and decided ahead
at s1 and at every size above it; the sizes between s0 and s1 may be undecided (the crossover
is somewhere there). Anything else that is not decided at every size is "undecided": a
crossover drawn through the medians of straddling ratios would claim more than the data
holds.
"""
from analysis import passes, stats


def size_verdicts(sizes, ratio_lists):
    """[(size, verdict, spread of the ratios)] for the sizes with ratios; verdict from
    passes.verdict."""
    return [(s, passes.verdict(rs), stats.spread(rs)) for s, rs in zip(sizes, ratio_lists)
            if rs]


def decided(sizes, ratio_lists):
    """The crossover of b over a from the paired ratios b/a at each size (ascending sizes).

    Returns {kind, between, undecided, verdicts}: kind is
      "always"     ahead, decided, at every size
      "never"      behind, decided, at every size
      "crosses"    behind (decided) up to between[0], ahead (decided) from between[1] on;
                   `undecided` lists the sizes between the two
      "undecided"  no such claim holds: some size is undecided and the rest do not bracket it
      "unclear"    decided both ways, but not behind-then-ahead (b ahead, then behind again)
      "no-data"
    verdicts: size_verdicts(sizes, ratio_lists).
    """
    vs = size_verdicts(sizes, ratio_lists)
    out = {"kind": "no-data", "between": None, "undecided": [], "verdicts": vs}
    if not vs:
        return out
    kinds = [v for _, v, _ in vs]
    if all(k == "ahead" for k in kinds):
        out["kind"] = "always"
    elif all(k == "behind" for k in kinds):
        out["kind"] = "never"
    else:
        out.update(_bracket(vs, kinds))
    return out


def _bracket(vs, kinds):
    """kind "crosses" with its bracket where behind-then-ahead holds, else "undecided" or
    "unclear"."""
    behind = [i for i, k in enumerate(kinds) if k == "behind"]
    ahead = [i for i, k in enumerate(kinds) if k == "ahead"]
    if behind and ahead:
        last_behind, first_ahead = behind[-1], ahead[0]
        tail_ahead = all(k == "ahead" for k in kinds[first_ahead:])
        head_behind = all(k == "behind" for k in kinds[:last_behind + 1])
        if first_ahead > last_behind and tail_ahead and head_behind:
            return {"kind": "crosses", "between": (vs[last_behind][0], vs[first_ahead][0]),
                    "undecided": [vs[i][0] for i in range(last_behind + 1, first_ahead)]}
        if "undecided" not in kinds:
            return {"kind": "unclear"}
    return {"kind": "undecided", "undecided": [s for s, k, _ in vs if k == "undecided"]}


def at_size(crossing, size):
    """What the baseline says at one message size: "ahead", "behind" or "undecided", with the
    baseline sizes it stands on. Below the smallest size measured the smallest decides, and
    above the largest the largest; between two sizes both must agree.

    Returns (verdict, [(size, verdict, spread)] of the sizes used)."""
    vs = crossing["verdicts"]
    if not vs:
        return "undecided", []
    lower = [v for v in vs if v[0] <= size]
    upper = [v for v in vs if v[0] >= size]
    used = [lower[-1]] if lower else []
    if upper and (not used or upper[0][0] != used[0][0]):
        used.append(upper[0])
    kinds = {v[1] for v in used}
    return (kinds.pop() if len(kinds) == 1 else "undecided"), used
