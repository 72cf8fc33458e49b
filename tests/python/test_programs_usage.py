"""The test programs (tests/programs/) without root: bad usage is one line and exit 2, a
failure at run time is the JSON line with "error" and exit 1, a run is the JSON line with
"error" null. What they count against the tracer is tests/integration/test_programs.py's."""
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import BUILD, needs_built

NAMES = ("udp-sender", "udp-receiver", "tcp-sink", "file-server", "tcp-zc-late",
         "uring-send-zc", "udp-zc-sockets")
pytestmark = needs_built(*(f"tests/programs/{n}" for n in NAMES))


def run(name, *args):
    return subprocess.run([os.path.join(BUILD, "tests", "programs", name), *args],
                          capture_output=True, text=True, timeout=30)


# (program, arguments, the option the one line must name)
BAD = [
    ("udp-sender", ["--port", "9", "--count", "1", "--size", "8"], "--addr"),
    ("udp-sender", ["--addr", "127.0.0.1", "--port", "0", "--count", "1", "--size", "8"],
     "--port"),
    ("udp-sender", ["--addr", "127.0.0.1", "--port", "9", "--count", "1", "--size", "8",
                    "--ready-fd", "2"], "--ready-fd"),
    ("udp-receiver", ["--count", "1", "--size", "8", "--timeout", "0"], "--timeout"),
    ("udp-receiver", ["--count", "1", "--size", "8", "--addr", "localhost"], "--addr"),
    ("tcp-sink", ["--connect"], "--connect"),
    ("tcp-sink", ["--port", "1", "--port", "2"], "--port"),
    ("file-server", ["--file", "/nonexistent"], "--file"),
    ("file-server", ["--file", "/etc/hostname", "--netns"], "--netns"),
    ("tcp-zc-late", ["--addr", "127.0.0.1", "--port", "9", "--count", "1", "--size", "x"],
     "--size"),
    ("tcp-zc-late", ["--addr", "127.0.0.1", "--port", "9", "--count", "1", "--size", "8",
                     "--ready-fd", "3"], "--ready-fd"),
    ("uring-send-zc", ["--addr", "127.0.0.1", "--port", "9"], "--count"),
    ("udp-zc-sockets", ["--addr", "127.0.0.1", "--port", "9", "--count", "1", "--size", "8"],
     "--sockets"),
    ("udp-zc-sockets", ["--addr", "127.0.0.1", "--port", "9", "--sockets", "0", "--count",
                        "1", "--size", "8"], "--sockets"),
]


@pytest.mark.parametrize("name,args,option", BAD, ids=lambda x: " ".join(x)
                         if isinstance(x, list) else x)
def test_bad_usage(name, args, option):
    r = run(name, *args)
    assert r.returncode == 2, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: ") and option in lines[0], r.stderr


def one_json(r):
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


@pytest.mark.parametrize("name,args,error", [
    ("udp-receiver", ["--addr", "127.0.0.1", "--count", "1", "--size", "8", "--timeout", "1"],
     "fewer datagrams than --count: "),
    ("tcp-sink", ["--addr", "127.0.0.1", "--timeout", "1"], "accept: "),
])
def test_failure_is_the_json_line_and_exit_1(name, args, error):
    """Nothing comes: each gives up after its --timeout, with what it counted (nothing)."""
    t0 = time.monotonic()
    r = run(name, *args)
    assert r.returncode == 1 and time.monotonic() - t0 >= 0.9, r
    out = one_json(r)
    assert out["program"] == name and out["port"] > 0, out
    assert out["error"].startswith(error) and out["seconds"] >= 0, out
    assert r.stderr.splitlines()[-1] == f"{name}: {out['error']}", r.stderr


def sent_to_loopback(name, datagrams, *args):
    """name run with args against a UDP socket of ours on loopback until it has sent
    `datagrams`: its JSON line (a run that went well) and the sizes the socket received."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rcv:
        rcv.bind(("127.0.0.1", 0))
        rcv.settimeout(5)
        r = run(name, "--addr", "127.0.0.1", "--port", str(rcv.getsockname()[1]),
                "--timeout", "5", *args)
        got = [len(rcv.recv(200)) for _ in range(datagrams)]
    assert r.returncode == 0, r
    out = one_json(r)
    assert out["program"] == name and out["error"] is None, out
    return out, got


def test_udp_sender_counts_what_it_sent():
    """Three datagrams to a socket of ours on loopback: what it counted, and "error" null."""
    out, got = sent_to_loopback("udp-sender", 3, "--count", "3", "--size", "100")
    assert (out["messages"], out["datagrams"], out["bytes"], out["send_calls"]) == \
        (3, 3, 300, 3) and got == [100] * 3, out
    assert out["zerocopy"] is None and out["seconds"] >= 0


@pytest.mark.parametrize("unconnected", (False, True), ids=("connected", "unconnected"))
def test_udp_zc_sockets_counts_what_it_sent(unconnected):
    """Two sockets of two MSG_ZEROCOPY datagrams each to a socket of ours on loopback: every
    completion read (local delivery copies them: COPIED), and "error" null."""
    out, got = sent_to_loopback("udp-zc-sockets", 4, "--sockets", "2", "--count", "2",
                                "--size", "100", *(("--unconnected",) if unconnected else ()))
    assert (out["sockets"], out["datagrams"], out["bytes"], out["send_calls"]) == \
        (2, 4, 400, 4) and got == [100] * 4, out
    zc = out["zerocopy"]
    assert zc["sends"] == zc["completed"] == 4 and zc["unexpected"] == 0, zc
    assert zc["zc_bytes"] + zc["copied_bytes"] == 400, zc


def test_uring_check_says_whether_it_runs():
    r = run("uring-send-zc", "--check")
    assert r.returncode == 0, r
    out = one_json(r)
    assert out["program"] == "uring-send-zc" and "unsupported" in out, out
    assert out["unsupported"] is None or out["unsupported"], out
