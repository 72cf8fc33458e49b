"""`netio-trace agent`: the tracer on every process of the host (or of the given cgroups),
for as long as it runs, its figures served as OpenMetrics on --listen.

The tracer runs in its own mode on the cgroups (the cgroup2 root by default: every process
of the host, those there now and those to come), rewriting its trace object every
SNAPSHOT_S seconds (--json-every); the main thread reads each new one, adds it into the label
sets (labels.py); the next scrape renders the exposition from them (server.py). Everything that
can be wrong with the command line is found before anything starts (one line, exit 2)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from netio_trace.agent import exposition, labels
from netio_trace.agent.verdicts import load_baseline, zerocopy_verdicts
from netio_trace.agent.procevents import ProcEvents
from netio_trace.agent.procinfo import Whois
from netio_trace.agent.server import ListenError, MetricsServer
from netio_trace.run.params import UsageError
from netio_trace.system import paths, state
from netio_trace.system.cgroup import cgroup2_root
from netio_trace.system.privileges import privilege_error
from netio_trace.trace_session import clean_after_dead_drivers, remove_temp_dir, temp_dir
from netio_trace.tracer import set_pdeathsig, terminate, trace_argv

PROG = "netio-trace agent"
DEFAULT_LISTEN = "127.0.0.1:9464"
SNAPSHOT_S = 2.0            # how often the tracer rewrites its trace object: each costs the
                            # tracer a walk of every task of the host (its flush), so idle
                            # stays under 1% of a CPU with the process events (docs/agent.md)
READY_TIMEOUT_S = 120.0     # loading every program, BTF parsing, then each cgroup's processes
STALE_AFTER_S = 10.0        # /healthz fails when no snapshot came for this long
MAX_CGROUPS = 16            # NETIO_MAX_CGROUPS (bpf/netio.h)


def add_parser(sub):
    g = sub.add_parser("agent", help="long-running: follow every process of the host (or "
                       "--cgroup DIRs) and serve OpenMetrics on --listen",
                       description="Follow every process of the host, or of the given cgroup "
                       "v2 directories, and serve their bytes, copies and syscall latency as "
                       "OpenMetrics on --listen (GET /metrics, GET /healthz), labelled by "
                       "cgroup, comm and netns (sockets also by peer and proto). Ends on "
                       "SIGTERM or SIGINT.")
    g.add_argument("--listen", metavar="ADDR:PORT", default=DEFAULT_LISTEN,
                   help=f"where /metrics is served (default {DEFAULT_LISTEN}; port 0: any)")
    g.add_argument("--cgroup", metavar="DIR", action="append", default=[],
                   help="follow this cgroup v2 directory and below it (repeatable, at most "
                   f"{MAX_CGROUPS}; default the cgroup2 root: every process of the host)")
    g.add_argument("--labels", metavar="LIST", default="",
                   help=f"extra labels, comma list of {','.join(labels.OPTIONAL_LABELS)} "
                   "(pid: a series per process; a fleet's cost grows with its processes)")
    g.add_argument("--idle-expiry", metavar="S", default=str(labels.DEFAULT_IDLE_EXPIRY),
                   help="a label set that gained nothing for S seconds leaves the exposition "
                   f"(default {labels.DEFAULT_IDLE_EXPIRY:.0f})")
    g.add_argument("--max-series", metavar="N", default=str(labels.DEFAULT_MAX_SERIES),
                   help="at most N label sets of processes and N of sockets; more are summed "
                   f"into the _overflow set (default {labels.DEFAULT_MAX_SERIES})")
    g.add_argument("--baseline", metavar="DIR",
                   help="a `run --preset zerocopy` results directory of this machine: the "
                   "zero-copy verdict then says would help / below the crossover where the "
                   "traffic leaves the host (default: undecided there)")
    g.add_argument("--attach", metavar="MODE", default="auto",
                   help="tracer attach rung: auto|fentry|kprobe|tracepoint (default auto)")


def _positive(text, opt, kind=float):
    try:
        v = kind(text)
    except ValueError:
        v = 0
    if not v > 0:
        raise UsageError(f"{opt} {text}: not a positive number")
    return v


def _check_labels(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in labels.OPTIONAL_LABELS:
            raise UsageError(f"--labels {n}: unknown label (known: "
                             f"{', '.join(labels.OPTIONAL_LABELS)})")
    return tuple(names)


def _check_cgroups(dirs):
    """The cgroups to follow, each a directory below the cgroup2 mount (default: its root)."""
    root = cgroup2_root()
    if not root:
        raise UsageError("no cgroup2 mount: the agent follows processes by cgroup v2")
    if len(dirs) > MAX_CGROUPS:
        raise UsageError(f"--cgroup: at most {MAX_CGROUPS}")
    real_root = os.path.realpath(root)
    for d in dirs:
        if not os.path.isdir(d):
            raise UsageError(f"--cgroup {d}: no such directory")
        if os.path.commonpath([os.path.realpath(d), real_root]) != real_root:
            raise UsageError(f"--cgroup {d}: not a cgroup v2 directory (the cgroup2 mount is "
                             f"{root})")
    return list(dirs) or [root]


def check(a):
    """Every check before anything starts; returns the options as a dict."""
    opts = dict(labels=_check_labels(a.labels), cgroups=_check_cgroups(a.cgroup),
                idle_expiry=_positive(a.idle_expiry, "--idle-expiry"),
                max_series=_positive(a.max_series, "--max-series", int), attach=a.attach,
                baseline=load_baseline(a.baseline, PROG) if a.baseline else None)
    err = privilege_error("agent", need_netadmin=False)
    if err:
        raise UsageError(err)
    if not paths.have_binary("netio-tracer"):
        raise UsageError(f"netio-tracer not built in {paths.build_dir()}; run `make` (or set "
                         "NETIO_BUILD)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        raise UsageError("this kernel has no BTF (/sys/kernel/btf/vmlinux); the tracer needs "
                         "CONFIG_DEBUG_INFO_BTF=y")
    return opts


def main(a):
    opts = check(a)
    agent = Agent(opts)
    try:
        agent.server = MetricsServer(a.listen, agent.health)    # last check: binds the port
    except ListenError as e:
        raise UsageError(str(e)) from None
    for line in clean_after_dead_drivers():
        print(f"{PROG}: {line}", file=sys.stderr)
    state.open_state()
    try:
        return agent.run(a.listen)
    except RuntimeError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    finally:
        state.close_state()


def cpu_seconds(pid):
    """utime + stime of a process (/proc/PID/stat fields 14 and 15), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Agent:
    """One agent's run: the tracer, the loop that reads its snapshots, the server."""

    def __init__(self, opts):
        self.opts = opts
        self.server = None
        self.tracer = None
        self.stop = threading.Event()
        self.signum = None
        self.last_snapshot = None           # monotonic time of the last snapshot read
        self.events = ProcEvents()          # who a process was, should it end unseen
        self.agg = labels.Aggregator(Whois(events=self.events), labels=opts["labels"],
                                     max_series=opts["max_series"],
                                     idle_expiry=opts["idle_expiry"])

    def health(self):
        if self.tracer is None or self.tracer.poll() is not None:
            return False, "tracer not running"
        if self.last_snapshot is None:
            return False, "no snapshot yet"
        age = time.monotonic() - self.last_snapshot
        if age > STALE_AFTER_S:
            return False, f"last snapshot {age:.0f} s ago"
        return True, "ok"

    def _on_signal(self, signum, frame):
        self.signum = signum
        self.stop.set()
        if self.tracer is not None and self.last_snapshot is None and self.tracer.poll() is None:
            self.tracer.send_signal(signal.SIGTERM)    # still loading: its end ends our wait

    def run(self, listen):
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        tmp = temp_dir()
        try:
            json_path = os.path.join(tmp, "trace.json")
            if not self.events.start():     # before the tracer: no process falls between
                print(f"{PROG}: no process events (proc connector): a process that ends "
                      "before a snapshot sees it gets cgroup and netns unknown",
                      file=sys.stderr)
            self._start_tracer(json_path)
            if self.stop.is_set():
                print(f"{PROG}: {signal.Signals(self.signum).name} while starting",
                      file=sys.stderr)
                return 128 + int(self.signum)
            self.server.start()
            print(f"{PROG}: OpenMetrics on http://{listen.rsplit(':', 1)[0]}:{self.server.port}"
                  f"/metrics, following {', '.join(self.opts['cgroups'])}", file=sys.stderr)
            status = self._loop(json_path)
            if self.signum is not None:
                print(f"{PROG}: {signal.Signals(self.signum).name}: tracer detached, done",
                      file=sys.stderr)
            return status
        finally:
            self._end_tracer()
            self.events.close()
            self.server.close()
            remove_temp_dir(tmp)
            for s, h in old.items():
                signal.signal(s, h)

    def _start_tracer(self, json_path):
        """The tracer as our child (it dies with us: PR_SET_PDEATHSIG), recorded for a later
        start's cleanup; returns once it follows every cgroup."""
        argv = trace_argv(cgroups=self.opts["cgroups"], attach=self.opts["attach"],
                          json_path=json_path, json_every=SNAPSHOT_S, no_sample=True,
                          no_counters=True)
        argv.append("--prune-exited")   # ended processes leave its maps: it runs for days
        parent = os.getpid()
        self.tracer = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, start_new_session=True,
                                       preexec_fn=lambda: set_pdeathsig(parent))
        state.note_child(self.tracer.pid, argv[0])
        waiting = set(self.opts["cgroups"])
        deadline = time.monotonic() + READY_TIMEOUT_S
        while waiting and not self.stop.is_set():
            line = self.tracer.stderr.readline().decode(errors="replace").strip()
            if not line and self.stop.is_set():
                return
            if not line:
                raise RuntimeError(f"the tracer ended before following (status "
                                   f"{self.tracer.wait()})")
            if line.startswith("netio-tracer: following cgroup "):
                waiting.discard(line.split("following cgroup ", 1)[1])
            elif time.monotonic() > deadline:
                raise RuntimeError("the tracer did not start in time")
            else:
                print(line, file=sys.stderr)
        threading.Thread(target=self._pass_stderr, name="tracer-stderr", daemon=True).start()

    def _pass_stderr(self):
        """The tracer's later lines (drops, warnings) on our stderr."""
        for raw in self.tracer.stderr:
            print(raw.decode(errors="replace").rstrip(), file=sys.stderr)

    def _loop(self, json_path):
        """Each new snapshot into the label sets, then a whole exposition swapped in; exit 0 on
        a signal, 1 when the tracer ended on its own."""
        taken = json_path + ".taken"
        while not self.stop.wait(SNAPSHOT_S / 4):
            if self.tracer.poll() is not None:
                print(f"{PROG}: the tracer ended (status {self.tracer.returncode})",
                      file=sys.stderr)
                return 1
            try:
                # taking it tells the tracer it was read (--prune-exited): only then does it
                # forget the processes whose last counts it holds
                os.rename(json_path, taken)
            except FileNotFoundError:
                continue
            self._take(taken)
        return 0

    def _take(self, json_path):
        """One snapshot (written atomically by the tracer) in; the exposition out."""
        try:
            with open(json_path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{PROG}: snapshot unreadable, skipped: {e}", file=sys.stderr)
            return
        cpu = {"agent": sum(os.times()[:2])}
        traced = cpu_seconds(self.tracer.pid)
        if traced is not None:
            cpu["tracer"] = traced
        verdicts = self._verdicts(trace)
        with self.server.exposition.lock:      # a scrape renders whole snapshots only
            self.agg.add(trace)
            self.server.publish(lambda: exposition.render(self.agg, trace, cpu, verdicts))
        self.last_snapshot = time.monotonic()

    def _verdicts(self, trace):
        """trace's verdicts on this snapshot; a flow the rules cannot read costs the metric,
        never the agent (the counters go on)."""
        try:
            return zerocopy_verdicts(trace, self.agg.whois, self.opts["baseline"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            print(f"{PROG}: verdicts skipped: {e!r}", file=sys.stderr)
            return set()

    def _end_tracer(self):
        """Our tracer ended (terminate) if it still runs, and no longer ours to clean after."""
        p = self.tracer
        if p is None:
            return
        if p.poll() is None:
            terminate(p, 15)
        state.forget_child(p.pid)
