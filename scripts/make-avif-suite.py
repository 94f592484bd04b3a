#!/usr/bin/env python3
"""scripts/make-avif-suite.py LINKU_REPO AV1AVIF_REPO OUTDIR

Writes Tests/fixtures/avif-suite (OUTDIR): a small selection of public AVIF test files,
their licences, manifest.tsv (the conformance runner's) and avif-extra.tsv (frames and
colour, for Tests/codecs/avif_test.c). Run once by hand; its output is committed. The two
repositories are checkouts of github.com/link-u/avif-sample-images and
github.com/AOMediaCodec/av1-avif (the AVIF working group's; testFiles/Xiph from it).

Expected pixels: avifdec (Debian's libavif 0.11.1) with its defaults and -d 8, PNG read
back with Pillow as straight RGBA8, first frame (--index N for the other frames), no
colour management. Files strict avifdec rejects but the shim decodes (it runs with
AVIF_STRICT_DISABLED) take `avifdec --no-strict` and say so in the note; files avifdec
rejects either way are must_fail rows with its reason.

Orientation (exif_orientation column): found here without reading irot/imir: the EXIF
orientation (Pillow's transposes) that turns avifdec's stored pixels closest to the
suite's own upright PNG of the same picture (kimono.png).
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys

from PIL import Image

if len(sys.argv) != 4:
    sys.exit(__doc__)
linku, av1avif, out = sys.argv[1:]
os.makedirs(out, exist_ok=True)

LINKU = [
    ("fox.profile0.8bpc.yuv420.avif", "8-bit 4:2:0"),
    ("fox.profile0.10bpc.yuv420.odd-width.odd-height.avif", "10-bit 4:2:0, odd width and height"),
    ("fox.profile0.8bpc.yuv420.monochrome.avif", "8-bit monochrome (avifdec writes Y as stored)"),
    ("fox.profile1.10bpc.yuv444.odd-height.avif", "10-bit 4:4:4, odd height"),
    ("fox.profile2.12bpc.yuv422.odd-width.avif", "12-bit 4:2:2, odd width"),
    ("fox.profile2.12bpc.yuv420.monochrome.odd-width.odd-height.avif", "12-bit monochrome, odd sizes"),
    ("kimono.rotate90.avif", "irot 1"),
    ("kimono.mirror-horizontal.avif", "imir"),
    ("kimono.mirror-vertical.rotate270.avif", "irot 3 + imir"),
    ("kimono.crop.avif", "clap (not applied, as avifdec)"),
    ("plum-blossom-small.profile0.8bpc.yuv420.alpha-full.avif", "alpha, full range"),
    ("plum-blossom-small.profile0.8bpc.yuv420.alpha-limited.avif", "alpha, limited range"),
    ("red-at-12-oclock-with-color-profile-lossy.avif", "ICC profile"),
    ("red-at-12-oclock-with-color-profile-8bpc.avif", "ICC profile, 8-bit"),
    ("star-8bpc.avifs", "image sequence"),
    ("star-8bpc-with-alpha.avifs", "image sequence with alpha"),
    ("star-10bpc.avifs", "10-bit image sequence"),
]
XIPH = [("fruits_2layer_thumbsize.avif", "two layers (progressive); the best one is decoded")]

TRANSPOSE = {1: None, 2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
             4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270,
             7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}
tmp = os.path.join(out, ".tmp.png")


def avifdec(path, index=0, strict=True):
    # --ignore-icc: the pixels are the same; libpng refuses to write some profiles.
    args = ["avifdec", "-d", "8", "--ignore-icc", "--index", str(index)] + ([] if strict else ["--no-strict"]) + [path, tmp]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["avifdec failed"])[-1]
    im = Image.open(tmp)
    im.load()
    return im.convert("RGBA"), ""


def durations(path):
    """Each frame's duration in ms (rounded), from avifdec --info's timescales."""
    info = subprocess.run(["avifdec", "--info", "--no-strict", path], capture_output=True, text=True).stdout
    scale = int(re.search(r"(\d+) timescales per second", info).group(1))
    return [(int(t) * 1000 + scale // 2) // scale
            for t in re.findall(r"Decoded frame \[\d+\].*?\[duration [0-9.]+ \((\d+) timescales\)\]", info)]


def colour(path):
    """(md5 of the colr 'prof' payload found by a plain box scan, CICP from avifdec --info)."""
    data = open(path, "rb").read()
    icc = "-"
    at = data.find(b"colrprof")
    if at >= 4:
        size = int.from_bytes(data[at - 4:at], "big")
        icc = hashlib.md5(data[at + 8:at - 4 + size]).hexdigest()
    info = subprocess.run(["avifdec", "--info", "--no-strict", path], capture_output=True, text=True).stdout
    cicp = "/".join(re.search(name + r"\s*:\s*(\d+)", info).group(1)
                    for name in ("Color Primaries", "Transfer Char.", "Matrix Coeffs."))
    return icc, cicp


def orientation(stored, upright):
    best, best_diff = 1, None
    for value, method in TRANSPOSE.items():
        turned = stored if method is None else stored.transpose(method)
        if turned.size != upright.size:
            continue
        a, b = turned.convert("RGB").tobytes(), upright.convert("RGB").tobytes()
        diff = sum(abs(x - y) for x, y in zip(a[::97], b[::97]))
        if best_diff is None or diff < best_diff:
            best, best_diff = value, diff
    return best


rows, extra = [], []
kimono = Image.open(os.path.join(linku, "kimono.png"))
for name, note, src in [(n, d, os.path.join(linku, n)) for n, d in LINKU] + \
                       [(n, d, os.path.join(av1avif, "testFiles", "Xiph", n)) for n, d in XIPH]:
    shutil.copyfile(src, os.path.join(out, name))
    path = os.path.join(out, name)
    im, why = avifdec(path)
    if im is None:
        im, strict_why = avifdec(path, strict=False)
        if im is None:
            rows.append((name, "must_fail", "", "", "", "", f"{note}; avifdec: {why}"))
            continue
        note += f"; avifdec --no-strict (strict: {why})"
    exif = orientation(im, kimono) if name.startswith("kimono.") and "crop" not in name else 1
    rows.append((name, "ok", im.size[0], im.size[1], hashlib.md5(im.tobytes()).hexdigest(), exif, note))
    times = durations(path) if name.endswith(".avifs") else []
    if len(times) > 1:
        md5s = [hashlib.md5(avifdec(path, i)[0].tobytes()).hexdigest() for i in range(len(times))]
        extra.append((name, len(times), ",".join(map(str, times)), ",".join(md5s), "", ""))
    elif "color-profile" in name or name.startswith("fox.profile0.8bpc.yuv420.avif"):
        extra.append((name, 1, "0", "", *colour(path)))
os.remove(tmp)

with open(os.path.join(out, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\texif_orientation\tnote\n")
    for r in rows:
        f.write("\t".join(str(c) for c in (r[0], "avif") + r[1:]) + "\n")
with open(os.path.join(out, "avif-extra.tsv"), "w") as f:
    f.write("file\tframes\tdurations_ms\tframe_md5s\ticc_md5\tcicp\n")
    for r in extra:
        f.write("\t".join(str(c) for c in r) + "\n")
print(f"make-avif-suite: {len(rows)} files ({sum(1 for r in rows if r[1] == 'ok')} ok), {len(extra)} frame/colour rows in {out}")
