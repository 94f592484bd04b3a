#!/usr/bin/env bash
# scripts/progressive-photos.sh OUT_DIR
#
# Camera-size progressive JPEGs for the first-scan benchmark (bench/first_scan.c): every
# photograph of Debian's lomiri-wallpapers-16.04 (the source scripts/photos.sh uses, see
# there for licences) of 8 megapixels or more, made progressive by jpegtran. jpegtran
# rewrites the same coefficients in libjpeg's default progression (DC first, then AC
# bands and refinements), which is what cameras' and web optimisers' progressive files
# look like; the pixels are the original's. Writes OUT_DIR/NAME.jpg and OUT_DIR/index.txt.
# Idempotent: does nothing when the index exists.
set -euo pipefail
out="${1:?usage: $0 OUT_DIR}"
[ -f "$out/index.txt" ] && exit 0
# The package's own files, not whatever else /usr/share/backgrounds holds: the set is the
# same on every machine.
dpkg -L lomiri-wallpapers-16.04 >/dev/null 2>&1 ||
  { echo "progressive-photos.sh: lomiri-wallpapers-16.04 is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pxl-progressive.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg -L lomiri-wallpapers-16.04 | grep -i '\.jpg$' | sort >"$tmp/all.txt"
python3 - "$tmp/all.txt" >"$tmp/big.txt" <<'PY'
import sys
from PIL import Image
for path in open(sys.argv[1]).read().split():
    with Image.open(path) as im:
        if im.width * im.height >= 8_000_000:
            print(path)
PY
[ -s "$tmp/big.txt" ] || { echo "progressive-photos.sh: no photograph of 8 MP or more in lomiri-wallpapers-16.04" >&2; exit 1; }
while read -r path; do
  name=$(basename "$path" .jpg)
  jpegtran -progressive -copy none -outfile "$tmp/$name.jpg" "$path"
  echo "$name.jpg" >>"$tmp/index.txt"
done <"$tmp/big.txt"
mkdir -p "$out"
mv "$tmp"/*.jpg "$out/"
mv "$tmp/index.txt" "$out/index.txt"
