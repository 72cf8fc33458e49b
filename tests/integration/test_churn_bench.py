"""The churn bench (bench/churn.py) at a tiny size, as `python -m bench.churn` runs it: the
load's accounting is what it was asked for, the tracer's byte totals equal it exactly under
churn, and the table has the three programs with a bound, each seen running for the load, with
the empty-program floor on their hooks from the second run.

Needs root and the built binaries ($NETIO_BUILD). A smoke test: it checks what the bench
reports, never its timings."""
import json
import os
import subprocess
import sys

from conftest import BUILD, REPO, needs_built, needs_root

pytestmark = [needs_root("BPF, network namespaces, cgroups"),
              needs_built("netio-churn", "netio-tracer", "netio-busy-loop")]

LOAD = {"processes": 6, "threads": 2, "connections": 24, "bytes": 700}


def test_churn_bench_is_exact_and_tables_the_three_programs(tmp_path):
    out = tmp_path / "churn.json"
    r = subprocess.run([sys.executable, "-m", "bench.churn", "--runs", "2", "--json", str(out),
                        *(f"--{k}={v}" for k, v in LOAD.items())],
                       cwd=REPO, env=dict(os.environ, NETIO_BUILD=BUILD),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    first, run = res["runs"]
    assert first["floor"] is None                   # the first run names the floor's hooks
    load, tracer = run["load"], run["tracer"]
    assert (load["processes"], load["threads"], load["connections"]) == (6, 12, 24)
    assert load["bytes_sent"] == load["bytes_received"] == 24 * 700
    assert run["exact"]
    assert (tracer["tx_bytes"], tracer["rx_copy_bytes"]) == (24 * 700, 24 * 700)
    assert tracer["forks_followed"] >= 6
    progs = run["programs"]
    # every fork and thread of the load passed the fork handler, every exit the flush, and
    # each connection changed state several times at each end
    assert progs["fork_btf"]["runs"] >= 6 + 12
    assert progs["tp_thread_exit"]["runs"] >= 6 + 12
    assert progs["tp_sock_state"]["runs"] >= 2 * 24
    lines = r.stdout.splitlines()
    for what, prog, bound in (("a fork", "fork_btf", 1000), ("a thread exit", "tp_thread_exit",
                                                            1000),
                              ("a socket's state change", "tp_sock_state", 150)):
        row = next(line for line in lines if line.startswith(f"| {what} | `{prog}` |"))
        assert f"≤ {bound} ns" in row and "n/a" not in row, row
        assert "not measured" not in row, row
        assert 0 < run["floor"][prog] < progs[prog]["ns"] / progs[prog]["runs"] * 10, run["floor"]
    assert "**exact in 2 of 2 runs**" in r.stdout
