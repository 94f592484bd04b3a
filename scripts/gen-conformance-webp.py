#!/usr/bin/env python3
"""scripts/gen-conformance-webp.py OUTDIR

Generates the "generated-webp" conformance set for Tests/codecs/conformance.c:
OUTDIR/generated-webp/*.webp and a manifest.tsv in the corpus's format. Run by
`make test-codecs` into build/; nothing here is committed.

Differential testing, as scripts/gen-conformance.py: every file is made now by libwebp's
own tools and every expected md5 comes from `dwebp -pam` run now on it, with dwebp's
defaults (fancy upsampling on, no dithering, no filtering), which are webp_shim.c's.
dwebp's PAM is always RGBA, alpha 255 where the file has none: the shim's RGBA.

- Stills by cwebp from PNG sources synthesised here (gradients, noise, sharp edges,
  odd sizes 1x1, 3x7, 1023x5, ...; opaque and with alpha): lossy at several qualities
  and methods, -sharp_yuv, -alpha_q, -exact, -lossless, -near_lossless.
- Metadata injected with webpmux (-set icc, -set exif: VP8X files with ICCP/EXIF);
  the EXIF carries an orientation, which the manifest's exif_orientation checks.
- Animations by img2webp (lossless and lossy, loop counts, per-frame durations) and
  gif2webp (from a GIF written by Pillow). dwebp cannot decode an animation, so the
  expected pixels are the first frame as dwebp decodes it (`webpmux -get frame 1`),
  placed on a transparent canvas at its offset: the composited first frame. For the
  lossless ones that is also checked against the PNG the frame came from.
- must_fail rows: truncated files (header, mid-bitstream, an animation cut short), a
  broken VP8 and a broken VP8L signature, a RIFF chunk size past the end; dwebp must
  fail on each too (else the generator stops: the row would be wrong). A 16000x16000
  animation canvas holding a 1x1 frame: "must_fail (pixel limit)".
"""
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("gen-conformance-webp: Pillow is missing (scripts/deps.sh installs it)")

for tool in ("cwebp", "dwebp", "img2webp", "gif2webp", "webpmux"):
    if shutil.which(tool) is None:
        sys.exit(f"gen-conformance-webp: {tool} is missing (scripts/deps.sh installs the webp package)")

if len(sys.argv) != 2:
    sys.exit("usage: gen-conformance-webp.py OUTDIR")
SET_DIR = os.path.join(sys.argv[1], "generated-webp")
if os.path.isdir(SET_DIR):
    shutil.rmtree(SET_DIR)
os.makedirs(SET_DIR)
SRC_DIR = os.path.join(SET_DIR, "src")
os.makedirs(SRC_DIR)

rows = []  # (file, expect, width, height, md5, exif_orientation)


def run(args):
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"gen-conformance-webp: {' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
    return r


def md5(data):
    return hashlib.md5(bytes(data)).hexdigest()


def parse_pam(data):
    end = data.index(b"ENDHDR\n") + len(b"ENDHDR\n")
    head = dict(line.split(b" ", 1) for line in data[:end].split(b"\n")[1:-2])
    w, h, depth = int(head[b"WIDTH"]), int(head[b"HEIGHT"]), int(head[b"DEPTH"])
    if depth != 4 or int(head[b"MAXVAL"]) != 255:
        sys.exit(f"gen-conformance-webp: unexpected PAM from dwebp (depth {depth})")
    pixels = data[end:end + w * h * 4]
    if len(pixels) != w * h * 4:
        sys.exit("gen-conformance-webp: short PAM from dwebp")
    return w, h, pixels


def dwebp_rgba(path):
    """dwebp with its defaults, as PAM (always RGBA)."""
    r = run(["dwebp", "-pam", path, "-o", "-"])
    return parse_pam(r.stdout)


def synth(kind, w, h, alpha, rnd):
    img = Image.new("RGBA", (w, h))
    px = []
    for y in range(h):
        for x in range(w):
            if kind == "gradient":
                c = (x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 255 // max(w + h - 2, 1))
            elif kind == "noise":
                c = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
            else:  # edges: hard colour steps
                c = (255, 0, 0) if (x // 4 + y // 4) % 2 else (0, 0, 255) if x < w // 2 else (240, 240, 16)
            a = 255
            if alpha:
                a = (x * 255 // max(w - 1, 1)) if kind != "noise" else rnd.choice((0, 0, 128, 255, 255))
            px.append(c + (a,))
    img.putdata(px)
    if not alpha:
        img = img.convert("RGB")
    return img


def add_still(name, src, args):
    path = os.path.join(SET_DIR, name)
    run(["cwebp", "-quiet"] + args + [src, "-o", path])
    w, h, px = dwebp_rgba(path)
    rows.append((name, "ok", w, h, md5(px), ""))
    return path


def gen_stills(rnd):
    sources = []
    for kind, w, h, alpha in [("gradient", 64, 48, False), ("noise", 33, 17, False), ("edges", 96, 64, False),
                              ("gradient", 1, 1, False), ("noise", 3, 7, False), ("gradient", 1023, 5, False),
                              ("gradient", 64, 48, True), ("noise", 33, 17, True), ("edges", 1, 1, True),
                              ("noise", 3, 7, True), ("gradient", 1023, 5, True), ("edges", 257, 129, True)]:
        src = os.path.join(SRC_DIR, f"{kind}-{w}x{h}{'-alpha' if alpha else ''}.png")
        synth(kind, w, h, alpha, rnd).save(src)
        sources.append((src, kind, w, h, alpha))
    for src, kind, w, h, alpha in sources:
        stem = f"{kind}-{w}x{h}{'-alpha' if alpha else ''}"
        for q in (10, 50, 90, 100):
            add_still(f"lossy-q{q}-{stem}.webp", src, ["-q", str(q)])
        add_still(f"lossy-m6-sharpyuv-{stem}.webp", src, ["-q", "75", "-m", "6", "-sharp_yuv"])
        add_still(f"lossless-{stem}.webp", src, ["-lossless"])
        add_still(f"near-lossless-{stem}.webp", src, ["-near_lossless", "60"])
        if alpha:
            add_still(f"lossy-alphaq20-{stem}.webp", src, ["-q", "80", "-alpha_q", "20"])
            add_still(f"lossy-exact-{stem}.webp", src, ["-q", "80", "-exact"])
            add_still(f"lossless-exact-{stem}.webp", src, ["-lossless", "-exact"])
            add_still(f"lossy-alpha-filter-best-{stem}.webp", src, ["-q", "60", "-alpha_filter", "best"])
    return sources


def tiff_with_orientation(value, big_endian):
    e = ">" if big_endian else "<"
    head = (b"MM" if big_endian else b"II") + struct.pack(e + "HI", 42, 8)
    ifd = struct.pack(e + "H", 1) + struct.pack(e + "HHI", 0x0112, 3, 1) + struct.pack(e + "H", value) + b"\0\0"
    return head + ifd + struct.pack(e + "I", 0)


def gen_metadata(sources):
    icc = None
    for cand in ("/usr/share/color/icc/colord/sRGB.icc", "/usr/share/color/icc/sRGB.icc",
                 "/usr/share/color/icc/ghostscript/srgb.icc"):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                icc = f.read()
            break
    if icc is None:  # any bytes do: the decoder hands the ICCP payload over, it does not parse it
        icc = b"\0\0\0\x80pixl" + bytes(120)
    icc_path = os.path.join(SRC_DIR, "profile.icc")
    with open(icc_path, "wb") as f:
        f.write(icc)
    picks = [s for s in sources if (s[2], s[3]) in ((64, 48), (3, 7))]
    for i, (src, kind, w, h, alpha) in enumerate(picks):
        stem = f"{kind}-{w}x{h}{'-alpha' if alpha else ''}"
        for mode in ("-q", "-lossless"):
            base = os.path.join(SRC_DIR, f"base{i}{mode}.webp")
            run(["cwebp", "-quiet"] + ([mode, "80"] if mode == "-q" else [mode]) + [src, "-o", base])
            label = "lossy" if mode == "-q" else "lossless"
            orient = 1 + (i * 3 + (mode == "-q")) % 8
            exif_path = os.path.join(SRC_DIR, f"exif{i}{mode}.bin")
            with open(exif_path, "wb") as f:
                f.write(tiff_with_orientation(orient if orient != 1 else 6, big_endian=(i % 2 == 0)))
            orient = orient if orient != 1 else 6
            icc_only = os.path.join(SET_DIR, f"icc-{label}-{stem}.webp")
            run(["webpmux", "-set", "icc", icc_path, base, "-o", icc_only])
            exif_only = os.path.join(SET_DIR, f"exif{orient}-{label}-{stem}.webp")
            run(["webpmux", "-set", "exif", exif_path, base, "-o", exif_only])
            both = os.path.join(SET_DIR, f"icc-exif{orient}-{label}-{stem}.webp")
            run(["webpmux", "-set", "exif", exif_path, icc_only, "-o", both])
            for path, o in ((icc_only, ""), (exif_only, str(orient)), (both, str(orient))):
                w2, h2, px = dwebp_rgba(path)
                rows.append((os.path.basename(path), "ok", w2, h2, md5(px), o))
    # An EXIF payload with JPEG's "Exif\0\0" prefix (some writers keep it).
    src, kind, w, h, alpha = picks[0]
    base = os.path.join(SRC_DIR, "base-prefix.webp")
    run(["cwebp", "-quiet", "-q", "70", src, "-o", base])
    exif_path = os.path.join(SRC_DIR, "exif-prefix.bin")
    with open(exif_path, "wb") as f:
        f.write(b"Exif\0\0" + tiff_with_orientation(8, big_endian=False))
    path = os.path.join(SET_DIR, "exif8-jpeg-prefix.webp")
    run(["webpmux", "-set", "exif", exif_path, base, "-o", path])
    w2, h2, px = dwebp_rgba(path)
    rows.append((os.path.basename(path), "ok", w2, h2, md5(px), "8"))


def webpmux_frames(path):
    """(width, height, x_offset, y_offset) of every frame, from webpmux -info."""
    out = run(["webpmux", "-info", path]).stdout.decode()
    frames = []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+):\s+(\d+)\s+(\d+)\s+(yes|no)\s+(\d+)\s+(\d+)", line)
        if m:
            frames.append((int(m.group(2)), int(m.group(3)), int(m.group(5)), int(m.group(6))))
    cw = re.search(r"Canvas size: (\d+) x (\d+)", out)
    return int(cw.group(1)), int(cw.group(2)), frames


def first_frame_expected(path):
    cw, ch, frames = webpmux_frames(path)
    if not frames:
        sys.exit(f"gen-conformance-webp: webpmux lists no frame in {path}")
    fw, fh, ox, oy = frames[0]
    one = os.path.join(SRC_DIR, "frame1.webp")
    run(["webpmux", "-get", "frame", "1", path, "-o", one])
    w, h, px = dwebp_rgba(one)
    if (w, h) != (fw, fh):
        sys.exit(f"gen-conformance-webp: frame 1 of {path} is {w}x{h}, webpmux says {fw}x{fh}")
    canvas = bytearray(cw * ch * 4)  # transparent, as WebPAnimDecoder starts
    for y in range(h):
        start = ((oy + y) * cw + ox) * 4
        canvas[start:start + w * 4] = px[y * w * 4:(y + 1) * w * 4]
    return cw, ch, bytes(canvas)


def add_animation(name, args, first_png=None):
    path = os.path.join(SET_DIR, name)
    run(args + ["-o", path] if args[0] == "img2webp" else args + [path])
    w, h, px = first_frame_expected(path)
    if first_png is not None:
        src = Image.open(first_png).convert("RGBA")
        # Lossless keeps every visible pixel; under alpha 0 the encoder may change RGB (no -exact).
        def visible(b):
            return b"".join(b[i:i + 4] if b[i + 3] else bytes(4) for i in range(0, len(b), 4))
        if src.size != (w, h) or visible(src.tobytes()) != visible(px):
            sys.exit(f"gen-conformance-webp: first frame of lossless {name} differs from its source PNG")
    rows.append((name, "ok", w, h, md5(px), ""))
    return path


def gen_animations(rnd):
    frames = []
    for i, (kind, alpha) in enumerate([("gradient", False), ("noise", True), ("edges", False), ("noise", False)]):
        p = os.path.join(SRC_DIR, f"anim{i}.png")
        synth(kind, 40, 24, alpha, rnd).save(p)
        frames.append(p)
    add_animation("anim-lossless-loop0.webp",
                  ["img2webp", "-loop", "0", "-lossless", "-d", "80", frames[0], "-d", "120", frames[1],
                   "-d", "40", frames[2]], first_png=frames[0])
    add_animation("anim-lossless-alpha-first-loop3.webp",
                  ["img2webp", "-loop", "3", "-lossless", "-d", "100", frames[1], frames[0], frames[3]],
                  first_png=frames[1])
    add_animation("anim-lossy-q60.webp", ["img2webp", "-lossy", "-q", "60", "-d", "70", frames[0], frames[2], frames[3]])
    add_animation("anim-mixed-kmax1.webp", ["img2webp", "-mixed", "-kmax", "1", frames[3], frames[1], frames[0]])
    # gif2webp: a GIF written by Pillow (palette frames, one with transparency).
    gif = os.path.join(SRC_DIR, "anim.gif")
    imgs = [Image.open(f).convert("RGB").quantize(64) for f in frames]
    imgs[0].save(gif, save_all=True, append_images=imgs[1:], duration=[50, 60, 70, 80], loop=2, disposal=2)
    add_animation("gif2webp-lossless.webp", ["gif2webp", "-quiet", gif, "-o"])
    add_animation("gif2webp-lossy.webp", ["gif2webp", "-quiet", "-lossy", "-q", "50", gif, "-o"])
    return os.path.join(SET_DIR, "anim-lossless-loop0.webp")


def riff_chunks(data):
    """[(fourcc, payload_start, payload_size)] of a RIFF WEBP file."""
    out, pos = [], 12
    while pos + 8 <= len(data):
        tag, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        out.append((tag, pos + 8, size))
        pos += 8 + size + (size & 1)
    return out


def add_must_fail(name, data, expect="must_fail", dwebp_must_fail=True):
    path = os.path.join(SET_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    if dwebp_must_fail:
        r = subprocess.run(["dwebp", "-pam", path, "-o", os.devnull], capture_output=True)
        if r.returncode == 0:
            sys.exit(f"gen-conformance-webp: dwebp decodes {name}, which should be a must_fail row")
    rows.append((name, expect, "", "", "", ""))


def gen_must_fail(anim_path):
    lossy = open(os.path.join(SET_DIR, "lossy-q90-gradient-64x48.webp"), "rb").read()
    lossless = open(os.path.join(SET_DIR, "lossless-noise-33x17.webp"), "rb").read()
    alpha = open(os.path.join(SET_DIR, "lossy-q90-gradient-64x48-alpha.webp"), "rb").read()
    add_must_fail("truncated-header.webp", lossy[:20])
    add_must_fail("truncated-riff-only.webp", lossy[:12])
    add_must_fail("truncated-lossy-half.webp", lossy[:len(lossy) // 2])
    add_must_fail("truncated-lossless-half.webp", lossless[:len(lossless) // 2])
    add_must_fail("truncated-alpha-in-alph.webp", alpha[:40])
    add_must_fail("truncated-last-byte.webp", lossy[:-1])
    # VP8 frame: 3-byte frame tag, then the start code 9d 01 2a.
    (tag, start, size), = [c for c in riff_chunks(lossy) if c[0] == b"VP8 "]
    bad = bytearray(lossy)
    bad[start + 3] ^= 0xFF
    add_must_fail("corrupt-vp8-start-code.webp", bytes(bad))
    (tag, start, size), = [c for c in riff_chunks(lossless) if c[0] == b"VP8L"]
    bad = bytearray(lossless)
    bad[start] = 0x00  # VP8L signature byte 0x2f
    add_must_fail("corrupt-vp8l-signature.webp", bytes(bad))
    # Damage inside the bitstreams, past the headers the demuxer checks: the decoder
    # itself must fail (dwebp: BITSTREAM_ERROR, SUSPENDED).
    bad = bytearray(lossless)
    bad[start + 13:start + 16] = b"\xff\xff\xff"  # the VP8L transform and colour-cache bits
    add_must_fail("corrupt-vp8l-bitstream.webp", bytes(bad))
    (tag, start, size), = [c for c in riff_chunks(lossy) if c[0] == b"VP8 "]
    bad = bytearray(lossy)
    bad[start + 10:start + 14] = b"\xff\xff\xff\x0f"  # first-partition header past the data
    add_must_fail("corrupt-vp8-partition.webp", bytes(bad))
    bad = bytearray(lossy)
    bad[4:8] = struct.pack("<I", len(lossy) * 4)  # RIFF size past the end of the file
    add_must_fail("corrupt-riff-size.webp", bytes(bad))
    bad = bytearray(lossy)
    bad[8:12] = b"WEBQ"
    add_must_fail("corrupt-webp-fourcc.webp", bytes(bad))
    anim = open(anim_path, "rb").read()
    add_must_fail("truncated-animation.webp", anim[:len(anim) * 2 // 3], dwebp_must_fail=False)
    # A 16000x16000 animation canvas with a single 1x1 frame: a few bytes that declare
    # 256 M pixels. dwebp does not decode animations, so it is no reference here.
    one = open(os.path.join(SET_DIR, "lossless-gradient-1x1.webp"), "rb").read()
    (tag, start, size), = [c for c in riff_chunks(one) if c[0] == b"VP8L"]
    vp8l = b"VP8L" + struct.pack("<I", size) + one[start:start + size] + (b"\0" if size & 1 else b"")
    w = h = 16000
    vp8x = b"VP8X" + struct.pack("<I", 10) + bytes([0x02, 0, 0, 0]) + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    animc = b"ANIM" + struct.pack("<I", 6) + bytes(4) + struct.pack("<H", 0)
    anmf_payload = bytes(6) + (0).to_bytes(3, "little") + (0).to_bytes(3, "little") + (100).to_bytes(3, "little") + b"\0" + vp8l
    anmf = b"ANMF" + struct.pack("<I", len(anmf_payload)) + anmf_payload
    body = b"WEBP" + vp8x + animc + anmf
    add_must_fail("canvas-16000x16000-1x1-frame.webp", b"RIFF" + struct.pack("<I", len(body)) + body,
                  expect="must_fail (pixel limit)", dwebp_must_fail=False)


def gen_api_cases(rnd):
    """OUTDIR/webp-api/: animations whose every frame is known (lossless, from PNGs made
    here) for Tests/codecs/webp_api.c, which checks pxl_webp_decode_frames (frame count,
    durations, loop count, each composited frame), pxl_webp_color and the orientation.
    cases.tsv: file, loop count, then each frame's duration; FILE.N.rgba: frame N (from 0)
    as RGBA with the RGB of fully transparent pixels zeroed (lossless keeps every visible
    pixel, not those). A single frame becomes a still image (img2webp writes no ANIM), which
    the API reports as one frame of duration 0 that loops 0 times."""
    api = os.path.join(sys.argv[1], "webp-api")
    if os.path.isdir(api):
        shutil.rmtree(api)
    os.makedirs(api)

    def visible(img):
        b = img.convert("RGBA").tobytes()
        return b"".join(b[i:i + 4] if b[i + 3] else bytes(4) for i in range(0, len(b), 4))

    lines = []
    for name, loop, specs in [
        ("opaque-4-frames.webp", 0, [("gradient", False, 100), ("edges", False, 250), ("noise", False, 30),
                                     ("gradient", False, 1)]),
        ("alpha-3-frames-loop7.webp", 7, [("noise", True, 40), ("gradient", True, 60), ("edges", False, 80)]),
        ("one-frame-anim.webp", 1, [("edges", True, 500)]),
    ]:
        args = ["img2webp", "-loop", str(loop), "-lossless"]
        expected = []
        for i, (kind, alpha, dur) in enumerate(specs):
            img = synth(kind, 37, 21, alpha, rnd)
            if kind == "gradient" and i > 0:  # a frame that differs from the last in a small area only
                img = img.copy()
                img.paste((9, 200, 30, 255) if alpha else (9, 200, 30), (5, 5, 12, 9))
            png = os.path.join(SRC_DIR, f"api-{name}-{i}.png")
            img.save(png)
            args += ["-d", str(dur), png]
            expected.append(str(dur if len(specs) > 1 else 0))
            with open(os.path.join(api, f"{name}.{i}.rgba"), "wb") as f:
                f.write(visible(img))
        path = os.path.join(api, name)
        run(args + ["-o", path])
        lines.append("\t".join([name, str(loop if len(specs) > 1 else 0)] + expected))
    # A VP8X still with ICCP and EXIF (orientation 6) for pxl_webp_color and read_info.
    shutil.copy(os.path.join(SET_DIR, "icc-exif6-lossless-gradient-64x48.webp"), os.path.join(api, "icc-exif6.webp"))
    shutil.copy(os.path.join(SRC_DIR, "profile.icc"), os.path.join(api, "profile.icc"))
    with open(os.path.join(api, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


rnd = random.Random(19)
sources = gen_stills(rnd)
gen_metadata(sources)
anim = gen_animations(rnd)
gen_must_fail(anim)
gen_api_cases(rnd)
shutil.rmtree(SRC_DIR)
with open(os.path.join(SET_DIR, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\texif_orientation\n")
    for name, expect, w, h, m, orient in rows:
        f.write(f"{name}\twebp\t{expect}\t{w}\t{h}\t{m}\t{orient}\n")
nfail = sum(1 for r in rows if r[1] != "ok")
print(f"gen-conformance-webp: {len(rows)} fixtures ({len(rows) - nfail} decoded by dwebp, {nfail} must_fail) in {SET_DIR}")
