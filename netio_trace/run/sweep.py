"""The sweep: every configuration in interleaved rounds, the tracer loaded once, each run
written to runs.jsonl as it ends, a live progress display, the report at the end.

Ctrl-C / SIGTERM: the current run's workloads and namespaces are removed, the tracer detached,
nothing half-written; the exit status is 130 / 143 and `--resume DIR` finishes the job.
"""
import json
import os
import signal
import time

from analysis import files, results
from analysis.contract import run_key
from netio_trace.run.progress import Progress
from netio_trace.run.runner import run_one
from netio_trace.system import cgroup, machine, netns, state
from netio_trace.system.signals import critical, Guard, Interrupted
from netio_trace.tracer import ControlTracer, TracerError

SWEEP_FILE = "sweep.json"


def _attributor():
    """attribute(snapshot, folded_path, server_json) -> DESIGN.md attribution object."""
    try:
        from analysis import attribution
    except ImportError:
        return None

    def attribute(snapshot, folded_path, server_json):
        try:
            with open(folded_path) as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        perf = snapshot.get("perf") or {}
        samples = snapshot.get("samples") or {}
        return attribution.attribute(
            lines, samples.get("source") or "cpu-clock",
            results.perf_value(perf, "task_clock_ns"),
            perf.get("tsc_hz") or snapshot.get("tsc_hz"),
            results.perf_value(perf, "cycles"),
            server_json.get("bytes"))
    return attribute


def write_sweep_file(out_dir, params, extra=None):
    d = params.to_dict()
    d.update(extra or {})
    with files.atomic_open(os.path.join(out_dir, SWEEP_FILE)) as f:
        json.dump(d, f, indent=2)
        f.write("\n")


def _pending(params, out_dir):
    done = {results.key_of(r) for r in results.read_runs(os.path.join(out_dir, results.RUNS))
            if results.ok(r)}
    return [(rep, cfg) for rep, cfg in params.schedule()
            if run_key(cfg.strategy, cfg.msg_size, cfg.threads, cfg.transport, rep) not in done]


def _start_tracer(params, out_dir, cg=None):
    """The sweep's tracer; with cg, sampling the workloads' cgroup, else (or if the kernel
    refuses cgroup events) per-task events."""
    for sample_cgroup in ([cg.path, None] if cg is not None else [None]):
        t = ControlTracer(attach=params.attach, freq=params.freq,
                          sample_source=(params.sample_source if params.sample_source != "auto"
                                         else None),
                          log_path=os.path.join(out_dir, "tracer.log"),
                          extra_args=(["--sample-cgroup", sample_cgroup] if sample_cgroup
                                      else []))
        try:
            t.start()
            return t
        except TracerError:
            with critical():
                t.close()
            if sample_cgroup is None:
                raise
        except BaseException:      # interrupted while loading: stop it by its pid
            with critical():
                t.close()
            raise


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


def _run_sweep(params, out_dir, console, resume, build_report):
    runs_path = os.path.join(out_dir, results.RUNS)
    if not resume:
        write_sweep_file(out_dir, params, {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                            "machine": machine.info()})
    todo = _pending(params, out_dir)
    total_sched = len(params.schedule())
    console.print(f"sweep: {params.describe()}")
    console.print(f"{len(todo)} run(s) to do" + (f" of {total_sched}" if len(todo) != total_sched
                                                  else "") + f" → {out_dir}")
    mach = machine.info()
    mach_short = {k: mach[k] for k in ("hostname", "kernel", "arch", "cpu", "cores",
                                       "memory_gib", "virtualization", "default_cc")}
    attribute = _attributor() if params.trace else None
    if params.trace and attribute is None:
        console.print("[yellow]analysis.attribution is not available: runs are recorded "
                      "without attribution[/]")
    tracer = None
    tracer_error = None
    status = 0
    interrupted = None
    cg = None
    start_index = len(results.read_runs(runs_path, dedup=False))
    with Guard():
        try:
            # stack samples on perf events come from one event per CPU on the workloads'
            # cgroup (removed in the finally below)
            if params.trace and todo and params.sample_source != "tick":
                cg = cgroup.WorkloadCgroup.create()
            if params.trace and todo:
                try:
                    tracer = _start_tracer(params, out_dir, cg)
                    smp = tracer.samples or {}
                    console.print("tracer ready: attach " + ", ".join(
                        f"{k}={v}" for k, v in (tracer.attach or {}).items())
                        + (f"; samples on {smp.get('source')} at "
                           + (f"{smp['freq']:g} Hz" if smp.get("freq") else "an unknown rate")
                           + (", one event per CPU on the workloads' cgroup"
                              if smp.get("scope") == "cgroup" else "")
                           if smp else "; no stack samples"))
                except TracerError as e:
                    tracer_error = str(e)
                    tracer = None
                    if params.attach != "auto":
                        console.print(f"netio-trace run: --attach {params.attach}: {e}",
                                      style="red")
                        return 2
                    if params.sample_source != "auto":
                        console.print(f"netio-trace run: --sample-source "
                                      f"{params.sample_source}: {e}", style="red")
                        return 2
                    console.print(f"[red]tracer: {e}[/]")
            n_all = total_sched
            with Progress(len(todo), console, report_estimate=2.5 + 0.015 * n_all,
                          run_estimate=params.duration + 0.2) as prog:
                for i, (rep, cfg) in enumerate(todo):
                    label = f"{cfg.label()} #{rep + 1}"
                    prog.start_run(label)
                    if params.trace and (tracer is None or not tracer.alive()):
                        if tracer is not None:
                            tracer.close()
                            tracer = None
                            try:
                                tracer = _start_tracer(params, out_dir, cg)
                                tracer_error = None
                            except TracerError as e:
                                tracer_error = str(e)
                    if params.trace and tracer is None:
                        run = {"strategy": cfg.strategy, "msg_size": cfg.msg_size,
                               "threads": cfg.threads, "transport": cfg.transport,
                               "repeat": rep, "duration_requested_s": params.duration,
                               "status": "failed",
                               "error": f"tracer could not attach: {tracer_error}",
                               "wall_s": 0.0}
                    else:
                        run = run_one(cfg, rep, params.duration, out_dir, start_index + i,
                                      tracer=tracer, attribute=attribute, cgroup=cg)
                    run["round"] = rep
                    run["key"] = run_key(cfg.strategy, cfg.msg_size, cfg.threads,
                                         cfg.transport, rep)
                    run["traced"] = params.trace
                    run["machine"] = mach_short
                    run["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                    with critical():
                        results.append_run(runs_path, run)
                    prog.end_run(label, run)
        except Interrupted as e:
            interrupted = e.signum
        except KeyboardInterrupt:
            interrupted = signal.SIGINT
        finally:
            if tracer is not None:
                tracer.close()
            if cg is not None:
                cg.remove()
    if interrupted is not None:
        n = len(results.read_runs(runs_path))
        console.print(f"[yellow]interrupted ({signal.Signals(interrupted).name}): {n} finished "
                      f"run(s) kept in {runs_path}; finish with: netio-trace run --resume "
                      f"{out_dir}[/]")
        return 128 + int(interrupted)

    all_runs = results.read_runs(runs_path)
    bad = [r for r in all_runs if not results.ok(r)]
    if bad:
        status = 1
    if build_report:
        from report import build as report
        t = time.monotonic()
        console.print("building the report …")
        try:
            with Guard():
                report.build(out_dir, console=console)
            console.print(f"report built in {time.monotonic() - t:.1f} s")
        except Interrupted as e:
            _remove_partial(out_dir)
            console.print(f"[yellow]interrupted while building the report: every run is in "
                          f"{runs_path}; rebuild it with: netio-trace report {out_dir}[/]")
            return 128 + int(e.signum)
        except Exception as e:      # the runs stand; say what failed and how to retry
            console.print(f"[red]the report failed: {type(e).__name__}: {e}; every run is in "
                          f"{runs_path}; retry with: netio-trace report {out_dir}[/]")
            status = 1
    from analysis import summary
    summary.print_summary(all_runs, console)
    if bad:
        console.print(f"[red]{len(bad)} run(s) failed or were inconsistent[/]: "
                      + "; ".join(f"{r.get('key') or results.key_of(r)}: {r.get('error')}"
                                  for r in bad[:5]) + (" …" if len(bad) > 5 else ""))
    console.print(f"results: {out_dir}/report.html, report.md, results.csv, runs.jsonl")
    return status
