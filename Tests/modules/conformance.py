#!/usr/bin/env python3
"""Tests/modules/conformance.py BUILD_DIR: the codec modules against their formats'
reference tools, through the installed-style build (BUILD_DIR/bin/pixload, modules in
BUILD_DIR/lib/pixload/codecs).

A set generated at run time per format (Pillow draws the sources; heif-enc, cjxl and an
SVG writer here encode them; HEIC grids are assembled from heif-enc's tiles by heif_grid.py,
and odd sizes and larger HEVC coding blocks check the module's size limit), expected pixels
from the format's reference decoder (heif-convert, djxl, rsvg-convert at the same size),
pixload's output through the CLI (`pixload fetch --out x.png`, RGBA8 at full size, no
colour management: the tools apply none). Then: corrupt and truncated files refused cleanly (an error status, no crash);
HEIC thumbnails from the embedded thumbnail; SVG external references load nothing (a
file that exists, a local server counting requests); hostile SVGs refused before
rendering, with the time taken; each module hidden in turn (PIXLOAD_CODEC_PATH) gives
"unsupported image ... install libpixload-X". Prints one line per check and
"N passed, N failed" last; exits 1 on a failure.
"""
import http.server
import os
import shutil
import sys
import tempfile
import threading
import time

from PIL import Image

from harness import Harness, max_difference, run
from heif_grid import read_tile, write_grid, write_overlay

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
work = tempfile.mkdtemp(prefix="pxl-modules.")
harness = Harness(build, work)
pixload, modules = harness.pixload, harness.modules
check, fetch = harness.check, harness.fetch


def sources():
    """(name, Pillow image) drawn here: gradients, alpha, odd sizes."""
    out = []
    for w, h, alpha in [(97, 61, True), (64, 64, False), (1, 1, False), (300, 17, True), (33, 200, True)]:
        im = Image.new("RGBA", (w, h))
        px = im.load()
        for y in range(h):
            for x in range(w):
                a = 255 if not alpha else (x * 255 // max(1, w - 1))
                px[x, y] = (x * 255 // max(1, w - 1), y * 255 // max(1, h - 1), (x * 7 + y * 3) % 256, a)
        out.append((f"g{w}x{h}{'a' if alpha else ''}", im))
    return out


counts = {"heic": 0, "jxl": 0, "svg": 0}

# --- JPEG XL: cjxl (lossless and lossy), reference djxl --------------------------------
for name, im in sources():
    src = os.path.join(work, name + ".png")
    im.save(src)
    for mode, flags in [("lossless", ["-d", "0"]), ("lossy", ["-d", "1.5"])]:
        jxl = os.path.join(work, f"{name}-{mode}.jxl")
        ref = os.path.join(work, f"{name}-{mode}.ref.png")
        r1 = run("cjxl", src, jxl, *flags)
        r2 = run("djxl", jxl, ref)
        if r1.returncode or r2.returncode:
            check(False, f"jxl {name} {mode}: tools failed {r1.stderr[-200:]} {r2.stderr[-200:]}")
            continue
        got, why = fetch(jxl)
        want = Image.open(ref).convert("RGBA")
        d = max_difference(got, want) if got else 999
        # djxl writes 8-bit PNG from the same libjxl decode: exact.
        check(d == 0, f"jxl {name} {mode}: max difference {d} against djxl {why}")
        counts["jxl"] += 1

# An animation: three frames (cjxl from an APNG made by Pillow).
frames = [Image.new("RGBA", (40, 30), (i * 80, 255 - i * 80, 40, 255)) for i in range(3)]
apng = os.path.join(work, "anim.png")
frames[0].save(apng, save_all=True, append_images=frames[1:], duration=[100, 200, 300], loop=0)
anim = os.path.join(work, "anim.jxl")
r = run("cjxl", apng, anim, "-d", "0")
if r.returncode == 0:
    got, why = fetch(anim)
    check(got is not None and got.getpixel((5, 5))[:3] == (0, 255, 40), f"jxl animation: first frame as a still {why}")
    counts["jxl"] += 1
else:
    check(False, "cjxl could not encode an APNG: " + r.stderr[-200:])

# --- HEIC: heif-enc (lossy and lossless), reference heif-convert ----------------------
def heic_against_reference(label, heic):
    """pixload's decode of `heic` equals heif-convert's (the same libheif 1.15: exact)."""
    ref = heic[:-len(".heic")] + ".ref.png"
    r = run("heif-convert", heic, ref)
    if r.returncode:
        check(False, f"heic {label}: heif-convert failed {r.stdout[-200:]}{r.stderr[-200:]}")
        return
    got, why = fetch(heic)
    want = Image.open(ref).convert("RGBA")
    d = max_difference(got, want) if got else 999
    check(d == 0, f"heic {label}: max difference {d} against heif-convert {why}")
    counts["heic"] += 1


def heic_encode(src, heic, *flags):
    r = run("heif-enc", *flags, src, "-o", heic)
    if r.returncode:
        check(False, f"heif-enc {' '.join(flags)} {os.path.basename(src)}: {r.stdout[-200:]}{r.stderr[-200:]}")
    return r.returncode == 0


# Odd sizes: HEVC codes whole minimum coding blocks (x265: 8x8 unless min-cu-size says 16 or
# 32) and crops the rest, so the coded picture is larger than the size the file declares
# (97x61 is coded 104x64, or 128x64 with 32), and heif-enc 1.15 stores an image under 64 on a
# side (1x1, 300x17) as a grid of one tile padded to 64. libheif 1.15.1-1+deb12u2 holds the
# coded picture to the module's size limit: these were refused while it ignored the padding.
for name, im in sources():
    src = os.path.join(work, name + ".png")
    for mode, flags in [("lossy", ["-q", "80"]), ("lossless", ["-L"])]:
        heic = os.path.join(work, f"{name}-{mode}.heic")
        if heic_encode(src, heic, *flags):
            heic_against_reference(f"{name} {mode}", heic)
for name, blocks in [("g97x61a", 32), ("g300x17a", 16), ("g33x200a", 32)]:
    heic = os.path.join(work, f"{name}-cu{blocks}.heic")
    if heic_encode(os.path.join(work, name + ".png"), heic, "-q", "80", "-p", f"x265:min-cu-size={blocks}"):
        heic_against_reference(f"{name} min-cu-size={blocks}", heic)

# A phone screenshot's size: 1170x2532 is coded 1176x2536.
phone = Image.merge("RGB", (Image.linear_gradient("L").resize((1170, 2532)),
                            Image.linear_gradient("L").rotate(90).resize((1170, 2532)),
                            Image.radial_gradient("L").resize((1170, 2532))))
phone_src = os.path.join(work, "phone1170x2532.png")
phone.save(phone_src)
if heic_encode(phone_src, os.path.join(work, "phone1170x2532.heic"), "-q", "60"):
    heic_against_reference("1170x2532 lossy", os.path.join(work, "phone1170x2532.heic"))

# Grids (heif_grid.py assembles them from heif-enc's tiles): a grid's tiles are items of their
# own, with their own declared size and padding, larger than the grid's canvas. A 29x100
# canvas on one 64x100 tile (coded 64x104; pillow_heif's 29x100 files are made so), and on two
# rows of 64x64 tiles (heif-enc's own padding of a 29x64 and a 29x36 piece).
small = phone.resize((29, 100))
wide = Image.new("RGB", (64, 100))
wide.paste(small, (0, 0))
pieces = [("tile64x100", wide), ("piece0", small.crop((0, 0, 29, 64))), ("piece1", small.crop((0, 64, 29, 100)))]
tiles = {}
for name, im in pieces:
    im.save(os.path.join(work, name + ".png"))
    if heic_encode(os.path.join(work, name + ".png"), os.path.join(work, name + ".heic"), "-q", "80"):
        tiles[name] = read_tile(os.path.join(work, name + ".heic"))
if len(tiles) == 3:
    write_grid(os.path.join(work, "grid29x100-1x1.heic"), [tiles["tile64x100"]], 1, 1, 29, 100)
    heic_against_reference("29x100 grid of one 64x100 tile", os.path.join(work, "grid29x100-1x1.heic"))
    write_grid(os.path.join(work, "grid29x100-2x1.heic"), [tiles["piece0"], tiles["piece1"]], 2, 1, 29, 100)
    heic_against_reference("29x100 grid of 2 rows of 64x64 tiles", os.path.join(work, "grid29x100-2x1.heic"))
    # The limit now follows the tiles' declared sizes, so it no longer bounds the canvas by the
    # grid's: a canvas larger than the grid declares is refused by its own check, before libheif
    # makes it (what read_header reports is what max_pixels was checked against).
    lie = os.path.join(work, "grid-canvas-over-ispe.heic")
    # (its tile declared as large as an item may be: 1000 is under the 1024 floor below)
    write_grid(lie, [tiles["tile64x100"]], 1, 1, 3000, 3000, ispe=(29, 100), tile_ispe=(1000, 1000))
    got, why = fetch(lie)
    check(got is None and "canvas 3000x3000" in why,
          f"heic grid declared 29x100 with a 3000x3000 canvas and a tile declared 1000x1000: refused ({why})")
    # An overlay (iovl) is checked the same way: its 32-bit fields too.
    overlay = os.path.join(work, "overlay100x100.heic")
    write_overlay(overlay, [tiles["tile64x100"], tiles["piece0"]], 100, 100, [(0, 0), (50, 20)])
    heic_against_reference("100x100 overlay of a 64x100 and a 64x64 tile", overlay)
    lie = os.path.join(work, "overlay-canvas-over-ispe.heic")
    write_overlay(lie, [tiles["tile64x100"]], 20000, 20000, [(0, 0)], ispe=(100, 100))
    got, why = fetch(lie)
    check(got is None and "canvas 20000x20000" in why, f"heic overlay declared 100x100 with a 20000x20000 canvas: refused ({why})")

# What the items a decode makes may add to the size read_header reports (max_pixels is
# checked against it): a tile padded past its grid, up to 1024 a side, and all of them a few
# times the image's area. A 64x48 grid on one tile declared 1280x1280 (a second reader's 61 KB
# file with a 16384x16384 tile took 1.2 GB), and a 100x100 overlay of three 1024x1024 images.
for side in (1280, 1024):
    Image.new("RGB", (side, side), (90, 120, 150)).save(os.path.join(work, f"flat{side}.png"))
    if heic_encode(os.path.join(work, f"flat{side}.png"), os.path.join(work, f"flat{side}.heic"), "-q", "50"):
        tiles[f"flat{side}"] = read_tile(os.path.join(work, f"flat{side}.heic"))
if "flat1280" in tiles:
    lie = os.path.join(work, "grid64x48-big-tile.heic")
    write_grid(lie, [tiles["flat1280"]], 1, 1, 64, 48)
    got, why = fetch(lie)
    check(got is None and "more than a 64x48 image can be made of" in why,
          f"heic 64x48 grid on a 1280x1280 tile: refused before libheif decodes it ({why})")
if "flat1024" in tiles:
    lie = os.path.join(work, "overlay100x100-big-items.heic")
    write_overlay(lie, [tiles["flat1024"]] * 3, 100, 100, [(0, 0), (10, 10), (20, 20)])
    got, why = fetch(lie)
    check(got is None and "more than a 100x100 image can be made of" in why,
          f"heic 100x100 overlay of three 1024x1024 images: refused ({why})")

# A phone-style HEIC with an embedded thumbnail: a 150x150 request is served from it.
big = Image.new("RGB", (1600, 1200))
bp = big.load()
for y in range(0, 1200):
    for x in range(0, 1600):
        bp[x, y] = (x * 255 // 1599, y * 255 // 1199, 90)
bigsrc = os.path.join(work, "big.png")
big.save(bigsrc)
thumbed = os.path.join(work, "thumbed.heic")
r = run("heif-enc", "-q", "70", "-t", "320", bigsrc, "-o", thumbed)
if r.returncode == 0:
    t0 = time.process_time()
    got, why = fetch(thumbed, "--size", "150x150")
    check(got is not None and got.size == (150, 113), f"heic thumbnail 150x150 fit: {got.size if got else why}")
    counts["heic"] += 1
    full, why = fetch(thumbed)
    check(full is not None and full.size == (1600, 1200), f"heic full size beside its thumbnail: {full.size if full else why}")

    # In-process: the CLI's CPU/image is its own process's, and an isolated decode's work
    # (the module's, and since the resize moved into the worker, the resize too) is the
    # worker's. The module's choice of the thumbnail is the same in either.
    def cpu_ms(*options):
        r = run(pixload, "fetch", "--allow-file", "--no-disk-cache", "--isolation", "none", *options,
                "file://" + thumbed)
        return float(r.stdout.strip().splitlines()[-1].split(",")[-1].split("ms")[0])

    thumb_cpu = min(cpu_ms("--size", "150x150") for _ in range(3))
    full_cpu = min(cpu_ms("--size", "800x800") for _ in range(3))
    check(thumb_cpu <= 0.2 * full_cpu,
          f"heic 150x150 from the embedded thumbnail: {thumb_cpu:.1f} ms CPU, a decode of the whole "
          f"image {full_cpu:.1f} ms ({thumb_cpu / full_cpu:.2f}x, at most 0.2x)")
else:
    check(False, "heif-enc -t failed: " + r.stdout[-200:])

# --- SVG: written here, reference rsvg-convert at the same size -----------------------
svgs = {
    "shapes": '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80"><rect width="60" height="80" fill="#c03020"/>'
              '<circle cx="90" cy="40" r="25" fill="#2040c0" fill-opacity="0.6"/></svg>',
    "viewbox-only": '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 50 25"><path d="M0 0L50 25L0 25z" fill="green"/></svg>',
    "gradient": '<?xml version="1.0" encoding="UTF-8"?>\n<!-- a comment -->\n<svg xmlns="http://www.w3.org/2000/svg" '
                'width="64" height="64"><defs><linearGradient id="g"><stop offset="0" stop-color="red"/>'
                '<stop offset="1" stop-color="blue" stop-opacity="0.2"/></linearGradient></defs>'
                '<rect width="64" height="64" fill="url(#g)"/></svg>',
    "text-free-stroke": '<svg xmlns="http://www.w3.org/2000/svg" width="90" height="45"><polyline points="0,0 45,45 90,0" '
                        'stroke="black" stroke-width="5" fill="none"/></svg>',
}
for name, text in svgs.items():
    path = os.path.join(work, name + ".svg")
    with open(path, "w") as f:
        f.write(text)
    # 60x60: a size every document here reaches in whole pixels on both axes (a FIT that
    # rounds one side draws at an aspect a fraction of a pixel off rsvg-convert's stretch).
    for size in [None, (60, 60)]:
        options = ["--size", f"{size[0]}x{size[1]}"] if size else []
        got, why = fetch(path, *options)
        if got is None:
            check(False, f"svg {name} {size}: {why}")
            continue
        ref = os.path.join(work, name + ".ref.png")
        r = run("rsvg-convert", "-w", str(got.size[0]), "-h", str(got.size[1]), path, "-o", ref)
        want = Image.open(ref).convert("RGBA")
        d = max_difference(got, want)
        # rsvg-convert unpremultiplies cairo's pixels with its own rounding; pixload with its
        # own: at most 1 apart on partly transparent pixels.
        check(d <= 1, f"svg {name} at {got.size[0]}x{got.size[1]}: max difference {d} against rsvg-convert")
        counts["svg"] += 1

# No external resources: a file that exists, and a local server that counts requests.
hits = []


class Counter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()
        self.wfile.write(open(os.path.join(work, "g64x64.png"), "rb").read())

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Counter)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
red = Image.new("RGBA", (20, 20), (255, 0, 0, 255))
red.save(os.path.join(work, "red.png"))
external = (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="20" height="20">'
            f'<image href="file://{work}/red.png" width="20" height="20"/>'
            f'<image href="red.png" width="20" height="20"/>'
            f'<image xlink:href="http://127.0.0.1:{port}/x.png" width="20" height="20"/>'
            f'<use href="http://127.0.0.1:{port}/y.svg#a"/></svg>')
path = os.path.join(work, "external.svg")
with open(path, "w") as f:
    f.write(external)
got, why = fetch(path)
check(got is not None and got.getpixel((10, 10))[3] == 0,
      f"svg external references load nothing from disk: pixel {got.getpixel((10, 10)) if got else why}")
time.sleep(0.2)
check(hits == [], f"svg external references load nothing from the network: {hits}")
server.shutdown()

# Hostile SVGs: refused before rendering (limits in codecs/svg.c), time measured.
hostile = {
    "deep": '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">' + "<g>" * 5000 + "</g>" * 5000 + "</svg>",
    "many": '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">' + '<rect width="1" height="1"/>' * 50000 + "</svg>",
    "entities": '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
                '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><svg xmlns="http://www.w3.org/2000/svg" width="10" '
                'height="10"><text>&c;&c;&c;</text></svg>',
    "huge-filter": '<svg xmlns="http://www.w3.org/2000/svg" width="2000" height="2000"><filter id="f" x="-10" y="-10" '
                   'width="20" height="20"><feGaussianBlur stdDeviation="500"/></filter>'
                   '<rect width="2000" height="2000" filter="url(#f)"/></svg>',
}
for name, text in hostile.items():
    path = os.path.join(work, f"hostile-{name}.svg")
    with open(path, "w") as f:
        f.write(text)
    t0 = time.monotonic()
    got, why = fetch(path, "--size", "256x256")
    elapsed = time.monotonic() - t0
    refused = got is None
    ok = (refused and name != "huge-filter") or (name == "huge-filter" and elapsed < 10)
    check(ok, f"hostile svg {name}: {'refused (' + why + ')' if refused else 'rendered'} in {elapsed * 1000:.0f} ms")

# --- corrupt and truncated files refused cleanly --------------------------------------
for fmt, path in [("jxl", os.path.join(work, "g97x61a-lossy.jxl")), ("heic", os.path.join(work, "g97x61a-lossy.heic")),
                  ("svg", os.path.join(work, "shapes.svg"))]:
    data = open(path, "rb").read()
    for kind, body in [("truncated", data[: len(data) // 2]), ("corrupt", data[:32] + bytes((b * 7 + 13) % 256 for b in data[32:]))]:
        bad = os.path.join(work, f"bad.{fmt}")
        with open(bad, "wb") as f:
            f.write(body)
        got, why = fetch(bad)
        r = run(pixload, "fetch", "--allow-file", "--no-disk-cache", "file://" + bad)
        crashed = r.returncode < 0 or r.returncode > 1
        check(got is None and not crashed and ("CORRUPT" in r.stdout or "UNSUPPORTED" in r.stdout or "corrupt" in r.stdout),
              f"{fmt} {kind}: refused ({r.stdout.strip().splitlines()[0] if r.stdout.strip() else r.returncode})")

# --- a module missing: hidden by PIXLOAD_CODEC_PATH ------------------------------------
for module, fmt, sample in [("heif", "heic", "g97x61a-lossy.heic"), ("jxl", "jxl", "g97x61a-lossy.jxl"),
                            ("svg", "svg", "shapes.svg")]:
    partial = os.path.join(work, "codecs-without-" + module)
    os.makedirs(partial, exist_ok=True)
    for other in os.listdir(modules):
        if other != f"libpixload-{module}.so":
            shutil.copy(os.path.join(modules, other), partial)
    env = dict(os.environ, PIXLOAD_CODEC_PATH=partial)
    r = run(pixload, "fetch", "--allow-file", "--no-disk-cache", "file://" + os.path.join(work, sample), env=env)
    check(f"install libpixload-{module}" in r.stdout + r.stderr and "UNSUPPORTED" in r.stdout.upper(),
          f"without libpixload-{module}: {(r.stdout.strip().splitlines() or [''])[0]}")
    v = run(pixload, "version", env=env)
    check(fmt not in v.stdout.split("formats:")[1].split(), f"version without {module}: {v.stdout.strip().splitlines()[-1]}")

print(f"conformance: heic {counts['heic']}, jxl {counts['jxl']}, svg {counts['svg']} files matched their reference")
shutil.rmtree(work, ignore_errors=True)
print(f"{harness.passed} passed, {harness.failed} failed")
sys.exit(1 if harness.failed else 0)
