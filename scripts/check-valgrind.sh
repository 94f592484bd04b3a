#!/usr/bin/env bash
# scripts/check-valgrind.sh STAGE [CORPUS]
#
# The shipped library under valgrind memcheck, with zero bytes "definitely" or
# "indirectly" lost and no memory error:
#   1. a canary: a program that leaks a pxl_queue must be reported (the check works on
#      the library's allocations);
#   2. the client, STAGE/bin/pixload fetch, over a private nginx: the test fixtures under
#      several names plus, when CORPUS is there, a sample of its real photos, EXIF-rotated
#      JPEGs and PngSuite files; thumbnails written as PNG and kept in a disk cache, then
#      read back from that cache offline (--cache-only); then a run of failures (404,
#      connection refused, a corrupt JPEG, HTML under an image name, a malformed URL,
#      file:// refused, a timeout mid-body) and a usage error;
#   3. the C API tests (Tests/capi/run.sh with PXL_VALGRIND=1).
# Each valgrind run's summary lines are printed; any error fails the run. Ends with
# "check-valgrind: clean".
#
# libjpeg-turbo's SIMD code gives memcheck false "uninitialised value" reports: memcheck
# tracks definedness through vector multiplies and shuffles only approximately, so
# padding columns of libjpeg's own sample buffers (which the SIMD upsampling reads and
# whose results land past the row's end) taint whole vectors of real pixels. Measured
# here with SIMD on, 16 JPEG/PNG fixtures and photos to 150x150 thumbnails written as PNG:
# 149,117 reports in 165 contexts, 5 in AreaResampler.finish (averaging those pixels) and
# the rest where the same pixels are PNG-encoded (zlib crc32/deflate, libpng) and
# written; 160 contexts' origin is a block malloc'ed by libjpeg's jinit_d_main_controller
# (the other 5 memcheck attributes to a reused stack slot). With JSIMD_FORCENONE=1
# (libjpeg-turbo's switch to its plain C code) the same images give none, and
# AddressSanitizer (scripts/check-sanitizer.sh) finds no read outside a buffer. So every run here sets JSIMD_FORCENONE=1 rather than
# suppressing reports in our own resampler; JSIMD_FORCENONE= (empty) shows them.
# Suppressions (Tests/valgrind.supp) are only for system libraries' one-time set-up.
# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 the Swift toolchain emits, so the
# library is run from a copy without debug info (stack frames still have symbol names).
#
# Environment: PXL_TEST_PORT (nginx port for step 2, default a free one; step 3 passes it and
# PXL_TEST_TLS_PORT on to run.sh, whose defaults apply when unset), PXL_VALGRIND_CAPI=0
# skips step 3.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
stage=$(cd "${1:?usage: $0 STAGE [CORPUS]}" && pwd)
corpus="${2:-../shared/corpus}"
port="${PXL_TEST_PORT:-$(scripts/free-port.sh)}"
supp="$root/Tests/valgrind.supp"
export JSIMD_FORCENONE="${JSIMD_FORCENONE-1}"

command -v valgrind >/dev/null || { echo "check-valgrind: valgrind not installed (apt-get install valgrind)" >&2; exit 1; }
[ -x "$stage/bin/pixload" ] || { echo "check-valgrind: no $stage/bin/pixload: run make first" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-valgrind.XXXXXX")
cleanup() {
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
failed=0

# The client and a stripped library side by side: its RUNPATH is $ORIGIN/../lib.
mkdir -p "$work/bin" "$work/lib"
cp "$stage/bin/pixload" "$work/bin/pixload"
cp "$(readlink -f "$stage/lib/libpixload.so.0")" "$work/lib/libpixload.so.0"
strip --strip-debug "$work/lib/libpixload.so.0"
ln -s libpixload.so.0 "$work/lib/libpixload.so"

vg_opts=(--leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
         --track-origins=yes --suppressions="$supp")

# vg NAME EXPECTED_EXIT COMMAND...: runs COMMAND under memcheck, prints its summary lines;
# fails (counts) on any valgrind error or an exit status other than EXPECTED_EXIT.
vg() {
  local name="$1" want="$2"; shift 2
  local log="$work/vg-$name.log" status=0
  valgrind "${vg_opts[@]}" --log-file="$log" "$@" >"$work/out-$name.txt" 2>&1 || status=$?
  if [ "$want" = 0 ]; then
    echo "-- $name: $(tail -1 "$work/out-$name.txt")"
  else  # the failures themselves, to see they are the intended ones
    echo "-- $name (exit $status):"
    { head -9 "$work/out-$name.txt" | sed 's/^/   > /'; } || true
  fi
  grep -E "definitely lost:|indirectly lost:|ERROR SUMMARY:" "$log" | sed -E 's/^==[0-9]+== +/   /'
  if ! grep -q "ERROR SUMMARY: 0 errors" "$log"; then
    { sed -n "/^==[0-9]*== [A-Z]/,\$p" "$log" | head -300; } || true
    echo "FAIL $name: valgrind errors (above)"; failed=$((failed + 1))
  elif [ "$status" != "$want" ]; then
    cat "$work/out-$name.txt"
    echo "FAIL $name: exit status $status, expected $want"; failed=$((failed + 1))
  fi
}

# 1. The canary.
cat >"$work/canary.c" <<'EOF'
#include <stdio.h>
#include "pixload.h"
static pxl_queue *leaked;
int main(void) {
  if (pxl_queue_new(&leaked) != PXL_OK) return 2;
  leaked = NULL; /* the only reference is gone: memcheck must call it definitely lost */
  printf("canary %s\n", pxl_version());
  return 0;
}
EOF
gcc -std=c11 -g -Iinclude "$work/canary.c" -L"$work/lib" -Wl,-rpath,"$work/lib" -lpixload -o "$work/canary"
valgrind "${vg_opts[@]}" --log-file="$work/vg-canary.log" "$work/canary" >/dev/null 2>&1 || true
if grep -q "definitely lost: [1-9]" "$work/vg-canary.log" && grep -q "pxl_queue_new" "$work/vg-canary.log"; then
  echo "-- canary: a leaked pxl_queue is reported ($(grep -o 'definitely lost: .*' "$work/vg-canary.log"))"
else
  cat "$work/vg-canary.log"; echo "FAIL canary: valgrind did not report the leaked queue"; failed=$((failed + 1))
fi

# 2. The client over nginx.
gcc -std=c11 -O1 Tests/capi/mkfixtures.c -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures"
mkdir -p "$work/www"
"$work/mkfixtures" "$work/www" >/dev/null
urls="$work/urls.txt"
base="http://127.0.0.1:$port"
for copy in 1 2 3 4 5 6; do  # distinct URLs (cache keys) for the same files
  for f in gradient.jpg oriented6.jpg alpha.png medium.jpg; do echo "$base/$f?copy=$copy"; done
done >"$urls"
if [ -d "$corpus/realworld" ]; then
  mkdir -p "$work/www/corpus"
  for f in $(ls "$corpus/realworld/photos" | head -4) ; do cp "$corpus/realworld/photos/$f" "$work/www/corpus/"; done
  for f in $(ls "$corpus/realworld/exif-orientation" | head -8); do cp "$corpus/realworld/exif-orientation/$f" "$work/www/corpus/"; done
  for f in basn0g01 basn0g16 basn2c16 basn3p02 basn4a08 basn6a16 basi0g04 basi3p08 basi6a08 \
           s09n3p02 tbrn2c08 tp1n3p08 g05n3p04 ch1n3p04 oi4n2c16 z09n2c08; do
    [ -f "$corpus/pngsuite/$f.png" ] && cp "$corpus/pngsuite/$f.png" "$work/www/corpus/"
  done
  for f in "$work"/www/corpus/*; do echo "$base/corpus/$(basename "$f")"; done >>"$urls"
else
  echo "(no corpus at $corpus: fixtures only)"
fi
count=$(wc -l <"$urls")
"$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx" >/dev/null

fetch=("$work/bin/pixload" fetch --quiet --cache-dir "$work/cache" --disk-cache-mb 64)
mkdir -p "$work/out"
vg "fetch-$count-thumbnails" 0 "${fetch[@]}" --size 150x150 --mode fill --out-dir "$work/out" --urls "$urls"
written=$(ls "$work/out" | wc -l)
[ "$written" = "$count" ] || { echo "FAIL fetch: $written of $count PNG files written"; failed=$((failed + 1)); }
vg "fetch-$count-from-disk-cache" 0 "${fetch[@]}" --cache-only --size 150x150 --mode fill --format bgra8-premul --urls "$urls"
vg "fetch-full-size-no-caches" 0 "$work/bin/pixload" fetch --quiet --no-disk-cache --memory-cache-mb 0 \
  "$base/gradient.jpg" "$base/alpha.png" "$base/oriented6.jpg?full=1"
# Every failure kind the client meets; exit status 1 (some URL failed).
refused=$(scripts/free-port.sh)
vg "fetch-errors" 1 "$work/bin/pixload" fetch --no-disk-cache --retries 1 --timeout-ms 1500 \
  "$base/missing.jpg" "http://127.0.0.1:$refused/x.jpg" "$base/corrupt.jpg" "$base/not-an-image.jpg" \
  "http://[bad/x.jpg" "file://$work/www/gradient.jpg" "$base/slow/noise.jpg" "$base/gradient.jpg?ok=1"
vg "usage-error" 2 "$work/bin/pixload" fetch --size bogus "$base/gradient.jpg"

# 3. The C API tests (run.sh starts its own nginx, on the same port when PXL_TEST_PORT is set).
"$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null
if [ "${PXL_VALGRIND_CAPI:-1}" = 1 ]; then
  echo "-- C API tests under valgrind (Tests/capi/run.sh, PXL_VALGRIND=1)"
  if ! PXL_VALGRIND=1 PXL_LIBDIR="$stage/lib" PXL_INCLUDEDIR="$stage/include" Tests/capi/run.sh >"$work/capi.log" 2>&1; then
    grep -v -E '^  |^test_.* ok \(' "$work/capi.log" | tail -400
    echo "FAIL C API tests under valgrind"; failed=$((failed + 1))
  else
    grep -E "passed, [0-9]+ failed|^valgrind: (definitely|indirectly)|^valgrind: ERROR" "$work/capi.log"
  fi
fi

[ "$failed" = 0 ] || { echo "check-valgrind: $failed failed"; exit 1; }
echo "check-valgrind: clean"
