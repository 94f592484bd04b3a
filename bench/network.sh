#!/usr/bin/env bash
# bench/network.sh STAGE [RUNS]
#
# `make bench` (and `make bench-network`): 1,000 small JPEGs (64x64, generated once into
# STAGE/bench-net/img) served by a private nginx on 127.0.0.1, loaded by pixload and by a
# bare libcurl loop with and without decoding; bench/network.py reports CPU per image and
# the connections the server saw. BENCH_NET_PORT (default: a free one), BENCH_NET_IMAGES
# (default 1000), BENCH_RUNS (default 5).
set -euo pipefail
stage="${1:?usage: $0 STAGE [RUNS]}" runs="${2:-${BENCH_RUNS:-5}}"
port="${BENCH_NET_PORT:-$(scripts/free-port.sh)}" count="${BENCH_NET_IMAGES:-1000}"
data="$stage/bench-net/img" state="$stage/bench-net/nginx"

if [ ! -f "$data/names-$count.txt" ]; then
  rm -rf "$data"; mkdir -p "$data"
  # Pillow: scripts/deps.sh installs it. Each image differs (a gradient and a few blobs
  # from a seeded generator), so no two bodies are equal.
  python3 - "$data" "$count" <<'EOF'
import random, sys
from PIL import Image, ImageDraw
out, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
names = []
for i in range(count):
    img = Image.new("RGB", (64, 64))
    px = img.load()
    r0, g0, b0 = rng.randrange(256), rng.randrange(256), rng.randrange(256)
    for y in range(64):
        for x in range(64):
            px[x, y] = ((r0 + 3 * x) % 256, (g0 + 3 * y) % 256, (b0 + x + y) % 256)
    draw = ImageDraw.Draw(img)
    for _ in range(4):
        x, y, s = rng.randrange(64), rng.randrange(64), rng.randrange(4, 20)
        draw.ellipse((x, y, x + s, y + s), fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    name = f"t{i:04d}.jpg"
    img.save(f"{out}/{name}", quality=85)
    names.append(name)
open(f"{out}/names-{count}.txt", "w").write("\n".join(names) + "\n")
EOF
fi

mkdir -p "$stage/bench"
cc -O2 -Wall bench/baseline.c -o "$stage/bench/baseline" -lcurl -ljpeg -lpng -lpthread
scripts/nginx.sh start "$data" "$port" "$state"
trap 'scripts/nginx.sh stop "$state"' EXIT
: > "$state/access.log"

echo "bench-network: $(nproc) cores; pixload $("$stage/bin/pixload" version); $count images," \
  "$(du -sk --apparent-size "$data" | cut -f1) KiB"
python3 bench/network.py --pixload "$stage/bin/pixload" --baseline "$stage/bench/baseline" \
  --base-url "http://127.0.0.1:$port" --names "$data/names-$count.txt" \
  --access-log "$state/access.log" --runs "$runs"
