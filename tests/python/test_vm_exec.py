"""scripts/vm-exec.sh, the one way to boot the 6.1 guest: what it cannot do is one line on
stderr and exit 3 (a caller tells "cannot boot here" from a guest that failed), before any
guest is started."""
import os
import subprocess

from conftest import REPO

SCRIPT = os.path.join(REPO, "scripts", "vm-exec.sh")


def _run(*args, env=None):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, **(env or {})))


def test_usage_error_is_one_line_and_exit_3():
    p = _run("only-one-argument")
    assert p.returncode == 3
    assert p.stderr.strip().splitlines() == ["vm-exec: usage: scripts/vm-exec.sh OUT SCRIPT"]


def test_a_script_the_guest_cannot_see_is_refused(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere.sh"
    out.mkdir()
    elsewhere.write_text("#!/bin/sh\n")
    elsewhere.chmod(0o755)
    p = _run(str(out), str(elsewhere))
    assert p.returncode == 3
    want = "needs root" if os.geteuid() else "is not in"
    assert want in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (out / "vm.log").exists()


def test_a_missing_kernel_is_refused(tmp_path):
    script = tmp_path / "guest.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    p = _run(str(tmp_path), str(script), env={"NETIO_VM_KERNEL": "/nonexistent"})
    assert p.returncode == 3
    want = "needs root" if os.geteuid() else "no kernel image"
    assert want in p.stderr
    assert not (tmp_path / "vm.log").exists()
