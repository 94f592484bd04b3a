#!/usr/bin/env python3
"""examples/gtk/screen_check.py XWD APP_OUTPUT PNG [--expect picture|placeholder]
                               [--hashes FILE --index FILE --held-row R ...] [--claim-shift K]

Reads Xvfb's framebuffer (the XWD file that `Xvfb -fbdir` keeps up to date) and the
scripted app's output ("geometry: ..." and one "cell row=R x= y= w= h=" line per visible
thumbnail, in screen pixels), and decides from the pixels of each cell whether it holds
a picture or the placeholder (flat magenta). The pictures are circular avatars, whose
corners show the list's background: a cell is judged by the square inside its disc. Writes the app window's part of the screen
to PNG (680x720, under 200 KB: small enough for the README as it is).

--held-row R (with --hashes, the "PATH<TAB>BLURHASH" file the app was given, and
--index, its index): row R's image was held back, so its cell must show its own BlurHash:
not the magenta, not flat, and on a coarse grid over the square inside the disc close to
the hash as decoded here (the Qt example's BlurHash decoder, not pixload's) at 32x32, the
size the table hands over, scaled to the cell, and at least twice as far from the hashes
of the rows next to it (R-2 .. R+2) and of every other row on the screen. --claim-shift K
compares the held cells against row R+K's hash instead: a control that must fail.

Prints one line per cell and exits 0 when every cell is what --expect says (default
picture; a held row its hash) and there is at least one cell.
"""
import argparse
import importlib.util
import os
import re
import struct
import sys

from PIL import Image, ImageChops, ImageStat

# The Qt example's checker has a BlurHash decoder of its own (not pixload's) and a row's
# hash decoded as both apps draw it (32x32, scaled bilinearly to the cell): borrowed.
_qt_check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "qt", "screen_check.py")
_spec = importlib.util.spec_from_file_location("qt_screen_check", _qt_check)
_qt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_qt)

BOX = getattr(Image, "Resampling", Image).BOX
GRID = (6, 6)           # the compared square (58 px for a 96 px cell) averaged to 6x6
HASH_LIMIT = 12.0       # mean absolute difference, 0..255, on the grid, to its own hash
MARGIN = 2.0            # every other row's hash at least this many times further away
FLAT_LIMIT = 4.0        # a hash's luma standard deviation must be above this

# The placeholder's colour, with some slack for the renderer's rounding.
def is_magenta(r, g, b):
    return r >= 230 and g <= 40 and b >= 230


def read_xwd(path):
    """The framebuffer as an RGB Pillow image. XWD: a header of 25 CARD32 (big-endian in
    every XWD file Xvfb writes; checked through file_version == 7), the window name, the
    colour map (12 bytes an entry), then the pixels."""
    data = open(path, "rb").read()
    for order in (">", "<"):
        fields = struct.unpack(order + "25I", data[:100])
        if fields[1] == 7:
            break
    else:
        raise SystemExit("%s: not an XWD file (version %d)" % (path, fields[1]))
    (header_size, _version, _format, depth, width, height, _xoffset, byte_order, _unit,
     _bit_order, _pad, bits_per_pixel, bytes_per_line, _visual, red_mask, green_mask,
     blue_mask, _bits_rgb, _cmap_entries, ncolors) = fields[:20]
    if bits_per_pixel not in (24, 32) or depth not in (24, 32):
        raise SystemExit("%s: %d bpp depth %d; run Xvfb with -screen 0 WxHx24" % (path, bits_per_pixel, depth))
    offset = header_size + ncolors * 12
    pixels = data[offset:offset + bytes_per_line * height]
    # byte_order 0: LSBFirst, a pixel 0x00RRGGBB is stored B, G, R(, X). (Xvfb's -fbdir
    # file has 32 bits a pixel; `xwd -root` writes 24.)
    layout = (byte_order, bits_per_pixel, red_mask, blue_mask)
    modes = {(0, 32, 0xFF0000, 0xFF): "BGRX", (1, 32, 0xFF0000, 0xFF): "XRGB",
             (0, 24, 0xFF0000, 0xFF): "BGR", (1, 24, 0xFF0000, 0xFF): "RGB"}
    mode = modes.get(layout)
    if mode is None:
        raise SystemExit("%s: unexpected pixel layout (order %d, masks %x/%x/%x)"
                         % (path, byte_order, red_mask, green_mask, blue_mask))
    return Image.frombuffer("RGB", (width, height), pixels, "raw", mode, bytes_per_line, 1)


def parse_output(path):
    cells, window = [], None
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"cell row=(\d+) x=(-?\d+) y=(-?\d+) w=(\d+) h=(\d+)", line)
        if m:
            cells.append(tuple(int(v) for v in m.groups()))
        m = re.match(r"geometry: \S+, scale \d+, surface origin (-?\d+),(-?\d+) size (\d+)x(\d+)", line)
        if m:
            window = tuple(int(v) for v in m.groups())
    return cells, window


def centre_box(x, y, w, h):
    """The centred square of 60 % of the cell's shorter side, inside the avatar's disc
    (whose inscribed square is 71 %): neither the background at the corners nor the
    anti-aliased rim is in it."""
    side = int(min(w, h) * 0.6)
    left, top = x + (w - side) // 2, y + (h - side) // 2
    return (left, top, left + side, top + side)


def classify(screen, x, y, w, h):
    """(verdict, magenta fraction, luma standard deviation) of one cell's centre square.
    The placeholder fills the whole cell, its centre included."""
    cell = screen.crop(centre_box(x, y, w, h))
    raw = cell.tobytes()  # R, G, B, R, G, B, ...
    count = len(raw) // 3
    magenta = sum(1 for p in zip(raw[0::3], raw[1::3], raw[2::3]) if is_magenta(*p)) / max(1, count)
    spread = ImageStat.Stat(cell.convert("L")).stddev[0]
    if magenta >= 0.5:
        verdict = "placeholder"
    elif magenta <= 0.02 and spread >= 4.0:   # a photograph: no magenta, not a flat fill
        verdict = "picture"
    else:
        verdict = "unclear"
    return verdict, magenta, spread


def judge_hash(screen, hashes, row, claimed, candidates, x, y, w, h):
    """Problems (empty: none) with a held row's cell that must show row `claimed`'s hash,
    and a note on the distances."""
    verdict, magenta, spread = classify(screen, x, y, w, h)
    if w != h:
        return ["clipped (%dx%d): cannot be compared with its hash" % (w, h)], ""
    box = centre_box(x, y, w, h)
    inner = (box[0] - x, box[1] - y, box[2] - x, box[3] - y)
    pixels = screen.crop(box).resize(GRID, BOX)

    def distance(other):
        reference = hashes.get(other, (w, h))
        if reference is None:
            return None
        diff = ImageChops.difference(pixels, reference.crop(inner).resize(GRID, BOX))
        return sum(ImageStat.Stat(diff).mean) / 3

    own = distance(claimed)
    others = {o: d for o in candidates
              if o != claimed and o >= 0 and hashes.of_row(o) != hashes.of_row(claimed)
              for d in [distance(o)] if d is not None}
    nearest = min(others, key=others.get) if others else None
    problems = []
    if magenta > 0.02 or spread < FLAT_LIMIT:
        problems.append("flat (luma stddev %.1f, magenta %.0f%%), not a hash" % (spread, 100 * magenta))
    if own is None or own > HASH_LIMIT or (nearest is not None and others[nearest] < MARGIN * max(own, 1.0)):
        problems.append("not row %d's hash" % claimed)
    note = "%s from row %d's hash, nearest other row %s: %s (luma stddev %.1f)" % (
        "?" if own is None else "%.1f" % own, claimed, nearest,
        "-" if nearest is None else "%.1f" % others[nearest], spread)
    return problems, note


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xwd")
    ap.add_argument("app_output")
    ap.add_argument("png")
    ap.add_argument("--expect", choices=("picture", "placeholder"), default="picture")
    ap.add_argument("--hashes")
    ap.add_argument("--index")
    ap.add_argument("--held-row", type=int, action="append", default=[])
    ap.add_argument("--claim-shift", type=int, default=0)
    args = ap.parse_args()
    if args.held_row and not (args.hashes and args.index):
        ap.error("--held-row needs --hashes and --index")
    hashes = None
    if args.held_row:
        paths = [line.strip() for line in open(args.index) if line.strip()]
        hashes = _qt.Hashes(args.hashes, paths)

    screen = read_xwd(args.xwd)
    cells, window = parse_output(args.app_output)
    if window is None:
        print("no geometry line in %s" % args.app_output)
        return 1
    wx, wy, ww, wh = window
    shot = screen.crop((max(0, wx), max(0, wy), min(screen.width, wx + ww), min(screen.height, wy + wh)))
    shot.save(args.png, optimize=True)

    bad = 0
    on_screen = [c[0] for c in cells]
    for row, x, y, w, h in cells:
        if w < 8 or h < 8:
            print("cell row %d: %dx%d, too little on screen to judge, skipped" % (row, w, h))
            continue
        if row in args.held_row:
            claimed = row + args.claim_shift
            problems, note = judge_hash(screen, hashes, row, claimed,
                                        set(on_screen + [claimed + d for d in (-2, -1, 1, 2)]), x, y, w, h)
            bad += bool(problems)
            print("cell row %d at %d,%d %dx%d: held back, %s%s"
                  % (row, x, y, w, h, note, "".join("  <-- " + p for p in problems)))
            continue
        verdict, magenta, spread = classify(screen, x, y, w, h)
        ok = verdict == args.expect
        bad += not ok
        print("cell row %d at %d,%d %dx%d: %s (magenta %.1f%%, luma stddev %.1f)%s"
              % (row, x, y, w, h, verdict, 100 * magenta, spread, "" if ok else "  <-- expected " + args.expect))
    judged = sum(1 for c in cells if c[3] >= 8 and c[4] >= 8)
    print("%d cells judged, %d not %s" % (judged, bad, args.expect + (", the held row its hash" if args.held_row else "")))
    return 0 if judged > 0 and bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
