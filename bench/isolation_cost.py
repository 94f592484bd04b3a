#!/usr/bin/env python3
"""bench/isolation_cost.py (`make bench-isolation`; its functions are also the isolation
rows of `make bench-decode` and `make bench-table`): what decoding in confined workers
costs (pixload.h, "Isolation"), side by side in one run, the runs interleaved, medians.

    python3 bench/isolation_cost.py PIXLOAD WEB_DIR OUT_DIR [RUNS]
    python3 bench/isolation_cost.py --kinds KINDS.tsv PIXLOAD OUT_DIR [RUNS]
    python3 bench/isolation_cost.py compare BEFORE AFTER WEB_DIR OUT_DIR [RUNS]

`compare`: two builds' pixload (before and after a change), every run of both interleaved
in one run of this script, each build's isolated/in-process ratios (CPU and wall, medians,
and the range of the run-by-run CPU ratios).

WEB_DIR: the web-size demo set (scripts/photos.sh: index.txt and img/*.jpg, *.png).
Made once in OUT_DIR from its first 100 JPEGs: HEIC (heif-enc -q 50) and JPEG XL (cjxl,
lossy, distance 1); SVG: bench/svg_writer.py's four drawings, 25 copies each.

--kinds (scripts/bench-decode.sh): KIND<TAB>ISOLATION<TAB>PATH lines, one row per kind,
that kind's files in-process (--isolation none) against ISOLATION (modules or all); a
kind with fewer than 100 files is linked under OUT_DIR until it has 100 (distinct names:
no request merges another), so that the worker's start weighs as it does in a gallery.

Each run is one `pixload fetch` process over a set's file: URLs, 150x150 FILL, no memory
or disk cache: whole-process CPU (the workers included: they are the CLI's children,
reaped before it exits, so their time is in this script's RUSAGE_CHILDREN) and wall per
image, under the isolation of each column:
  HEIC, JPEG XL, SVG thumbnails   --isolation none  against  modules (the default)
  web JPEGs and PNGs (300)        --isolation none  against  all
then peak memory with 8 decode threads over a mixed set (every row's files, shuffled):
the host's (VmHWM of the pixload process), the largest worker's (VmHWM), how many workers
ran, and host and workers together (their PSS summed: shared libraries' pages counted
once), under none, modules and all.
"""
import glob
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The targets of issue 39: a module's thumbnails isolated, and the web's under ALL.
TARGETS = {"modules": 1.05, "all": 1.15}
MIN_FILES = 100


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


def write_urls(path, files):
    with open(path, "w") as f:
        f.write("".join("file://" + os.path.abspath(p) + "\n" for p in files))
    return path


def read_status(pid, field):
    """A /proc/PID/status field in kB, or 0 once the process is gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss(pid):
    """Proportional set size in kB (a shared library's pages divided among the processes
    that map them: summed over host and workers, what they hold together), or 0."""
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    """The processes pid's threads started (its decode workers)."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                found += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return found


def measure(pixload, urls_file, count, isolation, threads=None, workers=False):
    """(CPU ms per image, wall ms per image, host peak RSS MiB) of one pixload fetch; with
    workers, a fourth: (the largest worker's peak RSS MiB, workers seen, the peak of host and
    workers together MiB: their PSS summed, every 20 ms), polled from /proc (a worker
    retired between two polls is missed)."""
    command = [pixload, "fetch", "--allow-file", "--no-disk-cache", "--memory-cache-mb", "0", "--quiet",
               "--size", "150x150", "--mode", "fill", "--isolation", isolation, "--urls", urls_file]
    if threads:
        command += ["--decode-threads", str(threads), "--concurrency", str(threads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    worker_peaks = {}
    together = [0]

    def poll():
        tick = 0
        while process.poll() is None:
            host = read_status(process.pid, "VmHWM:")
            if host == 0:
                break
            peak[0] = max(peak[0], host)
            if workers:
                found = children(process.pid)
                for child in found:
                    worker_peaks[child] = max(worker_peaks.get(child, 0), read_status(child, "VmHWM:"))
                if tick % 10 == 0:  # smaps_rollup walks the page tables: not every 2 ms
                    together[0] = max(together[0], pss(process.pid) + sum(pss(child) for child in found))
            tick += 1
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
    result = (cpu * 1000 / count, wall * 1000 / count, peak[0] / 1024)
    if workers:
        result += ((max(worker_peaks.values(), default=0) / 1024, len(worker_peaks), together[0] / 1024),)
    return result


def interleave(pixload, rows, runs):
    """rows: (label, urls_file, count, baseline isolation, isolated); every row's two
    columns in each run, their order alternating. {(label, isolation): [measure()...]}."""
    results = {}
    for run in range(runs):
        for label, urls, count, a, b in rows:
            for isolation in ((a, b) if run % 2 == 0 else (b, a)):
                results.setdefault((label, isolation), []).append(measure(pixload, urls, count, isolation))
    return results


def report(rows, results, runs, title):
    """The rows' medians and ratios, and whether each holds its target (TARGETS)."""
    print(f"{title}: {os.cpu_count()} cores, load {open('/proc/loadavg').read().split()[0]}, median of {runs} "
          f"interleaved runs, one pixload fetch per run, 150x150 FILL, no caches, whole-process CPU (workers "
          f"included) and wall per image")
    print(f"{'':24} {'files':>5} {'isolation':>9} {'CPU ms/img':>11} {'wall ms/img':>11} {'CPU x':>6} {'wall x':>6}"
          f" {'target':>7}")
    for label, _, count, a, b in rows:
        base_cpu = statistics.median(r[0] for r in results[(label, a)])
        base_wall = statistics.median(r[1] for r in results[(label, a)])
        for isolation in (a, b):
            cpu = statistics.median(r[0] for r in results[(label, isolation)])
            wall = statistics.median(r[1] for r in results[(label, isolation)])
            target = ""
            if isolation in TARGETS:
                holds = cpu / base_cpu <= TARGETS[isolation] and wall / base_wall <= TARGETS[isolation]
                target = f"<= {TARGETS[isolation]:.2f} {'yes' if holds else 'NO'}"
            print(f"{label:24} {count:5} {isolation:>9} {cpu:11.2f} {wall:11.2f} {cpu / base_cpu:6.3f} "
                  f"{wall / base_wall:6.3f} {target}")


def web_rows(web, out):
    """The sets made from WEB_DIR as rows: (label, urls_file, count, none, isolation), and every file."""
    sets = prepare(web, out)
    names = {"heic": ("HEIC 150x150", "modules"), "jxl": ("JPEG XL 150x150", "modules"),
             "svg": ("SVG 150x150", "modules"), "web": ("web JPEG/PNG 150x150", "all")}
    rows = [(label, write_urls(os.path.join(out, kind + "-urls.txt"), sets[kind]), len(sets[kind]), "none",
             isolation) for kind, (label, isolation) in names.items()]
    return rows, [p for files in sets.values() for p in files]


def compare(before, after, web, out, runs):
    """`compare`: two builds' ratios, every run of both interleaved."""
    os.makedirs(out, exist_ok=True)
    rows, _ = web_rows(web, out)
    builds = {"before": before, "after": after}
    results = {}
    for run in range(runs):
        for label, urls, count, a, b in rows:
            combos = [(build, isolation) for build in builds for isolation in (a, b)]
            for build, isolation in (combos if run % 2 == 0 else combos[::-1]):
                results.setdefault((label, build, isolation), []).append(measure(builds[build], urls, count, isolation))
    print(f"isolation cost, before and after: load {open('/proc/loadavg').read().split()[0]}, median of {runs}")
    for label, _, _, a, b in rows:
        line = f"{label:22}"
        for build in builds:
            base, isolated = results[(label, build, a)], results[(label, build, b)]
            cpu = [statistics.median(r[0] for r in rs) for rs in (base, isolated)]
            wall = [statistics.median(r[1] for r in rs) for rs in (base, isolated)]
            paired = sorted(i[0] / n[0] for i, n in zip(isolated, base))
            line += (f" | {build}: {a} {cpu[0]:6.2f}, {b} {cpu[1]:6.2f} ms CPU, x {cpu[1] / cpu[0]:.3f} "
                     f"(runs {paired[0]:.2f}-{paired[-1]:.2f}), wall x {wall[1] / wall[0]:.3f}")
        print(line, flush=True)


def memory(pixload, files, out, runs=3, threads=8):
    """Peak memory with `threads` decode threads over files (a mixed set), per isolation."""
    mixed = list(files)
    random.Random(39).shuffle(mixed)
    urls = write_urls(os.path.join(out, "mixed-urls.txt"), mixed)
    print(f"peak memory, {threads} decode threads, {len(mixed)} files of every row mixed, median of {runs} "
          f"(MiB; /proc polled every 2 ms: VmHWM, workers seen; every 20 ms: PSS of host + workers summed):")
    print(f"  {'isolation':9} {'host VmHWM':>10} {'largest worker':>14} {'workers':>7} {'host+workers PSS':>16}")
    samples = {}
    for run in range(runs):
        order = ["none", "modules", "all"]
        for isolation in order[run % 3:] + order[:run % 3]:
            samples.setdefault(isolation, []).append(measure(pixload, urls, len(mixed), isolation, threads, True))
    for isolation in ("none", "modules", "all"):
        s = samples[isolation]
        print(f"  {isolation:9} {statistics.median(r[2] for r in s):10.1f} {statistics.median(r[3][0] for r in s):14.1f}"
              f" {statistics.median(r[3][1] for r in s):7.0f} {statistics.median(r[3][2] for r in s):16.1f}")


def kinds(path, out):
    """--kinds: KIND<TAB>ISOLATION<TAB>PATH lines -> rows, every kind's files linked up to MIN_FILES."""
    found = {}
    for line in open(path):
        if line.strip():
            kind, isolation, file = line.rstrip("\n").split("\t")
            found.setdefault((kind, isolation), []).append(os.path.abspath(file))
    rows, every = [], []
    for (kind, isolation), files in found.items():
        if len(files) < MIN_FILES:
            folder = os.path.join(out, "links", kind.replace(" ", "-"))
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            copies = []
            for i in range(MIN_FILES):
                link = os.path.join(folder, f"{i:03d}-" + os.path.basename(files[i % len(files)]))
                os.symlink(files[i % len(files)], link)
                copies.append(link)
            files = copies
        urls = write_urls(os.path.join(out, kind.replace(" ", "-") + "-urls.txt"), files)
        rows.append((kind, urls, len(files), "none", isolation))
        every += files
    return rows, every


def main():
    args = sys.argv[1:]
    if args and args[0] == "--kinds":
        listing, pixload, out = args[1], args[2], args[3]
        runs = int(args[4]) if len(args) > 4 else 5
        os.makedirs(out, exist_ok=True)
        rows, every = kinds(listing, out)
    elif args and args[0] == "compare":
        compare(*args[1:5], int(args[5]) if len(args) > 5 else 9)
        return
    else:
        pixload, web, out = args[0], args[1], args[2]
        runs = int(args[3]) if len(args) > 3 else 5
        os.makedirs(out, exist_ok=True)
        rows, every = web_rows(web, out)
    results = interleave(pixload, rows, runs)
    report(rows, results, runs, "isolation cost")
    memory(pixload, every, out)


if __name__ == "__main__":
    main()
