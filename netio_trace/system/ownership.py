"""Results belong to the user who asked for them: under sudo, the files we write are chowned
to SUDO_UID/SUDO_GID instead of staying root's: the user who ran sudo can read, move and
delete them."""
import os


def invoking_user(environ=None):
    """(uid, gid) of the user who ran us through sudo, or None (not root, or not via sudo)."""
    env = os.environ if environ is None else environ
    if os.geteuid() != 0 or not env.get("SUDO_UID"):
        return None
    try:
        uid = int(env["SUDO_UID"])
        gid = int(env.get("SUDO_GID") or uid)
    except ValueError:
        return None
    return (uid, gid) if uid > 0 else None


def give_back(*paths, environ=None):
    """chown each path (a directory: everything under it) to the invoking user; nothing when
    there is none. Files that vanish meanwhile are skipped."""
    who = invoking_user(environ)
    if who is None:
        return 0
    n = 0
    for path in paths:
        if not path or not os.path.lexists(path):
            continue
        for p in _tree(path):
            try:
                os.lchown(p, *who)
                n += 1
            except FileNotFoundError:
                pass
    return n


def _tree(path):
    yield path
    if os.path.isdir(path) and not os.path.islink(path):
        for d, dirs, files in os.walk(path):
            for name in dirs + files:
                yield os.path.join(d, name)
