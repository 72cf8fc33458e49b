"""netio-tracer's options are one table (user/tracer.c, `options[]`), from which getopt_long's
`long_opts` and `--help` are made: each option of the table is in `--help` with its
description, `--help` names no other, parse_option() has a case for each, and
docs/tracer.md names each."""
import os
import re
import subprocess

from conftest import REPO, TRACER, needs_built

SOURCE = os.path.join(REPO, "user", "tracer.c")
DOC = os.path.join(REPO, "docs", "tracer.md")
_ROW = re.compile(r'^\t\{ "([a-z][a-z-]*)", (NULL|"[^"]*"), (\w+|\'.\'),', re.M)


def _source():
    with open(SOURCE) as f:
        return f.read()


def table():
    """[(name, arg or None, val)] of options[], in order."""
    text = _source()
    block = text[text.index("static const struct option_doc options[] = {"):]
    block = block[:block.index("\n};")]
    return [(n, None if a == "NULL" else a.strip('"'), v) for n, a, v in _ROW.findall(block)]


def help_options(text):
    """{option name: its description} of each option line of --help."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^  (?:-\w, )?--([a-z][a-z-]*)(?: \S+)?(?:\s{2,}(\S.*))?$", line)
        if m:
            name = m.group(1)
            out[name] = m.group(2) or ""
        elif name and line.startswith(" " * 18) and line.strip():
            out[name] = (out[name] + " " + line.strip()).strip()
        else:
            name = None
    return out


def test_the_table_is_read():
    rows = table()
    names = [n for n, _a, _v in rows]
    assert len(rows) >= 20 and len(set(names)) == len(names)
    assert {"no-sample", "no-counters", "duration", "verbose", "bpf-stats", "help"} <= set(names)
    assert ("verbose", None, "'v'") in rows and ("bpf-stats", "M", "OPT_BPF_STATS") in rows


def test_parse_option_has_a_case_for_each():
    text = _source()
    body = text[text.index("static int parse_option("):]
    body = body[:body.index("\n}\n")]
    cases = set(re.findall(r"case (\w+|'.'):", body))
    assert {v for _n, _a, v in table()} <= cases


@needs_built("netio-tracer")
def test_help_describes_every_option_and_no_other():
    cp = subprocess.run([TRACER, "--help"], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0 and cp.stdout.startswith("usage: netio-tracer")
    described = help_options(cp.stdout)
    names = [n for n, _a, _v in table()]
    assert sorted(described) == sorted(names)
    for name in names:
        assert len(described[name]) > 5, f"--{name} has no description"
    for name, arg, _v in table():
        if arg:
            assert re.search(rf"^  (?:-\w, )?--{name} {re.escape(arg)}\b", cp.stdout, re.M), name
    assert "  -- CMD ARGS" in cp.stdout


@needs_built("netio-tracer")
def test_a_short_option_is_the_same_as_its_long_one():
    short = subprocess.run([TRACER, "-h"], capture_output=True, text=True, timeout=30)
    long_ = subprocess.run([TRACER, "--help"], capture_output=True, text=True, timeout=30)
    assert short.returncode == 0 and short.stdout == long_.stdout
    bad = subprocess.run([TRACER, "--no-such-option"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "usage: netio-tracer" in bad.stderr


def test_docs_name_every_option():
    with open(DOC) as f:
        doc = f.read()
    missing = [n for n, _a, _v in table() if f"--{n}" not in doc]
    assert not missing, f"docs/tracer.md does not name --{', --'.join(missing)}"
