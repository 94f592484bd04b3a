#!/usr/bin/env python3
"""bench/heldout_set.py OUT_DIR [FILES_PER_CATEGORY]: web photos of kinds the demo set lacks.

The demo set (scripts/photos.sh) is Pillow's JPEGs: 4:2:0, no ICC profile, no EXIF, sRGB
pixels, 640-1600 px. Issue 41's outside readers measured on a set we do not have; this
builds, at test time, one folder per kind of file a web page serves, so `make
bench-heldout` (bench/heldout.py) can hold pixload against the bare decode-only loop kind
by kind. Sources: the real photographs of ../shared/corpus/realworld/photos (Debian's
mate-backgrounds) and the photographs Debian ships in /usr/share/backgrounds (*_by_*.jpg,
ubuntu-wallpapers / lomiri), whichever are present; every file is its own seeded crop
(aspect 16:9 .. 2:3) scaled to its kind's width range, so no two are alike.

OUT_DIR/CATEGORY/NNN.(jpg|png) and OUT_DIR/CATEGORY/index.txt (relative names);
OUT_DIR/categories.txt lists the categories in order. Idempotent: a category whose index
lists FILES_PER_CATEGORY files is kept.
"""
import glob
import importlib.util
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image, ImageCms, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.environ.get("CORPUS", os.path.join(ROOT, "..", "shared", "corpus"))


def sources():
    paths = sorted(glob.glob(os.path.join(CORPUS, "realworld", "photos", "*.jpg")))
    paths += sorted(glob.glob("/usr/share/backgrounds/*_by_*.jpg"))
    if not paths:
        sys.exit("heldout_set.py: no source photographs (../shared/corpus/realworld/photos, /usr/share/backgrounds)")
    return paths


def profiles():
    """Display P3 and Adobe RGB (1998) built by lcms2 (scripts/gen-color-fixtures.py), and
    lcms2's sRGB (what many encoders embed: colour management must see it is sRGB)."""
    spec = importlib.util.spec_from_file_location("gcf", os.path.join(ROOT, "scripts", "gen-color-fixtures.py"))
    gcf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gcf)
    p = gcf.profiles()
    return {"p3": p["p3"], "adobe": p["adobe"], "srgb": p["srgb"]}


def exif_orientation(value):
    exif = Image.Exif()
    exif[0x0112] = value
    return exif.tobytes()


def jpeg(**kw):
    def save(img, path, rng):
        img.convert("RGB").save(path, "JPEG", quality=rng.randint(75, 92), **kw)
    return save


def jpeg_mode(mode):
    def save(img, path, rng):
        img.convert(mode).save(path, "JPEG", quality=rng.randint(75, 92))
    return save


def jpegtran(*flags):
    def save(img, path, rng):
        tmp = path + ".tmp.jpg"
        jpeg()(img, tmp, rng)
        subprocess.run(["jpegtran", *flags, "-outfile", path, tmp], check=True)
        os.unlink(tmp)
    return save


def rounded_alpha(img, rng):
    rgba = img.convert("RGBA")
    mask = Image.new("L", rgba.size, 0)
    r = min(rgba.size) // rng.randint(5, 10)
    ImageDraw.Draw(mask).rounded_rectangle([0, 0, rgba.size[0] - 1, rgba.size[1] - 1], r, fill=255)
    rgba.putalpha(mask)
    return rgba


def png_rgba(img, path, rng):
    rounded_alpha(img, rng).save(path, "PNG")


def png_palette(img, path, rng):
    img.convert("RGB").quantize(256, dither=Image.Dither.FLOYDSTEINBERG).save(path, "PNG")


def png_rgb(img, path, rng):
    img.convert("RGB").save(path, "PNG")


def png_16bit(img, path, rng):
    """RGBA, 16 bits a sample (Pillow writes 16-bit grey only: ImageMagick)."""
    src = path + ".tmp.png"
    rounded_alpha(img, rng).save(src, "PNG")
    subprocess.run(["convert", src, "-depth", "16", "PNG64:" + path], check=True)
    os.unlink(src)


def png_interlaced(img, path, rng):
    src = path + ".tmp.png"
    img.convert("RGB").save(src, "PNG")
    subprocess.run(["convert", src, "-interlace", "PNG", "PNG24:" + path], check=True)
    os.unlink(src)


def build_categories(prof):
    web = (640, 1600)
    return [  # name, widths, extension, writer
        ("baseline-420", web, "jpg", jpeg(subsampling=2)),
        ("baseline-444", web, "jpg", jpeg(subsampling=0)),
        ("baseline-422", web, "jpg", jpeg(subsampling=1)),
        ("progressive-420", web, "jpg", jpeg(subsampling=2, progressive=True)),
        ("progressive-444", web, "jpg", jpeg(subsampling=0, progressive=True)),
        ("progressive-422", web, "jpg", jpeg(subsampling=1, progressive=True)),
        ("icc-srgb", web, "jpg", jpeg(icc_profile=prof["srgb"])),
        ("icc-display-p3", web, "jpg", jpeg(icc_profile=prof["p3"])),
        ("icc-adobe-rgb", web, "jpg", jpeg(icc_profile=prof["adobe"])),
        ("exif-orientation-6", web, "jpg", jpeg(exif=exif_orientation(6))),
        ("exif-orientation-8", web, "jpg", jpeg(exif=exif_orientation(8))),
        ("grayscale", web, "jpg", jpeg_mode("L")),
        ("cmyk", web, "jpg", jpeg_mode("CMYK")),
        ("restart-markers", web, "jpg", jpegtran("-restart", "1")),
        ("arithmetic", web, "jpg", jpegtran("-arithmetic")),
        ("small-400", (300, 480), "jpg", jpeg()),
        ("tiny-200", (160, 240), "jpg", jpeg()),
        ("large-4000", (3000, 4000), "jpg", jpeg()),
        ("png-rgb", web, "png", png_rgb),
        ("png-alpha", web, "png", png_rgba),
        ("png-palette", web, "png", png_palette),
        ("png-16bit", web, "png", png_16bit),
        ("png-interlaced", web, "png", png_interlaced),
    ]


def crop(src, rng, width):
    sw, sh = src.size
    aspect = rng.choice([16 / 9, 3 / 2, 4 / 3, 1.0, 3 / 4, 2 / 3])
    zoom = rng.uniform(0.6, 1.0)
    cw = min(sw, int(sh * aspect)) * zoom
    ch = cw / aspect
    x = rng.uniform(0, sw - cw)
    y = rng.uniform(0, sh - ch)
    box = tuple(int(v) for v in (x, y, x + cw, y + ch))
    height = max(1, round(width / aspect))
    return src.resize((width, height), Image.Resampling.LANCZOS, box=box, reducing_gap=3.0)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: heldout_set.py OUT_DIR [FILES_PER_CATEGORY]")
    out, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    os.makedirs(out, exist_ok=True)
    cats = build_categories(profiles())
    todo = [c for c in cats
            if not os.path.exists(os.path.join(out, c[0], "index.txt"))
            or sum(1 for _ in open(os.path.join(out, c[0], "index.txt"))) != count]
    if todo:
        paths = sources()
        decoded = {}
        for ci, (name, (wmin, wmax), ext, save) in enumerate(todo):
            tmp = tempfile.mkdtemp(prefix=name + ".", dir=out)
            names = []
            for i in range(count):
                rng = random.Random(f"{name}/{i}")
                path = paths[(i + ci) % len(paths)]
                if path not in decoded:
                    img = Image.open(path)
                    img.draft("RGB", (4000, 4000))  # sources over 4000 px: DCT-scaled once
                    decoded[path] = img.convert("RGB")
                img = crop(decoded[path], rng, rng.randint(wmin, wmax))
                fname = f"{i:03d}.{ext}"
                save(img, os.path.join(tmp, fname), rng)
                names.append(fname)
            with open(os.path.join(tmp, "index.txt"), "w") as f:
                f.write("".join(n + "\n" for n in names))
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
            os.rename(tmp, os.path.join(out, name))
            print(f"heldout_set: {name}: {count} files", file=sys.stderr)
    with open(os.path.join(out, "categories.txt"), "w") as f:
        f.write("".join(c[0] + "\n" for c in cats))


if __name__ == "__main__":
    main()
