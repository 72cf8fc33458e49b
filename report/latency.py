"""How the tracer timed the syscalls whose latency a report shows: every call, or the first of
every N of each class per thread (`latency.sampled_1_in`, docs/DESIGN.md), said in one place
for the sweep's report and trace's."""


def sampled_1_in(latencies):
    """The set of N the traces' `latency` objects timed 1 call in (1: every call); traces
    without the field (written before it) or untimed ones are left out."""
    out = set()
    for lat in latencies:
        if isinstance(lat, dict) and lat.get("timed"):
            out.add(int(lat.get("sampled_1_in") or 1))
    return out


def sampling_sentence(latencies):
    """The report's sentence on how calls were timed, or None when nothing was timed or every
    call was."""
    ns = sorted(sampled_1_in(latencies) - {1})
    if not ns:
        return None
    every = " or ".join(str(n) for n in ns)
    return (f"Syscall latency is sampled: each thread timed the first of every {every} calls "
            "of each syscall class (`--latency-sample`; 1 times every call). Calls, bytes and "
            "errors count every call; the histograms, means and percentiles are the timed "
            "calls'.")
