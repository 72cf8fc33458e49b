"""The tracer's cost before and after a change, side by side from one session on one host:
each program's BPF ns and runs per message (bench.per_message, the two builds in turn, the
floor beside them), and the default sweep at its smallest size (each tree's own
`netio-trace run --sizes 256`, in turn): runs and BPF ns per message, the BPF category's
share of the samples and the throughput kept, per strategy. Writes Markdown (--out) with the
host's CPU and SRSO state and the commands. The windows table is `python -m bench.run --only
windows` with each build (NETIO_BUILD=DIR/build), which this does not repeat.

python -m bench.cost_ab --old-tree DIR [--new-tree DIR] [--rounds 3] [--sweeps 2] --out FILE
(each tree a checkout built with `make`; about 5 minutes at the defaults)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from analysis import passes, record, stats
from bench import harness
from bench.config import KiB, REPO
from bench.harness import srso_state

# The cases the cost targets name: (transport, strategy, size, level)
CASES = (("loopback", "one-copy", 16 * KiB, "counting"), ("loopback", "one-copy", 16 * KiB, "full"),
         ("veth", "one-copy", 16 * KiB, "counting"), ("veth", "one-copy", 16 * KiB, "full"),
         ("veth", "zero-copy", 16 * KiB, "counting"))
SWEEP_SIZE = "256"
PER_SKB = ("tp_xmit", "tp_netif_receive", "tp_kfree_skb", "tp_tcp_probe")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.cost_ab",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--old-tree", required=True, help="checkout of the build before, made")
    p.add_argument("--new-tree", default=REPO, help="checkout of the build after (this one)")
    p.add_argument("--rounds", type=int, default=3, help="bench.per_message rounds per case")
    p.add_argument("--seconds", type=float, default=2.0, help="per bench.per_message run")
    p.add_argument("--sweeps", type=int, default=2, help="sweeps at 256 B per tree (0: none)")
    p.add_argument("--out", required=True, help="the Markdown file to write")
    a = p.parse_args(argv)
    for tree in (a.old_tree, a.new_tree):
        if not os.path.isfile(os.path.join(tree, "build", "netio-tracer")):
            p.error(f"{tree}: no build/netio-tracer (run make there)")
    if os.geteuid() != 0:
        p.error("needs root (network namespaces, BPF)")
    return a


def per_message(a, tree, case, path):
    """One bench.per_message run of tree's build on case; its --json, or None if it failed."""
    transport, strategy, size, level = case
    env = dict(os.environ, NETIO_BUILD=os.path.join(tree, "build"))
    cp = subprocess.run([sys.executable, "-m", "bench.per_message", "--transport", transport,
                         "--strategy", strategy, "--size", str(size), "--level", level,
                         "--seconds", f"{a.seconds:g}", "--json", path, "--floor-build",
                         os.path.join(a.new_tree, "build")],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if cp.returncode != 0:
        print(f"{tree} {case}: {cp.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    with open(path) as f:
        return json.load(f)


def sweep(tree, out):
    """tree's own default sweep at SWEEP_SIZE into out; its runs, or [] if it failed."""
    cp = subprocess.run([os.path.join(tree, "netio-trace"), "run", "--sizes", SWEEP_SIZE,
                         "--out", out], cwd=tree, capture_output=True, text=True, timeout=1800)
    if cp.returncode != 0:
        print(f"{tree} sweep: {cp.stderr.strip()[-300:]}", file=sys.stderr)
        return []
    with open(os.path.join(out, "runs.jsonl")) as f:
        return [json.loads(line) for line in f]


def spread(values, fmt=None):
    """'median (min–max)' of the values that are not None (analysis.stats), '–' for none;
    fmt: a format for each (default: two decimals below 10, none above)."""
    s = stats.spread(values)
    if s is None:
        return "–"
    return stats.fmt_spread(s, fmt or ("{:.2f}" if s["max"] < 10 else "{:.0f}"))


def case_name(case):
    transport, strategy, size, level = case
    return f"{transport} {strategy} {size // KiB} KiB, {level}"


def case_rows(results):
    """One row per case: ns and runs per message, before and after, over the rounds.
    results: {case: {"old": [json...], "new": [json...]}}."""
    rows = []
    for case, by in results.items():
        cell = {k: (spread(r["ns_per_message"] for r in by[k]),
                    spread(r["runs_per_message"] for r in by[k])) for k in ("old", "new")}
        rows.append(f"| {case_name(case)} | {cell['old'][0]} | {cell['new'][0]} | "
                    f"{cell['old'][1]} | {cell['new'][1]} |")
    return rows


def program_rows(results):
    """Per case and program: ns per run (floor) and runs per message, before and after."""
    rows = []
    for case, by in results.items():
        names = {p["program"] for k in ("old", "new") for r in by[k] for p in r["programs"]
                 if p["runs_per_message"] >= 0.01}
        for name in sorted(names):
            cell = {}
            for k in ("old", "new"):
                ps = [p for r in by[k] for p in r["programs"] if p["program"] == name]
                cell[k] = (f"{spread(p['ns_per_run'] for p in ps)} / "
                           f"{spread(p['floor_ns_per_run'] for p in ps)}",
                           spread(p["runs_per_message"] for p in ps))
            rows.append(f"| {case_name(case)} | `{name}` | {cell['old'][0]} | "
                        f"{cell['new'][0]} | {cell['old'][1]} | {cell['new'][1]} |")
    return rows


def sweep_figures(runs):
    """Per strategy, over the traced runs of every thread count: program runs, per-skb
    programs' runs and BPF ns per message, the BPF category's share of the samples, and the
    throughput kept (analysis.passes: traced / untraced of the same configuration and round,
    as the report pairs them)."""
    kept = passes.kept_by_run(runs)
    out = {}
    for r in runs:
        if not (record.ok(r) and record.traced(r)) or not r.get("messages_sent"):
            continue
        me = ((r.get("trace") or {}).get("self") or {})
        progs, m = me.get("programs") or {}, r["messages_sent"]
        f = out.setdefault(r["strategy"], {"runs": [], "skb": [], "ns": [], "bpf": [],
                                           "kept": []})
        f["runs"].append(sum(p.get("runs") or 0 for p in progs.values()) / m)
        f["skb"].append(sum(p.get("runs") or 0 for n, p in progs.items()
                            if n.startswith(PER_SKB)) / m)
        f["ns"].append(me.get("ns_per_message"))
        f["bpf"].append(((r.get("attribution") or {}).get("share") or {}).get("bpf"))
        f["kept"].append(kept.get(record.key_of(r)))
    return out


def sweeps_figures(sweeps):
    """sweep_figures of each sweep (a list of its runs), put together: a sweep's rounds pair
    only with its own."""
    out = {}
    for runs in sweeps:
        for strategy, f in sweep_figures(runs).items():
            into = out.setdefault(strategy, {k: [] for k in f})
            for k, v in f.items():
                into[k] += v
    return out


def sweep_rows(old_sweeps, new_sweeps):
    old, new = sweeps_figures(old_sweeps), sweeps_figures(new_sweeps)
    rows = []
    for s in sorted(set(old) | set(new)):
        o, n = old.get(s, {}), new.get(s, {})
        cells = [f"{spread(o.get(k, []))} → {spread(n.get(k, []))}"
                 for k in ("runs", "skb", "ns", "kept")]
        bpf = [spread([100 * x for x in d.get("bpf", []) if x is not None], "{:.1f}")
               for d in (o, n)]
        rows.append(f"| {s} | " + " | ".join(cells) + f" | {bpf[0]} → {bpf[1]} |")
    return rows


def commit_of(tree):
    cp = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                        capture_output=True, text=True)
    return cp.stdout.strip() or "unknown"


def markdown(a, results, old_sweeps, new_sweeps, started):
    m = harness.machine()
    out = [f"# The tracer's cost, before ({commit_of(a.old_tree)}) and after "
           f"({commit_of(a.new_tree)})", "",
           f"- machine: CPU {m['model']}, kernel {m['kernel']}, SRSO: {srso_state()}",
           f"- started {started}; command: `python -m bench.cost_ab --old-tree {a.old_tree} "
           f"--new-tree {a.new_tree} --rounds {a.rounds} --seconds {a.seconds:g} "
           f"--sweeps {a.sweeps}`", "",
           f"## BPF per message (`bench.per_message`, {a.rounds} rounds, builds in turn)", "",
           "Median (min–max) over the rounds.", "",
           "| case | ns per message, before | after | runs per message, before | after |",
           "|---|---|---|---|---|", *case_rows(results), "",
           "Each program: ns per run / the floor's on its hooks (an empty program), and runs "
           "per message.", "",
           "| case | program | ns per run / floor, before | after | runs per message, before "
           "| after |", "|---|---|---|---|---|---|", *program_rows(results)]
    if a.sweeps:
        out += ["", f"## The default sweep at {SWEEP_SIZE} B (`netio-trace run --sizes "
                f"{SWEEP_SIZE}`, {a.sweeps} per tree, in turn)", "",
                "Per strategy, the traced runs of every thread count and sweep, median "
                "(min–max); kept = traced / untraced of the same configuration and round.", "",
                "| strategy | program runs per message | per-skb programs' runs | BPF ns per "
                "message | throughput kept | BPF category, % of samples |",
                "|---|---|---|---|---|---|", *sweep_rows(old_sweeps, new_sweeps)]
    return "\n".join(out) + "\n"


def measure(a, tmp):
    results = {case: {"old": [], "new": []} for case in CASES}
    for r in range(a.rounds):
        for i, case in enumerate(CASES):
            for k, tree in (("old", a.old_tree), ("new", a.new_tree)):
                res = per_message(a, tree, case, os.path.join(tmp, f"{k}-{r}-{i}.json"))
                if res:
                    results[case][k].append(res)
    old_sweeps, new_sweeps = [], []
    for r in range(a.sweeps):
        old_sweeps.append(sweep(a.old_tree, os.path.join(tmp, f"sweep-old-{r}")))
        new_sweeps.append(sweep(a.new_tree, os.path.join(tmp, f"sweep-new-{r}")))
    return results, old_sweeps, new_sweeps


def main(argv=None):
    a = parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="cost-ab-") as tmp:
        results, old_sweeps, new_sweeps = measure(a, tmp)
    with open(a.out, "w") as f:
        f.write(markdown(a, results, old_sweeps, new_sweeps, started))
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
