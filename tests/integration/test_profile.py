"""Stack sampling, folded stacks, flame graphs and perf counters through the tracer.

Needs root and a built tracer ($NETIO_BUILD/netio-tracer, default <repo>/build). A small C
program compiled here is the busy process (its functions have known names); the workloads
give the network case. Every process is started held at the launch gate, followed, then
released; the tracer is only ever ended through the client object that started it.
"""
import json
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from analysis import attribution
from conftest import CLIENT, SERVER, TRACER, needs_built, needs_root
from netio_trace.system import cgroup
from netio_trace.system.machine import has_pmu, kernel_hz
from netio_trace.system.procs import READY_ARGS, GatedProcess, wait_listening
from netio_trace.tracer import ControlTracer
from report import flamegraph

FREQ = 999
# a sampler with a timer of its own (the default, auto, is the tick where there is no PMU)
TIMER = "cycles" if has_pmu() else "cpu-clock"
BUSY_SECONDS = 1.5

pytestmark = [
    needs_root("BPF, perf_event_open"),
    needs_built("netio-tracer"),
]

BUSY_C = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long busy_spin(unsigned long n)
{
	unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + i;
	return x;
}

/* a libc memcpy variant called from here: a frameless leaf, whose caller the profiler
 * must put back */
__attribute__((noinline)) void copy_loop(char *dst, const char *src, size_t n, int times)
{
	for (int i = 0; i < times; i++) {
		memcpy(dst, src, n);
		__asm__ volatile("" ::: "memory");
	}
}

int main(int argc, char **argv)
{
	double secs = atof(argv[1]), t0 = now();
	size_t n = 1 << 20;
	char *a = malloc(n), *b = malloc(n);
	unsigned long acc = 0;

	memset(a, 1, n);
	memset(b, 2, n);
	while (now() - t0 < secs) {
		acc += busy_spin(2000000);
		copy_loop(b, a, n, 20);
	}
	return (int)(acc & 1) & (b[7] - 1);
}
"""


@pytest.fixture(scope="module")
def busy_bin(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("busy")
    src, exe = d / "busy.c", d / "netio-busy"
    src.write_text(BUSY_C)
    subprocess.run([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-builtin-memcpy",
                    str(src), "-o", str(exe)], check=True)
    return str(exe)


@pytest.fixture(scope="module")
def tracer(tmp_path_factory):
    log = tmp_path_factory.mktemp("tracer") / "tracer.log"
    t = ControlTracer(freq=FREQ, log_path=str(log), binary=TRACER, sample_source=TIMER)
    t.start()
    yield t
    t.close()


def run_followed(tracer, argv, out_dir, timeout=60):
    """Start argv at the launch gate, follow it from its first instruction, run it to the end."""
    tracer.clear()
    tracer.reset()
    p = GatedProcess(argv, os.path.join(out_dir, "out"), os.path.join(out_dir, "err"))
    try:
        tracer.pid_add(p.pid)
        p.release()
        p.wait(timeout=timeout)
    finally:
        p.kill()
    return p


def read_folded(path):
    out = []
    with open(path) as f:
        for line in f:
            parsed = attribution.parse_folded_line(line)
            assert parsed is not None, f"malformed folded line: {line!r}"
            out.append(parsed)
    return out


@pytest.fixture(scope="module")
def busy_snapshot(tracer, busy_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("busy-run")
    p = run_followed(tracer, [busy_bin, str(BUSY_SECONDS)], str(d))
    assert p.returncode == 0
    time.sleep(0.3)  # the process is gone: symbolization must not need it
    snap = tracer.snapshot(str(d / "snap.json"), str(d / "snap.folded"))
    return snap, str(d / "snap.folded"), str(d)


def check_total(samples, in_stacks):
    """The snapshot's sample count against the samples its folded stacks hold: the count is
    read just after the stacks, and a ksoftirqd sample may fall in between."""
    assert 0 <= samples["total"] - in_stacks <= 5, (in_stacks, samples)


def check_attributed(a, samples, folded):
    """The attribution read every sample of the folded file, idle ones set apart."""
    in_stacks = sum(n for _, n in read_folded(folded))
    assert a["samples"] + a["idle_samples"] == in_stacks, (a["samples"], a["idle_samples"])
    check_total(samples, in_stacks)


def test_samples_counted(busy_snapshot):
    snap, folded, _ = busy_snapshot
    s = snap["samples"]
    assert s["source"] == TIMER
    assert s["freq"] == FREQ
    # FREQ samples per second of CPU time the process got (the machine may be shared)
    cpu_s = snap["perf"]["task-clock"] / 1e9
    assert cpu_s > 0.1
    # (timer samples are delayed while interrupts are off, and a loaded VM jitters)
    assert 0.5 * FREQ * cpu_s <= s["total"] <= 1.5 * FREQ * cpu_s + 20, (s, cpu_s)
    lines = read_folded(folded)
    assert lines
    check_total(s, sum(n for _, n in lines))
    assert s.get("lost", 0) <= 0.01 * s["total"]


def test_folded_frames_named(busy_snapshot):
    _, folded, _ = busy_snapshot
    lines = read_folded(folded)
    # every stack starts with the thread's name: the busy program's, the launch gate's
    # (python, before exec) or ksoftirqd's (softirq work while anything is followed)
    assert all(frames[0] for frames, _ in lines)
    by_frames = {";".join(frames): n for frames, n in lines if frames[0] == "netio-busy"}
    total = sum(by_frames.values())
    assert total >= 0.9 * sum(n for _, n in lines), lines
    spin = sum(n for k, n in by_frames.items() if re.search(r"(^|;)main;busy_spin$", k))
    copy = sum(n for k, n in by_frames.items()
               if re.search(r"(^|;)main;copy_loop;(__)?mem(move|cpy)[a-z0-9_]*$", k))
    assert spin > 0.1 * total, sorted(by_frames.items(), key=lambda kv: -kv[1])[:5]
    # the memcpy leaf with its caller put back in, libc's variant named (symbols via
    # libc6-dbg where installed, else .dynsym: at least a memcpy/memmove name)
    assert copy > 0.1 * total, sorted(by_frames.items(), key=lambda kv: -kv[1])[:5]
    # nothing nameless in the busy loop's own frames
    unknown = sum(n for k, n in by_frames.items() if k.endswith("[unknown]"))
    assert unknown < 0.05 * total


def test_kernel_frames_suffixed(busy_snapshot):
    _, folded, _ = busy_snapshot
    for frames, _ in read_folded(folded):
        seen_kernel = False
        for f in frames[1:]:
            if f.endswith("_[k]"):
                seen_kernel = True
            else:
                # user frames come before (outside) kernel frames
                assert not seen_kernel, frames


def test_flame_graph_svg(busy_snapshot):
    try:
        flamegraph.find_tool("inferno-flamegraph")
    except flamegraph.FlamegraphError as e:
        pytest.skip(str(e))
    _, folded, d = busy_snapshot
    svg = flamegraph.render(folded, os.path.join(d, "busy.svg"), "netio-busy")
    ET.parse(svg)
    text = open(svg).read()
    for frame in ("busy_spin", "copy_loop", "main"):
        assert frame in text


def test_perf_counters(busy_snapshot):
    snap, _, _ = busy_snapshot
    perf = snap["perf"]
    events = ("cycles", "instructions", "cache-misses", "L1-dcache-load-misses",
              "LLC-load-misses", "LLC-store-misses", "context-switches", "cpu-migrations",
              "page-faults", "task-clock")
    unsupported = perf["unsupported"]
    failed = perf.get("failed", [])
    for e in events:
        assert e in perf
        if e in unsupported or e in failed:
            assert perf[e] is None, e
        else:
            assert isinstance(perf[e], int) and perf[e] >= 0, (e, perf[e])
    assert isinstance(perf["scaled"], bool)
    if not has_pmu():
        assert perf["cycles"] is None and "cycles" in unsupported
        for e in ("instructions", "L1-dcache-load-misses", "LLC-load-misses"):
            assert perf[e] is None and e in unsupported
    # software counters count everywhere
    # one thread spinning for BUSY_SECONDS of wall time: at most that much CPU (plus the
    # gate's exec), and not nothing even on a shared machine
    assert 0.1e9 <= perf["task-clock"] <= 1.2 * BUSY_SECONDS * 1e9
    assert perf["context-switches"] is not None
    assert perf["page-faults"] > 0           # 2 MiB of fresh malloc'ed memory was touched
    assert perf["tsc_hz"] is None or perf["tsc_hz"] > 1e8


def test_a_stack_whose_bucket_is_taken_is_kept(busy_bin, tmp_path):
    """A stack whose bucket in the stack map holds another goes to the overflow map: with a
    first map of one bucket every stack but one collides there, and still every sample keeps
    its stacks, named (one map alone keeps one stack; the busy program has two hot ones)."""
    t = ControlTracer(freq=FREQ, log_path=str(tmp_path / "tracer.log"), binary=TRACER,
                      sample_source=TIMER, env={"NETIO_PROFILE_STACKS": "1"})
    t.start()
    try:
        p = run_followed(t, [busy_bin, "1"], str(tmp_path))
        t.snapshot(str(tmp_path / "s.json"), str(tmp_path / "s.folded"))
    finally:
        t.close()
    assert p.returncode == 0
    busy = [(frames, n) for frames, n in read_folded(str(tmp_path / "s.folded"))
            if frames[0] == "netio-busy"]
    total = sum(n for _, n in busy)
    lost = sum(n for frames, n in busy if any("stack lost" in f for f in frames))
    spin = sum(n for frames, n in busy if "busy_spin" in frames)
    copy = sum(n for frames, n in busy if "copy_loop" in frames)
    assert total >= 200 and min(spin, copy) >= 0.1 * total, (spin, copy, total)
    assert lost <= 0.02 * total, (lost, total, busy)
    assert spin + copy >= 0.9 * total, (spin, copy, total)


def test_reset_forgets_samples(tracer, busy_bin, tmp_path):
    tracer.clear()
    tracer.reset()
    snap = tracer.snapshot(str(tmp_path / "s.json"), str(tmp_path / "s.folded"))
    assert snap["samples"]["total"] == 0
    assert read_folded(str(tmp_path / "s.folded")) == []


# ---- one event per CPU on the workloads' cgroup (--sample-cgroup) ---------------------------

needs_cgroup2 = pytest.mark.skipif(cgroup.cgroup2_root() is None, reason="no cgroup2 mount")


@needs_cgroup2
def test_cgroup_scope_samples_inside_and_falls_back_outside(busy_bin, tmp_path):
    """Processes in the cgroup are sampled by its per-CPU events (no per-task event of their
    own), a followed process outside it by per-task events, at the same rate; the cgroup is
    gone after remove()."""
    cg = cgroup.WorkloadCgroup.create()
    assert cg is not None and os.path.isdir(cg.path)
    t = ControlTracer(freq=FREQ, log_path=str(tmp_path / "tracer.log"), binary=TRACER,
                      sample_source=TIMER, extra_args=["--sample-cgroup", cg.path])
    try:
        t.start()
        assert t.samples["scope"] == "cgroup"
        assert t.samples["source"] == TIMER
        for inside in (True, False):
            t.clear()
            t.reset()
            d = tmp_path / ("inside" if inside else "outside")
            d.mkdir()
            p = GatedProcess([busy_bin, str(BUSY_SECONDS)], str(d / "out"), str(d / "err"),
                             cgroup=cg if inside else None)
            try:
                with open(f"/proc/{p.pid}/cgroup") as f:
                    where = [line.strip()[3:] for line in f if line.startswith("0::")]
                assert (where == [cg.path[len(cg.root):]]) == inside, where
                t.pid_add(p.pid)
                p.release()
                assert p.wait(timeout=60) == 0
            finally:
                p.kill()
            snap = t.snapshot(str(d / "s.json"), str(d / "s.folded"))
            s = snap["samples"]
            assert s["scope"] == "cgroup"
            cpu_s = snap["perf"]["task-clock"] / 1e9
            assert cpu_s > 0.1
            assert 0.5 * FREQ * cpu_s <= s["total"] <= 1.5 * FREQ * cpu_s + 20, (inside, s, cpu_s)
            busy = sum(n for frames, n in read_folded(str(d / "s.folded"))
                       if frames[0] == "netio-busy")
            assert busy >= 0.9 * s["total"], (inside, busy, s)
    finally:
        t.close()
        assert cg.remove()
    assert not os.path.exists(cg.path)


def test_sample_cgroup_not_a_cgroup_exits_2(tmp_path):
    r = subprocess.run([TRACER, "--sample-cgroup", str(tmp_path), "--duration", "0.1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "--sample-cgroup" in err[0], r.stderr


def test_unfollowed_process_not_sampled(tracer, busy_bin, tmp_path):
    tracer.clear()
    tracer.reset()
    p = subprocess.Popen([busy_bin, "0.5"])
    try:
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    snap = tracer.snapshot(str(tmp_path / "s.json"), str(tmp_path / "s.folded"))
    lines = read_folded(str(tmp_path / "s.folded"))
    assert not any(frames[0] == "netio-busy" for frames, _ in lines)
    # nothing followed: not even ksoftirqd counts
    assert snap["samples"]["total"] == 0, lines


needs_workloads = pytest.mark.skipif(
    not (os.access(SERVER, os.X_OK) and os.access(CLIENT, os.X_OK)), reason="workloads not built")


def run_loopback_pair(tracer, strategy, d, seconds=2):
    """Server (strategy, 64 KiB, one thread) and client over loopback, both followed from
    their first instruction; returns the server's JSON."""
    tracer.clear()
    tracer.reset()
    server = GatedProcess([SERVER, "--strategy", strategy, "--size", "64K", "--threads", "1",
                           "--port", "0", "--addr", "127.0.0.1", "--duration", str(seconds),
                           *READY_ARGS],
                          os.path.join(d, "server.json"), os.path.join(d, "server.err"),
                          ready=True)
    client = None
    try:
        tracer.pid_add(server.pid)
        server.release()
        port, _ = wait_listening(server.ready, 10)
        assert port, "server ended before listening"
        client = GatedProcess([CLIENT, "--addr", "127.0.0.1", "--port", str(port), "--threads",
                               "1", "--size", "64K"],
                              os.path.join(d, "client.json"), os.path.join(d, "client.err"))
        tracer.pid_add(client.pid)
        client.release()
        assert server.wait(timeout=60) == 0
        assert client.wait(timeout=30) == 0
    finally:
        server.kill()
        if client:
            client.kill()
    with open(os.path.join(d, "server.json")) as f:
        return json.load(f)


@needs_workloads
def test_network_two_copy_attribution(tracer, tmp_path):
    """two-copy over loopback: the serializer's memcpy, the kernel's tx and rx copies."""
    d = str(tmp_path)
    sj = run_loopback_pair(tracer, "two-copy", d)
    snap = tracer.snapshot(os.path.join(d, "s.json"), os.path.join(d, "s.folded"))
    with open(os.path.join(d, "s.folded")) as f:
        lines = f.read().splitlines()
    text = "\n".join(lines)
    for frame in ("wl_message_serialize", "_copy_from_iter_[k]", "tcp_sendmsg_[k]",
                  "tcp_recvmsg_[k]"):
        assert frame in text, frame
    perf = snap["perf"]
    a = attribution.attribute(lines, snap["samples"]["source"], perf.get("task-clock"),
                              perf.get("tsc_hz"), perf.get("cycles"), sj["bytes"])
    check_attributed(a, snap["samples"], os.path.join(d, "s.folded"))
    assert abs(sum(a["share"].values()) - 1) < 1e-3
    assert a["share"]["user_copy"] > 0.01
    assert a["share"]["kernel_tx_copy"] > 0.01
    assert a["share"]["kernel_rx_copy"] > 0.01
    assert a["share"]["pinning"] == 0 and a["share"]["fallback_copy"] == 0
    if not has_pmu():
        assert a["estimated"] is True
        assert perf["cycles"] is None
    assert all(v is not None and v >= 0 for v in a["cycles_per_byte"].values())
    try:
        svg = flamegraph.render(os.path.join(d, "s.folded"), os.path.join(d, "s.svg"), "two-copy")
    except flamegraph.FlamegraphError as e:
        pytest.skip(str(e))
    ET.parse(svg)
    svg_text = open(svg).read()
    for frame in ("_copy_from_iter", "wl_message_serialize"):
        assert frame in svg_text


# ---- samples on the scheduler tick (--sample-source tick) ------------------------------------


@pytest.fixture(scope="module")
def tick_run(tmp_path_factory):
    """one-copy 64 KiB over loopback sampled on the tick, with a tracer of its own (closed
    before the tests read what it wrote)."""
    d = tmp_path_factory.mktemp("tick")
    t = ControlTracer(freq=FREQ, sample_source="tick", log_path=str(d / "tracer.log"),
                      binary=TRACER)
    t.start()
    try:
        ready = t.samples
        sj = run_loopback_pair(t, "one-copy", str(d))
        snap = t.snapshot(str(d / "s.json"), str(d / "s.folded"))
    finally:
        t.close()
    return ready, snap, sj, str(d / "s.folded")


@needs_workloads
def test_tick_source_and_rate(tick_run):
    ready, snap, _, folded = tick_run
    hz = kernel_hz()
    assert hz, "CONFIG_HZ not found in /proc/config.gz or /boot/config-*"
    # FREQ (999) is above HZ: the effective rate is HZ, and that is what is reported
    assert ready == {"source": "tick", "scope": "cpu", "freq": hz}
    s = snap["samples"]
    assert s["source"] == "tick" and s["freq"] == hz
    assert snap["attach"]["stacks"] == "tp_btf"
    assert s["total"] > 0
    assert s["lost"] <= 0.01 * s["total"]
    # one sample per tick of busy CPU: about HZ per second of the pair's CPU time (ticks
    # delayed by irqs-off sections and a jittery VM widen the band)
    cpu_s = snap["perf"]["task-clock"] / 1e9
    assert cpu_s > 0.2
    assert 0.5 * hz * cpu_s <= s["total"] <= 1.5 * hz * cpu_s + 20, (s, cpu_s)
    check_total(s, sum(n for _, n in read_folded(folded)))


@needs_workloads
def test_tick_folded_without_interrupt_frames(tick_run):
    _, _, _, folded = tick_run
    lines = read_folded(folded)
    frames = {f for fr, _ in lines for f in fr}
    # the interrupted code is there: the send's copy, under the send path
    copy = sum(n for fr, n in lines if "_copy_from_iter_[k]" in fr and "tcp_sendmsg_locked_[k]" in fr)
    assert copy > 0.05 * sum(n for _, n in lines), lines[:5]
    # and the tick's own frames are not, nor the sampling program's. The tick runs with
    # interrupts off, so nothing else can leave hrtimer_interrupt or the vector's handler in
    # a stack. What may stay is the interrupted context's own: an earlier interrupt whose
    # exit runs softirqs (asm_sysvec_*; sysvec_*; __irq_exit_rcu; handle_softirqs: a perf
    # sample shows it too), and soft hrtimers run from that softirq (hrtimer_run_softirq;
    # __hrtimer_run_queues).
    for fr, _ in lines:
        for i, f in enumerate(fr):
            name = f[:-4] if f.endswith("_[k]") else None
            inner = fr[i + 1] if i + 1 < len(fr) else None
            outer = fr[i - 1]
            if name in ("hrtimer_interrupt", "__sysvec_apic_timer_interrupt"):
                raise AssertionError(f"tick frame {name} kept: {fr}")
            if name == "__hrtimer_run_queues":
                assert outer == "hrtimer_run_softirq_[k]", f"tick frame {name} kept: {fr}"
            if name == "asm_sysvec_apic_timer_interrupt":
                assert inner == "sysvec_apic_timer_interrupt_[k]", f"tick frame {name} kept: {fr}"
            if name == "sysvec_apic_timer_interrupt":
                assert inner in ("__irq_exit_rcu_[k]", "irq_exit_rcu_[k]"), \
                    f"tick frame {name} kept: {fr}"
    assert not any("tick_sample" in f or "hrtimer_expire_entry" in f for f in frames)
    # stacks are still ordered: the interrupted task's user frames outside its kernel ones
    for fr, _ in lines:
        kernel = [i for i, f in enumerate(fr) if f.endswith("_[k]")]
        assert not kernel or all(f.endswith("_[k]") for f in fr[kernel[0]:]), fr


@needs_workloads
def test_tick_attribution(tick_run):
    _, snap, sj, folded = tick_run
    with open(folded) as f:
        lines = f.read().splitlines()
    perf = snap["perf"]
    a = attribution.attribute(lines, snap["samples"]["source"], perf.get("task-clock"),
                              perf.get("tsc_hz"), perf.get("cycles"), sj["bytes"])
    assert a["source"] == "tick"
    check_attributed(a, snap["samples"], folded)
    assert a["share"]["kernel_tx_copy"] > 0.05
    assert a["share"]["kernel_rx_copy"] > 0.01
    assert any("tick" in n for n in a["notes"])
    if not has_pmu():
        assert a["estimated"] is True


def test_tick_below_hz_keeps_every_nth(busy_bin, tmp_path):
    """--freq under HZ: every round(HZ / freq)-th tick per CPU, at the rate reported."""
    hz = kernel_hz()
    assert hz
    want = max(1, hz // 5)
    every = max(1, round(hz / want))
    cp = subprocess.run([TRACER, "--sample-source", "tick", "--freq", str(want), "--no-counters",
                         "--json", str(tmp_path / "s.json"), "--folded", str(tmp_path / "s.folded"),
                         "--", busy_bin, "1.5"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    s = json.loads((tmp_path / "s.json").read_text())["samples"]
    assert s["source"] == "tick"
    assert s["freq"] == pytest.approx(hz / every)
    # one busy thread for 1.5 s (the machine may be shared: at least a third of that)
    assert 0.5 * s["freq"] * 0.5 <= s["total"] <= 1.5 * s["freq"] * 1.5 + 10, s
    lines = read_folded(str(tmp_path / "s.folded"))
    assert any(fr[0] == "netio-busy" and "busy_spin" in fr for fr, _ in lines), lines


def test_auto_source_is_cycles_else_tick(tmp_path):
    """The default: cycles where a PMU exists, the scheduler tick where none does (a
    cpu-clock timer costs a VM exit per sample); cpu-clock only when asked for."""
    out = tmp_path / "t.json"
    cp = subprocess.run([TRACER, "--no-counters", "--json", str(out), "--", "true"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    snap = json.loads(out.read_text())
    if has_pmu():
        assert snap["samples"]["source"] == "cycles" and snap["samples"]["freq"] == 999
        assert snap["attach"]["stacks"] == "perf_event"
    else:
        assert snap["samples"]["source"] == "tick" and snap["samples"]["scope"] == "cpu"
        assert 0 < snap["samples"]["freq"] <= 1000


def test_bad_sample_source_is_one_line():
    cp = subprocess.run([TRACER, "--sample-source", "ticks", "--duration", "1"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2
    assert cp.stdout == ""
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "--sample-source ticks" in lines[0], cp.stderr


@pytest.mark.skipif(has_pmu(), reason="this machine has a PMU: cycles can attach")
def test_forced_cycles_without_pmu_exits_2():
    """A source asked for by name that cannot sample here is an error, like a forced rung."""
    cp = subprocess.run([TRACER, "--sample-source", "cycles", "--duration", "1"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "cycles" in lines[0] and "PMU" in lines[0], cp.stderr
