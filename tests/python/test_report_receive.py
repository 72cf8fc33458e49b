"""report/receive.py: the Receive section's answers from hand-made run records."""
import os

from analysis import results
from conftest import FIXTURES
from report import doc as docmod
from report import receive as R

GIB = 1 << 30


def run(strategy, receive, rep, gbps, cpu_s, mapped=0, mss=4096, transport="loopback",
        traced=False, **extra):
    return {"strategy": strategy, "msg_size": 65536, "threads": 1, "transport": transport,
            "repeat": rep, "receive": receive, "traced": traced, "status": "ok",
            "throughput_gbps": gbps, "bytes_received": GIB,
            "received": {"copied": GIB - mapped, "mapped": mapped, "discarded": 0,
                         "spliced": 0, "rcv_mss": mss, "cpu_s": cpu_s}, **extra}


def sweep():
    """Behind zero-copy mmap maps 95% and wins every round, with less CPU; behind one-copy it
    maps nothing and loses; over veth (MSS 1448) it maps 92% and loses."""
    runs = []
    for rep in range(3):
        runs += [run("zero-copy", "copy", rep, 20 + rep, 0.30),
                 run("zero-copy", "mmap", rep, 30 + rep, 0.20, mapped=int(0.95 * GIB)),
                 run("one-copy", "copy", rep, 30 + rep, 0.30),
                 run("one-copy", "mmap", rep, 20 + rep, 0.35),
                 run("zero-copy", "copy", rep, 30, 0.3, transport="veth", mss=1448),
                 run("zero-copy", "mmap", rep, 15, 0.4, mapped=int(0.92 * GIB),
                     transport="veth", mss=1448)]
    return runs


def test_where_mmap_wins_and_loses():
    w = R.wins(sweep())
    assert any(t.startswith("mmap wins on throughput behind zero-copy at 64K over loopback: "
                            "1.4") and "less" in t for t in w), w
    assert any(t.startswith("mmap loses on throughput behind one-copy at 64K over loopback")
               and "more" in t for t in w), w
    assert any(t.startswith("mmap loses on throughput behind zero-copy at 64K over veth")
               for t in w), w


def test_mapped_share_against_sender_and_mss():
    rows = {(r[0], r[1]): r for r in R.mapped_rows(sweep())}
    lo_zc, lo_one, veth = (rows[("loopback", "zero-copy")], rows[("loopback", "one-copy")],
                           rows[("veth", "zero-copy")])
    assert lo_zc[3:5] == ["4096", "95.0%"] and "keeps pages whole" in lo_zc[5]
    assert lo_one[4] == "0.0%" and "not its own" in lo_one[5]
    assert veth[3:5] == ["1448", "92.0%"] and "no multiple of 4096" in veth[5]


def test_comparison_table_pairs_rounds_with_copy():
    rows = R.comparison_rows(sweep())
    (zc,) = [r for r in rows if r[:4] == ["loopback", "zero-copy", "64K", "mmap"]]
    assert zc[5].endswith("▲") and zc[7].endswith("▲")    # faster, and less CPU per KiB
    assert zc[7].startswith("0.67")
    assert zc[8] == "95.0%"
    (cp,) = [r for r in rows if r[:4] == ["loopback", "zero-copy", "64K", "copy"]]
    assert cp[5] == "1" and cp[7] == "1"


class _Ctx:
    def __init__(self, runs, out_dir):
        self.all_runs, self.out_dir = runs, out_dir


def test_section_only_where_a_receive_besides_copy_ran(tmp_path):
    d = docmod.Doc("t")
    R.section(d, _Ctx([r for r in sweep() if r["receive"] == "copy"], str(tmp_path)))
    assert "Receive" not in d.markdown()
    d = docmod.Doc("t")
    R.section(d, _Ctx(sweep(), str(tmp_path)))
    md = d.markdown()
    assert "## Receive: where receive zero-copy wins" in md and "MSS received" in md
    assert (tmp_path / "plots" / "receive_throughput.png").stat().st_size > 1000


def test_answers_of_the_recorded_preset():
    """The Receive section's answers on the preset's recorded 64 KiB runs (fixtures/
    receive_run, the 6.18 host): mmap maps at least 90% behind a zero-copy sender at MSS 4108
    over loopback, at least 99% with its fields page-aligned, and nothing behind a one-copy
    sender; over veth (MTU 1500, MSS 1448) it
    maps less than over loopback and says the MSS is why; discard is cheaper than copy for the
    receiver behind a one-copy sender, splice dearer."""
    runs = results.read_runs(os.path.join(FIXTURES, "receive_run", results.RUNS))
    answers = [r for r in runs if not r["traced"]]
    rows = {(r[0], r[1]): r for r in R.mapped_rows(answers)}
    lo = float(rows[("loopback", "zero-copy")][4].rstrip("%"))
    veth = float(rows[("veth", "zero-copy")][4].rstrip("%"))
    assert lo >= 90 and rows[("loopback", "zero-copy")][3] == "4096"
    assert rows[("loopback", "one-copy")][4] == "0.0%" and rows[("veth", "one-copy")][4] == "0.0%"
    assert veth < lo and "MSS 1448 is no multiple of 4096" in rows[("veth", "zero-copy")][5]
    table = {tuple(r[:4]): r for r in R.comparison_rows(answers)}
    assert table[("loopback", "one-copy", "64K", "discard")][7].endswith("▲")
    assert table[("loopback", "one-copy", "64K", "splice")][7].endswith("▼")
    # the zero-copy sender with page-aligned fields (--align page) maps every page at MSS
    # 4108 over loopback, where its unaligned fields leave some to be copied
    aligned = rows[("loopback", "zero-copy@page")]
    assert float(aligned[4].rstrip("%")) >= 99 > float(rows[("loopback", "zero-copy")][4].rstrip("%"))
    assert "fields start on pages" in aligned[5]
    assert R.where_mmap_wins(answers).startswith("Where mmap")


def aligned_and_xdp():
    """zero-copy with page-aligned fields: mmap maps 100% and wins over loopback; over veth
    behind an XDP program it maps nothing and loses."""
    runs = []
    for rep in range(3):
        runs += [run("zero-copy", "copy", rep, 12 + rep, 0.30, align="page"),
                 run("zero-copy", "mmap", rep, 40 + rep, 0.10, mapped=GIB, align="page"),
                 run("zero-copy", "copy", rep, 20, 0.3, transport="veth", mss=1448,
                     align="page", rx_xdp=True),
                 run("zero-copy", "mmap", rep, 18 - rep, 0.4, transport="veth", mss=1448,
                     align="page", rx_xdp=True)]
    return runs


def test_where_mmap_wins_names_the_aligned_sender_with_ratios():
    text = R.where_mmap_wins(sweep() + aligned_and_xdp())
    assert text.startswith("Where mmap wins against copy, in every round")
    assert "behind zero-copy@page at 64K over loopback (100.0% mapped, throughput 3.15× " \
           "(3.00–3.33), CPU per byte 0.33× (0.33–0.33))" in text, text
    assert "behind zero-copy at 64K over loopback" in text
    assert "one-copy" not in text and "XDP" not in text       # they lose


def test_where_mmap_wins_nowhere():
    losing = [r for r in sweep() if r["strategy"] == "one-copy" or r["transport"] == "veth"]
    assert R.where_mmap_wins(losing).startswith("Where mmap wins: nowhere the rounds decide")


def test_xdp_is_why_nothing_maps():
    rows = {(r[0], r[1]): r for r in R.mapped_rows(aligned_and_xdp())}
    xdp, lo = rows[("veth + XDP", "zero-copy@page")], rows[("loopback", "zero-copy@page")]
    assert xdp[4] == "0.0%" and xdp[5].startswith("an XDP program on the receiving device")
    assert lo[4] == "100.0%" and "fields start on pages: every page maps" in lo[5]
