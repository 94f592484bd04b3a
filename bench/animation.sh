#!/usr/bin/env bash
# bench/animation.sh STAGE: `make bench-animation`, issue 40's "Done when" rows, each with
# PXL_FLAG_ANIMATE beside the player where it applies (the Makefile builds the programs):
#  1. the 150-frame 480x270 GIF (bench/animation_gif.py): first frame against the still,
#     PXL_FLAG_ANIMATE's frame bytes against the player's ring (bench/animation.c);
#  2. a 2,000-frame 1280x720 lossy animated WebP (bench/animation_webp.py, made once into
#     STAGE/bench-animation-2000.webp): first frame and PXL_FLAG_ANIMATE at full size
#     (bench/animation.c, 200 frames played, median of 5); one loop played at its durations at 640x360
#     by `pixload play` (late frames: shown over 16 ms after due); at full size, peak frame
#     memory and RSS of the first 200 frames against the whole loop (flat: equal);
#  3. 1,000 animated rows scrolled by the scroll benchmark's session
#     (bench/animation_table.c): ring memory against the visible rows' rings, frames
#     decoded out of view.
# The machine's load is printed first and last: the timed loop is sensitive to it.
set -euo pipefail
stage=${1:-build}
cd "$(dirname "$0")/.."
pixload="$stage/bin/pixload"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

echo "== 1. 150-frame 480x270 GIF"
test -f "$stage/bench-animation.gif" || python3 bench/animation_gif.py "$stage/bench-animation.gif"
"$stage/bench-animation" "$stage/bench-animation.gif"

echo "== 2. 2,000-frame 1280x720 animated WebP"
webp="$stage/bench-animation-2000.webp"
test -f "$webp" || python3 bench/animation_webp.py "$webp" 2000 1280 720 40
"$stage/bench-animation" "$webp" 5 200
url="file://$(realpath "$webp")"
# play ARGS...: runs `pixload play`, leaves its output in $out and its peak RSS in $rss
out="$stage/bench-animation-play.txt"
play() {
  /usr/bin/time -f '%M' -o "$out.rss" "$pixload" play --allow-file "$@" "$url" > "$out"
  rss=$(tail -1 "$out.rss")
}
play --size 640x360
late=$(grep -c ', late' "$out" || true)
skipped=$(grep -c ', skipped' "$out" || true)
echo "  player at 640x360, one loop at its durations: $late late frames, $skipped shown after skipped ones;" \
  "peak RSS $rss KiB"
echo "    $(tail -1 "$out")"
play --frames 200
first200=$(tail -1 "$out" | sed 's/.*peak frame memory \([0-9]*\) bytes/\1/')
rss200=$rss
echo "  player at full size, first 200 frames: $(tail -1 "$out"); peak RSS $rss200 KiB"
play
whole=$(tail -1 "$out" | sed 's/.*peak frame memory \([0-9]*\) bytes/\1/')
late=$(grep -c ', late' "$out" || true)
echo "  player at full size, one loop: $(tail -1 "$out"); peak RSS $rss KiB ($late late)"
if [ "$whole" -le "$first200" ]; then verdict="flat"; else verdict="GROWS"; fi
echo "  frame memory over the loop: $whole bytes for 2,000 frames, $first200 for the first 200: $verdict" \
  "(PXL_FLAG_ANIMATE would need $((2000 * 1280 * 720 * 4)) bytes: over PXL_ANIMATION_MAX_BYTES, frame 0 alone)"

echo "== 3. 1,000 animated rows, the scroll session"
sticker="$stage/bench-animation-sticker.gif"
test -f "$sticker" || python3 bench/animation_gif.py "$sticker" 48 120 120
"$stage/bench-animation-table" "$sticker"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
