"""bench/per_message.py: each program's runs and time divided by the messages sent, dearest
first, beside the empty-program floor on its hooks (bench/floor.py), and the runs per message
read against their target."""
import argparse

import pytest

from bench import floor, per_message

PROGRAMS = {
    "tp_xmit": {"runs": 3000, "ns": 180000, "target": "tp_btf:net_dev_start_xmit"},
    "tp_send_length": {"runs": 1000, "ns": 120000, "target": "tp_btf:sock_send_length"},
    "tp_tcp_probe": {"runs": 0, "ns": 0, "target": "tp_btf:tcp_probe (on demand)"},
    "sc_both": {"runs": 10, "ns": 3000, "target": "tp_btf:sys_enter,tp_btf:sys_exit"},
}
FLOOR_BEFORE = {"tp_btf:net_dev_start_xmit": {"runs": 100, "ns": 5000},
                "tp_btf:sock_send_length": {"runs": 0, "ns": 0},
                "tp_btf:sys_enter": {"runs": 0, "ns": 0}}
FLOOR_AFTER = {"tp_btf:net_dev_start_xmit": {"runs": 3100, "ns": 155000},
               "tp_btf:sock_send_length": {"runs": 1000, "ns": 40000},
               "tp_btf:sys_enter": {"runs": 30, "ns": 600},
               "tp_btf:sys_exit": {"runs": 10, "ns": 1000}}


def test_the_floor_attaches_each_hook_of_the_programs_once():
    assert floor.hooks_of("tp_btf:tcp_probe (on demand)") == ["tp_btf:tcp_probe"]
    assert floor.hooks_of(None) == []
    assert floor.targets(PROGRAMS) == ["tp_btf:net_dev_start_xmit", "tp_btf:sock_send_length",
                                       "tp_btf:tcp_probe", "tp_btf:sys_enter",
                                       "tp_btf:sys_exit"]


def test_the_floor_per_program_is_over_the_run_and_all_its_hooks():
    d = floor.delta(FLOOR_BEFORE, FLOOR_AFTER)
    assert d["tp_btf:net_dev_start_xmit"] == {"runs": 3000, "ns": 150000}
    assert d["tp_btf:sys_exit"] == {"runs": 10, "ns": 1000}     # absent before: from 0
    per = floor.per_program(PROGRAMS, d)
    assert per["tp_xmit"] == 50
    assert per["sc_both"] == pytest.approx((600 + 1000) / 40)
    assert per["tp_tcp_probe"] is None                          # no floor run there


def test_figures_divide_by_the_messages_and_subtract_the_floor():
    fig = per_message.figures(1000, PROGRAMS, floor.delta(FLOOR_BEFORE, FLOOR_AFTER))
    names = [r["program"] for r in fig["programs"]]
    assert names == ["tp_xmit", "tp_send_length", "sc_both"]    # dearest first, no idle one
    xmit = fig["programs"][0]
    assert (xmit["runs_per_message"], xmit["ns_per_run"], xmit["floor_ns_per_run"],
            xmit["own_ns_per_run"]) == (3.0, 60, 50, 10)
    assert fig["runs_per_message"] == pytest.approx(4.01)
    assert fig["ns_per_message"] == pytest.approx(303)
    with pytest.raises(ValueError):
        per_message.figures(0, PROGRAMS)


def _result(transport, strategy, size, level, floor_runs, hooks):
    a = argparse.Namespace(transport=transport, strategy=strategy, size=size, level=level,
                           seconds=2.0)
    fig = per_message.figures(1000, PROGRAMS, floor_runs)
    return {"config": {"transport": transport, "strategy": strategy, "size": size,
                       "level": level, "seconds": a.seconds},
            "machine": {"model": "Test CPU", "kernel": "6.18"}, "srso": "Not affected",
            "runs_per_message_target": per_message.runs_target(transport, strategy, size,
                                                               level),
            "floor": hooks, **fig}


def test_table_has_the_floor_columns_and_the_runs_per_message_verdict():
    res = _result("veth", "one-copy", 16384, "counting", floor.delta(FLOOR_BEFORE, FLOOR_AFTER),
                  {"attached": [], "missing": {"tp_btf:tcp_probe": "no such tracepoint"}})
    lines = per_message.table(res).splitlines()
    assert lines[0].startswith("veth one-copy 16384 B, counting level, 1000 messages in 2 s")
    assert lines[4] == "| `tp_xmit` | 3.00 | 60 | 50 | 10 | 180.0 |"
    assert lines[5] == "| `tp_send_length` | 1.00 | 120 | 40 | 80 | 120.0 |"
    assert lines[7] == "| all | 4.01 | | | | 303.0 |"
    assert "**4.01**, **above the target** ≤ 2" in lines[9]
    assert lines[10] == "No floor on: `tp_btf:tcp_probe` (no such tracepoint)."
    assert not any("tp_tcp_probe" in line for line in lines)    # no runs: left out


def test_runs_per_message_target_applies_only_to_its_cases():
    assert per_message.runs_target("loopback", "one-copy", 16384, "counting") == 2.0
    assert per_message.runs_target("loopback", "one-copy", 16384, "full") is None
    assert per_message.runs_target("veth", "zero-copy", 16384, "counting") is None
    res = _result("veth", "zero-copy", 16384, "counting", None, None)
    lines = per_message.table(res).splitlines()
    assert lines[4] == "| `tp_xmit` | 3.00 | 60 | – | – | 180.0 |"
    assert lines[-2].startswith("Runs per message: 4.01 (the target, ≤ 2, is for")
    assert lines[-1] == "No floor (`--no-floor`)."
    fig = {"runs_per_message": 1.9}
    assert "within the target ≤ 2" in per_message.runs_line(fig, 2.0)


def test_unfollowed_runs_say_so_and_have_no_runs_target():
    assert per_message.runs_target("loopback", "one-copy", 16384, "counting", True) is None
    res = _result("loopback", "one-copy", 16384, "counting", None, None)
    res["config"]["unfollowed"] = True
    title = per_message.table(res).splitlines()[0]
    assert title.startswith("loopback one-copy 16384 B, counting level, not followed (the "
                            "tracer follows another process), 1000 messages")


def test_the_per_skb_programs_as_trace_has_them_are_said():
    res = _result("veth", "zero-copy", 16384, "counting", None, None)
    assert "as `trace` has them" not in per_message.table(res).splitlines()[0]
    res["config"]["skb_programs"] = "trace"
    title = per_message.table(res).splitlines()[0]
    assert title.startswith("veth zero-copy 16384 B, counting level, per-skb programs as "
                            "`trace` has them, 1000 messages")


@pytest.mark.parametrize("args", (["--size", "0"], ["--seconds", "0"], ["--strategy", "nope"],
                                  ["--transport", "forward"], ["--skb-programs", "always"]))
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as e:
        per_message.parse_args(args)
    assert e.value.code == 2
