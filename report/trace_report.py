"""The report of one trace (`netio-trace trace --report DIR`, rebuilt by `netio-trace report
DIR`): report.md and a self-contained report.html in the `run` report's style, from
DIR/trace.json, DIR/stacks.folded and DIR/trace-report.json (the command, the baseline).

Sections: the trace and machine; the verdicts, flow by flow; the processes and sockets with
bytes and copies by kind; send sizes and syscall latency; where the CPU went (category shares
with their intervals, the flame graph coloured by category); the counters, what was
estimated and what the tracer cost."""
import json
import os
import time

from analysis import attribution, baseline as baselinemod, files, flows, verdict
from analysis.sizes import format_bytes, format_size
from report import doc as docmod
from report import flamegraph, latency, trace_plots

TRACE, FOLDED, META, VERDICTS = ("trace.json", "stacks.folded", "trace-report.json",
                                  "verdicts.json")
META_FORMAT = "netio-trace trace report 1"


class TraceReportError(RuntimeError):
    pass


def is_trace_dir(d):
    return os.path.isfile(os.path.join(d, TRACE)) and os.path.isfile(os.path.join(d, META))


def write_meta(d, command, baseline_dir, baseline_how, notes, machine):
    """DIR/trace-report.json: what a rebuild needs beside the trace."""
    with files.atomic_open(os.path.join(d, META)) as f:
        json.dump({"format": META_FORMAT, "command": list(command or []),
                   "baseline": baseline_dir, "baseline_how": baseline_how,
                   "notes": list(notes or []), "machine": machine,
                   "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)


def _load(d):
    try:
        with open(os.path.join(d, TRACE)) as f:
            trace = json.load(f)
        with open(os.path.join(d, META)) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise TraceReportError(f"{d}: cannot read the trace ({e})") from None
    if not isinstance(trace, dict) or meta.get("format") != META_FORMAT:
        raise TraceReportError(f"{d}: not a netio-trace trace report directory")
    return trace, meta


def folded_lines(d):
    try:
        with open(os.path.join(d, FOLDED), errors="replace") as f:
            return [line.rstrip("\n") for line in f if line.strip()]
    except OSError:
        return []


def attributions(trace, lines):
    """{comm: attribution of its stacks} for every followed command with samples."""
    source = (trace.get("samples") or {}).get("source") or "tick"
    comms = sorted({p.get("comm") for p in (trace.get("processes") or {}).values()} - {None})
    out = {}
    for comm in comms:
        a = flows.comm_attribution(lines, comm, source)
        if a:
            out[comm] = a
    return out


def _baseline(meta, notes):
    """The baseline named in the meta file, loaded again; None (with a note) when gone."""
    path = meta.get("baseline")
    if not path:
        return None
    try:
        return baselinemod.load(path)
    except baselinemod.BaselineError as e:
        notes.append(f"The baseline could not be read again: {e}.")
        return None


def analyse(d):
    """(trace, meta, lines, atts, verdicts, baseline, notes) of a trace report directory."""
    trace, meta = _load(d)
    lines = folded_lines(d)
    atts = attributions(trace, lines)
    notes = list(meta.get("notes") or [])
    base = _baseline(meta, notes)
    return trace, meta, lines, atts, verdict.verdicts(trace, atts, base), base, notes


def baseline_sentence(meta, base):
    if not base:
        return ("No baseline: the verdicts that need where zero-copy overtakes the copy are "
                "undecided (give `--baseline DIR`, a `run --preset zerocopy` results directory).")
    how = {"given": "given with `--baseline`",
           "short form": "the short form of `run --preset zerocopy`, run first by `trace "
                         "--report`"}.get(meta.get("baseline_how"), meta.get("baseline_how"))
    parts = []
    for zcs, c in sorted(base["crossings"].items()):
        parts.append(f"{zcs} against {c['copy']}: " + ", ".join(
            f"{format_size(s)} {sp['median']:.2f} ({sp['min']:.2f}–{sp['max']:.2f}, {v})"
            for s, v, sp in c["crossing"]["verdicts"]))
    return (f"Crossovers from `{base['dir']}` ({how}; {base['runs']} runs; paired throughput "
            f"ratios on forward, 1 thread, by size, median (min–max, verdict)): "
            + "; ".join(parts) + ".")


def verdicts_json(vs, base):
    """DIR/verdicts.json: the verdicts as data, flow by flow."""
    keep = ("pid", "comm", "proto", "local", "peer", "path", "label")
    return {"baseline": base["dir"] if base else None,
            "flows": [{**{k: v["flow"].get(k) for k in keep}, "share": v["share"],
                       "copy_cpu": v["cpu"],
                       "verdicts": {alt: {"verdict": kind, "text": text}
                                    for alt, (kind, text) in v["verdicts"].items()}}
                      for v in vs]}


def _trace_section(d, c):
    trace, meta = c["trace"], c["meta"]
    d.h(1, "The trace")
    rungs = ", ".join(f"{k} {v}" for k, v in (trace.get("attach") or {}).items())
    s = trace.get("samples") or {}
    d.bullets([
        f"Command: `{' '.join(meta.get('command') or []) or '(a running process or cgroup)'}`",
        f"Machine: `{c['machine'].get('hostname', '?')}`, {c['machine'].get('cpu', '?')}, "
        f"kernel `{c['machine'].get('kernel', os.uname().release)}`",
        f"Traced for {trace.get('duration_s', 0):.2f} s; {len(trace.get('processes') or {})} "
        f"process(es) followed; BPF build `{(trace.get('bpf_build') or {}).get('name', '?')}`",
        f"Attach rungs: {rungs}",
        f"Stack samples: {s.get('total', 0)} on `{s.get('source', 'none')}`"
        + (f" at {s.get('freq')} Hz" if s.get("freq") else ""),
        f"Report built {time.strftime('%Y-%m-%d %H:%M:%S')} from `{TRACE}` and `{FOLDED}` "
        f"(`netio-trace report DIR` rebuilds it)"])


def _verdict_section(d, c):
    d.h(1, "Verdicts: would zero-copy pay off, flow by flow?")
    d.p(baseline_sentence(c["meta"], c["base"]), "note")
    for n in c["notes"]:
        d.p(n, "bad")
    if not c["verdicts"]:
        d.p("No flow carried 1% of the bytes: no verdict.")
    for v in c["verdicts"]:
        cpu = v["cpu"]
        head = (f"**{v['flow']['label']}**: {100 * v['share']:.1f}% of the bytes"
                + (f"; {verdict.cpu_words(cpu)} ({cpu['samples']} samples)" if cpu else
                   "; no stack samples"))
        d.p(head, "answer")
        d.bullets([f"**{verdict.NAMES[alt]}**: {v['verdicts'][alt][1]}"
                   for alt in verdict.ALTERNATIVES])


def _b(v):
    return "–" if v is None else format_bytes(v)


def _flows_section(d, c):
    trace = c["trace"]
    d.h(1, "Processes and sockets: bytes and copies by kind")
    rows = [[pid, p.get("comm"), _b(p.get("tx_bytes")), p.get("tx_calls"),
             _b(p.get("tx_copy_bytes")) + (" (inferred)" if p.get("tx_copy_inferred") else ""),
             _b(p.get("zc_tx_bytes")), _b(p.get("tx_spliced_bytes")),
             _b(p.get("rx_copy_bytes")), p.get("rx_copy_calls")]
            for pid, p in sorted((trace.get("processes") or {}).items(), key=lambda kv: int(kv[0]))
            if p.get("tx_bytes") or p.get("rx_copy_bytes")]
    d.table(["pid", "comm", "sent", "send calls", "copied from user", "zero-copy (pinned)",
             "spliced", "copied to user", "receives"], rows, left=2)
    socks = trace.get("sockets")
    if not isinstance(socks, list):
        why = (trace.get("unavailable") or {}).get("sockets") or "this tracer counts per process"
        d.p(f"Per-socket counts unavailable: {why}.", "note")
        return
    srows = [[s.get("pid"), s.get("proto"), s.get("local"), s.get("peer") or "–",
              s.get("path"), _b(s.get("tx_bytes")), s.get("tx_calls"), _b(s.get("tx_copy_bytes")),
              _b(s.get("zc_tx_bytes")), _b(s.get("tx_spliced_bytes")), _copied_back(s),
              _b(s.get("rx_copy_bytes"))]
             for s in sorted(socks, key=lambda s: -((s.get("tx_bytes") or 0)
                                                   + (s.get("rx_copy_bytes") or 0)))]
    d.table(["pid", "proto", "local", "peer", "route", "sent", "sends", "copied from user",
             "zero-copy", "spliced", "copied back", "copied to user"], srows, left=5)
    d.p("Route: the device the socket's cached route left by when it was first counted "
        "(`unknown`: none cached, an unconnected UDP socket); copied back: its zero-copy "
        "bytes the kernel copied at delivery (the fallback copy), and of those, \"again\", "
        "the bytes it copied a second time: TCP segments retransmitted after they had "
        "arrived, whose pages were pinned once.")
    for note in _socket_gaps(trace):
        d.p(note, "bad")


def _copied_back(s):
    """A socket's fallback copy, and the part of it copied a second time."""
    again = s.get("fallback_copy_again_bytes")
    return _b(s.get("fallback_copy_bytes")) + (f" ({_b(again)} again)" if again else "")


def _socket_gaps(trace):
    """What the sockets do not hold of their processes' counts, said."""
    out = []
    if trace.get("sockets_untracked"):
        out.append(f"{trace['sockets_untracked']} event(s) found no socket record (more than "
                   f"the tracer's table holds): they are in their processes' counts only.")
    for pid, left in sorted((trace.get("sockets_unattributed") or {}).items()):
        parts = ", ".join(f"{k} {v}" for k, v in left.items() if v)
        why = (trace.get("unavailable") or {}).get("sockets.tx_bytes")
        out.append(f"pid {pid}: {parts} counted for the process and no socket"
                   + (f" ({why})" if why else " (a rung that cannot name the socket: "
                      "docs/tracer.md)") + ".")
    return out


def _histograms_section(d, c):
    d.h(2, "Send sizes and syscall latency")
    sampled = latency.sampling_sentence([c["trace"].get("latency")])
    if sampled:
        d.p(sampled, "note")
    for name, caption in (("send_sizes", "Send sizes per socket (log2 slots)"),
                          ("syscall_latency", "Syscall latency per process (log2 slots)")):
        f = c["plots"].get(name)
        if f:
            d.image(os.path.join(c["dir"], "plots", f), f"plots/{f}", caption)
    rows = []
    for pid, p in sorted((c["trace"].get("processes") or {}).items(), key=lambda kv: int(kv[0])):
        if not (p.get("tx_bytes") or p.get("rx_copy_bytes")):
            continue
        for name, s in sorted((p.get("syscalls") or {}).items()):
            rows.append([pid, p.get("comm"), name, s.get("count"), s.get("timed"),
                         _b(s.get("bytes")), s.get("errors"), f"{s.get('mean_us') or 0:.2f}",
                         f"{s.get('p50_us') or 0:.2f}", f"{s.get('p99_us') or 0:.2f}"])
    if rows:
        d.table(["pid", "comm", "syscall", "calls", "timed", "bytes", "errors", "mean µs",
                 "p50 µs", "p99 µs"], rows, left=3)


def _busy_comms(trace):
    """The command names of the processes that moved bytes."""
    return {p.get("comm") for p in (trace.get("processes") or {}).values()
            if p.get("tx_bytes") or p.get("rx_copy_bytes")}


def _cpu_section(d, c):
    d.h(1, "Where the CPU went")
    busy = _busy_comms(c["trace"])
    shown = {comm: a for comm, a in c["atts"].items() if comm in busy}
    if not shown:
        d.p("No stack samples of the commands that moved bytes (`--no-sample`, or too short "
            "a trace).")
    rest = {comm: a["samples"] for comm, a in c["atts"].items() if comm not in busy}
    if rest:
        d.p("Other followed commands, which moved no byte: "
            + ", ".join(f"`{comm}` ({n} samples)" for comm, n in sorted(rest.items())) + ".")
    for comm, a in shown.items():
        few = " (few samples: wide intervals)" if a.get("few_samples") else ""
        d.h(3, f"{comm}: {a['samples']} samples{few}")
        d.table(["category", "samples", "share [95%]"],
                [[attribution.LABELS.get(k, k), a["samples_by_category"][k],
                  f"{100 * a['share'][k]:.1f}% [{100 * a['share_ci95'][k][0]:.1f}–"
                  f"{100 * a['share_ci95'][k][1]:.1f}%]"]
                 for k in attribution.CATEGORIES if a["samples_by_category"].get(k)], left=1)
    f = c["plots"].get("categories")
    if f:
        d.image(os.path.join(c["dir"], "plots", f), f"plots/{f}",
                "Share of each command's samples by category, with 95% intervals")
    if c["flame"]:
        d.image(os.path.join(c["dir"], c["flame"]), c["flame"],
                "Flame graph of the followed processes, coloured by category",
                mime="image/svg+xml")
    for n in c["flame_notes"]:
        d.p(n, "note")


def _estimated(trace):
    out = []
    if trace.get("tx_copy_inferred"):
        out.append("the copy from user space is inferred (bytes sent less zero-copy and "
                   "spliced bytes): no probe on the copy itself here")
    if (trace.get("self") or {}).get("estimated"):
        out.append(f"the tracer's BPF time is scaled from the "
                   f"{100 * (trace['self'].get('sampled_share') or 0):.0f}% of the trace "
                   f"its run-time statistics were on")
    perf = trace.get("perf") or {}
    if perf.get("cycles") is None:
        out.append("cycles are not counted here (no hardware PMU): CPU shares come from "
                   "samples" + (" on the scheduler tick" if (trace.get("samples") or {})
                                .get("source") == "tick" else ""))
    unseen = (trace.get("zerocopy") or {}).get("zc_bytes_no_program_saw")
    if unseen:
        out.append(f"the fallback copy, counted where the skbs arrive, can miss up to "
                   f"{unseen} B of zero-copy skbs no program of ours saw leave or arrive "
                   f"(counted at their send; bench/NOTES.md, the end of \"Drops\")")
    skb = (trace.get("zerocopy") or {}).get("skb_programs") or {}
    if skb.get("mode") == "on-demand":
        out.append("the programs that look at every skb for zero-copy ones waited for a send "
                   "whose zero-copy bytes only they count, UDP's or io_uring's (the counting "
                   "level's default): " + _skb_programs_outcome(skb))
    for k, why in (trace.get("unavailable") or {}).items():
        out.append(f"`{k}` unavailable: {why}")
    return out


def _skb_programs_outcome(skb):
    """What the on-demand per-skb programs did: attached, or not, and why not."""
    if skb.get("attached"):
        return "attached then"
    if skb.get("zc_sends_before"):
        return (f"never attached; {skb['zc_sends_before']} zero-copy sends (TCP "
                "MSG_ZEROCOPY) counted their bytes at their end, their fallback copy unseen")
    return "never attached, none seen"


def _cost_section(d, c):
    trace = c["trace"]
    d.h(1, "Counters, estimates and the tracer's cost")
    perf = trace.get("perf") or {}
    d.table(["counter", "value"],
            [[k, "not countable here" if v is None else v] for k, v in perf.items()
             if not isinstance(v, (list, dict, bool))], left=1)
    est = _estimated(trace)
    if est:
        d.p("What was estimated or left out: " + "; ".join(est) + ".", "note")
    me = trace.get("self") or {}
    progs = [[name, p.get("target"), p.get("runs"), p.get("ns"),
              f"{p['ns'] / p['runs']:.0f}" if p.get("runs") else "–", p.get("skipped")]
             for name, p in sorted((me.get("programs") or {}).items())]
    per = (me.get("bpf_ns") or 0) / me["bpf_runs"] if me.get("bpf_runs") else None
    d.p(f"The tracer's BPF programs ran {me.get('bpf_runs', 0)} times for "
        f"{(me.get('bpf_ns') or 0) / 1e6:.1f} ms"
        + (f": {per:.0f} ns per event" if per else "")
        + (f", {me['ns_per_message']:.0f} ns per send call" if me.get("ns_per_message") else "")
        + f"; {trace.get('drops', 0)} event(s) dropped.")
    if progs:
        d.table(["program", "attached to", "runs", "ns", "ns per run", "skipped"], progs, left=2)


def _files_section(d, c):
    d.h(1, "Files")
    d.bullets([f"`{TRACE}`: the trace object (docs/tracer.md); `{FOLDED}`: its folded stacks",
               f"`{META}`: the command and the baseline the verdicts used; `{VERDICTS}`: "
               f"the verdicts as data",
               "`plots/*.png`, `flamegraph.svg`",
               "Rebuild: `netio-trace report DIR`"])


SECTIONS = (_trace_section, _verdict_section, _flows_section, _histograms_section,
            _cpu_section, _cost_section, _files_section)


def _flame(d, lines):
    """DIR/flamegraph.svg from the folded stacks: (file or None, notes)."""
    if not lines:
        return None, []
    try:
        flamegraph.render(os.path.join(d, FOLDED), os.path.join(d, "flamegraph.svg"),
                          "netio-trace: the followed processes")
        return "flamegraph.svg", []
    except Exception as e:
        return None, [f"flame graph: {type(e).__name__}: {e}"]


def build(d):
    """Write DIR/report.md, report.html, plots/ and flamegraph.svg; returns what it found."""
    trace, meta, lines, atts, vs, base, notes = analyse(d)
    busy = {comm: a for comm, a in atts.items() if comm in _busy_comms(trace)}
    plots, errors = trace_plots.make_all(trace, [v["flow"] for v in vs], busy,
                                         os.path.join(d, "plots"))
    flame, flame_notes = _flame(d, lines)
    c = {"dir": d, "trace": trace, "meta": meta, "atts": atts, "verdicts": vs, "base": base,
         "notes": notes, "plots": plots, "flame": flame,
         "flame_notes": flame_notes + [f"Plot not drawn: {e}" for e in errors],
         "machine": meta.get("machine") or {}}
    doc = docmod.Doc("netio-trace: where this program's bytes get copied, and whether "
                     "zero-copy would pay off")
    for section in SECTIONS:
        section(doc, c)
    for name, text in (("report.md", doc.markdown()), ("report.html", doc.html()),
                       (VERDICTS, json.dumps(verdicts_json(vs, base), indent=1))):
        with files.atomic_open(os.path.join(d, name)) as f:
            f.write(text)
    return {"verdicts": vs, "plots": plots, "plot_errors": errors, "baseline": base,
            "flame": flame}
