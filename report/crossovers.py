"""The report's sentence on a crossover decided from paired ratios (analysis/crossover.py): it
says "overtakes" only where every size on each side of the crossover is decided, and
"undecided" wherever the paired ratios straddle 1."""
from analysis.sizes import format_size


def _sizes(sizes):
    return ", ".join(format_size(s) for s in sizes)


def _by_verdict(crossing, verdict):
    return [s for s, v, _ in crossing["verdicts"] if v == verdict]


def text(a, b, crossing, where):
    """One bold sentence on where b overtakes a (crossing: analysis.crossover.decided)."""
    kind = crossing["kind"]
    vs = crossing["verdicts"]
    if kind == "no-data":
        return f"{where}: not enough data to compare {a} and {b}."
    lo, hi = format_size(vs[0][0]), format_size(vs[-1][0])
    if kind == "always":
        return (f"**{where}: {b} is ahead of {a} at every size from {lo} to {hi}**, in every "
                f"round (no crossover within the range).")
    if kind == "never":
        return (f"**{where}: {b} does not overtake {a} within the range {lo}–{hi}**: behind "
                f"in every round at every size.")
    if kind == "crosses":
        s0, s1 = crossing["between"]
        t = (f"**{where}: {b} overtakes {a} between {format_size(s0)} and "
             f"{format_size(s1)}**: behind in every round up to {format_size(s0)}, ahead in "
             f"every round from {format_size(s1)} to {hi}.")
        if crossing["undecided"]:
            t += f" Undecided at {_sizes(crossing['undecided'])}, between the two."
        return t
    ahead, behind = _by_verdict(crossing, "ahead"), _by_verdict(crossing, "behind")
    said = []
    if behind:
        said.append(f"behind in every round at {_sizes(behind)}")
    if ahead:
        said.append(f"ahead in every round at {_sizes(ahead)}")
    if kind == "unclear":
        return (f"**{where}: no single crossover of {b} over {a}**: " + "; ".join(said)
                + " (this machine's noise can flip close calls).")
    said.append(f"undecided at {_sizes(crossing['undecided'])}")
    return (f"**{where}: whether {b} overtakes {a} is undecided**: " + "; ".join(said)
            + ": the paired ratios straddle 1 where a crossover would be, so none is claimed.")
