"""Nothing left behind, nothing lost, every bad input answered (root, built binaries).

What a test here calls "left behind" by a driver (the `netio-trace` process with pid P, writing
into the test's own temporary directory):
- network namespaces named `netio-P-…` (the driver's naming scheme), or new `nio-*` devices in
  the root namespace (the veth ends are created inside the run's namespaces);
- processes that did not exist before and either run one of our binaries (NETIO_BUILD) with
  `netio-P-` in their arguments, or still hold a file open under the test's directory (every
  workload writes its output to OUT/raw/…, the tracer its log to OUT/tracer.log, and the
  driver's own stdout/stderr go to files there), or carry a token the test put in a command;
- BPF programs and links that appeared during the test and are held by no live process (a
  pinned or leaked attachment; a program still held by a process of ours is a process left
  behind), and new entries under /sys/fs/bpf.
Other sessions may run tests at the same time: nothing here counts what it cannot attribute.

Zero-copy under a small net.core.optmem_max (ENOBUFS drained, --verify passes) is covered by
tests/integration/test_workloads.py::test_zero_copy_small_optmem and is not repeated here; the
messages of the bad-input table are covered by tests/python/test_cli_input.py (this file adds
what it does not check: no namespace or process started, nothing written, defaults included).
A kernel without MSG_ZEROCOPY is simulated in tests/integration/test_no_zerocopy.py (a seccomp
filter answers setsockopt(SO_ZEROCOPY) with ENOPROTOOPT for the tool and its children).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from analysis import files
from conftest import BUILD, REPO, needs_built, needs_root
from netio_trace.run import params as P
from netio_trace.system import cgroup, netns, state
from netio_trace.tracer import probe
from machine_state import (BINS, Driver, LAUNCHER, _cmdline, _env, _namespaces, _pids,
                           leftovers, snapshot, wait_for)


pytestmark = [
    needs_root("BPF, namespaces, cgroups"),
    needs_built(*BINS),
    pytest.mark.skipif(not files.find_tool("ip") or not files.find_tool("bpftool")
                       or not os.access(os.path.join(REPO, ".venv", "bin", "python"), os.X_OK),
                       reason="needs ip, bpftool and the venv"),
]

TINY = ["--strategies", "two-copy,zero-copy", "--sizes", "4K", "--threads", "1",
        "--repeat", "1", "--duration", "0.4"]


def strict_runs(path):
    """Every line of runs.jsonl must be one whole JSON object (nothing skipped)."""
    if not os.path.exists(path):
        return []
    runs = []
    with open(path, "rb") as f:
        data = f.read()
    assert not data or data.endswith(b"\n"), "runs.jsonl ends inside a line"
    for i, line in enumerate(data.splitlines()):
        d = json.loads(line)          # raises on a torn or damaged line
        assert isinstance(d, dict) and "key" in d and "status" in d, f"line {i + 1}: {line[:200]}"
        runs.append(d)
    return runs


def one_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{text}"
    return lines[0]


# ---- Ctrl-C / SIGTERM at several points of `run` -------------------------------------------------
def _point_early(d, out):
    time.sleep(0.05)           # the launcher or the interpreter is still starting


def _point_tracer_loading(d, out):
    wait_for(lambda: d.child_running("netio-tracer"), 30, "tracer process", d)


def _point_namespaces(d, out):
    wait_for(lambda: any(n.startswith(f"netio-{d.pid}-") for n in _namespaces()), 30,
             "namespace of the run", d)


def _point_mid_run(d, out):
    wait_for(lambda: d.child_running("netio-client"), 30, "client process", d)
    time.sleep(0.15)


def _point_report(d, out):
    wait_for(lambda: "building the report" in d.stderr(), 60, "report phase", d, step=0.01)
    time.sleep(0.3)


POINTS = {"early": _point_early, "tracer-loading": _point_tracer_loading,
          "namespaces-up": _point_namespaces, "mid-run": _point_mid_run,
          "report": _point_report}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", list(POINTS))
def test_run_interrupted(tmp_path, point, sig):
    before = snapshot()
    out = tmp_path / "out"
    d = Driver(["run", *TINY, "--out", str(out)], tmp_path)
    try:
        POINTS[point](d, out)
        d.proc.send_signal(sig)
        rc = d.wait(60)
    finally:
        d.kill_if_running()
    err = d.stderr()
    assert rc != 0, err[-2000:]
    if point != "early":       # our handlers are installed: the exit status names the signal
        assert rc == 128 + sig, f"exit {rc}: {err[-2000:]}"
        assert "Traceback" not in err, err[-3000:]
    runs = strict_runs(out / "runs.jsonl")
    if point == "report":
        assert len(runs) >= 4 and "netio-trace report" in err     # 2 strategies x 2 passes
        for f in (out / "plots").glob("*") if (out / "plots").exists() else []:
            assert f.suffix == ".png" and f.read_bytes().endswith(b"IEND\xaeB`\x82"), f
        assert not [f for f in out.rglob("*") if ".tmp" in f.name]
    if point in ("mid-run", "namespaces-up", "tracer-loading"):
        assert len(runs) < 2
    if point in ("mid-run", "namespaces-up"):
        assert "--resume" in err, err[-2000:]
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path]) == {}
    assert not os.path.exists(os.path.join(state.STATE_DIR, f"{d.pid}.json"))


# ---- Ctrl-C / SIGTERM of `trace -- CMD` -----------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", ["tracer-loading", "command-running"])
def test_trace_interrupted(tmp_path, point, sig):
    token = f"netio-reliability-{os.getpid()}-{time.monotonic_ns()}"
    before = snapshot()
    cmd = [sys.executable, "-c", "import time; time.sleep(60)", token]
    d = Driver(["trace", "--json", str(tmp_path / "trace.json"), "--", *cmd], tmp_path)

    def command_pid():
        """The command's pid (the driver's arguments carry the token too)."""
        return next((p for p in _pids() if _cmdline(p)[:2] == [sys.executable.encode(), b"-c"]
                     and token.encode() in _cmdline(p)), None)

    try:
        if point == "tracer-loading":
            wait_for(lambda: d.child_running("netio-tracer"), 30, "tracer process", d)
        else:
            wait_for(command_pid, 30, "traced command", d)
            time.sleep(0.2)
        d.proc.send_signal(sig)
        rc = d.wait(30)
    finally:
        d.kill_if_running()
    err = d.stderr()
    assert rc == 128 + sig, f"exit {rc}: {err[-2000:]}"
    assert "Traceback" not in err
    assert command_pid() is None, "the traced command was left running"
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path], tokens=[token]) == {}


# ---- SIGKILL: the next start removes what the dead run left, and nothing else --------------------
def _start_time(pid):
    return state.start_time(pid)


def _runs(pid, start):
    """The same process (pid and start time) still exists and is not a zombie (a killed
    orphan stays a zombie until init reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return st != b"Z" and _start_time(pid) == start


def test_sigkill_then_next_start(tmp_path):
    before = snapshot()
    decoys = []          # processes started here, ended here by pid
    made_ns = []
    try:
        # decoys: a foreign namespace, one named like ours whose owner is alive, a netio-server
        # that is not the dead run's (same binary!), and a forged state file of a dead owner
        # naming them with a start time or an exe that does not match
        sleeper = subprocess.Popen(["sleep", "120"])
        decoys.append(sleeper)
        for ns in ("netio-decoy", f"netio-{sleeper.pid}-0-snd"):
            if ns in _namespaces():
                pytest.fail(f"namespace {ns} exists before the test")
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made_ns.append(ns)
        decoy_server = subprocess.Popen(
            [os.path.join(BUILD, "netio-server"), "--netns", "netio-decoy", "--port", "0",
             "--strategy", "two-copy", "--size", "4K", "--threads", "1", "--duration", "60"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        decoys.append(decoy_server)
        dead = subprocess.Popen(["true"])
        dead.wait()
        forged = os.path.join(state.STATE_DIR, f"{dead.pid}.json")
        os.makedirs(state.STATE_DIR, exist_ok=True)
        wait_for(lambda: state.exe_of(decoy_server.pid) == os.path.realpath(
            os.path.join(BUILD, "netio-server")), 5, "decoy server exec")
        with open(forged, "w") as f:
            json.dump({"pid": dead.pid, "start": 1, "children": {
                str(decoy_server.pid): {"start": _start_time(decoy_server.pid) + 1,
                                        "exe": state.exe_of(decoy_server.pid)},
                str(sleeper.pid): {"start": _start_time(sleeper.pid),
                                   "exe": os.path.realpath(os.path.join(BUILD, "netio-client"))}}},
                      f)

        # the victim: a long run, SIGKILLed while its workloads run
        out = tmp_path / "killed"
        d = Driver(["run", "--strategies", "two-copy", "--sizes", "4K", "--threads", "1",
                    "--repeat", "1", "--duration", "30", "--out", str(out)], tmp_path, "killed")
        try:
            client = wait_for(lambda: d.child_running("netio-client"), 30, "client", d)
            server = d.child_running("netio-server")
            tracer = d.child_running("netio-tracer")
            assert server and tracer
            tracer_start = _start_time(tracer)
            own_ns = sorted(n for n in _namespaces() if n.startswith(f"netio-{d.pid}-"))
            assert own_ns
            with open(os.path.join(state.STATE_DIR, f"{d.pid}.json")) as f:
                recorded = json.load(f)["children"]
            assert {str(client), str(server), str(tracer)} <= set(recorded)
            starts = {p: _start_time(p) for p in (client, server)}
            time.sleep(0.3)
            d.proc.send_signal(signal.SIGKILL)
            d.wait(10)
        finally:
            d.kill_if_running()
        time.sleep(0.3)
        # what a SIGKILL leaves: the workloads (still sending) and the namespaces
        assert any(_runs(p, st) for p, st in starts.items()), "nothing left to clean?"
        assert all(n in _namespaces() for n in own_ns)
        # the tracer detaches by itself (PR_SET_PDEATHSIG)
        wait_for(lambda: not _runs(tracer, tracer_start), 10,
                 "tracer exit after its driver died", step=0.05)

        nxt = Driver(["run", "--strategies", "two-copy", "--sizes", "4K", "--threads", "1",
                      "--repeat", "1", "--duration", "0.2", "--no-trace", "--no-report",
                      "--out", str(tmp_path / "next")], tmp_path, "next")
        rc = nxt.wait(60)
        assert rc == 0, nxt.stderr()[-2000:]
        for p, st in starts.items():
            assert not _runs(p, st), f"workload {p} of the dead run still runs"
        assert not any(n in _namespaces() for n in own_ns)
        assert not os.path.exists(os.path.join(state.STATE_DIR, f"{d.pid}.json"))
        assert not os.path.exists(forged), "a dead owner's state file was kept"
        # never anything else
        assert "netio-decoy" in _namespaces() and f"netio-{sleeper.pid}-0-snd" in _namespaces()
        assert sleeper.poll() is None, "a process with a foreign exe was killed"
        assert decoy_server.poll() is None, "a process with another start time was killed"
        runs = strict_runs(out / "runs.jsonl")
        assert runs == []
        assert leftovers(before, owners=[d.pid, nxt.pid], dirs=[tmp_path]) == {}
    finally:
        for p in decoys:
            if p.poll() is None:
                p.kill()
            p.wait()
        for ns in made_ns:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def test_stale_namespace_with_own_pid():
    """A name with this process's pid can only be a dead predecessor's (same pid): the start
    removes it (else `ip netns add` of the first run fails); a foreign name stays."""
    mine, decoy = f"netio-{os.getpid()}-987-snd", "netio-decoy-own"
    for ns in (mine, decoy):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        assert mine not in netns.remove_stale_namespaces()
        assert mine in _namespaces()
        removed = netns.remove_stale_namespaces(include_own=True)
        assert mine in removed and decoy not in removed
        assert mine not in _namespaces() and decoy in _namespaces()
    finally:
        for ns in (mine, decoy):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


@pytest.mark.skipif(cgroup.cgroup2_root() is None, reason="no cgroup2 mount")
def test_stale_cgroup_of_dead_driver_removed():
    """The workloads' cgroup of a driver that died (its pid gone) is removed by the next start,
    a process still inside it moved out first; a live driver's cgroup stays."""
    root = cgroup.cgroup2_root()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = os.path.join(root, f"{cgroup.PREFIX}{dead.pid}")
    live = os.path.join(root, f"{cgroup.PREFIX}{os.getpid()}")
    sleeper = None
    try:
        os.makedirs(stale, exist_ok=True)
        os.makedirs(live, exist_ok=True)
        sleeper = subprocess.Popen(["sleep", "30"])
        with open(os.path.join(stale, "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        removed = cgroup.remove_stale()
        assert stale in removed and live not in removed
        assert not os.path.exists(stale) and os.path.isdir(live)
        assert sleeper.poll() is None       # moved out, not ended
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        for d in (stale, live):
            try:
                os.rmdir(d)
            except OSError:
                pass


# ---- failures inside a sweep ----------------------------------------------------------------------
def test_workload_dies_mid_run(tmp_path):
    before = snapshot()
    out = tmp_path / "out"
    d = Driver(["run", "--strategies", "two-copy,one-copy", "--sizes", "4K", "--threads", "1",
                "--repeat", "1", "--duration", "1.5", "--no-report", "--out", str(out)], tmp_path)
    try:
        client = wait_for(lambda: d.child_running("netio-client"), 30, "client", d)
        time.sleep(0.3)
        os.kill(client, signal.SIGKILL)     # a pid the driver started, found among its children
        rc = d.wait(60)
    finally:
        d.kill_if_running()
    err = d.stderr()
    assert rc == 1, f"exit {rc}: {err[-2000:]}"
    runs = strict_runs(out / "runs.jsonl")
    assert [r["strategy"] for r in runs] == ["two-copy", "one-copy"] * 2, \
        "the sweep did not go on"
    assert runs[0]["status"] == "failed" and "client" in runs[0]["error"], runs[0].get("error")
    assert all(r["status"] == "ok" for r in runs[1:]), [r.get("error") for r in runs]
    assert "failed" in err
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path]) == {}


def test_attach_rung_that_cannot_attach_is_refused(tmp_path):
    if probe().get("attach", {}).get("fentry") is not False:
        pytest.skip("fentry attaches on this kernel: nothing to refuse")
    before = snapshot()
    out = tmp_path / "out"
    t0 = time.monotonic()
    d = Driver(["run", "--attach", "fentry", "--quick", "--out", str(out)], tmp_path)
    rc = d.wait(60)
    line = one_line(d.stderr())
    assert rc == 2 and "fentry" in line and line.startswith("netio-trace run:"), line
    assert time.monotonic() - t0 < 10
    assert not out.exists()
    assert leftovers(before, owners=[d.pid], dirs=[tmp_path]) == {}


# ---- the environment: not root, no BTF, a missing tool --------------------------------------------
def _nobody():
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.fail("setpriv (util-linux) is missing: cannot run as nobody")
    return (setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups")


CMDS = {"run": lambda tmp: ["run", "--quick", "--out", str(tmp / "out")],
        "trace": lambda tmp: ["trace", "--", "true"],
        "doctor": lambda tmp: ["doctor"]}


@pytest.mark.parametrize("command", list(CMDS))
def test_not_root(tmp_path, command):
    """As the user nobody: through the launcher (what users type), and straight into the
    driver with the system python (the venv may not be readable for another user)."""
    tmp_path.chmod(0o777)
    args = CMDS[command](tmp_path)
    d = Driver(args, tmp_path, prefix=_nobody())
    rc = d.wait(60)
    line = one_line(d.stderr())
    assert rc == 2 and ("sudo" in line or "root" in line), line
    py = "/usr/bin/python3"
    if os.access(py, os.X_OK):
        cp = subprocess.run([*_nobody(), py, "-m", "netio_trace.cli", *args], cwd=REPO,
                            env=_env(PYTHONPATH=REPO, NETIO_ROOT=REPO),
                            capture_output=True, text=True, timeout=60)
        line = one_line(cp.stderr)
        assert cp.returncode == 2 and "needs root" in line and "sudo" in line, line
    assert not (tmp_path / "out").exists()


def _in_private_mounts(shell_setup, args, tmp_path):
    """Run the launcher in a private mount namespace after shell_setup (a mount that hides
    something from this process only: the machine itself is not touched)."""
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.fail("unshare (util-linux) is missing: cannot hide BTF or a tool")
    script = f"{shell_setup} && exec \"$0\" \"$@\""
    cp = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", script,
                         LAUNCHER, *args], cwd=REPO, env=_env(), capture_output=True, text=True,
                        timeout=120)
    return cp


@pytest.mark.parametrize("command", list(CMDS))
def test_no_btf(tmp_path, command):
    """No /sys/kernel/btf/vmlinux, for real: an empty tmpfs over /sys/kernel/btf in a private
    mount namespace."""
    before = snapshot()
    cp = _in_private_mounts("mount -t tmpfs none /sys/kernel/btf", CMDS[command](tmp_path),
                            tmp_path)
    line = one_line(cp.stderr)
    assert cp.returncode == 2 and "BTF" in line and "CONFIG_DEBUG_INFO_BTF" in line, line
    assert not (tmp_path / "out").exists()
    assert leftovers(before, dirs=[tmp_path]) == {}


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_missing_ip(tmp_path, command):
    """`ip` hidden for real: /dev/null bound over the binary in a private mount namespace."""
    ip = os.path.realpath(files.find_tool("ip"))
    cp = _in_private_mounts(f"mount --bind /dev/null {ip}", CMDS[command](tmp_path), tmp_path)
    line = one_line(cp.stderr)
    assert cp.returncode == 2 and "ip" in line and "iproute2" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["trace", "doctor"])
def test_missing_tracer(tmp_path, command):
    """No netio-tracer in the build tree (run's case is in tests/python/test_cli_input.py)."""
    empty = tmp_path / "nobuild"
    empty.mkdir()
    cp = subprocess.run([sys.executable, "-m", "netio_trace.cli", *CMDS[command](tmp_path)],
                        cwd=REPO, env=_env(NETIO_BUILD=str(empty), PYTHONPATH=REPO,
                                           NETIO_ROOT=REPO),
                        capture_output=True, text=True, timeout=120)
    line = one_line(cp.stderr)
    assert cp.returncode == 2 and "netio-tracer" in line and "make" in line, line


# ---- bad input: nothing started, nothing written ---------------------------------------------------
BAD = [["--sizes", "0"], ["--sizes", "-1"], ["--sizes", "7"], ["--sizes", "1e12"],
       ["--sizes", "abc"], ["--threads", "0"], ["--threads", "100000"],
       ["--strategies", "three-copy"], ["--transport", "infiniband"], ["--duration", "0"],
       ["--duration", "-1"]]


def test_bad_input_starts_nothing(tmp_path):
    """Each of BAD without --out (the default results/<time>/ must not appear), an --out
    that is a file or not writable, a --resume dir of another sweep (left untouched)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    other = tmp_path / "other"
    other.mkdir()
    with open(other / "sweep.json", "w") as f:
        json.dump(P.SweepParams(**{k: tuple(v) if isinstance(v, tuple) else v
                                   for k, v in P.QUICK.items()}).to_dict(), f)
    listing = sorted(os.listdir(other)), os.stat(other / "sweep.json").st_mtime_ns
    cases = [a for a in BAD] + [["--out", str(afile)], ["--out", "/proc/netio-x/out"],
                                ["--resume", str(other), "--sizes", "8K"],
                                ["--resume", str(other), "--threads", "0"]]
    before = snapshot()
    owners = []
    for args in cases:
        cp = subprocess.Popen([LAUNCHER, "run", *args], cwd=cwd, env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        owners.append(cp.pid)
        out, err = cp.communicate(timeout=60)
        line = one_line(err)
        assert cp.returncode == 2 and line.startswith("netio-trace run:"), (args, err)
        assert out == "", args
        assert os.listdir(cwd) == [], (args, os.listdir(cwd))
    assert afile.read_text() == "x"
    assert (sorted(os.listdir(other)), os.stat(other / "sweep.json").st_mtime_ns) == listing
    assert leftovers(before, owners=owners, dirs=[tmp_path]) == {}


# ---- soak, and resume against an uninterrupted sweep ---------------------------------------------
def _headings(path):
    with open(path) as f:
        return [re.sub(r"[\d.]+", "#", l.strip()) for l in f if l.startswith("#")]


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    """`run --quick` three times back to back."""
    where = tmp_path_factory.mktemp("soak")
    before = snapshot()
    ns_before = _namespaces()
    done = []
    for i in range(3):
        out = where / f"q{i}"
        d = Driver(["run", "--quick", "--out", str(out)], where, f"q{i}")
        rc = d.wait(180)
        done.append((d, out, rc))
    left = leftovers(before, owners=[d.pid for d, _, _ in done], dirs=[where])
    return {"runs": done, "left": left, "ns_before": ns_before, "ns_after": _namespaces()}


def test_soak_quick_three_times(soak):
    assert soak["left"] == {}
    theirs = {n for n in soak["ns_after"] - soak["ns_before"]
              if not re.match(r"^netio-\d+-", n)}
    assert not theirs, f"namespaces appeared: {theirs}"
    quick = P.SweepParams(**P.QUICK)
    expected = {slot.key() for slot in quick.schedule()}
    attaches = []
    for d, out, rc in soak["runs"]:
        assert rc == 0, d.stderr()[-2000:]
        runs = strict_runs(out / "runs.jsonl")
        scheduled = [r for r in runs if r["repeat"] < quick.repeat]
        assert {r["key"] for r in scheduled} == expected and len(scheduled) == len(expected)
        assert len({r["key"] for r in runs}) == len(runs)      # extra rounds: keys of their own
        for r in runs:
            assert r["status"] == "ok", (r["key"], r.get("error"))
            assert all(v is not False for v in r["checks"].values()), (r["key"], r["checks"])
            assert r["bytes_sent"] == r["bytes_received"] > 0
            if r["traced"]:
                assert r["trace"]["tx_bytes"] == r["bytes_sent"]
            if r["strategy"] == "zero-copy":
                zc = r["zerocopy"]
                assert zc["completions"] == zc["sends"] > 0
                assert zc["copied"] == zc["completions"], "veth: every completion is COPIED"
        attaches.append(json.dumps(next(r for r in runs if r["traced"])["trace"]["attach"],
                                   sort_keys=True))
        assert (out / "report.md").exists() and (out / "report.html").exists()
    assert len(set(attaches)) == 1, f"attach rungs differ between soaks: {attaches}"
    # No bound on throughput across the sweeps: it is the host's (bench/NOTES.md, "The
    # machine's own speed"); the bench compares speeds, beside probes of the machine's speed.


def test_resume_gives_the_same_report(tmp_path, soak):
    before = snapshot()
    out = tmp_path / "r"
    d = Driver(["run", "--quick", "--out", str(out)], tmp_path, "first")
    try:
        wait_for(lambda: (out / "runs.jsonl").exists()
                 and len(strict_runs(out / "runs.jsonl")) >= 5, 90, "five runs", d, step=0.05)
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGTERM)
        rc = d.wait(60)
    finally:
        d.kill_if_running()
    assert rc == 143, d.stderr()[-2000:]
    done = {r["key"] for r in strict_runs(out / "runs.jsonl")}
    assert 5 <= len(done) < 36 and not (out / "report.md").exists()
    r = Driver(["run", "--resume", str(out)], tmp_path, "resume")
    assert r.wait(120) == 0, r.stderr()[-2000:]
    assert f"{36 - len(done)} run(s) to do of 36" in r.stderr()
    runs = strict_runs(out / "runs.jsonl")
    assert all(x["status"] == "ok" for x in runs)
    ref_d, ref_out, ref_rc = soak["runs"][0]
    assert ref_rc == 0
    ref = strict_runs(ref_out / "runs.jsonl")
    # the scheduled rounds (extra rounds depend on each sweep's noise)
    cfg = lambda rs: sorted(x["key"] for x in rs if x["repeat"] < 3)  # noqa: E731
    assert len(cfg(runs)) == 36
    assert cfg(runs) == cfg(ref)
    for k in done:                      # the finished runs were kept, not run again
        assert sum(1 for x in runs if x["key"] == k) == 1
    assert _headings(out / "report.md") == _headings(ref_out / "report.md")
    assert sorted(os.listdir(out / "plots")) == sorted(os.listdir(ref_out / "plots"))
    assert sorted(os.listdir(out / "flamegraphs")) == sorted(os.listdir(ref_out / "flamegraphs"))
    assert leftovers(before, owners=[d.pid, r.pid], dirs=[tmp_path]) == {}
