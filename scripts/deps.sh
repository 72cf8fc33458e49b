#!/usr/bin/env bash
# Install every build, run and test dependency of netio-trace on Debian 12.
# Idempotent and quiet when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(clang-16 llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-perf iproute2
          iperf3 bpftrace make gcc pkg-config python3-venv liburing-dev
          linux-image-amd64 qemu-system-x86 busybox-static chromium golang-go)
PY_PKGS=(pandas seaborn matplotlib rich pytest virtme-ng prometheus_client protobuf)

missing=()
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    echo "deps: creating .venv"
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import pandas, seaborn, matplotlib, rich, pytest, prometheus_client, google.protobuf" 2>/dev/null \
   || [ ! -x .venv/bin/vng ]; then
    echo "deps: pip install ${PY_PKGS[*]}"
    .venv/bin/pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
fi

if ! command -v inferno-flamegraph >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/inferno-flamegraph" ]; then
    echo "deps: cargo install inferno"
    cargo install -q --locked inferno
fi

# blazesym-c, the symbolizer netio-tracer links (pinned by third_party/blazesym/Cargo.lock)
./scripts/blazesym.sh
