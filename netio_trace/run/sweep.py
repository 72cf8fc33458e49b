"""The sweep: every configuration in interleaved rounds, untraced and traced, the tracer loaded
once (attached only for the traced runs), extra rounds for comparisons the noise left
undecided, each run written to runs.jsonl as it ends, a live progress display, the report at
the end.

Ctrl-C / SIGTERM: the current run's workloads and namespaces are removed, the tracer detached,
nothing half-written; the exit status is 130 / 143 and `--resume DIR` finishes the job.
"""
import json
import os
import signal
import time

from analysis import attribution, files, passes, record, results, summary
from netio_trace.run import extra
from netio_trace.run.instrument import Instrument
from netio_trace.run.progress import Progress
from netio_trace.run.runner import run_one
from netio_trace.system import cgroup, machine, netns, state
from netio_trace.system.signals import critical, Guard, import_whole, Interrupted
from report import build as report_build
from netio_trace.tracer import TracerError

SWEEP_FILE = "sweep.json"


def _attribute(snapshot, folded_path, server_json):
    """The docs/DESIGN.md attribution object of a traced run's snapshot and folded stacks."""
    try:
        with open(folded_path) as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    perf = snapshot.get("perf") or {}
    samples = snapshot.get("samples") or {}
    return attribution.attribute(
        lines, samples.get("source") or "tick",
        results.perf_value(perf, "task_clock_ns"),
        perf.get("tsc_hz") or snapshot.get("tsc_hz"),
        results.perf_value(perf, "cycles"),
        server_json.get("bytes"))


def write_sweep_file(out_dir, params, extra=None):
    d = params.to_dict()
    d.update(extra or {})
    with files.atomic_open(os.path.join(out_dir, SWEEP_FILE)) as f:
        json.dump(d, f, indent=2)
        f.write("\n")


def _pending(params, out_dir):
    done = {results.key_of(r) for r in results.read_runs(os.path.join(out_dir, results.RUNS))
            if results.ok(r)}
    return [slot for slot in params.schedule() if slot.key() not in done]


def cleanup_dead_runs(console=None):
    """What dead drivers of ours left: their recorded processes (state.py), then their
    namespaces (by name and a dead owner pid). Never anything else."""
    killed, _dead = state.reap_dead_runs()
    # before this driver creates any: a name with its own pid is a dead predecessor's
    stale = netns.remove_stale_namespaces(include_own=True)
    stale_cgroups = cgroup.remove_stale()
    if console is not None:
        if killed:
            console.print(f"ended {len(killed)} process(es) left by dead runs: "
                          f"{', '.join(map(str, killed))}")
        if stale:
            console.print(f"removed {len(stale)} namespace(s) left by dead runs: "
                          f"{', '.join(stale)}")
        if stale_cgroups:
            console.print(f"removed {len(stale_cgroups)} cgroup(s) left by dead runs: "
                          f"{', '.join(stale_cgroups)}")
    return killed, stale


def _remove_partial(out_dir):
    """The report writes every file as NAME.tmp, then renames it: an interruption can leave
    only such temporaries, never a half-written file under its real name."""
    for d, _, files in os.walk(out_dir):
        for f in files:
            if f.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(d, f))
                except OSError:
                    pass


def run_sweep(params, out_dir, console, resume=False, build_report=True):
    """Run (or finish) the sweep into out_dir. Returns the exit status."""
    cleanup_dead_runs(console)
    st = state.open_state()
    try:
        return _run_sweep(params, out_dir, console, resume, build_report)
    finally:
        if not st.data["children"]:      # else a later start ends what is left
            state.close_state()


class _Sweep:
    """What the runs of one sweep share: the tracer across passes, the results file, the
    machine; run() does one slot and records it."""

    def __init__(self, params, out_dir, console):
        self.params, self.out_dir, self.console = params, out_dir, console
        self.runs_path = os.path.join(out_dir, results.RUNS)
        self.instrument = Instrument(params, out_dir)
        self.index = len(results.read_runs(self.runs_path, dedup=False))
        mach = machine.info()
        self.machine = {k: mach[k] for k in ("hostname", "kernel", "arch", "cpu", "cores",
                                             "memory_gib", "virtualization", "default_cc")}

    def run(self, slot, prog):
        cfg, rep = slot.config, slot.repeat
        label = f"{cfg.label()} #{rep + 1} {'traced' if slot.traced else 'untraced'}"
        prog.start_run(label)
        try:
            tracer = self.instrument.for_run(slot.traced)
        except TracerError as e:
            run = record.failed_run(cfg, rep, self.params.duration, str(e), self.params.mss,
                                    self.params.rx_xdp)
        else:
            run = run_one(cfg, rep, self.params.duration, self.out_dir, self.index,
                          tracer=tracer, attribute=_attribute if tracer else None,
                          cgroup=self.instrument.cgroup, mss=self.params.mss,
                          rx_xdp=self.params.rx_xdp)
        self.index += 1
        run.update(round=rep, key=slot.key(), traced=slot.traced, machine=self.machine,
                   finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        with critical():
            results.append_run(self.runs_path, run)
        prog.end_run(label, run)


def _announce(params, out_dir, console, todo):
    total = len(params.schedule())
    console.print(f"sweep: {params.describe()}")
    console.print(f"{len(todo)} run(s) to do" + (f" of {total}" if len(todo) != total else "")
                  + f" → {out_dir}")


def _run_sweep(params, out_dir, console, resume, build_report):
    sweep = _Sweep(params, out_dir, console)
    had_log = os.path.exists(sweep.instrument.log_path)
    interrupted = None
    t0 = time.monotonic()
    with Guard():
        try:
            # the tracer first: a kernel it cannot load on stops the sweep before its first
            # run, with nothing of it written
            status = _open_instrument(sweep)
            if status:
                _discard_unstarted(sweep, had_log)
                return status
            if not resume:
                write_sweep_file(out_dir, params, {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                    "machine": machine.info()})
            todo = _pending(params, out_dir)
            _announce(params, out_dir, console, todo)
            _describe_instrument(sweep)
            with Progress(len(todo), console, report_estimate=2.5 + 0.015 * len(todo),
                          run_estimate=params.duration + 0.2) as prog:
                for slot in todo:
                    sweep.run(slot, prog)
                extra.run_extra_rounds(sweep, prog, t0)
        except Interrupted as e:
            interrupted = e.signum
        except KeyboardInterrupt:
            interrupted = signal.SIGINT
        finally:
            sweep.instrument.close()
    if interrupted is not None and not os.path.exists(os.path.join(out_dir, SWEEP_FILE)):
        _discard_unstarted(sweep, had_log)
        console.print(f"[yellow]interrupted ({signal.Signals(interrupted).name}) before the "
                      f"first run: nothing written[/]")
        return 128 + int(interrupted)
    if interrupted is not None:
        n = len(results.read_runs(sweep.runs_path))
        console.print(f"[yellow]interrupted ({signal.Signals(interrupted).name}): {n} finished "
                      f"run(s) kept in {sweep.runs_path}; finish with: netio-trace run --resume "
                      f"{out_dir}[/]")
        return 128 + int(interrupted)
    return _finish(out_dir, console, build_report)


def _open_instrument(sweep):
    """Load the tracer (detached), once; 2, with one line, when it cannot load: with a rung or
    sample source the user forced, that flag; else the tracer's reason and `--no-trace`."""
    params = sweep.params
    try:
        sweep.instrument.open()
    except TracerError as e:
        if params.attach != "auto" or params.sample_source != "auto":
            flag = (f"--attach {params.attach}" if params.attach != "auto"
                    else f"--sample-source {params.sample_source}")
            line = f"netio-trace run: {flag}: {e}"
        else:
            line = (f"netio-trace run: the tracer cannot load on this kernel "
                    f"({os.uname().release}): {e}; `--no-trace` runs untraced")
        # one line, whatever the width, and the tracer's words are no markup
        sweep.console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
        return 2
    return 0


def _describe_instrument(sweep):
    line = sweep.instrument.describe()
    if line:
        sweep.console.print(line)


def _discard_unstarted(sweep, had_log):
    """A sweep stopped before its first run leaves nothing: the tracer's log goes, its reason
    said, unless it was there before (a resumed sweep's, which keeps what came before)."""
    if had_log:
        return
    try:
        os.unlink(sweep.instrument.log_path)
    except FileNotFoundError:
        pass


def _build_report(out_dir, console, runs_path):
    """The report; its status (0, 1 if it failed, 128+signal if interrupted)."""
    t = time.monotonic()
    console.print("building the report …")
    try:
        with Guard():
            import_whole("report.plots")
            report_build.build(out_dir, console=console)
        console.print(f"report built in {time.monotonic() - t:.1f} s")
        return 0
    except Interrupted as e:
        _remove_partial(out_dir)
        console.print(f"[yellow]interrupted while building the report: every run is in "
                      f"{runs_path}; rebuild it with: netio-trace report {out_dir}[/]")
        return 128 + int(e.signum)
    except Exception as e:      # the runs stand; say what failed and how to retry
        console.print(f"[red]the report failed: {type(e).__name__}: {e}; every run is in "
                      f"{runs_path}; retry with: netio-trace report {out_dir}[/]")
        return 1


def _finish(out_dir, console, build_report):
    runs_path = os.path.join(out_dir, results.RUNS)
    all_runs = results.read_runs(runs_path)
    bad = [r for r in all_runs if not results.ok(r)]
    status = 1 if bad else 0
    if build_report:
        rs = _build_report(out_dir, console, runs_path)
        if rs > 1:
            return rs
        status = status or rs
    summary.print_summary(passes.copy_receive(all_runs), console)
    if bad:
        console.print(f"[red]{len(bad)} run(s) failed or were inconsistent[/]: "
                      + "; ".join(f"{r.get('key') or results.key_of(r)}: {r.get('error')}"
                                  for r in bad[:5]) + (" …" if len(bad) > 5 else ""))
    console.print(f"results: {out_dir}/report.html, report.md, results.csv, runs.jsonl")
    return status
