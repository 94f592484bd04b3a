#!/usr/bin/env bash
# Tests/packaging/deb.sh DIST
#
# The three .debs `make deb` wrote into DIST, on this system: `apt-get install ./...deb`,
# then `pkg-config --cflags --libs pixload` builds examples/c/hello.c, which loads an image
# through file://, so do CMake's find_package(pixload CONFIG REQUIRED) and Meson's
# dependency('pixload') (Tests/packaging/example-builds.sh), `pixload version` runs, and `apt-get purge` leaves none of their files
# behind, /usr/local untouched. Needs root (or sudo). Refuses to run when one of the
# packages is already installed: it would purge someone's copy. Ends with
# "N passed, N failed".
set -uo pipefail
dist="${1:?usage: $0 DIST}"
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/Tests/packaging/example-builds.sh"
version=$(sed -n 's/^#define PXL_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/pixload.h")
arch=$(dpkg --print-architecture)
passed=0 failed=0
check() {  # check NAME COMMAND...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

pkgs=(libpixload0 libpixload-dev pixload-tools)
debs=()
for p in "${pkgs[@]}"; do debs+=("$(cd "$dist" && pwd)/${p}_${version}_$arch.deb"); done
for d in "${debs[@]}"; do check "$(basename "$d") built (make deb)" test -f "$d"; done
[ "$failed" -eq 0 ] || finish
for p in "${pkgs[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ]; then
    echo "deb.sh: $p is already installed; not touching it (apt-get purge ${pkgs[*]} first)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-deb-test.XXXXXX")
purge() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${pkgs[@]}" >>"$work/apt.log" 2>&1; }
cleanup() { purge; rm -rf "$work"; }
trap cleanup EXIT

snapshot_local() { find /usr/local -xdev -printf '%p %y %s %T@\n' 2>/dev/null | LC_ALL=C sort; }
snapshot_local >"$work/local.before"

# Debian's apt installs local files given as ./path (or absolute paths).
check "apt-get install ./DIST/{${pkgs[*]}}.deb" \
  bash -c "$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${debs[*]} >'$work/apt.log' 2>&1 ||
           { cat '$work/apt.log' >&2; false; }"
for p in "${pkgs[@]}"; do
  check "$p $version installed" test "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null)" = "installed $version"
done
for p in "${pkgs[@]}"; do dpkg -L "$p" 2>/dev/null; done | LC_ALL=C sort -u >"$work/files"

flags=$(pkg-config --cflags --libs pixload 2>"$work/pc.err")
check "pkg-config --cflags --libs pixload: $flags" bash -c "[[ '$flags' == *-lpixload* ]]"
check "pkg-config --modversion pixload is $version" test "$(pkg-config --modversion pixload 2>/dev/null)" = "$version"
# The example as its comment says to build it: no -I or -L of ours.
check "examples/c/hello.c builds with pkg-config" \
  bash -c "cc '$root/examples/c/hello.c' $flags -o '$work/hello' 2>&1"
out=$(cd "$work" && env -u LD_LIBRARY_PATH ./hello "file://$root/docs/gtk-screenshot.png" 2>&1)
check "hello loads a file:// image: $out" bash -c "[[ '$out' == loaded* ]]"
check "hello uses the packaged library" \
  bash -c "env -u LD_LIBRARY_PATH ldd '$work/hello' | grep -Eq 'libpixload.so.0 => (/usr)?/lib/[^ ]*/libpixload.so.0 '"
# The packaged CMake and Meson paths, with no prefix given: the system's libdir.
sys_libdir=$(dirname "$(grep -m1 '/libpixload.so.0$' "$work/files")")
check "CMake: find_package(pixload CONFIG REQUIRED) builds examples/c" build_hello_cmake "$work/cmake"
check "CMake: hello runs with the packaged library" \
  hello_runs "$work/cmake/hello" "file://$root/docs/gtk-screenshot.png" "$sys_libdir"
check "Meson: dependency('pixload') builds examples/c" build_hello_meson "$work/meson"
check "Meson: hello runs with the packaged library" \
  hello_runs "$work/meson/hello" "file://$root/docs/gtk-screenshot.png" "$sys_libdir"
out=$(env -u LD_LIBRARY_PATH /usr/bin/pixload version 2>&1)
check "pixload version: $out" bash -c "[[ '$out' == *'$version'* ]]"
check "man page installed" test -f /usr/share/man/man1/pixload.1.gz

purge
check "apt-get purge ${pkgs[*]}" bash -c "! dpkg-query -W -f='\${db:Status-Status}\n' ${pkgs[*]} 2>/dev/null | grep -qv '^not-installed$'"
# Directories stay when something else owns them (/usr/lib/...); files and links must go.
left=$(while read -r f; do
  [ -n "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; } && [ ! -d "$f" ] && echo "$f"
done <"$work/files")
check "no file of theirs left behind${left:+: $left}" test -z "$left"
check "their doc folders are gone" bash -c "! ls -d /usr/share/doc/libpixload0 /usr/share/doc/libpixload-dev /usr/share/doc/pixload-tools 2>/dev/null | grep -q ."
check "no libpixload known to ldconfig" bash -c "! /sbin/ldconfig -p | grep -q 'libpixload.so.0 .*/usr/lib/'"
snapshot_local >"$work/local.after"
check "/usr/local untouched" cmp -s "$work/local.before" "$work/local.after"
finish
