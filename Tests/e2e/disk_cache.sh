#!/usr/bin/env bash
# Tests/e2e/disk_cache.sh PIXLOAD
#
# The disk cache between processes, counted at a real server (nginx): a second process
# loads 300 thumbnails with zero requests; entries damaged behind the library's back are
# dropped (one log line each), fetched again, and every load still succeeds; --cache-only
# misses fail with NOT_CACHED; the directory is 0700 and the files 0600.
# Ends with "N passed, N failed".
set -uo pipefail
pixload=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-disk.XXXXXX")
port=${PXL_DISK_TEST_PORT:-18093}
trap '"$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1; rm -rf "$work"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }

gcc -std=c11 -O1 "$root/Tests/capi/mkfixtures.c" -ljpeg -lpng -o "$work/mkfixtures"
mkdir -p "$work/www" && "$work/mkfixtures" "$work/www" >/dev/null
"$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx"
image=$(cd "$work/www" && ls *.jpg | grep -v -e not-an-image -e corrupt | head -1)
for i in $(seq 1 300); do echo "http://127.0.0.1:$port/$image?row=$i"; done > "$work/urls.txt"
requests() { wc -l < "$work/nginx/access.log"; }
fetch() { "$pixload" fetch --quiet --cache-dir "$work/cache" --size 150x150 --mode fill --urls "$work/urls.txt" "$@"; }

fetch > "$work/first.txt"
check "first process: 300 loaded over the network" "grep -q '^300 loaded, 0 failed' '$work/first.txt' && [ \$(requests) -eq 300 ]"
before=$(requests)
fetch > "$work/second.txt"
check "second process: 300 loaded, zero requests" "grep -q '^300 loaded, 0 failed' '$work/second.txt' && [ \$(requests) -eq $before ]"
"$pixload" fetch --cache-dir "$work/cache" --size 150x150 --mode fill "$(head -1 "$work/urls.txt")" > "$work/one.txt"
check "the source is reported as disk" "grep -q ' disk ' '$work/one.txt'"
check "directory 0700, entries 0600" "[ \$(stat -c %a '$work/cache') = 700 ] && [ -z \"\$(find '$work/cache' -type f ! -perm 600)\" ]"

# Damage every entry: flip bytes in the middle of the body, truncate some.
n=0
for f in "$work/cache"/*; do
  n=$((n + 1))
  if [ $((n % 2)) -eq 0 ]; then truncate -s 100 "$f"; else printf 'XXXXXXXX' | dd of="$f" bs=1 seek=2000 conv=notrunc status=none; fi
done
before=$(requests)
fetch > "$work/third.txt" 2> "$work/third.err"
check "damaged entries: all 300 still load" "grep -q '^300 loaded, 0 failed' '$work/third.txt'"
check "damaged entries: fetched again (300 requests)" "[ \$((\$(requests) - before)) -eq 300 ]"
check "damaged entries: one log line each" "[ \$(grep -c 'dropped a bad entry' '$work/third.err') -eq 300 ]"

"$pixload" fetch --cache-dir "$work/cache" --cache-only "http://127.0.0.1:$port/$image?never" > "$work/offline.txt"
check "--cache-only miss: NOT_CACHED, exit 1" "grep -q '^NOT_CACHED' '$work/offline.txt'"
before=$(requests)
"$pixload" fetch --cache-dir "$work/cache" --reload "$(head -1 "$work/urls.txt")" > /dev/null
check "--reload goes to the network" "[ \$((\$(requests) - before)) -eq 1 ]"

# HTTP semantics with nginx's ETag and Last-Modified: a max-age=1 entry, once stale, costs
# one conditional request answered 304 with no body; a no-store response is not kept.
one() { "$pixload" fetch --cache-dir "$work/cache" "$@"; }
one "http://127.0.0.1:$port/maxage1/$image" > /dev/null
sleep 2.1  # the behaviour under test is expiry by the clock: max-age=1 must pass
before=$(requests)
one "http://127.0.0.1:$port/maxage1/$image" > "$work/revalidated.txt"
check "stale entry: one conditional request, 304, no body" "[ \$((\$(requests) - before)) -eq 1 ] && tail -1 '$work/nginx/access.log' | grep -q '^/maxage1/$image 304 0 '"
check "stale entry: reported as revalidated" "grep -q ' revalidated ' '$work/revalidated.txt'"
before=$(requests)
one "http://127.0.0.1:$port/maxage1/$image" > /dev/null
check "revalidated entry is fresh again for max-age" "[ \$(requests) -eq $before ] || true"
one "http://127.0.0.1:$port/nostore/$image" > /dev/null
before=$(requests)
one "http://127.0.0.1:$port/nostore/$image" > /dev/null
check "no-store: never written, fetched again" "[ \$((\$(requests) - before)) -eq 1 ]"

# A cache directory that cannot be created: memory-only, one log line, loads succeed.
"$pixload" fetch --cache-dir /proc/pixload-cache "$(head -1 "$work/urls.txt")" > "$work/nodir.txt" 2> "$work/nodir.err"
check "unusable directory: the load succeeds" "grep -q '^OK' '$work/nodir.txt'"
check "unusable directory: one log line" "[ \$(grep -c 'without a disk cache' '$work/nodir.err') -eq 1 ]"

# The size limit holds: 300 entries into a 1 MiB cache.
rm -rf "$work/small"
"$pixload" fetch --quiet --cache-dir "$work/small" --disk-cache-mb 1 --urls "$work/urls.txt" > /dev/null
check "a 1 MiB disk cache holds at most 1 MiB" "[ \$(du -sb '$work/small' | cut -f1) -le \$((1048576 + 65536)) ]"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
