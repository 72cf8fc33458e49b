"""Results written under sudo belong to the invoking user (SUDO_UID/SUDO_GID)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from analysis import files
from conftest import REPO
from netio_trace.system import ownership, paths

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
UID, GID = 4242, 4343


def _owners(path):
    out = {(os.lstat(path).st_uid, os.lstat(path).st_gid)}
    for d, dirs, files in os.walk(path):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            out.add((st.st_uid, st.st_gid))
    return out


def test_give_back_chowns_the_whole_tree(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    env = {"SUDO_UID": str(UID), "SUDO_GID": str(GID)}
    assert ownership.give_back(str(tmp_path / "a"), environ=env) == 3
    assert _owners(tmp_path / "a") == {(UID, GID)}


def test_nothing_without_sudo_or_with_nonsense(tmp_path):
    (tmp_path / "f").write_text("x")
    for env in ({}, {"SUDO_UID": "x"}, {"SUDO_UID": "0"}):
        assert ownership.give_back(str(tmp_path / "f"), environ=env) == 0
    assert _owners(tmp_path / "f") == {(0, 0)}


def test_report_rebuilt_under_sudo_belongs_to_the_user(tmp_path):
    d = tmp_path / "results"
    shutil.copytree(os.path.join(REPO, "tests", "python", "fixtures"), d)
    env = dict(os.environ, SUDO_UID=str(UID), SUDO_GID=str(GID), PYTHONPATH=REPO)
    cp = subprocess.run([sys.executable, "-m", "netio_trace.cli", "report", str(d)], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert (d / "report.html").exists()
    assert _owners(d) == {(UID, GID)}


def _sweep_prereqs():
    if not all(paths.have_binary(b) for b in ("netio-server", "netio-client", "netio-tracer")) \
            or not files.find_tool("ip"):
        pytest.skip("needs the built binaries (NETIO_BUILD) and ip")


def _sweep(out, env):
    return subprocess.Popen(
        [sys.executable, "-m", "netio_trace.cli", "run", "--strategies", "one-copy", "--sizes",
         "4K", "--threads", "1", "--transport", "loopback", "--repeat", "3", "--duration", "0.3",
         "--out", str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


@pytest.mark.parametrize("interrupted", [False, True])
def test_sweep_under_sudo_belongs_to_the_user(tmp_path, interrupted):
    """Everything a sweep wrote (runs, raw/, folded/, the report) is the invoking user's,
    whether it finished or was interrupted."""
    _sweep_prereqs()
    out = tmp_path / "sweep"
    env = dict(os.environ, SUDO_UID=str(UID), SUDO_GID=str(GID), PYTHONPATH=REPO,
               NETIO_ROOT=REPO, NETIO_BUILD=paths.build_dir())
    p = _sweep(out, env)
    if interrupted:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (out / "runs.jsonl").exists() and (out / "runs.jsonl").read_text().strip()):
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=300)
    assert p.returncode == (128 + signal.SIGINT if interrupted else 0), stderr[-2000:]
    assert (out / "runs.jsonl").exists() and (out / "raw").is_dir()
    assert (out / "report.html").exists() != interrupted
    assert _owners(out) == {(UID, GID)}
