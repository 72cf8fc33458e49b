#!/usr/bin/env bash
# bench/shortfall_soak.sh [RUNS] [LOG]: the zero-copy shortfall soak (bench/NOTES.md, "Drops").
# Runs the four zero-copy cases of test_exact_bytes (loopback and veth, 1 KiB and 64 KiB) with
# `pytest -x` in rounds until RUNS runs (a run is one case; default 10000) have passed or one
# fails. Each round's outcome is a line of LOG (default bench/shortfall-soak.log, appended, so a
# soak can be continued): the time, rounds and runs so far, and the load average; a failing
# round's pytest output follows its line. The last line says how many runs passed, how many
# failed and how long it took. Needs root and a build: NETIO_BUILD (default <repo>/build).
# ON_FAIL=continue keeps going after a failure (counted) instead of stopping.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000}
LOG=${2:-bench/shortfall-soak.log}
BUILD_DIR=${NETIO_BUILD:-$PWD/build}
CASES="exact_bytes and zero-copy"
PER_ROUND=4

case $RUNS in
''|*[!0-9]*) echo "shortfall_soak: RUNS must be a number of runs, not '$RUNS'" >&2; exit 2 ;;
esac
[ -x "$BUILD_DIR/netio-tracer" ] || { echo "shortfall_soak: no netio-tracer in $BUILD_DIR (make all)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "shortfall_soak: needs root (BPF, namespaces)" >&2; exit 2; }

start=$(date +%s)
rounds=0 passed=0 failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(date -Is) start: $RUNS runs of -k '$CASES', build $BUILD_DIR, $(git rev-parse --short HEAD)" >> "$LOG"
while [ $((passed + failed)) -lt "$RUNS" ]; do
    rounds=$((rounds + 1))
    NETIO_BUILD=$BUILD_DIR .venv/bin/python -m pytest -q -x -p no:cacheprovider \
        tests/integration/test_tracer.py -k "$CASES" > "$out" 2>&1
    rc=$?
    # pytest's summary line: "4 passed" or "1 failed, 2 passed" (-x stops at the first failure)
    p=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | cut -d' ' -f1)
    f=$(grep -oE '[0-9]+ failed' "$out" | tail -1 | cut -d' ' -f1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "$(date +%T) round $rounds rc $rc passed $passed failed $failed load $load" >> "$LOG"
    if [ "$rc" != 0 ]; then
        cat "$out" >> "$LOG"
        if [ -z "$p$f" ]; then
            echo "shortfall_soak: pytest ended without a result (rc $rc): see $LOG" >&2
            break
        fi
        [ "${ON_FAIL:-stop}" = continue ] || break
    fi
done
secs=$(( $(date +%s) - start ))
echo "# $(date -Is) end: $passed runs passed, $failed failed, $rounds rounds, ${secs} s" >> "$LOG"
echo "$passed passed, $failed failed, $rounds rounds, ${secs} s (log: $LOG)"
[ "$failed" = 0 ]
