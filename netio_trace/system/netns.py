"""Network namespaces for one run: a veth pair between two namespaces, a private loopback, or
the forward path (a veth pair into a namespace that forwards towards a third namespace of the
run's own, and drops every datagram on the way there by a blackhole route).

Every name carries the owner's pid (`netio-<pid>-<seq>-<role>`), so a later start can tell
what a dead run of its own left behind, and never touches a namespace it did not create.
"""
import itertools
import json
import os
import re
import subprocess

from analysis.contract import FORWARD_MTU
from netio_trace.system import paths

PREFIX = "netio-"
NETNS_DIR = "/var/run/netns"
VETH_SENDER_ADDR = "10.77.0.1"
VETH_RECEIVER_ADDR = "10.77.0.2"
LOOPBACK_ADDR = "127.0.0.1"
# forward: the sender's datagrams go to FORWARD_DEST_ADDR, an address of the run's own `dst`
# namespace, joined to the forwarding namespace by a second veth pair (FORWARD_LINK; the
# forwarding end is FORWARD_HOP_ADDR). The forwarding namespace routes the destination, /32, to
# a blackhole, more specific than the link's connected route: nothing ever reaches it, and
# nothing is ever addressed outside the run's namespaces.
FORWARD_DEST_ADDR = "10.77.1.1"
FORWARD_HOP_ADDR = "10.77.1.2"
FORWARD_LINK = "10.77.1.0/24"
FORWARD_BLACKHOLE = f"{FORWARD_DEST_ADDR}/32"
TRANSPORTS = ("veth", "loopback", "forward")
# --rx-xdp: the program (bpf/xdp_pass.bpf.c, XDP_PASS) and its section, attached in generic
# mode to the receiving veth. It goes with the device: deleting the run's namespaces deletes
# the veth pair, so nothing stays attached after a run, a failure or Ctrl-C.
XDP_OBJECT = "bpf/xdp_pass.bpf.o"
XDP_SECTION = "xdp"

_seq = itertools.count()
_NAME_RE = re.compile(r"^netio-(\d+)-\d+-(snd|rcv|lo|fwd|dst)$")


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class Topology:
    """Namespaces for one transport. Use as a context manager; removed on exit.

    sender_ns / receiver_ns: namespace names to pass to the workloads' --netns;
    server_addr: the address the receiver connects to; on forward, where the sender's datagrams
    go: an address of dest_ns (None on the other transports), which receiver_ns forwards to a
    blackhole instead (has_receiver is False, no client runs).
    rx_xdp: attach XDP_OBJECT's XDP_PASS program to the receiving veth (veth only).
    """

    def __init__(self, transport, rx_xdp=False):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r} (choose from {', '.join(TRANSPORTS)})")
        if rx_xdp and transport != "veth":
            raise ValueError(f"an XDP program needs the receiving veth: {transport} has none")
        self.transport = transport
        self.rx_xdp = rx_xdp
        base = f"{PREFIX}{os.getpid()}-{next(_seq)}"
        self.has_receiver = transport != "forward"
        self.dest_ns = None
        if transport == "veth":
            self.sender_ns, self.receiver_ns = f"{base}-snd", f"{base}-rcv"
            self.server_addr = VETH_SENDER_ADDR
        elif transport == "forward":
            self.sender_ns, self.receiver_ns = f"{base}-snd", f"{base}-fwd"
            self.dest_ns = f"{base}-dst"
            self.server_addr = FORWARD_DEST_ADDR
        else:
            self.sender_ns = self.receiver_ns = f"{base}-lo"
            self.server_addr = LOOPBACK_ADDR
        self.created = []

    @property
    def namespaces(self):
        return list(dict.fromkeys(n for n in (self.sender_ns, self.receiver_ns, self.dest_ns)
                                  if n))

    def __enter__(self):
        try:
            for ns in self.namespaces:
                _ip("netns", "add", ns)
                self.created.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            if self.transport == "forward":
                self._quiet()
            if self.transport in ("veth", "forward"):
                self._veth_pair((self.sender_ns, "nio-s", f"{VETH_SENDER_ADDR}/30"),
                                (self.receiver_ns, "nio-r", f"{VETH_RECEIVER_ADDR}/30"))
            if self.transport == "forward":
                prefix = FORWARD_LINK.split("/")[1]
                self._veth_pair((self.receiver_ns, "nio-f", f"{FORWARD_HOP_ADDR}/{prefix}"),
                                (self.dest_ns, "nio-d", f"{FORWARD_DEST_ADDR}/{prefix}"))
                self._forward_to_blackhole()
            if self.rx_xdp:
                _ip("-n", self.receiver_ns, "link", "set", "dev", "nio-r", "xdpgeneric", "obj",
                    os.path.join(paths.build_dir(), XDP_OBJECT), "sec", XDP_SECTION)
        except subprocess.CalledProcessError as e:
            self.remove()
            raise RuntimeError(f"cannot create {self.transport} namespaces: {e.stderr.strip()}") from e
        return self

    def xdp_attached(self):
        """The XDP program id on the receiving veth (veth only), or None: what --rx-xdp put
        there, read back from the device."""
        if self.transport != "veth":
            return None
        r = _ip("-n", self.receiver_ns, "-j", "link", "show", "dev", "nio-r", check=False)
        try:
            return json.loads(r.stdout)[0]["xdp"]["prog"]["id"]
        except (ValueError, LookupError, TypeError):
            return None

    def _veth_pair(self, a, b):
        """A veth pair between two namespaces; a and b: (namespace, device, address/prefix)."""
        _ip("link", "add", a[1], "netns", a[0], "type", "veth", "peer", "name", b[1],
            "netns", b[0])
        for ns, dev, addr in (a, b):
            _ip("-n", ns, "addr", "add", addr, "dev", dev)
            if self.transport == "forward":
                # the largest datagram travels whole: IP never fragments, which would copy
                _ip("-n", ns, "link", "set", dev, "mtu", str(FORWARD_MTU))
            _ip("-n", ns, "link", "set", dev, "up")

    def _sysctl(self, ns, *settings):
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", *settings], check=True,
                       capture_output=True, text=True)

    def _quiet(self):
        """forward counts the datagrams its second namespace receives, and that none reach the
        third: no IPv6 (router and neighbour solicitations) on its links; the sender's gateway
        gets a static neighbour entry below (no ARP), and the forwarding namespace never
        resolves the destination (its route is the blackhole)."""
        for ns in self.namespaces:
            self._sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1",
                         "net.ipv6.conf.default.disable_ipv6=1")

    def _forward_to_blackhole(self):
        """The sender routes the destination through the second namespace, which would forward
        it to the third but drops it by its blackhole route: no local delivery anywhere, so
        nothing copies a zero-copy skb."""
        mac = json.loads(_ip("-n", self.receiver_ns, "-j", "link", "show", "dev", "nio-r")
                         .stdout)[0]["address"]
        _ip("-n", self.sender_ns, "neigh", "replace", VETH_RECEIVER_ADDR, "lladdr", mac,
            "dev", "nio-s", "nud", "permanent")
        _ip("-n", self.sender_ns, "route", "add", FORWARD_LINK, "via", VETH_RECEIVER_ADDR)
        _ip("-n", self.receiver_ns, "route", "add", "blackhole", FORWARD_BLACKHOLE)
        self._sysctl(self.receiver_ns, "net.ipv4.ip_forward=1")

    def _packets(self, ns, dev, direction):
        r = _ip("-n", ns, "-j", "-s", "link", "show", "dev", dev, check=False)
        try:
            return int(json.loads(r.stdout)[0]["stats64"][direction]["packets"])
        except (ValueError, LookupError, TypeError):
            return None

    def datagrams_seen(self):
        """Packets the forwarding namespace's interface received (forward only), or None."""
        if self.transport != "forward":
            return None
        return self._packets(self.receiver_ns, "nio-r", "rx")

    def destination_packets(self):
        """(packets the forwarding namespace sent towards the destination namespace, packets
        the destination namespace's interface received) on forward, else None: both stay 0
        while the blackhole route drops every datagram."""
        if self.transport != "forward":
            return None
        return (self._packets(self.receiver_ns, "nio-f", "tx"),
                self._packets(self.dest_ns, "nio-d", "rx"))

    def packet_sockets(self):
        """AF_PACKET sockets open in the run's namespaces (/proc/net/packet, one line each
        after the header): one on the path turns every zero-copy send into a copy."""
        n = 0
        for ns in self.namespaces:
            r = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/packet"],
                               capture_output=True, text=True, check=False)
            n += max(0, len(r.stdout.splitlines()) - 1)
        return n

    def remove(self):
        # Deleting a namespace deletes the veth end inside it, and with it the peer.
        for ns in reversed(self.created):
            _ip("netns", "delete", ns, check=False)
        self.created.clear()

    def __exit__(self, *exc):
        self.remove()
        return False


def list_own_namespaces():
    """(name, owner_pid) of every namespace that follows our naming scheme."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = _NAME_RE.match(name)
        if m:
            out.append((name, int(m.group(1))))
    return out


def remove_stale_namespaces(include_own=False):
    """Remove namespaces left by dead netio-trace runs (their owner pid no longer alive; a pid
    that now belongs to another process keeps them: doctor makes such names too, and it keeps
    no state file). include_own: also the names carrying this process's pid, which only a dead
    predecessor with the same pid can have made (call it before this process creates any)."""
    removed = []
    for name, pid in list_own_namespaces():
        if pid == os.getpid():
            stale = include_own
        else:
            stale = not os.path.exists(f"/proc/{pid}")
        if stale:
            _ip("netns", "delete", name, check=False)
            removed.append(name)
    return removed
