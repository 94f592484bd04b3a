#!/usr/bin/env bash
# Tests/packaging/deb.sh DIST
#
# The .debs `make deb` wrote into DIST, on this system. First the core three, `apt-get
# install ./...deb`: `pkg-config --cflags --libs pixload` builds examples/c/hello.c, which
# loads an image through file://, so do CMake's find_package(pixload CONFIG REQUIRED) and
# Meson's dependency('pixload') (Tests/packaging/example-builds.sh), `pixload version`
# runs and lists the built-in formats only, and a HEIC fails naming libpixload-heif. Then
# the three codec module packages: `pixload version` lists heic jxl svg, and a HEIC, a
# JPEG XL and an SVG made now (heif-enc, cjxl, a few lines of SVG) load. `apt-get purge`
# leaves none of their files behind, /usr/local untouched. Needs root (or sudo). Refuses
# to run when one of the packages is already installed: it would purge someone's copy.
# Ends with "N passed, N failed".
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

core=(libpixload0 libpixload-dev pixload-tools)
modules=(libpixload-heif libpixload-jxl libpixload-svg)
pkgs=("${core[@]}" "${modules[@]}")
deb_of() { echo "$(cd "$dist" && pwd)/${1}_${version}_$arch.deb"; }
debs=() module_debs=()
for p in "${core[@]}"; do debs+=("$(deb_of "$p")"); done
for p in "${modules[@]}"; do module_debs+=("$(deb_of "$p")"); done
for d in "${debs[@]}" "${module_debs[@]}"; do check "$(basename "$d") built (make deb)" test -f "$d"; done
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
apt_install() {  # apt_install NAMES DEB...
  local names="$1"; shift
  check "apt-get install ./DIST/{$names}.deb" \
    bash -c "$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $* >'$work/apt.log' 2>&1 ||
             { cat '$work/apt.log' >&2; false; }"
}
installed() {  # installed PACKAGE...
  local p
  for p in "$@"; do
    check "$p $version installed" test "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null)" = "installed $version"
  done
}
list_files() { for p in "${pkgs[@]}"; do dpkg -L "$p" 2>/dev/null; done | LC_ALL=C sort -u >"$work/files"; }
apt_install "${core[*]}" "${debs[@]}"
installed "${core[@]}"
list_files
check "no codec module installed with the core" \
  bash -c "! dpkg-query -W -f='\${db:Status-Status}\n' ${modules[*]} 2>/dev/null | grep -q '^installed$'"

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
check "pixload version: ${out%%$'\n'*}" bash -c "[[ '$out' == *'$version'* ]]"
check "pixload version lists the built-in formats only" \
  grep -qx 'formats: jpeg png webp gif avif' <<< "$out"
check "man page installed" test -f /usr/share/man/man1/pixload.1.gz

# One file per module's format, made now.
python3 - "$work/small.png" <<'PY'
import struct, sys, zlib
w, h = 64, 48
raw = b"".join(b"\0" + bytes(v for x in range(w) for v in (x * 4, y * 5, 128)) for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
heif-enc -q 80 "$work/small.png" -o "$work/small.heic" >"$work/heif-enc.log" 2>&1
cjxl -q 90 "$work/small.png" "$work/small.jxl" >"$work/cjxl.log" 2>&1
printf '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48"><rect width="64" height="48" fill="#c00"/></svg>' \
  >"$work/small.svg"
fetch() {  # fetch EXT: the client's line for $work/small.EXT
  env -u LD_LIBRARY_PATH -u PIXLOAD_CODEC_PATH /usr/bin/pixload fetch --allow-file --no-disk-cache \
    "file://$work/small.$1" 2>&1 | head -1
}
out=$(fetch heic)
check "without libpixload-heif a HEIC names the package: $out" \
  bash -c "[[ '$out' == UNSUPPORTED_IMAGE*'install libpixload-heif'* ]]"

apt_install "${modules[*]}" "${module_debs[@]}"
installed "${modules[@]}"
out=$(env -u LD_LIBRARY_PATH -u PIXLOAD_CODEC_PATH /usr/bin/pixload version 2>&1)
check "pixload version lists the modules' formats: $(grep '^formats:' <<< "$out")" \
  grep -qx 'formats: jpeg png webp gif avif heic jxl svg' <<< "$out"
for ext in heic jxl svg; do
  out=$(fetch "$ext")
  check "a $ext loads through its module: $out" bash -c "[[ '$out' == 'OK '*' 64x48 '* ]]"
done
list_files
check "the modules are in LIBDIR/pixload/codecs" \
  bash -c "[ \$(grep -c '^$sys_libdir/pixload/codecs/libpixload-[a-z]*\.so$' '$work/files') -eq 3 ]"
check "the decode worker is in LIBDIR/pixload" grep -qx "$sys_libdir/pixload/pixload-decode-worker" "$work/files"
out=$(env -u LD_LIBRARY_PATH -u PIXLOAD_CODEC_PATH /usr/bin/pixload version 2>&1)
check "pixload version says the modules decode confined: ${out##*$'\n'}" \
  bash -c "[[ '$out' == *'isolation: '*seccomp* ]]"

purge
check "apt-get purge ${pkgs[*]}" bash -c "! dpkg-query -W -f='\${db:Status-Status}\n' ${pkgs[*]} 2>/dev/null | grep -qv '^not-installed$'"
# Directories stay when something else owns them (/usr/lib/...); files and links must go.
left=$(while read -r f; do
  [ -n "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; } && [ ! -d "$f" ] && echo "$f"
done <"$work/files")
check "no file of theirs left behind${left:+: $left}" test -z "$left"
check "their doc folders are gone" bash -c "! ls -d ${pkgs[*]/#//usr/share/doc/} 2>/dev/null | grep -q ."
check "the modules' folder is gone" test ! -e "$sys_libdir/pixload"
check "no libpixload known to ldconfig" bash -c "! /sbin/ldconfig -p | grep -q 'libpixload.so.0 .*/usr/lib/'"
snapshot_local >"$work/local.after"
check "/usr/local untouched" cmp -s "$work/local.before" "$work/local.after"
finish
