#!/usr/bin/env bash
# Tests/soak/run.sh [SECONDS]
#
# The stress and soak test (Tests/soak/soak.c) against a built libpixload: builds the
# fixtures and the program, serves the fixtures with a private nginx (scripts/nginx.sh) and
# starts the fault server (Tests/faultserver, a port of the kernel's choice), then runs
# soak for SECONDS (default 60; `make soak` runs 1800). The last line of output is
# "N passed, N failed"; the exit status is non-zero on any failure.
#
#   PXL_LIBDIR      directory of libpixload.so  (default build/lib)
#   PXL_INCLUDEDIR  directory of pixload.h      (default include)
#   PXL_SOAK_PORT   nginx port                  (default: a free one)
#   PXL_SOAK_ISOLATION  none, modules (default) or all: every loader's pxl_config.isolation
#                   (all: every JPEG, PNG and WebP decoded in a worker, workers started and
#                   ended with every recycled loader)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$root/$1" ;; esac; }
libdir=$(abs "${PXL_LIBDIR:-build/lib}")
incdir=$(abs "${PXL_INCLUDEDIR:-include}")
port="${PXL_SOAK_PORT:-$("$root/scripts/free-port.sh")}"
seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "run.sh: SECONDS '$seconds' is not a number" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-soak.XXXXXX")
fault_pid=""
cleanup() {
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1 || true
  if [ -n "$fault_pid" ]; then kill "$fault_pid" 2>/dev/null || true; wait "$fault_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A private copy of the library: a rebuild during a 30-minute run must not swap it.
mkdir -p "$work/lib"
cp "$(readlink -f "$libdir/libpixload.so")" "$work/lib/libpixload.so"
ln -s libpixload.so "$work/lib/libpixload.so.0"
# The decode worker and the modules, where the library looks for them (LIBDIR/pixload/).
[ ! -d "$libdir/pixload" ] || cp -r "$libdir/pixload" "$work/lib/pixload"

cflags=(-std=c11 -O1 -g -Wall -Wextra)
gcc "${cflags[@]}" "$root/Tests/capi/mkfixtures.c" -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures"
gcc "${cflags[@]}" -I "$incdir" "$root/Tests/soak/soak.c" -L "$work/lib" -Wl,-rpath,"$work/lib" \
  -lpixload -lpthread -o "$work/soak"
mkdir -p "$work/www" "$work/disk"
"$work/mkfixtures" "$work/www" >/dev/null
"$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx"

# shellcheck source=../faultserver/start.sh
. "$root/Tests/faultserver/start.sh"
start_faultserver "$work" --www "$work/www" --lifetime $((seconds + 300)) --log /dev/null

# The library's own log lines (dropped disk entries, ...) go to a file: stdout stays the
# report, with "N passed, N failed" last.
"$work/soak" "http://127.0.0.1:$port" "http://127.0.0.1:$fault_port" "$work/disk" "$seconds" 2>"$work/library.log"
