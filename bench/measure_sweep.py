"""The driver's sweeps, measured: section 5 (`netio-trace run`'s wall time and the spread of
its repeats) and 6 (the loaded but detached tracer against no tracer; the steady window's
spread). Each section function runs the sweeps and hands their runs to bench/markdown.py."""
import json
import os
import subprocess
import time

from bench import markdown, pairs
from bench.config import BUILD, DETACHED_BAND, PASSES_CFG, REPO, SWEEP_CFG


def _sweep(b, extra):
    """`netio-trace run --out DIR EXTRA`: (wall seconds, its runs.jsonl)."""
    out = os.path.join(b.tmp, "sweep-" + str(len(os.listdir(b.tmp))))
    env = dict(os.environ, NETIO_BUILD=BUILD)
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--out", out, *extra],
                       capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"netio-trace run {' '.join(extra)}: exit {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-400:]}")
    runs = []
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return wall, runs


# ---- section 5: the default sweep ---------------------------------------------------------
def section_sweep(b):
    """Wall time of `netio-trace run` (the default sweep unless FULL=0) and the spread of
    repeats."""
    wall, runs = _sweep(b, SWEEP_CFG)
    if not any(r.get("status") == "ok" for r in runs):
        raise RuntimeError(f"netio-trace run {' '.join(SWEEP_CFG)}: no run ok: "
                           + "; ".join(str(r.get("error")) for r in runs))
    default = _sweep(b, []) if b.full else None
    return markdown.section_sweep(SWEEP_CFG, (wall, runs), default)


# ---- section 6: the two passes ---------------------------------------------------------
def _untraced_gbps(runs):
    return [r["throughput_gbps"] for r in runs
            if r.get("status") == "ok" and r.get("traced") is False]


def _detached_rounds(b, rounds):
    """Per round, a two-pass sweep's untraced runs against a --no-trace sweep's (order
    alternating): the medians' ratio."""
    ratios = []
    for i in range(rounds):
        pair = {}
        for kind in (("two-pass", "no-trace") if i % 2 == 0 else ("no-trace", "two-pass")):
            extra = PASSES_CFG + ["--repeat", "3", "--no-report"]
            _, runs = _sweep(b, extra + (["--no-trace"] if kind == "no-trace" else []))
            pair[kind] = pairs.summary(_untraced_gbps(runs))["median"]
        if pair["two-pass"] and pair["no-trace"]:
            ratios.append(pair["two-pass"] / pair["no-trace"])
    return ratios


def _steady_spread(b, sweeps):
    """Medians of 5 untraced sweeps of one configuration, whole runs and steady windows."""
    whole, steady = [], []
    for _ in range(sweeps):
        _, runs = _sweep(b, PASSES_CFG + ["--repeat", "3", "--no-trace", "--no-report"])
        ok = [r for r in runs if r.get("status") == "ok"]
        whole.append(pairs.summary([r.get("throughput_whole_gbps") for r in ok])["median"])
        steady.append(pairs.summary([r.get("throughput_gbps") for r in ok])["median"])
    return whole, steady


def band_verdict(s):
    """The detached tracer's verdict: its median within DETACHED_BAND, or rounds on both sides
    of the band's edge (undecided)."""
    lo, hi = DETACHED_BAND
    if not s["n"]:
        return "no result"
    if lo <= s["median"] <= hi:
        return "met"
    # a median outside the band, but rounds inside it: the noise decides nothing
    return "missed" if s["max"] < lo or s["min"] > hi else "undecided"


def section_passes(b):
    """The detached tracer disturbs nothing; the steady-state window's spread."""
    s = pairs.summary(_detached_rounds(b, b.args.rounds))
    whole, steady = _steady_spread(b, 5)
    return markdown.section_passes(b.args, s, band_verdict(s), whole, steady)
