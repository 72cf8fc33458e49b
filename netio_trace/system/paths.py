"""Where our things are: the repository and the build tree (NETIO_BUILD)."""
import os

REPO = os.environ.get("NETIO_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dir():
    return os.path.abspath(os.environ.get("NETIO_BUILD") or os.path.join(REPO, "build"))


def binary(name):
    """Path of one of our binaries (netio-server, netio-client, netio-tracer) in the build tree."""
    return os.path.join(build_dir(), name)


def have_binary(name):
    p = binary(name)
    return os.path.isfile(p) and os.access(p, os.X_OK)
