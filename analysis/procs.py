"""Start processes held at a gate, so a tracer can follow them before they run a single syscall
of their own (see DEVELOPERS.md, launch gate)."""
import os
import signal
import subprocess


class GatedProcess:
    """fork(); the child waits on a pipe, then execs argv with the same pid.

    stdout/stderr of the child go to files (paths given), so nothing blocks on a full pipe.
    """

    def __init__(self, argv, stdout_path, stderr_path, cgroup=None):
        """cgroup: an analysis.cgroup.WorkloadCgroup to move the child into while it waits
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
        os.close(self._gate)
        self._gate = None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.argv, timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self, sig=signal.SIGKILL):
        """Signal the process by the pid we started (never by name)."""
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None
