"""netio_trace.system.procs: processes held at a gate, and waiting for them without waking up."""
import os
import subprocess
import time

import pytest

from netio_trace.system.procs import READY_FD, GatedProcess, wait_for_exit, wait_listening


def _switches():
    """This thread's context switches (voluntary + involuntary) so far."""
    with open(f"/proc/self/task/{os.getpid()}/status") as f:
        fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
    return sum(int(v) for v in fields.values())


@pytest.fixture
def gated(tmp_path):
    made = []

    def make(*argv, ready=False):
        p = GatedProcess(list(argv), str(tmp_path / "out"), str(tmp_path / "err"), ready=ready)
        made.append(p)
        return p
    yield make
    for p in made:
        p.end()


def test_wait_for_exit_sleeps_until_the_end_and_leaves_reaping_to_poll(gated):
    p = gated("/bin/sleep", "0.4")
    p.release()
    before, t0 = _switches(), time.monotonic()
    wait_for_exit([p], 10)
    waited, woke = time.monotonic() - t0, _switches() - before
    assert 0.3 <= waited < 5
    # a loop polling every 5 ms would have switched ~80 times in 0.4 s
    assert woke <= 5, f"{woke} context switches while waiting"
    assert p.returncode is None          # not reaped by the wait
    assert p.poll() == 0


def test_wait_for_exit_returns_at_the_timeout_with_the_process_still_running(gated):
    p = gated("/bin/sleep", "30")
    p.release()
    t0 = time.monotonic()
    wait_for_exit([p], 0.2)
    assert 0.15 <= time.monotonic() - t0 < 3
    assert p.poll() is None


def test_wait_for_exit_wakes_for_the_first_of_several(gated):
    slow, fast = gated("/bin/sleep", "30"), gated("/bin/sleep", "0.2")
    slow.release()
    fast.release()
    t0 = time.monotonic()
    wait_for_exit([slow, fast], 10)
    assert time.monotonic() - t0 < 5
    assert fast.poll() == 0 and slow.poll() is None


def test_wait_for_exit_on_a_reaped_process_returns_at_once(gated):
    p = gated("/bin/true")
    p.release()
    assert p.wait(timeout=5) == 0
    t0 = time.monotonic()
    wait_for_exit([p], 10)
    assert time.monotonic() - t0 < 1


def test_gated_wait_times_out(gated):
    p = gated("/bin/sleep", "30")
    p.release()
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(timeout=0.2)


def test_end_kills_a_running_process_and_lets_a_gated_one_exit_unrun(gated, tmp_path):
    running = gated("/bin/sleep", "30")
    running.release()
    t0 = time.monotonic()
    running.end()
    assert running.returncode == -9 and time.monotonic() - t0 < 5
    with pytest.raises(ProcessLookupError):
        os.kill(running.pid, 0)             # reaped: nothing of it is left
    marker = tmp_path / "ran"
    held = gated("/bin/touch", str(marker))
    held.end()                              # never released: its argv must not run
    assert held.returncode is not None and held._gate is None
    assert not marker.exists()
    done = gated("/bin/true")
    done.release()
    done.wait(5)
    done.end()                              # already over: nothing to do, no error
    assert done.returncode == 0


def test_wait_listening_sleeps_until_the_line_on_the_ready_pipe(gated):
    """A server's --ready-fd: the line comes on READY_FD, read without waking up meanwhile."""
    p = gated("/bin/sh", "-c", f"sleep 0.4; echo before >&{READY_FD}; "
              f"echo listening 4242 >&{READY_FD}; echo after >&{READY_FD}; sleep 30",
              ready=True)
    p.release()
    before, t0 = _switches(), time.monotonic()
    port, rest = wait_listening(p.ready, 10)
    waited, woke = time.monotonic() - t0, _switches() - before
    assert port == 4242 and 0.3 <= waited < 5
    assert "before" in rest and "listening" not in rest
    assert woke <= 10, f"{woke} context switches while waiting"
    p.end()
    assert p.ready is None                  # closed with the process


def test_wait_listening_says_none_when_the_server_ends_first(gated):
    p = gated("/bin/sh", "-c", f"echo 'bind: Address already in use' >&{READY_FD}; exit 1",
              ready=True)
    p.release()
    port, rest = wait_listening(p.ready, 10)
    assert port is None and "Address already in use" in rest
    assert p.wait(5) == 1


def test_wait_listening_times_out(gated):
    p = gated("/bin/sleep", "30", ready=True)
    p.release()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        wait_listening(p.ready, 0.2)
    assert time.monotonic() - t0 < 3


def test_the_ready_pipe_is_only_the_childs(gated, tmp_path):
    """Without ready=True the child gets no READY_FD; with it the parent keeps only the read
    end (else the pipe would never end)."""
    plain = gated("/bin/sh", "-c", f"echo x >&{READY_FD}")
    plain.release()
    assert plain.wait(5) != 0 and plain.ready is None
    p = gated("/bin/true", ready=True)
    p.release()
    assert p.wait(5) == 0
    assert wait_listening(p.ready, 5) == (None, "")
