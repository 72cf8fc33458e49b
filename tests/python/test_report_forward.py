"""The report's forward answers from synthetic runs: where each zero-copy strategy
overtakes its copy by size, what the kernel did with the pages as observed, the local paths
beside it, and the warnings a packet socket or lost datagrams call for."""
from report import build as report


def _run(strategy, size, repeat, gbps, transport="forward", traced=False, copied=0, fb=0):
    r = {"strategy": strategy, "msg_size": size, "threads": 1, "transport": transport,
         "repeat": repeat, "traced": traced, "status": "ok", "throughput_gbps": gbps,
         "bytes_sent": 1000, "zerocopy": {"sends": 0, "completions": 0, "copied": 0}}
    if strategy in ("zero-copy", "io-uring-zc"):
        r["zerocopy"] = {"sends": 10, "completions": 10, "copied": copied}
    if traced:
        r["trace"] = {"fallback_copy_bytes": fb, "zc_tx_bytes": 1000}
    if transport == "forward":
        r["forward"] = {"datagrams_sent": 5, "datagrams_seen": 5, "datagrams_lost": 0,
                        "packet_sockets": 0}
    return r


def _sweep(copied=0, fb=0):
    """zero-copy behind one-copy at 4K, ahead at 63K, in both rounds; on veth behind."""
    runs = []
    for rep in (0, 1):
        for size, one, zc in ((4096, 10.0, 8.0), (64512, 100.0, 130.0)):
            runs += [_run("one-copy", size, rep, one), _run("zero-copy", size, rep, zc),
                     _run("zero-copy", size, rep, zc, traced=True, copied=copied, fb=fb)]
        runs += [_run("one-copy", 64512, rep, 50.0, "veth"),
                 _run("zero-copy", 64512, rep, 20.0, "veth")]
    return runs


def test_forward_says_where_zerocopy_wins_and_that_pages_were_kept():
    answers = [r for r in _sweep() if not r["traced"]]
    traced = [r for r in _sweep() if r["traced"]]
    (text,) = report.forward_findings(answers, traced)
    assert "zero-copy overtakes one-copy between 4K and 63K" in text
    assert "4K 0.80" in text and "63K 1.30" in text
    assert "0 of 40 completions (0.0%) came back flagged COPIED" in text
    assert "fallback copy: 0 B" in text and "really was zero-copy" in text
    (veth,) = report.local_contrast(answers)
    assert veth.startswith("veth: zero-copy/one-copy = 0.40")


def test_forward_says_when_the_kernel_copied_after_all():
    runs = _sweep(copied=10, fb=1000)
    (text,) = report.forward_findings([r for r in runs if not r["traced"]],
                                      [r for r in runs if r["traced"]])
    assert "40 of 40 completions (100.0%) came back flagged COPIED" in text
    assert "copied some of them after all" in text and "really was" not in text


def test_packet_socket_and_lost_datagrams_are_flagged():
    runs = [r for r in _sweep() if not r["traced"]]
    assert report.path_warnings(runs) == []
    runs[0]["forward"]["packet_sockets"] = 1
    runs[1]["forward"]["datagrams_lost"] = 3
    warn = " ".join(report.path_warnings(runs))
    assert "AF_PACKET socket" in warn and "lost 3 datagram(s)" in warn


def test_strategy_notes_say_which_do_not_send_heap_fields():
    notes = report.strategy_notes([_run("sendfile", 4096, 0, 1.0, "veth"),
                                   _run("one-copy", 4096, 0, 1.0, "forward")])
    (sendfile,) = [n for n in notes if n.startswith("`sendfile`")]
    assert "(**not** the 8 heap fields)" in sendfile
    assert not any("not** the 8" in n for n in notes if n.startswith("`one-copy`"))
    assert any(n.startswith("transport `forward`") and "blackhole" in n for n in notes)
