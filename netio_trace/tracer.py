"""netio-tracer from Python: the --control client the sweep uses (one load and attach per
sweep), and the `netio-trace trace` pass-through (the tracer's own mode, for any process)."""
import ctypes
import json
import os
import select
import signal
import subprocess
import tempfile
import time

from analysis.contract import IO_URING_STRATEGIES, ZEROCOPY_STRATEGIES
from netio_trace.system import machine, paths, state
READY_TIMEOUT = 90.0     # loading and attaching every program, BTF parsing included
COMMAND_TIMEOUT = 30.0   # a snapshot symbolizes stacks: give it time


class TracerError(RuntimeError):
    pass


def needs_skb_programs(strategy):
    """Whether a sender of this strategy may make zero-copy skbs, which only the per-skb
    programs see: MSG_ZEROCOPY, and io_uring (whose SEND_ZC the socket layer cannot tell from
    its SEND, so that any io_uring send asks for them)."""
    return strategy in ZEROCOPY_STRATEGIES or strategy in IO_URING_STRATEGIES


def set_pdeathsig(parent=None):
    """In the child, before exec: if the driver dies without a word (SIGKILL), the tracer
    gets SIGTERM and detaches. A parent already gone (pid `parent` no longer ours) ends the
    child at once, for the signal would never come."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def terminate(p, grace):
    """SIGTERM (the tracer detaches and exits), then SIGKILL after grace seconds, by the pid
    we started; reaped either way."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class ControlTracer:
    """A running `netio-tracer --control`. Use as a context manager, or call close()."""

    def __init__(self, attach="auto", freq=None, log_path=None, extra_args=(), binary=None,
                 sample_source=None, env=None):
        self.binary = binary or paths.binary("netio-tracer")
        self.env = dict(os.environ, **env) if env else None  # added to ours, for experiments
        self.argv = [self.binary, "--control", "--attach", attach]
        if freq is not None:
            self.argv += ["--freq", str(freq)]
        if sample_source is not None:
            self.argv += ["--sample-source", sample_source]
        self.argv += list(extra_args)
        self.log_path = log_path
        self.proc = None
        self.attach = None
        self.samples = None     # {"source", "freq"} from the ready line; None: no sampling
        self.ready_info = None
        self._buf = b""

    # -- process ------------------------------------------------------------------------
    def start(self, timeout=READY_TIMEOUT):
        if not os.path.isfile(self.binary):
            raise TracerError(f"tracer binary {self.binary} not found (build it with make, "
                              f"or set NETIO_BUILD)")
        stderr = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, start_new_session=True,
                                         preexec_fn=set_pdeathsig, env=self.env)
        finally:
            if stderr is not subprocess.DEVNULL:
                stderr.close()
        state.note_child(self.proc.pid, self.binary)
        line = self._read_line(timeout, what="ready")
        while not line.startswith("ready"):
            if line.startswith("error"):
                self.close()
                raise TracerError(f"tracer failed to start: {line[5:].strip()}")
            line = self._read_line(timeout, what="ready")
        rest = line[len("ready"):].strip()
        info = {}
        if rest:
            try:
                info = json.loads(rest)
            except ValueError:
                info = {"raw": rest}
        self.ready_info = info
        self.attach = info.get("attach") if isinstance(info, dict) else None
        self.samples = info.get("samples") if isinstance(info, dict) else None
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _tail_log(self, n=3):
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-n:])
        except OSError:
            return ""

    def last_words(self):
        """The last line the tracer wrote to its log, without its name: what it could not do
        when it exited (the log holds its stderr). None without a log or a line."""
        tail = self._tail_log(1)
        return tail.removeprefix("netio-tracer: ").strip() or None

    def _read_line(self, timeout, what):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TracerError(f"tracer gave no {what} within {timeout:.0f} s")
            r, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not r:
                if self.proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._buf += chunk
        if b"\n" not in self._buf:
            code = self.proc.wait(timeout=5) if self.proc.poll() is None else self.proc.returncode
            tail = self._tail_log()
            raise TracerError(f"tracer exited (status {code}) before {what}"
                              + (f": {tail}" if tail else ""))
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def command(self, cmd, timeout=COMMAND_TIMEOUT):
        """Send one command line; return the text after `ok` or raise TracerError."""
        if not self.alive():
            raise TracerError(f"tracer is not running (command {cmd!r})"
                              + (f": {self._tail_log()}" if self._tail_log() else ""))
        try:
            self.proc.stdin.write((cmd + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise TracerError(f"tracer did not take {cmd!r}: {e}") from None
        while True:
            line = self._read_line(timeout, what=f"answer to {cmd.split()[0]!r}")
            if line == "ok" or line.startswith("ok "):
                return line[2:].strip()
            if line.startswith("error"):
                raise TracerError(f"tracer: {cmd.split()[0]} failed: {line[5:].strip()}")
            # anything else on stdout is not an answer: skip it

    # -- the protocol -------------------------------------------------------------------
    def pid_add(self, pid):
        self.command(f"pid add {int(pid)}")

    def netns_add(self, name):
        self.command(f"netns add {name}")

    def clear(self):
        self.command("clear")

    def reset(self):
        self.command("reset")

    def skb_programs_for(self, strategy):
        """Until the next reset: the per-skb programs attached now where the run's sender
        makes zero-copy skbs (else on demand, and the fallback copy of its first sends would
        go unseen: docs/tracer.md, "The per-skb programs")."""
        if not needs_skb_programs(strategy):
            return
        try:
            self.command("skb-programs always")
        except TracerError as e:
            # an older build (bench.ab --old) knows no such command: it attaches them always
            if "unknown command" not in str(e):
                raise

    def detach_probes(self):
        """Nothing of ours attached (an untraced run): the programs stay loaded."""
        self.command("detach")

    def attach_probes(self):
        self.command("attach")

    def snapshot(self, json_path, folded_path=None):
        """Write the trace object (and folded stacks) and return it loaded."""
        cmd = f"snapshot {json_path}" + (f" {folded_path}" if folded_path else "")
        self.command(cmd)
        try:
            with open(json_path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise TracerError(f"tracer snapshot {json_path} is unreadable: {e}") from None

    def close(self, timeout=10.0):
        """quit; then SIGTERM, then SIGKILL, always by the pid this object started."""
        if self.proc is None:
            return None
        p = self.proc
        if p.poll() is None:
            try:
                p.stdin.write(b"quit\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                p.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                terminate(p, 5)
        for s in (p.stdin, p.stdout):
            try:
                if s:
                    s.close()
            except (OSError, ValueError):
                pass
        if p.returncode is not None:
            state.forget_child(p.pid)
        return p.returncode

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def samples_on_perf_events(source):
    """cycles and cpu-clock sample on perf events (which a cgroup scope makes cheaper); auto
    is cycles where a PMU exists, else the tick, which has no event of its own."""
    return source in ("cycles", "cpu-clock") or (source == "auto" and machine.has_pmu())


def probe(timeout=60.0):
    """`netio-tracer --probe` as a dict; raises TracerError with a clear reason."""
    b = paths.binary("netio-tracer")
    if not os.path.isfile(b):
        raise TracerError(f"netio-tracer not found at {b} (build it with make, or set NETIO_BUILD)")
    try:
        cp = subprocess.run([b, "--probe"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TracerError(f"netio-tracer --probe did not finish within {timeout:.0f} s") from None
    except OSError as e:
        raise TracerError(f"cannot run {b}: {e}") from None
    try:
        d = json.loads(cp.stdout)
    except ValueError:
        err = (cp.stderr or cp.stdout).strip().splitlines()
        raise TracerError(f"netio-tracer --probe (status {cp.returncode}) printed no JSON"
                          + (f": {err[-1]}" if err else "")) from None
    if not isinstance(d, dict):
        raise TracerError("netio-tracer --probe printed JSON that is not an object")
    return d


def start_failure(t, error):
    """One line for a tracer `t` that did not start: its own last line when it exited (what it
    could not load, and why), else what the client saw (a timeout, an `error` answer)."""
    if t.proc is not None and t.proc.poll() is not None:
        words = t.last_words()
        if words:
            return words
    return str(error)


def check_load(attach="auto", timeout=READY_TIMEOUT):
    """Load the tracer for real (`--control --no-sample`), read its ready line, take one
    snapshot with nothing followed, quit. Returns the ready object with the snapshot's
    `unavailable`, `software_from` and `latency` added; TracerError with the tracer's own
    one-line reason when it cannot load. `--probe` only tries attach types: this is what `run` will get."""
    with tempfile.TemporaryDirectory(prefix="netio-tracer-check-") as d:
        t = ControlTracer(attach=attach, log_path=os.path.join(d, "tracer.log"),
                          extra_args=["--no-sample"])
        try:
            t.start(timeout)
            snap = t.snapshot(os.path.join(d, "snapshot.json"))
        except TracerError as e:
            raise TracerError(start_failure(t, e)) from None
        finally:
            t.close()
    info = dict(t.ready_info) if isinstance(t.ready_info, dict) else {}
    info["unavailable"] = snap.get("unavailable") if isinstance(snap, dict) else None
    perf = snap.get("perf") if isinstance(snap, dict) else None
    info["software_from"] = perf.get("software_from") if isinstance(perf, dict) else None
    info["latency"] = snap.get("latency") if isinstance(snap, dict) else None
    return info


def trace_argv(pid=None, cmd=None, cgroups=(), attach="auto", freq=None, json_path=None,
               folded=None, netns=(), duration=None, no_sample=False, no_counters=False, sample_source=None,
               sample_cgroup=None, no_latency=False, json_every=None, latency_sample=None,
               skb_programs=None):
    """argv of the tracer's own (non-control) mode, for `netio-trace trace`."""
    argv = [paths.binary("netio-tracer"), "--attach", attach]
    if freq is not None:
        argv += ["--freq", str(freq)]
    if sample_source is not None and sample_source != "auto":
        argv += ["--sample-source", sample_source]
    if sample_cgroup:
        argv += ["--sample-cgroup", sample_cgroup]
    if json_path:
        argv += ["--json", json_path]
    if folded:
        argv += ["--folded", folded]
    for n in netns:
        argv += ["--netns", n]
    if duration is not None:
        argv += ["--duration", str(duration)]
    if json_every is not None:
        argv += ["--json-every", str(json_every)]
    if no_sample:
        argv.append("--no-sample")
    if no_counters:
        argv.append("--no-counters")
    if no_latency:
        argv.append("--no-latency")
    if latency_sample is not None:
        argv += ["--latency-sample", str(latency_sample)]
    if skb_programs is not None:
        argv += ["--skb-programs", skb_programs]
    if pid is not None:
        argv += ["--pid", str(pid)]
    for d in cgroups:
        argv += ["--cgroup", d]
    if cmd:
        argv += ["--", *cmd]
    return argv
