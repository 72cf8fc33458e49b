"""bench/scrape.py: the agent's cost per series, on synthetic label sets."""
import pytest

from bench import scrape


def test_each_label_set_gives_its_series_and_figures_per_series():
    small, large = scrape.measure(2, repeat=2), scrape.measure(20, repeat=2)
    # a label set's series do not depend on how many there are: the agent's own are fixed
    per_set = (large["series"] - small["series"]) / 18
    assert per_set == int(per_set) and per_set > 40, per_set
    for row in (small, large):
        for k in ("ingest_ns", "render_ns", "serve_ns"):
            s = row[k]
            assert 0 < s["min"] <= s["median"] <= s["max"], (k, s)
    text = scrape.markdown([small], {"model": "x"}, "Not affected", 2)
    assert "| 2 | " in text and "of 2 snapshots" in text


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        scrape.main(["--sets", "10,x"])
    assert e.value.code == 2 and "--sets" in capsys.readouterr().err
