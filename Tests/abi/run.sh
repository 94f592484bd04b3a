#!/usr/bin/env bash
# Tests/abi/run.sh LIBDIR
#
# Builds Tests/abi/abi_0_1.c against the 0.1.0 header (pixload-0.1.0.h, kept as released)
# and runs it against the library in LIBDIR: a program built for 0.1.0 keeps working.
# Its last line is "N passed, N failed".
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
libdir=$(cd "${1:?usage: $0 LIBDIR}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-abi.XXXXXX")
trap 'rm -rf "$work"' EXIT
gcc -std=c11 -O1 -Wall -Wextra "$root/Tests/capi/mkfixtures.c" -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures"
mkdir -p "$work/www"
"$work/mkfixtures" "$work/www" >/dev/null
gcc -std=c11 -O1 -g -Wall -Wextra -I "$root/Tests/abi" "$root/Tests/abi/abi_0_1.c" \
  -L "$libdir" -Wl,-rpath,"$libdir" -lpixload -o "$work/abi_0_1"
"$work/abi_0_1" "$work/www/gradient.jpg"
