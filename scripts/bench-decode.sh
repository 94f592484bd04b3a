#!/usr/bin/env bash
# scripts/bench-decode.sh STAGE DATA_DIR [REPS]
#
# `make bench-decode`: CPU time per image of pixload's decode path (ImageDecoder) against
# libjpeg-turbo / libpng / libavif / giflib / libwebp (WebPDecodeRGBA) called directly, same files, same process, interleaved
# (bench/decode/main.swift, bench/direct/bench_direct.c), full size and 150x150 fill; at
# the end the codec modules against libheif / libjxl / librsvg (scripts/bench-modules.sh),
# then what isolation costs (below: bench/isolation_cost.py --kinds).
#
# BENCH_DECODE_ONLY=isolation: the isolation rows alone (the short form; the files are made
# as for the whole run, the Swift bench is not built).
#
# Files: the real-world photographs and PNGs of ../shared/corpus/realworld (the EXIF
# examples only where they are upright, since the direct side does not rotate), the
# demo photographs (scripts/photos.sh: 4:2:0 baseline, progressive, PNG), and 4:4:4
# baseline JPEGs made here from the corpus photographs and the demo's opaque PNGs
# (neither set has any: Pillow and the wallpapers use 4:2:0 / 4:2:2), and GIFs made here
# from the demo photographs (ImageDecoder against giflib called directly).
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [REPS]}" data="${2:?}" reps="${3:-${BENCH_DECODE_REPS:-5}}"
corpus="${CORPUS:-../shared/corpus}"
out="$stage/bench-decode"
# The libraries behind Sources/CCodecs, from the Makefile (CODEC_LIBS), for the C programs
# linked here with every Sources/CCodecs/*.c.
codec_libs="${CODEC_LIBS:?set CODEC_LIBS (make bench-decode does)}"

scripts/photos.sh "$data" 300
mkdir -p "$out"

# 4:4:4 baseline JPEGs, quality 90 (idempotent: made once).
if [ ! -f "$out/444/done" ]; then
  rm -rf "$out/444" && mkdir -p "$out/444"
  python3 - "$out/444" "$corpus/realworld/photos" "$data" <<'PY'
import glob, os, sys
from PIL import Image
dst, photos, demo = sys.argv[1:4]
sources = sorted(glob.glob(os.path.join(photos, "*.jpg")))
sources += [p for p in sorted(glob.glob(os.path.join(demo, "img", "*.png")))
            if Image.open(p).mode == "RGB"]
for path in sources:
    name = os.path.splitext(os.path.basename(path))[0] + "-444.jpg"
    Image.open(path).convert("RGB").save(os.path.join(dst, name), "JPEG", quality=90, subsampling=0)
PY
  touch "$out/444/done"
fi

# AVIFs made here by avifenc (speed 8) from the first demo photographs: 8-bit 4:2:0 (the
# web's usual), 10-bit 4:2:0, 8-bit 4:4:4, and the demo PNGs with transparent corners as
# 8-bit 4:2:0 with alpha (idempotent: made once).
if [ ! -f "$out/avif/done" ]; then
  rm -rf "$out/avif" && mkdir -p "$out/avif"
  grep '\.jpg$' "$data/index.txt" | sed -n 1,8p | while read -r f; do
    name=$(basename "$f" .jpg)
    nice avifenc -s 8 -j 1 -d 8 -y 420 "$data/$f" "$out/avif/$name-8bit-420.avif" >/dev/null
    nice avifenc -s 8 -j 1 -d 10 -y 420 "$data/$f" "$out/avif/$name-10bit-420.avif" >/dev/null
    nice avifenc -s 8 -j 1 -d 8 -y 444 "$data/$f" "$out/avif/$name-8bit-444.avif" >/dev/null
  done
  alpha=0
  grep '\.png$' "$data/index.txt" | while read -r f; do
    [ "$alpha" -lt 6 ] || continue
    python3 -c 'import sys; from PIL import Image; sys.exit(0 if Image.open(sys.argv[1]).mode == "RGBA" else 1)' \
      "$data/$f" || continue
    nice avifenc -s 8 -j 1 -d 8 -y 420 "$data/$f" "$out/avif/$(basename "$f" .png)-alpha.avif" >/dev/null
    alpha=$((alpha + 1))
  done
  touch "$out/avif/done"
fi
# GIFs (made once by ImageMagick from the demo photos): 256-colour dithered stills at two
# sizes, interlaced copies, and 3-frame animations with transparency (their first frame is
# what both sides decode).
if [ ! -f "$out/gif/done" ]; then
  rm -rf "$out/gif" && mkdir -p "$out/gif"
  for i in 0 1 2 3 4 5; do
    src="$data/img/000$i.jpg"
    convert "$src" -resize 800x800 "$out/gif/photo-$i-800.gif"
    convert "$src" -resize 400x400 "$out/gif/photo-$i-400.gif"
    convert "$src" -resize 800x800 -interlace GIF "$out/gif/photo-$i-800-interlaced.gif"
  done
  for i in 0 3; do
    convert -delay 10 -dispose previous "$data/img/000$i.jpg" "$data/img/000$((i + 1)).jpg" \
      "$data/img/000$((i + 2)).jpg" -resize 480x480 -transparent white -loop 0 "$out/gif/anim-$i.gif"
  done
  touch "$out/gif/done"
fi
# WebP made here by cwebp from the demo photographs (every 10th: 30 lossy, quality 80) and
# from the demo's PNGs (30 lossy, alpha kept where they have it; the first 10 also
# lossless), since neither the corpus nor the demo has any (idempotent: made once).
if [ ! -f "$out/webp/done" ]; then
  rm -rf "$out/webp" && mkdir -p "$out/webp"
  for f in $(sed -n '1~10p' "$data/index.txt") $(grep '\.png$' "$data/index.txt"); do
    n=$(basename "$f"); n=${n%.*}
    cwebp -quiet -q 80 "$data/$f" -o "$out/webp/$n-q80.webp"
  done
  for f in $(grep '\.png$' "$data/index.txt" | head -10); do
    n=$(basename "$f"); n=${n%.*}
    cwebp -quiet -lossless "$data/$f" -o "$out/webp/$n-lossless.webp"
  done
  touch "$out/webp/done"
fi

{
  awk -F'\t' -v dir="$corpus/realworld" 'NR > 1 && ($2 == "jpeg" || $2 == "png") && $3 ~ /^ok/ &&
      ($18 == "" || $18 <= 1) { print dir "/" $1 }' "$corpus/realworld/manifest.tsv"
  sed "s|^|$data/|" "$data/index.txt"
  ls "$out"/444/*.jpg
  ls "$out"/avif/*.avif
  ls "$out"/gif/*.gif
  ls "$out"/webp/*.webp
} > "$out/files.txt"

only="${BENCH_DECODE_ONLY:-}"
if [ "$only" != isolation ]; then
if ! swift build --scratch-path .build-bench -c release --product pixload-bench-decode >"$out/build.log" 2>&1; then
  cat "$out/build.log" >&2
  exit 1
fi
echo "bench-decode: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
.build-bench/release/pixload-bench-decode --reps "$reps" "$out/files.txt"

# First-scan thumbnails (bench/first_scan.c): progressive JPEGs at 1/8 from their DC scans
# against the full decode, same files, interleaved: the corpus's, the demo's web-size ones
# and camera-size ones made from the 8 MP+ wallpapers (scripts/progressive-photos.sh).
scripts/progressive-photos.sh "$out/progressive-photos"
cc -O2 -std=c11 -ISources/CCodecs/include bench/first_scan.c Sources/CCodecs/*.c -o "$out/first_scan" $codec_libs
for set in jpeg-conformance realworld corrupt; do
  [ -f "$corpus/$set/manifest.tsv" ] &&
    awk -F'\t' -v dir="$corpus/$set" 'NR > 1 && $2 == "jpeg" && $3 ~ /^ok/ { print dir "/" $1 }' "$corpus/$set/manifest.tsv"
done > "$out/first-scan-corpus.txt" || true
sed "s|^|$data/|" "$data/index.txt" > "$out/first-scan-web.txt"
sed "s|^|$out/progressive-photos/|" "$out/progressive-photos/index.txt" > "$out/first-scan-camera.txt"
"$out/first_scan" "$reps" corpus:"$out/first-scan-corpus.txt" web:"$out/first-scan-web.txt" \
  camera:"$out/first-scan-camera.txt"

# WebP thumbnails: libwebp's own scaler (to about twice the target, or cropped and scaled
# straight to it) against the full decode + area resampler that ImageDecoder uses, in CPU
# time and in distance to the area average of the source image (bench/webp_scaling.c,
# bench/webp_scaling_quality.py).
cc -O2 -std=c11 -ISources/CCodecs/include bench/webp_scaling.c Sources/CCodecs/*.c -o "$out/webp_scaling" $codec_libs -lm
ls "$out"/webp/*-q80.webp > "$out/webp-lossy.txt"
rm -rf "$out/webp-scaling" && mkdir -p "$out/webp-scaling"
WEBP_SCALING_DUMP="$out/webp-scaling" "$out/webp_scaling" "$reps" $(cat "$out/webp-lossy.txt")
python3 bench/webp_scaling_quality.py "$out/webp-lossy.txt" "$out/webp-scaling" "$data"

# The codec modules' rows (scripts/bench-modules.sh, bench/modules.c): HEIC, JPEG XL and
# SVG through pixload's modules (pxl_load) against libheif, libjxl and librsvg called
# directly, and 150x150 thumbnails of 12 MP HEICs from their embedded thumbnail against
# the full decode.
scripts/bench-modules.sh "$stage" "$data" "$reps"
else
  BENCH_MODULES_FILES_ONLY=1 scripts/bench-modules.sh "$stage" "$data" "$reps"
fi

# Isolation (pixload.h, "Isolation"; issue 39): each kind's 150x150 FILL thumbnails through
# `pixload fetch` from file: URLs, in-process (--isolation none) against isolated, the
# codec modules' kinds (bench-modules' files) under modules (the default, target 1.05x)
# and the built-in formats' (the demo's JPEGs and PNGs, the AVIF, GIF and WebP made above)
# under all (target 1.15x); whole-process CPU (the workers included) and wall per image,
# medians of REPS interleaved runs, a kind of under 100 files linked up to 100; then peak
# memory with 8 decode threads over all of them mixed, none / modules / all
# (bench/isolation_cost.py, the functions of `make bench-isolation`).
{
  cut -f1,2 "$stage/bench-modules/files.txt" | sed 's/\t/\tmodules\t/'
  grep '\.jpg$' "$data/index.txt" | sed "s|^|web JPEG\tall\t$data/|"
  grep '\.png$' "$data/index.txt" | sed "s|^|web PNG\tall\t$data/|"
  for f in "$out"/avif/*.avif; do printf 'AVIF\tall\t%s\n' "$f"; done
  for f in "$out"/gif/*.gif; do printf 'GIF\tall\t%s\n' "$f"; done
  for f in "$out"/webp/*.webp; do printf 'WebP\tall\t%s\n' "$f"; done
} > "$out/isolation-kinds.tsv"
python3 bench/isolation_cost.py --kinds "$out/isolation-kinds.tsv" "$stage/bin/pixload" "$out/isolation" "$reps"
