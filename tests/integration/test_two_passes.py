"""The two passes, read from the kernel: while an untraced run of a sweep runs, no BPF link and no perf event of
ours is attached (read from the kernel: the tracer's file descriptors in /proc and their
fdinfo); while a traced run runs, they are.

Needs root and the built binaries (NETIO_BUILD); about 10 s.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD, REPO, needs_built, needs_root

pytestmark = [needs_root("BPF, network namespaces"), needs_built("netio-tracer")]


def _fds(pid):
    """(BPF links, perf events) among the open files of pid."""
    links = perf = 0
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target == "anon_inode:[perf_event]":
                perf += 1
            elif target == "anon_inode:bpf_link":
                links += 1
            elif target.startswith("anon_inode:"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    links += "link_id:" in f.read()
        except OSError:
            continue
    return links, perf


def _pids_with(pred):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if pred(int(p)):
                out.append(int(p))
        except OSError:
            continue
    return out


def _tracer_pid(log):
    pids = _pids_with(lambda p: os.readlink(f"/proc/{p}/fd/2") == log)
    return pids[0] if pids else None


def _servers(driver_pid):
    tag = f"netio-{driver_pid}-".encode()

    def is_server(p):
        with open(f"/proc/{p}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        return args[0].endswith(b"netio-server") and any(a.startswith(tag) for a in args)
    return _pids_with(is_server)


@pytest.mark.parametrize("source", ["auto", "cpu-clock"])
def test_nothing_of_ours_attached_during_untraced_runs(tmp_path, source):
    out = tmp_path / "r"
    p = subprocess.Popen([sys.executable, "-m", "netio_trace.cli", "run", "--strategies",
                          "one-copy", "--sizes", "64K", "--threads", "1", "--duration", "1",
                          "--repeat", "2", "--sample-source", source, "--out", str(out)],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NETIO_BUILD": BUILD, "PYTHONPATH": REPO})
    seen = {}           # server pid -> [(links, perf events)] while it ran
    log = str(out / "tracer.log")
    tracer = None
    while p.poll() is None:
        tracer = tracer or _tracer_pid(log)
        before = set(_servers(p.pid))
        fds = _fds(tracer) if tracer else None
        after = set(_servers(p.pid))
        for s in before & after:
            if fds is not None:
                seen.setdefault(s, []).append(fds)
        time.sleep(0.01)
    _, stderr = p.communicate()
    assert p.returncode == 0, stderr[-2000:]
    runs = [json.loads(line) for line in open(out / "runs.jsonl")]
    # the rounds alternate: untraced first in the first round, traced first in the second
    assert [r["traced"] for r in runs] == [False, True, True, False]
    servers = sorted(seen)
    assert len(servers) == 4, seen
    for server, run in zip(servers, runs):
        obs = seen[server]
        # a 10 ms poll over a run of 1 s, fewer on a loaded machine (bench/NOTES.md)
        assert len(obs) >= 10, (run["key"], len(obs))
        if run["traced"]:
            assert all(links > 0 for links, _ in obs), (run["key"], obs[:5])
            if source == "cpu-clock":
                assert all(perf > 0 for _, perf in obs), (run["key"], obs[:5])
        else:
            assert all(fds == (0, 0) for fds in obs), (run["key"], obs[:5])
