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
from netio_trace.system.procs import GatedProcess, wait_for_exit
from netio_trace.system.signals import critical
from netio_trace.tracer import TracerError

PORT = 5301
LISTEN_TIMEOUT = 10.0
CLIENT_GRACE = 15.0


class RunFailed(Exception):
    pass


def run_dirname(index, cfg, repeat):
    return (f"{index:04d}-{cfg.strategy}-{format_size(cfg.msg_size)}-t{cfg.threads}-"
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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(err_path, errors="replace") as f:
                if "listening" in f.read():
                    return
        except OSError:
            pass
        if server.poll() is not None:
            raise RunFailed(f"server exited (status {server.returncode}) before listening: "
                            f"{_last_line(err_path)}")
        time.sleep(0.003)
    raise RunFailed(f"server did not listen within {timeout:.0f} s")


def _wait_both(server, client, limit, c_err, s_err):
    """Wait for the server to finish its duration and the client to drain. A peer that dies
    early (the server then waits on accept or send) ends the run with its own words."""
    deadline = time.monotonic() + limit
    while server.poll() is None:
        if client.poll() not in (None, 0):
            try:
                server.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
            if server.poll() is None:
                raise RunFailed(f"client exited with status {client.returncode} mid-run: "
                                f"{_last_line(c_err) or 'no message'}")
            break
        if time.monotonic() > deadline:
            raise RunFailed(f"server still running {limit:.0f} s after start (killed)")
        # the client ends after the server (it drains); wake when either ends (a client
        # that ended first failed)
        wait_for_exit([server, client] if client.poll() is None else [server],
                      deadline - time.monotonic())
    if server.returncode not in (0, None) and client.poll() is None:
        try:
            client.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        if client.poll() is None:
            raise RunFailed(f"server exited with status {server.returncode} mid-run: "
                            f"{_last_line(s_err) or 'no message'}")
    try:
        client.wait(timeout=CLIENT_GRACE)
    except Exception:
        raise RunFailed(f"client still running {CLIENT_GRACE:.0f} s after the server ended "
                        f"(killed)") from None


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


def run_one(cfg, repeat, duration, out_dir, index, tracer=None, attribute=None, port=PORT,
            cgroup=None):
    """Run one configuration once. Returns the run object (status ok/failed/inconsistent).
    cgroup: the sweep's WorkloadCgroup (netio_trace.system.cgroup) the workloads start in, or None.
    Interruptions (KeyboardInterrupt and what the sweep raises on SIGTERM) pass through after
    cleaning up."""
    name = run_dirname(index, cfg, repeat)
    raw_rel = os.path.join("raw", name)
    raw_dir = os.path.join(out_dir, raw_rel)
    os.makedirs(raw_dir, exist_ok=True)
    folded_rel = os.path.join("folded", name + ".folded")
    folded_path = os.path.join(out_dir, folded_rel)
    os.makedirs(os.path.dirname(folded_path), exist_ok=True)
    run = record.base_run(cfg, repeat)
    run["duration_requested_s"] = duration
    run["files"] = {"raw": raw_rel}
    server = client = None
    server_json = client_json = None
    snapshot = None
    t0 = time.monotonic()
    topo = None
    try:
        with critical():
            topo = netns.Topology(cfg.transport)
            try:
                topo.__enter__()
            except BaseException:
                _remove_namespaces(topo)
                raise
        if tracer is not None:
            tracer.clear()
            tracer.reset()
            for ns in topo.namespaces:
                tracer.netns_add(ns)
        s_out, s_err = os.path.join(raw_dir, "server.json"), os.path.join(raw_dir, "server.err")
        c_out, c_err = os.path.join(raw_dir, "client.json"), os.path.join(raw_dir, "client.err")
        server = GatedProcess(
            [paths.binary("netio-server"), "--strategy", cfg.strategy,
             "--size", str(cfg.msg_size), "--threads", str(cfg.threads),
             "--port", str(port), "--addr", topo.server_addr, "--netns", topo.sender_ns,
             "--duration", f"{duration:g}", "--cc", "cubic"], s_out, s_err, cgroup=cgroup)
        state.note_child(server.pid, paths.binary("netio-server"))
        if tracer is not None:
            tracer.pid_add(server.pid)
        server.release()
        _wait_listening(server, s_err, LISTEN_TIMEOUT)
        client = GatedProcess(
            [paths.binary("netio-client"), "--addr", topo.server_addr, "--port", str(port),
             "--threads", str(cfg.threads), "--size", str(cfg.msg_size),
             "--netns", topo.receiver_ns], c_out, c_err, cgroup=cgroup)
        state.note_child(client.pid, paths.binary("netio-client"))
        if tracer is not None:
            tracer.pid_add(client.pid)
        client.release()
        _wait_both(server, client, duration + 30.0 + cfg.threads * 0.05, c_err, s_err)
        server_json = _read_json(s_out, "server")
        client_json = _read_json(c_out, "client")
        if server_json is None:
            raise RunFailed(f"server exited with status {server.returncode} and no JSON: "
                            f"{_last_line(s_err)}")
        if client_json is None:
            raise RunFailed(f"client exited with status {client.returncode} and no JSON: "
                            f"{_last_line(c_err)}")
        if tracer is not None:
            snap_json, snap_folded, tmp = _snapshot_paths(raw_dir, folded_path)
            snapshot = tracer.snapshot(snap_json, snap_folded)
            if tmp:
                shutil.move(snap_json, os.path.join(raw_dir, "trace.json"))
                if os.path.exists(snap_folded):
                    shutil.move(snap_folded, folded_path)
                shutil.rmtree(tmp, ignore_errors=True)
            run["files"]["folded"] = folded_rel
    except RunFailed as e:
        run.update(status="failed", error=str(e))
    except TracerError as e:
        run.update(status="failed", error=str(e))
    except RuntimeError as e:       # Topology could not be created
        run.update(status="failed", error=str(e))
    finally:
        with critical():
            # the workloads first (by the pids started here), then their namespaces
            for p in (client, server):
                if p is None:
                    continue
                p.end()
                if p.returncode is not None:
                    state.forget_child(p.pid)
            if topo is not None:
                _remove_namespaces(topo)
    run["wall_s"] = round(time.monotonic() - t0, 3)
    if run.get("status") == "failed":
        if server_json or client_json:
            run["workload_output"] = {"server": server_json, "client": client_json}
        return run

    attribution = None
    attribution_error = None
    if snapshot is not None and attribute is not None:
        try:
            attribution = attribute(snapshot, folded_path, server_json)
        except Exception as e:       # the run stands; the attribution is missing
            attribution_error = f"attribution failed: {e}"
    built = record.build_run(cfg, repeat, duration, server_json, client_json, snapshot,
                             server.pid, client.pid, attribution)
    built["files"] = run["files"]
    built["wall_s"] = run["wall_s"]
    checks, reasons = record.check(built, server_json, client_json)
    if server.returncode != 0:
        reasons.insert(0, f"server exit status {server.returncode}: {_last_line(s_err)}")
    if client.returncode != 0:
        reasons.insert(0, f"client exit status {client.returncode}: {_last_line(c_err)}")
    built["checks"] = checks
    if attribution_error:
        built["attribution_error"] = attribution_error
    if reasons:
        failed = any(k in checks and checks[k] is False for k in ("server_ok", "client_ok")) \
            or server.returncode != 0 or client.returncode != 0
        built["status"] = "failed" if failed else "inconsistent"
        built["error"] = "; ".join(reasons)
    else:
        built["status"] = "ok"
        built["error"] = None
    return built
