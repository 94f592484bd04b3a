#!/usr/bin/env bash
# Tests/capi/run.sh [TEST_NAME...]
#
# Builds the fixtures and the C API tests against a built or installed libpixload,
# serves the fixtures with a private nginx on 127.0.0.1 (http, and https + HTTP/2 with a
# throwaway CA made by mkcerts.sh; ports from scripts/free-port.sh), starts the fault-injecting server
# (Tests/faultserver, ports of the kernel's choice, http and https) and runs the tests.
# nginx also serves https with one request per connection (a new TLS handshake each),
# for the session-resumption test.
# The last line of output is "N passed, N failed"; the exit status is non-zero on any
# failure.
#
#   PXL_LIBDIR      directory of libpixload.so  (default .build-release/release)
#   PXL_INCLUDEDIR  directory of pixload.h      (default include)
#                   (relative paths are relative to the repository root)
#   PXL_TEST_PORT   nginx port                  (default: a free one)
#   PXL_TEST_TLS_PORT  nginx https port         (default: a free one)
#   PXL_VALGRIND=1  run the tests under valgrind (memcheck, leaks, errors fail the run)
#   PXL_VALGRIND_SUPP  suppression file for valgrind (default Tests/valgrind.supp)
#   PXL_CC          compiler for the test program (default gcc; scripts/check-sanitizer.sh
#                   uses the Swift toolchain's clang, whose sanitizer runtimes the
#                   library was built against)
#   PXL_CFLAGS      extra compile and link flags for the test program (-fsanitize=...)
#   PXL_PRELOAD     LD_PRELOAD for the test program only (not for nginx or the fault
#                   server): a sanitizer runtime that must be loaded first. E.g. plain gcc
#                   tests against the ASan-built library: PXL_CC=gcc
#                   PXL_CFLAGS=-Wl,--allow-shlib-undefined PXL_PRELOAD=<the toolchain's
#                   lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so> (gcc's own libasan
#                   is another runtime and does not mix with the library's)
#   PXL_TEST_SLOW_FACTOR  deadlines multiplied by N (valgrind: 10 unless set)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/Tests/capi"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$root/$1" ;; esac; }
libdir=$(abs "${PXL_LIBDIR:-.build-release/release}")
incdir=$(abs "${PXL_INCLUDEDIR:-include}")
{ read -r free_port; read -r free_tls_port; read -r reconnect_port; } < <("$root/scripts/free-port.sh" 3)
port="${PXL_TEST_PORT:-$free_port}"
tls_port="${PXL_TEST_TLS_PORT:-$free_tls_port}"

[ -f "$incdir/pixload.h" ] || { echo "run.sh: no pixload.h in $incdir" >&2; exit 1; }
ls "$libdir"/libpixload.so* >/dev/null 2>&1 || { echo "run.sh: no libpixload.so in $libdir" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-capi.XXXXXX")
fault_pid=""
cleanup() {
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1 || true
  # Only the server this run started, by its pid (it also exits by itself after 10 min).
  if [ -n "$fault_pid" ]; then kill "$fault_pid" 2>/dev/null || true; wait "$fault_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The library's SONAME is libpixload.so.0; a build folder may hold only libpixload.so.
# Link a private copy then, so that the tests find at run time what they linked, and a
# rebuild during the run cannot swap the library under them.
# Valgrind 3.19 (Debian 12) gives up on the DWARF 5 the Swift toolchain emits, so it gets
# a copy without debug info.
if [ ! -e "$libdir/libpixload.so.0" ] || [ "${PXL_VALGRIND:-0}" = 1 ]; then
  mkdir -p "$work/lib"
  cp "$(readlink -f "$libdir/libpixload.so")" "$work/lib/libpixload.so"
  ln -s libpixload.so "$work/lib/libpixload.so.0"
  [ "${PXL_VALGRIND:-0}" = 1 ] && strip --strip-debug "$work/lib/libpixload.so"
  libdir="$work/lib"
fi

cflags=(-std=c11 -O1 -g -Wall -Wextra)
# The fixture maker is a tool, not under test: always the plain compiler.
gcc "${cflags[@]}" "$here/mkfixtures.c" -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures"
read -r -a extra_cflags <<<"${PXL_CFLAGS:-}"
"${PXL_CC:-gcc}" "${cflags[@]}" "${extra_cflags[@]}" -I "$incdir" "$here/harness.c" "$here"/test_*.c \
  -L "$libdir" -Wl,-rpath,"$libdir" -lpixload -lpthread -lsqlite3 -o "$work/capi_tests"

# The hostile codec module (Tests/worker/hostile_module.c) for the isolation tests, and the
# decode worker the library runs it in: the one beside the library, else the build's.
mkdir -p "$work/modules"
gcc "${cflags[@]}" -fPIC -shared -fvisibility=hidden -I "$incdir" "$root/Tests/worker/hostile_module.c" \
  -o "$work/modules/libpixload-hostile.so" -pthread
# A module whose manifest's version is not its codec's (test_isolation_manifest_version).
gcc "${cflags[@]}" -fPIC -shared -fvisibility=hidden -I "$incdir" "$root/Tests/worker/version_module.c" \
  -o "$work/modules/libpixload-oldbuild.so"
export PXL_TEST_HOSTILE_DIR="$work/modules"
if [ -z "${PIXLOAD_DECODE_WORKER:-}" ]; then
  for worker in "$libdir/pixload/pixload-decode-worker" "$(abs "${PXL_LIBDIR:-.build-release/release}")/pixload/pixload-decode-worker" \
                "$root/build/lib/pixload/pixload-decode-worker"; do
    if [ -x "$worker" ]; then export PIXLOAD_DECODE_WORKER="$worker"; break; fi
  done
fi

mkdir -p "$work/www"
"$work/mkfixtures" "$work/www"
gcc "${cflags[@]}" "$here/mkfixtures_avif.c" -lavif -o "$work/mkfixtures_avif"
"$work/mkfixtures_avif" "$work/www"
# The codec modules' files for test_isolation_modules_resampled: the module fuzz seeds
# (made now when the build has none) and the SVG fuzz seeds.
seeds="$root/build/fuzz/seeds"
[ -d "$seeds/heif" ] && [ -d "$seeds/jxl" ] || python3 "$root/scripts/gen-module-fuzz-seeds.py" "$seeds" >/dev/null
mkdir -p "$work/www/modules"
cp "$seeds"/heif/*.heic "$seeds"/jxl/*.jxl "$root"/Tests/fuzz/seeds/svg/*.svg "$work/www/modules/"
# test_player_jxl_frames: the libjxl conformance suite's animation (60 frames of splines).
cp "$root/Tests/fixtures/jxl-suite/animation_spline.jxl" "$work/www/modules/"
# test_isolation_mapped: a HEIC large enough to be mapped, not copied (640x480).
heif-enc -q 60 "$work/www/gradient.jpg" -o "$work/www/modules/large.heic" >/dev/null 2>&1 || true
# A progressive JPEG XL for test_previews_isolated, at www's top level (what the fault
# server serves), of more than one 256x256 group (a single group has no passes to flush).
cjxl "$work/www/progressive.jpg" "$work/www/progressive.jxl" -d 1 -p --lossless_jpeg=0 --quiet
"$here/mkcerts.sh" "$work/pki"
"$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx" \
  "$tls_port" "$work/pki/server.pem" "$work/pki/server.key" "$reconnect_port"

# The fault server prints "faultserver ready http=PORT https=PORT pid=PID" once it listens,
# and exits by itself after --lifetime seconds should this script be killed outright
# (10 minutes; an hour under valgrind, where the whole run takes longer).
lifetime=600
[ "${PXL_VALGRIND:-0}" = 1 ] && lifetime=3600
# shellcheck source=../faultserver/start.sh
. "$root/Tests/faultserver/start.sh"
start_faultserver "$work" --www "$work/www" --cert "$work/pki/server.pem" \
  --key "$work/pki/server.key" --lifetime "$lifetime" --log "$work/faultserver.log"

runner=()
valgrind=0
if [ "${PXL_VALGRIND:-0}" = 1 ]; then
  # Deadlines stretch under valgrind; leaks ("definitely" and "indirectly" lost) and
  # memory errors fail the run. "possible" leaks are excluded: threads the runtime keeps
  # (and their TLS) show up as such. One log per process (%p): test_table.c forks
  # children that make one call and _exit; see below for how their logs are read.
  valgrind=1
  export PXL_TEST_SLOW_FACTOR=${PXL_TEST_SLOW_FACTOR:-10}
  runner=(valgrind --log-file="$work/valgrind.%p.log" --leak-check=full
          --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
          --track-origins=yes --suppressions="$(abs "${PXL_VALGRIND_SUPP:-Tests/valgrind.supp}")")
fi
if [ -n "${PXL_PRELOAD:-}" ]; then
  runner=(env LD_PRELOAD="$PXL_PRELOAD" "${runner[@]}")
fi

# In the background and waited for, to know the test program's pid (valgrind and env
# exec it in place): its valgrind log is valgrind.PID.log.
"${runner[@]}" "$work/capi_tests" "http://127.0.0.1:$port" "$work/nginx/access.log" "$work/www" \
  --fault-url="http://127.0.0.1:$fault_port" --fault-tls-url="https://127.0.0.1:$fault_tls_port" \
  --ca-file="$work/pki/ca.pem" --other-ca-file="$work/pki/other-ca.pem" \
  --tls-url="https://127.0.0.1:$tls_port" --tls-log="$work/nginx/access-tls.log" \
  --tls-reconnect-url="https://127.0.0.1:$reconnect_port" \
  --tls-reconnect-log="$work/nginx/access-tls-reconnect.log" --ca-dir="$work/pki/cadir" "$@" &
test_pid=$!
status=0
wait "$test_pid" || status=$?
[ "$valgrind" = 1 ] || exit "$status"

# The test program's own log: its summary lines, and any error (leaks included) fails.
main_log="$work/valgrind.$test_pid.log"
[ -f "$main_log" ] || { echo "run.sh: no valgrind log $main_log" >&2; exit 1; }
grep -E "definitely lost:|indirectly lost:|possibly lost:|still reachable:|suppressed:|ERROR SUMMARY:" "$main_log" |
  sed -E 's/^==[0-9]+== +/valgrind: /'
if ! grep -q "ERROR SUMMARY: 0 errors" "$main_log"; then
  sed -n '/^==[0-9]*== [A-Z]/,$p' "$main_log" | head -400
  echo "run.sh: valgrind found errors in the test program (above)" >&2
  status=1
fi
# Forked children (test_table.c's crash checks): a copy of the process in which only the
# forking thread lives on, so whatever the loader's other threads held (their stacks and
# registers are gone) is unreachable there and would read as leaked. Their leak records
# say nothing about the library; a memory error in them does fail the run.
for log in "$work"/valgrind.*.log; do
  [ "$log" = "$main_log" ] && continue
  if grep -q -E "Invalid (read|write|free)|uninitialised|Conditional jump|Syscall param|Mismatched free|overlap" "$log"; then
    cat "$log"
    echo "run.sh: valgrind found memory errors in a forked child (above)" >&2
    status=1
  fi
done
exit "$status"
