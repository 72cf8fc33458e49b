"""The agent's process events (netio_trace/agent/procevents.py), without the kernel: datagrams
as the proc connector sends them, a fake /proc. A process that ended before the agent saw it
gets the labels read at its exec, else its nearest ancestor's; entries expire."""
import os
import struct

from netio_trace.agent import procevents as pe
from netio_trace.agent.procinfo import UNKNOWN, Whois


def datagram(what, *fields):
    """One netlink message holding one proc_event."""
    body = pe.EV_HDR.pack(what, 0, 0) + struct.pack(f"={len(fields)}I", *fields)
    cn = pe.CN_HDR.pack(pe.CN_IDX_PROC, pe.CN_VAL_PROC, 0, 0, len(body), 0) + body
    return pe.NL_HDR.pack(pe.NL_HDR.size + len(cn), pe.NLMSG_DONE, 0, 0, 0) + cn


def fake_proc(tmp_path, pid, cgroup):
    d = tmp_path / str(pid)
    (d / "ns").mkdir(parents=True)
    (d / "cgroup").write_text(f"0::{cgroup}\n")
    (d / "ns" / "net").write_text("")
    return os.stat(d / "ns" / "net").st_ino


def test_exec_labels_outlive_the_process(tmp_path):
    ev = pe.ProcEvents(proc=str(tmp_path))
    ino = fake_proc(tmp_path, 42, "/svc.slice/a.service")
    ev.handle(datagram(pe.PROC_EVENT_EXEC, 42, 42))
    (tmp_path / "42" / "cgroup").unlink()           # reaped
    w = Whois(proc=str(tmp_path), events=ev)
    assert w.of(42, "a") == {"cgroup": "/svc.slice/a.service", "netns": ino}


def test_a_child_that_never_execs_takes_its_parents_labels(tmp_path):
    ev = pe.ProcEvents(proc=str(tmp_path))
    ino = fake_proc(tmp_path, 10, "/svc.slice/b.service")
    ev.handle(datagram(pe.PROC_EVENT_FORK, 10, 10, 11, 11)     # 10 forks 11
              + datagram(pe.PROC_EVENT_FORK, 11, 11, 12, 12)   # 11 forks 12
              + datagram(pe.PROC_EVENT_FORK, 12, 12, 13, 12))  # a thread of 12: no process
    w = Whois(proc=str(tmp_path), events=ev)
    assert w.of(12, "worker") == {"cgroup": "/svc.slice/b.service", "netns": ino}
    assert 13 not in ev.parent
    assert w.of(99, "x") == {"cgroup": UNKNOWN, "netns": UNKNOWN}     # nothing known of it


def test_entries_expire(tmp_path):
    now = [0.0]
    ev = pe.ProcEvents(proc=str(tmp_path), keep_s=10, clock=lambda: now[0])
    fake_proc(tmp_path, 10, "/c")
    ev.handle(datagram(pe.PROC_EVENT_FORK, 10, 10, 11, 11))
    now[0] = 5
    ev.handle(datagram(pe.PROC_EVENT_FORK, 10, 10, 12, 12))
    now[0] = 11
    ev.handle(datagram(pe.PROC_EVENT_FORK, 10, 10, 11, 11))    # 11 again: a newer stamp
    now[0] = 16
    ev.handle(datagram(pe.PROC_EVENT_FORK, 10, 10, 14, 14))
    assert set(ev.parent) == {11, 14} and len(ev.order) == 2
