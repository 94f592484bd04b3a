#!/usr/bin/env bash
# scripts/demo-blurhashes.sh STAGE INDEX OUT
#
# The BlurHashes of the images INDEX lists (paths relative to INDEX's directory, as
# scripts/photos.sh writes them), as the example lists' rows show them (96x96 FILL), made
# by pixload's own encoder (`pixload hash --blurhash`, STAGE/bin/pixload): OUT gets one
# "PATH<TAB>HASH" line per image, the format the Qt gallery's --placeholders and the GTK
# example's --placeholders read. Exits non-zero (OUT then incomplete) unless every image
# got a hash. Used by examples/qt/test_offscreen.sh, examples/gtk/test_xvfb.sh and
# `make gtk-demo`.
set -uo pipefail
stage="${1:?usage: $0 STAGE INDEX OUT}" index="${2:?}" out="${3:?}"
dir=$(cd "$(dirname "$index")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pxl-hashes.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

sed "s|^|file://$dir/|" "$index" >"$tmp/urls"
"$stage/bin/pixload" hash --blurhash --size 96x96 --mode fill --allow-file --no-disk-cache \
  --urls "$tmp/urls" >"$tmp/hashes" 2>"$tmp/err"
rc=$?
paste "$index" "$tmp/hashes" >"$out"
images=$(wc -l <"$index")
hashed=$(awk -F'\t' 'NF == 2 && length($2) >= 6' "$out" | wc -l)
if [ "$rc" -ne 0 ] || [ "$hashed" -ne "$images" ] || [ "$(wc -l <"$tmp/hashes")" -ne "$images" ]; then
  echo "demo-blurhashes.sh: $hashed of $images images hashed (pixload hash exit status $rc)" >&2
  head -5 "$tmp/err" >&2
  exit 1
fi
