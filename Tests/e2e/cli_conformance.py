#!/usr/bin/env python3
"""Tests/e2e/cli_conformance.py PIXLOAD CORPUS [SET_DIR...]

End to end through the shipped library: for every row of the pngsuite and
jpeg-conformance manifests of CORPUS, of every set kept in the repository under
Tests/fixtures (webp-suite, gif-suite, avif-suite, ...) and of each SET_DIR (a folder with a
manifest.tsv in the same format, e.g. a generated set), `pixload fetch --allow-file
--no-orientation --no-color-management --format rgba8 --out FILE file://...` must write
exactly the manifest's pixels (md5 of the tightly packed RGBA8 rows) for ok /
ok_with_warning rows, and must fail with a status and a message for must_fail rows; rows
with a frames column (the GIF suite's animations) also run with `--animate --out-dir DIR`:
the PNG frames written must be the manifest's frames (md5 of every frame's RGBA8 rows, in
order). Skips the corpus sets (saying so) when the corpus is absent. Ends with "N passed,
N failed".
"""
import hashlib
import os
import subprocess
import sys
import tempfile


def check_frames(pixload, url, frames, out_dir):
    """--animate --out-dir: the frames as PNG files, in order, against "N:md5"."""
    from PIL import Image

    count, want = frames.split(":")
    run = subprocess.run([pixload, "fetch", "--allow-file", "--no-disk-cache", "--no-orientation",
                          "--no-color-management", "--format", "rgba8", "--animate", "--out-dir", out_dir, url], capture_output=True, text=True,
                         timeout=60)
    if run.returncode != 0:
        return f"--animate: exit {run.returncode}: {run.stdout.strip()} {run.stderr.strip()}"
    files = sorted(os.listdir(out_dir))  # NNNN-NAME.png, then NNNN-NAME.f001.png, ...
    files = files[-1:] + files[:-1]
    md5 = hashlib.md5()
    for f in files:
        md5.update(Image.open(os.path.join(out_dir, f)).convert("RGBA").tobytes())
    if len(files) != int(count) or md5.hexdigest() != want:
        return f"--animate: {len(files)} frames, md5 {md5.hexdigest()}, expected {frames}"
    return None


def main():
    pixload, corpus = sys.argv[1], sys.argv[2]
    sets = [os.path.join(corpus, name) for name in ("pngsuite", "jpeg-conformance")]
    if not os.path.isfile(os.path.join(corpus, "README.md")):
        print(f"cli_conformance: {corpus} is absent: its sets skipped")
        sets = []
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    if os.path.isdir(fixtures):
        sets += [os.path.join(fixtures, name) for name in sorted(os.listdir(fixtures))
                 if os.path.isfile(os.path.join(fixtures, name, "manifest.tsv"))]
    sets += [d for d in sys.argv[3:] if os.path.realpath(d) not in map(os.path.realpath, sets)]
    passed = failed = 0
    work = tempfile.mkdtemp(prefix="pxl-cli-")
    out = os.path.join(work, "pixels.rgba")
    for set_dir in sets:
        corpus_set = os.path.basename(os.path.normpath(set_dir))
        rows = open(os.path.join(set_dir, "manifest.tsv")).read().splitlines()
        header = rows[0].split("\t")
        col = {name: i for i, name in enumerate(header)}
        set_passed = set_failed = 0
        for line in rows[1:]:
            cells = line.split("\t")
            name, expect = cells[col["file"]], cells[col["expect"]]
            url = "file://" + os.path.abspath(os.path.join(set_dir, name))
            if os.path.exists(out):
                os.unlink(out)
            # The manifests' pixels are the reference decoders' without colour management
            # (PngSuite's gamma and cHRM files, ICC-tagged JPEGs would be converted).
            run = subprocess.run([pixload, "fetch", "--allow-file", "--no-orientation", "--no-color-management",
                                  "--format", "rgba8", "--out", out, url], capture_output=True, text=True, timeout=60)
            problem = None
            if expect.startswith("must_fail"):
                if run.returncode != 1 or run.stdout.startswith("OK") or len(run.stdout.split()) < 3:
                    problem = f"expected a failure with a message, got exit {run.returncode}: {run.stdout.strip()}"
            else:
                width, height = int(cells[col["width"]]), int(cells[col["height"]])
                if run.returncode != 0:
                    problem = f"exit {run.returncode}: {run.stdout.strip()} {run.stderr.strip()}"
                else:
                    data = open(out, "rb").read()
                    if len(data) != width * height * 4:
                        problem = f"{len(data)} bytes, expected {width}x{height}x4"
                    elif hashlib.md5(data).hexdigest() != cells[col["rgba8_md5"]]:
                        problem = "pixels differ from the manifest's rgba8_md5"
                    elif "frames" in col and cells[col["frames"]]:
                        problem = check_frames(pixload, url, cells[col["frames"]], os.path.join(work, name))
            if problem:
                set_failed += 1
                print(f"FAIL {corpus_set}/{name} ({expect}): {problem}")
            else:
                set_passed += 1
        print(f"[{corpus_set}] {set_passed} rows as the manifest says, {set_failed} not")
        passed += set_passed
        failed += set_failed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
