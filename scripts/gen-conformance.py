#!/usr/bin/env python3
"""scripts/gen-conformance.py OUTDIR

Generates the "generated" conformance set for Tests/codecs/conformance.c (issue 21):
OUTDIR/generated/*.jpg, *.png and a manifest.tsv in the corpus's format (see
../shared/corpus/README.md; only the columns the runner reads). Run by
`make test-codecs` into build/; nothing here is committed.

Differential testing: every expected md5 comes from a reference decoder that is not our
shim, run now on the file just made, so the test needs no stored pixels and no
../shared/corpus.

JPEG: sources synthesised here (PPM/PGM: gradients, noise, sharp edges, odd sizes),
encoded by cjpeg with every chroma subsampling, progressive, restart intervals,
arithmetic coding, grayscale, RGB (no colour transform), several qualities and
-optimize. Expected pixels: djpeg from the same libjpeg-turbo (libjpeg-turbo-progs)
with the shim's settings, which for a full-size decode are JDCT_ISLOW and fancy
upsampling on (jpeg_shim.c: dct_method, do_fancy_upsampling; block smoothing is left
at libjpeg's default in both). So djpeg runs with `-dct int` (its default, stated so a
change of default cannot slip by) and WITHOUT `-nosmooth` (which would turn fancy
upsampling off). Thumbnails: `djpeg -scale 1/N`, the same DCT scaling the shim asks for.
A grayscale JPEG comes out of djpeg as PGM; the shim's RGBA replicates Y, and so do we.

PNG: written by the small encoder below (Debian's python3 + zlib; Pillow cannot write
2-bit gray, 16-bit alpha or Adam7): every colour type and allowed bit depth, interlaced
and not, with tRNS, all five row filters, odd sizes. Expected pixels: Pillow's PNG
decoder (its own, not libpng), converted the way png_shim.c converts: palette, low-bit
gray and tRNS expanded (a tRNS match compares the raw, full-depth sample), gray to RGB,
alpha 0xff where there is none, 16-bit reduced to the high byte (png_set_strip_16), no
gamma (no gAMA is written). Pillow's result is also checked against the samples we
encoded; if the two disagree the generator stops, since then the reference is in doubt.
"""
import hashlib
import os
import random
import shutil
import struct
import subprocess
import sys
import zlib

try:
    from PIL import Image
except ImportError:
    sys.exit("gen-conformance: Pillow is missing (scripts/deps.sh installs it)")

for tool in ("cjpeg", "djpeg"):
    if shutil.which(tool) is None:
        sys.exit(f"gen-conformance: {tool} is missing (scripts/deps.sh installs libjpeg-turbo-progs)")

if len(sys.argv) != 2:
    sys.exit("usage: gen-conformance.py OUTDIR")
SET_DIR = os.path.join(sys.argv[1], "generated")
if os.path.isdir(SET_DIR):
    shutil.rmtree(SET_DIR)
os.makedirs(SET_DIR)
SRC_DIR = os.path.join(SET_DIR, "src")
os.makedirs(SRC_DIR)

rows = []  # manifest rows: (file, format, width, height, md5, thumb2, thumb4, thumb8)


def md5_rgba(width, height, rgba):
    assert len(rgba) == width * height * 4
    return hashlib.md5(bytes(rgba)).hexdigest()


# ---------------------------------------------------------------------------------
# JPEG
# ---------------------------------------------------------------------------------
def synth_rgb(kind, w, h, rnd):
    out = bytearray()
    for y in range(h):
        for x in range(w):
            if kind == "gradient":
                px = (x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(w + h - 2, 1))
            elif kind == "noise":
                px = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
            else:  # edges: saturated 3-px stripes and a diagonal, worst case for chroma
                stripe = (x // 3 + y // 3) % 4
                px = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)][stripe]
                if x == y:
                    px = (0, 0, 0)
            out += bytes(px)
    return out


def write_pnm(path, w, h, channels, data):
    with open(path, "wb") as f:
        f.write(b"P6" if channels == 3 else b"P5")
        f.write(f"\n{w} {h}\n255\n".encode())
        f.write(data)


def read_pnm_as_rgba(data):
    """djpeg's -pnm output (P5 or P6, maxval 255) as RGBA8."""
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    pos += 1  # the single whitespace after maxval
    magic, w, h, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    assert maxval == 255, maxval
    pixels = data[pos:]
    rgba = bytearray()
    if magic == b"P6":
        for i in range(w * h):
            rgba += pixels[3 * i:3 * i + 3] + b"\xff"
    elif magic == b"P5":
        for i in range(w * h):
            v = pixels[i]
            rgba += bytes((v, v, v, 255))
    else:
        raise ValueError(magic)
    return w, h, rgba


def djpeg(path, scale=None):
    # -dct int = JDCT_ISLOW; fancy upsampling stays on (no -nosmooth): the shim's settings.
    args = ["djpeg", "-dct", "int", "-pnm"]
    if scale:
        args += ["-scale", f"1/{scale}"]
    out = subprocess.run(args + [path], check=True, capture_output=True).stdout
    return read_pnm_as_rgba(out)


def add_jpeg(name, src, cjpeg_args):
    path = os.path.join(SET_DIR, name)
    with open(path, "wb") as f:
        # stderr only on failure: at quality 5 cjpeg cautions that its tables are too coarse
        # for baseline, which is expected.
        r = subprocess.run(["cjpeg"] + cjpeg_args + [src], stdout=f, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit(f"gen-conformance: cjpeg {' '.join(cjpeg_args)} failed: {r.stderr.decode(errors='replace')}")
    w, h, rgba = djpeg(path)
    thumbs = []
    for s in (2, 4, 8):
        tw, th, t = djpeg(path, s)
        thumbs.append(f"{tw}x{th}:{md5_rgba(tw, th, t)}")
    rows.append((name, "jpeg", w, h, md5_rgba(w, h, rgba), *thumbs))


# A progression with the chroma's AC in split bands and several refinement steps (cjpeg
# -scans syntax: components: Ss-Se, Ah, Al).
SCANS_420_SCRIPT = """0,1,2: 0-0, 0, 2;
0: 1-5, 0, 2;
1: 1-9, 0, 3;
2: 1-63, 0, 1;
1: 10-63, 0, 1;
0: 6-63, 0, 2;
0,1,2: 0-0, 2, 1;
1: 1-9, 3, 2;
0,1,2: 0-0, 1, 0;
1: 1-9, 2, 1;
1: 1-63, 1, 0;
2: 1-63, 1, 0;
0: 1-63, 2, 1;
0: 1-63, 1, 0;
"""
SCANS_420 = os.path.join(SRC_DIR, "scans-420.txt")


def gen_jpeg():
    rnd = random.Random(21)
    with open(SCANS_420, "w") as f:
        f.write(SCANS_420_SCRIPT)
    colour_sources = [("gradient", 333, 201), ("noise", 17, 13), ("edges", 255, 3), ("noise", 1, 1),
                      ("edges", 40, 33)]
    variants = [
        ("444", ["-sample", "1x1"]),
        ("422", ["-sample", "2x1"]),
        ("420", ["-sample", "2x2"]),
        ("440", ["-sample", "1x2"]),
        ("411", ["-sample", "4x1"]),
        ("420-progressive", ["-sample", "2x2", "-progressive"]),
        ("444-progressive", ["-sample", "1x1", "-progressive"]),
        # 4:2:0 progressive, whose 1/8 thumbnails need the chroma's AC scans: restart
        # intervals inside them, large coefficients, and a scan script that splits the
        # chroma's bands and refines them in several steps.
        ("420-progressive-restart", ["-sample", "2x2", "-progressive", "-restart", "3B"]),
        ("420-progressive-q100", ["-sample", "2x2", "-progressive", "-quality", "100"]),
        ("420-progressive-script", ["-sample", "2x2", "-scans", SCANS_420]),
        ("420-restart1row", ["-sample", "2x2", "-restart", "1"]),
        ("422-restart3blocks", ["-sample", "2x1", "-restart", "3B"]),
        ("420-arithmetic", ["-sample", "2x2", "-arithmetic"]),
        ("444-arithmetic-progressive", ["-sample", "1x1", "-arithmetic", "-progressive"]),
        ("grayscale", ["-grayscale"]),
        ("rgb", ["-rgb"]),
        ("q5", ["-quality", "5"]),
        ("q50-optimize", ["-quality", "50", "-optimize"]),
        ("q100", ["-quality", "100", "-sample", "1x1"]),
    ]
    for kind, w, h in colour_sources:
        src = os.path.join(SRC_DIR, f"{kind}-{w}x{h}.ppm")
        write_pnm(src, w, h, 3, synth_rgb(kind, w, h, rnd))
        for vname, args in variants:
            add_jpeg(f"jpeg-{kind}-{w}x{h}-{vname}.jpg", src, args)
    # One-component sources (PGM in, so cjpeg writes a gray JPEG without converting).
    for kind, w, h in (("gradient", 64, 47), ("noise", 9, 1)):
        rgb = synth_rgb(kind, w, h, rnd)
        src = os.path.join(SRC_DIR, f"{kind}-{w}x{h}.pgm")
        write_pnm(src, w, h, 1, bytes(rgb[0::3]))
        for vname, args in (("baseline", []), ("progressive", ["-progressive"]), ("arithmetic", ["-arithmetic"]),
                            ("restart1", ["-restart", "1"])):
            add_jpeg(f"jpeg-pgm-{kind}-{w}x{h}-{vname}.jpg", src, args)


# ---------------------------------------------------------------------------------
# PNG
# ---------------------------------------------------------------------------------
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def pack_row(samples, depth):
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per):
        b = 0
        chunk = samples[i:i + per]
        for j, s in enumerate(chunk):
            b |= s << (8 - depth * (j + 1))
        out.append(b)
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def filter_rows(raw_rows, bpp, first_filter):
    """Each row gets the next filter type in turn, so all five are exercised."""
    out, prev = bytearray(), None
    for i, row in enumerate(raw_rows):
        ft = (first_filter + i) % 5
        up = prev if prev is not None else bytes(len(row))
        f = bytearray()
        for x, v in enumerate(row):
            a = row[x - bpp] if x >= bpp else 0
            b = up[x]
            c = up[x - bpp] if x >= bpp else 0
            pred = (0, a, b, (a + b) // 2, paeth(a, b, c))[ft]
            f.append((v - pred) & 0xFF)
        out.append(ft)
        out += f
        prev = row
    return bytes(out)


def chunk(tag, body):
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)


def encode_png(w, h, ctype, depth, interlace, pixels, palette=None, trns=None):
    """pixels[y][x] is a tuple of raw samples."""
    ch = CHANNELS[ctype]
    bpp = max(1, ch * depth // 8)
    data = bytearray()
    if interlace:
        for p, (x0, y0, dx, dy) in enumerate(ADAM7):
            xs, ys = range(x0, w, dx), range(y0, h, dy)
            if len(xs) == 0 or len(ys) == 0:
                continue  # empty passes are not stored at all
            raws = [pack_row([s for x in xs for s in pixels[y][x]], depth) for y in ys]
            data += filter_rows(raws, bpp, p)
    else:
        raws = [pack_row([s for x in range(w) for s in pixels[y][x]], depth) for y in range(h)]
        data += filter_rows(raws, bpp, 0)
    z = zlib.compress(bytes(data), 9)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
    if palette is not None:
        out += chunk(b"PLTE", b"".join(bytes(c) for c in palette))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    half = len(z) // 2  # two IDATs: the reader must join them
    out += chunk(b"IDAT", z[:half]) + chunk(b"IDAT", z[half:]) + chunk(b"IEND", b"")
    return out


def truth_rgba(ctype, depth, pixels, palette, trns_value, palette_alpha):
    """What png_shim.c's transformations make of the samples we encoded."""
    top = (1 << depth) - 1
    out = bytearray()
    for row in pixels:
        for px in row:
            if ctype == 3:
                r, g, b = palette[px[0]]
                a = palette_alpha[px[0]] if px[0] < len(palette_alpha) else 255
            elif ctype in (0, 4):
                v = px[0] * 255 // top if depth < 8 else px[0] >> (depth - 8)
                r = g = b = v
                a = (px[1] >> (depth - 8)) if ctype == 4 else (0 if trns_value == px[0] else 255)
            else:
                r, g, b = (s >> (depth - 8) for s in px[:3])
                a = (px[3] >> (depth - 8)) if ctype == 6 else (0 if trns_value == tuple(px) else 255)
            out += bytes((r, g, b, a))
    return out


def pillow_rgba(path, ctype, depth):
    """The reference: Pillow's decode, converted with png_shim.c's rules (docstring)."""
    im = Image.open(path)
    im.load()
    w, h = im.size
    data = list(im.get_flattened_data() if hasattr(im, "get_flattened_data") else im.getdata())
    t = im.info.get("transparency")
    out = bytearray()
    if im.mode == "P":
        pal = im.getpalette()
        # Pillow reports a tRNS whose only non-255 entry is one 0 as that index alone.
        alpha = t if isinstance(t, (bytes, bytearray)) else b"" if t is None else bytes(255 if i != t else 0 for i in range(t + 1))
        for i in data:
            out += bytes((pal[3 * i], pal[3 * i + 1], pal[3 * i + 2], alpha[i] if i < len(alpha) else 255))
    elif im.mode in ("1", "L", "I;16", "I;16B", "I"):
        for v in data:
            if im.mode == "1":
                raw = v  # Pillow scales both 1-bit samples and the 1-bit tRNS value to 0/255
                v8 = v
            elif im.mode == "L":
                raw = v * ((1 << depth) - 1) // 255 if depth < 8 else v  # Pillow scales low bit depths up
                v8 = v
            else:
                raw, v8 = v, v >> 8
            out += bytes((v8, v8, v8, 0 if t is not None and raw == t else 255))
    elif im.mode == "LA":
        for v, a in data:
            out += bytes((v, v, v, a))
    elif im.mode == "RGB":
        # Pillow keeps only the high byte of 16-bit RGB, while tRNS holds the 16-bit
        # colour: compare high bytes there (the sources keep that unambiguous, and the
        # check against our samples would catch it if not).
        key = tuple(c >> 8 for c in t) if (t is not None and depth == 16) else t
        for px in data:
            out += bytes((*px, 0 if key is not None and tuple(px) == tuple(key) else 255))
    elif im.mode == "RGBA":
        for px in data:
            out += bytes(px)
    else:
        sys.exit(f"gen-conformance: Pillow mode {im.mode} for {path} is not handled")
    return w, h, out


def gen_png():
    rnd = random.Random(2021)
    configs = []
    for depth in (1, 2, 4, 8, 16):
        configs.append((0, depth, False))
    for depth in (1, 2, 8, 16):
        configs.append((0, depth, True))
    for depth in (8, 16):
        configs += [(2, depth, False), (2, depth, True), (4, depth, False), (6, depth, False)]
    for depth in (1, 2, 4, 8):
        configs.append((3, depth, False))
    for depth in (2, 8):
        configs.append((3, depth, True))
    for w, h in ((1, 1), (17, 13), (37, 5), (3, 29)):
        for ctype, depth, with_trns in configs:
            for interlace in (0, 1):
                top = (1 << depth) - 1
                ch = CHANNELS[ctype]
                palette = palette_alpha = trns_value = trns = None
                if ctype == 3:
                    n = 1 << depth
                    palette = [(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(n)]
                    # tRNS shorter than the palette where possible: later entries are opaque.
                    palette_alpha = bytes(rnd.choice((0, 128, 255, rnd.randrange(256))) for _ in range(max(1, n - 1)))
                    if with_trns:
                        trns = palette_alpha
                    else:
                        palette_alpha = b""
                pixels = []
                for y in range(h):
                    row = []
                    for x in range(w):
                        if (x + y) % 3 == 0:
                            px = tuple(rnd.randrange(top + 1) for _ in range(ch))
                        else:  # a gradient, so neighbouring samples make the filters work
                            px = tuple(((x * 7 + y * 3 + c * 5) * (top + 1) // 41) % (top + 1) for c in range(ch))
                        row.append(px)
                    pixels.append(row)
                if with_trns and ctype in (0, 2):
                    trns_value = pixels[h // 2][w // 2] if ctype == 2 else pixels[h // 2][w // 2][0]
                    if ctype == 2 and depth == 16:
                        # Keep the high bytes unique to that colour (see pillow_rgba).
                        key = tuple(c >> 8 for c in trns_value)
                        for row in pixels:
                            for x, px in enumerate(row):
                                if px != trns_value and tuple(c >> 8 for c in px) == key:
                                    row[x] = ((px[0] ^ 0x8000),) + px[1:]
                    vals = trns_value if ctype == 2 else (trns_value,)
                    trns = b"".join(struct.pack(">H", v) for v in vals)
                name = f"png-ct{ctype}-{depth}bit{'-trns' if with_trns else ''}{'-adam7' if interlace else ''}-{w}x{h}.png"
                path = os.path.join(SET_DIR, name)
                with open(path, "wb") as f:
                    f.write(encode_png(w, h, ctype, depth, interlace, pixels, palette, trns))
                pw, ph, ref = pillow_rgba(path, ctype, depth)
                want = truth_rgba(ctype, depth, pixels, palette, trns_value, palette_alpha or b"")
                if (pw, ph) != (w, h) or ref != want:
                    bad = next((i // 4 for i in range(len(want)) if i >= len(ref) or ref[i] != want[i]), -1)
                    sys.exit(f"gen-conformance: Pillow disagrees with the encoded samples of {name} "
                             f"(first at pixel {bad}: Pillow {bytes(ref[4 * bad:4 * bad + 4]).hex()}, "
                             f"samples {bytes(want[4 * bad:4 * bad + 4]).hex()}); the reference is in doubt")
                rows.append((name, "png", w, h, md5_rgba(w, h, ref), "", "", ""))


gen_jpeg()
gen_png()
shutil.rmtree(SRC_DIR)
with open(os.path.join(SET_DIR, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\tthumb_1_2\tthumb_1_4\tthumb_1_8\n")
    for name, fmt, w, h, md5, t2, t4, t8 in rows:
        f.write(f"{name}\t{fmt}\tok\t{w}\t{h}\t{md5}\t{t2}\t{t4}\t{t8}\n")
njpeg = sum(1 for r in rows if r[1] == "jpeg")
print(f"gen-conformance: {len(rows)} fixtures ({njpeg} JPEG by cjpeg/djpeg, {len(rows) - njpeg} PNG by Pillow) in {SET_DIR}")
