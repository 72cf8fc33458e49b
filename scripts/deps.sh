#!/usr/bin/env bash
# Install every build, run and test dependency of netio-trace on Debian 12.
# Idempotent and quiet when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(clang-16 llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-perf iproute2
          iperf3 bpftrace make gcc pkg-config python3-venv liburing-dev
          linux-image-amd64 qemu-system-x86 busybox-static chromium golang-go
          python3-bpfcc bpfcc-tools prometheus libseccomp-dev libcap-ng-dev)
# libseccomp-dev, libcap-ng-dev: what virtiofsd builds against (below)
# prometheus: promtool and the server tests/integration/test_agent.py starts as its own
# process (on a systemd host the package also enables its own service, which we never use)
PY_PKGS=(pandas seaborn matplotlib rich pytest virtme-ng prometheus_client protobuf)

# apt_install PKG...: install those not installed yet
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "deps: apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # no package's service is started (prometheus's would serve :9090 for good): the
        # tests start their own, and stop it
        local policy=/usr/sbin/policy-rc.d had_policy=
        [ -e "$policy" ] && had_policy=1
        [ -n "$had_policy" ] || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; }
        local rc=0
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
        [ -n "$had_policy" ] || rm -f "$policy"
        return $rc
    fi
}
apt_install "${APT_PKGS[@]}"

# bcc's tools compile against the running kernel's headers: in the 6.1 guest
# (tests/integration/test_peer_bcc.py), those of each installed 6.1 image (linux-image-amd64's)
images61=$(dpkg-query -W -f='${Status} ${Package}\n' 'linux-image-6.1.*-amd64' 2>/dev/null |
           awk '$1 == "install" && $3 == "installed" && $4 !~ /-(cloud|rt)-/ {print $4}')
if [ -z "$images61" ]; then
    echo "deps: no linux-image-6.1.*-amd64 installed (the guest's kernel); cannot pick its headers" >&2
    exit 1
fi
# shellcheck disable=SC2086  # one package name per word
apt_install $(echo "$images61" | sed 's/^linux-image-/linux-headers-/')

./scripts/deps-kernels.sh

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

# virtiofsd, the guests' root file server (scripts/vm-exec.sh): a guest imports its Python
# faster through it than through 9p, which virtme-ng mounts uncached (bench/NOTES.md, "The
# guest's root over virtiofs"). vng takes only the Rust one, which bookworm does not package
VIRTIOFSD_VERSION=1.14.0
virtiofsd="${CARGO_HOME:-$HOME/.cargo}/bin/virtiofsd"
if ! { [ -x "$virtiofsd" ] && "$virtiofsd" --version 2>/dev/null | grep -qw "$VIRTIOFSD_VERSION"; }; then
    echo "deps: cargo install virtiofsd $VIRTIOFSD_VERSION (a few minutes)"
    cargo install -q --locked virtiofsd --version "$VIRTIOFSD_VERSION"
fi
