"""The baseline of `trace --report`'s verdicts: a `run --preset zerocopy` results directory,
read for where each zero-copy strategy overtakes the copy it replaces on the forward path
(nothing receives there, so nothing copies zero-copy pages back), decided from the paired
ratios of the answer runs (analysis/crossover.py)."""
import os

from analysis import crossover, passes, results, stats
from analysis.contract import ZEROCOPY_PAIRS

TRANSPORT = "forward"


class BaselineError(ValueError):
    """The directory cannot serve as a baseline: one line for the user."""


def load(path):
    """{dir, machine, crossings: {zero-copy strategy: {copy, transport, threads, crossing}}}
    from a results directory; BaselineError when it cannot be read or holds no forward
    comparison of a zero-copy strategy with its copy."""
    runs_path = os.path.join(path, results.RUNS)
    if not os.path.isdir(path):
        raise BaselineError(f"--baseline {path}: no such directory")
    if not os.path.isfile(runs_path):
        raise BaselineError(f"--baseline {path}: no {results.RUNS} there (not a netio-trace "
                            f"results directory)")
    try:
        runs = results.read_runs(runs_path)
    except OSError as e:
        raise BaselineError(f"--baseline {path}: cannot read {results.RUNS} "
                            f"({e.strerror or e})") from None
    except ValueError as e:
        raise BaselineError(f"--baseline {path}: {results.RUNS} is damaged ({e})") from None
    answers, _, _ = passes.split(runs)
    crossings = {}
    for copy, zcs in ZEROCOPY_PAIRS:
        c = _crossing(answers, copy, zcs)
        if c:
            crossings[zcs] = c
    if not crossings:
        raise BaselineError(f"--baseline {path}: no forward runs of a zero-copy strategy beside "
                            f"its copy (make one with `netio-trace run --preset zerocopy`)")
    machine = next((r["machine"] for r in runs if isinstance(r.get("machine"), dict)), {})
    return {"dir": os.path.abspath(path), "machine": machine, "crossings": crossings,
            "runs": len(runs)}


def _crossing(answers, copy, zcs):
    sub = [r for r in answers if r["transport"] == TRANSPORT]
    if not {copy, zcs} <= {r["strategy"] for r in sub}:
        return None
    th = min(r["threads"] for r in sub)
    sizes = sorted({r["msg_size"] for r in sub if r["threads"] == th})
    ratios = [stats.paired_ratios(sub, copy, zcs, lambda r: r.get("throughput_gbps"), s, th,
                                  TRANSPORT) for s in sizes]
    if not any(ratios):
        return None
    return {"copy": copy, "transport": TRANSPORT, "threads": th,
            "crossing": crossover.decided(sizes, ratios)}


def foreign(baseline, here):
    """Why the baseline was measured on another machine than `here` (a machine dict: hostname,
    cpu), or None when it is this one."""
    there = baseline.get("machine") or {}
    diff = [f"{k} {there.get(k)!r}, here {here.get(k)!r}" for k in ("hostname", "cpu")
            if there.get(k) != here.get(k)]
    return "; ".join(diff) or None


def kernel_note(baseline, here):
    """A note when the baseline ran on another kernel of this machine, else None."""
    k = (baseline.get("machine") or {}).get("kernel")
    if k and k != here.get("kernel"):
        return (f"the baseline ran on kernel {k}, this trace on {here.get('kernel')}: what "
                f"the kernel does with zero-copy pages may differ")
    return None
