#!/usr/bin/env python3
"""Tests/worker/replay_isolated.py PIXLOAD FILE...: the module fuzz replays through the
decode worker (`make test-modules`, after the in-process replays under ASan + UBSan).

The replay builds (Tests/fuzz/codecs/module_fuzz.c) call a module's functions in their own
process; the library calls them in a worker (PXL_ISOLATION_MODULES, the default). Every
file the replays read (the module fuzz seeds, the public suites, the kept regressions) goes
through `pixload fetch` twice, one process over all of them each, with `--isolation none`
and `--isolation modules`, at full size and as a 150x150 FILL thumbnail (the worker's
RESAMPLE path): each file must end with the same status and size in both, and every image
that decodes must be written byte for byte the same. A worker crash shows as
DECODER_FAILED where the host decoded, a lost message as another status, a wrong
resample as other bytes; every image that decodes must say `"isolated": true` in the
metrics under modules (false under none), or the comparison proves nothing. Prints a line per difference and "N passed, N failed" last.
"""
import json
import os
import subprocess
import sys
import tempfile


def fetch(pixload, urls_file, isolation, out_dir, extra):
    """{url: (status, size, isolated)} of one pixload fetch (its --metrics), which writes the images."""
    command = [pixload, "fetch", "--allow-file", "--no-disk-cache", "--memory-cache-mb", "0", "--isolation",
               isolation, "--urls", urls_file, "--out-dir", out_dir, "--metrics", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):  # 1: some files failed, as some of these must
        sys.exit(f"replay_isolated: {' '.join(command)} ended with {done.returncode}:\n{done.stderr[-2000:]}")
    results = {}
    for line in done.stdout.splitlines():
        m = json.loads(line)
        results[m["url"]] = (m["status"], f'{m["width"]}x{m["height"]}', m["isolated"])
    return results


def main():
    pixload, files = sys.argv[1], [f for f in sys.argv[2:] if os.path.isfile(f) and not f.endswith("README.md")]
    if not files:
        sys.exit("replay_isolated: no files")
    passed = failed = 0
    scratch = tempfile.mkdtemp(prefix="pxl-replay-isolated-")
    urls_file = os.path.join(scratch, "urls.txt")
    urls = ["file://" + os.path.abspath(f) for f in files]
    with open(urls_file, "w") as f:
        f.write("".join(u + "\n" for u in urls))
    for variant, extra in (("full size", []), ("150x150 fill", ["--size", "150x150", "--mode", "fill"])):
        runs = {}
        for isolation in ("none", "modules"):
            out = os.path.join(scratch, variant.replace(" ", "-") + "-" + isolation)
            runs[isolation] = (fetch(pixload, urls_file, isolation, out, extra), out)
        (plain, plain_dir), (isolated, isolated_dir) = runs["none"], runs["modules"]
        decoded = 0
        for position, url in enumerate(urls):
            a, b = plain.get(url), isolated.get(url)
            if a is None or b is None:
                print(f"FAIL {variant}: {url}: no result line (none: {a}, modules: {b})")
                failed += 1
                continue
            if a[:2] != b[:2]:
                print(f"FAIL {variant}: {url}: in-process {a[0]} {a[1]}, isolated {b[0]} {b[1]}")
                failed += 1
                continue
            if a[0] == "OK" and (a[2] or not b[2]):
                # Else the comparison would hold for a library that decoded both in-process.
                print(f"FAIL {variant}: {url}: isolated in the metrics: {a[2]} (none), {b[2]} (modules)")
                failed += 1
                continue
            if a[0] == "OK":
                name = f"{position:04d}-{os.path.splitext(os.path.basename(url))[0]}.png"
                with open(os.path.join(plain_dir, name), "rb") as p, open(os.path.join(isolated_dir, name), "rb") as q:
                    if p.read() != q.read():
                        print(f"FAIL {variant}: {url}: the isolated image's pixels differ")
                        failed += 1
                        continue
                decoded += 1
            passed += 1
        print(f"{variant}: {len(urls)} files, {decoded} decoded, {len(urls) - decoded} refused, "
              f"the same status, size and pixels isolated as in-process")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
