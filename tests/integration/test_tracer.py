"""Integration tests of netio-tracer (needs root): exact byte accounting against what the
workloads report, for every strategy over veth and loopback at 1 KiB and 64 KiB; the attach
ladder's rungs; --probe; the --control protocol; -- CMD with its fork gate; self cost.

One `netio-tracer --control` serves every workload run (clear, netns add, pid add, reset,
snapshot), as the driver uses it. Binaries come from $NETIO_BUILD (default <repo>/build).

NETIO_VMTEST=1 runs the same exactness and ladder tests with less data inside each kernel of
the matrix (tests/vm/run-vmtest.sh: Debian's 5.10, 6.1 and 6.12 under QEMU/TCG), and leaves out
the host's longer tests. What a kernel or the compat build (bpf/compat.bpf.h) lacks is told by
features the tracer reports (its ready line, --probe, the kernel's BTF), never by a version.
"""
import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, CLIENT, SERVER, TRACER, needs_built, needs_root
from netio_trace.system.machine import has_pmu, kernel_hz
from netio_trace.tracer import needs_skb_programs
from netio_trace.system.netns import Topology
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening

GETPID = os.path.join(BUILD, "netio-getpid-loop")
BUSY = os.path.join(BUILD, "netio-busy-loop")
VMTEST = os.environ.get("NETIO_VMTEST") == "1"

STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field")
TRANSPORTS = ("veth", "loopback")
SIZES = (1024, 65536)
# messages per run: a few MB, enough for many skbs, short enough for < 2 min in all
COUNTS = {1024: 10000, 65536: 1000}
if VMTEST:
    COUNTS = {1024: 500, 65536: 150}
COPY_POINTS = ("tx_bytes", "tx_copy", "pinning", "fallback_copy", "rx_copy")
RUNGS = {"fentry", "kprobe", "tp_btf", "tracepoint", "inferred", "unavailable", "perf_event"}
TIMEOUT = 300 if VMTEST else 60

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]
host_only = pytest.mark.skipif(VMTEST, reason="host suite (NETIO_VMTEST=1 runs the VM subset)")


# ---- a minimal --control client --------------------------------------------------------

class Tracer:
    """`netio-tracer --control`, ended by quit, else by the pid we started."""

    def __init__(self, *args, log=None):
        self.argv = [TRACER, "--control", *(() if os.environ.get("NETIO_TEST_SAMPLE") else ("--no-sample",)),
                     # QEMU/TCG can livelock on the text patching of sampled BPF stats
                     *(("--bpf-stats", "always") if VMTEST else ()), *args]
        self.log = log
        err = open(log, "wb") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=err)
        if log:
            err.close()
        self.buf = b""
        line = self._line(TIMEOUT * 2)
        assert line.startswith("ready "), f"tracer did not get ready: {line!r} {self._log()}"
        self.ready = json.loads(line[len("ready "):])
        self.attach = self.ready["attach"]
        self.build = self.ready["bpf_build"]["name"]

    def _log(self):
        if not self.log:
            return ""
        with open(self.log, errors="replace") as f:
            return f.read()[-2000:]

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"tracer silent for {timeout} s {self._log()}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return f"EOF (status {self.proc.wait()})"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def cmd(self, text, timeout=TIMEOUT):
        self.proc.stdin.write((text + "\n").encode())
        self.proc.stdin.flush()
        return self._line(timeout)

    def ok(self, text):
        answer = self.cmd(text)
        assert answer == "ok", f"{text!r} -> {answer!r} {self._log()}"

    def snapshot(self, path):
        self.ok(f"snapshot {path}")
        with open(path) as f:
            return json.load(f)

    def close(self):
        if self.proc.poll() is None:
            try:
                assert self.cmd("quit", timeout=30) == "ok"
            except (AssertionError, BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


@contextlib.contextmanager
def lent(t):
    """The session's default tracer (tests/conftest.py) as if just started: attached, its
    per-skb programs waiting for a zero-copy send, nothing followed, counts zeroed; detached
    at the end, so that none of its programs runs while other modules measure."""
    t.ok("skb-programs on-demand")
    t.ok("attach")
    t.ok("clear")
    t.ok("reset")
    try:
        yield t
    finally:
        t.ok("detach")


@pytest.fixture(scope="module")
def tracer(default_tracer):
    with lent(default_tracer) as t:
        yield t


class TracerCache:
    """One tracer of given options (and environment at its start) at a time, kept for the
    next test that asks for the same: the cases of a parametrized test share it, each run
    starting from `clear` and `reset` (run_workload). Starting is the dearest step of a test
    in the matrix's guests (bench/NOTES.md, "One vCPU, and what a tracer's start costs").
    Default options get the session's tracer (default(), tests/conftest.py's default_tracer),
    lent until the cache closes."""

    def __init__(self, logdir, default):
        self.logdir = logdir
        self.default = default
        self.key = None
        self.tracer = None
        self.ending = contextlib.ExitStack()   # what close() does: give back, or end
        self.started = 0

    def get(self, *args, env=None):
        key = (args, tuple(sorted((env or {}).items())))
        if key == self.key:
            return self.tracer
        self.close()
        if not args and not env:
            self.tracer = self.ending.enter_context(lent(self.default()))
        else:
            self.tracer = self._start(args, env)
            self.ending.callback(self._end, self.tracer)
        self.key = key
        return self.tracer

    def _start(self, args, env):
        saved = {k: os.environ.get(k) for k in env or {}}
        os.environ.update(env or {})
        try:
            self.started += 1
            return Tracer(*args, log=str(self.logdir / f"tracer-{self.started}.log"))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    @staticmethod
    def _end(t):
        assert t.close() == 0, f"tracer {t.argv} exited non-zero {t._log()}"

    def close(self):
        self.tracer = self.key = None
        self.ending.close()


@pytest.fixture(scope="module")
def tracer_cache(tmp_path_factory, request):
    cache = TracerCache(tmp_path_factory.mktemp("tracers"),
                        lambda: request.getfixturevalue("default_tracer"))
    yield cache
    cache.close()


@pytest.fixture
def tracers(tracer_cache, request):
    """The cache, whose tracer of other than default options lives through the consecutive
    cases of one test only: the next test starts with none of it attached (some measure what
    attached programs cost, on other rungs than the default tracer's)."""
    yield tracer_cache
    items = request.session.items
    i = items.index(request.node)
    after = items[i + 1] if i + 1 < len(items) else None
    if after is None or (after.module, after.originalname) != (request.node.module,
                                                                request.node.originalname):
        tracer_cache.close()


@pytest.fixture(scope="module")
def topologies():
    with Topology("veth") as veth, Topology("loopback") as lo:
        yield {"veth": veth, "loopback": lo}


# ---- one workload run under the tracer -----------------------------------------------

def server_port(srv, err_path, timeout=TIMEOUT):
    """The port a GatedProcess(ready=True) server started with READY_ARGS listens on."""
    port, _ = wait_listening(srv.ready, timeout)
    assert port, f"server exited ({srv.wait(5)}): {open(err_path).read()}"
    return port


def follow_afresh(tracer, namespaces, pids, skb_programs):
    """The tracer forgets whom it followed, follows namespaces and pids from zeroed counts,
    and attaches the per-skb programs now when skb_programs (as a sweep does before a run
    that may send zero-copy)."""
    tracer.ok("clear")
    for ns in namespaces:
        tracer.ok(f"netns add {ns}")
    for pid in pids:
        tracer.ok(f"pid add {pid}")
    tracer.ok("reset")
    if skb_programs:
        tracer.ok("skb-programs always")


def run_workload(tracer, topo, tmp, strategy, size, count, threads=1, duration=None,
                 server_args=(), client_args=(), follow_server=True, skb_on_demand=False):
    """Run server and client held at their gates until the tracer follows them: count messages
    per connection, or for duration seconds when given; server_args, client_args: more of
    their options (--mss, --receive); follow_server False: the server's namespace only;
    skb_on_demand: the per-skb programs wait on demand (docs/tracer.md) even where the
    strategy sends zero-copy (a sweep attaches them before such a run).
    Returns (server JSON, client JSON, snapshot, server pid, client pid)."""
    srv_out, srv_err = tmp / "server.json", tmp / "server.err"
    cli_out, cli_err = tmp / "client.json", tmp / "client.err"
    srv = GatedProcess([SERVER, "--strategy", strategy, "--size", str(size), "--threads",
                        str(threads), "--port", "0", "--addr", "0.0.0.0", "--netns",
                        topo.sender_ns, *(("--duration", str(duration)) if duration
                                          else ("--count", str(count))),
                        "--cc", "cubic", *READY_ARGS, *server_args],
                       str(srv_out), str(srv_err), ready=True)
    follow_afresh(tracer, topo.namespaces, [srv.pid] if follow_server else [],
                  needs_skb_programs(strategy) and not skb_on_demand)
    srv.release()
    cli = None
    try:
        port = server_port(srv, srv_err)
        cli = GatedProcess([CLIENT, "--addr", topo.server_addr, "--port", str(port), "--threads",
                            str(threads), "--size", str(size), "--netns", topo.receiver_ns,
                            *client_args],
                           str(cli_out), str(cli_err))
        tracer.ok(f"pid add {cli.pid}")
        cli.release()
        assert srv.wait(TIMEOUT) == 0, open(srv_err).read()
        assert cli.wait(TIMEOUT) == 0, open(cli_err).read()
    finally:
        srv.kill()
        if cli:
            cli.kill()
    snap = tracer.snapshot(str(tmp / "snapshot.json"))
    with open(srv_out) as f:
        s = json.load(f)
    with open(cli_out) as f:
        c = json.load(f)
    return s, c, snap, srv.pid, cli.pid


def kernel_btf_has(name):
    """The running kernel's BTF names `name` (a function, a tracepoint's btf_trace_ typedef)."""
    with open("/sys/kernel/btf/vmlinux", "rb") as f:
        return b"\0" + name.encode() + b"\0" in f.read()


@functools.lru_cache(maxsize=None)
def tracer_probe():
    """`netio-tracer --probe`, once a session: what the kernel allows does not change."""
    return json.loads(subprocess.run([TRACER, "--probe"], capture_output=True, text=True,
                                     timeout=TIMEOUT, check=True).stdout)


def proc(snap, pid):
    p = snap["processes"].get(str(pid))
    assert p is not None, f"pid {pid} not in the snapshot: {list(snap['processes'])}"
    return p


def zc_per_process_unavailable(snap, sp):
    """Where the kernel gives no way to count zero-copy bytes per process (the tracepoint rung
    without sock_send_length, or the compat build): they, and the copy inferred from them, are
    null per process, never 0, and the snapshot says why."""
    if "processes.zc_tx_bytes" not in snap["unavailable"]:
        return False
    assert sp["zc_tx_bytes"] is None, sp
    assert snap["attach"]["pinning"] == "tp_btf", snap["attach"]
    assert sp["tx_copy_bytes"] is None and "processes.tx_copy_bytes" in snap["unavailable"], sp
    return True


def check_exact(s, c, snap, spid, cpid, strategy):
    sp, cp = proc(snap, spid), proc(snap, cpid)
    sent, received = s["bytes"], c["bytes"]
    assert sent > 0 and received == sent
    assert sp["tx_bytes"] == sent, f"tx_bytes {sp['tx_bytes']} != bytes_sent {sent}"
    assert cp["rx_copy_bytes"] == received, \
        f"rx_copy_bytes {cp['rx_copy_bytes']} != bytes_received {received}"
    assert snap["drops"] == 0, snap.get("drops_by_cause")
    if strategy == "zero-copy":
        assert snap["zc_tx_bytes"] >= 0.99 * sent, (snap["zc_tx_bytes"], sent)
        assert snap["fallback_copy_bytes"] >= 0.99 * sent, (snap["fallback_copy_bytes"], sent)
        # exact: the bytes of a socket's first skbs, which leave before its first send
        # returns and names the owner, wait on the socket until then
        skipped = {k: v["skipped"] for k, v in snap["self"]["programs"].items() if v["skipped"]}
        # (what tells xmit's miss from a claim's: the netns's bytes and every process's)
        by_process = {p: v["zc_tx_bytes"] for p, v in snap["processes"].items()}
        if zc_per_process_unavailable(snap, sp):
            return
        assert sp["zc_tx_bytes"] == sent, (sp["zc_tx_bytes"], sent, s.get("tcp"), snap["zerocopy"],
                                           skipped, snap["zc_tx_bytes"], by_process)
        assert sp["tx_copy_bytes"] <= 0.01 * sent, (sp["tx_copy_bytes"], sent)
    else:
        assert snap["zc_tx_bytes"] == 0
        assert snap["fallback_copy_bytes"] == 0
        if zc_per_process_unavailable(snap, sp):
            return
        assert sp["zc_tx_bytes"] == 0
        assert abs(sp["tx_copy_bytes"] - sent) <= 0.01 * sent, (sp["tx_copy_bytes"], sent)
        if snap["attach"]["tx_copy"] in ("fentry", "kprobe"):
            assert sp["tx_copy_bytes"] == sent      # a copy function is probed: exact


def check_histogram(s, snap, spid):
    """Every send counted; each sending thread timed the first of every N of its sends
    (latency.sampled_1_in), and the histogram holds exactly the timed ones."""
    sc = proc(snap, spid)["syscalls"]["sendmsg"]
    n = snap["latency"]["sampled_1_in"]
    assert sum(sc["hist_log2_ns"].values()) == sc["timed"]
    # a thread times ceil(its sends / n): together from count / n to one more a thread
    assert sc["count"] / n <= sc["timed"] <= sc["count"] / n + s["threads"], (sc, n, s["threads"])
    assert sc["count"] == s["send_calls"] == s["messages"] + s["partial_retries"] + s["enobufs_retries"]
    assert sc["bytes"] == s["bytes"]
    assert 0 < sc["p50_us"] <= sc["p99_us"]


# ---- host suite ------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ("one-copy", "zero-copy"))
def test_threads_without_storage_lose_no_byte(tracers, topologies, tmp_path, strategy):
    """Where the kernel cannot make a thread's storage (its per-CPU element cache empty), the
    event counts in the CPU's spill slot (bpf/thread_storage.bpf.h) and reaches the process at
    once: with every thread's storage refused, bytes and copies stay exact and nothing is
    dropped. The compat build keeps no per-thread counts (bpf/thread_hash.bpf.h): there nothing
    spills, and the same figures are exact."""
    t = tracers.get(env={"NETIO_TEST_NO_THREAD_STORAGE": "1"})
    s, c, snap, spid, cpid = run_workload(t, topologies["loopback"], tmp_path, strategy,
                                          65536, COUNTS[65536])
    check_exact(s, c, snap, spid, cpid, strategy)
    if t.build == "compat":
        assert snap["thread_storage_spilled"] == 0
    else:
        assert snap["thread_storage_spilled"] >= s["send_calls"] + c["recv_calls"], \
            (snap["thread_storage_spilled"], s["send_calls"], c.get("recv_calls"))
    assert proc(snap, spid)["tx_calls"] == s["send_calls"]
    # each send call started in one spilled event and ended in another (thread_pending)
    sc = proc(snap, spid)["syscalls"]["sendmsg"]
    assert sc["count"] == s["send_calls"] and sc["bytes"] == s["bytes"], (sc, s)
    assert 0 < sc["timed"] == sum(sc["hist_log2_ns"].values())


@host_only
def test_ready_line_names_every_probe_point(tracer):
    assert set(tracer.attach) == {"tx_bytes", "tx_copy", "pinning", "fallback_copy",
                                  "zc_completion", "rx_copy", "rx_mapped", "rx_discarded",
                                  "rx_spliced", "syscalls", "stacks"}
    assert set(tracer.attach.values()) <= RUNGS
    assert tracer.attach["syscalls"] in ("tp_btf", "tracepoint")


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_exact_bytes(tracer, topologies, tmp_path, strategy, size, transport):
    s, c, snap, spid, cpid = run_workload(tracer, topologies[transport], tmp_path, strategy,
                                          size, COUNTS[size])
    check_exact(s, c, snap, spid, cpid, strategy)
    if strategy == "one-copy":
        check_histogram(s, snap, spid)
    if snap["attach"]["tx_copy"] == "inferred":
        assert snap["tx_copy_inferred"] and proc(snap, spid)["tx_copy_inferred"]
    if strategy == "zero-copy" and snap["attach"]["zc_completion"] != "unavailable":
        zc = snap["zerocopy"]
        assert zc["completed_sends"] == s["zerocopy"]["sends"], (zc, s["zerocopy"])
        assert zc["copied_sends"] == s["zerocopy"]["copied"], (zc, s["zerocopy"])
    if strategy == "zero-copy":
        assert snap["zerocopy"]["fallback_copy_skbs"] > 0
        check_skbs_at_tcp(snap)


def check_skbs_at_tcp(snap):
    """Where the fallback copy is inferred at netif_receive_skb (the tracepoint rung) at the
    full level, tcp_probe confirms it: the copy happened before TCP saw the segments, so the
    flag is gone there. Elsewhere nothing confirms it, and the figure is null, with why."""
    probes = [k for k in snap["self"]["programs"] if k.startswith("tp_tcp_probe")]
    at_tcp = snap["zerocopy"]["zc_skbs_at_tcp"]
    if snap["attach"]["fallback_copy"] == "tp_btf" and snap["latency"]["timed"]:
        assert probes and at_tcp == 0, (probes, at_tcp)
        assert all(n["zc_skbs_at_tcp"] == 0 for n in snap["netns"].values())
    else:
        assert not probes and at_tcp is None, (probes, at_tcp)
        assert all(n["zc_skbs_at_tcp"] is None for n in snap["netns"].values())
        assert "zerocopy.zc_skbs_at_tcp" in snap["unavailable"], snap["unavailable"]


def _at_gate(pid, timeout=5):
    """Waits until the forked child sleeps at its gate (its counters then stand still)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.005)
    raise AssertionError(f"{pid} never reached its gate")


def _kernel_counts(pid):
    """(context switches, page faults, run ns) the kernel counts for a single-threaded pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    faults = int(fields[7]) + int(fields[9])         # minflt, majflt
    with open(f"/proc/{pid}/status") as f:
        status = dict(l.split(":", 1) for l in f if ":" in l)
    switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    with open(f"/proc/{pid}/schedstat") as f:
        run_ns = int(f.read().split()[0])
    return switches, faults, run_ns


def test_software_counters_are_the_kernels_own(tracer, tmp_path):
    """context-switches, page-faults and task-clock are the kernel's own counters of the
    followed threads (bpf/netio.h, kernel_counts), from `pid add` on, and of the children
    forked after it from their birth: what wait4 reports for the process and the children it
    waited for, less what its gate had counted before `pid add`. A thread's last switches and
    microseconds, after sched_process_exit, are the kernel's only; faults are exact."""
    tracer.ok("clear")
    tracer.ok("reset")
    argv = ["/bin/sh", "-c", f"{BUSY} --seconds 0.5 & {BUSY} --seconds 0.5; wait"]
    p = GatedProcess(argv, str(tmp_path / "out"), str(tmp_path / "err"))
    try:
        _at_gate(p.pid)
        before = _kernel_counts(p.pid)
        tracer.ok(f"pid add {p.pid}")
        p.release()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        p.kill()
    assert p.returncode == 0
    perf = tracer.snapshot(str(tmp_path / "s.json"))["perf"]
    if tracer.build == "compat":
        # no per-thread flush there (bpf/thread_hash.bpf.h): perf events count the followed tasks
        assert perf["software_from"] == "perf_event"
        assert perf["task-clock"] > 0.1e9   # two busy loops ran (of 0.5 s each, on a loaded host)
        return
    assert perf["software_from"] == "task_struct"
    processes = 3
    # (the kernel's, the tracer's): the tracer stops at sched_process_exit; what the exit
    # path does after it (closing files, task work, the last schedule) is the kernel's only,
    # and a running thread's sum lacks up to a tick until the next tick or switch
    switches = (ru.ru_nvcsw + ru.ru_nivcsw - before[0], perf["context-switches"])
    faults = (ru.ru_minflt + ru.ru_majflt - before[1], perf["page-faults"])
    run_ns = (round((ru.ru_utime + ru.ru_stime) * 1e9) - before[2], perf["task-clock"])
    why = {"switches": switches, "faults": faults, "run_ns": run_ns}
    assert faults[0] == faults[1], why
    assert switches[0] - 10 * processes <= switches[1] <= switches[0], why
    # the exit path after sched_process_exit; in the guest it runs emulated on QEMU's one
    # thread, which the host may preempt there (bench/NOTES.md, "The guest")
    exit_path = 15e6 if VMTEST else 5e6
    lag = processes * (1e9 / (kernel_hz() or 100) + exit_path)
    assert run_ns[0] - lag <= run_ns[1] <= run_ns[0] + 1e3 * processes, why
    assert perf["task-clock"] > 0.1e9     # two busy loops of 0.5 s each ran (a loaded host gives them less)


@host_only
def test_threads_and_self_cost(tracer, topologies, tmp_path):
    s, c, snap, spid, cpid = run_workload(tracer, topologies["loopback"], tmp_path, "one-copy",
                                          16384, 1000, threads=2)
    check_exact(s, c, snap, spid, cpid, "one-copy")
    check_histogram(s, snap, spid)
    assert snap["latency"] == {"timed": True, "sampled_1_in": 16}    # the default
    self_ = snap["self"]
    assert self_["stats_enabled"] is True
    assert self_["bpf_runs"] > 0 and self_["bpf_ns"] > 0
    assert self_["ns_per_message"] is not None and self_["ns_per_message"] > 0
    assert sum(p["runs"] for p in self_["programs"].values()) == self_["bpf_runs"]


@host_only
def test_reset_zeroes_and_clear_forgets(tracer, topologies, tmp_path):
    run_workload(tracer, topologies["loopback"], tmp_path, "one-copy", 1024, 200)
    tracer.ok("reset")
    snap = tracer.snapshot(str(tmp_path / "after-reset.json"))
    assert snap["tx_bytes"] == 0 and snap["rx_copy_bytes"] == 0
    assert all(p["tx_bytes"] == 0 for p in snap["processes"].values())
    tracer.ok("clear")
    assert tracer.cmd("pid add 999999999").startswith("error ")
    assert tracer.cmd("netns add no-such-netns-here").startswith("error ")
    assert tracer.cmd("bogus").startswith("error ")


# Holds NETNS namespaces open (one unshare each, an fd on each), prints their paths.
NETNS_HOLDER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
paths = []
for _ in range(int(sys.argv[1])):
    if libc.unshare(0x40000000):  # CLONE_NEWNET
        sys.exit("unshare: " + os.strerror(ctypes.get_errno()))
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    paths.append(f"/proc/{os.getpid()}/fd/{fd}")
print(" ".join(paths), flush=True)
time.sleep(60)
"""


@host_only
def test_netns_slots_run_out_and_come_back(tracer):
    """Each followed namespace has a slot of the statistics (NETIO_MAX_NETNS = 256): the
    257th since the last reset is refused with a clear error, and a reset after `clear` gives
    the slots back."""
    holder = subprocess.Popen([sys.executable, "-c", NETNS_HOLDER, "257"],
                              stdout=subprocess.PIPE, text=True)
    try:
        paths = holder.stdout.readline().split()
        assert len(paths) == 257
        tracer.ok("clear")
        tracer.ok("reset")
        for p in paths[:256]:
            tracer.ok(f"netns add {p}")
        tracer.ok(f"netns add {paths[0]}")  # followed again: its own slot
        reply = tracer.cmd(f"netns add {paths[256]}")
        assert reply.startswith("error ") and "256 namespaces" in reply
        tracer.ok("clear")
        tracer.ok("reset")
        tracer.ok(f"netns add {paths[256]}")
    finally:
        holder.kill()
        holder.wait()
        tracer.ok("clear")
        tracer.ok("reset")


# Sends over loopback TCP to itself on command ("main N": from the main thread, which lives
# on; "thread N": from a thread that exits after), answering "done" once received.
LIVE_SENDER = """
import socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
def send(n):
    c.sendall(b"x" * n)
    got = 0
    while got < n:
        got += len(a.recv(1 << 20))
for line in sys.stdin:
    how, n = line.split()
    if how == "thread":
        t = threading.Thread(target=send, args=(int(n),)); t.start(); t.join()
    else:
        send(int(n))
    print("done", flush=True)
"""


def test_thread_counts_reach_the_snapshot_and_reset(tracer, tmp_path):
    """Threads count in their own storage (bpf/maps.bpf.h): a live thread's counts are flushed
    before the snapshot, an exited thread's at its exit, each exactly once; reset forgets
    what live threads counted before it."""
    script = tmp_path / "sender.py"
    script.write_text(LIVE_SENDER)
    p = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)

    def sends(how, n):
        p.stdin.write(f"{how} {n}\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"

    def counted(name):
        snap = tracer.snapshot(str(tmp_path / f"{name}.json"))
        me = snap["processes"].get(str(p.pid), {})
        return me.get("tx_bytes", 0), me.get("rx_copy_bytes", 0)

    try:
        tracer.ok("clear")
        tracer.ok(f"pid add {p.pid}")
        tracer.ok("reset")
        sends("main", 100000)
        assert counted("live") == (100000, 100000)
        assert counted("again") == (100000, 100000)     # a second flush adds nothing
        sends("thread", 50000)
        assert counted("exited") == (150000, 150000)
        tracer.ok("reset")
        assert counted("reset") == (0, 0)
        sends("main", 7000)
        assert counted("after") == (7000, 7000)
    finally:
        p.stdin.close()
        p.wait(10)


@host_only
def test_probe_here():
    cp = subprocess.run([TRACER, "--probe"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert set(d["attach"]) == {"fentry", "kprobe", "tp_btf", "tracepoint", "perf_event", "uprobe"}
    assert set(d["pmu"]) == {"cycles", "instructions", "cache-misses", "L1-dcache-load-misses",
                             "LLC-load-misses"}
    assert d["btf"] is True and d["msg_zerocopy"] is True
    assert d["attach"]["tp_btf"] is True and d["attach"]["tracepoint"] is True
    # what a kernel without kprobes and a VM without a PMU look like: cross-checked with sysfs
    has_kprobes = (os.path.exists("/sys/bus/event_source/devices/kprobe")
                   or os.path.exists("/sys/kernel/tracing/kprobe_events"))
    assert d["attach"]["kprobe"] is has_kprobes
    pmu = has_pmu()
    assert d["pmu"]["cycles"] is pmu
    # the default stack sampler: cycles at 999 Hz where there is a PMU, else the tick
    if pmu:
        assert d["sampling"] == {"source": "cycles", "scope": "task", "freq": 999}
    else:
        assert d["sampling"]["source"] == "tick" and d["sampling"]["scope"] == "cpu"
    if os.uname().release.startswith("6.18."):   # the host of docs/testing.md, "Machines"
        assert d["attach"]["fentry"] is False and d["attach"]["kprobe"] is False
        assert d["pmu"]["cycles"] is False


def test_forced_rung_that_cannot_attach_exits_2():
    probe = tracer_probe()
    for rung in ("fentry", "kprobe"):
        if probe["attach"][rung]:
            continue
        cp = subprocess.run([TRACER, "--attach", rung, "--no-sample", "--duration", "0.1"],
                            capture_output=True, text=True, timeout=TIMEOUT)
        assert cp.returncode == 2
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1, cp.stderr
        assert lines[0].startswith(f"netio-tracer: --attach {rung}: this kernel does not allow")


def test_forced_tracepoint_rung(tmp_path):
    out = tmp_path / "t.json"
    cp = subprocess.run([TRACER, "--attach", "tracepoint", "--no-sample", "--no-counters",
                         "--json", str(out), "--", "true"], capture_output=True, text=True,
                        timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    a = json.loads(out.read_text())["attach"]
    assert a["tx_copy"] == "inferred"
    assert all(a[p] in ("tp_btf", "tracepoint") for p in ("tx_bytes", "pinning", "fallback_copy",
                                                          "rx_copy"))


@host_only
def test_bad_usage_exits_2():
    for args in (["--attach", "nope"], ["--pid", "x"], ["--bogus"], ["--duration", "-1"],
                 ["--latency-sample", "0"], ["--latency-sample", "2x"]):
        assert subprocess.run([TRACER, *args], capture_output=True, timeout=30).returncode == 2


@host_only
def test_command_mode_follows_forks(topologies, tmp_path):
    """-- CMD: a shell that forks the server and the client; both are followed through the
    fork handler, the tracer stops when the shell exits."""
    topo = topologies["loopback"]
    out = tmp_path / "trace.json"
    # the server's --ready-fd on a fifo: the shell reads its listening line, no polling
    script = (f"mkfifo {tmp_path}/ready; "
              f"{SERVER} --strategy one-copy --size 4096 --threads 1 --port 0 --addr 127.0.0.1 "
              f"--netns {topo.sender_ns} --count 500 --ready-fd 3 3>{tmp_path}/ready "
              f">{tmp_path}/s.json 2>{tmp_path}/s.err & "
              f"read -r _ port <{tmp_path}/ready; "
              f"{CLIENT} --addr 127.0.0.1 --port $port --threads 1 --size 4096 "
              f"--netns {topo.receiver_ns} >{tmp_path}/c.json; wait")
    cp = subprocess.run([TRACER, "--no-sample", "--json", str(out), "--netns", topo.sender_ns,
                         "--", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    snap = json.loads(out.read_text())
    s = json.loads((tmp_path / "s.json").read_text())
    c = json.loads((tmp_path / "c.json").read_text())
    assert snap["forks_followed"] >= 2
    # the client's 4-byte connection index is sent too
    assert snap["tx_bytes"] == s["bytes"] + 4
    assert snap["rx_copy_bytes"] == c["bytes"] + 4
    comms = {p["comm"] for p in snap["processes"].values()}
    assert {"netio-server", "netio-client"} <= comms


# A process that polls, writes to a file and sends and receives over a socket pair: on a
# kernel with sock_send_length/sock_recv_length, send and receive calls end at the socket
# layer, writes to a file are not socket calls, and sys_exit (needed for poll only) is
# attached once the first poll is seen: polls are counted from the first, timed from then on.
SOCKET_END_SCRIPT = """
import os, select, socket, sys, tempfile, time
a, b = socket.socketpair()
p = select.poll()
p.register(a, select.POLLIN)
for _ in range(1000):
    p.poll(0)
time.sleep(0.5)
for _ in range(1000):
    p.poll(0)
with tempfile.TemporaryFile() as f:
    for _ in range(7):
        os.write(f.fileno(), b"x" * 100)
for _ in range(10):
    os.write(b.fileno(), b"y" * 1000)
    a.recv(4096)
for _ in range(5):
    b.send(b"z" * 3000)
    a.recv(4096)
"""


# Zero-copy sends that fill the receive window, then a drain: the skbs TCP held back leave
# on the ACKs, after the last send returned. The sockets stay open until stdin closes.
LATE_ZC_SENDER = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
c.setsockopt(socket.SOL_SOCKET, 60, 1)                  # SO_ZEROCOPY
c.setblocking(False)
buf, sent = b"x" * 65536, 0
while True:
    try:
        sent += c.send(buf, 0x4000000)                  # MSG_ZEROCOPY
    except BlockingIOError:
        break
got = 0
while got < sent:
    got += len(a.recv(1 << 20))
print(sent, flush=True)
sys.stdin.read()
"""


@host_only
def test_a_burst_of_followed_processes_loses_none(tmp_path):
    """-- CMD: a shell starts 500 short processes at once. The map of process statistics makes
    its entries on demand, from an element cache that refills only from an irq_work; made at
    each fork rather than at each exit, none is dropped, and each is named after itself."""
    n = 500
    out = tmp_path / "trace.json"
    cp = subprocess.run([TRACER, "--no-sample", "--json", str(out), "--", "sh", "-c",
                         f"for i in $(seq {n}); do /bin/true & done; wait"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    snap = json.loads(out.read_text())
    assert snap["drops"] == 0, snap["drops_by_cause"]
    assert snap["forks_followed"] >= n
    assert sum(p["comm"] == "true" for p in snap["processes"].values()) == n


@host_only
def test_a_process_added_then_gone_keeps_its_own_name(tracer, tmp_path):
    """`pid add` makes the process's statistics from user space, unnamed; the process's
    exiting thread names them after itself (here after its exec), /proc being gone by the
    snapshot."""
    tracer.ok("clear")
    sh = subprocess.Popen(["sh", "-c", "read _; exec /bin/true"], stdin=subprocess.PIPE)
    try:
        tracer.ok(f"pid add {sh.pid}")
        tracer.ok("reset")
        sh.communicate(b"go\n", timeout=TIMEOUT)
    finally:
        sh.kill()
    snap = tracer.snapshot(str(tmp_path / "snapshot.json"))
    assert proc(snap, sh.pid)["comm"] == "true"
    assert snap["drops"] == 0, snap["drops_by_cause"]


def test_zerocopy_bytes_that_leave_after_the_last_send_reach_the_owner(tracer, topologies,
                                                                       tmp_path):
    """xmit counts zero-copy bytes on their socket; the owner's sends claim them, and what
    left after its last send is claimed for its process before the snapshot (the flush
    iterator): per process exactly what left the followed netns, once, and still after the
    process exited and its sockets closed."""
    ns = topologies["loopback"].sender_ns
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LATE_ZC_SENDER],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        tracer.ok("clear")
        tracer.ok(f"netns add {ns}")
        tracer.ok(f"pid add {p.pid}")
        tracer.ok("reset")
        sent = int(p.stdout.readline())
        for name in ("open", "again"):     # sockets open: claimed by the flush, once
            snap = tracer.snapshot(str(tmp_path / f"{name}.json"))
            mine = snap["processes"][str(p.pid)]
            if snap["attach"]["pinning"] in ("fentry", "kprobe"):
                # the exact rungs count each send's user pages as it attaches them
                assert mine["zc_tx_bytes"] == sent, (mine, sent)
                left = sent
                continue
            (left,) = [n["zc_tx_bytes"] for n in snap["netns"].values()]
            assert 0.9 * sent <= left <= sent, (left, sent)
            if not zc_per_process_unavailable(snap, mine):
                assert mine["zc_tx_bytes"] == left, (mine["zc_tx_bytes"], left, sent)
        p.stdin.close()
        assert p.wait(10) == 0
        snap = tracer.snapshot(str(tmp_path / "closed.json"))
        mine = snap["processes"][str(p.pid)]
        if not zc_per_process_unavailable(snap, mine):
            assert mine["zc_tx_bytes"] == left
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def trace_script(tmp_path, script, *args):
    """The snapshot of `netio-tracer --no-sample ARGS -- python -c script`, which must exit 0."""
    out = tmp_path / "trace.json"
    cp = subprocess.run([TRACER, "--no-sample", *args, "--json", str(out), "--", sys.executable,
                         "-B", "-c", script], capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return json.loads(out.read_text())


def test_socket_layer_ends_calls_and_sys_exit_on_demand(tmp_path):
    """Where the socket layer marks the end of send and receive calls (sock_send_length and
    sock_recv_length, 6.3+, in the storage build), sys_exit is attached only once a poll needs
    it; elsewhere sys_exit ends every call. Either way a write to a file is no socket call."""
    # every call timed: where each call ends shows in its timed count
    snap = trace_script(tmp_path, SOCKET_END_SCRIPT, "--latency-sample", "1")
    # the socket layer ends them where its programs count the bytes (the tracepoint rung of
    # the storage build, on a kernel that has the tracepoints); the exact rungs count at
    # tcp_sendmsg, and sys_exit (or fexit) ends the calls there
    socket_end = "sock_send_length" in snap["probes"].get("tx_bytes", "")
    if (kernel_btf_has("btf_trace_sock_send_length") and snap["attach"]["tx_bytes"] == "tp_btf"
            and snap["bpf_build"]["name"] == "storage"):
        assert socket_end, snap["probes"]
    assert snap["syscalls_end"] == ("socket" if socket_end else "sys_exit"), \
        (snap["syscalls_end"], snap["attach"])
    sc = next(iter(snap["processes"].values()))["syscalls"]
    assert sc["poll"]["count"] == 2000
    if socket_end and snap["attach"]["syscalls"] != "fentry":
        assert snap["probes"]["syscalls"].endswith("sys_exit (on demand)")
        assert "sock_recv_length" in snap["probes"]["rx_copy"]
        # every poll counted; timed (the histogram) only once sys_exit was attached, which
        # the half-second pause leaves time for
        assert 1000 <= sc["poll"]["timed"] < 2000
    assert sum(sc["poll"]["hist_log2_ns"].values()) == sc["poll"]["timed"]
    # the 7 writes to a file are not socket calls; the 10 to the socket are, every byte
    assert sc["write"]["count"] == sc["write"]["timed"] == 10
    assert sc["write"]["bytes"] == 10 * 1000
    assert sc["sendto"]["count"] == sc["sendto"]["timed"] == 5
    assert sc["sendto"]["bytes"] == 5 * 3000
    assert sc["recvfrom"]["count"] == 15 and sc["recvfrom"]["bytes"] == 10 * 1000 + 5 * 3000
    # a Unix socket pair: no TCP bytes, but every byte received was copied to the user
    assert snap["tx_bytes"] == 0
    assert snap["rx_copy_bytes"] == 10 * 1000 + 5 * 3000


def bpf_links(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += "bpf_link" in os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return n


def wait_attached(pid, timeout=30):
    """The tracer holds its links once it is attached (one-shot mode prints nothing)."""
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        n = bpf_links(pid)
        if n and n == last:
            return True
        last = n
        time.sleep(0.2)
    return False


@host_only
def test_sigterm_detaches_and_restores_bpf_stats(tmp_path):
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        before = f.read().strip()
    sleeper = subprocess.Popen(["sleep", "30"])
    out = tmp_path / "t.json"
    try:
        tr = subprocess.Popen([TRACER, "--no-sample", "--pid", str(sleeper.pid), "--json",
                               str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert wait_attached(tr.pid), "the tracer never attached"
        os.kill(tr.pid, signal.SIGTERM)
        assert tr.wait(timeout=30) == 0
    finally:
        os.kill(sleeper.pid, signal.SIGKILL)
        sleeper.wait()
    snap = json.loads(out.read_text())
    assert str(sleeper.pid) in snap["processes"]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        assert f.read().strip() == before


# ---- VM subset (tests/vm/run-vmtest.sh, Debian stock 6.1) ------------------------------

vm_only = pytest.mark.skipif(not VMTEST, reason="runs inside the VM (make vmtest)")


@pytest.mark.parametrize("strategy", ("one-copy", "zero-copy"))
@pytest.mark.parametrize("rung", ("fentry", "kprobe"))
def test_forced_rung_exact(tracers, topologies, tmp_path, rung, strategy):
    """--attach fentry|kprobe: where the kernel allows the rung (--probe; the compat build has
    no fexit return values), every copy point is on it and exact, and zero-copy's completions
    and pinned pages with them; elsewhere the tracer refuses the rung with one line, exit 2."""
    probe = tracer_probe()
    if not probe["attach"][rung] or (rung == "fentry" and probe["bpf_build"]["name"] == "compat"):
        cp = subprocess.run([TRACER, "--attach", rung, "--no-sample", "--duration", "0.1"],
                            capture_output=True, text=True, timeout=TIMEOUT)
        assert cp.returncode == 2 and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
        assert f"--attach {rung}: this kernel does not allow" in cp.stderr, cp.stderr
        return
    t = tracers.get("--attach", rung)
    for p in COPY_POINTS + ("zc_completion",):
        assert t.attach[p] == rung, t.attach
    s, c, snap, spid, cpid = run_workload(t, topologies["veth"], tmp_path, strategy, 65536,
                                          COUNTS[65536])
    check_exact(s, c, snap, spid, cpid, strategy)
    if strategy == "one-copy":
        check_histogram(s, snap, spid)
    else:
        zc = snap["zerocopy"]
        assert zc["completed_sends"] == s["zerocopy"]["sends"], (zc, s["zerocopy"])
        assert zc["copied_sends"] == s["zerocopy"]["copied"], (zc, s["zerocopy"])
        assert snap["pinned_pages"] >= s["bytes"] // 4096


def _our_kprobe_events(pid):
    with open("/sys/kernel/tracing/kprobe_events") as f:
        return [line.strip() for line in f if f"netio/p{pid}_" in line]


def test_kretprobes_have_room_and_last_as_long_as_the_tracer(tmp_path):
    """On the kprobe rung the tracer's kretprobes are tracefs events of its own, each with
    room for 4096 calls in flight (the kernel's default is one per CPU without
    CONFIG_PREEMPTION: more threads inside a send lost returns): there while the tracer runs,
    gone when it ends; those of a tracer killed are removed by the next one's start."""
    probe = tracer_probe()
    if not probe["attach"]["kprobe"]:
        pytest.skip("this kernel has no kprobes")
    killed = Tracer("--attach", "kprobe", log=str(tmp_path / "killed.log"))
    events = _our_kprobe_events(killed.proc.pid)
    assert events and all(e.startswith("r4096:") for e in events), events
    os.kill(killed.proc.pid, signal.SIGKILL)
    killed.proc.wait()
    assert _our_kprobe_events(killed.proc.pid) == events      # nobody removed them
    t = Tracer("--attach", "kprobe", log=str(tmp_path / "next.log"))
    try:
        assert _our_kprobe_events(killed.proc.pid) == []
        assert _our_kprobe_events(t.proc.pid)
    finally:
        assert t.close() == 0
    assert _our_kprobe_events(t.proc.pid) == []


# ---- the per-skb programs' two builds, on both kernels ----------------------------------

def test_per_skb_programs_read_as_the_kernel_allows(topologies, tmp_path):
    """The tracepoint rung's per-skb programs read skb memory through bpf_rdonly_cast where
    the kernel has it (6.2+), with probe reads before (the *_pre62 builds): the one loaded
    counts the zero-copy bytes that leave and the fallback copies of the same run."""
    # run-time stats on all the time: the names of the programs that ran are in the snapshot
    args = ("--attach", "tracepoint") + (() if VMTEST else ("--bpf-stats", "always"))
    t = Tracer(*args, log=str(tmp_path / "tp.log"))
    try:
        assert t.attach["pinning"] == "tp_btf" and t.attach["fallback_copy"] == "tp_btf", t.attach
        s, c, snap, spid, cpid = run_workload(t, topologies["veth"], tmp_path, "zero-copy",
                                              65536, COUNTS[65536])
        sent = s["bytes"]
        assert 0.99 * sent <= snap["zc_tx_bytes"] <= sent, (snap["zc_tx_bytes"], sent)
        # a retransmitted zero-copy skb received again is copied again (one skb is 64 KiB
        # at most here: the veth's GSO limit)
        retrans = s["tcp"]["retrans"] or 0
        assert 0.99 * sent <= snap["fallback_copy_bytes"] <= sent + retrans * 65536, \
            (snap["fallback_copy_bytes"], sent, retrans)
        assert snap["drops"] == 0, snap.get("drops_by_cause")
        # the cast build where the kernel has the kfunc, unless the compat build is loaded
        cast = kernel_btf_has("bpf_rdonly_cast") and t.build == "storage"
        suffix = "" if cast else "_pre62"
        programs = snap["self"]["programs"]
        assert f"tp_xmit{suffix}" in programs and f"tp_netif_receive{suffix}" in programs, \
            list(programs)
        other = "_pre62" if not suffix else ""
        assert f"tp_xmit{other}" not in programs
    finally:
        assert t.close() == 0


# ---- the counting level: exact bytes without latency, on both kernels -------------------

@pytest.mark.parametrize("strategy", STRATEGIES)
def test_counting_level_exact(tracers, topologies, tmp_path, strategy):
    """--no-latency --no-sample: no syscall hook attached, no histogram, the same exact
    bytes and copies per process. Where only the send calls count the bytes sent (no exact
    rung, no sock_send_length), the hook stays and says so."""
    t = tracers.get("--no-latency")   # with --no-sample
    s, c, snap, spid, cpid = run_workload(t, topologies["veth"], tmp_path, strategy, 65536,
                                          COUNTS[65536])
    check_exact(s, c, snap, spid, cpid, strategy)
    if t.attach["tx_bytes"] == "tracepoint":
        assert t.attach["syscalls"] != "unavailable", t.attach
        assert "counted from sendto" in snap["attach_why"]["tx_bytes"], snap["attach_why"]
        return
    assert t.attach["syscalls"] == "unavailable", t.attach
    assert snap["latency"] == {"timed": False}
    hists = [v for v in (proc(snap, spid).get("syscalls") or {}).values()
             if isinstance(v, dict) and v.get("hist_log2_ns")]
    assert hists == []


def test_latency_sample_counts_every_call_and_times_1_in_n(topologies, tmp_path):
    """--latency-sample 4: every call counted (bytes and calls exact), each thread times the
    first of every 4 of its traced calls, and the snapshot says so."""
    t = Tracer("--latency-sample", "4", log=str(tmp_path / "sampled.log"))
    try:
        s, c, snap, spid, cpid = run_workload(t, topologies["veth"], tmp_path, "one-copy",
                                              1024, COUNTS[1024])
        check_exact(s, c, snap, spid, cpid, "one-copy")
        assert snap["latency"] == {"timed": True, "sampled_1_in": 4}
        sc = proc(snap, spid)["syscalls"]["sendmsg"]
        assert sc["count"] == s["send_calls"] and sc["bytes"] == s["bytes"]
        check_histogram(s, snap, spid)
    finally:
        assert t.close() == 0


# One thread's calls in a cycle of four classes, 400 of each.
CYCLE_SCRIPT = """
import os, socket
a, b = socket.socketpair()
for _ in range(400):
    b.send(b"x" * 100)
    a.recv(4096)
    os.write(b.fileno(), b"y" * 200)
    os.read(a.fileno(), 4096)
"""


def test_latency_sample_times_each_class_alike(tmp_path):
    """Each class of a thread keeps its own count: a thread whose calls cycle through four
    classes, with --latency-sample 4, times a quarter of each class, not every fourth call
    (which would be one class's only)."""
    snap = trace_script(tmp_path, CYCLE_SCRIPT, "--latency-sample", "4")
    assert snap["latency"] == {"timed": True, "sampled_1_in": 4}
    sc = next(iter(snap["processes"].values()))["syscalls"]
    got = {c: (sc[c]["count"], sc[c]["timed"]) for c in ("sendto", "recvfrom", "write", "read")}
    # 400 calls in a row of one class hold exactly 100 firsts of 4, wherever its count started
    # (the interpreter's reads of its files before the loop may count as reads opened)
    assert got == {c: (400, 100) for c in got}, got
    for c in got:
        assert sum(sc[c]["hist_log2_ns"].values()) == 100, (c, sc[c])


# ---- unrelated syscalls: the syscall rung decides what they pay -------------------------

def _getpid_rate(seconds):
    out = subprocess.run([GETPID, "--seconds", str(seconds)], capture_output=True, text=True,
                         timeout=TIMEOUT, check=True).stdout
    return json.loads(out)


def _syscall_runs(tracer, tmp, name):
    """Runs of the syscall programs (fs_* on the fentry rung, sc_* at sys_enter/sys_exit)
    counted by bpf_stats since the last reset."""
    snap = tracer.snapshot(str(tmp / f"{name}.json"))
    progs = (snap.get("self") or {}).get("programs") or {}
    return sum(p.get("runs") or 0 for k, p in progs.items() if k.startswith(("fs_", "sc_")))


def _unrelated_syscalls(tracer, tmp, name, seconds):
    """(getpid calls, syscall-program runs meanwhile, the runs of as long a window without the
    loop, calls per second) with tracer attached. The idle window's runs are the guest's other
    processes' sends, receives, reads and writes (and the tracers' own polls), which a slow
    guest makes as many of while the loop makes fewer calls; it starts the loop's program for
    one batch of calls too, so that both windows hold one start, exit and read of its output,
    whose reads and writes run programs (bench/NOTES.md, "The guests on a slow host")."""
    tracer.ok("attach")
    tracer.ok("reset")
    time.sleep(seconds)
    _getpid_rate(0.001)
    idle = _syscall_runs(tracer, tmp, f"{name}-idle")
    tracer.ok("reset")
    g = _getpid_rate(seconds)
    runs = _syscall_runs(tracer, tmp, name)
    tracer.ok("detach")
    return g["calls"], runs, idle, g["calls_per_s"]


@vm_only
def test_vm_unrelated_syscalls_run_no_program_on_the_fentry_rung(tmp_path, monkeypatch):
    """On the fentry rung a getpid loop runs none of the tracer's programs; at sys_enter every
    call runs one. Both tracers load in the same guest and attach in turn, interleaved with
    untraced loops; the rates are printed (bench material: ratios in the emulated guest)."""
    fentry = Tracer("--bpf-stats", "always", log=str(tmp_path / "fentry.log"))
    monkeypatch.setenv("NETIO_TRACER_SKIP", "fs_sendto_in")   # no fentry rung for syscalls
    sys_enter = Tracer("--bpf-stats", "always", log=str(tmp_path / "sys_enter.log"))
    monkeypatch.delenv("NETIO_TRACER_SKIP")
    try:
        assert sys_enter.attach["syscalls"] in ("tp_btf", "tracepoint"), sys_enter.attach
        if fentry.attach["syscalls"] != "fentry":
            # 5.10's BTF has the syscall wrappers' pt_regs as a declaration only: refused
            assert "fentry: loading its programs failed" in fentry.ready["attach_why"]["syscalls"]
            return
        for t in (fentry, sys_enter):
            t.ok("detach")
        rates = {"untraced": [], "fentry": [], "sys_enter": []}
        for i in range(3):
            rates["untraced"].append(_getpid_rate(0.3)["calls_per_s"])
            calls, runs, idle, rate = _unrelated_syscalls(fentry, tmp_path, f"f{i}", 0.3)
            rates["fentry"].append(rate)
            assert runs - idle < 0.001 * calls, (runs, idle, calls)
            calls, runs, idle, rate = _unrelated_syscalls(sys_enter, tmp_path, f"s{i}", 0.3)
            rates["sys_enter"].append(rate)
            assert runs >= calls, (runs, calls)
        med = {k: sorted(v)[1] for k, v in rates.items()}
        print(f"getpid calls/s in the guest, median of 3: untraced {med['untraced']:.0f}, "
              f"fentry rung {med['fentry']:.0f} ({med['fentry'] / med['untraced']:.3f}), "
              f"sys_enter rung {med['sys_enter']:.0f} "
              f"({med['sys_enter'] / med['untraced']:.3f})")
    finally:
        assert fentry.close() == 0
        assert sys_enter.close() == 0
