#!/usr/bin/env python3
"""Tests/modules/orientation.py BUILD_DIR: orientation in HEIC (irot/imir boxes) and JPEG XL
(the codestream's orientation field), all eight, through the installed-style build.

Tests/modules/make_oriented.c writes the files (Debian's heif-enc and cjxl cannot): one
48x32 four-colour pattern stored as-is with each orientation declared, lossless. Checked:
pixload's output equals the pattern turned as EXIF orientation N turns it (Pillow's
exif_transpose: the independent reference), equals the format's own tool (heif-convert,
djxl: both apply the orientation), and with --no-orientation (PXL_FLAG_IGNORE_ORIENTATION)
is the pattern as stored. A 24x24 FILL thumbnail of orientation 6 is checked the same way,
so the size plan sees the turned sides. Also: an EXIF orientation inside a HEIF is not applied
on top, and a 10-bit HEIC comes out as heif-convert's pixels in 8 bits. Prints one line per check and "N passed, N failed".
"""
import os
import shutil
import struct
import sys
import tempfile
import zlib

from PIL import Image, ImageOps

import harness as shared
from harness import run

here = os.path.dirname(os.path.abspath(__file__))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
work = tempfile.mkdtemp(prefix="pxl-orient.")
harness = shared.Harness(build, work)
check, fetch = harness.check, harness.fetch


def max_difference(a, b):
    return 999 if a is None or b is None else shared.max_difference(a, b)


def turned(image, orientation):
    """The image as EXIF orientation `orientation` displays it (Pillow applies it)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    image = image.copy()
    image.info["exif"] = exif.tobytes()
    image.getexif()[0x0112] = orientation
    return ImageOps.exif_transpose(image)


maker = os.path.join(work, "make_oriented")
cflags = run("pkg-config", "--cflags", "--libs", "libheif", "libjxl").stdout.split()
r = run("cc", "-O1", "-std=c11", os.path.join(here, "make_oriented.c"), "-o", maker, *cflags)
if r.returncode or run(maker, work).returncode:
    check(False, "make_oriented: " + (r.stderr or "failed to write the files")[-300:])
    print(f"{harness.passed} passed, {harness.failed} failed")
    sys.exit(1)
source = Image.open(os.path.join(work, "orient-source.ppm")).convert("RGBA")

# Lossless HEVC goes through YCbCr 4:4:4: the colours come back within a few levels. The
# four quadrants are 100+ levels apart, so a wrong turn cannot hide under the tolerance.
tolerance = {"heic": 4, "jxl": 0}
reference_tool = {"heic": ["heif-convert"], "jxl": ["djxl"]}
for fmt in ["heic", "jxl"]:
    for o in range(1, 9):
        path = os.path.join(work, f"orient-{o}.{fmt}")
        want = turned(source, o)
        got, why = fetch(path)
        d = max_difference(got, want)
        check(d <= tolerance[fmt], f"{fmt} orientation {o}: {got.size if got else why}, max difference {d} "
                                   f"from the pattern turned by EXIF {o} (Pillow)")
        ref = os.path.join(work, f"ref-{o}-{fmt}.png")
        r = run(*reference_tool[fmt], path, ref)
        theirs = Image.open(ref).convert("RGBA") if r.returncode == 0 and os.path.exists(ref) else None
        d = max_difference(got, theirs)
        check(d == 0, f"{fmt} orientation {o}: max difference {d} from {reference_tool[fmt][0]}")
        stored, why = fetch(path, "--no-orientation")
        d = max_difference(stored, source)
        check(d <= tolerance[fmt], f"{fmt} orientation {o} with --no-orientation: as stored, max difference {d}")
    # A FILL thumbnail of a turned image: the crop is planned on the displayed sides.
    path = os.path.join(work, f"orient-6.{fmt}")
    thumb, why = fetch(path, "--size", "24x24", "--mode", "fill")
    want = ImageOps.fit(turned(source, 6), (24, 24), method=Image.Resampling.BOX)
    # The quadrant colours at the centres of the four 12x12 corners, where no resampler
    # mixes two quadrants.
    probes = [(5, 5), (18, 5), (5, 18), (18, 18)]
    same = thumb is not None and all(max(abs(a - b) for a, b in zip(thumb.getpixel(p), want.getpixel(p))) <= 6
                                     for p in probes)
    check(same, f"{fmt} orientation 6, 24x24 fill: quadrants where the turned image has them "
                f"{[thumb.getpixel(p) for p in probes] if thumb else why}")

# An EXIF orientation inside a HEIF is not applied on top of irot/imir: heif-enc copies a
# JPEG's EXIF (orientation 6 here) into the file and writes no irot; the image stays as stored.
jpeg = os.path.join(work, "exif6.jpg")
exif = Image.Exif()
exif[0x0112] = 6
source.convert("RGB").save(jpeg, exif=exif.tobytes(), quality=95)
heic = os.path.join(work, "exif6.heic")
r = run("heif-enc", "-q", "90", jpeg, "-o", heic)
got, why = fetch(heic) if r.returncode == 0 else (None, r.stdout[-200:])
# Lossy twice (JPEG, then HEVC): the colours at the quadrants' centres tell the turn.
centres = [(12, 8), (36, 8), (12, 24), (36, 24)]
colours = [got.getpixel(c) for c in centres] if got is not None and got.size == source.size else None
check(colours is not None and all(max(abs(a - b) for a, b in zip(c, source.getpixel(p))) <= 16
                                  for c, p in zip(colours, centres)),
      f"heic with EXIF orientation 6 and no irot: as stored, {got.size if got else why} {colours}")


def write_png16(path, width, height, pixel):
    """A 16-bit RGB PNG (Pillow writes none): pixel(x, y) -> (r, g, b) in 0..65535."""
    raw = b"".join(b"\0" + b"".join(struct.pack(">3H", *pixel(x, y)) for x in range(width)) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


# 10 bits per sample (heif-enc -b 10 from a 16-bit PNG) reduced to 8: against heif-convert's
# 16-bit output read to 8 bits by Pillow, within 1 level.
deep = os.path.join(work, "deep.png")
write_png16(deep, 128, 64, lambda x, y: (x * 65535 // 127, y * 65535 // 63, (x * y * 97) % 65536))
heic = os.path.join(work, "deep.heic")
ref = os.path.join(work, "deep-ref.png")
r = run("heif-enc", "-b", "10", "-q", "90", deep, "-o", heic)
r2 = run("heif-convert", heic, ref) if r.returncode == 0 else r
got, why = fetch(heic)
theirs = Image.open(ref).convert("RGBA") if r2.returncode == 0 and os.path.exists(ref) else None
d = max_difference(got, theirs)
check(d <= 1, f"heic 10-bit: max difference {d} from heif-convert's 16 bits read as 8 {why}")

shutil.rmtree(work, ignore_errors=True)
print(f"{harness.passed} passed, {harness.failed} failed")
sys.exit(1 if harness.failed else 0)
