"""report.html rendered by headless Chromium: the screenshot must show a page with its images."""
import os
import shutil
import subprocess
import tempfile

import pytest

from analysis import files
from report import build as report


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = files.find_tool(name)
        if p:
            return p
    return None


def test_report_html_renders_not_blank(fixture_dir):
    chromium = _chromium()
    if not chromium:
        pytest.skip("no chromium on this machine")
    import matplotlib.image as mpimg
    import numpy as np
    report.build(str(fixture_dir))
    shot = fixture_dir / "screenshot.png"
    profile = tempfile.mkdtemp(prefix="netio-chromium-")
    try:
        cp = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--screenshot={shot}", "--window-size=1200,2000",
             "file://" + str(fixture_dir / "report.html")],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.exists(), cp.stderr[-2000:]
    img = mpimg.imread(str(shot))
    assert img.shape[0] >= 1900 and img.shape[1] >= 1100
    rgb = img[..., :3]
    # not blank: many distinct colours, a real share of non-white pixels, and colour (plots)
    nonwhite = (rgb < 0.95).any(axis=2).mean()
    assert nonwhite > 0.05, nonwhite
    assert rgb.std() > 0.05
    colourful = (rgb.max(axis=2) - rgb.min(axis=2) > 0.25).mean()
    assert colourful > 0.005, colourful       # the plots' lines and bars, not just text
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 200
    os.environ.get("KEEP_SCREENSHOT") and shutil.copy(shot, os.environ["KEEP_SCREENSHOT"])
