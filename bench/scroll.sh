#!/usr/bin/env bash
# bench/scroll.sh STAGE DATA_DIR [RUNS]
#
# The scroll benchmark (bench/scroll.c): 1,000 rows of 150x150 thumbnails over the demo
# photographs, served by a private nginx on 127.0.0.1, one scripted session (slow scroll,
# fling, stop, scroll back, jump to the end) played by three strategies in each run: no
# cancellation, per-row cancel, the table object. Three network conditions:
#
#   loopback    nginx at full speed: a photo arrives in well under a frame
#   throttled   the same nginx answering at most SCROLL_REQ_RATE requests per second
#               (default 30r/s, ~6 MB/s of these photos): excess requests wait at the
#               server, so loads are still under way when their rows leave the screen,
#               and a request cancelled while it waits costs no bytes. SCROLL_RATE (bytes
#               per second per connection beyond a response's first SCROLL_RATE bytes,
#               nginx's limit_rate) adds a bandwidth limit; default 0, none
#   bandwidth   the same nginx sending at most SCROLL_BW_RATE bytes per second per
#               connection (default 1m, nginx's limit_rate; 6 connections: ~6 MB/s), no
#               request limit: a cancelled transfer gives its bandwidth back at once
#
# The throttled and bandwidth locations (/net/, /bw/) are added to the config scripts/nginx.sh writes, then
# nginx reloads it.
#
# Prints a table per run; exits non-zero if any run draws a stale image or misses a
# final-screen image, or if a loopback run misses the target (the table wastes under 10%
# of the bytes the no-cancellation strategy wastes, with a better p95 time to visible).
# The other two conditions report the same figures without that target. Throttled, the
# table wastes least but leaves 3-4 rows of the fling's slow tail undrawn: rows that stay
# about 100 ms mid-fling are requested and cut as they leave, each spending one of
# limit_req's turns (a turn is spent when the request arrives, cancelled or not); then,
# as the tail's rows enter, none of the table's requests arrives for about 350 ms (the
# cancel-storm limit, spent by those cuts). Per-row cancel does best on p95 there.
# Bandwidth-limited, the table's p95 is far better than no cancellation's, its waste near
# 10% of it.
#
#   SCROLL_PORT   nginx port (default: free)     SCROLL_RUNS  runs per condition (3)
#   SCROLL_REQ_RATE, SCROLL_RATE  the throttled condition (30r/s, 0)
#   SCROLL_BW_RATE  the bandwidth condition (1m)
#   SCROLL_CONDITIONS  "loopback throttled bandwidth" (default), or any of them
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [RUNS]}" data="${2:?}" runs="${3:-${SCROLL_RUNS:-3}}"
port="${SCROLL_PORT:-$(scripts/free-port.sh)}" rate="${SCROLL_RATE:-0}" req_rate="${SCROLL_REQ_RATE:-30r/s}"
bw_rate="${SCROLL_BW_RATE:-1m}"

scripts/photos.sh "$data" 300
# A private copy of the library: `make lib` rewrites build/lib's file in place, and a
# process that has it mapped would die of SIGBUS in the middle of a run.
lib=$(mktemp -d "${TMPDIR:-/tmp}/pxl-scroll.XXXXXX")
cp "$(readlink -f "$stage/lib/libpixload.so")" "$lib/libpixload.so.0"
ln -s libpixload.so.0 "$lib/libpixload.so"
cc -O2 -Wall -Wextra -std=c11 -Iinclude bench/scroll.c -o "$lib/scroll" \
  -L"$lib" -Wl,-rpath,"$lib" -lpixload -lm

mkdir -p "$stage/bench-scroll-nginx"
state=$(cd "$stage/bench-scroll-nginx" && pwd)
rm -f "$state/access.log"   # every line is tagged by run anyway; keep the log small
scripts/nginx.sh start "$data" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"; rm -rf "$lib"' EXIT

# The throttled location, /net/, beside nginx.sh's /slow/: limit_req with a large burst
# delays the excess instead of refusing it (503); limit_rate 0 is no limit.
conf="$state/nginx.conf" root=$(cd "$data" && pwd)
grep -q '^ *location /slow/ {' "$conf" && grep -q '^ *server {' "$conf" ||
  { echo "scroll.sh: $conf has no 'server {' or 'location /slow/ {' to add /net/ to" >&2; exit 1; }
sed -i -e "0,/^\( *\)server {/s||\1limit_req_zone \$server_port zone=pxl_scroll:1m rate=$req_rate;\n&|" \
  -e "s|^\( *\)location /slow/ {|\1location /net/ { alias $root/; limit_req zone=pxl_scroll burst=100000; limit_rate $rate; }\n\1location /bw/ { alias $root/; limit_rate $bw_rate; }\n&|" "$conf"
/usr/sbin/nginx -p "$state/" -c "$conf" -e "$state/error.log" -s reload
# The old workers answer (404) until they have gone: wait for five 200s in a row.
ok=0
for _ in $(seq 200); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/net/index.txt")" = 200 ]; then
    ok=$((ok + 1)); [ "$ok" -ge 5 ] && break
  else
    ok=0
  fi
  sleep 0.05
done
[ "$ok" -ge 5 ] || { echo "scroll.sh: nginx did not pick up /net/" >&2; exit 1; }

status=0
tag=$(date +%s)
for condition in ${SCROLL_CONDITIONS:-loopback throttled bandwidth}; do
  case "$condition" in
    loopback)
      echo "== scroll benchmark, loopback (full speed)"
      "$lib/scroll" "http://127.0.0.1:$port" "$data" "$state/access.log" --runs "$runs" \
        --tag "full-$tag" --check target || status=1 ;;
    throttled)
      echo "== scroll benchmark, throttled (nginx answers $req_rate; limit_rate $rate)"
      "$lib/scroll" "http://127.0.0.1:$port/net" "$data" "$state/access.log" --runs "$runs" \
        --tag "net-$tag" --check clean || status=1 ;;
    bandwidth)
      echo "== scroll benchmark, bandwidth-limited (nginx sends $bw_rate/s per connection)"
      "$lib/scroll" "http://127.0.0.1:$port/bw" "$data" "$state/access.log" --runs "$runs" \
        --tag "bw-$tag" --check clean || status=1 ;;
    *) echo "scroll.sh: unknown condition '$condition'" >&2; exit 2 ;;
  esac
done
exit $status
