#!/usr/bin/env bash
# scripts/demo-formats.sh DATA_DIR
#
# The demo's table shows every format pixload decodes, not only JPEG and PNG: from the
# photo set of scripts/photos.sh (DATA_DIR/index.txt), six rows in every ten are
# re-encoded by Debian's own encoders into DATA_DIR/formats/ (row 10k+3 WebP by cwebp,
# 10k+5 AVIF by avifenc, 10k+7 GIF by ImageMagick, and every 40th row from 10k+1 an
# animated GIF of four crops of its photo; through the codec modules, 10k+2 a progressive
# JPEG XL by cjxl, 10k+6 HEIC by heif-enc with an embedded thumbnail, and 10k+8 an SVG
# drawn here, a logo-like vector of its own), and DATA_DIR/index-formats.txt lists the
# table with those rows swapped in. The benchmarks keep index.txt (JPEG and PNG).
# Idempotent: does nothing when index-formats.txt is newer than index.txt and already has
# the module formats' rows (an older data folder is redone).
set -euo pipefail
data="${1:?usage: $0 DATA_DIR}"
index="$data/index.txt" out="$data/index-formats.txt"
[ -f "$out" ] && [ "$out" -nt "$index" ] && grep -q '\.svg$' "$out" && exit 0
for tool in cwebp avifenc convert cjxl heif-enc; do
  command -v "$tool" >/dev/null || "$(dirname "$0")/deps.sh"
done

# A logo-like vector for row N: a gradient card, rings and a star in colours of its own
# (no text: what fonts a machine has would change its pixels).
svg_logo() {
  local n=$1 h1=$(( ($1 * 47) % 360 )) h2=$(( ($1 * 47 + 140) % 360 ))
  cat <<SVG
<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="480" height="360" viewBox="0 0 480 360">
  <defs>
    <linearGradient id="bg" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="hsl($h1,70%,45%)"/><stop offset="1" stop-color="hsl($h2,70%,30%)"/>
    </linearGradient>
    <radialGradient id="glow" cx="0.5" cy="0.5" r="0.5">
      <stop offset="0" stop-color="#ffffff" stop-opacity="0.9"/><stop offset="1" stop-color="#ffffff" stop-opacity="0"/>
    </radialGradient>
  </defs>
  <rect x="8" y="8" width="464" height="344" rx="36" fill="url(#bg)"/>
  <circle cx="240" cy="180" r="150" fill="url(#glow)"/>
  <g fill="none" stroke="#ffffff" stroke-opacity="0.8">
    <circle cx="240" cy="180" r="$(( 60 + n % 50 ))" stroke-width="10"/>
    <circle cx="240" cy="180" r="$(( 120 + n % 30 ))" stroke-width="4" stroke-dasharray="18 10"/>
  </g>
  <path transform="translate(240 180) rotate($(( n * 13 % 72 )))" fill="hsl($h2,85%,60%)" stroke="#ffffff" stroke-width="4"
        d="M0,-56 L16,-18 57,-17 25,8 36,47 0,24 -36,47 -25,8 -57,-17 -16,-18 Z"/>
</svg>
SVG
}

tmp=$(mktemp -d "$data/.formats.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/formats"
n=0
while IFS= read -r rel; do
  src="$data/$rel" stem=$(basename "${rel%.*}") line="$rel"
  case "$rel" in *.jpg)
    case $((n % 10)) in
      2) cjxl -p -d 1.5 "$src" "$tmp/formats/$stem.jxl" >/dev/null 2>&1; line="formats/$stem.jxl" ;;
      6) heif-enc -q 60 -t 320 "$src" -o "$tmp/formats/$stem.heic" >/dev/null; line="formats/$stem.heic" ;;
      8) svg_logo "$n" > "$tmp/formats/$stem.svg"; line="formats/$stem.svg" ;;
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
echo "demo-formats: $(grep -c '^formats/' "$out") of $n rows as WebP, AVIF, (animated) GIF, JPEG XL, HEIC and SVG in $data/formats"
