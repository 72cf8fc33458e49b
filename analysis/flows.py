"""What `trace` saw, as flows the verdicts weigh: one per socket where the trace
object has its `sockets` list, else one per process; and each process's CPU share by
attribution category, from the folded stacks of its command name.

A flow is a dict: pid, comm, label, proto, local, peer, path (the device its route leaves by:
loopback, veth, device or unknown), the byte and call counters of the trace object
(tx_bytes, tx_calls, tx_copy_bytes, tx_spliced_bytes, zc_tx_bytes, rx_copy_bytes, rx_calls,
fallback_copy_bytes, fallback_copy_again_bytes, io_uring_sends; None where not counted),
send_sizes (the log2
histogram of its send sizes, or None), and delivery: how its traffic was delivered, as
observed or predicted (delivery()).
"""
from analysis import attribution
from analysis.sizes import format_bytes

BYTE_FIELDS = ("tx_bytes", "tx_calls", "tx_copy_bytes", "tx_spliced_bytes", "zc_tx_bytes",
               "rx_copy_bytes", "rx_calls", "fallback_copy_bytes", "fallback_copy_again_bytes",
               "zc_kept_bytes", "io_uring_sends")
PATHS = {"loopback": "loopback", "veth": "a veth into another namespace of this host",
         "virtual": "a virtual device (bridge, tunnel...)",
         "device": "a network device out of the host", "unknown": "unknown"}


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def process_flows(trace):
    """One flow per followed process that moved a byte (the trace object's `processes`)."""
    out = []
    procs = trace.get("processes") or {}
    # per process, the copy back is the namespaces': known only while one process sends
    # zero-copy
    zc_senders = [q for q in procs.values() if (_num(q.get("zc_tx_bytes")) or 0) > 0]
    for pid, p in sorted(procs.items(), key=lambda kv: int(kv[0])):
        f = {k: _num(p.get(k)) for k in BYTE_FIELDS}
        f["rx_calls"] = _num(p.get("rx_copy_calls"))
        if not (f["tx_bytes"] or f["rx_copy_bytes"]):
            continue
        f.update(pid=int(pid), comm=p.get("comm") or "?", proto=None, local=None, peer=None,
                 path="unknown", send_sizes=None, socket=False,
                 label=f"pid {pid} ({p.get('comm') or '?'})")
        if f["zc_tx_bytes"] and len(zc_senders) == 1:
            f["fallback_copy_bytes"] = _num(trace.get("fallback_copy_bytes"))
            f["fallback_copy_again_bytes"] = _num((trace.get("zerocopy") or {})
                                                  .get("fallback_copy_again_bytes"))
        out.append(f)
    return out


def socket_flows(trace):
    """One flow per socket of the trace object's `sockets` list."""
    out = []
    for s in trace.get("sockets") or []:
        f = {k: _num(s.get(k)) for k in BYTE_FIELDS}
        proto = s.get("proto")
        peer = s.get("peer")
        f.update(pid=s.get("pid"), comm=s.get("comm") or "?", proto=proto,
                 local=s.get("local"), peer=peer, path=s.get("path") or "unknown",
                 peer_local=bool(s.get("peer_local")),
                 send_sizes=s.get("send_size_log2"), socket=True,
                 label=f"pid {s.get('pid')} ({s.get('comm') or '?'}) {proto or '?'} "
                       f"{s.get('local') or '?'} → {peer or 'unconnected'}")
        out.append(f)
    return out


def flows(trace):
    """Per socket where the tracer counted sockets, else per process."""
    if isinstance(trace.get("sockets"), list):
        return socket_flows(trace)
    return process_flows(trace)


def flow_bytes(f):
    return (f.get("tx_bytes") or 0) + (f.get("rx_copy_bytes") or 0)


def copied_again(f):
    """", A of it a second time, ..." where the fallback copied part of the flow's zero-copy
    bytes twice (a TCP segment retransmitted after it had arrived is received, and copied,
    again: its pages were pinned once), else "". The fallback copy less that part is at most
    the bytes sent zero-copy."""
    again = f.get("fallback_copy_again_bytes")
    if not again:
        return ""
    return (f", {format_bytes(again)} of it a second time (retransmitted segments that had "
            f"arrived)")


def fallback_fields(f):
    """The figures a sentence about the copy back stands on."""
    again = f.get("fallback_copy_again_bytes")
    return (f"fallback_copy_bytes {f.get('fallback_copy_bytes')}, "
            + (f"fallback_copy_again_bytes {again}, " if again else "")
            + f"zc_tx_bytes {f.get('zc_tx_bytes') or 0}")


def delivery(f):
    """(kind, why): how the flow's traffic is delivered. kind "local" (the kernel copies
    zero-copy pages back), "kept" (zero-copy pages were seen leaving and none was copied
    back), "left" (its route leaves the host) or "unknown". Observation first: the flow's
    own zero-copy bytes and what the fallback copied back; then its route's device."""
    zc, fb = f.get("zc_tx_bytes") or 0, f.get("fallback_copy_bytes")
    if zc and fb:
        return "local", (f"the kernel copied {format_bytes(fb)} of its {format_bytes(zc)} "
                         f"sent zero-copy back at delivery{copied_again(f)} "
                         f"({fallback_fields(f)})")
    if zc and fb == 0 and f.get("socket"):
        return "kept", (f"none of its {format_bytes(zc)} sent zero-copy was copied back "
                        f"(fallback_copy_bytes 0, zc_tx_bytes {zc})")
    path = f.get("path")
    if f.get("peer_local"):
        return "local", ("the other end of its TCP connection is on this host (seen "
                         "established here)" + (f", over {PATHS.get(path, path)}"
                                                if path != "unknown" else ""))
    if path == "loopback":
        return "local", "it runs over loopback: delivered to a socket of this host"
    if path in ("veth", "virtual"):
        return "unknown", (f"its route leaves by {PATHS[path]}; whether the traffic is "
                           f"delivered to a socket of this host there or forwarded on was not "
                           f"seen (no zero-copy skb of it, no TCP peer here)")
    if path == "device":
        return "left", "its route leaves the host by a network device"
    if not f.get("socket"):
        return "unknown", ("where its traffic goes is unknown: the trace has no per-socket "
                           "counts (each socket's route)")
    return "unknown", "where its traffic goes is unknown (no route on the socket)"


def mean_send(f):
    """Bytes per send call, or None."""
    if f.get("tx_bytes") and f.get("tx_calls"):
        return f["tx_bytes"] / f["tx_calls"]
    return None


def median_send_slot(f):
    """(lo, hi) of the log2 slot holding the median send, from send_sizes; None without."""
    h = {int(k): int(v) for k, v in (f.get("send_sizes") or {}).items() if v}
    total = sum(h.values())
    if not total:
        return None
    seen = 0
    for lo in sorted(h):
        seen += h[lo]
        if 2 * seen >= total:
            return lo, max(2 * lo, 1)
    return None


def comm_attribution(folded_lines, comm, source, perf=None, payload=None):
    """attribution.attribute over the stacks whose first frame is comm (the folded stacks
    start with the sampled task's command name), or None without a sample of it."""
    mine = [line for line in folded_lines if line.split(";", 1)[0] == comm]
    if not mine:
        return None
    perf = perf or {}
    return attribution.attribute(mine, source, _num(perf.get("task-clock")),
                                 _num(perf.get("tsc_hz")), _num(perf.get("cycles")), payload)
