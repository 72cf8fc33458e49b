"""diff.md and diff.html of `netio-trace diff A B` (analysis/diff.py), with a differential
flame graph per strategy whose title says which side is which."""
import os

from analysis import diff, stats
from analysis.sizes import format_size
from report import doc as docmod
from report import flamegraph


def _cfg(c):
    return f"{c['transport']}, {c['threads']} thread(s), {format_size(c['msg_size'])}, " \
           f"{c['strategy']}"


def _rows(result):
    out = []
    for r in result["rows"]:
        moved = "; ".join(f"{c} {a:.1%} → {b:.1%}" for c, a, b in r["moved"]) or "–"
        out.append([_cfg(r["config"]), stats.fmt_spread(r["ratio"], "{:.3f}"),
                    "paired by round" if r["paired"] else "medians",
                    "yes" if r["beyond_noise"] else "no", r["verdict"], moved])
    return out


def flame_diffs(a_dir, b_dir, out_dir):
    """Differential flame graphs of the strategies both reports merged (flamegraphs/
    <transport>-<strategy>-<size>.folded): [(caption, svg path)], notes."""
    a_fg, b_fg = os.path.join(a_dir, "flamegraphs"), os.path.join(b_dir, "flamegraphs")
    if not (os.path.isdir(a_fg) and os.path.isdir(b_fg)):
        return [], ["no flame graphs in one of the two directories (rebuild them with "
                    "`netio-trace report DIR`)"]
    shared = sorted(f for f in set(os.listdir(a_fg)) & set(os.listdir(b_fg))
                    if f.endswith(".folded") and "-diff-" not in f)
    out, notes = [], []
    os.makedirs(os.path.join(out_dir, "flamegraphs"), exist_ok=True)
    for f in shared:
        name = f[:-len(".folded")]
        svg = os.path.join(out_dir, "flamegraphs", f"diff-{name}.svg")
        title = f"{name}: A → B (widths: B; red: more samples in B, blue: fewer than in A)"
        try:
            flamegraph.diff(os.path.join(a_fg, f), os.path.join(b_fg, f), svg, title,
                            subtitle=f"A = {a_dir}   B = {b_dir}")
            out.append((title, svg))
        except flamegraph.FlamegraphError as e:
            notes.append(f"{name}: no differential flame graph ({e})")
    return out, notes


def _left_out(d, result, a_dir, b_dir):
    """What the two sweeps do not share: parameters, and configurations only one ran."""
    changed = diff.differing_parameters(a_dir, b_dir)
    if changed:
        d.p("The sweeps' parameters differ (compared on the configurations both ran): " +
            "; ".join(f"{k}: A {va} / B {vb}" for k, va, vb in changed), "note")
    left_out = [("A", k) for k in result["only_a"]] + [("B", k) for k in result["only_b"]]
    if left_out:
        d.p("Left out (only in one sweep): " + "; ".join(
            f"{side}: {_cfg(dict(zip(diff.CONFIG, k)))}" for side, k in left_out), "note")


def write(result, a_dir, b_dir, out_dir):
    """diff.md and diff.html into out_dir; returns their paths."""
    d = docmod.Doc(f"netio-trace diff: B against A")
    d.bullets([f"A: `{a_dir}`", f"B: `{b_dir}`",
               f"Threshold: a configuration regressed when B/A < {1 - result['threshold']:.2f} "
               "and the change is beyond the noise both sweeps measured"])
    traced = [side for side, t in zip("AB", result["answers_traced"]) if t]
    if traced:
        d.p(f"Sweep {' and '.join(traced)} has no untraced pass: its throughput was measured "
            "with the tracer attached.", "note")
    if result["regressed"]:
        d.p(f"**{len(result['regressed'])} configuration(s) regressed**: "
            + "; ".join(_cfg(r["config"]) for r in result["regressed"]), "bad")
    else:
        d.p("No configuration regressed.", "answer")
    d.table(["configuration", "B/A (min–max)", "how", "beyond noise", "verdict",
             "categories that moved (A → B)"], _rows(result), left=6)
    _left_out(d, result, a_dir, b_dir)
    flames, notes = flame_diffs(a_dir, b_dir, out_dir)
    for caption, svg in flames:
        d.image(svg, os.path.relpath(svg, out_dir), caption, mime="image/svg+xml")
    for n in notes:
        d.p(n, "note")
    md, html = os.path.join(out_dir, "diff.md"), os.path.join(out_dir, "diff.html")
    with open(md, "w") as f:
        f.write(d.markdown())
    with open(html, "w") as f:
        f.write(d.html())
    return md, html
