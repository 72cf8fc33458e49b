"""What a running sweep owns, written down so that the next start can clean up after a driver
that died without a word (SIGKILL, OOM, power cut of the terminal).

While `netio-trace run` works it keeps /run/netio-trace/<pid>.json:
    {"pid", "start": <its start time>, "exe", "children": {"<pid>": {"start", "exe"}},
     "dirs": [<temporary directories>]}
with every workload and tracer process it started (`trace` too: its tracer and the temporary
directory of its trace object). A later start reads every such file whose
owner is gone (no such pid, or a pid whose start time differs: it was reused) and kills only
the recorded processes whose /proc/PID/stat start time and /proc/PID/exe both still match the
record: a recycled pid never matches, and nothing is ever looked up by name. It then deletes
the namespaces that carry the dead owner's pid (`netio-<pid>-…`, see netns.py), the temporary
directories it recorded (only those named for it: `netio-trace-<pid>-…` in the temp directory)
and the file.
"""
import json
import os
import shutil
import signal
import tempfile
import time

from analysis import files
STATE_DIR = "/run/netio-trace"


def start_time(pid):
    """Field 22 of /proc/PID/stat (clock ticks since boot), or None when pid is gone."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    # comm (field 2) may hold blanks and parentheses: split after the last ')'
    rest = data[data.rfind(b")") + 2:].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{int(pid)}/exe")
    except (OSError, ValueError):
        return None


def _same_process(pid, start, exe):
    return start is not None and start_time(pid) == start and exe_of(pid) == exe


class RunState:
    """The state file of this driver. Every method is a no-op where /run is not writable."""

    def __init__(self, directory=STATE_DIR):
        self.pid = os.getpid()
        self.path = os.path.join(directory, f"{self.pid}.json")
        self.directory = directory
        self.data = {"pid": self.pid, "start": start_time(self.pid), "exe": exe_of(self.pid),
                     "children": {}, "dirs": []}
        self.enabled = True

    def _write(self):
        if not self.enabled:
            return
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            with files.atomic_open(self.path) as f:
                json.dump(self.data, f)
        except OSError:
            self.enabled = False      # not root: nothing of ours can outlive us anyway

    def open(self):
        self._write()
        return self

    def add_child(self, pid, exe):
        """Record a process we started, with the binary it runs (or is about to exec)."""
        self.data["children"][str(pid)] = {"start": start_time(pid), "exe": os.path.realpath(exe)}
        self._write()

    def remove_child(self, pid):
        if self.data["children"].pop(str(pid), None) is not None:
            self._write()

    def add_dir(self, path):
        """Record a temporary directory of ours, removed by a later start if we die."""
        self.data["dirs"].append(os.path.abspath(path))
        self._write()

    def remove_dir(self, path):
        if os.path.abspath(path) in self.data["dirs"]:
            self.data["dirs"].remove(os.path.abspath(path))
            self._write()

    def close(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


_current = None


def current():
    """The RunState of this process, if a sweep opened one."""
    return _current


def open_state(directory=STATE_DIR):
    global _current
    _current = RunState(directory).open()
    return _current


def close_state():
    global _current
    if _current is not None:
        _current.close()
        _current = None


def note_child(pid, exe):
    if _current is not None:
        _current.add_child(pid, exe)


def forget_child(pid):
    if _current is not None:
        _current.remove_child(pid)


def owner_alive(record):
    """Is the driver that wrote this record still running (same pid, same start time)?"""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    st = start_time(pid)
    if st is None:
        return False
    return record.get("start") is None or st == record.get("start")


def _kill_recorded(rec):
    """SIGKILL the recorded children still the same processes. Returns [(pid, start)]."""
    victims = []
    for spid, c in (rec.get("children") or {}).items():
        try:
            pid = int(spid)
        except ValueError:
            continue
        if isinstance(c, dict) and _same_process(pid, c.get("start"), c.get("exe")):
            try:
                os.kill(pid, signal.SIGKILL)
                victims.append((pid, c.get("start")))
            except OSError:
                pass
    return victims


def _wait_gone(victims, wait):
    deadline = time.monotonic() + wait
    for pid, st in victims:
        while start_time(pid) == st and time.monotonic() < deadline:
            # a zombie keeps its stat until its (new) parent reaps it
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                        break
            except (OSError, IndexError):
                break
            time.sleep(0.01)


def _remove_dirs(rec):
    """The recorded temporary directories, where they carry the dead owner's pid in their
    name in the temp directory: a record never makes us remove anything else."""
    tmp = os.path.realpath(tempfile.gettempdir())
    for d in rec.get("dirs") or []:
        if not isinstance(d, str):
            continue
        real = os.path.realpath(d)
        if os.path.dirname(real) == tmp and \
                os.path.basename(real).startswith(f"netio-trace-{rec.get('pid')}-"):
            shutil.rmtree(real, ignore_errors=True)


def _read_record(path):
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def reap_dead_runs(directory=STATE_DIR, wait=2.0):
    """Kill the recorded processes of dead drivers (start time and exe must match), remove
    their temporary directories, then drop their state files. Returns ([killed pids], [dead
    owner pids])."""
    killed, dead = [], []
    try:
        names = os.listdir(directory)
    except OSError:
        return killed, dead
    for name in names:
        if not name.endswith(".json") or not name[:-5].isdigit():
            continue
        path = os.path.join(directory, name)
        rec = _read_record(path)
        if rec is None or rec.get("pid") == os.getpid() or owner_alive(rec):
            continue
        dead.append(rec.get("pid"))
        victims = _kill_recorded(rec)
        _wait_gone(victims, wait)
        killed += [pid for pid, _ in victims]
        _remove_dirs(rec)
        try:
            os.unlink(path)
        except OSError:
            pass
    return killed, dead
