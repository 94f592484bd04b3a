#!/usr/bin/env bash
# scripts/camera-photos.sh OUT_DIR
#
# The large-photo set of the benchmarks: every JPEG photograph of 8 to 16 megapixels that
# Debian's wallpaper packages ship (camera-sized, unlike the web-sized demo set of
# scripts/photos.sh), copied as they are (no re-encoding: their own subsampling,
# progressive or baseline), into OUT_DIR/img/NN-NAME.jpg with OUT_DIR/index.txt (relative
# paths, in order) and OUT_DIR/sources.txt (package and original path, for attribution;
# the licences are in /usr/share/doc/PACKAGE/copyright).
#
# Packages (all in Debian main): lomiri-wallpapers-16.04, lomiri-wallpapers-20.04,
# mate-backgrounds, ukui-wallpapers. On Debian 12 that is 13 photographs, 8.3 to 15.9 MP,
# 6 of them progressive. Installs what is missing (scripts/deps.sh python). Idempotent:
# does nothing when OUT_DIR/index.txt exists.
set -euo pipefail
out="${1:?usage: $0 OUT_DIR}"
[ -f "$out/index.txt" ] && exit 0

PKGS=(lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds ukui-wallpapers)
here=$(cd "$(dirname "$0")" && pwd)
for p in "${PKGS[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
    "$here/deps.sh" python
    break
  fi
done

mkdir -p "$out"
tmp=$(mktemp -d "$out/.camera.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for p in "${PKGS[@]}"; do
  dpkg -L "$p" | grep -iE '\.jpe?g$' | LC_ALL=C sort | sed "s|^|$p\t|"
done >"$tmp/candidates"

python3 - "$tmp" <<'EOF'
import os, shutil, sys
from PIL import Image

tmp = sys.argv[1]
os.mkdir(os.path.join(tmp, "img"))
chosen, seen = [], set()
for line in open(os.path.join(tmp, "candidates")):
    package, path = line.rstrip("\n").split("\t")
    real = os.path.realpath(path)
    if real in seen or not os.path.isfile(real):
        continue  # the packages link some files to others
    seen.add(real)
    with Image.open(real) as im:
        megapixels = im.size[0] * im.size[1] / 1e6
    if 8.0 <= megapixels <= 16.0:
        chosen.append((package, path))
if not chosen:
    sys.exit("camera-photos.sh: no 8-16 MP JPEG in the wallpaper packages")
with open(os.path.join(tmp, "index.txt"), "w") as index, open(os.path.join(tmp, "sources.txt"), "w") as sources:
    sources.write("# image <- package: photograph (licence: /usr/share/doc/PACKAGE/copyright)\n")
    for i, (package, path) in enumerate(chosen):
        name = "img/%02d-%s" % (i, os.path.basename(path))
        shutil.copyfile(path, os.path.join(tmp, name))
        index.write(name + "\n")
        sources.write("%s <- %s: %s\n" % (name, package, path))
EOF

rm -rf "$out/img"
mv "$tmp/img" "$out/img"
mv "$tmp/sources.txt" "$out/sources.txt"
mv "$tmp/index.txt" "$out/index.txt"
