"""What watches a run of our workloads: nothing (Untraced), our tracer in one of its variants
(OurTracer and the functions below that make its variants), or bpftrace (Bpftrace, the peer's
counting; BpftraceTimer, the peer's sampler doing nothing). Each has start(bench, topo, pids)
before the workloads leave their gate, stop(run) after they ended (it adds its numbers to the
run), and abort(). Proc is a child process the bench starts and ends by its pid."""
import json
import os
import re
import select
import signal
import subprocess
import time
import types

from netio_trace.system.machine import has_pmu
from netio_trace.tracer import ControlTracer
from bench.config import BUILD, COUNTING_ARGS


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
                                extra_args=args,
                                binary=os.path.join(self.build or BUILD, "netio-tracer"),
                                env=self.env)
        self.tr.start()
        self.tr.skb_programs_for(bench.strategy)   # as the sweep does before such a run
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


# ---- our tracer's variants ---------------------------------------------------------------
# The programs by part, for the experiments' NETIO_TRACER_SKIP (docs/tracer.md): the syscall
# hooks (per-call latency), the socket-layer events (bytes and calls per process, the end of a
# traced call), the rest (xmit and receive per skb, socket state). A variant that leaves some
# out checks in every run what attached, so a new program cannot slip into it.
SYSCALL_HOOKS = "sc_enter,sc_exit,sc_enter_raw,sc_exit_raw"
SOCKET_EVENTS = "tp_send_length,tp_recv_length"
SKB_EVENTS = "tp_xmit,tp_sock_state,tp_netif_receive,tp_tcp_probe,tp_kfree_skb"
# the receive kinds' own programs (mapped: getsockopt; spliced: sys_exit_splice, or its
# fallback tcp_rcv_space_adjust)
RECEIVE_KINDS = "cg_zc_receive,tp_splice_exit,tp_rcv_space_adjust"

# What sampling at 999 Hz keeps of untraced throughput. The tracer refuses to run
# with no probe point, so "sampling alone" keeps its cheapest one: rx_copy on
# skb_copy_datagram_iovec (a per-skb count on the receiver, which is not the bottleneck).
SAMPLING_ALONE_SKIP = ",".join((SYSCALL_HOOKS, SOCKET_EVENTS, SKB_EVENTS, RECEIVE_KINDS))
SAMPLING_ALONE_ATTACHED = {"rx_copy", "stacks"}


def timer_source():
    """The sampler with a timer of its own: cycles where a PMU exists, else cpu-clock (the
    default, auto, samples on the tick where there is no PMU)."""
    return "cycles" if has_pmu() else "cpu-clock"


def sampling_alone(source=None):
    """source: a --sample-source, or None for the tracer's default."""
    args = ["--no-counters"] + (["--sample-source", source] if source else [])
    return OurTracer(args, label=f"sampling-{source}" if source else "sampling",
                     env={"NETIO_TRACER_SKIP": SAMPLING_ALONE_SKIP},
                     expect_attached=SAMPLING_ALONE_ATTACHED)


def _programs(label, skip=(), attached=None):
    """The tracer's BPF programs with no sampling or counters, those named in skip left out."""
    return OurTracer(["--no-sample", "--no-counters"], label=label,
                     env={"NETIO_TRACER_SKIP": ",".join(skip)} if skip else None,
                     expect_attached=attached)


def counting_only():
    """The tracer's BPF programs alone: copy accounting and syscall histograms."""
    return _programs("programs")


def counting_level():
    """The counting level's tracer."""
    return OurTracer(list(COUNTING_ARGS), label="counting",
                     expect_attached={"tx_bytes", "rx_copy", "pinning", "fallback_copy",
                                      "rx_mapped", "rx_discarded", "rx_spliced"})


def programs_on_skbs_only():
    """The per-skb programs only (xmit, receive, and rx_copy on skb_copy_datagram_iovec once
    sock_recv_length is left out): neither syscall hooks nor socket-layer events."""
    return _programs("xmit-receive", (SYSCALL_HOOKS, SOCKET_EVENTS, RECEIVE_KINDS),
                     {"rx_copy", "pinning", "fallback_copy"})
