"""Flame graphs from folded stacks, rendered with inferno.

render(folded, svg, title): one profile. diff(folded_a, folded_b, svg, title): differential
flame graph of b against a (inferno-diff-folded: widths from b, red where b has more samples,
blue where fewer).

Kernel frames carry the "_[k]" suffix (user/profile.c); inferno's `java` palette colours
them orange and shows them without the suffix, user frames in the system red. render() then
colours every frame by its attribution category and adds a legend (report/flame_colors.py);
the differential graph keeps inferno's red and blue, which say what changed.
The inferno binaries are looked up in PATH, then in $CARGO_HOME/bin (~/.cargo/bin), where
`make deps` installs them.
"""
import os
import shutil
import subprocess

from analysis import files
from report import flame_colors
INSTALL_HINT = "install it with `make deps` (cargo install inferno)"
PALETTE = "java"   # "_[k]" kernel frames orange, the rest by name
TIMEOUT = 300


class FlamegraphError(RuntimeError):
    pass


def find_tool(name):
    """Absolute path of an inferno binary; FlamegraphError when it is nowhere."""
    path = shutil.which(name)
    if path:
        return path
    cargo = os.environ.get("CARGO_HOME") or os.path.join(os.path.expanduser("~"), ".cargo")
    cand = os.path.join(cargo, "bin", name)
    if os.path.isfile(cand) and os.access(cand, os.X_OK):
        return cand
    raise FlamegraphError(f"{name} not found in PATH or {os.path.dirname(cand)}: {INSTALL_HINT}")


def _has_samples(path):
    with open(path) as f:
        for line in f:
            stack, _, count = line.strip().rpartition(" ")
            if stack:
                try:
                    if float(count) > 0:
                        return True
                except ValueError:
                    pass
    return False


def _escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _empty_svg(svg_path, title, message):
    """A well-formed SVG that says there is nothing to draw (inferno refuses empty input)."""
    text = (f'<?xml version="1.0" standalone="no"?>\n'
            f'<svg version="1.1" width="1200" height="80" xmlns="http://www.w3.org/2000/svg">\n'
            f'<text x="600" y="24" text-anchor="middle" font-size="17" '
            f'font-family="Verdana">{_escape(title)}</text>\n'
            f'<text x="600" y="56" text-anchor="middle" font-size="12" '
            f'font-family="Verdana">{_escape(message)}</text>\n</svg>\n')
    _write_atomic(svg_path, text.encode())


def _write_atomic(path, data):
    with files.atomic_open(path, "wb") as f:
        f.write(data)


def _run(argv, stdin=None):
    try:
        p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT, check=False)
    except OSError as e:
        raise FlamegraphError(f"{argv[0]}: {e}") from e
    except subprocess.TimeoutExpired as e:
        raise FlamegraphError(f"{os.path.basename(argv[0])} timed out after {TIMEOUT} s") from e
    if p.returncode != 0:
        msg = p.stderr.decode(errors="replace").strip().splitlines()
        raise FlamegraphError(f"{os.path.basename(argv[0])} exited {p.returncode}"
                              + (f": {msg[-1]}" if msg else ""))
    return p.stdout


def _flamegraph_argv(title, subtitle=None, extra=()):
    argv = [find_tool("inferno-flamegraph"), "--title", title, "--colors", PALETTE,
            "--countname", "samples"]
    if subtitle:
        argv += ["--subtitle", subtitle]
    return argv + list(extra)


def render(folded_path, svg_path, title, subtitle=None, by_category=True):
    """Render folded stacks to an SVG flame graph, its frames coloured by attribution
    category with a legend (report/flame_colors.py) unless by_category is False (then
    inferno's palette). Returns svg_path."""
    argv = _flamegraph_argv(title, subtitle)   # fails first when inferno is missing
    if not _has_samples(folded_path):
        _empty_svg(svg_path, title, "no samples")
        return svg_path
    svg = _run(argv + [folded_path])
    if by_category:
        svg = flame_colors.color_by_category(svg.decode()).encode()
    _write_atomic(svg_path, svg)
    return svg_path


def diff(folded_a, folded_b, svg_path, title, subtitle=None, normalize=True):
    """Differential flame graph: b's stacks, coloured by the change from a to b.

    normalize scales a's counts to b's total first (runs of different lengths)."""
    diff_tool = find_tool("inferno-diff-folded")
    argv = _flamegraph_argv(title, subtitle)
    if not _has_samples(folded_a) or not _has_samples(folded_b):
        _empty_svg(svg_path, title, "no samples in "
                   + " and ".join(os.path.basename(p) for p in (folded_a, folded_b)
                                  if not _has_samples(p)))
        return svg_path
    d = _run([diff_tool] + (["--normalize"] if normalize else []) + [folded_a, folded_b])
    _write_atomic(svg_path, _run(argv, stdin=d))
    return svg_path


if __name__ == "__main__":   # python -m report.flamegraph FOLDED SVG [TITLE]
    import sys
    if len(sys.argv) < 3:
        sys.exit("usage: python -m report.flamegraph FOLDED SVG [TITLE]")
    render(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else sys.argv[1])
