"""Our workloads measured beside others and at scale: section 3 (beside iperf3), 4 (1 to 128
threads, the tracer's memory, events per second) and 7 (zero-copy against copy on the forward
path, sendfile beside iperf3 -Z). Each section function measures, records its verdicts and
hands its numbers to bench/markdown.py."""
from netio_trace.system.netns import Topology
from bench import markdown, pairs, profiles
from bench.config import (FORWARD_SIZES, IPERF3_SIZES, IPERF3_STRATEGIES, SCALE_SIZE,
                          SCALE_SMALL, SCALE_THREADS, SENDFILE_SIZES, TARGET_IPERF3,
                          TARGET_OVERHEAD, TARGET_SENDFILE, ZC_PAIRS, size_name)
from bench.harness import interleaved
from bench.measure_overhead import below
from bench.observers import OurTracer


# ---- section 3: our workloads beside iperf3 ------------------------------------------------
def section_iperf3(b):
    """Our one-copy and two-copy beside iperf3 -l SIZE -C cubic, 1 thread/stream."""
    dur, rounds = b.args.iperf3_duration, b.args.rounds
    data = []
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for size in IPERF3_SIZES:
                variants = [
                    ("one-copy", lambda t=topo, s=size: b.netio(t, "one-copy", s, 1, dur)),
                    ("iperf3", lambda t=topo, s=size: b.iperf3(t, s, dur)),
                    ("two-copy", lambda t=topo, s=size: b.netio(t, "two-copy", s, 1, dur)),
                ]
                tag = f"{transport} {size_name(size)}"
                res = interleaved(rounds, variants, tag)
                data.append((transport, size, res))
                for st in IPERF3_STRATEGIES:
                    b.record("3. ours / iperf3", f"{tag} {st}", pairs.ratio(res, st, "iperf3"),
                             TARGET_IPERF3)
    return markdown.section_iperf3(b.args, data)


# ---- section 4: scale -------------------------------------------------------------------
def section_scale(b):
    """Throughput and overhead from 1 to 128 threads; memory at 128; events/s at 8 B."""
    transport = "loopback" if "loopback" in b.args.transports else "veth"
    with Topology(transport) as topo:
        by_threads, missed = _scale_threads(b, topo)
        res8 = _scale_small(b, topo)
    return markdown.section_scale(b.args, transport, by_threads, res8, missed)


def _scale_threads(b, topo):
    """One-copy at 1 .. 128 threads, untraced / full / tick in interleaved rounds: [(threads,
    Rounds)] (the full tracer's runs at 128 threads read its memory), the profiles of misses."""
    dur, rounds, size = b.args.scale_duration, b.args.rounds, SCALE_SIZE
    by_threads, missed = [], []
    for n in SCALE_THREADS:
        variants = [("untraced", lambda t=topo, n=n: b.netio(t, "one-copy", size, n, dur)),
                    ("full", lambda t=topo, n=n: b.netio(
                        t, "one-copy", size, n, dur, OurTracer(memory=(n == 128)))),
                    ("tick", lambda t=topo, n=n: b.netio(
                        t, "one-copy", size, n, dur,
                        OurTracer(["--sample-source", "tick"], label="tick")))]
        res = interleaved(rounds, variants, f"scale {n} threads")
        full = pairs.ratio(res, "full", "untraced")
        b.record("4. scale: full / untraced", f"{n} threads", full, TARGET_OVERHEAD)
        b.record("4. scale with --sample-source tick: / untraced", f"{n} threads",
                 pairs.ratio(res, "tick", "untraced"), TARGET_OVERHEAD)
        by_threads.append((n, res))
        if below(full, TARGET_OVERHEAD):
            missed.append(profiles.capture(f"scale-{topo.transport}-{n}threads", res, "full",
                                           "untraced", f"{n} threads: full/untraced "
                                           f"{pairs.fmt(full, 3)} < {TARGET_OVERHEAD}"))
    return by_threads, missed


def _scale_small(b, topo):
    """Events per second at the smallest message size, untraced / full in pairs too."""
    dur8 = b.args.duration
    return interleaved(b.args.rounds, [
        ("untraced", lambda t=topo: b.netio(t, "one-copy", SCALE_SMALL, 1, dur8)),
        ("full", lambda t=topo: b.netio(t, "one-copy", SCALE_SMALL, 1, dur8, OurTracer()))],
        "scale 8 B")


# ---- section 7: where zero-copy wins ---------------------------------------------------
def section_zerocopy(b):
    """Where zero-copy wins: zero-copy vs copy on the forward path by size, and sendfile beside
    iperf3 -Z."""
    dur, rounds = b.args.duration, b.args.rounds
    sizes = tuple(b.args.zc_sizes) if b.args.zc_sizes else FORWARD_SIZES
    with Topology("forward") as topo:
        forward = [(size, _forward_rounds(b, topo, size, dur, rounds)) for size in sizes]
    sendfile = _sendfile_rounds(b, max(1, int(round(dur))), rounds)
    return markdown.section_zerocopy(b.args, forward, sendfile)


def _forward_rounds(b, topo, size, dur, rounds):
    strategies = [s for pair in ZC_PAIRS for s in pair]
    variants = [(st, lambda st=st: b.netio_forward(topo, st, size, 1, dur)) for st in strategies]
    return interleaved(rounds, variants, f"forward {size_name(size)}")


def _sendfile_rounds(b, dur, rounds):
    """Our sendfile beside iperf3 -Z at each size: [(transport, size, Rounds)]."""
    out = []
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for size in SENDFILE_SIZES:
                variants = [("sendfile", lambda t=topo, s=size: b.netio(t, "sendfile", s, 1, dur)),
                            ("iperf3 -Z", lambda t=topo, s=size: b.iperf3(t, s, dur, True))]
                res = interleaved(rounds, variants, "sendfile")
                b.record("7. sendfile / iperf3 -Z", f"{transport} {size_name(size)}",
                         pairs.ratio(res, "sendfile", "iperf3 -Z"), TARGET_SENDFILE)
                out.append((transport, size, res))
    return out
