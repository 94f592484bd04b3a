#!/usr/bin/env python3
"""scripts/gen-conformance-gif.py OUTDIR

Generates the "generated-gif" conformance set for Tests/codecs/conformance.c:
OUTDIR/generated-gif/*.gif and a manifest.tsv (the runner's columns, plus frames,
durations_ms and loop_count, see Tests/fixtures/gif-suite/README.md). Run by
`make test-codecs` into build/; nothing here is committed.

GIFs are written by the small encoder below (LZW included), so every feature is under
control: global and local palettes (2 to 256 colours), interlaced and not, transparency,
each disposal method (0 unspecified, 1 leave, 2 background, 3 previous) in animations,
frames offset inside the canvas and partly outside it (clipped), odd sizes, loop counts,
delays; and must_fail files (truncated header, no data, an LZW stream cut before the
first row, pixel indices beyond the colour table, an empty screen).

Expected pixels: ImageMagick (`convert FILE -alpha set -set background none -coalesce
RGBA:-`), whose GIF reader is its own (coders/gif.c, not giflib) and whose -coalesce
composites every frame with the disposal methods applied. Left alone it starts from the
file's background colour, opaque; `-alpha set -set background none` makes that canvas
transparent and "background" disposal clear to transparent, which is what browsers show
and what the issue asks for (giflib with the frame's disposal and transparency applied). One
normalisation: where alpha is 0 the colour is set to 0 (a fully transparent pixel has no
colour; ImageMagick keeps whatever palette colour it had, the shim writes 0,0,0,0). As a
check on the reference, every frame ImageMagick gives is compared with the frames
composited here from what was encoded (a model of the GIF89a rules written
independently of gif_shim.c); if the two disagree the generator stops, since then the
reference is in doubt.
"""
import hashlib
import os
import random
import shutil
import struct
import subprocess
import sys

if len(sys.argv) != 2:
    sys.exit("usage: gen-conformance-gif.py OUTDIR")
if shutil.which("convert") is None:
    sys.exit("gen-conformance-gif: ImageMagick's convert is missing (scripts/deps.sh installs imagemagick)")
SET_DIR = os.path.join(sys.argv[1], "generated-gif")
if os.path.isdir(SET_DIR):
    shutil.rmtree(SET_DIR)
os.makedirs(SET_DIR)


# ---------------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------------
def lzw(indices, min_size):
    clear, eoi = 1 << min_size, (1 << min_size) + 1
    out, acc, nacc = bytearray(), 0, 0
    size = min_size + 1

    def emit(code):
        nonlocal acc, nacc
        acc |= code << nacc
        nacc += size
        while nacc >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nacc -= 8

    def reset():
        return {bytes([i]): i for i in range(clear)}, eoi + 1, min_size + 1

    table, nxt, size = reset()
    emit(clear)
    w = bytes([indices[0]])
    for k in indices[1:]:
        wk = w + bytes([k])
        if wk in table:
            w = wk
            continue
        emit(table[w])
        if nxt < 4096:
            table[wk] = nxt
            nxt += 1
            if nxt > (1 << size) and size < 12:
                size += 1
        else:
            emit(clear)
            table, nxt, size = reset()
        w = bytes([k])
    emit(table[w])
    emit(eoi)
    if nacc:
        out.append(acc & 0xFF)
    return bytes(out)


def sub_blocks(data):
    out = bytearray()
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out += bytes([len(chunk)]) + chunk
    return bytes(out) + b"\0"


def table_bits(n):
    bits = 1
    while (1 << bits) < n:
        bits += 1
    return bits


def colour_table(palette):
    bits = table_bits(len(palette))
    padded = list(palette) + [(0, 0, 0)] * ((1 << bits) - len(palette))
    return bits, b"".join(bytes(c) for c in padded)


class Frame:
    def __init__(self, left, top, w, h, indices, palette=None, transparent=None, disposal=0, delay=0,
                 interlace=False, gce=True):
        self.left, self.top, self.w, self.h = left, top, w, h
        self.indices, self.palette, self.transparent = indices, palette, transparent
        self.disposal, self.delay, self.interlace, self.gce = disposal, delay, interlace, gce


def encode_gif(width, height, frames, global_palette=None, loop=None, version=b"GIF89a"):
    out = bytearray(version)
    flags = 0
    gct = b""
    if global_palette:
        bits, gct = colour_table(global_palette)
        flags = 0x80 | ((bits - 1) << 4) | (bits - 1)
    out += struct.pack("<HHBBB", width, height, flags, 0, 0) + gct
    if loop is not None:
        out += b"\x21\xff\x0bNETSCAPE2.0\x03\x01" + struct.pack("<H", loop) + b"\0"
    for f in frames:
        if f.gce:
            packed = (f.disposal << 2) | (1 if f.transparent is not None else 0)
            out += b"\x21\xf9\x04" + struct.pack("<BHB", packed, f.delay, f.transparent or 0) + b"\0"
        lflags, lct = 0, b""
        if f.palette:
            bits, lct = colour_table(f.palette)
            lflags = 0x80 | (bits - 1)
        if f.interlace:
            lflags |= 0x40
        out += b"\x2c" + struct.pack("<HHHHB", f.left, f.top, f.w, f.h, lflags) + lct
        rows = [f.indices[y * f.w:(y + 1) * f.w] for y in range(f.h)]
        if f.interlace:
            order = [y for start, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for y in range(start, f.h, step)]
            rows = [rows[y] for y in order]
        pal = f.palette or global_palette
        min_size = max(2, table_bits(len(pal)))
        out += bytes([min_size]) + sub_blocks(lzw([i for r in rows for i in r], min_size))
    out += b";"
    return bytes(out)


# ---------------------------------------------------------------------------------
# Model: the GIF89a composition rules, independently of the shim.
# ---------------------------------------------------------------------------------
def composite(width, height, frames, global_palette):
    canvas = [(0, 0, 0, 0)] * (width * height)
    shown = []
    for f in frames:
        pal = f.palette or global_palette
        before = list(canvas)
        for y in range(f.h):
            for x in range(f.w):
                cx, cy = f.left + x, f.top + y
                if cx >= width or cy >= height:
                    continue
                i = f.indices[y * f.w + x]
                if i != f.transparent:
                    canvas[cy * width + cx] = tuple(pal[i]) + (255,)
        shown.append(b"".join(bytes(p) for p in canvas))
        if f.disposal in (2, 3):
            for y in range(f.top, min(f.top + f.h, height)):
                for x in range(f.left, min(f.left + f.w, width)):
                    canvas[y * width + x] = (0, 0, 0, 0) if f.disposal == 2 else before[y * width + x]
    return shown


def imagemagick_frames(path, width, height):
    raw = subprocess.run(["convert", path, "-alpha", "set", "-set", "background", "none", "-coalesce", "-depth", "8", "RGBA:-"], check=True,
                         capture_output=True).stdout
    size = width * height * 4
    assert len(raw) % size == 0, (path, len(raw), size)
    frames = []
    for k in range(len(raw) // size):
        px = bytearray(raw[k * size:(k + 1) * size])
        for i in range(0, size, 4):
            if px[i + 3] == 0:
                px[i:i + 3] = b"\0\0\0"
        frames.append(bytes(px))
    return frames


rows = []
rnd = random.Random(2019)


def random_palette(n):
    return [(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(n)]


def pattern(w, h, ncolours, seed):
    r = random.Random(seed)
    # Runs and noise, so LZW builds long strings and short ones.
    return [(x // 3 + y) % ncolours if (x * 7 + y * 3) % 5 else r.randrange(ncolours) for y in range(h) for x in range(w)]


def add(name, width, height, frames, global_palette=None, loop=None):
    data = encode_gif(width, height, frames, global_palette, loop)
    path = os.path.join(SET_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    ref = imagemagick_frames(path, width, height)
    model = composite(width, height, frames, global_palette)
    if ref != model:
        k = next((k for k in range(min(len(ref), len(model))) if ref[k] != model[k]), min(len(ref), len(model)))
        sys.exit(f"gen-conformance-gif: ImageMagick disagrees with the encoded frames of {name} "
                 f"({len(ref)} frames, model {len(model)}; first difference in frame {k}); the reference is in doubt")
    durations = ",".join(str(f.delay * 10) for f in frames)
    if len(frames) == 1:
        loops = 0
    else:
        loops = 1 if loop is None else (0 if loop == 0 else loop + 1)
    whole = hashlib.md5(b"".join(ref)).hexdigest()
    rows.append((name, "ok", width, height, hashlib.md5(ref[0]).hexdigest(), f"{len(ref)}:{whole}", durations, loops))
    return data


# Stills: sizes x palette sizes x interlace, global or local palette, with and without
# a transparent index.
for (w, h) in ((1, 1), (17, 13), (37, 5), (3, 29), (64, 64)):
    for ncol in (2, 4, 16, 256):
        for interlace in (False, True):
            pal = random_palette(ncol)
            idx = pattern(w, h, ncol, w * h + ncol)
            tag = f"{w}x{h}-{ncol}c{'-interlaced' if interlace else ''}"
            add(f"still-global-{tag}.gif", w, h, [Frame(0, 0, w, h, idx, interlace=interlace, gce=False)], pal)
            add(f"still-local-{tag}.gif", w, h, [Frame(0, 0, w, h, idx, palette=pal, interlace=interlace)])
            if ncol > 2:
                add(f"still-transparent-{tag}.gif", w, h,
                    [Frame(0, 0, w, h, idx, palette=pal, transparent=1, interlace=interlace)], random_palette(4))

# First frame smaller than the canvas, offset; partly outside it (clipped).
pal = random_palette(16)
add("offset-inside.gif", 40, 30, [Frame(7, 5, 20, 11, pattern(20, 11, 16, 1))], pal)
add("offset-inside-interlaced.gif", 40, 30, [Frame(3, 9, 21, 17, pattern(21, 17, 16, 2), interlace=True)], pal)
add("offset-partly-outside.gif", 25, 19, [Frame(15, 11, 20, 13, pattern(20, 13, 16, 3), transparent=2)], pal)
add("offset-partly-outside-interlaced.gif", 25, 19,
    [Frame(10, 4, 30, 30, pattern(30, 30, 16, 4), interlace=True)], pal)

# Animations: each disposal, offsets, local palettes, transparency, delays, loops.
for disposal in (0, 1, 2, 3):
    for interlace in (False, True):
        w, h = 31, 23
        frames = [Frame(0, 0, w, h, pattern(w, h, 16, 10), disposal=1, delay=10)]
        for k in range(4):
            fw, fh = 9 + 3 * k, 7 + 2 * k
            frames.append(Frame(2 + 5 * k, 1 + 4 * k, fw, fh, pattern(fw, fh, 8, 20 + k),
                                palette=random_palette(8) if k % 2 else None, transparent=3 if k != 2 else None,
                                disposal=disposal, delay=5 * (k + 1), interlace=interlace and k % 2 == 0))
        add(f"anim-dispose{disposal}{'-interlaced' if interlace else ''}.gif", w, h, frames, random_palette(16),
            loop=0)
# Mixed disposals in one animation, a transparent first frame not covering the canvas,
# a frame partly outside the canvas, and a finite loop count.
frames = [Frame(4, 4, 10, 10, pattern(10, 10, 4, 30), transparent=0, disposal=3, delay=7),
          Frame(0, 0, 20, 16, pattern(20, 16, 4, 31), disposal=2, delay=0),
          Frame(12, 9, 15, 15, pattern(15, 15, 4, 32), transparent=1, disposal=1, delay=100),
          Frame(3, 2, 6, 6, pattern(6, 6, 4, 33), palette=random_palette(4), disposal=3, delay=3),
          Frame(1, 1, 18, 14, pattern(18, 14, 4, 34), transparent=2, disposal=0, delay=65535)]
add("anim-mixed-loop3.gif", 20, 16, frames, random_palette(4), loop=3)
add("anim-no-loop-extension.gif", 20, 16, frames[:3], random_palette(4))

# must_fail: truncated header, data cut before the first row, indices beyond the colour
# table, an empty logical screen, no image at all.
good = encode_gif(16, 16, [Frame(0, 0, 16, 16, pattern(16, 16, 4, 40))], random_palette(4))
fails = {
    "fail-truncated-header.gif": good[:9],
    "fail-truncated-colour-table.gif": good[:15],
    "fail-no-image.gif": good[:13 + 12] + b";",
    "fail-cut-after-descriptor.gif": good[:13 + 12 + 8 + 10],
    "fail-empty-screen.gif": encode_gif(0, 0, [Frame(0, 0, 1, 1, [0])], random_palette(2)),
}
# A colour table of 2 entries with indices 0..3: the LZW stream is valid, the indices are not.
bad = bytearray(encode_gif(4, 4, [Frame(0, 0, 4, 4, [0, 1, 2, 3] * 4)], random_palette(4)))
bad[10] = 0x80  # global table of 2 entries (6 bytes) instead of 4 (12): drop the last two
bad = bad[:13 + 6] + bad[13 + 12:]
fails["fail-index-beyond-table.gif"] = bytes(bad)
for name, data in fails.items():
    with open(os.path.join(SET_DIR, name), "wb") as f:
        f.write(data)
    rows.append((name, "must_fail", 0, 0, "", "", "", ""))
# A canvas one pixel over the runner's budget (1e8): refused before any buffer.
with open(os.path.join(SET_DIR, "fail-pixel-limit.gif"), "wb") as f:
    f.write(encode_gif(10000, 10001, [Frame(0, 0, 1, 1, [0])], random_palette(2)))
rows.append(("fail-pixel-limit.gif", "must_fail (pixel limit)", 10000, 10001, "", "", "", ""))

with open(os.path.join(SET_DIR, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\tframes\tdurations_ms\tloop_count\n")
    for name, expect, w, h, md5, frames_col, durations, loops in rows:
        f.write(f"{name}\tgif\t{expect}\t{w}\t{h}\t{md5}\t{frames_col}\t{durations}\t{loops}\n")
nfail = sum(1 for r in rows if r[1].startswith("must_fail"))
print(f"gen-conformance-gif: {len(rows)} fixtures ({len(rows) - nfail} checked against ImageMagick, "
      f"{nfail} must_fail) in {SET_DIR}")
