"""bench.stats_cost's arithmetic: each state's cost a run against its own round's untraced
call, and what the stats reported, over the rounds; and its refusals of bad input."""
import pytest

from bench import stats_cost


def _round(untraced, off, on, reported):
    return {"untraced": {"ns_per_call": untraced}, "stats off": {"ns_per_call": off},
            "stats on": {"ns_per_call": on, "reported_ns_per_run": reported}}


def test_summary_pairs_each_state_with_its_own_round():
    # the host twice as slow in the second round: each round's differences, not the means'
    s = stats_cost.summary([_round(100, 110, 160, 40), _round(200, 214, 290, 50),
                            _round(100, 112, 170, 45)])
    assert s["added_ns_per_run"]["stats off"] == {"median": 12, "min": 10, "max": 14, "n": 3}
    assert s["added_ns_per_run"]["stats on"] == {"median": 70, "min": 60, "max": 90, "n": 3}
    assert s["stats_ns_per_run"] == {"median": 58, "min": 50, "max": 76, "n": 3}
    assert s["reported_ns_per_run"] == {"median": 45, "min": 40, "max": 50, "n": 3}
    assert s["untraced_ns_per_call"]["median"] == 100 and s["rounds"] == 3


def test_a_round_without_a_reported_figure_is_left_out_of_it_only():
    s = stats_cost.summary([_round(100, 110, 160, None), _round(100, 110, 150, 40)])
    assert s["reported_ns_per_run"] == {"median": 40, "min": 40, "max": 40, "n": 1}
    assert s["added_ns_per_run"]["stats on"]["max"] == 60
    assert stats_cost.summary([_round(100, 110, 160, None)])["reported_ns_per_run"] is None


def test_the_order_rotates_every_round(monkeypatch):
    seen = []
    monkeypatch.setattr(stats_cost, "one_state",
                        lambda state, *a: seen.append(state) or {"ns_per_call": 1.0})
    stats_cost.rounds(3, 0.1, 0, "log")
    firsts = seen[0::3]
    assert firsts == ["untraced", "stats off", "stats on"]


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--seconds", "0"], ["--cpu", "4096"]])
def test_bad_input_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as e:
        stats_cost.parse_args(argv)
    assert e.value.code == 2
    assert "bench.stats_cost" in capsys.readouterr().err


class _FakeFloor:
    """A floor whose program counts runs although it was asked to leave the stats off."""
    def __init__(self, hooks, log, stats=True):
        self.attached, self.missing, self.n = hooks, {}, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self):
        self.n += 1000
        return {stats_cost.HOOK: {"runs": self.n, "ns": 40 * self.n}}


def test_stats_someone_else_turned_on_refuse_the_stats_off_state(monkeypatch):
    monkeypatch.setattr(stats_cost, "Floor", _FakeFloor)
    monkeypatch.setattr(stats_cost, "getpid_rate", lambda seconds, cpu: 1e7)
    assert stats_cost.one_state("stats on", 0.1, 0, "log")["reported_ns_per_run"] == 40
    with pytest.raises(RuntimeError, match="stats are on without us"):
        stats_cost.one_state("stats off", 0.1, 0, "log")
