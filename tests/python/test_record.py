from analysis import record, results
from netio_trace.run.params import Config

CFG = Config("zero-copy", 65536, 2, "veth")
SERVER = {"role": "server", "strategy": "zero-copy", "size": 65536, "threads": 2,
          "bytes": 655360000, "messages": 10000, "seconds": 0.5, "throughput_gbps": 10.48576,
          "send_calls": 10010, "partial_retries": 10, "enobufs_retries": 0,
          "tcp": {"cc": "cubic", "retrans": 3, "rtt_us": 40, "segs_out": 20000,
                  "bytes_retrans": 4344},
          "zerocopy": {"sends": 10010, "completions": 10010, "copied": 10010},
          "per_thread": [{"conn": 0, "throughput_gbps": 5.2, "tcp": {"cc": "cubic"}},
                         {"conn": 1, "throughput_gbps": 5.3, "tcp": {"cc": "cubic"}}],
          "errors": 0, "error": None}
CLIENT = {"role": "client", "size": 65536, "threads": 2, "bytes": 655360000, "messages": 10000,
          "seconds": 0.501, "recv_calls": 30000, "verify_errors": 0, "errors": 0, "error": None}
SNAP = {"attach": {"tx_bytes": "tracepoint", "fallback_copy": "tp_btf"},
        "tx_bytes": 655360008, "rx_copy_bytes": 655360008,
        "processes": {"100": {"comm": "netio-server", "tx_bytes": 655360000, "tx_copy_bytes": 0,
                              "zc_tx_bytes": 655360000, "rx_copy_bytes": 8, "pinned_pages": 170000},
                      "101": {"comm": "netio-client", "tx_bytes": 8, "rx_copy_bytes": 655360000}},
        "netns": {"4026532000": {"zc_tx_bytes": 655360000, "fallback_copy_bytes": 300000000},
                  "4026532001": {"zc_tx_bytes": 0, "fallback_copy_bytes": 355360000}},
        "syscalls": {"sendmsg": {"count": 10010, "p99_us": 80.0}}, "drops": 0,
        "perf": {"cycles": None, "context-switches": 50, "unsupported": ["cycles"]},
        "samples": {"total": 900, "source": "cpu-clock", "freq": 999}}


def test_build_run_fields():
    run = record.build_run(CFG, 1, 0.5, SERVER, CLIENT, SNAP, 100, 101, {"samples": 900})
    for k in ("strategy", "msg_size", "threads", "transport", "repeat", "duration_s",
              "bytes_sent", "bytes_received", "messages_sent", "throughput_gbps", "latency_us",
              "tcp", "zerocopy", "trace", "attribution", "perf"):
        assert k in run
    assert run["latency_us"] == 0.5 * 2 / 10000 * 1e6
    assert run["tcp"] == {"cc": "cubic", "retrans": 3, "rtt_us": 40, "segs_out": 20000,
                          "bytes_retrans": 4344}
    t = run["trace"]
    # the server's tx fields, the client's rx copy, the namespaces' softirq fields summed
    assert t["tx_bytes"] == 655360000 and t["rx_copy_bytes"] == 655360000
    assert t["zc_tx_bytes"] == 655360000 and t["pinned_pages"] == 170000
    assert t["fallback_copy_bytes"] == 655360000
    assert t["attach"]["fallback_copy"] == "tp_btf"
    assert run["perf"]["cycles"] is None
    # a tracer that did not count what was copied again: null, not 0
    assert t["fallback_copy_again_bytes"] is None


def test_bytes_copied_again_summed_over_namespaces():
    netns = {"1": {"fallback_copy_bytes": 300, "fallback_copy_again_bytes": 20},
             "2": {"fallback_copy_bytes": 400, "fallback_copy_again_bytes": 5}}
    run = record.build_run(CFG, 1, 0.5, SERVER, CLIENT, dict(SNAP, netns=netns), 100, 101)
    assert run["trace"]["fallback_copy_again_bytes"] == 25
    row = results.csv_row(run)
    assert row["fallback_copy_bytes"] == 700 and row["fallback_copy_again_bytes"] == 25


def test_check_consistent_run():
    run = record.build_run(CFG, 0, 0.5, SERVER, CLIENT, SNAP, 100, 101)
    checks, reasons = record.check(run, SERVER, CLIENT)
    assert reasons == []
    assert checks["sent_eq_received"] and checks["tracer_tx_eq_sent"]
    assert checks["zc_completions_eq_sends"]


def test_check_catches_inconsistency():
    client = {**CLIENT, "bytes": CLIENT["bytes"] - 4096}
    server = {**SERVER, "zerocopy": {"sends": 10, "completions": 9, "copied": 9}}
    snap = {**SNAP, "processes": {**SNAP["processes"],
                                  "100": {**SNAP["processes"]["100"], "tx_bytes": 1}}}
    run = record.build_run(CFG, 0, 0.5, server, client, snap, 100, 101)
    checks, reasons = record.check(run, server, client)
    text = "; ".join(reasons)
    assert "bytes sent 655360000 != bytes received" in text
    assert "completions 9 != sends 10" in text
    assert "tracer tx_bytes 1 != bytes sent" in text


def test_check_reports_workload_error():
    server = {**SERVER, "error": "peer went away", "errors": 1}
    run = record.build_run(CFG, 0, 0.5, server, CLIENT, None, 100, 101)
    checks, reasons = record.check(run, server, CLIENT)
    assert checks["server_ok"] is False and "peer went away" in reasons[0]
    assert run["trace"] is None


def test_retrans_share():
    assert record.retrans_share({"tcp": {"retrans": 30, "segs_out": 1000}}) == 0.03
    assert record.retrans_share({"tcp": {"retrans": 3, "segs_out": 0}}) is None
    assert record.retrans_share({}) is None


def test_receive_kinds_in_the_record_and_checked():
    """A run names its receive (and its --mss); the client's bytes by kind go into
    `received`, and each kind the tracer counted is checked against the client's."""
    cfg = Config("zero-copy", 65536, 2, "loopback", "mmap")
    client = dict(CLIENT, receive="mmap", mss=4108,
                  received={"copied": 360000, "mapped": 655000000, "discarded": 0, "spliced": 0},
                  per_thread=[{"rcv_mss": 4096}, {"rcv_mss": 4096}])
    procs = dict(SNAP["processes"])
    procs["101"] = {"comm": "netio-client", "rx_copy_bytes": 360000,
                    "rx_mapped_bytes": 655000000, "rx_discarded_bytes": 0,
                    "rx_spliced_bytes": None}
    snap = dict(SNAP, processes=procs)
    run = record.build_run(cfg, 0, 0.5, SERVER, client, snap, 100, 101, mss=4108)
    assert run["receive"] == "mmap" and run["mss"] == 4108
    assert run["received"] == {"copied": 360000, "mapped": 655000000, "discarded": 0,
                               "spliced": 0, "rcv_mss": 4096, "cpu_s": None}
    assert run["trace"]["rx_mapped_bytes"] == 655000000
    assert run["trace"]["rx_spliced_bytes"] is None
    checks, reasons = record.check(run, SERVER, client)
    assert checks["tracer_rx_eq_received"] and checks["tracer_rx_mapped_bytes_eq_client"]
    assert checks["tracer_rx_discarded_bytes_eq_client"] is True
    assert checks["tracer_rx_spliced_bytes_eq_client"] is None       # unavailable: unchecked
    assert not reasons
    # a mapped byte the tracer missed is an inconsistency, named
    procs["101"] = dict(procs["101"], rx_mapped_bytes=654999999)
    run = record.build_run(cfg, 0, 0.5, SERVER, client, dict(SNAP, processes=procs), 100, 101)
    checks, reasons = record.check(run, SERVER, client)
    assert checks["tracer_rx_mapped_bytes_eq_client"] is False
    assert "tracer rx_mapped_bytes 654999999 != the client's mapped bytes 655000000" in reasons
    assert "mss" not in run            # no --mss: no field


def test_old_client_copied_everything():
    run = record.build_run(CFG, 0, 0.5, SERVER, CLIENT, SNAP, 100, 101)
    assert run["receive"] == "copy"
    assert run["received"]["copied"] == CLIENT["bytes"] and run["received"]["mapped"] == 0
