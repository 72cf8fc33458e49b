"""bench/unrelated.py and section 8: the ratios taken from the guest's runs. A pair whose two
runs saw different machine speeds (reference blocks/s) is left out of the plain ratios; the
per-block estimate keeps every pair; the section renders a verdict from the steady pairs."""
import types

import pytest

from bench import markdown, measure_overhead, unrelated


def _run(calls, blocks):
    return {"calls_per_s": calls, "blocks_per_s": blocks}


def _result(rounds):
    return {"kernel": "6.1.0-test", "attach": {"fentry": "fentry", "sys_enter": "tp_btf"},
            "samples": None, "seconds": 0.3, "rounds": rounds}


STEADY = {"untraced": _run(1000.0, 100.0), "fentry": _run(990.0, 100.0),
          "sys_enter": _run(500.0, 95.0)}
# the host slowed the fentry run: its ratio alone would read 0.5
UNSTEADY = {"untraced": _run(1000.0, 100.0), "fentry": _run(500.0, 50.0),
            "sys_enter": _run(500.0, 100.0)}


def test_unsteady_pairs_are_left_out_and_counted():
    res = _result([STEADY] * 5 + [UNSTEADY] * 2)
    fentry, left_out = unrelated.ratios(res, "fentry")
    assert fentry == [pytest.approx(0.99)] * 5 and left_out == 2
    sys_enter, left_out = unrelated.ratios(res, "sys_enter")
    assert sys_enter == [pytest.approx(0.5)] * 7 and left_out == 0


def test_per_block_estimate_divides_the_speed_out_of_every_pair():
    res = _result([STEADY, UNSTEADY])
    assert unrelated.normalized_ratios(res, "fentry") == [pytest.approx(0.99),
                                                          pytest.approx(1.0)]


def test_section_renders_the_verdict_from_the_steady_pairs(monkeypatch):
    monkeypatch.setattr(unrelated, "measure",
                        lambda *a, **k: _result([STEADY] * 5 + [UNSTEADY] * 2))
    b = types.SimpleNamespace(args=types.SimpleNamespace(guest_rounds=7, guest_seconds=0.3),
                              verdicts=[])
    b.record = lambda *v: b.verdicts.append(v)
    md = measure_overhead.section_unrelated(b)
    fentry_row = next(line for line in md.splitlines() if line.startswith("| fentry"))
    assert "0.990" in fentry_row and "| 2 |" in fentry_row and "met" in fentry_row
    assert b.verdicts[0][2]["median"] == pytest.approx(0.99)


def test_a_guest_without_result_is_reported_not_raised(monkeypatch):
    def fail(*a, **k):
        raise unrelated.GuestError("the guest gave no result: vng status 124")
    monkeypatch.setattr(unrelated, "measure", fail)
    b = types.SimpleNamespace(args=types.SimpleNamespace(guest_rounds=7, guest_seconds=0.3),
                              verdicts=[])
    b.record = lambda *v: b.verdicts.append(v)
    md = measure_overhead.section_unrelated(b)
    assert "Not measured: the guest gave no result: vng status 124" in md
    assert markdown.verdict(b.verdicts[0][2], unrelated.TARGET) == "n/a"
