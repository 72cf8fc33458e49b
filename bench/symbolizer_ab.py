"""Old tracer against new on the same sweep (issue 29: frames named by blazesym):
`python -m bench.symbolizer_ab --old OLD_BUILD --new NEW_BUILD [--rounds 4] --out DIR` (root).

Runs `./netio-trace run --quick --trace-only --sizes 256,4K,64K --out DIR/<side>-<round>`
with NETIO_BUILD set to each build in turn, interleaved (old, new, old, new, ...), so both
sides see the same load. Each side's netio-tracer runs behind a shim (this module's `shim`
command) that relays the driver's commands, times every `snapshot` from the command to its
reply, and records the tracer's peak RSS (ru_maxrss of its child) when it exits.

Prints, old against new: each category's share pooled over every traced run with its 95%
interval, "other" by size (pooled over the strategies, and the largest of one strategy),
the frames without a name, the snapshot time and the tracer's peak RSS.
"""
import argparse
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict

from analysis.attribution import CATEGORIES, parse_folded_line, share_interval

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = "256,4096,65536"
STACK_LOST = ("[user stack lost]", "[kernel stack lost]_[k]")


# ---- the shim between the driver and one netio-tracer -----------------------------------

def _relay(child, log):
    """Copies the driver's lines to the tracer and its lines back, timing each snapshot."""
    pending = None  # (command, time sent) of the command waiting for its reply
    out = child.stdout.fileno()
    inp = sys.stdin.fileno()
    buf = b""
    while child.poll() is None:
        fds = [out] + ([inp] if inp is not None else [])
        ready, _, _ = select.select(fds, [], [], 1.0)
        if inp in ready:
            data = os.read(inp, 65536)
            if not data:
                child.stdin.close()
                inp = None
            else:
                if data.startswith(b"snapshot"):
                    pending = time.monotonic()
                child.stdin.write(data)
                child.stdin.flush()
        if out in ready:
            data = os.read(out, 65536)
            if not data:
                break
            buf += data
            if pending is not None and b"\n" in buf:
                log.write(json.dumps({"snapshot_s": time.monotonic() - pending}) + "\n")
                pending = None
            os.write(1, buf)
            buf = b""


def shim(argv):
    """`shim LOG REAL_TRACER ARGS...`: run the tracer, relay, log snapshot times and peak RSS."""
    log_path, real, args = argv[0], argv[1], argv[2:]
    child = subprocess.Popen([real] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    with open(log_path, "a") as log:
        try:
            _relay(child, log)
        finally:
            rc = child.wait()
            rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            log.write(json.dumps({"peak_rss_kib": rss_kib, "rc": rc}) + "\n")
    return rc


def _shim_dir(build, where, log):
    """A NETIO_BUILD directory: the build's files, its netio-tracer behind the shim."""
    os.makedirs(where, exist_ok=True)
    for name in os.listdir(build):
        link = os.path.join(where, name)
        if name != "netio-tracer" and not os.path.lexists(link):
            os.symlink(os.path.join(build, name), link)
    script = os.path.join(where, "netio-tracer")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\ncd {REPO} && exec {sys.executable} -m bench.symbolizer_ab shim "
                f"{log} {os.path.join(build, 'netio-tracer')} \"$@\"\n")
    os.chmod(script, 0o755)
    return where


# ---- one sweep, and what it measured ----------------------------------------------------

def run_side(build_dir, out):
    env = dict(os.environ, NETIO_BUILD=build_dir)
    load = os.getloadavg()[0]
    subprocess.run([os.path.join(REPO, "netio-trace"), "run", "--quick", "--trace-only",
                    "--sizes", SIZES, "--out", out], env=env, check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)
    return load


def unnamed_frames(folded_path):
    """(frames without a name, frames, samples with one such frame, samples), sample-weighted;
    a frame without a name is "[unknown]" or a module's "[file]", a lost stack is not one."""
    bad = frames = bad_samples = samples = 0
    with open(folded_path) as f:
        for line in f:
            parsed = parse_folded_line(line)
            if not parsed:
                continue
            stack, n = parsed
            names = [s for s in stack[1:] if s not in STACK_LOST]  # [0]: the thread's name
            k = sum(1 for s in names if s.startswith("[") and s.removesuffix("_[k]").endswith("]"))
            bad += k * n
            frames += len(names) * n
            bad_samples += n if k else 0
            samples += n
    return bad, frames, bad_samples, samples


def collect(out, side):
    """Pools one sweep's traced runs into side (a dict of counters)."""
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            a = r.get("attribution") or {}
            for c, n in (a.get("samples_by_category") or {}).items():
                side["all"][c] += n
                side[("size", r["msg_size"])][c] += n
                side[("cfg", r["strategy"], r["msg_size"])][c] += n
    for name in sorted(os.listdir(os.path.join(out, "folded"))):
        for k, v in zip(("bad", "frames", "bad_samples", "samples"),
                        unnamed_frames(os.path.join(out, "folded", name))):
            side["unnamed"][k] += v


def _logged(path, key):
    vals = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if key in d:
                vals.append(d[key])
    return vals


def _median(v):
    v = sorted(v)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2 if v else float("nan")


def _pct(v):
    return f"{100 * v:.1f}"


# ---- the report ---------------------------------------------------------------------------

def report(sides, logs, loads):
    old, new = sides["old"], sides["new"]
    lines = ["| category | old share (95% CI) | new share (95% CI) | new in old's CI |",
             "|---|---|---|---|"]
    to, tn = sum(old["all"].values()), sum(new["all"].values())
    for c in CATEGORIES:
        so, sn = old["all"][c] / to, new["all"][c] / tn
        lo, hi = share_interval(old["all"][c], to)
        nlo, nhi = share_interval(new["all"][c], tn)
        lines.append(f"| {c} | {_pct(so)} ({_pct(lo)}–{_pct(hi)}) | {_pct(sn)} "
                     f"({_pct(nlo)}–{_pct(nhi)}) | {'yes' if lo <= sn <= hi else 'NO'} |")
    lines.append(f"\nsamples: old {to}, new {tn}\n")
    lines += ["| \"other\" | old | new |", "|---|---|---|"]
    for size in sorted({k[1] for k in old if isinstance(k, tuple) and k[0] == "size"}):
        po = old[("size", size)]["other"] / max(1, sum(old[("size", size)].values()))
        pn = new[("size", size)]["other"] / max(1, sum(new[("size", size)].values()))
        worst = {}
        for s, d in (("old", old), ("new", new)):
            worst[s] = max(d[k]["other"] / max(1, sum(d[k].values()))
                           for k in d if isinstance(k, tuple) and k[0] == "cfg" and k[2] == size)
        lines.append(f"| {size} B, pooled / largest of one strategy | {_pct(po)} / "
                     f"{_pct(worst['old'])} | {_pct(pn)} / {_pct(worst['new'])} |")
    lines += ["", "| measure | old | new | new / old |", "|---|---|---|---|"]
    for label, key in (("frames without a name, % of frames", "frames"),
                       ("samples with a frame without a name, %", "samples")):
        bad = "bad" if key == "frames" else "bad_samples"
        vo = old["unnamed"][bad] / max(1, old["unnamed"][key])
        vn = new["unnamed"][bad] / max(1, new["unnamed"][key])
        lines.append(f"| {label} | {_pct(vo)} | {_pct(vn)} | {vn - vo:+.3%} (points) |")
    for label, key, scale, unit in (("snapshot time, median", "snapshot_s", 1e3, "ms"),
                                    ("tracer peak RSS, median of sweeps", "peak_rss_kib",
                                     1 / 1024, "MiB")):
        vo = _median([x for p in logs["old"] for x in _logged(p, key)])
        vn = _median([x for p in logs["new"] for x in _logged(p, key)])
        lines.append(f"| {label} | {vo * scale:.1f} {unit} | {vn * scale:.1f} {unit} | "
                     f"{vn / vo:.2f} |")
    lines.append(f"\nload average (1 min) before each sweep: old {loads['old']}, "
                 f"new {loads['new']}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "shim":
        return shim(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.symbolizer_ab",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="build directory of the old tracer")
    ap.add_argument("--new", default=os.path.join(REPO, "build"), help="build directory of the new")
    ap.add_argument("--rounds", type=int, default=4, help="sweeps per side (>= 3)")
    ap.add_argument("--out", required=True, help="directory for the sweeps and the table")
    a = ap.parse_args(argv)
    if a.rounds < 3 or not all(os.path.isfile(os.path.join(os.path.abspath(d), "netio-tracer"))
                               for d in (a.old, a.new)):
        ap.error("--rounds >= 3; --old and --new: build directories with a netio-tracer")
    sides = {s: defaultdict(lambda: defaultdict(int)) for s in ("old", "new")}
    logs, loads = {"old": [], "new": []}, {"old": [], "new": []}
    for r in range(a.rounds):
        for side, build in (("old", a.old), ("new", a.new)):
            out = os.path.join(os.path.abspath(a.out), f"{side}-{r}")
            log = os.path.join(os.path.abspath(a.out), f"{side}-{r}.shim.jsonl")
            shim_build = _shim_dir(os.path.abspath(build), out + ".build", log)
            loads[side].append(round(run_side(shim_build, out), 2))
            collect(out, sides[side])
            logs[side].append(log)
            print(f"round {r} {side}: done", file=sys.stderr)
    table = report(sides, logs, loads)
    with open(os.path.join(a.out, "symbolizer_ab.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
