"""A page rendered by headless Chromium, as the tests of every report look at it."""
import shutil
import subprocess
import tempfile

import pytest

from analysis import files


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = files.find_tool(name)
        if p:
            return p
    return None


def render(html, shot):
    """Screenshot of html (1200×2000) written to shot; its pixels as an RGB float array. The
    test is skipped where the machine has no Chromium (make deps installs it)."""
    chromium = _chromium()
    if not chromium:
        pytest.skip("no chromium on this machine")
    import matplotlib.image as mpimg    # deferred on purpose: heavy, and only with Chromium
    profile = tempfile.mkdtemp(prefix="netio-chromium-")
    try:
        cp = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--screenshot={shot}", "--window-size=1200,2000", "file://" + str(html)],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.exists(), cp.stderr[-2000:]
    return mpimg.imread(str(shot))[..., :3]
