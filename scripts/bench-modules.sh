#!/usr/bin/env bash
# scripts/bench-modules.sh STAGE DATA_DIR [REPS]
#
# The codec modules' rows of `make bench-decode` (bench/modules.c): pixload decoding
# through libpixload-heif / -jxl / -svg (pxl_load, full size, RGBA8, no colour management)
# against libheif / libjxl / librsvg called directly to the same RGBA8, same bytes, same
# process, interleaved; and 150x150 thumbnails of 12 MP phone-style HEICs (embedded
# thumbnail) against their full decode. Needs `make all` (the library and the modules).
#
# Inputs, made here once (idempotent):
#   heic   heif-enc (quality 50, its default) from the first 6 demo photographs (web size),
#          and 12 MP "phone" HEICs: 4032x3024 (one 3024x4032) cut from the largest
#          lomiri-wallpapers-16.04 photographs, with a 320x240 embedded thumbnail
#          (heif-enc -t 320), as a phone writes them
#   jxl    cjxl from the demo photographs: lossy VarDCT (distance 1, its default for
#          pixels), the JPEGs recompressed losslessly (cjxl's default for JPEG input), and
#          the demo PNGs lossless (distance 0, alpha kept where they have it)
#   svg    drawings written by bench/svg_writer.py: icons, a chart, an illustration with
#          gradients, a blur and transparency
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [REPS]}" data="${2:?}" reps="${3:-5}"
out="$stage/bench-modules"
mkdir -p "$out"
scripts/photos.sh "$data" 300

if [ ! -f "$out/heic/done" ]; then
  rm -rf "$out/heic" && mkdir -p "$out/heic"
  grep '\.jpg$' "$data/index.txt" | sed -n 1,6p | while read -r f; do
    nice heif-enc -q 50 "$data/$f" -o "$out/heic/web-$(basename "$f" .jpg).heic" >/dev/null
  done
  # 12 MP phone-style: the wallpapers' largest photographs (the package's own files, the
  # same on every machine) cut to 4:3 (one 3:4) and scaled to 4032x3024 as PNG, then
  # encoded with a thumbnail.
  python3 - "$out/heic" <<'PY'
import os, sys
from PIL import Image
dst = sys.argv[1]
sources = [("Dragonfly_by_Bolly.jpg", (4032, 3024)), ("sunset_by_Aitzol_Berasategi.jpg", (4032, 3024)),
           ("seeding_by_Clements_Engelhardt.jpg", (4032, 3024)), ("Wine_by_Jakkub_Mede.jpg", (3024, 4032))]
for name, (w, h) in sources:
    im = Image.open("/usr/share/backgrounds/" + name).convert("RGB")
    scale = max(w / im.width, h / im.height)
    cw, ch = round(w / scale), round(h / scale)
    left, top = (im.width - cw) // 2, (im.height - ch) // 2
    im.crop((left, top, left + cw, top + ch)).resize((w, h), Image.LANCZOS).save(
        os.path.join(dst, "phone-" + name.split("_")[0].lower() + ".png"))
PY
  for png in "$out"/heic/phone-*.png; do
    nice heif-enc -q 50 -t 320 "$png" -o "${png%.png}.heic" >/dev/null
    rm -f "$png"
  done
  touch "$out/heic/done"
fi

if [ ! -f "$out/jxl/done" ]; then
  rm -rf "$out/jxl" && mkdir -p "$out/jxl"
  grep '\.jpg$' "$data/index.txt" | sed -n 1,6p | while read -r f; do
    n=$(basename "$f" .jpg)
    # Decoded to pixels first: cjxl given a JPEG would recompress its coefficients.
    python3 -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).save(sys.argv[2])' "$data/$f" "$out/jxl/$n.png"
    nice cjxl >/dev/null 2>&1 "$out/jxl/$n.png" "$out/jxl/lossy-$n.jxl" -d 1
    rm -f "$out/jxl/$n.png"
    nice cjxl >/dev/null 2>&1 "$data/$f" "$out/jxl/fromjpeg-$n.jxl"
  done
  grep '\.png$' "$data/index.txt" | sed -n 1,6p | while read -r f; do
    nice cjxl >/dev/null 2>&1 "$data/$f" "$out/jxl/lossless-$(basename "$f" .png).jxl" -d 0
  done
  touch "$out/jxl/done"
fi

if [ ! -f "$out/svg/done" ]; then
  rm -rf "$out/svg" && mkdir -p "$out/svg"
  python3 bench/svg_writer.py "$out/svg"
  touch "$out/svg/done"
fi

# KIND<TAB>PATH lines: the kind names the format (its first word) and the row.
{
  for f in "$out"/heic/web-*.heic; do printf 'heic web\t%s\n' "$f"; done
  for f in "$out"/heic/phone-*.heic; do printf 'heic 12MP phone\t%s\n' "$f"; done
  for f in "$out"/jxl/lossy-*.jxl; do printf 'jxl lossy\t%s\n' "$f"; done
  for f in "$out"/jxl/fromjpeg-*.jxl; do printf 'jxl from jpeg\t%s\n' "$f"; done
  for f in "$out"/jxl/lossless-*.jxl; do printf 'jxl lossless\t%s\n' "$f"; done
  for f in "$out"/svg/*.svg; do printf 'svg\t%s\n' "$f"; done
} > "$out/files.txt"
ls "$out"/heic/phone-*.heic > "$out/thumbs.txt"
# BENCH_MODULES_FILES_ONLY=1 (scripts/bench-decode.sh's isolation rows alone): the files only.
[ -z "${BENCH_MODULES_FILES_ONLY:-}" ] || exit 0

cc -O2 -std=c11 -Iinclude bench/modules.c -o "$out/modules" \
  $(pkg-config --cflags --libs libheif libjxl librsvg-2.0 cairo) \
  -L"$stage/lib" -Wl,-rpath,"$(cd "$stage/lib" && pwd)" -lpixload
echo "bench-decode (codec modules): $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/modules" "$reps" "$out/files.txt" "$out/thumbs.txt"
