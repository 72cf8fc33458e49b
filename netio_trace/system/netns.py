"""Network namespaces for one run: a veth pair between two namespaces, or a private loopback.

Every name carries the owner's pid (`netio-<pid>-<seq>-<role>`), so a later start can tell
what a dead run of its own left behind, and never touches a namespace it did not create.
"""
import itertools
import os
import re
import subprocess

PREFIX = "netio-"
NETNS_DIR = "/var/run/netns"
VETH_SENDER_ADDR = "10.77.0.1"
VETH_RECEIVER_ADDR = "10.77.0.2"
LOOPBACK_ADDR = "127.0.0.1"
TRANSPORTS = ("veth", "loopback")

_seq = itertools.count()
_NAME_RE = re.compile(r"^netio-(\d+)-\d+-(snd|rcv|lo)$")


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class Topology:
    """Namespaces for one transport. Use as a context manager; removed on exit.

    sender_ns / receiver_ns: namespace names to pass to the workloads' --netns;
    server_addr: the address the receiver connects to.
    """

    def __init__(self, transport):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r} (choose from {', '.join(TRANSPORTS)})")
        self.transport = transport
        base = f"{PREFIX}{os.getpid()}-{next(_seq)}"
        if transport == "veth":
            self.sender_ns, self.receiver_ns = f"{base}-snd", f"{base}-rcv"
            self.server_addr = VETH_SENDER_ADDR
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
            if self.transport == "veth":
                _ip("link", "add", "nio-s", "netns", self.sender_ns, "type", "veth",
                    "peer", "name", "nio-r", "netns", self.receiver_ns)
                _ip("-n", self.sender_ns, "addr", "add", f"{VETH_SENDER_ADDR}/30", "dev", "nio-s")
                _ip("-n", self.receiver_ns, "addr", "add", f"{VETH_RECEIVER_ADDR}/30", "dev", "nio-r")
                _ip("-n", self.sender_ns, "link", "set", "nio-s", "up")
                _ip("-n", self.receiver_ns, "link", "set", "nio-r", "up")
        except subprocess.CalledProcessError as e:
            self.remove()
            raise RuntimeError(f"cannot create {self.transport} namespaces: {e.stderr.strip()}") from e
        return self

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
