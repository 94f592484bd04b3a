#!/usr/bin/env bash
# scripts/bench.sh STAGE DATA_DIR [RUNS]
#
# `make bench`: serves the demo photographs from a private nginx on 127.0.0.1 and runs
# bench/compare.py (pixload fetch vs the bare C baseline vs Python), side by side, then
# the scroll benchmark (bench/scroll.sh: three scrolling strategies, table object included).
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [RUNS]}" data="${2:?}" runs="${3:-${BENCH_RUNS:-5}}"
port="${BENCH_PORT:-$(scripts/free-port.sh)}"

scripts/photos.sh "$data" 300
mkdir -p "$stage/bench"
cc -O2 -Wall bench/baseline.c -o "$stage/bench/baseline" -lcurl -ljpeg -lpng -lpthread

state="$stage/bench-nginx"
scripts/nginx.sh start "$data" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT
sed "s|^|http://127.0.0.1:$port/|" "$data/index.txt" > "$stage/bench/urls.txt"

echo "bench: $(nproc) cores; pixload $("$stage/bin/pixload" version)"
python3 bench/compare.py --pixload "$stage/bin/pixload" --baseline "$stage/bench/baseline" \
  --urls "$stage/bench/urls.txt" --runs "$runs"

# The scroll benchmark has its own nginx (and port); a missed target is reported, not fatal,
# so that `make bench` still goes on to the benchmarks after it.
bench/scroll.sh "$stage" "$data" ||
  echo "bench: the scroll benchmark missed its target or drew a wrong image (see above)"
