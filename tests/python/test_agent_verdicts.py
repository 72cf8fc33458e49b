"""The agent's verdict metric with a baseline (netio_trace/agent/verdicts.py): a flow whose
traffic leaves the host gets trace's verdict at its send size, "would help" above the
baseline's crossover and "below the crossover" under it; "undecided" without a baseline; a
baseline that cannot be read is bad input."""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from netio_trace.agent.verdicts import load_baseline, zerocopy_verdicts  # noqa: E402
from netio_trace.run.params import UsageError  # noqa: E402
from netio_trace.system import machine  # noqa: E402


class Whois:
    def of(self, pid, comm=None):
        return {"cgroup": "/svc", "netns": 1}


@pytest.fixture
def baseline_dir(tmp_path):
    """This machine's forward sweep: zero-copy behind one-copy up to 16K, ahead at 63K."""
    m = machine.info()
    runs = [{"strategy": st, "msg_size": size, "threads": 1, "transport": "forward",
             "repeat": rep, "traced": False, "status": "ok", "machine": m,
             "throughput_gbps": 10.0 * (ratio if st == "zero-copy" else 1.0)}
            for rep in range(3)
            for size, ratio in ((1024, 0.6), (4096, 0.7), (16384, 0.85), (64512, 1.3))
            for st in ("one-copy", "zero-copy")]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return str(tmp_path)


def leaving(size, calls=100):
    """A process whose one TCP socket leaves the host by a device, sends of `size` bytes."""
    slot = str(1 << (size.bit_length() - 1))
    s = {"pid": 7, "comm": "svc", "proto": "tcp", "family": "ipv4", "local": "10.0.0.1:1",
         "peer": "10.0.0.2:2", "netns": 1, "path": "device", "peer_local": 0,
         "tx_bytes": size * calls, "tx_copy_bytes": size * calls, "zc_tx_bytes": 0,
         "tx_calls": calls, "fallback_copy_bytes": 0, "send_size_log2": {slot: calls}}
    p = {"comm": "svc", "tx_bytes": size * calls, "tx_copy_bytes": size * calls,
         "zc_tx_bytes": 0, "tx_calls": calls, "rx_copy_bytes": 0}
    return {"processes": {"7": p}, "sockets": [s]}


def test_leaving_flows_get_the_baselines_verdict_at_their_send_size(baseline_dir):
    base = load_baseline(baseline_dir, "test")
    assert zerocopy_verdicts(leaving(64512), Whois(), base) == {("/svc", "svc", "would help")}
    assert zerocopy_verdicts(leaving(1024), Whois(), base) == {
        ("/svc", "svc", "below the crossover")}
    assert zerocopy_verdicts(leaving(64512), Whois()) == {("/svc", "svc", "undecided")}


def test_a_baseline_that_cannot_be_read_is_bad_input(tmp_path):
    with pytest.raises(UsageError, match="no runs.jsonl"):
        load_baseline(str(tmp_path), "test")
