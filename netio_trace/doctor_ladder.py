"""The loaded tracer's ladder, for `netio-trace doctor`'s table: per probe point the rung it got
and, where that is not the best rung (docs/DESIGN.md, "Attach ladder") or nothing at all, why
(the tracer's own `attach_why`) and what it costs the user. Each cost says where it was
measured (bench/NOTES.md, bench/results.md) or that it was not: no figure here is estimated.
"""

POINTS = ("tx_bytes", "tx_copy", "pinning", "fallback_copy", "zc_completion", "rx_copy",
          "rx_mapped", "rx_discarded", "rx_spliced", "syscalls")
# doctor loads the tracer with --no-sample: `stacks` is unavailable there by request, and the
# `sampling` object of --probe says what samples stacks
NOT_LOADED = ("stacks",)
BEST = "fentry"

SYS_ENTER = (
    "every syscall of every process on the machine runs a program (sys_enter/sys_exit), "
    "traced or not: a getpid loop kept 0.610 (0.551–0.710) of its untraced rate at sys_enter "
    "against 0.978 on the fentry rung (6.1 guest, bench/results.md section 8, 2026-11-26), "
    "0.626 on the 6.18 host (bench/NOTES.md, \"Where the tracer's cost goes\")")
KPROBE = (
    "each call enters a kprobe handler (a breakpoint trap, or the ftrace path at a function's "
    "entry) and returns through a kretprobe trampoline, where fentry/fexit are direct calls; "
    "not measured in bench/ (the 6.18 host has no kprobes)")
PER_SKB = (
    "counted by programs on every skb of the machine (net_dev_start_xmit, "
    "netif_receive_skb), followed or not; the traced workload kept 0.966 (0.945–1.004) of "
    "its untraced throughput under those programs alone (one-copy 16 KiB loopback, 6.18 host, "
    "bench/NOTES.md, \"Where the tracer's cost goes\")")
INFERRED_COPY = (
    "computed as tx bytes − zero-copy bytes − spliced bytes (`tx_copy_inferred`), not seen "
    "at the copy functions: where one of those is not counted per process, neither is the copy "
    "(the `unavailable` rows)")
NO_COMPLETIONS = (
    "the trace's `completions`, `completed_sends` and `copied_sends` are null: the sender's "
    "own error queue (SO_EE_CODE_ZEROCOPY_COPIED) is the only account of its completions")
COMPAT = (
    "a followed thread's state is a hash entry looked up at every event, where the storage "
    "build reads task-local storage: not measured as a build; on the 6.18 host task storage "
    "in place of per-event hash lookups took the BPF time per message to 0.695 of before "
    "(one-copy 16 KiB loopback, bench/NOTES.md, \"Where the tracer's cost goes\")")
PERF_SOFTWARE = (
    "context switches, migrations, faults and task-clock from a perf software event per "
    "followed thread, scheduled out and in at each of its context switches: the kernel's own "
    "counters in their place took throughput to 1.065 (1.027–1.103) of before (one-copy "
    "16 KiB loopback, 6.18 host, bench/NOTES.md, \"Where the tracer's cost goes\")")


def cost(point, rung):
    """What `point` on `rung` costs the user against the best rung, or None where nothing is
    lost or nothing is known."""
    if rung == "kprobe":
        return KPROBE
    if point == "syscalls" and rung in ("tp_btf", "tracepoint"):
        return SYS_ENTER
    if point in ("pinning", "fallback_copy") and rung in ("tp_btf", "tracepoint"):
        return PER_SKB
    if point == "tx_copy" and rung == "inferred":
        return INFERRED_COPY
    if point == "zc_completion" and rung == "unavailable":
        return NO_COMPLETIONS
    return None


def point_rows(loaded):
    """[(probe point, rung, why or None, cost or None)] of the loaded tracer's ready line:
    why and cost only where the point is below the best rung or unavailable."""
    attach = loaded.get("attach") if isinstance(loaded.get("attach"), dict) else {}
    why = loaded.get("attach_why") if isinstance(loaded.get("attach_why"), dict) else {}
    names = list(POINTS) + [p for p in attach if p not in POINTS and p not in NOT_LOADED]
    rows = []
    for p in names:
        rung = attach.get(p)
        if rung is None:
            rows.append((p, "not reported", "the tracer's ready line does not name it", None))
        elif rung == BEST:
            rows.append((p, rung, None, None))
        else:
            rows.append((p, rung, why.get(p), cost(p, rung)))
    return rows


def build_row(loaded):
    """(name, what it is, cost or None) of the BPF build the tracer chose (user/builds.c), or
    None."""
    b = loaded.get("bpf_build")
    if not isinstance(b, dict) or not b.get("name"):
        return None
    if b["name"] != "compat":
        return (b["name"], "a followed thread's state in task-local storage: no hash lookup on "
                "the send, receive and syscall paths", None)
    missing = b.get("missing")
    lacks = (f"this kernel lacks {missing}" if missing
             else "forced (NETIO_BPF_BUILD): the kernel has what the storage build needs")
    return "compat", lacks, COMPAT


def counters_row(loaded):
    """(source, what it is, cost or None) of the software counters (`software_from`), or
    None."""
    src = loaded.get("software_from")
    if not src:
        return None
    if src == "perf_event":
        return src, "a perf software event per followed thread", PERF_SOFTWARE
    return (src, "the kernel's own per-thread counters, read at thread exit and before a "
            "snapshot", None)


def latency_row(loaded):
    """(result, why) of how the full level times calls by default here, or None where the
    tracer's load did not say (docs/tracer.md, --latency-sample)."""
    lat = loaded.get("latency")
    if not isinstance(lat, dict) or not lat.get("timed"):
        return None
    n = lat.get("sampled_1_in") or 1
    if n == 1:
        return "every call timed", "each call's latency is in the histograms"
    return (f"1 call in {n} timed (default)",
            f"each thread times the first of every {n} calls of each syscall class: the clock "
            "reads and histogram adds of every call were much of the full level's cost; "
            "calls, bytes and errors still count every call; --latency-sample 1 (trace, "
            "run) times every call")


COUNTING_SKB = (
    "at the counting level (--no-latency) the programs that look at every skb wait for a send "
    "whose zero-copy bytes only they count, UDP's or io_uring's SEND_ZC (--skb-programs "
    "on-demand): a copying program runs none of them, nor does a TCP MSG_ZEROCOPY one, whose "
    "bytes count at the send; a zero-copy program's fallback copy is null, its skbs unseen; "
    "with the next row, runs "
    "per message at one-copy 16 KiB loopback 3.10 -> 1.40 (6.18 host, bench/NOTES.md, \"Runs "
    "per message at the counting level\")")
COUNTING_SPLICED = (
    "null at the counting level (--no-latency): on this rung only tcp_rcv_space_adjust, which "
    "every TCP receive of the machine would run, counts it; the full level counts it at "
    "sys_exit_splice")


def counting_rows(loaded):
    """[(what, result, why)] of what the counting level gives up here that the full level
    (doctor's load) keeps: figures null, programs on demand (docs/tracer.md)."""
    attach = loaded.get("attach") if isinstance(loaded.get("attach"), dict) else {}
    build = (loaded.get("bpf_build") or {}).get("name")
    rows = []
    if attach.get("pinning") == attach.get("tx_bytes") == "tp_btf" and build == "storage":
        rows.append(("per-skb programs", "on demand", COUNTING_SKB))
    if attach.get("rx_spliced") == "tp_btf":
        rows.append(("rx_spliced_bytes", "null", COUNTING_SPLICED))
    return rows


def unavailable_rows(loaded):
    """[(figure, why)] of the figures the tracer leaves null here (its `unavailable`)."""
    u = loaded.get("unavailable")
    return sorted(u.items()) if isinstance(u, dict) else []
