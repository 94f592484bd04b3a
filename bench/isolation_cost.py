#!/usr/bin/env python3
"""bench/isolation_cost.py (`make bench-isolation`): what decoding in confined workers
costs (pixload.h, "Isolation"), side by side in one run, the runs interleaved, medians.

    python3 bench/isolation_cost.py PIXLOAD WEB_DIR OUT_DIR [RUNS]
    python3 bench/isolation_cost.py compare BEFORE AFTER WEB_DIR OUT_DIR [RUNS]

`compare`: two builds' pixload (before and after a change), every run of both interleaved
in one run of this script, each build's isolated/in-process ratios (CPU and wall, medians,
and the range of the run-by-run CPU ratios).

WEB_DIR: the web-size demo set (scripts/photos.sh: index.txt and img/*.jpg, *.png).
Made once in OUT_DIR from its first 100 JPEGs: HEIC (heif-enc -q 50) and JPEG XL (cjxl,
lossy, distance 1); SVG: bench/svg_writer.py's four drawings, 25 copies each.

Each run is one `pixload fetch` process over a set's file: URLs, 150x150 FILL, no memory
or disk cache: whole-process CPU (the workers included: they are the CLI's children,
reaped before it exits, so their time is in this script's RUSAGE_CHILDREN) and wall per
image, under the isolation of each column:
  HEIC, JPEG XL, SVG thumbnails   --isolation none  against  modules (the default)
  web JPEGs and PNGs (300)        --isolation none  against  all
and the host's peak resident memory (VmHWM of the pixload process alone, polled) with 8
decode threads, isolated and not.
"""
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def prepare(web, out):
    jpegs = [l.strip() for l in open(os.path.join(web, "index.txt")) if l.strip().endswith(".jpg")][:100]
    for kind, tool in (("heic", ["heif-enc", "-q", "50"]), ("jxl", ["cjxl", "-d", "1", "--quiet"])):
        folder = os.path.join(out, kind)
        if os.path.exists(os.path.join(folder, "done")):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for name in jpegs:
            src = os.path.join(web, name)
            dst = os.path.join(folder, os.path.basename(name)[:-4] + "." + kind)
            if kind == "heic":
                subprocess.run(["nice"] + tool + [src, "-o", dst], check=True, stdout=subprocess.DEVNULL)
            else:
                # cjxl recompresses a JPEG losslessly by default: lossy from pixels instead.
                subprocess.run(["nice"] + tool + ["--lossless_jpeg=0", src, dst], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(os.path.join(folder, "done"), "w").close()
    svg = os.path.join(out, "svg")
    if not os.path.exists(os.path.join(svg, "done")):
        shutil.rmtree(svg, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(HERE, "svg_writer.py"), svg + "-src"], check=True)
        os.makedirs(svg)
        for path in sorted(glob.glob(svg + "-src/*.svg")):
            for i in range(25):
                shutil.copy(path, os.path.join(svg, f"{i:02d}-" + os.path.basename(path)))
        open(os.path.join(svg, "done"), "w").close()
    sets = {}
    for kind in ("heic", "jxl", "svg"):
        sets[kind] = sorted(glob.glob(os.path.join(out, kind, "*." + kind)))
    sets["web"] = [os.path.join(web, l.strip()) for l in open(os.path.join(web, "index.txt")) if l.strip()]
    return sets


def measure(pixload, urls_file, count, isolation, threads=None):
    """(CPU ms per image, wall ms per image, host peak RSS MiB) of one pixload fetch."""
    command = [pixload, "fetch", "--allow-file", "--no-disk-cache", "--memory-cache-mb", "0", "--quiet",
               "--size", "150x150", "--mode", "fill", "--isolation", isolation, "--urls", urls_file]
    if threads:
        command += ["--decode-threads", str(threads), "--concurrency", str(threads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def poll():
        path = f"/proc/{process.pid}/status"
        while process.poll() is None:
            try:
                for line in open(path):
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
            except OSError:
                break
            time.sleep(0.002)

    watcher = threading.Thread(target=poll)
    watcher.start()
    _, err = process.communicate()
    wall = time.perf_counter() - start
    watcher.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        sys.exit(f"pixload failed ({isolation}): {err.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu * 1000 / count, wall * 1000 / count, peak[0] / 1024


ROWS = [("HEIC 150x150", "heic", "none", "modules"), ("JPEG XL 150x150", "jxl", "none", "modules"),
        ("SVG 150x150", "svg", "none", "modules"), ("web JPEG/PNG 150x150", "web", "none", "all")]


def url_files(sets, out):
    urls = {}
    for kind, files in sets.items():
        urls[kind] = os.path.join(out, kind + "-urls.txt")
        with open(urls[kind], "w") as f:
            f.write("".join("file://" + os.path.abspath(p) + "\n" for p in files))
    return urls


def compare(before, after, web, out, runs):
    os.makedirs(out, exist_ok=True)
    sets = prepare(web, out)
    urls = url_files(sets, out)
    builds = {"before": before, "after": after}
    results = {}
    for run in range(runs):
        for label, kind, a, b in ROWS:
            combos = [(build, isolation) for build in builds for isolation in (a, b)]
            for build, isolation in (combos if run % 2 == 0 else combos[::-1]):
                results.setdefault((label, build, isolation), []).append(
                    measure(builds[build], urls[kind], len(sets[kind]), isolation))
    print(f"isolation cost, before and after: load {open('/proc/loadavg').read().split()[0]}, median of {runs}")
    for label, kind, a, b in ROWS:
        line = f"{label:22}"
        for build in builds:
            base, isolated = results[(label, build, a)], results[(label, build, b)]
            cpu = [statistics.median(r[0] for r in rs) for rs in (base, isolated)]
            wall = [statistics.median(r[1] for r in rs) for rs in (base, isolated)]
            paired = sorted(i[0] / n[0] for i, n in zip(isolated, base))
            line += (f" | {build}: {a} {cpu[0]:6.2f}, {b} {cpu[1]:6.2f} ms CPU, x {cpu[1] / cpu[0]:.3f} "
                     f"(runs {paired[0]:.2f}-{paired[-1]:.2f}), wall x {wall[1] / wall[0]:.3f}")
        print(line, flush=True)


def main():
    if sys.argv[1] == "compare":
        compare(*sys.argv[2:6], int(sys.argv[6]) if len(sys.argv) > 6 else 9)
        return
    pixload, web, out = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    os.makedirs(out, exist_ok=True)
    sets = prepare(web, out)
    urls = url_files(sets, out)
    results = {}
    for run in range(runs):
        for label, kind, a, b in ROWS:
            for isolation in ((a, b) if run % 2 == 0 else (b, a)):
                results.setdefault((label, isolation), []).append(measure(pixload, urls[kind], len(sets[kind]), isolation))
    print(f"isolation cost: {os.cpu_count()} cores, load {open('/proc/loadavg').read().split()[0]}, "
          f"median of {runs} interleaved runs, one pixload fetch per run, 150x150 FILL, no caches")
    print(f"{'':22} {'files':>5} {'isolation':>9} {'CPU ms/img':>11} {'wall ms/img':>11} {'CPU x':>6} {'wall x':>6}")
    for label, kind, a, b in ROWS:
        base_cpu = statistics.median(r[0] for r in results[(label, a)])
        base_wall = statistics.median(r[1] for r in results[(label, a)])
        for isolation in (a, b):
            cpu = statistics.median(r[0] for r in results[(label, isolation)])
            wall = statistics.median(r[1] for r in results[(label, isolation)])
            print(f"{label:22} {len(sets[kind]):5} {isolation:>9} {cpu:11.2f} {wall:11.2f} {cpu / base_cpu:6.3f} "
                  f"{wall / base_wall:6.3f}")
    print("host peak RSS (VmHWM of the pixload process, workers not counted), 8 decode threads, median of 3:")
    for label, kind, isolations in (("web JPEG/PNG", "web", ("none", "all")), ("HEIC", "heic", ("none", "modules"))):
        for isolation in isolations:
            peaks = [measure(pixload, urls[kind], len(sets[kind]), isolation, threads=8)[2] for _ in range(3)]
            print(f"  {label:14} --isolation {isolation:8} {statistics.median(peaks):7.1f} MiB")


if __name__ == "__main__":
    main()
