"""A kernel without MSG_ZEROCOPY, simulated for real: the processes under test run under a
seccomp filter that fails setsockopt(SOL_SOCKET, SO_ZEROCOPY) with ENOPROTOOPT, which is what
a kernel without SO_ZEROCOPY (before 4.14, or a socket type without it) answers. The filter is
inherited by every child (the tracer, the workloads), so the whole tool sees that kernel.

Needs root and the built binaries (NETIO_BUILD).
"""
import ctypes
import errno
import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import BUILD, CLIENT, REPO, SERVER, needs_built, needs_root
from netio_trace.system.procs import wait_listening

NETIO_TRACE = os.path.join(REPO, "netio-trace")

pytestmark = [
    needs_root("seccomp, namespaces"),
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter is written for x86-64"),
    needs_built("netio-server"),
]

# classic BPF for seccomp (linux/filter.h, linux/seccomp.h, linux/audit.h)
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
AUDIT_ARCH_X86_64 = 0xC000003E
NR_SETSOCKOPT = 54
SOL_SOCKET, SO_ZEROCOPY = 1, 60
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]
OFF_NR, OFF_ARCH, OFF_ARG1, OFF_ARG2 = 0, 4, 16 + 8, 16 + 16


def _insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


FILTER = b"".join([
    _insn(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
    _insn(BPF_JEQ_K, 0, 7, AUDIT_ARCH_X86_64),
    _insn(BPF_LD_W_ABS, 0, 0, OFF_NR),
    _insn(BPF_JEQ_K, 0, 5, NR_SETSOCKOPT),
    _insn(BPF_LD_W_ABS, 0, 0, OFF_ARG1),
    _insn(BPF_JEQ_K, 0, 3, SOL_SOCKET),
    _insn(BPF_LD_W_ABS, 0, 0, OFF_ARG2),
    _insn(BPF_JEQ_K, 0, 1, SO_ZEROCOPY),
    _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOPROTOOPT),
    _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
])


def refuse_so_zerocopy():
    """preexec_fn: install the filter in the child, before exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(FILTER, len(FILTER))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(FILTER) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        os._exit(99)


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          preexec_fn=refuse_so_zerocopy,
                          env={**os.environ, "NETIO_BUILD": BUILD}, **kw)


def test_the_filter_takes_so_zerocopy_away_and_nothing_else():
    probe = ("import socket\n"
             "s = socket.socket()\n"
             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "try:\n"
             "    s.setsockopt(socket.SOL_SOCKET, 60, 1)\n"
             "    print('accepted')\n"
             "except OSError as e:\n"
             "    print(e.errno)\n")
    cp = run([sys.executable, "-c", probe])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == str(errno.ENOPROTOOPT)


def test_doctor_says_no_msg_zerocopy():
    """The JSON says it, and the doctor's exit status flags it (2, one line on stderr)."""
    cp = run([NETIO_TRACE, "doctor", "--json"])
    assert json.loads(cp.stdout)["msg_zerocopy"] is False
    assert cp.returncode == 2
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "MSG_ZEROCOPY" in lines[0], cp.stderr


def test_run_with_zero_copy_is_refused_in_one_line(tmp_path):
    out = tmp_path / "results"
    cp = run([NETIO_TRACE, "run", "--strategies", "one-copy,zero-copy", "--sizes", "4K",
              "--threads", "1", "--repeat", "1", "--duration", "0.2", "--out", str(out)])
    assert cp.returncode == 2, (cp.returncode, cp.stderr)
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "SO_ZEROCOPY" in lines[0], cp.stderr
    assert not out.exists()             # refused before anything was made


def test_run_without_zero_copy_still_works(tmp_path):
    out = tmp_path / "results"
    cp = run([NETIO_TRACE, "run", "--strategies", "one-copy", "--sizes", "4K", "--threads", "1",
              "--repeat", "1", "--duration", "0.2", "--out", str(out)])
    assert cp.returncode == 0, cp.stderr[-2000:]
    with open(out / "runs.jsonl") as f:
        runs = [json.loads(line) for line in f]
    assert [r["traced"] for r in runs] == [False, True]
    assert all(r["status"] == "ok" for r in runs)


def test_zero_copy_server_fails_clearly(tmp_path):
    """The workload itself, on its own: a one-line error naming SO_ZEROCOPY, exit 1, at the
    first connection (where it turns zero-copy on)."""
    err = tmp_path / "server.err"
    ready_r, ready_w = os.pipe()
    with open(err, "w") as ef:
        srv = subprocess.Popen([SERVER, "--strategy", "zero-copy", "--size", "4096",
                                "--threads", "1", "--port", "0", "--addr", "127.0.0.1",
                                "--count", "10", "--ready-fd", str(ready_w)],
                               stdout=subprocess.DEVNULL, stderr=ef, pass_fds=(ready_w,),
                               preexec_fn=refuse_so_zerocopy)
    os.close(ready_w)
    cli = None
    try:
        port, _ = wait_listening(ready_r, 10)
        assert port, err.read_text()
        cli = subprocess.run([CLIENT, "--addr", "127.0.0.1",
                              "--port", str(port), "--threads", "1", "--size", "4096"],
                             capture_output=True, text=True, timeout=30)
        assert srv.wait(timeout=30) == 1
    finally:
        os.close(ready_r)
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    lines = [ln for ln in err.read_text().splitlines()
             if ln.strip() and not ln.startswith("listening")]
    assert len(lines) == 1 and "SO_ZEROCOPY" in lines[0], err.read_text()
    assert cli.returncode != 0          # its connection was closed before the data
