#!/usr/bin/env bash
# make vmtest: the tracer's tests inside Debian's stock kernel (6.1: fentry/fexit and kprobes
# work there, sock_send_length does not exist), booted with virtme-ng under QEMU/TCG (KVM
# hangs on this machine, so --disable-kvm; slow: the subset is short).
#
# Runs tests/integration/test_tracer.py with NETIO_VMTEST=1 (--probe, one-copy and zero-copy
# over veth at 64 KiB on the fentry rung, the same with --attach kprobe), prints
# "N passed, N failed" and exits non-zero on any failure.
#
# Environment: NETIO_BUILD (binaries, default <repo>/build), NETIO_VM_KERNEL (default: the
# newest /boot/vmlinuz-*), NETIO_VM_TIMEOUT (seconds, default 420), NETIO_VM_KEEP=1 (keep the
# guest's logs).
set -uo pipefail

root="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
build="${NETIO_BUILD:-$root/build}"
kernel="${NETIO_VM_KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)}"
timeout_s="${NETIO_VM_TIMEOUT:-420}"
python="$root/.venv/bin/python"
vng="$root/.venv/bin/vng"

fail() {
    echo "vmtest: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root"
[ -n "$kernel" ] && [ -r "$kernel" ] || fail "no kernel image (set NETIO_VM_KERNEL; Debian: apt-get install linux-image-amd64)"
[ -x "$vng" ] || fail "virtme-ng not installed in .venv (make deps)"
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 not installed (make deps)"
for b in netio-tracer netio-server netio-client; do
    [ -x "$build/$b" ] || fail "$build/$b not built (make BUILD=...)"
done
kver="$(basename "$kernel" | sed 's/^vmlinuz-//')"
[ -d "/lib/modules/$kver" ] || echo "vmtest: warning: no /lib/modules/$kver (veth may be missing)" >&2

scratch="$(mktemp -d /tmp/netio-vmtest.XXXXXX)"
if [ -n "${NETIO_VM_KEEP:-}" ]; then
    echo "vmtest: logs kept in $scratch" >&2
else
    trap 'rm -rf "$scratch"' EXIT
fi

# What runs inside the guest. The root file system is the host's, read-only; /tmp is a
# writable overlay and $scratch the host directory shared read-write.
cat >"$scratch/inner.sh" <<INNER
#!/bin/sh
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
mountpoint -q /sys/fs/bpf || mount -t bpf bpffs /sys/fs/bpf
mkdir -p /var/run/netns
cd "$root"
echo "guest kernel \$(uname -r)" >"$scratch/pytest.log"
# if the tests hang, leave a trace of why before the host's timeout kills the guest
( sleep $((timeout_s - 90)); { ps aux; dmesg | tail -n 50; } >"$scratch/hang.log" 2>&1 ) &
NETIO_BUILD="$build" NETIO_VMTEST=1 PYTHONPATH="$root" PYTHONDONTWRITEBYTECODE=1 \\
    timeout $((timeout_s - 60)) "$python" -m pytest -p no:cacheprovider -v -rfE \\
    --junitxml="$scratch/junit.xml" tests/integration/test_tracer.py >>"$scratch/pytest.log" 2>&1
echo \$? >"$scratch/rc"
INNER
chmod +x "$scratch/inner.sh"

echo "vmtest: booting $kernel under QEMU/TCG (slow)" >&2
start=$(date +%s)
PATH="$root/.venv/bin:$PATH" timeout "$timeout_s" "$vng" --disable-kvm --force-9p \
    --rwdir "$scratch" --run "$kernel" --exec "$scratch/inner.sh" >"$scratch/vm.log" 2>&1
vm_rc=$?
echo "vmtest: guest done in $(( $(date +%s) - start )) s" >&2

if [ ! -s "$scratch/junit.xml" ]; then
    echo "vmtest: no test results from the guest (vng status $vm_rc)" >&2
    tail -n 30 "$scratch/vm.log" "$scratch/pytest.log" "$scratch/hang.log" 2>/dev/null >&2
    echo "0 passed, 1 failed"
    exit 1
fi

read -r passed failed < <("$python" - "$scratch/junit.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
k = sum(int(s.get("skipped", 0)) for s in suites)
print(t - f - k, f)
PY
)
if [ "${failed:-1}" != 0 ] || [ "$(cat "$scratch/rc" 2>/dev/null)" != 0 ]; then
    cat "$scratch/pytest.log" >&2
    [ "${failed:-0}" = 0 ] && failed=1
fi
echo "${passed:-0} passed, ${failed:-1} failed"
[ "${failed:-1}" = 0 ]
