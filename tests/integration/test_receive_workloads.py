"""netio-client's receive strategies (--receive) over loopback and veth (needs root):
every byte counted by what became of it, --verify on the paths that deliver bytes to user
memory, the mapped share of TCP_ZEROCOPY_RECEIVE against the sender (its fields page-aligned or not),
the MSS and an XDP program on the receiving veth, and the usage errors."""
import json
import subprocess
import time

import pytest

from conftest import CLIENT, SERVER, namespaces, needs_built, needs_root
from netio_trace.system.netns import Topology
from test_workloads import run_pair

pytestmark = [needs_root("network namespaces"), needs_built("netio-server", "netio-client")]

KINDS = ("copied", "mapped", "discarded", "spliced")
# the kind each strategy's bytes must all be, where it is one kind
ONLY_KIND = {"copy": "copied", "discard": "discarded", "splice": "spliced"}

topo = namespaces("loopback", "veth")
lo_topo = namespaces("loopback")


def _pair(topo, strategy, receive, size, count, mss=None, verify=True, align=None):
    extra = ["--verify"] if verify else []
    mss_args = ["--mss", str(mss)] if mss else []
    common = ["--size", str(size), "--threads", "2", *extra, *mss_args]
    align_args = ["--align", align] if align else []
    return run_pair(topo, ["--strategy", strategy, "--count", str(count), *align_args, *common],
                    ["--receive", receive, *common])


def _assert_exact(srv, cli):
    """Every byte sent was received, and the kinds add up to it, per connection too."""
    assert cli["bytes"] == srv["bytes"] > 0
    assert sum(cli["received"][k] for k in KINDS) == cli["bytes"], cli["received"]
    for t in cli["per_thread"]:
        assert sum(t["received"][k] for k in KINDS) == t["bytes"], t


@pytest.mark.parametrize("size", [16384, 262144])
@pytest.mark.parametrize("receive", ["copy", "discard", "mmap", "splice"])
def test_receive_exact(topo, receive, size):
    srv, cli = _pair(topo, "one-copy", receive, size, 4000 if size == 16384 else 300)
    _assert_exact(srv, cli)
    assert cli["receive"] == receive and cli["mss"] is None
    if receive in ONLY_KIND:
        assert cli["received"][ONLY_KIND[receive]] == cli["bytes"], cli["received"]
    # a one-copy sender's pages cannot be mapped: mmap falls back to copying all of it
    if receive == "mmap":
        assert cli["received"]["copied"] == cli["bytes"] and cli["zc_receive_calls"] > 0
    # --verify checked what reached user memory; discard and splice deliver nothing to check
    assert cli["verify_errors"] == 0


@pytest.mark.parametrize("mss", [4108, 1448])
def test_mmap_behind_zero_copy(lo_topo, mss):
    """A MSG_ZEROCOPY sender's pages are mapped, the rest copied; every byte is checked."""
    srv, cli = _pair(lo_topo, "zero-copy", "mmap", 65536, 1500, mss=mss)
    _assert_exact(srv, cli)
    share = cli["received"]["mapped"] / cli["bytes"]
    assert share >= 0.90, f"mapped {share:.3f} at MSS {mss}"
    assert cli["verify_errors"] == 0 and cli["mss"] == mss
    # the MSS the client advertised is what it receives (less the timestamp option)
    assert {t["rcv_mss"] for t in cli["per_thread"]} <= {mss - 12, mss}


def test_mmap_behind_zero_copy_veth(topo):
    srv, cli = _pair(topo, "zero-copy", "mmap", 65536, 1000, mss=4108)
    _assert_exact(srv, cli)
    assert cli["verify_errors"] == 0


def test_mss_out_of_range():
    r = subprocess.run([CLIENT, "--addr", "127.0.0.1", "--port", "1", "--threads", "1",
                        "--size", "1K", "--mss", "40000"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--mss 40000: must be between 88 and 32767" in r.stderr


def test_unknown_receive():
    r = subprocess.run([CLIENT, "--addr", "127.0.0.1", "--port", "1", "--threads", "1",
                        "--size", "1K", "--receive", "zerocopy"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown" in r.stderr


def test_mmap_behind_page_aligned_zero_copy(lo_topo):
    """--align page: a zero-copy sender whose fields start on pages owns whole pages, so at
    MSS 4108 (4096-byte segments) over loopback mmap maps all of them but the tail of a call
    under a page; every byte still counted once and checked."""
    srv, cli = _pair(lo_topo, "zero-copy", "mmap", 65536, 1500, mss=4108, align="page")
    _assert_exact(srv, cli)
    assert srv["align"] == "page" and cli["verify_errors"] == 0
    share = cli["received"]["mapped"] / cli["bytes"]
    assert share >= 0.99, f"mapped {share:.4f} with page-aligned fields"
    # the same sender unaligned straddles pages: less is mapped (95% on the 6.18 host)
    srv, cli = _pair(lo_topo, "zero-copy", "mmap", 65536, 1500, mss=4108)
    assert srv["align"] == "none" and cli["received"]["mapped"] / cli["bytes"] < share


def _veth_mtu(topo, mtu):
    for ns, dev in ((topo.sender_ns, "nio-s"), (topo.receiver_ns, "nio-r")):
        subprocess.run(["ip", "-n", ns, "link", "set", "dev", dev, "mtu", str(mtu)], check=True)


def _xdp_pass_programs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [p["id"] for p in json.loads(out) if p.get("name") == "xdp_pass"]


@pytest.mark.parametrize("xdp", [False, True], ids=["no-xdp", "xdp"])
def test_mmap_over_veth_with_and_without_xdp(xdp):
    """Over veth at a page-aligned MSS (MTU 4148: 4096-byte segments) behind a zero-copy
    sender with page-aligned fields, mmap maps at least 90%; with --rx-xdp's XDP_PASS program
    on the receiving veth (generic mode) it maps nothing. The program goes with the
    namespaces."""
    before = _xdp_pass_programs()
    with Topology("veth", rx_xdp=xdp) as t:
        assert (t.xdp_attached() is not None) == xdp
        _veth_mtu(t, 4148)
        srv, cli = _pair(t, "zero-copy", "mmap", 65536, 1000, mss=4108, align="page")
    _assert_exact(srv, cli)
    assert cli["verify_errors"] == 0
    assert {p["rcv_mss"] for p in cli["per_thread"]} == {4096}
    share = cli["received"]["mapped"] / cli["bytes"]
    if xdp:
        assert share == 0, f"mapped {share:.4f} behind an XDP program"
    else:
        assert share >= 0.90, f"mapped {share:.4f} over veth at MSS 4096"
    # nothing left attached: the kernel frees the program with the device, when it cleans up
    # the deleted namespaces (asynchronously, in a work queue)
    deadline = time.monotonic() + 10
    while _xdp_pass_programs() != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _xdp_pass_programs() == before


def test_align_unknown():
    r = subprocess.run([SERVER, "--strategy", "zero-copy", "--size", "1K", "--threads", "1",
                        "--port", "0", "--count", "1", "--align", "4K"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "--align '4K': unknown (choose none or page)" in r.stderr
