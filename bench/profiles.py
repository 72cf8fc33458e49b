"""The profile of a missed target: the folded stacks of the traced run whose ratio is the
median one, kept in bench/profiles/ with its flame graph, and where its samples went.
Rebuilt by every `make bench` and not committed; markdown.profile_lines writes it up."""
import collections
import os
import shutil

from bench import config, pairs
from report import flamegraph


def _has(fr, *prefixes):
    return any(x.startswith(prefixes) for x in fr)


# What a traced run's samples show of the tracer's cost (first match wins). Samples are on
# cpu-clock here: time with interrupts off lands elsewhere (docs/DESIGN.md), so these are
# lower bounds.
COST_CLASSES = [
    ("in BPF run-time stats clock reads (`sched_clock` under `bpf_trace_run*`)",
     lambda fr: _has(fr, "bpf_trace_run") and any("sched_clock" in x for x in fr)),
    ("in our BPF programs and their dispatch (`bpf_trace_run*`, `bpf_prog_*`)",
     lambda fr: _has(fr, "bpf_trace_run", "bpf_prog_", "__bpf_prog", "__bpf_trace")),
    ("in the syscall tracepoint slow path outside BPF (`syscall_trace_enter`, "
     "`syscall_exit_work`)",
     lambda fr: _has(fr, "syscall_trace_enter", "syscall_exit_work")),
    ("in perf event scheduling (`perf_event_*sched*`, `ctx_sched_*`)",
     lambda fr: any("perf_event" in x and "sched" in x for x in fr) or _has(fr, "ctx_sched_")),
]

# what: the target missed; run: the traced run profiled; folded: its file in PROFILES; svg: its
# flame graph's file name, or None (then svg_error says why); classes: {COST_CLASSES name:
# samples}; leaves: {leaf frame: samples}
Profile = collections.namedtuple("Profile",
                                 "what ratio run folded svg svg_error total classes leaves")


def capture(name, res, key_traced, key_ref, what):
    """Profile of the traced run (res[key_traced]) with the median steady ratio to key_ref;
    its folded is None when there is no such run or it kept no stacks."""
    traced, ref = res[key_traced], res[key_ref]
    ratios = [t["recv_gbps"] / r["recv_gbps"] if r["recv_gbps"] and k else None
              for t, r, k in zip(traced, ref, res.steady(key_traced, key_ref))]
    i = pairs.median_index(ratios)
    if i is None or not traced[i].get("folded") or not os.path.exists(traced[i]["folded"]):
        return Profile(what, None, None, None, None, None, 0, {}, {})
    os.makedirs(config.PROFILES, exist_ok=True)
    folded = os.path.join(config.PROFILES, name + ".folded")
    shutil.copyfile(traced[i]["folded"], folded)
    svg = os.path.join(config.PROFILES, name + ".svg")
    svg_name, svg_error = os.path.basename(svg), None
    try:
        flamegraph.render(folded, svg, f"{what}: traced run (ratio {ratios[i]:.3f})",
                          subtitle="cpu-clock samples of the workloads and their softirqs")
    except Exception as e:   # the folded file stands without its picture
        svg_name, svg_error = None, e
    total, classes, leaves = _where_samples_went(folded)
    return Profile(what, ratios[i], traced[i], os.path.basename(folded), svg_name, svg_error,
                   total, classes, leaves)


def _where_samples_went(folded):
    """(samples, {cost class: samples}, {leaf frame: samples}) of a folded file."""
    total = 0
    frames, classes = {}, {name: 0 for name, _ in COST_CLASSES}
    with open(folded) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            try:
                n = int(float(n))
            except ValueError:
                continue
            total += n
            fr = stack.split(";")
            for cname, match in COST_CLASSES:
                if match(fr):
                    classes[cname] += n
                    break
            if fr:
                frames[fr[-1]] = frames.get(fr[-1], 0) + n
    return total, classes, frames
