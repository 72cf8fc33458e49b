"""The kernel's own per-socket TCP counters and the sockets' owners, read by iterators at a
snapshot, against a program per send and receive call (bench/NOTES.md, "The kernel's
per-socket counters"; docs/bench.md). Two questions before a design rests on them:

1. Exact? Each TCP socket's bytes written and read by its user, from `tcp_sock`'s counters,
   and the process holding it (bpf/tcp_counters.bpf.c), against what this bench wrote and
   read on its own loopback sockets: both ways, bytes left unread, a FIN read and one not read
   yet, a pair a child process holds too.
2. What does a read cost? BPF ns per socket and per open file (one program run each, BPF
   run-time stats), and a read's BPF and wall time, at each number of idle connections; beside
   it, the per-call programs' ns per message (bench.per_message, counting level, one-copy
   16 KiB over loopback), measured in the same run.

    python -m bench.tcp_counters [--pairs N,N] [--rounds R] [--interval S] [--json FILE]

Prints Markdown with the host's CPU and SRSO state. Exit 1 if a socket's counters or owner
were not exact, 2 on bad arguments. Needs root and a build ($NETIO_BUILD, default build).
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading

from analysis import stats
from bench import harness, per_message
from bench.config import BUILD
from bench.harness import srso_state
from netio_trace.system.netns import Topology
from netio_trace.tracer import set_pdeathsig

READER = os.path.join(BUILD, "netio-bench-tcp-counters")
READS = 20          # reads of the iterator per round
TIMEOUT = 120
TCP_CLOSE = 7       # a FIN sent and a reset look alike there (tcp_counters.bpf.c)


def read_counters(binary=READER):
    """{inode: (state, written, read, owner)} of every TCP socket of this netns that is not
    listening, from one read (owner: the tgid of the one process holding it, 0: none or
    more than one)."""
    out = subprocess.run([binary, "--print"], check=True, capture_output=True, text=True,
                         timeout=TIMEOUT).stdout
    got = {}
    for line in out.splitlines():
        kind, *fields = line.split()
        if kind == "sock":
            ino, state, tx, rx, owner = map(int, fields)
            got[ino] = (state, tx, rx, owner)
    return got


def read_cost(reads=READS, binary=READER):
    """One round of `reads` reads: BPF ns per TCP socket and per open file visited, the
    sockets and files read per read, and the wall µs of one read."""
    out = subprocess.run([binary, "--reads", str(reads)], check=True, capture_output=True,
                         text=True, timeout=TIMEOUT).stdout
    r = json.loads(out)
    return {"ns_per_socket": r["tcp"]["ns"] / r["tcp"]["runs"],
            "ns_per_file": r["task_file"]["ns"] / r["task_file"]["runs"],
            "sockets_per_read": r["sockets"] / r["reads"],
            "files_per_read": r["files"] / r["reads"],
            "bpf_us_per_read": (r["tcp"]["ns"] + r["task_file"]["ns"]) / r["reads"] / 1e3,
            "wall_us_per_read": r["wall_ns"] / r["reads"] / 1e3}


class Tally:
    """A socket and the bytes this process wrote on it and read from it. The side that
    connected counts its SYN too (`syn`): the SYN-ACK's ack moves snd_una, and bytes_acked
    with it, there; the accepted side starts with its SYN acked. A design counts from a
    baseline taken when it first sees the socket, so the SYN drops out; the state change
    that ends a handshake says which side a socket is (SYN_SENT or SYN_RECV before)."""

    def __init__(self, sock, connected):
        self.sock, self.written, self.read = sock, 0, 0
        self.syn = int(connected)
        self.inode = os.fstat(sock.fileno()).st_ino
        self.owner = os.getpid()     # 0 once another process holds it too

    def send(self, n):
        """n bytes, from a thread (the peer may read them only after this returns)."""
        data = bytes(n)
        t = threading.Thread(target=self.sock.sendall, args=(data,))
        t.start()
        self.written += n
        return t

    def recv(self, n):
        """Exactly n bytes."""
        left = n
        while left:
            got = len(self.sock.recv(min(left, 1 << 20)))
            if not got:
                raise RuntimeError(f"end of stream with {left} bytes to read")
            left -= got
        self.read += n

    def recv_end(self):
        """The peer's FIN: recv() returns nothing."""
        if self.sock.recv(1):
            raise RuntimeError("data where the end of stream was expected")


def connected_pair(listener):
    a = socket.create_connection(listener.getsockname())
    b, _ = listener.accept()
    return Tally(a, connected=True), Tally(b, connected=False)


def transfer(src, dst, n, read=None):
    """src writes n bytes, dst reads `read` of them (all by default)."""
    t = src.send(n)
    dst.recv(n if read is None else read)
    t.join(TIMEOUT)


def exactness_cases(listener):
    """{case: [Tally, ...]}: the sockets of each case, once their transfers are done."""
    cases = {}
    a, b = connected_pair(listener)
    transfer(a, b, 8 << 20)
    transfer(b, a, 7777)
    cases["both ways, all read (8 MiB and 7 777 B)"] = [a, b]
    a, b = connected_pair(listener)
    transfer(a, b, 50000, read=12345)
    cases["part left unread (12 345 of 50 000 B read)"] = [a, b]
    a, b = connected_pair(listener)
    transfer(a, b, 3000)
    a.sock.shutdown(socket.SHUT_WR)
    b.recv_end()
    cases["a FIN sent and read"] = [a, b]
    a, b = connected_pair(listener)
    transfer(a, b, 4000)
    a.sock.shutdown(socket.SHUT_WR)
    cases["a FIN sent, not read yet"] = [a, b]
    a, b = connected_pair(listener)
    transfer(a, b, 1000)
    transfer(b, a, 2000)
    a.owner = b.owner = 0
    cases["held by two processes"] = [a, b]
    return cases


def hold(tallies):
    """A child process holding the sockets of tallies whose owner is 0, until killed (or
    until the bench ends, however it ends)."""
    fds = [t.sock.fileno() for t in tallies if not t.owner]
    return subprocess.Popen(["sleep", "3600"], pass_fds=fds, preexec_fn=set_pdeathsig)


def check_exact(cases, counters):
    """[(case, sockets, exact, misses)], misses: what each socket whose bytes or owner were
    not said exactly said."""
    rows = []
    for case, tallies in cases.items():
        misses = []
        for t in tallies:
            state, tx, rx, owner = counters.get(t.inode, (None, None, None, None))
            want = (t.written + t.syn, t.read, t.owner)
            if state == TCP_CLOSE or (tx, rx, owner) != want:
                misses.append(f"inode {t.inode} state {state}: wrote {t.written} (SYN "
                              f"{t.syn}) read {t.read} owner {t.owner}, counters {tx} {rx} "
                              f"owner {owner}")
        rows.append((case, len(tallies), len(tallies) - len(misses), misses))
    return rows


def exactness():
    """The cases on loopback sockets of this process, checked against one read."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        cases = exactness_cases(listener)
        holder = hold([t for tallies in cases.values() for t in tallies])
        try:
            return check_exact(cases, read_counters())
        finally:
            holder.kill()
            holder.wait()
            for tallies in cases.values():
                for t in tallies:
                    t.sock.close()


def open_files(n):
    """At least n descriptors allowed (the soft limit raised toward the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= n


def read_costs(pairs, rounds):
    """read_cost() of each round, with `pairs` idle connections open (2 sockets each; the
    descriptors allowed: open_files)."""
    with socket.create_server(("127.0.0.1", 0), backlog=128) as listener:
        socks = [connected_pair(listener) for _ in range(pairs)]
        try:
            return [read_cost() for _ in range(rounds)]
        finally:
            for a, b in socks:
                a.sock.close()
                b.sock.close()


def per_call(seconds):
    """bench.per_message's counting level, one-copy 16 KiB over loopback, no floor."""
    a = per_message.parse_args(["--level", "counting", "--no-floor", "--seconds", str(seconds)])
    with tempfile.TemporaryDirectory(prefix="tcp-counters-") as tmp, \
            Topology("loopback") as topo:
        res = per_message.measure(a, tmp, topo)
    return {"ns_per_message": res["ns_per_message"],
            "runs_per_message": res["runs_per_message"],
            "messages_per_s": res["messages"] / seconds}


def breakeven_line(pairs, rounds, pc, interval):
    """What one read costs, against the per-call programs' ns per message (inferred: two
    measurements of this run put side by side, not one run of a design built on it)."""
    sockets = statistics.median(r["sockets_per_read"] for r in rounds)
    ns = statistics.median(r["bpf_us_per_read"] for r in rounds) * 1e3
    rate = ns / (pc["ns_per_message"] * interval)
    return (f"- {pairs} connections: a read of {sockets:.0f} sockets and their owners takes "
            f"{ns / 1e3:.0f} µs of BPF, what the per-call programs spend on "
            f"{ns / pc['ns_per_message']:.0f} messages; read every {interval:g} s, it costs "
            f"less BPF time than they do once the host sends more than {rate:.1f} messages a "
            "second (inferred).")


def markdown(res):
    m, pc = res["machine"], res["per_call"]
    out = [f"The kernel's per-socket TCP counters, read by iterators; CPU {m['model']}, "
           f"kernel {m['kernel']}, SRSO: {res['srso']}", "",
           "| case | sockets | exact to the byte |", "|---|---|---|"]
    out += [f"| {case} | {n} | {ok} of {n} |" for case, n, ok, _ in res["exact"]]
    out += [f"- {miss}" for *_, misses in res["exact"] for miss in misses]
    out += ["", f"Reading, {res['rounds']} rounds of {READS} reads, median (min–max):", "",
            "| connections | sockets read | ns per socket | open files read | ns per file | "
            "BPF µs per read | wall µs per read |", "|---|---|---|---|---|---|---|"]
    for pairs, rounds in res["cost"].items():
        cells = [stats.fmt_spread(stats.spread(r[k] for r in rounds), "{:.0f}") for k in
                 ("sockets_per_read", "ns_per_socket", "files_per_read", "ns_per_file",
                  "bpf_us_per_read", "wall_us_per_read")]
        out.append(f"| {pairs} | " + " | ".join(cells) + " |")
    out += ["", f"Per call today (bench.per_message, counting level, one-copy 16 KiB over "
            f"loopback, this run): {pc['ns_per_message']:.0f} ns and "
            f"{pc['runs_per_message']:.2f} runs a message, at {pc['messages_per_s']:.0f} "
            "messages a second.", ""]
    out += [breakeven_line(p, r, pc, res["interval"]) for p, r in res["cost"].items()]
    return "\n".join(out)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.tcp_counters",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default="500,5000",
                   help="idle connections open during the reads, each count in turn")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--interval", type=float, default=15.0,
                   help="seconds between two snapshots, for the comparison")
    p.add_argument("--seconds", type=float, default=2.0, help="bench.per_message's run")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = p.parse_args(argv)
    try:
        a.pairs = [int(n) for n in a.pairs.split(",")]
    except ValueError:
        p.error(f"--pairs: {a.pairs!r} is not a list of counts")
    if not all(0 < n <= 100000 for n in a.pairs) or a.rounds < 1 or a.interval <= 0:
        p.error("--pairs 1..100000 each, --rounds >= 1, --interval > 0")
    if os.geteuid() != 0:
        p.error("needs root (BPF)")
    if not os.access(READER, os.X_OK):
        p.error(f"{READER} is not built (make)")
    if not open_files(2 * max(a.pairs) + 64):
        p.error(f"--pairs {max(a.pairs)}: this process may not open that many descriptors "
                f"(RLIMIT_NOFILE's hard limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[1]})")
    return a


def main(argv=None):
    a = parse_args(argv)
    res = {"machine": harness.machine(), "srso": srso_state(), "rounds": a.rounds,
           "interval": a.interval, "exact": exactness(),
           "cost": {n: read_costs(n, a.rounds) for n in a.pairs},
           "per_call": per_call(a.seconds)}
    print(markdown(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if all(ok == n for _, n, ok, _ in res["exact"]) else 1


if __name__ == "__main__":
    sys.exit(main())
