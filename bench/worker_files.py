#!/usr/bin/env python3
"""bench/worker_files.py OUT: the files of `make bench-worker`, made now: a 1600x1200
picture (Pillow) as HEIC (heif-enc) and JPEG XL (cjxl), and a 1600x1200 SVG of 300
circles with and without a line of text."""
import os
import subprocess
import sys

from PIL import Image

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
w, h = 1600, 1200
im = Image.new("RGB", (w, h))
px = im.load()
for y in range(h):
    for x in range(w):
        px[x, y] = ((x * 7 + y) % 256, (y * 3) % 256, ((x ^ y) * 5) % 256)
png = os.path.join(out, "photo-1600x1200.png")
im.save(png)
subprocess.run(["heif-enc", "-q", "60", png, "-o", os.path.join(out, "photo-1600x1200.heic")], check=True,
               stdout=subprocess.DEVNULL)
subprocess.run(["cjxl", "-q", "85", png, os.path.join(out, "photo-1600x1200.jxl")], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
circles = "".join('<circle cx="%d" cy="%d" r="%d" fill="#%06x"/>' % ((i * 37) % w, (i * 91) % h, 10 + i % 50,
                                                                      (i * 2654435761) % 0xFFFFFF) for i in range(300))
for name, text in (("circles", ""), ("circles-text", '<text x="50" y="100" font-size="60">Hello text</text>')):
    with open(os.path.join(out, name + "-1600x1200.svg"), "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">%s%s</svg>\n' % (w, h, circles, text))
