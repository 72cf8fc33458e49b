#!/usr/bin/env bash
# scripts/vm-exec.sh OUT SCRIPT: boot one of Debian's stock kernels (6.1 unless told: fentry/fexit
# and kprobes work there) with virtme-ng under QEMU/TCG and run SCRIPT OUT inside it, as root, from the
# repository's root, with tracefs, bpffs and /var/run/netns ready. The guest's root file
# system is this machine's, read-only, with a /tmp of its own; OUT (a host directory) is
# shared read-write, so SCRIPT must be a file in it. The kernel console goes to OUT/vm.log.
# The one way to boot the guest: `make vmtest` (tests/vm/run-vmtest.sh) and the bench's
# unrelated-syscall section (bench/unrelated.py).
#
# QEMU runs the guest's two vCPUs on one host thread (-accel tcg,thread=single): with a thread
# per vCPU (multi-threaded TCG, QEMU's default) the guest froze now and then while the tracer
# attached or detached a program, the kernel patching a jump label while the other vCPU kept
# trapping on the patch's breakpoint after it was gone (bench/NOTES.md, "The guest"). KVM
# hangs on this machine, so --disable-kvm.
#
# The root goes to the guest over virtiofs (virtiofsd, which make deps builds): virtme-ng
# mounts a 9p root without a cache, through which a guest imported its Python more slowly
# (bench/NOTES.md, "The guest's root over virtiofs").
#
# Environment: NETIO_VM_KERNEL (an image path, default Debian's 6.1: `scripts/kernels.sh 6.1`;
# the matrix's kernels are listed in tests/vm/kernels), NETIO_VM_TIMEOUT
# (seconds for the whole boot, default 480), NETIO_VM_CPUS (the guest's vCPUs, default 2).
# Exit status: 3 if the guest cannot be booted here (the reason on stderr), else vng's (124
# on timeout).
set -uo pipefail

root="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
vng="$root/.venv/bin/vng"
kernel="${NETIO_VM_KERNEL:-$("$root/scripts/kernels.sh" 6.1 2>/dev/null)}"
timeout_s="${NETIO_VM_TIMEOUT:-480}"
cpus="${NETIO_VM_CPUS:-2}"

cannot() {
    echo "vm-exec: $*" >&2
    exit 3
}

[ $# = 2 ] || cannot "usage: scripts/vm-exec.sh OUT SCRIPT"
out="$(readlink -f "$1")"
script="$(readlink -f "$2")"
[ "$(id -u)" = 0 ] || cannot "needs root"
[ -d "$out" ] || cannot "$1 is not a directory"
[ -x "$script" ] || cannot "$2 is not an executable script"
case "$script" in "$out"/*) ;; *) cannot "$2 is not in $1 (the guest sees only that)";; esac
[ -n "$kernel" ] && [ -r "$kernel" ] || cannot "no kernel image (set NETIO_VM_KERNEL; make deps installs Debian's)"
[ -x "$vng" ] || cannot "virtme-ng not installed in .venv (make deps)"
command -v qemu-system-x86_64 >/dev/null || cannot "qemu-system-x86_64 not installed (make deps)"
export PATH="$root/.venv/bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
command -v virtiofsd >/dev/null || cannot "virtiofsd not installed (make deps)"
kver="$(basename "$kernel" | sed 's/^vmlinuz-//')"
[ -d "/lib/modules/$kver" ] || echo "vm-exec: warning: no /lib/modules/$kver (veth may be missing)" >&2

cat >"$out/prelude.sh" <<PRELUDE
#!/bin/sh
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
mountpoint -q /sys/fs/bpf || mount -t bpf bpffs /sys/fs/bpf
mkdir -p /var/run/netns
# a task blocked for 30 s is reported on the console (vm.log)
echo 30 >/proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
cd "$root"
exec "$script" "$out"
PRELUDE
chmod +x "$out/prelude.sh"

echo "vm-exec: booting $kernel under QEMU/TCG (slow)" >&2
start=$(date +%s)
# timeout runs vng and QEMU in a process group of its own, and passes a signal it gets on to
# that group: SIGINT, SIGTERM or SIGHUP here end the guest through it, so none is left behind
# udev would load kvm for the emulated CPU: slow under TCG (bench/NOTES.md, "What a start
# costs"), and nothing here needs it
timeout "$timeout_s" "$vng" --disable-kvm --verbose \
    --cpus "$cpus" --qemu-opts="-accel tcg,thread=single" \
    --append "modprobe.blacklist=kvm,kvm_amd,kvm_intel" --rwdir "$out" --run "$kernel" \
    --exec "$out/prelude.sh" >"$out/vm.log" 2>&1 </dev/null &
guest=$!
trap 'kill -TERM "$guest" 2>/dev/null; wait "$guest"; echo "vm-exec: interrupted" >&2; exit 130' INT TERM HUP
wait "$guest"
rc=$?
trap - INT TERM HUP
echo "vm-exec: guest done in $(( $(date +%s) - start )) s (vng status $rc)" >&2
# vng falls back to 9p where virtiofsd does not start: correct, only slower
grep -q "fallback to 9p" "$out/vm.log" && echo "vm-exec: warning: virtiofsd did not start, the root was 9p" >&2
exit $rc
