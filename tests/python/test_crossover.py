"""Crossovers claimed only as far as the paired ratios allow."""
from analysis import crossover
from report import crossovers
from report import build as report

SIZES = [1024, 4096, 16384, 64512]


def test_undecided_sizes_make_no_crossover():
    """A case the ratios leave open: behind up to 4K, straddling 1 at 16K and 63K: no "overtakes"."""
    c = crossover.decided(SIZES, [[0.5, 0.6, 0.55], [0.7, 0.8, 0.75], [0.9, 1.1, 0.95],
                                  [0.97, 1.2, 1.05]])
    assert c["kind"] == "undecided" and c["undecided"] == [16384, 64512]
    text = crossovers.text("io-uring", "io-uring-zc", c, "forward, 1 thread(s)")
    assert "overtakes io-uring between" not in text
    assert "undecided" in text and "behind in every round at 1K, 4K" in text
    assert "undecided at 16K, 63K" in text


def test_crossover_needs_decided_sizes_on_both_sides():
    c = crossover.decided(SIZES, [[0.5, 0.6], [0.9, 1.1], [1.1, 1.2], [1.3, 1.4]])
    assert c["kind"] == "crosses" and c["between"] == (1024, 16384)
    assert c["undecided"] == [4096]
    text = crossovers.text("one-copy", "zero-copy", c, "forward, 1 thread(s)")
    assert "zero-copy overtakes one-copy between 1K and 16K" in text
    assert "Undecided at 4K, between the two" in text
    # ahead at the top but undecided above the crossover: not "stays ahead"
    c = crossover.decided(SIZES, [[0.5, 0.6], [1.1, 1.2], [0.9, 1.1], [1.3, 1.4]])
    assert c["kind"] == "undecided"


def test_always_never_unclear_and_no_data():
    assert crossover.decided(SIZES, [[1.1]] * 4)["kind"] == "always"
    assert crossover.decided(SIZES, [[0.9]] * 4)["kind"] == "never"
    assert crossover.decided(SIZES, [[1.1], [0.9], [1.1], [0.9]])["kind"] == "unclear"
    assert crossover.decided(SIZES, [[], [], [], []])["kind"] == "no-data"
    # a size without ratios is left out, not counted against the claim
    c = crossover.decided(SIZES, [[0.8], [], [1.2], [1.3]])
    assert c["kind"] == "crosses" and c["between"] == (1024, 16384)


def test_at_size_needs_both_neighbours_to_agree():
    c = crossover.decided(SIZES, [[0.5], [0.7], [1.2], [1.3]])
    assert crossover.at_size(c, 512)[0] == "behind"          # below the range: the smallest
    assert crossover.at_size(c, 2048)[0] == "behind"
    verdict, used = crossover.at_size(c, 8192)                # between behind and ahead
    assert verdict == "undecided" and [u[0] for u in used] == [4096, 16384]
    assert crossover.at_size(c, 16384)[0] == "ahead"
    assert crossover.at_size(c, 1 << 20)[0] == "ahead"        # above the range: the largest


def _run(strategy, size, repeat, gbps):
    return {"strategy": strategy, "msg_size": size, "threads": 1, "transport": "forward",
            "repeat": repeat, "traced": False, "status": "ok", "throughput_gbps": gbps,
            "bytes_sent": 1000, "forward": {"datagrams_lost": 0, "packet_sockets": 0}}


def test_run_report_calls_a_straddling_crossover_undecided():
    """`run --preset zerocopy`'s headline: no "overtakes" where the ratios straddle 1."""
    gbps = {1024: (1.0, [0.5, 0.6]), 4096: (1.0, [0.7, 0.8]), 16384: (1.0, [0.9, 1.1]),
            64512: (1.0, [0.95, 1.2])}
    runs = []
    for size, (base, ratios) in gbps.items():
        for rep, r in enumerate(ratios):
            runs += [_run("io-uring", size, rep, base), _run("io-uring-zc", size, rep, base * r)]
    (text,) = report.forward_findings(runs, [])
    assert "overtakes io-uring between" not in text
    assert "whether io-uring-zc overtakes io-uring is undecided" in text
