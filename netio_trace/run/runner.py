"""One run: namespaces, tracer filter, the gated server and client, the snapshot, the run object.

Whatever happens (a failure, Ctrl-C, SIGTERM), the workloads started here are killed by their
pids and reaped, and the namespaces created here are deleted before run_one returns or raises.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

from analysis import record
from analysis.sizes import format_size
from netio_trace.system import netns, paths, state
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_for_exit, wait_listening
from netio_trace.system.signals import critical
from netio_trace.tracer import TracerError

PORT = 5301
LISTEN_TIMEOUT = 10.0
CLIENT_GRACE = 15.0


class RunFailed(Exception):
    pass


def run_dirname(index, cfg, repeat):
    recv = "" if cfg.receive == "copy" else f"-{cfg.receive}"
    recv = recv if cfg.align == "none" else f"-{cfg.align}{recv}"
    return (f"{index:04d}-{cfg.strategy}{recv}-{format_size(cfg.msg_size)}-t{cfg.threads}-"
            f"{cfg.transport}-r{repeat}")


def _read_json(path, who):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise RunFailed(f"{who} wrote no output ({e})") from None
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        # the last line that parses (a workload may print something before its JSON)
        for line in reversed(text.splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise RunFailed(f"{who} printed no JSON")


def _last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f.read().splitlines() if l.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


def _wait_listening(server, err_path, timeout):
    """Until the server says it listens, on its --ready-fd pipe: asleep in select() meanwhile,
    so nothing of ours wakes on the CPUs the workloads run on."""
    try:
        port, _ = wait_listening(server.ready, timeout)
    except TimeoutError:
        raise RunFailed(f"server did not listen within {timeout:.0f} s") from None
    if port is None:        # the pipe ended: the server exited
        try:
            server.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
        raise RunFailed(f"server exited (status {server.returncode}) before listening: "
                        f"{_last_line(err_path)}")


def _outlived(survivor, failed, who, failed_err):
    """failed ended badly while survivor runs: give survivor 2 s to end too, else the run
    fails with failed's own words."""
    try:
        survivor.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        pass
    if survivor.poll() is None:
        raise RunFailed(f"{who} exited with status {failed.returncode} mid-run: "
                        f"{_last_line(failed_err) or 'no message'}")


def _wait_both(server, client, limit, c_err, s_err):
    """Wait for the server to finish its duration and the client to drain. A peer that dies
    early (the server then waits on accept or send) ends the run with its own words."""
    deadline = time.monotonic() + limit
    while server.poll() is None:
        if client.poll() not in (None, 0):
            _outlived(server, client, "client", c_err)
            break
        if time.monotonic() > deadline:
            raise RunFailed(f"server still running {limit:.0f} s after start (killed)")
        # the client ends after the server (it drains); wake when either ends (a client
        # that ended first failed)
        wait_for_exit([server, client] if client.poll() is None else [server],
                      deadline - time.monotonic())
    if server.returncode not in (0, None) and client.poll() is None:
        _outlived(client, server, "server", s_err)
    try:
        client.wait(timeout=CLIENT_GRACE)
    except Exception:
        raise RunFailed(f"client still running {CLIENT_GRACE:.0f} s after the server ended "
                        f"(killed)") from None


def _wait_alone(server, limit, s_err):
    """forward: no receiver; wait for the sender to finish its duration."""
    deadline = time.monotonic() + limit
    while server.poll() is None:
        if time.monotonic() > deadline:
            raise RunFailed(f"server still running {limit:.0f} s after start (killed)")
        wait_for_exit([server], deadline - time.monotonic())


def _forward_observed(topo):
    """What the forward path's second namespace saw, in place of a receiver's JSON: the
    datagrams its interface received, and the packet sockets open on the path."""
    return {"role": "forward", "bytes": None, "datagrams_seen": topo.datagrams_seen(),
            "packet_sockets": topo.packet_sockets(), "error": None}


def _snapshot_paths(raw_dir, folded_path):
    """The control protocol is one line of words: paths with blanks go through a temp dir."""
    if any(c.isspace() for c in raw_dir + folded_path):
        tmp = tempfile.mkdtemp(prefix="netio-snap-")
        return os.path.join(tmp, "trace.json"), os.path.join(tmp, "stacks.folded"), tmp
    return os.path.join(raw_dir, "trace.json"), folded_path, None


def _remove_namespaces(topo):
    """Topology.remove(), and the names it may not know yet (an interruption between `ip netns
    add` and its bookkeeping, or inside __enter__): every name is unique to this driver."""
    topo.remove()
    for ns in topo.namespaces:
        if os.path.exists(os.path.join(netns.NETNS_DIR, ns)):
            netns._ip("netns", "delete", ns, check=False)


class _Files:
    """Where one run writes: raw/<run>/ (workload JSON and stderr, the tracer's snapshot) and
    folded/<run>.folded, relative names for the record."""

    def __init__(self, out_dir, name):
        self.raw_rel = os.path.join("raw", name)
        self.raw = os.path.join(out_dir, self.raw_rel)
        self.folded_rel = os.path.join("folded", name + ".folded")
        self.folded = os.path.join(out_dir, self.folded_rel)
        self.server_out = os.path.join(self.raw, "server.json")
        self.server_err = os.path.join(self.raw, "server.err")
        self.client_out = os.path.join(self.raw, "client.json")
        self.client_err = os.path.join(self.raw, "client.err")
        os.makedirs(self.raw, exist_ok=True)
        os.makedirs(os.path.dirname(self.folded), exist_ok=True)


def _open_topology(topo):
    """Create the run's namespaces; removed again if creating them is interrupted."""
    with critical():
        try:
            topo.__enter__()
        except BaseException:
            _remove_namespaces(topo)
            raise


def _follow_topology(tracer, topo, strategy):
    tracer.clear()
    tracer.reset()
    tracer.skb_programs_for(strategy)
    for ns in topo.namespaces:
        tracer.netns_add(ns)


def _start(argv, out, err, cgroup, tracer, ready=False):
    """A gated workload, recorded in the state file and followed by the tracer before it runs
    its first instruction. ready: with a pipe for the server's --ready-fd."""
    p = GatedProcess(argv, out, err, cgroup=cgroup, ready=ready)
    state.note_child(p.pid, argv[0])
    if tracer is not None:
        tracer.pid_add(p.pid)
    p.release()
    return p


def _mss_args(mss):
    return [] if mss is None else ["--mss", str(mss)]


def _server_argv(cfg, duration, port, topo, mss=None):
    align = [] if cfg.align == "none" else ["--align", cfg.align]
    return [paths.binary("netio-server"), "--strategy", cfg.strategy, *align,
            "--size", str(cfg.msg_size), "--threads", str(cfg.threads),
            "--port", str(port), "--addr", topo.server_addr, "--netns", topo.sender_ns,
            "--duration", f"{duration:g}"] + (["--cc", "cubic", *READY_ARGS, *_mss_args(mss)]
                                              if topo.has_receiver else ["--udp"])


def _client_argv(cfg, port, topo, mss=None):
    return [paths.binary("netio-client"), "--addr", topo.server_addr, "--port", str(port),
            "--threads", str(cfg.threads), "--size", str(cfg.msg_size),
            "--netns", topo.receiver_ns, "--receive", cfg.receive, *_mss_args(mss)]


def _read_outputs(f, server, client, topo):
    server_json = _read_json(f.server_out, "server")
    client_json = (_read_json(f.client_out, "client") if topo.has_receiver
                   else _forward_observed(topo))
    if server_json is None:
        raise RunFailed(f"server exited with status {server.returncode} and no JSON: "
                        f"{_last_line(f.server_err)}")
    if client_json is None:
        raise RunFailed(f"client exited with status {client.returncode} and no JSON: "
                        f"{_last_line(f.client_err)}")
    return server_json, client_json


def _take_snapshot(tracer, f):
    snap_json, snap_folded, tmp = _snapshot_paths(f.raw, f.folded)
    snapshot = tracer.snapshot(snap_json, snap_folded)
    if tmp:
        shutil.move(snap_json, os.path.join(f.raw, "trace.json"))
        if os.path.exists(snap_folded):
            shutil.move(snap_folded, f.folded)
        shutil.rmtree(tmp, ignore_errors=True)
    return snapshot


def _end(procs, topo):
    """The workloads first (by the pids started here), then their namespaces."""
    with critical():
        for p in procs:
            if p is None:
                continue
            p.end()
            if p.returncode is not None:
                state.forget_child(p.pid)
        if topo is not None:
            _remove_namespaces(topo)


def run_one(cfg, repeat, duration, out_dir, index, tracer=None, attribute=None, port=PORT,
            cgroup=None, mss=None, rx_xdp=False):
    """Run one configuration once. Returns the run object (status ok/failed/inconsistent).
    mss: the sweep's --mss (TCP_MAXSEG on both ends), or None; rx_xdp: the sweep's --rx-xdp.
    tracer: the sweep's tracer, attached (a traced run), or None (an untraced run).
    cgroup: the sweep's WorkloadCgroup (netio_trace.system.cgroup) the workloads start in, or None.
    Interruptions (KeyboardInterrupt and what the sweep raises on SIGTERM) pass through after
    cleaning up."""
    f = _Files(out_dir, run_dirname(index, cfg, repeat))
    run = dict(record.base_run(cfg, repeat, mss, rx_xdp), duration_requested_s=duration,
               files={"raw": f.raw_rel})
    server = client = topo = None
    outputs = (None, None)
    snapshot = None
    t0 = time.monotonic()
    try:
        # named before they exist: whatever interrupts from here on, the finally below
        # removes them (a signal deferred by critical() lands when _open_topology returns)
        topo = netns.Topology(cfg.transport, rx_xdp)
        _open_topology(topo)
        if tracer is not None:
            _follow_topology(tracer, topo, cfg.strategy)
        server = _start(_server_argv(cfg, duration, port, topo, mss), f.server_out, f.server_err,
                        cgroup, tracer, ready=topo.has_receiver)
        limit = duration + 30.0 + cfg.threads * 0.05
        if topo.has_receiver:
            _wait_listening(server, f.server_err, LISTEN_TIMEOUT)
            client = _start(_client_argv(cfg, port, topo, mss), f.client_out, f.client_err,
                            cgroup, tracer)
            _wait_both(server, client, limit, f.client_err, f.server_err)
        else:
            _wait_alone(server, limit, f.server_err)
        outputs = _read_outputs(f, server, client, topo)
        if tracer is not None:
            snapshot = _take_snapshot(tracer, f)
            run["files"]["folded"] = f.folded_rel
    except (RunFailed, TracerError, RuntimeError) as e:   # RuntimeError: no Topology
        run.update(status="failed", error=str(e))
    finally:
        _end((client, server), topo)
    run["wall_s"] = round(time.monotonic() - t0, 3)
    if run.get("status") == "failed":
        if any(outputs):
            run["workload_output"] = {"server": outputs[0], "client": outputs[1]}
        return run
    return _record(cfg, repeat, duration, run, outputs, snapshot, (server, client), f,
                   attribute, mss, rx_xdp)


def _attribution(attribute, snapshot, f, server_json):
    """(attribution, error): a failed attribution leaves the run standing without one."""
    if snapshot is None or attribute is None:
        return None, None
    try:
        return attribute(snapshot, f.folded, server_json), None
    except Exception as e:
        return None, f"attribution failed: {e}"


def _record(cfg, repeat, duration, run, outputs, snapshot, procs, f, attribute, mss=None,
            rx_xdp=False):
    """The run object of a run whose workloads both wrote their JSON, with its checks."""
    server_json, client_json = outputs
    server, client = procs
    attribution, attribution_error = _attribution(attribute, snapshot, f, server_json)
    built = record.build_run(cfg, repeat, duration, server_json, client_json, snapshot,
                             server.pid, client.pid if client else None, attribution, mss,
                             rx_xdp)
    built["files"] = run["files"]
    built["wall_s"] = run["wall_s"]
    checks, reasons = record.check(built, server_json, client_json)
    if server.returncode != 0:
        reasons.insert(0, f"server exit status {server.returncode}: {_last_line(f.server_err)}")
    if client is not None and client.returncode != 0:
        reasons.insert(0, f"client exit status {client.returncode}: {_last_line(f.client_err)}")
    built["checks"] = checks
    if attribution_error:
        built["attribution_error"] = attribution_error
    if reasons:
        failed = any(k in checks and checks[k] is False for k in ("server_ok", "client_ok")) \
            or server.returncode != 0 or (client is not None and client.returncode != 0)
        built["status"] = "failed" if failed else "inconsistent"
        built["error"] = "; ".join(reasons)
    else:
        built["status"] = "ok"
        built["error"] = None
    return built
