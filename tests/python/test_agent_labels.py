"""The agent's label sets (netio_trace/agent/labels.py): carried totals, counters that never
go backwards, idle expiry, bounded labels; and the exposition made from them."""
import os
import socket
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from netio_trace.agent import exposition, labels, server  # noqa: E402
from netio_trace.agent.procinfo import Whois  # noqa: E402


class FakeWhois:
    """pid → cgroup /cg<pid // 100>, netns 1; counts the reads and forgets."""

    def __init__(self):
        self.reads, self.forgotten = 0, []

    def of(self, pid, comm=None):
        self.reads += 1
        return {"cgroup": f"/cg{pid // 100}", "netns": 1}

    def forget(self, pid):
        self.forgotten.append(pid)

    def keep(self, pids):
        list(pids)


def proc(comm, tx, rx=0, calls=1, hist=None):
    p = {"comm": comm, "tx_bytes": tx, "tx_copy_bytes": tx, "tx_spliced_bytes": 0,
         "zc_tx_bytes": 0, "rx_copy_bytes": rx, "tx_calls": calls, "rx_copy_calls": 0}
    if hist:
        p["syscalls"] = {"sendto": {"count": sum(hist.values()), "timed": sum(hist.values()),
                                    "mean_us": 10.0, "hist_log2_ns": hist}}
    return p


def sock(pid, tx, peer_local=True, local="127.0.0.1:1", proto="tcp"):
    return {"pid": pid, "comm": "s", "proto": proto, "family": "ipv4", "local": local,
            "peer": "127.0.0.1:2", "netns": 7, "path": "veth", "peer_local": peer_local,
            "tx_bytes": tx, "tx_copy_bytes": tx, "zc_tx_bytes": 0, "fallback_copy_bytes": 0}


def tx_of(agg, key):
    t = agg.processes.live.get(key)
    return t.counters.get("tx_bytes") if t else None


def test_processes_of_one_label_set_sum_and_an_ended_one_carries_its_total():
    agg = labels.Aggregator(FakeWhois())
    agg.add({"processes": {"101": proc("a", 100), "102": proc("a", 50)}}, now=0)
    assert tx_of(agg, ("/cg1", "a", "1")) == 150
    # 102 ended (its entry went): what it counted stays; 101 goes on
    agg.add({"processes": {"101": proc("a", 130)}}, now=1)
    assert tx_of(agg, ("/cg1", "a", "1")) == 180


def test_an_entry_that_starts_again_adds_its_whole_value_never_goes_backwards():
    whois = FakeWhois()
    agg = labels.Aggregator(whois)
    seen = []
    for n, tx in enumerate((100, 400, 30, 50)):    # 30: a new entry (a reused pid)
        agg.add({"processes": {"101": proc("a", tx)}}, now=n)
        seen.append(tx_of(agg, ("/cg1", "a", "1")))
    assert seen == [100, 400, 430, 450]
    assert whois.forgotten == [101]             # its labels are read again


def test_histograms_add_their_gains_per_slot():
    agg = labels.Aggregator(FakeWhois())
    agg.add({"processes": {"101": proc("a", 1, hist={"1024": 2})}}, now=0)
    agg.add({"processes": {"101": proc("a", 2, hist={"1024": 3, "4096": 1}),
                           "102": proc("a", 1, hist={"1024": 1})}}, now=1)
    slots, secs = agg.processes.live[("/cg1", "a", "1")].hists["sendto"]
    assert slots[10] == 4 and slots[12] == 1 and sum(slots) == 5
    assert abs(secs - 5 * 10e-6) < 1e-12


def test_every_call_counts_beside_the_timed_ones():
    """netio_syscalls_total gains every call a class counted, the histogram only the timed
    ones (1 in 16 by default); a process's entry that starts again adds its whole count."""
    def sampled(count, timed):
        p = proc("a", count)
        p["syscalls"] = {"sendto": {"count": count, "timed": timed, "mean_us": 10.0,
                                    "hist_log2_ns": {"1024": timed}}}
        return p
    agg = labels.Aggregator(FakeWhois())
    for n, (count, timed) in enumerate(((32, 2), (160, 10), (16, 1))):   # 16: a new entry
        agg.add({"processes": {"101": sampled(count, timed)}}, now=n)
    t = agg.processes.live[("/cg1", "a", "1")]
    assert t.calls == {"sendto": 176}
    assert sum(t.hists["sendto"][0]) == 11
    text = exposition.render(agg, {}, {}).decode()
    assert 'netio_syscalls_total{cgroup="/cg1",comm="a",netns="1",syscall="sendto"} 176' in text


def test_idle_label_sets_leave_and_resume_from_their_totals():
    agg = labels.Aggregator(FakeWhois(), idle_expiry=10)
    agg.add({"processes": {"101": proc("a", 100), "201": proc("b", 5)}}, now=0)
    agg.add({"processes": {"101": proc("a", 100), "201": proc("b", 6)}}, now=11)
    assert ("/cg1", "a", "1") not in agg.processes.live          # idle 11 s: gone
    assert tx_of(agg, ("/cg2", "b", "1")) == 6
    text = exposition.render(agg, {}, {}).decode()
    assert 'comm="a"' not in text and 'comm="b"' in text
    # it comes back (a new process of that set): its counter resumes, never below 100
    agg.add({"processes": {"102": proc("a", 7)}}, now=12)
    assert tx_of(agg, ("/cg1", "a", "1")) == 107


def test_label_sets_are_bounded_pid_only_when_asked():
    agg = labels.Aggregator(FakeWhois(), max_series=2)
    agg.add({"processes": {"101": proc("a", 1), "102": proc("a", 1), "201": proc("b", 1),
                           "301": proc("c", 1), "401": proc("d", 1)}}, now=0)
    assert set(agg.processes.live) == {("/cg1", "a", "1"), ("/cg2", "b", "1"),
                                       (labels.OVERFLOW,) * 3}
    assert tx_of(agg, (labels.OVERFLOW,) * 3) == 2 and agg.processes.folded == 2
    with_pid = labels.Aggregator(FakeWhois(), labels=("pid",))
    with_pid.add({"processes": {"101": proc("a", 1), "102": proc("a", 1)}}, now=0)
    assert set(with_pid.processes.live) == {("/cg1", "a", "1", "101"), ("/cg1", "a", "1", "102")}
    assert len(labels.bound("x" * 5000)) == labels.MAX_LABEL_LEN


def test_sockets_by_peer_and_proto_carry_their_totals():
    agg = labels.Aggregator(FakeWhois())
    agg.add({"processes": {}, "sockets": [sock(101, 10), sock(101, 5, local="127.0.0.1:3"),
                                          sock(101, 7, peer_local=False, local="10.0.0.1:4")]}, now=0)
    agg.add({"processes": {}, "sockets": [sock(101, 12)]}, now=1)
    local = agg.sockets.live[("/cg1", "s", "7", "local", "tcp")].counters["tx_bytes"]
    remote = agg.sockets.live[("/cg1", "s", "7", "remote", "tcp")].counters["tx_bytes"]
    assert (local, remote) == (17, 7)


def test_the_exposition_uses_trace_openmetrics_names_and_the_agents_own():
    agg = labels.Aggregator(FakeWhois())
    trace = {"processes": {"101": proc("a", 100, hist={"1024": 1})}, "sockets": [sock(101, 100)],
             "drops_by_cause": {"map_full": 3}, "sockets_untracked": 2, "tcp_ends_lost": 1,
             "self": {"bpf_ns": 5e8}}
    agg.add(trace, now=0)
    # the BPF time is an estimate from stats windows: a lower one later leaves the counter
    later = dict(trace, self={"bpf_ns": 4.9e8})
    agg.add(later, now=1)
    text = exposition.render(agg, later, {"agent": 1.5, "tracer": 2.0}).decode()
    for line in ('netio_tx_bytes_total{cgroup="/cg1",comm="a",netns="1"} 100.0',
                 'netio_socket_tx_bytes_total{cgroup="/cg1",comm="s",netns="7",peer="local",'
                 'proto="tcp"} 100.0',
                 'netio_syscall_latency_seconds_bucket{cgroup="/cg1",comm="a",le="+Inf",'
                 'netns="1",syscall="sendto"} 1.0',
                 'netio_agent_drops_total{cause="map_full"} 3.0',
                 'netio_agent_sockets_untracked_total 2.0', 'netio_agent_tcp_ends_lost_total 1.0',
                 'netio_agent_cpu_seconds_total{process="tracer"} 2.0',
                 'netio_agent_bpf_seconds_total 0.5'):
        assert line in text, line
    assert text.endswith("# EOF\n")


def test_whois_reads_proc_once_per_pid_and_comm(tmp_path):
    (tmp_path / "5" / "ns").mkdir(parents=True)
    (tmp_path / "5" / "cgroup").write_text("1:cpu:/\n0::/a/b\n")
    (tmp_path / "5" / "ns" / "net").write_text("")
    w = Whois(proc=str(tmp_path))
    assert w.of(5, "x")["cgroup"] == "/a/b"
    (tmp_path / "5" / "cgroup").write_text("0::/moved\n")
    assert w.of(5, "x")["cgroup"] == "/a/b"         # cached
    assert w.of(5, "y")["cgroup"] == "/moved"       # it exec'd: read again
    assert w.of(6, "z") == {"cgroup": "unknown", "netns": "unknown"}   # gone before seen


def test_the_verdict_metric_says_trace_s_zero_copy_verdict_per_cgroup_and_comm():
    from netio_trace.agent.verdicts import zerocopy_verdicts
    s = sock(101, 1000)
    s.update(comm="a", path="loopback", tx_calls=1, send_size_log2={"512": 1})
    trace = {"processes": {"101": proc("a", 1000)}, "sockets": [s]}
    found = zerocopy_verdicts(trace, FakeWhois())
    assert found == {("/cg1", "a", "would not help")}       # delivered locally
    text = exposition.render(labels.Aggregator(FakeWhois()), {}, {}, found).decode()
    assert 'netio_zerocopy_verdict{cgroup="/cg1",comm="a",verdict="would not help"} 1.0' in text


def test_a_socket_seen_local_stays_local_when_tcp_ends_forgets_its_peer():
    agg = labels.Aggregator(FakeWhois())
    agg.add({"processes": {}, "sockets": [sock(101, 10)]}, now=0)
    agg.add({"processes": {}, "sockets": [sock(101, 25, peer_local=False)]}, now=1)
    assert agg.sockets.live[("/cg1", "s", "7", "local", "tcp")].counters["tx_bytes"] == 25
    assert ("/cg1", "s", "7", "remote", "tcp") not in agg.sockets.live


def test_the_server_closes_connections_past_its_bound_and_still_serves():
    """MAX_CONNECTIONS silent clients hold every slot: the next is closed at once; when they
    go, /metrics answers again."""
    s = server.MetricsServer("127.0.0.1:0", lambda: (True, "ok"))
    s.publish(b"# EOF\n")
    s.start()
    try:
        held = [socket.create_connection(("127.0.0.1", s.port))
                for _ in range(server.MAX_CONNECTIONS)]
        extra = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        assert extra.recv(1) == b""             # closed, not held
        extra.close()
        for c in held:
            c.close()
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=5) as r:
                    assert r.read() == b"# EOF\n"
                    break
            except OSError:
                time.sleep(0.1)     # the held threads see their close
        else:
            raise AssertionError("no answer once the slots were free")
    finally:
        s.close()


def test_the_exposition_parses_as_openmetrics_with_every_series():
    """The text the agent writes itself, read back by prometheus_client's strict OpenMetrics
    parser: every family typed, histograms whole (cumulative buckets, +Inf, _count, _sum),
    label values with quotes, backslashes and newlines escaped, # EOF last."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    agg = labels.Aggregator(FakeWhois())
    odd = 'a"b\\c\nd'
    agg.add({"processes": {"101": proc(odd, 1 << 40, hist={"1024": 2, "65536": 1}),
                           "201": proc("b", 5, hist={"2048": 1})},
             "sockets": [sock(101, 100)]}, now=0)
    text = exposition.render(agg, {"drops_by_cause": {"map_full": 3}}, {"agent": 1.5}).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    tx = {s.labels["comm"]: s.value for s in families["netio_tx_bytes"].samples}
    assert tx == {odd: float(1 << 40), "b": 5.0}
    hist = [s for s in families["netio_syscall_latency_seconds"].samples
            if s.labels["comm"] == odd]
    count = [s.value for s in hist if s.name.endswith("_count")]
    inf = [s.value for s in hist if s.labels.get("le") == "+Inf"]
    assert count == inf == [3.0]
    assert families["netio_agent_drops"].samples[0].value == 3.0


def test_a_scrape_renders_once_per_snapshot_and_never_during_an_add():
    s = server.MetricsServer("127.0.0.1:0", lambda: (True, "ok"))
    made = []
    s.publish(lambda: made.append(1) or b"# EOF\n")
    assert made == []                   # nothing made until a scrape asks
    s.start()
    try:
        url = f"http://127.0.0.1:{s.port}/metrics"
        for _ in range(2):
            with urllib.request.urlopen(url, timeout=5) as r:
                assert r.read() == b"# EOF\n"
        assert made == [1]              # the second scrape got the same bytes
        got = []
        with s.exposition.lock:         # the main thread adding a snapshot
            s.publish(lambda: b"# next\n# EOF\n")
            t = threading.Thread(
                target=lambda: got.append(urllib.request.urlopen(url, timeout=5).read()))
            t.start()
            time.sleep(0.3)
            assert got == []            # the scrape waits for the add to end
        t.join(5)
        assert got == [b"# next\n# EOF\n"]
    finally:
        s.close()
