#!/usr/bin/env python3
"""examples/gtk/screen_check.py XWD APP_OUTPUT PNG [--expect picture|placeholder]

Reads Xvfb's framebuffer (the XWD file that `Xvfb -fbdir` keeps up to date) and the
scripted app's output ("geometry: ..." and one "cell row=R x= y= w= h=" line per visible
thumbnail, in screen pixels), and decides from the pixels of each cell whether it holds
a picture or the placeholder (flat magenta). The pictures are circular avatars, whose
corners show the list's background: a cell is judged by the square inside its disc. Writes the app window's part of the screen
to PNG (680x720, under 200 KB: small enough for the README as it is).

Prints one line per cell and exits 0 when every cell is what --expect says (default
picture) and there is at least one cell.
"""
import argparse
import re
import struct
import sys

from PIL import Image, ImageStat

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


def classify(screen, x, y, w, h):
    """(verdict, magenta fraction, luma standard deviation) of one cell: of the centred
    square of 60 % of its shorter side, inside the avatar's disc (whose inscribed square
    is 71 %), so that neither the background at the corners nor the anti-aliased rim
    counts. The placeholder fills the whole cell, its centre included."""
    side = int(min(w, h) * 0.6)
    left, top = x + (w - side) // 2, y + (h - side) // 2
    box = (left, top, left + side, top + side)
    cell = screen.crop(box)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xwd")
    ap.add_argument("app_output")
    ap.add_argument("png")
    ap.add_argument("--expect", choices=("picture", "placeholder"), default="picture")
    args = ap.parse_args()

    screen = read_xwd(args.xwd)
    cells, window = parse_output(args.app_output)
    if window is None:
        print("no geometry line in %s" % args.app_output)
        return 1
    wx, wy, ww, wh = window
    shot = screen.crop((max(0, wx), max(0, wy), min(screen.width, wx + ww), min(screen.height, wy + wh)))
    shot.save(args.png, optimize=True)

    bad = 0
    for row, x, y, w, h in cells:
        if w < 8 or h < 8:
            print("cell row %d: %dx%d, too little on screen to judge, skipped" % (row, w, h))
            continue
        verdict, magenta, spread = classify(screen, x, y, w, h)
        ok = verdict == args.expect
        bad += not ok
        print("cell row %d at %d,%d %dx%d: %s (magenta %.1f%%, luma stddev %.1f)%s"
              % (row, x, y, w, h, verdict, 100 * magenta, spread, "" if ok else "  <-- expected " + args.expect))
    judged = sum(1 for c in cells if c[3] >= 8 and c[4] >= 8)
    print("%d cells judged, %d not %s" % (judged, bad, args.expect))
    return 0 if judged > 0 and bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
