"""The results contract's names (docs/DESIGN.md, "Results contract"): the strategies and transports
a run record may name, in the order reports and plots show them, what runs where, and a run's
key."""

STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field", "sendfile", "io-uring",
              "io-uring-zc")
TRANSPORTS = ("veth", "loopback", "forward")

# Strategies that send the 8 heap fields themselves; sendfile sends a file's page-cache pages.
FIELD_STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field", "io-uring", "io-uring-zc")
# Strategies whose buffers the kernel may keep after the send: completions say if it copied.
ZEROCOPY_STRATEGIES = ("zero-copy", "io-uring-zc")
IO_URING_STRATEGIES = ("io-uring", "io-uring-zc")
# The comparisons reports draw (and extra rounds settle): (a, b), "where b overtakes a".
COMPARED_PAIRS = (("two-copy", "one-copy"), ("one-copy", "zero-copy"), ("two-copy", "per-field"),
                  ("one-copy", "sendfile"), ("one-copy", "io-uring"), ("io-uring", "io-uring-zc"))
# Each zero-copy strategy against the copy it replaces (same call, without MSG_ZEROCOPY).
ZEROCOPY_PAIRS = (("one-copy", "zero-copy"), ("io-uring", "io-uring-zc"))

# How the receiver receives: copy is what every run did before; each run record
# says its own (`receive`). None of them runs on forward (nothing receives there).
RECEIVES = ("copy", "discard", "mmap", "splice")
DEFAULT_RECEIVE = "copy"
RECEIVE_HELP = {
    "copy": "recv() into a 64 KiB buffer: one copy per byte (the default)",
    "discard": "recv(MSG_TRUNC): TCP drops the bytes, none copied",
    "mmap": "TCP_ZEROCOPY_RECEIVE into a mapping of the socket; what cannot be mapped is "
            "copied (recv_skip_hint)",
    "splice": "splice(2) socket -> pipe -> /dev/null: nothing copied to user memory",
}
# Where the sender's heap fields start (netio-server --align): none is malloc's
# placement, what every run before the option had; page starts each field on a page. A run
# sets it on the zero-copy strategies only, the ones whose pages the kernel keeps and a
# receiver may map; a copying sender's fields are copied whatever their placement.
ALIGNS = ("none", "page")
DEFAULT_ALIGN = "none"
ALIGN_STRATEGIES = ZEROCOPY_STRATEGIES
# TCP_MAXSEG's range (the kernel's TCP_MIN_MSS .. MAX_TCP_WINDOW)
MSS_MIN, MSS_MAX = 88, 32767

# forward: UDP datagrams, one message each, over a veth of this MTU; nothing may fragment.
FORWARD_MTU = 65535
UDP_IP_HEADERS = 28
FORWARD_MAX_SIZE = FORWARD_MTU - UDP_IP_HEADERS

# What each strategy does per message, for --help and the report.
STRATEGY_HELP = {
    "two-copy": "memcpy the 8 fields into one buffer, send() it",
    "one-copy": "one sendmsg() with an iovec of the 8 fields",
    "zero-copy": "sendmsg(MSG_ZEROCOPY), a ring of messages each reused after its completion",
    "per-field": "8 send() calls, one per field (on forward: 7 with MSG_MORE, one datagram)",
    "sendfile": "not the 8 heap fields: the message serialized once into a memfd (each message "
                "to fresh pages with --verify) and sent from its page-cache pages with "
                "sendfile(2), spliced, not copied; TCP only",
    "io-uring": "IORING_OP_SENDMSG with the 8-field iovec, one send in flight",
    "io-uring-zc": "IORING_OP_SENDMSG_ZC with IORING_SEND_ZC_REPORT_USAGE, a ring of messages "
                   "each reused after its notification (Linux 6.2+)",
}
TRANSPORT_HELP = {
    "veth": "TCP over a veth pair between two namespaces",
    "loopback": "TCP over loopback in one namespace",
    "forward": "UDP datagrams to an address of the run's own third namespace, over a veth into "
               "a namespace that drops them on the way there by a blackhole route: nothing "
               "receives, so nothing forces zero-copy's fallback copy",
}


def runnable(strategy, transport):
    """None if the strategy runs on the transport, else why not (one clause)."""
    if transport == "forward" and strategy == "sendfile":
        return "sendfile cannot run over forward (UDP: sendfile has no datagram boundaries)"
    return None


def receive_runnable(receive, transport):
    """None if the receive strategy runs on the transport, else why not (one clause)."""
    if transport == "forward" and receive != DEFAULT_RECEIVE:
        return (f"--receive {receive} needs a receiver: forward's UDP datagrams have none "
                f"(mmap, discard and splice are TCP receive paths)")
    return None


def rx_xdp_runnable(transports):
    """None if --rx-xdp can run on every transport, else why not (one clause)."""
    other = [t for t in transports if t != "veth"]
    if other:
        return (f"--rx-xdp attaches to the receiving veth: {other[0]} has none; give "
                f"--transport veth")
    return None


def align_of(run):
    """A run record's sender field placement (records from before the field: none)."""
    return run.get("align") or DEFAULT_ALIGN


def sender_of(run):
    """The sender a report names: the strategy, and "@page" where its fields were aligned."""
    return run["strategy"] + ("" if align_of(run) == DEFAULT_ALIGN else f"@{align_of(run)}")


def receive_of(run):
    """A run record's receive strategy (records from before the field: copy)."""
    return run.get("receive") or DEFAULT_RECEIVE


def run_key(strategy, msg_size, threads, transport, repeat, traced=True,
            receive=DEFAULT_RECEIVE, align=DEFAULT_ALIGN):
    """A run's name in its sweep; an untraced run's ends in /untraced (a traced run keeps the
    name runs had before the untraced pass existed), a receive other than copy follows the
    strategy after a "+" (copy's runs keep the names they had before it existed), and an
    alignment other than none after an "@"."""
    who = strategy if align == DEFAULT_ALIGN else f"{strategy}@{align}"
    who = who if receive == DEFAULT_RECEIVE else f"{who}+{receive}"
    return (f"{who}/{int(msg_size)}/{int(threads)}/{transport}/{int(repeat)}"
            + ("" if traced else "/untraced"))
