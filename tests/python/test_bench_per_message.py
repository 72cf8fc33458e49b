"""bench/per_message.py: each program's time divided by the messages sent, dearest first."""
import argparse

import pytest

from bench import per_message


def test_table_divides_by_the_messages_and_sorts_by_time():
    server = {"messages": 1000}
    snap = {"self": {"programs": {
        "tp_xmit": {"runs": 3000, "ns": 180000},
        "tp_send_length": {"runs": 1000, "ns": 120000},
        "fork_btf": {"runs": 0, "ns": 0}}}}
    a = argparse.Namespace(transport="veth", strategy="zero-copy", size=16384, level="counting",
                           seconds=2.0)
    lines = per_message.table(server, snap, a).splitlines()
    assert lines[0].startswith("veth zero-copy 16384 B, counting level, 1000 messages in 2 s")
    assert lines[4] == "| `tp_xmit` | 3.00 | 60 | 180.0 |"
    assert lines[5] == "| `tp_send_length` | 1.00 | 120 | 120.0 |"
    assert lines[6] == "| all | | | 300.0 |"
    assert not any("fork_btf" in line for line in lines)      # no runs: left out


@pytest.mark.parametrize("args", (["--size", "0"], ["--seconds", "0"], ["--strategy", "nope"],
                                  ["--transport", "forward"]))
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as e:
        per_message.parse_args(args)
    assert e.value.code == 2
