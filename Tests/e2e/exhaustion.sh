#!/usr/bin/env bash
# Tests/e2e/exhaustion.sh: pixload when resources run out (Tests/e2e/exhaust.c does the
# loading; this script sets the limits). About a minute. The last line is
# "N passed, N failed"; the exit status is non-zero on any failure.
#
#   queued     20,000 loads queued behind a server that never answers: RSS per queued
#              request (< 4 KiB), then all CANCELLED exactly once by pxl_loader_free
#   undrained  300 full-size images (1.2 MB of pixels each) for a queue nobody drains:
#              the waiting results stay within 64 MiB (+ what was decoding), then
#              draining delivers all 300 with their images
#   full disk  the disk cache on a 256 KiB tmpfs (or, where mounting is not allowed, under
#              `ulimit -f 16`): every load succeeds, and the failed writes cost one log line
#   fds        `ulimit -n` 64 and 32: every load succeeds; 8: every request still gets its
#              one callback; 6, 5, 4 (ten runs each): refusals with a clear status or
#              failed loads, never a crash or a hang
#   threads    pthread_create failing with EAGAIN after n threads (an LD_PRELOAD shim,
#              Tests/e2e/thread_limit.c, as under `ulimit -u` or a cgroup pids limit; the
#              tests run as root, where RLIMIT_NPROC does not apply): pxl_loader_new
#              returns PXL_E_NO_MEMORY for every n too small, leaves no thread or
#              descriptor behind, and a loader works afterwards
#
#   PXL_LIBDIR      directory of libpixload.so  (default build/lib)
#   PXL_INCLUDEDIR  directory of pixload.h      (default include)
#   PXL_EXHAUST_PORT  nginx port                (default: a free one)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$root/$1" ;; esac; }
libdir=$(abs "${PXL_LIBDIR:-build/lib}")
incdir=$(abs "${PXL_INCLUDEDIR:-include}")
port="${PXL_EXHAUST_PORT:-$("$root/scripts/free-port.sh")}"

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-exhaust.XXXXXX")
mounted=""
cleanup() {
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1 || true
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# Runs exhaust, shows its output, counts its PASS/FAIL lines; a crash or a timeout fails.
run() {
  local what="$1"; shift
  local out="$work/out.txt" rc
  timeout 120 "$@" >"$out" 2>"$work/err.txt"
  rc=$?
  cat "$out"
  passed=$((passed + $(grep -c '^PASS' "$out")))
  failed=$((failed + $(grep -c '^FAIL' "$out")))
  if [ $rc -ge 124 ]; then fail "$what: exit status $rc (crash or hang)"; tail -5 "$work/err.txt"; fi
  return 0
}

mkdir -p "$work/lib"
cp "$(readlink -f "$libdir/libpixload.so")" "$work/lib/libpixload.so"
ln -s libpixload.so "$work/lib/libpixload.so.0"
gcc -std=c11 -O1 -g -Wall -Wextra "$root/Tests/capi/mkfixtures.c" -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures" || exit 1
gcc -std=c11 -O1 -g -Wall -Wextra -I "$incdir" "$root/Tests/e2e/exhaust.c" -L "$work/lib" -Wl,-rpath,"$work/lib" \
  -lpixload -lpthread -ldl -o "$work/exhaust" || exit 1
gcc -std=c11 -O1 -g -Wall -Wextra -shared -fPIC "$root/Tests/e2e/thread_limit.c" -ldl -o "$work/thread_limit.so" || exit 1
mkdir -p "$work/www"
"$work/mkfixtures" "$work/www" >/dev/null
"$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx" || exit 1
base="http://127.0.0.1:$port"
ex="$work/exhaust"

echo "== queued: 20,000 requests to a server that never answers"
run queued "$ex" queued 20000

echo "== undrained: a queue nobody drains"
run undrained "$ex" undrained "$base" 300

echo "== full disk"
mkdir -p "$work/small"
if mount -t tmpfs -o size=256k,mode=0700 pxl-exhaust "$work/small" 2>/dev/null; then
  mounted="$work/small"
  echo "disk cache on a 256 KiB tmpfs"
  run "full disk" "$ex" loads "$base" 60 "$work/small/cache"
else
  echo "cannot mount a tmpfs here: the cache under ulimit -f 16 (16 KiB files) instead"
  run "full disk" bash -c "ulimit -f 16; exec '$ex' loads '$base' 60 '$work/small/cache'"
fi
grep -q '^loads ok: 60$' "$work/out.txt" && pass "full disk: all 60 loads succeeded" || fail "full disk: not every load succeeded"
lines=$(grep -c 'disk cache: ' "$work/err.txt")
echo "library log lines: $lines"; sed 's/^/  /' "$work/err.txt"
[ "$lines" = 1 ] && pass "full disk: one log line" || fail "full disk: $lines log lines (want 1)"
[ -n "$mounted" ] && { df -k "$mounted" | tail -1; umount "$mounted"; mounted=""; }

for n in 64 32; do
  echo "== ulimit -n $n"
  run "ulimit -n $n" bash -c "ulimit -n $n; exec '$ex' loads '$base' 300 '$work/fd-cache-$n'"
  grep -q '^loads ok: 300$' "$work/out.txt" && pass "ulimit -n $n: all 300 loads succeeded" || fail "ulimit -n $n: not every load succeeded"
done
echo "== ulimit -n 8"
run "ulimit -n 8" bash -c "ulimit -n 8; exec '$ex' loads '$base' 300 '$work/fd-cache-8'"
# Fewer still: pxl_queue_new or pxl_loader_new may refuse (a clear status) or loads may fail;
# the process must never die. Ten runs each: a loader whose set-up fails once tore its
# network thread down under it (a crash 17 times in 20 at 6 descriptors).
for n in 6 5 4; do
  crashes=0 statuses=""
  for i in $(seq 10); do
    bash -c "ulimit -n $n; exec '$ex' loads '$base' 20 '$work/fd-cache-$n'" >"$work/out.txt" 2>&1
    rc=$?
    [ $rc -ge 124 ] && crashes=$((crashes + 1))
    statuses+=$(grep -E '^(pxl_loader_new|statuses)' "$work/out.txt" | tr '\n' ' ')$'\n'
  done
  echo "ulimit -n $n, 10 runs:"; sort <<<"$statuses" | uniq -c | sed 's/^/  /'
  [ $crashes = 0 ] && pass "ulimit -n $n: 10 runs, no crash or hang" || fail "ulimit -n $n: $crashes of 10 runs crashed or hung"
done

echo "== threads: pthread_create fails after n threads"
run threads env LD_PRELOAD="$work/thread_limit.so" "$ex" threads "$work/www" "$work/thread-cache"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
