#!/usr/bin/env bash
# scripts/bench-heldout.sh STAGE [RUNS]
#
# Issue 41's CPU ratio kind of file by kind of file (bench/heldout.py): the web photos our
# demo set lacks (progressive and baseline 4:2:0/4:2:2/4:4:4, ICC profiles, EXIF
# orientation, grayscale, CMYK, restart markers, arithmetic coding, 160 to 4000 px, PNGs
# with alpha, palette, 16 bits, interlacing), made now by bench/heldout_set.py from
# ../shared/corpus and Debian's photographs into STAGE/heldout-set (kept between runs),
# served by a private nginx on 127.0.0.1. RUNS (default 3) interleaved runs, medians.
# BENCH_BEFORE=DIR (a build/ of another commit) adds its `pixload fetch` as a column;
# HELDOUT_ONLY=cat,cat measures those categories alone; HELDOUT_FILES (30) files a
# category, HELDOUT_URLS (300) URLs a category.
set -euo pipefail
stage="${1:?usage: $0 STAGE [RUNS]}"
runs="${2:-${BENCH_HELDOUT_RUNS:-3}}"
port="${BENCH_PORT:-$(scripts/free-port.sh)}"
out="$stage/bench-heldout"
set_dir="$stage/heldout-set"
mkdir -p "$out"
python3 bench/heldout_set.py "$set_dir" "${HELDOUT_FILES:-30}"
cc -O2 -Wall bench/bare_decode.c bench/direct/*.c -Ibench/direct/include -Ibench/direct -o "$out/bare-decode" \
  -ljpeg -lpng -lwebp -lgif -lavif -lpthread

state="$stage/bench-heldout-nginx"
scripts/nginx.sh start "$set_dir" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT

echo "bench heldout: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); pixload $("$stage/bin/pixload" version | head -1)"
python3 bench/heldout.py --pixload "$stage/bin/pixload" --bare "$out/bare-decode" --set "$set_dir" \
  --base-url "http://127.0.0.1:$port" --runs "$runs" --urls "${HELDOUT_URLS:-300}" \
  ${HELDOUT_ONLY:+--only "$HELDOUT_ONLY"} ${BENCH_BEFORE:+--before "$BENCH_BEFORE"}
