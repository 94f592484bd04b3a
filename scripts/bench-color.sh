#!/usr/bin/env bash
# scripts/bench-color.sh STAGE [REPS]
#
# `make bench-color` (part of `make bench`): the cost of colour management on tagged files.
# The corpus's photographs (../shared/corpus/realworld/photos, untagged 4:2:0 JPEGs of
# 1-8 MP) are tagged here with lcms2's Display P3, Adobe RGB (1998) and sRGB profiles (an APP2
# segment inserted, the image data untouched), so each tagged file has an untagged twin
# with the same pixels; the demo's PNGs likewise get an iCCP (Pillow re-save, twin saved
# the same way without it). Then:
#  - pixload-bench-decode --color: ImageDecoder with colour management, tagged against
#    untagged, 150x150 fill and full size (CPU ms per image);
#  - bench/color.c: a thumbnail converted after resampling (what pixload does) against
#    each decoded row converted before it, with how far apart their pixels are.
set -euo pipefail
stage="${1:?usage: $0 STAGE [REPS]}" reps="${2:-${BENCH_COLOR_REPS:-5}}"
corpus="${CORPUS:-../shared/corpus}"
out="$stage/bench-color"
codec_libs="${CODEC_LIBS:?set CODEC_LIBS (make bench-color does)}" # the libraries behind Sources/CCodecs
mkdir -p "$out/files"
[ -d "$corpus/realworld/photos" ] || { echo "bench-color: $corpus/realworld/photos is absent: skipped"; exit 0; }

python3 scripts/gen-color-fixtures.py "$out/profiles" >/dev/null
python3 - "$out/files" "$out/profiles" "$corpus/realworld/photos" "$stage/demo-data" <<'PY'
import glob, io, os, struct, sys
dst, profiles, photos, demo = sys.argv[1:5]
icc = {k: open(os.path.join(profiles, k + ".icc"), "rb").read() for k in ("p3", "adobe", "srgb")}
pairs = []
for path in sorted(glob.glob(os.path.join(photos, "*.jpg"))):
    data = open(path, "rb").read()
    base = os.path.splitext(os.path.basename(path))[0]
    for key, profile in icc.items():
        segment = b"ICC_PROFILE\0\x01\x01" + profile
        tagged = os.path.join(dst, f"{base}-{key}.jpg")
        with open(tagged, "wb") as f:
            f.write(data[:2] + b"\xff\xe2" + struct.pack(">H", len(segment) + 2) + segment + data[2:])
        pairs.append((tagged, os.path.abspath(path), key + " jpeg"))
try:
    from PIL import Image
    for path in sorted(glob.glob(os.path.join(demo, "img", "*.png")))[:10]:
        img = Image.open(path)
        img.load()
        base = os.path.join(dst, os.path.splitext(os.path.basename(path))[0])
        img.save(base + "-plain.png")
        img.save(base + "-p3.png", icc_profile=icc["p3"])
        pairs.append((base + "-p3.png", base + "-plain.png", "p3 png"))
except ImportError:
    pass
with open(os.path.join(dst, "pairs.tsv"), "w") as f:
    f.write("".join(f"{a}\t{b}\t{k}\n" for a, b, k in pairs))
PY

if ! swift build --scratch-path .build-bench -c release --product pixload-bench-decode >"$out/build.log" 2>&1; then
  cat "$out/build.log" >&2
  exit 1
fi
echo "bench-color: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
.build-bench/release/pixload-bench-decode --color --reps "$reps" "$out/files/pairs.tsv"
cc -O2 -std=c11 -ISources/CCodecs/include bench/color.c Sources/CCodecs/*.c -o "$out/color" \
  $codec_libs
echo "bench-color: where the conversion goes (bench/color.c), the tagged photographs:"
"$out/color" "$reps" $(grep -v srgb "$out/files/pairs.tsv" | cut -f1 | grep '\.jpg$')
