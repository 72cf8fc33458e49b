"""Where the cycles go besides the copies: the report's sentences on the attribution
categories of the send and receive path, each share with its 95% interval.

Shares here are pooled over a configuration's traced runs (their samples per category
summed), and the interval is the Wilson interval of the pooled counts.
"""
from analysis import attribution
from analysis.contract import STRATEGIES, TRANSPORTS
from analysis.sizes import format_size

COPIES = attribution.COPY_CATEGORIES
PATH = attribution.PATH_CATEGORIES
# what a path category tells a reader of the report, in a sentence's words
WORDS = {"syscall": "syscall entry/exit and the socket layer",
         "splice": "splicing the file's page-cache pages to the socket",
         "tcp_tx": "TCP transmit", "ip_tx": "IP and device transmit",
         "net_rx": "softirq receive", "checksum": "checksums",
         "skb_mem": "skb allocation and memory accounting",
         "sched": "the scheduler and wake-ups", "locks": "locks and irqs-off",
         "bpf": "the tracer's own BPF programs",
         "startup": "the process's start-up and exit", "other": "frames no rule knows"}
# per-call work: what a send or receive costs whatever its size
PER_CALL = ("syscall", "tcp_tx", "ip_tx", "net_rx", "sched", "locks")


def _order(values, ref):
    rank = {v: i for i, v in enumerate(ref)}
    return sorted(set(values), key=lambda v: (rank.get(v, 99), v))


def pooled_counts(attributions):
    """{category: samples} summed over runs, and the total; (None, 0) without samples."""
    counts = dict.fromkeys(attribution.CATEGORIES, 0)
    total = 0
    for a in attributions:
        n = a.get("samples") or 0
        by = a.get("samples_by_category")
        if not n:
            continue
        for c in counts:
            counts[c] += (by or {}).get(c, 0) if by else round((a.get("share") or {}).get(c, 0) * n)
        total += n
    return (counts, total) if total else (None, 0)


def share_text(counts, total, cats):
    """'12.3% [95%: 10.1–14.8%]' of the categories' samples together."""
    k = sum(counts.get(c, 0) for c in cats)
    lo, hi = attribution.share_interval(k, total)
    return f"{100 * k / total:.1f}% [95%: {100 * lo:.1f}–{100 * hi:.1f}%]"


def top_path(counts, total, n=3, leave_out=()):
    """The n largest path categories with a share, as 'words 12.3% [95%: …]'."""
    cats = sorted((c for c in PATH if counts.get(c) and c not in leave_out),
                  key=lambda c: -counts[c])[:n]
    return [f"{WORDS[c]} {share_text(counts, total, (c,))}" for c in cats]


def besides_copies(attributions, name):
    """One sentence: the largest path categories of these runs, or None."""
    counts, total = pooled_counts(attributions)
    if not counts or not any(counts.get(c) for c in PATH):
        return None
    few = (f" (only {total} samples)" if total < attribution.FEW_SAMPLES else "")
    return (f"Besides the copies, {name}'s samples go to " + "; ".join(top_path(counts, total))
            + f"; other {share_text(counts, total, ('other',))}{few}.")


def _weights(counts):
    return sum(counts.get(c, 0) for c in COPIES), sum(counts.get(c, 0) for c in PER_CALL)


def _strategy_part(st, counts, total, small):
    copies = share_text(counts, total, COPIES)
    per_call = share_text(counts, total, PER_CALL)
    if small:
        top = top_path(counts, total, 2, leave_out=("bpf",))
        return (f"{st}: per-call work {per_call}, the copies {copies}, the tracer's BPF "
                f"{share_text(counts, total, ('bpf',))}"
                + ("; the largest part of the path: " + "; ".join(top) if top else ""))
    big = max(COPIES, key=lambda c: counts.get(c, 0))
    return (f"{st}: the copies {copies}, most of it {attribution.LABELS[big]} "
            f"{share_text(counts, total, (big,))}; per-call work {per_call}")


def _verdict(by_strategy):
    """Which outweighs which, strategy by strategy, from the pooled counts."""
    more_copy = [st for st, (counts, _) in by_strategy if _weights(counts)[0] > _weights(counts)[1]]
    if len(more_copy) == len(by_strategy):
        return "The copies outweigh the per-call work for every strategy here."
    if not more_copy:
        return ("The per-call work outweighs the copies for every strategy here: a larger "
                "message spreads it over more bytes.")
    return "The copies outweigh the per-call work for " + ", ".join(more_copy) + " only."


def _size_sentence(tr, size, by_strategy, small):
    """The strategies at one size: per-call work at the smallest, the copies at the largest."""
    parts = [_strategy_part(st, counts, total, small) for st, (counts, total) in by_strategy]
    return (f"**{tr}, {format_size(size)}** (share of samples; per-call work = syscall and "
            f"socket layer, TCP and IP transmit, softirq receive, scheduler, locks): "
            + ". ".join(parts) + ". " + _verdict(by_strategy))


def size_findings(traced):
    """Per transport, at the smallest and the largest size (smallest thread count): where
    each strategy's samples go, pooled over its traced runs."""
    runs = [r for r in traced if r.get("attribution") and (r["attribution"].get("samples") or 0)]
    out = []
    for tr in _order((r["transport"] for r in runs), TRANSPORTS):
        rs = [r for r in runs if r["transport"] == tr]
        th = min(r["threads"] for r in rs)
        rs = [r for r in rs if r["threads"] == th]
        sizes = sorted({r["msg_size"] for r in rs})
        for size in ([sizes[0], sizes[-1]] if len(sizes) > 1 else sizes):
            by_strategy = []
            for st in _order((r["strategy"] for r in rs if r["msg_size"] == size), STRATEGIES):
                counts, total = pooled_counts(r["attribution"] for r in rs
                                              if r["msg_size"] == size and r["strategy"] == st)
                if counts:
                    by_strategy.append((st, (counts, total)))
            if by_strategy:
                out.append(_size_sentence(tr, size, by_strategy,
                                          small=size == sizes[0] and len(sizes) > 1))
    return out
