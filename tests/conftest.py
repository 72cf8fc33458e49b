"""Shared by every pytest suite: the repository on sys.path, where the built binaries are, the
skip markers the integration suites open with, and the Python suite's results fixture.

Under `make test` (NETIO_FULL_TEST=1) a missing prerequisite is an error, not a skip: the
suites' skip conditions exist for partial runs by hand, and must never let CI pass on tests
that did not run."""
import os
import select
import shutil
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import files  # noqa: E402

from netio_trace.system import paths  # noqa: E402
from netio_trace.system.netns import Topology  # noqa: E402

BUILD = paths.build_dir()                 # $NETIO_BUILD, default <repo>/build
SERVER = os.path.join(BUILD, "netio-server")
CLIENT = os.path.join(BUILD, "netio-client")
TRACER = os.path.join(BUILD, "netio-tracer")
FIXTURES = os.path.join(REPO, "tests", "python", "fixtures")


def needs_root(why):
    """Skip marker of a test that needs root; why: what for (BPF, namespaces, ...)."""
    return pytest.mark.skipif(os.geteuid() != 0, reason=f"needs root ({why})")


def needs_built(*names):
    """Skip marker of a test that runs these binaries of the build tree."""
    missing = [n for n in names if not os.access(os.path.join(BUILD, n), os.X_OK)]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not built in {BUILD}")


def namespaces(*transports):
    """A module-wide fixture: the namespaces of each transport in turn (a parameter each,
    none for one transport), removed at the end of the module."""
    @pytest.fixture(scope="module", params=list(transports) if len(transports) > 1 else None)
    def topology(request):
        with Topology(getattr(request, "param", transports[0])) as t:
            yield t
    return topology


def pytest_sessionstart(session):
    if os.environ.get("NETIO_FULL_TEST") != "1":
        return
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    missing += [b for b in ("netio-server", "netio-client", "netio-tracer") if not paths.have_binary(b)]
    missing += [t for t in ("ip", "bpftool", "inferno-flamegraph", "chromium") if not files.find_tool(t)]
    if missing:
        pytest.exit("make test needs " + ", ".join(missing) + " (run as root after 'make deps all')",
                    returncode=1)


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
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["NETIO_ROOT"] = REPO
    if env:
        e.update(env)
    # a guest under QEMU/TCG loads the tracer about ten times slower (doctor loads it once
    # per rung there: two minutes on 5.10 with both guests booted)
    timeout = 600 if os.environ.get("NETIO_VMTEST") == "1" else 120
    return subprocess.run([*prefix, sys.executable, "-m", "netio_trace.cli", *args],
                          capture_output=True, text=True, env=e, cwd=cwd or REPO, timeout=timeout)


def wait_line(proc, needle, timeout):
    """Read proc's stderr (a text pipe) until a line containing needle; the lines read."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if needle in line:
                return seen
    raise AssertionError(f"never saw {needle!r}: {''.join(seen)}")
