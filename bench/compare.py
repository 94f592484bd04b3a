#!/usr/bin/env python3
"""bench/compare.py: pixload against the bare C baseline and the best Python way.

    python3 bench/compare.py --pixload build/bin/pixload --baseline build/bench/baseline \
        --urls URL_LIST [--runs 5] [--concurrency 8]

Runs the three programs in turn, interleaved, RUNS times for thumbnails (150x150 fill)
and full size, over the same URL list from the same local server. The machine is shared
and noisy, so it reports medians and the ratios of medians measured side by side in this
one run, never numbers from different runs. Each program prints its own figures for its
own work (CPU = user+sys from getrusage over the loading, not process start-up).
"""
import argparse
import re
import statistics
import subprocess
import tempfile
import sys

LINE = re.compile(r"([\d.]+) images/s, ([\d.]+) ms CPU/image")


def run(command, env=None, extra=None):
    """(images/s, CPU ms per image) from the program's line; with extra (a compiled
    pattern with one group), also that figure of the output (None when absent)."""
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"bench: {' '.join(command)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    match = LINE.search(out.stdout)
    if not match:
        sys.exit(f"bench: no figures in the output of {' '.join(command)}:\n{out.stdout}")
    if extra is None:
        return float(match.group(1)), float(match.group(2))
    found = extra.search(out.stdout)
    return float(match.group(1)), float(match.group(2)), float(found.group(1)) if found else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pixload", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--urls", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-python", action="store_true")
    args = parser.parse_args()
    n = str(args.concurrency)
    disk_dir = tempfile.mkdtemp(prefix="pxl-bench-disk-")
    count = sum(1 for line in open(args.urls) if line.strip())

    for title, size in (("thumbnails 150x150 fill", ["--size", "150x150"]), ("full size", [])):
        tools = {
            "bare C (libcurl + libjpeg-turbo/libpng)": [args.baseline, *size, "--concurrency", n, args.urls],
            # No disk cache here: the baseline has none, and a second run would read the
            # first run's entries. The warm-disk case is measured separately below.
            "pixload fetch": [args.pixload, "fetch", "--quiet", "--no-disk-cache", "--concurrency", n,
                              "--urls", args.urls, *size, *(["--mode", "fill"] if size else [])],
            # The same without the memory cache, which the baseline does not have: keeping
            # 64 MiB of decoded images costs fresh pages that the baseline, freeing each
            # image at once, keeps reusing.
            "pixload fetch --memory-cache-mb 0": [args.pixload, "fetch", "--quiet", "--no-disk-cache",
                                                  "--concurrency", n, "--urls", args.urls,
                                                  "--memory-cache-mb", "0",
                                                  *size, *(["--mode", "fill"] if size else [])],
            # Warm start: every image from a disk cache filled before the runs (issue 5).
            "pixload fetch, warm disk cache": [args.pixload, "fetch", "--quiet", "--cache-dir", disk_dir,
                                               "--concurrency", n, "--urls", args.urls,
                                               *size, *(["--mode", "fill"] if size else [])],
        }
        run(tools["pixload fetch, warm disk cache"])  # fills the disk cache
        if not args.no_python:
            tools["Python aiohttp + Pillow"] = [sys.executable, "bench/py_baseline.py", *size,
                                                "--concurrency", n, args.urls]
        results = {name: [] for name in tools}
        for _ in range(args.runs):
            for name, command in tools.items():
                results[name].append(run(command))
        print(f"\n{title}: {count} images, {args.runs} runs each, medians")
        print(f"  {'':42} {'images/s':>9} {'CPU ms/image':>13}")
        medians = {}
        for name, samples in results.items():
            rate = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            medians[name] = (rate, cpu)
            print(f"  {name:42} {rate:9.1f} {cpu:13.2f}")
        base_rate, base_cpu = medians["bare C (libcurl + libjpeg-turbo/libpng)"]
        for name in ("pixload fetch", "pixload fetch --memory-cache-mb 0"):
            ours_rate, ours_cpu = medians[name]
            print(f"  {name} / bare C: CPU per image {ours_cpu / base_cpu:.2f}x, throughput {ours_rate / base_rate:.2f}x"
                  f"   (target: CPU <= 1.10x, throughput >= 0.90x)")
        if "Python aiohttp + Pillow" in medians:
            py_rate, py_cpu = medians["Python aiohttp + Pillow"]
            print(f"  Python / bare C:  CPU per image {py_cpu / base_cpu:.2f}x, throughput {py_rate / base_rate:.2f}x")


if __name__ == "__main__":
    main()
