"""The tracer against programs it was not built around (needs root).

The programs (tests/programs/, built into $NETIO_BUILD/tests/programs/) share no code with
workloads/ and count for themselves what they sent, received, spliced and had completed. Each
case runs them under one `netio-tracer --control`, which follows each program from before its
first syscall (the launch gate) and counts the namespaces the case creates:
- a UDP sender whose first datagrams wait in the neighbour's queue (the receiving namespace
  ignores ARP until they are queued) and leave later, from softirq, when the ARP reply comes;
  with and without MSG_ZEROCOPY;
- a UDP sender that has the kernel cut its messages into datagrams (UDP_SEGMENT) and sends
  several per sendmmsg call, with and without MSG_ZEROCOPY;
- UDP receivers of small datagrams (linear skbs) and of large ones (paged: 60000 B over
  loopback or over a veth at MTU 65535), and one that passes MSG_TRUNC;
- io_uring SEND_ZC (its own buffers and registered ones), a server sending a file with
  sendfile after a header it writes, and MSG_ZEROCOPY whose completions are read only after
  the last send.

Every case runs on the rung the tracer picks here and on the tracepoint rung forced. Bytes
sent, copied, spliced, pinned (zero-copy) and received must equal the programs' own counts,
and zero-copy bytes their completions. Expectations follow what the tracer says it attached
(`attach`, `probes`) and what the kernel offers (checked, never read from the version
string); a figure the tracer reports unavailable must be null. Every check of a case runs
(`Checks`); one a rung is known to get wrong names the tracer bug (`BUGS`) and must still come
out wrong: the case is then a strict xfail. Any other wrong figure fails it. NETIO_VMTEST=1
(inside the kernel matrix's guests): fewer messages.
"""
import ctypes
import json
import os
import platform
import select
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from conftest import BUILD, needs_built, needs_root
from netio_trace.system.netns import LOOPBACK_ADDR, VETH_RECEIVER_ADDR, Topology
from netio_trace.system.procs import GatedProcess, wait_listening
from test_tracer import Tracer, lent, proc

PROGRAMS = os.path.join(BUILD, "tests", "programs")
NAMES = ("udp-sender", "udp-receiver", "tcp-sink", "file-server", "tcp-zc-late",
         "uring-send-zc")
VMTEST = os.environ.get("NETIO_VMTEST") == "1"
TIMEOUT = 120 if VMTEST else 30
# messages per case: enough for many skbs, few enough for seconds in the emulated guests
N = {"held": 8, "small": 200, "large": 40, "gso": 32, "uring": 64, "file_repeat": 4,
     "zc_late": 200}
if VMTEST:
    N = {"held": 8, "small": 50, "large": 12, "gso": 16, "uring": 16, "file_repeat": 2,
         "zc_late": 32}
FILE_BYTES = (1 << 20) + 3      # not a whole number of pages

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", *(f"tests/programs/{n}" for n in NAMES))]

# The rung the tracer picks for this kernel, and the tracepoint rung forced (which every
# kernel offers; before 6.3 without the socket-layer tracepoints, where the guests' automatic
# rung is fentry). On this host both are the tracepoint rung.
RUNGS = ("auto", "tracepoint")


@pytest.fixture(scope="module", params=RUNGS)
def tracer(request, tmp_path_factory):
    if request.param == "auto":
        with lent(request.getfixturevalue("default_tracer")) as t:
            yield t
        return
    t = Tracer("--attach", request.param, log=str(tmp_path_factory.mktemp("tracer") / "tracer.log"))
    yield t
    assert t.close() == 0


# ---- namespaces and programs -------------------------------------------------------------

def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=TIMEOUT)


def sysctl(ns, path, value):
    """Writes /proc/sys/PATH of namespace ns from a thread that setns() moves there (the
    process stays put): no `ip netns exec sysctl` to start, which the emulated guests pay."""
    libc, failed = ctypes.CDLL(None, use_errno=True), []

    def write():
        try:
            fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, 0x40000000):      # CLONE_NEWNET, this thread only
                    raise OSError(ctypes.get_errno(), f"setns {ns}")
            finally:
                os.close(fd)
            with open(f"/proc/sys/{path}", "w") as f:
                f.write(value)
        except OSError as e:
            failed.append(e)

    t = threading.Thread(target=write)
    t.start()
    t.join()
    if failed:
        raise failed[0]


@contextmanager
def namespaces(kind, mtu=None, resolved=True):
    """A Topology ("veth": two namespaces, "loopback": one); mtu: of both veth ends. resolved:
    the sender's neighbour entry for the receiver made beforehand (permanent), else ARP
    resolves it on the first datagram, and what a burst queues meanwhile past the queue's
    bytes (unres_qlen_bytes) is dropped."""
    with Topology(kind) as t:
        t.receiver_addr = VETH_RECEIVER_ADDR if kind == "veth" else LOOPBACK_ADDR
        if kind == "veth":
            for ns, dev in ((t.sender_ns, "nio-s"), (t.receiver_ns, "nio-r")):
                if mtu:
                    ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
                wait_operational(ns, dev)
            if resolved:
                ip("-n", t.sender_ns, "neigh", "replace", t.receiver_addr, "lladdr",
                   link(t.receiver_ns, "nio-r")["address"], "dev", "nio-s", "nud", "permanent")
        yield t


def link(ns, dev):
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "dev", dev], check=True,
                         capture_output=True, text=True, timeout=TIMEOUT).stdout
    return json.loads(out)[0]


def wait_operational(ns, dev):
    """Until dev is up with its qdisc. A veth end brought up before its peer gets it only when
    the peer's carrier reaches it through linkwatch, later; until then it has the noop qdisc,
    which drops every datagram without a word to the sender (the likely loss of a whole GSO
    burst, once in 30 runs of this file on a loaded host)."""
    deadline = time.monotonic() + TIMEOUT
    while (state := link(ns, dev)).get("qdisc") in (None, "noop") or \
            state.get("operstate") != "UP":
        assert time.monotonic() < deadline, f"{dev} in {ns} never became operational: {state}"
        time.sleep(0.01)


class Programs:
    """Our programs, each held at its gate until the tracer follows it, in namespaces it
    counts; what is still running at the end is killed by the pid we started."""

    def __init__(self, tracer, tmp, topo, skb_programs="always"):
        """skb_programs: "always" attaches the per-skb programs before the first program
        starts, whose first zero-copy skbs the checks count; "on-demand" leaves them to wait,
        as `trace` does at the counting level."""
        self.tracer, self.tmp, self.topo, self.started = tracer, tmp, topo, []
        tracer.ok("clear")
        for ns in topo.namespaces:
            tracer.ok(f"netns add {ns}")
        tracer.ok("reset")
        tracer.ok(f"skb-programs {skb_programs}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.started:
            p.end()
        return False

    def start(self, name, *args, ready=True):
        """Program `name` (ready: with --ready-fd 3, read by line() and port())."""
        n = len(self.started)
        p = GatedProcess([os.path.join(PROGRAMS, name), *args,
                          *(("--ready-fd", "3") if ready else ())],
                         str(self.tmp / f"{n}-{name}.json"), str(self.tmp / f"{n}-{name}.err"),
                         ready=ready)
        p.name = name
        self.started.append(p)
        self.tracer.ok(f"pid add {p.pid}")
        p.release()
        return p

    def stderr(self, p):
        return (self.tmp / f"{self.started.index(p)}-{p.name}.err").read_text()

    def port(self, p):
        port, _ = wait_listening(p.ready, TIMEOUT)
        assert port, f"{p.name} ended before it listened: {self.stderr(p)}"
        return port

    def line(self, p):
        """The next line p writes to its ready descriptor."""
        buf, deadline = b"", time.monotonic() + TIMEOUT
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([p.ready], [], [], left)[0], \
                f"no line from {p.name} in {TIMEOUT} s: {self.stderr(p)}"
            chunk = os.read(p.ready, 256)
            assert chunk, f"{p.name} ended before its line: {self.stderr(p)}"
            buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def output(self, p):
        return (self.tmp / f"{self.started.index(p)}-{p.name}.json").read_text()

    def finish(self):
        """Waits for every program; (their JSON, in start order; the tracer's snapshot)."""
        for p in self.started:
            p.wait(TIMEOUT)
        failed = [p for p in self.started if p.returncode != 0]
        assert not failed, "\n".join(
            [f"{p.name} exited {p.returncode}: {self.stderr(p)}" for p in failed] +
            [self.output(p) for p in self.started] +
            # where a datagram was lost: every device's counters, drops included
            [subprocess.run(["ip", "-n", ns, "-s", "link"], capture_output=True, text=True,
                            timeout=TIMEOUT).stdout for ns in self.topo.namespaces])
        outs = [json.loads(self.output(p)) for p in self.started]
        return outs, self.tracer.snapshot(str(self.tmp / "snapshot.json"))


# ---- what the tracer must say --------------------------------------------------------------

# Tracer bugs these programs found, by name: a check a rung is known to get wrong
# names its bug, must still come out wrong, and makes the case a strict xfail (Checks).
BUGS = {
    "linear-udp-rx": "udp_recvmsg() copies a datagram held in a linear skb with "
                     "copy_linear_skb(), never through skb_copy_datagram_iter(), whose "
                     "tracepoint is all the tracepoint rung sees before sock_recv_length (6.3): "
                     "those bytes are not counted",
    "uring-notifications": "zc_completion probes MSG_ZEROCOPY's __msg_zerocopy_callback only; "
                           "io_uring's SEND_ZC notifications go through io_uring's own "
                           "callback, so the tracer says 0 completions (not null)",
    "sys-exit-tx": "where the send calls count the bytes sent (no sock_send_length, before "
                   "6.3, and no exact rung), the sends of io_uring and sendmmsg are not seen "
                   "(the tracer's attach_why says so): tx_bytes, and the tx_copy inferred from "
                   "it, fall short",
}


def kernel_copies_heads():
    """Before 5.18 (__ip_append_data) a zero-copy datagram's first bytes are copied into its
    linear part (Checks.UDP_HEAD): 5.10 in the matrix. No feature tells it but the release."""
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) < (5, 18)


class Checks:
    """The tracer's figures of one case against the programs' own counts. Every check runs (one
    failing does not hide the next). A check this rung is known to get wrong names its bug
    (BUGS) and must still come out wrong: the case is then a strict xfail, and a known bug that
    no longer shows fails it, so that its expectation is dropped. A figure the tracer reports
    unavailable must be null, never a count."""

    def __init__(self, request, snap):
        self.request, self.snap, self.failed, self.known = request, snap, [], {}
        a = snap["attach"]
        self.tx_at_sys_exit = a["tx_bytes"] == "tracepoint"      # no socket-layer tracepoint
        self.zc_owners = a["pinning"] in ("tp_btf", "tracepoint")    # xmit gives zc bytes

    def equal(self, what, got, want, bug=None):
        if bug is None:
            if got != want:
                self.failed.append(f"{what}: tracer {got!r}, programs {want!r}")
        elif got == want:
            self.failed.append(f"{what}: {got!r} is right, where bug {bug!r} was expected: "
                               "drop that expectation")
        else:
            self.known[bug] = f"{what}: tracer {got!r}, programs {want!r}"

    def null_where_unavailable(self, point, key, value):
        """True where point has a probe and the snapshot does not call key unavailable;
        else value must be null."""
        if (self.snap["attach"][point] != "unavailable"
                and key not in (self.snap.get("unavailable") or {})):
            return True
        self.equal(f"{key} (unavailable)", value, None)
        return False

    # before 5.18 a zero-copy datagram's first bytes, up to MAX_HEADER (176 B) less its IP and
    # UDP headers, are copied into its linear part (__ip_append_data): the rest is pinned
    UDP_HEAD = 176 - 28

    def udp_heads(self, pid, datagrams, sent):
        """What the kernel copied into the heads of a UDP zero-copy sender's datagrams (the
        tracer's tx_copy_bytes, checked: none, or its bounded head bytes per datagram), for
        sent() and zerocopy() to expect the pinned rest. Where the copy per process is null
        (inferred from totals), or pid is None (every sender's): what of sent the devices did
        not see pinned (the namespaces' zero-copy bytes, exact where the sends are not)."""
        copied = None if pid is None else proc(self.snap, pid)["tx_copy_bytes"]
        if copied is None and self.snap["zc_tx_bytes"] is not None:
            copied = sent - self.snap["zc_tx_bytes"]
        if copied is None:
            return 0
        if kernel_copies_heads():
            self.equal("tx_copy_bytes in the datagrams' heads (bounded)",
                       0 <= copied <= datagrams * self.UDP_HEAD, True)
        else:
            self.equal("tx_copy_bytes (no head is copied since 5.18)", copied, 0)
        self.head = copied
        return copied

    head = 0

    def sent(self, pid, sent, copied, spliced=0, pinned=0, unseen_calls=False):
        """The sender's bytes, each kind as the program counted it. Every MSG_ZEROCOPY and
        SEND_ZC byte here is pinned: veth and loopback do scatter-gather and checksum offload,
        which is all the kernel asks before it gives an skb the user's pages. unseen_calls:
        the program sends through io_uring or sendmmsg, which the send calls' count misses.
        A figure the snapshot says is unavailable must be null."""
        p = proc(self.snap, pid)
        unavailable = self.snap.get("unavailable") or {}
        tx_bug = "sys-exit-tx" if self.tx_at_sys_exit and unseen_calls else None
        self.equal("tx_bytes", p["tx_bytes"], sent, tx_bug)
        if "processes.tx_copy_bytes" in unavailable:
            self.equal("tx_copy_bytes (unavailable)", p["tx_copy_bytes"], None)
        else:
            self.equal("tx_copy_bytes", p["tx_copy_bytes"], copied, tx_bug)
        self.equal("tx_spliced_bytes", p["tx_spliced_bytes"], spliced)
        if "processes.zc_tx_bytes" in unavailable or "zc_tx_bytes" in unavailable:
            self.equal("zc_tx_bytes (unavailable)", p["zc_tx_bytes"], None)
        else:
            self.equal("zc_tx_bytes", p["zc_tx_bytes"], pinned)
        self.equal("drops", self.snap["drops"], 0)

    def zerocopy(self, sent, zc, retrans=0):
        """The program's completions, every byte sent having been pinned: the bytes of sends
        whose completion says COPIED are the fallback copy (on delivery), the others stayed in
        user pages to the end. On local delivery a retransmitted skb is received, and copied,
        again: then at least the COPIED bytes."""
        fallback = self.snap["fallback_copy_bytes"]
        if not self.null_where_unavailable("fallback_copy", "fallback_copy_bytes", fallback):
            return
        if self.head:
            # the heads were never user pages: the pinned rest of the COPIED sends (all of a
            # size here) is what delivery copied
            self.equal("fallback_copy_bytes (COPIED, less the heads)", fallback * sent,
                       zc["copied_bytes"] * (sent - self.head))
            return
        if retrans:
            self.equal(f"fallback_copy_bytes >= COPIED bytes ({retrans} retransmits)",
                       fallback >= zc["copied_bytes"], True)
        else:
            self.equal("fallback_copy_bytes (COPIED)", fallback, zc["copied_bytes"])
            self.equal("sent - fallback_copy_bytes (not COPIED)", sent - fallback, zc["zc_bytes"])

    def completions(self, completed, copied, uring=False):
        """The tracer's own count of zero-copy completions, where a rung has a probe for them
        (__msg_zerocopy_callback: no tracepoint sees it)."""
        z = self.snap["zerocopy"]
        if self.null_where_unavailable("zc_completion", "zerocopy.completed_sends",
                                       z["completed_sends"]):
            self.equal("zerocopy.(completed_sends, copied_sends)",
                       (z["completed_sends"], z["copied_sends"]), (completed, copied),
                       "uring-notifications" if uring else None)

    def received(self, pid, received, linear=False, trunc=False):
        if not self.null_where_unavailable("rx_copy", "rx_copy_bytes",
                                           self.snap["rx_copy_bytes"]):
            return
        # only the tracepoint rung without sock_recv_length is blind to linear UDP copies
        blind = "skb_copy_datagram_iovec" in self.snap["probes"].get("rx_copy", "")
        bug = "linear-udp-rx" if linear and blind else None
        self.equal("rx_copy_bytes", proc(self.snap, pid)["rx_copy_bytes"], received, bug)

    def done(self):
        if self.known and not self.failed:
            reason = "; ".join(f"tracer bug {b!r}: {BUGS[b]}" for b in self.known)
            self.request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
        lines = self.failed + [f"{v} (known: {k})" for k, v in self.known.items()]
        # what a rare failure needs to be understood afterwards: the snapshot's own account
        # of drops and of the zero-copy skbs it saw
        snap = self.snap
        assert not lines, "\n".join(lines + [
            f"attach {snap['attach']}", f"probes {snap['probes']}",
            f"drops {snap.get('drops')} {snap.get('drops_by_cause')}",
            f"unavailable {snap.get('unavailable')}", f"zerocopy {snap.get('zerocopy')}"])


# ---- a UDP sender held by the neighbour ------------------------------------------------------

@pytest.mark.parametrize("zerocopy", (False, True), ids=("copy", "zerocopy"))
def test_udp_held_by_the_neighbour(tracer, tmp_path, request, zerocopy):
    """The first datagrams wait in the neighbour's queue (SIOCOUTQ > 0 after their send
    returned) and leave from softirq once ARP resolves; as many again follow directly."""
    held = N["held"]
    with namespaces("veth", resolved=False) as t, Programs(tracer, tmp_path, t) as run:
        sysctl(t.receiver_ns, "net/ipv4/conf/all/arp_ignore", "8")    # answer no ARP request
        # keep asking every 100 ms, 10 s long, rather than give the datagrams up
        sysctl(t.sender_ns, "net/ipv4/neigh/nio-s/retrans_time_ms", "100")
        sysctl(t.sender_ns, "net/ipv4/neigh/nio-s/mcast_solicit", "100")
        rcv = run.start("udp-receiver", "--netns", t.receiver_ns, "--count", str(2 * held),
                        "--size", "2048")
        port = run.port(rcv)
        snd = run.start("udp-sender", "--netns", t.sender_ns, "--addr", t.receiver_addr,
                        "--port", str(port), "--count", str(held), "--after", str(held),
                        "--size", "1000", *(("--zerocopy",) if zerocopy else ()))
        word, n, outq = run.line(snd).split()
        assert (word, int(n)) == ("sent", held) and int(outq) > 0, "not held by the neighbour"
        sysctl(t.receiver_ns, "net/ipv4/conf/all/arp_ignore", "0")
        (r, s), snap = run.finish()
    sent = s["bytes"]
    assert s["datagrams"] == r["datagrams"] == 2 * held and r["bytes"] == sent == 2000 * held
    c = Checks(request, snap)
    if zerocopy:
        zc = s["zerocopy"]
        assert zc["completed"] == zc["sends"] == 2 * held and zc["unexpected"] == 0, zc
        head = c.udp_heads(snd.pid, 2 * held, sent)
        c.sent(snd.pid, sent, copied=head, pinned=sent - head)
        c.zerocopy(sent, zc)
        c.completions(zc["completed"], zc["copied"])
    else:
        c.sent(snd.pid, sent, copied=sent)
    # a zero-copy datagram's payload is in frags (the user's pages, then the copy's): paged
    c.received(rcv.pid, r["bytes"], linear=not zerocopy)
    c.done()


def test_udp_zerocopy_senders_one_after_another(tracer, tmp_path, request):
    """Short-lived processes, each with its own UDP zero-copy socket, one after another (a
    script's commands): each one's pinned bytes are its own, whichever memory its socket
    got."""
    senders, count, size = 4, 10, 4000
    with namespaces("loopback") as t, Programs(tracer, tmp_path, t) as run:
        rcv = run.start("udp-receiver", "--netns", t.receiver_ns, "--count",
                        str(senders * count), "--size", "65536")
        port = run.port(rcv)
        pids = []
        for _ in range(senders):
            p = run.start("udp-sender", "--netns", t.sender_ns, "--addr", t.receiver_addr,
                          "--port", str(port), "--count", str(count), "--size", str(size),
                          "--zerocopy")
            assert p.wait(TIMEOUT) == 0, run.stderr(p)
            pids.append(p.pid)
        (r, *outs), snap = run.finish()
    assert r["datagrams"] == senders * count and r["bytes"] == senders * count * size
    assert all(s["zerocopy"]["completed"] == s["zerocopy"]["sends"] == count for s in outs)
    socks = [s["sock"] for s in outs]
    c = Checks(request, snap)
    c.equal("drops", snap["drops"], 0)
    tx = {pid: proc(snap, pid)["tx_bytes"] for pid in pids}
    c.equal("tx_bytes per process", tx, {pid: count * size for pid in pids})
    if c.null_where_unavailable("pinning", "zc_tx_bytes", snap["zc_tx_bytes"]):
        heads = c.udp_heads(None, senders * count, senders * count * size)
        c.equal("zc_tx_bytes", snap["zc_tx_bytes"], senders * count * size - heads)
    zc = {pid: proc(snap, pid)["zc_tx_bytes"] for pid in pids}
    unavailable = "processes.zc_tx_bytes" in (snap.get("unavailable") or {})
    heads = {pid: 0 if unavailable else c.udp_heads(pid, count, count * size) for pid in pids}
    c.equal(f"zc_tx_bytes per process (sockets {socks})", zc,
            {pid: None if unavailable else count * size - heads[pid] for pid in pids})
    c.done()


@pytest.mark.parametrize("zerocopy", (False, True), ids=("copy", "zerocopy"))
def test_udp_gso_batched(tracer, tmp_path, request, zerocopy):
    """A QUIC stack's way: messages the kernel cuts into datagrams (UDP_SEGMENT), several per
    sendmmsg call; the receiver gets each segment as a datagram of its own."""
    count, size, seg = N["gso"], 14000, 1400
    with namespaces("veth") as t, Programs(tracer, tmp_path, t) as run:
        rcv = run.start("udp-receiver", "--netns", t.receiver_ns, "--count",
                        str(count * size // seg), "--size", "2048")
        port = run.port(rcv)
        snd = run.start("udp-sender", "--netns", t.sender_ns, "--addr", t.receiver_addr,
                        "--port", str(port), "--count", str(count), "--size", str(size),
                        "--gso", str(seg), "--batch", "8", *(("--zerocopy",) if zerocopy else ()))
        (r, s), snap = run.finish()
    sent = s["bytes"]
    assert s["messages"] == count and s["send_calls"] == count // 8, s
    assert r["datagrams"] == s["datagrams"] == count * size // seg and r["bytes"] == sent
    c = Checks(request, snap)
    if zerocopy:
        zc = s["zerocopy"]
        assert zc["completed"] == zc["sends"] == count and zc["unexpected"] == 0, zc
        head = c.udp_heads(snd.pid, count * size // seg, sent)
        c.sent(snd.pid, sent, copied=head, pinned=sent - head, unseen_calls=True)
        c.zerocopy(sent, zc)
        c.completions(zc["completed"], zc["copied"])
    else:
        c.sent(snd.pid, sent, copied=sent, unseen_calls=True)
    c.received(rcv.pid, r["bytes"])
    c.done()


# ---- UDP receivers ---------------------------------------------------------------------------

# (transport, veth MTU, datagram size, linear skbs, MSG_TRUNC)
RECEIVERS = {
    "small-veth": ("veth", None, 1000, True, False),
    "small-loopback": ("loopback", None, 1000, True, False),
    "large-veth": ("veth", 65535, 60000, False, False),
    "large-loopback": ("loopback", None, 60000, False, False),
    "large-loopback-trunc": ("loopback", None, 60000, False, True),
}


@pytest.mark.parametrize("case", sorted(RECEIVERS))
def test_udp_receiver(tracer, tmp_path, request, case):
    kind, mtu, size, linear, trunc = RECEIVERS[case]
    count = N["small" if linear else "large"]
    with namespaces(kind, mtu) as t, Programs(tracer, tmp_path, t) as run:
        rcv = run.start("udp-receiver", "--netns", t.receiver_ns, "--count", str(count),
                        "--size", "65536", *(("--trunc",) if trunc else ()))
        port = run.port(rcv)
        snd = run.start("udp-sender", "--netns", t.sender_ns, "--addr", t.receiver_addr,
                        "--port", str(port), "--count", str(count), "--size", str(size))
        (r, s), snap = run.finish()
    assert r["datagrams"] == s["datagrams"] == count and r["drops"] == 0, r
    assert r["bytes"] == r["reported_bytes"] == s["bytes"] == count * size and not r["truncated"]
    c = Checks(request, snap)
    c.sent(snd.pid, s["bytes"], copied=s["bytes"])
    c.received(rcv.pid, r["bytes"], linear=linear, trunc=trunc)
    c.done()


# ---- io_uring SEND_ZC, sendfile, MSG_ZEROCOPY read late --------------------------------------

def uring_send_zc_refused():
    """Why this kernel cannot run IORING_OP_SEND_ZC (the program's own check), or None."""
    cp = subprocess.run([os.path.join(PROGRAMS, "uring-send-zc"), "--check"],
                        capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)["unsupported"]


def send_to_sink(tracer, tmp_path, kind, program, count, *args):
    """program sends count messages of 64 KiB (and args) to tcp-sink over kind's namespaces.
    Returns (sender's pid, sink's pid, sink's JSON, sender's JSON, snapshot)."""
    with namespaces(kind) as t, Programs(tracer, tmp_path, t) as run:
        sink = run.start("tcp-sink", "--netns", t.receiver_ns, "--port", "0")
        port = run.port(sink)
        snd = run.start(program, "--netns", t.sender_ns, "--addr", t.receiver_addr,
                        "--port", str(port), "--count", str(count), "--size", "65536",
                        *args, ready=False)
        (k, s), snap = run.finish()
    return snd.pid, sink.pid, k, s, snap


@pytest.mark.parametrize("fixed", (False, True), ids=("own-buffers", "registered-buffers"))
def test_io_uring_send_zc(tracer, tmp_path, request, fixed):
    why = uring_send_zc_refused()
    if why:
        pytest.skip(f"unsupported: {why}")
    count = N["uring"]
    snd_pid, sink_pid, k, s, snap = send_to_sink(tracer, tmp_path, "loopback", "uring-send-zc",
                                                 count, *(("--fixed",) if fixed else ()))
    sent = s["bytes"]
    assert k["bytes"] == sent == count * 65536 and s["sends"] >= count
    assert s["notifications"] == s["sends"], s          # one per send, each with F_MORE
    c = Checks(request, snap)
    c.sent(snd_pid, sent, copied=0, pinned=sent, unseen_calls=True)
    if s["report_usage"]:
        c.zerocopy(sent, s, s["retrans"])
        c.completions(s["notifications"], s["copied"], uring=True)
    else:
        # the kernel does not report usage (before 6.2): the program cannot tell copies
        assert s["copied"] is None and s["zc_bytes"] is None
    c.received(sink_pid, k["bytes"])
    c.done()


@pytest.mark.parametrize("kind", ("veth", "loopback"))
def test_io_uring_send_msg_zerocopy(tracer, tmp_path, request, kind):
    """IORING_OP_SEND with MSG_ZEROCOPY on a SO_ZEROCOPY socket: the socket's own zero-copy,
    its flags out of the tracer's reach (no syscall of the thread carries them), its
    completions from the error queue."""
    why = uring_send_zc_refused()
    if why:
        pytest.skip(f"unsupported: {why}")
    count = N["uring"]
    snd_pid, sink_pid, k, s, snap = send_to_sink(tracer, tmp_path, kind, "uring-send-zc",
                                                 count, "--msg-zerocopy")
    sent, zc = s["bytes"], s["zerocopy"]
    assert k["bytes"] == sent == count * 65536
    assert zc["completed"] == zc["sends"] == s["sends"], zc
    assert zc["unexpected"] == zc["other_errors"] == 0, zc
    c = Checks(request, snap)
    c.sent(snd_pid, sent, copied=0, pinned=sent, unseen_calls=True)
    c.zerocopy(sent, zc, s["retrans"])
    c.completions(zc["completed"], zc["copied"])
    c.received(sink_pid, k["bytes"])
    c.done()


@pytest.mark.parametrize("kind", ("veth", "loopback"))
def test_sendfile_server(tracer, tmp_path, request, kind):
    """A header written (copied), then a file's bytes spliced from the page cache."""
    path = tmp_path / "served.bin"
    path.write_bytes(os.urandom(FILE_BYTES))
    with namespaces(kind) as t, Programs(tracer, tmp_path, t) as run:
        srv = run.start("file-server", "--netns", t.sender_ns, "--file", str(path),
                        "--repeat", str(N["file_repeat"]))
        port = run.port(srv)
        sink = run.start("tcp-sink", "--netns", t.receiver_ns, "--connect", "--addr",
                         t.server_addr, "--port", str(port), ready=False)
        (s, k), snap = run.finish()
    assert s["spliced_bytes"] == N["file_repeat"] * FILE_BYTES and s["header_bytes"] > 0
    assert k["bytes"] == s["bytes"] == s["header_bytes"] + s["spliced_bytes"]
    c = Checks(request, snap)
    c.sent(srv.pid, s["bytes"], copied=s["header_bytes"], spliced=s["spliced_bytes"])
    c.received(sink.pid, k["bytes"])
    c.done()


@pytest.mark.parametrize("kind", ("veth", "loopback"))
def test_msg_zerocopy_completions_read_late(tracer, tmp_path, request, kind):
    """Every MSG_ZEROCOPY send first, the error queue read only after the last one."""
    count = N["zc_late"]
    snd_pid, sink_pid, k, s, snap = send_to_sink(tracer, tmp_path, kind, "tcp-zc-late", count)
    sent, zc = s["bytes"], s["zerocopy"]
    assert k["bytes"] == sent == count * 65536
    assert zc["completed"] == zc["sends"] and zc["unexpected"] == zc["other_errors"] == 0, zc
    c = Checks(request, snap)
    c.sent(snd_pid, sent, copied=0, pinned=sent)
    c.zerocopy(sent, zc, s["retrans"])
    c.completions(zc["completed"], zc["copied"])
    c.received(sink_pid, k["bytes"])
    c.done()
