#!/usr/bin/env python3
"""bench/py_baseline.py: "the best Python way" to do what bench/baseline.c does.

    python3 bench/py_baseline.py [--size WxH] [--concurrency N] URL_LIST_FILE

asyncio + aiohttp download every URL of the list (one ClientSession, at most N
connections, kept alive) and Pillow decodes in a pool of 2 threads (Pillow releases the
GIL while decoding and resampling, so the threads really run in parallel):
  --size WxH: JPEG DCT scaling with Image.draft(), then ImageOps.fit() to exactly WxH
              (centre crop, Lanczos), then RGBA like the C baseline;
  full size:  .convert('RGBA') and .load().
No cache. Any failure is reported and makes the exit status 1. Prints the same line as
the C baseline, prefixed "python:". Needs: scripts/deps.sh python.
"""
import argparse
import asyncio
import io
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import aiohttp
from PIL import Image, ImageOps


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def decode(data, size):
    im = Image.open(io.BytesIO(data))
    if size:
        if im.format == "JPEG":
            im.draft("RGB", size)  # largest 1/1..1/8 DCT scale still >= size
        im = ImageOps.fit(im, size, Image.LANCZOS)
    im = im.convert("RGBA")
    im.load()
    return im.size


async def run(urls, size, concurrency):
    loop = asyncio.get_running_loop()
    failures = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(url):
                nonlocal failures
                try:
                    # The connector's limit makes the rest wait for a free connection.
                    async with session.get(url) as resp:
                        resp.raise_for_status()
                        data = await resp.read()
                    await loop.run_in_executor(pool, decode, data, size)
                except Exception as e:  # report every failure, then fail the run
                    failures += 1
                    print(f"python: failed: {url}: {type(e).__name__}: {e}", file=sys.stderr)

            await asyncio.gather(*(one(u) for u in urls))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", help="WxH, fill mode")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("url_list")
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x")) if args.size else None
    with open(args.url_list) as f:
        urls = [line.strip() for line in f if line.strip()]
    if not urls:
        sys.exit(f"python: no URLs in {args.url_list}")

    # Measured from here, like the C baseline: imports and interpreter start excluded.
    t0, cpu0 = time.monotonic(), cpu_seconds()
    failures = asyncio.run(run(urls, size, args.concurrency))
    wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0

    if failures:
        sys.exit(f"python: FAILED: {failures} of {len(urls)} images failed")
    n = len(urls)
    print(f"python: {n} images, {n / wall:.1f} images/s, {cpu * 1000 / n:.2f} ms CPU/image "
          f"(user+sys, getrusage RUSAGE_SELF), wall {wall:.2f} s")


if __name__ == "__main__":
    main()
