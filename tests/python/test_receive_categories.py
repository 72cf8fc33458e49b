"""The receive side's attribution categories on real stacks: TCP_ZEROCOPY_RECEIVE's
own work (zc_receive), its page table work (page_mapping), its copy buffer (copy_buffer).

The fixtures (tests/python/fixtures/receive_stacks/host-6.18/) were recorded on the 6.18 host,
tracepoint rung, sampled on the scheduler tick, trimmed by tests/python/fixtures/stacks/trim.py's
`trimmed` to the stacks covering 95% of each run's samples:
`./netio-trace run --trace-only --strategies one-copy,zero-copy --receive
copy,discard,mmap,splice --sizes 64K --threads 1 --transport loopback,veth --mss 4108
--duration 1 --repeat 1`. one-copy behind mmap over veth is left out: that run kept 0.6
Gbit/s, 16 samples (bench/NOTES.md, "Receive strategies").
"""
import glob
import os

import pytest

from analysis import attribution as A
from test_categories import OTHER_MAX, attribution_of

HERE = os.path.dirname(os.path.abspath(__file__))
STACKS = os.path.join(HERE, "fixtures", "receive_stacks", "host-6.18")
FILES = sorted(glob.glob(os.path.join(STACKS, "*.folded")))


def share(name):
    return attribution_of(os.path.join(STACKS, name))["share"]


def test_the_fixtures_are_there():
    assert len(FILES) == 10


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_other_stays_under_its_bound(path):
    a = attribution_of(path)
    assert a["samples"] >= A.FEW_SAMPLES
    assert a["share"]["other"] <= OTHER_MAX[65536], a["share"]


def test_every_receive_category_reachable():
    reached = {c: max(attribution_of(p)["share"][c] for p in FILES)
               for c in A.RECEIVE_CATEGORIES}
    assert all(v > 0 for v in reached.values()), reached


@pytest.mark.parametrize("transport", ("loopback", "veth"))
def test_mapping_behind_a_zero_copy_sender(transport):
    """Behind MSG_ZEROCOPY the receiver maps pages: page table work, no receive copy beyond
    the copy buffer's; spliced and discarded bytes are never a receive copy."""
    s = share(f"zero-copy-mmap-65536-{transport}.folded")
    assert s["page_mapping"] > 0.05 and s["zc_receive"] > 0.02
    assert s["kernel_rx_copy"] < 0.01
    for receive in ("splice", "discard"):
        s = share(f"zero-copy-{receive}-65536-{transport}.folded")
        assert s["kernel_rx_copy"] == 0 and s["page_mapping"] == 0 and s["copy_buffer"] == 0
    assert share(f"zero-copy-splice-65536-{transport}.folded")["splice"] > 0.3


def test_behind_a_one_copy_sender_mmap_copies():
    """A one-copy sender's pages cannot be mapped: the receive is a copy again, read by
    recv_skip_hint; next to no page table work."""
    s = share("one-copy-mmap-65536-loopback.folded")
    assert s["kernel_rx_copy"] > 0.1 and s["page_mapping"] < 0.02
