"""netio_trace.system.signals: a signal during the report's imports waits until they are done.

The signal is sent from inside matplotlib's ft2font initialisation (a pybind11 extension that
runs Python's enum code there): the moment a Ctrl-C once turned into ImportError("initialization
failed") and an interpreter that aborted at exit.
"""
import os
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# SIGTERM at the first call into enum.py once ft2font's import has begun
SCRIPT = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from netio_trace.system.signals import Guard, import_whole, Interrupted
started, sent = [False], [False]

def audit(event, args):
    if event == "import" and args[0] == "matplotlib.ft2font":
        started[0] = True

def profile(frame, event, arg):
    in_enum = frame.f_code.co_filename.endswith("enum.py")
    if started[0] and not sent[0] and event == "call" and in_enum:
        sent[0] = True
        os.kill(os.getpid(), signal.SIGTERM)

sys.addaudithook(audit)
with Guard():
    sys.setprofile(profile)
    try:
        if sys.argv[2] == "whole":
            import_whole("report.plots")
        else:
            import report.plots
    except Interrupted:
        sys.setprofile(None)
        print("sent", sent[0], "interrupted", "report.plots" in sys.modules, flush=True)
        sys.exit(128 + signal.SIGTERM)
    except BaseException as e:
        sys.setprofile(None)
        print("sent", sent[0], type(e).__name__, e, flush=True)
        sys.exit(1)
print("sent", sent[0], "no signal", flush=True)
"""


def _import_with_signal(how):
    cp = subprocess.run([sys.executable, "-c", SCRIPT, REPO, how], capture_output=True,
                        text=True, timeout=120)
    return cp.returncode, cp.stdout.strip(), cp.stderr


def test_signal_inside_an_extensions_init_waits_for_the_import():
    rc, out, err = _import_with_signal("whole")
    assert out == "sent True interrupted True", (out, err[-2000:])
    assert rc == 128 + signal.SIGTERM, (rc, err[-2000:])
    assert "Fatal Python error" not in err, err[-2000:]


def test_the_same_signal_breaks_a_plain_import():
    """The hazard the test above guards against is real here: without import_whole the same
    signal fails the import (and the interpreter may abort at exit)."""
    rc, out, err = _import_with_signal("plain")
    assert out.startswith("sent True"), (out, err[-2000:])
    assert rc != 128 + signal.SIGTERM and "interrupted" not in out, (rc, out)
