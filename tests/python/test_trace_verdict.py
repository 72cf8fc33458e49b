"""The verdicts of `trace` from synthetic trace objects: each rule, the
figures each verdict names, and that none claims more than its intervals allow."""
from analysis import baseline, crossover, flows, verdict

MiB = 1 << 20


def _sock(pid=10, comm="srv", proto="tcp", path="loopback", tx=100 * MiB, calls=1600,
          copy=None, zc=0, spliced=0, fb=None, rx=0, uring=0, sizes=None, again=None):
    copy = tx - zc - spliced if copy is None else copy
    return {"pid": pid, "comm": comm, "proto": proto, "local": "127.0.0.1:5000",
            "peer": "127.0.0.1:40000", "path": path, "tx_bytes": tx, "tx_calls": calls,
            "tx_copy_bytes": copy, "zc_tx_bytes": zc, "tx_spliced_bytes": spliced,
            "fallback_copy_bytes": fb, "fallback_copy_again_bytes": again, "rx_copy_bytes": rx,
            "rx_calls": 0, "io_uring_sends": uring, "send_size_log2": sizes or {"65536": calls}}


def _trace(*socks):
    procs = {}
    for s in socks:
        p = procs.setdefault(str(s["pid"]), {"comm": s["comm"], "tx_bytes": 0,
                                             "rx_copy_bytes": 0})
        p["tx_bytes"] += s["tx_bytes"]
        p["rx_copy_bytes"] += s["rx_copy_bytes"]
    return {"processes": procs, "sockets": list(socks)}


def _att(n=1000, tx_copy=200, **more):
    counts = dict.fromkeys(verdict.attribution.CATEGORIES, 0)
    counts.update(kernel_tx_copy=tx_copy, **more)
    counts["other"] = n - sum(v for k, v in counts.items() if k != "other")
    return {"samples": n, "samples_by_category": counts}


def _base(kind_by_size):
    """A baseline whose zero-copy/one-copy ratios at each size are all above or all below 1,
    or straddle it."""
    sizes = sorted(kind_by_size)
    rs = [{"ahead": [1.2, 1.3, 1.25], "behind": [0.7, 0.8, 0.75],
           "undecided": [0.9, 1.1, 1.0]}[kind_by_size[s]] for s in sizes]
    c = crossover.decided(sizes, rs)
    return {"dir": "/b", "crossings": {z: {"copy": verdict.COPY_OF[z], "transport": "forward",
                                           "threads": 1, "crossing": c}
                                       for z in ("zero-copy", "io-uring-zc")}}


def _v(sock, att=None, base=None):
    (v,) = verdict.verdicts(_trace(sock), {sock["comm"]: att or _att()}, base)
    return {k: t for k, (_, t) in v["verdicts"].items()}, v


def test_loopback_zerocopy_sender_would_not_help_with_its_evidence():
    v, _ = _v(_sock(zc=100 * MiB, fb=100 * MiB))
    assert v["zero-copy"].startswith("would not help: delivered locally")
    assert ("the kernel copied 100.0 MiB of its 100.0 MiB sent zero-copy back at delivery "
            f"(fallback_copy_bytes {100 * MiB}, zc_tx_bytes {100 * MiB})") in v["zero-copy"]
    assert v["io-uring-zc"].startswith("would not help: delivered locally")


def test_bytes_copied_twice_are_said_apart():
    """More copied back than was sent zero-copy: retransmitted segments that had arrived were
    copied a second time, and the verdict says so in words and figures."""
    v, _ = _v(_sock(zc=100 * MiB, fb=101 * MiB, again=MiB))
    assert ("the kernel copied 101.0 MiB of its 100.0 MiB sent zero-copy back at delivery, "
            "1.0 MiB of it a second time (retransmitted segments that had arrived) "
            f"(fallback_copy_bytes {101 * MiB}, fallback_copy_again_bytes {MiB}, "
            f"zc_tx_bytes {100 * MiB})") in v["zero-copy"]
    # none copied again: no word of it
    v, _ = _v(_sock(zc=100 * MiB, fb=100 * MiB, again=0))
    assert "second time" not in v["zero-copy"] and "again" not in v["zero-copy"]
    # a process's flow (no sockets): the namespaces' figures where one process sends zero-copy
    t = {"processes": {"10": {"comm": "srv", "tx_bytes": 100 * MiB, "tx_calls": 1600,
                              "tx_copy_bytes": 0, "zc_tx_bytes": 100 * MiB}},
         "fallback_copy_bytes": 101 * MiB, "zerocopy": {"fallback_copy_again_bytes": MiB}}
    (f,) = flows.flows(t)
    assert f["fallback_copy_again_bytes"] == MiB
    assert "1.0 MiB of it a second time" in flows.delivery(f)[1]


def test_forward_zerocopy_sender_is_already_in_use_with_no_fallback():
    v, _ = _v(_sock(path="veth", proto="udp", zc=100 * MiB, fb=0))
    assert v["zero-copy"].startswith("already in use: 100.0% of its 100.0 MiB left as user "
                                     "pages, none copied back")
    assert v["sendfile"].startswith("would not help: a UDP socket")
    # nothing is left to copy for io_uring's zero-copy to save
    v, _ = _v(_sock(path="veth", proto="udp", zc=100 * MiB, fb=0),
              base=_base({1024: "behind", 65536: "ahead"}))
    assert v["io-uring-zc"] == "would not help: it copies nothing from user space (tx_copy_bytes 0)"
    # a copying sender whose pages another sender saw kept: the baseline decides
    v, _ = _v(_sock(path="device", proto="udp"), base=_base({1024: "behind", 65536: "ahead"}))
    assert v["io-uring-zc"].startswith("would help: its sends average 64.0 KiB")
    assert "64K: io-uring-zc/io-uring 1.25 (1.20–1.30, ahead)" in v["io-uring-zc"]


def test_where_a_copying_sender_delivers():
    v, _ = _v(_sock(path="loopback"))
    assert v["zero-copy"].startswith("would not help: delivered locally: it runs over loopback")
    # a TCP peer seen on this host: local whatever the device
    s = _sock(path="veth")
    s["peer_local"] = True
    v, _ = _v(s)
    assert v["zero-copy"].startswith("would not help: delivered locally: the other end of its "
                                     "TCP connection is on this host")
    # a veth alone does not say whether the far namespace delivers or forwards
    v, _ = _v(_sock(path="veth", proto="udp"))
    assert v["zero-copy"].startswith("undecided: its route leaves by a veth")
    v, _ = _v(dict(_sock(tx=0, calls=0, rx=100 * MiB), send_size_log2={}))
    assert all(t.startswith("would not help: it sends nothing") for t in v.values())


def test_off_host_sender_against_the_baseline():
    small = _sock(path="device", calls=100 * 1024, sizes={"1024": 100 * 1024})
    v, _ = _v(small, base=_base({1024: "behind", 4096: "behind", 65536: "ahead"}))
    assert v["zero-copy"].startswith("below the crossover: its sends average 1.0 KiB")
    assert "lost to one-copy in every round" in v["zero-copy"]
    big = _sock(path="device")
    v, _ = _v(big, base=_base({1024: "behind", 65536: "ahead"}))
    assert v["zero-copy"].startswith("would help: its sends average 64.0 KiB")
    assert "the copy it removes: 20.0% [17.6–22.6%] of the process's CPU" in v["zero-copy"]
    v, _ = _v(big, base=_base({1024: "behind", 65536: "undecided"}))
    assert v["zero-copy"].startswith("undecided:") and "cannot tell" in v["zero-copy"]
    v, _ = _v(big)
    assert v["zero-copy"].startswith("undecided: no baseline")


def test_a_copy_too_small_or_too_uncertain_to_matter():
    v, _ = _v(_sock(path="device"), att=_att(n=10000, tx_copy=10))
    assert v["zero-copy"].startswith("would not help: its copy from user space took 0.1%")
    assert v["sendfile"].startswith("would not help")
    v, _ = _v(_sock(path="device"), att=_att(n=40, tx_copy=1))
    assert v["sendfile"].startswith("undecided: its copy from user space took 2.5%")


def test_sendfile_in_use_and_io_uring_zerocopy_told_apart():
    v, _ = _v(_sock(spliced=100 * MiB, copy=0))
    assert v["sendfile"].startswith("already in use: 100.0% of its 100.0 MiB spliced")
    v, _ = _v(_sock(path="device", zc=50 * MiB, fb=0, uring=800))
    assert v["io-uring-zc"].startswith("already in use")
    assert not v["zero-copy"].startswith("already in use")


def test_small_flows_get_no_verdict_and_sockets_share_their_process_samples():
    a = _sock(tx=99 * MiB)
    b = _sock(tx=MiB // 200)
    b["local"] = "127.0.0.1:5001"
    vs = verdict.verdicts(_trace(a, b), {"srv": _att()}, None)
    assert len(vs) == 1 and vs[0]["share"] > 0.99
    half = _sock(tx=50 * MiB)
    vs = verdict.verdicts(_trace(half, dict(half, local="127.0.0.1:5001")), {"srv": _att()})
    assert [round(v["cpu"]["tx"]["share"], 3) for v in vs] == [0.1, 0.1]


def test_per_process_flows_without_sockets():
    trace = {"processes": {"7": {"comm": "p", "tx_bytes": 10, "tx_calls": 1, "zc_tx_bytes": 10,
                                 "rx_copy_bytes": 0}},
             "fallback_copy_bytes": 10}
    (f,) = flows.flows(trace)
    assert not f["socket"] and f["fallback_copy_bytes"] == 10
    assert flows.delivery(f)[0] == "local"
    trace["fallback_copy_bytes"] = 0
    kind, why = flows.delivery(flows.flows(trace)[0])
    assert kind == "unknown" and "no per-socket counts" in why


def test_lines_name_each_alternative():
    out = verdict.lines(verdict.verdicts(_trace(_sock(zc=MiB, fb=MiB)), {"srv": _att()}),
                        "no baseline")
    assert out[0].startswith("Would zero-copy pay off?") and "no baseline" in out[0]
    assert [line.split(":")[0].strip() for line in out[2:]] == ["MSG_ZEROCOPY",
                                                                "io_uring SEND_ZC", "sendfile"]


def test_baseline_from_another_machine_is_told():
    b = {"machine": {"hostname": "a", "cpu": "x", "kernel": "6.1"}}
    assert baseline.foreign(b, {"hostname": "a", "cpu": "x"}) is None
    assert "hostname 'a', here 'b'" in baseline.foreign(b, {"hostname": "b", "cpu": "x"})
    assert "kernel 6.1" in baseline.kernel_note(b, {"kernel": "6.18"})
