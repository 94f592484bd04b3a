#!/usr/bin/env python3
"""bench/py_pixload.py: what bench/py_baseline.py does, with pixload's Python package.

    PYTHONPATH=bindings/python PIXLOAD_LIBRARY=build/lib/libpixload.so.0 \
        python3 bench/py_pixload.py [--size WxH] [--concurrency N] URL_LIST_FILE

One Loader (no disk cache, like the baseline), every URL awaited with
`await loader.fetch(url, size=..., mode="fill")` under asyncio.gather, at most N
downloads at once (the loader's max_concurrent_downloads), RGBA8 like the others. Prints
the same line as the other benchmark programs, prefixed "python-pixload:", and then the
event loop's thread's own share of that CPU (`time.thread_time`: the binding's Python,
its ctypes calls, pxl_load and the queue's dispatch run there; the network and decode
threads are the library's). Interpreter start-up and imports are not measured, loader
creation is not either (as in the others).
"""
import argparse
import asyncio
import resource
import sys
import time

import pixload


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def run(loader, urls, size):
    request = {"size": size, "mode": "fill"} if size else {}
    results = await asyncio.gather(*(loader.fetch(u, **request) for u in urls), return_exceptions=True)
    failures = 0
    for url, result in zip(urls, results):
        if isinstance(result, BaseException):
            failures += 1
            print(f"python-pixload: failed: {url}: {result}", file=sys.stderr)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", help="WxH, fill mode")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--isolation", default="modules", help="Loader(isolation=...): none, modules, all")
    ap.add_argument("url_list")
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x")) if args.size else None
    with open(args.url_list) as f:
        urls = [line.strip() for line in f if line.strip()]
    if not urls:
        sys.exit(f"python-pixload: no URLs in {args.url_list}")

    async def measured():
        with pixload.Loader(max_concurrent_downloads=args.concurrency, isolation=args.isolation) as loader:
            t0, cpu0, thread0 = time.monotonic(), cpu_seconds(), time.thread_time()
            failures = await run(loader, urls, size)
            return failures, time.monotonic() - t0, cpu_seconds() - cpu0, time.thread_time() - thread0

    failures, wall, cpu, thread = asyncio.run(measured())
    if failures:
        sys.exit(f"python-pixload: FAILED: {failures} of {len(urls)} images failed")
    n = len(urls)
    print(f"python-pixload: {n} images, {n / wall:.1f} images/s, {cpu * 1000 / n:.2f} ms CPU/image "
          f"(user+sys, getrusage RUSAGE_SELF), wall {wall:.2f} s; "
          f"event loop thread {thread * 1000 / n:.3f} ms CPU/image")


if __name__ == "__main__":
    main()
