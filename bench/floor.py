"""The empty-program floor: an empty BPF program on each hook the tracer's programs use
(bpf/floor.bpf.c, loaded and attached by build/netio-bench-floor), attached while the same
workload runs, with BPF run-time stats on. What an empty program's run costs is what the stats
and the hook's dispatch cost every program there, so each of the tracer's programs reads as
the floor plus its own work (docs/bench.md, "The floor").

Floor is the running helper (a context manager); the functions below it only compute, for the
bench's tables and their tests."""
import json
import os
import signal
import subprocess
import time

from bench.config import BUILD
from netio_trace.system.procs import read_by
from netio_trace.tracer import set_pdeathsig

READY_TIMEOUT = 30.0


def hooks_of(target):
    """The hooks of one of the tracer's programs, from its snapshot's "target"
    ("tp_btf:a,tp_btf:b (on demand)"): ["tp_btf:a", "tp_btf:b"]. The floor attaches a hook
    the tracer attaches on demand from the start (it may come during the run)."""
    return [t.replace("(on demand)", "").strip() for t in (target or "").split(",")
            if t.strip()]


def targets(programs):
    """Every hook of the tracer's programs ({name: {"target", ...}}, the snapshot's
    self.programs), each once, in the programs' order."""
    return list(dict.fromkeys(h for p in programs.values() for h in hooks_of(p.get("target"))))


def delta(before, after):
    """{hook: {"runs", "ns"}} between two of Floor.read()'s answers."""
    return {h: {k: a[k] - before.get(h, {}).get(k, 0) for k in ("runs", "ns")}
            for h, a in after.items()}


def per_program(programs, floor):
    """{program: the floor's ns per run on its hooks} (runs of all its hooks together), None
    where the floor had no run there; floor: delta()'s answer over the workload."""
    out = {}
    for name, p in programs.items():
        got = [floor[h] for h in hooks_of(p.get("target")) if h in floor]
        runs = sum(g["runs"] for g in got)
        out[name] = sum(g["ns"] for g in got) / runs if runs else None
    return out


class FloorError(RuntimeError):
    pass


class Floor:
    """build/netio-bench-floor attached to hooks (as targets() names them), until close().
    Nothing is pinned: the programs are attached through the helper's own links, so they go
    when it ends, however it ends (it gets SIGTERM when this process dies). stats=False leaves
    BPF run-time stats off (its reads are then zeros, unless another tool turned them on)."""

    def __init__(self, hooks, log_path, binary=None, stats=True):
        self.argv = [binary or os.path.join(BUILD, "netio-bench-floor"),
                     *(() if stats else ("--no-stats",)), *hooks]
        self.log_path = log_path
        self.proc = None
        self.attached, self.missing, self.stats = [], {}, None
        self._buf = b""

    def start(self):
        with open(self.log_path, "ab") as log:
            parent = os.getpid()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log,
                                         preexec_fn=lambda: set_pdeathsig(parent))
        try:
            line = self._line(READY_TIMEOUT)
            if not line.startswith("ready "):
                raise FloorError(f"netio-bench-floor: {line!r} instead of its ready line")
            info = json.loads(line[len("ready "):])
        except BaseException:
            self.close()
            raise
        self.attached, self.missing = info["attached"], info["missing"]
        self.stats = info.get("stats")     # how they were turned on, or "off"
        return self

    def _line(self, timeout):
        fd, deadline = self.proc.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self._buf:
            chunk = read_by(fd, deadline, 65536)
            if chunk is None:
                raise FloorError(f"netio-bench-floor: no answer within {timeout:g} s "
                                 f"(log: {self.log_path})")
            if not chunk:
                raise FloorError(f"netio-bench-floor ended (exit {self.proc.wait()}; log: "
                                 f"{self.log_path})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def read(self):
        """{hook: {"runs", "ns"}}, cumulative since the helper attached them."""
        try:
            self.proc.stdin.write(b"read\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise FloorError(f"netio-bench-floor ended (exit {self.proc.wait()}; log: "
                             f"{self.log_path})") from None
        return json.loads(self._line(READY_TIMEOUT))

    def close(self):
        """quit; SIGTERM, then SIGKILL, by the pid this object started."""
        p, self.proc = self.proc, None
        if p is None:
            return
        try:
            p.stdin.write(b"quit\n")
            p.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and p.poll() is None:
                p.send_signal(sig)
            try:
                p.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        p.stdout.close()

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.close()
        return False
