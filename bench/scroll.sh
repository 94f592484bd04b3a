#!/usr/bin/env bash
# bench/scroll.sh STAGE DATA_DIR [RUNS]
#
# The scroll benchmark (bench/scroll.c): 1,000 rows of 150x150 thumbnails over the demo
# photographs, served by a private nginx on 127.0.0.1, one scripted session (slow scroll,
# fling, stop, scroll back, jump to the end) played by three strategies in each run: no
# cancellation, per-row cancel, the table object. Five network conditions:
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
#   latency     every connection through bench/netsim.py, a proxy of ours on loopback that
#               delays each byte by half of SCROLL_RTT_MS (default 100) each way, and a new
#               connection's first bytes by one round trip more (the handshake): first
#               byte after 2 round trips on a new connection, 1 on a kept-alive one
#   mobile      the same round trip and all responses sharing one link of SCROLL_MOBILE_RATE
#               bytes per second (default 2000000): a phone on a busy network
#
# This container's kernel has no netem ("Specified qdisc kind is unknown"), hence the
# proxy. It listens on its own ports and talks to nginx on a third one whose socket
# buffers are small (sndbuf), so that a transfer the client cuts stops costing nginx's
# bytes about as soon as it would over a real bottleneck. Before the runs the script
# measures, through each proxy, the first-byte time on a new and on a kept-alive
# connection and (mobile) the throughput of 6 parallel downloads, prints them and stops
# if they are not what the condition says.
#
# The throttled and bandwidth locations (/net/, /bw/) are added to the config scripts/nginx.sh writes, then
# nginx reloads it.
#
# Prints a table per run and, per condition, the medians over the runs with their range.
# Per condition, the first run's trace (scroll --trace) goes to STAGE/bench-scroll-
# CONDITION.trace and its timeline, one panel per strategy (rows on screen, loading,
# drawn, wasted; bench/scroll_plot.py, Pillow), to STAGE/bench-scroll-CONDITION.png.
# Exits non-zero if any run of any condition draws a stale image, misses a final-screen
# image or misses one of the targets (issue 17), checked in every condition: the table
# leaves no more visits undrawn than per-row cancel (none where per-row cancel leaves
# none), its p95 time to visible is no worse than per-row cancel's, and it wastes under
# 10% of the bytes the no-cancellation strategy wastes.
#
#   SCROLL_PORT   nginx port (default: free)     SCROLL_RUNS  runs per condition (3)
#   SCROLL_REQ_RATE, SCROLL_RATE  the throttled condition (30r/s, 0)
#   SCROLL_BW_RATE  the bandwidth condition (1m)
#   SCROLL_RTT_MS, SCROLL_MOBILE_RATE  the latency and mobile conditions (100, 2000000)
#   SCROLL_CONDITIONS  "loopback throttled bandwidth latency mobile" (default), or any of them
#   SCROLL_ISOLATION   pxl_config.isolation: modules (default), none, all, or a list
#                      ("modules,all"): each run plays the session under each in turn, and
#                      the medians and targets are given per isolation (scroll --isolation)
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [RUNS]}" data="${2:?}" runs="${3:-${SCROLL_RUNS:-3}}"
port="${SCROLL_PORT:-$(scripts/free-port.sh)}" rate="${SCROLL_RATE:-0}" req_rate="${SCROLL_REQ_RATE:-30r/s}"
bw_rate="${SCROLL_BW_RATE:-1m}" rtt="${SCROLL_RTT_MS:-100}" mobile_rate="${SCROLL_MOBILE_RATE:-2000000}"
conditions="${SCROLL_CONDITIONS:-loopback throttled bandwidth latency mobile}"
isolation="${SCROLL_ISOLATION:-modules}"

scripts/photos.sh "$data" 300
# A private copy of the library: `make lib` rewrites build/lib's file in place, and a
# process that has it mapped would die of SIGBUS in the middle of a run.
lib=$(mktemp -d "${TMPDIR:-/tmp}/pxl-scroll.XXXXXX")
cp "$(readlink -f "$stage/lib/libpixload.so")" "$lib/libpixload.so.0"
ln -s libpixload.so.0 "$lib/libpixload.so"
# The decode worker and the modules beside it, where the library looks (LIBDIR/pixload/).
cp -r "$stage/lib/pixload" "$lib/pixload"
cc -O2 -Wall -Wextra -std=c11 -Iinclude bench/scroll.c -o "$lib/scroll" \
  -L"$lib" -Wl,-rpath,"$lib" -lpixload -lm

mkdir -p "$stage/bench-scroll-nginx"
state=$(cd "$stage/bench-scroll-nginx" && pwd)
rm -f "$state/access.log"   # every line is tagged by run anyway; keep the log small
scripts/nginx.sh start "$data" "$port" "$state"
proxies=()
cleanup() {
  for pid in "${proxies[@]}"; do kill "$pid" 2>/dev/null || true; done
  scripts/nginx.sh stop "$state"
  rm -rf "$lib"
}
trap cleanup EXIT

# The throttled location, /net/, beside nginx.sh's /slow/: limit_req with a large burst
# delays the excess instead of refusing it (503); limit_rate 0 is no limit.
conf="$state/nginx.conf" root=$(cd "$data" && pwd) sim_upstream=$(scripts/free-port.sh)
grep -q '^ *location /slow/ {' "$conf" && grep -q '^ *server {' "$conf" && grep -q "^ *listen 127.0.0.1:$port;" "$conf" ||
  { echo "scroll.sh: $conf has no 'server {' or 'location /slow/ {' to add /net/ to" >&2; exit 1; }
sed -i -e "0,/^\( *\)server {/s||\1limit_req_zone \$server_port zone=pxl_scroll:1m rate=$req_rate;\n&|" \
  -e "s|^\( *\)listen 127.0.0.1:$port;|&\n\1listen 127.0.0.1:$sim_upstream sndbuf=16k;|" \
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

# netsim.py PORT RATE: starts a proxy to nginx's small-buffer port, waits until it listens.
start_proxy() {
  local ready="$state/netsim-$1.ready"
  rm -f "$ready"
  python3 bench/netsim.py "$1" "$sim_upstream" --rtt-ms "$rtt" --rate "$2" --ready "$ready" &
  proxies+=($!)
  for _ in $(seq 100); do [ -f "$ready" ] && return 0; sleep 0.05; done
  echo "scroll.sh: bench/netsim.py did not start on port $1" >&2; exit 1
}

# Measures what a proxy does: first byte on a new connection (2 round trips: handshake,
# request), on the same connection again (1), and with a rate, the throughput of 6
# parallel downloads of the 6 largest photos. Stops the script when they are not what they should be.
check_proxy() {
  local sim_port="$1" rate="$2" first second
  read -r first second < <(python3 bench/netsim.py --probe "http://127.0.0.1:$sim_port/index.txt" \
    "http://127.0.0.1:$sim_port/index.txt" | awk '{printf "%s ", $1} END {print ""}')
  echo "   measured: first byte after ${first} ms on a new connection, ${second} ms on a kept-alive one" \
    "(expected $((2 * rtt)) and $rtt)"
  awk -v a="$first" -v b="$second" -v rtt="$rtt" \
    'BEGIN { exit !(a >= 2 * rtt && a < 2 * rtt + 60 && b >= rtt && b < rtt + 40) }' ||
    { echo "scroll.sh: the proxy on port $sim_port does not delay as it should" >&2; exit 1; }
  [ "$rate" -gt 0 ] || return 0
  local urls=() start end bytes
  # The 6 largest photos: a second or more at the rate, so that connection setup and
  # starting curl weigh little.
  for f in $(cd "$data" && ls -S $(cat index.txt) | head -6); do urls+=("http://127.0.0.1:$sim_port/$f"); done
  start=$(date +%s.%N)
  bytes=$(for u in "${urls[@]}"; do curl -s -o /dev/null -w '%{size_download}\n' "$u" & done; wait)
  end=$(date +%s.%N)
  bytes=$(echo "$bytes" | awk '{ s += $1 } END { print s }')
  # Less the 2 round trips of latency before the first byte.
  local measured
  measured=$(awk -v b="$bytes" -v s="$start" -v e="$end" -v rtt="$rtt" 'BEGIN { printf "%.0f", b / (e - s - 2 * rtt / 1000) }')
  echo "   measured: 6 parallel downloads, $bytes bytes at $measured bytes/s in total (expected $rate)"
  awk -v m="$measured" -v r="$rate" 'BEGIN { exit !(m > 0.8 * r && m < 1.2 * r) }' ||
    { echo "scroll.sh: the proxy on port $sim_port does not limit the rate as it should" >&2; exit 1; }
}

# plot CONDITION TITLE: the condition's trace as a PNG (a failed plot fails the bench).
plot() {
  python3 bench/scroll_plot.py "$stage/bench-scroll-$1.trace" "$stage/bench-scroll-$1.png" \
    --title "scroll benchmark, $1: $2 (first run; pixload $(date -u +%Y-%m-%d))" || status=1
}

status=0
tag=$(date +%s)
for condition in $conditions; do
  case "$condition" in
    loopback)
      echo "== scroll benchmark, loopback (full speed)"
      "$lib/scroll" "http://127.0.0.1:$port" "$data" "$state/access.log" --runs "$runs" --isolation "$isolation" \
        --tag "full-$tag" --trace "$stage/bench-scroll-$condition.trace" || status=1
      plot "$condition" "nginx at full speed" ;;
    throttled)
      echo "== scroll benchmark, throttled (nginx answers $req_rate; limit_rate $rate)"
      "$lib/scroll" "http://127.0.0.1:$port/net" "$data" "$state/access.log" --runs "$runs" --isolation "$isolation" \
        --tag "net-$tag" --trace "$stage/bench-scroll-$condition.trace" || status=1
      plot "$condition" "nginx answers $req_rate, limit_rate $rate" ;;
    bandwidth)
      echo "== scroll benchmark, bandwidth-limited (nginx sends $bw_rate/s per connection)"
      "$lib/scroll" "http://127.0.0.1:$port/bw" "$data" "$state/access.log" --runs "$runs" --isolation "$isolation" \
        --tag "bw-$tag" --trace "$stage/bench-scroll-$condition.trace" || status=1
      plot "$condition" "nginx sends $bw_rate/s per connection" ;;
    latency|mobile)
      sim_port=$(scripts/free-port.sh) sim_rate=0
      [ "$condition" = mobile ] && sim_rate=$mobile_rate
      if [ "$condition" = latency ]; then
        echo "== scroll benchmark, latency ($rtt ms round trip on every connection, bench/netsim.py)"
      else
        echo "== scroll benchmark, mobile ($rtt ms round trip, $sim_rate bytes/s in total, bench/netsim.py)"
      fi
      start_proxy "$sim_port" "$sim_rate"
      check_proxy "$sim_port" "$sim_rate"
      "$lib/scroll" "http://127.0.0.1:$sim_port" "$data" "$state/access.log" --runs "$runs" --isolation "$isolation" \
        --tag "$condition-$tag" --trace "$stage/bench-scroll-$condition.trace" || status=1
      kill "${proxies[-1]}" 2>/dev/null || true
      plot "$condition" "$rtt ms round trip$([ "$sim_rate" -gt 0 ] && echo ", $sim_rate bytes/s in total")" ;;
    *) echo "scroll.sh: unknown condition '$condition'" >&2; exit 2 ;;
  esac
done
exit $status
