#!/usr/bin/env python3
"""Tests/e2e/cli_conformance.py PIXLOAD CORPUS

End to end through the shipped library: for every row of the pngsuite and
jpeg-conformance manifests of CORPUS, and of every set kept in the repository under
Tests/fixtures (webp-suite, ...), `pixload fetch --allow-file --no-orientation --format rgba8
--out FILE file://...` must write exactly the manifest's pixels (md5 of the tightly packed
RGBA8 rows) for ok / ok_with_warning rows, and must fail with a status and a message for
must_fail rows. Skips the corpus sets (saying so) when the corpus is absent. Ends with
"N passed, N failed".
"""
import hashlib
import os
import subprocess
import sys
import tempfile


def main():
    pixload, corpus = sys.argv[1], sys.argv[2]
    sets = []
    if os.path.isfile(os.path.join(corpus, "README.md")):
        sets += [(corpus, "pngsuite"), (corpus, "jpeg-conformance")]
    else:
        print(f"cli_conformance: {corpus} is absent: its sets skipped")
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    if os.path.isdir(fixtures):
        sets += [(fixtures, name) for name in sorted(os.listdir(fixtures))
                 if os.path.isfile(os.path.join(fixtures, name, "manifest.tsv"))]
    passed = failed = 0
    out = os.path.join(tempfile.mkdtemp(prefix="pxl-cli-"), "pixels.rgba")
    for root, corpus_set in sets:
        corpus = root
        rows = open(os.path.join(corpus, corpus_set, "manifest.tsv")).read().splitlines()
        header = rows[0].split("\t")
        col = {name: i for i, name in enumerate(header)}
        set_passed = set_failed = 0
        for line in rows[1:]:
            cells = line.split("\t")
            name, expect = cells[col["file"]], cells[col["expect"]]
            url = "file://" + os.path.abspath(os.path.join(corpus, corpus_set, name))
            if os.path.exists(out):
                os.unlink(out)
            run = subprocess.run([pixload, "fetch", "--allow-file", "--no-orientation", "--format", "rgba8",
                                  "--out", out, url], capture_output=True, text=True, timeout=60)
            problem = None
            if expect.startswith("must_fail"):
                if run.returncode != 1 or run.stdout.startswith("OK") or len(run.stdout.split()) < 3:
                    problem = f"expected a failure with a message, got exit {run.returncode}: {run.stdout.strip()}"
            else:
                width, height = int(cells[col["width"]]), int(cells[col["height"]])
                if run.returncode != 0:
                    problem = f"exit {run.returncode}: {run.stdout.strip()} {run.stderr.strip()}"
                else:
                    data = open(out, "rb").read()
                    if len(data) != width * height * 4:
                        problem = f"{len(data)} bytes, expected {width}x{height}x4"
                    elif hashlib.md5(data).hexdigest() != cells[col["rgba8_md5"]]:
                        problem = "pixels differ from the manifest's rgba8_md5"
            if problem:
                set_failed += 1
                print(f"FAIL {corpus_set}/{name} ({expect}): {problem}")
            else:
                set_passed += 1
        print(f"[{corpus_set}] {set_passed} rows as the manifest says, {set_failed} not")
        passed += set_passed
        failed += set_failed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
