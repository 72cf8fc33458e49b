"""The agent's verdict metric: whether MSG_ZEROCOPY would pay off, per cgroup and command,
by `trace`'s rules (analysis/verdict.py) on the tracer's latest snapshot (every flow since the
agent started).

The agent samples no stacks, so a verdict never rests on the copy's share of the CPU; with
`--baseline DIR` (a `run --preset zerocopy` results directory of this machine) a flow whose
traffic leaves the host gets "would help" or "below the crossover" at its send size, and
without one "undecided". The rest needs neither (sends nothing, delivered locally, already in
use, copies nothing from user space). A cgroup and command whose flows got different verdicts
has a series for each. The flows are those of the latest snapshot: the processes alive, and
those ended since the snapshot before."""
import sys

from analysis import baseline as baselinemod
from analysis import verdict
from netio_trace.run.params import UsageError
from netio_trace.system import machine

ALTERNATIVE = "zero-copy"       # MSG_ZEROCOPY, as `trace` names it


def load_baseline(path, prog):
    """--baseline DIR: the baseline; UsageError when it cannot be read; None, said in one
    line, when it was measured on another machine (its verdicts would not hold here)."""
    try:
        base = baselinemod.load(path)
    except baselinemod.BaselineError as e:
        raise UsageError(str(e)) from None
    m = machine.info()
    why = baselinemod.foreign(base, {k: m.get(k) for k in ("hostname", "cpu")})
    if why:
        print(f"{prog}: --baseline {path} was measured on another machine ({why}): going on "
              "without it", file=sys.stderr)
        return None
    return base


def zerocopy_verdicts(trace, whois, baseline=None):
    """{(cgroup, comm, verdict)} of the flows that carry at least 1% of the bytes."""
    out = set()
    for v in verdict.verdicts(trace, {}, baseline=baseline):
        f = v["flow"]
        pid = f.get("pid")
        if pid is None:
            continue
        cgroup = whois.of(int(pid))["cgroup"]
        out.add((str(cgroup), f.get("comm") or "", v["verdicts"][ALTERNATIVE][0]))
    return out
