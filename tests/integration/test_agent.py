"""`netio-trace agent` (needs root): the agent on an ephemeral port, following every process
of the host; two senders in two cgroups of ours with known byte counts; /metrics gives each
cgroup's bytes exactly, and so does a real Prometheus scraping it every second (with the
recording rules of docs/agent/rules.yml loaded); /healthz, a 404; the bad inputs (one line,
exit 2, nothing started); SIGTERM ends it cleanly; SIGKILL leaves no BPF program, map or link."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from netio_trace.system.cgroup import cgroup2_root  # noqa: E402
from netio_trace.trace_session import clean_after_dead_drivers  # noqa: E402
from conftest import (drain, fdinfo_ids, in_cgroup, made_cgroups, needs_cgroup2,  # noqa: E402
                      needs_root, read_trace, wait_for)

RULES = os.path.join(REPO, "docs", "agent", "rules.yml")
BYTES = {"a": 1_000_003, "b": 3_000_017}       # what each cgroup's sender sends
TIMEOUT = 120

pytestmark = [
    needs_root("BPF, cgroups"), needs_cgroup2(),
    pytest.mark.skipif(not shutil.which("prometheus") or not shutil.which("promtool"),
                       reason="no prometheus/promtool (make deps installs Debian's prometheus)"),
]


def _env():
    e = dict(os.environ, PYTHONPATH=REPO, NETIO_ROOT=REPO)
    return e


def start_agent(*args):
    """The agent on an ephemeral port; (its Popen, the port) once it serves."""
    p = subprocess.Popen([sys.executable, "-m", "netio_trace.cli", "agent", "--listen",
                          "127.0.0.1:0", *args], stderr=subprocess.PIPE, text=True, env=_env(),
                         cwd=REPO)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        assert line, f"the agent ended (status {p.wait()})"
        if "OpenMetrics on http://" in line:
            drain(p.stderr)
            return p, int(line.split("127.0.0.1:", 1)[1].split("/", 1)[0])
    raise AssertionError("the agent never served")


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
    return p.wait(timeout=30)


def get(port, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def samples(text, name):
    """{frozenset of label pairs: value} of a metric's samples in an exposition."""
    out = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels, value = line[len(name) + 1:].rsplit("} ", 1)
        pairs = [kv.split("=", 1) for kv in labels.split('",') if kv]
        out[frozenset((k, v.strip('"')) for k, v in pairs)] = float(value)
    return out


def by_cgroup(text, name, **match):
    """{cgroup: summed value} of a metric's samples whose labels include match."""
    out = {}
    for labels, v in samples(text, name).items():
        d = dict(labels)
        if all(d.get(k) == val for k, val in match.items()):
            out[d["cgroup"]] = out.get(d["cgroup"], 0) + v
    return out


@pytest.fixture
def cgroups():
    with made_cgroups(*(f"netio-agent-test-{os.getpid()}-{k}" for k in BYTES)) as made:
        yield dict(zip(BYTES, made))


# two halves 2.5 s apart: the series exists (and is scraped) before the second half, so that
# rate() sees a gain and the recording rules have something to divide; alive 2.5 s after
# the last byte: past a snapshot after its exec, when its cgroup is read
SENDER = ("import socket, sys, time\n"
          "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
          "n = int(sys.argv[2])\n"
          "s.sendall(b'x' * (n // 2))\n"
          "time.sleep(2.5)\n"
          "s.sendall(b'x' * (n - n // 2))\n"
          "s.close()\n"
          "time.sleep(2.5)\n")


def send_from(cg, nbytes):
    """A receiver here, a sender that moves into cg then execs python: its bytes, all of them
    received (the sender's own figures are what the test checks)."""
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]
    sender = subprocess.Popen(in_cgroup(cg, sys.executable, "-c", SENDER, port, nbytes))
    conn, _ = lsock.accept()
    got = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    conn.close()
    lsock.close()
    assert sender.wait(timeout=TIMEOUT) == 0 and got == nbytes
    return sender.pid


def tracer_trace(agent_pid):
    """The trace object the agent's tracer last wrote into the agent's temporary directory."""
    tmp = tempfile.gettempdir()
    for d in os.listdir(tmp):
        if d.startswith(f"netio-trace-{agent_pid}-"):
            return read_trace(os.path.join(tmp, d, "trace.json.taken"))    # the agent's
    return {}


def prometheus_config(tmp_path, port):
    (tmp_path / "rules.yml").write_text(open(RULES).read())
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - rules.yml\n"
        f"scrape_configs:\n  - job_name: netio\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{port}']\n")
    return str(tmp_path / "prometheus.yml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prom_query(pport, q):
    url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)["data"]["result"]
    except OSError:
        return None


@pytest.fixture
def prometheus(tmp_path):
    """Start Prometheus for an agent's port: call with the port; ended by its pid."""
    procs = []

    def start(agent_port):
        pport = free_port()
        p = subprocess.Popen(["prometheus", f"--config.file={prometheus_config(tmp_path, agent_port)}",
                              f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                              f"--web.listen-address=127.0.0.1:{pport}"],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.log", "w"))
        procs.append(p)
        # its first scrape, not only its API: the series must be scraped before the bytes
        wait_for("prometheus scraping the agent", lambda: prom_query(pport, "up == 1"), 60)
        return pport
    yield start
    for p in procs:
        stop(p)


def test_promtool_checks_the_rules():
    cp = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_each_cgroups_bytes_exactly_on_metrics_and_in_prometheus(cgroups, prometheus):
    agent, port = start_agent()
    status = None
    try:
        assert get(port, "/healthz")[0] in (200, 503)
        # a client that says nothing, one that sends half a request line: each holds only
        # its own thread; the scrapes and the tracing go on (held open through the test)
        idle = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"GET /metr")
        pport = prometheus(port)
        pids = [send_from(cg, BYTES[k]) for k, cg in cgroups.items()]
        want = {"/" + os.path.basename(cg): BYTES[k] for k, cg in cgroups.items()}

        def ours(d):
            return {c: v for c, v in d.items() if c in want}

        text = wait_for("both cgroups' bytes on /metrics", lambda: (
            lambda t: t if ours(by_cgroup(t, "netio_tx_bytes_total")) == want else None)(
            get(port, "/metrics")[1]))
        assert ours(by_cgroup(text, "netio_socket_tx_bytes_total", peer="local",
                              proto="tcp")) == want
        # the senders ended: the tracer forgot them (--prune-exited), their bytes stay
        wait_for("the ended senders pruned", lambda: not set(map(str, pids)) & set(
            tracer_trace(agent.pid).get("processes") or {}))
        assert ours(by_cgroup(get(port, "/metrics")[1], "netio_tx_bytes_total")) == want
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/nope")[0] == 404 and get(port, "/metrics", "POST")[0] == 405
        with socket.create_connection(("127.0.0.1", port), timeout=10) as junk:
            junk.sendall(b"\x00\xffnot http\r\n\r\n")
            assert b" 400 " in junk.recv(4096)
        # Prometheus: the counters' values (each series began with its sender: from absent
        # to N), and a recording rule evaluated on them
        q = 'sum by (cgroup) (netio_tx_bytes_total{cgroup=~"/netio-agent-test-.*"})'
        got = wait_for("prometheus has both cgroups", lambda: (
            lambda r: {x["metric"]["cgroup"]: float(x["value"][1]) for x in r or []}
            if len(r or []) == 2 else None)(prom_query(pport, q)))
        assert ours(got) == want
        share = wait_for("the copy share rule", lambda: prom_query(
            pport, f'cgroup:netio_copy_share:ratio_rate5m{{cgroup="{list(want)[0]}"}}'))
        assert float(share[0]["value"][1]) == 1.0       # python's sendall copies every byte
        with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/rules", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        rules = [rule for g in groups for rule in g["rules"]]
        assert len(rules) == 5 and all(rule["health"] == "ok" for rule in rules), rules
        status = stop(agent)
        idle.close()
        half.close()
    finally:
        stop(agent, signal.SIGKILL)
    assert status == 0


def _bad(*args, prefix=()):
    """(exit status, stderr lines) of an agent that must not start; and nothing of it left:
    no state file, no temporary directory, no child (it had none to record)."""
    p = subprocess.Popen([*prefix, sys.executable, "-m", "netio_trace.cli", "agent", *args],
                         stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO)
    _out, err = p.communicate(timeout=60)
    assert not os.path.exists(f"/run/netio-trace/{p.pid}.json")
    assert not [d for d in os.listdir(tempfile.gettempdir())
                if d.startswith(f"netio-trace-{p.pid}-")]
    return p.returncode, err.strip().splitlines()


def _tracers():
    """Pids of running netio-tracer processes (read only: the test ends none by name)."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe").endswith("/netio-tracer"):
                out.add(int(pid))
        except OSError:
            pass
    return out


def test_bad_input_is_one_line_exit_2_and_nothing_started():
    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = busy.getsockname()[1]
        cases = [
            (("--listen", f"127.0.0.1:{taken}"), "in use"),
            (("--listen", "192.0.2.1:9464"), "assign"),
            (("--cgroup", os.path.join(cgroup2_root(), "netio-no-such-cgroup")), "no such"),
            (("--labels", "pid,bogus"), "unknown label"),
            (("--baseline", "/nonexistent-netio-baseline"), "no such directory"),
        ]
        for args, words in cases:
            status, lines = _bad("--listen", "127.0.0.1:0", *args) if args[0] != "--listen" \
                else _bad(*args)
            assert status == 2 and len(lines) == 1 and words in lines[0], (args, lines)
    status, lines = _bad("--listen", "127.0.0.1:0", prefix=(
        "setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--inh-caps=-all", "--"))
    assert status == 2 and len(lines) == 1 and "CAP_BPF" in lines[0], lines


def _children(pid):
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out.update(int(x) for x in f.read().split())
    return out


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def _bpf_ids(kind):
    """The ids of every BPF object of a kind (prog, map, link) on the host."""
    cp = subprocess.run(["bpftool", kind, "show", "--json"], capture_output=True, text=True)
    return {o["id"] for o in json.loads(cp.stdout or "[]")}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_leaves_no_bpf_program_map_or_link(sig):
    """Only the ids the agent's tracer held are counted: other sessions load their own."""
    agent, port = start_agent("--cgroup", cgroup2_root())
    try:
        tracer = (_children(agent.pid) & _tracers()).pop()
        held = {kind: fdinfo_ids(tracer, f"{kind}_id") for kind in ("prog", "map", "link")}
        assert all(held.values()), f"the tracer holds none of some kind: {held}"
        status = stop(agent, sig)
        assert status == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        wait_for("the tracer's end", lambda: _gone(tracer))
        # an object goes once its last fd (and a program's last link) is gone, freed after an
        # RCU grace period: maps by a deferred work item, later still
        for kind, ids in held.items():
            wait_for(f"its {kind}s gone", lambda: not ids & _bpf_ids(kind))
    finally:
        stop(agent, signal.SIGKILL)
    if sig == signal.SIGKILL:
        clean_after_dead_drivers()      # what a later start does: its state file, its temp dir
    assert not os.path.exists(f"/run/netio-trace/{agent.pid}.json")
    tmp = tempfile.gettempdir()
    assert not [d for d in os.listdir(tmp) if d.startswith(f"netio-trace-{agent.pid}-")]
