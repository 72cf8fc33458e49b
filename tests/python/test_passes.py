"""The two passes in analysis (analysis/passes.py) and the extra rounds the sweep adds for
comparisons the noise left undecided (netio_trace/run/extra.py)."""
from analysis import passes
from netio_trace.run import extra
from netio_trace.run import params as P


def _run(strategy, size, repeat, gbps, traced, status="ok"):
    return {"strategy": strategy, "msg_size": size, "threads": 1, "transport": "veth",
            "repeat": repeat, "throughput_gbps": gbps, "traced": traced, "status": status}


def test_split_answers_from_the_untraced_pass():
    runs = [_run("one-copy", 4096, 0, 10, False), _run("one-copy", 4096, 0, 8, True),
            _run("one-copy", 4096, 1, 9, False, status="failed")]
    answers, traced, answers_traced = passes.split(runs)
    assert answers == runs[:1] and traced == runs[1:2] and not answers_traced
    answers, traced, answers_traced = passes.split(runs[1:2])
    assert answers == traced == runs[1:2] and answers_traced


def test_tracer_cost_is_paired_within_rounds():
    runs = [_run("one-copy", 4096, 0, 10, False), _run("one-copy", 4096, 0, 8, True),
            _run("one-copy", 4096, 1, 20, False), _run("one-copy", 4096, 1, 19, True),
            _run("one-copy", 4096, 2, 10, True)]          # no untraced twin: not paired
    cost = passes.tracer_cost(runs)[("one-copy", 4096, 1, "veth")]
    assert cost["n"] == 2 and cost["min"] == 0.8 and cost["max"] == 0.95


def test_verdicts():
    assert passes.verdict([1.1, 1.2]) == "ahead"
    assert passes.verdict([0.8, 0.9]) == "behind"
    assert passes.verdict([0.9, 1.1]) == "undecided"
    assert passes.verdict([]) == "undecided"
    assert passes.undecided([0.9, 1.1]) and not passes.undecided([1.0, 1.1])


def test_extra_rounds_only_for_undecided_groups():
    params = P.SweepParams(strategies=("two-copy", "one-copy"), sizes=(256, 4096), threads=(1,),
                           transports=("veth",), duration=0.1, repeat=2)
    runs = [_run("two-copy", 256, 0, 10, False), _run("one-copy", 256, 0, 11, False),
            _run("two-copy", 256, 1, 10, False), _run("one-copy", 256, 1, 9, False),
            _run("two-copy", 4096, 0, 10, False), _run("one-copy", 4096, 0, 12, False),
            _run("two-copy", 4096, 1, 10, False), _run("one-copy", 4096, 1, 13, False)]
    groups = extra.undecided_groups(params, runs)
    assert [[c.msg_size for c in g] for g in groups] == [[256, 256]]
    assert extra.compared_pairs(("zero-copy", "two-copy", "one-copy")) == [
        ("two-copy", "one-copy"), ("one-copy", "zero-copy")]
    # the budget takes whole groups, in order
    assert extra._fit(groups * 3, per_run=1.0, left_s=4.5) == groups * 2
    assert extra._fit(groups, per_run=1.0, left_s=1.5) == []
