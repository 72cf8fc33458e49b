"""The report's "Receive" section: where receive zero-copy wins, and why it falls back.

Every receive strategy is compared with `copy` behind the same sender, at the same size and
transport, in the same round (paired ratios, as the strategies are): throughput from the
answer runs, and the receiver's CPU per byte (the client's own getrusage, so untraced runs
answer it too). The mapped share of `mmap` is set against what decides it: the sender (only
MSG_ZEROCOPY's pages can be mapped) and the MSS the connection received with (a segment that
splits pages leaves them to be copied) and what the receiving device runs (an XDP program).
A sender is its strategy, with "@page" where its fields were page-aligned (--align page); a
transport is followed by "+ XDP" where an XDP program was on the receiving veth (--rx-xdp).
The receive categories of the traced runs say where mmap's cycles go.
"""
import os

from analysis import passes, results, stats
from analysis.contract import DEFAULT_RECEIVE, RECEIVES, STRATEGIES, TRANSPORTS
from analysis.contract import receive_of, sender_of
from analysis.sizes import format_size
from report.colors import CAT_COLORS

PAGE = 4096
XDP = " + XDP"
# the attribution categories that tell a receive's cost apart, in the table's order
RECEIVE_CATS = ("kernel_rx_copy", "copy_buffer", "page_mapping", "zc_receive", "splice")


def _order(values, ref):
    rank = {v: i for i, v in enumerate(ref)}
    return sorted(set(values), key=lambda v: (rank.get(v, 99), v))


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def receive_runs(runs):
    """The ok runs of a sweep that has a receive strategy besides copy, else []."""
    ok = [r for r in runs if results.ok(r)]
    return ok if any(receive_of(r) != DEFAULT_RECEIVE for r in ok) else []


def cpu_ns_per_kib(run):
    """The receiver's CPU time per KiB received, in ns (None where unknown)."""
    rx = run.get("received") or {}
    cpu, got = _num(rx.get("cpu_s")), _num(run.get("bytes_received"))
    return cpu * 1e9 / (got / 1024) if cpu is not None and got else None


def mapped_share(run):
    rx = run.get("received") or {}
    mapped, got = _num(rx.get("mapped")), _num(run.get("bytes_received"))
    return mapped / got if mapped is not None and got else None


def _transport(r):
    """The transport, and "+ XDP" where an XDP program was on the receiving device."""
    return r["transport"] + (XDP if r.get("rx_xdp") else "")


def _key(r):
    return (_transport(r), sender_of(r), r["msg_size"])


def _sort_key(k):
    """(transport, sender, size) in the contract's order: XDP after its transport, an
    aligned sender after its strategy."""
    tr, xdp = k[0].removesuffix(XDP), k[0].endswith(XDP)
    st, _, align = k[1].partition("@")
    return (TRANSPORTS.index(tr) if tr in TRANSPORTS else 9, xdp,
            STRATEGIES.index(st) if st in STRATEGIES else 9, align, k[2]) + tuple(k[3:])


def paired(runs, key, receive, value):
    """value(receive's run) / value(copy's run) for each round both ran at key."""
    by_rep = {}
    for r in runs:
        if _key(r) == key and receive_of(r) in (receive, DEFAULT_RECEIVE):
            by_rep.setdefault(r["repeat"], {})[receive_of(r)] = value(r)
    out = []
    for rep in sorted(by_rep):
        a, b = by_rep[rep].get(DEFAULT_RECEIVE), by_rep[rep].get(receive)
        if a and b is not None:
            out.append(b / a)
    return out


def _cpu_verdict(ratios):
    """passes.verdict of CPU per byte ratios, receive / copy: less is better, so it judges
    their inverses ("ahead": cheaper than copy in every round)."""
    return passes.verdict([1 / x for x in ratios if x])


def _ratio_text(ratios, lower_better=False):
    """'1.23 (1.10–1.40) ▲': the paired ratios' median and range, ▲ where the receive does
    better than copy in every round (faster; for CPU, cheaper), ▼ worse, ≈ undecided."""
    s = stats.spread(ratios)
    if not s:
        return "–"
    verdict = _cpu_verdict(ratios) if lower_better else passes.verdict(ratios)
    mark = {"ahead": "▲", "behind": "▼"}.get(verdict, "≈")
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}) {mark}"


def comparison_rows(answers):
    """[transport, sender, size, receive, Gbit/s, vs copy, CPU ns/KiB, vs copy, mapped]."""
    rows = []
    for key in sorted({_key(r) for r in answers}, key=_sort_key):
        sub = [r for r in answers if _key(r) == key]
        for rec in _order((receive_of(r) for r in sub), RECEIVES):
            rs = [r for r in sub if receive_of(r) == rec]
            tput = stats.spread(r.get("throughput_gbps") for r in rs)
            cpu = stats.spread(cpu_ns_per_kib(r) for r in rs)
            share = stats.spread(mapped_share(r) for r in rs) if rec == "mmap" else None
            base = rec == DEFAULT_RECEIVE
            rows.append([key[0], key[1], format_size(key[2]), rec, stats.fmt_spread(tput),
                         "1" if base else _ratio_text(paired(
                             answers, key, rec, lambda r: r.get("throughput_gbps"))),
                         stats.fmt_spread(cpu, "{:.0f}"),
                         "1" if base else _ratio_text(paired(answers, key, rec, cpu_ns_per_kib),
                                                      lower_better=True),
                         f"{100 * share['median']:.1f}%" if share else "–"])
    return rows


def _mss_of(runs):
    ms = sorted({(r.get("received") or {}).get("rcv_mss") for r in runs} - {None},
                key=str)
    return ms[0] if len(ms) == 1 and isinstance(ms[0], int) else None


def why_mapped(sender, mss, share, xdp=False):
    """Why mmap mapped what it did: an XDP program on the receiving device, the sender, then
    the MSS and the sender's field placement."""
    if xdp:
        return ("an XDP program on the receiving device: generic XDP hands the program a "
                "private, linear copy of each packet, so none of the sender's pages reaches "
                "the socket to be mapped")
    strategy, _, align = sender.partition("@")
    if strategy != "zero-copy":
        return ("the sender's pages are not its own: an ordinary send copies into the "
                "kernel's compound pages, which TCP_ZEROCOPY_RECEIVE cannot map, so every "
                "byte is copied (recv_skip_hint)")
    if mss is None:
        return "the MSS the connection received with is unknown"
    if mss % PAGE:
        return (f"MSS {mss} is no multiple of {PAGE}: a segment boundary inside a page leaves "
                f"that page to be copied")
    if share is not None and share < 0.99 and align != "page":
        return (f"MSS {mss} keeps pages whole; what is copied is what the sender's buffers "
                f"put across page boundaries (its fields are not page-aligned) and the tail "
                f"of each call under a page")
    if share is not None and share < 0.99:
        return (f"MSS {mss} keeps pages whole and the sender's fields start on pages; what is "
                f"copied is the tail of each call under a page")
    return (f"MSS {mss} keeps pages whole" + (" and the sender's fields start on pages"
                                              if align == "page" else "") + ": every page maps")


def mapped_rows(answers):
    """The mapped share of mmap against the sender and the MSS received with."""
    rows = []
    mm = [r for r in answers if receive_of(r) == "mmap"]
    for key in sorted({_key(r) for r in mm}, key=_sort_key):
        rs = [r for r in mm if _key(r) == key]
        share = stats.spread(mapped_share(r) for r in rs)
        mss = _mss_of(rs)
        rows.append([key[0], key[1], format_size(key[2]), str(mss) if mss else "–",
                     f"{100 * share['median']:.1f}%" if share else "–",
                     why_mapped(key[1], mss, share["median"] if share else None,
                                key[0].endswith(XDP))])
    return rows


def _mmap_pairs(answers):
    """[(key, throughput ratios, CPU-per-byte ratios)] of mmap against copy, key by key."""
    out = []
    for key in sorted({_key(r) for r in answers if receive_of(r) == "mmap"}, key=_sort_key):
        t = paired(answers, key, "mmap", lambda r: r.get("throughput_gbps"))
        if t:
            out.append((key, t, paired(answers, key, "mmap", cpu_ns_per_kib)))
    return out


def _where(key):
    return f"behind {key[1]} at {format_size(key[2])} over {key[0]}"


def _range(ratios):
    s = stats.spread(ratios)
    return f"{s['median']:.2f}× ({s['min']:.2f}–{s['max']:.2f})"


def where_mmap_wins(answers):
    """One sentence: where mmap beats copy in every round, on throughput or on the receiver's
    CPU per byte, and by how much; or that the rounds decide no win."""
    won = []
    for key, t, c in _mmap_pairs(answers):
        tv, cv = passes.verdict(t), _cpu_verdict(c)
        if "ahead" not in (tv, cv):
            continue
        share = stats.spread(mapped_share(r) for r in answers
                             if _key(r) == key and receive_of(r) == "mmap")
        parts = [f"{100 * share['median']:.1f}% mapped" if share else "mapped unknown",
                 f"throughput {_range(t)}" + ("" if tv == "ahead" else f", {tv}"),
                 (f"CPU per byte {_range(c)}" + ("" if cv == "ahead" else f", {cv}")
                  if c else "CPU per byte unknown")]
        won.append(f"{_where(key)} ({', '.join(parts)})")
    if not won:
        return ("Where mmap wins: nowhere the rounds decide; in every configuration copy was "
                "as fast or faster, or the rounds did not decide (below).")
    return ("Where mmap wins against copy, in every round (ratios mmap / copy, median and "
            "range; a win at a low mapped share is not the mapping's): " + "; ".join(won) + ".")


def _win(key, t, c):
    """The sentence of one configuration: mmap against copy on throughput (t), and on the
    receiver's CPU per byte (c) where it was measured."""
    st, sc = stats.spread(t), stats.spread(c)
    text = {"ahead": "wins on throughput", "behind": "loses on throughput",
            "undecided": "is undecided on throughput"}[passes.verdict(t)]
    cpu = ""
    if sc:
        cost = {"ahead": "less", "behind": "more", "undecided": "undecided"}[_cpu_verdict(c)]
        cpu = (f"; the receiver's CPU per byte {sc['median']:.2f}× copy's "
               f"({sc['min']:.2f}–{sc['max']:.2f}, {cost})")
    return (f"mmap {text} {_where(key)}: {st['median']:.2f}× copy's throughput "
            f"({st['min']:.2f}–{st['max']:.2f} over {st['n']} rounds){cpu}.")


def wins(answers):
    """Sentences: mmap against copy at each configuration, by how much."""
    return [_win(key, t, c) for key, t, c in _mmap_pairs(answers)]


def cycles_rows(traced):
    """Cycles per byte of the receive categories, mmap's and copy's traced runs pooled by
    median."""
    rows = []
    sub = [r for r in traced if receive_of(r) in ("copy", "mmap", "splice") and r.get("attribution")]
    for key in sorted({_key(r) + (receive_of(r),) for r in sub}, key=_sort_key):
        rs = [r for r in sub if _key(r) + (receive_of(r),) == key]
        cells = []
        for c in RECEIVE_CATS:
            s = stats.spread((r["attribution"].get("cycles_per_byte") or {}).get(c) for r in rs)
            cells.append(f"{s['median']:.3f}" if s else "–")
        rows.append([key[0], key[1], format_size(key[2]), key[3]] + cells)
    return rows


def plot(answers, out_dir):
    """plots/receive_throughput.png: throughput by receive strategy, per sender and transport;
    its file name, or None."""
    # deferred on purpose: matplotlib is heavy, and the report loads it (report.plots) only
    # once the sweep is over
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colours = {"copy": CAT_COLORS["kernel_rx_copy"], "discard": CAT_COLORS["other"],
               "mmap": CAT_COLORS["page_mapping"], "splice": CAT_COLORS["splice"]}
    panels = sorted({(_transport(r), sender_of(r)) for r in answers},
                    key=lambda k: _sort_key(k + (0,)))
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (tr, st) in zip(axes[0], panels):
        sub = [r for r in answers if (_transport(r), sender_of(r)) == (tr, st)]
        sizes = sorted({r["msg_size"] for r in sub})
        recs = _order((receive_of(r) for r in sub), RECEIVES)
        width = 0.8 / max(1, len(recs))
        for i, rec in enumerate(recs):
            vals = [(stats.spread(r.get("throughput_gbps") for r in sub
                                  if r["msg_size"] == z and receive_of(r) == rec) or
                     {"median": 0})["median"] for z in sizes]
            ax.bar([j + i * width for j in range(len(sizes))], vals, width,
                   color=colours.get(rec, "#888888"), label=rec)
        ax.set_xticks([j + width * (len(recs) - 1) / 2 for j in range(len(sizes))])
        ax.set_xticklabels([format_size(z) for z in sizes])
        ax.set_title(f"{st} → {tr}", fontsize=10)
        ax.set_ylabel("Gbit/s")
    axes[0][0].legend(title="receive", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.join(out_dir, "plots"), exist_ok=True)
    name = "receive_throughput.png"
    fig.savefig(os.path.join(out_dir, "plots", name), dpi=110)
    plt.close(fig)
    return name


def section(d, c):
    """The "Receive" section of the report (report/build.py's SECTIONS), where the sweep has a
    receive strategy besides copy."""
    runs = receive_runs(c.all_runs)
    if not runs:
        return
    answers, traced, answers_traced = passes.split(runs)
    d.h(1, "Receive: where receive zero-copy wins, and why it falls back")
    d.p("Each receive strategy against copy (recv() into a 64 KiB buffer) behind the same "
        "sender, size and transport, paired within rounds: ▲ better in every round (faster; "
        "for CPU, cheaper), ▼ worse in every round, ≈ undecided. CPU is the receiver's own (getrusage), "
        "ns per KiB received" + (" (measured with the tracer attached: the sweep has no "
        "untraced run)" if answers_traced else "") + ". A sender with \"@page\" has its fields "
        "page-aligned (--align page); \"+ XDP\": an XDP program on the receiving veth.")
    if any(receive_of(r) == "mmap" for r in answers):
        d.p(where_mmap_wins(answers), "answer")
    for text in wins(answers):
        d.p(text, "answer")
    d.table(["transport", "sender", "size", "receive", "Gbit/s (min–max)", "vs copy",
             "CPU ns/KiB", "vs copy", "mapped"], comparison_rows(answers), left=4)
    rows = mapped_rows(answers)
    if rows:
        d.h(2, "Why mmap falls back: the mapped share against the sender, the MSS and the "
               "receiving device")
        d.table(["transport", "sender", "size", "MSS received", "mapped", "why"], rows,
                left=6)
    name = plot(answers, c.out_dir)
    if name:
        d.image(os.path.join(c.out_dir, "plots", name), f"plots/{name}",
                "Throughput by receive strategy, per sender and transport")
    rows = cycles_rows(traced)
    if rows:
        d.h(2, "Where the receive's cycles go (traced runs, cycles per byte)")
        d.table(["transport", "sender", "size", "receive"] + list(RECEIVE_CATS), rows, left=4)
