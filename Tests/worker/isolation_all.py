#!/usr/bin/env python3
"""PXL_ISOLATION_ALL gives the pixels PXL_ISOLATION_NONE gives (issue 39).

Runs `pixload fetch` over the conformance corpus (../shared/corpus: JPEG, PNG, corrupt
files) and the repository's WebP, GIF and AVIF suites, once with `--isolation none` and
once with `--isolation all`, in several variants (full size, FILL and FIT thumbnails, the
other pixel formats, no orientation, no colour management), and compares every line's
status and size and every written PNG byte for byte. Also checks that the run under ALL
decoded in a worker (the --metrics "isolated" flag) and that NONE did not.

  isolation_all.py PIXLOAD_BIN CORPUS_DIR [FIXTURES_DIR]

The last line is "N passed, N failed"; exit status 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile

VARIANTS = [
    [],
    ["--size", "150x150", "--mode", "fill"],
    ["--size", "200x120", "--mode", "fit", "--format", "gray8"],
    ["--size", "64x64", "--format", "rgb8", "--no-orientation"],
    ["--no-color-management", "--format", "bgra8-premul"],
]
EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".avif")


def files(roots):
    found = []
    for root in roots:
        for directory, _, names in os.walk(root):
            found += [os.path.join(directory, n) for n in names if n.lower().endswith(EXTENSIONS)]
    return sorted(found)


def run(binary, isolation, variant, urls_file, out_dir, metrics=False):
    command = [binary, "fetch", "--allow-file", "--no-disk-cache", "--memory-cache-mb", "0", "--isolation", isolation,
               "--urls", urls_file] + variant
    command += ["--metrics"] if metrics else ["--out-dir", out_dir, "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    return done.stdout


def lines(stdout):
    """STATUS WxH SOURCE MS URL -> (url, status, size), without the time."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1].startswith("file://"):
            status = " ".join(parts[:-4])
            out[parts[-1]] = (status, parts[-4])
    return out


def main():
    binary, corpus = sys.argv[1], sys.argv[2]
    fixtures = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..", "fixtures")
    roots = [corpus, os.path.join(fixtures, "webp-suite"), os.path.join(fixtures, "gif-suite"),
             os.path.join(fixtures, "avif-suite")]
    paths = files(roots)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("FAIL", what)

    with tempfile.TemporaryDirectory() as work:
        urls = os.path.join(work, "urls")
        with open(urls, "w") as f:
            f.write("".join("file://" + os.path.abspath(p) + "\n" for p in paths))
        check(len(paths) > 300, f"{len(paths)} files found (is {corpus} the corpus?)")
        for index, variant in enumerate(VARIANTS):
            outs = {}
            for isolation in ("none", "all"):
                out_dir = os.path.join(work, f"{index}-{isolation}")
                os.makedirs(out_dir)
                # --quiet prints only the summary: the per-URL lines come from a second run
                # without --out-dir would double the work, so compare the files and, below,
                # the statuses from --metrics.
                run(binary, isolation, variant, urls, out_dir)
                outs[isolation] = out_dir
            none, alln = sorted(os.listdir(outs["none"])), sorted(os.listdir(outs["all"]))
            check(none == alln, f"variant {variant}: files written differ: "
                  f"{sorted(set(none) ^ set(alln))[:5]}")
            same = 0
            for name in set(none) & set(alln):
                with open(os.path.join(outs["none"], name), "rb") as a, open(os.path.join(outs["all"], name), "rb") as b:
                    if a.read() == b.read():
                        same += 1
                    else:
                        check(False, f"variant {variant}: {name}: pixels differ")
            check(same == len(none) and same > 250, f"variant {variant}: {same} of {len(none)} images the same")
            print(f"variant {' '.join(variant) or '(full size)'}: {same} images written, identical under none and all")
        # Statuses (OK, OK incomplete, CORRUPT_IMAGE, ...) and sizes, and where the decode ran.
        results = {}
        for isolation in ("none", "all"):
            records = [json.loads(l) for l in run(binary, isolation, [], urls, None, metrics=True).splitlines()
                       if l.startswith("{")]
            results[isolation] = {r.get("url"): r for r in records}
        check(len(results["none"]) == len(paths), f"{len(results['none'])} metrics lines for {len(paths)} files")
        differ = [u for u in results["none"] if {k: results["none"][u].get(k) for k in ("status", "width", "height", "incomplete")}
                  != {k: results["all"].get(u, {}).get(k) for k in ("status", "width", "height", "incomplete")}]
        check(not differ, f"statuses differ: {differ[:5]}")
        check(all(r.get("isolated") for r in results["all"].values() if r.get("status") == "OK"),
              "under all, a decoded image was not isolated")
        check(not any(r.get("isolated") for r in results["none"].values()), "under none, an image was isolated")
        statuses = {}
        for r in results["all"].values():
            statuses[r.get("status")] = statuses.get(r.get("status"), 0) + 1
        print("statuses under all:", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items(), key=str)))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
