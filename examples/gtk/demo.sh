#!/usr/bin/env bash
# examples/gtk/demo.sh STAGE DATA_DIR PORT [APP OPTIONS...]
#
# `make gtk-demo`: the GTK 4 example on your display. Prepares the demo photographs
# (scripts/photos.sh), builds the app into STAGE/bin/pixload-gtk, serves the photos from
# a private nginx on 127.0.0.1:PORT (as scripts/demo.sh does), runs the app with 1,000
# rows over them, and stops nginx when the window closes. Rows still loading show their
# image's BlurHash: computed once per photo set by pixload's own encoder
# (scripts/demo-blurhashes.sh, into DATA_DIR/blurhash-animated.txt) and given to the app
# (--placeholders). Extra arguments go to the app (--script to watch the scripted
# session, --rows N).
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR PORT [APP OPTIONS...]}" data="${2:?}" port="${3:?}"
shift 3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || { echo "gtk-demo: no display (DISPLAY / WAYLAND_DISPLAY)" >&2; exit 1; }
"$root/scripts/photos.sh" "$data" 300
"$root/scripts/demo-formats.sh" "$data"  # WebP, AVIF, GIF, JPEG XL, HEIC and SVG rows among the photos
"$here/animated-data.sh" "$data"  # two animated GIF rows (1 and 3) on the first screen
mkdir -p "$stage/bin"
"$here/build.sh" "$stage" "$stage/bin/pixload-gtk"
hashes="$data/blurhash-animated.txt"
if [ ! -s "$hashes" ] || [ "$data/index-animated.txt" -nt "$hashes" ]; then
  "$root/scripts/demo-blurhashes.sh" "$stage" "$data/index-animated.txt" "$hashes.tmp"
  mv "$hashes.tmp" "$hashes"
fi

state="$stage/gtk-demo-nginx"
"$root/scripts/nginx.sh" start "$data" "$port" "$state"
trap '"$root/scripts/nginx.sh" stop "$state"' EXIT

echo "gtk-demo: $(wc -l < "$data/index-animated.txt") images (JPEG, PNG, WebP, AVIF, animated GIF, JPEG XL, HEIC, SVG) on http://127.0.0.1:$port/, 1,000 rows"
"$stage/bin/pixload-gtk" --index "$data/index-animated.txt" --placeholders "$hashes" "$@" \
  "http://127.0.0.1:$port/"
