"""analysis.attribution on hand-made folded stacks , and report.flamegraph on them."""
import os
import xml.etree.ElementTree as ET

import pytest

from analysis import attribution as A
from conftest import FIXTURES
from report import flamegraph as F


def k(*names):
    return [n + "_[k]" for n in names]


SYS_SENDTO = k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_sendto",
               "__sys_sendto")
SYS_SENDMSG = k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__sys_sendmsg",
                "___sys_sendmsg", "____sys_sendmsg")
SYS_RECV = k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_recvfrom",
             "__sys_recvfrom", "sock_recvmsg")
SOFTIRQ_RX = k("__local_bh_enable_ip", "do_softirq.part.0", "handle_softirqs", "net_rx_action",
               "__napi_poll", "process_backlog", "__netif_receive_skb_one_core",
               "ip_local_deliver_finish")
TIMER_IRQ = k("asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt",
              "__irq_exit_rcu", "handle_softirqs")


def line(frames, n=1):
    return ";".join(frames) + f" {n}"


def cat(frames):
    return A.classify(frames)


# ---- one stack per category --------------------------------------------------------------
def test_user_copy_memcpy_variant_under_serializer():
    st = ["netio-server", "[unknown]", "run_sender", "wl_message_serialize",
          "__memmove_avx_unaligned_erms"]
    assert cat(st) == "user_copy"
    assert cat(st[:-1] + ["__memmove_avx512_unaligned_erms"]) == "user_copy"
    assert cat(st[:-1] + ["memcpy@plt"]) == "user_copy"
    # unresolved libc frame (stripped library) called from the serializer
    assert cat(st[:-1] + ["[libc.so.6]"]) == "user_copy"
    # a copy the compiler inlined into the serializer
    assert cat(st[:-1]) == "user_copy"


def test_user_memcpy_elsewhere_is_not_user_copy():
    assert cat(["netio-client", "main", "parse_args", "__memmove_avx_unaligned_erms"]) == "other"


def test_user_copy_page_fault_inside_memcpy():
    st = (["netio-server", "wl_message_serialize", "__memmove_avx_unaligned_erms"]
          + k("asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault"))
    assert cat(st) == "user_copy"


def test_kernel_tx_copy_fsrm_inline_and_rep_movs():
    base = ["netio-server", "__send"] + SYS_SENDTO + k("tcp_sendmsg", "tcp_sendmsg_locked")
    # FSRM: rep movsb inline in _copy_from_iter, no deeper frame
    assert cat(base + k("_copy_from_iter")) == "kernel_tx_copy"
    # no FSRM: the out-of-line copy routine
    assert cat(base + k("_copy_from_iter", "rep_movs_alternative")) == "kernel_tx_copy"
    assert cat(base + k("skb_do_copy_data_nocache", "copy_page_from_iter")) == "kernel_tx_copy"
    # compiler suffixes do not matter
    assert cat(base + k("_copy_from_iter.isra.0")) == "kernel_tx_copy"


def test_kernel_tx_copy_needs_a_send_path():
    # _copy_from_iter under write() to a pipe is not a socket send
    st = ["prog"] + k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_write",
                      "vfs_write", "pipe_write", "copy_page_from_iter", "_copy_from_iter")
    assert cat(st) == "other"
    # copying the iovec array in sendmsg() is not the payload
    st = ["netio-server", "sendmsg"] + SYS_SENDMSG[:-1] + k("copy_msghdr_from_user",
                                                            "import_iovec", "rep_movs_alternative")
    assert cat(st) == "syscall"     # the syscall's arguments (once "other")


def test_pinning():
    base = ["netio-server", "sendmsg"] + SYS_SENDMSG + k("tcp_sendmsg", "tcp_sendmsg_locked")
    assert cat(base + k("skb_zerocopy_iter_stream", "__zerocopy_sg_from_iter",
                        "zerocopy_fill_skb_from_iter", "iov_iter_get_pages2",
                        "__iov_iter_get_pages_alloc", "gup_fast_fallback")) == "pinning"
    assert cat(base + k("iov_iter_extract_pages", "pin_user_pages_fast")) == "pinning"
    assert cat(base + k("msg_zerocopy_realloc")) == "pinning"


def test_pinning_needs_a_send_path():
    # a futex's key pins no page for a send: the futex's wake-up is a lock's time
    st = ["python"] + k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_execve",
                        "begin_new_exec", "mm_release", "do_futex", "futex_wake",
                        "get_futex_key", "gup_fast_fallback")
    assert cat(st) == "locks"
    # a direct read pins the reader's pages: not a send's
    st = ["prog"] + k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_read",
                      "vfs_read", "iomap_dio_rw", "iov_iter_extract_pages", "pin_user_pages_fast")
    assert cat(st) != "pinning"


def test_fallback_copy():
    st = (["netio-server", "sendmsg"] + SYS_SENDMSG + k("tcp_sendmsg") + SOFTIRQ_RX
          + k("skb_copy_ubufs", "__pi_memcpy"))
    assert cat(st) == "fallback_copy"
    # the allocator under skb_copy_ubufs is the fallback copy's cost too
    assert cat(st[:-1] + k("alloc_pages_mpol", "get_page_from_freelist")) == "fallback_copy"


def test_completion():
    st = (["netio-server", "recvmsg"]
          + k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__sys_recvmsg",
              "___sys_recvmsg", "____sys_recvmsg", "inet_recvmsg", "tcp_recvmsg",
              "inet_recv_error", "ip_recv_error", "sock_dequeue_err_skb"))
    assert cat(st) == "completion"
    # the error queue message is copied out, but that is completion handling, not rx
    assert cat(st[:-1] + k("skb_copy_datagram_iter", "_copy_to_iter")) == "completion"
    st = (["netio-server"] + k("tcp_ack", "tcp_clean_rtx_queue", "__kfree_skb",
                                "skb_release_data", "__msg_zerocopy_callback"))
    assert cat(st) == "completion"


def test_kernel_rx_copy():
    base = ["netio-client", "__recv"] + SYS_RECV + k("tcp_recvmsg", "tcp_recvmsg_locked",
                                                     "skb_copy_datagram_iter",
                                                     "__skb_datagram_iter")
    assert cat(base + k("_copy_to_iter")) == "kernel_rx_copy"              # FSRM inline
    assert cat(base + k("_copy_to_iter", "rep_movs_alternative")) == "kernel_rx_copy"
    assert cat(base + k("simple_copy_to_iter", "__check_object_size")) == "kernel_rx_copy"
    # _copy_to_iter outside a receive path (read() of a file) is not rx
    assert cat(["cat"] + k("vfs_read", "filemap_read", "copy_page_to_iter",
                           "_copy_to_iter")) == "other"


SYS_ZC = k("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_getsockopt",
           "__sys_getsockopt", "do_sock_getsockopt", "tcp_getsockopt", "do_tcp_getsockopt",
           "tcp_zerocopy_receive")


def test_receive_zero_copy_categories():
    """TCP_ZEROCOPY_RECEIVE's page table work, its copy buffer (inline on 6.18:
    right under tcp_zerocopy_receive), and the rest of it, locks and skb frees included."""
    base = ["netio-client", "getsockopt"] + SYS_ZC
    assert cat(base + k("tcp_zerocopy_vm_insert_batch", "vm_insert_pages",
                        "insert_page_into_pte_locked")) == "page_mapping"
    assert cat(base + k("zap_page_range_single", "unmap_page_range", "zap_pte_range",
                        "tlb_finish_mmu", "release_pages")) == "page_mapping"
    assert cat(base + k("skb_copy_datagram_iter", "__skb_datagram_iter",
                        "_copy_to_iter")) == "copy_buffer"
    assert cat(base + k("receive_fallback_to_copy", "tcp_recvmsg_locked",
                        "skb_copy_datagram_iter", "_copy_to_iter")) == "copy_buffer"
    assert cat(base) == "zc_receive"
    assert cat(base + k("tcp_recv_skb", "__kfree_skb", "skb_release_data")) == "zc_receive"
    assert cat(base + k("_raw_spin_lock_bh")) == "zc_receive"
    # the syscall layer around it is the syscall's; a munmap elsewhere is no receive's
    assert cat(["netio-client", "getsockopt"] + SYS_ZC[:-1]) == "syscall"
    assert cat(["netio-client"] + k("__x64_sys_munmap", "__vm_munmap", "unmap_page_range",
                                    "zap_pte_range")) == "startup"
    # the skip hint's bytes are an ordinary receive's copy
    assert cat(["netio-client", "__recv"] + SYS_RECV + k("tcp_recvmsg", "tcp_recvmsg_locked",
                                                         "skb_copy_datagram_iter",
                                                         "_copy_to_iter")) == "kernel_rx_copy"


def test_splice_receive():
    st = ["netio-client", "splice"] + k("entry_SYSCALL_64_after_hwframe", "do_syscall_64",
                                        "__x64_sys_splice", "__do_splice", "do_splice",
                                        "tcp_splice_read", "tcp_read_sock", "skb_splice_bits",
                                        "spd_fill_page")
    assert cat(st) == "splice"


def test_other():
    # the send and receive path has categories of its own (these were once "other")
    assert cat(["netio-server", "__send"] + SYS_SENDTO
               + k("tcp_sendmsg", "tcp_sendmsg_locked", "tcp_push", "tcp_write_xmit",
                   "__tcp_transmit_skb", "ip_output")) == "ip_tx"
    assert cat(["netio-server", "main", "spin"]) == "other"
    assert cat(["ksoftirqd"] + k("smpboot_thread_fn", "run_ksoftirqd", "handle_softirqs",
                                 "net_rx_action")) == "net_rx"
    # what runs under the softirq loop and no rule knows stays visible
    assert cat(["ksoftirqd"] + k("smpboot_thread_fn", "run_ksoftirqd", "handle_softirqs",
                                 "rcu_core", "rcu_do_batch")) == "other"


# ---- rules of the walk -------------------------------------------------------------------
def test_innermost_match_wins():
    # a fallback copy done in softirq, run from a tx copy's local_bh_enable: fallback
    st = (["netio-server", "sendmsg"] + SYS_SENDMSG + k("tcp_sendmsg", "tcp_sendmsg_locked",
                                                         "_copy_from_iter")
          + SOFTIRQ_RX + k("skb_copy_ubufs", "__pi_memcpy"))
    assert cat(st) == "fallback_copy"
    # a completion callback run by the fallback copy: completion
    st2 = st[:-1] + k("skb_zcopy_clear", "__msg_zerocopy_callback")
    assert cat(st2) == "completion"
    # pinning inside a send path that also has a tx copy frame further out
    st3 = (["x"] + SYS_SENDMSG + k("tcp_sendmsg", "_copy_from_iter", "iov_iter_get_pages2"))
    assert cat(st3) == "pinning"


def test_hard_interrupt_is_a_boundary():
    tx = ["netio-server", "__send"] + SYS_SENDTO + k("tcp_sendmsg", "tcp_sendmsg_locked",
                                                     "_copy_from_iter")
    # the timer interrupt's own work is not the copy it interrupted
    assert cat(tx + TIMER_IRQ[:-1] + k("hrtimer_interrupt", "__hrtimer_run_queues")) == "other"
    # a fallback copy run at the interrupt's exit is still a fallback copy
    assert cat(tx + TIMER_IRQ + k("net_rx_action", "__napi_poll", "process_backlog",
                                  "ip_local_deliver_finish", "skb_copy_ubufs",
                                  "__pi_memcpy")) == "fallback_copy"
    # and a copy frame inside the interrupt does not see the send path outside it
    assert cat(["x"] + SYS_SENDTO + k("tcp_sendmsg") + TIMER_IRQ + k("rep_movs_alternative")) \
        == "other"


def test_irqs_off_shadow_samples():
    """cpu-clock: time with interrupts off lands where they are re-enabled."""
    under_fallback = (["netio-server", "sendmsg"] + SYS_SENDMSG + k("tcp_sendmsg") + SOFTIRQ_RX
                      + k("skb_copy_ubufs", "alloc_pages_mpol", "_raw_spin_unlock_irqrestore"))
    assert cat(under_fallback) == "fallback_copy"
    under_xmit = (["netio-server", "__send"] + SYS_SENDTO
                  + k("tcp_sendmsg", "tcp_sendmsg_locked", "__tcp_push_pending_frames",
                      "tcp_write_xmit", "_raw_spin_unlock_irqrestore"))
    assert cat(under_xmit) == "locks"         # a path category (once "other")
    at_softirq = (["netio-server", "__send"] + SYS_SENDTO + k("tcp_sendmsg", "tcp_sendmsg_locked",
                                                              "_raw_spin_unlock_irqrestore")
                  + TIMER_IRQ)
    assert cat(at_softirq) == "locks"         # a path category (once "other")
    copy = (["netio-server", "__send"] + SYS_SENDTO + k("tcp_sendmsg", "tcp_sendmsg_locked",
                                                        "_copy_from_iter"))
    lines = [line(under_fallback, 2), line(under_xmit, 3), line(at_softirq, 1), line(copy, 4)]
    a = A.attribute(lines, "cpu-clock", 1e9, 2.5e9, None, 1e6)
    assert a["irqs_off_share"] == pytest.approx(0.6)
    assert a["share"]["fallback_copy"] == pytest.approx(0.2)
    assert a["share"]["kernel_tx_copy"] == pytest.approx(0.4)
    assert a["share"]["locks"] == pytest.approx(0.4)   # a path category (once "other")
    assert a["share"]["other"] == 0
    assert any("re-enabled" in n for n in a["notes"])
    assert not any("re-enabled" in n for n in
                   A.attribute(lines, "cycles", 1e9, 2.5e9, 5e9, 1e6)["notes"])
    # the scheduler tick is a timer interrupt too: same shadow, same note, estimated cycles
    t = A.attribute(lines, "tick", 1e9, 2.5e9, None, 1e6)
    assert t["source"] == "tick" and t["estimated"] is True
    assert t["irqs_off_share"] == pytest.approx(0.6)
    assert t["share"] == a["share"] and t["cycles_per_byte"] == a["cycles_per_byte"]
    assert any("re-enabled" in n and "tick" in n for n in t["notes"])


def test_at_irq_enable_point():
    assert A.at_irq_enable_point(["x"] + k("tcp_write_xmit", "_raw_spin_unlock_irqrestore"))
    assert A.at_irq_enable_point(["x"] + TIMER_IRQ)
    assert not A.at_irq_enable_point(["x"] + k("_copy_from_iter"))
    assert not A.at_irq_enable_point(["x", "handle_softirqs"])   # a user frame of that name


# ---- the attribution object --------------------------------------------------------------
def _mixed_lines():
    st = {
        "user_copy": ["s", "wl_message_serialize", "__memmove_avx_unaligned_erms"],
        "kernel_tx_copy": ["s"] + SYS_SENDTO + k("tcp_sendmsg", "_copy_from_iter"),
        "pinning": ["s"] + SYS_SENDMSG + k("tcp_sendmsg", "iov_iter_get_pages2"),
        "fallback_copy": ["s"] + SOFTIRQ_RX + k("skb_copy_ubufs"),
        "completion": ["s"] + k("ip_recv_error"),
        "kernel_rx_copy": ["c"] + SYS_RECV + k("tcp_recvmsg", "skb_copy_datagram_iter",
                                               "__skb_datagram_iter", "_copy_to_iter"),
        "other": ["s"] + k("ksys_write", "vfs_write", "pipe_write"),   # no rule knows it
    }
    counts = {"user_copy": 7, "kernel_tx_copy": 13, "pinning": 3, "fallback_copy": 5,
              "completion": 1, "kernel_rx_copy": 11, "other": 17}
    return [line(st[c], counts[c]) for c in st], counts


def test_shares_sum_to_one_and_match_counts():
    lines, counts = _mixed_lines()
    a = A.attribute(lines + ["", "garbage-without-count", "x;y notanumber"], "cpu-clock",
                    2e9, 3e9, None, 1e9)
    total = sum(counts.values())
    assert a["samples"] == total
    assert set(a["share"]) == set(A.CATEGORIES)
    assert abs(sum(a["share"].values()) - 1) < 1e-9
    for c in A.CATEGORIES:
        assert a["share"][c] == pytest.approx(counts.get(c, 0) / total)
    assert a["source"] == "cpu-clock"


def test_same_stack_on_several_lines_adds_up():
    st = ["s"] + SYS_SENDTO + k("tcp_sendmsg", "_copy_from_iter")
    a = A.attribute([line(st, 2), line(st, 3), line(["s", "main"], 5)], "cycles", None, None,
                    1000, 10)
    assert a["share"]["kernel_tx_copy"] == pytest.approx(0.5)


def test_estimated_without_cycles():
    lines, counts = _mixed_lines()
    total = sum(counts.values())
    a = A.attribute(lines, "cpu-clock", 2e9, 3e9, None, 1e9)
    assert a["estimated"] is True
    total_cycles = 2e9 * 3e9 / 1e9
    assert a["total_cycles"] == pytest.approx(total_cycles)
    for c in A.CATEGORIES:
        assert a["cycles_per_byte"][c] == pytest.approx(counts.get(c, 0) / total * total_cycles / 1e9)


def test_counted_cycles_are_not_estimated():
    lines, counts = _mixed_lines()
    total = sum(counts.values())
    a = A.attribute(lines, "cycles", 2e9, 3e9, 8e9, 2e9)
    assert a["estimated"] is False
    assert a["cycles_per_byte"]["kernel_tx_copy"] == pytest.approx(
        counts["kernel_tx_copy"] / total * 8e9 / 2e9)
    assert sum(a["cycles_per_byte"].values()) == pytest.approx(4.0)


def test_nothing_invented():
    lines, _ = _mixed_lines()
    # no cycles and no task-clock: no cycles per byte at all, never 0
    a = A.attribute(lines, "cpu-clock", None, 3e9, None, 1e9)
    assert a["estimated"] is True
    assert all(v is None for v in a["cycles_per_byte"].values())
    # no payload bytes
    a = A.attribute(lines, "cpu-clock", 1e9, 3e9, None, 0)
    assert all(v is None for v in a["cycles_per_byte"].values())
    # no samples
    a = A.attribute([], "cpu-clock", 1e9, 3e9, None, 1e9)
    assert a["samples"] == 0
    assert all(v == 0 for v in a["share"].values())
    assert all(v is None for v in a["cycles_per_byte"].values())


def test_rules_table_shape():
    """One table; every rule names a known category and a side."""
    for cat_, side, frames, under, not_under in A.RULES:
        assert cat_ in A.CATEGORIES and cat_ != "other"
        assert side in ("k", "u")
        assert frames and all(isinstance(f, str) for f in frames)
        assert isinstance(under, tuple) and isinstance(not_under, tuple)


def test_parse_frame():
    assert A.parse_frame("_copy_from_iter_[k]") == ("_copy_from_iter", "k")
    assert A.parse_frame("do_softirq.part.0_[k]") == ("do_softirq", "k")
    assert A.parse_frame("finish_task_switch.isra.0_[k]") == ("finish_task_switch", "k")
    assert A.parse_frame("foo.constprop.0.isra.0_[k]") == ("foo", "k")
    assert A.parse_frame("wl_message_serialize") == ("wl_message_serialize", "u")


def test_fixture_files_if_present():
    """The synthetic sweep fixtures (tests/python/fixtures/folded) attribute cleanly."""
    d = os.path.join(FIXTURES, "folded")
    if not os.path.isdir(d):
        pytest.skip("no fixtures")
    for name in sorted(os.listdir(d)):
        if name.endswith(".folded"):
            a = A.attribute_file(os.path.join(d, name), "cpu-clock", 1e9, 3e9, None, 1e9)
            if a["samples"]:
                assert abs(sum(a["share"].values()) - 1) < 1e-9


# ---- flame graphs ------------------------------------------------------------------------
def _inferno():
    try:
        F.find_tool("inferno-flamegraph")
        F.find_tool("inferno-diff-folded")
        return True
    except F.FlamegraphError:
        return False


needs_inferno = pytest.mark.skipif(not _inferno(), reason="inferno not installed (make deps)")


def _write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def _fills_of(svg, frame):
    """Fill colours of the rectangles whose title starts with frame."""
    out = set()
    for g in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}g"):
        title = g.find("{http://www.w3.org/2000/svg}title")
        rect = g.find("{http://www.w3.org/2000/svg}rect")
        if title is not None and rect is not None and (title.text or "").startswith(frame + " "):
            out.add(rect.get("fill"))
    return out


@needs_inferno
def test_render_svg_well_formed_with_frames(tmp_path):
    lines, _ = _mixed_lines()
    folded = _write(tmp_path / "a.folded", lines)
    svg = F.render(folded, str(tmp_path / "a.svg"), "hand-made <stacks> & co")
    ET.parse(svg)
    text = open(svg).read()
    for frame in ("_copy_from_iter", "skb_copy_ubufs", "wl_message_serialize", "iov_iter_get_pages2"):
        assert frame in text
    # kernel frames are coloured apart from user frames
    kf, uf = _fills_of(svg, "_copy_from_iter"), _fills_of(svg, "wl_message_serialize")
    assert kf and uf and not (kf & uf)


@needs_inferno
def test_diff_svg(tmp_path):
    a = _write(tmp_path / "a.folded", [line(["s"] + SYS_SENDTO + k("tcp_sendmsg", "_copy_from_iter"), 50),
                                       line(["s", "main"], 10)])
    b = _write(tmp_path / "b.folded", [line(["s"] + SOFTIRQ_RX + k("skb_copy_ubufs"), 40),
                                       line(["s"] + SYS_SENDTO + k("tcp_sendmsg", "_copy_from_iter"), 5),
                                       line(["s", "main"], 10)])
    svg = F.diff(a, b, str(tmp_path / "d.svg"), "a vs b")
    ET.parse(svg)
    assert "skb_copy_ubufs" in open(svg).read()


@needs_inferno
def test_empty_folded_gives_valid_svg(tmp_path):
    empty = _write(tmp_path / "e.folded", [])
    ET.parse(F.render(empty, str(tmp_path / "e.svg"), "nothing"))
    full = _write(tmp_path / "f.folded", [line(["s", "main"], 3)])
    ET.parse(F.diff(empty, full, str(tmp_path / "d.svg"), "nothing vs something"))


def test_missing_inferno_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "nocargo"))
    folded = _write(tmp_path / "a.folded", [line(["s", "main"], 3)])
    with pytest.raises(F.FlamegraphError, match="inferno-flamegraph not found.*make deps"):
        F.render(folded, str(tmp_path / "a.svg"), "t")
    with pytest.raises(F.FlamegraphError, match="inferno-diff-folded not found"):
        F.diff(folded, folded, str(tmp_path / "d.svg"), "t")
    assert not os.path.exists(tmp_path / "a.svg")
