#!/usr/bin/env python3
"""bench/heldout.py: issue 41's CPU ratio kind of file by kind of file (make bench-heldout).

    python3 bench/heldout.py --pixload build/bin/pixload --bare BARE --set DIR --base-url URL \
        [--runs 3] [--urls 150] [--only CAT,CAT] [--before OLD_BUILD_DIR]

DIR is bench/heldout_set.py's output (DIR/CATEGORY/index.txt), served at URL (BASE_URL/
CATEGORY/NAME). Per category, the two programs of issue 41's first figure:
  - `pixload fetch --no-disk-cache --size 150x150 --mode fill --concurrency 8` over
    --urls URLs (default 300, as in the issue: the category's files, each several times
    under distinct ?copy=N URLs, so start-up weighs per image what it weighed there),
    whole-process user+sys (the child's rusage: what /usr/bin/time reads) / URLs;
  - the decode-only loop (bench/bare_decode.c --warmup --repeat 3 --png-simplified, one
    thread) over the category's files: CPU per image.
Every (program, category) pair runs RUNS times, all of them interleaved in a shuffled
order each run; the table gives ratios of medians. A category the bare loop cannot decode
(CMYK: libjpeg-turbo has no CMYK to JCS_EXT_RGBA conversion) shows pixload's figure only.
--before adds another build's `pixload fetch` to the same runs (a "before" column).
"""
import argparse
import os
import random
import resource
import statistics
import subprocess
import sys

FETCH = ["fetch", "--quiet", "--no-disk-cache", "--size", "150x150", "--mode", "fill", "--concurrency", "8"]


def child_cpu_ms():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000.0


def run_pixload(command, count):
    before = child_cpu_ms()
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"heldout: {' '.join(command)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return (child_cpu_ms() - before) / count


def run_bare(command):
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    for word in out.stdout.split(","):
        if "ms CPU/image" in word:
            return float(word.split()[0])
    sys.exit(f"heldout: no figure in {out.stdout}")


def main():
    ap = argparse.ArgumentParser()
    for name in ("pixload", "bare", "set", "base-url"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--urls", type=int, default=300, help="URLs per category (files repeated as ?copy=N)")
    ap.add_argument("--only", help="comma-separated categories")
    ap.add_argument("--before", help="a build directory of another commit (bin/pixload)")
    args = ap.parse_args()

    cats = [c.strip() for c in open(os.path.join(args.set, "categories.txt")) if c.strip()]
    if args.only:
        wanted = args.only.split(",")
        cats = [c for c in cats if c in wanted]
    builds = {"after": args.pixload}
    if args.before:
        builds["before"] = os.path.join(args.before, "bin", "pixload")

    jobs = {}  # (category, program) -> (kind, command, count)
    scratch = os.path.join(args.set, ".lists")
    os.makedirs(scratch, exist_ok=True)
    for cat in cats:
        names = [n.strip() for n in open(os.path.join(args.set, cat, "index.txt")) if n.strip()]
        copies = max(1, args.urls // len(names))
        urls = os.path.join(scratch, cat + ".urls")
        files = os.path.join(scratch, cat + ".files")
        with open(urls, "w") as f:
            for c in range(copies):
                f.write("".join(f"{args.base_url}/{cat}/{n}?copy={c}\n" for n in names))
        with open(files, "w") as f:
            f.write("".join(os.path.join(os.path.abspath(args.set), cat, n) + "\n" for n in names))
        for build, cli in builds.items():
            jobs[(cat, build)] = ("pixload", [cli, *FETCH, "--urls", urls], copies * len(names))
        jobs[(cat, "bare")] = ("bare", [args.bare, "--size", "150x150", "--threads", "1", "--warmup",
                                        "--repeat", "3", "--png-simplified", files], len(names))

    samples = {key: [] for key in jobs}
    order = list(jobs)
    shuffle = random.Random(41)
    for r in range(args.runs):
        shuffle.shuffle(order)
        for key in order:
            kind, command, count = jobs[key]
            samples[key].append(run_pixload(command, count) if kind == "pixload" else run_bare(command))
        print(f"heldout: run {r + 1} of {args.runs} done", file=sys.stderr)

    def med(key):
        values = [v for v in samples[key] if v is not None]
        return statistics.median(values) if values else None

    head = " | ".join(f"pixload {b} ms" for b in builds) + " | " + " | ".join(f"ratio {b}" for b in builds)
    print(f"\nCPU per 150x150 fill thumbnail, median of {args.runs} interleaved runs; ratio = whole "
          f"`pixload fetch` process / the decode-only loop (target <= 1.05x)")
    print(f"| category | bare loop ms | {head} |")
    print("|---|---|" + "---|" * (2 * len(builds)))
    for cat in cats:
        bare = med((cat, "bare"))
        ms = [med((cat, b)) for b in builds]
        ratios = [f"{m / bare:.2f}x" if bare else "n/a" for m in ms]
        print(f"| {cat} | {bare:.3f} | " if bare else f"| {cat} | n/a | ", end="")
        print(" | ".join(f"{m:.3f}" for m in ms) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
