import json

import pytest

from netio_trace.run import params as P


def test_default_sweep_shape():
    p = P.SweepParams(**P.DEFAULTS)
    assert p.strategies == ("two-copy", "one-copy", "zero-copy")
    assert p.sizes == (256, 1024, 4096, 16384, 65536)
    assert p.threads == (1, 2, 4, 8)
    assert p.transports == ("veth",)
    assert len(p.configs()) == 60
    assert p.passes == ("untraced", "traced")
    assert len(p.schedule()) == 60 * p.repeat * 2


def test_quick_is_small():
    q = P.SweepParams(**P.QUICK)
    assert len(q.schedule()) <= 36
    assert set(q.strategies) == {"two-copy", "one-copy", "zero-copy"}


def test_schedule_interleaved_rounds_in_both_passes():
    p = P.SweepParams(strategies=("two-copy", "one-copy"), sizes=(256, 4096), threads=(1,),
                      transports=("veth",), duration=0.1, repeat=3)
    sched = p.schedule()
    n = len(p.configs()) * 2
    for r in range(3):
        block = sched[r * n:(r + 1) * n]
        assert {s.repeat for s in block} == {r}
        # every configuration once per pass per round
        assert sorted((s.config.msg_size, s.config.strategy, s.traced) for s in block) == \
            sorted((c.msg_size, c.strategy, t) for c in p.configs() for t in (False, True))
        # group by group (strategies differing only in strategy), the passes in this round's
        # order: untraced first in odd rounds (1st, 3rd), traced first in even ones
        first = r % 2 == 1
        assert [(s.config.msg_size, s.traced, s.config.strategy) for s in block] == [
            (size, t, st) for size in (256, 4096) for t in (first, not first)
            for st in ("two-copy", "one-copy")]
    assert len({s.key() for s in sched}) == len(sched)
    assert all(s.key().endswith("/untraced") != s.traced for s in sched)


def test_single_pass_schedules():
    base = dict(strategies=("two-copy",), sizes=(256,), threads=(1,), transports=("veth",),
                duration=0.1, repeat=2)
    untraced = P.SweepParams(**base, passes=("untraced",))
    assert [s.traced for s in untraced.schedule()] == [False, False] and not untraced.trace
    traced = P.SweepParams(**base, passes=("traced",))
    assert [s.traced for s in traced.schedule()] == [True, True] and traced.trace


def test_old_sweep_files_keep_their_one_pass():
    d = P.SweepParams(**P.QUICK).to_dict()
    del d["passes"]
    assert P.SweepParams.from_dict({**d, "trace": True}).passes == ("traced",)
    assert P.SweepParams.from_dict({**d, "trace": False}).passes == ("untraced",)
    with pytest.raises(P.UsageError):
        P.SweepParams.from_dict({**d, "passes": ["sometimes"]})


def test_sweep_file_roundtrip_and_differences():
    p = P.SweepParams(**P.QUICK)
    d = json.loads(json.dumps(p.to_dict()))
    q = P.SweepParams.from_dict(d)
    assert q == p and q.differences(p) == []
    other = P.SweepParams(**{**P.QUICK, "sizes": (4096,)})
    diffs = p.differences(other)
    assert len(diffs) == 1 and diffs[0].startswith("sizes")


def test_from_dict_refuses_foreign():
    with pytest.raises(P.UsageError):
        P.SweepParams.from_dict({"format": "something else"})
    with pytest.raises(P.UsageError):
        P.SweepParams.from_dict({"format": P.SWEEP_FORMAT, "strategies": ["x"]})


@pytest.mark.parametrize("fn,text", [
    (P.parse_threads, "0"), (P.parse_threads, "100000"), (P.parse_threads, "x"),
    (P.parse_threads, "1,,2"), (P.parse_strategies, "two-copy,nope"), (P.parse_transports, "tcp"),
    (P.parse_duration, "0"), (P.parse_duration, "-1"), (P.parse_duration, "nan"),
    (P.parse_duration, "soon"), (P.parse_repeat, "0"), (P.parse_freq, "0"), (P.parse_attach, "x"),
    (P.parse_sample_source, "ticks"), (P.parse_sample_source, ""),
])
def test_parsers_reject(fn, text):
    with pytest.raises(P.UsageError):
        fn(text)


def test_parsers_accept():
    assert P.parse_threads("8,1,2,2") == (1, 2, 8)
    assert P.parse_strategies("zero-copy,two-copy") == ("zero-copy", "two-copy")
    assert P.parse_transports("veth,loopback") == ("veth", "loopback")
    assert P.parse_duration("0.5") == 0.5


def test_sample_source_in_sweep_identity():
    for src in P.SAMPLE_SOURCES:
        assert P.parse_sample_source(src) == src
    p = P.SweepParams(**P.QUICK, sample_source="tick")
    q = P.SweepParams.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q.sample_source == "tick" and q == p
    assert "on tick" in p.describe()
    diffs = p.differences(P.SweepParams(**P.QUICK))
    assert diffs == ["sample_source tick vs auto"]
    # a sweep.json written before --sample-source existed sampled on auto
    d = p.to_dict()
    del d["sample_source"]
    assert P.SweepParams.from_dict(d).sample_source == "auto"


def test_latency_sample_in_sweep_identity():
    """run --latency-sample N goes into sweep.json and decides what a resume may continue;
    a file written before it had the tracer's default."""
    p = P.SweepParams(**P.QUICK, latency_sample=1)
    q = P.SweepParams.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q.latency_sample == 1 and q == p
    assert "latency timed 1 call in 1" in p.describe()
    assert "latency timed" not in P.SweepParams(**P.QUICK).describe()
    assert p.differences(P.SweepParams(**P.QUICK)) == ["latency_sample 1 vs None"]
    d = p.to_dict()
    del d["latency_sample"]
    assert P.SweepParams.from_dict(d).latency_sample is None


def test_zerocopy_preset_runs_where_zerocopy_can_win():
    """--preset zerocopy: each zero-copy strategy beside the copy it replaces, on
    forward and veth, at sizes one unfragmented datagram holds; no longer than the default."""
    z = P.SweepParams(**P.PRESETS["zerocopy"])
    assert {"forward", "veth"} <= set(z.transports)
    for copy, zc in (("one-copy", "zero-copy"), ("io-uring", "io-uring-zc")):
        assert copy in z.strategies and zc in z.strategies
    assert max(z.sizes) <= 65507 and min(z.sizes) < 16384 < max(z.sizes)
    P.check_combinations(z.strategies, z.sizes, z.transports)      # raises nothing
    assert len(z.schedule()) <= len(P.SweepParams(**P.DEFAULTS).schedule())


def test_receive_preset():
    """--preset receive: every receive strategy behind a sender whose pages can be
    mapped, the same with its fields page-aligned, and one whose cannot, at MSS 4108, over
    loopback and veth; each run names its receive and alignment, copy's runs keep the names
    they had."""
    r = P.SweepParams(**P.PRESETS["receive"])
    assert set(r.receives) == {"copy", "discard", "mmap", "splice"} and r.mss == 4108
    assert set(r.strategies) == {"one-copy", "zero-copy"}
    assert set(r.transports) == {"loopback", "veth"} and r.sizes == (16384, 65536, 262144)
    P.check_combinations(r.strategies, r.sizes, r.transports, r.receives, r.mss)
    slots = r.schedule()
    # 4 receives x 3 senders (one-copy; zero-copy unaligned and page-aligned) x 3 sizes x
    # 2 transports, both passes, 3 rounds: one-copy is not run aligned
    assert len(slots) == 4 * 3 * 3 * 2 * 2 * 3
    keys = {s.key() for s in slots}
    assert len(keys) == len(slots)
    assert "zero-copy+mmap/65536/1/loopback/0" in keys and "one-copy/16384/1/veth/2" in keys
    assert "zero-copy@page+mmap/65536/1/loopback/0" in keys
    assert not any(k.startswith("one-copy@") for k in keys)
    # the receive strategies behind one sender run next to each other
    first = [s.config for s in slots[:4]]
    assert [c.receive for c in first] == ["copy", "discard", "mmap", "splice"]
    assert len({(c.strategy, c.msg_size, c.transport) for c in first}) == 1
    # sweep.json keeps both; one written before them received by copy at the kernel's MSS
    d = r.to_dict()
    assert P.SweepParams.from_dict(d) == r
    del d["receives"], d["mss"], d["aligns"], d["rx_xdp"]
    old = P.SweepParams.from_dict(d)
    assert old.receives == ("copy",) and old.mss is None
    assert old.aligns == ("none",) and old.rx_xdp is False
    assert r.differences(old) == ["receives copy,discard,mmap,splice vs copy", "mss 4108 vs None",
                                  "aligns none,page vs none"]


def test_align_and_rx_xdp():
    """--align page runs the zero-copy strategies aligned, the copying ones as they were;
    --rx-xdp is veth's only (one line otherwise)."""
    r = P.SweepParams(strategies=("one-copy", "zero-copy", "io-uring-zc"), sizes=(65536,),
                      threads=(1,), transports=("veth",), duration=0.5, repeat=1,
                      aligns=("page",), rx_xdp=True)
    assert [(c.strategy, c.align) for c in r.configs()] == [
        ("one-copy", "none"), ("zero-copy", "page"), ("io-uring-zc", "page")]
    assert "XDP_PASS on the receiving veth" in r.describe()
    assert P.parse_aligns("none,page") == ("none", "page")
    with pytest.raises(P.UsageError, match="unknown alignment '4K'"):
        P.parse_aligns("4K")
    P.check_combinations(r.strategies, r.sizes, ("veth",), rx_xdp=True)
    with pytest.raises(P.UsageError, match="--rx-xdp attaches to the receiving veth: "
                       "loopback has none"):
        P.check_combinations(r.strategies, r.sizes, ("veth", "loopback"), rx_xdp=True)


@pytest.mark.parametrize("strategies,sizes,transports,needle", [
    (("sendfile",), (4096,), ("forward",), "sendfile cannot run over forward"),
    (("one-copy",), (65508,), ("forward",), "at most 65507 bytes"),
])
def test_combinations_a_transport_cannot_run(strategies, sizes, transports, needle):
    with pytest.raises(P.UsageError, match=needle):
        P.check_combinations(strategies, sizes, transports)
    # the same on a TCP path is fine
    P.check_combinations(strategies, sizes, ("veth", "loopback"))
