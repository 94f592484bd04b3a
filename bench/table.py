#!/usr/bin/env python3
"""bench/table.py: the performance table (README "Performance"), every ratio measured in
one run, the programs interleaved, medians of RUNS.

    python3 bench/table.py --pixload build/bin/pixload --bare build/bench/bare-decode \
        --libdir build/lib --web-urls U --web-files F --camera-urls U --camera-files F \
        [--runs 3] [--before OLD_BUILD_DIR]

scripts/bench-table.sh prepares the inputs (the web-size demo set of scripts/photos.sh
and the 8-16 MP set of scripts/camera-photos.sh, both served by a private nginx on
127.0.0.1) and runs this. The rows:

  1 whole-process CPU per image of `pixload fetch` (300 web-size images from nginx,
    150x150 fill, no disk cache; the CLI's own figure: getrusage from the first pxl_load
    to the last callback) / CPU per image of the bare single-thread decode of the same
    files from memory (bench/bare_decode.c --threads 1)
  1b the same as issue 41 measured it from outside: user+sys of the whole `pixload fetch`
    process (start-up, loader creation and teardown included: the child's rusage) / 300,
    against the decode-only loop with one untimed warm-up pass, 3 timed passes and PNGs
    through libpng's simplified API (bare-decode --warmup --repeat 3 --png-simplified);
    why the two readings differ: scripts/bench-table.sh
  1c the second reading over the web set's JPEGs only (--web-jpeg-urls, --web-jpeg-files):
    the bare loop's zlib + libpng PNG decode, which pixload's libdeflate path beats by
    ~2x, left out
  2 throughput (images/s) of the same `pixload fetch` / bare decode on 2 threads
  3 Python: `await loader.fetch` over the same URLs (bench/py_pixload.py) against
    aiohttp + Pillow with draft + fit (bench/py_baseline.py): how many times faster, and
    CPU per image (user+sys of the measured span, every thread of the process) as a
    ratio; 3b the CPU ratio over the JPEGs alone (--web-jpeg-urls), where both sides'
    libjpeg-turbo decode is most of the cost (no target: it says how much of row 3 the
    PNGs make). The measured figures also give the event loop thread's own CPU per image
    (py_pixload.py: the binding, its ctypes calls, pxl_load, the queue's dispatch)
  4 camera photos: CPU per 150x150 fill thumbnail of `pixload fetch` over the large set
    (each photo REPEAT times, distinct URLs) / bare single-thread DCT-scaled decode
  5 warm start: 8 camera photos, 150x150 fill, from a filled disk cache with a fresh
    loader (`pixload fetch --cache-only`, a new process): ms from the first pxl_load to
    the 8th callback

--isolation-rows LABEL=ISOLATION=URLS (repeatable) adds rows of bench/isolation_cost.py's
measure (whole-process CPU, the decode workers included, and wall per image): the URLs
with `--isolation none` against ISOLATION, in the same interleaved runs; scripts/bench-
table.sh passes the web set and its JPEGs (all) and HEIC, JPEG XL and SVG made from it
(modules) from the same nginx.

--isolation-all adds the same build with PXL_ISOLATION_ALL (`pixload fetch --isolation
all`, `Loader(isolation="all")`: every image decoded in a confined worker) as a column.

--before OLD_BUILD_DIR (a build/ of another commit, with bin/pixload and lib/) adds
that build to the same interleaved runs, as a "before" column (its Python runs use
OLD_BUILD_DIR/../bindings/python when that exists).
"""
import argparse
import os
import random
import re
import resource
import statistics
import sys
import tempfile

from compare import run  # runs a benchmark program, returns (images/s, CPU ms per image)
import isolation_cost

SIZE = ["--size", "150x150"]
# py_pixload.py's event loop thread (the binding's own thread), ms CPU per image.
LOOP_THREAD = re.compile(r"event loop thread ([\d.]+) ms CPU/image")


def run_whole(command, env):
    """run() and the child's whole user+sys CPU in ms (RUSAGE_CHILDREN grows by exactly
    the one child waited for, start-up and exit included), then py_pixload's event loop
    thread's CPU per image (None for the other programs)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate, cpu, loop_thread = run(command, env, LOOP_THREAD)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000.0
    return rate, cpu, whole, loop_thread


def count_lines(path):
    return sum(1 for line in open(path) if line.strip())


def main():
    ap = argparse.ArgumentParser()
    for name in ("pixload", "bare", "libdir", "web-urls", "web-files", "camera-urls", "camera-files"):
        ap.add_argument("--" + name, required=True)
    for name in ("web-jpeg-urls", "web-jpeg-files"):
        ap.add_argument("--" + name)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--before", help="a build directory of another commit, measured alongside")
    ap.add_argument("--isolation-all", action="store_true", help="a column with every decode in a worker")
    ap.add_argument("--isolation-rows", action="append", default=[], metavar="LABEL=ISOLATION=URLS",
                    help="URLS with --isolation none against ISOLATION, whole-process CPU and wall")
    args = ap.parse_args()
    n = str(args.concurrency)
    here = os.path.dirname(os.path.abspath(__file__))
    scratch = tempfile.mkdtemp(prefix="pxl-bench-table-")

    builds = {"pixload": (args.pixload, args.libdir)}
    if args.isolation_all:
        builds["isolation all"] = (args.pixload, args.libdir)
    if args.before:
        builds["before"] = (os.path.join(args.before, "bin", "pixload"), os.path.join(args.before, "lib"))

    # The warm-start URLs: the first 8 camera photos (each once), in a cache filled now.
    first8 = os.path.join(scratch, "first8.txt")
    with open(args.camera_urls) as f, open(first8, "w") as out:
        seen = []
        for line in f:
            base = line.strip().split("?")[0]
            if base and base not in seen:
                seen.append(base)
        out.write("".join(u + "\n" for u in seen[:8]))

    fetch = ["fetch", "--quiet", "--concurrency", n, *SIZE, "--mode", "fill"]
    tools = {}  # name -> (command, env)
    for build, (cli, libdir) in builds.items():
        # The before build's own bindings when its tree has them (newer bindings may call
        # functions an older library lacks).
        own = os.path.join(libdir, "..", "..", "bindings", "python")
        bindings = own if build == "before" and os.path.isdir(own) else os.path.join(here, "..", "bindings", "python")
        env = dict(os.environ, PYTHONPATH=bindings,
                   PIXLOAD_LIBRARY=os.path.join(libdir, "libpixload.so.0"))
        cache = os.path.join(scratch, "cache-" + build.replace(" ", "-"))
        isolation = ["--isolation", "all"] if build == "isolation all" else []
        tools[f"web {build}"] = ([cli, *fetch, *isolation, "--no-disk-cache", "--urls", args.web_urls], None)
        if args.web_jpeg_urls:
            tools[f"web-jpeg {build}"] = ([cli, *fetch, *isolation, "--no-disk-cache", "--urls", args.web_jpeg_urls],
                                          None)
        tools[f"camera {build}"] = ([cli, *fetch, *isolation, "--no-disk-cache", "--urls", args.camera_urls], None)
        tools[f"python {build}"] = ([sys.executable, os.path.join(here, "py_pixload.py"), *SIZE, "--concurrency", n,
                                     *isolation, args.web_urls], env)
        if args.web_jpeg_urls:
            tools[f"python-jpeg {build}"] = ([sys.executable, os.path.join(here, "py_pixload.py"), *SIZE,
                                              "--concurrency", n, *isolation, args.web_jpeg_urls], env)
        warm = [cli, *fetch, *isolation, "--cache-dir", cache, "--urls", first8]
        run(warm, None)  # fills the disk cache (network); the measured runs are --cache-only
        tools[f"warm {build}"] = (warm + ["--cache-only"], None)
    repeat = count_lines(args.camera_urls) // max(1, count_lines(args.camera_files))
    tools["web bare 1 thread"] = ([args.bare, *SIZE, "--threads", "1", args.web_files], None)
    tools["web issue-41 loop 1 thread"] = ([args.bare, *SIZE, "--threads", "1", "--warmup", "--repeat", "3",
                                            "--png-simplified", args.web_files], None)
    if args.web_jpeg_files:
        tools["web-jpeg issue-41 loop"] = ([args.bare, *SIZE, "--threads", "1", "--warmup", "--repeat", "3",
                                            "--png-simplified", args.web_jpeg_files], None)
    tools["web bare 2 threads"] = ([args.bare, *SIZE, "--threads", "2", args.web_files], None)
    tools["camera bare 1 thread"] = ([args.bare, *SIZE, "--threads", "1", "--repeat", str(repeat),
                                      args.camera_files], None)
    if args.web_jpeg_urls:
        tools["python-jpeg aiohttp + Pillow"] = ([sys.executable, os.path.join(here, "py_baseline.py"), *SIZE,
                                                  "--concurrency", n, args.web_jpeg_urls], None)
    tools["python aiohttp + Pillow"] = ([sys.executable, os.path.join(here, "py_baseline.py"), *SIZE,
                                         "--concurrency", n, args.web_urls], None)

    # The isolation rows: bench/isolation_cost.py's measure of each URL list, both columns.
    iso_rows = []
    for spec in args.isolation_rows:
        label, isolation, urls = spec.split("=", 2)
        iso_rows.append((label, urls, count_lines(urls), "none", isolation))
        for column in ("none", isolation):
            tools[f"isolation {label} {column}"] = (None, (urls, count_lines(urls), column))

    # Each run's (images/s, CPU ms per image, whole-process CPU ms): the whole process's
    # children included (a decode worker is the CLI's child, reaped before it exits, so its
    # time is in ours; the CLI's own figure counts its process only).
    samples = {name: [] for name in tools}
    order = list(tools)
    shuffle = random.Random(18)
    for _ in range(args.runs):
        shuffle.shuffle(order)  # interleaved, in a different order each run
        for name in order:
            command, env = tools[name]
            if command is None:  # an isolation row: (CPU ms/image, wall ms/image, host peak MiB)
                samples[name].append(isolation_cost.measure(args.pixload, *env))
            else:
                samples[name].append(run_whole(command, env))

    iso_samples = {(label, column): samples.pop(f"isolation {label} {column}")
                   for label, _, _, a, b in iso_rows for column in (a, b)}
    for name in [name for name in tools if name.startswith("isolation ")]:
        del tools[name]
    med = {name: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v))
           for name, v in samples.items()}
    loop_thread = {name: statistics.median(s[3] for s in v) for name, v in samples.items()
                   if all(s[3] is not None for s in v)}
    web_n, cam_n = count_lines(args.web_urls), count_lines(args.camera_urls)
    # Whole-process CPU per image of the CLI runs (what /usr/bin/time reads / N).
    jpeg_n = count_lines(args.web_jpeg_urls) if args.web_jpeg_urls else 0
    whole = {name: statistics.median(s[2] for s in v) / (jpeg_n if name.startswith("web-jpeg") else web_n)
             for name, v in samples.items()
             if name.startswith("web") and "bare" not in name and "loop" not in name}
    warm_count = count_lines(first8)

    print(f"\nmeasured figures, median of {args.runs} interleaved runs (images/s, CPU ms per image):")
    for name in tools:
        rate, cpu = med[name]
        extra = f"  = {warm_count * 1000 / rate:.1f} ms for {warm_count} images" if name.startswith("warm") else ""
        if name in whole:
            extra = f"  ({whole[name]:.3f} ms whole process/image)"
        if name in loop_thread:
            extra = f"  (event loop thread {loop_thread[name]:.3f} ms/image)"
        print(f"  {name:28} {rate:9.1f} images/s {cpu:9.3f} ms CPU/image{extra}")
    rows = [
        (f"whole-process CPU per image vs bare single-thread decode ({web_n} web images)",
         lambda b: med[f"web {b}"][1] / med["web bare 1 thread"][1], "x", "<=", 1.05),
        ("the same as issue 41 reads it: whole `pixload fetch` process incl. start-up vs the warm decode-only loop",
         lambda b: whole[f"web {b}"] / med["web issue-41 loop 1 thread"][1], "x", "<=", 1.05),
        *([(f"the same over the web set's {jpeg_n} JPEGs only (no PNG)",
            lambda b: whole[f"web-jpeg {b}"] / med["web-jpeg issue-41 loop"][1], "x", "<=", 1.05)]
          if jpeg_n else []),
        ("throughput vs bare 2-thread decode",
         lambda b: med[f"web {b}"][0] / med["web bare 2 threads"][0], "x", ">=", 0.95),
        ("Python `await loader.fetch` vs aiohttp + Pillow (draft + fit), times faster",
         lambda b: med[f"python {b}"][0] / med["python aiohttp + Pillow"][0], "x", ">=", 2.0),
        ("Python `await loader.fetch` CPU per image vs aiohttp + Pillow's",
         lambda b: med[f"python {b}"][1] / med["python aiohttp + Pillow"][1], "x", "<=", 0.5),
        *([(f"the same over the {jpeg_n} JPEGs only (no target: the PNGs' share of the row above)",
            lambda b: med[f"python-jpeg {b}"][1] / med["python-jpeg aiohttp + Pillow"][1], "x", None, None)]
          if jpeg_n else []),
        (f"camera photos (8-16 MP, {cam_n} thumbnails), CPU per thumbnail vs bare DCT-scaled decode",
         lambda b: med[f"camera {b}"][1] / med["camera bare 1 thread"][1], "x", "<=", 1.03),
        (f"warm start: first screen ({warm_count} camera photos, 150x150) from the disk cache, fresh loader",
         lambda b: warm_count * 1000 / med[f"warm {b}"][0], " ms", "<=", 16.0),
    ]
    print(f"\n| figure | {' | '.join(builds)} | target | holds |")
    print("|---|" + "---|" * len(builds) + "---|---|")
    for title, value, unit, op, target in rows:
        values = [value(b) for b in builds]
        ours = values[0]
        cells = " | ".join(f"{v:.2f}{unit}" if unit == "x" else f"{v:.0f}{unit}" for v in values)
        if op is None:
            print(f"| {title} | {cells} | - | - |")
            continue
        holds = ours <= target if op == "<=" else ours >= target
        print(f"| {title} | {cells} | {op} {target:g}{unit} | {'yes' if holds else 'NO'} |")
    if "isolation all" in builds:
        # The CLI's CPU figure above leaves the workers out: whole-process CPU here.
        print("\nPXL_ISOLATION_ALL, whole-process CPU (the decode workers included) per image, "
              "median of the runs, against the same build in-process (target <= 1.15x):")
        for kind, count in (("web", count_lines(args.web_urls)), ("camera", count_lines(args.camera_urls))):
            base = statistics.median(s[2] for s in samples[f"{kind} pixload"]) / count
            isolated = statistics.median(s[2] for s in samples[f"{kind} isolation all"]) / count
            print(f"  {kind:7} in-process {base:7.3f} ms, isolated {isolated:7.3f} ms: {isolated / base:.3f}x")
    if iso_rows:
        print()
        isolation_cost.report(iso_rows, iso_samples, args.runs, "isolation, from nginx")


if __name__ == "__main__":
    main()
