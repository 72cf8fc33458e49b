"""The bench's statistics and verdicts (bench/pairs.py, bench/markdown.py): how rounds are
interleaved, how paired ratios are taken and summarized, and how a target is judged."""
import pytest

from bench import ab, harness, markdown, measure_overhead, pairs, run
from bench.config import TARGET_PEER


def test_rounds_reverse_the_order_every_other_round():
    calls = []
    variants = [(name, lambda n=name: calls.append(n) or len(calls)) for name in "ABC"]
    res = pairs.run_interleaved(4, variants)
    assert calls == list("ABCCBAABCCBA")
    # each variant's results in round order, whatever its place in the round
    assert res == {"A": [1, 6, 7, 12], "B": [2, 5, 8, 11], "C": [3, 4, 9, 10]}


def test_ratios_are_paired_within_a_round_and_skip_unknowns():
    ours = [10.0, None, 30.0, 8.0]
    ref = [5.0, 4.0, 0.0, 16.0]
    assert pairs.paired_ratios(ours, ref) == [2.0, 0.5]
    s = pairs.summary([3.0, None, 1.0, 2.0])
    assert s == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3, "lo": 1.0, "hi": 3.0}
    assert pairs.summary([None])["median"] is None
    assert pairs.fmt(pairs.summary([])) == "n/a"
    assert pairs.fmt(s, 1) == "2.0 (min 1.0, max 3.0, n=3)"


def test_ratio_of_two_variants_pairs_round_by_round():
    res = pairs.Rounds(["full", "untraced"])
    res["full"] += [{"recv_gbps": 8.0}, {"recv_gbps": 9.0}, {"recv_gbps": 4.0}]
    res["untraced"] += [{"recv_gbps": 10.0}, {"recv_gbps": 9.0}, {"recv_gbps": 8.0}]
    s = pairs.ratio(res, "full", "untraced")
    assert s["n"] == 3
    assert s["median"] == pytest.approx(0.8)
    assert (s["min"], s["max"]) == (pytest.approx(0.5), pytest.approx(1.0))


def test_pairs_the_machine_ran_unsteadily_around_are_left_out_and_counted():
    # the probe's per-CPU rates, in call order: before round 1, after each run, ...
    speeds = iter([(100, 100), (100, 98), (100, 97),             # round 1: steady
                   (100, 100), (60, 100), (100, 100),            # round 2: CPU 0 slowed
                   (50, 50), (52, 51), (51, 50)])                # round 3: slow, but steady
    variants = [("full", lambda: {"recv_gbps": 9.0}), ("untraced", lambda: {"recv_gbps": 10.0})]
    res = pairs.run_interleaved(3, variants, probe=lambda: next(speeds))
    assert res.steady("full", "untraced") == [True, False, True]
    s = pairs.ratio(res, "full", "untraced")
    assert (s["n"], s["left_out"]) == (2, 1)
    assert pairs.fmt(s, 1) == "0.9 (min 0.9, max 0.9, n=2, 1 unsteady left out)"
    # a probe that failed (None) leaves its pair in; no probe at all leaves every pair in
    assert pairs.steady_speeds([None, (100,), (91,)])
    assert not pairs.steady_speeds([(100, 100), (100, 89)])
    assert pairs.run_interleaved(2, variants).steady("full", "untraced") == [True, True]
    # a miss is profiled only where a steady pair measured one
    assert measure_overhead.below(s, 0.95) and not measure_overhead.below(s, 0.9)
    assert not measure_overhead.below(pairs.ratio(res, "full", "untraced") | {"median": None}, 0.95)


def test_the_median_interval_widens_to_min_max_below_nine_rounds():
    assert pairs.median_interval([5, 1, 4, 2, 3]) == (1, 5)          # 93.75%: min, max
    # 9 values: the 2nd smallest and 2nd largest hold the median with 96%, the 3rd only 82%
    assert pairs.median_interval(list(range(1, 10))) == (2, 8)
    assert pairs.median_interval(list(range(1, 10)), level=0.8) == (3, 7)
    assert pairs.median_interval([7.0]) == (7.0, 7.0)


def test_verdicts_are_met_missed_or_undecided_by_the_interval():
    met = pairs.summary([0.97, 0.98, 0.99, 1.0, 1.01])
    assert markdown.verdict(met, 0.97) == "met"
    missed = pairs.summary([0.93, 0.94, 0.95, 0.95, 0.96])
    assert markdown.verdict(missed, 0.97) == "**missed by 0.020**"
    assert markdown.verdict(missed, TARGET_PEER) == "**missed by 0.050**"
    close = pairs.summary([0.80, 0.87, 0.879, 0.95, 0.99])   # median 0.879, just below 0.88
    assert markdown.verdict(close, 0.88) == "undecided (0.800–0.990 spans 0.88)"
    assert markdown.verdict(pairs.summary([]), 0.97) == "n/a"
    # fewer than 5 pairs (unsteady ones left out): no verdict, however far from the target
    few = pairs.summary([0.5, 0.6, 0.55, 0.52])
    assert pairs.classify(few, 0.97) == "undecided"
    assert markdown.verdict(few, 0.97) == "undecided (n=4: a verdict needs 5)"
    assert markdown.verdict(None, 0.97) == "n/a"


def test_summary_counts_met_undecided_and_missed_and_names_the_worst():
    b = harness.Bench.__new__(harness.Bench)     # no cgroup or temp dir: only the verdicts
    b.verdicts = []
    b.record("overhead", "a", pairs.summary([0.98, 0.99, 1.0, 0.99, 0.98]), 0.97)
    b.record("overhead", "b", pairs.summary([0.85, 0.90, 0.92, 0.88, 0.91]), 0.97)
    b.record("overhead", "c", pairs.summary([0.90, 0.96, 1.1, 0.95, 1.0]), 0.97)
    b.record("overhead", "d", pairs.summary([]), 0.97)
    md = markdown.summary_md(b.verdicts, [])
    assert "| overhead (≥ 0.97) | 1/4 | 2/4 | 1/4 | 0.900 vs 0.97 (b) |" in md


def test_ab_compares_two_builds_level_by_level():
    a = ab._args(["--old", "/o", "--new", "/n", "--levels", "counting"])
    assert (a.old, a.new, a.levels) == ("/o", "/n", ["counting"])
    assert ab.LEVELS["counting"] == ["--no-latency", "--no-sample", "--no-counters"]
    with pytest.raises(SystemExit) as e:
        ab._args(["--old", "/o", "--levels", "counting,bogus"])
    assert e.value.code == 2
    runs = [{"messages": 10, "bpf_programs": {"a": 100, "b": 300}},
            {"messages": 20, "bpf_programs": {"a": 400, "b": 200}}]
    # medians per message: a 15 (10, 20), b 20 (30, 10)
    assert ab._top_programs(runs) == "b 20, a 15"


def test_the_summary_says_how_steady_the_machine_was():
    md = markdown.speed_md([((100, 200), (99, 190)), ((100, 200), (50, 200)),
                            (None, (100, 200))])
    assert "1 of 3 runs saw the speed change" in md
    assert "CPU 0 100 (min 50, max 100, n=5)" in md and "CPU 1 200 (min 190, max 200, n=5)" in md
    assert markdown.speed_md([]) == "No machine speed probe ran."


def test_the_bench_refuses_a_number_option_not_above_0(capsys):
    for flag in ("--rounds", "--one-copy-rounds", "--duration", "--guest-seconds"):
        with pytest.raises(SystemExit) as e:
            run._parse_args([flag, "0"])
        assert e.value.code == 2
        assert capsys.readouterr().err.strip().endswith(f"error: {flag} must be more than 0")
    with pytest.raises(SystemExit) as e:
        run._parse_args(["--help"])
    assert e.value.code == 0
    assert "--iperf3-duration IPERF3_DURATION" in capsys.readouterr().out
