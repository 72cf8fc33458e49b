#!/usr/bin/env bash
# scripts/kernels.sh [NAME]: the kernel images of the matrix (tests/vm/kernels) installed here,
# one line each, "NAME IMAGE" (IMAGE a /boot/vmlinuz-* path, or "-" when it is not installed);
# with NAME, that kernel's image path alone (exit 1 if it is not installed).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"

image_of() {	# image_of REGEX: the newest installed image whose package matches REGEX
    local ver
    ver=$(dpkg-query -W -f='${Package} ${Status}\n' 'linux-image-*' 2>/dev/null |
          awk '$NF == "installed" {print $1}' | grep -E "$1" | sed 's/^linux-image-//' |
          sort -V | tail -n 1)
    [ -n "$ver" ] && [ -r "/boot/vmlinuz-$ver" ] && echo "/boot/vmlinuz-$ver"
}

found=1
while read -r name suite regex _extra; do
    case "$name" in ''|'#'*) continue;; esac
    img=$(image_of "$regex" || true)
    if [ $# = 0 ]; then
        echo "$name ${img:--}"
    elif [ "$1" = "$name" ]; then
        [ -n "$img" ] && { echo "$img"; found=0; }
    fi
done <"$root/tests/vm/kernels"
[ $# = 0 ] || exit $found
