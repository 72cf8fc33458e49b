"""The agent's verdict metric: whether MSG_ZEROCOPY would pay off, per cgroup and command,
by `trace`'s rules (analysis/verdict.py) on the tracer's latest snapshot (every flow since the
agent started).

The agent samples no stacks and has no baseline, so the rules that need them say
"undecided": what it can tell is what needs neither (sends nothing, delivered locally,
already in use, copies nothing from user space). A cgroup and command whose flows got
different verdicts has a series for each."""
from analysis import verdict

ALTERNATIVE = "zero-copy"       # MSG_ZEROCOPY, as `trace` names it


def zerocopy_verdicts(trace, whois):
    """{(cgroup, comm, verdict)} of the flows that carry at least 1% of the bytes."""
    out = set()
    for v in verdict.verdicts(trace, {}, baseline=None):
        f = v["flow"]
        pid = f.get("pid")
        if pid is None:
            continue
        cgroup = whois.of(int(pid))["cgroup"]
        out.add((str(cgroup), f.get("comm") or "", v["verdicts"][ALTERNATIVE][0]))
    return out
