#!/usr/bin/env python3
"""examples/qt/screen_check.py PNG APP_OUTPUT DATA_DIR [--expect own|placeholder] [--claim-shift K]

Checks the Qt gallery's screenshot cell by cell. APP_OUTPUT is the scripted app's output:
one "cell row=R x= y= w= h= image=WxH|none url=..." line per visible row (where its
picture is in PNG, unclipped) and a "geometry: ... viewport X,Y WxH" line (the part of the
window the list shows). DATA_DIR holds the photographs the server sends (DATA_DIR/img/...,
the URL's path).

--expect own (default): every cell must show the image of its own row, not another's.
The reference is the row's file decoded by Pillow, scaled to the size pixload delivered
and laid on the slot's colour (a transparent PNG's corners show it); the cell's pixels
and the reference are compared on a coarse grid (resampling filters differ in detail,
not in a 16x12 average). A cell passes when it is close to its own row's image (mean
difference under OWN_LIMIT of 255) and at least twice as far from every other candidate:
the images of the other rows on the screen and of the rows next to it (R-2 .. R+2).
--claim-shift K checks against row R+K's image instead: a control that must fail on
every cell, or the comparison could not tell rows apart.

--expect placeholder: every cell must be the flat magenta placeholder.

Prints one line per cell and "N cells judged, M wrong"; exits 0 when every cell is what
--expect says and at least one cell was judged.
"""
import argparse
import os
import re
import sys
from urllib.parse import urlsplit

from PIL import Image, ImageChops, ImageOps, ImageStat

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
BOX = getattr(Image, "Resampling", Image).BOX
SLOT_COLOR = (32, 32, 32)   # gallery.py's SLOT_COLOR
GRID = (16, 12)
OWN_LIMIT = 12.0            # mean absolute difference, 0..255, on the grid
MARGIN = 2.0                # every other candidate at least this many times further away


def is_magenta(r, g, b):
    return r >= 230 and g <= 40 and b >= 230


def parse_output(path):
    cells, viewport = [], None
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"cell row=(\d+) x=(-?\d+) y=(-?\d+) w=(\d+) h=(\d+) image=(\S+) url=(\S+)", line)
        if m:
            row, x, y, w, h = (int(v) for v in m.groups()[:5])
            cells.append({"row": row, "box": (x, y, x + w, y + h), "image": m.group(6), "url": m.group(7)})
        m = re.match(r"geometry: .* viewport (-?\d+),(-?\d+) (\d+)x(\d+)", line)
        if m:
            x, y, w, h = (int(v) for v in m.groups())
            viewport = (x, y, x + w, y + h)
    return cells, viewport


def clip(box, bounds):
    x0, y0, x1, y1 = max(box[0], bounds[0]), max(box[1], bounds[1]), min(box[2], bounds[2]), min(box[3], bounds[3])
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


class References:
    """Row -> its photograph at the delivered size on the slot's colour (cached)."""

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
            with Image.open(path) as source:
                source.draft("RGB", (size[0] * 2, size[1] * 2))  # JPEG: decode at a smaller scale
                picture = ImageOps.exif_transpose(source).convert("RGBA").resize(size, LANCZOS)
            ground = Image.new("RGBA", size, SLOT_COLOR + (255,))
            self.cache[key] = Image.alpha_composite(ground, picture).convert("RGB")
        return self.cache[key]


def difference(a, b):
    a, b = a.resize(GRID, BOX), b.resize(GRID, BOX)
    return sum(ImageStat.Stat(ImageChops.difference(a, b)).mean) / 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("png")
    ap.add_argument("app_output")
    ap.add_argument("data_dir")
    ap.add_argument("--expect", choices=("own", "placeholder"), default="own")
    ap.add_argument("--claim-shift", type=int, default=0)
    args = ap.parse_args()

    screen = Image.open(args.png).convert("RGB")
    cells, viewport = parse_output(args.app_output)
    if viewport is None:
        print("no geometry line in %s" % args.app_output)
        return 1
    # Row R shows image R % count of the index (gallery.py's rule), whatever URL the app
    # printed: the check does not take the app's word for which file a row shows.
    index_path = os.path.join(args.data_dir, "index.txt")
    paths = [line.strip() for line in open(index_path) if line.strip()]
    references = References(args.data_dir, lambda row: "/" + paths[row % len(paths)] if row >= 0 else None)

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
        if cell["image"] == "none":
            wrong += 1
            print("cell row %d: no image (placeholder, magenta %.1f%%)  <-- expected its picture" % (row, 100 * magenta))
            continue
        size = tuple(int(v) for v in cell["image"].split("x"))
        # The part of the delivered image that is on screen.
        inner = (seen[0] - box[0], seen[1] - box[1], seen[2] - box[0], seen[3] - box[1])

        def distance(other_row):
            reference = references.get(other_row, size)
            return None if reference is None else difference(pixels, reference.crop(inner))

        claimed = row + args.claim_shift
        own = distance(claimed)
        others = {}
        for other in set(screen_rows + [row + d for d in (-2, -1, 1, 2)]) - {claimed}:
            if other >= 0 and references.path(other) != references.path(claimed):
                d = distance(other)
                if d is not None:
                    others[other] = d
        nearest = min(others, key=others.get) if others else None
        ok = (own is not None and own <= OWN_LIMIT and
              (nearest is None or others[nearest] >= MARGIN * max(own, 1.0)))
        wrong += not ok
        print("cell row %d at %d,%d, %s (%dx%d on screen): %s from row %d's image, nearest other row %s: %s%s"
              % (row, box[0], box[1], cell["image"], seen[2] - seen[0], seen[3] - seen[1],
                 "?" if own is None else "%.1f" % own, claimed, nearest,
                 "-" if nearest is None else "%.1f" % others[nearest],
                 "" if ok else "  <-- not row %d's image" % claimed))
    print("%d cells judged, %d wrong" % (judged, wrong))
    return 0 if judged > 0 and wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
