"""The bench's runs: Bench starts our workloads (netio()), the forward path's sender
(netio_forward()), the busy loop and iperf3, each watched by an observer (bench/observers.py),
and keeps the verdicts the sections record; interleaved() runs a comparison's variants in
rounds beside the machine speed probe. Measuring only: the Markdown is bench/markdown*.py.

Every run of our workloads goes through Bench.netio(): the server and the client are started
held at a gate (netio_trace/system/procs.py), an observer is set up on their pids, then they
are released; their CPU time comes from their own rusage (wait4). Bench.busy_loop() does the
same for netio-busy-loop (the timer floor), Bench.churn() for netio-churn (the churn bench).
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from netio_trace.system import cgroup
from netio_trace.system.netns import LOOPBACK_ADDR, VETH_RECEIVER_ADDR
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_for_exit, wait_listening
from bench import pairs
from bench.config import BUILD, IPERF3_PORT, NETIO_PORT0, PROBE_S, REPO, size_name
from bench.observers import NO_NAMESPACES, Proc, Untraced


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


def git_head():
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


VULNERABILITIES = "/sys/devices/system/cpu/vulnerabilities"


def _vulnerability(name):
    try:
        with open(os.path.join(VULNERABILITIES, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def srso_state():
    """SRSO's mitigation, with retbleed's beside it wherever the CPU is exposed to that one:
    either can make every return go through a thunk (a Zen 1 or 2 with SMT off has no SRSO
    thunk, and retbleed's untrained one), and a program run's floor moves with it."""
    srso = _vulnerability("spec_rstack_overflow") or "not reported by this kernel"
    retbleed = _vulnerability("retbleed")
    if retbleed and retbleed != "Not affected":
        return f"{srso} (retbleed: {retbleed})"
    return srso


def release_followed(tracer, topo, srv, strategy, at_zero=None, skb_on_demand=False):
    """A `--control` tracer follows the run's namespaces and the gated server srv, its counts
    from zero and its per-skb programs attached if srv sends with the zero-copy `strategy`
    (as the sweep's are; skb_on_demand: left to the tracer's default, as `trace`'s are);
    then srv is released, so that its first send is counted. at_zero, if given,
    is called at that zero, before the release (another reader's starting point); its result
    is returned."""
    tracer.clear()
    for ns in topo.namespaces:
        tracer.netns_add(ns)
    tracer.pid_add(srv.pid)
    tracer.reset()
    if not skb_on_demand:
        tracer.skb_programs_for(strategy)
    started = at_zero() if at_zero else None
    srv.release()
    return started


def release_unfollowed(tracer, srv, bystander, at_zero=None):
    """As release_followed(), but the tracer follows only bystander (a process that makes no
    event), not srv nor the run's namespaces: srv's events are another process's."""
    tracer.clear()
    tracer.pid_add(bystander.pid)
    tracer.reset()
    started = at_zero() if at_zero else None
    srv.release()
    return started


class Run(dict):
    """One run's numbers; printed short in the progress log."""

    def __repr__(self):
        if "blocks_per_s" in self:
            return f"{self['blocks_per_s']:.0f} blocks/s (busy loop)"
        if "connections" in self:
            return (f"{self['processes']} processes, {self['threads']} threads, "
                    f"{self['connections']} connections in {self['seconds']:.2f} s (churn)")
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
        self.strategy = None    # the sender's strategy of the run under way (observers read it)
        self._n = 0
        self.verdicts = []
        self.retries = []

    def record(self, group, item, summary, target):
        """A ratio with a target, for the summary at the top of results.md."""
        self.verdicts.append((group, item, summary, target))

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
        self.strategy = strategy
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
        return self._one_binary(
            "netio-busy-loop", ["--seconds", f"{duration:g}"], NO_NAMESPACES, observer,
            duration + 30,
            lambda r, cpu: Run({"blocks_per_s": r["blocks_per_s"], "messages": None,
                                "cpu_s": cpu}))

    def churn(self, topo, load, observer):
        """One run of netio-churn (bench/churn.c) in topo's sender namespace and the
        workloads' cgroup, watched by observer; load: its options ({"processes", "threads",
        "connections", "bytes"}). The run: the load's own accounting and what the observer
        adds. Retried once."""
        return self._retried(f"churn {observer.name}", lambda: self._churn(topo, load, observer))

    def _churn(self, topo, load, observer):
        return self._one_binary(
            "netio-churn", ["--netns", topo.sender_ns, *(f"--{k}={v}" for k, v in load.items())],
            topo, observer, 120, lambda r, cpu: Run(r, messages=None, cpu_s=cpu))

    def _one_binary(self, name, args, topo, observer, timeout, make_run):
        """One gated run of our binary `name` (its JSON on stdout) in the workloads' cgroup,
        watched by observer from before its first instruction: make_run(its JSON, its CPU
        seconds), with what the observer adds; the observer is aborted if anything fails."""
        d = self.rundir()
        out, err = os.path.join(d, f"{name}.out"), os.path.join(d, f"{name}.err")
        proc = GatedProcess([os.path.join(BUILD, name), *args], out, err, cgroup=self.cgroup)
        self.strategy = None
        try:
            observer.start(self, topo, [proc.pid])
            proc.release()
            cpu = _reap_all([proc], time.monotonic() + timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"{name}: exit {proc.returncode}: {_tail(err)}")
            with open(out) as f:
                run = make_run(json.load(f), cpu[proc.pid])
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
            raise RuntimeError(f"iperf3 -c: exit {cli.returncode}: {cli.stdout[-300:]} "
                               f"{cli.stderr}")
        end = json.loads(cli.stdout)["end"]
        return Run({"recv_gbps": end["sum_received"]["bits_per_second"] / 1e9,
                    "send_gbps": end["sum_sent"]["bits_per_second"] / 1e9,
                    "retrans": end["sum_sent"].get("retransmits"),
                    "cc": end.get("sender_tcp_congestion"),
                    "cpu_s_per_gb": _per_gb(_children_cpu() - cpu0,
                                            end["sum_received"]["bytes"])})


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


def _per_gb(cpu_s, nbytes):
    return cpu_s / (nbytes / 1e9) if nbytes else None
