"""Flame graphs coloured by attribution category, with a legend.

inferno draws the frames; this recolours its SVG. Each frame's fill becomes the colour of the
category its stack has when that frame is the innermost one (analysis.attribution.classify on
the path from the root to the frame): a frame is coloured by the innermost rule matching it
or a frame outside it, as the attribution counts its own samples. Idle and "other" frames are
grey, kernel ones darker than user ones. A legend of the categories present is added below
the frames.

The path is read back from the SVG itself: inferno gives every frame its sample offset and
width (fg:x, fg:w) and a row (y), so a frame's parent is the frame one row below whose span
holds it. inferno's `java` palette strips the "_[k]" suffix from the title and colours kernel
frames orange (red - green = 100, no blue): that is how a frame's side is read back.
"""
import bisect
import html
import re

from analysis import attribution
from report.colors import CAT_COLORS

OTHER_KERNEL = "#a8a8a8"    # "other" and idle frames: kernel darker, user lighter
OTHER_USER = "#d9d9d9"
FRAME = re.compile(r'<g><title>(?P<title>[^<]*)</title><rect (?P<attrs>[^>]*?)/?>(?:<text )?')
ATTR = re.compile(r'([\w:]+)="([^"]*)"')
RGB = re.compile(r"rgb\((\d+),\s*(\d+),\s*(\d+)\)")
LEGEND_ROW = 18
DARK = ("locks", "bpf", "tcp_tx", "kernel_tx_copy")   # white names on these fills
LEGEND_COLUMNS = 2


def _is_kernel_fill(fill):
    m = RGB.fullmatch(fill or "")
    if not m:
        return False
    r, g, b = (int(v) for v in m.groups())
    return b == 0 and r - g == 100


def parse_frames(svg):
    """[(match, name, kernel, depth, x, w)] of inferno's frames, depth 0 at the root."""
    out = []
    for m in FRAME.finditer(svg):
        a = dict(ATTR.findall(m.group("attrs")))
        if "fg:x" not in a or "fg:w" not in a or "y" not in a:
            continue
        name = html.unescape(m.group("title")).rsplit(" (", 1)[0]
        out.append([m, name, _is_kernel_fill(a.get("fill")), float(a["y"]),
                    int(a["fg:x"]), int(a["fg:w"])])
    rows = sorted({f[3] for f in out}, reverse=True)      # flame: the root is lowest
    depth = {y: i for i, y in enumerate(rows)}
    return [(m, name, k, depth[y], x, w) for m, name, k, y, x, w in out]


def _parents(frames):
    """For each frame, the index of its parent (the frame one row down spanning it), or None."""
    by_depth = {}
    for i, (_, _, _, d, x, _) in enumerate(frames):
        by_depth.setdefault(d, []).append((x, i))
    for row in by_depth.values():
        row.sort()
    parents = []
    for _, _, _, d, x, _ in frames:
        row = by_depth.get(d - 1)
        if not row:
            parents.append(None)
            continue
        j = bisect.bisect_right(row, (x, float("inf"))) - 1
        parents.append(row[j][1] if j >= 0 else None)
    return parents


def frame_categories(svg):
    """[(match, category, kernel)] for every frame of an inferno SVG; the root ("all") and
    the frames of no category are "other"."""
    frames = parse_frames(svg)
    parents = _parents(frames)
    paths = [None] * len(frames)
    for i in sorted(range(len(frames)), key=lambda i: frames[i][3]):   # parents first
        _, name, kernel, d, _, _ = frames[i]
        p = parents[i]
        if d > 0:
            paths[i] = (paths[p] if p is not None and paths[p] else []) \
                + [name + ("_[k]" if kernel else "")]
    return [(f[0], attribution.classify(path) if path else "other", f[2])
            for f, path in zip(frames, paths)]


def fill_of(category, kernel):
    if category in ("other", "idle"):
        return OTHER_KERNEL if kernel else OTHER_USER
    return CAT_COLORS[category]


def legend(categories, top, width):
    """An SVG group: one swatch and label per category, LEGEND_COLUMNS to a row."""
    parts = [f'<g id="legend"><text x="10" y="{top + 12}" font-size="12">'
             "Colours: attribution category of each frame (its own samples)</text>"]
    col_w = (width - 20) / LEGEND_COLUMNS
    for i, c in enumerate(categories):
        x = 10 + (i % LEGEND_COLUMNS) * col_w
        y = top + LEGEND_ROW * (1 + i // LEGEND_COLUMNS)
        label = attribution.LABELS[c] + (" (kernel darker, user lighter)" if c == "other" else "")
        fill = fill_of(c, True)
        parts.append(f'<rect x="{x:.0f}" y="{y}" width="14" height="12" fill="{fill}" '
                     f'stroke="#555" stroke-width="0.5"/>'
                     f'<text x="{x + 20:.0f}" y="{y + 10}" font-size="11">'
                     f"{html.escape(label)}</text>")
    parts.append("</g>")
    return "".join(parts), LEGEND_ROW * (2 + (len(categories) - 1) // LEGEND_COLUMNS) + 8


def _grow(svg, extra):
    """The SVG's height (and viewBox) grown by extra pixels; returns (svg, old height, width)."""
    m = re.search(r'<svg [^>]*?height="(\d+)"', svg)
    wm = re.search(r'<svg [^>]*?width="(\d+)"', svg)
    height, width = int(m.group(1)), int(wm.group(1)) if wm else 1200
    head_end = svg.index(">", m.start()) + 1
    head = svg[:head_end].replace(f'height="{height}"', f'height="{height + extra}"', 1)
    head = re.sub(r'viewBox="0 0 (\d+) (\d+)"',
                  lambda v: f'viewBox="0 0 {v.group(1)} {int(v.group(2)) + extra}"', head)
    return head + svg[head_end:], height, width


def color_by_category(svg):
    """inferno's SVG with each frame filled by its category and a legend below."""
    cats = frame_categories(svg)
    if not cats:
        return svg
    out, last = [], 0
    for m, cat, kernel in cats:
        out.append(svg[last:m.start()])
        frame = re.sub(r'fill="[^"]*"', f'fill="{fill_of(cat, kernel)}"', m.group(0), count=1)
        if cat in DARK and frame.endswith("<text "):
            frame += 'fill="#ffffff" '       # the frame's name, legible on a dark fill
        out.append(frame)
        last = m.end()
    out.append(svg[last:])
    svg = "".join(out)
    present = [c for c in attribution.CATEGORIES if c in {c for _, c, _ in cats}]
    if "other" not in present:
        present.append("other")
    _, _, width = _grow(svg, 0)
    group, extra = legend(present, 0, width)
    svg, height, width = _grow(svg, extra)
    group, _ = legend(present, height, width)
    end = svg.rindex("</svg>")
    return svg[:end] + group + svg[end:]
