#!/usr/bin/env bash
# make vmtest: the tracer's tests inside Debian's stock kernel (6.1: fentry/fexit and kprobes
# work there, sock_send_length does not exist), booted with virtme-ng under QEMU/TCG (KVM
# hangs on this machine, so --disable-kvm; slow: the subset is short).
#
# Runs tests/integration/test_tracer.py with NETIO_VMTEST=1 (--probe, one-copy and zero-copy
# over veth at 64 KiB on the fentry rung, the same with --attach kprobe) and
# tests/integration/test_zerocopy_paths.py (issue 16's strategies and the forward path, with
# less data; on 6.1 every forwarded zero-copy skb is copied) and
# tests/integration/test_categories_live.py (issue 17: "other" under its target on live runs,
# the shares printed) and tests/integration/test_peer_bcc.py (issue 27: bcc's tcptop agrees
# with the tracer per process; 6.1 only, where make deps installs the kernel's headers), prints
# "N passed, N failed" and exits non-zero on any failure.
#
# The guest is booted by scripts/vm-exec.sh (QEMU/TCG, the vCPUs on one host thread: why there).
# A guest that still gives no results is booted once more, and the first attempt's kernel
# console, last test line and watchdog log are printed. A test that fails is never retried.
#
# Environment: NETIO_BUILD (binaries, default <repo>/build), NETIO_VM_KERNEL (default: the
# newest /boot/vmlinuz-*), NETIO_VM_TIMEOUT (seconds per boot, default 720; how long a boot
# and the tests take: bench/NOTES.md, "The guest"), NETIO_VM_KEEP=1 (keep the guest's logs).
set -uo pipefail

root="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
build="${NETIO_BUILD:-$root/build}"
timeout_s="${NETIO_VM_TIMEOUT:-720}"
export NETIO_VM_TIMEOUT="$timeout_s"
python="$root/.venv/bin/python"

fail() {
    echo "vmtest: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root"
for b in netio-tracer netio-server netio-client; do
    [ -x "$build/$b" ] || fail "$build/$b not built (make BUILD=...)"
done

scratch="$(mktemp -d /tmp/netio-vmtest.XXXXXX)"
if [ -n "${NETIO_VM_KEEP:-}" ]; then
    echo "vmtest: logs kept in $scratch" >&2
else
    trap 'rm -rf "$scratch"' EXIT
fi

# VMTEST_K, a pytest -k expression (spaces allowed), quoted for the guest's shell
k_arg=${VMTEST_K:+"-k '$VMTEST_K'"}
# What runs inside the guest (from the repository's root), into the attempt's directory $out
# ($1), the directory the guest shares with us.
cat >"$scratch/inner.sh" <<INNER
#!/bin/sh
out="\$1"
echo "guest kernel \$(uname -r)" >"\$out/pytest.log"
# if the tests hang, leave a trace of why before the host's timeout ends the guest
( sleep $((timeout_s - 90)); { ps aux; dmesg | tail -n 50; } >"\$out/hang.log" 2>&1 ) &
NETIO_BUILD="$build" NETIO_VMTEST=1 PYTHONPATH="$root" PYTHONDONTWRITEBYTECODE=1 \\
    NETIO_TRACER_SKIP="${NETIO_TRACER_SKIP:-}" \\
    timeout -k 10 $((timeout_s - 60)) "$python" -m pytest -p no:cacheprovider -v -rfEP $k_arg \\
    --junitxml="\$out/junit.xml" tests/integration/test_tracer.py \\
    tests/integration/test_zerocopy_paths.py \\
    tests/integration/test_categories_live.py \\
    tests/integration/test_peer_bcc.py >>"\$out/pytest.log" 2>&1
echo \$? >"\$out/rc"
INNER
chmod +x "$scratch/inner.sh"

# boot_guest DIR: one boot running the tests into DIR, the kernel console in DIR/vm.log; a
# guest that cannot be booted here at all ends the run
boot_guest() {
    local out="$1"
    mkdir -p "$out"
    cp "$scratch/inner.sh" "$out/inner.sh"
    "$root/scripts/vm-exec.sh" "$out" "$out/inner.sh"
    [ $? = 3 ] && fail "the guest cannot be booted here (above)"
}

# what a guest without results left: its last test line, the console's end, the watchdog's log
explain_no_results() {
    local out="$1"
    echo "vmtest: no test results from the guest; last test line:"
    grep -a '::' "$out/pytest.log" 2>/dev/null | tail -n 1
    echo "vmtest: kernel console (last 40 lines):"
    tail -n 40 "$out/vm.log" 2>/dev/null
    [ -s "$out/hang.log" ] && { echo "vmtest: guest watchdog:"; tail -n 60 "$out/hang.log"; }
}

out="$scratch/boot1"
boot_guest "$out"
if [ ! -s "$out/junit.xml" ]; then
    explain_no_results "$out"
    echo "vmtest: booting the guest once more (a guest without results is retried once)"
    out="$scratch/boot2"
    boot_guest "$out"
    if [ ! -s "$out/junit.xml" ]; then
        explain_no_results "$out"
        echo "0 passed, 1 failed"
        exit 1
    fi
fi

read -r passed failed < <("$python" - "$out/junit.xml" <<'PY'
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
if [ "${failed:-1}" != 0 ] || [ "$(cat "$out/rc" 2>/dev/null)" != 0 ]; then
    cat "$out/pytest.log"
    [ "${failed:-0}" = 0 ] && failed=1
fi
# what the guest measured (printed by the tests, e.g. the unrelated-syscall rates)
grep -a "^getpid calls/s" "$out/pytest.log" | sed 's/^/vmtest: /'
echo "${passed:-0} passed, ${failed:-1} failed"
[ "${failed:-1}" = 0 ]
