#!/usr/bin/env python3
"""scripts/import-gif-suite.py PYGIF_GIT_DIR OUTDIR

Makes Tests/fixtures/gif-suite (OUTDIR) from Robert Ancell's GIF test suite
(github:robert-ancell/pygif, folder test-suite/, CC BY-SA 4.0): every test listed in
its TESTS file, the .gif copied as it is, and a manifest.tsv whose expectations are the
suite's own (its .conf files and the .rgba/.png frames they name), not ours:
  - "frames =" empty in the .conf: the suite says the file must not decode: must_fail
    (a canvas over the runner's 1e8-pixel budget: "must_fail (pixel limit)").
  - otherwise ok, width/height from the .conf, rgba8_md5 from the first frame, and
    frames = "N:md5" over all N frames, durations_ms from each frame's delay (1/100 s),
    loop_count in pxl_codec_info's terms: 0 for a still image and for "infinite",
    n + 1 plays for an extension loop count n, 1 for an animation without one.
Where pixload deliberately differs from the suite, the row says so in DEVIATIONS below
(and README.md lists them); nothing else is edited by hand.
Run once when the selection changes; the result is committed.
"""
import configparser
import hashlib
import io
import os
import subprocess
import sys

from PIL import Image

git_dir, out = sys.argv[1], sys.argv[2]

# file -> (what, why): where pixload's documented behaviour (gif_shim.c) is not the
# suite's expectation. what: an expect value replacing the suite's, "exclude" (the row is
# left out: the suite's frames cannot be compared with ours), or "loop_count=N".
MULTI_IMAGE = ("each image is a frame (giflib, browsers, Pillow and ImageMagick agree); the suite merges "
               "images without a delay into one frame")
DEVIATIONS = {
    "no-data.gif": ("must_fail", "no image in the file: pixload reports corrupt; the suite shows an empty canvas"),
    "image-zero-width.gif": ("must_fail", "a zero-area image without its LZW data: giflib fails reading past it"),
    "image-zero-height.gif": ("must_fail", "a zero-area image without its LZW data: giflib fails reading past it"),
    "image-zero-size.gif": ("must_fail", "a zero-area image without its LZW data: giflib fails reading past it"),
    "max-codes.gif": ("must_fail", "LZW minimum code size 11: giflib 5.2 refuses it (DGifGetImageDesc)"),
    "plain-text.gif": ("exclude", "the suite expects no frame; pixload ignores the Plain Text extension, as browsers "
                       "do, and shows the image"),
    "images-combine.gif": ("exclude", MULTI_IMAGE),
    "images-overlap.gif": ("exclude", MULTI_IMAGE),
    "high-color.gif": ("exclude", MULTI_IMAGE),
    "animation-multi-image.gif": ("exclude", MULTI_IMAGE),
    "animation-multi-image-explicit-zero-delay.gif": ("exclude", MULTI_IMAGE),
    "dispose-restore-previous.gif": ("exclude", MULTI_IMAGE + " (its first image has no delay)"),
    "gif87a-animation.gif": ("loop_count=1", "no NETSCAPE2.0 extension: the animation plays once, as in browsers; "
                             "the suite says forever"),
}


def show(path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:test-suite/{path}"],
                          check=True, capture_output=True).stdout


def frame_rgba(section, width, height):
    if "pixels" in section:
        data = show(section["pixels"])
    else:
        data = Image.open(io.BytesIO(show(section["image"]))).convert("RGBA").tobytes()
    assert len(data) == width * height * 4, (section, len(data))
    return data


os.makedirs(out, exist_ok=True)
rows = []
for name in show("TESTS").decode().split():
    conf = configparser.ConfigParser(inline_comment_prefixes=("#",))
    conf.read_string(show(f"{name}.conf").decode())
    c = conf["config"]
    gif = c["input"]
    with open(os.path.join(out, gif), "wb") as f:
        f.write(show(gif))
    width, height = int(c["width"]), int(c["height"])
    frames = [s.strip() for s in c.get("frames", "").split(",") if s.strip()]
    what = DEVIATIONS.get(gif, ("", ""))[0]
    if what == "exclude":
        os.remove(os.path.join(out, gif))
        continue
    if what.startswith("must_fail"):
        rows.append((gif, what, width, height, "", "", "", ""))
        continue
    if not frames:
        limit = width * height > 100_000_000
        rows.append((gif, "must_fail (pixel limit)" if limit else "must_fail", width, height, "", "", "", ""))
        continue
    md5_all = hashlib.md5()
    first = None
    delays = []
    for fr in frames:
        data = frame_rgba(conf[fr], width, height)
        if first is None:
            first = hashlib.md5(data).hexdigest()
        md5_all.update(data)
        delays.append(str(int(conf[fr].get("delay", "0")) * 10))
    loops = c.get("loop-count", "0")
    if len(frames) == 1 or loops == "infinite":
        loop_count = 0
    else:
        loop_count = int(loops) + 1 if int(loops) > 0 else 1
    if what.startswith("loop_count="):
        loop_count = int(what.split("=")[1])
    rows.append((gif, "ok", width, height, first, f"{len(frames)}:{md5_all.hexdigest()}", ",".join(delays),
                 str(loop_count)))

with open(os.path.join(out, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\tframes\tdurations_ms\tloop_count\n")
    for gif, expect, w, h, md5, frames, durations, loops in rows:
        f.write(f"{gif}\tgif\t{expect}\t{w}\t{h}\t{md5}\t{frames}\t{durations}\t{loops}\n")
with open(os.path.join(out, "deviations.txt"), "w") as f:
    for gif, (what, why) in sorted(DEVIATIONS.items()):
        f.write(f"{gif}\t{what}\t{why}\n")
print(f"import-gif-suite: {len(rows)} rows in {out}")
