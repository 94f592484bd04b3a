#!/usr/bin/env bash
# scripts/bench-table.sh STAGE DATA_DIR CAMERA_DIR [RUNS]
#
# The performance table of README's "Performance" section (bench/table.py): pixload
# against the bare libjpeg-turbo/libpng decode from memory (bench/bare_decode.c), and its
# Python package against aiohttp + Pillow, over the web-size demo set (scripts/photos.sh)
# and the 8-16 MP set (scripts/camera-photos.sh), both served by a private nginx on
# 127.0.0.1. RUNS (default 3) interleaved runs, medians. BENCH_BEFORE=DIR (a build/ of
# another commit) adds that build as a "before" column; BENCH_ISOLATION_ALL=1 a column of
# the same build with every decode in a worker (PXL_ISOLATION_ALL).
#
# The isolation rows (issue 39; bench/isolation_cost.py's measure, in the same interleaved
# runs): whole-process CPU (the decode workers included) and wall per image of `pixload
# fetch` with --isolation none against all over the web set and its JPEGs (target 1.15x),
# and against modules (the default) over 100 HEIC, 100 JPEG XL and 100 SVG files made from
# it (target 1.05x; made once in STAGE/bench-isolation, served by the same nginx).
#
# Two readings of the web CPU ratio (issue 41). The first row is the CLI's own figure
# (getrusage from its first pxl_load to its last callback) over bare-decode's single cold
# pass; the second is what issue 41 measured from outside: user+sys of the whole process
# (the child's rusage: dynamic loading, loader start and teardown included) / 300, over
# the decode-only loop with a warm-up pass, 3 timed passes and PNGs through libpng's
# simplified API (bare-decode --warmup --repeat 3 --png-simplified). Where they differ,
# measured on the demo set (medians of interleaved runs, 2 shared cores):
# - start-up and teardown: the whole process costs ~0.08-0.10 ms per image more than the
#   CLI's span (2.78 against 2.68 ms; ~1,230 of its page faults are the start-up's).
# - the loop's warm-up, extra passes and simplified PNG API: 1-2 % at most (3.23-3.33 against
#   3.30-3.35 ms per image): not the cause.
# - the data, by far the largest: the bare decode inflates PNGs with zlib and unfilters
#   with libpng, pixload with libdeflate and its own SIMD unfilter (png_fast.c). The demo
#   set's 30 PNGs (10 % of the images) are 38 % of the loop's CPU, and pixload decodes
#   them at 0.56x; on its 270 JPEGs alone the ratio is 0.97-0.99 (baseline 0.98-1.00,
#   progressive 0.97-0.98) before start-up, 1.00-1.02 after (the table's row "... JPEGs
#   only" measures it in every run). A set of web photos with few
#   or no PNGs reads about 1.0 here, and more where per-image costs weigh more than
#   they do here (smaller images, a slower loopback, other work on the cores).
# - the page faults of the bodies: every body is written into fresh pages (~50 faults
#   per image; the loop read its files before timing). Both readings include them.
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR CAMERA_DIR [RUNS]}" data="${2:?}" camera="${3:?}"
runs="${4:-${BENCH_TABLE_RUNS:-3}}"
# Each camera photo is loaded this many times per run (distinct URLs: no cache helps).
camera_repeat="${BENCH_CAMERA_REPEAT:-4}"
port="${BENCH_PORT:-$(scripts/free-port.sh)}"

scripts/photos.sh "$data" 300
scripts/camera-photos.sh "$camera"
out="$stage/bench-table"
mkdir -p "$out/www"
cc -O2 -Wall bench/bare_decode.c bench/direct/*.c -Ibench/direct/include -Ibench/direct -o "$out/bare-decode" \
  -ljpeg -lpng -lwebp -lgif -lavif -lpthread
ln -sfn "$(cd "$data" && pwd)" "$out/www/web"
ln -sfn "$(cd "$camera" && pwd)" "$out/www/camera"
mkdir -p "$stage/bench-isolation"
python3 -c 'import sys; sys.path.insert(0, "bench"); import isolation_cost; isolation_cost.prepare(*sys.argv[1:])' \
  "$data" "$stage/bench-isolation"
ln -sfn "$(cd "$stage/bench-isolation" && pwd)" "$out/www/isolation"

state="$stage/bench-table-nginx"
scripts/nginx.sh start "$out/www" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT

sed "s|^|http://127.0.0.1:$port/web/|" "$data/index.txt" > "$out/web-urls.txt"
sed "s|^|$data/|" "$data/index.txt" > "$out/web-files.txt"
sed "s|^|$camera/|" "$camera/index.txt" > "$out/camera-files.txt"
# The web set's JPEGs alone: the second reading without the PNGs (see the header).
grep -vi '\.png$' "$out/web-urls.txt" > "$out/web-jpeg-urls.txt"
grep -vi '\.png$' "$out/web-files.txt" > "$out/web-jpeg-files.txt"
for kind in heic jxl svg; do
  (cd "$stage/bench-isolation/$kind" && ls *."$kind") | sed "s|^|http://127.0.0.1:$port/isolation/$kind/|" \
    > "$out/$kind-urls.txt"
done
for i in $(seq 1 "$camera_repeat"); do
  sed "s|^\(.*\)$|http://127.0.0.1:$port/camera/\1?copy=$i|" "$camera/index.txt"
done > "$out/camera-urls.txt"

echo "bench table: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg); pixload $("$stage/bin/pixload" version)"
python3 bench/table.py --pixload "$stage/bin/pixload" --libdir "$stage/lib" --bare "$out/bare-decode" \
  --web-urls "$out/web-urls.txt" --web-files "$out/web-files.txt" \
  --web-jpeg-urls "$out/web-jpeg-urls.txt" --web-jpeg-files "$out/web-jpeg-files.txt" \
  --camera-urls "$out/camera-urls.txt" --camera-files "$out/camera-files.txt" --runs "$runs" \
  --isolation-rows "web JPEG/PNG=all=$out/web-urls.txt" --isolation-rows "web JPEG=all=$out/web-jpeg-urls.txt" \
  --isolation-rows "HEIC=modules=$out/heic-urls.txt" --isolation-rows "JPEG XL=modules=$out/jxl-urls.txt" \
  --isolation-rows "SVG=modules=$out/svg-urls.txt" \
  ${BENCH_BEFORE:+--before "$BENCH_BEFORE"} ${BENCH_ISOLATION_ALL:+--isolation-all}
