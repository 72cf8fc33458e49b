#!/usr/bin/env bash
# The kernel images of `make vmtest`'s matrix (tests/vm/kernels) from Debian's archive. The
# suites other than the host's (bookworm) are added for their kernel image packages only: every
# other package of theirs is pinned below 0, so that nothing else on this host ever comes from
# them (`apt-get -s upgrade` installs nothing of theirs). Idempotent and quiet when every image
# is there.
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCES=/etc/apt/sources.list.d/netio-kernels.sources
PREFS=/etc/apt/preferences.d/netio-kernels

# suite regex lines of the kernels not yet installed
missing=$(scripts/kernels.sh | awk '$2 == "-" {print $1}')
[ -z "$missing" ] && exit 0

write_if_changed() {	# write_if_changed FILE: stdin into FILE; status 0 if it changed
    local new
    new=$(cat)
    [ -f "$1" ] && [ "$(cat "$1")" = "$new" ] && return 1
    printf '%s\n' "$new" >"$1"
}

suites=() regexes=()
while read -r name suite regex _extra; do
    case "$name" in ''|'#'*) continue;; esac
    grep -qx "$name" <<<"$missing" || continue
    suites+=("$suite") regexes+=("$regex")
done <tests/vm/kernels

extra=$(printf '%s\n' "${suites[@]}" | grep -vx bookworm | sort -u | tr '\n' ' ')
changed=0
write_if_changed "$SOURCES" <<EOS && changed=1
# netio-trace's kernel matrix (scripts/deps-kernels.sh): kernel image packages only, see $PREFS
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
{
    echo "# netio-trace's kernel matrix (scripts/deps-kernels.sh): from bullseye and trixie the"
    echo "# kernel images only; nothing else of theirs may reach this host."
    for s in bullseye trixie; do
        printf 'Package: /^linux-image-5\\.10\\.0-[0-9]+-amd64$/ /^linux-image-6\\.12\\.[0-9]+\\+deb13-amd64$/\nPin: release n=%s\nPin-Priority: 500\n\n' "$s"
    done
    for s in bullseye bullseye-security trixie trixie-security; do
        printf 'Package: *\nPin: release n=%s\nPin-Priority: -10\n\n' "$s"
    done
} | write_if_changed "$PREFS" && changed=1

export DEBIAN_FRONTEND=noninteractive
if [ $changed = 1 ] || [ ! -d /var/lib/apt/lists ] ||
   [ -z "$(ls /var/lib/apt/lists/*bullseye* /var/lib/apt/lists/*trixie* 2>/dev/null)" ]; then
    apt-get update -qq
fi

pkgs=()
for re in "${regexes[@]}"; do
    # the newest package of that name pattern the pinned suites let us install
    best=""
    for p in $(apt-cache pkgnames linux-image- | grep -E "$re" | sort -V); do
        apt-cache policy "$p" | grep -q 'Candidate: (none)' || best="$p"
    done
    [ -n "$best" ] || { echo "deps: no package matching $re in Debian's archive" >&2; exit 1; }
    pkgs+=("$best")
done
echo "deps: apt-get install ${pkgs[*]} (the kernel matrix; extra suites: ${extra:-none})"
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
