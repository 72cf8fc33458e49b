"""The machine a run happened on (kept in every run, so a report needs nothing but runs.jsonl)."""
import gzip
import os
import platform


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def hypervisor():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "")
        if " hypervisor" in flags:
            vendor = None
            try:
                with open("/sys/class/dmi/id/sys_vendor") as f:
                    vendor = f.read().strip() or None
            except OSError:
                pass
            return vendor or "virtual machine"
    except OSError:
        pass
    return None


def sysctl(name):
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


def has_pmu():
    """A core PMU in sysfs (`cpu`, or a hybrid CPU's `cpu_core`/`cpu_atom`): hardware cycles
    can be counted here. A VM without a virtual PMU has none."""
    devs = "/sys/bus/event_source/devices"
    return any(os.path.exists(os.path.join(devs, d, "type")) for d in ("cpu", "cpu_core", "cpu_atom"))


def kernel_hz():
    """CONFIG_HZ of the running kernel (the tick's rate per busy CPU, which the tick sampler
    samples at), from /proc/config.gz or /boot/config-<release>; None when neither says."""
    for path, opener in (("/proc/config.gz", gzip.open),
                         (f"/boot/config-{os.uname().release}", open)):
        try:
            with opener(path, "rt") as f:
                for line in f:
                    if line.startswith("CONFIG_HZ="):
                        return int(line.split("=", 1)[1])
        except (OSError, ValueError):
            continue
    return None


def info():
    u = os.uname()
    return {"hostname": u.nodename, "kernel": u.release, "kernel_version": u.version,
            "arch": u.machine, "cpu": cpu_model(), "cores": os.cpu_count(),
            "memory_gib": memory_gib(), "virtualization": hypervisor(),
            "default_cc": sysctl("net.ipv4.tcp_congestion_control"),
            "optmem_max": sysctl("net.core.optmem_max")}
