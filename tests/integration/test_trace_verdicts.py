"""`netio-trace trace --report` on real programs: iperf3 over TCP with and without
-Z (sendfile) and with -u, a web server sending a large file with sendfile on and off, a
Python asyncio echo server and client, and MSG_ZEROCOPY senders on loopback and on the
forward path. For each: the verdict lines (printed: run with -s to see them), asserted, and
every socket's bytes summing exactly to its process's.

The servers run on loopback or in the forward path's namespaces, which the tests create. The
verdicts these programs get do not depend on a crossover (local delivery, already in use), so
all but one take a baseline made here from this machine's identity; the first runs without one,
so that `--report` runs the short form of `run --preset zerocopy` first, for real."""
import json
import os
import pty
import socket
import subprocess
import sys
import time

import pytest

from conftest import BUILD, CLIENT, REPO, SERVER, namespaces, needs_built, needs_root
from trace_baseline import baseline  # noqa: F401 (a fixture)

pytestmark = [needs_root("BPF, namespaces"), needs_built("netio-tracer", "netio-server",
                                                         "netio-client")]
TIMEOUT = 240
fwd = namespaces("forward")


def _env():
    return dict(os.environ, PYTHONPATH=REPO, NETIO_BUILD=BUILD)


def _cli(*args):
    return [sys.executable, "-m", "netio_trace.cli", *args]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trace(tmp_path, argv, *flags, baseline=None, name="report", start=None):
    """`netio-trace trace --report DIR [--baseline B] FLAGS -- ARGV`, with start(proc) run
    while it traces (a client, say). Returns (verdicts.json, trace.json, stdout, stderr)."""
    out = tmp_path / name
    cmd = _cli("trace", "--report", str(out), *(("--baseline", str(baseline)) if baseline else ()),
               *flags, "--", *argv)
    p = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        if start:
            start(p)
        stdout, stderr = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, stderr[-3000:]
    shown = " ".join(a if len(a) < 80 else a[:40] + "…" for a in cmd[3:])
    print(f"\n$ netio-trace {shown}\n" + stderr[stderr.find("Would zero-copy"):])
    return (json.loads((out / "verdicts.json").read_text()),
            json.loads((out / "trace.json").read_text()), stdout, stderr)


def sums_exact(t):
    """Each process's bytes are the sum of its sockets' bytes, nothing left unattributed."""
    assert t["sockets_unattributed"] == {} and t["sockets_untracked"] == 0
    for pid, p in t["processes"].items():
        mine = [s for s in t["sockets"] if str(s["pid"]) == pid]
        for field, sfield in (("tx_bytes", "tx_bytes"), ("tx_calls", "tx_calls"),
                              ("rx_copy_bytes", "rx_copy_bytes"),
                              ("tx_spliced_bytes", "tx_spliced_bytes")):
            assert p[field] == sum(s[sfield] for s in mine), (pid, field)
        if p.get("zc_tx_bytes") is not None:
            assert p["zc_tx_bytes"] == sum(s["zc_tx_bytes"] for s in mine)


def sender(v, proto="tcp"):
    """The flow that sent the most bytes."""
    flows = [f for f in v["flows"] if f["proto"] == proto]
    return max(flows, key=lambda f: f["share"])


def said(flow, alt):
    return flow["verdicts"][alt]["text"]


def _iperf_server(port):
    return subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _listening(port):
    """A socket listens on port (read from /proc: a connection would be iperf3 -1's client)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                    return True
    return False


def _wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while not _listening(port):
        assert time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.05)


def _iperf(tmp_path, name, *args, baseline=None):
    port = _free_port()
    srv = _iperf_server(port)
    try:
        _wait_port(port)
        return trace(tmp_path, ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "1", *args],
                     "--no-counters", baseline=baseline, name=name)
    finally:
        srv.wait(timeout=30)


def test_iperf3_tcp_runs_the_short_form_first(tmp_path):
    """No --baseline: --report runs the short form of `run --preset zerocopy` first and says
    so; iperf3's copying TCP sender over loopback: zero-copy would not help."""
    v, t, out, err = _iperf(tmp_path, "tcp")
    assert "running the short form of `run --preset zerocopy`" in err
    assert (tmp_path / "tcp" / "baseline" / "runs.jsonl").exists()
    md = (tmp_path / "tcp" / "report.md").read_text()
    assert "the short form of `run --preset zerocopy`, run first" in md
    f = sender(v)
    assert said(f, "zero-copy").startswith("would not help: delivered locally")
    assert said(f, "io-uring-zc").startswith("would not help: delivered locally")
    assert not said(f, "sendfile").startswith("already in use")
    sums_exact(t)


def test_iperf3_tcp_sendfile_is_already_in_use(tmp_path, baseline):
    v, t, _, _ = _iperf(tmp_path, "tcp-Z", "-Z", baseline=baseline)
    f = sender(v)
    assert said(f, "sendfile").startswith("already in use: 100.0% of its")
    assert "spliced from page-cache pages" in said(f, "sendfile")
    assert said(f, "zero-copy").startswith("would not help: delivered locally")
    sums_exact(t)


def test_iperf3_udp(tmp_path, baseline):
    v, t, _, _ = _iperf(tmp_path, "udp", "-u", "-b", "0", "-l", "16K", baseline=baseline)
    f = sender(v, "udp")
    assert said(f, "zero-copy").startswith("would not help: delivered locally: it runs over "
                                           "loopback")
    assert said(f, "sendfile").startswith("would not help: a UDP socket")
    sums_exact(t)


FILE_SERVER = r"""
import os, socket, sys
path, mode, port_file = sys.argv[1:4]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
open(port_file + ".tmp", "w").write(str(srv.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
c, _ = srv.accept()
c.recv(65536)
size = os.path.getsize(path)
c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
with open(path, "rb") as f:
    if mode == "on":
        c.sendfile(f)
    else:
        while True:
            chunk = f.read(65536)
            if not chunk:
                break
            c.sendall(chunk)
c.close()
"""


@pytest.mark.parametrize("mode", ("on", "off"))
def test_web_server_with_sendfile_on_and_off(tmp_path, baseline, mode):
    """A tiny HTTP server sends a 64 MiB file to curl, with sendfile(2) or read and send."""
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.write(os.urandom(1 << 20) * 64)
    port_file = tmp_path / f"port-{mode}"

    def fetch(proc):
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "server never listened"
            time.sleep(0.02)
        got = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                              f"http://127.0.0.1:{port_file.read_text()}/big"],
                             capture_output=True, text=True, timeout=60)
        assert got.stdout == str(64 << 20)

    v, t, _, _ = trace(tmp_path, [sys.executable, "-c", FILE_SERVER, str(big), mode,
                                  str(port_file)], "--no-counters", baseline=baseline,
                       name=f"web-{mode}", start=fetch)
    f = sender(v)
    if mode == "on":
        assert said(f, "sendfile").startswith("already in use")
        assert f"of its 64.0 MiB spliced" in said(f, "sendfile") or "spliced" in said(f, "sendfile")
    else:
        assert not said(f, "sendfile").startswith("already in use")
        assert said(f, "sendfile").startswith(("would help if its bytes come from a file",
                                               "undecided: its copy from user space"))
    assert said(f, "zero-copy").startswith("would not help: delivered locally")
    sums_exact(t)


ECHO = r"""
import asyncio, subprocess, sys
CLIENT = '''
import asyncio, sys
async def main(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(3000):
        w.write(b"x" * 4096)
        await w.drain()
        await r.readexactly(4096)
    w.close()
    await w.wait_closed()
asyncio.run(main(int(sys.argv[1])))
'''
async def echo(r, w):
    while data := await r.read(65536):
        w.write(data)
        await w.drain()
    w.close()
async def main():
    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, str(port))
    assert await client.wait() == 0
    srv.close()
asyncio.run(main())
"""


def test_asyncio_echo_server_and_client(tmp_path, baseline):
    v, t, _, _ = trace(tmp_path, [sys.executable, "-c", ECHO], "--no-counters",
                       baseline=baseline, name="echo")
    assert len(v["flows"]) == 2             # the server's connection and the client's
    for f in v["flows"]:
        assert said(f, "zero-copy").startswith("would not help: delivered locally: the other "
                                               "end of its TCP connection is on this host")
        assert said(f, "io-uring-zc").startswith("would not help: delivered locally")
    sums_exact(t)


def _pair_script(strategy, size, count):
    return ("set -e; "
            f"{SERVER} --strategy {strategy} --size {size} --threads 1 --port 0 "
            f"--addr 127.0.0.1 --count {count} --ready-fd 3 3>$D/port >$D/s.json 2>$D/s.err & "
            "while ! grep -q listening $D/port 2>/dev/null; do sleep 0.02; done; "
            f"{CLIENT} --addr 127.0.0.1 --port $(cut -d' ' -f2 $D/port) --threads 1 "
            f"--size {size} >$D/c.json; wait")


def test_loopback_zerocopy_sender_would_not_help(tmp_path, baseline):
    """MSG_ZEROCOPY over loopback: every zero-copy byte copied back, and the verdict says so,
    with that evidence."""
    v, t, _, _ = trace(tmp_path, ["env", f"D={tmp_path}", "sh", "-c",
                                  _pair_script("zero-copy", 65536, 5000)],
                       "--no-counters", baseline=baseline, name="lo-zc")
    (f,) = [f for f in v["flows"] if f["comm"] == "netio-server"]
    (s,) = [s for s in t["sockets"] if s["comm"] == "netio-server"]
    assert s["zc_tx_bytes"] == s["tx_bytes"] == 5000 * 65536
    # a retransmitted zero-copy segment is copied back again: at least every byte sent, and
    # every byte once less what was copied again
    assert s["fallback_copy_bytes"] >= s["zc_tx_bytes"]
    assert s["fallback_copy_bytes"] - s["fallback_copy_again_bytes"] <= s["zc_tx_bytes"]
    copied_mib = s["fallback_copy_bytes"] / 2**20
    assert said(f, "zero-copy").startswith(
        f"would not help: delivered locally: the kernel copied {copied_mib:.1f} MiB of its "
        "312.5 MiB sent zero-copy back")
    sums_exact(t)


def test_forward_zerocopy_sender_is_already_in_use(tmp_path, baseline, fwd):
    """MSG_ZEROCOPY on the forward path (nothing receives): already in use, none copied back
    (6.17+: a forwarded skb keeps its pages)."""
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) < (6, 17):
        pytest.skip("before 6.17 the forwarding namespace copies every zero-copy skb")
    flags = [a for ns in fwd.namespaces for a in ("--netns", ns)]
    v, t, _, _ = trace(tmp_path, [SERVER, "--netns", fwd.sender_ns, "--addr",
                                  fwd.server_addr, "--port", "5301", "--udp", "--strategy",
                                  "zero-copy", "--size", "16384", "--threads", "1", "--count",
                                  "20000"], "--no-sample", *flags, baseline=baseline, name="fwd")
    f = sender(v, "udp")
    assert said(f, "zero-copy").startswith("already in use: 100.0% of its 312.5 MiB left as "
                                           "user pages, none copied back")
    (s,) = t["sockets"]
    assert s["zc_tx_bytes"] == s["tx_bytes"] == 20000 * 16384 and s["fallback_copy_bytes"] == 0
    sums_exact(t)


def test_baseline_from_another_machine_is_said_and_left_out(tmp_path, baseline):
    other = tmp_path / "other"
    other.mkdir()
    runs = [dict(json.loads(line), machine={"hostname": "elsewhere", "cpu": "another"})
            for line in (baseline / "runs.jsonl").read_text().splitlines()]
    (other / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    cp = subprocess.run(_cli("trace", "--no-sample", "--baseline", str(other), "--", "true"),
                        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    (line,) = [line for line in cp.stderr.splitlines() if "another machine" in line]
    assert "hostname 'elsewhere'" in line and line.endswith("going on without it")


def _on_a_terminal(argv):
    """Run argv with its stdin, stdout and stderr on a pseudo-terminal: (exit status, what it
    showed)."""
    m, s = pty.openpty()
    p = subprocess.Popen(argv, cwd=REPO, env=_env(), stdin=s, stdout=s, stderr=s)
    os.close(s)
    out = b""
    while True:
        try:
            chunk = os.read(m, 65536)
        except OSError:         # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(m)
    return p.wait(timeout=TIMEOUT), out.decode(errors="replace")


def test_the_terminal_gets_the_table_and_verdicts_not_json():
    """Point 4: no raw JSON on a terminal unless asked, the verdicts at the end."""
    prog = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
            "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); "
            "c.sendall(b'x' * 65536); a.recv(65536)")
    rc, shown = _on_a_terminal(_cli("trace", "--no-sample", "--", sys.executable, "-c", prog))
    assert rc == 0, shown
    assert '"attach"' not in shown and '{"' not in shown
    assert "Where the bytes were copied" in shown        # the tracer's table
    lines = [line.strip() for line in shown.rstrip().splitlines()]
    (head,) = [i for i, line in enumerate(lines) if line.startswith("Would zero-copy pay off?")]
    assert head > lines.index("Where the bytes were copied (bytes/msg = bytes per send call):")
    assert lines[-1].startswith("sendfile:") and len(lines) - head - 1 == 4 * 2   # 2 flows
    rc, shown = _on_a_terminal(_cli("trace", "--no-sample", "--json", "-", "--", sys.executable,
                                    "-c", prog))
    assert rc == 0 and '"attach"' in shown


def test_json_dash_puts_the_trace_object_on_stdout(tmp_path):
    cp = subprocess.run(_cli("trace", "--no-sample", "--json", "-", "--", "true"), cwd=REPO,
                        env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    t = json.loads(cp.stdout)                  # stdout is the object alone
    assert "sockets" in t and "processes" in t
    assert "Would zero-copy pay off?" in cp.stderr or "no verdict" in cp.stderr
