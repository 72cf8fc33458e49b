"""The results contract's names (DESIGN.md, "Results contract"): the strategies and transports
a run record may name, in the order reports and plots show them, and a run's key."""

STRATEGIES = ("two-copy", "one-copy", "zero-copy", "per-field")
TRANSPORTS = ("veth", "loopback")


def run_key(strategy, msg_size, threads, transport, repeat, traced=True):
    """A run's name in its sweep; an untraced run's ends in /untraced (a traced run keeps the
    name runs had before the untraced pass existed)."""
    return (f"{strategy}/{int(msg_size)}/{int(threads)}/{transport}/{int(repeat)}"
            + ("" if traced else "/untraced"))
