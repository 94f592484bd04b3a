#!/usr/bin/env bash
# bindings/rust/run_tests.sh [LIBDIR]
#
# Runs the Rust binding's tests (`cargo test --offline`) against the libpixload.so in
# LIBDIR (default: build/lib of this checkout; a relative path is relative to the
# current directory). Its header is taken from PIXLOAD_INCLUDE_DIR when set, else from
# LIBDIR/../include, else include/ of this checkout. The build goes to
# bindings/rust/target. The tests compile the fixtures with gcc and serve them with a
# private nginx (scripts/nginx.sh) on a port scripts/free-port.sh finds, or on the first
# free one of PXL_RUST_TEST_PORTS ("FIRST-LAST") when set.
# The output ends with cargo's "test result: ..." lines; the exit status is cargo's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
libdir="${1:-$root/build/lib}"
case "$libdir" in /*) ;; *) libdir="$PWD/$libdir" ;; esac
ls "$libdir"/libpixload.so* >/dev/null 2>&1 || { echo "run_tests.sh: no libpixload.so in $libdir" >&2; exit 1; }

export PIXLOAD_LIB_DIR="$libdir"
export CARGO_TARGET_DIR="$here/target"
cd "$here"
exec cargo test --offline
