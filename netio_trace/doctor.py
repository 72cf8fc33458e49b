"""`netio-trace doctor`: what this kernel and machine allow, probed, never assumed.

The BPF side (BTF, attach types, PMU events, MSG_ZEROCOPY) comes from `netio-tracer --probe`,
and the tracer loaded for real as `run` loads it (its ladder, build and what it leaves null;
doctor_ladder.py says what each rung costs); this module adds the kernel, a namespace created
and deleted for real, and the tools.
"""
import json
import os
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from analysis import files
from netio_trace import doctor_ladder as ladder, tracer
from netio_trace.preflight import probe_zerocopy_socket, workload_refuses
from netio_trace.system import cgroup, machine, netns, paths
from netio_trace.system.signals import critical

TOOLS = ("ip", "perf", "iperf3", "bpftool", "inferno-flamegraph", "inferno-diff-folded",
         "chromium")
ATTACH_KEYS = ("fentry", "kprobe", "tp_btf", "tracepoint", "perf_event", "uprobe")


def probe_netns():
    """Create a namespace with a veth pair, then delete it. (ok, error)."""
    if not files.find_tool("ip"):
        return False, "ip (iproute2) not found"
    try:
        with critical():      # a Ctrl-C here lands after the namespaces are gone again
            with netns.Topology("veth") as topo:
                names = topo.namespaces
                listed = os.listdir(netns.NETNS_DIR)
                if not all(n in listed for n in names):
                    return False, "namespace created but not listed"
        left = [n for n in names if os.path.exists(os.path.join(netns.NETNS_DIR, n))]
        if left:
            return False, f"could not delete {', '.join(left)}"
        return True, None
    except (RuntimeError, OSError, ValueError) as e:
        return False, str(e)


def packet_sockets():
    """AF_PACKET sockets open in this network namespace (/proc/net/packet, one line each after
    the header), or None if unreadable. One on a zero-copy path (tcpdump, say) makes the kernel
    copy every zero-copy skb it sees."""
    try:
        with open("/proc/net/packet") as f:
            return max(0, len(f.read().splitlines()) - 1)
    except OSError:
        return None


def probe_io_uring():
    """{strategy: None if netio-server can run it here, else its one-line reason}."""
    if not paths.have_binary("netio-server"):
        return {s: "netio-server not built" for s in ("io-uring", "io-uring-zc")}
    return {s: workload_refuses(s) for s in ("io-uring", "io-uring-zc")}


def tool_paths():
    return {t: files.find_tool(t) for t in TOOLS}


LOADED_KEYS = ("attach", "attach_why", "bpf_build", "probes", "unavailable", "software_from",
               "latency")


def load_tracer():
    """The doctor object's `tracer`: the tracer loaded for real, as `run` loads it (`--probe`
    only tries attach types), or why it cannot load."""
    out = {"path": paths.binary("netio-tracer"), "error": None, "loaded": False}
    try:
        info = tracer.check_load()
    except tracer.TracerError as e:
        out["error"] = str(e)
        return out
    out["loaded"] = True
    out.update({k: info.get(k) for k in LOADED_KEYS})
    for k in ("attach", "attach_why"):       # loaded with --no-sample: `sampling` says instead
        if isinstance(out[k], dict):
            out[k] = {p: v for p, v in out[k].items() if p not in ladder.NOT_LOADED}
    return out


def collect():
    """The doctor object (docs/DESIGN.md): kernel, btf, attach, pmu, msg_zerocopy, netns, tools,
    and the tracer loaded for real."""
    out = {"kernel": os.uname().release}
    errors = []
    try:
        tp = tracer.probe()
        tracer_error = None
    except tracer.TracerError as e:
        tp, tracer_error = {}, str(e)
        errors.append(tracer_error)
    loaded = load_tracer() if tracer_error is None else {
        "path": paths.binary("netio-tracer"), "error": tracer_error, "loaded": False}
    attach = tp.get("attach") if isinstance(tp.get("attach"), dict) else {}
    out["btf"] = tp.get("btf") if "btf" in tp else None
    out["attach"] = {k: attach.get(k) for k in ATTACH_KEYS}
    for k, v in attach.items():
        out["attach"].setdefault(k, v)
    out["pmu"] = tp.get("pmu") if isinstance(tp.get("pmu"), dict) else {}
    if "msg_zerocopy" in tp:
        out["msg_zerocopy"] = tp["msg_zerocopy"]
    else:
        out["msg_zerocopy"] = probe_zerocopy_socket()
        out["msg_zerocopy_source"] = "SO_ZEROCOPY setsockopt (tracer probe unavailable)"
    ok, err = probe_netns()
    out["netns"] = ok
    if err:
        out["netns_error"] = err
    out["tools"] = tool_paths()
    out["packet_sockets"] = packet_sockets()
    out["io_uring"] = probe_io_uring()
    # where `run` and `trace -- CMD` put their workloads, for per-CPU cgroup sampling
    out["cgroup2"] = cgroup.cgroup2_root()
    m = machine.info()
    out["machine"] = {k: m[k] for k in ("hostname", "cpu", "cores", "memory_gib",
                                        "virtualization", "default_cc", "optmem_max")}
    out["tracer"] = loaded
    for k, v in tp.items():
        if k not in out:
            out[k] = v
    errors.extend(problems(out, tracer_error))
    return out, errors


SAMPLING_DETAIL = {
    "cycles": "hardware cycles",
    "cpu-clock": "no PMU: software cpu-clock timers",
}


def _sampling_row(d):
    """(result, detail) of the doctor table's row for the default stack sampler."""
    s = d.get("sampling")
    if not isinstance(s, dict):
        return _mark(None), d.get("sampling_error") or "not probed"
    rate = f", {s['freq']:g} Hz" if s.get("freq") else ", rate unknown"
    detail = SAMPLING_DETAIL.get(s.get("source"), "")
    if s.get("source") in SAMPLING_DETAIL:
        detail += ("; run and `trace -- CMD`: one event per CPU on the workloads' cgroup "
                   f"(cgroup2 at {d['cgroup2']}); `trace --pid`: per-task events"
                   if d.get("cgroup2") else "; per-task events (no cgroup2 mount)")
    return f"{s.get('source')}{rate}", detail


def problems(d, tracer_error=None):
    """One line per thing that keeps `run` from working here (what is missing, what to do)."""
    out = []
    if tracer_error is None and d.get("btf") is False:
        out.append("this kernel has no BTF (/sys/kernel/btf/vmlinux); the tracer needs "
                   "CONFIG_DEBUG_INFO_BTF=y (or use `run --no-trace`)")
    elif tracer_error is None and (d.get("tracer") or {}).get("error"):
        out.append(f"the tracer cannot load on this kernel: {d['tracer']['error']}; "
                   "`run --no-trace` measures without it")
    if not (d.get("tools") or {}).get("ip"):
        out.append("`ip` (iproute2) not found; install it: apt-get install iproute2")
    elif d.get("netns") is False:
        out.append(f"cannot create network namespaces: {d.get('netns_error')}")
    if d.get("msg_zerocopy") is False:
        out.append("this kernel refuses MSG_ZEROCOPY (SO_ZEROCOPY, 4.14+); leave zero-copy out "
                   "of `run --strategies`")
    return out


def _mark(v):
    if v is True:
        return "[green]yes[/]"
    if v is False:
        return "[red]no[/]"
    if v is None:
        return "[yellow]unknown[/]"
    return str(v)


def _escape(text):
    return escape(text) if text else ""


def tracer_rows(tr):
    """(rows, notes) for the tracer loaded for real: loaded or not (its reason), its BPF build,
    each probe point's rung with why it is not higher, where the software counters come from,
    and the figures it leaves null; what a rung costs is a numbered note under the table."""
    if not tr.get("loaded"):
        return [("tracer", _mark(False), _escape(tr.get("error") or "not loaded"))], []
    rows = [("tracer", _mark(True), f"loaded ({_escape(tr.get('path'))})")]
    notes = []

    def with_note(text, cost):
        if not cost:
            return text or ""
        if cost not in notes:
            notes.append(cost)
        return "; ".join(x for x in (text, f"cost: note {notes.index(cost) + 1}") if x)

    build = ladder.build_row(tr)
    if build:
        rows.append(("BPF build", _escape(build[0]), _escape(with_note(*build[1:]))))
    for point, rung, why, cost in ladder.point_rows(tr):
        rows.append((f"probe: {point}", _escape(rung), _escape(with_note(why, cost))))
    latency = ladder.latency_row(tr)
    if latency:
        rows.append(("latency histograms", _escape(latency[0]), _escape(latency[1])))
    counters = ladder.counters_row(tr)
    if counters:
        rows.append(("software counters", _escape(counters[0]),
                     _escape(with_note(*counters[1:]))))
    for figure, why in ladder.unavailable_rows(tr):
        rows.append((f"null: {figure}", "unavailable", _escape(why)))
    for what, result, why in ladder.counting_rows(tr):
        rows.append((f"counting level: {what}", result, _escape(why)))
    return rows, notes


def print_table(d, console=None):
    console = console or Console()
    t = Table(title=f"netio-trace doctor — {d['machine'].get('hostname')} ({d['kernel']})",
              show_lines=False)
    t.add_column("what")
    t.add_column("result")
    t.add_column("detail", overflow="fold")
    t.add_row("kernel", d["kernel"], f"{d['machine'].get('cpu')}, {d['machine'].get('cores')} cores")
    t.add_row("BTF", _mark(d.get("btf")), "/sys/kernel/btf/vmlinux")
    for k, v in d["attach"].items():
        t.add_row(f"attach: {k}", _mark(v), "")
    rows, notes = tracer_rows(d.get("tracer") or {})
    for row in rows:
        t.add_row(*row)
    pmu = d.get("pmu") or {}
    if pmu:
        for k, v in pmu.items():
            t.add_row(f"pmu: {k}", _mark(v), "")
    else:
        t.add_row("pmu", _mark(None), "not probed")
    t.add_row("stack samples", *_sampling_row(d))
    t.add_row("MSG_ZEROCOPY", _mark(d.get("msg_zerocopy")), d.get("msg_zerocopy_source", ""))
    t.add_row("network namespaces", _mark(d.get("netns")), d.get("netns_error") or "veth pair created and deleted")
    for k, why in (d.get("io_uring") or {}).items():
        t.add_row(f"strategy {k}", _mark(why is None), why or "io_uring available")
    n = d.get("packet_sockets")
    t.add_row("packet sockets", "[yellow]%d open[/]" % n if n else _mark(None) if n is None else "none",
              "an AF_PACKET socket (tcpdump) on a zero-copy path copies every zero-copy skb "
              "it sees; `run` checks forward's namespaces per run")
    for k, v in d["tools"].items():
        t.add_row(f"tool: {k}", _mark(v is not None), v or "not found")
    console.print(t)
    for i, note in enumerate(notes, 1):
        console.print(f"note {i}: {_escape(note)}")


def warnings(d):
    """What does not stop `run` but bends its answers here."""
    n = d.get("packet_sockets")
    if n:
        return [f"warning: {n} packet socket(s) open in this network namespace (tcpdump?): "
                f"a packet socket on a zero-copy path turns zero-copy sends into copies"]
    return []


def main(as_json=False):
    d, errors = collect()
    for w in warnings(d):
        print(f"netio-trace doctor: {w}", file=sys.stderr)
    if as_json:
        json.dump(d, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(d)
    if errors:
        for e in errors:
            print(f"netio-trace doctor: {e}", file=sys.stderr)
        return 2
    return 0
