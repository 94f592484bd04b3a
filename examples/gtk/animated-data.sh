#!/usr/bin/env bash
# examples/gtk/animated-data.sh DATA_DIR [ROWS OUT]
#
# Adds animated rows to the demo photos (scripts/photos.sh): DATA_DIR/anim/photos.gif
# (three of the photos, 0.6 s each, looping) and DATA_DIR/anim/dots.gif (a 12-frame
# spinner with transparency and "restore to background" disposal), and writes
# DATA_DIR/index-animated.txt: the table's rows (index-formats.txt of
# scripts/demo-formats.sh, photos with WebP, AVIF and GIF rows among them, or index.txt)
# with the two GIFs as its 2nd and 4th entries, so rows 1 and 3 (and every 302nd row after
# them) animate on the first screen. With ROWS and OUT: the two GIFs put into ROWS's
# rows the same way, written to OUT (test_xvfb.sh: the photos of index.txt alone). Needs
# ImageMagick's convert. Idempotent.
set -euo pipefail
data="${1:?usage: $0 DATA_DIR [ROWS OUT]}"
rows="${2:-$data/index-formats.txt}"
[ -f "$rows" ] || rows="$data/index.txt"
out="${3:-$data/index-animated.txt}"
[ -f "$out" ] && [ "$out" -nt "$rows" ] && [ -f "$data/anim/dots.gif" ] && exit 0
command -v convert >/dev/null || { echo "animated-data.sh: convert not found (apt-get install imagemagick)" >&2; exit 1; }
mkdir -p "$data/anim"
[ -f "$data/anim/dots.gif" ] && [ -f "$data/anim/photos.gif" ] && [ "$data/anim/dots.gif" -nt "$data/index.txt" ] ||
  make_gifs=1
if [ -n "${make_gifs:-}" ]; then
  mapfile -t photos < <(head -3 "$data/index.txt")
  convert -delay 60 "${photos[@]/#/$data/}" -resize 320x240^ -gravity center -extent 320x240 -loop 0 \
    "$data/anim/photos.gif"
  frames=()
  for i in $(seq 0 11); do
    angle=$((i * 30))
    frames+=( \( -size 160x120 xc:none -fill "hsl($((i * 30)),90%,50%)" \
      -draw "translate 80,60 rotate $angle circle 0,-40 0,-28" \) )
  done
  convert -delay 8 -dispose background "${frames[@]}" -loop 0 "$data/anim/dots.gif"
fi
{
  sed -n 1p "$rows"
  echo anim/photos.gif
  sed -n 2p "$rows"
  echo anim/dots.gif
  sed -n '3,$p' "$rows"
} > "$out.tmp"
mv "$out.tmp" "$out"
