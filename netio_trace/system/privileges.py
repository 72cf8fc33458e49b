"""What this process may do: the capabilities a tracing run needs, read from /proc."""
import os

CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39


def effective_caps(status_text=None):
    """The effective capability mask of this process (int)."""
    if status_text is None:
        try:
            with open("/proc/self/status") as f:
                status_text = f.read()
        except OSError:
            return 0
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def missing_capabilities(caps=None, need_bpf=True, need_netadmin=True):
    """Names of the capabilities missing for a run ([] when everything is there).
    CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON (kernels before 5.8, or granted so)."""
    if caps is None:
        caps = effective_caps()

    def has(bit):
        return bool(caps >> bit & 1)

    missing = []
    if need_bpf:
        if not (has(CAP_BPF) or has(CAP_SYS_ADMIN)):
            missing.append("CAP_BPF")
        if not (has(CAP_PERFMON) or has(CAP_SYS_ADMIN)):
            missing.append("CAP_PERFMON")
    if need_netadmin and not has(CAP_NET_ADMIN):
        missing.append("CAP_NET_ADMIN")
    return missing


def privilege_error(command, need_bpf=True, need_netadmin=True, caps=None):
    """One line for the user, or None when the process may go on."""
    missing = missing_capabilities(caps, need_bpf=need_bpf, need_netadmin=need_netadmin)
    if not missing:
        return None
    if os.geteuid() != 0:
        return (f"netio-trace {command}: needs root (missing {', '.join(missing)}); "
                f"run it with sudo")
    return (f"netio-trace {command}: root, but without {', '.join(missing)} (a container or a "
            f"restricted user namespace?); run it with full root privileges")
