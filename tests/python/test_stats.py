import math

import pytest

from analysis import stats


def test_spread_ignores_missing():
    s = stats.spread([3.0, None, 1.0, float("nan"), 2.0])
    assert s == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert stats.spread([None, float("nan")]) is None
    assert stats.spread([]) is None
    assert stats.spread([1, 2, 3, 4])["median"] == 2.5


def test_group_spread():
    runs = [{"strategy": "a", "msg_size": 1, "threads": 1, "transport": "veth", "v": v}
            for v in (1, 5, 3)]
    g = stats.group_spread(runs, lambda r: r["v"])
    assert g[("a", 1, 1, "veth")]["median"] == 3


def test_paired_ratios_pair_by_round():
    runs = []
    for rep, (a, b) in enumerate([(10, 12), (5, 7), (8, None)]):
        runs.append({"strategy": "A", "msg_size": 4096, "threads": 1, "transport": "veth",
                     "repeat": rep, "v": a})
        if b is not None:
            runs.append({"strategy": "B", "msg_size": 4096, "threads": 1, "transport": "veth",
                         "repeat": rep, "v": b})
    r = stats.paired_ratios(runs, "A", "B", lambda x: x["v"], 4096, 1, "veth")
    assert r == pytest.approx([1.2, 1.4])


SIZES = [256, 1024, 4096, 16384, 65536]


def test_crossover_crosses_between_sizes():
    c = stats.crossover(SIZES, [1.1, 3.0, 7.0, 10.0, 11.0], [1.0, 2.8, 8.0, 11.5, 13.0])
    assert c["kind"] == "crosses"
    assert c["size"] == 4096 and c["between"] == (1024, 4096)
    assert 1024 < c["estimate"] < 4096


def test_crossover_interpolation_is_log_linear():
    # ratio b/a = 0.5 at 1024 and 2.0 at 4096: log-ratio crosses 0 halfway (in log size): 2048
    c = stats.crossover([1024, 4096], [2.0, 1.0], [1.0, 2.0])
    assert c["estimate"] == pytest.approx(2048)


def test_crossover_never_within_range():
    c = stats.crossover(SIZES, [1, 3, 8, 11, 13], [0.3, 1, 2.5, 4, 6])
    assert c["kind"] == "never" and c["size"] is None


def test_crossover_always_ahead():
    c = stats.crossover(SIZES, [1, 2, 3, 4, 5], [1, 2.5, 3.5, 4.5, 5.5])
    assert c["kind"] == "always" and c["size"] == 256


def test_crossover_unclear_when_it_flips():
    c = stats.crossover(SIZES, [1, 2, 3, 4, 5], [1.5, 1.5, 3.5, 3.5, 5.5])
    assert c["kind"] == "unclear"
    c = stats.crossover(SIZES, [1, 2, 3, 4, 5], [0.5, 2.5, 2.5, 4.5, 4.5])
    assert c["kind"] == "unclear" and c["size"] is None


def test_crossover_skips_missing_points():
    c = stats.crossover(SIZES, [1, None, 3, 4, 5], [0.5, 9, 3.5, 4.5, 5.5])
    assert c["kind"] == "crosses" and c["between"] == (256, 4096)
    assert stats.crossover(SIZES, [None] * 5, [1] * 5)["kind"] == "no-data"


def test_ranges_overlap_and_format():
    a = {"median": 2, "min": 1, "max": 3, "n": 3}
    b = {"median": 5, "min": 4, "max": 6, "n": 3}
    assert not stats.ranges_overlap(a, b)
    assert stats.ranges_overlap(a, {"median": 3, "min": 2.5, "max": 4, "n": 2})
    assert stats.fmt_spread(a) == "2.00 (1.00–3.00)"
    assert stats.fmt_spread(None) == "n/a"
    assert stats.fmt_spread({"median": 2, "min": 2, "max": 2, "n": 1}, "{:.1f}", "%") == "2.0%"
    assert not math.isnan(stats.spread([1.0])["median"])
