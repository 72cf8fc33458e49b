"""Message sizes: parse "4096", "4K", "4KiB", "1M" and print them back compactly.

Suffixes are binary (K = 1024, M = 1024², G = 1024³), as for iperf3's -l. The workloads take
8 B to 64 MiB (a message is 8 fields of size/8 bytes), so that is the accepted range.
"""
import re

MIN_SIZE = 8
MAX_SIZE = 64 * 1024 * 1024

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024,
          "m": 1024 ** 2, "mb": 1024 ** 2, "mib": 1024 ** 2,
          "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text):
    """One size in bytes; ValueError with a message fit for the user on anything else."""
    s = str(text).strip()
    m = _SIZE_RE.match(s)
    if not m:
        raise ValueError(f"size {s!r} is not a byte count (use e.g. 256, 4096, 4K, 64K, 1M)")
    unit = m.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"size {s!r} has an unknown unit {m.group(2)!r} (use K, M or G)")
    value = int(m.group(1)) * _UNITS[unit]
    if value < MIN_SIZE or value > MAX_SIZE:
        raise ValueError(f"size {s!r} is out of range: a message is {MIN_SIZE} B to "
                         f"{MAX_SIZE // 2**20} MiB (8 fields of size/8 bytes)")
    return value


def parse_sizes(text):
    """A comma-separated list of sizes, sorted, duplicates removed."""
    items = [p for p in str(text).split(",")]
    if not any(p.strip() for p in items):
        raise ValueError("--sizes is empty")
    out = []
    for p in items:
        if not p.strip():
            raise ValueError(f"--sizes {text!r} has an empty item")
        out.append(parse_size(p))
    return sorted(set(out))


def format_size(n):
    """4096 -> "4K", 1048576 -> "1M", 256 -> "256", 1536 -> "1536"."""
    n = int(n)
    for unit, mult in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def format_bytes(n):
    """Human byte amount for prose: 1.5 GiB, 12.0 MiB, 512 B."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit, mult in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if abs(n) >= mult:
            return f"{n / mult:.1f} {unit}"
    return f"{n:.0f} B"
