#!/usr/bin/env python3
"""scripts/gen-module-fuzz-seeds.py OUT: small seed files for the codec module fuzz
targets (make fuzz-heif, fuzz-jxl), made now by heif-enc and cjxl from images Pillow
draws here, into OUT/heif and OUT/jxl. Small on purpose (at most 128x96): the fuzzer
mutates them thousands of times a second. Each covers a path of its module: alpha or
not, lossless and lossy, 10-bit, an embedded thumbnail (choose_size), nclx and ICC colour,
several images, a grid and an overlay (HEIF); progressive passes (PXL_CODEC_PARTIAL), an animation
(decode_frames), the container, ICC (JPEG XL). Prints one line per file it could not
make and exits 1 if it made none of a format. (The SVG seeds are text, kept in
Tests/fuzz/seeds/svg.)
"""
import io
import os
import subprocess
import sys
import tempfile

from PIL import Image, ImageCms

out = sys.argv[1] if len(sys.argv) > 1 else "build/fuzz/seeds"
work = tempfile.mkdtemp(prefix="pxl-fuzz-seeds.")
srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def drawn(w, h, alpha, shift=0):
    im = Image.new("RGBA", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            a = (x * 255 // max(1, w - 1)) if alpha else 255
            px[x, y] = ((x * 8 + shift) % 256, (y * 8) % 256, (x * y + shift) % 256, a)
    return im


def png(name, w, h, alpha=True, icc=False, sixteen=False):
    path = os.path.join(work, name + ".png")
    im = drawn(w, h, alpha)
    if sixteen:
        # A 16-bit grey PNG: heif-enc -b 10 keeps 10 bits of it.
        im = im.convert("I;16")
    im.save(path, icc_profile=srgb if icc else None)
    return path


def apng(name, frames=3):
    path = os.path.join(work, name + ".png")
    images = [drawn(24, 16, True, shift=40 * i) for i in range(frames)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=[40, 80, 120][:frames], loop=0)
    return path


def make(tool, fmt, name, src, *flags):
    os.makedirs(os.path.join(out, fmt), exist_ok=True)
    dest = os.path.join(out, fmt, name)
    r = subprocess.run([tool, *flags, src, "-o" if tool == "heif-enc" else dest] + ([dest] if tool == "heif-enc" else []),
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(dest):
        print(f"could not make {fmt}/{name}: {(r.stdout + r.stderr).strip()[-200:]}")
        return 0
    return 1


made = {"heif": 0, "jxl": 0}
made["heif"] += make("heif-enc", "heif", "lossy-alpha.heic", png("a", 64, 48), "-q", "50")
made["heif"] += make("heif-enc", "heif", "lossless-odd.heic", png("b", 33, 17), "-L", "-p", "chroma=444")
made["heif"] += make("heif-enc", "heif", "thumbnail.heic", png("c", 128, 96, alpha=False), "-q", "30", "-t", "32")
made["heif"] += make("heif-enc", "heif", "no-alpha-nclx.heic", png("d", 40, 24), "-q", "40", "--no-alpha",
                     "--colour_primaries", "9", "--transfer_characteristic", "16", "--matrix_coefficients", "9")
made["heif"] += make("heif-enc", "heif", "icc.heic", png("e", 32, 32, alpha=False, icc=True), "-q", "40")
made["heif"] += make("heif-enc", "heif", "ten-bit.heic", png("f", 32, 16, alpha=False, sixteen=True), "-q", "40",
                     "-b", "10")
# A grid of two tiles and an overlay (32-bit fields), assembled from heif-enc's tiles: the
# module reads their descriptors itself (check_sizes in codecs/heif.c).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "modules"))
from heif_grid import read_tile, write_grid, write_overlay  # noqa: E402

if make("heif-enc", "heif", "tile.heic", png("m", 24, 20, alpha=False), "-q", "30"):
    tile = read_tile(os.path.join(out, "heif", "tile.heic"))
    os.remove(os.path.join(out, "heif", "tile.heic"))
    write_grid(os.path.join(out, "heif", "grid.heic"), [tile, tile], 2, 1, 40, 100)
    write_overlay(os.path.join(out, "heif", "overlay.heic"), [tile, tile], 90, 70, [(0, 0), (20, 10)])
    made["heif"] += 2
made["jxl"] += make("cjxl", "jxl", "lossless-alpha.jxl", png("g", 64, 48), "-d", "0")
made["jxl"] += make("cjxl", "jxl", "lossy.jxl", png("h", 40, 24, alpha=False), "-d", "2")
made["jxl"] += make("cjxl", "jxl", "progressive.jxl", png("i", 128, 96, alpha=False), "-d", "1", "-p")
made["jxl"] += make("cjxl", "jxl", "icc-container.jxl", png("j", 32, 32, icc=True), "-d", "0", "--container=1")
made["jxl"] += make("cjxl", "jxl", "animation.jxl", apng("k"), "-d", "0")
made["jxl"] += make("cjxl", "jxl", "one-pixel.jxl", png("l", 1, 1), "-d", "0")
for fmt, n in made.items():
    print(f"{out}/{fmt}: {n} seed files")
sys.exit(0 if all(made.values()) else 1)
