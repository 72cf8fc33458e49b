"""Files and tools every layer uses: the atomic writer and the tool finder."""
import contextlib
import os
import shutil

_EXTRA_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def find_tool(name):
    """Absolute path of a tool, or None. Looks in PATH, the sbin directories (sudo's PATH may
    lack them), and cargo's bin directories (inferno is installed with cargo)."""
    p = shutil.which(name)
    if p:
        return p
    dirs = list(_EXTRA_DIRS)
    cargo = os.environ.get("CARGO_HOME")
    if cargo:
        dirs.append(os.path.join(cargo, "bin"))
    dirs.append(os.path.expanduser("~/.cargo/bin"))
    sudo_user = os.environ.get("SUDO_USER")
    if sudo_user:
        dirs.append(os.path.expanduser(f"~{sudo_user}/.cargo/bin"))
    dirs.append("/root/.cargo/bin")
    for d in dirs:
        c = os.path.join(d, name)
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@contextlib.contextmanager
def atomic_open(path, mode="w", **kw):
    """Write path whole or not at all: into path.tmp, synced, then renamed over path (an
    interrupted report or sweep never leaves a truncated file). The .tmp is removed on error."""
    tmp = path + ".tmp"
    try:
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
