"""report.md and report.html (and results.csv, plots, flame graphs), rebuilt from runs.jsonl and
the folded stacks alone (and sweep.json where it is, for what the sweep asked for): `netio-trace
report DIR`.

Every figure is a median over repeats with its min and max; the answers (crossovers, why
zero-copy loses, threads) are computed from the data, never written in advance.
"""
import collections
import os
import time

from analysis import attribution, files, passes, record, results, stats, summary
from analysis import crossover
from report import breakdown, crossovers, latency, receive
from analysis.contract import (COMPARED_PAIRS, FIELD_STRATEGIES, STRATEGIES, STRATEGY_HELP,
                               TRANSPORTS, TRANSPORT_HELP, ZEROCOPY_PAIRS, ZEROCOPY_STRATEGIES)
from analysis.sizes import format_bytes, format_size
from report import doc as docmod
from report import flamegraph
from report import untraced

PAIRS = COMPARED_PAIRS
RETRANS_FLAG = 0.01


class ReportError(RuntimeError):
    pass


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _order(values, ref):
    rank = {v: i for i, v in enumerate(ref)}
    return sorted(set(values), key=lambda v: (rank.get(v, 99), v))


def _sz(n):
    return format_size(n) if n is not None else "?"


def _pct(x, digits=0):
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def _tput(runs, strategy, size, threads, transport):
    return stats.spread(r.get("throughput_gbps") for r in runs
                        if r["strategy"] == strategy and r["msg_size"] == size
                        and r["threads"] == threads and r["transport"] == transport)


# ---- the answers ---------------------------------------------------------------------------
def _paired(sub, a, b, size, th, tr):
    return stats.paired_ratios(sub, a, b, lambda r: r.get("throughput_gbps"), size, th, tr)


def _ratios(sub, a, b, size, th, tr):
    return stats.spread(_paired(sub, a, b, size, th, tr))


def crossover_findings(ok):
    """[(transport, threads, a, b, crossover dict, text)]. From the paired ratios b/a (same
    round, run next to each other): b overtakes a only where they decide it on both sides
    (analysis/crossover.py), else undecided; without paired rounds, where b's median
    throughput reaches a's."""
    out = []
    for tr in _order((r["transport"] for r in ok), TRANSPORTS):
        for th in sorted({r["threads"] for r in ok if r["transport"] == tr}):
            sub = [r for r in ok if r["transport"] == tr and r["threads"] == th]
            sizes = sorted({r["msg_size"] for r in sub})
            have = {r["strategy"] for r in sub}
            for a, b in PAIRS:
                if a not in have or b not in have:
                    continue
                ratios = [_ratios(sub, a, b, s, th, tr) for s in sizes]
                if any(ratios):
                    c = crossover.decided(sizes, [_paired(sub, a, b, s, th, tr) for s in sizes])
                    text = crossovers.text(a, b, c, f"{tr}, {th} thread(s)")
                else:
                    sa = [_tput(sub, a, s, th, tr) for s in sizes]
                    sb = [_tput(sub, b, s, th, tr) for s in sizes]
                    c = stats.crossover(sizes, [x["median"] if x else None for x in sa],
                                        [x["median"] if x else None for x in sb])
                    text = _crossover_text(a, b, c, sizes, ratios, th, tr)
                per = ", ".join(f"{_sz(s)} {stats.fmt_spread(x)}" for s, x in zip(sizes, ratios) if x)
                if per:
                    text += f" Paired {b}/{a} by size, median (min–max): {per}."
                text += _undecided_text(sub, a, b, sizes, th, tr)
                out.append((tr, th, a, b, c, text))
    return out


def _undecided_text(sub, a, b, sizes, th, tr):
    """The sizes where the paired ratios still straddle 1 after the extra rounds."""
    und = []
    for size in sizes:
        rs = _paired(sub, a, b, size, th, tr)
        if passes.undecided(rs):
            und.append(f"{_sz(size)} ({', '.join(f'{x:.2f}' for x in rs)})")
    if not und:
        return ""
    return (f" **Undecided** at {'; '.join(und)}: {b} was ahead in some rounds and behind in "
            f"others, extra rounds included, so this machine's noise decides nothing there.")


def _crossover_text(a, b, c, sizes, ratios, th, tr):
    where = f"{tr}, {th} thread(s)"
    lo, hi = _sz(sizes[0]), _sz(sizes[-1])
    rmap = dict(zip(sizes, ratios))
    if c["kind"] == "crosses":
        s0, s1 = c["between"]
        rs = rmap.get(s1)
        est = f" (interpolated ≈ {format_bytes(c['estimate'])})" if c.get("estimate") else ""
        t = (f"**{where}: {b} overtakes {a} between {_sz(s0)} and {_sz(s1)}**{est}, and stays "
             f"ahead up to {hi}.")
        if rs and rs["min"] < 1.0:
            t += (f" At {_sz(s1)} the paired ratios still reach down to {rs['min']:.2f}: the "
                  f"crossover is within this machine's noise there.")
        return t
    if c["kind"] == "always":
        return (f"**{where}: {b} is at or above {a} at every size from {lo} to {hi}** (no "
                f"crossover within the range: it is ahead already at {lo}).")
    if c["kind"] == "never":
        return f"**{where}: {b} does not overtake {a} within the range {lo}–{hi}**."
    if c["kind"] == "unclear":
        ahead = [_sz(s) for s, x in zip(sizes, ratios) if x and x["median"] >= 1.0]
        return (f"**{where}: no single crossover of {b} over {a}**: {b} is ahead only at "
                f"{', '.join(ahead) or 'no size'}, behind elsewhere (this machine's noise can "
                f"flip close calls).")
    return f"{where}: not enough data to compare {a} and {b}."


def zerocopy_findings(answers, traced):
    """Why zero-copy loses (or not), per transport and zero-copy strategy (against the copy it
    replaces), at the largest size and smallest threads: throughput from the answer runs, the
    evidence (COPIED, bytes, cycles) from the traced."""
    out = []
    for tr in _order((r["transport"] for r in answers), TRANSPORTS):
        for copy, zcs in ZEROCOPY_PAIRS:
            text = _zerocopy_finding(answers, traced or answers, tr, copy, zcs)
            if text:
                out.append((tr, text))
    return out


def _zerocopy_finding(answers, ok, tr, copy, zcs):
    """One paragraph on zcs against copy over tr: the verdict, what the completions said, the
    bytes the tracer saw, where the cycles go and the pages pinned, as far as known."""
    zc = [r for r in ok if r["transport"] == tr and r["strategy"] == zcs]
    if not zc:
        return None
    size = max(r["msg_size"] for r in zc)
    th = min(r["threads"] for r in zc)
    zc_top = [r for r in zc if r["msg_size"] == size and r["threads"] == th]
    one = [r for r in ok if r["transport"] == tr and r["strategy"] == copy
           and r["msg_size"] == size and r["threads"] == th]
    rs = _paired(answers, copy, zcs, size, th, tr)
    ratio = stats.spread(rs)
    lines = [_zc_verdict(tr, copy, zcs, size, th, rs, ratio),
             _zc_completions(zc, zcs), _zc_bytes_seen(zc, tr),
             *_zc_cycles(zc_top, one, copy, zcs, size, ratio), _zc_pinned(zc_top, size)]
    return " ".join(line for line in lines if line)


def _zc_verdict(tr, copy, zcs, size, th, rs, ratio):
    head = f"**{tr}, {zcs}**"
    if ratio:
        verdict = {"ahead": "beats", "behind": "loses to",
                   "undecided": "is undecided against"}[passes.verdict(rs)]
        head += (f": at {_sz(size)}, {th} thread(s), {zcs} {verdict} {copy} — "
                 f"{zcs}/{copy} throughput = {stats.fmt_spread(ratio)} (paired rounds).")
    return head


def _zc_completions(zc, zcs):
    """What the completions' COPIED flag said, over every run of zcs."""
    copied = stats.spread(summary.copied_pct(r) for r in zc)
    flag = ("`SO_EE_CODE_ZEROCOPY_COPIED`" if zcs == "zero-copy"
            else "`IORING_NOTIF_USAGE_ZC_COPIED`")
    if not copied:
        return None
    if copied["min"] >= 99.0:
        return (f"Every {zcs} completion came back flagged "
                f"{flag} ({stats.fmt_spread(copied, '{:.1f}', '%')} "
                f"of completions over all {len(zc)} {zcs} runs): the kernel "
                f"copied the pinned pages anyway when it delivered the data locally.")
    if copied["max"] <= 1.0:
        return (f"Completions came back without the COPIED flag "
                f"({stats.fmt_spread(copied, '{:.1f}', '%')} flagged {flag}): the "
                f"pages went out without a deferred copy on this path.")
    return f"{stats.fmt_spread(copied, '{:.1f}', '%')} of the completions were flagged COPIED."


def _share_of_sent(zc, field):
    """The spread over runs of trace[field] / bytes_sent, where the tracer counted it."""
    return stats.spread((_num((r.get("trace") or {}).get(field)) or 0) / r["bytes_sent"]
                        for r in zc
                        if r.get("bytes_sent") and (r.get("trace") or {}).get(field) is not None)


def _zc_bytes_seen(zc, tr):
    """The share of the sent bytes the tracer saw leave as zero-copy, and copied back."""
    fb = _share_of_sent(zc, "fallback_copy_bytes")
    zcb = _share_of_sent(zc, "zc_tx_bytes")
    if not (zcb or fb):
        return None
    return (f"The tracer saw {stats.fmt_spread(_scale(zcb), '{:.1f}', '%')} of the "
            f"sent bytes leave as zero-copy (user pages pinned into the skb) and "
            f"{stats.fmt_spread(_scale(fb), '{:.1f}', '%')} of them copied by the "
            f"fallback (`skb_copy_ubufs`"
            + (", which only local delivery, a fragmenting IP or a packet socket "
               "calls)." if tr == "forward" else ", at local delivery)."))


def _zc_cycles(zc_top, one, copy, zcs, size, ratio):
    """Where zcs's cycles go at the largest size, and its bill against copy's one copy."""
    att = [r.get("attribution") for r in zc_top if r.get("attribution")]
    if not att:
        return []
    lines = []
    est = any(a.get("estimated") for a in att)
    sh = {c: stats.spread((a.get("share") or {}).get(c) for a in att)
          for c in results.CATEGORIES}
    cpb = {c: stats.spread((a.get("cycles_per_byte") or {}).get(c) for a in att)
           for c in results.CATEGORIES}
    parts = []
    for c, label in (("fallback_copy", "the fallback copy"), ("pinning", "page pinning"),
                     ("completion", "completion handling"),
                     ("kernel_tx_copy", "a kernel tx copy")):
        if sh[c]:
            parts.append(f"{label} {_pct(sh[c]['median'], 1)} of the samples"
                         f"{_interval(att, c)} "
                         f"({stats.fmt_spread(cpb[c], '{:.2f}')} cycles/B)")
    if parts:
        lines.append(f"Where {zcs}'s cycles go at {_sz(size)}"
                     + (" (estimated cycles: no PMU)" if est else "") + ": "
                     + "; ".join(parts) + ".")
    besides = breakdown.besides_copies(att, zcs)
    if besides:
        lines.append(besides)
    oatt = [r.get("attribution") for r in one if r.get("attribution")]
    if oatt and cpb.get("fallback_copy") and cpb["fallback_copy"]["median"] > 0:
        one_copy = stats.spread((a.get("cycles_per_byte") or {}).get("kernel_tx_copy")
                                for a in oatt)
        zc_extra = sum((cpb[c] or {}).get("median", 0) for c in
                       ("fallback_copy", "pinning", "completion"))
        if one_copy:
            lines.append(
                f"{copy} pays one kernel copy ({stats.fmt_spread(one_copy, '{:.2f}')} "
                f"cycles/B); {zcs} pays pinning + completions + the fallback copy "
                f"(≈ {zc_extra:.2f} cycles/B together): it does the copy after all and "
                f"the bookkeeping on top"
                + (", so it loses." if ratio and ratio["median"] < 1 else "."))
    return lines


def _zc_pinned(zc_top, size):
    pinned = stats.spread(_num((r.get("trace") or {}).get("pinned_pages")) for r in zc_top)
    if pinned:
        return f"Pages pinned per run at {_sz(size)}: {stats.fmt_spread(pinned, '{:.0f}')}."
    return None


def forward_findings(answers, traced):
    """Where zero-copy wins: on forward nothing receives, so nothing copies a zero-copy skb
    back. Per zero-copy strategy and thread count: where it overtakes the copy it replaces, by
    size, from the paired ratios; the completions flagged COPIED and the tracer's fallback copy
    as observed. [] without forward runs."""
    out = []
    fw = [r for r in answers if r["transport"] == "forward"]
    ev = [r for r in (traced or answers) if r["transport"] == "forward"]
    for copy, zcs in ZEROCOPY_PAIRS:
        for th in sorted({r["threads"] for r in fw}):
            sub = [r for r in fw if r["threads"] == th]
            if not {copy, zcs} <= {r["strategy"] for r in sub}:
                continue
            sizes = sorted({r["msg_size"] for r in sub})
            ratios = [_ratios(sub, copy, zcs, s, th, "forward") for s in sizes]
            if not any(ratios):
                continue
            c = crossover.decided(sizes, [_paired(sub, copy, zcs, s, th, "forward")
                                          for s in sizes])
            text = crossovers.text(copy, zcs, c, f"forward, {th} thread(s)")
            per = ", ".join(f"{_sz(s)} {stats.fmt_spread(x)}" for s, x in zip(sizes, ratios) if x)
            text += f" Paired {zcs}/{copy} throughput by size, median (min–max): {per}."
            text += _kept_text([r for r in ev if r["strategy"] == zcs and r["threads"] == th], zcs)
            out.append(text)
    return out


def _kept_text(zc, zcs):
    """What the kernel did with the zero-copy pages, as observed: COPIED completions and the
    tracer's fallback copy."""
    if not zc:
        return ""
    comp = sum(_num((r.get("zerocopy") or {}).get("completions")) or 0 for r in zc)
    copied = sum(_num((r.get("zerocopy") or {}).get("copied")) or 0 for r in zc)
    text = (f" {copied} of {comp} completions ({_pct(copied / comp, 1) if comp else 'n/a'}) "
            f"came back flagged COPIED over {len(zc)} {zcs} run(s)")
    fb = [_num((r.get("trace") or {}).get("fallback_copy_bytes")) for r in zc if r.get("trace")]
    fb = [x for x in fb if x is not None]
    if fb:
        text += f"; the tracer's fallback copy: {format_bytes(sum(fb))} over {len(fb)} traced run(s)"
    text += "."
    if comp and copied == 0 and fb and sum(fb) == 0:
        text += " The kernel kept the user's pages all the way: zero-copy really was zero-copy."
    elif comp and copied:
        text += (" The kernel copied some of them after all (an older kernel copies every "
                 "received skb before forwarding it; a packet socket on the path copies too).")
    return text


def local_contrast(answers):
    """One line per local transport (veth, loopback): zero-copy against its copy at the largest
    size, where every zero-copy send ends in the fallback copy at local delivery."""
    out = []
    for tr in _order((r["transport"] for r in answers if r["transport"] != "forward"), TRANSPORTS):
        for copy, zcs in ZEROCOPY_PAIRS:
            sub = [r for r in answers if r["transport"] == tr]
            if not {copy, zcs} <= {r["strategy"] for r in sub}:
                continue
            size = max(r["msg_size"] for r in sub if r["strategy"] == zcs)
            th = min(r["threads"] for r in sub)
            rs = _paired(sub, copy, zcs, size, th, tr)
            if rs:
                out.append(f"{tr}: {zcs}/{copy} = {stats.fmt_spread(stats.spread(rs))} at "
                           f"{_sz(size)}, {th} thread(s)")
    return out


def path_warnings(answers):
    """Forward runs with a packet socket on the path, or datagrams lost before the forwarding
    namespace."""
    out = []
    ps = [r for r in answers if ((r.get("forward") or {}).get("packet_sockets") or 0) > 0]
    if ps:
        out.append(f"{len(ps)} forward run(s) had an AF_PACKET socket open in their namespaces "
                   f"(tcpdump, say): a packet socket on the path copies every zero-copy skb it "
                   f"sees, so zero-copy there turns into copies.")
    lost = [r for r in answers if ((r.get("forward") or {}).get("datagrams_lost") or 0) > 0]
    if lost:
        n = sum(r["forward"]["datagrams_lost"] for r in lost)
        out.append(f"{len(lost)} forward run(s) lost {n} datagram(s) before the forwarding "
                   f"namespace's interface (UDP drops under load); their throughput is what "
                   f"the sender sent.")
    return out


def strategy_notes(runs):
    """How each strategy that ran builds and sends a message, and the transports it ran on:
    the strategies that do not send 8 heap fields say so."""
    ran = _order((r["strategy"] for r in runs), STRATEGIES)
    trs = _order((r["transport"] for r in runs), TRANSPORTS)
    notes = [f"`{s}`: {STRATEGY_HELP[s]}" + ("" if s in FIELD_STRATEGIES else
                                              " (**not** the 8 heap fields)")
             for s in ran if s in STRATEGY_HELP]
    notes += [f"transport `{t}`: {TRANSPORT_HELP[t]}" for t in trs if t in TRANSPORT_HELP]
    return notes


def _interval(attributions, category):
    """ " [95%: lo–hi]" of a category's share in the run with the most samples, flagged when
    that run has too few samples for the share to mean much."""
    best = max(attributions, key=lambda a: a.get("samples") or 0)
    ci = (best.get("share_ci95") or {}).get(category)
    if not ci:
        return ""
    few = (f", only {best.get('samples')} samples" if (best.get("samples") or 0)
           < attribution.FEW_SAMPLES else "")
    return f" [95%: {_pct(ci[0], 1)}–{_pct(ci[1], 1)}{few}]"


def _scale(s):
    if not s:
        return s
    return {k: (v * 100 if k != "n" else v) for k, v in s.items()}


def _cs(r, per):
    cs = results.perf_value(r.get("perf"), "context_switches")
    if cs is None:
        return None
    if per == "MiB":
        return cs / (r["bytes_sent"] / 2 ** 20) if r.get("bytes_sent") else None
    return cs / r["duration_s"] if r.get("duration_s") else None


def threads_findings(ok, cores, traced=None):
    """How thread count changes throughput (from ok, the answer runs) and context switches
    (from the traced runs, whose perf counters count them), at the largest size."""
    traced = ok if traced is None else traced
    out = []
    beyond = []
    for tr in _order((r["transport"] for r in ok), TRANSPORTS):
        sub = [r for r in ok if r["transport"] == tr]
        threads = sorted({r["threads"] for r in sub})
        if len(threads) < 2:
            continue
        size = max(r["msg_size"] for r in sub)
        for st in _order((r["strategy"] for r in sub), STRATEGIES):
            meds, cs_mib, cs_s = {}, {}, {}
            for th in threads:
                rs = [r for r in sub if r["strategy"] == st and r["msg_size"] == size
                      and r["threads"] == th]
                sp = stats.spread(r.get("throughput_gbps") for r in rs)
                if sp:
                    meds[th] = sp
                rs = [r for r in traced if r["transport"] == tr and r["strategy"] == st
                      and r["msg_size"] == size and r["threads"] == th]
                cm = stats.spread(_cs(r, "MiB") for r in rs)
                if cm:
                    cs_mib[th] = cm
                cps = stats.spread(_cs(r, "s") for r in rs)
                if cps:
                    cs_s[th] = cps
            if len(meds) < 2:
                continue
            t0, t1 = min(meds), max(meds)
            best = max(meds, key=lambda t: meds[t]["median"])
            gain = meds[t1]["median"] / meds[t0]["median"] if meds[t0]["median"] else float("nan")
            seq = ", ".join(f"{t}: {stats.fmt_spread(meds[t], '{:.1f}')}" for t in sorted(meds))
            text = (f"**{tr}, {st}, {_sz(size)}**: Gbit/s by threads — {seq}; {t1} vs {t0} "
                    f"thread(s) ×{gain:.2f}, best at {best}.")
            if cs_mib.get(t0) and cs_mib.get(t1):
                c0, c1 = cs_mib[t0]["median"], cs_mib[t1]["median"]
                way = "fall" if c1 < c0 else "rise"
                text += (f" Context switches {way} from {c0:.1f} to {c1:.1f} per MiB "
                         f"({cs_s[t0]['median'] / 1000:.0f}k/s to {cs_s[t1]['median'] / 1000:.0f}k/s).")
            out.append(text)
            if cores and any(t > cores for t in meds) and cores in meds:
                top = max(t for t in meds)
                beyond.append((st, meds[cores]["median"], meds[top]["median"], top))
    if beyond and cores:
        changes = ", ".join(f"{st} ×{b / a:.2f}" for st, a, b, top in beyond if a)
        top = beyond[0][3]
        flat = all(abs(b / a - 1) < 0.15 for st, a, b, _ in beyond if a)
        out.append(f"This machine has {cores} core(s), shared by the sender threads, the receiver "
                   f"threads and both ends' softirq work. From {cores} to {top} thread(s) "
                   f"throughput changes by {changes}"
                   + (": past the core count more threads buy (almost) nothing." if flat else "."))
    return out


# ---- flame graphs ------------------------------------------------------------------------
def _read_folded(path):
    counts = collections.Counter()
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                stack, _, n = line.rpartition(" ")
                try:
                    counts[stack] += int(n)
                except ValueError:
                    continue
    except OSError:
        return None
    return counts


def _write_folded(path, counts):
    with files.atomic_open(path) as f:
        for stack, n in sorted(counts.items()):
            f.write(f"{stack} {n}\n")


def flame_graphs(out_dir, ok):
    """Per strategy at the largest size (smallest thread count, repeats merged) and the one-copy
    vs zero-copy differential. Returns ([(caption, svg rel or None, folded rel)], notes)."""
    fg_dir = os.path.join(out_dir, "flamegraphs")
    os.makedirs(fg_dir, exist_ok=True)
    notes, items = [], []
    for tr in _order((r["transport"] for r in ok), TRANSPORTS):
        sub = [r for r in ok if r["transport"] == tr and (r.get("files") or {}).get("folded")]
        if not sub:
            continue
        size = max(r["msg_size"] for r in sub)
        th = min(r["threads"] for r in sub if r["msg_size"] == size)
        merged = {}
        for st in _order((r["strategy"] for r in sub), STRATEGIES):
            counts = collections.Counter()
            n = 0
            for r in sub:
                if r["strategy"] == st and r["msg_size"] == size and r["threads"] == th:
                    c = _read_folded(os.path.join(out_dir, r["files"]["folded"]))
                    if c:
                        counts.update(c)
                        n += 1
            if not counts:
                continue
            merged[st] = counts
            base = f"{tr}-{st}-{format_size(size)}"
            folded_rel = f"flamegraphs/{base}.folded"
            _write_folded(os.path.join(out_dir, folded_rel), counts)
            svg_rel = f"flamegraphs/{base}.svg"
            title = f"{st}, {format_size(size)}, {th} thread(s), {tr} ({n} run(s) merged)"
            ok_svg = _render("render", notes, os.path.join(out_dir, folded_rel),
                             os.path.join(out_dir, svg_rel), title)
            items.append((f"Flame graph: {title}", svg_rel if ok_svg else None, folded_rel))
        if "one-copy" in merged and "zero-copy" in merged:
            base = f"{tr}-diff-one-copy-vs-zero-copy-{format_size(size)}"
            svg_rel = f"flamegraphs/{base}.svg"
            a = os.path.join(out_dir, f"flamegraphs/{tr}-one-copy-{format_size(size)}.folded")
            b = os.path.join(out_dir, f"flamegraphs/{tr}-zero-copy-{format_size(size)}.folded")
            title = f"one-copy → zero-copy, {format_size(size)}, {th} thread(s), {tr}"
            ok_svg = _render("diff", notes, a, b, os.path.join(out_dir, svg_rel),
                             title)
            items.append((f"Differential flame graph: {title} (red: more samples in zero-copy, "
                           f"blue: fewer)", svg_rel if ok_svg else None, None))
    return items, notes


def _render(fn, notes, *args):
    """flamegraph.<fn>(*args) (render or diff, the SVG path second to last): whether the SVG
    exists; a failure (inferno missing, a bad stack) becomes a note of the report."""
    try:
        getattr(flamegraph, fn)(*args)
        return os.path.exists(args[-2])
    except Exception as e:
        notes.append(f"flame graph {os.path.basename(args[-2])}: {type(e).__name__}: {e}")
        return False


# ---- the document --------------------------------------------------------------------------
def _machine(runs):
    for r in runs:
        if isinstance(r.get("machine"), dict):
            return r["machine"]
    return {}


def _attach_summary(ok):
    per = collections.defaultdict(collections.Counter)
    for r in ok:
        for k, v in ((r.get("trace") or {}).get("attach") or {}).items():
            per[k][v] += 1
    return per


def _missing_counters(ok):
    miss = collections.Counter()
    for r in ok:
        for e in (r.get("perf") or {}).get("unsupported") or []:
            miss[e] += 1
    return miss


def _sweep_desc(runs):
    def join(vals, f=str):
        return ",".join(f(v) for v in vals)
    st = _order((r["strategy"] for r in runs), STRATEGIES)
    sizes = sorted({r["msg_size"] for r in runs})
    th = sorted({r["threads"] for r in runs})
    tr = _order((r["transport"] for r in runs), TRANSPORTS)
    reps = sorted({r["repeat"] for r in runs})
    durs = sorted({r.get("duration_requested_s") for r in runs if r.get("duration_requested_s")})
    return (f"strategies {join(st)}; sizes {join(sizes, format_size)}; threads {join(th)}; "
            f"transport {join(tr)}; {len(reps)} interleaved round(s)"
            + (f" of {join(durs, lambda d: f'{d:g}')} s per run" if durs else ""))


def _passes_note(answers, traced, answers_traced, source, why_untraced=None):
    """Which pass each figure comes from (docs/DESIGN.md, "Two passes"); why_untraced: why no
    traced run succeeded (report/untraced.py)."""
    if not traced:
        why = why_untraced or "measured without the tracer"
        return (f"{why[0].upper()}{why[1:]}: throughput and latency are the workloads' own; "
                "there is no copy accounting, syscall histogram or stack here.")
    sampling = (f"stack sampling on {', '.join(f'`{x}`' for x in source)}" if source
                else "no stack sampling")
    if answers_traced:
        selfns = stats.spread(_num(((r.get("trace") or {}).get("self") or {})
                                   .get("ns_per_message")) for r in traced)
        return ("**Throughput and latency were measured with the tracer attached** "
                f"(`--trace-only`: {len(traced)} traced runs, no untraced pass): copy "
                f"accounting, syscall histograms, {sampling} and perf counters slowed the "
                "workloads, by a share that can differ between strategies: its BPF programs "
                "alone took " + (f"{stats.fmt_spread(selfns, '{:.0f}')} ns per message"
                                 if selfns else "an unknown time")
                + " (from `bpf_stats`). Run without `--trace-only` for answers the instrument "
                "does not bend."
                + (" Sampling on `cpu-clock` takes a timer interrupt per sample, which in a VM "
                   "costs an exit each: `--sample-source tick` samples on the scheduler tick, "
                   "which fires anyway." if "cpu-clock" in source else ""))
    return (f"Every answer below (throughput, latency, retransmits, comparisons, crossovers) "
            f"comes from the **untraced pass** ({len(answers)} runs with nothing of the tracer "
            f"attached); copy bytes, attribution, histograms and flame graphs come from the "
            f"**traced pass** ({len(traced)} runs: copy accounting, syscall histograms, "
            f"{sampling} and perf counters). Each configuration ran in both passes in the same "
            f"rounds, so what the tracer cost is measured below, per configuration.")


def tracer_cost_rows(runs):
    """[transport, threads, size, strategy, kept (median, min–max), rounds] per configuration
    that ran in both passes."""
    cost = passes.tracer_cost(runs)
    so = {s: i for i, s in enumerate(STRATEGIES)}
    to = {t: i for i, t in enumerate(TRANSPORTS)}
    keys = sorted(cost, key=lambda k: (to.get(k[3], 9), k[2], k[1], so.get(k[0], 9)))
    return [[k[3], k[2], format_size(k[1]), k[0], stats.fmt_spread(cost[k]), cost[k]["n"]]
            for k in keys]


def _tracer_cost_section(d, runs, selfns, sweep=None):
    d.h(2, "What the instrument cost in this sweep")
    rows = tracer_cost_rows(runs)
    if not rows:
        d.p(f"No configuration ran both untraced and traced {untraced.one_pass_why(runs, sweep)}: "
            "the tracer's cost was not measured in this sweep.")
        return
    d.p("Throughput the workloads kept with the tracer attached: traced / untraced, paired "
        "within a round (the two runs of a configuration run next to each other), median "
        "(min–max). 1.00 is free; the answers above do not carry this cost."
        + (f" Its BPF programs alone took {stats.fmt_spread(selfns, '{:.0f}')} ns per message "
           "(`bpf_stats`)." if selfns else ""))
    d.table(["transport", "threads", "size", "strategy", "kept (min–max)", "rounds"], rows,
            left=4)


class _Context:
    """What every section of the report reads: the runs split by pass, the machine, how the
    traced pass sampled, the plots and flame graphs drawn."""

    def __init__(self, out_dir, runs, plot_files, plot_errors, flames, flame_notes, sweep=None):
        # the sections compare strategies on the runs that receive by copy; "Receive" reads all
        self.all_runs = runs
        runs = passes.copy_receive(runs)
        self.out_dir, self.runs, self.sweep = out_dir, runs, sweep
        self.why_untraced = untraced.why_untraced(runs, sweep)
        self.ok = [r for r in runs if results.ok(r)]
        self.answers, self.traced, self.answers_traced = passes.split(runs)
        self.bad = [r for r in runs if not results.ok(r)]
        self.m = _machine(runs)
        self.estimated = any((r.get("attribution") or {}).get("estimated") for r in self.traced)
        self.per = _attach_summary(self.traced)
        self.source = sorted({(r.get("attribution") or {}).get("source")
                              for r in self.traced} - {None})
        self.plot_files, self.plot_errors = plot_files, plot_errors
        self.flames, self.flame_notes = flames, flame_notes


def _machine_section(d, c):
    """The machine, the sweep, which pass answers what, how cycles were counted."""
    runs, ok, answers, traced, answers_traced, bad, m, estimated, source = (
        c.runs, c.ok, c.answers, c.traced, c.answers_traced, c.bad, c.m, c.estimated,
        c.source
    )
    d.h(1, "Machine and sweep")
    d.bullets([
        f"Machine: `{m.get('hostname', '?')}`, {m.get('cpu', '?')}, {m.get('cores', '?')} core(s), "
        f"{m.get('memory_gib', '?')} GiB" + (f", {m['virtualization']}" if m.get("virtualization") else ""),
        f"Kernel: `{m.get('kernel', '?')}` ({m.get('arch', '?')}); system default congestion "
        f"control `{m.get('default_cc', '?')}`, runs use per-socket "
        + ", ".join(f"`{cc}`" for cc in sorted({(r.get('tcp') or {}).get('cc') for r in ok}
                                               - {None})),
        f"Sweep: {_sweep_desc(runs)}",
        f"Runs: {len(runs)} recorded, {len(ok)} ok, {len(bad)} failed or inconsistent",
        f"Report built {time.strftime('%Y-%m-%d %H:%M:%S')} from `runs.jsonl` and the folded stacks",
    ])
    d.p("Every figure below is the median over the repeats with its min–max range; strategies "
        "ran in interleaved rounds (every configuration once, then again), and ratios are paired "
        "within a round. Latency here is duration × threads / messages (mean time per message on "
        "one connection); per-call syscall latency comes from the tracer's histograms.")
    d.p(_passes_note(answers, traced, answers_traced, source, c.why_untraced), "note")
    sampled = latency.sampling_sentence((r.get("trace") or {}).get("latency") for r in ok)
    if sampled:
        d.p(sampled, "note")
    timer_sources = [s for s in source if s in ("cpu-clock", "tick")]
    timer_text = " and ".join({"cpu-clock": "the software `cpu-clock` timer",
                               "tick": "the scheduler tick"}[s] for s in timer_sources)
    if estimated:
        d.p("Cycle figures are **estimated**: this machine has no usable hardware PMU, so total "
            "cycles = task-clock × TSC rate"
            + (f" and stack samples come from {timer_text} (which cannot fire while "
               "interrupts are off: that time shows up at `_raw_spin_unlock_irqrestore` / "
               "`handle_softirqs`)" if timer_text else "")
            + ". Cells marked (est.) are such estimates.", "note")
    elif timer_text:
        d.p(f"Stack samples come from {timer_text}, which cannot fire while interrupts are "
            "off: that time shows up at `_raw_spin_unlock_irqrestore` / `handle_softirqs`.",
            "note")


def _headline_section(d, c):
    """The headline plot, first thing on the page."""
    out_dir, estimated, plot_files = c.out_dir, c.estimated, c.plot_files
    if plot_files.get("cycles_per_byte"):
        d.h(2, "Headline: what each copy costs")
        f = plot_files["cycles_per_byte"]
        d.image(os.path.join(out_dir, "plots", f), f"plots/{f}",
                "Cycles per byte, stacked by category, per strategy and size"
                + (" (estimated: no PMU)" if estimated else ""))


def _forward_section(d, c):
    """How each strategy sends; where zero-copy wins on forward, against the local paths."""
    d.h(2, "How the strategies in this sweep send a message")
    d.bullets(strategy_notes(c.runs))
    ff = forward_findings(c.answers, c.traced)
    if ff:
        d.h(2, "Where zero-copy wins: the forward path (nothing receives)")
        for text in ff:
            d.p(text, "answer")
        lc = local_contrast(c.answers)
        if lc:
            d.p("Against the local paths, where every zero-copy send ends in the fallback copy "
                "at local delivery (paired throughput ratios): " + "; ".join(lc)
                + ". There zero-copy does the copy after all, and the pinning and completions "
                "on top: see below.", "answer")
    for w in path_warnings(c.answers):
        d.p(w, "bad")


def _answers_section(d, c):
    """How strategies send, where zero-copy wins, crossovers, why zero-copy loses, threads."""
    answers, traced, m = c.answers, c.traced, c.m
    d.h(1, "Answers")
    _forward_section(d, c)
    d.h(2, "Crossovers: where one strategy overtakes another")
    cf = crossover_findings(answers)
    if cf:
        for *_, text in cf:
            d.p(text, "answer")
    else:
        d.p("Not enough strategies in this sweep to compare.")
    d.h(2, "Why zero-copy loses on local paths, path by path")
    zf = zerocopy_findings(answers, traced)
    if zf:
        for tr, text in zf:
            d.p(text, "answer")
    else:
        d.p("No zero-copy run in this sweep.")
    sf = breakdown.size_findings(traced)
    if sf:
        d.h(2, "Where the cycles go: the copies against the per-call work")
        for text in sf:
            d.p(text, "answer")
    d.h(2, "Threads: throughput and context switches")
    tf = threads_findings(answers, m.get("cores"), traced)
    if tf:
        d.bullets(tf)
    else:
        d.p("Only one thread count in this sweep.")


def _flags_section(d, c):
    """Runs to read with care: retransmits, failures, the checks made."""
    ok, answers, bad = c.ok, c.answers, c.bad
    d.h(2, "Runs to read with care")
    flagged = [(r, record.retrans_share(r)) for r in answers]
    flagged = [(r, s) for r, s in flagged if s is not None and s > RETRANS_FLAG]
    if flagged:
        d.p(f"{len(flagged)} run(s) retransmitted more than {RETRANS_FLAG:.0%} of their segments "
            f"(congestion control or pacing, not copies, may bound them):", "bad")
        d.table(["run", "cc", "retrans", "segments", "share", "Gbit/s"],
                [[r.get("key") or results.key_of(r), (r.get("tcp") or {}).get("cc"),
                  (r.get("tcp") or {}).get("retrans"), (r.get("tcp") or {}).get("segs_out"),
                  _pct(s, 1), f"{r['throughput_gbps']:.2f}"] for r, s in flagged])
    else:
        d.p(f"No run retransmitted more than {RETRANS_FLAG:.0%} of its segments.")
    if bad:
        d.p(f"{len(bad)} run(s) failed or were inconsistent (kept out of every figure):", "bad")
        d.table(["run", "status", "reason"],
                [[r.get("key") or results.key_of(r), r.get("status"), r.get("error") or ""]
                 for r in bad], left=3)
    else:
        d.p("Every run was consistent: bytes sent = bytes received" + _tracer_checks(ok) + ".")


def _tracer_section(d, c):
    """Rungs, counters, the tracer's cost, samples too few to trust."""
    runs, ok, traced, per = c.runs, c.ok, c.traced, c.per
    d.h(1, "Tracer: attach rungs and counters")
    if per:
        d.table(["probe point", "rung used (runs)"],
                [[k, ", ".join(f"{v} ({n})" for v, n in cnt.most_common())] for k, cnt in sorted(per.items())],
                left=2)
    else:
        d.p(f"No run was traced: {c.why_untraced or 'no traced run succeeded'}.")
    miss = _missing_counters(ok)
    if miss:
        d.p("Counters missing on this machine (reported empty, never 0): "
            + ", ".join(f"`{e}`" for e in sorted(miss)) + ".", "note")
    elif per:
        d.p("Every perf counter was countable.")
    selfns = stats.spread(_num(((r.get("trace") or {}).get("self") or {}).get("ns_per_message"))
                          for r in traced)
    _tracer_cost_section(d, runs, selfns, c.sweep)
    few = [r for r in traced if (r.get("attribution") or {}).get("few_samples")]
    if few:
        d.p(f"{len(few)} traced run(s) have fewer than {attribution.FEW_SAMPLES} stack samples: "
            "their category shares are wide (each share's 95% interval is in runs.jsonl, "
            "`attribution.share_ci95`): " + ", ".join(
                f"`{r.get('key') or results.key_of(r)}` ({r['attribution']['samples']})"
                for r in few[:8]) + (" …" if len(few) > 8 else ""), "note")
    drops = sum(_num((r.get("trace") or {}).get("drops")) or 0 for r in ok)
    if drops:
        causes = _drop_causes(ok)
        d.p(f"The tracer dropped {drops} event(s) over the sweep"
            + (f" ({causes})" if causes else "") + ".", "bad")


def _drop_causes(runs):
    """"thread_storage 2, process_stats 1": the causes of the runs' drops, summed."""
    total = {}
    for r in runs:
        for cause, n in ((r.get("trace") or {}).get("drops_by_cause") or {}).items():
            total[cause] = total.get(cause, 0) + (_num(n) or 0)
    return ", ".join(f"{c} {n}" for c, n in total.items() if n)


def _summary_section(d, c):
    """The summary table and every configuration."""
    answers, traced, estimated, source = c.answers, c.traced, c.estimated, c.source
    d.h(1, "Summary per strategy and size")
    rows = summary.rows(answers, traced=traced)
    if rows:
        est = " (est.)" if estimated else ""
        header = ["transport", "strategy", "size", "Gbit/s (min–max)", "µs/msg"] + \
            [f"cyc/B {summary.SHORT[c]}{est}" for c in results.CATEGORIES] + \
            [f"cyc/B total{est}", "zc COPIED %", "p99 send µs"]
        body = []
        for r in rows:
            body.append([r["transport"], r["strategy"], format_size(r["msg_size"]),
                         stats.fmt_spread(r["throughput"]), stats.fmt_spread(r["latency"], "{:.1f}")]
                        + [_m(r["cpb"][c]) for c in results.CATEGORIES]
                        + [stats.fmt_spread(r["cpb_total"]),
                           _m(r["copied_pct"], "{:.0f}") if r["strategy"] in ZEROCOPY_STRATEGIES else "–",
                           _m(r["send_p99"], "{:.1f}")])
        d.p(f"{rows[0]['threads']} thread(s); medians over repeats (throughput and total with "
            f"min–max). Cycles per byte = share of samples × total cycles / payload bytes"
            + (", estimated" if estimated else "") + f"; samples on {', '.join(source) or 'n/a'}.")
        d.table(header, body, left=3)
    d.h(2, "Every configuration")
    d.table(["transport", "threads", "size", "strategy", "Gbit/s (min–max)", "µs/msg (min–max)",
             "retrans", "runs"],
            _all_rows(answers), left=4)


def _plots_section(d, c):
    """Every plot but the headline."""
    out_dir, plot_files, plot_errors = c.out_dir, c.plot_files, c.plot_errors
    d.h(1, "Plots")
    captions = {
        "cycles_per_byte": "The headline: cycles per byte, stacked by category, per strategy and size",
        "throughput_vs_size": "Throughput vs message size, faceted by threads",
        "latency_vs_threads": "Latency (µs per message per connection) vs threads",
        "zerocopy_fallback": "Zero-copy fallback evidence per transport: zc bytes, fallback-copied bytes, COPIED completions",
        "syscall_latency": "Send syscall latency histograms per strategy (tracer)",
        "cache_misses": "Cache misses vs message size",
        "threads_scaling": "Threads vs throughput and context switches",
        "tracer_cost": "What the tracer cost: traced / untraced throughput per configuration",
    }
    for name in ("throughput_vs_size", "latency_vs_threads", "tracer_cost",
                 "zerocopy_fallback", "syscall_latency", "cache_misses", "threads_scaling"):
        f = plot_files.get(name)
        if f:
            d.image(os.path.join(out_dir, "plots", f), f"plots/{f}", captions[name])
    for e in plot_errors:
        d.p(f"Plot not drawn: {e}", "note")


def _flames_section(d, c):
    """The flame graphs."""
    out_dir, flames, flame_notes = c.out_dir, c.flames, c.flame_notes
    d.h(1, "Flame graphs")
    if flames:
        for caption, svg, folded in flames:
            if svg:
                d.image(os.path.join(out_dir, svg), svg, caption, mime="image/svg+xml")
            else:
                d.p(f"{caption}: no SVG" + (f"; folded stacks in [{folded}]({folded})" if folded else ""))
    else:
        d.p("No folded stacks were recorded (untraced sweep, or sampling unavailable).")
    for n in flame_notes:
        d.p(n, "note")


def _files_section(d, c):
    """What the directory holds."""
    d.h(1, "Files")
    d.bullets(["`runs.jsonl`: one JSON object per run (docs/DESIGN.md contract)",
               "`results.csv`: one row per run; counters this machine cannot count are empty",
               "`plots/*.png`, `flamegraphs/*.folded`, `flamegraphs/*.svg`",
               "`raw/<run>/`: each run's workload JSON, stderr and tracer snapshot",
               "Rebuild everything from `runs.jsonl` and the folded stacks: `netio-trace report DIR`"])


SECTIONS = (_machine_section, _headline_section, _answers_section, receive.section,
            _flags_section,
            _tracer_section, _summary_section, _plots_section, _flames_section, _files_section)


def compose(out_dir, runs, plot_files, plot_errors, flames, flame_notes, sweep=None):
    """The report as a Doc, section by section (SECTIONS, in page order); sweep: sweep.json,
    what the sweep asked for."""
    c = _Context(out_dir, runs, plot_files, plot_errors, flames, flame_notes, sweep)
    d = docmod.Doc("netio-trace report: where the bytes get copied, and what each copy costs")
    for section in SECTIONS:
        section(d, c)
    return d


def _tracer_checks(ok):
    """", tracer tx bytes = bytes sent (N runs)…" for the checks that were made."""
    out = ""
    for check, text in (("tracer_tx_eq_sent", "tracer tx bytes = bytes sent"),
                        ("tracer_rx_eq_received", "tracer rx copy bytes = bytes received")):
        n = sum(1 for r in ok if (r.get("checks") or {}).get(check) is True)
        if n:
            out += f", {text} (checked in {n} traced run(s))"
    return out


def _m(s, fmt="{:.2f}"):
    return "–" if not s else fmt.format(s["median"])


def _all_rows(ok):
    groups = collections.defaultdict(list)
    for r in ok:
        groups[(r["transport"], r["threads"], r["msg_size"], r["strategy"])].append(r)
    so = {s: i for i, s in enumerate(STRATEGIES)}
    to = {t: i for i, t in enumerate(TRANSPORTS)}
    out = []
    for k in sorted(groups, key=lambda k: (to.get(k[0], 9), k[1], k[2], so.get(k[3], 9))):
        rs = groups[k]
        retr = sum(_num((r.get("tcp") or {}).get("retrans")) or 0 for r in rs)
        out.append([k[0], k[1], format_size(k[2]), k[3],
                    stats.fmt_spread(stats.spread(r.get("throughput_gbps") for r in rs)),
                    stats.fmt_spread(stats.spread(r.get("latency_us") for r in rs), "{:.1f}"),
                    retr, len(rs)])
    return out


def _write(path, text):
    with files.atomic_open(path) as f:
        f.write(text)


def build(out_dir, console=None):
    """Rebuild results.csv, plots, flame graphs, report.md and report.html in out_dir."""
    runs_path = os.path.join(out_dir, results.RUNS)
    if not os.path.isfile(runs_path):
        raise ReportError(f"{runs_path} does not exist: not a netio-trace results directory")
    runs = results.read_runs(runs_path)
    if not runs:
        raise ReportError(f"{runs_path} holds no run")
    results.write_csv(os.path.join(out_dir, results.CSV), runs)
    # deferred on purpose: report.plots loads matplotlib, pandas and seaborn (heavy), and
    # the sweep loads it under a signal guard first (netio_trace.system.signals.import_whole)
    from report import plots
    sweep = untraced.read_sweep(out_dir)
    plot_dir = os.path.join(out_dir, "plots")
    copy_runs = passes.copy_receive(runs)
    plot_files, plot_errors = plots.make_all(copy_runs, plot_dir,
                                             untraced.short_why(copy_runs, sweep))
    ok = [r for r in runs if results.ok(r)]
    flames, flame_notes = flame_graphs(out_dir, [r for r in copy_runs if results.ok(r)])
    d = compose(out_dir, runs, plot_files, plot_errors, flames, flame_notes, sweep)
    _write(os.path.join(out_dir, "report.md"), d.markdown())
    _write(os.path.join(out_dir, "report.html"), d.html())
    return {"runs": len(runs), "ok": len(ok), "plots": plot_files, "plot_errors": plot_errors,
            "flamegraphs": flames, "notes": flame_notes}
