#!/usr/bin/env python3
"""examples/gtk/screen_check.py XWD APP_OUTPUT PNG [--expect picture|placeholder]
                               [--hashes FILE --index FILE --held-row R ...] [--claim-shift K]
                               [--second XWD2 --index FILE --data DIR]

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

--second XWD2 (with --index and --data, the directory the index's paths are in): a
second screenshot of the same settled screen, taken a few frames later. A row whose
source (index entry row % count) is an animation (Pillow: more than one frame) must show,
in both screenshots, one of that animation's frames as the row draws it (Pillow's frame,
scaled to cover the cell, cut to the disc, over the list's background: on a 12x12 grid
within FRAME_LIMIT of it and at least MARGIN times nearer than to any other frame), and
a different frame in each (the two cells differ); every other row's cell is a picture
(as --expect) and the same in both, pixel for pixel within STILL_TOLERANCE.

Prints one line per cell and exits 0 when every cell is what --expect says (default
picture; a held row its hash) and there is at least one cell.
"""
import argparse
import importlib.util
import os
import re
import struct
import sys

from PIL import Image, ImageChops, ImageDraw, ImageStat

# The Qt example's checker has a BlurHash decoder of its own (not pixload's) and a row's
# hash decoded as both apps draw it (32x32, scaled bilinearly to the cell): borrowed.
_qt_check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "qt", "screen_check.py")
_spec = importlib.util.spec_from_file_location("qt_screen_check", _qt_check)
_qt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_qt)

BOX = getattr(Image, "Resampling", Image).BOX
LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
GRID = (6, 6)           # the compared square (58 px for a 96 px cell) averaged to 6x6
HASH_LIMIT = 12.0       # mean absolute difference, 0..255, on the grid, to its own hash
MARGIN = 2.0            # every other row's hash at least this many times further away
FLAT_LIMIT = 4.0        # a hash's luma standard deviation must be above this
FRAME_GRID = (12, 12)   # an animated cell and its frames averaged to 12x12
FRAME_LIMIT = 3.0       # mean absolute difference, 0..255, to the frame it shows (~0.2
                        # measured; another frame of the demo's GIFs is 6.5 or more away)
STILL_TOLERANCE = 2     # most a still cell's channel may change between the screenshots

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
        references = hashes.get(other, (w, h))  # the Qt check's: a list, one image for a hash
        if references is None:
            return None
        diff = ImageChops.difference(pixels, references[0].crop(inner).resize(GRID, BOX))
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


def animation_frames(path, w, h, background):
    """Each frame of the animation at path as a w x h cell shows it: scaled to cover the
    cell (FILL), centred, cut to the cell's disc (anti-aliased), over background. None
    for a file Pillow reads as one frame."""
    image = Image.open(path)
    if getattr(image, "n_frames", 1) < 2:
        return None
    mask = Image.new("L", (w * 4, h * 4), 0)
    ImageDraw.Draw(mask).ellipse((0, 0, w * 4 - 1, h * 4 - 1), fill=255)
    mask = mask.resize((w, h), BOX)
    frames = []
    for index in range(image.n_frames):
        image.seek(index)
        frame = image.convert("RGBA")
        scale = max(w / frame.width, h / frame.height)
        sw, sh = round(frame.width * scale), round(frame.height * scale)
        left, top = (sw - w) // 2, (sh - h) // 2
        frame = frame.resize((sw, sh), LANCZOS).crop((left, top, left + w, top + h))
        cell = Image.new("RGB", (w, h), background)
        cell.paste(frame.convert("RGB"), (0, 0), ImageChops.multiply(frame.getchannel("A"), mask))
        frames.append(cell.resize(FRAME_GRID, BOX))
    return frames


def grid_distance(a, b):
    return sum(ImageStat.Stat(ImageChops.difference(a, b)).mean) / 3


def judge_frame(screen, frames, x, y, w, h):
    """(index of the frame the cell shows or None, note) for an animated row's cell."""
    cell = screen.crop((x, y, x + w, y + h)).resize(FRAME_GRID, BOX)
    distances = [grid_distance(cell, frame) for frame in frames]
    best = min(range(len(frames)), key=distances.__getitem__)
    runner_up = min((d for i, d in enumerate(distances) if i != best), default=None)
    ok = distances[best] <= FRAME_LIMIT and (runner_up is None or runner_up >= MARGIN * max(distances[best], 1.0))
    return (best if ok else None), "frame %d at %.1f (next nearest %.1f)" % (best, distances[best], runner_up or 0)


def check_two_shots(screen, second, cells, paths, data, expect):
    """Problems per cell (printed) and the count of bad cells, --second's check."""
    bad = 0
    for row, x, y, w, h in cells:
        if w < 8 or h < 8:
            continue
        source = os.path.join(data, paths[row % len(paths)].split("?")[0])
        one, two = screen.crop((x, y, x + w, y + h)), second.crop((x, y, x + w, y + h))
        changed = ImageChops.difference(one, two)
        frames = animation_frames(source, w, h, screen.getpixel((x, y))) if os.path.exists(source) else None
        if frames is None:
            verdict = classify(screen, x, y, w, h)[0]
            most = max(high for _, high in changed.getextrema())
            problems = [p for p, bad_ in (("not a picture", verdict != expect),
                                          ("changed between the screenshots (by up to %d)" % most,
                                           most > STILL_TOLERANCE)) if bad_]
            print("cell row %d: still, %s, changed by up to %d between the screenshots%s"
                  % (row, verdict, most, "".join("  <-- " + p for p in problems)))
        elif w != h:
            print("cell row %d: animated, clipped (%dx%d): cannot be compared with its frames" % (row, w, h))
            problems = ["clipped"]
        else:
            first, note_one = judge_frame(screen, frames, x, y, w, h)
            later, note_two = judge_frame(second, frames, x, y, w, h)
            moved = sum(1 for v in changed.convert("L").tobytes() if v > STILL_TOLERANCE) / (w * h)
            problems = [p for p, bad_ in (("first screenshot: none of %s's frames" % os.path.basename(source), first is None),
                                          ("second screenshot: none of its frames", later is None),
                                          ("the same frame in both", first is not None and first == later),
                                          ("the cell did not change", moved < 0.01)) if bad_]
            print("cell row %d: animated (%s, %d frames): %s, then %s; %.0f%% of its pixels changed%s"
                  % (row, os.path.basename(source), len(frames), note_one, note_two, 100 * moved,
                     "".join("  <-- " + p for p in problems)))
        bad += bool(problems)
    return bad


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
    ap.add_argument("--second")
    ap.add_argument("--data")
    args = ap.parse_args()
    if args.held_row and not (args.hashes and args.index):
        ap.error("--held-row needs --hashes and --index")
    if args.second and not (args.index and args.data):
        ap.error("--second needs --index and --data")
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

    if args.second:
        paths = [line.strip() for line in open(args.index) if line.strip()]
        bad = check_two_shots(screen, read_xwd(args.second), cells, paths, args.data, args.expect)
        judged = sum(1 for c in cells if c[3] >= 8 and c[4] >= 8)
        print("%d cells judged in two screenshots, %d not as they should be" % (judged, bad))
        return 0 if judged > 0 and bad == 0 else 1

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
