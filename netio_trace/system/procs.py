"""Start processes held at a gate, so a tracer can follow them before they run a single syscall
of their own (see DEVELOPERS.md, launch gate)."""
import os
import select
import signal
import subprocess
import time


class GatedProcess:
    """fork(); the child waits on a pipe, then execs argv with the same pid.

    stdout/stderr of the child go to files (paths given), so nothing blocks on a full pipe.
    """

    def __init__(self, argv, stdout_path, stderr_path, cgroup=None):
        """cgroup: an netio_trace.system.cgroup.WorkloadCgroup to move the child into while it waits
        at the gate (before anyone is told its pid)."""
        self.argv = list(argv)
        gate_r, gate_w = os.pipe()
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
                os.execv(self.argv[0], self.argv)
            except BaseException:
                pass
            os._exit(127)
        os.close(gate_r)
        os.close(out)
        os.close(err)
        if cgroup is not None:
            cgroup.add(pid)
        self.pid = pid
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

    def _close_gate(self):
        """A child still at the gate reads end-of-file and exits without running argv."""
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None


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
