#!/usr/bin/env python3
"""Tests/e2e/cli_memory_cache.py PIXLOAD

The memory cache `pixload fetch` and `pixload hash` make without --memory-cache-mb
(tools/tool_getparam.c, fetch_memory_cache_default): none when every URL of the run is
distinct (a one-shot process never asks for an image again: the cache would only keep
every thumbnail alive to the end, in fresh pages), the library's default when a URL is
listed twice, and whatever --memory-cache-mb says when given. Read from the line
`memory cache: N images, B bytes` that --metrics prints on stderr after the summary; the
pixels must not depend on it. Images made now (Pillow), read through file:// URLs.
Ends with "N passed, N failed".
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

from PIL import Image


def fetch(pixload, urls, *options):
    command = [pixload, "fetch", "--allow-file", "--no-disk-cache", "--size", "40x40", "--mode", "fill",
               "--metrics", *options, *urls]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    match = re.search(r"^memory cache: (\d+) images, (\d+) bytes$", run.stderr, re.M)
    return run.returncode, (int(match.group(1)) if match else None), run


def digests(out_dir):
    return [hashlib.md5(Image.open(os.path.join(out_dir, f)).convert("RGBA").tobytes()).hexdigest()
            for f in sorted(os.listdir(out_dir))]


def main():
    pixload = sys.argv[1]
    work = tempfile.mkdtemp(prefix="pxl-cli-memory-")
    urls = []
    for i, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
        path = os.path.join(work, f"{i}.jpg")
        img = Image.new("RGB", (160, 120), colour)
        img.paste((255, 255, 255), (10 * i, 10, 10 * i + 40, 60))
        img.save(path, quality=90)
        urls.append("file://" + path)

    passed = failed = 0

    def check(name, ok, detail):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name}: {detail}")

    rc, held, run = fetch(pixload, urls)
    check("distinct URLs: no memory cache", rc == 0 and held == 0, f"exit {rc}, {held} images held: {run.stderr}")
    rc, held, run = fetch(pixload, urls[:1])
    check("one URL: no memory cache", rc == 0 and held == 0, f"exit {rc}, {held} images held: {run.stderr}")
    rc, held, run = fetch(pixload, [urls[0], urls[1], urls[0]])
    check("a URL listed twice: the default cache", rc == 0 and held is not None and held >= 2,
          f"exit {rc}, {held} images held: {run.stderr}")
    rc, held, run = fetch(pixload, urls, "--memory-cache-mb", "64")
    check("--memory-cache-mb 64 over distinct URLs: kept", rc == 0 and held == 3,
          f"exit {rc}, {held} images held: {run.stderr}")
    rc, held, run = fetch(pixload, [urls[0], urls[0]], "--memory-cache-mb", "0")
    check("--memory-cache-mb 0 with a repeated URL: none", rc == 0 and held == 0,
          f"exit {rc}, {held} images held: {run.stderr}")

    # The same pixels with the cache and without it.
    outs = []
    for options in ([], ["--memory-cache-mb", "64"]):
        out_dir = os.path.join(work, f"out{len(outs)}")
        run = subprocess.run([pixload, "fetch", "--allow-file", "--no-disk-cache", "--size", "40x40", "--mode",
                              "fill", "--quiet", *options, "--out-dir", out_dir, *urls],
                             capture_output=True, text=True, timeout=60)
        outs.append(digests(out_dir) if run.returncode == 0 else [f"exit {run.returncode}"])
    check("same pixels with and without the cache", len(outs[0]) == 3 and outs[0] == outs[1], f"{outs}")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
