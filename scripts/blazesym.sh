#!/usr/bin/env bash
# Build blazesym-c (pinned by third_party/blazesym/Cargo.lock) as the static library
# netio-tracer links, and put its C header beside it. Quiet when both are up to date.
# Output: third_party/blazesym/target/release/libnetio_blazesym.a, .../target/include/blazesym.h
set -euo pipefail
cd "$(dirname "$0")/../third_party/blazesym"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
lib=target/release/libnetio_blazesym.a
hdr=target/include/blazesym.h
if [ -f "$lib" ] && [ -f "$hdr" ] && [ "$lib" -nt Cargo.lock ] && [ "$lib" -nt Cargo.toml ] \
   && [ "$lib" -nt src/lib.rs ]; then
    exit 0
fi
command -v cargo >/dev/null || { echo "blazesym: cargo not found (rustup or apt-get install cargo)" >&2; exit 2; }
echo "deps: cargo build blazesym-c (third_party/blazesym)"
cargo build --locked --release --quiet
# the header ships in the crate (include/blazesym.h): take it from where cargo unpacked it
src=$(cargo metadata --locked --format-version 1 | python3 -c '
import json, os, sys
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "blazesym-c"))')
mkdir -p target/include
cp "$src/include/blazesym.h" "$hdr"
touch "$lib"
