"""The kernel matrix's ladder table: kernel x probe point -> rung (or "unavailable: why").

python tests/vm/rung_table.py NAME=TRACE.json ...: each TRACE.json a snapshot of netio-tracer
(its `attach`, `attach_why` and `bpf_build`) taken on kernel NAME; prints the table and, below it,
why each point that is unavailable or inferred is so.
"""
import json
import sys

POINTS = ("tx_bytes", "tx_copy", "pinning", "fallback_copy", "zc_completion", "rx_copy",
          "rx_mapped", "rx_discarded", "rx_spliced", "syscalls", "stacks")


def load(arg):
    name, _, path = arg.partition("=")
    try:
        with open(path) as f:
            return name, json.load(f)
    except (OSError, ValueError) as e:
        return name, {"error": f"no ladder ({e})"}


def cell(snap, point):
    if "error" in snap:
        return "?"
    return (snap.get("attach") or {}).get(point, "?")


def table(kernels):
    """The table's lines for [(name, snapshot)]."""
    cols = [name for name, _ in kernels]
    width = max(12, *(len(c) for c in cols))
    rows = [["probe point"] + cols]
    for p in POINTS:
        rows.append([p] + [cell(s, p) for _, s in kernels])
    rows.append(["bpf build"] + [(s.get("bpf_build") or {}).get("name", "?") for _, s in kernels])
    lines = ["  ".join(c.ljust(width if i else 14) for i, c in enumerate(r)) for r in rows]
    for name, s in kernels:
        if "error" in s:
            lines.append(f"{name}: {s['error']}")
            continue
        why = s.get("attach_why") or {}
        for p in POINTS:
            rung = cell(s, p)
            if rung in ("unavailable", "inferred"):
                lines.append(f"{name} {p}: {rung}: {why.get(p) or 'no reason given'}")
        for figure, reason in (s.get("unavailable") or {}).items():
            lines.append(f"{name} {figure}: unavailable: {reason}")
    return lines


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("\n".join(table([load(a) for a in argv])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
