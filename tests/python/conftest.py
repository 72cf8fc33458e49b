import os
import shutil
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
if REPO not in sys.path:
    sys.path.insert(0, REPO)


@pytest.fixture
def fixture_dir(tmp_path):
    """A copy of the committed results fixture (runs.jsonl, sweep.json, folded stacks)."""
    d = tmp_path / "results"
    d.mkdir()
    shutil.copy(os.path.join(FIXTURES, "runs.jsonl"), d / "runs.jsonl")
    shutil.copy(os.path.join(FIXTURES, "sweep.json"), d / "sweep.json")
    shutil.copytree(os.path.join(FIXTURES, "folded"), d / "folded")
    return d


def run_cli(*args, env=None, cwd=None, prefix=()):
    """Run `python -m netio_trace.cli ARGS` the way the launcher does; CompletedProcess."""
    import subprocess
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["NETIO_ROOT"] = REPO
    if env:
        e.update(env)
    return subprocess.run([*prefix, sys.executable, "-m", "netio_trace.cli", *args],
                          capture_output=True, text=True, env=e, cwd=cwd or REPO, timeout=120)
