#!/usr/bin/env python3
"""scripts/gen-conformance-avif.py OUTDIR

Generates the "generated-avif" conformance set for Tests/codecs/conformance.c:
OUTDIR/generated-avif/*.avif and a manifest.tsv in the corpus's format (the columns the
runner reads, plus a note), and avif-extra.tsv for Tests/codecs/avif_test.c (frames,
durations, per-frame md5s, colour). Run by `make test-codecs` into build/; nothing here
is committed.

Differential testing, as scripts/gen-conformance.py: sources synthesised here as PNGs
(Pillow), encoded now by Debian's avifenc (libavif 0.11.1, aom encoder, -s 10 unless
said) across 8/10/12-bit (-d), 4:4:4/4:2:2/4:2:0/4:0:0 (-y), lossless (-l), alpha
(also premultiplied, -p), limited range (-r l), odd sizes, images taller than the
shim's conversion strips, grids (-g), --irot/--imir, --cicp, --icc, and image
sequences made from several PNGs with per-frame --duration.

Expected pixels: avifdec from the same libavif with its defaults and `-d 8`, so libavif
itself reduces 10/12-bit to 8 bits with its default chroma upsampling (AUTOMATIC), then
its PNG read back with Pillow and turned into straight RGBA8 (gray replicated, alpha 255
where the PNG has none; no colour management: avifdec's iCCP is ignored). First frame
(avifdec --index 0); the other frames of a sequence with --index N (avif-extra.tsv).

irot/imir: avifdec 0.11 writes the pixels as stored (its PNG writer does not apply the
transforms), and the runner compares stored pixels with the orientation reported
separately (exif_orientation column, from our own table of irot/imir -> EXIF, checked
here against libavif's EXIF -> irot/imir mapping by encoding EXIF orientations). This
script checks that assumption on every such file: avifdec's output must equal the output
for the same source encoded without the transform, else it stops.

Two more checks stop the script when the reference is in doubt: a lossless file must
decode to its source exactly, and every must_fail file (truncated, corrupt) must also be
rejected by avifdec.
"""
import hashlib
import os
import random
import shutil
import subprocess
import sys

try:
    from PIL import Image, ImageCms
except ImportError:
    sys.exit("gen-conformance-avif: Pillow is missing (scripts/deps.sh installs it)")

for tool in ("avifenc", "avifdec"):
    if shutil.which(tool) is None:
        sys.exit(f"gen-conformance-avif: {tool} is missing (scripts/deps.sh installs libavif-bin)")

if len(sys.argv) != 2:
    sys.exit("usage: gen-conformance-avif.py OUTDIR")
SET_DIR = os.path.join(sys.argv[1], "generated-avif")
if os.path.isdir(SET_DIR):
    shutil.rmtree(SET_DIR)
os.makedirs(SET_DIR)
SRC_DIR = os.path.join(SET_DIR, "src")
os.makedirs(SRC_DIR)

rows = []   # (file, expect, width, height, md5, orientation, note)
extra = []  # (file, frames, durations_ms, frame_md5s, icc_md5, cicp)


def run(args):
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"gen-conformance-avif: {' '.join(args)} failed:\n{r.stdout.decode(errors='replace')}"
                 f"{r.stderr.decode(errors='replace')}")
    return r


def md5(data):
    return hashlib.md5(data).hexdigest()


def avifdec_rgba(path, index=0):
    """avifdec -d 8 --index N, read back as straight RGBA8: (width, height, bytes)."""
    out = os.path.join(SRC_DIR, "dec.png")
    run(["avifdec", "-d", "8", "--index", str(index), path, out])
    im = Image.open(out)
    im.load()
    if im.mode not in ("L", "RGB", "RGBA"):
        sys.exit(f"gen-conformance-avif: avifdec wrote a {im.mode} PNG for {path}")
    return im.size[0], im.size[1], im.convert("RGBA").tobytes()


def synth(kind, w, h, alpha, seed):
    rnd = random.Random(seed)
    px = []
    for y in range(h):
        for x in range(w):
            if kind == "gradient":
                c = (x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(w + h - 2, 1))
            elif kind == "noise":
                c = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
            else:  # saturated stripes and a diagonal: the worst case for chroma subsampling
                c = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)][(x // 3 + y // 3) % 4]
                if x == y:
                    c = (0, 0, 0)
            a = 255
            if alpha:  # opaque, transparent, and a ramp in between
                a = 255 if x < w // 3 else 0 if x < w // 2 else (x * 37 + y * 11) % 256
            px.append(c + (a,))
    im = Image.new("RGBA", (w, h))
    im.putdata(px)
    return im if alpha else im.convert("RGB")


def source(kind, w, h, alpha=False, seed=19):
    path = os.path.join(SRC_DIR, f"{kind}-{w}x{h}{'-alpha' if alpha else ''}-{seed}.png")
    if not os.path.exists(path):
        synth(kind, w, h, alpha, seed).save(path)
    return path


def encode(name, sources, args, speed="10"):
    path = os.path.join(SET_DIR, name)
    run(["avifenc", "-s", speed] + args + sources + [path])
    return path


def add(name, sources, args, orientation=1, note="", speed="10"):
    path = encode(name, sources, args, speed)
    w, h, rgba = avifdec_rgba(path)
    rows.append((name, "ok", w, h, md5(rgba), orientation, note))
    return path, rgba


# --- stills: depth x subsampling over three kinds of source, odd sizes ---------------
for kind, w, h in (("gradient", 67, 45), ("noise", 17, 13), ("edges", 33, 301), ("noise", 1, 1), ("gradient", 255, 3)):
    src = source(kind, w, h)
    for depth in (8, 10, 12):
        for yuv in ("444", "422", "420", "400"):
            add(f"{kind}-{w}x{h}-{depth}bit-{yuv}.avif", [src], ["-d", str(depth), "-y", yuv],
                note=f"-d {depth} -y {yuv}")

# A wide and tall photo-like image at the encoder's default speed (several AV1 tiles'
# worth of blocks, conversion strips with margins in the rows path).
add("gradient-640x400-8bit-420-s6.avif", [source("gradient", 640, 400)], ["-d", "8", "-y", "420"],
    note="-y 420 -s 6", speed="6")

# Limited range (avifenc's default is full): libavif expands it while converting; an
# 8-bit 4:0:0 one is avifdec's gray shortcut (Y as stored), which the shim follows.
for depth, yuv in ((8, "420"), (10, "444"), (8, "400"), (10, "400")):
    add(f"gradient-67x45-{depth}bit-{yuv}-limited.avif", [source("gradient", 67, 45)],
        ["-d", str(depth), "-y", yuv, "-r", "l"], note=f"-d {depth} -y {yuv} -r l")

# Lossless: must decode to the source exactly (checked: else the reference is in doubt).
for kind, w, h in (("noise", 31, 7), ("edges", 40, 33)):
    for depth in (8, 10):
        src = source(kind, w, h)
        path, rgba = add(f"{kind}-{w}x{h}-{depth}bit-lossless.avif", [src], ["-l", "-d", str(depth)],
                         note=f"-l -d {depth}")
        if depth == 8 and rgba != Image.open(src).convert("RGBA").tobytes():
            sys.exit(f"gen-conformance-avif: lossless {path} does not decode to its source")

# Alpha (straight, and premultiplied in the file: libavif unpremultiplies).
for kind, w, h in (("gradient", 67, 45), ("noise", 9, 130), ("edges", 3, 5)):
    src = source(kind, w, h, alpha=True)
    for depth, yuv in ((8, "444"), (8, "420"), (10, "420"), (12, "422")):
        add(f"{kind}-{w}x{h}-alpha-{depth}bit-{yuv}.avif", [src], ["-d", str(depth), "-y", yuv],
            note=f"alpha -d {depth} -y {yuv}")
    add(f"{kind}-{w}x{h}-alpha-premultiplied.avif", [src], ["-p"], note="alpha -p")
add("noise-31x7-alpha-lossless.avif", [source("noise", 31, 7, alpha=True)], ["-l"], note="alpha -l")

# Grid: one image made of 2x2 AV1 items (libavif's own stitching).
add("gradient-128x128-grid-2x2.avif", [source("gradient", 128, 128)], ["-g", "2x2", "-y", "444"], note="-g 2x2")

# irot / imir: orientation reported, pixels as stored. Checked: avifdec's pixels equal
# those of the same source encoded without the transform.
IROT_IMIR_TO_EXIF = {(0, None): 1, (0, 0): 4, (0, 1): 2, (1, None): 8, (1, 0): 5, (1, 1): 7,
                     (2, None): 3, (2, 0): 2, (2, 1): 4, (3, None): 6, (3, 0): 7, (3, 1): 5}
orient_src = source("gradient", 29, 17)
plain = avifdec_rgba(encode("orientation-plain.avif", [orient_src], ["-y", "444"]))
os.remove(os.path.join(SET_DIR, "orientation-plain.avif"))
for (angle, mode), exif in sorted(IROT_IMIR_TO_EXIF.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1])):
    args = ["-y", "444", "--irot", str(angle)]
    label = f"irot{angle}"
    if mode is not None:
        args += ["--imir", str(mode)]
        label += f"-imir{mode}"
    path, rgba = add(f"orientation-{label}.avif", [orient_src], args, orientation=exif, note=" ".join(args[2:]))
    if avifdec_rgba(path) != plain:
        sys.exit(f"gen-conformance-avif: avifdec applied {label} (or changed the pixels): the runner compares "
                 "stored pixels, so this set's expectations would be wrong")

# libavif's own EXIF -> irot/imir mapping (avifenc converts an input's EXIF orientation)
# must agree with the table above: encode a JPEG carrying each EXIF orientation.
for exif in range(1, 9):
    jpg = os.path.join(SRC_DIR, f"exif-{exif}.jpg")
    ex = Image.Exif()
    ex[0x0112] = exif
    Image.open(orient_src).save(jpg, quality=95, exif=ex.tobytes())
    add(f"orientation-from-exif-{exif}.avif", [jpg], ["-y", "444", "--ignore-xmp"], orientation=exif,
        note=f"avifenc from a JPEG with EXIF orientation {exif}")

# Colour: nclx values and an ICC profile, for pxl_avif_color (avif-extra.tsv).
icc_path = os.path.join(SRC_DIR, "srgb.icc")
with open(icc_path, "wb") as f:
    f.write(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
with open(icc_path, "rb") as f:
    icc_md5 = md5(f.read())
color_src = source("gradient", 24, 16)
for name, args, icc, cicp in (
        ("color-nclx-1-13-6.avif", ["--cicp", "1/13/6"], "-", "1/13/6"),
        ("color-nclx-12-13-6.avif", ["--cicp", "12/13/6"], "-", "12/13/6"),  # Display P3
        ("color-nclx-9-16-9.avif", ["-d", "10", "--cicp", "9/16/9"], "-", "9/16/9"),  # BT.2100 PQ
        ("color-icc.avif", ["--icc", icc_path], icc_md5, "2/2/6")):
    add(name, [color_src], args, note=" ".join(a if a != icc_path else "srgb.icc" for a in args))
    extra.append((name, 1, "0", "", icc, cicp))

# Image sequences from several PNGs: per-frame durations (timescale 1000 = ms), lossless
# and lossy, with and without alpha; expected per-frame pixels from avifdec --index N.
def sequence(name, sources, durations, args):
    cmd = ["--timescale", "1000"] + args
    interleaved = []
    for src, d in zip(sources, durations):
        interleaved += ["--duration", str(d), src]
    path = os.path.join(SET_DIR, name)
    run(["avifenc", "-s", "10"] + cmd + interleaved + [path])
    md5s = []
    for i in range(len(sources)):
        w, h, rgba = avifdec_rgba(path, i)
        md5s.append(md5(rgba))
        if i == 0:
            rows.append((name, "ok", w, h, md5(rgba), 1, f"sequence of {len(sources)}: " + " ".join(args)))
        if "-l" in args and rgba != Image.open(sources[i]).convert("RGBA").tobytes():
            sys.exit(f"gen-conformance-avif: lossless sequence {path} frame {i} is not its source")
    extra.append((name, len(sources), ",".join(str(d) for d in durations), ",".join(md5s), "", ""))


frames = [source(k, 37, 21, seed=s) for k, s in (("gradient", 1), ("noise", 2), ("edges", 3), ("noise", 4))]
sequence("sequence-4-lossless.avif", frames, [100, 40, 250, 1000], ["-l"])
sequence("sequence-4-420.avif", frames, [33, 33, 34, 500], ["-y", "420", "-d", "10"])
alpha_frames = [source(k, 20, 30, alpha=True, seed=s) for k, s in (("gradient", 5), ("noise", 6), ("edges", 7))]
sequence("sequence-3-alpha.avif", alpha_frames, [70, 1, 120], ["-y", "444"])
sequence("sequence-2-keyframes.avif", frames[:2], [10, 20], ["-k", "1"])
extra.append(("gradient-67x45-8bit-420.avif", 1, "0", "", "", ""))  # a still: one frame, duration 0

# --- must_fail: truncated and corrupt, rejected by avifdec as well ---------------------
def must_fail(name, data, note, expect="must_fail"):
    path = os.path.join(SET_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    r = subprocess.run(["avifdec", "-d", "8", path, os.path.join(SRC_DIR, "fail.png")], capture_output=True)
    if r.returncode == 0:
        sys.exit(f"gen-conformance-avif: avifdec decodes {name}, which should fail ({note})")
    rows.append((name, expect, "", "", "", "", note))


with open(os.path.join(SET_DIR, "gradient-67x45-8bit-420.avif"), "rb") as f:
    good = f.read()
with open(os.path.join(SET_DIR, "sequence-4-420.avif"), "rb") as f:
    seq = f.read()
with open(os.path.join(SET_DIR, "gradient-67x45-alpha-8bit-420.avif"), "rb") as f:
    with_alpha = f.read()
mdat = good.index(b"mdat")
must_fail("truncated-in-ftyp.avif", good[:20], "cut after 20 bytes")
must_fail("truncated-in-meta.avif", good[:mdat // 2], "cut inside the meta box")
must_fail("truncated-in-mdat.avif", good[:mdat + (len(good) - mdat) // 2], "cut halfway through the AV1 data")
must_fail("truncated-sequence.avif", seq[:len(seq) * 2 // 3], "image sequence cut at two thirds")
must_fail("truncated-alpha.avif", with_alpha[:len(with_alpha) - 8], "the alpha item's last 8 bytes missing")
ispe = good.index(b"ispe")
must_fail("corrupt-ispe-zero.avif", good[:ispe + 8] + bytes(8) + good[ispe + 16:], "ispe says 0x0")
must_fail("corrupt-av1-data.avif", good[:mdat + 4] + bytes([0xFF]) * (len(good) - mdat - 4), "AV1 data overwritten with 0xFF")
# Declared sizes over libavif's limits (16384 x 16384 pixels, 32768 per side): refused
# while parsing, reported as a pixel limit (the runner wants TOO_MANY_PIXELS).
for w, h in ((20000, 20000), (40000, 10)):
    declared = w.to_bytes(4, "big") + h.to_bytes(4, "big")
    must_fail(f"declares-{w}x{h}.avif", good[:ispe + 8] + declared + good[ispe + 16:],
              f"ispe says {w}x{h}", expect="must_fail (pixel limit)")
ftyp_size = int.from_bytes(good[:4], "big")
must_fail("corrupt-after-ftyp.avif", good[:ftyp_size] + bytes(random.Random(7).randrange(256) for _ in range(300)),
          "a valid ftyp, then 300 random bytes")

shutil.rmtree(SRC_DIR)
with open(os.path.join(SET_DIR, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\texif_orientation\tnote\n")
    for name, expect, w, h, digest, orientation, note in rows:
        f.write(f"{name}\tavif\t{expect}\t{w}\t{h}\t{digest}\t{orientation}\t{note}\n")
with open(os.path.join(SET_DIR, "avif-extra.tsv"), "w") as f:
    f.write("file\tframes\tdurations_ms\tframe_md5s\ticc_md5\tcicp\n")
    for name, n, durations, md5s, icc, cicp in extra:
        f.write(f"{name}\t{n}\t{durations}\t{md5s}\t{icc}\t{cicp}\n")
ok = sum(1 for r in rows if r[1] == "ok")
print(f"gen-conformance-avif: {len(rows)} fixtures ({ok} decoded by avifdec -d 8, {len(rows) - ok} must_fail) "
      f"and {len(extra)} frame/colour rows in {SET_DIR}")
