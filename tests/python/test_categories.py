"""The categories of the send and receive path on real stacks.

The fixtures (tests/python/fixtures/stacks/, README there) were recorded with `netio-trace run
--trace-only` on the 6.18 host and in Debian's 6.1 guest: every strategy at
256 B and 64 KiB over loopback and veth, sampled on the scheduler tick.
"""
import glob
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from analysis import attribution as A  # noqa: E402

STACKS = os.path.join(REPO, "tests", "python", "fixtures", "stacks")
KERNELS = ("host-6.18", "guest-6.1")
STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field", "sendfile", "io-uring",
              "io-uring-zc")
SIZES = (256, 65536)
TRANSPORTS = ("loopback", "veth")
# "other" at most this share of the samples, by message size: what the rules leave unnamed
# stays small
OTHER_MAX = {256: 0.20, 65536: 0.10}


def fixture_path(kernel, strategy, size, transport):
    return os.path.join(STACKS, kernel, f"{strategy}-{size}-{transport}.folded")


def attribution_of(path):
    return A.attribute_file(path, "tick", None, None, None, None)


def all_fixtures():
    return [(kn, s, z, t) for kn in KERNELS for s in STRATEGIES for z in SIZES
            for t in TRANSPORTS]


def _table():
    cols = [c[:7] for c in A.CATEGORIES]
    rows = ["shares (% of samples) on the recorded stacks",
            f"{'fixture':34} " + " ".join(f"{c:>7}" for c in cols) + "  samples"]
    for kn, s, z, t in all_fixtures():
        a = attribution_of(fixture_path(kn, s, z, t))
        rows.append(f"{kn + '/' + s + '-' + str(z) + '-' + t:34} "
                    + " ".join(f"{100 * a['share'][c]:7.1f}" for c in A.CATEGORIES)
                    + f"  {a['samples']}")
    return "\n".join(rows)


def test_every_fixture_is_there():
    for case in all_fixtures():
        assert os.path.getsize(fixture_path(*case)) > 0, case
    assert len(glob.glob(os.path.join(STACKS, "*", "*.folded"))) == len(all_fixtures())


@pytest.mark.parametrize("kernel,strategy,size,transport", all_fixtures())
def test_other_is_small(kernel, strategy, size, transport):
    a = attribution_of(fixture_path(kernel, strategy, size, transport))
    assert a["samples"] >= A.FEW_SAMPLES
    assert a["share"]["other"] <= OTHER_MAX[size], (kernel, strategy, size, transport,
                                                    a["share"])


def test_shares_printed_and_every_category_reachable(capsys):
    with capsys.disabled():
        print("\n" + _table())
    reached = {c: 0.0 for c in A.CATEGORIES}
    for case in all_fixtures():
        a = attribution_of(fixture_path(*case))
        assert sum(a["share"].values()) == pytest.approx(1.0)
        for c in A.CATEGORIES:
            reached[c] = max(reached[c], a["share"][c])
    # the receive side's zero-copy categories: on the receive fixtures
    # (test_receive_categories.py)
    assert [c for c, v in reached.items() if v <= 0] == list(A.RECEIVE_CATEGORIES)


def test_each_kernel_reaches_the_path_categories():
    """Not one kernel carrying the other: each sees every category of the path."""
    for kn in KERNELS:
        seen = set()
        for _, s, z, t in (c for c in all_fixtures() if c[0] == kn):
            a = attribution_of(fixture_path(kn, s, z, t))
            seen |= {c for c in A.PATH_CATEGORIES if a["share"][c] > 0}
        assert seen == set(A.PATH_CATEGORIES), (kn, set(A.PATH_CATEGORIES) - seen)


def test_copies_where_the_strategy_copies():
    """The copy categories keep their meaning on real stacks."""
    for kn in KERNELS:
        for t in TRANSPORTS:
            share = {s: attribution_of(fixture_path(kn, s, 65536, t))["share"] for s in STRATEGIES}
            # spliced pages are never a copy; 6.18 looks them up in the page cache inside
            # the sendfile (6.1 hands them to tcp_sendpage, whose frames are tcp_tx's)
            assert share["sendfile"]["kernel_tx_copy"] < 0.01, (kn, t)
            if kn == "host-6.18":
                assert share["sendfile"]["splice"] > 0.05, (kn, t)
            assert share["two-copy"]["user_copy"] > 0.01, (kn, t)
            assert share["one-copy"]["user_copy"] == 0, (kn, t)
            assert share["one-copy"]["kernel_tx_copy"] > 0.15, (kn, t)
            assert share["zero-copy"]["kernel_tx_copy"] < 0.01, (kn, t)
            assert share["zero-copy"]["fallback_copy"] > 0.15, (kn, t)
            assert share["zero-copy"]["pinning"] > 0.01, (kn, t)


# ---- the rules on real stacks ------------------------------------------------------------
def real_stack(kernel, *tail):
    """A recorded stack of `kernel` whose innermost frames are `tail` (names without
    suffixes), and its sample count."""
    for path in sorted(glob.glob(os.path.join(STACKS, kernel, "*.folded"))):
        with open(path) as f:
            for ln in f:
                frames, n = A.parse_folded_line(ln)
                names = [A.parse_frame(fr)[0] for fr in frames]
                if names[-len(tail):] == list(tail):
                    return frames
    raise AssertionError(f"no recorded {kernel} stack ends in {';'.join(tail)}")


def names(frames):
    return [A.parse_frame(f)[0] for f in frames]


@pytest.mark.parametrize("kernel,tail,category", [
    # the send path, innermost first
    ("host-6.18", ("tcp_sendmsg", "tcp_sendmsg_locked", "__check_object_size",
                   "__virt_addr_valid"), "syscall"),
    ("host-6.18", ("__sys_recvfrom", "fdget"), "syscall"),
    ("host-6.18", ("copy_msghdr_from_user", "import_iovec", "__import_iovec", "iovec_from_user",
                   "copy_iovec_from_user"), "syscall"),
    ("host-6.18", ("__tcp_push_pending_frames", "tcp_write_xmit"), "tcp_tx"),
    ("host-6.18", ("tcp_rcv_established", "tcp_ack"), "tcp_tx"),
    ("host-6.18", ("__ip_queue_xmit", "ip_output", "ip_finish_output2", "__dev_queue_xmit"),
     "ip_tx"),
    ("host-6.18", ("ip_rcv", "ip_rcv_finish_core", "tcp_v4_early_demux",
                   "__inet_lookup_established"), "net_rx"),
    ("host-6.18", ("__ip_local_out", "ip_send_check"), "checksum"),
    ("host-6.18", ("net_rx_action", "skb_defer_free_flush", "napi_consume_skb",
                   "skb_release_data"), "skb_mem"),
    ("host-6.18", ("schedule_timeout", "schedule", "__schedule", "finish_task_switch"), "sched"),
    ("host-6.18", ("tcp_sendmsg", "lock_sock_nested", "_raw_spin_lock_bh",
                   "__pv_queued_spin_lock_slowpath"), "locks"),
    ("host-6.18", ("bpf_prog_9f47e840fc268c19_sc_enter", "ktime_get_mono_fast_ns", "read_tsc"),
     "bpf"),
    # sendfile's file side, and io_uring's submission and completion (no copy in either)
    ("host-6.18", ("do_splice_direct", "splice_direct_to_actor", "direct_splice_actor",
                   "splice_to_socket"), "splice"),
    ("host-6.18", ("splice_direct_to_actor", "shmem_file_splice_read", "folio_unlock"),
     "splice"),
    ("host-6.18", ("__do_sys_io_uring_enter", "io_submit_sqes", "its_return_thunk"), "syscall"),
    ("host-6.18", ("conn_thread", "uring_send_iov", "[liburing.so.2.3]"), "syscall"),
    ("host-6.18", ("io_handle_tw_list", "io_notif_tw_complete"), "completion"),
    # the copies stay what they were
    ("host-6.18", ("tcp_recvmsg_locked", "skb_copy_datagram_iter", "__skb_datagram_iter",
                   "_copy_to_iter"), "kernel_rx_copy"),
    ("guest-6.1", ("sk_page_frag_refill", "skb_page_frag_refill", "__alloc_pages",
                   "get_page_from_freelist", "clear_page_erms"), "skb_mem"),
    ("guest-6.1", ("tcp_recvmsg_locked", "sk_wait_data", "_raw_spin_lock_bh",
                   "native_queued_spin_lock_slowpath"), "locks"),
    ("guest-6.1", ("skb_copy_ubufs",), "fallback_copy"),
    # the workload's own start-up and exit
    ("guest-6.1", ("_dl_sysdep_start", "dl_main", "_dl_relocate_object"), "startup"),
    ("guest-6.1", ("exit_mmap", "unmap_vmas", "unmap_page_range"), "startup"),
    ("guest-6.1", ("main", "print_json"), "startup"),
])
def test_rule_on_a_real_stack(kernel, tail, category):
    assert A.classify(real_stack(kernel, *tail)) == category


def test_ambiguous_lock_decided_by_the_wake_up_around_it():
    """_raw_spin_unlock_irqrestore is where a tick lands after an irqs-off section. Inside a
    wake-up (sock_def_readable → try_to_wake_up) it is the wake-up's: sched. Elsewhere it is
    a lock's: locks."""
    for kernel, around, category in (
            ("host-6.18", ("tcp_data_queue", "sock_def_readable"), "sched"),
            ("guest-6.1", ("sock_def_readable", "__wake_up_common_lock"), "sched"),
            ("host-6.18", ("netif_rx_internal", "enqueue_to_backlog"), "locks"),
            ("host-6.18", ("sk_reset_timer", "__mod_timer"), "locks")):
        stack = real_stack(kernel, *around, "_raw_spin_unlock_irqrestore")
        assert A.classify(stack) == category, (kernel, around)
    woken = real_stack("host-6.18", "tcp_data_queue", "sock_def_readable",
                       "_raw_spin_unlock_irqrestore")
    # the same frame inside a copy is the copy's (the lock rules do not match under a copy)
    assert A.classify(woken[:1] + ["skb_copy_ubufs_[k]", "_raw_spin_unlock_irqrestore_[k]"]) \
        == "fallback_copy"


def test_ambiguous_clock_read_decided_by_its_caller():
    """ktime_get and read_tsc/read_hpet have no rule: the frame outside them decides."""
    assert A.classify(real_stack("host-6.18", "tcp_write_xmit", "ktime_get", "read_tsc")) \
        == "tcp_tx"
    assert A.classify(real_stack("host-6.18", "tcp_rcv_established", "tcp_mstamp_refresh",
                                 "ktime_get", "read_tsc")) == "net_rx"
    assert A.classify(real_stack("guest-6.1", "tcp_write_xmit", "ktime_get", "read_hpet")) \
        == "tcp_tx"
    in_bpf = real_stack("host-6.18", "ktime_get_mono_fast_ns", "read_tsc")
    assert any(n.startswith("bpf_prog_") for n in names(in_bpf))
    assert A.classify(in_bpf) == "bpf"


def test_ambiguous_ack_transmit_in_softirq_is_tcp_tx():
    """tcp_write_xmit under the receive softirq (ACK-clocked transmit) is TCP transmit,
    and the IP transmit under it is IP transmit: the innermost known frame wins."""
    st = real_stack("host-6.18", "tcp_rcv_established", "__tcp_push_pending_frames",
                    "tcp_write_xmit")
    assert "net_rx_action" in names(st) or "process_backlog" in names(st) \
        or "__release_sock" in names(st)
    assert A.classify(st) == "tcp_tx"


def test_ambiguous_bpf_trampoline_own_time_only():
    """A fexit trampoline calls the traced function: its own samples are the tracer's, the
    function's work under it is not (6.1 guest, fentry rung)."""
    own = real_stack("guest-6.1", "__x64_sys_sendmsg", "bpf_trampoline_6442532712")
    assert A.classify(own) == "bpf"
    through = real_stack("guest-6.1", "tcp_sendmsg", "bpf_trampoline_6442529289", "tcp_sendmsg",
                         "tcp_sendmsg_locked")
    assert A.classify(through) == "tcp_tx"


def test_ambiguous_softirq_loop_own_time_is_irqs_off():
    """handle_softirqs as the innermost frame is where interrupts came back on (the irqs-off
    shadow): locks. With the softirq's work under it, that work's category."""
    after_ipi = real_stack("guest-6.1", "sysvec_call_function_single", "__irq_exit_rcu",
                           "handle_softirqs")
    assert A.classify(after_ipi) == "locks"
    rx = real_stack("host-6.18", "handle_softirqs", "net_rx_action", "__napi_poll",
                    "process_backlog", "_raw_spin_unlock_irq")
    assert A.classify(rx) == "locks"
    assert A.classify(rx[:-1]) == "net_rx"


def test_syscall_entry_own_time_only_unknown_stays_other():
    """Syscall entry and exit count their own samples; what runs under them and no rule
    knows (rseq at the exit to user mode, here) stays other, visible."""
    entry = real_stack("host-6.18", "__send", "entry_SYSCALL_64_after_hwframe", "do_syscall_64")
    assert A.classify(entry) == "syscall"
    rseq = real_stack("host-6.18", "exit_to_user_mode_loop", "__rseq_handle_notify_resume")
    assert A.classify(rseq) == "other"
    # the libc wrapper with no kernel frame: a tick in user mode around the system call
    assert A.classify(real_stack("host-6.18", "conn_thread", "sendmsg")) == "syscall"
    assert A.classify(["netio-server", "start_thread", "conn_thread", "sendmsg",
                       "mystery_[k]"]) == "other"


def test_page_fault_is_start_up_unless_inside_a_copy():
    """A page fault is the process's start-up, unless a copy took it (user or kernel)."""
    fault = ["asm_exc_page_fault_[k]", "exc_page_fault_[k]", "do_user_addr_fault_[k]",
             "handle_mm_fault_[k]"]
    assert A.classify(["netio-server", "main", "wl_options_parse"] + fault) == "startup"
    assert A.classify(["netio-server", "conn_thread", "wl_message_serialize",
                       "__memmove_avx_unaligned_erms"] + fault) == "user_copy"
    tx = real_stack("host-6.18", "tcp_sendmsg_locked", "_copy_from_iter")
    assert A.classify(tx + fault) == "kernel_tx_copy"


def test_idle_is_never_counted():
    """A sample of the idle loop is not in any category, nor in the total."""
    idle = ["swapper/1"] + [f + "_[k]" for f in (
        "secondary_startup_64_no_verify", "start_secondary", "cpu_startup_entry", "do_idle",
        "default_idle_call", "default_idle", "pv_native_safe_halt")]
    assert A.classify(idle) == "idle"
    # a softirq run on an idle CPU is not idle
    rx = real_stack("host-6.18", "handle_softirqs", "net_rx_action", "__napi_poll",
                    "process_backlog")
    st = idle[:5] + rx[rx.index("handle_softirqs_[k]"):]
    assert A.classify(st) == "net_rx"
    path = fixture_path("host-6.18", "one-copy", 65536, "loopback")
    with open(path) as f:
        lines = f.read().splitlines()
    base = A.attribute(lines, "tick", None, None, None, None)
    with_idle = A.attribute(lines + [";".join(idle) + " 500"], "tick", None, None, None, None)
    assert with_idle["samples"] == base["samples"]
    assert with_idle["share"] == base["share"]
    assert with_idle["idle_samples"] == 500 and base["idle_samples"] == 0


def test_a_vcpu_halted_on_a_contended_lock_is_the_locks():
    """kvm_wait halts a vCPU until the lock's holder kicks it: the same halt as the idle
    loop's, but time the task spent waiting for the lock."""
    rx = real_stack("host-6.18", "tcp_v4_rcv")
    st = rx[:rx.index("tcp_v4_rcv_[k]") + 1] + [f + "_[k]" for f in (
        "_raw_spin_lock", "__pv_queued_spin_lock_slowpath", "kvm_wait", "pv_native_safe_halt")]
    assert A.classify(st) == "locks"


def test_categories_order_and_labels():
    assert A.CATEGORIES[:6] == ("user_copy", "kernel_tx_copy", "pinning", "fallback_copy",
                                "completion", "kernel_rx_copy")
    assert A.CATEGORIES[-1] == "other"
    assert set(A.LABELS) == set(A.CATEGORIES)
    assert len(set(A.LABELS.values())) == len(A.CATEGORIES)
    used = {r[0] for r in A.RULES}
    assert used == set(A.CATEGORIES) - {"other"}


@pytest.mark.parametrize("stack,category", [
    # 6.1's syscall dispatcher (x64_sys_call) under a send wrapper: the entry's own time
    ("netio-server;__send;entry_SYSCALL_64_after_hwframe_[k];do_syscall_64_[k];x64_sys_call_[k]",
     "syscall"),
    # malloc's first call in a thread, and a tick in libc's call of main
    ("netio-server;tcache_init.part.0", "startup"),
    ("netio-client;__libc_start_call_main", "startup"),
    # a join or a condition variable waiting in the kernel
    ("do_futex_[k];futex_wait_[k];futex_wait_queue_[k];__futex_queue_[k];plist_add_[k]", "locks"),
    # main's own code is not start-up by name alone
    ("netio-server;__libc_start_call_main;main", "other"),
])
def test_rule_on_a_guest_live_stack(stack, category):
    """Stacks the live test in the 6.1 guest left in "other" (make vmtest, 2026-11-26)."""
    assert A.classify(stack.split(";")) == category
