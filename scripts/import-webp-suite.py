#!/usr/bin/env python3
"""scripts/import-webp-suite.py GIT_DIR [OUTDIR]

Rebuilds Tests/fixtures/webp-suite (the default OUTDIR) from a clone of libwebp's public
test data (github.com/webmproject/libwebp-test-data; GIT_DIR may be a bare repository):
copies the selected .webp files of its HEAD and writes manifest.tsv with expected pixels
from `dwebp -pam` run now (dwebp's defaults: fancy upsampling, no dithering; straight
RGBA8, alpha 255 where the file has none; no colour management). Files dwebp refuses
become must_fail rows. Where the suite's own libwebp_tests.md5 lists the PAM's md5, the
PAM dwebp wrote here must match it, so the expected pixels are upstream's, not just this
machine's dwebp's. Run by hand when the selection changes; the result is committed.
"""
import hashlib
import os
import subprocess
import sys

# Left out to keep the set small (< 2 MB): bryce.webp (3.5 MB) and
# lossy_extreme_probabilities.webp (0.5 MB), both plain lossy VP8 like many kept here.
SKIP = {"bryce.webp", "lossy_extreme_probabilities.webp"}

git_dir = sys.argv[1]
out_dir = sys.argv[2] if len(sys.argv) > 2 else "Tests/fixtures/webp-suite"


def git(*args):
    return subprocess.run(["git", "--git-dir", git_dir] + list(args), capture_output=True, check=True).stdout


commit = git("rev-parse", "HEAD").decode().strip()
names = sorted(n for n in git("ls-tree", "--name-only", "HEAD").decode().split("\n")
               if n.endswith(".webp") and n not in SKIP)
upstream = {}
for line in git("show", "HEAD:libwebp_tests.md5").decode().splitlines():
    parts = line.split()
    if len(parts) == 2:
        upstream[parts[1]] = parts[0]

os.makedirs(out_dir, exist_ok=True)
rows, checked, absent = [], 0, []
for name in names:
    try:
        data = git("show", f"HEAD:{name}")
    except subprocess.CalledProcessError:  # a snapshot may lack its largest blobs
        absent.append(name)
        continue
    path = os.path.join(out_dir, name)
    with open(path, "wb") as f:
        f.write(data)
    r = subprocess.run(["dwebp", "-pam", path, "-o", "-"], capture_output=True)
    if r.returncode != 0 or not r.stdout.startswith(b"P7\n"):
        rows.append((name, "must_fail", "", "", ""))
        continue
    pam = r.stdout
    want = upstream.get(f"{name}.pam")
    if want is not None:
        if hashlib.md5(pam).hexdigest() != want:
            sys.exit(f"import-webp-suite: dwebp's PAM of {name} differs from libwebp_tests.md5")
        checked += 1
    end = pam.index(b"ENDHDR\n") + 7
    head = dict(l.split(b" ", 1) for l in pam[:end].split(b"\n")[1:-2])
    w, h = int(head[b"WIDTH"]), int(head[b"HEIGHT"])
    pixels = pam[end:end + w * h * 4]
    rows.append((name, "ok", w, h, hashlib.md5(pixels).hexdigest()))

with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
    f.write("file\tformat\texpect\twidth\theight\trgba8_md5\n")
    for name, expect, w, h, m in rows:
        f.write(f"{name}\twebp\t{expect}\t{w}\t{h}\t{m}\n")
print(f"import-webp-suite: {len(rows)} files from {commit} ({sum(r[1] == 'ok' for r in rows)} ok, "
      f"{sum(r[1] != 'ok' for r in rows)} must_fail); {checked} PAMs equal to libwebp_tests.md5; "
      f"not in the clone: {', '.join(absent) or 'none'}")
