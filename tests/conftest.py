"""Shared by every pytest suite: the repository on sys.path, where the built binaries are, the
skip markers the integration suites open with, the Python suite's results fixture, and what
the root suites do alike: the session's tracer of default options, cgroups of their own, a
process started in one, a trace object read, a condition waited for.

Under `make test` (NETIO_FULL_TEST=1) a missing prerequisite is an error, not a skip: the
suites' skip conditions exist for partial runs by hand, and must never let CI pass on tests
that did not run."""
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import files  # noqa: E402

from netio_trace.system import paths  # noqa: E402
from netio_trace.system.cgroup import cgroup2_root  # noqa: E402
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


def needs_cgroup2():
    """Skip marker of a test that makes cgroup v2 directories of its own."""
    return pytest.mark.skipif(not cgroup2_root(), reason="no cgroup2 mount")


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


@pytest.fixture(scope="session")
def default_tracer(tmp_path_factory):
    """The root suites' tracer of default options (tests/integration/test_tracer.py's Tracer),
    started once for the session at its first use and attached only while a module or a test
    has it (test_tracer.lent): a tracer's start is most of a test's time in the matrix's
    guests (docs/testing.md)."""
    from test_tracer import Tracer  # on sys.path once a module of tests/integration is
    t = Tracer(log=str(tmp_path_factory.mktemp("default-tracer") / "tracer.log"))
    t.ok("detach")      # attached only while lent (test_tracer.lent)
    yield t
    assert t.close() == 0, f"the session's default tracer exited non-zero {t._log()}"


@pytest.fixture
def fixture_dir(tmp_path):
    """A copy of the committed results fixture (runs.jsonl, sweep.json, folded stacks)."""
    return copy_fixture(tmp_path)


def copy_fixture(parent):
    d = parent / "results"
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


def drain(pipe):
    """Read a child's pipe to its end in a thread, so that the child never blocks writing."""
    threading.Thread(target=lambda: [None for _ in pipe], daemon=True).start()


def wait_for(what, fn, timeout=30, every=0.5):
    """fn() once it is true, tried every `every` seconds; the test fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(every)


@contextlib.contextmanager
def made_cgroups(*names, timeout=10):
    """cgroup v2 directories below the mount, made in order (a parent before its children):
    their paths. Removed at the end, children first, each once the processes that were in it
    are reaped; one still busy after timeout seconds fails the test."""
    made = []
    for name in names:
        made.append(os.path.join(cgroup2_root(), name))
        os.mkdir(made[-1])
    yield made
    for path in reversed(made):
        deadline = time.monotonic() + timeout
        while os.path.isdir(path):
            try:
                os.rmdir(path)
            except OSError:
                assert time.monotonic() < deadline, f"{path} still busy"
                time.sleep(0.05)


def in_cgroup(cg, *argv):
    """The argv of a shell that moves itself into cgroup cg, then execs argv: the same pid,
    so that the process is in cg before its first instruction and the caller holds its pid."""
    return ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *map(str, argv)]


def read_trace(path):
    """The trace object the tracer wrote at path; {} where there is none (yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def fdinfo_ids(pid, key):
    """The ids under key (prog_id, map_id) in pid's fdinfo: the BPF objects it holds an fd of."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids.update(int(line.split()[1]) for line in f if line.startswith(key + ":"))
        except OSError:
            pass
    return ids
