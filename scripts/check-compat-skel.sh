#!/usr/bin/env bash
# scripts/check-compat-skel.sh SKEL COMPAT_SKEL: the skeletons bpftool generated for an
# object's two builds (bpf/compat.bpf.h) name the same programs and maps (the internal maps' names
# carry each skeleton's own prefix) and lay out their global data alike, so that the tracer can
# open either build through the first's skeleton. Exit 1 with the difference otherwise.
set -euo pipefail
names() {
    grep -oE 's->(maps|progs)\[[0-9]+\]\.name = "[^"]*"' "$1" |
        sed -E -e 's/\[[0-9]+\]//' -e 's/"[^".]*\.(rodata|bss|data|kconfig)/".\1/' | sort
}
# the members of each global data section's struct (struct <skel>__rodata { ... } etc.)
datasecs() {
    awk '/^\tstruct [a-z_0-9]+__(rodata|bss|data|kconfig) \{/ {on = 1; sub(/[a-z_0-9]+__/, "")}
         on {print} /^\t\} \*/ {on = 0}' "$1"
}
if ! diff <(names "$1") <(names "$2") >&2 || ! diff <(datasecs "$1") <(datasecs "$2") >&2; then
    echo "check-compat-skel: $2 does not hold what $1 holds" >&2
    exit 1
fi
