#!/usr/bin/env python3
"""bench/webp_scaling_quality.py LIST DUMP_DIR DATA_DIR

The quality half of bench/webp_scaling.c: how far each way's 150x150 fill thumbnail
(DUMP_DIR/i.WAY.rgba, written with WEBP_SCALING_DUMP) is from the exact area average of
the image the WebP was encoded from (DATA_DIR/img/STEM.jpg or .png, STEM being the WebP's
name up to its first "-", as scripts/bench-decode.sh names them), computed by Pillow's
BOX filter over the same fractional centred crop, premultiplied. Lower mean, higher PSNR:
closer to what the thumbnail should show.
"""
import math
import os
import sys

from PIL import Image

T = 150
WAYS = ["full+resampler", "webp-scaled-2x+resampler", "webp-crop+scale-direct"]
files = open(sys.argv[1]).read().split()
dump, data = sys.argv[2], sys.argv[3]
err = [[0.0, 0.0, 0] for _ in WAYS]
for i, f in enumerate(files):
    stem = os.path.basename(f).split("-")[0]
    src = next(p for p in (f"{data}/img/{stem}.jpg", f"{data}/img/{stem}.png") if os.path.exists(p))
    im = Image.open(src).convert("RGBA")
    sw, sh = im.size
    box = ((sw - sh) / 2, 0, (sw - sh) / 2 + sh, sh) if sw > sh else (0, (sh - sw) / 2, sw, (sh - sw) / 2 + sw)
    truth = im.resize((T, T), Image.BOX, box=box).tobytes()  # Pillow averages RGBA premultiplied
    for w in range(len(WAYS)):
        px = open(f"{dump}/{i}.{w}.rgba", "rb").read()
        acc = err[w]
        for k in range(0, len(px), 4):
            a1, a2 = px[k + 3], truth[k + 3]
            for c in range(3):
                e = abs(px[k + c] * a1 - truth[k + c] * a2) / 255
                acc[0] += e
                acc[1] += e * e
            e = abs(a1 - a2)
            acc[0] += e
            acc[1] += e * e
            acc[2] += 4
print(f"webp_scaling quality: {len(files)} files, distance to the area average of the source image "
      "(premultiplied levels)")
for w, name in enumerate(WAYS):
    s, q, n = err[w]
    print(f"  {name:26s} mean {s / n:.3f}  PSNR {10 * math.log10(255 ** 2 / (q / n)):.2f} dB")
