"""The exports of `netio-trace trace` with the real tracer (needs root), each read
by its own ecosystem's reader:
- `--openmetrics :PORT -- CMD`: while CMD runs, 127.0.0.1:PORT serves its counts as
  OpenMetrics, read by prometheus_client's parser; the bytes it sent over loopback TCP are there
  exactly before it exits;
- `--pprof FILE`: `go tool pprof -raw` reads the profile, stack by stack the folded stacks'
  counts."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("NETIO_BUILD", os.path.join(REPO, "build"))
SENT = 16 * 65536

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (BPF)")

# sends SENT bytes to itself over loopback TCP, then waits for the go file
SENDER = f"""
import os, socket, sys, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
for _ in range(16):
    c.sendall(b"x" * 65536)
got = 0
while got < {SENT}:
    got += len(a.recv(1 << 20))
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tx_bytes(port):
    """{pid: tx bytes} scraped from the port, or None while nothing answers."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={
        "Accept": "application/openmetrics-text; version=1.0.0"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for f in text_string_to_metric_families(text):
        if f.name == "netio_tx_bytes":
            return {s.labels["pid"]: s.value for s in f.samples}
    return {}


def test_counts_are_served_live(tmp_path):
    port, go = _free_port(), tmp_path / "go"
    script = tmp_path / "sender.py"
    script.write_text(SENDER)
    trace = subprocess.Popen(
        [sys.executable, "-m", "netio_trace.cli", "trace", "--no-sample", "--openmetrics",
         f":{port}", "--", sys.executable, str(script), str(go)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, NETIO_BUILD=BUILD),
        stderr=subprocess.PIPE, text=True)
    try:
        deadline, seen = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            seen = _tx_bytes(port)
            if seen and SENT in seen.values():
                break
            time.sleep(0.2)
        assert seen and list(seen.values()) == [SENT], seen
        go.touch()
        assert trace.wait(60) == 0, trace.stderr.read()
    finally:
        go.touch()
        if trace.poll() is None:
            trace.kill()
            trace.wait()
    assert _tx_bytes(port) is None      # the server went with the trace


def test_bad_port_is_one_line_and_exit_2():
    for spec in (":0", ":x", ":70000"):
        cp = subprocess.run([sys.executable, "-m", "netio_trace.cli", "trace", "--openmetrics",
                             spec, "--", "true"], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO), capture_output=True,
                            text=True, timeout=60)
        assert cp.returncode == 2 and len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def _pprof_raw_stacks(path):
    """{folded stack (root first): samples} from `go tool pprof -raw`."""
    out = subprocess.run(["go", "tool", "pprof", "-raw", str(path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    samples, names, section = [], {}, None
    for line in out.stdout.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
        elif section == "Samples:" and re.match(r"^\s+\d+: [\d ]+$", line):
            n, ids = line.split(":")
            samples.append((int(n), ids.split()))
        elif section == "Locations":
            m = re.match(r"^\s*(\d+): 0x[0-9a-f]+ M=\d+ (.+) \S*:\d+:\d+ s=\d+\s*$", line)
            if m:
                names[m.group(1)] = m.group(2)
    stacks = {}
    for n, ids in samples:
        key = ";".join(names[i] for i in reversed(ids))
        stacks[key] = stacks.get(key, 0) + n
    return stacks


@pytest.mark.skipif(not shutil.which("go"), reason="no go toolchain (go tool pprof)")
def test_pprof_reads_the_folded_stacks(tmp_path):
    folded, prof = tmp_path / "stacks.folded", tmp_path / "profile.pb.gz"
    cp = subprocess.run(
        [sys.executable, "-m", "netio_trace.cli", "trace", "--folded", str(folded), "--pprof",
         str(prof), "--json", str(tmp_path / "t.json"), "--",
         os.path.join(BUILD, "netio-busy-loop"), "--seconds", "1"],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, NETIO_BUILD=BUILD),
        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    expected = {}
    for line in folded.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        expected[stack] = expected.get(stack, 0) + int(n)
    assert sum(expected.values()) > 0
    assert _pprof_raw_stacks(prof) == expected
