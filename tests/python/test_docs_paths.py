"""The docs name what exists: every path and code symbol that README.md, DEVELOPERS.md and
docs/*.md name in backticks is still in the repository, so that a move or a rename fails here
instead of leaving the map pointing at nothing.

Which backticked spans are checked (inline `code` only; fenced blocks hold command lines and
examples, and are skipped). Anything else in backticks (command lines, flags, JSON fields of
the contract, environment variables, kernel names) is left alone.
- A path: a span without white space, `<`, `>`, `$` or `=` that starts with one of the
  repository's top-level entries followed by `/` (`user/tracer.c`, `bpf/`,
  `tests/vm/kernels`), or a bare file name ending in .c, .h, .py or .sh (`tracer.c`). The
  first must exist relative to the repository, the second must be the name of a file the
  repository tracks (a `*` in either must match at least one). What .gitignore ignores
  (build trees, bench/profiles/) and the headers the build generates (GENERATED) are output,
  not checked. A `:LINE` or `:NAME` after a path is dropped.
- A symbol: a span that is a call, `name()` or `mod.name(args)`, whose name is not the
  system's: not the running kernel's (a name in its BTF, /sys/kernel/btf/vmlinux), libc's or
  libbpf's (their dynamic symbols), nor one of NOT_OURS (kernel functions the BTF does not
  list: inline ones, older kernels' names). It must be defined in the sources: a Python
  `def`, `class` or assignment (read with ast), or a C function (defined or declared at the
  start of a line), macro, BPF program (`BPF_PROG(name`), enum constant or struct field.
  With a qualifier (`procs.wait_for_exit()`, `GatedProcess.end()`), the name must be
  defined in the file named after the qualifier (`procs.py`) or in the one whose class it
  is. A path with a name after its last dot (`analysis/record.build_run`) is that file's
  name, checked the same way.
- `struct X`, `enum X` and `union X`: defined with a body in the C sources, or the kernel's.
- A path followed by backticked names in parentheses, `` `analysis/results.py`
  (`CSV_COLUMNS`, `csv_row`) ``: each name is defined in that file. A Python name bound only by
  an import or by `X = other.X` is another file's, not this one's.
"""
import ast
import fnmatch
import functools
import glob
import os
import re
import subprocess

import pytest

from conftest import REPO

DOCS = ["README.md", "DEVELOPERS.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
SOURCE_EXT = (".c", ".h", ".py", ".sh")
# headers the build writes (Makefile: bpftool, scripts/blazesym.sh), named in the docs
GENERATED = ("vmlinux.h", "*.skel.h", "blazesym.h")
# kernel functions the running kernel's BTF does not list: inline ones, and the names of the
# older kernels of the matrix
NOT_OURS = {"copy_linear_skb", "sock_zerocopy_callback"}
SYSTEM_LIBS = ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libbpf.so.1",
               "/lib/aarch64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libbpf.so.1")

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$")
_TYPE = re.compile(r"^(struct|enum|union) ([A-Za-z_]\w*)$")
# `path` (`a`, `b`): the names in parentheses right after a path
_PATH_NAMES = re.compile(r"`([^`\s]+)`\s*\(((?:`[A-Za-z_]\w*`(?:,\s*|\s*\)))+)")
_C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "else", "do", "case"}


def _git(*args):
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


TRACKED = [p for p in _git("ls-files").split() if os.path.exists(os.path.join(REPO, p))]
TOP = {p.split("/")[0] for p in TRACKED}
BASENAMES = {os.path.basename(p) for p in TRACKED}
SOURCES = [p for p in TRACKED if p.endswith(SOURCE_EXT) and not p.startswith("third_party/")]


def _read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def _py_names(text):
    """What a Python file defines: functions and classes at any depth, names assigned at
    module or class level, but not `X = other.X` (another module's name bound again)."""
    names = set()
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for scope in scopes:
        for node in scope.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            value = getattr(node, "value", None)
            for t in targets:
                for n in ([t] if isinstance(t, ast.Name) else
                          t.elts if isinstance(t, (ast.Tuple, ast.List)) else []):
                    if isinstance(n, ast.Name) and not (isinstance(value, ast.Attribute)
                                                        and value.attr == n.id):
                        names.add(n.id)
    return names


def _c_names(text):
    """What a C file defines: functions (at the start of a line), macros, BPF programs,
    enum constants, struct fields, and `struct X` / `enum X` / `union X` with a body."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    names = set(re.findall(r"^(?:[A-Za-z_][\w \t\*]*[ \t\*])?([A-Za-z_]\w*)[ \t]*\(", text, re.M))
    names -= _C_KEYWORDS
    names |= set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", text, re.M))
    names |= set(re.findall(r"\bBPF_\w*PROG\w*\s*\(\s*(\w+)", text))
    names |= set(re.findall(r"^[ \t]+([A-Za-z_]\w*)[ \t]*(?:=[^=;,\n]*)?,", text, re.M))
    names |= set(re.findall(r"^[ \t]+[\w \t\*]+[ \t\*]([A-Za-z_]\w*)[ \t]*(?:\[[^\]]*\])?"
                            r"[ \t]*(?::[ \t]*\d+)?;", text, re.M))
    names |= {f"{k} {n}" for k, n in re.findall(r"\b(struct|enum|union)\s+(\w+)\s*\{", text)}
    return names


@functools.lru_cache(maxsize=None)
def names_of(path):
    text = _text(path)
    return _py_names(text) if path.endswith(".py") else _c_names(text)


@functools.lru_cache(maxsize=None)
def system_names():
    """The kernel's BTF names, and libc's and libbpf's dynamic symbols."""
    names = set(NOT_OURS)
    try:
        with open("/sys/kernel/btf/vmlinux", "rb") as f:
            names |= {n.decode(errors="replace") for n in f.read().split(b"\0") if n}
    except OSError:
        pass
    for lib in SYSTEM_LIBS:
        if os.path.exists(lib):
            out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
                                 text=True).stdout
            names |= {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()}
    return names


def _ignored(path):
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0


def spans(doc):
    """[(line, backticked text)] of the doc's inline code."""
    text = _read(doc)
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [(text.count("\n", 0, m.start()) + 1, m.group(1).strip()) for m in _SPAN.finditer(text)]


def as_path(span):
    """The repository path a span names, or None when it names none."""
    if re.search(r"[\s<>$=]", span) or span.startswith(("-", "/", "./", "http")):
        return None
    path = re.sub(r":[\w.]+$", "", span)
    if "/" in path:
        return path if path.split("/")[0] in TOP else None
    return path if path.endswith(SOURCE_EXT) else None


def path_missing(path):
    if "/" not in path:
        if any(fnmatch.fnmatch(path, g) for g in GENERATED):
            return False
        return not any(fnmatch.fnmatch(b, path) for b in BASENAMES)
    if "*" in path:
        return not glob.glob(os.path.join(REPO, path))
    if os.path.exists(os.path.join(REPO, path)):
        return False
    return not _ignored(path)


@functools.lru_cache(maxsize=None)
def _text(path):
    return _read(path)


def defines(path, name):
    # the text first: parsing only the files that hold the name at all
    return path in SOURCES and name.split()[-1] in _text(path) and name in names_of(path)


def symbol_missing(qualified):
    parts = qualified.split(".")
    name = parts[-1]
    if len(parts) == 1:
        return not any(defines(p, name) for p in SOURCES)
    qual = parts[-2]
    owners = [p for p in SOURCES if os.path.basename(p) in (f"{qual}.py", f"{qual}.c",
                                                             f"{qual}.h")]
    owners += [p for p in SOURCES if p.endswith(".py") and
               re.search(rf"^\s*class\s+{re.escape(qual)}\b", _text(p), re.M)]
    return not any(defines(p, name) for p in owners)


def type_missing(kind, name):
    return name not in system_names() and \
        not any(defines(p, f"{kind} {name}") for p in SOURCES if p.endswith((".c", ".h")))


def _path_symbol(path):
    """(file, name) of `dir/module.name`, or None."""
    m = re.match(r"^(.+)\.(\w+)$", path)
    if m and os.path.isfile(os.path.join(REPO, m.group(1) + ".py")):
        return m.group(1) + ".py", m.group(2)
    return None


def problems(doc):
    out = []
    for line, span in spans(doc):
        path = as_path(span)
        call = _CALL.match(span)
        ctype = _TYPE.match(span)
        if path is not None:
            ps = _path_symbol(path) if path_missing(path) else None
            if ps and not defines(*ps):
                out.append(f"{doc}:{line}: `{span}`: {ps[1]} is not defined in {ps[0]}")
            elif not ps and path_missing(path):
                out.append(f"{doc}:{line}: `{span}`: no such path")
        elif call and call.group(1).split(".")[-1] not in system_names():
            if symbol_missing(call.group(1)):
                out.append(f"{doc}:{line}: `{span}`: {call.group(1)} is defined nowhere")
        elif ctype and type_missing(*ctype.groups()):
            out.append(f"{doc}:{line}: `{span}`: not defined")
    text = _FENCE.sub("", _read(doc))
    for m in _PATH_NAMES.finditer(text):
        path = as_path(m.group(1))
        if path is None or "/" not in path or not path.endswith(SOURCE_EXT) or path_missing(path):
            continue
        for name in re.findall(r"`(\w+)`", m.group(2)):
            if not defines(path, name):
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{doc}:{line}: `{name}` is not defined in {path}")
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_what_the_docs_name_exists(doc):
    assert problems(doc) == []


def test_the_rules_catch_what_moved():
    assert as_path("user/tracer.c") == "user/tracer.c" and as_path("tracer.c") == "tracer.c"
    for span in ("--no-sample", "netio-trace run", "zc_tx_bytes", "results/<time>/",
                 "raw/<run>/server.json", "/sys/kernel/tracing", "runs.jsonl"):
        assert as_path(span) is None, span
    assert path_missing("user/nothing_here.c") and path_missing("nothing_here.py")
    assert not path_missing("bpf/*.bpf.c") and not path_missing("vmlinux.h")
    assert symbol_missing("no_such_function") and not symbol_missing("tracer_bpf_poll")
    assert not symbol_missing("procs.wait_for_exit") and symbol_missing("procs.build_run")
    assert not symbol_missing("GatedProcess.end")
    assert _path_symbol("analysis/record.build_run") == ("analysis/record.py", "build_run")
    # a name imported or re-bound from another module is that module's, not this one's
    assert not defines("report/plots.py", "CAT_COLORS")
    assert defines("report/colors.py", "CAT_COLORS")
    assert not defines("analysis/results.py", "CATEGORIES")
    assert defines("analysis/attribution.py", "CATEGORIES")
    assert type_missing("struct", "no_such_struct") and not type_missing("struct", "tracer")
    assert "recv" in system_names() and "tracer_bpf_poll" not in system_names()
