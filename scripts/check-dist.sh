#!/usr/bin/env bash
# scripts/check-dist.sh STAGE
#
# Checks what ships, as a user would meet it:
#  - the .so is self-contained (no libswift* NEEDED), has the SONAME libpixload.so.0 and
#    exports only pxl_* symbols; so is the debug build `swift build`/`swift test` leave
#    in .build, when there is one (only the sanitizer builds link the runtime dynamically);
#  - `make install DESTDIR=...` writes exactly the expected files and `make uninstall`
#    removes exactly those;
#  - a program outside the tree builds with `cc app.c $(pkg-config --cflags --libs pixload)`
#    against an installed copy and loads an image; examples/c/hello.c builds with CMake
#    (find_package(pixload CONFIG REQUIRED)) and with Meson (dependency('pixload')) and
#    runs; the CMake package is relocatable (found and working from a DESTDIR copy) and
#    accepts exactly the versions pixload.h's rule allows
#    (Tests/packaging/example-builds.sh);
#  - the installed client creates --out-dir, reports file:// loads as `file`, and its
#    man page renders;
#  - `make` and `make install` install no packages: with libcurl's .pc hidden
#    (PKG_CONFIG_LIBDIR) they stop with one line naming libcurl4-openssl-dev, and no
#    package manager runs.
# Ends with "N passed, N failed".
set -uo pipefail
stage="${1:?usage: $0 STAGE}"
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/Tests/packaging/example-builds.sh"
# The one source of the version: the header.
version=$(sed -n 's/^#define PXL_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/pixload.h")
so="$stage/lib/libpixload.so.$version"
passed=0 failed=0
check() {  # check NAME COMMAND...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}

check "no libswift in NEEDED" bash -c "! readelf -d '$so' | grep NEEDED | grep -q swift"
debug_so=.build/debug/libpixload.so
if [ -e "$debug_so" ]; then
  check "no libswift in NEEDED of $debug_so" bash -c "! readelf -d '$debug_so' | grep NEEDED | grep -q swift"
fi
check "SONAME is libpixload.so.0" bash -c "readelf -d '$so' | grep SONAME | grep -q '\[libpixload.so.0\]'"
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
declared=$(sed -nE 's/^PXL_API[^(]*[^a-z0-9_](pxl_[a-z0-9_]+)\(.*/\1/p' include/pixload.h | sort -u)
check "only pxl_ symbols exported" test -z "$(echo "$exported" | grep -v '^pxl_')"
check "exports exactly the header's $(echo "$declared" | wc -l) functions" test "$exported" = "$declared"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# install / uninstall into a DESTDIR: exactly these files, then nothing.
make --no-print-directory -s install DESTDIR="$work/dest" PREFIX=/opt/pixload >/dev/null
expected="/opt/pixload/bin/pixload
/opt/pixload/include/pixload.h
/opt/pixload/lib/cmake/pixload/pixloadConfig.cmake
/opt/pixload/lib/cmake/pixload/pixloadConfigVersion.cmake
/opt/pixload/lib/libpixload.so
/opt/pixload/lib/libpixload.so.0
/opt/pixload/lib/libpixload.so.$version
/opt/pixload/lib/pixload/codecs/libpixload-heif.so
/opt/pixload/lib/pixload/codecs/libpixload-jxl.so
/opt/pixload/lib/pixload/codecs/libpixload-svg.so
/opt/pixload/lib/pixload/pixload-decode-builtins.so
/opt/pixload/lib/pixload/pixload-decode-worker
/opt/pixload/lib/pkgconfig/pixload.pc
/opt/pixload/share/man/man1/pixload.1"
actual=$(cd "$work/dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
check "install writes exactly the expected files" test "$actual" = "$expected"
check "soname links" test "$(readlink "$work/dest/opt/pixload/lib/libpixload.so.0")" = libpixload.so.$version
# Installed for /opt/pixload, found where it is: the CMake package computes its paths from
# its own location (pixload.pc names /opt/pixload and could not).
mkdir -p "$work/app"
python3 - "$work/app/tiny.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
w, h = 40, 30
raw = b"".join(b"\0" + b"".join(bytes((x * 6 % 256, y * 8 % 256, 128)) for x in range(w)) for y in range(h))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
check "CMake: hello.c builds against the package moved to a DESTDIR" build_hello_cmake "$work/cmake-moved" "$work/dest/opt/pixload"
check "CMake: that hello runs with the moved library" \
  hello_runs "$work/cmake-moved/hello" "file://$work/app/tiny.png" "$work/dest/opt/pixload/lib"
make --no-print-directory -s uninstall DESTDIR="$work/dest" PREFIX=/opt/pixload >/dev/null
check "uninstall removes exactly those" test -z "$(cd "$work/dest" && find . \( -type f -o -type l \))"
check "uninstall removes the CMake package's folder" test ! -e "$work/dest/opt/pixload/lib/cmake/pixload"

# A program outside the tree, built with pkg-config against an installed copy.
prefix="$work/prefix"
make --no-print-directory -s install PREFIX="$prefix" >/dev/null
cp examples/c/hello.c "$work/app/app.c"
build_app() {
  (cd "$work/app" && PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
    cc app.c $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pixload) -o app)
}
check "cc app.c \$(pkg-config --cflags --libs pixload) builds" build_app
run_app() {
  local out
  out=$(LD_LIBRARY_PATH="$prefix/lib" "$work/app/app" "file://$work/app/tiny.png") || return 1
  echo "     $out"
  [[ "$out" == *"30x30 (source 40x30)"* ]]
}
check "the installed program loads an image" run_app
check "CMake: find_package(pixload CONFIG REQUIRED) builds examples/c" build_hello_cmake "$work/cmake" "$prefix"
check "CMake: hello runs" hello_runs "$work/cmake/hello" "file://$work/app/tiny.png" "$prefix/lib"
check "Meson: dependency('pixload') builds examples/c" build_hello_meson "$work/meson" "$prefix"
check "Meson: hello runs" hello_runs "$work/meson/hello" "file://$work/app/tiny.png" "$prefix/lib"
check "CMake: pixloadConfigVersion.cmake follows pixload.h's versioning rule" \
  cmake_version_rule "$work/cmake-rule" "$prefix" "$version"
man_page() {  # the installed page renders, names the version, and documents --out-dir
  local text
  text=$(MANWIDTH=80 man -l "$prefix/share/man/man1/pixload.1" 2>&1) || return 1
  [[ "$text" == *"pixload $version"* && "$text" == *"--out-dir DIR"* && "$text" != *"@VERSION@"* ]]
}
check "man page installed to share/man/man1 and renders" man_page
check "installed pixload client runs" bash -c "LD_LIBRARY_PATH='$prefix/lib' '$prefix/bin/pixload' version | grep -qF '$version'"
# The installed client as a user meets it: --out-dir makes its folder, parents included;
# a file:// load is reported as such, not as network.
client_fetch() {
  LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/pixload" fetch --allow-file --no-disk-cache "$@"
}
out_dir_created() {
  client_fetch --out-dir "$work/thumbs/a/b" "file://$work/app/tiny.png" >/dev/null &&
    [ -s "$work/thumbs/a/b/0000-tiny.png" ]
}
check "pixload fetch --out-dir creates a missing nested folder" out_dir_created
source_is_file() {
  local out
  out=$(client_fetch "file://$work/app/tiny.png") || return 1
  echo "     $(echo "$out" | head -1)"
  [ "$(echo "$out" | head -1 | awk '{print $3}')" = file ]
}
check "pixload fetch: the source column says file for file://" source_is_file
# Every other place that states the version agrees with the header.
version_in() { grep -qE "^(version = |__version__ = )\"$version\"" "$root/$1"; }
for file in bindings/python/pyproject.toml bindings/python/pixload/__init__.py bindings/rust/Cargo.toml; do
  check "$file states version $version" version_in "$file"
done
make --no-print-directory -s uninstall PREFIX="$prefix" >/dev/null

# A build that only builds: every system .pc but libcurl's, and package managers on PATH
# that only record that they ran.
mkdir -p "$work/pc" "$work/fakebin"
for dir in $(pkg-config --variable pc_path pkg-config | tr : ' '); do
  [ -d "$dir" ] && find "$dir" -maxdepth 1 -name '*.pc' ! -name libcurl.pc -exec cp -n {} "$work/pc/" \;
done
for tool in apt-get apt aptitude dpkg sudo pip pip3; do
  printf '#!/bin/sh\necho "$0 $*" >> "%s/package-manager-ran"\nexit 1\n' "$work" > "$work/fakebin/$tool"
  chmod +x "$work/fakebin/$tool"
done
missing_curl() {  # missing_curl MAKE_ARGS...: fails, one line naming the package, nothing installed
  local out status
  out=$(PATH="$work/fakebin:$PATH" PKG_CONFIG_LIBDIR="$work/pc" PKG_CONFIG_PATH= \
        make --no-print-directory "$@" 2>&1 >/dev/null); status=$?
  echo "     $(echo "$out" | grep '^pixload:')"
  [ "$status" -ne 0 ] && [ ! -e "$work/package-manager-ran" ] &&
    [ "$(echo "$out" | grep -c '^pixload: ')" -eq 1 ] &&
    echo "$out" | grep -q '^pixload: missing build dependency: .*libcurl4-openssl-dev'
}
check "make without libcurl's .pc: one line naming libcurl4-openssl-dev, no package manager" missing_curl
check "make install without libcurl's .pc: the same" missing_curl install DESTDIR="$work/dest-nocurl"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
