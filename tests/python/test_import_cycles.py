"""scripts/import-cycles: the repository has no import cycle, in Python (its packages' modules)
or in C (the files of each program, by the symbols they name of each other); and the script
finds the cycles it is meant to find, on small trees made here."""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, "scripts", "import-cycles")


def _load():
    loader = importlib.machinery.SourceFileLoader("import_cycles", SCRIPT)
    spec = importlib.util.spec_from_loader("import_cycles", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


ic = _load()


def _tree(root, files):
    for path, text in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _run(repo=REPO):
    return subprocess.run([sys.executable, SCRIPT, "--repo", str(repo)], capture_output=True,
                          text=True, timeout=120)


def test_the_repository_has_no_import_cycle():
    p = _run()
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "import-cycles: none"


# (files, the cycles they make): an import inside a function, relative and dynamic imports,
# and packages that import nothing themselves
PY_TREES = {
    "hidden": ({"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n",
                "pkg/b.py": "def f():\n    from pkg.a import x\n", "pkg/c.py": "import pkg.a\n"},
               [["pkg.a", "pkg.b"]]),
    "relative": ({"pkg/__init__.py": "", "pkg/sub/__init__.py": "",
                  "pkg/sub/a.py": "from ..b import thing\n",
                  "pkg/b.py": "import importlib\nimportlib.import_module('pkg.sub.a')\n"},
                 [["pkg.b", "pkg.sub.a"]]),
    "no-cycle": ({"pkg/__init__.py": '"""doc"""\n', "pkg/a.py": "from pkg import b\n",
                  "pkg/b.py": "import pkg\n", "notapkg/x.py": "import pkg.a\n"}, []),
}


@pytest.mark.parametrize("name", sorted(PY_TREES))
def test_python_cycles_are_found(tmp_path, name):
    files, want = PY_TREES[name]
    _tree(tmp_path, files)
    graph, paths = ic.python_graph(str(tmp_path))
    assert [c for c, _loop in ic.cycles(graph)] == want
    assert "notapkg.x" not in paths


def test_a_cycle_is_printed_with_where_each_import_is(tmp_path):
    _tree(tmp_path, PY_TREES["hidden"][0])
    p = _run(tmp_path)
    assert p.returncode == 1
    assert "python cycle of 2: pkg.a, pkg.b" in p.stdout
    assert "pkg/b.py:2" in p.stdout and "pkg.c" not in p.stdout


def test_c_files_that_call_each_other_are_a_cycle(tmp_path):
    _tree(tmp_path, {"user/loop.c": """\
        #include "tracer.h"
        volatile int stop_signal;   /* read by run.c */
        static int helper(void) { return 1; }
        void periodic(void) { helper(); }
        int main(void) { return run(); }
        """,
                     "user/run.c": """\
        #include "tracer.h"
        int run(void) { while (!stop_signal) periodic(); return 0; }
        """,
                     "user/leaf.c": """\
        static int helper(void) { return 2; }     /* its own, not loop.c's */
        struct s { int periodic; };
        int leaf(struct s *x) { return x->periodic + helper(); }
        """,
                     "user/tracer.h": "#define RUN_ONCE() run()\n"})
    graph = ic.c_graph(str(tmp_path), programs=(("user",),))
    assert graph["user/loop.c"] == {"user/run.c": "run"}
    assert set(graph["user/run.c"]) == {"user/loop.c"}
    assert graph["user/leaf.c"] == {}
    assert [c for c, _loop in ic.cycles(graph)] == [["user/loop.c", "user/run.c"]]


def test_a_macro_names_what_it_expands_to(tmp_path):
    _tree(tmp_path, {"user/a.c": '#include "a.h"\nint a(void) { return CALL_B(); }\n',
                     "user/b.c": "int b(void) { return 0; }\n",
                     "user/a.h": "#define CALL_B() \\\n\tb()\n"})
    graph = ic.c_graph(str(tmp_path), programs=(("user",),))
    assert graph["user/a.c"] == {"user/b.c": "b"}
