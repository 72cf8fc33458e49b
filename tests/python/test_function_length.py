"""A function fits on a screen: none over MAX_LINES in the C sources and headers (a header's
static inline functions are functions too) and the Python sources, except the ones listed here
with the reason they are still long. An exception that is no longer needed fails too, so the
list only shrinks."""
import ast
import os
import re

from conftest import REPO

MAX_LINES = 120
ROOTS = ("netio_trace", "analysis", "report", "bench", "common", "user", "workloads", "bpf")
STILL_LONG = {
}


def _python_functions(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield n.name, n.end_lineno - n.lineno + 1


C_HEADER = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\(")


def _c_functions(path):
    """(name, lines) of each function defined at column 0: a header line, then `{` alone at
    column 0 within a few lines, to the `}` at column 0 (kernel style)."""
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = C_HEADER.match(lines[i])
        if m and not lines[i].rstrip().endswith(";"):
            j = next((k for k in range(i, min(i + 6, len(lines))) if lines[k] == "{"), None)
            if j is not None:
                end = next(k for k in range(j, len(lines)) if lines[k].startswith("}"))
                yield m.group(1), end - i + 1
                i = end
        i += 1


def _all_functions():
    for root in ROOTS:
        for d, _, names in os.walk(os.path.join(REPO, root)):
            for name in names:
                path = os.path.join(d, name)
                rel = os.path.relpath(path, REPO)
                if name.endswith(".py"):
                    found = _python_functions(path)
                elif name.endswith((".c", ".h")):
                    found = _c_functions(path)
                else:
                    continue
                for fn, n in found:
                    yield rel, fn, n


def test_no_function_longer_than_a_screen():
    long = {(rel, fn): n for rel, fn, n in _all_functions() if n > MAX_LINES}
    unexplained = {k: n for k, n in long.items() if k not in STILL_LONG}
    assert not unexplained, f"functions over {MAX_LINES} lines: {unexplained}"
    split_already = set(STILL_LONG) - set(long)
    assert not split_already, f"no longer long, drop from STILL_LONG: {split_already}"


def test_the_c_scanner_sees_functions():
    found = {(rel, fn) for rel, fn, _ in _all_functions()}
    assert ("user/tracer.c", "main") in found and ("workloads/server.c", "main") in found
    assert ("bpf/thread.bpf.h", "sc_finish") in found
