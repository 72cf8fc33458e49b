"""Who a pid was, for a process that ended before the agent first saw it in a snapshot.

The tracer's snapshot carries no cgroup or netns per process, and /proc forgets a process
once it is reaped: one that lives less than a snapshot (about a second) would land on
`unknown`. So the agent listens to the kernel's process events (the proc connector,
NETLINK_CONNECTOR, CN_IDX_PROC: root only) and keeps, for a while, what it can learn of each
new process while it lives:
- at its exec, its own cgroup and netns, read from /proc at once: a process is moved to its
  cgroup before it execs (systemd, container runtimes, `echo $$ > cgroup.procs; exec ...`);
- at its fork, its parent: a child that never execs is in its parent's cgroup and netns
  (both inherited at fork), and the parent usually lives on.
`labels(pid)` answers from these when /proc has nothing. Both tables are bounded (entries
older than KEEP_S go, and at most MAX_ENTRIES): the agent asks about a pid within a snapshot
or two of its birth."""
import collections
import os
import socket
import struct
import threading
import time

from netio_trace.agent.procinfo import UNKNOWN, read_cgroup, read_netns

NETLINK_CONNECTOR = 11
CN_IDX_PROC = CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
NLMSG_DONE = 3
PROC_EVENT_FORK, PROC_EVENT_EXEC = 0x1, 0x2
NL_HDR = struct.Struct("=IHHII")        # nlmsghdr: len, type, flags, seq, pid
CN_HDR = struct.Struct("=IIIIHH")       # cn_msg: idx, val, seq, ack, len, flags
EV_HDR = struct.Struct("=IIQ")          # proc_event: what, cpu, timestamp_ns
FORK = struct.Struct("=IIII")           # parent_pid, parent_tgid, child_pid, child_tgid
EXEC = struct.Struct("=II")             # process_pid, process_tgid
KEEP_S = 120.0
MAX_ENTRIES = 200_000
MAX_HOPS = 8                            # parents walked for a child that never exec'd


def _filters_events(release=None):
    """Whether the kernel takes an event filter with the listen (struct proc_input: 6.6+);
    before, a listen of any other length than the bare op is ignored."""
    try:
        major, minor = (int(x) for x in (release or os.uname().release).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 6)


def _subscribe():
    """A netlink socket on the proc connector's group, listening to forks and execs only where
    the kernel filters (every thread's exit and the like otherwise wake us too); OSError where
    not allowed."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind((0, CN_IDX_PROC))
        op = struct.pack("=I", PROC_CN_MCAST_LISTEN)
        if _filters_events():
            op += struct.pack("=I", PROC_EVENT_FORK | PROC_EVENT_EXEC)
        cn = CN_HDR.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(op), 0) + op
        s.send(NL_HDR.pack(NL_HDR.size + len(cn), NLMSG_DONE, 0, 0, 0) + cn)
    except OSError:
        s.close()
        raise
    return s


class ProcEvents:
    """pid → what was learnt of it at its fork (its parent) or exec (its labels)."""

    def __init__(self, proc="/proc", keep_s=KEEP_S, clock=time.monotonic):
        self.proc, self.keep_s, self.clock = proc, keep_s, clock
        self.parent, self.at_exec = {}, {}
        self.order = collections.deque()        # (time, pid): the entries' ages, oldest first
        self.lost = 0                           # events the socket had no room for (ENOBUFS)
        self.sock = None

    def start(self):
        """Listen in a daemon thread; False (and nothing started) where the kernel says no."""
        try:
            self.sock = _subscribe()
        except OSError:
            return False
        threading.Thread(target=self._read, name="proc-events", daemon=True).start()
        return True

    def _read(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError as e:
                if e.errno == 105:      # ENOBUFS: events lost; those pids may be unknown
                    self.lost += 1
                    continue
                return                  # closed
            self.handle(data)

    def handle(self, data):
        """One datagram: its netlink messages, each a proc_event."""
        off = 0
        while off + NL_HDR.size + CN_HDR.size + EV_HDR.size <= len(data):
            nl_len = NL_HDR.unpack_from(data, off)[0]
            ev = off + NL_HDR.size + CN_HDR.size
            what = EV_HDR.unpack_from(data, ev)[0]
            body = ev + EV_HDR.size
            if what == PROC_EVENT_FORK and body + FORK.size <= len(data):
                _ppid, ptgid, cpid, ctgid = FORK.unpack_from(data, body)
                if cpid == ctgid:               # a process, not a thread
                    self._note(self.parent, ctgid, ptgid)
            elif what == PROC_EVENT_EXEC and body + EXEC.size <= len(data):
                tgid = EXEC.unpack_from(data, body)[1]
                ns = read_netns(tgid, self.proc)       # the cheaper first: it may end
                cg = read_cgroup(tgid, self.proc)
                if cg is not None:
                    self._note(self.at_exec, tgid, {"cgroup": cg,
                                                    "netns": UNKNOWN if ns is None else ns})
            if nl_len < NL_HDR.size:
                break
            off += (nl_len + 3) & ~3

    def _note(self, table, pid, value):
        """table[pid] = value, stamped; entries past keep_s (or MAX_ENTRIES) go, oldest first
        (an entry noted again since keeps its newer stamp)."""
        now = self.clock()
        table[pid] = (now, value)
        self.order.append((now, table, pid))
        while self.order and (now - self.order[0][0] >= self.keep_s
                              or len(self.order) > MAX_ENTRIES):
            t, old_table, old = self.order.popleft()
            if old_table.get(old, (None,))[0] == t:
                del old_table[old]

    def labels(self, pid, read=None):
        """{"cgroup", "netns"} of pid as learnt at its exec, else as its nearest ancestor's
        (at its exec, or from /proc if it lives: `read(pid)`), else None."""
        for _ in range(MAX_HOPS):
            who = self.at_exec.get(pid)
            if who is not None:
                return who[1]
            parent = self.parent.get(pid)
            if parent is None:
                return None
            parent = parent[1]
            if read is not None:
                who = read(parent)
                if who is not None:
                    return who
            pid = parent
        return None

    def close(self):
        if self.sock is not None:
            self.sock.close()
