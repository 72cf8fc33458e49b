"""Section 1w of the bench on the real tracer: one loopback run whose tracer is attached only
in its traced windows, and nothing of ours left after it.

Needs root and the built binaries ($NETIO_BUILD)."""
import argparse
import json
import subprocess

import pytest

from bench import harness, observers, windows
from conftest import needs_built, needs_root
from netio_trace.system.netns import Topology

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-server", "netio-client", "netio-tracer")]


def links():
    r = subprocess.run(["bpftool", "link", "show", "-j"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0, r.stderr
    return len(json.loads(r.stdout))


def test_traced_windows_have_the_tracer_attached_and_untraced_ones_nothing(monkeypatch):
    seen = []
    window = windows.Windows._window

    def counted(self, traced, receiver):
        rate = window(self, traced, receiver)
        seen.append((traced, links()))
        return rate
    monkeypatch.setattr(windows.Windows, "_window", counted)
    before_links, before_progs = links(), harness.bpf_programs()
    b = harness.Bench(argparse.Namespace(duration=0.5))
    try:
        with Topology("loopback") as topo:
            run = b.netio(topo, "one-copy", 16384, 1, windows.run_seconds(3),
                          windows.Windows(observers.counting_level(), 3))
    finally:
        b.cleanup()
    assert len(run["windows"]) == 3
    assert all(t > 0 and u > 0 for t, u in run["windows"])
    assert [t for t, _ in seen] == [True, False, False, True, True, False]
    assert all(n > before_links for t, n in seen if t)
    assert all(n == before_links for t, n in seen if not t)
    assert harness.bpf_programs() == before_progs
