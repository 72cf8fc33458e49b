"""Network namespaces for one run: a veth pair between two namespaces, a private loopback, or
the forward path (a veth pair into a namespace that forwards to a blackhole route).

Every name carries the owner's pid (`netio-<pid>-<seq>-<role>`), so a later start can tell
what a dead run of its own left behind, and never touches a namespace it did not create.
"""
import itertools
import json
import os
import re
import subprocess

from analysis.contract import FORWARD_MTU

PREFIX = "netio-"
NETNS_DIR = "/var/run/netns"
VETH_SENDER_ADDR = "10.77.0.1"
VETH_RECEIVER_ADDR = "10.77.0.2"
LOOPBACK_ADDR = "127.0.0.1"
# forward: the sender's datagrams go to an address the second namespace routes to a blackhole
FORWARD_DEST_ADDR = "10.77.1.1"
FORWARD_BLACKHOLE = "10.77.1.0/24"
TRANSPORTS = ("veth", "loopback", "forward")

_seq = itertools.count()
_NAME_RE = re.compile(r"^netio-(\d+)-\d+-(snd|rcv|lo|fwd)$")


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class Topology:
    """Namespaces for one transport. Use as a context manager; removed on exit.

    sender_ns / receiver_ns: namespace names to pass to the workloads' --netns;
    server_addr: the address the receiver connects to; on forward, where the sender's datagrams
    go (receiver_ns forwards them to a blackhole: has_receiver is False, no client runs).
    """

    def __init__(self, transport):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r} (choose from {', '.join(TRANSPORTS)})")
        self.transport = transport
        base = f"{PREFIX}{os.getpid()}-{next(_seq)}"
        self.has_receiver = transport != "forward"
        if transport == "veth":
            self.sender_ns, self.receiver_ns = f"{base}-snd", f"{base}-rcv"
            self.server_addr = VETH_SENDER_ADDR
        elif transport == "forward":
            self.sender_ns, self.receiver_ns = f"{base}-snd", f"{base}-fwd"
            self.server_addr = FORWARD_DEST_ADDR
        else:
            self.sender_ns = self.receiver_ns = f"{base}-lo"
            self.server_addr = LOOPBACK_ADDR
        self.created = []

    @property
    def namespaces(self):
        return list(dict.fromkeys([self.sender_ns, self.receiver_ns]))

    def __enter__(self):
        try:
            for ns in self.namespaces:
                _ip("netns", "add", ns)
                self.created.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            if self.transport == "forward":
                self._quiet()
            if self.transport in ("veth", "forward"):
                self._veth_pair()
            if self.transport == "forward":
                self._forward_to_blackhole()
        except subprocess.CalledProcessError as e:
            self.remove()
            raise RuntimeError(f"cannot create {self.transport} namespaces: {e.stderr.strip()}") from e
        return self

    def _veth_pair(self):
        _ip("link", "add", "nio-s", "netns", self.sender_ns, "type", "veth",
            "peer", "name", "nio-r", "netns", self.receiver_ns)
        _ip("-n", self.sender_ns, "addr", "add", f"{VETH_SENDER_ADDR}/30", "dev", "nio-s")
        _ip("-n", self.receiver_ns, "addr", "add", f"{VETH_RECEIVER_ADDR}/30", "dev", "nio-r")
        if self.transport == "forward":
            # the largest datagram travels whole: IP never fragments, which would copy
            for ns, dev in ((self.sender_ns, "nio-s"), (self.receiver_ns, "nio-r")):
                _ip("-n", ns, "link", "set", dev, "mtu", str(FORWARD_MTU))
        _ip("-n", self.sender_ns, "link", "set", "nio-s", "up")
        _ip("-n", self.receiver_ns, "link", "set", "nio-r", "up")

    def _sysctl(self, ns, *settings):
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", *settings], check=True,
                       capture_output=True, text=True)

    def _quiet(self):
        """forward counts the datagrams its second namespace receives: no IPv6 (router and
        neighbour solicitations) on its links; the sender's gateway gets a static neighbour
        entry below (no ARP)."""
        for ns in self.namespaces:
            self._sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1",
                         "net.ipv6.conf.default.disable_ipv6=1")

    def _forward_to_blackhole(self):
        """The sender routes the destination through the second namespace, which forwards it
        to a blackhole: no local delivery anywhere, so nothing copies a zero-copy skb."""
        mac = json.loads(_ip("-n", self.receiver_ns, "-j", "link", "show", "dev", "nio-r")
                         .stdout)[0]["address"]
        _ip("-n", self.sender_ns, "neigh", "replace", VETH_RECEIVER_ADDR, "lladdr", mac,
            "dev", "nio-s", "nud", "permanent")
        _ip("-n", self.sender_ns, "route", "add", FORWARD_BLACKHOLE, "via", VETH_RECEIVER_ADDR)
        _ip("-n", self.receiver_ns, "route", "add", "blackhole", FORWARD_BLACKHOLE)
        self._sysctl(self.receiver_ns, "net.ipv4.ip_forward=1")

    def datagrams_seen(self):
        """Packets the forwarding namespace's interface received (forward only), or None."""
        if self.transport != "forward":
            return None
        r = _ip("-n", self.receiver_ns, "-j", "-s", "link", "show", "dev", "nio-r", check=False)
        try:
            return int(json.loads(r.stdout)[0]["stats64"]["rx"]["packets"])
        except (ValueError, LookupError, TypeError):
            return None

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
