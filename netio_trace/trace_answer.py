"""What `netio-trace trace` answers at its end: the trace object on stdout only when
asked (`--json -`), the verdicts in a few lines, and with `--report DIR` the report, with the
baseline its verdicts stand on (`--baseline DIR`, or the short form of `run --preset
zerocopy` run first into DIR/baseline)."""
import json
import os
import shutil
import signal
import sys

from rich.console import Console

from analysis import baseline as baselinemod
from analysis import verdict
from netio_trace.preflight import preflight, workload_refuses
from netio_trace.run import params as P
from netio_trace.run.params import UsageError
from netio_trace.run.sweep import run_sweep
from netio_trace.system import machine
from netio_trace.system.signals import Guard, Interrupted

BASELINE_SUBDIR = "baseline"


def check_report_dir(path):
    """--report DIR: a directory (made if missing), never a file nor a sweep's results."""
    ap = os.path.abspath(path)
    if os.path.exists(ap) and not os.path.isdir(ap):
        raise UsageError(f"--report {path} is a file, not a directory")
    if os.path.exists(os.path.join(ap, "runs.jsonl")):
        raise UsageError(f"--report {path} holds a sweep's results: choose another directory")
    parent = os.path.dirname(ap)
    if not os.path.isdir(parent):
        raise UsageError(f"--report {path}: directory {parent} does not exist")
    return ap


def here():
    m = machine.info()
    return {k: m.get(k) for k in ("hostname", "kernel", "arch", "cpu", "cores")}


def resolve_baseline(path):
    """(baseline, notes) from --baseline DIR: exit 2 (UsageError) when it cannot be read; one
    line on stderr and None when it was measured on another machine."""
    try:
        base = baselinemod.load(path)
    except baselinemod.BaselineError as e:
        raise UsageError(str(e)) from None
    m = here()
    why = baselinemod.foreign(base, m)
    if why:
        line = (f"netio-trace trace: --baseline {path} was measured on another machine ({why}): "
                f"going on without it")
        print(line, file=sys.stderr)
        return None, [line.split(": ", 1)[1] + "."]
    note = baselinemod.kernel_note(base, m)
    return base, [note] if note else []


def short_form():
    """SweepParams of the short form of `run --preset zerocopy`: forward only, untraced only,
    without the io_uring pair where this machine cannot run it. (params, what was left out)."""
    preset = P.PRESETS["zerocopy"]
    strategies, left = list(preset["strategies"]), []
    for s in ("io-uring", "io-uring-zc"):
        why = workload_refuses(s)
        if why:
            left.append(f"{s}: {why}")
    if left:
        strategies = [s for s in strategies if s not in ("io-uring", "io-uring-zc")]
    params = P.SweepParams(strategies=tuple(strategies), sizes=tuple(preset["sizes"]),
                           threads=tuple(preset["threads"]), transports=("forward",),
                           duration=preset["duration"], repeat=preset["repeat"],
                           passes=("untraced",))
    return params, left


def run_short_form(report_dir):
    """Run the short form into DIR/baseline and load it: (baseline, notes). A signal stops
    the baseline, not the trace: the baseline is then None, and a note says why."""
    try:
        with Guard():
            status, out, left = _short_form_sweep(report_dir)
    except Interrupted as e:
        status = 128 + int(e.signum)
    if status > 128:
        name = signal.Signals(status - 128).name
        return None, [f"the baseline's short form was interrupted ({name}): no baseline"]
    notes = [f"io_uring left out of the baseline: {w}" for w in left]
    if status != 0:
        notes.append(f"the baseline sweep exited {status}: some runs failed")
    try:
        return baselinemod.load(out), notes
    except baselinemod.BaselineError as e:
        return None, notes + [f"the baseline sweep gave no crossover: {e}"]


def _short_form_sweep(report_dir):
    """The short form's sweep into DIR/baseline: (exit status, that directory, what was left
    out)."""
    params, left = short_form()
    preflight(params)
    out = os.path.join(report_dir, BASELINE_SUBDIR)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    print(f"netio-trace trace: no --baseline: running the short form of `run --preset zerocopy` "
          f"first ({params.describe()}; {len(params.schedule())} runs) into {out}",
          file=sys.stderr)
    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=200)
    # its own report too: DIR/baseline/report.html
    return run_sweep(params, out, console), out, left


def emit_json(json_path):
    """--json -: the trace object on stdout."""
    with open(json_path) as f:
        sys.stdout.write(f.read())
    sys.stdout.flush()


def print_verdicts(trace, folded_path, baseline):
    """The verdicts' few lines at the end of trace, on stderr: the traced program's stdout
    stays its own, as under perf stat, strace or time."""
    from report import trace_report     # deferred on purpose: it loads matplotlib (heavy)
    lines = []
    if folded_path and os.path.exists(folded_path):
        with open(folded_path, errors="replace") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    vs = verdict.verdicts(trace, trace_report.attributions(trace, lines), baseline)
    note = f"crossovers from {baseline['dir']}" if baseline else "no baseline"
    print("\n" + "\n".join(verdict.lines(vs, note)), file=sys.stderr)
    sys.stderr.flush()


def write_report(report_dir, json_path, folded_path, command, baseline, how, notes):
    """Copy the trace and its stacks into DIR (where they were written elsewhere) and build
    the report. Returns report_dir/report.html."""
    from report import trace_report     # deferred on purpose: it loads matplotlib (heavy)
    for src, name in ((json_path, trace_report.TRACE), (folded_path, trace_report.FOLDED)):
        dst = os.path.join(report_dir, name)
        if src and os.path.exists(src) and os.path.abspath(src) != dst:
            shutil.copyfile(src, dst)
        elif not src or not os.path.exists(src):
            open(dst, "w").close()       # no samples: an empty stack file
    trace_report.write_meta(report_dir, command, baseline["dir"] if baseline else None,
                            how if baseline else None, notes, here())
    trace_report.build(report_dir)
    return os.path.join(report_dir, "report.html")


def finish(a, json_path, folded_path, command, baseline, how, notes, pending=None):
    """After the tracer: --json -, the verdicts, --report, each marked done in pending as it
    is written. Nothing when no trace was written."""
    if not json_path or not os.path.exists(json_path):
        return
    if a.json == "-":
        emit_json(json_path)
    with open(json_path) as f:
        trace = json.load(f)
    print_verdicts(trace, folded_path, baseline)
    if pending is not None:
        pending.done("verdicts")
    if a.report:
        html = write_report(a.report, json_path, folded_path, command, baseline, how, notes)
        if pending is not None:
            pending.done("--report")
        print(f"netio-trace trace: report written: {html}, report.md", file=sys.stderr)
