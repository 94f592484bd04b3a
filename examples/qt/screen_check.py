#!/usr/bin/env python3
"""examples/qt/screen_check.py PNG APP_OUTPUT DATA_DIR [--expect own|placeholder]
                              [--hashes FILE --held-row R ...] [--claim-shift K]
                              [--index FILE] [--later PNG]

Checks the Qt gallery's screenshot cell by cell. APP_OUTPUT is the scripted app's output:
one "cell row=R x= y= w= h= image=WxH|placeholder|none url=..." line per visible row
(where its picture is in PNG, unclipped) and a "geometry: ... viewport X,Y WxH" line (the
part of the window the list shows). DATA_DIR holds the photographs the server sends
(DATA_DIR/img/..., the URL's path).

The gallery's thumbnails are round: the photo FILLed to the square cell, cut to its disc
by pixload (transparent outside). A cell is judged in two parts: inside the disc (inset
by EDGE pixels: the anti-aliased rim is left out) against a reference, and its corners
outside the disc (by EDGE), which must be the slot's colour: nothing drawn there.

--expect own (default): every cell must show the image of its own row, not another's.
The reference is the row's file decoded by Pillow, scaled to cover the cell and cropped
to its centre (FILL), laid on the slot's colour (a transparent PNG's corners show it);
the cell's pixels and the reference are compared on a coarse grid (resampling filters
differ in detail, not in a 12x12 average), over the grid squares inside the disc. A cell
passes when it is close to its own row's image (mean difference under OWN_LIMIT of 255)
and at least twice as far from every other candidate: the images of the other rows on
the screen and of the rows next to it (R-2 .. R+2).
--held-row R (with --hashes, the "PATH<TAB>BLURHASH" file the gallery was given): row R's
image was held back, so its cell must show its own BlurHash instead: decoded here (a
BlurHash decoder of its own, not pixload's) at 32x32, the size the table hands over,
scaled to the cell; compared as above against the hashes of the same candidates, and it
must not be flat (the slot's colour or the magenta of a row without a hash), and must be
closer to the hash than to the row's photograph (the image itself did not arrive).
--claim-shift K checks against row R+K's image (or hash) instead: a control that must
fail on every cell, or the comparison could not tell rows apart.

--expect placeholder: every cell must be the flat magenta placeholder.

Animated rows (a GIF or WebP of more than one frame): the cell must show some frame of its
own animation (each frame composited by Pillow, judged as above; the nearest frame is
printed next to the one the app says it drew), and other rows whose picture is that very
frame (the demo's photos.gif is made of the first photos) are not held against it.
--later PNG: the same screen some frames later (the gallery's --later-ms): every
animated row's cell must have changed, every still row's cell be identical, pixel for
pixel. Comparing a screenshot with itself is the control: every animated cell fails.
The frame found must be the one the app says it drew ("frame=I" on its cell line, or
with --later-frames its "later row=R frame=I" line, for the later screenshot).
--index FILE: the rows' paths (default DATA_DIR/index.txt).

Prints one line per cell and "N cells judged, M wrong"; exits 0 when every cell is what
--expect says and at least one cell was judged.
"""
import argparse
import math
import os
import re
import sys
from urllib.parse import urlsplit

from PIL import Image, ImageChops, ImageOps, ImageStat

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
BOX = getattr(Image, "Resampling", Image).BOX
SLOT_COLOR = (32, 32, 32)   # gallery.py's SLOT_COLOR
GRID = (12, 12)
OWN_LIMIT = 12.0            # mean absolute difference, 0..255, on the grid
MARGIN = 2.0                # every other candidate at least this many times further away
EDGE = 2.0                  # pixels either side of the disc's rim left out
CORNER_LIMIT = 6            # a corner pixel may differ from the slot's colour by this much
FLAT_LIMIT = 4.0            # a placeholder's standard deviation inside the disc must be above
PLACEHOLDER_SIDE = 32       # the table's decoded placeholder, each way (pixload.h)


def is_magenta(r, g, b):
    return r >= 230 and g <= 40 and b >= 230


def parse_output(path, later_frames=False):
    cells, viewport, later = [], None, {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"later row=(\d+) frame=(\S+)", line)
        if m:
            later[int(m.group(1))] = m.group(2)
        m = re.match(r"cell row=(\d+) x=(-?\d+) y=(-?\d+) w=(\d+) h=(\d+) image=(\S+) url=(\S+)", line)
        if m:
            row, x, y, w, h = (int(v) for v in m.groups()[:5])
            frame = re.search(r" frame=(\S+)", line)
            cells.append({"row": row, "box": (x, y, x + w, y + h), "image": m.group(6), "url": m.group(7),
                          "frame": frame.group(1) if frame else "-"})
        m = re.match(r"geometry: .* viewport (-?\d+),(-?\d+) (\d+)x(\d+)", line)
        if m:
            x, y, w, h = (int(v) for v in m.groups())
            viewport = (x, y, x + w, y + h)
    if later_frames:  # the frames the app drew in its later screenshot
        for cell in cells:
            cell["frame"] = later.get(cell["row"], "-")
    return cells, viewport


B83 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~"


def _b83(text):
    value = 0
    for c in text:
        value = value * 83 + B83.index(c)
    return value


def _to_linear(v):
    v /= 255.0
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _to_srgb(v):
    v = min(1.0, max(0.0, v))
    return int(v * 12.92 * 255 + 0.5) if v <= 0.0031308 else int((1.055 * v ** (1 / 2.4) - 0.055) * 255 + 0.5)


def decode_blurhash(text, width, height):
    """The BlurHash algorithm (github.com/woltapp/blurhash), as an RGB Pillow image."""
    size = _b83(text[0])
    nx, ny = size % 9 + 1, size // 9 + 1
    if len(text) != 4 + 2 * nx * ny:
        raise ValueError("BlurHash %r: wrong length" % text)
    maximum = (_b83(text[1]) + 1) / 166
    dc = _b83(text[2:6])
    colors = [tuple(_to_linear(c) for c in (dc >> 16, (dc >> 8) & 255, dc & 255))]
    for i in range(1, nx * ny):
        v = _b83(text[4 + 2 * i:6 + 2 * i])
        colors.append(tuple(math.copysign(((q - 9) / 9) ** 2, q - 9) * maximum
                            for q in (v // 361, (v // 19) % 19, v % 19)))
    out = Image.new("RGB", (width, height))
    cos_x = [[math.cos(math.pi * x * i / width) for i in range(nx)] for x in range(width)]
    cos_y = [[math.cos(math.pi * y * j / height) for j in range(ny)] for y in range(height)]
    pixels = []
    for y in range(height):
        for x in range(width):
            r = g = b = 0.0
            for j in range(ny):
                for i in range(nx):
                    basis = cos_x[x][i] * cos_y[y][j]
                    c = colors[i + j * nx]
                    r += c[0] * basis
                    g += c[1] * basis
                    b += c[2] * basis
            pixels.append((_to_srgb(r), _to_srgb(g), _to_srgb(b)))
    out.putdata(pixels)
    return out


def disc_masks(size):
    """(inside, outside): L masks of a size[0] x size[1] cell, 255 where a pixel's centre
    is more than EDGE inside / outside the disc the cell's square is cut to."""
    w, h = size
    cx, cy, radius = w / 2, h / 2, min(w, h) / 2
    inside, outside = Image.new("L", size), Image.new("L", size)
    ins, outs = [], []
    for y in range(h):
        for x in range(w):
            d = math.hypot(x + 0.5 - cx, y + 0.5 - cy)
            ins.append(255 if d <= radius - EDGE else 0)
            outs.append(255 if d >= radius + EDGE else 0)
    inside.putdata(ins)
    outside.putdata(outs)
    return inside, outside


def clip(box, bounds):
    x0, y0, x1, y1 = max(box[0], bounds[0]), max(box[1], bounds[1]), min(box[2], bounds[2]), min(box[3], bounds[3])
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


class References:
    """Row -> its picture at the delivered size on the slot's colour, a list of one for a
    still image and of every frame for an animation (cached)."""

    def __init__(self, data_dir, url_of_row):
        self.data_dir = data_dir
        self.url_of_row = url_of_row
        self.cache = {}

    def path(self, row):
        url = self.url_of_row(row)
        return os.path.join(self.data_dir, urlsplit(url).path.lstrip("/")) if url else None

    def get(self, row, size):
        path = self.path(row)
        if path is None or not os.path.exists(path):
            return None
        key = (path, size)
        if key not in self.cache:
            frames = []
            with Image.open(path) as source:
                source.draft("RGB", (size[0] * 2, size[1] * 2))  # JPEG: decode at a smaller scale
                for index in range(getattr(source, "n_frames", 1)):
                    source.seek(index)
                    picture = ImageOps.fit(ImageOps.exif_transpose(source).convert("RGBA"), size, LANCZOS)
                    ground = Image.new("RGBA", size, SLOT_COLOR + (255,))
                    frames.append(Image.alpha_composite(ground, picture).convert("RGB"))
            self.cache[key] = frames
        return self.cache[key]

    def animated(self, row):
        path = self.path(row)
        if path is None or not os.path.exists(path):
            return False
        with Image.open(path) as source:
            return getattr(source, "n_frames", 1) > 1


class Hashes:
    """Row -> its BlurHash decoded as the gallery draws it (32x32 scaled to the cell)."""

    def __init__(self, path, paths):
        known = dict(line.rstrip("\n").split("\t") for line in open(path) if line.strip())
        self.of_row = lambda row: known.get(paths[row % len(paths)]) if row >= 0 else None
        self.cache = {}

    def get(self, row, size):
        text = self.of_row(row)
        if text is None:
            return None
        if (text, size) not in self.cache:
            small = decode_blurhash(text, PLACEHOLDER_SIDE, PLACEHOLDER_SIDE)
            self.cache[(text, size)] = [small.resize(size, Image.BILINEAR)]
        return self.cache[(text, size)]


def difference(a, b, mask):
    """Mean absolute difference (0..255) on the coarse grid, over the grid squares wholly
    inside mask."""
    a, b = a.resize(GRID, BOX), b.resize(GRID, BOX)
    inside = mask.resize(GRID, BOX).point(lambda v: 255 if v >= 250 else 0)
    if inside.getbbox() is None:
        return None
    return sum(ImageStat.Stat(ImageChops.difference(a, b), inside).mean) / 3


def corners_off(pixels, outside):
    """The share of the pixels outside the disc that are not the slot's colour."""
    raw, mask = pixels.tobytes(), outside.tobytes()
    total = bad = 0
    for k, m in enumerate(mask):
        if m:
            total += 1
            r, g, b = raw[3 * k:3 * k + 3]
            bad += max(abs(r - SLOT_COLOR[0]), abs(g - SLOT_COLOR[1]), abs(b - SLOT_COLOR[2])) > CORNER_LIMIT
    return bad / total if total else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("png")
    ap.add_argument("app_output")
    ap.add_argument("data_dir")
    ap.add_argument("--expect", choices=("own", "placeholder"), default="own")
    ap.add_argument("--claim-shift", type=int, default=0)
    ap.add_argument("--hashes")
    ap.add_argument("--held-row", type=int, action="append", default=[])
    ap.add_argument("--index")
    ap.add_argument("--later")
    ap.add_argument("--later-frames", action="store_true")
    args = ap.parse_args()
    if args.held_row and not args.hashes:
        ap.error("--held-row needs --hashes")

    screen = Image.open(args.png).convert("RGB")
    cells, viewport = parse_output(args.app_output, args.later_frames)
    if viewport is None:
        print("no geometry line in %s" % args.app_output)
        return 1
    # Row R shows image R % count of the index (gallery.py's rule), whatever URL the app
    # printed: the check does not take the app's word for which file a row shows.
    index_path = args.index or os.path.join(args.data_dir, "index.txt")
    paths = [line.strip() for line in open(index_path) if line.strip()]
    references = References(args.data_dir, lambda row: "/" + paths[row % len(paths)] if row >= 0 else None)
    hashes = Hashes(args.hashes, paths) if args.hashes else None
    if args.later:
        return compare_later(screen, Image.open(args.later).convert("RGB"), cells, viewport, references)

    judged = wrong = 0
    screen_rows = [c["row"] for c in cells]
    for cell in cells:
        row, box = cell["row"], cell["box"]
        seen = clip(box, viewport)
        if seen is None or seen[2] - seen[0] < 8 or seen[3] - seen[1] < 8:
            print("cell row %d: too little on screen to judge, skipped" % row)
            continue
        judged += 1
        pixels = screen.crop(seen)
        raw = pixels.tobytes()
        magenta = sum(1 for p in zip(raw[0::3], raw[1::3], raw[2::3]) if is_magenta(*p)) / (len(raw) // 3)
        if args.expect == "placeholder":
            ok = magenta >= 0.9
            wrong += not ok
            print("cell row %d: magenta %.1f%%%s" % (row, 100 * magenta, "" if ok else "  <-- expected the placeholder"))
            continue
        held = row in args.held_row
        if cell["image"] in ("none", "placeholder") and not held:
            wrong += 1
            print("cell row %d: no image (%s, magenta %.1f%%)  <-- expected its picture"
                  % (row, cell["image"], 100 * magenta))
            continue
        # The cell's square (the delivered image, or where the placeholder is drawn), and
        # the part of it on screen.
        size = (box[2] - box[0], box[3] - box[1])
        if not held and tuple(int(v) for v in cell["image"].split("x")) != size:
            wrong += 1
            print("cell row %d: image %s in a %dx%d cell  <-- expected the cell's size" % ((row, cell["image"]) + size))
            continue
        inner = (seen[0] - box[0], seen[1] - box[1], seen[2] - box[0], seen[3] - box[1])
        inside, outside = (m.crop(inner) for m in disc_masks(size))
        source, what = (hashes, "hash") if held else (references, "image")

        def distance(other_row, pixels=pixels, source=source):
            """(the least difference from any frame of the row's picture, that frame)."""
            frames = source.get(other_row, size)
            if not frames:
                return None, None
            found = [(difference(pixels, f.crop(inner), inside), k) for k, f in enumerate(frames)]
            found = [(d, k) for d, k in found if d is not None]
            return min(found) if found else (None, None)

        claimed = row + args.claim_shift
        own, own_frame = distance(claimed)
        matched = source.get(claimed, size)[own_frame].crop(inner) if own_frame is not None else None
        others, same = {}, []
        for other in set(screen_rows + [row + d for d in (-2, -1, 1, 2)]) - {claimed}:
            if other >= 0 and references.path(other) != references.path(claimed):
                d = distance(other)[0]
                if d is None:
                    continue
                # A row whose picture is the matched one itself (a frame of an animation made
                # of photos that are rows too) tells nothing apart.
                if matched is not None and distance(other, matched)[0] <= OWN_LIMIT:
                    same.append(other)
                    continue
                others[other] = d
        nearest = min(others, key=others.get) if others else None
        corners = corners_off(pixels, outside)
        spread = max(ImageStat.Stat(pixels, inside).stddev)
        problems = []
        if own is None or own > OWN_LIMIT or (nearest is not None and others[nearest] < MARGIN * max(own, 1.0)):
            problems.append("not row %d's %s" % (claimed, what))
        if corners > 0.01:
            problems.append("%.0f%% of the corners outside the disc not the slot's colour" % (100 * corners))
        if held and (spread < FLAT_LIMIT or magenta > 0.05):
            problems.append("flat (standard deviation %.1f, magenta %.0f%%), not a hash" % (spread, 100 * magenta))
        if held:  # the blur of the hash, not the photograph it was made from
            photo = distance(claimed, source=references)[0]
            if own is not None and photo is not None and photo <= own:
                problems.append("as close to row %d's photograph (%.1f) as to its hash" % (claimed, photo))
            problems.append(None if photo is None else "info: %.1f from row %d's photograph" % (photo, claimed))
        if own_frame is not None and len(source.get(claimed, size)) > 1:
            problems.append("info: frame %d of %d (the app drew frame %s)" % (own_frame, len(source.get(claimed, size)),
                                                                       cell["frame"]))
            if args.claim_shift == 0 and cell["frame"] != str(own_frame):
                problems.append("not the frame the app says it drew (%s)" % cell["frame"])
        if same:
            problems.append("info: rows with that very picture: %s" % " ".join(map(str, sorted(same))))
        notes = [p[len("info: "):] for p in problems if p and p.startswith("info: ")]
        problems = [p for p in problems if p and not p.startswith("info: ")]
        wrong += bool(problems)
        print("cell row %d at %d,%d, %s (%dx%d on screen): %s from row %d's %s, nearest other row %s: %s; "
              "corners off %.1f%%%s%s"
              % (row, box[0], box[1], cell["image"], seen[2] - seen[0], seen[3] - seen[1],
                 "?" if own is None else "%.1f" % own, claimed, what, nearest,
                 "-" if nearest is None else "%.1f" % others[nearest], 100 * corners,
                 "".join("; " + n for n in notes),
                 "".join("  <-- " + p for p in problems)))
    print("%d cells judged, %d wrong" % (judged, wrong))
    return 0 if judged > 0 and wrong == 0 else 1


def compare_later(screen, later, cells, viewport, references):
    """Each cell in two screenshots of one screen: an animated row's must differ, a still
    row's be identical."""
    judged = wrong = animated_cells = 0
    for cell in cells:
        row, seen = cell["row"], clip(cell["box"], viewport)
        if seen is None or seen[2] - seen[0] < 8 or seen[3] - seen[1] < 8:
            continue
        judged += 1
        animated = references.animated(row)
        animated_cells += animated
        delta = ImageChops.difference(screen.crop(seen), later.crop(seen))
        moved = delta.convert("L").point(lambda v: 255 if v > 8 else 0).histogram()[255]
        changed = moved / (delta.width * delta.height)
        ok = changed > 0.05 if animated else delta.getbbox() is None
        wrong += not ok
        print("cell row %d (%s): %.1f%% of its pixels changed%s"
              % (row, "animated" if animated else "still", 100 * changed,
                 "" if ok else "  <-- expected %s" % ("another frame" if animated else "the same pixels")))
    print("%d cells compared, %d animated, %d wrong" % (judged, animated_cells, wrong))
    return 0 if judged > 0 and wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
