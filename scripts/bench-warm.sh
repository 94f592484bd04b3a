#!/usr/bin/env bash
# scripts/bench-warm.sh STAGE DATA_DIR [RUNS]
#
# `make bench-warm` (part of `make bench`): the warm start. 8 camera photographs (8-16 MP,
# from Debian's wallpaper packages) served by nginx on loopback are loaded once as
# 150x150 FILL thumbnails into a disk cache; then a fresh loader in a fresh state loads the
# same screen from that cache, timed from the first pxl_load to the 8th callback
# (bench/warm_start.c), with thumbnails kept on disk (the default) and without (every
# photo decoded again, as before). Medians of RUNS (default 3).
#
# The photographs: scripts/camera-photos.sh when the tree has it (the benchmarks'
# large-photo set); else the same selection made here.
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [RUNS]}" data="${2:?}" runs="${3:-${BENCH_RUNS:-3}}"
port="${BENCH_PORT:-$(scripts/free-port.sh)}"

if [ -x scripts/camera-photos.sh ]; then
  scripts/camera-photos.sh "$data"
elif [ ! -f "$data/index.txt" ]; then
  # The JPEG photographs of 8 to 16 MP in the wallpaper packages, as they are.
  mkdir -p "$data/img"
  for p in lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds ukui-wallpapers; do
    dpkg -L "$p" 2>/dev/null | grep -iE '\.jpe?g$' | LC_ALL=C sort || true
  done | python3 -c '
import os, shutil, sys
from PIL import Image
out, seen, names = sys.argv[1], set(), []
for path in sys.stdin.read().split():
    real = os.path.realpath(path)
    if real in seen or not os.path.isfile(real): continue
    seen.add(real)
    with Image.open(real) as im: mp = im.size[0] * im.size[1] / 1e6
    if 8.0 <= mp <= 16.0:
        name = "img/%02d-%s" % (len(names), os.path.basename(path))
        shutil.copyfile(real, os.path.join(out, name)); names.append(name)
if len(names) < 8: sys.exit("bench-warm.sh: fewer than 8 photos of 8-16 MP; run scripts/deps.sh python")
open(os.path.join(out, "index.txt"), "w").write("".join(n + "\n" for n in names))
' "$data"
fi

mkdir -p "$stage/bench"
cc -O2 -Wall -Wextra -std=c11 -Iinclude bench/warm_start.c -o "$stage/bench/warm_start" \
  -L"$stage/lib" -lpixload -Wl,-rpath,"$(cd "$stage/lib" && pwd)"

state="$stage/bench-warm-nginx"
cache=$(mktemp -d "${TMPDIR:-/tmp}/pxl-warm.XXXXXX")
scripts/nginx.sh start "$data" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"; rm -rf "$cache"' EXIT
head -8 "$data/index.txt" | sed "s|^|http://127.0.0.1:$port/|" > "$stage/bench/warm-urls.txt"

sizes=$(head -8 "$data/index.txt" | sed "s|^|$data/|" | xargs python3 -c '
import sys
from PIL import Image
mp = [Image.open(p).size[0] * Image.open(p).size[1] / 1e6 for p in sys.argv[1:]]
print("%.1f-%.1f MP, %.0f MB of JPEG" % (min(mp), max(mp), sum(__import__("os").path.getsize(p) for p in sys.argv[1:]) / 1e6))')
echo "bench-warm: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); photos: $sizes"
"$stage/bench/warm_start" "$stage/bench/warm-urls.txt" "$cache" "$runs"
