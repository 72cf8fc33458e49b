"""Who a pid is, for the agent's labels: its cgroup v2 path and its network namespace, which
the tracer's snapshot does not carry per process. Read from /proc at the pid's first sight
and cached by pid: one read per process, not one per snapshot.

A process that exited before the agent first saw it (a short one, between two snapshots)
has nothing left in /proc: its cgroup and netns are "unknown" (docs/agent.md says so)."""
import os
import time

UNKNOWN = "unknown"
FORGET_AFTER_S = 600.0      # a pid gone from the snapshots this long is forgotten


def read_cgroup(pid, proc="/proc"):
    """The cgroup v2 path of pid ("0::/path" in /proc/PID/cgroup), or None when it is gone."""
    try:
        with open(f"{proc}/{pid}/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip() or "/"
    except OSError:
        return None
    return None


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

    def __init__(self, proc="/proc", forget_after=FORGET_AFTER_S, clock=time.monotonic):
        self.proc, self.forget_after, self.clock = proc, forget_after, clock
        self.cache, self.seen = {}, {}

    def of(self, pid, comm=None):
        comm_was, who = self.cache.get(pid, (None, None))
        if who is None or (comm is not None and comm != comm_was):
            cg, ns = read_cgroup(pid, self.proc), read_netns(pid, self.proc)
            if who is None or cg is not None:   # gone now: what was read before still holds
                who = {"cgroup": cg if cg is not None else UNKNOWN,
                       "netns": ns if ns is not None else UNKNOWN}
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
