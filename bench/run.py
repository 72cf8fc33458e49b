"""netio-trace benchmarks. Run from the repo root as root: `python -m bench.run` (`make bench`).

Each section is a function taking a Bench and returning markdown; the sections' output is
printed and written to bench/results.md with the machine it ran on. Add a section by writing
a function and listing it in SECTIONS.

Where things are: bench/harness.py runs the workloads (Bench) under an observer of
bench/observers.py (none, our tracer in one of its variants, or bpftrace) and interleaves a
comparison's variants (pairs.py); bench/measure_*.py measure each section and record its
verdicts; bench/markdown*.py write them up; bench/profiles.py keeps the profile of a missed
target in bench/profiles/ (rebuilt by every full bench, not committed).
"""
import argparse
import os
import shutil
import sys
import time

from bench import harness, markdown
from bench.config import BUILD, PROFILES, RESULTS
from bench.harness import Bench, log
from bench.measure_overhead import section_overhead, section_unrelated, section_windows
from bench.measure_sweep import section_passes, section_sweep
from bench.measure_workloads import section_iperf3, section_scale, section_zerocopy
from bench.churn import section_churn
from bench.scrape import section_scrape
from bench.sockets import section_sockets

SECTIONS = [
    ("overhead", section_overhead),
    ("windows", section_windows),
    ("iperf3", section_iperf3),
    ("scale", section_scale),
    ("sweep", section_sweep),
    ("passes", section_passes),
    ("zerocopy", section_zerocopy),
    ("unrelated", section_unrelated),
    ("sockets", section_sockets),
    ("churn", section_churn),
    ("scrape", section_scrape),
]


# The numeric options: (flag, type, default, help); each must be more than 0.
NUMBERS = (
    ("--rounds", int, 5, "interleaved rounds (>= 5)"),
    ("--one-copy-rounds", int, 9, "rounds of section 1's one-copy configurations (sampling's "
     "cost and the tracer's parts are effects of a few percent)"),
    ("--duration", float, 1.0, "seconds per run of sections 1 and 2"),
    ("--window-runs", int, 5, "runs per configuration and level in section 1w (a verdict "
     "needs 5)"),
    ("--window-pairs", int, 20, "pairs of windows per run in section 1w"),
    ("--guest-rounds", int, 25, "rounds of section 8 (unrelated syscalls in the 6.1 guest)"),
    ("--guest-seconds", float, 0.3, "seconds per getpid loop run in section 8"),
    ("--iperf3-duration", int, 1, "whole seconds per run of section 3 (iperf3 -t takes whole "
     "seconds)"),
    ("--scale-duration", float, 0.5, "seconds per run of section 4"),
    ("--churn-runs", int, 5, "runs of section 10's load (a verdict needs 5)"),
)


def _parse_args(argv):
    """The bench's options, checked: usage errors exit 2 before anything runs."""
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    for flag, kind, default, help_text in NUMBERS:
        ap.add_argument(flag, type=kind, default=default, help=help_text)
    ap.add_argument("--transports", nargs="+", default=["loopback", "veth"],
                    choices=["loopback", "veth"], help="transports to measure")
    ap.add_argument("--zc-sizes", type=int, nargs="+",
                    help="message sizes of section 7's forward comparison (default 1K 4K 16K 63K)")
    ap.add_argument("--only", action="append", choices=[n for n, _ in SECTIONS],
                    help="run only this section (repeatable)")
    ap.add_argument("--no-full", action="store_true",
                    help="do not time the default sweep (~3 min; also: make bench FULL=0, or "
                         "NETIO_BENCH_FULL=0)")
    ap.add_argument("--out", default=RESULTS, help="markdown file to write")
    args = ap.parse_args(argv)
    for flag, *_ in NUMBERS:
        if getattr(args, flag[2:].replace("-", "_")) <= 0:
            ap.error(f"{flag} must be more than 0")
    if args.rounds < 5:
        log(f"note: {args.rounds} rounds; comparisons on this machine want at least 5")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, BPF)")
    for exe in ("netio-server", "netio-client", "netio-tracer", "netio-busy-loop",
                "netio-getpid-loop", "netio-churn"):
        if not os.access(os.path.join(BUILD, exe), os.X_OK):
            ap.error(f"{BUILD}/{exe} is not built (make, or set NETIO_BUILD)")
    for tool in ("bpftrace", "bpftool", "iperf3"):
        if not shutil.which(tool):
            ap.error(f"{tool} not found (make deps)")
    return args


def _header(argv, full, start_load):
    """results.md's opening lines: the machine, the binaries and the command."""
    return markdown.header({
        "machine": harness.machine(), "start_load": start_load,
        "bpf_programs": harness.bpf_programs(), "build": BUILD,
        "built": time.gmtime(os.path.getmtime(os.path.join(BUILD, "netio-tracer"))),
        "commit": harness.git_head(), "full": full,
        "command": " ".join(argv if argv is not None else sys.argv[1:])})


def _run_sections(b, head):
    """Each selected section in turn; the Markdown of each. After every section results.md
    holds what is finished, so an interrupted bench keeps it."""
    body = []
    try:
        for name, fn in SECTIONS:
            if b.args.only and name not in b.args.only:
                continue
            log(f"== section {name}")
            ts = time.monotonic()
            body.append(fn(b) + f"\n_section time: {time.monotonic() - ts:.0f} s_\n")
            with open(b.args.out, "w") as f:
                f.write("\n".join(head) + "\n" + "\n".join(body)
                        + "\n_partial: the bench was still running when this was written_\n")
    finally:
        b.cleanup()
    return body


def main(argv=None):
    args = _parse_args(argv)
    full = not (args.no_full or os.environ.get("FULL") == "0"
                or os.environ.get("NETIO_BENCH_FULL") == "0")
    start_load = harness.loadavg()
    head = _header(argv, full, start_load)
    b = Bench(args)
    b.full = full
    if not args.only:   # profiles of missed targets are rewritten by this run
        shutil.rmtree(PROFILES, ignore_errors=True)
    t0 = time.monotonic()
    body = _run_sections(b, head)
    text = ("\n".join(head) + "\n" + markdown.summary_md(b.verdicts, harness.SPEEDS) + "\n"
            + "\n".join(body)
            + markdown.footer(b.retries, time.monotonic() - t0, start_load, harness.loadavg(),
                              harness.bpf_programs()))
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
