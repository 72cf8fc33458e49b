"""Shared by every pytest suite. Under `make test` (NETIO_FULL_TEST=1) a missing prerequisite
is an error, not a skip: the suites' skip conditions exist for partial runs by hand, and must
never let CI pass on tests that did not run."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import files  # noqa: E402

from netio_trace.system import paths  # noqa: E402


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
