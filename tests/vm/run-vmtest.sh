#!/usr/bin/env bash
# make vmtest: the kernel matrix. Every kernel of tests/vm/kernels (Debian's 5.10, 6.1 and 6.12:
# scripts/deps-kernels.sh installs them) is booted with virtme-ng under QEMU/TCG by
# scripts/vm-exec.sh (slow: the tests run with less data there, NETIO_VMTEST=1), and runs
#   - the tracer's exactness and ladder tests: tests/integration/test_tracer.py, every strategy
#     and transport the kernel can run in test_zerocopy_paths.py, the programs of
#     test_programs.py, test_udp_zc_first.py, test_fallback_again.py and the buckets of
#     followed processes (test_follow_buckets.py), whether the kernel's own per-socket TCP
#     counters are exact there (test_bench_tcp_counters.py), plus the kernel's extra test
#     files (the fourth column there);
#   - doctor (`./netio-trace doctor --json`, which must pass);
#   - the tracer once on its own, whose snapshot gives the kernel's ladder.
# A kernel's extra test files boot a guest of their own, after the common ones: the matrix is
# then about as long as its longest guest. Guests boot NETIO_VM_JOBS at a time (default 2: one
# host thread each), the longest first; a guest that gives no
# results is booted once more (unless it ran out of time: it would again), and its first
# attempt's console, last test line and watchdog log are printed; a test that fails is never
# retried. The output ends with each kernel's
# "N passed, N failed" and the table kernel x probe point -> rung (the host's kernel included),
# then the totals; the exit status is non-zero on any failure.
#
# Environment: NETIO_BUILD (binaries, default <repo>/build), NETIO_VM_KERNELS (names of
# tests/vm/kernels to boot, space separated; default all), NETIO_VM_TIMEOUT (seconds per boot,
# default 2400: TCG runs the guests at half the speed on some of the hosts this VM lands on),
# NETIO_VM_JOBS, NETIO_VM_CPUS (vCPUs a guest, default 1), NETIO_VM_KEEP=1 (keep the guests'
# logs), VMTEST_K (a pytest -k expression).
set -uo pipefail

root="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
build="${NETIO_BUILD:-$root/build}"
timeout_s="${NETIO_VM_TIMEOUT:-2400}"
jobs="${NETIO_VM_JOBS:-2}"
# one vCPU a guest: QEMU runs a guest's vCPUs on one host thread anyway (scripts/vm-exec.sh),
# and with one the guest's kernel waits for no other CPU (RCU grace periods, the IPIs of
# text patching at every attach): the tracer loads about 25% faster there
export NETIO_VM_CPUS="${NETIO_VM_CPUS:-1}"
export NETIO_VM_TIMEOUT="$timeout_s"
python="$root/.venv/bin/python"
COMMON_TESTS="tests/integration/test_tracer.py tests/integration/test_zerocopy_paths.py"
COMMON_TESTS+=" tests/integration/test_programs.py tests/integration/test_tracer_load.py"
COMMON_TESTS+=" tests/integration/test_socket_sums.py tests/integration/test_receive_tracer.py"
COMMON_TESTS+=" tests/integration/test_udp_zc_first.py tests/integration/test_fallback_again.py"
COMMON_TESTS+=" tests/integration/test_follow_buckets.py tests/integration/test_thread_hists.py"
COMMON_TESTS+=" tests/integration/test_bench_tcp_counters.py tests/integration/test_send_runs.py"

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
# a boot runs in a subshell: its vm-exec.sh (whose own trap ends its QEMU) is told first
trap 'for j in $(jobs -p); do kill -TERM $(cat /proc/"$j"/task/*/children 2>/dev/null) "$j" 2>/dev/null; done
      wait; exit 130' INT TERM HUP

# the kernels to boot: "name image extra-tests"
declare -a names images extras
while read -r name suite regex extra; do
    case "$name" in ''|'#'*) continue;; esac
    if [ -n "${NETIO_VM_KERNELS:-}" ] && ! grep -qw -- "$name" <<<"$NETIO_VM_KERNELS"; then
        continue
    fi
    img="$("$root/scripts/kernels.sh" "$name")" ||
        fail "kernel $name is not installed (make deps installs it: scripts/deps-kernels.sh)"
    names+=("$name") images+=("$img") extras+=("${extra//,/ }")
done <"$root/tests/vm/kernels"
[ ${#names[@]} -gt 0 ] || fail "no kernel selected (NETIO_VM_KERNELS=${NETIO_VM_KERNELS:-})"

# without_files "A B C" "B": the first list less the files of the second
without_files() {
    local f kept=()
    for f in $1; do
        tr ' ' '\n' <<<"$2" | grep -qxF -- "$f" || kept+=("$f")
    done
    echo "${kept[*]}"
}

# the guests to boot, longest first: each kernel's common tests (with doctor and the ladder),
# then each kernel's extra files: "unit" is the guest's directory, "of" its kernel's index. A
# common file a kernel lists among its extras runs in its extra guest only, which is how the
# two lanes of guests are kept even (tests/vm/kernels)
declare -a units of tests main
for i in "${!names[@]}"; do
    units+=("${names[$i]}") of+=("$i") main+=(1)
    tests+=("$(without_files "$COMMON_TESTS" "${extras[$i]}")")
done
for i in "${!names[@]}"; do
    [ -n "${extras[$i]}" ] || continue
    units+=("${names[$i]}-extra") of+=("$i") tests+=("${extras[$i]}") main+=(0)
done

k_arg=${VMTEST_K:+"-k '$VMTEST_K'"}
# inner_script TESTS MAIN: what runs inside a guest, from the repository's root, into the
# attempt's directory $out ($1), which the guest shares with us; MAIN=1 runs doctor and the
# tracer once for the kernel's ladder first
inner_script() {
    cat <<INNER
#!/bin/sh
out="\$1"
echo "guest kernel \$(uname -r)" >"\$out/pytest.log"
# if the tests hang, leave a trace of why before the host's timeout ends the guest
( sleep $((timeout_s - 90)); { ps aux; dmesg | tail -n 50; } >"\$out/hang.log" 2>&1 ) &
if [ "$2" = 1 ]; then
    "$build/netio-tracer" --json "\$out/ladder.json" -- true >"\$out/ladder.log" 2>&1
    NETIO_BUILD="$build" "$root/netio-trace" doctor --json >"\$out/doctor.json" 2>"\$out/doctor.err"
    echo \$? >"\$out/doctor.rc"
    # test_tracer_load.py reads this doctor's object rather than running one of its own
    export NETIO_VM_DOCTOR_JSON="\$out/doctor.json"
fi
NETIO_BUILD="$build" NETIO_VMTEST=1 PYTHONPATH="$root" PYTHONDONTWRITEBYTECODE=1 \\
    NETIO_TRACER_SKIP="${NETIO_TRACER_SKIP:-}" \\
    timeout -k 10 $((timeout_s - 60)) "$python" -m pytest -p no:cacheprovider -v -rfEP $k_arg \\
    --junitxml="\$out/junit.xml" $1 >>"\$out/pytest.log" 2>&1
echo \$? >"\$out/rc"
INNER
}

# boot_guest U ATTEMPT: guest U running its tests into scratch/UNIT/ATTEMPT
boot_guest() {
    local u="$1" out="$scratch/${units[$1]}/$2"
    mkdir -p "$out"
    inner_script "${tests[$u]}" "${main[$u]}" >"$out/inner.sh"
    chmod +x "$out/inner.sh"
    NETIO_VM_KERNEL="${images[${of[$u]}]}" "$root/scripts/vm-exec.sh" "$out" "$out/inner.sh" \
        >"$out/vm-exec.log" 2>&1
    echo $? >"$out/vm-exec.rc"
}

# last_attempt U: the directory of guest U's last boot
last_attempt() {
    local out="$scratch/${units[$1]}/boot2"
    [ -d "$out" ] || out="$scratch/${units[$1]}/boot1"
    echo "$out"
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

start=$(date +%s)
for u in "${!units[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    echo "vmtest: booting ${units[$u]} (${images[${of[$u]}]})"
    boot_guest "$u" boot1 &
done
wait
for u in "${!units[@]}"; do
    out="$scratch/${units[$u]}/boot1"
    [ "$(cat "$out/vm-exec.rc")" = 3 ] && { cat "$out/vm-exec.log"; fail "a guest cannot be booted here"; }
    if [ ! -s "$out/junit.xml" ]; then
        echo "vmtest: ${units[$u]}:"
        explain_no_results "$out"
        # a guest that ran out of time would again: its results are a failure, not a retry
        if [ "$(cat "$out/vm-exec.rc")" = 124 ] || [ "$(cat "$out/rc" 2>/dev/null)" = 124 ]; then
            echo "vmtest: ${units[$u]} took its whole ${timeout_s} s: not booted again"
            continue
        fi
        echo "vmtest: booting ${units[$u]} once more (a guest without results is retried once)"
        boot_guest "$u" boot2
    fi
done

total_passed=0 total_failed=0 ladders=()
"$build/netio-tracer" --json "$scratch/host-ladder.json" -- true >"$scratch/host-ladder.log" 2>&1
ladders+=("host $(uname -r)=$scratch/host-ladder.json")
for u in "${!units[@]}"; do
    name="${units[$u]}"
    out="$(last_attempt "$u")"
    read -r passed failed < <("$python" - "$out/junit.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print(0, 1)
    sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
k = sum(int(s.get("skipped", 0)) for s in suites)
print(t - f - k, f)
PY
)
    [ -s "$out/junit.xml" ] || explain_no_results "$out"
    if [ "${failed:-1}" != 0 ] || [ "$(cat "$out/rc" 2>/dev/null)" != 0 ]; then
        echo "vmtest: $name: pytest's log:"
        cat "$out/pytest.log"
        [ "${failed:-0}" = 0 ] && failed=1
    fi
    kernel="$(sed -n 's/^guest kernel //p' "$out/pytest.log")"
    if [ "${main[$u]}" = 1 ]; then
        if [ "$(cat "$out/doctor.rc" 2>/dev/null)" = 0 ]; then
            passed=$((passed + 1))
        else
            echo "vmtest: $name: doctor failed:"; cat "$out/doctor.err" 2>/dev/null
            failed=$((failed + 1))
        fi
        ladders+=("$name $kernel=$out/ladder.json")
    fi
    grep -a "^getpid calls/s" "$out/pytest.log" | sed "s/^/vmtest: $name: /"
    echo "vmtest: $name ($kernel): ${passed:-0} passed, ${failed:-1} failed"
    total_passed=$((total_passed + ${passed:-0})) total_failed=$((total_failed + ${failed:-1}))
done
echo "vmtest: the ladder, kernel x probe point -> rung"
"$python" "$root/tests/vm/rung_table.py" "${ladders[@]}"
echo "vmtest: ${#names[@]} kernels (${#units[@]} guests) in $(( $(date +%s) - start )) s"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" = 0 ]
