"""Unrelated syscalls under the tracer, measured in the 6.1 guest where fentry works.

A process making only syscalls the tracer does not follow (netio-getpid-loop) runs untraced,
under the full default tracer on the fentry rung (hooks on the send and receive syscall
functions only) and under the same tracer on the sys_enter rung (every syscall of the machine
passes its hook), in turn within each round, the order rotated every round. Both tracers are
loaded once and attached in turn (`attach`/`detach`): a detached tracer has no program
attached. Ratios are taken within a round (traced / the round's untraced rate): the emulated
guest's absolute rates mean nothing, its ratios within one boot do. The guest runs as fast as
this VM, which the host slows by up to 2x from one second to the next (bench/NOTES.md): the
loop times a block of computation after every batch of calls (`--reference`), and a pair of
runs whose reference rates differ by more than pairs.STEADY_TOLERANCE is left out, as the
host's sections leave out pairs whose machine-speed probes differ.

Two sides, one module: the bench's host calls measure(), which boots the guest with
scripts/vm-exec.sh; inside it `python -m bench.unrelated OUT` measures and writes OUT/unrelated.json.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from bench import pairs
from netio_trace.tracer import ControlTracer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATES = ("untraced", "fentry", "sys_enter")
RESULT = "unrelated.json"
TARGET = 0.98           # the getpid loop's rate under the full tracer on the fentry rung
# after an attach or detach (and before an untraced run alike): the kernel finishes releasing
# programs in workers on the other vCPU, which shares the loop's one host thread under TCG
SETTLE_S = 1.0
BOOT_TIMEOUT_S = 600


class GuestError(Exception):
    """The guest could not be booted or gave no result; the message says why."""


# ---- host side -------------------------------------------------------------------------------

def measure(build, rounds, seconds, log=print):
    """Boots the guest and returns its result: {"kernel", "attach", "samples", "seconds",
    "rounds": [{state: {"calls_per_s", "blocks_per_s"}}, ...]}. Raises GuestError."""
    scratch = tempfile.mkdtemp(prefix="netio-bench-guest.")
    try:
        script = os.path.join(scratch, "guest.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    f"NETIO_BUILD={build} PYTHONPATH={REPO} PYTHONDONTWRITEBYTECODE=1 "
                    f"{sys.executable} -m bench.unrelated --rounds {rounds} "
                    f"--seconds {seconds} \"$1\" >\"$1/guest.log\" 2>&1\n")
        os.chmod(script, 0o755)
        log(f"unrelated: booting the guest ({rounds} rounds of {len(STATES)} x {seconds} s)")
        return _read_result(scratch, _boot(scratch, script))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _boot(scratch, script):
    """scripts/vm-exec.sh, which an interrupted bench ends with SIGTERM to the pid it started:
    the script ends the guest (vng, QEMU) before it exits."""
    env = dict(os.environ, NETIO_VM_TIMEOUT=str(BOOT_TIMEOUT_S))
    vm = subprocess.Popen([os.path.join(REPO, "scripts", "vm-exec.sh"), scratch, script],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, start_new_session=True)
    try:
        _, err = vm.communicate()
    except BaseException:
        vm.terminate()
        vm.wait(timeout=60)
        raise
    return subprocess.CompletedProcess(vm.args, vm.returncode, "", err)


def _read_result(scratch, vm):
    """The guest's JSON, or GuestError with what it left (its log's or the console's end)."""
    try:
        with open(os.path.join(scratch, RESULT)) as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    why = vm.stderr.strip().splitlines()[-1:] or [f"vng status {vm.returncode}"]
    for name in ("guest.log", "vm.log"):
        try:
            with open(os.path.join(scratch, name), errors="replace") as f:
                tail = f.read().strip().splitlines()[-3:]
        except OSError:
            continue
        if tail:
            why.append(f"{name}: " + " | ".join(tail))
            break
    raise GuestError("the guest gave no result: " + "; ".join(why))


def ratios(result, state):
    """(state / untraced calls per second within each round where the machine kept one speed
    across the two runs, how many rounds were left out)."""
    kept = [r for r in result["rounds"]
            if pairs.steady_speeds([(r["untraced"]["blocks_per_s"],),
                                    (r[state]["blocks_per_s"],)])]
    return ([r[state]["calls_per_s"] / r["untraced"]["calls_per_s"] for r in kept],
            len(result["rounds"]) - len(kept))


def normalized_ratios(result, state):
    """state / untraced in calls per reference block, every round: the host's speed divided
    out, an estimate (it also divides out a cost that would slow computation alike)."""
    def per_block(run):
        return run["calls_per_s"] / run["blocks_per_s"]
    return [per_block(r[state]) / per_block(r["untraced"]) for r in result["rounds"]]


# ---- guest side ------------------------------------------------------------------------------

def _getpid_rates(build, seconds):
    """{"calls_per_s", "blocks_per_s"}: the loop's rate and the machine's speed meanwhile."""
    out = subprocess.run([os.path.join(build, "netio-getpid-loop"), "--seconds", str(seconds),
                          "--reference"],
                         capture_output=True, text=True, check=True, timeout=60 + 10 * seconds)
    res = json.loads(out.stdout)
    return {k: res[k] for k in ("calls_per_s", "blocks_per_s")}


def _tracers(build, out):
    """The full default tracer on each syscall rung, loaded and detached. Stats off: TCG can
    livelock on the code patching that sampled BPF statistics do (tests/integration)."""
    binary = os.path.join(build, "netio-tracer")
    args = ("--bpf-stats", "off")
    fentry = ControlTracer(binary=binary, extra_args=args,
                           log_path=os.path.join(out, "fentry.log")).start()
    sys_enter = ControlTracer(binary=binary, extra_args=args,
                              log_path=os.path.join(out, "sys_enter.log"),
                              env={"NETIO_TRACER_SKIP": "fs_sendto_in"}).start()
    tracers = {"fentry": fentry, "sys_enter": sys_enter}
    for t in tracers.values():
        t.detach_probes()
    return tracers


def _round(build, tracers, seconds, order):
    """{state: _getpid_rates()}, the states measured in order."""
    rates = {}
    for state in order:
        t = tracers.get(state)
        if t:
            t.attach_probes()
        try:
            time.sleep(SETTLE_S)
            rates[state] = _getpid_rates(build, seconds)
        finally:
            if t:
                t.detach_probes()
    return rates


def guest_main(out, rounds, seconds):
    build = os.environ.get("NETIO_BUILD", os.path.join(REPO, "build"))
    tracers = _tracers(build, out)
    try:
        attach = {k: (t.attach or {}).get("syscalls") for k, t in tracers.items()}
        samples = tracers["fentry"].samples
        if attach["fentry"] != "fentry":
            raise SystemExit(f"unrelated: no fentry rung for syscalls here ({attach})")
        rows = []
        for i in range(rounds):
            k = i % len(STATES)
            order = STATES[k:] + STATES[:k]
            rows.append(_round(build, tracers, seconds, order))
    finally:
        for t in tracers.values():
            t.close()
    result = {"kernel": platform.release(), "attach": attach, "samples": samples,
              "seconds": seconds, "rounds": rows}
    with open(os.path.join(out, RESULT), "w") as f:
        json.dump(result, f)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.unrelated",
                                 description="inside the guest: " + __doc__.splitlines()[0])
    ap.add_argument("out", help="directory shared with the host")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--seconds", type=float, default=0.3)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds and --seconds must be positive")
    guest_main(args.out, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
