"""One `netio-trace trace`: the tracer as our child, the signals that end it, and what a driver
killed without a word leaves behind.

Signals behave as they do for perf record, bpftrace and tcpdump: the first SIGINT, SIGTERM or
SIGHUP ends the trace (the tracer detaches and writes its snapshot, then the exports, the
verdicts and the report are written as at any other end); a second aborts at once, saying what
was not written. The tracer dies with us (PR_SET_PDEATHSIG), and a later start removes what a
SIGKILLed driver left: its recorded tracer, its temporary directory (system/state.py) and its
cgroup (system/cgroup.py).
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from netio_trace.system import cgroup, state
from netio_trace.tracer import set_pdeathsig

PROG = "netio-trace"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TMP_PREFIX = "netio-trace-"


class Aborted(BaseException):
    """The second signal: stop at once."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class Signals:
    """While a trace runs: the first signal is noted and passed to the tracer, the second
    raises Aborted."""

    def __init__(self):
        self.first = None
        self.tracer = None          # the Popen, once started
        self.aborted = False
        self.old = {}

    def __enter__(self):
        self.old = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)
        return False

    def _handle(self, signum, frame):
        if self.aborted:
            return              # the abort is under way: let its cleanup finish
        if self.first is not None:
            self.aborted = True
            raise Aborted(signum)
        self.first = signum
        self._pass_on(signum)

    def _pass_on(self, signum):
        if self.tracer is not None and self.tracer.poll() is None:
            try:
                os.kill(self.tracer.pid, signum)
            except ProcessLookupError:
                pass

    def start(self, argv):
        """The tracer, as our child; a signal that came before it existed is passed on."""
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        self.tracer = subprocess.Popen(argv, preexec_fn=lambda: set_pdeathsig(parent))
        state.note_child(self.tracer.pid, argv[0])
        if self.first is not None:
            self._pass_on(self.first)
        return self.tracer

    def kill_tracer(self):
        """SIGKILL: its programs, links and maps go with its file descriptors."""
        if self.tracer is not None and self.tracer.poll() is None:
            self.tracer.kill()
            self.tracer.wait()


class Pending:
    """What the user asked trace to write and it has not written yet, by option."""

    def __init__(self, a):
        asked = (("--json", a.json if a.json != "-" else None), ("--folded", a.folded),
                 ("--openmetrics", a.openmetrics if a.openmetrics and
                  not a.openmetrics.startswith(":") else None),
                 ("--pprof", a.pprof),
                 ("--report", a.report and os.path.join(a.report, "report.html, report.md, "
                                                                 "verdicts.json")))
        self.left = {opt: what for opt, what in asked if what}
        if a.json == "-":
            self.left["--json"] = "the trace object on stdout"
        self.left["verdicts"] = "the verdicts' lines"

    def done(self, *opts):
        for o in opts:
            self.left.pop(o, None)

    def names(self):
        return list(self.left.values())


def become_subreaper():
    """A command the tracer starts comes back to us if the tracer stops first."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def run_tracer(sigs, argv, own_command):
    """Run the tracer's own mode to its end. Returns (its exit status, the signal that ended
    the trace or None). With `-- CMD`, a command still running after a signal is ended."""
    if own_command:
        become_subreaper()
    proc = sigs.start(argv)
    rc = proc.wait()
    state.forget_child(proc.pid)
    if own_command and sigs.first is not None:
        end_children()
    return (rc if rc >= 0 else 128 - rc), sigs.first


def _children():
    """Pids of this process's children (every thread's list)."""
    out = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def _reap(kids):
    for pid in list(kids):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                kids.discard(pid)
        except ChildProcessError:
            kids.discard(pid)


def end_children(grace=2.0):
    """SIGTERM, then SIGKILL, what was reparented to us (the traced command and what it
    forked: only our own descendants can be reparented to a subreaper), reaped by pid."""
    kids = _children()
    for pid in kids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while kids and time.monotonic() < deadline:
        _reap(kids)
        kids |= _children()
        time.sleep(0.02)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def clean_after_dead_drivers():
    """What SIGKILLed drivers left: their tracers and temporary directories (state.py), their
    cgroups. Returns the lines to tell."""
    killed, _dead = state.reap_dead_runs()
    cgroups = cgroup.remove_stale()
    said = []
    if killed:
        said.append(f"ended {len(killed)} process(es) left by a killed netio-trace: "
                    f"{', '.join(map(str, killed))}")
    if cgroups:
        said.append(f"removed {len(cgroups)} cgroup(s) left by a killed netio-trace")
    return said


def temp_dir():
    """A directory for the trace object and stacks, recorded so that a later start removes it
    if we are killed."""
    path = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-")
    cur = state.current()
    if cur is not None:
        cur.add_dir(path)
    return path


def remove_temp_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    cur = state.current()
    if cur is not None:
        cur.remove_dir(path)


def interrupted_line(signum, own_command):
    name = signal.Signals(signum).name
    return (f"{PROG} trace: {name}: tracer detached"
            + ("; the command was ended" if own_command else ""))


def aborted_line(signum, not_written):
    name = signal.Signals(signum).name
    what = ", ".join(not_written) if not_written else "nothing"
    return f"{PROG} trace: aborted by a second signal ({name}); not written: {what}"
