"""netio-trace: where do the bytes get copied, and what does each copy cost?

Subcommands: run (the sweep), trace (the tracer on any process), agent (long-running,
OpenMetrics), report DIR, diff, doctor.
Every bad value gets one line on stderr and exit status 2, before anything starts.
"""
import argparse
import errno
import json
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time

from analysis import diff
from analysis.contract import RECEIVE_HELP, STRATEGIES, STRATEGY_HELP, TRANSPORTS, TRANSPORT_HELP
from analysis.results import read_runs
from netio_trace.preflight import check_privileges, preflight
from netio_trace.run import params as P
from netio_trace.run.params import UsageError
from netio_trace.system import ownership, paths, state
from netio_trace.system.cgroup import WorkloadCgroup, cgroup2_root
from netio_trace.system.privileges import privilege_error
from netio_trace.system.signals import Guard, Interrupted, import_whole
from netio_trace.tracer import samples_on_perf_events, trace_argv
from report import diff as diff_report

# The commands' modules need the venv's packages (rich, matplotlib's report); a python
# without them (the system's, run by a user who cannot read the venv) must still answer
# with the one line of a bad start (needs root, or: run make deps), never a traceback.
try:
    from rich.console import Console
    from analysis.summary import print_summary
    from netio_trace import doctor, trace_answer, trace_session
    from netio_trace.agent import command as agent_command
    from netio_trace.run.sweep import run_sweep
    from report import build as report_build
    MISSING_PACKAGES = None
except ImportError as e:
    MISSING_PACKAGES = e

PROG = "netio-trace"
EPILOG = """examples:
  sudo ./netio-trace run                      the default sweep (≤ 5 min), report in results/<time>/
  sudo ./netio-trace run --quick --out /tmp/q a small sweep (≤ 60 s)
  sudo ./netio-trace run --preset zerocopy    where zero-copy can win: forward beside veth
  sudo ./netio-trace run --sizes 4K,64K --threads 1,4 --transport veth,loopback --repeat 3
  sudo ./netio-trace run --resume results/20250101-120000   finish an interrupted sweep
  ./netio-trace report results/20250101-120000  rebuild the report from runs.jsonl
  sudo ./netio-trace trace -- iperf3 -c 127.0.0.1 -t 2
  sudo ./netio-trace agent --listen 127.0.0.1:9464   every process's bytes as OpenMetrics
  sudo ./netio-trace doctor --json
"""


def _described(names, helps):
    return "".join(textwrap.fill(helps[n], width=96, initial_indent=f"  {n:<12} ",
                                 subsequent_indent=" " * 15) + "\n" for n in names)


def _latency_sample(text):
    """--latency-sample N: a whole number from 1 to 65536 (argparse makes a bad one exit 2)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 65536:
        raise argparse.ArgumentTypeError(f"{text}: a whole number from 1 to 65536")
    return n


STRATEGY_EPILOG = ("\nstrategies (per message; every one but sendfile sends 8 heap fields of "
                   "size/8 bytes):\n" + _described(STRATEGIES, STRATEGY_HELP)
                   + "\ntransports:\n" + _described(TRANSPORTS, TRANSPORT_HELP))


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (exit 2)."""

    def error(self, message):
        raise UsageError(message)


def _tracer_flags(parser, default):
    """--attach, --freq, --sample-source and --latency-sample, alike for run and trace;
    default: the two choices' value when not given (run: None, which the sweep's defaults
    fill)."""
    parser.add_argument("--attach", metavar="MODE", default=default,
                        help=f"tracer attach rung: {'|'.join(P.ATTACH_MODES)} (default auto: "
                        "the best the kernel allows)")
    parser.add_argument("--freq", metavar="HZ",
                        help=f"stack sampling frequency (default {P.DEFAULT_FREQ})")
    parser.add_argument("--sample-source", metavar="SRC", default=default,
                        help=f"what stacks are sampled on: {'|'.join(P.SAMPLE_SOURCES)} (default "
                        "auto: cycles where a PMU exists, else tick: the scheduler tick, HZ per "
                        "busy CPU at most, no timer of its own)")
    parser.add_argument("--latency-sample", metavar="N", type=_latency_sample,
                        help="time the first of every N calls of each syscall class and thread "
                        "(default 16; 1: every call); every call is still counted, the "
                        "histograms hold the timed ones (latency.sampled_1_in)")


def _receive_flags(r):
    """run's --receive and --mss."""
    r.add_argument("--receive", metavar="LIST",
                   help=f"how the receiver receives, comma list of {','.join(P.RECEIVES)} "
                   "(default copy): " + "; ".join(f"{k}: {v}" for k, v in RECEIVE_HELP.items()))
    r.add_argument("--mss", metavar="BYTES",
                   help=f"TCP_MAXSEG on both ends ({P.MSS_MIN} to {P.MSS_MAX}; 4108 gives "
                   "4096-byte segments where the MTU allows; default the kernel's)")
    r.add_argument("--align", metavar="LIST",
                   help=f"where the zero-copy senders' 8 heap fields start, comma list of "
                   f"{','.join(P.ALIGNS)} (default none: where malloc puts them; page: each "
                   "on a page of its own, which a receiver's mmap can map whole)")
    r.add_argument("--rx-xdp", action="store_true", default=None,
                   help="attach an XDP program that passes every packet (generic mode) to the "
                   "receiving veth; veth only")


def _level_flags(t):
    """trace's flags that choose what the tracer runs: its level and its costs."""
    t.add_argument("--no-sample", action="store_true", help="no stack sampling")
    t.add_argument("--no-counters", action="store_true", help="no perf counters")
    t.add_argument("--no-latency", action="store_true",
                   help="count bytes and calls without timing them: no syscall hook, no "
                   "latency histogram (the counting level, with --no-sample)")
    t.add_argument("--skb-programs", choices=("on-demand", "always"),
                   help="the programs that look at every skb for zero-copy ones: attached at "
                   "the first send whose zero-copy bytes only they count, UDP's or io_uring's "
                   "SEND_ZC (on-demand, the default with --no-latency; the fallback copy of "
                   "the zero-copy sends before, TCP MSG_ZEROCOPY's among them, is then null, "
                   "with why), or from the start (always, the default otherwise)")


def build_parser():
    p = Parser(prog=PROG, description="Trace where a sender's bytes get copied "
               "(two-copy, one-copy, zero-copy, per-field, sendfile, io-uring, io-uring-zc) over "
               "veth, loopback or the forward path, and what each copy costs: eBPF copy "
               "accounting, syscall latency, sampled stacks, perf counters.",
               epilog=EPILOG + STRATEGY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{run,trace,agent,report,diff,doctor}")

    r = sub.add_parser("run", help="run the sweep: workloads × strategies × sizes × threads, "
                       "untraced and traced; writes runs.jsonl, results.csv, plots, flame "
                       "graphs, report",
                       description="Run every configuration in interleaved rounds, each twice: "
                       "untraced (the answers: throughput, latency, comparisons) and traced "
                       "(copies, attribution, stacks; the tracer is loaded once and attached "
                       "only for these runs), then build the report.",
                       epilog=STRATEGY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = P.DEFAULTS
    r.add_argument("--strategies", metavar="LIST",
                   help=f"comma list of {','.join(P.STRATEGIES)} (default {','.join(d['strategies'])})")
    r.add_argument("--sizes", metavar="LIST",
                   help="message sizes, e.g. 256,1K,4096,64K,1M (8 B to 64 MiB; default "
                   "256,1K,4K,16K,64K)")
    r.add_argument("--threads", metavar="LIST",
                   help=f"connections (one thread each), 1 to {P.MAX_THREADS} (default "
                   f"{','.join(map(str, d['threads']))})")
    r.add_argument("--transport", metavar="LIST",
                   help=f"comma list of {','.join(P.TRANSPORTS)} (default veth)")
    _receive_flags(r)
    r.add_argument("--duration", metavar="S", help=f"seconds per run (default {d['duration']:g})")
    r.add_argument("--repeat", metavar="N",
                   help=f"interleaved rounds: every configuration once, then again "
                   f"(default {d['repeat']})")
    r.add_argument("--out", metavar="DIR", help="results directory (default results/<timestamp>/)")
    passes = r.add_mutually_exclusive_group()
    passes.add_argument("--no-trace", action="store_true",
                        help="the untraced pass only: no tracer (no copy accounting, stacks, "
                        "counters)")
    passes.add_argument("--trace-only", action="store_true",
                        help="the traced pass only (faster; throughput is then measured with "
                        "the tracer attached, and the report says so)")
    _tracer_flags(r, None)
    # a second pair of flags that exclude each other: like the one above in shape only
    base = r.add_mutually_exclusive_group()
    base.add_argument("--quick", action="store_true",
                      help="a small sweep (3 strategies × 4K,64K × 1 thread × veth × 3 rounds, "
                      "≤ 60 s)")
    base.add_argument("--preset", metavar="NAME",
                      help="a sweep for one question: zerocopy (where zero-copy can win: "
                      "one-copy, zero-copy, io-uring, io-uring-zc × 1K,4K,16K,63K × 1 thread × "
                      "forward and veth × 3 rounds), receive (where receive zero-copy wins: "
                      "copy, discard, mmap, splice behind one-copy and zero-copy × "
                      "16K,64K,256K × loopback and veth at MSS 4108 × 3 rounds); flags given "
                      "override it")
    r.add_argument("--resume", metavar="DIR",
                   help="finish the sweep in DIR: run only what is missing, then rebuild the report")
    r.add_argument("--no-report", action="store_true", help=argparse.SUPPRESS)

    t = sub.add_parser("trace", help="trace any process: netio-trace trace (--pid PID | "
                       "--cgroup DIR | -- CMD ...)",
                       description="Run netio-tracer in its own mode on a process: copy table, "
                       "syscall histograms, JSON. Stops when the process exits (or Ctrl-C); "
                       "with --cgroup alone, at --duration or Ctrl-C.",
                       usage=f"{PROG} trace [options] [--cgroup DIR] (--pid PID | -- CMD "
                       "[ARGS...])")
    t.add_argument("--pid", metavar="PID", help="follow this process (threads and children)")
    t.add_argument("--cgroup", metavar="DIR", action="append", default=[],
                   help="follow every process of this cgroup v2 directory and below it, those "
                   "there now and those that start or move there later (repeatable; with "
                   "--pid, -- CMD or alone)")
    _tracer_flags(t, "auto")
    t.add_argument("--json", metavar="FILE", help="write the trace object to FILE, or to "
                   "stdout with - (otherwise it is not shown: the terminal gets the table and "
                   "the verdicts)")
    t.add_argument("--report", metavar="DIR",
                   help="also write DIR/report.md and a self-contained DIR/report.html: "
                   "processes and sockets, copies by kind, histograms, category shares, the "
                   "flame graph, and whether zero-copy would pay off, socket by socket")
    t.add_argument("--baseline", metavar="DIR",
                   help="a `run --preset zerocopy` results directory of this machine: where "
                   "zero-copy overtakes the copy, for the verdicts (with --report and none "
                   "given, its short form runs first, into DIR/baseline)")
    t.add_argument("--folded", metavar="FILE", help="write folded stacks to FILE")
    t.add_argument("--openmetrics", metavar="FILE|:PORT",
                   help="also write bytes, copies and syscall latency histograms as "
                   "OpenMetrics text (what Prometheus scrapes) to FILE, or serve them live on "
                   "http://127.0.0.1:PORT/metrics while tracing")
    t.add_argument("--pprof", metavar="FILE",
                   help="also write the stack samples as a gzipped pprof profile to FILE "
                   "(go tool pprof, speedscope, Pyroscope)")
    t.add_argument("--netns", metavar="NAME", action="append", default=[],
                   help="count softirq events of this network namespace (repeatable)")
    t.add_argument("--duration", metavar="S", help="stop after S seconds")
    _level_flags(t)

    _machine_parsers(sub)
    rep = sub.add_parser("report", help="rebuild results.csv, plots, flame graphs and the report "
                         "of DIR from runs.jsonl and the folded stacks (a sweep), or from "
                         "trace.json and stacks.folded (trace --report DIR)")
    rep.add_argument("dir", metavar="DIR")

    df = sub.add_parser("diff", help="compare two result directories configuration by "
                        "configuration; exit 1 when one regressed",
                        description="B against A on the untraced throughput, paired by round "
                        "where both ran the same rounds; the attribution categories that moved; "
                        "a differential flame graph per strategy. Writes diff.md and diff.html.")
    df.add_argument("a", metavar="A")
    df.add_argument("b", metavar="B")
    df.add_argument("--threshold", metavar="PCT", default="5",
                    help="a regression is B/A below 1 - PCT/100, beyond the noise (default 5)")
    df.add_argument("--out", metavar="DIR", help="where diff.md and diff.html go (default B)")
    return p


def _machine_parsers(sub):
    """agent and doctor, the commands about this machine. agent's options live with its code
    (netio_trace/agent/command.py); without the venv's packages only its name is known, and
    main() says what is missing."""
    if MISSING_PACKAGES is None:
        agent_command.add_parser(sub)
    else:
        sub.add_parser("agent", help="long-running: serve OpenMetrics")
    doc = sub.add_parser("doctor", help="what this kernel and machine allow (probed)")
    doc.add_argument("--json", action="store_true", help="print docs/DESIGN.md's doctor object")


# ---- run -------------------------------------------------------------------------------------
def sweep_params(a):
    """SweepParams from the run flags; --quick and the defaults fill what was not given."""
    base = P.QUICK if a.quick else P.DEFAULTS
    if a.preset is not None:
        if a.preset not in P.PRESETS:
            raise UsageError(f"unknown preset {a.preset!r} (choose from {', '.join(P.PRESETS)})")
        base = P.PRESETS[a.preset]
    params = P.SweepParams(
        strategies=P.parse_strategies(a.strategies) if a.strategies is not None else tuple(base["strategies"]),
        sizes=P.parse_size_list(a.sizes) if a.sizes is not None else tuple(base["sizes"]),
        threads=P.parse_threads(a.threads) if a.threads is not None else tuple(base["threads"]),
        transports=P.parse_transports(a.transport) if a.transport is not None else tuple(base["transports"]),
        duration=P.parse_duration(a.duration) if a.duration is not None else base["duration"],
        repeat=P.parse_repeat(a.repeat) if a.repeat is not None else base["repeat"],
        passes=("untraced",) if a.no_trace else ("traced",) if a.trace_only else P.PASSES,
        attach=P.parse_attach(a.attach) if a.attach is not None else "auto",
        freq=P.parse_freq(a.freq) if a.freq is not None else P.DEFAULT_FREQ,
        sample_source=(P.parse_sample_source(a.sample_source) if a.sample_source is not None
                       else "auto"),
        receives=(P.parse_receives(a.receive) if a.receive is not None
                  else tuple(base.get("receives", (P.DEFAULT_RECEIVE,)))),
        mss=P.parse_mss(a.mss) if a.mss is not None else base.get("mss"),
        aligns=(P.parse_aligns(a.align) if a.align is not None
                else tuple(base.get("aligns", (P.DEFAULT_ALIGN,)))),
        rx_xdp=bool(a.rx_xdp), latency_sample=a.latency_sample)
    P.check_combinations(params.strategies, params.sizes, params.transports, params.receives,
                         params.mss, params.rx_xdp)
    if a.latency_sample and not params.trace:
        raise UsageError("run --latency-sample: nothing is timed with --no-trace")
    return params


def _given(a):
    """Which sweep-defining flags the user gave (for --resume)."""
    names = {"strategies": a.strategies, "sizes": a.sizes, "threads": a.threads,
             "transports": a.transport, "duration": a.duration, "repeat": a.repeat,
             "attach": a.attach, "freq": a.freq, "sample_source": a.sample_source,
             "receives": a.receive, "mss": a.mss, "aligns": a.align, "rx_xdp": a.rx_xdp,
             "latency_sample": a.latency_sample}
    out = {k for k, v in names.items() if v is not None}
    if a.no_trace or a.trace_only:
        out.add("passes")
    if a.quick or a.preset is not None:
        out |= {"strategies", "sizes", "threads", "transports", "duration", "repeat"}
    if a.preset is not None:
        out |= {"receives", "mss", "aligns"}
    return out


def _probe_writable(directory):
    """Create and remove a directory inside: the truth, for root too (read-only mounts, /proc)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".netio-probe-", dir=directory))
        return None
    except OSError as e:
        if e.errno == errno.ENOENT:
            return "this filesystem takes no new directories"
        return e.strerror or str(e)


def check_out_dir(path):
    """Refuse a file, an existing sweep, or a place we cannot write; leaves nothing behind."""
    ap = os.path.abspath(path)
    if os.path.exists(ap):
        if not os.path.isdir(ap):
            raise UsageError(f"--out {path} is a file, not a directory")
        if os.path.exists(os.path.join(ap, "runs.jsonl")) or os.path.exists(os.path.join(ap, "sweep.json")):
            raise UsageError(f"--out {path} already holds a sweep: finish it with --resume "
                             f"{path}, or choose another directory")
        why = _probe_writable(ap)
        if why:
            raise UsageError(f"--out {path} is not writable ({why})")
        return ap
    parent = ap
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"--out {path}: {parent} is a file, not a directory")
    why = _probe_writable(parent)
    if why:
        raise UsageError(f"--out {path} is not writable ({parent}: {why})")
    return ap


def make_out_dir(ap, label="--out"):
    """Create the directory and prove it can hold a file; UsageError otherwise."""
    try:
        os.makedirs(ap, exist_ok=True)
        probe = os.path.join(ap, f".netio-write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("x")
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"{label} {ap} is not writable: {e.strerror or e}") from None


def default_out_dir():
    base = os.path.join("results", time.strftime("%Y%m%d-%H%M%S"))
    out, n = base, 2
    while os.path.exists(out):
        out, n = f"{base}-{n}", n + 1
    return out


def resolve_run(a):
    """(SweepParams, out dir, resume?) or UsageError: every check that needs no privilege."""
    if a.resume is not None:
        rdir = os.path.abspath(a.resume)
        if not os.path.isdir(rdir):
            raise UsageError(f"--resume {a.resume}: no such directory")
        if a.out is not None and os.path.abspath(a.out) != rdir:
            raise UsageError("--resume DIR writes into DIR: drop --out, or give the same directory")
        stored = P.load_sweep_file(os.path.join(rdir, "sweep.json"))
        given = _given(a)
        if given:
            asked = sweep_params(a)
            diffs = [d for d in stored.differences(asked) if d.split()[0] in given]
            if diffs:
                raise UsageError(f"--resume {a.resume} is a different sweep ({'; '.join(diffs)})")
        check_privileges(stored)
        why = _probe_writable(rdir)
        if why:
            raise UsageError(f"--resume {a.resume} is not writable ({why})")
        return stored, rdir, True
    params = sweep_params(a)
    check_privileges(params)      # before the directory: "not writable" would hide "not root"
    out = check_out_dir(a.out if a.out is not None else default_out_dir())
    return params, out, False


def cmd_run(a):
    params, out, resume = resolve_run(a)
    preflight(params)
    # results/ made here (the default --out) goes to the invoking user too
    made_results = a.out is None and not resume and not os.path.exists(os.path.dirname(out))
    made_out = not os.path.exists(out)
    make_out_dir(out, "--resume" if resume else "--out")
    console = Console(stderr=True)
    if not console.is_terminal:       # a log: one line per run, no wrapping at 80 columns
        console = Console(stderr=True, width=200)
    try:
        return run_sweep(params, out, console, resume=resume, build_report=not a.no_report)
    finally:     # finished, failed or interrupted: what was written is the invoking user's
        if made_out:     # a sweep stopped before its first run leaves no directory behind
            _remove_if_empty(out, os.path.dirname(out) if made_results else None)
        ownership.give_back(os.path.dirname(out) if made_results else out)


def _remove_if_empty(*dirs):
    for d in dirs:
        try:
            if d:
                os.rmdir(d)      # only an empty directory goes
        except OSError:
            return


# ---- trace -----------------------------------------------------------------------------------
def _trace_pid(a, cmd):
    """The --pid of trace, or None; --pid and -- CMD exclude each other, --cgroup goes with
    either or alone."""
    if (a.pid is not None and cmd) or (a.pid is None and not cmd and not a.cgroup):
        raise UsageError("trace needs exactly one of --pid PID or -- CMD [ARGS...] "
                         "(--cgroup DIR goes with either, or alone)")
    if a.pid is None:
        return None
    try:
        pid = int(a.pid)
    except ValueError:
        raise UsageError(f"--pid {a.pid!r} is not a process id") from None
    if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
        raise UsageError(f"--pid {a.pid}: no such process")
    return pid


def _check_cgroups(dirs):
    """Each --cgroup is a directory below the cgroup2 mount."""
    root = cgroup2_root()
    for d in dirs:
        if not os.path.isdir(d):
            raise UsageError(f"--cgroup {d}: no such directory")
        real = os.path.realpath(d)
        if not root or os.path.commonpath([real, os.path.realpath(root)]) != \
                os.path.realpath(root):
            raise UsageError(f"--cgroup {d}: not a cgroup v2 directory "
                             f"(the cgroup2 mount is {root or 'absent'})")


def _trace_checks(a, cmd):
    """Everything trace checks before it starts anything: the target, the outputs, the
    privileges, the tracer. Returns (pid, metrics port, given baseline, notes)."""
    pid = _trace_pid(a, cmd)
    _check_cgroups(a.cgroup)
    metrics_port = _check_trace_outputs(a)
    if a.report:
        a.report = trace_answer.check_report_dir(a.report)
    base, notes = trace_answer.resolve_baseline(a.baseline) if a.baseline else (None, [])
    err = privilege_error("trace", need_netadmin=False)
    if err:
        raise UsageError(err)
    if not paths.have_binary("netio-tracer"):
        raise UsageError(f"netio-trace trace: netio-tracer not built in {paths.build_dir()}; run "
                         f"`make` (or set NETIO_BUILD)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        raise UsageError("netio-trace trace: this kernel has no BTF (/sys/kernel/btf/vmlinux); the "
                         "tracer needs CONFIG_DEBUG_INFO_BTF=y")
    if cmd:
        if not (os.path.sep in cmd[0] and os.access(cmd[0], os.X_OK)) and not shutil.which(cmd[0]):
            raise UsageError(f"netio-trace trace: command {cmd[0]!r} not found")
    return pid, metrics_port, base, notes


def cmd_trace(a, cmd):
    pid, metrics_port, base, notes = _trace_checks(a, cmd)
    tracer_opts = dict(attach=P.parse_attach(a.attach),
                       sample_source=P.parse_sample_source(a.sample_source),
                       freq=P.parse_freq(a.freq) if a.freq is not None else None,
                       duration=P.parse_duration(a.duration) if a.duration is not None else None)
    for line in trace_session.clean_after_dead_drivers():
        print(f"{PROG} trace: {line}", file=sys.stderr)
    how = "given" if base else None
    if a.report:
        make_out_dir(a.report, "--report")
        if base is None:
            base, more = trace_answer.run_short_form(a.report)
            how, notes = "short form", notes + more
    state.open_state()
    try:
        with trace_session.Signals() as sigs:
            return _trace(a, cmd, pid, metrics_port, tracer_opts, sigs,
                          (cmd, base, how, notes))
    except trace_session.Aborted as e:
        # at once: no interpreter teardown (a module half-imported when the signal came
        # can abort it)
        sys.stderr.flush()
        os._exit(128 + int(e.signum))
    finally:
        state.close_state()


def _trace(a, cmd, pid, metrics_port, opts, sigs, answer):
    """The tracer from start to end, then what was asked for; Aborted on a second signal,
    with the tracer, the command and our temporary files gone and what is missing said."""
    # a command we start is sampled from a cgroup of its own (see analysis/cgroup.py); a
    # process given by --pid stays where it is, on per-task events; with --cgroup the
    # tracer samples that cgroup, and the command keeps per-task events
    cg = None
    if cmd and not a.cgroup and not a.no_sample and samples_on_perf_events(opts["sample_source"]):
        cg = WorkloadCgroup.create()
    # the exports, the verdicts and the report are made from the trace object and the folded
    # stacks: written into a directory of ours unless asked for elsewhere
    json_tmp = trace_session.temp_dir()
    json_path = a.json if a.json and a.json != "-" else os.path.join(json_tmp, "trace.json")
    folded_path = a.folded or (None if a.no_sample else os.path.join(json_tmp, "stacks.folded"))
    argv = trace_argv(pid=pid, cmd=cmd, cgroups=a.cgroup, json_path=json_path, folded=folded_path,
                      netns=a.netns, no_sample=a.no_sample, no_counters=a.no_counters,
                      no_latency=a.no_latency, latency_sample=a.latency_sample,
                      skb_programs=a.skb_programs, sample_cgroup=cg.path if cg else None,
                      json_every=METRICS_REFRESH_S if metrics_port else None, **opts)
    pending = trace_session.Pending(a)
    server = None
    try:
        server = _serve_metrics(json_path, metrics_port) if metrics_port else None
        status, sig = trace_session.run_tracer(sigs, argv, own_command=bool(cmd))
        if status == 0:
            pending.done("--json", "--folded")
        if sig is not None:
            print(trace_session.interrupted_line(sig, bool(cmd)), file=sys.stderr)
        _write_exports(a, json_path, folded_path, metrics_port)
        pending.done("--openmetrics", "--pprof")
        if status == 0:
            trace_answer.finish(a, json_path, folded_path, *answer, pending=pending)
        if sig is not None and cmd:
            return 128 + int(sig)
        return status
    except trace_session.Aborted as e:
        sigs.kill_tracer()
        if cmd:
            trace_session.end_children()
        print(trace_session.aborted_line(e.signum, pending.names()), file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.shutdown()
        if cg is not None:
            cg.remove()
        trace_session.remove_temp_dir(json_tmp)
        ownership.give_back(None if a.json == "-" else a.json, a.folded,
                            None if metrics_port else a.openmetrics, a.pprof, a.report)


# trace --openmetrics :PORT: how often the tracer rewrites the trace JSON that is served
METRICS_REFRESH_S = 1.0


def _check_trace_outputs(a):
    """Each output file's directory exists; --pprof has samples; --openmetrics is a FILE or a
    :PORT. Returns that port, or None."""
    port = None
    if a.openmetrics and a.openmetrics.startswith(":"):
        try:
            port = int(a.openmetrics[1:])
        except ValueError:
            port = 0
        if not 0 < port < 65536:
            raise UsageError(f"--openmetrics {a.openmetrics}: not a port (:1 to :65535)")
    for f, label in ((None if a.json == "-" else a.json, "--json"), (a.folded, "--folded"),
                     (None if port else a.openmetrics, "--openmetrics"), (a.pprof, "--pprof")):
        if f:
            parent = os.path.dirname(os.path.abspath(f)) or "."
            if os.path.isdir(f):
                raise UsageError(f"{label} {f} is a directory")
            if not os.path.isdir(parent):
                raise UsageError(f"{label} {f}: directory {parent} does not exist")
    if a.pprof and a.no_sample:
        raise UsageError("trace --pprof needs stack samples: drop --no-sample")
    if a.latency_sample and a.no_latency:
        raise UsageError("trace --latency-sample: nothing is timed with --no-latency")
    return port


def _serve_metrics(json_path, port):
    """The OpenMetrics of the trace JSON, served on 127.0.0.1:port while the tracer runs."""
    from report import openmetrics      # deferred on purpose: prometheus_client, when asked for
    try:
        server = openmetrics.serve(json_path, port)
    except OSError as e:
        raise UsageError(f"--openmetrics :{port}: {e.strerror or e}") from None
    print(f"{PROG} trace: OpenMetrics on http://127.0.0.1:{port}/metrics", file=sys.stderr)
    return server


def _write_exports(a, json_path, folded_path, metrics_port=None):
    """--openmetrics FILE and --pprof, from the trace object and the folded stacks just
    written (--openmetrics :PORT was served while tracing)."""
    if not json_path or not os.path.exists(json_path):
        return
    with open(json_path) as f:
        trace = json.load(f)
    if a.openmetrics and not metrics_port:
        from report import openmetrics      # deferred on purpose: prometheus_client
        openmetrics.write(trace, a.openmetrics)
    if a.pprof and folded_path and os.path.exists(folded_path):
        from report import pprof            # deferred on purpose: protobuf
        freq = (trace.get("samples") or {}).get("freq")
        pprof.write(folded_path, a.pprof, period_ns=1e9 / freq if freq else None)


# ---- report / doctor -------------------------------------------------------------------------
def cmd_report(a):
    d = os.path.abspath(a.dir)
    if not os.path.isdir(d):
        raise UsageError(f"report {a.dir}: no such directory")
    # deferred on purpose: trace_report loads matplotlib (heavy), which only a report needs
    from report import trace_report
    if trace_report.is_trace_dir(d) and not os.path.isfile(os.path.join(d, "runs.jsonl")):
        return _rebuild_trace_report(a, d)
    if not os.path.isfile(os.path.join(d, "runs.jsonl")):
        raise UsageError(f"report {a.dir}: no runs.jsonl there (not a netio-trace results directory)")
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"report {a.dir}: directory is not writable")
    console = Console(stderr=True)
    t = time.monotonic()
    try:
        import_whole("report.plots")
        info = report_build.build(d, console=console)
    except report_build.ReportError as e:
        raise UsageError(str(e)) from None
    finally:
        ownership.give_back(d)
    print_summary(read_runs(os.path.join(d, "runs.jsonl")), console)
    console.print(f"report rebuilt from {info['runs']} run(s) in {time.monotonic() - t:.1f} s: "
                  f"{d}/report.html, report.md, results.csv")
    return 0


def _rebuild_trace_report(a, d):
    """report DIR of `trace --report DIR`: the report again from trace.json and the stacks."""
    from report import trace_report     # deferred on purpose: matplotlib (heavy)
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"report {a.dir}: directory is not writable")
    try:
        import_whole("report.plots")
        info = trace_report.build(d)
    except trace_report.TraceReportError as e:
        raise UsageError(str(e)) from None
    finally:
        ownership.give_back(d)
    print(f"trace report rebuilt ({len(info['verdicts'])} flow(s) judged): {d}/report.html, "
          f"report.md", file=sys.stderr)
    return 0


def cmd_diff(a):
    try:
        pct = float(a.threshold)
    except ValueError:
        raise UsageError(f"diff --threshold {a.threshold!r} is not a percentage") from None
    if not 0 <= pct < 100:
        raise UsageError(f"diff --threshold {a.threshold} must be in [0, 100)")
    try:
        ra, rb = diff.load(os.path.abspath(a.a)), diff.load(os.path.abspath(a.b))
    except diff.DiffError as e:
        raise UsageError(f"diff {e}") from None
    out = os.path.abspath(a.out or a.b)
    make_out_dir(out)
    result = diff.compare(ra, rb, pct / 100)
    md, html = diff_report.write(result, os.path.abspath(a.a), os.path.abspath(a.b), out)
    ownership.give_back(md, html, os.path.join(out, "flamegraphs"))
    n = len(result["regressed"])
    print(f"{len(result['rows'])} configuration(s) compared, {n} regressed: {md}, {html}",
          file=sys.stderr)
    return 1 if n else 0


def cmd_doctor(a):
    err = privilege_error("doctor")
    if err:
        raise UsageError(err + " (probing BPF, perf and namespaces needs it)")
    return doctor.main(as_json=a.json)


def _missing_packages(command):
    """One line, exit 2: the privileges this command lacks first (what a user fixes first),
    else the packages."""
    err = privilege_error(command) if command in ("run", "trace", "agent", "doctor") else None
    print(err or f"{PROG} {command}: Python packages missing ({MISSING_PACKAGES}); run "
          f"`make deps`, or start netio-trace with .venv/bin/python", file=sys.stderr)
    return 2


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = []
    if argv and argv[0] == "trace" and "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    parser = build_parser()
    guard = None
    try:
        a = parser.parse_args(argv)
        if a.command is None:
            parser.print_help()
            return 2
        if MISSING_PACKAGES is not None:
            return _missing_packages(a.command)
        if a.command in ("run", "trace", "agent", "doctor", "report"):
            # from the first step: a signal during the checks ends with 128+N, never a traceback
            guard = Guard().__enter__()
        if a.command == "run":
            return cmd_run(a)
        if a.command == "trace":
            return cmd_trace(a, cmd)
        if a.command == "agent":
            return agent_command.main(a)
        if a.command == "report":
            return cmd_report(a)
        if a.command == "diff":
            return cmd_diff(a)
        if a.command == "doctor":
            return cmd_doctor(a)
    except (Interrupted, KeyboardInterrupt) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"{PROG} {argv[0] if argv else ''}: interrupted ({signal.Signals(signum).name})"
              .replace("  ", " "), file=sys.stderr)
        return 128 + int(signum)
    except UsageError as e:
        msg = str(e)
        if not msg.startswith(PROG):
            msg = f"{PROG} {argv[0] if argv else ''}: {msg}".replace("  ", " ")
        print(msg, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1
    finally:
        if guard is not None:
            guard.__exit__(None, None, None)
    return 2


if __name__ == "__main__":
    sys.exit(main())
