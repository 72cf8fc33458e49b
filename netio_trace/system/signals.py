"""Ctrl-C, SIGTERM and SIGHUP during a sweep: raised as Interrupted at a safe point.

Inside `critical()` (creating or removing namespaces, killing and reaping workloads, appending
to runs.jsonl) a signal is only noted, and raised when the section ends, so an interruption
never lands between `ip netns add` and the bookkeeping that removes it. Only the first signal
counts; later ones are ignored so that the cleanup finishes.
"""
import contextlib
import importlib
import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class _State:
    depth = 0
    pending = None
    fired = None
    installed = False


def _handler(signum, frame):
    if _State.fired is not None:
        return
    _State.fired = signum
    if _State.depth > 0:
        _State.pending = signum
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def critical():
    """A section that a signal does not cut in two."""
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
    if _State.depth == 0 and _State.pending is not None:
        signum, _State.pending = _State.pending, None
        raise Interrupted(signum)


def import_whole(name):
    """Import a module with signals held until it is loaded. An exception raised inside a
    pybind11 extension's initialisation (matplotlib's ft2font runs Python's enum code there)
    becomes ImportError("initialization failed") and leaves a half-made module that aborts the
    interpreter at exit."""
    with critical():
        return importlib.import_module(name)


class Guard:
    """Install the handlers for the duration of a sweep."""

    def __init__(self):
        self.old = {}

    def __enter__(self):
        _State.depth, _State.pending, _State.fired = 0, None, None
        for s in SIGNALS:
            self.old[s] = signal.signal(s, _handler)
        _State.installed = True
        return self

    @property
    def fired(self):
        return _State.fired

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)
        _State.installed = False
        return False
