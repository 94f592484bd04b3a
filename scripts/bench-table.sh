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

state="$stage/bench-table-nginx"
scripts/nginx.sh start "$out/www" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT

sed "s|^|http://127.0.0.1:$port/web/|" "$data/index.txt" > "$out/web-urls.txt"
sed "s|^|$data/|" "$data/index.txt" > "$out/web-files.txt"
sed "s|^|$camera/|" "$camera/index.txt" > "$out/camera-files.txt"
for i in $(seq 1 "$camera_repeat"); do
  sed "s|^\(.*\)$|http://127.0.0.1:$port/camera/\1?copy=$i|" "$camera/index.txt"
done > "$out/camera-urls.txt"

echo "bench table: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg); pixload $("$stage/bin/pixload" version)"
python3 bench/table.py --pixload "$stage/bin/pixload" --libdir "$stage/lib" --bare "$out/bare-decode" \
  --web-urls "$out/web-urls.txt" --web-files "$out/web-files.txt" \
  --camera-urls "$out/camera-urls.txt" --camera-files "$out/camera-files.txt" --runs "$runs" \
  ${BENCH_BEFORE:+--before "$BENCH_BEFORE"} ${BENCH_ISOLATION_ALL:+--isolation-all}
