#!/usr/bin/env bash
# bench/scroll.sh STAGE DATA_DIR [RUNS]
#
# The scroll benchmark (bench/scroll.c): 1,000 rows of 150x150 thumbnails over the demo
# photographs, served by a private nginx on 127.0.0.1, one scripted session (slow scroll,
# fling, stop, scroll back, jump to the end) played by three strategies in each run: no
# cancellation, per-row cancel, the table object. Two network conditions:
#
#   loopback    nginx at full speed: a photo arrives in well under a frame
#   throttled   the same nginx answering at most SCROLL_REQ_RATE requests per second
#               (default 30r/s, ~6 MB/s of these photos): excess requests wait at the
#               server, so loads are still under way when their rows leave the screen,
#               and a request cancelled while it waits costs no bytes. SCROLL_RATE (bytes
#               per second per connection beyond a response's first SCROLL_RATE bytes,
#               nginx's limit_rate) adds a bandwidth limit; default 0, none
#
# The throttled location (/net/) is added to the config scripts/nginx.sh writes, then
# nginx reloads it.
#
# Prints a table per run; exits non-zero if a run misses the issue's target (the
# table wastes under 10% of the bytes the no-cancellation strategy wastes, with a better
# p95 time to visible) or any run draws a stale or misses a final image.
#
#   SCROLL_PORT   nginx port (default 18086)     SCROLL_RUNS  runs per condition (3)
#   SCROLL_REQ_RATE, SCROLL_RATE  the throttled condition (30r/s, 0)
#   SCROLL_CONDITIONS  "loopback throttled" (default), or either alone
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [RUNS]}" data="${2:?}" runs="${3:-${SCROLL_RUNS:-3}}"
port="${SCROLL_PORT:-18086}" rate="${SCROLL_RATE:-0}" req_rate="${SCROLL_REQ_RATE:-30r/s}"

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
  -e "s|^\( *\)location /slow/ {|\1location /net/ { alias $root/; limit_req zone=pxl_scroll burst=100000; limit_rate $rate; }\n&|" "$conf"
/usr/sbin/nginx -p "$state/" -c "$conf" -e "$state/error.log" -s reload
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/net/index.txt")" = 200 ] && break
  sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/net/index.txt")" = 200 ] ||
  { echo "scroll.sh: nginx did not pick up /net/" >&2; exit 1; }

status=0
tag=$(date +%s)
for condition in ${SCROLL_CONDITIONS:-loopback throttled}; do
  case "$condition" in
    loopback)
      echo "== scroll benchmark, loopback (full speed)"
      "$lib/scroll" "http://127.0.0.1:$port" "$data" "$state/access.log" --runs "$runs" \
        --tag "full-$tag" --check target || status=1 ;;
    throttled)
      echo "== scroll benchmark, throttled (nginx answers $req_rate; limit_rate $rate)"
      "$lib/scroll" "http://127.0.0.1:$port/net" "$data" "$state/access.log" --runs "$runs" \
        --tag "net-$tag" --check target || status=1 ;;
    *) echo "scroll.sh: unknown condition '$condition'" >&2; exit 2 ;;
  esac
done
exit $status
