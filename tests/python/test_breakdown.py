"""report.breakdown: the report's sentences on the path categories, from the
attribution of real recorded stacks (tests/python/fixtures/stacks)."""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import attribution as A  # noqa: E402
from report import breakdown as B  # noqa: E402

STACKS = os.path.join(REPO, "tests", "python", "fixtures", "stacks", "host-6.18")


def run(strategy, size, transport="loopback", repeat=0):
    a = A.attribute_file(os.path.join(STACKS, f"{strategy}-{size}-{transport}.folded"),
                         "tick", 1e9, 3e9, None, 1e8)
    return {"strategy": strategy, "msg_size": size, "threads": 1, "transport": transport,
            "repeat": repeat, "attribution": a}


def test_pooled_counts_add_runs_up():
    a = run("one-copy", 65536)["attribution"]
    counts, total = B.pooled_counts([a, a])
    assert total == 2 * a["samples"]
    assert counts == {c: 2 * n for c, n in a["samples_by_category"].items()}
    # records without samples_by_category: from the shares
    old = {k: v for k, v in a.items() if k != "samples_by_category"}
    assert B.pooled_counts([old])[1] == a["samples"]
    assert B.pooled_counts([{"samples": 0}]) == (None, 0)


def test_share_text_has_the_interval():
    text = B.share_text({"sched": 30, "locks": 10}, 200, ("sched", "locks"))
    lo, hi = A.share_interval(40, 200)
    assert text == f"20.0% [95%: {100 * lo:.1f}–{100 * hi:.1f}%]"


def test_size_findings_small_and_large():
    runs = [run(s, z, t) for s in ("two-copy", "one-copy", "zero-copy") for z in (256, 65536)
            for t in ("loopback", "veth")]
    out = B.size_findings(runs)
    assert len(out) == 4          # per transport, smallest and largest size
    small = [t for t in out if "256" in t.split("**")[1]]
    large = [t for t in out if "64K" in t.split("**")[1]]
    assert len(small) == 2 and len(large) == 2
    for text in out:
        for st in ("two-copy", "one-copy", "zero-copy"):
            assert f"{st}:" in text
        assert re.search(r"per-call work \d+\.\d% \[95%: \d+\.\d–\d+\.\d%\]", text)
    # at 256 B the per-call work outweighs the copies for every strategy (recorded stacks)
    for text in small:
        assert "per-call work outweighs the copies for every strategy" in text
        assert "the largest part of the path:" in text
    # at 64 KiB over loopback the copies outweigh it for every strategy
    lo64 = next(t for t in large if t.startswith("**loopback"))
    assert "The copies outweigh the per-call work for every strategy" in lo64
    assert "kernel rx copy" in lo64 or "kernel tx copy" in lo64


def test_besides_copies_names_the_largest_path_categories():
    a = run("zero-copy", 256)["attribution"]
    text = B.besides_copies([a], "zero-copy")
    # the scheduler (waiting for completions) is zero-copy's largest path category here
    assert text.startswith("Besides the copies, zero-copy's samples go to the scheduler")
    assert "other " in text and "[95%:" in text
    # nothing to say without path categories (records from before there were any)
    old = dict(a, samples_by_category={c: (a["samples"] if c == "other" else 0)
                                       for c in A.CATEGORIES})
    assert B.besides_copies([old], "zero-copy") is None
