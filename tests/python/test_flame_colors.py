"""Flame graphs coloured by attribution category, on real recorded stacks."""
import collections
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import attribution as A  # noqa: E402
from report import flame_colors as C  # noqa: E402
from report import flamegraph as F  # noqa: E402
from report.colors import CAT_COLORS  # noqa: E402

STACKS = os.path.join(REPO, "tests", "python", "fixtures", "stacks")


def _inferno():
    try:
        F.find_tool("inferno-flamegraph")
        return True
    except F.FlamegraphError:
        return False


pytestmark = pytest.mark.skipif(not _inferno(), reason="inferno not installed (make deps)")
SVG = "{http://www.w3.org/2000/svg}"


def frames_of(svg_path):
    """[(name, fill, y, x, w)] of every frame rectangle."""
    out = []
    for g in ET.parse(svg_path).getroot().iter(SVG + "g"):
        title, rect = g.find(SVG + "title"), g.find(SVG + "rect")
        if title is None or rect is None or rect.get("{http://github.com/jonhoo/inferno}x") is None:
            continue
        out.append((title.text.rsplit(" (", 1)[0], rect.get("fill"), float(rect.get("y")),
                    int(rect.get("{http://github.com/jonhoo/inferno}x")),
                    int(rect.get("{http://github.com/jonhoo/inferno}w"))))
    return out


def self_samples_by_fill(frames):
    """Samples of which each frame is the innermost (its width less its children's), by fill."""
    rows = sorted({f[2] for f in frames}, reverse=True)
    depth = {y: i for i, y in enumerate(rows)}
    children = collections.Counter()
    for name, fill, y, x, w in frames:
        d = depth[y]
        for pn, pf, py, px, pw in frames:
            if depth[py] == d - 1 and px <= x < px + pw:
                children[(py, px)] += w
                break
    out = collections.Counter()
    for name, fill, y, x, w in frames:
        out[fill] += w - children[(y, x)]
    return out


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(STACKS, "*", "*-65536-*.folded"))))
def test_frame_colours_add_up_to_the_attribution(tmp_path, path):
    """Every frame's own samples, summed by fill colour, are the attribution's samples per
    category: each frame is coloured as the attribution counts the samples it ends."""
    svg = F.render(path, str(tmp_path / "f.svg"), os.path.basename(path))
    a = A.attribute_file(path, "tick", None, None, None, None)
    by_fill = self_samples_by_fill(frames_of(svg))
    for c in A.CATEGORIES:
        if c == "other":
            got = by_fill.get(C.OTHER_KERNEL, 0) + by_fill.get(C.OTHER_USER, 0)
        else:
            got = by_fill.get(CAT_COLORS[c], 0)
        assert got == a["samples_by_category"][c], (c, got, a["samples_by_category"][c])


def test_named_frames_have_their_category_colour(tmp_path):
    path = os.path.join(STACKS, "host-6.18", "zero-copy-65536-loopback.folded")
    svg = F.render(path, str(tmp_path / "z.svg"), "zero-copy")
    fills = collections.defaultdict(set)
    for name, fill, *_ in frames_of(svg):
        fills[name].add(fill)
    assert fills["skb_copy_ubufs"] == {CAT_COLORS["fallback_copy"]}
    assert fills["tcp_write_xmit"] == {CAT_COLORS["tcp_tx"]}
    assert fills["net_rx_action"] == {CAT_COLORS["net_rx"]}
    assert fills["__dev_queue_xmit"] == {CAT_COLORS["ip_tx"]}
    # the same frame in two contexts: its own category in each (ambiguous frames): under a
    # wake-up, inside the completion callback, under the loopback backlog enqueue
    assert {CAT_COLORS["sched"], CAT_COLORS["completion"]} <= fills["_raw_spin_unlock_irqrestore"]
    other = F.render(os.path.join(STACKS, "host-6.18", "one-copy-256-loopback.folded"),
                     str(tmp_path / "o.svg"), "one-copy")
    unlock = {f for name, f, *_ in frames_of(other) if name == "_raw_spin_unlock_irqrestore"}
    assert {CAT_COLORS["sched"], CAT_COLORS["locks"]} <= unlock
    # the root and the process names are no category: grey
    assert fills["all"] <= {C.OTHER_KERNEL, C.OTHER_USER}


def test_legend_lists_the_categories_present(tmp_path):
    path = os.path.join(STACKS, "guest-6.1", "one-copy-65536-veth.folded")
    svg = F.render(path, str(tmp_path / "o.svg"), "one-copy")
    root = ET.parse(svg).getroot()
    legend = [g for g in root.iter(SVG + "g") if g.get("id") == "legend"]
    assert len(legend) == 1
    labels = [t.text for t in legend[0].iter(SVG + "text")][1:]
    swatches = [r.get("fill") for r in legend[0].iter(SVG + "rect")]
    # every category a frame is filled with, in the table's order, and other
    used = {f[1] for f in frames_of(svg)}
    present = [c for c in A.CATEGORIES if c != "other" and CAT_COLORS[c] in used] + ["other"]
    assert len(present) >= 10
    assert [lb.split(" (kernel darker")[0] for lb in labels] == [A.LABELS[c] for c in present]
    assert swatches == [C.fill_of(c, True) for c in present]
    assert len(set(swatches)) == len(swatches)
    # the legend is inside the picture: the SVG grew to hold it
    height = int(root.get("height"))
    assert max(float(r.get("y")) for r in legend[0].iter(SVG + "rect")) < height


def test_differential_graph_keeps_its_red_and_blue(tmp_path):
    a = os.path.join(STACKS, "host-6.18", "one-copy-65536-loopback.folded")
    b = os.path.join(STACKS, "host-6.18", "zero-copy-65536-loopback.folded")
    svg = F.diff(a, b, str(tmp_path / "d.svg"), "diff")
    text = open(svg).read()
    assert 'id="legend"' not in text
    assert not set(CAT_COLORS.values()) & set(re.findall(r'fill="([^"]*)"', text))


def test_inferno_palette_when_asked(tmp_path):
    path = os.path.join(STACKS, "host-6.18", "one-copy-256-veth.folded")
    svg = F.render(path, str(tmp_path / "p.svg"), "plain", by_category=False)
    assert 'id="legend"' not in open(svg).read()
    assert any(f[1].startswith("rgb(") for f in frames_of(svg))
