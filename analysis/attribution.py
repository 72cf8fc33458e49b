"""Per-copy attribution of sampled stacks (DESIGN.md, "Per-copy attribution"; issue 4).

Each folded stack (``comm;outermost;...;innermost count``, kernel frames suffixed ``_[k]``)
goes to the category of the innermost frame that matches a rule of RULES, the one table of
category rules: a kernel that renames a function needs a one-line change there.

How the walk goes, from the innermost frame outwards:
- compiler suffixes (``.isra.0``, ``.constprop.0``, ``.part.0``, ``.cold``) are ignored;
- at each frame the rules are tried in table order; a rule matches when the frame matches
  one of its patterns, the frames outside it (in the same context, see below) contain one
  of its ``under`` patterns (if it has any) and none of its ``not_under`` patterns;
- the walk stops at a hard-interrupt entry (``asm_sysvec_*``, ``asm_common_interrupt``…):
  the code the interrupt landed on did not do the interrupt's work. A softirq run from the
  interrupt's exit (``__irq_exit_rcu;handle_softirqs;...``) is inside that context and is
  classified by its own frames (e.g. ``skb_copy_ubufs`` there is ``fallback_copy``);
- no match: ``other``.

What the samples can and cannot see (checked with perf on the host, issue 4):
- With FSRM the kernel copies user memory with an inline ``rep movsb`` inside
  ``_copy_from_iter`` / ``_copy_to_iter``: there is no ``rep_movs_alternative`` frame, so
  those functions themselves are copy frames (and ``rep_movs_alternative`` / ``copy_user_*``
  still are, for CPUs without FSRM).
- With no PMU (``source == "cpu-clock"``), and with samples on the scheduler tick
  (``source == "tick"``), samples come from a timer interrupt, which cannot
  land while interrupts are disabled: that time shows up where they are enabled again,
  mostly ``_raw_spin_unlock_irqrestore`` and ``handle_softirqs``. Those samples are
  classified by the frames around them like any other (under ``skb_copy_ubufs`` they are the
  fallback copy's; under ``tcp_write_xmit`` they are ``other``), and their share is reported
  as ``irqs_off_share`` with a note, so a report can say how much of the profile is such
  shadow time. Tick samples reach here without the interrupt's own frames (the tracer strips
  everything up to the interrupt entry), like perf samples; cycles are estimated from
  task-clock either way when no cycles counter exists.

``user_copy`` is the workload's serialization memcpy: a user-space memcpy variant (libc's
``__memmove_avx_unaligned_erms`` and friends, ``memcpy@plt``, or an unresolved libc frame)
called from the serializer (``wl_message_serialize`` in workloads/message.c), or a sample in
the serializer itself (a copy the compiler inlined). The profiler puts the caller of a
frameless libc leaf back into the stack, so the serializer is there even though the
frame-pointer walk skips it.
"""
import fnmatch
import math
import re

CATEGORIES = ("user_copy", "kernel_tx_copy", "pinning", "fallback_copy", "completion",
              "kernel_rx_copy", "other")

# ---- the table -------------------------------------------------------------------------
# Frame sets used as context ("under") by the rules.
SEND_PATH = ("tcp_sendmsg", "tcp_sendmsg_locked", "tcp_sendmsg_fastopen", "udp_sendmsg",
             "udpv6_sendmsg", "inet_sendmsg", "inet6_sendmsg", "sock_sendmsg", "__sock_sendmsg",
             "____sys_sendmsg", "___sys_sendmsg", "__sys_sendmsg", "__sys_sendto",
             "sock_write_iter", "__io_send*", "io_send*")
RECV_PATH = ("tcp_recvmsg", "tcp_recvmsg_locked", "skb_copy_datagram_iter",
             "__skb_datagram_iter", "udp_recvmsg", "udpv6_recvmsg", "inet_recvmsg",
             "sock_recvmsg", "__sys_recvfrom", "____sys_recvmsg", "sock_read_iter")
# Copies on a send or receive path that are not the payload: syscall arguments, iovec arrays.
ARG_COPIES = ("import_iovec", "__import_iovec", "iovec_from_user", "copy_msghdr_from_user",
              "__copy_msghdr", "sendmsg_copy_msghdr", "recvmsg_copy_msghdr",
              "move_addr_to_kernel", "move_addr_to_user", "put_cmsg", "__put_cmsg",
              "copy_iovec_from_user")
COMPLETION = ("__msg_zerocopy_callback", "msg_zerocopy_callback", "msg_zerocopy_complete",
              "sock_zerocopy_callback", "ip_recv_error", "ipv6_recv_error", "inet_recv_error",
              "sock_dequeue_err_skb")
SERIALIZER = ("wl_message_serialize", "*serializ*")   # workloads/message.c, any serializer
GENERIC_KERNEL_COPY = ("rep_movs_alternative", "copy_user_generic*", "copy_user_enhanced*",
                       "copy_user_fast_string", "__copy_user_nocache", "copy_user_short_string")
USER_MEMCPY = ("memcpy", "memmove", "mempcpy", "__memcpy*", "__memmove*", "__mempcpy*",
               "memcpy@plt", "memmove@plt", "mempcpy@plt", "__memcpy_chk*", "[libc.so*]",
               "[libc-*.so]")

# (category, side, frames, under, not_under). side: "k" kernel frames, "u" user frames.
# Frame patterns are fnmatch globs on the name without the "_[k]" suffix and without
# compiler suffixes. The first rule that matches the innermost matching frame wins.
RULES = (
    ("fallback_copy", "k", ("skb_copy_ubufs",), (), ()),
    ("completion", "k", COMPLETION, (), ()),
    ("pinning", "k", ("iov_iter_get_pages2", "iov_iter_get_pages_alloc2",
                      "__iov_iter_get_pages_alloc", "iov_iter_extract_pages",
                      "iov_iter_extract_user_pages", "*_user_pages_fast", "gup_fast*",
                      "internal_get_user_pages_fast", "__gup_longterm_locked",
                      "__zerocopy_sg_from_iter", "zerocopy_sg_from_iter",
                      "zerocopy_fill_skb_from_iter", "skb_zerocopy_iter_stream",
                      "msg_zerocopy_realloc", "msg_zerocopy_alloc",
                      "mm_account_pinned_pages"), (), ()),
    ("kernel_tx_copy", "k", ("_copy_from_iter", "_copy_from_iter_nocache", "copy_from_user_iter",
                             "copy_page_from_iter", "copy_page_from_iter_atomic",
                             "skb_do_copy_data_nocache", "skb_copy_to_page_nocache",
                             "csum_and_copy_from_iter", "csum_and_copy_from_iter_full",
                             "skb_add_data_nocache") + GENERIC_KERNEL_COPY,
     SEND_PATH, ARG_COPIES + COMPLETION),
    ("kernel_rx_copy", "k", ("_copy_to_iter", "copy_to_user_iter", "copy_page_to_iter",
                             "simple_copy_to_iter", "__skb_datagram_iter",
                             "skb_copy_datagram_iter", "skb_copy_and_csum_datagram_msg",
                             "csum_and_copy_to_iter") + GENERIC_KERNEL_COPY,
     RECV_PATH, ARG_COPIES + COMPLETION),
    ("user_copy", "u", USER_MEMCPY, SERIALIZER, ()),
    ("user_copy", "u", SERIALIZER, (), ()),
)

# Hard-interrupt entries: the outward walk does not cross them.
IRQ_ENTRY = ("asm_sysvec_*", "asm_common_interrupt", "asm_spurious_interrupt",
             "asm_exc_nmi", "common_interrupt", "sysvec_*", "__sysvec_*", "irq_exit_rcu",
             "__irq_exit_rcu")
# Where interrupts are enabled again: with a timer-based source (cpu-clock, tick) the samples
# of an irqs-off section land here.
IRQ_ENABLE_POINTS = ("_raw_spin_unlock_irqrestore", "_raw_spin_unlock_irq", "handle_softirqs",
                     "__do_softirq", "__local_bh_enable_ip", "do_softirq*", "_raw_read_unlock_irqrestore",
                     "_raw_write_unlock_irqrestore", "finish_task_switch*")
# ---- end of the table -----------------------------------------------------------------

# Sample sources driven by a timer interrupt (see the module doc), as the notes name them.
TIMER_SOURCES = {"cpu-clock": "cpu-clock (no PMU)", "tick": "the scheduler tick"}

_SUFFIX = re.compile(r"(\.(isra|constprop|part|cold|llvm|lto_priv|localalias)(\.\d+)?)+$")


def _compile(patterns):
    plain = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [re.compile(fnmatch.translate(p)) for p in patterns if p not in plain]

    def match(name):
        return name in plain or any(g.match(name) for g in globs)
    return match


_RULES = [(cat, side, _compile(frames), _compile(under) if under else None,
           _compile(not_under) if not_under else None)
          for cat, side, frames, under, not_under in RULES]
_IRQ_ENTRY = _compile(IRQ_ENTRY)
_IRQ_ENABLE = _compile(IRQ_ENABLE_POINTS)


def parse_frame(frame):
    """'name_[k]' -> ('name', 'k'); user frames -> (name, 'u'); compiler suffixes dropped."""
    side = "u"
    if frame.endswith("_[k]"):
        frame, side = frame[:-4], "k"
    return _SUFFIX.sub("", frame), side


def parse_folded_line(line):
    """'a;b;c 12' -> (['a', 'b', 'c'], 12), or None for a blank or malformed line."""
    line = line.strip()
    if not line:
        return None
    stack, _, count = line.rpartition(" ")
    try:
        n = int(count)
    except ValueError:
        try:
            n = int(float(count))
        except ValueError:
            return None
    if not stack:
        return None
    return stack.split(";"), n


def classify(frames):
    """The category of one stack, frames outermost first (the comm first, as folded).

    Frames may carry the "_[k]" suffix or not; see the module docstring for the walk."""
    parsed = [parse_frame(f) for f in frames]
    # the context of frame i: frames outside it, up to the nearest interrupt entry
    lo = 0
    bounds = []
    for i, (name, side) in enumerate(parsed):
        bounds.append(lo)
        if side == "k" and _IRQ_ENTRY(name):
            lo = i + 1
    for i in range(len(parsed) - 1, -1, -1):
        name, side = parsed[i]
        if side == "k" and _IRQ_ENTRY(name):
            break
        outer = [n for n, _ in parsed[bounds[i]:i]]
        for cat, rside, match, under, not_under in _RULES:
            if rside != side or not match(name):
                continue
            if under is not None and not any(under(n) for n in outer):
                continue
            if not_under is not None and any(not_under(n) for n in outer):
                continue
            return cat
    return "other"


def at_irq_enable_point(frames):
    """True when the innermost frame is where interrupts are re-enabled (see module doc)."""
    if not frames:
        return False
    name, side = parse_frame(frames[-1])
    return side == "k" and bool(_IRQ_ENABLE(name))


# Below this many samples a share is flagged in the report, not hidden (issue 13).
FEW_SAMPLES = 100


def share_interval(k, n, z=1.96):
    """95% Wilson score interval [low, high] of a share of k samples in n (binomial)."""
    if n <= 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def attribute(folded_lines, source, task_clock_ns, tsc_hz, cycles, payload_bytes):
    """The run's `attribution` object (DESIGN.md).

    folded_lines: iterable of folded stack lines; source: "cycles", "cpu-clock" or "tick";
    task_clock_ns, tsc_hz, cycles: from the perf object (cycles None where not counted);
    payload_bytes: bytes the workload moved.

    share[c] = samples of c / all samples (sums to 1 when there are samples), with its 95%
    binomial interval in share_ci95[c]; few_samples when there are under FEW_SAMPLES;
    cycles_per_byte[c] = share[c] * total cycles / payload bytes, where total cycles are the
    counted cycles, or, with none counted, task-clock ns * tsc_hz / 1e9 and estimated true.
    A value that cannot be computed is None, never 0.
    """
    counts = dict.fromkeys(CATEGORIES, 0)
    total = 0
    irq_shadow = 0
    for line in folded_lines or ():
        parsed = parse_folded_line(line)
        if parsed is None:
            continue
        frames, n = parsed
        if n <= 0:
            continue
        counts[classify(frames)] += n
        if at_irq_enable_point(frames):
            irq_shadow += n
        total += n

    if total:
        share = {c: counts[c] / total for c in CATEGORIES}
    else:
        share = dict.fromkeys(CATEGORIES, 0.0)

    cycles = _num(cycles)
    task_clock_ns, tsc_hz, payload_bytes = _num(task_clock_ns), _num(tsc_hz), _num(payload_bytes)
    estimated = cycles is None
    if cycles is not None:
        total_cycles = float(cycles)
    elif task_clock_ns is not None and tsc_hz:
        total_cycles = task_clock_ns * tsc_hz / 1e9
    else:
        total_cycles = None
    if total_cycles is not None and payload_bytes and total:
        cpb = {c: share[c] * total_cycles / payload_bytes for c in CATEGORIES}
    else:
        cpb = dict.fromkeys(CATEGORIES, None)

    notes = []
    if source in TIMER_SOURCES:
        notes.append(f"samples on {TIMER_SOURCES[source]}: time with interrupts disabled is "
                     "seen where they are re-enabled (_raw_spin_unlock_irqrestore, "
                     "handle_softirqs) and attributed to the code around that point")
    if estimated and total_cycles is not None:
        notes.append("cycles estimated as task-clock x TSC rate (no cycles counter)")
    return {
        "source": source,
        "samples": total,
        "share": share,
        "share_ci95": {c: share_interval(counts[c], total) for c in CATEGORIES},
        "few_samples": total < FEW_SAMPLES,
        "cycles_per_byte": cpb,
        "estimated": estimated,
        "samples_by_category": counts,
        "total_cycles": total_cycles,
        "irqs_off_share": irq_shadow / total if total else 0.0,
        "notes": notes,
    }


def attribute_file(folded_path, *args, **kwargs):
    with open(folded_path) as f:
        return attribute(f.read().splitlines(), *args, **kwargs)


if __name__ == "__main__":  # python -m analysis.attribution FILE.folded: shares per category
    import json
    import sys
    for path in sys.argv[1:]:
        a = attribute_file(path, "cpu-clock", None, None, None, None)
        print(path, json.dumps({"samples": a["samples"], "share": a["share"],
                                "irqs_off_share": a["irqs_off_share"]}, indent=1))
