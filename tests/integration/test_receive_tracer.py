"""The tracer's receive kinds against the client's own count: rx_copy_bytes,
rx_mapped_bytes, rx_discarded_bytes and rx_spliced_bytes of the receiving process and of its
socket, exact for every receive strategy, over loopback and veth, on the rung the kernel gives
(this file runs in the guests of `make vmtest` too). A kind no rung counts here is null, and
the snapshot's `unavailable` says why: never 0 for unknown."""
import pytest

from conftest import needs_built, needs_root
from netio_trace.preflight import probe_zerocopy_receive
from test_tracer import (Tracer, proc, run_workload, tracer, tracer_cache,  # noqa: F401
                         tracers, topologies)

pytestmark = [needs_root("BPF, network namespaces"),
              needs_built("netio-tracer", "netio-server", "netio-client")]

KINDS = (("copied", "rx_copy_bytes"), ("mapped", "rx_mapped_bytes"),
         ("discarded", "rx_discarded_bytes"), ("spliced", "rx_spliced_bytes"))
POINT = {"rx_mapped_bytes": "rx_mapped", "rx_discarded_bytes": "rx_discarded",
         "rx_spliced_bytes": "rx_spliced"}
SIZE, COUNT = 65536, 600


def check_kinds(snap, c, cpid):
    """Each kind, per process and on the client's data socket, equal to the client's count,
    or null with its reason where no rung counts it."""
    p = proc(snap, cpid)
    # the data socket: the one that received more than the 4-byte hello's echo of nothing
    (sock,) = [s for s in snap["sockets"] if s["pid"] == cpid
               and sum(s[f] or 0 for _k, f in KINDS) > 4] or [None]
    for kind, field in KINDS:
        want = c["received"][kind]
        if field != "rx_copy_bytes" and snap["attach"][POINT[field]] == "unavailable":
            assert p[field] is None and field in snap["unavailable"], (field, snap["unavailable"])
            continue
        assert p[field] == want, (field, p[field], want)
        # no record at all where nothing countable happened on it (a discarding or splicing
        # client whose only kinds are unavailable: the compat build on a kernel without kprobes)
        assert (sock[field] if sock is not None else 0) == want, (field, sock)


def skip_mmap_where_refused(receive):
    """netio-client refuses --receive mmap (one line, exit 2: test_receive_workloads) where the
    kernel's TCP_ZEROCOPY_RECEIVE has no copy buffer (before 5.11): nothing to trace there."""
    why = probe_zerocopy_receive() if receive == "mmap" else None
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("transport", ("loopback", "veth"))
@pytest.mark.parametrize("receive,strategy", [("copy", "one-copy"), ("discard", "one-copy"),
                                              ("splice", "one-copy"), ("mmap", "one-copy"),
                                              ("mmap", "zero-copy")])
def test_receive_kinds_exact(tracer, topologies, tmp_path, receive, strategy, transport):  # noqa: F811
    skip_mmap_where_refused(receive)
    s, c, snap, _spid, cpid = run_workload(
        tracer, topologies[transport], tmp_path, strategy, SIZE, COUNT,
        server_args=("--mss", "4108"), client_args=("--receive", receive, "--mss", "4108"))
    assert c["bytes"] == s["bytes"] > 0 and c["receive"] == receive
    check_kinds(snap, c, cpid)
    if receive == "mmap" and strategy == "zero-copy" and transport == "loopback":
        # the tracer sees the mapping the client made: most bytes mapped
        assert c["received"]["mapped"] > 0.9 * c["bytes"]


def test_mapped_after_detach_and_attach(tracer, topologies, tmp_path):  # noqa: F811
    """An untraced run detaches every program, the cgroup one too; attached again it counts
    exactly (the sweep's two passes)."""
    skip_mmap_where_refused("mmap")
    tracer.ok("detach")
    tracer.ok("attach")
    s, c, snap, _spid, cpid = run_workload(
        tracer, topologies["loopback"], tmp_path, "zero-copy", SIZE, COUNT,
        server_args=("--mss", "4108"), client_args=("--receive", "mmap", "--mss", "4108"))
    check_kinds(snap, c, cpid)


def test_splice_without_socket_records_is_unknown(topologies, tmp_path):  # noqa: F811
    """--no-sockets: the tracepoint rung sizes a splice from the socket's record; without it
    the spliced bytes are null, with the reason, never 0."""
    t = Tracer("--no-sockets", log=str(tmp_path / "tracer.log"))
    try:
        _s, c, snap, _spid, cpid = run_workload(
            t, topologies["loopback"], tmp_path, "one-copy", SIZE, 200,
            client_args=("--receive", "splice"))
    finally:
        assert t.close() == 0
    p = proc(snap, cpid)
    if snap["attach"]["rx_spliced"] == "tp_btf":
        assert p["rx_spliced_bytes"] is None and snap["rx_spliced_bytes"] is None
        assert "per-socket record" in snap["unavailable"]["rx_spliced_bytes"]
    elif snap["attach"]["rx_spliced"] == "unavailable":     # no rung at all: said so
        assert p["rx_spliced_bytes"] is None and "rx_spliced_bytes" in snap["unavailable"]
    else:                               # the exact rungs size it from tcp_splice_read
        assert p["rx_spliced_bytes"] == c["received"]["spliced"]


@pytest.mark.parametrize("transport", ("loopback", "veth"))
def test_spliced_exact_without_latency_hooks(tracers, topologies, tmp_path,  # noqa: F811
                                            transport):
    """--no-latency (the counting level): where a rung counts spliced bytes in the splice
    itself (fentry), they stay exact; on the tracepoint rung only tcp_rcv_space_adjust, run
    for every TCP receive of the machine, could count them, and that level gives them up:
    null, and said why."""
    t = tracers.get("--no-latency")
    s, c, snap, _spid, cpid = run_workload(
        t, topologies[transport], tmp_path, "one-copy", SIZE, COUNT,
        client_args=("--receive", "splice"))
    assert c["bytes"] == s["bytes"] > 0 and c["received"]["spliced"] == c["bytes"]
    check_kinds(snap, c, cpid)
    if t.attach["rx_copy"] == "tp_btf":
        assert snap["attach"]["rx_spliced"] == "unavailable"
        assert "counting level" in snap["attach_why"]["rx_spliced"]
        assert "counting level" in snap["unavailable"]["rx_spliced_bytes"]
