"""The buckets of followed tgids (bpf/filter.bpf.h, follow_buckets; needs root): an event of a
process whose bucket is 0 leaves before any lookup, so a bucket must never read 0 while a tgid
of it is followed. Every path that follows or forgets a process keeps them: `pid add`, a fork
of a followed process, --cgroup (its processes, a fork there, a move there), --prune-exited
and `clear`. Once nothing is changing, each bucket holds exactly the followed tgids that fall
in it, as the tracer's own maps show (read with bpftool)."""
import json
import os
import struct
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from conftest import (TRACER, drain, fdinfo_ids, in_cgroup, made_cgroups,  # noqa: E402
                      needs_built, needs_cgroup2, needs_root, read_trace, wait_for, wait_line)
from netio_trace.tracer import ControlTracer  # noqa: E402

TIMEOUT = 300 if os.environ.get("NETIO_VMTEST") == "1" else 60   # a guest's tracer loads slowly
CHILDREN = 40

pytestmark = [needs_root("BPF, cgroups"), needs_built("netio-tracer"), needs_cgroup2()]

# once it reads a line: forks argv[1] children that wait for its stdin to close, says their
# pids, waits for the same, and reaps them
FORKER = ("import os, sys\n"
          "sys.stdin.readline()\n"
          "kids = []\n"
          "for _ in range(int(sys.argv[1])):\n"
          "    pid = os.fork()\n"
          "    if pid == 0:\n"
          "        os.read(0, 1)\n"
          "        os._exit(0)\n"
          "    kids.append(pid)\n"
          "print(' '.join(map(str, kids)), flush=True)\n"
          "os.read(0, 1)\n"
          "for k in kids:\n"
          "    os.waitpid(k, 0)\n")


def _buckets_size():
    with open(os.path.join(REPO, "bpf", "netio.h")) as f:
        for line in f:
            if line.startswith("#define NETIO_FOLLOW_BUCKETS"):
                return int(line.split()[2])
    raise AssertionError("NETIO_FOLLOW_BUCKETS not in netio.h")


def _dump(map_id):
    out = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(map_id)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _maps(tracer_pid):
    """{name: id} of the tracer's maps named follow_buckets and followed_tgids."""
    found = {}
    for map_id in fdinfo_ids(tracer_pid, "map_id"):
        out = subprocess.run(["bpftool", "-j", "map", "show", "id", str(map_id)],
                             capture_output=True, text=True)
        if out.returncode == 0:
            name = json.loads(out.stdout).get("name")
            if name in ("follow_buckets", "followed_tgids"):
                found[name] = map_id
    assert set(found) == {"follow_buckets", "followed_tgids"}, found
    return found


def _state(tracer_pid):
    """(on, cgroups, [count per bucket], [followed tgids]) as the tracer's maps hold them
    now."""
    ids = _maps(tracer_pid)
    raw = bytes(int(b, 16) for b in _dump(ids["follow_buckets"])[0]["value"])
    nb = _buckets_size()
    on, cgroups, *counts = struct.unpack_from(f"<{2 + nb}I", raw)      # struct follow_buckets
    tgids = [e["formatted"]["key"] for e in _dump(ids["followed_tgids"])]
    return on, cgroups, counts, tgids


def _read(tracer_pid):
    """(whether each bucket holds exactly the followed tgids that fall in it, the followed
    tgids). A bucket may hold more for a moment (a tgid being followed or forgotten), never
    fewer: that is asserted at every read."""
    on, _, counts, tgids = _state(tracer_pid)
    want = [0] * len(counts)
    for t in tgids:
        want[t % len(counts)] += 1
    assert on == 1
    short = {b: (counts[b], want[b]) for b in range(len(counts)) if counts[b] < want[b]}
    assert not short, f"bucket: (held, followed) {dict(list(short.items())[:10])}"
    return counts == want, set(tgids)


def _exact(tracer_pid):
    """The followed tgids, once nothing is changing: each bucket holds exactly its own."""
    exact, tgids = _read(tracer_pid)
    assert exact, "a bucket holds a tgid that is not followed"
    return tgids


def _forker(argv_prefix=()):
    return subprocess.Popen([*argv_prefix, sys.executable, "-c", FORKER, str(CHILDREN)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _forked(p):
    """Tells forker p to fork: its children's pids."""
    p.stdin.write("go\n")
    p.stdin.flush()
    kids = [int(k) for k in p.stdout.readline().split()]
    assert len(kids) == CHILDREN
    return kids


def _end(p):
    p.stdin.close()
    assert p.wait(timeout=TIMEOUT) == 0


def test_pid_add_forks_and_clear_keep_the_buckets_exact():
    sleeper = subprocess.Popen(["sleep", "60"])
    forker = _forker()
    try:
        with ControlTracer(extra_args=("--no-sample", "--no-counters")).start(TIMEOUT) as tr:
            tr.pid_add(sleeper.pid)
            tr.pid_add(sleeper.pid)         # followed again: in its bucket once
            assert _exact(tr.pid) == {sleeper.pid}
            tr.pid_add(forker.pid)
            kids = _forked(forker)          # followed at their fork, by the BPF side
            assert _exact(tr.pid) == {sleeper.pid, forker.pid, *kids}
            tr.clear()
            on, cgroups, counts, tgids = _state(tr.pid)
            assert on == 1 and not tgids and not any(counts)
            assert cgroups == 0             # no --cgroup: a fork looks at no cgroup
        _end(forker)
    finally:
        for p in (sleeper, forker):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_cgroup_forks_moves_and_pruning_keep_the_buckets_exact(tmp_path):
    out = tmp_path / "trace.json"
    with made_cgroups(f"netio-buckets-test-{os.getpid()}") as (cg,):
        before = subprocess.Popen(in_cgroup(cg, "sleep", "60"))
        time.sleep(0.2)
        tracer = subprocess.Popen([TRACER, "--cgroup", cg, "--json", str(out),
                                   "--json-every", "0.3", "--prune-exited", "--no-sample",
                                   "--no-counters"], stderr=subprocess.PIPE, text=True)
        moved = subprocess.Popen(["sleep", "60"])
        forker = None
        try:
            wait_line(tracer, "following cgroup", TIMEOUT)
            drain(tracer.stderr)
            assert _state(tracer.pid)[1] == 1   # a fork looks at the child's cgroup
            forker = _forker(in_cgroup(cg))
            kids = _forked(forker)
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(moved.pid))
            ours = {before.pid, moved.pid, forker.pid, *kids}
            wait_for("the processes of the cgroup followed",
                     lambda: ours <= _read(tracer.pid)[1], TIMEOUT, every=0.2)
            assert ours <= _exact(tracer.pid)
            _end(forker)
            for p in (before, moved):
                p.kill()
                p.wait()

            def pruned():
                try:                    # taken, as --prune-exited's reader takes a rewrite
                    os.rename(out, f"{out}.taken")
                except FileNotFoundError:
                    pass
                read_trace(f"{out}.taken")
                exact, tgids = _read(tracer.pid)
                return exact and not ours & tgids
            wait_for("the ended processes pruned", pruned, TIMEOUT, every=0.3)
        finally:
            for p in (before, moved, forker):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
            tracer.terminate()
            assert tracer.wait(timeout=30) == 0
