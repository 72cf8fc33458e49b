"""The machine before and after a driver runs, and the driver itself: what the reliability
tests call "left behind" (test_reliability.py's docstring says what counts), shared by the
tests that end drivers by signals."""
import json
import os
import signal
import subprocess
import time

from conftest import BUILD, REPO
from netio_trace.system import cgroup

LAUNCHER = os.path.join(REPO, "netio-trace")
BINS = ("netio-server", "netio-client", "netio-tracer")
OUR_EXES = {os.path.realpath(os.path.join(BUILD, b)) for b in BINS}
NETNS_DIR = "/var/run/netns"


# ---- the machine, before and after -------------------------------------------------------------
def _env(**extra):
    e = dict(os.environ)
    e["NETIO_BUILD"] = BUILD
    e.pop("PYTHONPATH", None)
    e.update(extra)
    return e


def _pids():
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _fds(pid):
    out = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
    except OSError:
        pass
    return out


def _bpftool(kind):
    cp = subprocess.run(["bpftool", kind, "list", "--json"], capture_output=True, text=True)
    try:
        return {int(x["id"]) for x in json.loads(cp.stdout or "[]")}
    except (ValueError, KeyError, TypeError):
        return set()


def _held_bpf_ids(pids=None):
    """prog and link ids that some live process (of pids, default all) holds an fd of
    (fdinfo), links' programs too."""
    progs, links = set(), set()
    for pid in _pids() if pids is None else pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    text = f.read()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("prog_id:"):
                    progs.add(int(line.split()[1]))
                elif line.startswith("link_id:"):
                    links.add(int(line.split()[1]))
    return progs, links


def _pinned():
    out = set()
    for d, dirs, files in os.walk("/sys/fs/bpf"):
        out.update(os.path.join(d, x) for x in dirs + files)
    return out


def _root_links():
    cp = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True)
    return {l.split(":")[1].strip().split("@")[0] for l in cp.stdout.splitlines() if ":" in l}


def _namespaces():
    try:
        return set(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return set()


def snapshot():
    return {"pids": _pids(), "progs": _bpftool("prog"), "links": _bpftool("link"),
            "pinned": _pinned(), "root_links": _root_links()}


def _cgroups():
    root = cgroup.cgroup2_root()
    try:
        return {os.path.join(root, n) for n in os.listdir(root)} if root else set()
    except OSError:
        return set()


def _find_leftovers(before, owners, dirs, tokens):
    left = {}
    ns = sorted(n for n in _namespaces() for o in owners if n.startswith(f"netio-{o}-"))
    if ns:
        left["namespaces"] = ns
    cgs = sorted(c for c in _cgroups() for o in owners
                 if os.path.basename(c) == f"{cgroup.PREFIX}{o}")
    if cgs:
        left["cgroups"] = cgs
    dev = sorted(d for d in _root_links() - before["root_links"] if d.startswith("nio-"))
    if dev:
        left["root_links"] = dev
    procs = []
    me = os.getpid()
    for pid in _pids() - before["pids"]:
        if pid == me:
            continue
        args = _cmdline(pid)
        if not args:
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            exe = ""
        marked = any(a.startswith(f"netio-{o}-".encode()) for a in args for o in owners)
        if (exe in OUR_EXES and marked) or any(t.encode() in args for t in tokens) \
                or any(f.startswith(d) for f in _fds(pid) for d in dirs):
            procs.append((pid, b" ".join(args).decode(errors="replace")[:160]))
    if procs:
        left["processes"] = procs
    held_progs, held_links = _held_bpf_ids()
    progs = sorted(_bpftool("prog") - before["progs"] - held_progs)
    links = sorted(_bpftool("link") - before["links"] - held_links)
    if progs:
        left["bpf_progs"] = progs
    if links:
        left["bpf_links"] = links
    pins = sorted(_pinned() - before["pinned"])
    if pins:
        left["pinned"] = pins
    return left


def leftovers(before, owners=(), dirs=(), tokens=(), timeout=5.0):
    """What the drivers `owners` left, {} when nothing. BPF objects are freed asynchronously
    after their last fd closes: look again for a few seconds before calling it a leak."""
    dirs = [str(d) for d in dirs]
    deadline = time.monotonic() + timeout
    while True:
        left = _find_leftovers(before, owners, dirs, tokens)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


# ---- the driver --------------------------------------------------------------------------------
def _default_signals():
    """The child starts as from a terminal, with SIGINT and SIGTERM at their defaults: a test
    run in the background of a non-interactive shell (nohup CMD &) inherits SIGINT ignored,
    and an interruption before the driver installs its handlers would then be lost."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


class Driver:
    """`netio-trace ARGS` through the launcher, stdout/stderr into files under `where`."""

    def __init__(self, args, where, name="driver", env=None, prefix=()):
        self.out_path = os.path.join(where, f"{name}.stdout")
        self.err_path = os.path.join(where, f"{name}.stderr")
        with open(self.out_path, "w") as o, open(self.err_path, "w") as e:
            self.proc = subprocess.Popen([*prefix, LAUNCHER, *args], cwd=REPO,
                                         env=env or _env(), stdout=o, stderr=e,
                                         stdin=subprocess.DEVNULL,
                                         preexec_fn=_default_signals)
        self.pid = self.proc.pid

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def children(self):
        """{pid: exe} of the driver's children right now."""
        out = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for t in tids:
            try:
                with open(f"/proc/{self.pid}/task/{t}/children") as f:
                    for c in f.read().split():
                        try:
                            out[int(c)] = os.readlink(f"/proc/{c}/exe")
                        except OSError:
                            out[int(c)] = ""
            except OSError:
                pass
        return out

    def child_running(self, binary):
        exe = os.path.realpath(os.path.join(BUILD, binary))
        for pid, e in self.children().items():
            if e == exe:
                return pid
        return None

    def wait(self, timeout=120):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"driver still running after {timeout} s: {self.stderr()[-2000:]}")

    def kill_if_running(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(cond, timeout, what, driver=None, step=0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        if driver is not None and driver.proc.poll() is not None:
            raise AssertionError(f"driver ended (status {driver.proc.returncode}) before {what}: "
                                 f"{driver.stderr()[-1500:]}")
        time.sleep(step)
    raise AssertionError(f"no {what} within {timeout} s"
                         + (f": {driver.stderr()[-1500:]}" if driver else ""))


def end_driver(d, sig, timeout=60):
    """Send sig to the driver and wait for it (killed if it outlives timeout): (exit status,
    its stderr)."""
    try:
        d.proc.send_signal(sig)
        rc = d.wait(timeout)
    finally:
        d.kill_if_running()
    return rc, d.stderr()
