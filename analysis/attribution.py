"""Per-copy attribution of sampled stacks (docs/DESIGN.md, "Per-copy attribution").

Each folded stack (``comm;outermost;...;innermost count``, kernel frames suffixed ``_[k]``)
goes to the category of the innermost frame that matches a rule of RULES, the one table of
category rules: a kernel that renames a function needs a one-line change there.

How the walk goes, from the innermost frame outwards:
- compiler suffixes (``.isra.0``, ``.constprop.0``, ``.part.0``, ``.cold``) are ignored;
- at each frame the rules are tried in table order; a rule matches when the frame matches
  one of its patterns, the frames outside it (in the same context, see below) contain one
  of its ``under`` patterns (if it has any) and none of its ``not_under`` patterns;
- the walk stops at a hard-interrupt entry (``asm_sysvec_*``, ``asm_common_interrupt``…):
  the code the interrupt landed on did not do the interrupt's work. A softirq run from the
  interrupt's exit (``__irq_exit_rcu;handle_softirqs;...``) is inside that context and is
  classified by its own frames (e.g. ``skb_copy_ubufs`` there is ``fallback_copy``);
- a pattern written ``=name`` (``own()`` in the table) matches only the innermost frame: the
  frame's own samples. Syscall entry, the softirq loop and the fexit trampoline call
  everything; matching them anywhere would hide what runs under them;
- a frame of the idle loop reached before any match: ``idle``, left out of every count;
- no match: ``other``, so that what the rules do not know stays visible.

The categories: the copies first, with docs/DESIGN.md's meanings; then the send and
receive path as a kernel engineer reads a profile (syscall and socket layer, TCP transmit,
IP and device transmit, softirq receive, checksums, skb memory, scheduler and wake-ups,
locks and irqs-off, the tracer's BPF, the workload's start-up and exit); ``other`` last. Inside a copy frame everything is the
copy's (its allocations and locks: the path rules have ``not_under=COPY_FRAMES``), except the
tracer's BPF, which is never a copy's cost. A frame that belongs to two paths is decided by
the frames around it, and its rule says how (locks inside a wake-up are the wake-up's;
clock reads and other helpers have no rule, so their caller decides). docs/DESIGN.md has the
table.

What the samples can and cannot see (checked with perf on the host):
- With FSRM the kernel copies user memory with an inline ``rep movsb`` inside
  ``_copy_from_iter`` / ``_copy_to_iter``: there is no ``rep_movs_alternative`` frame, so
  those functions themselves are copy frames (and ``rep_movs_alternative`` / ``copy_user_*``
  still are, for CPUs without FSRM).
- With no PMU (``source == "cpu-clock"``), and with samples on the scheduler tick
  (``source == "tick"``), samples come from a timer interrupt, which cannot
  land while interrupts are disabled: that time shows up where they are enabled again,
  mostly ``_raw_spin_unlock_irqrestore`` and ``handle_softirqs``. Those samples are
  classified by the frames around them like any other (under ``skb_copy_ubufs`` they are the
  fallback copy's; under ``tcp_write_xmit`` they are ``other``), and their share is reported
  as ``irqs_off_share`` with a note, so a report can say how much of the profile is such
  shadow time. Tick samples reach here without the interrupt's own frames (the tracer strips
  everything up to the interrupt entry), like perf samples; cycles are estimated from
  task-clock either way when no cycles counter exists.

``user_copy`` is the workload's serialization memcpy: a user-space memcpy variant (libc's
``__memmove_avx_unaligned_erms`` and friends, ``memcpy@plt``, or an unresolved libc frame)
called from the serializer (``wl_message_serialize`` in workloads/message.c), or a sample in
the serializer itself (a copy the compiler inlined). The profiler puts the caller of a
frameless libc leaf back into the stack, so the serializer is there even though the
frame-pointer walk skips it.
"""
import fnmatch
import math
import re

# The copies first (docs/DESIGN.md's names and meanings), then the send and receive path as a
# kernel engineer reads a profile, "other" last: what no rule knows stays visible.
COPY_CATEGORIES = ("user_copy", "kernel_tx_copy", "pinning", "fallback_copy", "completion",
                   "kernel_rx_copy")
PATH_CATEGORIES = ("syscall", "splice", "tcp_tx", "ip_tx", "net_rx", "checksum", "skb_mem",
                   "sched", "locks", "bpf", "startup")
# The receive side's zero-copy: TCP_ZEROCOPY_RECEIVE's own work, the page table
# work of mapping the socket's pages (and unmapping the last ones), its copy buffer.
RECEIVE_CATEGORIES = ("zc_receive", "page_mapping", "copy_buffer")
CATEGORIES = COPY_CATEGORIES + PATH_CATEGORIES + RECEIVE_CATEGORIES + ("other",)

# What each category holds, as the plots, the report and the flame graph legends say it.
LABELS = {
    "user_copy": "user copy (serialization memcpy)",
    "kernel_tx_copy": "kernel tx copy (_copy_from_iter)",
    "pinning": "page pinning (zero-copy)",
    "fallback_copy": "fallback copy (skb_copy_ubufs)",
    "completion": "zero-copy completions",
    "kernel_rx_copy": "kernel rx copy (_copy_to_iter)",
    "syscall": "syscall entry/exit, socket layer",
    "splice": "splice, page cache (sendfile's file side)",
    "tcp_tx": "TCP transmit (tcp_sendmsg, tcp_write_xmit, ACKs)",
    "ip_tx": "IP/device transmit (ip_output, dev_queue_xmit, lo/veth xmit)",
    "net_rx": "softirq receive (netif_receive_skb, ip_rcv, tcp_v4_rcv)",
    "checksum": "checksums",
    "skb_mem": "skb alloc/free, memory accounting",
    "sched": "scheduler, wake-ups",
    "locks": "locks, irqs-off",
    "bpf": "the tracer's BPF programs",
    "startup": "process start-up and exit (exec, ld.so, page faults)",
    "zc_receive": "zero-copy receive (tcp_zerocopy_receive)",
    "page_mapping": "page mapping (vm_insert_pages, zap)",
    "copy_buffer": "zero-copy receive's copy buffer",
    "other": "other (not known to the rules)",
}

# ---- the table -------------------------------------------------------------------------
# A pattern starting with "=" matches the frame's own time only: the frame is the innermost
# of the stack. Used for frames that call everything (syscall entry, the softirq loop), so
# that what runs under them and no rule knows stays "other", visible.


def own(*names):
    return tuple("=" + n for n in names)


# Frame sets used as context ("under") by the rules.
SEND_PATH = ("tcp_sendmsg", "tcp_sendmsg_locked", "tcp_sendmsg_fastopen", "udp_sendmsg",
             "udpv6_sendmsg", "inet_sendmsg", "inet6_sendmsg", "sock_sendmsg", "__sock_sendmsg",
             "____sys_sendmsg", "___sys_sendmsg", "__sys_sendmsg", "__sys_sendto",
             "sock_write_iter", "__io_send*", "io_send*")
RECV_PATH = ("tcp_recvmsg", "tcp_recvmsg_locked", "skb_copy_datagram_iter",
             "__skb_datagram_iter", "udp_recvmsg", "udpv6_recvmsg", "inet_recvmsg",
             "sock_recvmsg", "__sys_recvfrom", "____sys_recvmsg", "sock_read_iter")
# Copies on a send or receive path that are not the payload: syscall arguments, iovec arrays.
ARG_COPIES = ("import_iovec", "__import_iovec", "iovec_from_user", "copy_msghdr_from_user",
              "__copy_msghdr", "sendmsg_copy_msghdr", "recvmsg_copy_msghdr",
              "move_addr_to_kernel", "move_addr_to_user", "put_cmsg", "__put_cmsg",
              "copy_iovec_from_user")
COMPLETION = ("__msg_zerocopy_callback", "msg_zerocopy_callback", "msg_zerocopy_complete",
              "sock_zerocopy_callback", "ip_recv_error", "ipv6_recv_error", "inet_recv_error",
              "sock_dequeue_err_skb", "io_tx_ubuf_complete", "io_notif_*")
SERIALIZER = ("wl_message_serialize", "*serializ*")   # workloads/message.c, any serializer
GENERIC_KERNEL_COPY = ("rep_movs_alternative", "copy_user_generic*", "copy_user_enhanced*",
                       "copy_user_fast_string", "__copy_user_nocache", "copy_user_short_string")
USER_MEMCPY = ("memcpy", "memmove", "mempcpy", "__memcpy*", "__memmove*", "__mempcpy*",
               "memcpy@plt", "memmove@plt", "mempcpy@plt", "__memcpy_chk*", "[libc.so*]",
               "[libc-*.so]")
FALLBACK = ("skb_copy_ubufs",)
# A zero-copy send's page pinning, named for it
ZC_PINNING = ("__zerocopy_sg_from_iter", "zerocopy_sg_from_iter", "zerocopy_fill_skb_from_iter",
              "skb_zerocopy_iter_stream", "msg_zerocopy_realloc", "msg_zerocopy_alloc",
              "mm_account_pinned_pages")
# The kernel's generic page pinning: a send's only on a send path (a futex's key and direct
# I/O pin user pages too)
GUP = ("iov_iter_get_pages2", "iov_iter_get_pages_alloc2", "__iov_iter_get_pages_alloc",
       "iov_iter_extract_pages", "iov_iter_extract_user_pages", "*_user_pages_fast",
       "gup_fast*", "internal_get_user_pages_fast", "__gup_longterm_locked")
PINNING = ZC_PINNING + GUP
TX_COPY = ("_copy_from_iter", "_copy_from_iter_nocache", "copy_from_user_iter",
           "copy_page_from_iter", "copy_page_from_iter_atomic", "skb_do_copy_data_nocache",
           "skb_copy_to_page_nocache", "csum_and_copy_from_iter", "csum_and_copy_from_iter_full",
           "skb_add_data_nocache")
RX_COPY = ("_copy_to_iter", "copy_to_user_iter", "copy_page_to_iter", "simple_copy_to_iter",
           "__skb_datagram_iter", "skb_copy_datagram_iter", "skb_copy_and_csum_datagram_msg",
           "csum_and_copy_to_iter")
# TCP_ZEROCOPY_RECEIVE: its own work; the page tables it fills with the socket's
# pages and zaps the previous call's (under it only: a munmap elsewhere is no receive's); its
# copy buffer (receive_fallback_to_copy: what is queued fits the buffer, copied instead).
ZC_RECEIVE = ("tcp_zerocopy_receive", "receive_fallback_to_copy", "tcp_zc_handle_leftover",
              "tcp_zerocopy_set_hint_for_skb", "tcp_zc_finalize_rx_tstamp", "find_tcp_vma",
              "skb_advance_to_frag", "can_map_frag", "tcp_zerocopy_vm_insert_batch_error")
PAGE_MAPPING = ("tcp_zerocopy_vm_insert_batch", "vm_insert_pages", "insert_pages",
                "insert_page_in_batch_locked", "insert_page_into_pte_locked", "vm_insert_page",
                "zap_page_range_single*", "zap_page_range*", "unmap_page_range",
                "unmap_single_vma", "zap_pte_range", "zap_pmd_range*", "zap_pud_range*",
                "zap_p4d_range", "tlb_finish_mmu", "tlb_gather_mmu", "tlb_flush_mmu*",
                "flush_tlb_*", "native_flush_tlb_*", "__tlb_remove_*", "tlb_batch_pages_flush",
                "free_pages_and_swap_cache", "release_pages", "folio_remove_rmap*",
                "page_remove_rmap", "folio_add_*_rmap*", "page_add_file_rmap", "__folio_mod_stat",
                "lock_vma_under_rcu", "mmap_read_lock*", "mmap_read_unlock", "vma_end_read",
                "__pte_offset_map*", "pte_offset_map*", "walk_to_pmd", "__pmd_alloc",
                "__pte_alloc", "lru_add_drain", "mod_node_page_state", "__mod_lruvec_page_state")
# Inside a copy, everything is the copy's (its allocations, locks, page faults): the path
# categories' rules do not match under these frames, and the walk goes on out to the copy.
# Not the tracer's BPF: a program attached inside a copy is never the copy's cost.
COPY_FRAMES = (FALLBACK + COMPLETION + PINNING + TX_COPY + RX_COPY + GENERIC_KERNEL_COPY +
               ZC_RECEIVE)

# The send and receive path, so that "other" is small. These frame lists are data, each its category's own:
# alike in shape (long tuples of names), not copies of one another.
SYSCALL = own("entry_SYSCALL_64*", "do_syscall_64", "x64_sys_call", "syscall_exit_to_user_mode*",
              "exit_to_user_mode_prepare", "exit_to_user_mode_loop", "syscall_enter_from_user_mode*",
              "__x64_sys_*", "__do_sys_*", "__se_sys_*", "__sys_*", "___sys_*", "____sys_*",
              "sock_sendmsg", "__sock_sendmsg", "sock_sendmsg_nosec", "sock_recvmsg",
              "sock_recvmsg_nosec", "inet_sendmsg", "inet_recvmsg", "inet6_sendmsg",
              "inet6_recvmsg", "sock_write_iter", "sock_read_iter", "do_sys_poll", "do_poll*",
              "sock_poll", "tcp_poll") + (
    "fdget*", "__fdget*", "fput", "fput_many", "__fget_light", "__fget_files", "fget",
    "sockfd_lookup_light", "import_single_range", "import_ubuf", "_copy_from_user",
    "_copy_to_user", "__put_user_*", "__get_user_*", "__check_object_size",
    "check_stack_object", "__virt_addr_valid",
    "check_heap_object", "security_socket_*", "apparmor_socket_*", "aa_sk_perm",
    "selinux_socket_*", "tcp_recvmsg", "tcp_recvmsg_locked", "sk_wait_data",
    "tcp_recv_timestamp", "sock_recv_cmsgs", "__sock_recv_cmsgs", "tcp_inq*",
    "poll_select_*", "__pollwait", "poll_freewait", "add_wait_queue", "remove_wait_queue",
    "do_tcp_getsockopt", "tcp_getsockopt", "do_sock_getsockopt",
    "__audit_syscall_*",
    # io_uring's submission and completion, its per-call work in place of a syscall's
    "io_submit_sqes", "io_issue_sqe", "__io_issue_sqe", "io_send*", "io_sendmsg*",
    "io_msg_copy_hdr", "io_netmsg_*", "io_*_prep", "__io_submit_flush_completions",
    "__io_commit_cqring_flush", "io_cqring_*", "io_handle_tw_list", "tctx_task_work",
    "io_req_*", "io_uring_*", "io_fill_cqe*", "io_get_cqe*", "io_poll_*", "io_arm_poll*",
    "io_import_*", "io_buffer_*") + ARG_COPIES
# the libc wrappers: a tick in user mode there is the system call's, not the workload's
SYSCALL_USER = own("sendfile", "sendfile64", "__send", "send", "__libc_send", "sendmsg",
                   "__sendmsg", "__libc_sendmsg", "sendto", "__sendto", "__libc_sendto", "__recv", "recv", "__libc_recv",
                   "recvmsg", "__recvmsg", "__libc_recvmsg", "recvfrom", "__libc_recvfrom",
                   "poll", "__poll", "syscall", "__GI___pthread_disable_asynccancel",
                   "__GI___pthread_enable_asynccancel", "__pthread_disable_asynccancel",
                   "__pthread_enable_asynccancel",
                   # io_uring's submission from user space: liburing and the workload's SQEs
                   "[liburing*", "io_uring_*", "wl_uring_*")
# sendfile and splice: the file's pages looked up in the page cache and passed through a pipe
# to the socket by reference (bytes spliced, not copied); 6.1 hands each page to
# tcp_sendpage, later kernels send a MSG_SPLICE_PAGES message.
SPLICE = ("do_sendfile", "do_splice_direct*", "splice_direct_to_actor", "direct_splice_actor",
          "splice_to_socket", "splice_file_to_pipe", "*_splice_read", "splice_folio_into_pipe",
          "page_cache_pipe_buf_*", "generic_pipe_buf_*", "splice_from_pipe*",
          "__splice_from_pipe", "pipe_to_sendpage", "sock_sendpage", "kernel_sendpage",
          "inet_sendpage", "iter_file_splice_write",
          # a socket's pages spliced into a pipe (splice receive), and the pipe to /dev/null
          "skb_splice_bits", "__splice_segment", "spd_fill_page", "splice_to_pipe",
          "add_to_pipe", "tcp_read_sock*", "tcp_splice_data_recv", "do_splice*", "__do_splice",
          "splice_write_null", "sock_spd_release", "splice_shrink_spd", "splice_grow_spd")
# the page cache, where a splice looks the file's pages up (a read() of a file is not a splice)
PAGE_CACHE = ("shmem_get_folio*", "shmem_file_read_iter", "filemap_get_*", "filemap_read",
              "filemap_read_folio", "folio_mark_accessed", "folio_unlock", "touch_atime",
              "atime_needs_update")
TCP_TX = ("tcp_sendmsg", "tcp_sendmsg_locked", "tcp_push", "__tcp_push_pending_frames",
          "tcp_push_one", "tcp_write_xmit", "tcp_transmit_skb", "__tcp_transmit_skb",
          "tcp_send_mss", "tcp_current_mss", "tcp_skb_entail", "tcp_event_new_data_sent",
          "tcp_rearm_rto", "tcp_schedule_loss_probe", "tcp_tso_segs", "tcp_tso_autosize",
          "tcp_mss_split_point", "tso_fragment", "tcp_fragment", "tcp_wfree", "tcp_tsq_*",
          "tcp_tasklet_func", "tcp_release_cb", "tcp_pace_kick", "tcp_small_queue_check",
          "tcp_options_write", "tcp_established_options", "tcp_ack", "tcp_clean_rtx_queue*",
          "tcp_ack_update_rtt", "tcp_rate_*", "tcp_cong_control", "tcp_cong_avoid",
          "cubictcp_*", "bictcp_*", "tcp_reno_*", "bbr_*", "tcp_send_ack", "__tcp_send_ack*",
          "tcp_send_delayed_ack", "__tcp_ack_snd_check", "tcp_cleanup_rbuf",
          "__tcp_cleanup_rbuf", "tcp_chrono_*", "tcp_rack_*", "tcp_sacktag_write_queue",
          "tcp_write_timer*", "tcp_delack_timer*", "tcp_retransmit_*", "__tcp_retransmit_skb",
          "tcp_xmit_retransmit_queue", "tcp_stream_memory_free", "sk_stream_wait_memory",
          "tcp_sendmsg_fastopen", "tcp_build_frag", "tcp_mark_push", "tcp_rbtree_insert",
          "tcp_check_space", "tcp_new_space", "tcp_update_skb_after_send", "tcp_event_data_sent",
          "tcp_mtu_probe", "tcp_update_pacing_rate", "tcp_select_window", "__tcp_select_window",
          "tcp_rtx_queue_*", "tcp_newly_delivered", "tcp_ack_tstamp", "tcp_in_ack_event",
          "tcp_process_tlp_ack", "tcp_check_sack_reordering", "tcp_snd_una_update",
          "tcp_wmem_free_skb", "tcp_skb_collapse_tstamp", "tcp_init_tso_segs",
          "tcp_set_skb_tso_segs", "tcp_stream_is_thin", "tcp_sndbuf_expand",
          "tcp_v4_send_ack", "sk_reset_timer", "tcp_downgrade_zcopy_pure")
IP_TX = ("ip_queue_xmit", "__ip_queue_xmit", "ip_local_out", "__ip_local_out", "ip_output",
         "ip_finish_output", "__ip_finish_output", "ip_finish_output2", "ip_send_skb",
         "ip_push_pending_frames", "ip_make_skb", "ip_append_data", "__ip_append_data",
         "ip_build_and_send_pkt", "ip6_xmit", "ip6_output", "ip6_finish_output*",
         "neigh_hh_output", "neigh_resolve_output", "neigh_output", "__dev_queue_xmit",
         "dev_queue_xmit", "dev_hard_start_xmit", "xmit_one", "sch_direct_xmit", "__qdisc_run",
         "qdisc_run*", "__dev_xmit_skb", "pfifo_fast_*", "fq_codel_*", "noop_*",
         "validate_xmit_skb*", "netif_skb_features", "skb_network_protocol", "loopback_xmit",
         "veth_xmit", "veth_forward_skb", "__dev_forward_skb*", "dev_forward_skb",
         "____dev_forward_skb", "eth_type_trans", "netif_rx", "__netif_rx", "netif_rx_internal",
         "enqueue_to_backlog", "dev_queue_xmit_nit", "skb_tx_hash", "netdev_core_pick_tx",
         "netdev_pick_tx", "dst_output", "ip_forward", "ip_forward_finish", "udp_send_skb",
         "ip_route_output*", "__ip_route_output*", "ip_select_ident*", "__ip_select_ident",
         "napi_schedule*", "__napi_schedule*", "____napi_schedule")
NET_RX = ("net_rx_action", "__napi_poll", "napi_poll", "process_backlog", "veth_poll",
          "napi_gro_receive", "napi_complete_done", "gro_normal_list", "napi_gro_flush",
          "dev_gro_receive", "inet_gro_receive", "tcp4_gro_receive", "tcp_gro_receive",
          "netif_receive_skb*", "__netif_receive_skb*", "ip_rcv", "ip_rcv_core",
          "ip_rcv_finish", "ip_rcv_finish_core", "ip_list_rcv*", "ip_sublist_rcv*",
          "ip_local_deliver", "ip_local_deliver_finish", "ip_protocol_deliver_rcu",
          "raw_local_deliver", "tcp_v4_rcv", "tcp_v4_do_rcv", "tcp_rcv_established",
          "tcp_data_queue", "tcp_queue_rcv", "tcp_data_ready", "tcp_event_data_recv",
          "tcp_rcv_space_adjust", "tcp_v4_early_demux", "__inet_lookup_established",
          "__inet_lookup*", "inet_ehashfn", "tcp_v4_fill_cb", "tcp_filter", "sk_filter_trim_cap",
          "tcp_add_backlog", "tcp_try_coalesce", "skb_try_coalesce", "tcp_measure_rcv_mss",
          "tcp_grow_window", "tcp_urg", "tcp_validate_incoming", "tcp_parse_options",
          "tcp_ofo_queue", "tcp_rcv_rtt_update", "tcp_rcv_rtt_measure*", "__tcp_rcv_rtt_measure*",
          "tcp_check_urg", "ip_route_input*", "ip_route_use_hint", "__udp4_lib_rcv", "udp_rcv",
          "udp_queue_rcv*", "udp_unicast_rcv_skb", "__udp_enqueue_schedule_skb",
          "sock_queue_rcv_skb*", "__sk_receive_skb", "tcp_v4_inbound_md5_hash",
          "tcp_inbound_md5_hash", "tcp_inbound_hash", "security_sock_rcv_skb", "deliver_skb",
          "tcp_rcv_state_process", "tcp_ecn_check_ce", "tcp_event_data_recv", "tcp_fast_path_on",
          "tcp_store_ts_recent", "tcp_update_recv_tstamps", "tcp_sack_*", "tcp_dsack_*",
          "skb_defer_rx_timestamp", "ip_check_defrag", "ip_defrag", "veth_xdp_rcv*",
          "rps_*", "get_rps_cpu", "__netif_receive_skb_core", "tcp_rcvbuf_grow")
CHECKSUM = ("csum_partial", "do_csum", "csum_partial_copy*", "csum_ipv6_magic", "ip_send_check",
            "ip_fast_csum", "skb_checksum", "__skb_checksum*", "skb_checksum_help",
            "__skb_gro_checksum_complete", "skb_csum_hwoffload_help", "tcp_v4_send_check",
            "__tcp_v4_send_check", "tcp_checksum_complete", "nf_ip_checksum",
            "inet_proto_csum_replace*", "csum_block_add*", "udp4_hwcsum", "udp_csum*")
SKB_MEM = ("__alloc_skb", "alloc_skb*", "__napi_alloc_skb", "napi_alloc_skb", "build_skb*",
           "__build_skb*", "__napi_build_skb", "napi_build_skb", "kmalloc_reserve", "__kmalloc*",
           "kmalloc*", "__kmem_cache_alloc*", "kmem_cache_alloc*", "kmem_cache_free*", "kfree",
           "__kfree_skb", "kfree_skb*", "__kfree_skb_defer", "consume_skb",
           "napi_consume_skb", "__consume_stateless_skb", "skb_release_*", "skb_free_head",
           "skb_attempt_defer_free", "skb_defer_free_flush", "kfree_skbmem", "napi_skb_cache_*",
           "skb_clone", "__skb_clone", "__copy_skb_header", "skb_page_frag_refill",
           "sk_page_frag_refill", "page_frag_*", "__page_frag_*", "__alloc_pages*",
           "alloc_pages*", "__folio_alloc*", "folio_alloc*", "get_page_from_freelist",
           "__rmqueue*", "rmqueue*", "prep_new_page", "post_alloc_hook", "__free_pages*",
           "free_pages*", "__free_frozen_pages", "free_frozen_pages", "free_unref_page*",
           "free_unref_folios", "free_pcppages_bulk", "__folio_put", "put_page", "folio_put",
           "__put_page", "page_pool_*", "___slab_alloc", "__slab_alloc*", "__slab_free",
           "slab_free*", "sk_mem_*", "__sk_mem_*", "sk_forced_mem_schedule", "sk_wmem_schedule",
           "sk_rmem_schedule", "tcp_wmem_schedule", "mem_cgroup_charge_skmem",
           "mem_cgroup_uncharge_skmem", "__mod_memcg_state", "mod_memcg_state", "refill_stock",
           "page_counter_*", "try_charge*", "consume_stock", "memcg_*", "obj_cgroup_*",
           "sock_rfree", "sock_wfree", "__sock_wfree", "skb_set_owner_w", "skb_orphan*",
           "tcp_stream_alloc_skb", "sk_stream_alloc_skb", "skb_unref", "kfree_skb_list*",
           "sk_stream_moderate_sndbuf", "__sk_flush_backlog", "skb_ext_*", "__skb_ext_*",
           "__kmem_cache_free", "kmem_cache_free_bulk", "__put_partials", "put_cpu_partial",
           "slab_post_alloc_hook", "get_partial_node*", "allocate_slab", "new_slab",
           "setup_object", "__free_one_page", "free_one_page")
WAKEUP = ("try_to_wake_up", "wake_up_process", "wake_up_q", "__wake_up*", "ttwu_*",
          "sock_def_readable", "sock_def_write_space", "sk_stream_write_space", "sk_wake_async",
          "ep_poll_callback", "pollwake", "autoremove_wake_function", "woken_wake_function",
          "default_wake_function", "select_task_rq*", "sock_def_wakeup", "wake_up_var",
          "__wake_up_common*", "__wake_up_sync_key", "irq_work_*")
SCHED = ("schedule", "__schedule", "schedule_timeout", "schedule_hrtimeout*", "finish_task_switch",
         "__switch_to*", "switch_mm*", "pick_next_task*", "put_prev_task*", "dequeue_task*",
         "enqueue_task*", "dequeue_entit*", "enqueue_entit*", "update_curr*", "update_load_avg",
         "psi_task_*", "psi_group_change", "context_switch", "prepare_task_switch",
         "rcu_note_context_switch", "io_schedule*", "preempt_schedule*", "wait_woken",
         "prepare_to_wait*", "finish_wait", "set_next_entity", "newidle_balance",
         "sched_balance_*", "load_balance", "cpuacct_*", "check_preempt*", "resched_curr",
         "activate_task", "deactivate_task", "pick_task*", "pick_eevdf", "set_next_task*",
         "__update_load_avg*", "update_cfs_group", "reweight_entity", "sched_clock_cpu")
LOCKS = ("_raw_spin_lock*", "_raw_spin_unlock*", "_raw_spin_trylock*", "_raw_read_*",
         "_raw_write_*", "queued_spin_lock_slowpath", "native_queued_spin_lock_slowpath",
         "__pv_queued_spin_lock_slowpath", "pv_queued_spin_*",
         "__raw_callee_save___pv_queued_spin_unlock*", "lock_sock_nested", "__lock_sock",
         "lock_sock_fast", "mutex_lock*", "mutex_unlock*", "__mutex_lock*", "down_read*",
         "up_read", "down_write*", "up_write", "rwsem_*", "native_queued_spin_unlock",
         # user-space locks, condition variables and joins waiting or waking in the kernel
         "do_futex", "futex_wait*", "__futex_wait", "futex_wake*", "__futex_queue",
         "futex_q_lock", "futex_hash")
# Where a timer interrupt's sample lands when interrupts come back on (see the module doc):
# the time of the irqs-off section before, so "locks, irqs-off" when nothing else claims it.
IRQS_ON = own("handle_softirqs", "__do_softirq", "do_softirq", "__local_bh_enable_ip",
              "local_bh_enable", "release_sock", "__release_sock")
# The tracer's own programs: BPF programs, their dispatch and helpers, the trampolines
# (fentry/fexit) and kprobe handlers, the tracepoint call sites, and the slow syscall path
# taken because a sys_enter/sys_exit hook is attached.
BPF = ("bpf_prog_*", "bpf_trace_run*", "__bpf_trace_*", "trace_call_bpf", "__bpf_prog_enter*",
       "__bpf_prog_exit*", "bpf_prog_run*", "__bpf_tramp_*", "call_trace_sock_*",
       "kprobe_ftrace_handler", "kprobe_perf_func", "kprobe_dispatcher", "kretprobe_*",
       "__kretprobe_*", "kprobe_int3_handler", "opt_pre_handler", "optimized_callback",
       "rethook_*", "arch_rethook_*", "fprobe_*", "bpf_overflow_handler", "bpf_get_stack*",
       "bpf_get_stackid*", "get_perf_callchain", "perf_callchain_*", "bpf_ringbuf_*",
       "bpf_perf_event_output*", "bpf_task_storage_*", "syscall_exit_work", "trace_sys_enter",
       "trace_sys_exit", "perf_trace_*", "perf_syscall_*") + own(
       "bpf_trampoline_*", "syscall_trace_enter", "__traceiter_*")
# The workloads' own start-up and exit, around the measured loop: exec, the dynamic loader,
# main's setup and the final report, thread creation and joins, page faults, the exit.
STARTUP = ("__x64_sys_execve*", "do_execveat_common", "bprm_execve", "load_elf_binary",
           "__x64_sys_exit*", "do_exit", "do_group_exit", "mmput", "__mmput", "exit_mmap",
           "__x64_sys_clone*", "__do_sys_clone*", "kernel_clone", "copy_process",
           "__x64_sys_mmap", "ksys_mmap_pgoff", "vm_mmap_pgoff", "__x64_sys_munmap",
           "__vm_munmap", "__x64_sys_mprotect", "__x64_sys_brk", "__x64_sys_openat",
           "do_sys_openat2", "__x64_sys_close", "__x64_sys_read", "ksys_read",
           "__x64_sys_newfstatat", "__x64_sys_arch_prctl", "__x64_sys_set_robust_list",
           "__x64_sys_rseq", "__x64_sys_prlimit64", "__x64_sys_getrandom", "__x64_sys_socket",
           "__x64_sys_connect", "__x64_sys_accept*", "__x64_sys_bind", "__x64_sys_listen",
           "__x64_sys_setsockopt", "__x64_sys_setns", "__sys_accept4", "__sys_connect",
           "__sys_socket", "__sys_setsockopt", "asm_exc_page_fault", "exc_page_fault",
           "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault", "ret_from_fork*",
           "schedule_tail")
STARTUP_USER = ("[ld-linux*", "_dl_*", "dl_main", "_start", "__libc_start_main*",
                "_IO_*", "__vfprintf_internal", "__printf*", "printf", "fprintf", "new_do_write",
                "init_tls", "init_cpu_features", "check_match", "getaddrinfo",
                "__pthread_clockjoin_ex", "pthread_join*", "__GI___nptl_free_tcb",
                "pthread_create*", "__pthread_create*", "__clone*", "clone*", "alloc_new_heap",
                "_int_malloc", "_int_free", "malloc", "free", "calloc", "__libc_calloc",
                "tcache_init", "ptmalloc_init", "=__libc_start_call_main",
                "__libc_malloc", "__libc_free", "sysmalloc", "wl_options_parse", "wl_parse_*",
                "wl_resolve", "print_json", "wl_gbps", "__strcasecmp*", "strcmp", "__strcmp*",
                "pthread_getattr_default_np*", "__GI___pthread_attr_copy")
# The idle loop. Not the halt instruction's functions (pv_native_safe_halt): a vCPU also
# halts waiting for a contended paravirtual spinlock (kvm_wait), and that is the lock's time.
IDLE = ("do_idle", "cpu_startup_entry", "default_idle*", "cpu_idle_poll", "arch_cpu_idle*",
        "acpi_idle*", "intel_idle*", "mwait_idle*", "cpuidle_enter*", "poll_idle",
        "default_idle_call", "cpuidle_idle_call")

# (category, side, frames, under, not_under). side: "k" kernel frames, "u" user frames.
# Frame patterns are fnmatch globs on the name without the "_[k]" suffix and without
# compiler suffixes ("=" first: the frame's own time, see own()). The walk goes from the
# innermost frame outwards; at the first frame some rule matches, the first such rule in
# table order gives the category.
RULES = (
    ("fallback_copy", "k", FALLBACK, (), ()),
    ("completion", "k", COMPLETION, (), ()),
    ("pinning", "k", ZC_PINNING, (), ()),
    ("pinning", "k", GUP, SEND_PATH + ZC_PINNING, ()),
    ("kernel_tx_copy", "k", TX_COPY + GENERIC_KERNEL_COPY, SEND_PATH, ARG_COPIES + COMPLETION),
    # a copy into TCP_ZEROCOPY_RECEIVE's copy buffer passes tcp_recvmsg_locked too: first
    # (receive_fallback_to_copy and tcp_recvmsg_locked are inline in tcp_zerocopy_receive
    # on 6.18: the copy sits right under it)
    ("copy_buffer", "k", RX_COPY + GENERIC_KERNEL_COPY,
     ("receive_fallback_to_copy", "tcp_zerocopy_receive"), ARG_COPIES),
    ("kernel_rx_copy", "k", RX_COPY + GENERIC_KERNEL_COPY, RECV_PATH, ARG_COPIES + COMPLETION),
    ("user_copy", "u", USER_MEMCPY, SERIALIZER, ()),
    ("user_copy", "u", SERIALIZER, (), ()),
    # the tracer first: its programs run anywhere, inside a copy too
    ("bpf", "k", BPF, (), ()),
    # TCP_ZEROCOPY_RECEIVE: its page table work, then everything else under it
    ("page_mapping", "k", PAGE_MAPPING, ("tcp_zerocopy_receive",), ()),
    ("zc_receive", "k", ZC_RECEIVE, (), ()),
    # ambiguous: a lock or an irqs-on point inside a wake-up (try_to_wake_up holds the
    # task's lock with interrupts off) is the wake-up's cost
    ("sched", "k", LOCKS + IRQS_ON, WAKEUP, COPY_FRAMES),
    ("locks", "k", LOCKS + IRQS_ON, (), COPY_FRAMES),
    ("sched", "k", SCHED + WAKEUP, (), COPY_FRAMES),
    ("checksum", "k", CHECKSUM, (), COPY_FRAMES),
    ("skb_mem", "k", SKB_MEM, (), COPY_FRAMES),
    ("ip_tx", "k", IP_TX, (), COPY_FRAMES),
    ("net_rx", "k", NET_RX, (), COPY_FRAMES),
    ("tcp_tx", "k", TCP_TX, (), COPY_FRAMES),
    ("splice", "k", SPLICE, (), COPY_FRAMES),
    ("splice", "k", PAGE_CACHE, SPLICE, COPY_FRAMES),
    ("syscall", "k", SYSCALL, (), COPY_FRAMES),
    ("syscall", "u", SYSCALL_USER, (), ()),
    # after the path: a send at start-up is a send; a page fault in a copy is the copy's
    ("startup", "k", STARTUP, (), COPY_FRAMES + SERIALIZER + USER_MEMCPY),
    ("startup", "u", STARTUP_USER, (), SERIALIZER),
)

# Hard-interrupt entries: the outward walk does not cross them.
IRQ_ENTRY = ("asm_sysvec_*", "asm_common_interrupt", "asm_spurious_interrupt",
             "asm_exc_nmi", "common_interrupt", "sysvec_*", "__sysvec_*", "irq_exit_rcu",
             "__irq_exit_rcu")
# Where interrupts are enabled again: with a timer-based source (cpu-clock, tick) the samples
# of an irqs-off section land here.
IRQ_ENABLE_POINTS = ("_raw_spin_unlock_irqrestore", "_raw_spin_unlock_irq", "handle_softirqs",
                     "__do_softirq", "__local_bh_enable_ip", "do_softirq*", "_raw_read_unlock_irqrestore",
                     "_raw_write_unlock_irqrestore", "finish_task_switch*")
# ---- end of the table -----------------------------------------------------------------

# Sample sources driven by a timer interrupt (see the module doc), as the notes name them.
TIMER_SOURCES = {"cpu-clock": "cpu-clock (no PMU)", "tick": "the scheduler tick"}

_SUFFIX = re.compile(r"(\.(isra|constprop|part|cold|llvm|lto_priv|localalias)(\.\d+)?)+$")


def _compile(patterns):
    plain = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [re.compile(fnmatch.translate(p)) for p in patterns if p not in plain]

    def match(name):
        return name in plain or any(g.match(name) for g in globs)
    return match


def _compile_rule_frames(patterns):
    """match(name, innermost): patterns starting with "=" match only the innermost frame."""
    anywhere = _compile([p for p in patterns if not p.startswith("=")])
    own_only = _compile([p[1:] for p in patterns if p.startswith("=")])

    def match(name, innermost):
        return anywhere(name) or (innermost and own_only(name))
    return match


_RULES = [(cat, side, _compile_rule_frames(frames), _compile(under) if under else None,
           _compile(not_under) if not_under else None)
          for cat, side, frames, under, not_under in RULES]
_IRQ_ENTRY = _compile(IRQ_ENTRY)
_IRQ_ENABLE = _compile(IRQ_ENABLE_POINTS)
_IDLE = _compile(IDLE)


def parse_frame(frame):
    """'name_[k]' -> ('name', 'k'); user frames -> (name, 'u'); compiler suffixes dropped."""
    side = "u"
    if frame.endswith("_[k]"):
        frame, side = frame[:-4], "k"
    return _SUFFIX.sub("", frame), side


def parse_folded_line(line):
    """'a;b;c 12' -> (['a', 'b', 'c'], 12), or None for a blank or malformed line."""
    line = line.strip()
    if not line:
        return None
    stack, _, count = line.rpartition(" ")
    try:
        n = int(count)
    except ValueError:
        try:
            n = int(float(count))
        except ValueError:
            return None
    if not stack:
        return None
    return stack.split(";"), n


def _contexts(parsed):
    """For each frame, the index of the outermost frame of its context (after the nearest
    hard-interrupt entry outside it)."""
    lo = 0
    bounds = []
    for i, (name, side) in enumerate(parsed):
        bounds.append(lo)
        if side == "k" and _IRQ_ENTRY(name):
            lo = i + 1
    return bounds


def _rule_at(name, side, innermost, outer):
    """The category of the first rule matching this frame in its context, or None."""
    for cat, rside, match, under, not_under in _RULES:
        if rside != side or not match(name, innermost):
            continue
        if under is not None and not any(under(n) for n in outer):
            continue
        if not_under is not None and any(not_under(n) for n in outer):
            continue
        return cat
    return None


def classify(frames):
    """The category of one stack, frames outermost first (the comm first, as folded), or
    "idle" for a sample of the idle loop (never counted).

    Frames may carry the "_[k]" suffix or not; see the module docstring for the walk."""
    parsed = [parse_frame(f) for f in frames]
    bounds = _contexts(parsed)
    last = len(parsed) - 1
    for i in range(last, -1, -1):
        name, side = parsed[i]
        if side == "k" and _IRQ_ENTRY(name):
            break
        cat = _rule_at(name, side, i == last, [n for n, _ in parsed[bounds[i]:i]])
        if cat is not None:
            return cat
        if side == "k" and _IDLE(name):
            return "idle"
    return "other"


def at_irq_enable_point(frames):
    """True when the innermost frame is where interrupts are re-enabled (see module doc)."""
    if not frames:
        return False
    name, side = parse_frame(frames[-1])
    return side == "k" and bool(_IRQ_ENABLE(name))


# Below this many samples a share is flagged in the report, not hidden: its interval is wide,
# but the reader still sees what was sampled.
FEW_SAMPLES = 100


def share_interval(k, n, z=1.96):
    """95% Wilson score interval [low, high] of a share of k samples in n (binomial)."""
    if n <= 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def attribute(folded_lines, source, task_clock_ns, tsc_hz, cycles, payload_bytes):
    """The run's `attribution` object (docs/DESIGN.md).

    folded_lines: iterable of folded stack lines; source: "cycles", "cpu-clock" or "tick";
    task_clock_ns, tsc_hz, cycles: from the perf object (cycles None where not counted);
    payload_bytes: bytes the workload moved.

    share[c] = samples of c / all samples (sums to 1 when there are samples), with its 95%
    binomial interval in share_ci95[c]; few_samples when there are under FEW_SAMPLES;
    cycles_per_byte[c] = share[c] * total cycles / payload bytes, where total cycles are the
    counted cycles, or, with none counted, task-clock ns * tsc_hz / 1e9 and estimated true.
    A value that cannot be computed is None, never 0.
    """
    counts = dict.fromkeys(CATEGORIES, 0)
    total = 0
    irq_shadow = 0
    idle = 0
    for line in folded_lines or ():
        parsed = parse_folded_line(line)
        if parsed is None:
            continue
        frames, n = parsed
        if n <= 0:
            continue
        cat = classify(frames)
        if cat == "idle":
            idle += n
            continue
        counts[cat] += n
        if at_irq_enable_point(frames):
            irq_shadow += n
        total += n

    if total:
        share = {c: counts[c] / total for c in CATEGORIES}
    else:
        share = dict.fromkeys(CATEGORIES, 0.0)

    cycles = _num(cycles)
    task_clock_ns, tsc_hz, payload_bytes = _num(task_clock_ns), _num(tsc_hz), _num(payload_bytes)
    estimated = cycles is None
    if cycles is not None:
        total_cycles = float(cycles)
    elif task_clock_ns is not None and tsc_hz:
        total_cycles = task_clock_ns * tsc_hz / 1e9
    else:
        total_cycles = None
    if total_cycles is not None and payload_bytes and total:
        cpb = {c: share[c] * total_cycles / payload_bytes for c in CATEGORIES}
    else:
        cpb = dict.fromkeys(CATEGORIES, None)

    notes = []
    if source in TIMER_SOURCES:
        notes.append(f"samples on {TIMER_SOURCES[source]}: time with interrupts disabled is "
                     "seen where they are re-enabled (_raw_spin_unlock_irqrestore, "
                     "handle_softirqs) and attributed to the code around that point")
    if estimated and total_cycles is not None:
        notes.append("cycles estimated as task-clock x TSC rate (no cycles counter)")
    return {
        "source": source,
        "samples": total,
        "share": share,
        "share_ci95": {c: share_interval(counts[c], total) for c in CATEGORIES},
        "few_samples": total < FEW_SAMPLES,
        "cycles_per_byte": cpb,
        "estimated": estimated,
        "samples_by_category": counts,
        "total_cycles": total_cycles,
        "irqs_off_share": irq_shadow / total if total else 0.0,
        "idle_samples": idle,
        "notes": notes,
    }


def attribute_file(folded_path, *args, **kwargs):
    with open(folded_path) as f:
        return attribute(f.read().splitlines(), *args, **kwargs)


if __name__ == "__main__":  # python -m analysis.attribution FILE.folded: shares per category
    import json
    import sys
    for path in sys.argv[1:]:
        a = attribute_file(path, "cpu-clock", None, None, None, None)
        print(path, json.dumps({"samples": a["samples"], "share": a["share"],
                                "irqs_off_share": a["irqs_off_share"]}, indent=1))
