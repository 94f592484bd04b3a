#!/usr/bin/env bash
# scripts/demo.sh STAGE DATA_DIR PORT
#
# The main demo: prepares a few hundred real photographs (six in ten re-encoded as WebP,
# AVIF, GIF, JPEG XL and HEIC, or swapped for SVG logos, by scripts/demo-formats.sh), serves them from a private nginx
# on 127.0.0.1:PORT, and runs examples/c/scroll_demo.c, a simulated scrolling table that
# loads thumbnails as rows come into view, cancels rows that leave, and draws rows
# scrolled back to from the memory cache. Writes STAGE/contact-sheet.png. Stops nginx.
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR PORT}" data="${2:?}" port="${3:?}"

scripts/photos.sh "$data" 300
scripts/demo-formats.sh "$data"  # WebP, AVIF, GIF, animated GIF, JPEG XL, HEIC and SVG rows
cc -O2 -Wall -Wextra -std=c11 -Iinclude examples/c/scroll_demo.c -o "$stage/bin/scroll_demo" \
  -L"$stage/lib" -Wl,-rpath,"$(cd "$stage/lib" && pwd)" -lpixload -lpng -lm

state="$stage/demo-nginx"
scripts/nginx.sh start "$data" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT

echo "demo: $(wc -l < "$data/index-formats.txt") images (JPEG, PNG, WebP, AVIF, GIF, JPEG XL, HEIC, SVG) on http://127.0.0.1:$port/"
"$stage/bin/scroll_demo" "http://127.0.0.1:$port/" "$data/index-formats.txt" --out "$stage/contact-sheet.png"
echo "demo: contact sheet of the last screen: $stage/contact-sheet.png"
