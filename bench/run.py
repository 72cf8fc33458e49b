"""netio-trace benchmarks. Run from the repo root as root: `python -m bench.run` (`make bench`).

Each section is a function taking a Bench and returning markdown; the sections' output is
printed and written to bench/results.md with the machine it ran on. Add a section by writing
a function and listing it in SECTIONS.

Every run of our workloads goes through Bench.netio(): the server and the client are started
held at a gate (analysis/procs.py), an observer (none, our tracer in one of its variants, or
bpftrace) is set up on their pids, then they are released; their CPU time comes from their own
rusage (wait4). Bench.busy_loop() does the same for netio-busy-loop (the timer floor).
"""
import argparse
import collections
import json
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types

from netio_trace.system import cgroup
from netio_trace.system.netns import LOOPBACK_ADDR, Topology, VETH_RECEIVER_ADDR
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_for_exit, wait_listening
from netio_trace.tracer import ControlTracer
from bench import pairs, unrelated, windows

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("NETIO_BUILD", os.path.join(REPO, "build")))
RESULTS = os.path.join(REPO, "bench", "results.md")
PROFILES = os.path.join(REPO, "bench", "profiles")
IPERF3_PORT = 5201  # inside the run's own namespaces only
NETIO_PORT0 = 5400  # ours: a fresh port per run inside the run's own namespaces
KiB = 1024

# targets (issues 3, 4 and 7)
# Issue 15's levels, each / untraced, paired within rounds: the full default (counting, latency
# histograms, sampling on the tick where there is no PMU) >= 0.88 in every case and >= 0.92 at
# one-copy 16 KiB loopback; counting (--no-latency --no-sample) >= 0.95 in every case, 0.97 there
TARGET_OVERHEAD = 0.88
TARGET_OVERHEAD_HEADLINE = 0.92
TARGET_COUNTING = 0.95
TARGET_COUNTING_HEADLINE = 0.97
AIM_OVERHEAD = 0.99
TARGET_HEADLINE = 0.97      # one-copy 16 KiB loopback 1 thread (issue 3)
TARGET_SAMPLING = 0.98      # stack sampling on top of the rest of the tracer (issue 4)
TARGET_IPERF3 = 1.0         # ours / iperf3 (issue 7)
TARGET_PEER = 1.0           # ours / bpftrace doing the same counting, paired (issue 7)
TARGET_SENDFILE = 1.0       # our sendfile / iperf3 -Z at the same size (issue 16)

# The peer: the same syscalls counted per pid with a log2 latency histogram, tracepoints
# only, filtered by the workloads' two pids ($1 server, $2 client) like our tracer's filter.
SYSCALLS = ("sendto", "sendmsg", "recvfrom", "recvmsg", "write", "read", "sendfile64",
            "poll", "epoll_wait")
BPFTRACE_SCRIPT = (
    ",".join(f"tracepoint:syscalls:sys_enter_{s}" for s in SYSCALLS) + "\n"
    "/pid == $1 || pid == $2/\n"
    "{ @start[tid] = nsecs; }\n"
    + ",".join(f"tracepoint:syscalls:sys_exit_{s}" for s in SYSCALLS) + "\n"
    "/@start[tid]/\n"
    "{\n"
    "  @calls[pid, probe] = count();\n"
    "  @lat_ns[probe] = hist(nsecs - @start[tid]);\n"
    "  if (args->ret > 0) { @bytes[pid, probe] = sum(args->ret); }\n"
    "  delete(@start[tid]);\n"
    "}\n"
    "BEGIN { printf(\"ready\\n\"); }\n")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _children_cpu():
    t = os.times()
    return t.children_user + t.children_system


def bpf_programs():
    """Number of BPF programs loaded (a tracer attached elsewhere slows every packet)."""
    try:
        r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                           timeout=10)
        return len(json.loads(r.stdout)) if r.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _git_head():
    try:
        r = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def loadavg():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cc = "unknown"
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            cc = f.read().strip()
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "default_cc": cc}


def verdict(s, target):
    """A summary of paired ratios (pairs.summary) against a lower bound: 'met', 'missed by X'
    (the median's distance) or 'undecided' when the median's interval straddles the target."""
    if s is None or s.get("median") is None:
        return "n/a"
    c = pairs.classify(s, target)
    if c == "met":
        return "met"
    if c == "missed":
        return f"**missed by {target - s['median']:.3f}**"
    if s["n"] < pairs.MIN_VERDICT_VALUES:
        return f"undecided (n={s['n']}: a verdict needs {pairs.MIN_VERDICT_VALUES})"
    return f"undecided ({s['lo']:.3f}–{s['hi']:.3f} spans {target:g})"


def size_name(n):
    return f"{n // KiB} KiB" if n >= KiB and n % KiB == 0 else f"{n} B"


class Proc:
    """A child process we started; ended only through its own pid."""

    def __init__(self, argv, **kw):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  **kw)
        self.pid = self.p.pid
        self.early = {"stdout": "", "stderr": ""}

    def wait_line(self, stream, prefix, timeout=5.0):
        """The first line of stream (stdout|stderr) starting with prefix; None if it ended.

        Reads the raw pipe (no buffered readline that select() cannot see into); what it
        read past that line is kept in self.early[stream]."""
        fd = getattr(self.p, stream).fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(prefix.encode()):
                    self.early[stream] = buf.decode(errors="replace")
                    return line.decode(errors="replace")
        raise RuntimeError(f"{self.p.args[0]}: no '{prefix}' line within {timeout} s")

    def finish(self, timeout):
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.p.communicate()
        return self.p.returncode, self.early["stdout"] + out, self.early["stderr"] + err

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        if self.p.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.p.wait()


class Run(dict):
    """One run's numbers; printed short in the progress log."""

    def __repr__(self):
        if "blocks_per_s" in self:
            return f"{self['blocks_per_s']:.0f} blocks/s (busy loop)"
        if "seen" in self:
            return (f"{self['send_gbps']:.2f} Gbit/s sent (forward), {self['seen']} of "
                    f"{self['messages']} datagrams seen, {self['copied']} of "
                    f"{self['completions']} completions COPIED")
        extra = ""
        if "bpf_ns_per_msg" in self:
            extra = f", BPF {self['bpf_ns_per_msg']:.0f} ns/msg"
        if "bt_calls" in self:
            extra = f", bpftrace {self['bt_calls']} calls"
        return f"{self['recv_gbps']:.2f} Gbit/s ({self['cc']}, retrans {self['retrans']}{extra})"

    __str__ = __repr__


# ---- observers: what watches a run of our workloads -----------------------------------------
class Untraced:
    """No observer at all: no BPF program of ours is loaded during the run."""
    name = "untraced"

    def start(self, bench, topo, pids):
        pass

    def stop(self, run):
        pass

    def abort(self):
        pass


class OurTracer:
    """netio-tracer --control, loaded for this run only (before the workloads are released,
    so loading and attaching are not inside their measured time), following both pids and the
    run's namespaces; snapshot after the run, then quit."""

    def __init__(self, extra_args=(), memory=False, label="full", env=None,
                 expect_attached=None, build=None):
        """env: extra environment of the tracer; expect_attached: the probe points (and
        "stacks") that must be all it attached, checked after every run; build: the build
        directory of the netio-tracer to run (default BUILD)."""
        self.build = build
        self.extra_args = list(extra_args)
        self.env = env
        self.expect_attached = expect_attached
        self.memory = memory
        self.name = label
        self.tr = None

    def start(self, bench, topo, pids):
        self.dir = bench.rundir()
        args = list(self.extra_args)
        # as netio-trace run does: perf-event samples from the workloads' cgroup
        if bench.cgroup is not None and "--no-sample" not in args and "tick" not in args:
            args += ["--sample-cgroup", bench.cgroup.path]
        self.tr = ControlTracer(freq=999, log_path=os.path.join(self.dir, "tracer.log"),
                                extra_args=args, binary=os.path.join(self.build or BUILD, "netio-tracer"),
                                env=self.env)
        self.tr.start()
        for ns in topo.namespaces:
            self.tr.netns_add(ns)
        for pid in pids:
            self.tr.pid_add(pid)
        self.cpu0 = _proc_cpu_s(self.tr.pid)

    def stop(self, run):
        try:
            run["tracer_cpu_s"] = _proc_cpu_s(self.tr.pid) - self.cpu0
            if self.memory:
                run.update(tracer_memory(self.tr.pid))
            folded = os.path.join(self.dir, "stacks.folded")
            snap = self.tr.snapshot(os.path.join(self.dir, "trace.json"), folded)
            if self.memory:
                run["rss_after_snapshot_kib"] = _proc_status(self.tr.pid).get("VmRSS")
                run["hwm_kib"] = _proc_status(self.tr.pid).get("VmHWM")
        finally:
            self.tr.close()
            self.tr = None
        me = snap.get("self") or {}
        sc = snap.get("syscalls") or {}
        run.update({
            "folded": folded, "trace_json": os.path.join(self.dir, "trace.json"),
            "bpf_ns": me.get("bpf_ns") or 0, "bpf_runs": me.get("bpf_runs") or 0,
            "bpf_stats_via": me.get("stats_via"), "bpf_estimated": me.get("estimated"),
            "bpf_programs": {k: v.get("ns", 0) for k, v in (me.get("programs") or {}).items()},
            "drops": snap.get("drops"), "samples": (snap.get("samples") or {}).get("total"),
            "sample_source": (snap.get("samples") or {}).get("source"),
            "sample_freq": (snap.get("samples") or {}).get("freq"),
            "samples_lost": (snap.get("samples") or {}).get("lost"),
            "trace_duration_s": snap.get("duration_s"),
            "sc_calls": sum(v.get("count", 0) for v in sc.values()),
            "sc_send_calls": sum(sc.get(k, {}).get("count", 0) for k in ("sendto", "sendmsg")),
            "tx_bytes": snap.get("tx_bytes"), "rx_copy_bytes": snap.get("rx_copy_bytes"),
            "attached": sorted(k for k, v in (snap.get("attach") or {}).items()
                               if v not in (None, "unavailable", "inferred")),
        })
        if self.expect_attached is not None and set(run["attached"]) != self.expect_attached:
            raise RuntimeError(f"the {self.name} tracer attached {run['attached']}, not "
                               f"{sorted(self.expect_attached)}")
        msgs = run["messages"]
        run["bpf_ns_per_msg"] = run["bpf_ns"] / msgs if msgs else None
        run["bpf_cpu_share"] = run["bpf_ns"] / (run["cpu_s"] * 1e9) if run["cpu_s"] else None

    def abort(self):
        if self.tr is not None:
            self.tr.close()
            self.tr = None


class Bpftrace:
    """The peer: bpftrace counting the same syscalls with latency histograms for the same two
    pids, started (and attached: BEGIN runs after every probe is attached) before the
    workloads are released, ended with SIGINT after the run (its maps are printed then)."""
    name = "bpftrace"
    script = BPFTRACE_SCRIPT
    takes_pids = True       # the script's $1, $2

    def __init__(self):
        self.p = None

    def start(self, bench, topo, pids):
        d = bench.rundir()
        script = os.path.join(d, "peer.bt")
        with open(script, "w") as f:
            f.write(self.script)
        self.p = Proc(["bpftrace", script] + ([str(p) for p in pids] if self.takes_pids else []))
        if not self.p.wait_line("stdout", "ready", timeout=60):
            raise RuntimeError(f"bpftrace ended before attaching: {self.p.finish(5)[2][-300:]}")

    def stop(self, run):
        self.p.signal(signal.SIGINT)
        rc, out, err = self.p.finish(30)
        self.p = None
        if rc != 0:
            raise RuntimeError(f"bpftrace exit {rc}: {err.strip()[-300:]}")
        self.parse(out, run)

    def parse(self, out, run):
        calls = {}
        for m in re.finditer(r"^@calls\[(\d+), tracepoint:syscalls:sys_exit_(\w+)\]: (\d+)", out,
                             re.M):
            calls[m.group(2)] = calls.get(m.group(2), 0) + int(m.group(3))
        run["bt_calls"] = sum(calls.values())
        run["bt_send_calls"] = sum(calls.get(k, 0) for k in ("sendto", "sendmsg"))

    def abort(self):
        if self.p is not None:
            self.p.kill()
            self.p = None


class BpftraceTimer(Bpftrace):
    """A sampler that does nothing: bpftrace's profile:hz:999 (a cpu-clock event per CPU at
    999 Hz, for every task) whose program only counts. What it costs is the timer's."""
    name = "bpftrace-timer"
    script = 'profile:hz:999 { @n = count(); }\nBEGIN { printf("ready\\n"); }\n'
    takes_pids = False

    def parse(self, out, run):
        m = re.search(r"^@n: (\d+)", out, re.M)
        run["samples"] = int(m.group(1)) if m else None


# what a run outside any topology (the busy loop) gives observers: no namespace to follow
NO_NAMESPACES = types.SimpleNamespace(namespaces=())


def _proc_cpu_s(pid):
    """user + system CPU seconds of a live process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def tracer_memory(pid):
    """RSS of the tracer and the bytes of its BPF maps (the map ids its fds hold, sized by
    `bpftool map show --json`)."""
    ids = set()
    fd_dir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                m = re.search(r"^map_id:\s*(\d+)", f.read(), re.M)
        except OSError:
            continue
        if m:
            ids.add(int(m.group(1)))
    maps = json.loads(subprocess.run(["bpftool", "map", "show", "--json"], capture_output=True,
                                     text=True, timeout=30, check=True).stdout)
    mine = [m for m in maps if m.get("id") in ids]
    st = _proc_status(pid)
    big = sorted(mine, key=lambda m: -m.get("bytes_memlock", 0))[:3]
    return {"rss_kib": st.get("VmRSS"), "map_bytes": sum(m.get("bytes_memlock", 0) for m in mine),
            "maps": len(mine),
            "biggest_maps": [(m.get("name"), m.get("bytes_memlock", 0)) for m in big]}


def _reap_all(procs, deadline):
    """Wait for every GatedProcess in procs; returns {pid: cpu seconds (user+sys, all threads)}.
    Past the deadline the rest are killed (by their pids) and an error is raised."""
    cpu = {}
    left = list(procs)
    while left:
        for p in list(left):
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                p.returncode = os.waitstatus_to_exitcode(status)
                cpu[p.pid] = ru.ru_utime + ru.ru_stime
                left.remove(p)
        if left and time.monotonic() > deadline:
            for p in left:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9
            raise RuntimeError(f"workload still running at the deadline (killed): "
                               f"{[p.argv[0] for p in left]}")
        if left:    # asleep until one ends: a polling loop would wake on the measured CPUs
            wait_for_exit(left, deadline - time.monotonic())
    return cpu


def _tail(path):
    try:
        with open(path, errors="replace") as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


class Bench:
    def __init__(self, args):
        self.args = args
        self.server = os.path.join(BUILD, "netio-server")
        self.client = os.path.join(BUILD, "netio-client")
        self.tmp = tempfile.mkdtemp(prefix="netio-bench-")
        # every netio run (traced or not, so the baselines match) starts in it
        self.cgroup = cgroup.WorkloadCgroup.create()
        self._n = 0
        self.verdicts = []
        self.retries = []

    def record(self, group, item, summary, target):
        """A ratio with a target, for the summary at the top of results.md."""
        self.verdicts.append((group, item, summary, target))

    def summary_md(self):
        groups = {}
        for g, item, sm, target in self.verdicts:
            groups.setdefault(g, []).append((item, sm, target))
        lines = ["## Targets at a glance", "",
                 f"A target is **met** when the whole interval of the median of the paired "
                 f"ratios is at or above it, **missed** when the interval is below it, and "
                 f"**undecided** when the interval spans it: the interval holds the median with "
                 f"≥ {pairs.INTERVAL_LEVEL:.0%} probability whatever the distribution (with fewer "
                 f"than 9 rounds it is min to max; details in the sections below).", "",
                 speed_md(), "",
                 "| target | met | undecided | missed | worst median (where) |",
                 "|---|---|---|---|---|"]
        for g, items in groups.items():
            verdicts = [pairs.classify(sm, t) for _, sm, t in items]
            known = [(it, sm["median"], t) for it, sm, t in items if sm.get("median") is not None]
            worst = min(known, key=lambda x: x[1] - x[2]) if known else None
            w = (f"{worst[1]:.3f} vs {worst[2]:g} ({worst[0]})" if worst else "n/a")
            n = len(items)
            lines.append(f"| {g} (≥ {items[0][2]:g}) | {verdicts.count('met')}/{n} | "
                         f"{verdicts.count('undecided')}/{n} | {verdicts.count('missed')}/{n} | "
                         f"{w} |")
        return "\n".join(lines) + "\n"

    def rundir(self):
        self._n += 1
        d = os.path.join(self.tmp, f"{self._n:05d}")
        os.makedirs(d, exist_ok=True)
        return d

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.remove()

    # ---- runners: each returns {"recv_gbps", "send_gbps", "retrans", "cc", ...} ----------
    def netio(self, topo, strategy, size, threads, duration, observer=None):
        """One run of netio-server/netio-client in topo, watched by observer (see above).
        A run that fails is retried once (and said so); a second failure ends the bench."""
        observer = observer or Untraced()
        return self._retried(
            f"{strategy} {size_name(size)} ×{threads} {topo.transport} {observer.name}",
            lambda: self._netio(topo, strategy, size, threads, duration, observer))

    def _retried(self, what, run):
        """run(), and once more if it fails (said so in the log and in the results); a second
        failure ends the bench."""
        try:
            return run()
        except RuntimeError as e:
            log(f"run failed, retrying once: {what}: {e}")
            self.retries.append(f"{what}: {e}")
            return run()

    def _netio(self, topo, strategy, size, threads, duration, observer):
        d = self.rundir()
        port = str(NETIO_PORT0 + self._n % 2000)
        files = {k: os.path.join(d, k) for k in ("s.out", "s.err", "c.out", "c.err")}
        srv = GatedProcess([self.server, "--netns", topo.sender_ns, "--addr", topo.server_addr,
                            "--port", port, "--strategy", strategy, "--size", str(size),
                            "--threads", str(threads), "--duration", f"{duration:g}",
                            "--cc", "cubic", *READY_ARGS], files["s.out"], files["s.err"],
                           cgroup=self.cgroup, ready=True)
        cli = GatedProcess([self.client, "--netns", topo.receiver_ns, "--addr", topo.server_addr,
                            "--port", port, "--threads", str(threads), "--size", str(size),
                            "--cc", "cubic"], files["c.out"], files["c.err"], cgroup=self.cgroup)
        procs = [srv, cli]
        try:
            observer.start(self, topo, [srv.pid, cli.pid])
            srv.release()
            try:
                listening, _ = wait_listening(srv.ready, 10)
            except TimeoutError:
                listening = None
            srv.close_ready()
            if not listening:
                raise RuntimeError(f"netio-server did not listen: {_tail(files['s.err'])}")
            cli.release()
            if hasattr(observer, "during"):     # an observer that acts while it runs
                observer.during(cli.pid, time.monotonic() + duration)
            cpu = _reap_all(procs, time.monotonic() + duration + 30 + threads * 0.1)
            if srv.returncode != 0 or cli.returncode != 0:
                raise RuntimeError(f"netio {strategy}: server {srv.returncode} "
                                   f"{_tail(files['s.err'])} / client {cli.returncode} "
                                   f"{_tail(files['c.err'])}")
            with open(files["s.out"]) as f:
                s = json.load(f)
            with open(files["c.out"]) as f:
                c = json.load(f)
            cpu_s = cpu[srv.pid] + cpu[cli.pid]
            run = Run({"recv_gbps": c["throughput_gbps"], "send_gbps": s["throughput_gbps"],
                       "expected_sends": s["send_calls"] + threads,
                       "retrans": s["tcp"]["retrans"], "cc": s["tcp"]["cc"],
                       "messages": s["messages"], "send_calls": s["send_calls"],
                       "bytes": c["bytes"], "seconds": s["seconds"], "cpu_s": cpu_s,
                       "cpu_s_per_gb": _per_gb(cpu_s, c["bytes"])})
            observer.stop(run)
            return run
        except BaseException:
            observer.abort()
            for p in procs:
                p.end()
            raise

    def netio_forward(self, topo, strategy, size, threads, duration):
        """One untraced run of netio-server over the forward path (UDP into a namespace that
        forwards to a blackhole; nothing receives): the sender's throughput, the datagrams the
        forwarding namespace's interface saw, and the completions flagged COPIED."""
        d = self.rundir()
        out, err = os.path.join(d, "s.out"), os.path.join(d, "s.err")
        seen0 = topo.datagrams_seen()
        srv = GatedProcess([self.server, "--netns", topo.sender_ns, "--addr", topo.server_addr,
                            "--port", str(NETIO_PORT0), "--udp", "--strategy", strategy,
                            "--size", str(size), "--threads", str(threads), "--duration",
                            f"{duration:g}"], out, err, cgroup=self.cgroup)
        try:
            srv.release()
            cpu = _reap_all([srv], time.monotonic() + duration + 30)
        except BaseException:
            srv.end()
            raise
        if srv.returncode != 0:
            raise RuntimeError(f"netio {strategy} --udp: exit {srv.returncode} {_tail(err)}")
        with open(out) as f:
            s = json.load(f)
        zc = s["zerocopy"]
        st = s.get("steady") or {}
        return Run({"send_gbps": (st["bytes"] * 8 / st["seconds"] / 1e9 if st.get("seconds")
                                  else s["throughput_gbps"]),
                    "messages": s["messages"], "seen": topo.datagrams_seen() - seen0,
                    "completions": zc["completions"], "copied": zc["copied"],
                    "cpu_s_per_gb": _per_gb(cpu[srv.pid], s["bytes"])})

    def busy_loop(self, duration, observer):
        """One run of netio-busy-loop (computation only) in the workloads' cgroup, watched by
        observer: {"blocks_per_s", "cpu_s"} and what the observer adds. Retried once."""
        return self._retried(f"busy loop {observer.name}",
                             lambda: self._busy_loop(duration, observer))

    def _busy_loop(self, duration, observer):
        d = self.rundir()
        out, err = os.path.join(d, "b.out"), os.path.join(d, "b.err")
        proc = GatedProcess([os.path.join(BUILD, "netio-busy-loop"), "--seconds",
                             f"{duration:g}"], out, err, cgroup=self.cgroup)
        try:
            observer.start(self, NO_NAMESPACES, [proc.pid])
            proc.release()
            cpu = _reap_all([proc], time.monotonic() + duration + 30)
            if proc.returncode != 0:
                raise RuntimeError(f"netio-busy-loop: exit {proc.returncode}: {_tail(err)}")
            with open(out) as f:
                r = json.load(f)
            run = Run({"blocks_per_s": r["blocks_per_s"], "messages": None,
                       "cpu_s": cpu[proc.pid]})
            observer.stop(run)
            return run
        except BaseException:
            observer.abort()
            proc.end()
            raise

    def iperf3(self, topo, size, duration, zerocopy=False):
        addr = VETH_RECEIVER_ADDR if topo.transport == "veth" else LOOPBACK_ADDR
        cpu0 = _children_cpu()
        srv = Proc(["ip", "netns", "exec", topo.receiver_ns, "iperf3", "-s", "-1", "--forceflush",
                    "-p", str(IPERF3_PORT)])
        try:
            if not srv.wait_line("stdout", "Server listening"):
                raise RuntimeError(f"iperf3 -s ended: {srv.finish(5)}")
            cli = subprocess.run(["ip", "netns", "exec", topo.sender_ns, "iperf3", "-c", addr,
                                  "-p", str(IPERF3_PORT), "-l", f"{size // 1024}K", "-C", "cubic",
                                  "-t", str(duration), "-J"] + (["-Z"] if zerocopy else []),
                                 capture_output=True, text=True, timeout=duration + 30)
            srv.finish(5)
        finally:
            srv.kill()
        if cli.returncode != 0:
            raise RuntimeError(f"iperf3 -c: exit {cli.returncode}: {cli.stdout[-300:]} {cli.stderr}")
        end = json.loads(cli.stdout)["end"]
        return Run({"recv_gbps": end["sum_received"]["bits_per_second"] / 1e9,
                    "send_gbps": end["sum_sent"]["bits_per_second"] / 1e9,
                    "retrans": end["sum_sent"].get("retransmits"),
                    "cc": end.get("sender_tcp_congestion"),
                    "cpu_s_per_gb": _per_gb(_children_cpu() - cpu0,
                                            end["sum_received"]["bytes"])})


# How long the machine speed probe runs its busy loop on each CPU (pairs.Rounds.steady).
PROBE_S = 0.05


def machine_speed():
    """netio-busy-loop's rate on each CPU at once over PROBE_S (blocks/s, a tuple): how fast
    the machine runs now, outside any run and with no tracer loaded."""
    loops = [subprocess.Popen([os.path.join(BUILD, "netio-busy-loop"), "--seconds",
                               f"{PROBE_S:g}"], stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda c=cpu: os.sched_setaffinity(0, {c}))
             for cpu in sorted(os.sched_getaffinity(0))]
    rates = []
    for p in loops:
        out, _ = p.communicate(timeout=30)
        rates.append(json.loads(out)["blocks_per_s"] if p.returncode == 0 else None)
    return None if None in rates else tuple(rates)


# Every run's (before, after) machine speed in this bench, for the summary (speed_md).
SPEEDS = []


def interleaved(rounds, variants, tag):
    """pairs.run_interleaved with the machine speed probe, its progress logged under tag."""
    res = pairs.run_interleaved(rounds, variants, log=lambda m: log(f"[{tag}] {m}"),
                                probe=machine_speed)
    for runs in res.speeds.values():
        SPEEDS.extend(runs)
    return res


def speed_md():
    """How the ratios leave out what an unsteady machine measured, and how steady it was."""
    probes = [p for run in SPEEDS for p in run if p is not None]
    if not probes:
        return "No machine speed probe ran."
    per_cpu = ", ".join(f"CPU {i} {pairs.fmt(pairs.summary(list(r)), 0)}"
                        for i, r in enumerate(zip(*probes)))
    unsteady = sum(1 for run in SPEEDS if not pairs.steady_speeds(run))
    return (f"Ratios of whole runs come only from pairs whose runs saw one machine speed: "
            f"`netio-busy-loop` runs {PROBE_S * 1000:.0f} ms on each CPU at once before and "
            f"after every run (no tracer loaded), and a pair is left out (counted in its cell "
            f"as \"unsteady left out\") when any of those rates on a CPU is below "
            f"{1 - pairs.STEADY_TOLERANCE:.0%} of that CPU's fastest (section 1w pairs "
            f"adjacent windows of one run instead, and leaves none out). Busy loop blocks/s in "
            f"this bench: {per_cpu}; {unsteady} of {len(SPEEDS)} runs saw the speed change "
            f"between their start and end.")


def _per_gb(cpu_s, nbytes):
    return cpu_s / (nbytes / 1e9) if nbytes else None


def _fmt_run(r):
    cpu = r.get("cpu_s_per_gb")
    cpu = f", {cpu:.3f} CPU s/GB" if cpu is not None else ""
    return f"{r['recv_gbps']:.2f} Gbit/s (retrans {r['retrans']}, {r['cc']}{cpu})"


def _col(runs, key):
    return [r.get(key) for r in runs]


def _ratio(res, a, b, key="recv_gbps"):
    """summary of the paired ratios a/b within each round where the machine kept its speed
    (pairs.Rounds.steady)."""
    return pairs.ratio_summary(_col(res[a], key), _col(res[b], key), res.steady(a, b))


def _exact(runs, key):
    """How many runs counted exactly the workloads' send calls (server `send_calls` plus one
    index send per client connection): the observer really did the counting."""
    ok = sum(1 for r in runs if r.get(key) == r.get("expected_sends"))
    return f"{ok}/{len(runs)}"


def _median_index(values):
    """Index of the element nearest the median (for picking a representative run)."""
    vals = [(v, i) for i, v in enumerate(values) if v is not None]
    if not vals:
        return None
    vals.sort()
    return vals[(len(vals) - 1) // 2][1]


def _has(fr, *prefixes):
    return any(x.startswith(prefixes) for x in fr)


# What a traced run's samples show of the tracer's cost (first match wins). Samples are on
# cpu-clock here: time with interrupts off lands elsewhere (docs/DESIGN.md), so these are lower
# bounds.
COST_CLASSES = [
    ("in BPF run-time stats clock reads (`sched_clock` under `bpf_trace_run*`)",
     lambda fr: _has(fr, "bpf_trace_run") and any("sched_clock" in x for x in fr)),
    ("in our BPF programs and their dispatch (`bpf_trace_run*`, `bpf_prog_*`)",
     lambda fr: _has(fr, "bpf_trace_run", "bpf_prog_", "__bpf_prog", "__bpf_trace")),
    ("in the syscall tracepoint slow path outside BPF (`syscall_trace_enter`, "
     "`syscall_exit_work`)",
     lambda fr: _has(fr, "syscall_trace_enter", "syscall_exit_work")),
    ("in perf event scheduling (`perf_event_*sched*`, `ctx_sched_*`)",
     lambda fr: any("perf_event" in x and "sched" in x for x in fr) or _has(fr, "ctx_sched_")),
]


def profile_miss(name, res, key_traced, key_ref, what):
    """A target was missed: keep the folded stacks of the traced run whose ratio is the median
    one beside the results, render its flame graph, and say where the time went."""
    from report import flamegraph
    traced, ref = res[key_traced], res[key_ref]
    ratios = [t["recv_gbps"] / r["recv_gbps"] if r["recv_gbps"] and k else None
              for t, r, k in zip(traced, ref, res.steady(key_traced, key_ref))]
    i = _median_index(ratios)
    if i is None or not traced[i].get("folded") or not os.path.exists(traced[i]["folded"]):
        return [f"- {what}: no profile (the traced run kept no stacks)"]
    os.makedirs(PROFILES, exist_ok=True)
    folded = os.path.join(PROFILES, name + ".folded")
    shutil.copyfile(traced[i]["folded"], folded)
    svg = os.path.join(PROFILES, name + ".svg")
    try:
        flamegraph.render(folded, svg, f"{what}: traced run (ratio {ratios[i]:.3f})",
                          subtitle="cpu-clock samples of the workloads and their softirqs")
        svg_note = f"[{os.path.basename(svg)}](profiles/{os.path.basename(svg)})"
    except Exception as e:   # the folded file stands without its picture
        svg_note = f"(flame graph not rendered: {e})"
    total = 0
    frames, classes = {}, {name: 0 for name, _ in COST_CLASSES}
    with open(folded) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            try:
                n = int(float(n))
            except ValueError:
                continue
            total += n
            fr = stack.split(";")
            for cname, match in COST_CLASSES:
                if match(fr):
                    classes[cname] += n
                    break
            if fr:
                frames[fr[-1]] = frames.get(fr[-1], 0) + n
    progs = traced[i].get("bpf_programs") or {}
    top_progs = sorted(progs.items(), key=lambda kv: -kv[1])[:4]
    msgs = traced[i].get("messages") or 1
    top_leaf = sorted(frames.items(), key=lambda kv: -kv[1])[:5]
    lines = [f"- {what}: profile of the traced run with the median ratio "
             f"({ratios[i]:.3f}): [{os.path.basename(folded)}](profiles/{os.path.basename(folded)}),"
             f" {svg_note}. Of its {total} samples: "
             + "; ".join(f"{v / max(total, 1) * 100:.1f}% {k}" for k, v in classes.items())
             + ". Our BPF programs took "
             f"{traced[i].get('bpf_ns_per_msg') or 0:.0f} ns per message, "
             f"{(traced[i].get('bpf_cpu_share') or 0) * 100:.1f}% of the workloads' CPU; the "
             "costliest: " + ", ".join(f"{k} {v / msgs:.0f} ns/msg" for k, v in top_progs)
             + ". Hottest leaf frames: "
             + ", ".join(f"`{k}` {v / max(total, 1) * 100:.1f}%" for k, v in top_leaf) + "."]
    return lines


# ---- section 1 and 2: tracer overhead, and bpftrace doing the same counting -----------------
# the variants of section 1's "where the cost goes" table, fewest parts first
DECOMPOSITION = ("sampling", "xmit-receive", "counting", "programs", "no-sample", "full",
                 "sampled-16", "tick", "bpftrace-timer")
# the strategies whose cost is taken apart: one-copy (issues 3 and 4's headline) and zero-copy
# (the tracer's worst case)
DECOMPOSED = ("one-copy", "zero-copy")

# The programs by part, for the experiments' NETIO_TRACER_SKIP (docs/tracer.md): the syscall
# hooks (per-call latency), the socket-layer events (bytes and calls per process, the end of a
# traced call), the rest (xmit and receive per skb, socket state). A variant that leaves some
# out checks in every run what attached, so a new program cannot slip into it.
SYSCALL_HOOKS = "sc_enter,sc_exit,sc_enter_raw,sc_exit_raw"
SOCKET_EVENTS = "tp_send_length,tp_recv_length"
SKB_EVENTS = "tp_xmit,tp_sock_state,tp_netif_receive,tp_tcp_probe,tp_kfree_skb"

# Issue 4 asks what sampling at 999 Hz keeps of untraced throughput. The tracer refuses to run
# with no probe point, so "sampling alone" keeps its cheapest one: rx_copy on
# skb_copy_datagram_iovec (a per-skb count on the receiver, which is not the bottleneck).
SAMPLING_ALONE_SKIP = ",".join((SYSCALL_HOOKS, SOCKET_EVENTS, SKB_EVENTS))
SAMPLING_ALONE_ATTACHED = {"rx_copy", "stacks"}


def timer_source():
    """The sampler with a timer of its own: cycles where a PMU exists, else cpu-clock (the
    default, auto, samples on the tick where there is no PMU)."""
    from netio_trace.system.machine import has_pmu
    return "cycles" if has_pmu() else "cpu-clock"


def sampling_alone(source=None):
    """source: a --sample-source, or None for the tracer's default."""
    args = ["--no-counters"] + (["--sample-source", source] if source else [])
    return OurTracer(args, label=f"sampling-{source}" if source else "sampling",
                     env={"NETIO_TRACER_SKIP": SAMPLING_ALONE_SKIP},
                     expect_attached=SAMPLING_ALONE_ATTACHED)


# the samplers of the timer floor, and what the table calls them
TIMER_FLOOR = (("bpftrace-timer", "bpftrace `profile:hz:999` counting only (a cpu-clock event "
                "per CPU, for every task)"),
               ("sampling", "ours, sampling alone at 999 Hz on a timer of its own (cycles where "
                "a PMU exists, else cpu-clock)"),
               ("tick", "ours, sampling alone on the tick (`--sample-source tick`)"))


def timer_floor(b):
    """What a sampling interrupt costs on this machine with no network work around it: a busy
    loop under samplers that do little but take their interrupt. Markdown lines."""
    dur, rounds = b.args.duration, b.args.rounds
    variants = [("untraced", lambda: b.busy_loop(dur, Untraced())),
                ("bpftrace-timer", lambda: b.busy_loop(dur, BpftraceTimer())),
                ("sampling", lambda: b.busy_loop(dur, sampling_alone(timer_source()))),
                ("tick", lambda: b.busy_loop(dur, sampling_alone("tick")))]
    res = interleaved(rounds, variants, "timer floor")
    rows = []
    for v, what in TIMER_FLOOR:
        ratio = _ratio(res, v, "untraced", "blocks_per_s")
        if v == "bpftrace-timer":
            b.record("issue 4 floor: busy loop under a 999 Hz timer that only counts "
                     "(bpftrace), / untraced", "busy loop", ratio, TARGET_SAMPLING)
        elif v == "sampling":
            b.record("issue 4 floor: busy loop under our sampling alone at 999 Hz "
                     "(default source), / untraced", "busy loop", ratio, TARGET_SAMPLING)
        rates, costs = [], []
        for run, base in zip(res[v], res["untraced"]):
            # samples per second on the loop's CPU: ours counted them; bpftrace's count
            # covers every CPU, so its nominal rate stands in
            rate = 999.0 if v == "bpftrace-timer" else (run.get("samples") or 0) / dur
            rates.append(rate)
            if rate and v != "tick":    # the untraced loop takes the tick too: nothing to split
                costs.append((1 - run["blocks_per_s"] / base["blocks_per_s"]) * 1e6 / rate)
        rows.append(f"| {what} | {pairs.fmt(pairs.summary(_col(res[v], 'blocks_per_s')), 0)} | "
                    f"**{pairs.fmt(ratio, 3)}** | {verdict(ratio, TARGET_SAMPLING)} | "
                    f"{pairs.fmt(pairs.summary(rates), 0)} | "
                    f"{pairs.fmt(pairs.summary(costs), 1)} |")
    return [
        f"**Timer floor** (issue 4): what a sampling interrupt costs here with no network work "
        f"around it. `netio-busy-loop` (bench/busy_loop.c: computation only, no syscalls, in "
        f"the workloads' cgroup) runs {dur:g} s under each sampler, {rounds} interleaved "
        "rounds; ratio = the loop's blocks per second / untraced. Cost per sample = the "
        "loop's lost share ÷ samples per second on its CPU (ours: the samples it took; "
        "bpftrace: 999, nominal), an estimate; not given for the tick, which interrupts the "
        "untraced loop too (its program's own cost is below the noise). Untraced: "
        f"{pairs.fmt(pairs.summary(_col(res['untraced'], 'blocks_per_s')), 0)} blocks/s.",
        "",
        f"| sampler | busy loop blocks/s | **/ untraced** | ≥ {TARGET_SAMPLING} | "
        "samples/s on the loop | µs per sample (est.) |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _programs(label, skip=(), attached=None):
    """The tracer's BPF programs with no sampling or counters, those named in skip left out."""
    return OurTracer(["--no-sample", "--no-counters"], label=label,
                     env={"NETIO_TRACER_SKIP": ",".join(skip)} if skip else None,
                     expect_attached=attached)


def counting_only():
    """The tracer's BPF programs alone: copy accounting and syscall histograms."""
    return _programs("programs")


# The counting level (issue 15): bytes and copies per process, no latency (no syscall hook), no
# sampling, no counters.
COUNTING_ARGS = ("--no-latency", "--no-sample", "--no-counters")


def counting_level():
    """The counting level's tracer."""
    return OurTracer(list(COUNTING_ARGS), label="counting",
                     expect_attached={"tx_bytes", "rx_copy", "pinning", "fallback_copy"})


def programs_on_skbs_only():
    """The per-skb programs only (xmit, receive, and rx_copy on skb_copy_datagram_iovec once
    sock_recv_length is left out): neither syscall hooks nor socket-layer events."""
    return _programs("xmit-receive", (SYSCALL_HOOKS, SOCKET_EVENTS),
                     {"rx_copy", "pinning", "fallback_copy"})


def _sources(every, variant):
    """'tick at 250 Hz' etc.: the sampling source and rate the tracer reported in the runs of
    one variant."""
    seen = sorted({f"{r.get('sample_source')} at {r.get('sample_freq'):g} Hz"
                   if r.get("sample_freq") else str(r.get("sample_source"))
                   for _, res in every for r in res.get(variant, [])})
    return ", ".join(seen) or "n/a"


OVERHEAD_STRATEGIES = ("two-copy", "one-copy", "zero-copy")
OVERHEAD_SIZES = (16 * KiB, 64 * KiB)
HEADLINE_CASE = ("loopback", "one-copy", 16 * KiB)

# One configuration of section 1 and what its interleaved rounds gave: {variant: [Run]}.
OverheadCase = collections.namedtuple("OverheadCase", "transport strategy size tag res")


def section_overhead(b):
    """Full tracer / untraced and bpftrace / untraced, interleaved in the same rounds:
    measured, judged against the targets, then written up (sections 1 and 2)."""
    cases = _measure_overhead(b)
    misses = []
    for c in cases:
        misses += _overhead_verdicts(b, c)
        if c.strategy == "one-copy":
            misses += _sampling_verdicts(b, c)
    floor = timer_floor(b)
    return _overhead_markdown(b, cases, misses, floor)


# ---- section 1, measuring ------------------------------------------------------------------
def _overhead_variants(b, topo, strategy, size):
    """The section's variants of one configuration: (name, a function running it once)."""
    def mk(obs_factory):
        return lambda: b.netio(topo, strategy, size, 1, b.args.duration, obs_factory())
    variants = [("untraced", mk(Untraced)),
                ("full", mk(OurTracer)),
                ("bpftrace", mk(Bpftrace)),
                # ours doing what bpftrace does (section 2), and more: copy
                # accounting and syscall histograms, no sampling or counters
                ("programs", mk(counting_only))]
    variants.append(("counting", mk(counting_level)))
    if strategy in DECOMPOSED:   # where the cost goes (issues 3 and 4)
        variants.append(("xmit-receive", mk(programs_on_skbs_only)))
        variants.append(("no-sample",
                         mk(lambda: OurTracer(["--no-sample"], label="no-sample"))))
        variants.append(("sampling", mk(sampling_alone)))
        # a peer's sampler that does nothing but take its 999 Hz interrupt
        variants.append(("bpftrace-timer", mk(BpftraceTimer)))
        # the cheaper source in a VM: the scheduler tick
        variants.append(("tick", mk(lambda: OurTracer(
            ["--sample-source", "tick"], label="tick"))))
        # latency timed for 1 call in 16 (issue 15): what the clock reads cost
        variants.append(("sampled-16", mk(lambda: OurTracer(
            ["--latency-sample", "16"], label="sampled-16"))))
    return variants


def config_tag(transport, strategy, size):
    return f"{transport} {strategy} {size_name(size)}"


def each_overhead_config(b, fn):
    """[fn(topo, transport, strategy, size, tag)] for every configuration of sections 1 and
    1w, in run order, each inside its transport's namespaces."""
    out = []
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for strategy in OVERHEAD_STRATEGIES:
                for size in OVERHEAD_SIZES:
                    out.append(fn(topo, transport, strategy, size,
                                  config_tag(transport, strategy, size)))
    return out


def _measure_overhead(b):
    """Every configuration's variants in interleaved rounds: [OverheadCase], in run order."""
    def measure(topo, transport, strategy, size, tag):
        # one-copy carries the small effects (sampling, the parts of the tracer): more
        # rounds for a steadier median
        n = (max(b.args.rounds, b.args.one_copy_rounds) if strategy == "one-copy"
             else b.args.rounds)
        res = interleaved(n, _overhead_variants(b, topo, strategy, size), tag)
        return OverheadCase(transport, strategy, size, tag, res)
    return each_overhead_config(b, measure)


# ---- sections 1 and 2, verdicts ------------------------------------------------------------
def _below(s, target):
    """A median under target: its profile is kept. None (nothing measured, or every pair left
    out as unsteady) has no run to profile."""
    return s["median"] is not None and s["median"] < target


def _overhead_verdicts(b, c):
    """Records one configuration's overhead and peer verdicts; the profiles of the targets it
    missed (Markdown lines)."""
    res, tag = c.res, c.tag
    full = _ratio(res, "full", "untraced")
    b.record("1. tracer overhead, full / untraced", tag, full, TARGET_OVERHEAD)
    b.record("1a. counting level (--no-latency --no-sample) / untraced", tag,
             _ratio(res, "counting", "untraced"), TARGET_COUNTING)
    if (c.transport, c.strategy, c.size) == HEADLINE_CASE:
        b.record("1b. headline one-copy 16K loopback, full / untraced", tag,
                 full, TARGET_OVERHEAD_HEADLINE)
        b.record("1b. headline one-copy 16K loopback, counting / untraced",
                 tag, _ratio(res, "counting", "untraced"),
                 TARGET_COUNTING_HEADLINE)
    # ours against the peer: paired within each round, as every comparison
    full_vs_peer = _ratio(res, "full", "bpftrace")
    b.record("2. ours full / bpftrace, paired", tag, full_vs_peer, TARGET_PEER)
    b.record("2. ours counting only (no sampling, no counters) / bpftrace, paired",
             tag, _ratio(res, "programs", "bpftrace"), TARGET_PEER)
    name = f"overhead-{c.transport}-{c.strategy}-{c.size // KiB}k"
    if _below(full, TARGET_OVERHEAD):
        return profile_miss(name, res, "full", "untraced",
                            f"{tag}: full/untraced {pairs.fmt(full, 3)} "
                            f"< {TARGET_OVERHEAD}")
    if _below(full_vs_peer, TARGET_PEER):
        return profile_miss(name, res, "full", "untraced",
                            f"{tag}: ours / bpftrace "
                            f"{pairs.fmt(full_vs_peer, 3)} < {TARGET_PEER:g}")
    return []


def _sampling_verdicts(b, c):
    """Records what sampling costs in a one-copy configuration (issue 4, and issue 3's
    headline); the profile if it missed (Markdown lines)."""
    res, tag = c.res, c.tag
    b.record("issue 4: sampling alone at 999 Hz (default source) / untraced",
             tag, _ratio(res, "sampling", "untraced"), TARGET_SAMPLING)
    sampling = _ratio(res, "full", "no-sample")
    b.record("issue 4: sampling at 999 Hz (default source), full / no-sample",
             tag, sampling, TARGET_SAMPLING)
    b.record("sampling on the tick (--sample-source tick), / no-sample", tag,
             _ratio(res, "tick", "no-sample"), TARGET_SAMPLING)
    misses = []
    if _below(sampling, TARGET_SAMPLING):
        misses = profile_miss(f"sampling-{c.transport}-{c.size // KiB}k", res,
                              "full", "no-sample",
                              f"{tag}: sampling (full/no-sample) "
                              f"{pairs.fmt(sampling, 3)} "
                              f"< {TARGET_SAMPLING}")
    if c.transport == "loopback" and c.size == 16 * KiB:
        b.record("issue 3 headline: one-copy 16 KiB loopback, full / untraced",
                 tag, _ratio(res, "full", "untraced"), TARGET_HEADLINE)
    return misses


# ---- sections 1 and 2, Markdown ------------------------------------------------------------
def _overhead_markdown(b, cases, misses, floor):
    every = [(c.tag, c.res) for c in cases]
    parts = [c for c in cases if c.strategy in DECOMPOSED]
    lines = [*_md_overhead_table(b, cases, every), "",
             *_md_headline(cases), "",
             *_md_sampling(every, parts), "",
             *floor, "",
             *_md_decomposition(parts), "",
             *_md_self_cost(cases, every), "",
             *_md_peer(cases), ""]
    if misses:
        lines += ["### Missed targets: profiles", "", *misses, ""]
    lines += ["Every run, in round order (receiver Gbit/s):", ""]
    for tag, res in every:
        lines.append(f"- {tag}: " + "; ".join(
            f"{name} [" + ", ".join(f"{r['recv_gbps']:.2f}" for r in runs) + "]"
            for name, runs in res.items()))
    return "\n".join(lines) + "\n"


def _md_overhead_table(b, cases, every):
    dur, rounds = b.args.duration, b.args.rounds
    return [
        "## 1. Tracer overhead",
        "",
        f"Receiver throughput (netio-client, first byte to EOF), 1 thread, cubic, {dur:g} s per "
        f"run, {rounds} interleaved rounds per configuration ({max(rounds, b.args.one_copy_rounds)} "
        "for one-copy, whose comparisons below measure effects of a few percent). Each round "
        "runs every variant "
        "once, the order reversed every other round; ratios are taken within a round, from "
        "the rounds where the machine kept its speed (Targets at a glance), and summarized "
        "as median (min, max).",
        "",
        "- **untraced**: no BPF program of ours is loaded.",
        "- **full**: `netio-tracer --control --freq 999` (copy accounting, syscall histograms, "
        f"stack sampling on its default source ({_sources(every, 'full')} in these runs), "
        "perf counters, BPF run-time stats sampled 10% of the time, "
        "its default), **loaded and attached for each traced run and unloaded after it**: loading "
        "happens before the workloads are released from their launch gate, so its cost is not "
        "inside their measured time, while the untraced baseline really has none of our programs "
        "attached. (Keeping one tracer loaded and toggling `pid add` would leave its "
        "`sys_enter`/`sys_exit`, xmit and receive programs running, filtered out, in the "
        "baseline too, and so hide part of the cost.)",
        "- **programs** (every configuration): `--no-sample --no-counters`, the BPF programs "
        "alone (copy accounting and syscall histograms): section 2 compares it with bpftrace.",
        "- **no-sample** (one-copy and zero-copy): the same with `--no-sample`; full / "
        "no-sample is what sampling at 999 Hz costs on top of everything else.",
        "- **sampling** (one-copy and zero-copy): stack sampling alone, at 999 Hz on the "
        "default source, no counters, and of the probe points only rx_copy (the tracer needs "
        "one; a count per "
        "skb on the receiver): every other program left out with `NETIO_TRACER_SKIP`, checked "
        "in every run. sampling / untraced is issue 4's target as worded.",
        "- **bpftrace-timer** (one-copy and zero-copy): a peer's sampler doing nothing, bpftrace "
        "`profile:hz:999 { @n = count(); }`: a cpu-clock event at 999 Hz on every CPU; what "
        "any 999 Hz sampler pays here before it records a stack.",
        "",
        f"Target: full / untraced ≥ {TARGET_OVERHEAD} (aim {AIM_OVERHEAD}); verdicts are on the "
        "median's interval (see Targets at a glance); the aim on the median.",
        "",
        "| transport | strategy | size | untraced Gbit/s | full Gbit/s | **full / untraced** | "
        f"≥ {TARGET_OVERHEAD} |",
        "|---|---|---|---|---|---|---|",
        *[_overhead_row(c) for c in cases],
    ]


def _overhead_row(c):
    res, full = c.res, _ratio(c.res, "full", "untraced")
    aim = 'aim 0.99 met' if (full['median'] or 0) >= AIM_OVERHEAD else 'aim 0.99 not met'
    return (f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
            f"{pairs.fmt(pairs.summary(_col(res['untraced'], 'recv_gbps')))} | "
            f"{pairs.fmt(pairs.summary(_col(res['full'], 'recv_gbps')))} | "
            f"**{pairs.fmt(full, 3)}** | {verdict(full, TARGET_OVERHEAD)}"
            f" ({aim}) |")


def _md_headline(cases):
    headline = next((_ratio(c.res, "full", "untraced") for c in cases
                     if (c.transport, c.strategy, c.size) == HEADLINE_CASE), None)
    return [f"**Issue 3 headline** (one-copy 16 KiB loopback, 1 thread, ≥ {TARGET_HEADLINE}): "
            + (f"{pairs.fmt(headline, 3)}: {verdict(headline, TARGET_HEADLINE)}."
               if headline else "not run (loopback not selected).")]


def _md_sampling(every, parts):
    return [
        f"**Issue 4, sampling** (one-copy, ≥ {TARGET_SAMPLING}): what stack sampling keeps, "
        "alone against untraced and on top of the rest of the tracer, on the default source "
        f"({_sources(every, 'full')}), and with `--sample-source tick` "
        f"({_sources(every, 'tick')}: no timer of its own):",
        "",
        "| transport | size | sampling alone / untraced | verdict | "
        "full / no-sample (default source) | verdict | tick / no-sample | verdict | "
        "peer: bpftrace `profile:hz:999` counting only / untraced | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[f"| {c.transport} | {size_name(c.size)} | " + " | ".join(
            f"{pairs.fmt(r, 3)} | {verdict(r, TARGET_SAMPLING)}"
            for r in (_ratio(c.res, "sampling", "untraced"), _ratio(c.res, "full", "no-sample"),
                      _ratio(c.res, "tick", "no-sample"),
                      _ratio(c.res, "bpftrace-timer", "untraced"))) + " |"
          for c in parts if c.strategy == "one-copy"],
    ]


def _md_decomposition(parts):
    return [
        f"### Where the cost goes ({' and '.join(DECOMPOSED)})",
        "",
        "The same rounds with parts of the tracer: **sampling** = stack sampling alone (above); "
        "**xmit-receive** = the per-skb programs only (xmit, receive, and the receiver's copies "
        "counted per skb on `skb_copy_datagram_iovec`); **counting** (`--no-latency`) adds the "
        "socket-layer events (`sock_send_length`, `sock_recv_length`: bytes and calls per "
        "process), so it is the copy accounting without per-call latency; "
        "**programs** = `--no-sample --no-counters` "
        "(the BPF programs alone: copy accounting and syscall histograms, so programs / "
        "counting is what exact per-call latency costs); **no-sample** adds "
        "the perf counters; **full** adds stack sampling on the default source (one event per "
        "CPU on the workloads' cgroup, as `netio-trace run` samples: it runs only while a "
        "workload is on that CPU, so a switch between two workload threads re-arms no timer); "
        "**sampled-16** is full with `--latency-sample 16` (each thread times 1 call in 16, "
        "counts every call: full / sampled-16 is what the clock reads of exact latency cost); "
        "**tick** is full with `--sample-source tick` (samples on the scheduler tick); "
        "**bpftrace-timer** is the peer's 999 Hz sampler doing nothing. Each "
        "cell: throughput / untraced, then the workloads' CPU s/GB / untraced.",
        "",
        "| transport | strategy | size | " + " | ".join(DECOMPOSITION) + " |",
        "|---|---|---|" + "---|" * len(DECOMPOSITION),
        *[f"| {c.transport} | {c.strategy} | {size_name(c.size)} | " + " | ".join(
            f"{pairs.fmt(_ratio(c.res, v, 'untraced'), 3)}; CPU/GB "
            f"{pairs.fmt(_ratio(c.res, v, 'untraced', 'cpu_s_per_gb'), 2)}"
            for v in DECOMPOSITION) + " |"
          for c in parts],
    ]


def _md_self_cost(cases, every):
    return [
        "### The tracer's own cost, from BPF run-time stats",
        "",
        "Stats taken via: " + (", ".join(sorted({str(r.get("bpf_stats_via")) for _, res in every
                                                 for r in res["full"]})) or "n/a")
        + ". `BPF_ENABLE_STATS` is system-wide: while another process (another tracer, "
        "another engineer's test) holds it on, our programs are timed outside our sampling "
        "windows too and the scaled estimate comes out high; 'always' stats are exact but cost "
        "two clock reads per program run.",
        "",
        "Run time of all our BPF programs over the traced run (`self.bpf_ns` of the snapshot: "
        "`BPF_ENABLE_STATS`, on for 100 ms of every second and scaled, so it is an estimate), "
        "per message sent and as a share of the workloads' CPU time (user + system of "
        "netio-server and netio-client, from their rusage). Noise in throughput does not blur "
        "these. CPU s/GB of the workloads with and without the tracer beside them (less noisy "
        "than throughput: the extra CPU per GB is what the tracer costs the workloads, hooks "
        "and sampling interrupts included, which BPF run time alone does not count); tracer "
        "process CPU: user + system time of netio-tracer itself between `pid add` and the "
        "snapshot (its user-space side during the run); drops: ring-buffer drops summed over "
        "the traced runs.",
        "",
        "| transport | strategy | size | BPF ns / message | BPF % of workload CPU | "
        "CPU s/GB traced | CPU s/GB untraced | CPU/GB traced / untraced | "
        "tracer process CPU ms | drops |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[_self_cost_row(c) for c in cases],
    ]


def _self_cost_row(c):
    res, fr = c.res, c.res["full"]
    return (
        f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
        f"{pairs.fmt(pairs.summary(_col(fr, 'bpf_ns_per_msg')), 0)} | "
        f"{pairs.fmt(pairs.summary([x * 100 if x is not None else None for x in _col(fr, 'bpf_cpu_share')]), 2)} | "
        f"{pairs.fmt(pairs.summary(_col(fr, 'cpu_s_per_gb')), 3)} | "
        f"{pairs.fmt(pairs.summary(_col(res['untraced'], 'cpu_s_per_gb')), 3)} | "
        f"{pairs.fmt(_ratio(res, 'full', 'untraced', 'cpu_s_per_gb'), 2)} | "
        f"{pairs.fmt(pairs.summary([x * 1e3 if x is not None else None for x in _col(fr, 'tracer_cpu_s')]), 0)} | "
        f"{sum(x or 0 for x in _col(fr, 'drops'))} |")


def _md_peer(cases):
    return [
        "## 2. The same counting by a peer: bpftrace",
        "",
        "bpftrace 0.17 in the same rounds as section 1, with `tracepoint:syscalls:sys_enter_*` / "
        f"`sys_exit_*` for {', '.join(SYSCALLS)}, filtered by the same two pids (server, "
        "client): a count per pid and syscall, bytes from return values, and a log2 latency "
        "histogram per syscall (the script is `BPFTRACE_SCRIPT` in bench/run.py). The last "
        "column checks that both counted every send call of the workloads. bpftrace does less "
        "than our full tracer (no copy accounting, sampling or counters), so ours is shown "
        "twice: **full**, and **counting only** (`--no-sample --no-counters`: the same "
        "syscalls counted and timed into histograms, plus the copy accounting bpftrace does "
        "not do), which is the like-for-like comparison. Target: ours / bpftrace ≥ "
        f"{TARGET_PEER:g}, the two throughputs of each round paired (as every comparison here: "
        "a round's runs share the machine's state), verdict on the median.",
        "",
        "| transport | strategy | size | ours full / untraced | bpftrace / untraced | "
        f"**full / bpftrace** | ≥ {TARGET_PEER:g} | ours counting only / untraced | "
        f"**counting only / bpftrace** | ≥ {TARGET_PEER:g} "
        "| send calls counted exactly: bpftrace / ours |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *[_peer_row(c) for c in cases],
    ]


def _peer_row(c):
    res = c.res
    full, peer = _ratio(res, "full", "untraced"), _ratio(res, "bpftrace", "untraced")
    full_vs_peer = _ratio(res, "full", "bpftrace")
    counting = _ratio(res, "programs", "untraced")
    counting_vs_peer = _ratio(res, "programs", "bpftrace")
    return (f"| {c.transport} | {c.strategy} | {size_name(c.size)} | "
            f"{pairs.fmt(full, 3)} | {pairs.fmt(peer, 3)} | "
            f"**{pairs.fmt(full_vs_peer, 3)}** | "
            f"{verdict(full_vs_peer, TARGET_PEER)} | "
            f"{pairs.fmt(counting, 3)} | "
            f"**{pairs.fmt(counting_vs_peer, 3)}** | "
            f"{verdict(counting_vs_peer, TARGET_PEER)} | "
            f"{_exact(res['bpftrace'], 'bt_send_calls')} / {_exact(res['full'], 'sc_send_calls')} |")


# ---- section 3: our workloads beside iperf3 ------------------------------------------------
def section_iperf3(b):
    """Our one-copy and two-copy beside iperf3 -l SIZE -C cubic, 1 thread/stream."""
    sizes, dur, rounds = (4 * KiB, 16 * KiB, 64 * KiB), b.args.iperf3_duration, b.args.rounds
    strategies = ("one-copy", "two-copy")
    lines = [
        "## 3. Workloads beside iperf3",
        "",
        f"4, 16 and 64 KiB messages (iperf3 `-l`), 1 thread/stream (`-P 1`), cubic on both "
        f"(`-C cubic`), {dur:g} s per run, {rounds} rounds per size. Each round runs one-copy, "
        "iperf3, two-copy (reversed every other round), so iperf3 is always next to both. "
        "Throughput is the receiver's (netio-client: first byte to EOF; iperf3: "
        "`sum_received`); the ratio is ours / iperf3 within a round: median (min, max). "
        "CPU s/GB: user + system time of sender and receiver per GB received (lower is better). "
        "Both senders write one message per call and both receivers read up to 64 KiB per "
        "call (iperf3 reads `-l` bytes per call: smaller reads at 4 and 16 KiB). two-copy "
        "makes one more user-space copy per message by design (its serialization memcpy), so it "
        f"should sit a little below one-copy. Target ≥ {TARGET_IPERF3}.",
        "",
        "| transport | size | strategy | ours Gbit/s | iperf3 Gbit/s | **ours / iperf3** | "
        f"≥ {TARGET_IPERF3} | CPU s/GB ours | CPU s/GB iperf3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    data, misses = [], []
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for size in sizes:
                variants = [
                    ("one-copy", lambda t=topo, s=size: b.netio(t, "one-copy", s, 1, dur)),
                    ("iperf3", lambda t=topo, s=size: b.iperf3(t, s, dur)),
                    ("two-copy", lambda t=topo, s=size: b.netio(t, "two-copy", s, 1, dur)),
                ]
                tag = f"{transport} {size_name(size)}"
                res = interleaved(rounds, variants, tag)
                data.append((tag, res))
                for st in strategies:
                    ratio = _ratio(res, st, "iperf3")
                    b.record("3. ours / iperf3", f"{tag} {st}", ratio, TARGET_IPERF3)
                    v = verdict(ratio, TARGET_IPERF3)
                    if ratio["median"] is not None and ratio["median"] < TARGET_IPERF3:
                        misses.append(f"- {tag} {st}: {pairs.fmt(ratio)} (the untraced "
                                      "workload has no profile of its own here; see the note "
                                      "below)")
                    lines.append(
                        f"| {transport} | {size_name(size)} | {st} | "
                        f"{pairs.fmt(pairs.summary(_col(res[st], 'recv_gbps')))} | "
                        f"{pairs.fmt(pairs.summary(_col(res['iperf3'], 'recv_gbps')))} | "
                        f"**{pairs.fmt(ratio)}** | {v} | "
                        f"{pairs.fmt(pairs.summary(_col(res[st], 'cpu_s_per_gb')), 3)} | "
                        f"{pairs.fmt(pairs.summary(_col(res['iperf3'], 'cpu_s_per_gb')), 3)} |")
    if misses:
        lines += ["", "Below target (median):", "", *misses]
    lines += ["", "Every run, in round order (receiver Gbit/s, sender retransmits, congestion "
              "control, CPU s/GB):", ""]
    for tag, res in data:
        for name, runs in res.items():
            lines.append(f"- {tag} {name}: " + "; ".join(_fmt_run(r) for r in runs))
    return "\n".join(lines) + "\n"


# ---- section 4: scale -------------------------------------------------------------------
SCALE_THREADS = (1, 2, 4, 8, 32, 128)
SCALE_SIZE = 16 * KiB
SCALE_SMALL = 8     # bytes: the most events per second


def section_scale(b):
    """Throughput and overhead from 1 to 128 threads; memory at 128; events/s at 8 B."""
    transport = "loopback" if "loopback" in b.args.transports else "veth"
    with Topology(transport) as topo:
        rows, mem, misses = _scale_threads(b, topo)
        res8 = _scale_small(b, topo)
    lines = [*_md_scale_table(b, transport, rows), ""]
    if mem:
        lines += [_md_scale_memory(mem), ""]
    lines += [_md_scale_events(b, transport, res8), ""]
    if misses:
        lines += ["### Missed targets: profiles", "", *misses, ""]
    return "\n".join(lines) + "\n"


def _scale_threads(b, topo):
    """One-copy at 1 .. 128 threads, untraced / full / tick in interleaved rounds: the table's
    rows, the full tracer's runs at 128 threads (for its memory), the profiles of misses."""
    dur, rounds, size = b.args.scale_duration, b.args.rounds, SCALE_SIZE
    rows, mem, misses = [], None, []
    for n in SCALE_THREADS:
        variants = [("untraced", lambda t=topo, n=n: b.netio(t, "one-copy", size, n, dur)),
                    ("full", lambda t=topo, n=n: b.netio(
                        t, "one-copy", size, n, dur, OurTracer(memory=(n == 128)))),
                    ("tick", lambda t=topo, n=n: b.netio(
                        t, "one-copy", size, n, dur,
                        OurTracer(["--sample-source", "tick"], label="tick")))]
        res = interleaved(rounds, variants, f"scale {n} threads")
        full = _ratio(res, "full", "untraced")
        tick = _ratio(res, "tick", "untraced")
        b.record("4. scale: full / untraced", f"{n} threads", full, TARGET_OVERHEAD)
        b.record("4. scale with --sample-source tick: / untraced", f"{n} threads", tick,
                 TARGET_OVERHEAD)
        rows.append(f"| {n} | {pairs.fmt(pairs.summary(_col(res['untraced'], 'recv_gbps')))} | "
                    f"{pairs.fmt(pairs.summary(_col(res['full'], 'recv_gbps')))} | "
                    f"**{pairs.fmt(full, 3)}** | {verdict(full, TARGET_OVERHEAD)} | "
                    f"{pairs.fmt(tick, 3)} | "
                    f"{pairs.fmt(pairs.summary(_col(res['full'], 'bpf_ns_per_msg')), 0)} | "
                    f"{sum(x or 0 for x in _col(res['full'], 'drops'))} |")
        if _below(full, TARGET_OVERHEAD):
            misses += profile_miss(f"scale-{topo.transport}-{n}threads", res, "full",
                                   "untraced", f"{n} threads: full/untraced "
                                   f"{pairs.fmt(full, 3)} < {TARGET_OVERHEAD}")
        if n == 128:
            mem = res["full"]
    return rows, mem, misses


def _scale_small(b, topo):
    """Events per second at the smallest message size, untraced / full in pairs too."""
    dur8 = b.args.duration
    return interleaved(b.args.rounds, [
        ("untraced", lambda t=topo: b.netio(t, "one-copy", SCALE_SMALL, 1, dur8)),
        ("full", lambda t=topo: b.netio(t, "one-copy", SCALE_SMALL, 1, dur8, OurTracer()))],
        "scale 8 B")


def _md_scale_table(b, transport, rows):
    return [
        "## 4. Scale",
        "",
        f"one-copy {size_name(SCALE_SIZE)} over {transport}, N threads = N connections, "
        f"{b.args.scale_duration:g} s per "
        f"run, {b.args.rounds} interleaved rounds of untraced / full tracer / full tracer with "
        "`--sample-source tick` (loaded per traced run, as in section 1). Throughput is the "
        "receiver's total.",
        "",
        "| threads | untraced Gbit/s | full Gbit/s | **full / untraced** | "
        f"≥ {TARGET_OVERHEAD} | tick / untraced | BPF ns / message | drops |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def _md_scale_memory(mem):
    m0 = mem[_median_index(_col(mem, "rss_kib")) or 0]
    return (
        "**Tracer memory at 128 threads** (each traced 128-thread run, read after the run "
        "and before the snapshot; peak = VmHWM after the snapshot, which symbolizes stacks): "
        f"RSS {pairs.fmt(pairs.summary([x / 1024 if x else None for x in _col(mem, 'rss_kib')]), 1)} MiB, "
        f"peak {pairs.fmt(pairs.summary([x / 1024 if x else None for x in _col(mem, 'hwm_kib')]), 1)} MiB; "
        f"BPF maps: {m0.get('maps')} maps held by the tracer, "
        f"{m0.get('map_bytes', 0) / 2**20:.1f} MiB (`bytes_memlock` of `bpftool map show "
        "--json` for the map ids in the tracer's fdinfo); biggest: "
        + ", ".join(f"{n} {v / 2**20:.2f} MiB" for n, v in m0.get("biggest_maps", [])) + ".")


def _md_scale_events(b, transport, res8):
    ev = res8["full"]
    ratio8 = _ratio(res8, "full", "untraced")
    exact = all(r["sc_send_calls"] == r["expected_sends"] for r in ev)
    evs = [r["sc_calls"] / r["seconds"] for r in ev]
    return (
        f"**Events per second at the smallest message size** (one-copy 8 B, 1 thread, "
        f"{transport}, {b.args.duration:g} s runs, {b.args.rounds} traced runs in pairs with "
        "untraced ones): the tracer counted "
        f"{pairs.fmt(pairs.summary([x / 1e6 for x in evs]), 2)} M syscalls/s of the workloads "
        f"(every one into its histograms; the packets' xmit/receive events come on top), with "
        f"{sum(r.get('drops') or 0 for r in ev)} ring-buffer drops and "
        f"{sum(r.get('samples_lost') or 0 for r in ev)} lost samples in all; its send count "
        f"{'equals' if exact else 'does NOT equal'} the workloads' own count in every run "
        "(server `send_calls` + one index `send` per client connection). "
        f"Overhead at 8 B: full / untraced {pairs.fmt(ratio8, 3)} "
        f"(untraced {pairs.fmt(pairs.summary(_col(res8['untraced'], 'recv_gbps')), 3)} Gbit/s), "
        f"BPF {pairs.fmt(pairs.summary(_col(ev, 'bpf_ns_per_msg')), 0)} ns per message.")


# ---- section 5: the default sweep ---------------------------------------------------------
def _sweep(b, extra):
    out = os.path.join(b.tmp, "sweep-" + str(len(os.listdir(b.tmp))))
    env = dict(os.environ, NETIO_BUILD=BUILD)
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--out", out, *extra],
                       capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"netio-trace run {' '.join(extra)}: exit {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-400:]}")
    runs = []
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return wall, runs


SWEEP_LIMIT_S = 300     # issue 13: the default sweep, both passes and the report


def section_sweep(b):
    """Wall time of `netio-trace run` (the default sweep unless FULL=0) and the spread of repeats."""
    lines = ["## 5. The sweep", ""]
    cfg = ["--strategies", "one-copy", "--sizes", "64K", "--threads", "1", "--transport", "veth",
           "--repeat", "3"]
    wall, runs = _sweep(b, cfg)
    ok = [r for r in runs if r.get("status") == "ok"]
    g = [r["throughput_gbps"] for r in ok]
    s = pairs.summary(g)
    if not g:
        raise RuntimeError(f"netio-trace run {' '.join(cfg)}: no run ok: "
                           + "; ".join(str(r.get("error")) for r in runs))
    lines += [
        f"**Spread over 3 repeats of one config** (`netio-trace run {' '.join(cfg)}`: one-copy "
        f"64 KiB, 1 thread, veth, 0.5 s per run, traced): "
        + ", ".join(f"{x:.2f}" for x in g) + f" Gbit/s; median {s['median']:.2f}, "
        f"max / min = {s['max'] / s['min']:.3f} ({len(ok)}/{len(runs)} runs ok); that sweep took "
        f"{wall:.1f} s end to end (report included).",
        "",
    ]
    if b.full:
        wall, runs = _sweep(b, [])
        ok = [r for r in runs if r.get("status") == "ok"]
        groups = {}
        for r in ok:
            groups.setdefault((r["strategy"], r["msg_size"], r["threads"], r["transport"]),
                              []).append(r["throughput_gbps"])
        spreads = [max(v) / min(v) for v in groups.values() if len(v) > 1 and min(v) > 0]
        one = groups.get(("one-copy", 65536, 1, "veth"), [])
        ss = pairs.summary(spreads)
        lines += [
            f"**Default sweep** (`./netio-trace run`, 3 strategies × 256 B–64 KiB × 1, 2, 4, 8 "
            f"threads × veth × 3 rounds × untraced and traced, 0.5 s per run, plus the extra "
            f"rounds of undecided comparisons): **{wall:.0f} s** wall time "
            f"({wall / 60:.1f} min) for {len(runs)} runs ({len(ok)} ok), report included; "
            f"target ≤ {SWEEP_LIMIT_S} s: **{'met' if wall <= SWEEP_LIMIT_S else 'missed'}**. "
            f"Spread of throughput (max / min over the 3 repeats) across its "
            f"{len(groups)} configs: {pairs.fmt(ss, 3)}; one-copy 64 KiB 1 thread veth: "
            + ", ".join(f"{x:.2f}" for x in one) + " Gbit/s.",
            "",
        ]
    else:
        lines += [
            "The default sweep (`./netio-trace run`, 360 runs, ~4 min) was not timed in this "
            "bench run: it was switched off (`make bench FULL=0`, `NETIO_BENCH_FULL=0` or "
            "`--no-full`). It is on by default: the whole bench stays within ~15 minutes "
            "with it.",
            "",
        ]
    return "\n".join(lines) + "\n"


PASSES_CFG = ["--strategies", "one-copy", "--sizes", "16K", "--threads", "1",
              "--transport", "loopback"]
DETACHED_BAND = (0.97, 1.03)     # issue 13: the loaded-but-detached tracer disturbs nothing


def _untraced_gbps(runs):
    return [r["throughput_gbps"] for r in runs
            if r.get("status") == "ok" and r.get("traced") is False]


def _detached_rounds(b, rounds):
    """Per round, a two-pass sweep's untraced runs against a --no-trace sweep's (order
    alternating): the medians' ratio."""
    ratios = []
    for i in range(rounds):
        pair = {}
        for kind in (("two-pass", "no-trace") if i % 2 == 0 else ("no-trace", "two-pass")):
            extra = PASSES_CFG + ["--repeat", "3", "--no-report"]
            _, runs = _sweep(b, extra + (["--no-trace"] if kind == "no-trace" else []))
            pair[kind] = pairs.summary(_untraced_gbps(runs))["median"]
        if pair["two-pass"] and pair["no-trace"]:
            ratios.append(pair["two-pass"] / pair["no-trace"])
    return ratios


def _steady_spread(b, sweeps):
    """Medians of 5 untraced sweeps of one configuration, whole runs and steady windows."""
    whole, steady = [], []
    for _ in range(sweeps):
        _, runs = _sweep(b, PASSES_CFG + ["--repeat", "3", "--no-trace", "--no-report"])
        ok = [r for r in runs if r.get("status") == "ok"]
        whole.append(pairs.summary([r.get("throughput_whole_gbps") for r in ok])["median"])
        steady.append(pairs.summary([r.get("throughput_gbps") for r in ok])["median"])
    return whole, steady


def _spread(values):
    vals = [v for v in values if v]
    return max(vals) / min(vals) if vals else None


def section_passes(b):
    """Issue 13: the detached tracer disturbs nothing; the steady-state window's spread."""
    lines = ["## 6. The two passes", ""]
    ratios = _detached_rounds(b, b.args.rounds)
    s = pairs.summary(ratios)
    lo, hi = DETACHED_BAND
    if not s["n"]:
        verdict = "no result"
    elif lo <= s["median"] <= hi:
        verdict = "met"
    else:       # a median outside the band, but rounds inside it: the noise decides nothing
        verdict = "missed" if s["max"] < lo or s["min"] > hi else "undecided"
    lines += [
        f"**Untraced runs inside a two-pass sweep against a `--no-trace` sweep** "
        f"(`netio-trace run {' '.join(PASSES_CFG)} --repeat 3`, the two sweeps alternating "
        f"over {b.args.rounds} rounds; per round the ratio of their untraced medians): "
        f"{pairs.fmt(s, 3)}. Target: median within {lo:.2f}–{hi:.2f} (the loaded but detached "
        f"tracer disturbs nothing): **{verdict}**.", ""]
    whole, steady = _steady_spread(b, 5)
    lines += [
        f"**Spread of one configuration's median over 5 sweeps** (one-copy 16 KiB, loopback, "
        f"untraced, 3 rounds of 0.5 s each): over whole runs "
        + ", ".join(f"{x:.2f}" for x in whole if x)
        + f" Gbit/s, max / min {_spread(whole):.3f}; over the steady-state window (the first "
        f"20% left out) " + ", ".join(f"{x:.2f}" for x in steady if x)
        + f" Gbit/s, max / min {_spread(steady):.3f}.", ""]
    return "\n".join(lines) + "\n"


# ---- section 7: where zero-copy wins (issue 16) ----------------------------------------
FORWARD_SIZES = (1 * KiB, 4 * KiB, 16 * KiB, 63 * KiB)
ZC_PAIRS = (("one-copy", "zero-copy"), ("io-uring", "io-uring-zc"))


def _first_win(sizes, ratios):
    """The smallest size from which every larger size's median ratio is >= 1, or None."""
    win = None
    for size, r in zip(sizes, ratios):
        if r["median"] is not None and r["median"] >= 1.0:
            win = size if win is None else win
        else:
            win = None
    return win


def _forward_rounds(b, topo, size, dur, rounds):
    strategies = [s for pair in ZC_PAIRS for s in pair]
    variants = [(st, lambda st=st: b.netio_forward(topo, st, size, 1, dur)) for st in strategies]
    return interleaved(rounds, variants, f"forward {size_name(size)}")


def _forward_md(b, dur, rounds, sizes):
    lines = [
        "### Zero-copy against copy on forward, by size",
        "",
        f"UDP, one datagram per message, 1 thread, {dur:g} s per run, {rounds} rounds per size, "
        "untraced; each round runs one-copy, zero-copy, io-uring, io-uring-zc (reversed every "
        "other round). Throughput is the sender's over its steady-state window; datagrams that "
        "did not reach the forwarding namespace's interface are counted as lost. The ratio is zero-copy / copy "
        "within a round: median (min, max).",
        "",
        "| size | pair | copy Gbit/s | zero-copy Gbit/s | **zero-copy / copy** | COPIED | "
        "datagrams lost |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = {pair: [] for pair in ZC_PAIRS}
    with Topology("forward") as topo:
        for size in sizes:
            res = _forward_rounds(b, topo, size, dur, rounds)
            for copy, zc in ZC_PAIRS:
                r = _ratio(res, zc, copy, key="send_gbps")
                ratios[(copy, zc)].append(r)
                comp = sum(x["completions"] for x in res[zc])
                copied = sum(x["copied"] for x in res[zc])
                lost = sum(x["messages"] - x["seen"] for st in (copy, zc) for x in res[st])
                lines.append(
                    f"| {size_name(size)} | {zc} / {copy} | "
                    f"{pairs.fmt(pairs.summary(_col(res[copy], 'send_gbps')))} | "
                    f"{pairs.fmt(pairs.summary(_col(res[zc], 'send_gbps')))} | "
                    f"**{pairs.fmt(r)}** | {copied} of {comp} | {lost} |")
    lines.append("")
    for (copy, zc), rs in ratios.items():
        win = _first_win(sizes, rs)
        lines.append(f"- {zc} overtakes {copy} on forward "
                     + (f"from {size_name(win)} up (every larger size's median ratio ≥ 1)."
                        if win is not None else "at no size from this range."))
    return lines


def _sendfile_md(b, dur, rounds):
    lines = [
        "",
        "### sendfile against iperf3 -Z",
        "",
        f"Our sendfile strategy beside iperf3 `-Z` (which sends with sendfile(2) too) at the "
        f"same size, 1 stream, cubic, {dur:g} s per run, {rounds} rounds, untraced; the ratio "
        f"is ours / iperf3 within a round (receiver's throughput). Target ≥ {TARGET_SENDFILE}.",
        "",
        "| transport | size | ours Gbit/s | iperf3 -Z Gbit/s | **ours / iperf3 -Z** | "
        f"≥ {TARGET_SENDFILE} |",
        "|---|---|---|---|---|---|",
    ]
    for transport in b.args.transports:
        with Topology(transport) as topo:
            for size in (16 * KiB, 64 * KiB):
                variants = [("sendfile", lambda t=topo, s=size: b.netio(t, "sendfile", s, 1, dur)),
                            ("iperf3 -Z", lambda t=topo, s=size: b.iperf3(t, s, dur, True))]
                res = interleaved(rounds, variants, "sendfile")
                r = _ratio(res, "sendfile", "iperf3 -Z")
                b.record("7. sendfile / iperf3 -Z", f"{transport} {size_name(size)}", r,
                         TARGET_SENDFILE)
                lines.append(f"| {transport} | {size_name(size)} | "
                             f"{pairs.fmt(pairs.summary(_col(res['sendfile'], 'recv_gbps')))} | "
                             f"{pairs.fmt(pairs.summary(_col(res['iperf3 -Z'], 'recv_gbps')))} | "
                             f"**{pairs.fmt(r)}** | {verdict(r, TARGET_SENDFILE)} |")
    return lines


def section_zerocopy(b):
    """Where zero-copy wins: zero-copy vs copy on the forward path by size, and sendfile beside
    iperf3 -Z."""
    dur, rounds = b.args.duration, b.args.rounds
    sizes = tuple(b.args.zc_sizes) if b.args.zc_sizes else FORWARD_SIZES
    lines = ["## 7. Where zero-copy wins (forward path) and sendfile", "",
             "On forward nothing receives the datagrams (the second namespace forwards them to a "
             "blackhole route), so no local delivery copies a zero-copy skb back: the one place "
             "on a single host where zero-copy can be seen to win.", ""]
    lines += _forward_md(b, dur, rounds, sizes)
    iperf_dur = max(1, int(round(dur)))
    lines += _sendfile_md(b, iperf_dur, rounds)
    return "\n".join(lines) + "\n"


# ---- section 1w: the levels' cost in windows of one run ------------------------------------
# (level, its tracer, target in every case, target at the headline case)
WINDOW_LEVELS = (("full", OurTracer, TARGET_OVERHEAD, TARGET_OVERHEAD_HEADLINE),
                 ("counting", counting_level, TARGET_COUNTING, TARGET_COUNTING_HEADLINE))
# programs: per run, the traced windows' BPF statistics ({program: (ns, runs)}, Windows.stop)
WindowCase = collections.namedtuple("WindowCase", "tag level runs speeds programs",
                                    defaults=((),))


def section_windows(b):
    """Each level / untraced in alternating windows of one run (bench/windows.py), several
    runs per configuration with the levels in turn: the same targets as section 1, measured
    where the machine's drift between runs cannot reach the pairs. A run is the unit a verdict
    counts (its windows share the run's placement of threads on the two vCPUs, which the host
    slows unequally): the verdict is on the median of the runs' medians."""
    def measure(topo, transport, strategy, size, tag):
        found = _window_runs(b, topo, (strategy, size), tag)
        for level, _, target, headline in WINDOW_LEVELS:
            s = _window_verdict_summary(found[level])
            b.record(f"1w. {level} / untraced, in windows of one run", tag, s, target)
            if (transport, strategy, size) == HEADLINE_CASE:
                b.record(f"1w. headline one-copy 16K loopback, {level} / untraced, in windows",
                         tag, s, headline)
        return [found[level] for level, *_ in WINDOW_LEVELS]
    return _md_windows(b, [c for cs in each_overhead_config(b, measure) for c in cs])


def _window_runs(b, topo, config, tag):
    """b.args.window_runs runs of config per level, the levels in turn: {level: WindowCase}."""
    strategy, size = config
    n = b.args.window_pairs
    found = {lv: WindowCase(tag, lv, [], [], []) for lv, *_ in WINDOW_LEVELS}
    for r in range(b.args.window_runs):
        for level, mk, *_ in WINDOW_LEVELS:
            before = machine_speed()
            run = b.netio(topo, strategy, size, 1, windows.run_seconds(n),
                          windows.Windows(mk(), n))
            speeds = (before, machine_speed())
            SPEEDS.append(speeds)
            found[level].runs.append(run["windows"])
            found[level].speeds.append(speeds)
            # the run's one tracer's statistics (Windows.stop keys them by tracer name)
            found[level].programs.append(next(iter(run.get("window_programs", {}).values()),
                                              {}))
            log(f"[windows {tag} {level} run {r + 1}/{b.args.window_runs}] "
                f"{pairs.fmt(windows.summary(run['windows']), 3)}")
    return found


def _run_medians(c):
    """Each run's median of traced / untraced (None for a run without a pair)."""
    return [windows.summary(w)["median"] for w in c.runs]


def _window_verdict_summary(c):
    """pairs.summary of the runs' medians."""
    return pairs.summary(_run_medians(c))


def _md_windows(b, cases):
    lines = ["## 1w. The levels' cost in windows of one run", "",
             f"{b.args.window_runs} workload runs per configuration and level (the levels in "
             f"turn), 1 thread, cubic; in each, the tracer loaded once, then attached and "
             f"detached in turn (its `attach` and `detach` commands: detached, no program of "
             f"ours is attached and no sampling event is open). After each toggle "
             f"{windows.SETTLE_S * 1000:.0f} ms pass, then the receiver's namespace's device "
             f"counters are read over a {windows.WINDOW_S * 1000:.0f} ms window. Two adjacent "
             f"windows, one in each state, form a pair (order flipped every pair); ratio = "
             f"traced / untraced throughput, {b.args.window_pairs} pairs per run. Section 1 "
             f"pairs whole runs a few seconds apart, which a host changing this VM's speed from "
             f"second to second (bench/NOTES.md) spreads; a window cannot hold what a run pays "
             f"once (loading, a thread's first events), which section 1 keeps. The runs of one "
             f"configuration differ more than their windows do (each run places the sender and "
             f"the receiver on the two vCPUs, which the host slows unequally), so the verdict "
             f"is on the median of the runs' medians (interval as in section 1: min to max "
             f"below 9 runs); the pooled pairs are shown beside it. **full** is the default "
             f"tracer (as section 1), **counting** `{' '.join(COUNTING_ARGS)}`. Machine speed: "
             f"`netio-busy-loop` blocks/s per CPU, lowest and highest probe before and after "
             f"the runs.", "",
             "| configuration | level | untraced Gbit/s | **traced / untraced, median of runs** "
             "| each run's median | verdict | all pairs pooled | machine speed |",
             "|---|---|---|---|---|---|---|---|"]
    targets = {lv: t for lv, _, t, _ in WINDOW_LEVELS}
    for c in cases:
        s = _window_verdict_summary(c)
        pooled = [p for w in c.runs for p in w]
        each = ", ".join(f"{m:.3f}" for m in _run_medians(c) if m is not None)
        lines.append(f"| {c.tag} | {c.level} | {pairs.fmt(windows.rates(pooled, False))} | "
                     f"**{pairs.fmt(s, 3)}** | {each} | {verdict(s, targets[c.level])} | "
                     f"{pairs.fmt(windows.summary(pooled), 3)} | {_speed_range(c.speeds)} |")
    missed = [c for c in cases if any(pairs.classify(_window_verdict_summary(c), t) == "missed"
                                      for t in _window_targets(c))]
    return "\n".join(lines + _md_window_misses(missed)) + "\n"


def _window_targets(c):
    """The targets a 1w case is held to: its level's, and the headline's at the headline."""
    headline = config_tag(*HEADLINE_CASE)
    return [t for lv, _, target, head in WINDOW_LEVELS if lv == c.level
            for t in ((target, head) if c.tag == headline else (target,))]


def _md_window_misses(missed):
    """Where a missed case's traced windows spent BPF time: ns per run of each program (the
    tracer's own sampled statistics, median over the runs), costliest first. The counting
    level takes no stack samples, so this is its profile."""
    if not missed:
        return []
    lines = ["", "Where the BPF time of each missed case went (traced windows, ns per program "
             "run, median over its runs; the tracer's own statistics, sampled):", ""]
    for c in missed:
        top = sorted(windows.median_ns_per_run(c.programs).items(), key=lambda kv: -kv[1])
        lines.append(f"- {c.tag}, {c.level}: "
                     + (", ".join(f"`{k}` {v:.0f}" for k, v in top) or "no statistics"))
    return lines


def _speed_range(speeds):
    """'lo–hi / lo–hi': each CPU's slowest and fastest probe over (before, after) pairs."""
    probes = [p for run in speeds for p in run if p is not None]
    if not probes:
        return "n/a"
    return " / ".join(f"{min(r):.0f}–{max(r):.0f}" for r in zip(*probes))


UNRELATED_TARGET_NAME = "8. unrelated syscalls (getpid loop), fentry rung / untraced, in the guest"


def section_unrelated(b):
    """Issue 15: a process making only syscalls the tracer does not hook keeps its rate where
    the latency hooks sit on the send and receive syscall functions (fentry), in the 6.1 guest;
    the sys_enter rung measured beside it (bench/unrelated.py)."""
    title = "## 8. Unrelated syscalls, in the 6.1 guest"
    try:
        res = unrelated.measure(BUILD, b.args.guest_rounds, b.args.guest_seconds, log=log)
    except unrelated.GuestError as e:
        log(f"unrelated: {e}")
        b.record(UNRELATED_TARGET_NAME, "not measured", {}, unrelated.TARGET)
        return f"{title}\n\nNot measured: {e}\n"
    rungs = {}
    for state in ("fentry", "sys_enter"):
        kept, left_out = unrelated.ratios(res, state)
        rungs[state] = (pairs.summary(kept), left_out,
                        pairs.summary(unrelated.normalized_ratios(res, state)))
    b.record(UNRELATED_TARGET_NAME, "6.1 guest", rungs["fentry"][0], unrelated.TARGET)
    return title + "\n\n" + _md_unrelated(res, rungs)


def _md_unrelated(res, rungs):
    """Section 8's text and table; rungs: {state: (steady pairs' summary, pairs left out,
    per-block summary)}."""
    (fentry, f_out, f_block), (sys_enter, s_out, s_block) = rungs["fentry"], rungs["sys_enter"]
    untraced = pairs.summary([r["untraced"]["calls_per_s"] / 1e3 for r in res["rounds"]])
    speed = pairs.summary([r[st]["blocks_per_s"] for r in res["rounds"] for st in r])
    return "\n".join([
        f"Guest kernel {res['kernel']} under QEMU/TCG (absolute rates mean nothing there; "
        f"ratios within one boot do). `netio-getpid-loop` makes only getpid(2) calls, which no "
        f"program of ours hooks; each of {len(res['rounds'])} rounds runs it for "
        f"{res['seconds']:g} s untraced, under the full default tracer with its latency hooks "
        f"on the syscall functions (fentry rung: {res['attach']['fentry']}) and under the "
        f"same tracer on the sys_enter rung ({res['attach']['sys_enter']}: every syscall of the "
        f"machine passes its hook), in turn, the order rotated every round, "
        f"{unrelated.SETTLE_S:g} s after each toggle; both tracers are loaded once and "
        f"attached in turn. Ratio = the round's traced rate / its untraced rate. The loop "
        f"times a block of computation after each batch of calls (`--reference`: the "
        f"machine's speed during the run); a pair whose two speeds differ by more than "
        f"{pairs.STEADY_TOLERANCE:.0%} is left out, as in the sections above. Sampling: "
        f"{res.get('samples') or 'none'}; BPF statistics off (TCG can livelock on their code "
        f"patching).", "",
        "| rung | traced / untraced | pairs left out (unsteady) | target | verdict | per "
        "reference block, every pair (estimate) |",
        "|---|---|---|---|---|---|",
        f"| fentry (the default where allowed) | {pairs.fmt(fentry, 3)} | {f_out} | ≥ "
        f"{unrelated.TARGET} | {verdict(fentry, unrelated.TARGET)} | {pairs.fmt(f_block, 3)} |",
        f"| sys_enter (beside it, to show the difference) | {pairs.fmt(sys_enter, 3)} | "
        f"{s_out} | — | — | {pairs.fmt(s_block, 3)} |",
        "", "The last column divides each run's call rate by its reference rate and keeps "
        "every pair: the host's speed divided out, an estimate (it would also divide out a "
        "cost that slowed computation as much as the calls); the verdict is on the steady "
        "pairs' plain ratios.",
        "", f"Untraced rate: {pairs.fmt(untraced)} thousand calls/s; reference blocks/s in "
        f"every run: {pairs.fmt(speed, 0)}.", ""])


SECTIONS = [
    ("overhead", section_overhead),
    ("windows", section_windows),
    ("iperf3", section_iperf3),
    ("scale", section_scale),
    ("sweep", section_sweep),
    ("passes", section_passes),
    ("zerocopy", section_zerocopy),
    ("unrelated", section_unrelated),
]


def _parse_args(argv):
    """The bench's options, checked: usage errors exit 2 before anything runs."""
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 5)")
    ap.add_argument("--one-copy-rounds", type=int, default=9,
                    help="rounds of section 1's one-copy configurations (sampling's cost and "
                         "the tracer's parts are effects of a few percent)")
    ap.add_argument("--duration", type=float, default=1.0,
                    help="seconds per run of sections 1 and 2")
    ap.add_argument("--window-runs", type=int, default=5,
                    help="runs per configuration and level in section 1w (a verdict needs 5)")
    ap.add_argument("--window-pairs", type=int, default=20,
                    help="pairs of windows per run in section 1w")
    ap.add_argument("--guest-rounds", type=int, default=25,
                    help="rounds of section 8 (unrelated syscalls in the 6.1 guest)")
    ap.add_argument("--guest-seconds", type=float, default=0.3,
                    help="seconds per getpid loop run in section 8")
    ap.add_argument("--iperf3-duration", type=int, default=1,
                    help="whole seconds per run of section 3 (iperf3 -t takes whole seconds)")
    ap.add_argument("--scale-duration", type=float, default=0.5,
                    help="seconds per run of section 4")
    ap.add_argument("--transports", nargs="+", default=["loopback", "veth"],
                    choices=["loopback", "veth"], help="transports to measure")
    ap.add_argument("--zc-sizes", type=int, nargs="+",
                    help="message sizes of section 7's forward comparison (default 1K 4K 16K 63K)")
    ap.add_argument("--only", action="append", choices=[n for n, _ in SECTIONS],
                    help="run only this section (repeatable)")
    ap.add_argument("--no-full", action="store_true",
                    help="do not time the default sweep (~3 min; also: make bench FULL=0, or "
                         "NETIO_BENCH_FULL=0)")
    ap.add_argument("--out", default=RESULTS, help="markdown file to write")
    args = ap.parse_args(argv)
    if min(args.rounds, args.window_runs, args.window_pairs, args.guest_rounds) < 1 \
            or min(args.duration, args.iperf3_duration, args.scale_duration,
                   args.guest_seconds) <= 0:
        ap.error("--rounds, --window-runs, --window-pairs, --guest-rounds and the durations "
                 "must be positive")
    if args.rounds < 5:
        log(f"note: {args.rounds} rounds; comparisons on this machine want at least 5")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, BPF)")
    for exe in ("netio-server", "netio-client", "netio-tracer", "netio-busy-loop",
                "netio-getpid-loop"):
        if not os.access(os.path.join(BUILD, exe), os.X_OK):
            ap.error(f"{BUILD}/{exe} is not built (make, or set NETIO_BUILD)")
    for tool in ("bpftrace", "bpftool", "iperf3"):
        if not shutil.which(tool):
            ap.error(f"{tool} not found (make deps)")
    return args


def _header(argv, full, start_load):
    """results.md's opening lines: the machine, the binaries and the command."""
    m = machine()
    built = time.gmtime(os.path.getmtime(os.path.join(BUILD, 'netio-tracer')))
    return ["# netio-trace bench results", "",
            f"- machine: {m['nproc']} CPUs, {m['model']}",
            f"- kernel: {m['kernel']} (system default congestion control: {m['default_cc']})",
            f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average at start: "
            f"{start_load} (other work on the machine skews every number)",
            f"- BPF programs loaded at start: {bpf_programs()} (anyone's; a tracer attached "
            "elsewhere slows every run alike)",
            f"- binaries: {BUILD} (netio-tracer built "
            f"{time.strftime('%Y-%m-%d %H:%M', built)}"
            f" UTC), source commit {_git_head()}",
            f"- command: `python -m bench.run {' '.join(argv if argv is not None else sys.argv[1:])}`"
            f"{'' if full else ' (FULL=0: default sweep not timed)'}",
            ""]


def _run_sections(b, head):
    """Each selected section in turn; the Markdown of each. After every section results.md
    holds what is finished, so an interrupted bench keeps it."""
    body = []
    try:
        for name, fn in SECTIONS:
            if b.args.only and name not in b.args.only:
                continue
            log(f"== section {name}")
            ts = time.monotonic()
            body.append(fn(b) + f"\n_section time: {time.monotonic() - ts:.0f} s_\n")
            with open(b.args.out, "w") as f:
                f.write("\n".join(head) + "\n" + "\n".join(body)
                        + "\n_partial: the bench was still running when this was written_\n")
    finally:
        b.cleanup()
    return body


def main(argv=None):
    args = _parse_args(argv)
    full = not (args.no_full or os.environ.get("FULL") == "0"
                or os.environ.get("NETIO_BENCH_FULL") == "0")
    start_load = loadavg()
    head = _header(argv, full, start_load)
    b = Bench(args)
    b.full = full
    if not args.only:   # profiles of missed targets are rewritten by this run
        shutil.rmtree(PROFILES, ignore_errors=True)
    t0 = time.monotonic()
    body = _run_sections(b, head)
    text = "\n".join(head) + "\n" + b.summary_md() + "\n" + "\n".join(body)
    if b.retries:
        text += "\nRuns that failed once and were retried:\n\n" + "\n".join(
            f"- {r}" for r in b.retries) + "\n"
    text += (f"\n_total bench time: {time.monotonic() - t0:.0f} s; load average at start: "
             f"{start_load}, at the end: {loadavg()}; BPF programs loaded at the end: "
             f"{bpf_programs()}_\n")
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
