#!/usr/bin/env bash
# scripts/demo-formats.sh DATA_DIR
#
# The demo's table shows every format pixload decodes, not only JPEG and PNG: from the
# photo set of scripts/photos.sh (DATA_DIR/index.txt), three rows in every ten are
# re-encoded by Debian's own encoders into DATA_DIR/formats/ (row 10k+3 WebP by cwebp,
# 10k+5 AVIF by avifenc, 10k+7 GIF by ImageMagick, and every 40th row from 10k+1 an
# animated GIF of four crops of its photo), and DATA_DIR/index-formats.txt lists the
# table with those rows swapped in. The benchmarks keep index.txt (JPEG and PNG).
# Idempotent: does nothing when index-formats.txt is newer than index.txt.
set -euo pipefail
data="${1:?usage: $0 DATA_DIR}"
index="$data/index.txt" out="$data/index-formats.txt"
[ -f "$out" ] && [ "$out" -nt "$index" ] && exit 0
for tool in cwebp avifenc convert; do
  command -v "$tool" >/dev/null || "$(dirname "$0")/deps.sh"
done

tmp=$(mktemp -d "$data/.formats.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/formats"
n=0
while IFS= read -r rel; do
  src="$data/$rel" stem=$(basename "${rel%.*}") line="$rel"
  case "$rel" in *.jpg)
    case $((n % 10)) in
      3) cwebp -quiet -q 80 "$src" -o "$tmp/formats/$stem.webp"; line="formats/$stem.webp" ;;
      5) avifenc --speed 9 --jobs 2 "$src" "$tmp/formats/$stem.avif" >/dev/null; line="formats/$stem.avif" ;;
      7) convert "$src" -resize '640x640>' "$tmp/formats/$stem.gif"; line="formats/$stem.gif" ;;
      1) if [ $((n % 40)) -eq 1 ]; then
           # Four crops drifting across the photo, 250 ms each, looping: a row that animates.
           convert "$src" -resize '480x480>' -write mpr:p +delete \
             \( mpr:p -gravity northwest -crop 70%x70%+0+0 +repage \) \
             \( mpr:p -gravity north -crop 70%x70%+0+0 +repage \) \
             \( mpr:p -gravity center -crop 70%x70%+0+0 +repage \) \
             \( mpr:p -gravity southeast -crop 70%x70%+0+0 +repage \) \
             -resize '320x320!' -set delay 25 -loop 0 "$tmp/formats/$stem-animated.gif"
           line="formats/$stem-animated.gif"
         fi ;;
    esac ;;
  esac
  echo "$line" >> "$tmp/index"
  n=$((n + 1))
done < "$index"
rm -rf "$data/formats"
mv "$tmp/formats" "$data/formats"
mv "$tmp/index" "$out"
echo "demo-formats: $(grep -c '^formats/' "$out") of $n rows as WebP, AVIF and (animated) GIF in $data/formats"
