"""One run's object (docs/DESIGN.md's per-run fields) from what the workloads and the tracer wrote,
and the on-the-spot consistency checks."""

from analysis.contract import (DEFAULT_ALIGN, DEFAULT_RECEIVE, ZEROCOPY_STRATEGIES, align_of,
                               receive_of, run_key)

# The receive side's kinds: the client's own name for each, and the tracer's field.
RX_KINDS = (("copied", "rx_copy_bytes"), ("mapped", "rx_mapped_bytes"),
            ("discarded", "rx_discarded_bytes"), ("spliced", "rx_spliced_bytes"))
RX_FIELDS = tuple(f for _k, f in RX_KINDS)
TRACE_FIELDS = ("tx_bytes", "tx_copy_bytes", "tx_spliced_bytes", "zc_tx_bytes",
                "fallback_copy_bytes", "pinned_pages") + RX_FIELDS


def key_of(run):
    """The run's key in runs.jsonl: its configuration, repeat and pass."""
    return run_key(run["strategy"], run["msg_size"], run["threads"], run["transport"],
                   run["repeat"], traced(run), receive_of(run), align_of(run))


def traced(run):
    """Was the tracer attached during the run (records from before the field: yes)."""
    return run.get("traced", True) is not False


def ok(run):
    return run.get("status", "ok") == "ok"


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _sum(values):
    xs = [v for v in (_num(x) for x in values) if v is not None]
    return sum(xs) if xs else None


def _process(snapshot, pid):
    procs = snapshot.get("processes") if isinstance(snapshot, dict) else None
    if not isinstance(procs, dict) or pid is None:
        return None
    p = procs.get(str(pid))
    if p is None:
        p = procs.get(pid)
    return p if isinstance(p, dict) else None


def trace_object(snapshot, server_pid, client_pid):
    """docs/DESIGN.md's trace object for one run: the server's tx fields, the client's rx copy, the
    namespaces' softirq fields summed; the rest as the tracer wrote it."""
    if not isinstance(snapshot, dict):
        return None
    srv = _process(snapshot, server_pid)
    cli = _process(snapshot, client_pid)
    netns = snapshot.get("netns") if isinstance(snapshot.get("netns"), dict) else {}
    ns_zc = _sum(v.get("zc_tx_bytes") for v in netns.values() if isinstance(v, dict))
    ns_fb = _sum(v.get("fallback_copy_bytes") for v in netns.values() if isinstance(v, dict))
    ns_again = _sum(v.get("fallback_copy_again_bytes") for v in netns.values()
                    if isinstance(v, dict))
    zerocopy = snapshot.get("zerocopy") if isinstance(snapshot.get("zerocopy"), dict) else {}

    def pick(proc, field):
        if proc is not None and field in proc:
            return _num(proc.get(field))
        return _num(snapshot.get(field))

    t = {"attach": snapshot.get("attach") or {},
         "tx_bytes": pick(srv, "tx_bytes"),
         "tx_copy_bytes": pick(srv, "tx_copy_bytes"),
         "tx_spliced_bytes": pick(srv, "tx_spliced_bytes"),
         "zc_tx_bytes": pick(srv, "zc_tx_bytes"),
         "fallback_copy_bytes": ns_fb if ns_fb is not None else _num(snapshot.get("fallback_copy_bytes")),
         # of those, copied a second time (null from a tracer that did not count it)
         "fallback_copy_again_bytes": ns_again if ns_again is not None
         else _num(zerocopy.get("fallback_copy_again_bytes")),
         "pinned_pages": pick(srv, "pinned_pages"),
         "syscalls": snapshot.get("syscalls") or {},
         "latency": snapshot.get("latency"),
         "drops": snapshot.get("drops"),
         "drops_by_cause": snapshot.get("drops_by_cause")}
    for field in RX_FIELDS:
        t[field] = pick(cli, field)
    if t["zc_tx_bytes"] is None:
        t["zc_tx_bytes"] = ns_zc
    if t["tx_copy_bytes"] is None and snapshot.get("tx_copy_inferred"):
        t["tx_copy_bytes"] = _inferred_copy(t)
    t["netns_zc_tx_bytes"] = ns_zc
    t["unavailable"] = snapshot.get("unavailable") or {}
    t["attach_why"] = snapshot.get("attach_why") or {}
    t["bpf_build"] = snapshot.get("bpf_build")
    t["by_role"] = {}
    for role, p in (("server", srv), ("client", cli)):
        if p is not None:
            t["by_role"][role] = {k: p.get(k) for k in ("comm",) + TRACE_FIELDS if k in p}
            if isinstance(p.get("syscalls"), dict):
                t["by_role"][role]["syscalls"] = p["syscalls"]
    for k in ("self", "samples"):
        if k in snapshot:
            t[k] = snapshot[k]
    return t


def _inferred_copy(t):
    """A run's copy where the tracer could not infer it per process (its zero-copy bytes are
    counted per namespace only there): what was sent less what left as user pages in the run's
    own namespaces or as spliced pages. None where a figure is missing."""
    tx, zc, spliced = t["tx_bytes"], t["zc_tx_bytes"], t["tx_spliced_bytes"] or 0
    if tx is None or zc is None:
        return None
    return max(0, tx - zc - spliced)


def tcp_object(server):
    tcp = server.get("tcp") if isinstance(server.get("tcp"), dict) else {}
    out = {"cc": tcp.get("cc"), "retrans": tcp.get("retrans"), "rtt_us": tcp.get("rtt_us"),
           "segs_out": tcp.get("segs_out"), "bytes_retrans": tcp.get("bytes_retrans")}
    per = server.get("per_thread") or []
    ccs = sorted({(p.get("tcp") or {}).get("cc") for p in per if isinstance(p, dict)} - {None})
    if len(ccs) > 1:
        out["cc"] = ",".join(ccs)
    return out


def base_run(cfg, repeat, mss=None, rx_xdp=False):
    """The fields naming a run's configuration; `mss` only where the sweep set one, `align`
    where the sender's fields were not malloc's, `rx_xdp` where an XDP program was on the
    receiving veth (a record without them had neither)."""
    run = {"strategy": cfg.strategy, "msg_size": cfg.msg_size, "threads": cfg.threads,
           "transport": cfg.transport, "repeat": repeat,
           "receive": getattr(cfg, "receive", DEFAULT_RECEIVE)}
    if mss is not None:
        run["mss"] = mss
    align = getattr(cfg, "align", DEFAULT_ALIGN)
    if align != DEFAULT_ALIGN:
        run["align"] = align
    if rx_xdp:
        run["rx_xdp"] = True
    return run


def failed_run(cfg, repeat, duration, error, mss=None, rx_xdp=False):
    """The record of a run that could not start (its tracer could not attach)."""
    return dict(base_run(cfg, repeat, mss, rx_xdp), duration_requested_s=duration, status="failed",
                error=error, wall_s=0.0)


def received_object(client):
    """What the receiver says became of the bytes, {copied, mapped, discarded, spliced}: its
    own count (clients from before --receive copied everything), and the MSS it received
    with (the connections' tcpi_rcv_mss; null where unknown, a list where they differ)."""
    rx = client.get("received")
    if isinstance(rx, dict):
        out = {k: _num(rx.get(k)) for k, _f in RX_KINDS}
    else:
        out = {"copied": _num(client.get("bytes")), "mapped": 0, "discarded": 0, "spliced": 0}
    mss = sorted({p.get("rcv_mss") for p in client.get("per_thread") or []
                  if isinstance(p, dict) and _num(p.get("rcv_mss"))})
    out["rcv_mss"] = mss[0] if len(mss) == 1 else (mss or None)
    cpu = [_num(client.get(k)) for k in ("cpu_user_s", "cpu_sys_s")]
    out["cpu_s"] = sum(cpu) if None not in cpu else None
    return out


def steady_throughput(server):
    """(Gbit/s over the steady-state window, warm-up seconds) from the server's `steady`
    object (bytes and seconds after its warm-up), or (None, None) where it has none."""
    st = server.get("steady") if isinstance(server.get("steady"), dict) else {}
    b, s = _num(st.get("bytes")), _num(st.get("seconds"))
    if b is None or not s:
        return None, None
    return b * 8 / s / 1e9, _num(st.get("warmup_s"))


def build_run(cfg, repeat, duration, server, client, snapshot=None, server_pid=None,
              client_pid=None, attribution=None, mss=None, rx_xdp=False):
    """The run object from the parsed server and client JSON and the tracer snapshot."""
    run = base_run(cfg, repeat, mss, rx_xdp)
    seconds = _num(server.get("seconds"))
    messages = _num(server.get("messages"))
    bytes_sent = _num(server.get("bytes"))
    run["duration_s"] = seconds if seconds is not None else duration
    run["duration_requested_s"] = duration
    run["bytes_sent"] = bytes_sent
    run["bytes_received"] = _num(client.get("bytes"))
    run["messages_sent"] = messages
    tput = _num(server.get("throughput_gbps"))
    if tput is None and bytes_sent is not None and seconds:
        tput = bytes_sent * 8 / seconds / 1e9
    # the throughput is the steady state's, after the warm-up (connection setup, slow start)
    steady, warmup = steady_throughput(server)
    run["throughput_gbps"] = steady if steady is not None else tput
    run["throughput_whole_gbps"] = tput
    run["warmup_s"] = warmup
    run["latency_us"] = (seconds * cfg.threads / messages * 1e6) if seconds and messages else None
    run["tcp"] = tcp_object(server)
    zc = server.get("zerocopy") if isinstance(server.get("zerocopy"), dict) else {}
    run["zerocopy"] = {"sends": zc.get("sends", 0), "completions": zc.get("completions", 0),
                       "copied": zc.get("copied", 0)}
    run["trace"] = trace_object(snapshot, server_pid, client_pid) if snapshot is not None else None
    run["attribution"] = attribution
    perf = snapshot.get("perf") if isinstance(snapshot, dict) else None
    run["perf"] = perf if isinstance(perf, dict) else None
    run["workload"] = {k: server.get(k) for k in ("send_calls", "partial_retries",
                                                  "enobufs_retries") if k in server}
    if client.get("role") == "forward":
        run["forward"] = forward_object(messages, client)
    else:
        run["received"] = received_object(client)
    run["workload"]["recv_calls"] = client.get("recv_calls")
    run["workload"]["client_seconds"] = client.get("seconds")
    run["workload"]["per_thread_gbps"] = [p.get("throughput_gbps") for p in
                                          (server.get("per_thread") or []) if isinstance(p, dict)]
    return run


def forward_object(messages, observed):
    """forward: nothing receives; the datagrams the forwarding namespace's interface saw
    against those sent (one per message) show a drop before it, and a packet socket on the
    path would have copied every zero-copy send."""
    seen = _num(observed.get("datagrams_seen"))
    return {"datagrams_sent": messages, "datagrams_seen": seen,
            "datagrams_lost": messages - seen if messages is not None and seen is not None
            else None,
            "packet_sockets": _num(observed.get("packet_sockets"))}


def check(run, server, client):
    """Consistency checks of one run: (dict of check -> bool|None, list of failure reasons)."""
    checks, reasons = {}, []

    def add(name, ok, why):
        checks[name] = ok
        if ok is False:
            reasons.append(why)

    sent, recvd = run.get("bytes_sent"), run.get("bytes_received")
    forward = run.get("forward")
    for who, d in (("server", server),) + ((("client", client),) if forward is None else ()):
        err = d.get("error")
        add(f"{who}_ok", not err and not d.get("errors"),
            f"{who} reported an error: {err or str(d.get('errors')) + ' errors'}")
    add("bytes_positive", bool(sent) and sent > 0, "no bytes were sent")
    if forward is None:
        add("sent_eq_received", sent == recvd, f"bytes sent {sent} != bytes received {recvd}")
    else:
        # nothing receives: a datagram lost before the forwarding namespace is recorded, not
        # an inconsistency (UDP may drop); more seen than sent would be
        seen, dsent = forward.get("datagrams_seen"), forward.get("datagrams_sent")
        add("datagrams_seen_le_sent", None if seen is None or dsent is None else seen <= dsent,
            f"the forwarding namespace saw {seen} datagrams, more than the {dsent} sent")
    if client.get("verify_errors"):
        add("verify", False, f"{client['verify_errors']} verify errors")
    zc = run.get("zerocopy") or {}
    if run["strategy"] in ZEROCOPY_STRATEGIES:
        add("zc_completions_eq_sends", zc.get("completions") == zc.get("sends"),
            f"zero-copy completions {zc.get('completions')} != sends {zc.get('sends')}")
    t = run.get("trace")
    if t is not None:
        tx = t.get("tx_bytes")
        add("tracer_tx_eq_sent", None if tx is None else tx == sent,
            f"tracer tx_bytes {tx} != bytes sent {sent}")
        if forward is None:
            _check_rx_kinds(add, t, run.get("received") or {}, recvd)
        # drops (ring buffer samples) do not touch the in-kernel byte counts: recorded only
        checks["tracer_drops"] = t.get("drops")
    return checks, reasons


def _check_rx_kinds(add, trace, received, recvd):
    """Each receive kind the tracer counted against the client's own count of it (copy's
    check keeps its name); a kind the tracer calls unavailable is not checked (None)."""
    for kind, field in RX_KINDS:
        mine = received.get(kind, recvd if kind == "copied" else 0)
        got = trace.get(field)
        name = "tracer_rx_eq_received" if kind == "copied" else f"tracer_{field}_eq_client"
        add(name, None if got is None else got == mine,
            f"tracer {field} {got} != the client's {kind} bytes {mine}")


def retrans_share(run):
    """retransmitted segments / segments sent, or None when not known."""
    tcp = run.get("tcp") or {}
    r, s = _num(tcp.get("retrans")), _num(tcp.get("segs_out"))
    if r is None or not s:
        return None
    return r / s
