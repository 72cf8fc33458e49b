"""A cgroup2 directory for the workloads a sweep starts, so that the tracer samples them with
one event per CPU that runs only while one of them is on that CPU (netio-tracer
--sample-cgroup). Per-task cpu-clock events re-arm their timer at every context switch, a VM
exit each in a VM: measured here (bench section 4), that is what made stack sampling expensive
with more than one connection. Only processes we start go in it; a process followed with
`trace --pid` stays where it is.

The directory is named netio-trace-<pid of the driver>, below the cgroup2 mount, with no
controller enabled (it limits nothing). remove() deletes it; remove_stale() deletes those of
dead drivers."""
import os
import re
import time

PREFIX = "netio-trace-"


def cgroup2_root():
    """The cgroup2 mount point, or None (a cgroup v1 only machine)."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                if sep and right.split()[0] == "cgroup2":
                    return left.split()[4]
    except OSError:
        pass
    return None


def _procs(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _rmdir(path, root, timeout=2.0):
    """rmdir path once it is empty: processes that exited leave it as their parent reaps them;
    any still inside after timeout go back to the root cgroup first. True when removed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    for pid in _procs(path):
        try:
            with open(os.path.join(root, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False


class WorkloadCgroup:
    def __init__(self, root, path):
        self.root, self.path = root, path

    @classmethod
    def create(cls):
        """A new cgroup for this driver's workloads, or None where there is no cgroup2 or it
        cannot be made (the tracer then keeps per-task events)."""
        root = cgroup2_root()
        if not root:
            return None
        path = os.path.join(root, f"{PREFIX}{os.getpid()}")
        try:
            os.mkdir(path)
        except FileExistsError:
            pass            # a dead predecessor with our pid: reuse it
        except OSError:
            return None
        return cls(root, path)

    def add(self, pid):
        """Move pid (a process we started, still at its launch gate) in. False if it could
        not be moved: it is then sampled by its own per-task events."""
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(int(pid)))
            return True
        except OSError:
            return False

    def remove(self):
        return _rmdir(self.path, self.root)


def remove_stale():
    """Delete the cgroups of dead drivers (their pid no longer alive). Returns their paths."""
    root = cgroup2_root()
    removed = []
    if not root:
        return removed
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        path = os.path.join(root, name)
        if _rmdir(path, root, timeout=0.0):
            removed.append(path)
    return removed
