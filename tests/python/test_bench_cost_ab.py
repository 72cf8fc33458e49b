"""bench/cost_ab.py's tables: the per-message figures of two builds side by side, and a
sweep's runs summed per strategy (runs and per-skb runs per message, throughput kept paired
by configuration and round)."""
from bench import cost_ab

CASE = ("veth", "one-copy", 16384, "counting")


def pm(ns, runs, programs):
    return {"ns_per_message": ns, "runs_per_message": runs, "programs": [
        {"program": n, "ns_per_run": r[0], "floor_ns_per_run": r[1], "runs_per_message": r[2]}
        for n, r in programs.items()]}


def run(strategy, threads, rnd, traced, gbps, messages=1000, progs=None, ns=None, bpf=None):
    r = {"strategy": strategy, "threads": threads, "repeat": rnd, "traced": traced,
         "msg_size": 256, "transport": "veth", "status": "ok", "throughput_gbps": gbps,
         "messages_sent": messages}
    if traced:
        r["trace"] = {"self": {"programs": progs or {}, "ns_per_message": ns}}
        r["attribution"] = {"share": {"bpf": bpf}}
    return r


def test_spread_is_the_median_and_range_of_what_was_measured():
    assert cost_ab.spread([3, 1, 2]) == "2.00 (1.00–3.00)"
    assert cost_ab.spread([300, None, 100, 200]) == "200 (100–300)"
    assert cost_ab.spread([None]) == "–"
    assert cost_ab.spread([1.5]) == "1.50"
    assert cost_ab.spread([12.5, 10], "{:.1f}") == "11.2 (10.0–12.5)"


def test_each_case_and_program_reads_before_against_after():
    results = {CASE: {
        "old": [pm(600, 2.8, {"tp_xmit": (70, 60, 0.9), "tp_send_length": (200, 60, 1.0)}),
                pm(700, 2.9, {"tp_xmit": (72, 61, 0.9), "tp_send_length": (210, 62, 1.0)})],
        "new": [pm(400, 2.0, {"tp_send_length": (190, 60, 1.0), "tp_idle": (50, 40, 0.001)})]}}
    assert cost_ab.case_rows(results) == [
        "| veth one-copy 16 KiB, counting | 650 (600–700) | 400 | 2.85 (2.80–2.90) | 2.00 |"]
    rows = cost_ab.program_rows(results)
    assert rows == [
        "| veth one-copy 16 KiB, counting | `tp_send_length` | 205 (200–210) / 61 (60–62) | "
        "190 / 60 | 1.00 | 1.00 |",
        "| veth one-copy 16 KiB, counting | `tp_xmit` | 71 (70–72) / 60 (60–61) | – / – | "
        "0.90 | – |"]                      # tp_idle: under 0.01 runs a message, left out


def test_a_sweep_is_summed_per_strategy_and_kept_is_paired_by_round():
    progs = {"sc_enter": {"runs": 1200}, "tp_send_length": {"runs": 1000},
             "tp_xmit": {"runs": 500}, "tp_netif_receive": {"runs": 500}}
    runs = [run("two-copy", 1, 0, False, 1.0), run("two-copy", 1, 1, False, 2.0),
            run("two-copy", 1, 0, True, 0.8, progs=progs, ns=400, bpf=0.15),
            run("two-copy", 1, 1, True, 1.0, progs={"tp_send_length": {"runs": 2000}},
                ns=300, bpf=0.10),
            run("two-copy", 2, 0, True, 5.0, progs={}, ns=None),     # no untraced pair
            dict(run("one-copy", 1, 0, True, 1.0), status="failed")]
    f = cost_ab.sweep_figures(runs)
    assert list(f) == ["two-copy"]
    assert f["two-copy"]["runs"] == [3.2, 2.0, 0.0]
    assert f["two-copy"]["skb"] == [1.0, 0.0, 0.0]
    assert f["two-copy"]["kept"] == [0.8, 0.5, None]
    assert f["two-copy"]["ns"] == [400, 300, None]
    row, = cost_ab.sweep_rows([runs], [runs])
    assert row.startswith("| two-copy | 2.00 (0.00–3.20) → 2.00 (0.00–3.20) | ")
    assert row.endswith("| 12.5 (10.0–15.0) → 12.5 (10.0–15.0) |")


def test_each_sweep_pairs_its_rounds_with_its_own():
    """Two sweeps have the same rounds: a traced run is kept against its own sweep's
    untraced run, never the other's."""
    first = [run("one-copy", 1, 0, False, 1.0), run("one-copy", 1, 0, True, 0.5)]
    second = [run("one-copy", 1, 0, False, 4.0), run("one-copy", 1, 0, True, 3.0)]
    f = cost_ab.sweeps_figures([first, second])
    assert f["one-copy"]["kept"] == [0.5, 0.75]
    assert f["one-copy"]["runs"] == [0.0, 0.0]
