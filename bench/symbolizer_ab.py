"""Old tracer against new on the same sweep (frames named by blazesym in the new one):
`python -m bench.symbolizer_ab --old OLD_BUILD --new NEW_BUILD [--rounds 4] --out DIR` (root).

Runs `./netio-trace run --quick --trace-only --sizes 256,4K,64K --out DIR/<side>-<round>`
with NETIO_BUILD set to each build in turn, interleaved (old, new, old, new, ...), so both
sides see the same load. Each side's netio-tracer runs behind a shim (this module's `shim`
command) that relays the driver's commands, times every `snapshot` from the command to its
reply, and records the tracer's peak RSS (ru_maxrss of its child) when it exits.

Prints, old against new: each category's share pooled over every traced run with its 95%
interval, "other" by size (pooled over the strategies, and the largest of one strategy),
the frames without a name, the snapshot time and the tracer's peak RSS.

`--same-samples`: instead, both tracers at once (`netio-tracer --pid`, tick source) on one
process tree per configuration (a shell that, once both are attached, starts netio-server and
netio-client over loopback and exits with them): each tick runs both samplers on the same
task, so the two folded files hold the same samples, named by each symbolizer; the process
tree is gone when both take their snapshot. Differences between their shares are naming.
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

from analysis.attribution import CATEGORIES, attribute_file, parse_folded_line, share_interval

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
    """Pools one sweep's traced runs into side (a dict of counters; side["sweeps"] gets the
    sweep's own shares, for their spread)."""
    sweep = defaultdict(int)
    with open(os.path.join(out, "runs.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            a = r.get("attribution") or {}
            for c, n in (a.get("samples_by_category") or {}).items():
                sweep[c] += n
                side["all"][c] += n
                side[("size", r["msg_size"])][c] += n
                side[("cfg", r["strategy"], r["msg_size"])][c] += n
    total = sum(sweep.values())
    side["sweeps"][len(side["sweeps"])] = {c: n / total for c, n in sweep.items()} if total else {}
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


def _quantile(v, q):
    """The q quantile of v (nearest rank; the median: the middle two's mean), nan if empty."""
    v = sorted(v)
    if not v:
        return float("nan")
    if q == 0.5:
        return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2
    return v[min(len(v) - 1, int(q * len(v)))]


def _pct(v):
    return f"{100 * v:.1f}"


# ---- the report ---------------------------------------------------------------------------

def report(sides, logs, loads):
    old, new = sides["old"], sides["new"]
    lines = ["| category | old share (95% CI) | new share (95% CI) | new in old's CI | "
             "one sweep's share, old / new (min–max) |", "|---|---|---|---|---|"]
    to, tn = sum(old["all"].values()), sum(new["all"].values())
    for c in CATEGORIES:
        so, sn = old["all"][c] / to, new["all"][c] / tn
        lo, hi = share_interval(old["all"][c], to)
        nlo, nhi = share_interval(new["all"][c], tn)
        spread = [[d.get(c, 0.0) for d in side["sweeps"].values()] for side in (old, new)]
        lines.append(f"| {c} | {_pct(so)} ({_pct(lo)}–{_pct(hi)}) | {_pct(sn)} "
                     f"({_pct(nlo)}–{_pct(nhi)}) | {'yes' if lo <= sn <= hi else 'NO'} | "
                     + " / ".join(f"{_pct(min(v))}–{_pct(max(v))}" for v in spread) + " |")
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
        lines.append(f"| {label} | {100 * vo:.2f} | {100 * vn:.2f} | {100 * (vn - vo):+.2f} "
                     "points |")
    for label, key, q, scale, unit in (
            ("snapshot time, median", "snapshot_s", 0.5, 1e3, "ms"),
            ("snapshot time, 90th percentile", "snapshot_s", 0.9, 1e3, "ms"),
            ("tracer peak RSS, median of sweeps", "peak_rss_kib", 0.5, 1 / 1024, "MiB")):
        vo = _quantile([x for p in logs["old"] for x in _logged(p, key)], q)
        vn = _quantile([x for p in logs["new"] for x in _logged(p, key)], q)
        lines.append(f"| {label} | {vo * scale:.1f} {unit} | {vn * scale:.1f} {unit} | "
                     f"{vn / vo:.2f} |")
    lines.append(f"\nload average (1 min) before each sweep: old {loads['old']}, "
                 f"new {loads['new']}")
    return "\n".join(lines)


# ---- both tracers on the same samples -------------------------------------------------------

SAME_CONFIGS = [(s, z) for s in ("two-copy", "one-copy", "zero-copy") for z in (256, 65536)]


def _same_one(builds, strategy, size, out, port):
    """One configuration: a gated shell, both tracers on it, the workloads released."""
    fifo = os.path.join(out, "gate")
    os.mkfifo(fifo)
    srv, cli = (os.path.join(builds["new"], b) for b in ("netio-server", "netio-client"))
    script = (f"read x < {fifo}; {srv} --strategy {strategy} --size {size} --threads 1 "
              f"--port {port} --addr 127.0.0.1 --duration 2 >/dev/null 2>&1 & sleep 0.3; "
              f"{cli} --addr 127.0.0.1 --port {port} --threads 1 --size {size} >/dev/null; wait")
    shell = subprocess.Popen(["sh", "-c", script])
    before = {p["id"] for p in _samplers()}
    tracers = []
    for side in ("old", "new"):  # old first: its sampler has the lower program id
        tracers.append(subprocess.Popen(
            [os.path.join(builds[side], "netio-tracer"), "--pid", str(shell.pid),
             "--sample-source", "tick", "--duration", "30", "--json",
             os.path.join(out, f"{side}.json"), "--folded", os.path.join(out, f"{side}.folded")],
            stderr=subprocess.DEVNULL))
        time.sleep(5)  # loaded and attached (about 3 s on a loaded host)
    with open(fifo, "w") as f:
        f.write("go\n")
    time.sleep(1.8)  # the workloads run 2 s: the samplers' run time so far
    ours = sorted((p for p in _samplers() if p["id"] not in before), key=lambda p: p["id"])
    shell.wait()
    rcs = [t.wait(timeout=60) for t in tracers]
    return rcs, [(p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in ours]


def _samplers():
    """The tick sampling programs loaded now (bpftool's JSON), [] when bpftool fails."""
    cp = subprocess.run(["bpftool", "prog", "show", "name", "tick_sample", "-j"],
                        capture_output=True, text=True)
    try:
        progs = json.loads(cp.stdout) if cp.returncode == 0 else []
    except ValueError:
        return []
    return [progs] if isinstance(progs, dict) else progs  # one program: not in a list


def same_samples(builds, out):
    counts = {"old": defaultdict(int), "new": defaultdict(int)}
    unnamed = {"old": [0, 0], "new": [0, 0]}
    cost = {"old": [0, 0], "new": [0, 0]}
    for i, (strategy, size) in enumerate(SAME_CONFIGS):
        d = os.path.join(out, f"same-{strategy}-{size}")
        os.makedirs(d, exist_ok=True)
        rcs, runs = _same_one(builds, strategy, size, d, 47300 + i)
        for side, (ns, cnt) in zip(("old", "new"), runs if len(runs) == 2 else []):
            cost[side][0] += ns
            cost[side][1] += cnt
        for side in ("old", "new"):
            folded = os.path.join(d, f"{side}.folded")
            a = attribute_file(folded, "tick", None, None, None, None)
            for c, n in a["samples_by_category"].items():
                counts[side][c] += n
            bad, frames, _, _ = unnamed_frames(folded)
            unnamed[side][0] += bad
            unnamed[side][1] += frames
        print(f"{strategy} {size}: tracers exited {rcs}", file=sys.stderr)
    to, tn = sum(counts["old"].values()), sum(counts["new"].values())
    lines = ["| category | old | new | new - old (points) |", "|---|---|---|---|"]
    for c in CATEGORIES:
        so, sn = counts["old"][c] / to, counts["new"][c] / tn
        lines.append(f"| {c} | {_pct(so)} | {_pct(sn)} | {100 * (sn - so):+.2f} |")
    lines.append(f"\nsamples: old {to}, new {tn}; frames without a name: old "
                 f"{_pct(unnamed['old'][0] / max(1, unnamed['old'][1]))}%, new "
                 f"{_pct(unnamed['new'][0] / max(1, unnamed['new'][1]))}%")
    lines.append("tick sampler, BPF time per run (every hrtimer expiry; bpftool): " + ", ".join(
        f"{side} {cost[side][0] / max(1, cost[side][1]):.0f} ns over {cost[side][1]} runs"
        for side in ("old", "new")))
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
    ap.add_argument("--same-samples", action="store_true",
                    help="both tracers at once on the same samples (see the module's doc)")
    a = ap.parse_args(argv)
    if a.rounds < 3 or not all(os.path.isfile(os.path.join(os.path.abspath(d), "netio-tracer"))
                               for d in (a.old, a.new)):
        ap.error("--rounds >= 3; --old and --new: build directories with a netio-tracer")
    if a.same_samples:
        table = same_samples({"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)},
                             os.path.abspath(a.out))
        print(table)
        return 0
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
