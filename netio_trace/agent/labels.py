"""The agent's counters: the tracer's per-process and per-socket figures summed into label
sets a fleet can afford ({cgroup, comm, netns}, sockets also {peer, proto}; pid only when
asked), so that they never go backwards while the agent runs.

The tracer's figures are cumulative per process (and per socket record) since it started,
but a process's entry can go (its process exited and its entry was pruned) or start again
from zero (an entry made again for a late softirq event, or a pid reused). So the agent never
exposes the tracer's figures themselves: at each snapshot it adds what each process or socket
gained since the last one (its delta; a figure smaller than the last seen one means a new
entry, whose whole value is the delta) to its label set's totals. What a process that ended
had counted is therefore already in its label set's totals, the "carried totals".

A label set that gained nothing for `idle_expiry` seconds leaves the exposition; its totals
are kept aside (dormant) so that, should it come back, it resumes from them and its counters
still never go backwards. The number of label sets is bounded (`max_series`): past it, new
ones are summed into one overflow set, and how many were folded is counted.
"""
import time

from report.openmetrics import HIST_SLOTS

# (key in the tracer's process or socket object, the metric's name without netio_ and _total)
PROCESS_COUNTERS = (("tx_bytes", "tx_bytes"), ("tx_copy_bytes", "tx_copy_bytes"),
                    ("tx_spliced_bytes", "tx_spliced_bytes"), ("zc_tx_bytes", "zc_tx_bytes"),
                    ("rx_copy_bytes", "rx_copy_bytes"), ("tx_calls", "tx_calls"),
                    ("rx_copy_calls", "rx_copies"))
SOCKET_COUNTERS = (("tx_bytes", "tx_bytes"), ("tx_copy_bytes", "tx_copy_bytes"),
                   ("tx_spliced_bytes", "tx_spliced_bytes"), ("zc_tx_bytes", "zc_tx_bytes"),
                   ("rx_copy_bytes", "rx_copy_bytes"),
                   ("fallback_copy_bytes", "fallback_copy_bytes"))
PROCESS_LABELS = ("cgroup", "comm", "netns")
SOCKET_LABELS = ("cgroup", "comm", "netns", "peer", "proto")
OPTIONAL_LABELS = ("pid",)      # --labels: one series per process, only when asked for
OVERFLOW = "_overflow"          # every label of the set the series past max_series go to
MAX_LABEL_LEN = 256             # a cgroup path is user-made: a bound on each value's length
DEFAULT_IDLE_EXPIRY = 600.0
DEFAULT_MAX_SERIES = 10000


def bound(value):
    """A label value of bounded length (cgroup paths are made by users)."""
    value = str(value)
    return value if len(value) <= MAX_LABEL_LEN else value[:MAX_LABEL_LEN - 1] + "~"


def peer_kind(sock):
    """local when the tracer saw the peer on this host or the route is loopback, else remote
    (a veth or a device: the traffic may leave the host)."""
    return "local" if sock.get("peer_local") or sock.get("path") == "loopback" else "remote"


class Totals:
    """One label set's counters (by metric name), calls by syscall (every call, counted),
    latency histograms (by syscall: [count per log2 slot] of the timed calls, sum in
    seconds), and when it last gained anything."""

    def __init__(self, now):
        self.counters = {}
        self.calls = {}
        self.hists = {}
        self.changed = now

    def add_counter(self, name, delta):
        self.counters[name] = self.counters.get(name, 0) + delta

    def add_calls(self, syscall, delta):
        self.calls[syscall] = self.calls.get(syscall, 0) + delta

    def add_hist(self, syscall, slot_deltas, sum_delta):
        slots, total = self.hists.get(syscall, ([0] * HIST_SLOTS, 0.0))
        for i, n in enumerate(slot_deltas):
            slots[i] += n
        self.hists[syscall] = (slots, total + sum_delta)


class LabelSets:
    """Label set (a tuple of values, in `names` order) → Totals, bounded and expiring."""

    def __init__(self, names, max_series, idle_expiry):
        self.names = names
        self.max_series, self.idle_expiry = max_series, idle_expiry
        self.live, self.dormant = {}, {}
        self.folded = 0         # label sets summed into the overflow set

    def get(self, key, now):
        """The Totals of key (brought back from dormant if it expired), or of the overflow
        set when the bound is reached."""
        t = self.live.get(key)
        if t is None:
            t = self.dormant.pop(key, None)
            if t is None and len(self.live) >= self.max_series:
                self.folded += 1
                key = (OVERFLOW,) * len(self.names)
                t = self.live.get(key)
            if t is None:
                t = Totals(now)
            self.live[key] = t
        t.changed = now
        return t

    def expire(self, now):
        """Label sets idle for idle_expiry seconds leave; their totals wait aside, at most
        max_series of them (the oldest go first: a set idle that long is gone for good)."""
        for key in [k for k, t in self.live.items() if now - t.changed >= self.idle_expiry]:
            self.dormant[key] = self.live.pop(key)
        while len(self.dormant) > self.max_series:
            self.dormant.pop(min(self.dormant, key=lambda k: self.dormant[k].changed))


def _counter_deltas(cur, last, pairs):
    """{metric name: gain} from the figures now and at the last snapshot; a figure that went
    down belongs to a new entry, whose whole value is the gain."""
    out = {}
    for key, name in pairs:
        now_v, was = cur.get(key), (last or {}).get(key, 0)
        if not isinstance(now_v, int):
            continue
        d = now_v - was if now_v >= was else now_v
        if d:
            out[name] = d
    return out


def _went_down(cur, last):
    """Whether any byte figure of a process is below the last one seen: a new entry."""
    return any(isinstance(cur.get(k), int) and cur[k] < last.get(k, 0)
               for k, _ in PROCESS_COUNTERS)


def _slots(hist):
    """[count per log2 slot] from the tracer's {lower bound ns: count}."""
    by_slot = [0] * HIST_SLOTS
    for lo, n in (hist or {}).items():
        by_slot[min(max(int(lo).bit_length() - 1, 0), HIST_SLOTS - 1)] += n
    return by_slot


def _hist_deltas(cur, last):
    """{syscall: (slot gains, seconds gained)} between two of a process's `syscalls`."""
    out = {}
    for name, sc in (cur or {}).items():
        if not isinstance(sc, dict):
            continue
        was = (last or {}).get(name) or {}
        now_s, was_s = _slots(sc.get("hist_log2_ns")), _slots(was.get("hist_log2_ns"))
        if any(n < w for n, w in zip(now_s, was_s)):
            was, was_s = {}, [0] * HIST_SLOTS       # a new entry: all of it is new
        gains = [n - w for n, w in zip(now_s, was_s)]
        if not any(gains):
            continue
        secs = ((sc.get("mean_us") or 0) * (sc.get("timed") or 0)
                - (was.get("mean_us") or 0) * (was.get("timed") or 0)) * 1e-6
        out[name] = (gains, max(secs, 0.0))
    return out


def _call_deltas(cur, last):
    """{syscall: calls gained} between two of a process's `syscalls` (every call counted,
    timed or not); a count that went down belongs to a new entry, all of it new."""
    out = {}
    for name, sc in (cur or {}).items():
        if isinstance(sc, dict):
            out.update(_counter_deltas(sc, (last or {}).get(name), (("count", name),)))
    return out


def socket_key(sock):
    """A socket record's identity in the snapshot: the tracer keeps one per (socket, process)."""
    return (sock.get("pid"), sock.get("proto"), sock.get("family"), sock.get("local"),
            sock.get("peer"), sock.get("netns"))


class Aggregator:
    """Snapshots in, label-set totals out. `whois` (procinfo.Whois) gives the cgroup and
    netns of a pid, read at its first sight and forgotten when its entry starts again."""

    def __init__(self, whois, labels=(), max_series=DEFAULT_MAX_SERIES,
                 idle_expiry=DEFAULT_IDLE_EXPIRY):
        self.whois = whois
        self.with_pid = "pid" in labels
        extra = ("pid",) if self.with_pid else ()
        self.processes = LabelSets(PROCESS_LABELS + extra, max_series, idle_expiry)
        self.sockets = LabelSets(SOCKET_LABELS + extra, max_series, idle_expiry)
        self.last_procs, self.last_socks = {}, {}
        # the tracer's BPF time: an estimate scaled up from its stats windows
        # (self.estimated), which can come out a little lower than the last one; the
        # counter keeps the highest seen
        self.bpf_ns = 0

    def _key(self, pid, comm, more=(), netns=None):
        # a socket's comm is its process's when its record was made: not news of an exec
        who = self.whois.of(int(pid), comm if netns is None else None)
        key = (bound(who["cgroup"]), bound(comm or ""), str(netns or who["netns"])) + more
        return key + ((str(pid),) if self.with_pid else ())

    def add(self, trace, now=None):
        """Add what every process and socket gained since the last snapshot."""
        now = time.monotonic() if now is None else now
        self.bpf_ns = max(self.bpf_ns, (trace.get("self") or {}).get("bpf_ns") or 0)
        self._add_processes(trace.get("processes") or {}, now)
        self._add_sockets(trace.get("sockets") or [], now)
        self.processes.expire(now)
        self.sockets.expire(now)

    def _add_processes(self, procs, now):
        seen = {}
        for pid, p in procs.items():
            if not isinstance(p, dict):
                continue
            last = self.last_procs.get(pid)
            if last is None:
                self.whois.of(int(pid), p.get("comm"))  # its first sight: /proc while it lives
            elif _went_down(p, last):
                self.whois.forget(int(pid))     # a new entry: maybe a new process on that pid
                last = None
            gains = _counter_deltas(p, last, PROCESS_COUNTERS)
            hists = _hist_deltas(p.get("syscalls"), (last or {}).get("syscalls"))
            calls = _call_deltas(p.get("syscalls"), (last or {}).get("syscalls"))
            if gains or hists or calls:
                t = self.processes.get(self._key(pid, p.get("comm")), now)
                for name, d in gains.items():
                    t.add_counter(name, d)
                for name, d in calls.items():
                    t.add_calls(name, d)
                for name, (slots, secs) in hists.items():
                    t.add_hist(name, slots, secs)
            seen[pid] = p
        self.last_procs = seen      # an entry gone was counted already: its totals carry on
        self.whois.keep(int(p) for p in seen)

    def _add_sockets(self, socks, now):
        seen = {}
        for s in socks:
            if not isinstance(s, dict) or s.get("pid") is None:
                continue
            k = socket_key(s)
            last = self.last_socks.get(k)
            if last is not None and peer_kind(last) == "local":
                s = dict(s, peer_local=1)   # once seen local, local: tcp_ends may forget it
            gains = _counter_deltas(s, last, SOCKET_COUNTERS)
            if gains:
                key = self._key(s["pid"], s.get("comm"), (peer_kind(s), str(s.get("proto"))),
                                netns=s.get("netns"))
                t = self.sockets.get(key, now)
                for name, d in gains.items():
                    t.add_counter(name, d)
            seen[k] = s
        self.last_socks = seen
