"""Where zero-copy wins, on the real kernel (needs root).

- sendfile, io-uring and io-uring-zc move exact bytes over loopback and veth (--verify);
- --udp over the forward path: every datagram reaches the forwarding namespace, the copy
  strategies and both zero-copy strategies, completions accounted like TCP's (exactly once,
  COPIED or not as the kernel says), and a packet socket on the path turning them into copies;
  the destination is an address of the run's own `dst` namespace, where none arrive;
- the tracer's tx_bytes, tx_copy_bytes, tx_spliced_bytes, zc_tx_bytes and fallback copy
  against the workloads' own counts, for our workloads and for any program sending a file;
- bad input: one line, exit 2.
A kernel without a feature skips with the reason (SEND_ZC's usage report is 6.2+, forwarded
skbs keep their pages since 6.17). Binaries come from $NETIO_BUILD (default <repo>/build).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import (BUILD, CLIENT, REPO, SERVER, TRACER, namespaces, needs_built, needs_root,
                      wait_line)
from netio_trace.system.netns import FORWARD_DEST_ADDR
from netio_trace.system.procs import GatedProcess, wait_listening
from netio_trace.tracer import needs_skb_programs
from test_tracer import (Tracer, follow_afresh, lent, proc, run_workload, tracer_cache,  # noqa: F401
                         tracers)

KERNEL = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
# 20000 x 1000 B and 2000 x 64 KiB per connection: the latter writes 128 MiB per sendfile
# connection under --verify, past the 64 MiB after which the file's old pages are punched out
COUNTS = {1000: 20000, 65536: 2000}
FORWARD_SIZES = (1024, 64512)
FORWARD_COUNT = 3000
TRACED_COUNT = 1000
# NETIO_VMTEST=1: inside Debian's 6.1 under QEMU/TCG (tests/vm/run-vmtest.sh), slow: less data
VMTEST = os.environ.get("NETIO_VMTEST") == "1"
# the forward sender's run, long enough for its datagrams and the destination's address to be
# seen while it sends (`ip` run in turn, slow under QEMU/TCG: bench/NOTES.md, "The guests on
# a slow host")
SEND_SECONDS = 1.5
if VMTEST:
    COUNTS, FORWARD_COUNT, TRACED_COUNT = {1000: 500, 65536: 100}, 200, 100
    SEND_SECONDS = 6
FIELD_COPY = ("two-copy", "one-copy", "per-field", "io-uring")
ZEROCOPY = ("zero-copy", "io-uring-zc")

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]


def refusal(strategy):
    """netio-server's one line when it cannot run strategy here, else None."""
    r = subprocess.run([SERVER, "--strategy", strategy, "--size", "8", "--threads", "1",
                        "--port", "0", "--count", "1", "--check"], capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr.strip()


def need(strategy):
    why = refusal(strategy) if strategy in ("io-uring", "io-uring-zc") else None
    if why:
        pytest.skip(f"this kernel cannot run {strategy}: {why}")


def one_line(cp):
    lines = [l for l in cp.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, cp.stderr
    return lines[0]


tcp_topo = namespaces("loopback", "veth")
fwd = namespaces("forward")


# ---- TCP: exact bytes ------------------------------------------------------------------

def run_tcp(topo, strategy, size, count, threads=2):
    srv = subprocess.Popen([SERVER, "--netns", topo.sender_ns, "--port", "0", "--strategy",
                            strategy, "--size", str(size), "--threads", str(threads), "--count",
                            str(count), "--verify"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        port, head = wait_listening(srv.stderr.fileno(), 60)
        assert port, head + srv.stderr.read()
        cli = subprocess.run([CLIENT, "--netns", topo.receiver_ns, "--addr", topo.server_addr,
                              "--port", str(port), "--threads", str(threads), "--size",
                              str(size), "--verify"], capture_output=True, text=True, timeout=120)
        out, err = srv.communicate(timeout=120)
        err = head + err
    finally:
        if srv.poll() is None:
            os.kill(srv.pid, signal.SIGKILL)
            srv.wait()
    assert srv.returncode == 0, err
    assert cli.returncode == 0, cli.stderr
    return json.loads(out), json.loads(cli.stdout)


@pytest.mark.parametrize("size", sorted(COUNTS))
@pytest.mark.parametrize("strategy", ("sendfile", "io-uring", "io-uring-zc"))
def test_tcp_strategy_moves_exact_bytes(tcp_topo, strategy, size):
    need(strategy)
    s, c = run_tcp(tcp_topo, strategy, size, COUNTS[size])
    expected = 2 * COUNTS[size] * size
    assert s["bytes"] == c["bytes"] == expected
    assert s["messages"] == 2 * COUNTS[size]
    assert c["verify_errors"] == 0 and c["verify_bad_messages"] == 0
    assert s["proto"] == "tcp"
    zc = s["zerocopy"]
    if strategy == "io-uring-zc":
        # one notification per send, each buffer reused only after it; local delivery
        # copies every one of them (COPIED), as it does MSG_ZEROCOPY's
        assert zc["sends"] == zc["completions"] == zc["notifications"] == s["send_calls"]
        assert zc["unexpected"] == 0
        assert zc["copied"] == zc["completions"]
    else:
        assert zc["sends"] == zc["completions"] == 0
        assert s["send_calls"] == s["messages"] + s["partial_retries"]


# ---- forward: datagrams, completions ---------------------------------------------------

def run_udp(fwd, strategy, size, count=FORWARD_COUNT, threads=2, tracer_json=None,
            level="full", skb_programs=None):
    """The sender over forward (under netio-tracer at level when tracer_json is given, its
    per-skb programs attached from the start where the strategy may send zero-copy unless
    skb_programs says otherwise); (its JSON, datagrams the forwarding namespace's interface
    received meanwhile)."""
    skb = skb_programs or ("always" if needs_skb_programs(strategy) else "on-demand")
    before = fwd.datagrams_seen()
    argv = [SERVER, "--netns", fwd.sender_ns, "--addr", fwd.server_addr, "--port", "5301",
            "--udp", "--strategy", strategy, "--size", str(size), "--threads", str(threads),
            "--count", str(count)]
    if tracer_json:
        argv = [TRACER, "--no-sample", *LEVELS[level], "--json", str(tracer_json),
                "--skb-programs", skb] + \
            [a for ns in fwd.namespaces for a in ("--netns", ns)] + ["--"] + argv
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), fwd.datagrams_seen() - before


# two threads: on the kprobe rung of a kernel without CONFIG_PREEMPTION, a one-vCPU guest, more
# than the kernel's default kretprobe instances (one per CPU) would have held (kretprobes.c)
SENDER_THREADS = 2


def follow_udp(tracer, fwd, strategy, size, count, tmp):
    """The sender over forward, followed by a --control tracer from its first syscall (as
    run_udp's under netio-tracer -- CMD); (its JSON, the tracer's snapshot after it)."""
    out, err = tmp / "sender.json", tmp / "sender.err"
    sender = GatedProcess([SERVER, "--netns", fwd.sender_ns, "--addr", fwd.server_addr,
                           "--port", "5301", "--udp", "--strategy", strategy, "--size",
                           str(size), "--threads", str(SENDER_THREADS), "--count",
                           str(count)],
                          str(out), str(err))
    try:
        follow_afresh(tracer, fwd.namespaces, [sender.pid], needs_skb_programs(strategy))
        sender.release()
        assert sender.wait(120) == 0, err.read_text()
    finally:
        sender.kill()
    return json.loads(out.read_text()), tracer.snapshot(str(tmp / "snapshot.json"))


@pytest.mark.parametrize("size", FORWARD_SIZES)
@pytest.mark.parametrize("strategy", FIELD_COPY + ZEROCOPY)
def test_forward_every_datagram_arrives_whole(fwd, strategy, size):
    need(strategy)
    s, seen = run_udp(fwd, strategy, size)
    assert s["proto"] == "udp" and s["error"] is None
    assert s["messages"] == 2 * FORWARD_COUNT
    assert s["bytes"] == s["messages"] * size
    # one datagram per message (per-field: 8 sends corked into one), nothing fragmented
    assert seen == s["messages"]
    zc = s["zerocopy"]
    if strategy in ZEROCOPY:
        assert zc["sends"] == zc["completions"] == s["messages"], zc
        assert zc["unexpected"] == 0 and zc["notifications"] > 0
    else:
        assert zc["sends"] == zc["completions"] == 0
    if strategy == "per-field":
        assert s["send_calls"] == 8 * s["messages"]


@pytest.mark.parametrize("strategy", ("one-copy", "zero-copy"))
def test_forward_destination_is_our_namespace_and_receives_nothing(fwd, strategy):
    """The datagrams are addressed to the run's own `dst` namespace, which holds the address
    while they are sent; the forwarding namespace counts every one and drops it by its
    blackhole route: none leave it towards dst, none arrive there."""
    assert fwd.dest_ns in fwd.namespaces and fwd.dest_ns.endswith("-dst")
    before = fwd.destination_packets()
    assert None not in before, before
    seen0 = fwd.datagrams_seen()
    srv = subprocess.Popen([SERVER, "--netns", fwd.sender_ns, "--addr", fwd.server_addr,
                            "--port", "5301", "--udp", "--strategy", strategy, "--size", "4096",
                            "--threads", "1", "--duration", str(SEND_SECONDS)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while fwd.datagrams_seen() == seen0 and srv.poll() is None:
            assert time.monotonic() < deadline, "no datagram reached the forwarding namespace"
            time.sleep(0.05)
        assert srv.poll() is None, "the sender ended before the address could be checked"
        addrs = subprocess.run(["ip", "-n", fwd.dest_ns, "-j", "addr", "show"], check=True,
                               capture_output=True, text=True).stdout
        held = [(a["ifname"], i["local"]) for a in json.loads(addrs)
                for i in a.get("addr_info", []) if i["family"] == "inet"]
        assert ("nio-d", fwd.server_addr) in held, held
        out, err = srv.communicate(timeout=30)
    finally:
        if srv.poll() is None:
            os.kill(srv.pid, signal.SIGKILL)
            srv.wait()
    assert srv.returncode == 0, err
    s = json.loads(out)
    assert s["messages"] > 0 and s["error"] is None
    assert fwd.datagrams_seen() - seen0 == s["messages"]
    assert fwd.destination_packets() == before == (0, 0)
    if strategy == "zero-copy" and KERNEL >= (6, 17):
        assert s["zerocopy"]["copied"] == 0, s["zerocopy"]


@pytest.mark.skipif(KERNEL < (6, 17), reason="before 6.17 every received zero-copy skb is "
                    "copied, forwarded or not: the forward path keeps no pages here")
@pytest.mark.parametrize("strategy", ZEROCOPY)
def test_forward_zerocopy_is_not_copied(fwd, strategy):
    need(strategy)
    for size in FORWARD_SIZES:
        s, _ = run_udp(fwd, strategy, size)
        assert s["zerocopy"]["copied"] == 0, s["zerocopy"]


@pytest.mark.skipif(KERNEL >= (6, 17), reason="from 6.17 a forwarded skb keeps its pages "
                    "(test_forward_zerocopy_is_not_copied)")
@pytest.mark.parametrize("strategy", ZEROCOPY)
def test_forward_zerocopy_copied_before_6_17(fwd, strategy):
    """Before 6.17 the receive path copies every zero-copy skb it takes in, forwarded or not
    (skb_orphan_frags_rx): the report then says so, from these completions."""
    need(strategy)
    s, _ = run_udp(fwd, strategy, 16384)
    assert s["zerocopy"]["copied"] == s["zerocopy"]["completions"] == s["messages"]


def test_forward_packet_socket_turns_zerocopy_into_copies(fwd):
    holder = subprocess.Popen(["ip", "netns", "exec", fwd.receiver_ns, sys.executable, "-c",
                               "import socket, sys; s = socket.socket(socket.AF_PACKET, "
                               "socket.SOCK_RAW, socket.htons(3)); print('open', flush=True); "
                               "sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert fwd.packet_sockets() >= 1
        s, seen = run_udp(fwd, "zero-copy", 8192, count=500)
        assert seen == s["messages"]
        assert s["zerocopy"]["copied"] == s["zerocopy"]["completions"] == s["messages"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert fwd.packet_sockets() == 0


# ---- the tracer against the workloads' own counts --------------------------------------

# the tracer's levels, each exact: the full default, and counting (with
# --no-sample, as every tracer here)
LEVELS = {"full": (), "counting": ("--no-latency",)}


# and the full level with every thread's storage refused: each event counted through its
# CPU's spill slot (bpf/maps.bpf.h), which must not take another thread's state with it
TRACERS = {**LEVELS, "spilled": ()}


@pytest.fixture(scope="module", params=sorted(TRACERS))
def tracer(request, tmp_path_factory):
    if request.param == "full":
        with lent(request.getfixturevalue("default_tracer")) as t:
            yield t
        return
    if request.param == "spilled":
        os.environ["NETIO_TEST_NO_THREAD_STORAGE"] = "1"
    try:
        t = Tracer(*TRACERS[request.param],
                   log=str(tmp_path_factory.mktemp("tracer") / "tracer.log"))
    finally:
        os.environ.pop("NETIO_TEST_NO_THREAD_STORAGE", None)
    yield t
    assert t.close() == 0


@pytest.mark.parametrize("strategy", ("sendfile", "io-uring", "io-uring-zc"))
def test_tracer_tcp_counts_match(tracer, tcp_topo, tmp_path, strategy, request):
    need(strategy)
    s, c, snap, spid, cpid = run_workload(tracer, tcp_topo, tmp_path, strategy, 65536,
                                          TRACED_COUNT)
    sp = proc(snap, spid)
    sent = s["bytes"]
    assert sent == c["bytes"] > 0
    assert sp["tx_bytes"] == sent and proc(snap, cpid)["rx_copy_bytes"] == sent
    assert snap["drops"] == 0, snap.get("drops_by_cause")
    # the compat build keeps no per-thread storage: nothing to refuse, nothing spills
    spilled = request.node.callspec.params["tracer"] == "spilled"
    assert (snap["thread_storage_spilled"] > 0) == (spilled and tracer.build == "storage")
    if strategy == "sendfile":
        # page-cache pages spliced: sent, not copied
        assert sp["tx_spliced_bytes"] == sent
        assert sp["tx_copy_bytes"] <= 0.01 * sent and sp["zc_tx_bytes"] == 0
    elif strategy == "io-uring":
        assert sp["tx_copy_bytes"] == sent and sp["tx_spliced_bytes"] == sp["zc_tx_bytes"] == 0
    else:
        assert sp["zc_tx_bytes"] == sent and sp["tx_copy_bytes"] == 0
        assert sp["tx_spliced_bytes"] == 0
        # local delivery copied them all back (a retransmitted skb is received, and copied,
        # again: at least the bytes sent, as for MSG_ZEROCOPY in test_tracer.py)
        assert snap["fallback_copy_bytes"] >= 0.99 * sent


@pytest.mark.parametrize("strategy", ("one-copy", "per-field") + ZEROCOPY)
@pytest.mark.parametrize("level", sorted(LEVELS))   # varies slowest: one tracer a level
def test_tracer_forward_counts_match(tracers, fwd, tmp_path, strategy, level):
    need(strategy)
    s, snap = follow_udp(tracers.get(*LEVELS[level]), fwd, strategy, 16384, TRACED_COUNT,
                         tmp_path)
    sent = s["bytes"]
    # the sender is the one process followed (its comm may be an io_uring worker's)
    (sp,) = [p for p in snap["processes"].values() if p["tx_bytes"]]
    assert sp["tx_bytes"] == snap["tx_bytes"] == sent, (sp["tx_bytes"], snap["tx_bytes"], sent)
    assert snap["drops"] == 0, snap.get("drops_by_cause")
    if strategy in ZEROCOPY:
        # every byte pinned or copied, once; before 5.18 the first bytes of each datagram, up
        # to MAX_HEADER less the headers (148 here), are copied into its linear part
        assert sp["zc_tx_bytes"] == snap["zc_tx_bytes"] >= 0.99 * sent
        assert snap["zc_tx_bytes"] + snap["tx_copy_bytes"] == sent
        if KERNEL >= (6, 17):
            # forwarded to a blackhole: nothing copied the pages
            assert snap["fallback_copy_bytes"] == 0
            assert s["zerocopy"]["copied"] == 0
        else:
            # every received skb's pinned bytes copied before it is forwarded
            assert snap["fallback_copy_bytes"] == snap["zc_tx_bytes"]
            assert s["zerocopy"]["copied"] == s["zerocopy"]["completions"]
    elif strategy == "per-field" and snap["attach"]["tx_copy"] in ("fentry", "kprobe"):
        # a datagram corked with MSG_MORE is checksummed while copied
        # (csum_and_copy_from_iter_full), a copy no probe of these rungs sees: inferred on the
        # tracepoint rung only
        assert snap["zc_tx_bytes"] == 0 and snap["tx_copy_bytes"] <= sent
    else:
        assert snap["zc_tx_bytes"] == 0 and snap["tx_copy_bytes"] == sent



def test_claims_without_the_process_statistics_go_to_the_spill(tracers, fwd, tmp_path):
    """A UDP MSG_ZEROCOPY socket's bytes count as its datagrams leave a device, pending on the
    socket until its owner claims them: at its next send, and at the snapshot for the last
    ones. Where the process's statistics cannot be had at a claim (NETIO_TEST_CLAIM_TO_SPILL:
    as a burst of new processes can leave tgid_stats' element cache empty), the claim goes to
    the spill map as a thread's flush does: exact, per process and per socket, no drop. The
    compat build keeps nothing pending (bpf/maps.bpf.h): the same figures exact there."""
    need("zero-copy")
    t = tracers.get(env={"NETIO_TEST_CLAIM_TO_SPILL": "1"})
    s, snap = follow_udp(t, fwd, "zero-copy", 16384, TRACED_COUNT, tmp_path)
    sent = s["bytes"]
    (pid,) = [p for p, x in snap["processes"].items() if x["tx_bytes"]]
    sp = snap["processes"][pid]
    assert snap["drops"] == 0, snap.get("drops_by_cause")
    assert sp["zc_tx_bytes"] == snap["zc_tx_bytes"] >= 0.99 * sent
    assert snap["zc_tx_bytes"] + snap["tx_copy_bytes"] == sent
    socks = [k for k in snap["sockets"] if k["pid"] == int(pid)]
    assert sum(k["zc_tx_bytes"] for k in socks) == sp["zc_tx_bytes"], socks


def test_udp_zero_copy_before_the_per_skb_programs_is_null(fwd, tmp_path):
    """A UDP MSG_ZEROCOPY sender at the counting level, the per-skb programs on demand: its
    zero-copy bytes count only as they leave a device, so those of the datagrams sent before
    the programs were attached went uncounted: zc_tx_bytes null, with why, never short."""
    need("zero-copy")
    out = tmp_path / "trace.json"
    s, _ = run_udp(fwd, "zero-copy", 16384, count=TRACED_COUNT, tracer_json=out,
                   level="counting", skb_programs="on-demand")
    snap = json.loads(out.read_text())
    if snap["zerocopy"]["skb_programs"]["mode"] != "on-demand":
        pytest.skip("the per-skb programs do not wait here (zero-copy bytes not counted at "
                    "the send)")
    (sp,) = [p for p in snap["processes"].values() if p["tx_bytes"]]
    assert sp["tx_bytes"] == snap["tx_bytes"] == s["bytes"]
    skb = snap["zerocopy"]["skb_programs"]
    # (attached by the tracer's next poll, every 20-50 ms: maybe after the last datagram)
    assert skb["zc_uncounted_sends_before"] >= 1, skb
    assert snap["zc_tx_bytes"] is None and sp["zc_tx_bytes"] is None
    assert snap["fallback_copy_bytes"] is None
    assert "only the per-skb programs count" in snap["unavailable"]["zc_tx_bytes"]


SENDFILE_PROGRAM = r"""
import os, socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def drain():
    c, _ = srv.accept()
    while c.recv(1 << 16):
        pass
t = threading.Thread(target=drain); t.start()
fd = os.memfd_create("page"); os.write(fd, os.urandom(1 << 20))
s = socket.create_connection(srv.getsockname())
print("ready", flush=True)
sys.stdin.readline()
sent = 0
for _ in range(64):
    sent += s.sendfile(os.fdopen(os.dup(fd), "rb"), 0, 1 << 20)
s.close(); t.join()
print(sent, flush=True)
"""


def test_trace_pid_of_any_program_sending_a_file(tmp_path):
    """A program of someone else's that sends a file (a web server, say), followed with
    --pid: its bytes are sent, not copied."""
    prog = subprocess.Popen([sys.executable, "-c", SENDFILE_PROGRAM], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out = tmp_path / "t.json"
    try:
        assert prog.stdout.readline().strip() == "ready"
        tr = subprocess.Popen([TRACER, "--no-sample", "--pid", str(prog.pid), "--json",
                               str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        # everything is attached and counting once it says so (a slow guest can take minutes)
        wait_line(tr, f"following pid {prog.pid}", 300)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        sent = int(prog.stdout.readline())
        prog.wait(timeout=60)
        assert tr.wait(timeout=60) == 0, tr.stderr.read()
    finally:
        for p in (prog,):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    snap = json.loads(out.read_text())
    p = snap["processes"][str(prog.pid)]
    assert sent == 64 << 20
    # what a miss needs to be understood: the process's counts, drops, the send programs' runs
    why = (p, snap.get("drops"), {k: v for k, v in ((snap.get("self") or {}).get("programs")
                                                    or {}).items() if "send" in k})
    assert p["tx_bytes"] == sent and p["tx_spliced_bytes"] == sent, why
    assert p["tx_copy_bytes"] <= 0.01 * p["tx_bytes"]


# ---- bad input -------------------------------------------------------------------------

def test_bad_input_one_line_exit_2(fwd):
    common = ["--threads", "1", "--port", "5301", "--count", "1"]
    cases = [
        ([SERVER, "--strategy", "sendfile", "--size", "1K", "--udp", "--addr", "10.0.0.1",
          *common], "sendfile cannot run over --udp"),
        ([SERVER, "--strategy", "one-copy", "--size", "1K", "--udp", *common], "--udp needs --addr"),
        ([SERVER, "--strategy", "one-copy", "--size", "1K", "--udp", "--addr", "10.0.0.1",
          "--cc", "cubic", *common], "--cc is for TCP"),
        # fits the 64 MiB of a TCP message, not one unfragmented datagram on forward
        ([SERVER, "--netns", fwd.sender_ns, "--strategy", "zero-copy", "--size", "65508",
          "--udp", "--addr", fwd.server_addr, *common], "must fit the path MTU 65535"),
        ([SERVER, "--netns", fwd.sender_ns, "--strategy", "one-copy", "--size", "1M",
          "--udp", "--addr", fwd.server_addr, *common], "at most 65507 bytes"),
    ]
    for argv, needle in cases:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert cp.returncode == 2, (argv, cp.stderr)
        assert needle in one_line(cp) and cp.stdout == ""


def test_io_uring_disabled_is_one_line_exit_2():
    path = "/proc/sys/kernel/io_uring_disabled"
    if not os.path.exists(path):
        pytest.skip("kernel.io_uring_disabled does not exist here (before 6.6)")
    with open(path) as f:
        before = f.read().strip()
    try:
        with open(path, "w") as f:
            f.write("2")
        for strategy in ("io-uring", "io-uring-zc"):
            cp = subprocess.run([SERVER, "--strategy", strategy, "--size", "1K", "--threads",
                                 "1", "--port", "0", "--count", "1"], capture_output=True,
                                text=True, timeout=30)
            assert cp.returncode == 2 and cp.stdout == ""
            assert "io_uring is disabled on this machine (kernel.io_uring_disabled = 2)" \
                in one_line(cp)
    finally:
        with open(path, "w") as f:
            f.write(before)


# ---- the sweep driver and the report -----------------------------------------------------

def _run_namespaces(pid):
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in names.splitlines() if l.startswith(f"netio-{pid}-")]


@pytest.mark.skipif(VMTEST, reason="host suite: a sweep is too slow under QEMU/TCG")
def test_sweep_forward_destination_held_by_its_own_namespace(tmp_path):
    """While `run` sends over forward, the destination address belongs to one of the run's
    own namespaces (`ip -n <ns> addr`), and they are all gone after it."""
    env = dict(os.environ, NETIO_BUILD=BUILD)
    drv = subprocess.Popen([os.path.join(REPO, "netio-trace"), "run", "--strategies", "one-copy",
                            "--sizes", "4K", "--threads", "1", "--transport", "forward",
                            "--repeat", "1", "--duration", "3", "--no-trace", "--no-report",
                            "--out", str(tmp_path / "sweep")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline, held = time.monotonic() + 30, None
        while held is None and drv.poll() is None and time.monotonic() < deadline:
            for ns in (n for n in _run_namespaces(drv.pid) if n.endswith("-dst")):
                r = subprocess.run(["ip", "-n", ns, "-4", "-o", "addr", "show"],
                                   capture_output=True, text=True)
                if f" {FORWARD_DEST_ADDR}/" in r.stdout:
                    held = ns
            time.sleep(0.1)
        assert held, "no namespace of the run held the forward destination"
        assert drv.wait(timeout=120) == 0, drv.stderr.read()[-3000:]
    finally:
        if drv.poll() is None:
            os.kill(drv.pid, signal.SIGKILL)
            drv.wait()
    assert _run_namespaces(drv.pid) == []
    (run,) = [json.loads(l) for l in (tmp_path / "sweep" / "runs.jsonl").read_text().splitlines()]
    assert run["status"] == "ok" and run["transport"] == "forward"
    assert run["forward"]["datagrams_seen"] == run["forward"]["datagrams_sent"] > 0


@pytest.mark.skipif(VMTEST, reason="host suite: a sweep is too slow under QEMU/TCG")
def test_sweep_over_forward_and_veth_reports_where_zerocopy_wins(tmp_path):
    out = tmp_path / "sweep"
    env = dict(os.environ, NETIO_BUILD=BUILD)
    cp = subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--strategies",
                         "one-copy,zero-copy", "--sizes", "4K,32K", "--threads", "1",
                         "--transport", "forward,veth", "--repeat", "1", "--duration", "0.2",
                         "--out", str(out)], capture_output=True, text=True, env=env,
                        timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    runs = [json.loads(l) for l in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2 * 2 * 2 * 2 and all(r["status"] == "ok" for r in runs)
    for r in runs:
        if r["transport"] == "forward":
            f = r["forward"]
            assert f["datagrams_seen"] == f["datagrams_sent"] == r["messages_sent"]
            assert f["packet_sockets"] == 0 and r["bytes_received"] is None
        else:
            assert "forward" not in r and r["bytes_received"] == r["bytes_sent"]
        if r["strategy"] == "zero-copy":
            zc = r["zerocopy"]
            assert zc["completions"] == zc["sends"] > 0
            if r["transport"] == "veth":
                assert zc["copied"] == zc["completions"]
            elif KERNEL >= (6, 17):
                assert zc["copied"] == 0
                if r["traced"]:
                    assert r["trace"]["fallback_copy_bytes"] == 0
                    assert r["trace"]["zc_tx_bytes"] == r["bytes_sent"]
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    for col in ("tx_spliced_bytes", "datagrams_seen", "datagrams_lost", "packet_sockets"):
        assert col in header
    report = (out / "report.md").read_text()
    assert "Where zero-copy wins: the forward path" in report
    assert "Against the local paths" in report
    assert "forward, 1 thread(s)" in report
