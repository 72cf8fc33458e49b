"""Who a pid is, for the agent's labels: its cgroup v2 path and its network namespace, which
the tracer's snapshot does not carry per process. Read from /proc at the pid's first sight
and cached by pid: one read per process, not one per snapshot.

A process that exited before the agent first saw it (a short one, between two snapshots)
has nothing left in /proc: then what the process events told of it at its exec or fork
(procevents.py) answers, and only where they told nothing are its cgroup and netns
"unknown" (docs/agent.md says so)."""
import os
import time

UNKNOWN = "unknown"
FORGET_AFTER_S = 120.0      # a pid gone from the snapshots this long is forgotten


def read_cgroup(pid, proc="/proc"):
    """The cgroup v2 path of pid ("0::/path" in /proc/PID/cgroup), or None when it is gone.
    One read of the raw bytes: the process events read it at every exec of the host."""
    try:
        fd = os.open(f"{proc}/{pid}/cgroup", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = b"\n" + os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)
    start = data.find(b"\n0::")
    if start < 0:
        return None
    end = data.find(b"\n", start + 4)
    return data[start + 4:end if end >= 0 else len(data)].decode(errors="replace") or "/"


def read_netns(pid, proc="/proc"):
    """The inode number of pid's network namespace (as the tracer's sockets give it), or None."""
    try:
        return os.stat(f"{proc}/{pid}/ns/net").st_ino
    except OSError:
        return None


class Whois:
    """pid → {"cgroup", "netns"}, cached by pid and comm: a process moved to another cgroup
    is moved before it execs (systemd, container runtimes, `echo $$ > cgroup.procs; exec`),
    so a new comm reads /proc again. `keep(pids)` marks the pids still in a snapshot;
    the others are forgotten after forget_after seconds (kept that long so that a late event
    of a process that ended, counted after its entry went, keeps its labels)."""

    def __init__(self, proc="/proc", forget_after=FORGET_AFTER_S, clock=time.monotonic,
                 events=None):
        self.proc, self.forget_after, self.clock = proc, forget_after, clock
        self.events = events            # procevents.ProcEvents, or None
        self.cache, self.seen = {}, {}

    def _alive(self, pid):
        """{"cgroup", "netns"} from /proc while pid lives, else None."""
        cg = read_cgroup(pid, self.proc)
        if cg is None:
            return None
        ns = read_netns(pid, self.proc)
        return {"cgroup": cg, "netns": ns if ns is not None else UNKNOWN}

    def _read(self, pid):
        """From /proc while pid lives, else from the process events (its exec, or its nearest
        ancestor's labels: cached here, or from /proc while it lives)."""
        who = self._alive(pid)
        if who is not None or self.events is None:
            return who
        return self.events.labels(pid, read=lambda p: self.cache.get(p, (None, None))[1]
                                  or self._alive(p))

    def of(self, pid, comm=None):
        comm_was, who = self.cache.get(pid, (None, None))
        if who is None or (comm is not None and comm != comm_was):
            now = self._read(pid)
            if who is None or now is not None:  # gone now: what was read before still holds
                who = now or {"cgroup": UNKNOWN, "netns": UNKNOWN}
            self.cache[pid] = (comm, who)
        self.seen[pid] = self.clock()
        return who

    def forget(self, pid):
        self.cache.pop(pid, None)

    def keep(self, pids):
        now = self.clock()
        for pid in pids:
            if pid in self.cache:
                self.seen[pid] = now
        for pid in [p for p, t in self.seen.items() if now - t >= self.forget_after]:
            self.seen.pop(pid)
            self.cache.pop(pid, None)
