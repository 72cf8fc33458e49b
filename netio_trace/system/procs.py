"""Start processes held at a gate, so a tracer can follow them before they run a single syscall
of their own (docs/run.md, "The launch gate")."""
import os
import select
import signal
import subprocess
import time


# The descriptor a gated netio-server started with ready=True says it listens on: its argv
# carries `--ready-fd 3` (READY_ARGS).
READY_FD = 3
READY_ARGS = ["--ready-fd", str(READY_FD)]


class GatedProcess:
    """fork(); the child waits on a pipe, then execs argv with the same pid.

    stdout/stderr of the child go to files (paths given), so nothing blocks on a full pipe.
    ready=True: the child also gets the write end of a pipe as READY_FD, whose read end is
    self.ready (for wait_listening: a server given READY_ARGS writes its listening line there).
    """

    def __init__(self, argv, stdout_path, stderr_path, cgroup=None, ready=False):
        """cgroup: an netio_trace.system.cgroup.WorkloadCgroup to move the child into while it waits
        at the gate (before anyone is told its pid)."""
        self.argv = list(argv)
        gate_r, gate_w = os.pipe()
        ready_r, ready_w = os.pipe() if ready else (None, None)
        out = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(gate_w)
                os.dup2(out, 1)
                os.dup2(err, 2)
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.setpgid(0, 0)
                if os.read(gate_r, 1) != b"g":
                    os._exit(127)
                if ready:   # after the gate: READY_FD may be the gate's own descriptor
                    os.dup2(ready_w, READY_FD)
                    os.set_inheritable(READY_FD, True)
                os.execv(self.argv[0], self.argv)
            except BaseException:
                pass
            os._exit(127)
        os.close(gate_r)
        os.close(out)
        os.close(err)
        if ready:
            os.close(ready_w)   # the child's end only: end-of-file once the child closes it
        if cgroup is not None:
            cgroup.add(pid)
        self.pid = pid
        self.ready = ready_r
        self._gate = gate_w
        self.returncode = None

    def release(self):
        os.write(self._gate, b"g")
        self._close_gate()

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.argv, timeout)
            wait_for_exit([self], left)
        return self.returncode

    def kill(self, sig=signal.SIGKILL):
        """Signal the process by the pid we started (never by name)."""
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
        self._close_gate()
        self.close_ready()

    def end(self, timeout=5):
        """After a failed run: killed if it still runs (by the pid we started), reaped within
        timeout, its gate closed, so that nothing of it is left."""
        if self.poll() is None:
            self.kill()
            try:
                self.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self._close_gate()
        self.close_ready()

    def _close_gate(self):
        """A child still at the gate reads end-of-file and exits without running argv."""
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None

    def close_ready(self):
        """Once its listening line is read (kill and end close it too)."""
        if self.ready is not None:
            os.close(self.ready)
            self.ready = None


def read_by(fd, deadline, size):
    """Up to size bytes of fd once it has some, sleeping in select() until the monotonic
    deadline: b"" at the pipe's end, None if the deadline came first."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        return None
    return os.read(fd, size)


def wait_listening(fd, timeout):
    """The port of netio-server's `listening <port>` line, read from fd: a pipe of its stderr,
    or of its --ready-fd (GatedProcess(ready=True)). Sleeps in select() until the line or the
    pipe's end comes, never polling. Returns (port, the other text read); port None if the
    pipe ended first (the server exited). Raises TimeoutError after timeout seconds."""
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        lines = buf.split(b"\n")
        for i, line in enumerate(lines[:-1]):       # whole lines only
            if line.startswith(b"listening "):
                rest = b"\n".join(lines[:i] + lines[i + 1:])
                return int(line.split()[1]), rest.decode(errors="replace")
        chunk = read_by(fd, deadline, 4096)
        if chunk is None:
            raise TimeoutError(f"no listening line in {timeout:g} s: "
                               f"{buf.decode(errors='replace').strip()!r}")
        if not chunk:
            return None, buf.decode(errors="replace")
        buf += chunk


def wait_for_exit(procs, timeout=None):
    """Sleep until one of procs (anything with a .pid) has ended, or timeout seconds (None:
    no limit) have passed, without waking up in between: the kernel reports the end on a
    pidfd. A loop that polls instead wakes up on the CPUs the workloads are measured on:
    every 5 ms, it cost them 10% of their throughput here (one-copy 16 KiB over loopback, 6
    interleaved rounds: 46.3 against 51.7 Gbit/s). Does not reap; the caller's poll() does."""
    poller, fds = select.poll(), []
    try:
        for p in procs:
            try:
                fd = os.pidfd_open(p.pid)
            except ProcessLookupError:
                return          # already reaped: ended
            fds.append(fd)
            poller.register(fd, select.POLLIN)
        poller.poll(None if timeout is None else max(0, int(timeout * 1000)))
    finally:
        for fd in fds:
            os.close(fd)
