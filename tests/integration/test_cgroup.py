"""`netio-trace trace --cgroup DIR` (needs root): every process of a cgroup v2
directory is followed, those already in it and those that start in it after the tracer; a
process outside it is not. Bytes are checked exactly against what the workloads report.
Binaries come from $NETIO_BUILD (default <repo>/build)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from netio_trace.system.netns import Topology  # noqa: E402
from conftest import (BUILD, CLIENT, SERVER, in_cgroup, made_cgroups, needs_cgroup2,  # noqa: E402
                      needs_root, wait_line)

TIMEOUT = 120

pytestmark = [needs_root("BPF, cgroups, namespaces"), needs_cgroup2()]


@pytest.fixture
def cgroup_dir():
    with made_cgroups(f"netio-trace-test-{os.getpid()}") as (path,):
        yield path


def _port(err_path, proc):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with open(err_path) as f:
            for line in f:
                if line.startswith("listening "):
                    return int(line.split()[1])
        assert proc.poll() is None, open(err_path).read()
        time.sleep(0.01)
    raise AssertionError("the server never listened")


def test_workload_started_in_the_cgroup_after_the_tracer_counts_exactly(cgroup_dir, tmp_path):
    """A client already in the cgroup (waiting for the port), a server started in it after
    the tracer is ready: the bytes each sent and received are exact; a server and client
    outside the cgroup are not followed."""
    out, port_file = tmp_path / "trace.json", tmp_path / "port"
    with Topology("loopback") as topo:
        client = f"{CLIENT} --addr 127.0.0.1 --threads 1 --size 4096 --netns {topo.receiver_ns}"
        early = subprocess.Popen(in_cgroup(cgroup_dir, "sh", "-c", f"while [ ! -s {port_file} ]; "
                                           f"do sleep 0.01; done; exec {client} --port "
                                           f"$(cat {port_file})"),
                                 stdout=open(tmp_path / "c.json", "w"))
        while str(early.pid) not in open(os.path.join(cgroup_dir, "cgroup.procs")).read():
            time.sleep(0.01)
        tracer = subprocess.Popen(
            [sys.executable, "-m", "netio_trace.cli", "trace", "--cgroup", cgroup_dir,
             "--no-sample", "--no-counters", "--json", str(out), "--netns", topo.sender_ns],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, NETIO_BUILD=BUILD),
            stderr=subprocess.PIPE, text=True)
        try:
            wait_line(tracer, "following cgroup", TIMEOUT)
            server = _serve(in_cgroup(cgroup_dir, *_server_cmd(topo).split()), tmp_path / "in",
                            port_file)
            assert early.wait(TIMEOUT) == 0 and server.wait(TIMEOUT) == 0
            outside = _serve(_server_cmd(topo).split(), tmp_path / "out")
            outside_client = subprocess.Popen(
                f"{client} --port {outside.port}".split(), stdout=subprocess.DEVNULL)
            assert outside_client.wait(TIMEOUT) == 0 and outside.wait(TIMEOUT) == 0
            tracer.send_signal(signal.SIGINT)
            assert tracer.wait(TIMEOUT) == 0, tracer.stderr.read()   # the signal is the end
        finally:
            # the waiting client too: left behind, it forks a sleep every 10 ms for good
            for p in (tracer, early):
                if p.poll() is None:
                    p.kill()
                    p.wait()
    snap = json.loads(out.read_text())
    procs = snap["processes"]
    s = json.loads((tmp_path / "in.json").read_text())
    c = json.loads((tmp_path / "c.json").read_text())
    assert s["bytes"] > 0 and c["bytes"] == s["bytes"]
    # the server, started in the cgroup after the tracer: every byte it sent
    assert procs[str(server.pid)]["tx_bytes"] == s["bytes"]
    # the client, there before: every byte received, and its 4-byte connection index
    assert procs[str(early.pid)]["rx_copy_bytes"] == c["bytes"]
    assert procs[str(early.pid)]["tx_bytes"] == 4
    assert snap["tx_bytes"] == s["bytes"] + 4 and snap["rx_copy_bytes"] == c["bytes"] + 4
    assert snap["drops"] == 0 and snap["cgroup_followed"] >= 1
    # nothing of the pair outside the cgroup
    assert str(outside.pid) not in procs and str(outside_client.pid) not in procs


def _server_cmd(topo):
    return (f"{SERVER} --strategy one-copy --size 4096 --threads 1 --port 0 --addr 127.0.0.1 "
            f"--netns {topo.sender_ns} --count 500")


def _serve(argv, stem, port_file=None):
    """Start a server (stdout to stem.json); once it listens, its port in .port (and in
    port_file)."""
    err = f"{stem}.err"
    server = subprocess.Popen(argv, stdout=open(f"{stem}.json", "w"), stderr=open(err, "w"))
    server.port = _port(err, server)
    if port_file:
        port_file.write_text(f"{server.port}\n")
    return server


def test_bad_cgroup_is_one_line_and_exit_2(tmp_path):
    for d in (tmp_path / "nope", tmp_path):
        cp = subprocess.run([sys.executable, "-m", "netio_trace.cli", "trace", "--cgroup", str(d),
                             "--", "true"], cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 2 and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
