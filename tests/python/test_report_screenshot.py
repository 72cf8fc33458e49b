"""report.html rendered by headless Chromium: the screenshot must show a page with its images."""
import itertools
import json
import os
import shutil

import numpy as np

from analysis import attribution, results
from conftest import FIXTURES
from report import build as report
from report import doc as docmod
from report import receive
from report.colors import CAT_COLORS
from screenshot import render


def test_report_html_renders_not_blank(fixture_dir):
    report.build(str(fixture_dir))
    rgb = render(fixture_dir / "report.html", fixture_dir / "screenshot.png")
    assert rgb.shape[0] >= 1900 and rgb.shape[1] >= 1100
    # not blank: many distinct colours, a real share of non-white pixels, and colour (plots)
    nonwhite = (rgb < 0.95).any(axis=2).mean()
    assert nonwhite > 0.05, nonwhite
    assert rgb.std() > 0.05
    colourful = (rgb.max(axis=2) - rgb.min(axis=2) > 0.25).mean()
    assert colourful > 0.005, colourful       # the plots' lines and bars, not just text
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 200
    keep = os.environ.get("KEEP_SCREENSHOT")
    keep and shutil.copy(fixture_dir / "screenshot.png", keep)


def _hex_rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def _add_sendfile_run(fixture_dir):
    """The hand-built fixture has no sendfile run, so no splice: one is added, a 64 KiB veth
    one-copy run's twin whose attribution comes from the sendfile stacks recorded on the host
    (tests/python/fixtures/stacks/host-6.18)."""
    path = fixture_dir / results.RUNS
    runs = results.read_runs(str(path))
    twin = dict(next(r for r in runs if (r["strategy"], r["msg_size"], r["transport"]) ==
                     ("one-copy", 65536, "veth") and r.get("attribution")))
    folded = os.path.join(FIXTURES, "stacks", "host-6.18", "sendfile-65536-veth.folded")
    perf = twin.get("perf") or {}
    twin["strategy"] = "sendfile"
    twin["attribution"] = attribution.attribute_file(
        folded, "tick", results.perf_value(perf, "task_clock_ns"), perf.get("tsc_hz"), None,
        twin["bytes_sent"])
    with open(path, "a") as f:
        f.write(json.dumps(twin) + "\n")


def test_headline_shows_every_category_apart(fixture_dir):
    """The headline plot, as the page shows it, draws each category in its own
    colour: every category of the fixture's runs is on screen (its legend swatch and bars),
    and no two category colours are close enough to be confused."""


    colours = {c: _hex_rgb(CAT_COLORS[c]) for c in attribution.CATEGORIES}
    gap = min(max(abs(a - b) for a, b in zip(colours[x], colours[y]))
              for x, y in itertools.combinations(colours, 2))
    assert gap >= 40, gap                     # told apart by eye, and by the count below
    _add_sendfile_run(fixture_dir)
    runs = [r for r in results.read_runs(str(fixture_dir / results.RUNS)) if r.get("attribution")]
    drawn = [c for c in attribution.CATEGORIES
             if any((r["attribution"].get("cycles_per_byte") or {}).get(c) for r in runs)]
    # the fixture has every category but the receive side's zero-copy ones: the headline
    # draws the runs that receive by copy (test_receive_section_renders has those)
    assert len(drawn) == len(attribution.CATEGORIES) - len(attribution.RECEIVE_CATEGORIES)
    report.build(str(fixture_dir))
    rgb = (render(fixture_dir / "report.html", fixture_dir / "headline.png") * 255).astype(int)
    tolerance = gap // 2 - 1                  # a pixel counts for one category at most
    counts = {}
    for c in drawn:
        near = (np.abs(rgb - np.array(colours[c])).max(axis=2) <= tolerance)
        counts[c] = int(near.sum())
    few = {c: n for c, n in counts.items() if n < 60}
    assert not few, (few, counts)


class _ReceiveContext:
    """What report/receive.section reads of report/build.py's context."""

    def __init__(self, runs, out_dir):
        self.all_runs, self.out_dir = runs, out_dir


def test_receive_section_renders(tmp_path):
    """The Receive section of a real receive sweep (fixtures/receive_run), rendered
    alone: its tables and its plot, with copy's and mmap's bars in their colours."""
    runs = results.read_runs(os.path.join(FIXTURES, "receive_run", results.RUNS))
    d = docmod.Doc("receive")
    receive.section(d, _ReceiveContext(runs, str(tmp_path)))
    html = tmp_path / "receive.html"
    html.write_text(d.html())
    assert "Why mmap falls back" in html.read_text()
    rgb = (render(html, tmp_path / "receive.png") * 255).astype(int)
    assert (rgb < 242).any(axis=2).mean() > 0.05          # text and tables, not a blank page
    for cat in ("kernel_rx_copy", "page_mapping"):          # copy's bars, mmap's bars
        near = (np.abs(rgb - np.array(_hex_rgb(CAT_COLORS[cat]))).max(axis=2) <= 12).sum()
        assert near > 200, (cat, near)
