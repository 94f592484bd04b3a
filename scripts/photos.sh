#!/usr/bin/env bash
# scripts/photos.sh OUT_DIR [COUNT]
#
# Prepares COUNT (default 300) web-sized real photographs for the demo and the
# benchmarks: OUT_DIR/img/0000.jpg ..., OUT_DIR/index.txt (relative paths, in order)
# and OUT_DIR/sources.txt (which photograph each image comes from, for attribution).
#
# Source: Debian's lomiri-wallpapers-16.04 (main): 15 photographs, 1365..5312 px wide,
# CC-BY-4.0 / CC-BY-SA-4.0 / CC0-1.0 (see /usr/share/doc/lomiri-wallpapers-16.04/copyright).
# Every output image is a different crop of its source (aspect ratios 16:9 .. 2:3, zoom,
# position) scaled to a width of 640..1600, so no two images are alike and no cache can
# cheat. Image i is always made the same way (its own seeded RNG): reproducible.
# Every 10th image is a PNG (half of those with transparent rounded corners); the rest
# are JPEGs of quality 75..92, a quarter of them progressive, like the web.
#
# Pillow, not ImageMagick: it decodes each source once and cuts all its images from
# memory, on two processes, in seconds.
#
# Idempotent: does nothing if OUT_DIR/index.txt already lists COUNT images. The set is
# built in a temp dir and moved in place, index.txt last, so an interrupted run never
# leaves an index that lies.
set -euo pipefail

out="${1:?usage: $0 OUT_DIR [COUNT]}"
count="${2:-300}"
[[ "$count" =~ ^[0-9]+$ && "$count" -gt 0 ]] || { echo "photos.sh: bad COUNT '$count'" >&2; exit 2; }

if [ -f "$out/index.txt" ] && [ "$(wc -l <"$out/index.txt")" -eq "$count" ]; then
  exit 0
fi

PKG=lomiri-wallpapers-16.04
here=$(cd "$(dirname "$0")" && pwd)
if ! dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null | grep -qx installed ||
   ! python3 -c 'import PIL' 2>/dev/null; then
  "$here/deps.sh"
fi

mkdir -p "$out"
tmp=$(mktemp -d "$out/.photos.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The photographs, in a stable order (dpkg -L order is not guaranteed).
dpkg -L "$PKG" | grep -i '\.jpg$' | LC_ALL=C sort >"$tmp/sources"

python3 - "$tmp" "$count" <<'EOF'
import os, random, sys
import multiprocessing
from PIL import Image, ImageDraw

tmp, count = sys.argv[1], int(sys.argv[2])
sources = open(os.path.join(tmp, "sources")).read().split()
os.mkdir(os.path.join(tmp, "img"))
ASPECTS = [(16, 9), (3, 2), (4, 3), (1, 1), (3, 4), (2, 3)]

def name(i):
    return "img/%04d.%s" % (i, "png" if i % 10 == 9 else "jpg")

def source_of(i):
    # Round robin, shifted by one every 10 images so that the PNGs (every 10th) come
    # from all the photographs, not from the same two or three.
    return (i + i // 10) % len(sources)

def make(src_index):
    """All images cut from one source: decode it once, then crop/scale from memory."""
    im = Image.open(sources[src_index])
    im = im.convert("RGB")  # also forces the full decode, once
    W, H = im.size
    for i in (i for i in range(count) if source_of(i) == src_index):
        rng = random.Random(i)                      # image i is always made alike
        aw, ah = rng.choice(ASPECTS)
        png = i % 10 == 9
        # PNG photos and portrait images are smaller on the web: keep them <= 1024 wide.
        w = rng.randrange(640, 1025 if png or ah > aw else 1601, 16)
        max_cw = min(W, H * aw / ah)                # the largest crop of that aspect
        w = min(w, int(max_cw))                     # never upscale a small source
        cw = max_cw * rng.uniform(max(0.45, w / max_cw), 1.0)   # zoom, still >= w
        ch = cw * ah / aw
        x0 = rng.uniform(0, W - cw)
        y0 = rng.uniform(0, H - ch)
        h = max(1, round(w * ah / aw))
        # reducing_gap: a cheap box pre-reduction, then Lanczos; good and fast.
        img = im.resize((w, h), Image.LANCZOS, box=(x0, y0, x0 + cw, y0 + ch), reducing_gap=3.0)
        path = os.path.join(tmp, name(i))
        if png:
            if i % 20 == 19:                        # half the PNGs carry real alpha
                mask = Image.new("L", (w, h), 0)
                ImageDraw.Draw(mask).rounded_rectangle((0, 0, w - 1, h - 1), radius=w // 8, fill=255)
                img.putalpha(mask)
            img.save(path, "PNG")
        else:
            img.save(path, "JPEG", quality=rng.randrange(75, 93),
                     progressive=rng.random() < 0.25, optimize=False)
    return src_index

# fork: the workers must see make() from this stdin script (spawn could not import it).
with multiprocessing.get_context("fork").Pool(2) as pool:   # the machines have 2 cores
    list(pool.imap_unordered(make, range(min(len(sources), count))))

with open(os.path.join(tmp, "sources.txt"), "w") as f:
    f.write("# image <- photograph (license: /usr/share/doc/lomiri-wallpapers-16.04/copyright)\n")
    for i in range(count):
        f.write("%s <- %s\n" % (name(i), os.path.basename(sources[source_of(i)])))
with open(os.path.join(tmp, "index.txt"), "w") as f:
    f.write("".join(name(i) + "\n" for i in range(count)))
EOF

# Swap in: invalidate the old index first, publish the new one last.
rm -f "$out/index.txt"
rm -rf "$out/img"
mv "$tmp/img" "$out/img"
mv "$tmp/sources.txt" "$out/sources.txt"
mv "$tmp/index.txt" "$out/index.txt"
