"""Would zero-copy pay off? The verdict on each flow (socket, or process) of a trace that
carries at least 1% of the bytes, for each alternative strategy:

- "would not help": the traffic is delivered locally, so the kernel copies zero-copy pages
  back (with the evidence where the flow already sends zero-copy); or its copy costs under
  MIN_SAVING of the process's CPU at the top of its interval;
- "below the crossover": its sends are smaller than where zero-copy overtakes the copy on
  this machine's forward path (the baseline, a `run --preset zerocopy` results directory);
- "would help": with the expected saving (the copy it removes, as a share of the process's
  CPU, with its interval) and what the baseline measured at that size;
- "already in use": with what it achieves;
- "undecided": where the figures cannot decide (no baseline, ratios that straddle 1, no
  samples, an unknown path). No verdict claims more than its intervals allow, and each names
  the figures it stands on.
"""
from analysis import attribution, crossover, flows
from analysis.sizes import format_bytes, format_size

MIN_FLOW_SHARE = 0.01        # flows with fewer of the bytes get no verdict
MIN_SAVING = 0.01            # a copy under 1% of the CPU (at its interval's top) saves nothing
ALTERNATIVES = ("zero-copy", "io-uring-zc", "sendfile")
NAMES = {"zero-copy": "MSG_ZEROCOPY", "io-uring-zc": "io_uring SEND_ZC", "sendfile": "sendfile"}
COPY_OF = {"zero-copy": "one-copy", "io-uring-zc": "io-uring"}


def _pct(x):
    return f"{100 * x:.1f}%"


def _interval(share):
    lo, hi = share["ci95"]
    return f"{_pct(share['share'])} [{100 * lo:.1f}–{_pct(hi)}]"


def _saving(cpu, alt):
    """None when the copy's saving is decided, else the (verdict, text) it calls for: "would
    not help" when even the top of its interval is under MIN_SAVING, "undecided" when the
    interval spans it."""
    lo, hi = cpu["tx"]["ci95"]
    if hi < MIN_SAVING:
        return "would not help", (f"would not help: its copy from user space took "
                                  f"{_interval(cpu['tx'])} of the process's CPU, under "
                                  f"{_pct(MIN_SAVING)} even at the top of its interval")
    if lo < MIN_SAVING:
        return "undecided", (f"undecided: its copy from user space took "
                             f"{_interval(cpu['tx'])} of the process's CPU: the samples cannot "
                             f"tell whether {NAMES[alt]} would save {_pct(MIN_SAVING)}")
    return None


def copy_cpu(f, att, proc):
    """The flow's copies as a share of its process's CPU samples, {share, ci95, tx:{share,
    ci95}, samples}, or None without samples. A socket gets its process's copy samples in
    proportion to its bytes of each copy (user and kernel tx copy by its copied bytes, rx by
    its received bytes, the fallback by its bytes copied back)."""
    if not att or not att.get("samples"):
        return None
    n, counts = att["samples"], att.get("samples_by_category") or {}

    def frac(field):
        mine, total = f.get(field) or 0, (proc or {}).get(field) or 0
        if not f.get("socket"):
            return 1.0
        return mine / total if total else 0.0

    tx = counts.get("kernel_tx_copy", 0) * frac("tx_copy_bytes")
    k = (tx + counts.get("user_copy", 0) * frac("tx_copy_bytes")
         + counts.get("kernel_rx_copy", 0) * frac("rx_copy_bytes")
         + counts.get("fallback_copy", 0) * frac("fallback_copy_bytes"))
    return {"share": k / n, "ci95": attribution.share_interval(k, n), "samples": n,
            "tx": {"share": tx / n, "ci95": attribution.share_interval(tx, n)}}


def _in_use(f, alt):
    zc, uring = f.get("zc_tx_bytes") or 0, f.get("io_uring_sends") or 0
    if alt == "sendfile":
        return (f.get("tx_spliced_bytes") or 0) > 0
    if alt == "io-uring-zc":
        return zc > 0 and uring > 0
    return zc > 0 and not uring


def _achieved(f, alt):
    tx = f.get("tx_bytes") or 0
    if alt == "sendfile":
        sp = f.get("tx_spliced_bytes") or 0
        return (f"already in use: {_pct(sp / tx) if tx else '?'} of its "
                f"{format_bytes(tx)} spliced from page-cache pages, no copy from user space "
                f"(tx_spliced_bytes {sp})")
    zc, fb = f.get("zc_tx_bytes") or 0, f.get("fallback_copy_bytes")
    back = ("none copied back (fallback copy 0 B)" if fb == 0 else
            "the copy back not observed" if fb is None else
            f"{format_bytes(fb)} copied back{flows.copied_again(f)}")
    return (f"already in use: {_pct(zc / tx) if tx else '?'} of its {format_bytes(tx)} "
            f"left as user pages, {back} ({flows.fallback_fields(f)})")


def _typical(f):
    """(size for the baseline, words) of the flow's sends."""
    mean = flows.mean_send(f)
    slot = flows.median_send_slot(f)
    words = f"its sends average {format_bytes(mean)}" if mean else "it sends nothing"
    if slot:
        words += f" (median send {format_size(slot[0])}–{format_size(slot[1])})"
    return mean, words


def _from_baseline(f, alt, cpu, baseline):
    """below the crossover / would help / undecided, from the baseline at the flow's send
    size."""
    base = (baseline or {}).get("crossings", {}).get(alt)
    size, words = _typical(f)
    if not base:
        return "undecided", (f"undecided: no baseline for {NAMES[alt]} (give --baseline DIR, "
                             f"a `run --preset zerocopy` results directory); {words}")
    verdict, used = crossover.at_size(base["crossing"], size or 0)
    copy = base["copy"]
    at = "; ".join(f"{format_size(s)}: {alt}/{copy} {sp['median']:.2f} "
                   f"({sp['min']:.2f}–{sp['max']:.2f}, {v})" for s, v, sp in used)
    where = f"on this machine's {base['transport']} path ({at})"
    if verdict == "behind":
        return "below the crossover", (f"below the crossover: {words}, where {alt} lost to "
                                       f"{copy} in every round {where}")
    if verdict == "undecided":
        return "undecided", (f"undecided: {words}; the baseline cannot tell {where}")
    saving = f"the copy it removes: {_interval(cpu['tx'])} of the process's CPU" if cpu else \
        "its saving in CPU unknown (no stack samples)"
    return "would help", (f"would help: {words}, where {alt} beat {copy} in every round "
                          f"{where}; {saving}")


def _zerocopy_verdict(f, alt, cpu, baseline):
    if not f.get("tx_bytes"):
        return "would not help", "would not help: it sends nothing (its bytes are received)"
    kind, why = flows.delivery(f)
    if kind == "local":
        seen = (f.get("zc_tx_bytes") or 0) and f.get("fallback_copy_bytes")
        return "would not help", (f"would not help: delivered locally: {why}"
                                  + ("" if seen else ", where the kernel copies zero-copy "
                                     "pages back"))
    if _in_use(f, alt):
        return "already in use", _achieved(f, alt)
    if f.get("tx_copy_bytes") == 0:
        return "would not help", ("would not help: it copies nothing from user space "
                                  "(tx_copy_bytes 0)")
    if cpu and cpu["tx"]["ci95"][1] < MIN_SAVING:
        return _saving(cpu, alt)
    if kind == "unknown":
        return "undecided", f"undecided: {why}"
    return _from_baseline(f, alt, cpu, baseline)


def _sendfile_verdict(f, cpu):
    if not f.get("tx_bytes"):
        return "would not help", "would not help: it sends nothing (its bytes are received)"
    if _in_use(f, "sendfile"):
        return "already in use", _achieved(f, "sendfile")
    if f.get("proto") == "udp":
        return "would not help", "would not help: a UDP socket (sendfile sends files over TCP)"
    if f.get("tx_copy_bytes") == 0:
        return "would not help", ("would not help: it copies nothing from user space "
                                  "(tx_copy_bytes 0)")
    if not cpu:
        return "undecided", "undecided: no stack samples to weigh its copy from user space"
    small = _saving(cpu, "sendfile")
    if small:
        return small
    return "would help", (f"would help if its bytes come from a file: sendfile removes the "
                          f"copy from user space, {_interval(cpu['tx'])} of the process's CPU "
                          f"(kernel_tx_copy samples apportioned by its {f.get('tx_copy_bytes')} "
                          f"copied bytes)")


def judge(f, att, proc, baseline):
    """{alternative: (verdict, text)} for one flow."""
    cpu = copy_cpu(f, att, proc)
    out = {alt: _zerocopy_verdict(f, alt, cpu, baseline) for alt in ("zero-copy", "io-uring-zc")}
    out["sendfile"] = _sendfile_verdict(f, cpu)
    return out, cpu


def verdicts(trace, atts, baseline=None):
    """[{flow, share, cpu, verdicts}] for the flows with at least MIN_FLOW_SHARE of the bytes,
    largest first. atts: {comm: attribution of its stacks}."""
    fs = flows.flows(trace)
    total = sum(flows.flow_bytes(f) for f in fs)
    procs = _process_totals(fs)
    # the stacks name commands, not processes: processes sharing a name share its samples
    sharing = {}
    for p in (trace.get("processes") or {}).values():
        if p.get("tx_bytes") or p.get("rx_copy_bytes"):
            sharing[p.get("comm")] = sharing.get(p.get("comm"), 0) + 1
    out = []
    for f in sorted(fs, key=flows.flow_bytes, reverse=True):
        share = flows.flow_bytes(f) / total if total else 0.0
        if share < MIN_FLOW_SHARE:
            continue
        v, cpu = judge(f, atts.get(f["comm"]), procs.get(f["pid"]), baseline)
        if cpu and sharing.get(f["comm"], 1) > 1:
            cpu["pooled"] = sharing[f["comm"]]
        out.append({"flow": f, "share": share, "cpu": cpu, "verdicts": v})
    return out


def cpu_words(cpu):
    """"its copies X [lo–hi] of the process's CPU", naming the pooling where there is one."""
    whose = (f"the CPU of its command's {cpu['pooled']} processes (their stacks share a name)"
             if cpu.get("pooled") else "the process's CPU")
    return f"its copies took {_interval(cpu)} of {whose}"


def _process_totals(fs):
    """{pid: {field: sum over its flows}}: what a socket's share of its process is taken of."""
    out = {}
    for f in fs:
        t = out.setdefault(f["pid"], {})
        for k in ("tx_copy_bytes", "rx_copy_bytes", "fallback_copy_bytes"):
            t[k] = t.get(k, 0) + (f.get(k) or 0)
    return out


def lines(vs, baseline_note=None):
    """The terminal's few lines: each flow, then one line per alternative."""
    if not vs:
        return ["No socket carried 1% of the bytes: no verdict."]
    out = ["Would zero-copy pay off? (flows with at least 1% of the bytes"
           + (f"; {baseline_note}" if baseline_note else "") + ")"]
    for v in vs:
        cpu = v["cpu"]
        out.append(f"  {v['flow']['label']}: {_pct(v['share'])} of the bytes"
                   + (f"; {cpu_words(cpu)}" if cpu else "; no stack samples"))
        for alt in ALTERNATIVES:
            out.append(f"    {NAMES[alt]}: {v['verdicts'][alt][1]}")
    return out
