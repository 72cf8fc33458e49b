"""bench/churn.py: the churn bench's records, verdicts against the per-run bounds, and its
Markdown, from made-up snapshots (the live run: tests/integration/test_churn_bench.py)."""
import argparse

import pytest

from bench import churn, markdown, pairs


def _run(sent=4000, received=4000):
    return {"processes": 2, "threads": 4, "connections": 4, "bytes_sent": sent,
            "bytes_received": received, "seconds": 0.02}


def _snap(fork_ns, tx=4000, rx=4000):
    return {"tx_bytes": tx, "rx_copy_bytes": rx, "forks_followed": 2, "sockets_untracked": 0,
            "thread_storage_spilled": 0, "drops": 0,
            "self": {"programs": {
                "fork_btf": {"runs": 10, "ns": 10 * fork_ns, "target": "tp_btf:x"},
                "tp_thread_exit": {"runs": 10, "ns": 5000},
                "tp_sock_state": {"runs": 40, "ns": 40 * 100},
                "tp_tcp_probe": {"runs": 0, "ns": 0}}}}


def _records(fork_ns_each):
    return [churn.run_record(_run(), _snap(ns)) for ns in fork_ns_each]


def test_a_run_is_exact_only_when_both_byte_totals_equal_the_loads():
    assert churn.run_record(_run(), _snap(500))["exact"]
    assert not churn.run_record(_run(), _snap(500, tx=3999))["exact"]
    assert not churn.run_record(_run(received=3000), _snap(500))["exact"]
    s = churn.exact_summary([churn.run_record(_run(), _snap(500))] * 4
                            + [churn.run_record(_run(), _snap(500, rx=0))])
    assert pairs.classify(s, 1.0) != "met"


@pytest.mark.parametrize("fork_ns, expect", (
    ([500, 600, 700, 800, 900], "met"),
    ([1100, 1200, 1300, 1400, 1500], "**missed** (over by 300 ns)"),
    ([500, 600, 1300, 1400, 1500], "undecided (500–1500 ns spans 1000 ns)"),
    ([500, 600], "undecided (n=2: a verdict needs 5)"),
))
def test_bound_verdicts(fork_ns, expect):
    assert churn.bound_verdict(_records(fork_ns), "fork_btf", 1000) == expect


def test_a_program_that_never_ran_has_no_verdict():
    assert churn.bound_verdict(_records([500] * 5), "tp_tcp_probe", 150) == "n/a (no run)"


def test_verdicts_go_to_the_summary_as_ratios_at_or_above_1():
    b = argparse.Namespace(verdicts=[])
    b.record = lambda *v: b.verdicts.append(v)
    churn.record_verdicts(b, _records([1100, 1200, 1300, 1400, 1500]))
    groups = {(g, item): pairs.classify(s, t) for g, item, s, t in b.verdicts}
    assert groups[(churn.GROUP, "`fork_btf` ≤ 1000 ns")] == "missed"
    assert groups[(churn.GROUP, "`tp_thread_exit` ≤ 1000 ns")] == "met"       # 500 ns
    assert groups[(churn.GROUP, "`tp_sock_state` ≤ 150 ns")] == "met"         # 100 ns
    assert groups[(churn.EXACT_GROUP, "tx and rx bytes")] == "met"
    assert "| 10. churn: BPF time per run" in markdown.summary_md(b.verdicts, [])


def test_markdown_has_the_targets_every_program_dearest_first_and_the_accounting():
    recs = _records([500, 600, 700, 800, 900])
    recs[-1] = churn.run_record(_run(), _snap(900, tx=1))
    for i, r in enumerate(recs):
        r["speeds"] = ((100.0, 90.0), (100.0, 95.0))
        r["floor"] = {"fork_btf": 100.0, "tp_thread_exit": None} if i else None
    md = churn.markdown(recs, churn.LOAD, {"model": "Test CPU", "nproc": 2, "kernel": "6.18"},
                        "Mitigation: Safe RET")
    lines = md.splitlines()
    assert "Host CPU: Test CPU (2 vCPUs), kernel 6.18; SRSO: `Mitigation: Safe RET`." in md
    # the floor from the second run on, and each run's own time less it
    assert ("| a fork | `fork_btf` | **700 (min 500, max 900, n=5)** | ≤ 1000 ns | met | "
            "100 (min 100, max 100, n=4) | 650 (min 500, max 800, n=4) |" in lines)
    assert "| a thread exit | `tp_thread_exit` | **500 (min 500, max 500, n=5)** | ≤ 1000 ns | " \
        "met | not measured | not measured |" in lines
    progs = [line.split("`")[1] for line in lines if line.startswith("| `")]
    assert progs == ["fork_btf", "tp_thread_exit", "tp_sock_state"]     # by BPF time, ran
    assert "**exact in 4 of 5 runs**" in md
    assert sum("| **NO** |" in line for line in lines) == 1


def test_bad_arguments_exit_2():
    for bad in (["--runs", "0"], ["--connections", "-1"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as e:
            churn.parse_args(bad)
        assert e.value.code == 2


def test_the_floor_sits_on_the_bounded_programs_hooks_only():
    progs = {"fork_btf": {"target": "tp_btf:sched_process_fork"},
             "tp_thread_exit": {"target": "tp_btf:sched_process_exit"},
             "tp_sock_state": {"target": "tp_btf:inet_sock_set_state"},
             "tp_send_length": {"target": "tp_btf:sock_send_length"}}
    assert churn.bounded_hooks(progs) == ["tp_btf:sched_process_fork",
                                          "tp_btf:sched_process_exit",
                                          "tp_btf:inet_sock_set_state"]
