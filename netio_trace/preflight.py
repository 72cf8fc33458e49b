"""What a sweep needs of this machine, checked before anything starts: privileges, tools, the
built binaries, BTF, the forced rung, and what the kernel takes of the strategies asked for
(io_uring, SO_ZEROCOPY, TCP_ZEROCOPY_RECEIVE). `run`, `trace`'s baseline and `doctor` ask here,
so that none of them reaches into another."""
import ctypes
import os
import socket
import subprocess

from analysis import files
from netio_trace.run.params import UsageError
from netio_trace.system import paths
from netio_trace.system.privileges import privilege_error
from netio_trace.tracer import TracerError, probe

SO_ZEROCOPY = getattr(socket, "SO_ZEROCOPY", 60)


def check_privileges(params):
    """The privileges the sweep needs (root, or CAP_BPF and the rest where it traces)."""
    err = privilege_error("run", need_bpf=params.trace)
    if err:
        raise UsageError(err)


def preflight(params):
    """What must be on the machine for this sweep: one line per missing thing (UsageError)."""
    check_privileges(params)
    if not files.find_tool("ip"):
        raise UsageError("netio-trace run: `ip` (iproute2) not found; install it: apt-get install iproute2")
    need = ["netio-server", "netio-client"] + (["netio-tracer"] if params.trace else [])
    missing = [n for n in need if not paths.have_binary(n)]
    if missing:
        raise UsageError(f"netio-trace run: {', '.join(missing)} not built in {paths.build_dir()}; "
                         f"run `make` (or set NETIO_BUILD)")
    if params.trace and not os.path.exists("/sys/kernel/btf/vmlinux"):
        raise UsageError("netio-trace run: this kernel has no BTF (/sys/kernel/btf/vmlinux); the "
                         "tracer needs CONFIG_DEBUG_INFO_BTF=y, or run with --no-trace")
    if params.trace and params.attach != "auto":
        try:
            allowed = probe().get("attach") or {}
        except TracerError as e:
            raise UsageError(f"netio-trace run: {e}") from None
        ok = allowed.get(params.attach)
        if params.attach == "tracepoint":
            ok = allowed.get("tracepoint") or allowed.get("tp_btf")
        if ok is False:
            raise UsageError(f"netio-trace run: --attach {params.attach} cannot attach on this "
                             f"kernel ({os.uname().release}); see `netio-trace doctor`, or use "
                             f"--attach auto")
    uring = [s for s in params.strategies if s in ("io-uring", "io-uring-zc")]
    for s in uring:
        why = workload_refuses(s)
        if why:
            raise UsageError(f"netio-trace run: {why}; leave {s} out of --strategies")
    if "mmap" in params.receives:
        why = probe_zerocopy_receive()
        if why:
            raise UsageError(f"netio-trace run: --receive mmap: {why}; leave mmap out of "
                             f"--receive")
    if "zero-copy" in params.strategies:
        if not probe_zerocopy_socket():
            raise UsageError("netio-trace run: this kernel refuses SO_ZEROCOPY (MSG_ZEROCOPY needs "
                             "4.14+); leave zero-copy out of --strategies")


def workload_refuses(strategy):
    """The sender's own one line when it cannot run strategy on this machine (io_uring
    disabled, missing or too old), else None."""
    r = subprocess.run([paths.binary("netio-server"), "--strategy", strategy, "--size", "8",
                        "--threads", "1", "--port", "0", "--count", "1", "--check"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return None
    line = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
    return line.removeprefix("netio-server: ")


def probe_zerocopy_socket():
    """Fallback when the tracer cannot say: does the kernel take SO_ZEROCOPY on a TCP socket?"""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
        return True
    except OSError:
        return False


TCP_ZEROCOPY_RECEIVE = 35       # linux/tcp.h
ZEROCOPY_RECEIVE_LEN = 64       # struct tcp_zerocopy_receive (6.x); older kernels take less
COPYBUF_LEN_END = 36            # offsetofend(struct tcp_zerocopy_receive, copybuf_len): 5.11


def probe_zerocopy_receive():
    """None if the kernel has TCP_ZEROCOPY_RECEIVE (netio-client --receive mmap), else why not.
    On a socket never connected the call maps nothing and succeeds where the option exists."""
    # through libc: Python's getsockopt hands the kernel an uninitialised buffer, and the
    # struct's address must be 0 or page-aligned
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(ZEROCOPY_RECEIVE_LEN)
    size = ctypes.c_uint32(ZEROCOPY_RECEIVE_LEN)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        r = libc.getsockopt(s.fileno(), socket.IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, buf,
                            ctypes.byref(size))
    if r != 0:
        return (f"this kernel has no TCP_ZEROCOPY_RECEIVE ({os.strerror(ctypes.get_errno())}; "
                f"Linux 4.18+)")
    if size.value < COPYBUF_LEN_END:
        return ("this kernel's TCP_ZEROCOPY_RECEIVE has no copy buffer (Linux 5.11+), which "
                "netio-client's mmap receive needs")
    return None
