"""How `netio-trace trace` ends, as people end it: Ctrl-C on a server it follows writes
everything asked for and exits 0; a second signal aborts and says what was not written; a
traced program's stdout stays byte for byte its own; `kill -9` of the driver leaves no tracer,
no BPF program of ours and (at the next start) no temporary directory or cgroup; a signal
during the baseline's short form stops the baseline only."""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BUILD, REPO, needs_built, needs_root
from machine_state import Driver, _held_bpf_ids, end_driver, _cmdline, _pids, leftovers, snapshot, wait_for
from netio_trace.system import cgroup, state
from trace_baseline import baseline  # noqa: F401 (a fixture)

pytestmark = [needs_root("BPF, cgroups"), needs_built("netio-tracer")]
# emulated guests (NETIO_VMTEST) run many times slower, and their times mean nothing
SLOWER = 10 if os.environ.get("NETIO_VMTEST") else 1
# how soon after the driver's SIGKILL the tracer and its programs are gone
GONE_WITHIN_S = 3.0 * SLOWER
TRACER = os.path.realpath(os.path.join(BUILD, "netio-tracer"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _iperf_server(port):
    """A server that never exits on its own."""
    return subprocess.Popen(["iperf3", "-s", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _iperf_client(port, seconds=1):
    for _ in range(100):                      # until the server listens
        cp = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds),
                             "-l", "16K"], capture_output=True, timeout=60)
        if cp.returncode == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"iperf3 -c failed: {cp.stderr[-500:]}")


def _tracer_of(d):
    return d.child_running("netio-tracer")


def _attached(pid):
    """The BPF program ids the process holds (its fdinfo)."""
    return _held_bpf_ids([pid])[0]


def _prog_ids():
    cp = subprocess.run(["bpftool", "prog", "list", "--json"], capture_output=True, text=True)
    return {int(p["id"]) for p in json.loads(cp.stdout or "[]")}


def _alive(pid):
    """Running, and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _following(d):
    """The tracer's own line once a --pid or --cgroup is followed: from then on, with every
    program attached, what the target does is counted."""
    return "netio-tracer: following " in d.stderr()


def _running(token):
    """A command of ours is started once it is followed (behind the tracer's gate)."""
    return lambda d: any(_alive(p) and token.encode() in _cmdline(p) for p in _pids())


def _wait_traced(d, ready=_following, timeout=60 * SLOWER):
    """The driver's tracer once it follows its target: (pid, program ids)."""
    tracer = wait_for(lambda: _tracer_of(d), timeout, "tracer process", d, step=0.02)
    wait_for(lambda: ready(d), timeout, "the target followed", d, step=0.02)
    return tracer, _attached(tracer)


@pytest.fixture
def server():
    port = _free_port()
    srv = _iperf_server(port)
    yield srv, port
    srv.kill()
    srv.wait()


def _target(how, server, cgroup_path):
    return ["--pid", str(server[0].pid)] if how == "pid" else ["--cgroup", cgroup_path]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("how", ["pid", "cgroup"])
def test_a_signal_ends_the_trace_of_a_server_with_everything_written(tmp_path, how, sig,
                                                                     server, baseline):
    cg = None
    if how == "cgroup":
        root = cgroup.cgroup2_root()
        if not root:
            pytest.skip("no cgroup2 mount")
        cg = os.path.join(root, f"netio-test-end-{os.getpid()}")
        os.makedirs(cg, exist_ok=True)
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(server[0].pid))
    out = tmp_path / "report"
    files = {"json": tmp_path / "t.json", "om": tmp_path / "t.om", "pprof": tmp_path / "t.pb.gz"}
    before = snapshot()
    d = Driver(["trace", *_target(how, server, cg), "--report", str(out), "--baseline",
                str(baseline), "--json", str(files["json"]), "--openmetrics", str(files["om"]),
                "--pprof", str(files["pprof"])], tmp_path)
    try:
        _wait_traced(d)
        _iperf_client(server[1])
    finally:
        rc, err = end_driver(d, sig, 120)
        if cg:
            server[0].kill()
            server[0].wait()
            for _ in range(100):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.05)
    assert rc == 0, f"exit {rc}: {err[-2000:]}"
    assert "Traceback" not in err
    for name in ("report.html", "report.md", "verdicts.json", "trace.json"):
        assert (out / name).stat().st_size > 0, name
    for f in files.values():
        assert f.stat().st_size > 0, f
    t = json.loads(files["json"].read_text())
    assert t["processes"][str(server[0].pid)]["rx_copy_bytes"] > 0
    assert "Would zero-copy pay off?" in err and "report written" in err
    with open(d.out_path) as f:
        assert f.read() == "", "trace wrote to stdout"
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path]) == {}


def test_a_second_signal_aborts_and_says_what_was_not_written(tmp_path, server, baseline):
    out = tmp_path / "report"
    before = snapshot()
    d = Driver(["trace", "--pid", str(server[0].pid), "--report", str(out), "--baseline",
                str(baseline)], tmp_path)
    try:
        tracer, _ = _wait_traced(d)
        d.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "tracer detached" in d.stderr(), 30, "the first signal's end", d,
                 step=0.005)
    finally:
        rc, err = end_driver(d, signal.SIGINT, 30)
    assert rc == 130, f"exit {rc}: {err[-2000:]}"
    (line,) = [x for x in err.splitlines() if "aborted by a second signal" in x]
    assert "not written:" in line and "Traceback" not in err
    if "report.html" in line:
        assert not (out / "report.html").exists()
    assert not _alive(tracer)
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path]) == {}


def test_the_traced_programs_stdout_stays_its_own(tmp_path):
    """Byte for byte what the program writes without trace, binary included, with the
    verdicts and the tracer's words on stderr."""
    prog = ("import socket, sys; s = socket.create_server(('127.0.0.1', 0)); "
            "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); "
            "c.sendall(b'x' * 65536); n = 0\n"
            "while n < 65536: n += len(a.recv(65536))\n"
            "sys.stdout.buffer.write(bytes(range(256)) * 64 + b'done\\n')")
    alone = tmp_path / "alone.out"
    with open(alone, "wb") as f:
        subprocess.run([sys.executable, "-c", prog], stdout=f, check=True, timeout=60)
    for flags in ([], ["--json", str(tmp_path / "t.json")], ["--no-sample"]):
        traced = tmp_path / "traced.out"
        with open(traced, "wb") as f:
            cp = subprocess.run([os.path.join(REPO, "netio-trace"), "trace", *flags, "--",
                                 sys.executable, "-c", prog], stdout=f, stderr=subprocess.PIPE,
                                text=True, timeout=120, env=dict(os.environ, NETIO_BUILD=BUILD))
        assert cp.returncode == 0, cp.stderr[-2000:]
        assert traced.read_bytes() == alone.read_bytes(), flags
        assert "Would zero-copy pay off?" in cp.stderr


def _own_temp_dirs(pid):
    return glob.glob(os.path.join(tempfile.gettempdir(), f"netio-trace-{pid}-*"))


@pytest.mark.parametrize("how", ["pid", "command", "cgroup"])
def test_kill_9_leaves_no_tracer_and_no_program(tmp_path, how, server):
    token = f"netio-end-{os.getpid()}-{time.monotonic_ns()}"
    cg = None
    if how == "pid":
        target = ["--pid", str(server[0].pid)]
    elif how == "command":
        target = ["--", sys.executable, "-c", "import time; time.sleep(120)", token]
    else:
        root = cgroup.cgroup2_root()
        if not root:
            pytest.skip("no cgroup2 mount")
        cg = os.path.join(root, f"netio-test-kill-{os.getpid()}")
        os.makedirs(cg, exist_ok=True)
        target = ["--cgroup", cg, "--duration", "120"]
    d = Driver(["trace", *target], tmp_path)
    try:
        tracer, progs = _wait_traced(d, _running(token) if how == "command" else _following)
        assert progs <= _prog_ids()
        assert _own_temp_dirs(d.pid), "the trace's temporary directory"
        d.proc.send_signal(signal.SIGKILL)
        d.wait(10)
        t0 = time.monotonic()
        wait_for(lambda: not _alive(tracer) and not (progs & _prog_ids()), GONE_WITHIN_S,
                 "the tracer gone and its programs freed", step=0.02)
        print(f"\n{how}: tracer and its {len(progs)} programs gone "
              f"{time.monotonic() - t0:.2f} s after SIGKILL")
        if how == "command":
            wait_for(lambda: not [p for p in _pids() if _alive(p) and token.encode() in
                                  _cmdline(p)], GONE_WITHIN_S, "the command ended")
    finally:
        d.kill_if_running()
    # the next start removes the killed driver's temporary directory, cgroup and state file
    nxt = subprocess.run([os.path.join(REPO, "netio-trace"), "trace", "--no-sample", "--",
                          "true"], capture_output=True, text=True, timeout=120 * SLOWER,
                         env=dict(os.environ, NETIO_BUILD=BUILD))
    if cg:
        os.rmdir(cg)
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    assert _own_temp_dirs(d.pid) == []
    assert not os.path.exists(os.path.join(state.STATE_DIR, f"{d.pid}.json"))
    assert not os.path.exists(os.path.join(cgroup.cgroup2_root() or "/nonexistent",
                                           f"{cgroup.PREFIX}{d.pid}"))


@pytest.mark.parametrize("point", ["checks", "runs"])
def test_a_signal_during_the_short_form_stops_the_baseline_only(tmp_path, point):
    """At its checks (a workload probing io_uring) or in its runs."""
    out = tmp_path / "report"
    prog = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
            "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); "
            "c.sendall(b'x' * 65536); a.recv(65536)")
    d = Driver(["trace", "--no-sample", "--report", str(out), "--", sys.executable, "-c", prog],
               tmp_path)
    try:
        if point == "runs":
            wait_for(lambda: "running the short form" in d.stderr(), 120, "the short form", d,
                     step=0.02)
        wait_for(lambda: d.child_running("netio-server"), 120, "a workload", d, step=0.02)
    finally:
        rc, err = end_driver(d, signal.SIGINT, 180)
    assert rc == 0, f"exit {rc}: {err[-2000:]}"
    v = json.loads((out / "verdicts.json").read_text())
    assert v.get("baseline") is None, v.get("baseline")
    md = (out / "report.md").read_text()
    assert "short form was interrupted (SIGINT): no baseline" in md
    assert "no baseline" in err
