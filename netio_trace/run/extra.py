"""Extra rounds for comparisons the noise left undecided.

After the scheduled rounds, a comparison the report draws (one strategy against the next at one
configuration) whose paired ratios straddle 1 gets more interleaved rounds of its group, in the
answering pass only, while the sweep's time budget allows. What is still undecided after them
the report calls undecided, with the ratios.
"""
import statistics
import time

from analysis import passes, results
from analysis.contract import COMPARED_PAIRS
from netio_trace.run.params import Slot

MAX_EXTRA_ROUNDS = 3
# The budget of the extra rounds: this share of the time the scheduled rounds took (the default
# sweep then stays inside its 5 minutes, report included).
EXTRA_SHARE = 0.2
RUN_OVERHEAD_S = 0.2      # namespaces, gate, snapshot: a run's wall time beyond its duration


def compared_pairs(strategies):
    """The comparisons the report draws (the contract's COMPARED_PAIRS) between strategies of
    this sweep."""
    return [(a, b) for a, b in COMPARED_PAIRS if a in strategies and b in strategies]


def undecided_groups(params, answer_runs):
    """The groups (lists of Config) with at least one undecided comparison."""
    bad = {(tr, th, size) for tr, th, size, _a, _b, ratios
           in passes.comparisons(answer_runs, compared_pairs(params.strategies))
           if passes.undecided(ratios)}
    return [g for g in params.groups()
            if (g[0].transport, g[0].threads, g[0].msg_size) in bad]


def _wall_per_run(runs, params):
    walls = [r["wall_s"] for r in runs if isinstance(r.get("wall_s"), (int, float))
             and r["wall_s"] > 0]
    return statistics.median(walls) if walls else params.duration + RUN_OVERHEAD_S


def _fit(groups, per_run, left_s):
    """The groups whose runs fit in left_s, in order."""
    out = []
    for g in groups:
        if (sum(len(x) for x in out) + len(g)) * per_run > left_s:
            break
        out.append(g)
    return out


def run_extra_rounds(sweep, prog, t0):
    """Run extra rounds of the undecided groups, for at most EXTRA_SHARE of the time the
    scheduled rounds took since t0; returns how many runs were added."""
    params = sweep.params
    answer_traced = "untraced" not in params.passes
    added = 0
    t_extra = time.monotonic()
    budget = (t_extra - t0) * EXTRA_SHARE
    for _ in range(MAX_EXTRA_ROUNDS):
        runs = results.read_runs(sweep.runs_path)
        answers, _traced, _ = passes.split(runs)
        groups = undecided_groups(params, passes.copy_receive(answers))
        left = budget - (time.monotonic() - t_extra)
        groups = _fit(groups, _wall_per_run(runs, params), left)
        if not groups:
            break
        rep = max(r["repeat"] for r in runs) + 1
        slots = [Slot(rep, c, answer_traced) for g in groups for c in g]
        prog.extend(len(slots))
        for slot in slots:
            sweep.run(slot, prog)
        added += len(slots)
    return added
