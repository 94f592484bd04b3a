#!/usr/bin/env bash
# Tests/packaging/wheel.sh DIST
#
# The wheel `make wheel` wrote into DIST, as a pip user meets it: installed offline into a
# fresh venv, imported with PIXLOAD_LIBRARY and LD_LIBRARY_PATH unset, it must use the
# libpixload.so.0 inside the package and the libcurl, libjpeg and libpng of its
# pixload.libs/ (read from /proc/self/maps, so a system copy cannot pass for them), load
# a JPEG from a private nginx and a PNG through file://, decode the built-in formats only
# (no codec module in the wheel: a HEIC names libpixload-heif), ship py.typed, and every library
# ldd resolves for the bundled libpixload must be in the wheel or on the manylinux
# allow-list of the wheel's tag (auditwheel's policy file). Ends with "N passed, N failed".
#
#   PXL_WHEEL_TEST_PORT  nginx port (default: a free one)
set -uo pipefail
dist="${1:?usage: $0 DIST}"
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^#define PXL_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/pixload.h")
passed=0 failed=0
check() {  # check NAME COMMAND...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

shopt -s nullglob
wheels=("$dist"/pixload-"$version"-py3-none-manylinux_*.whl)
check "exactly one manylinux wheel of $version in $dist (make wheel)" test ${#wheels[@]} -eq 1
[ ${#wheels[@]} -eq 1 ] || finish
wheel=$(cd "$(dirname "${wheels[0]}")" && pwd)/$(basename "${wheels[0]}")
tag=$(basename "$wheel" .whl); tag=${tag##*-}          # manylinux_2_35_x86_64
policy=${tag%_$(uname -m)}                             # manylinux_2_35

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-wheel-test.XXXXXX")
cleanup() { "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT

# Test images (the C API tests' fixtures) behind a private nginx.
mkdir -p "$work/www"
gcc -std=c11 -O1 "$root/Tests/capi/mkfixtures.c" -ljpeg -lpng -lwebp -lwebpmux -o "$work/mkfixtures" &&
  "$work/mkfixtures" "$work/www" || { echo "wheel.sh: cannot make the fixtures" >&2; exit 1; }
started=""
for _ in 1 2 3 4 5; do  # a kernel-chosen free port can be taken again before nginx binds it
  port="${PXL_WHEEL_TEST_PORT:-$("$root/scripts/free-port.sh")}"
  if "$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx" 2>"$work/nginx.err"; then started=1; break; fi
  [ -z "${PXL_WHEEL_TEST_PORT:-}" ] || break
done
[ -n "$started" ] || { cat "$work/nginx.err" >&2; echo "wheel.sh: nginx did not start" >&2; exit 1; }

# What a user without pixload has: no override, no library path; from a folder without
# the sources, so `import pixload` is the installed one.
clean_env=(env -u PIXLOAD_LIBRARY -u PIXLOAD_CODEC_PATH -u LD_LIBRARY_PATH -u LD_PRELOAD -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1)
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
check "pip install --no-index into a fresh venv" \
  "${clean_env[@]}" "$py" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
pkg="$site/pixload"
check "py.typed shipped" test -f "$pkg/py.typed"
check "libpixload.so.0 bundled in the package" test -f "$pkg/libpixload.so.0"
check "no codec module in the wheel" \
  bash -c "! python3 -m zipfile -l '$wheel' | grep -q 'libpixload-[a-z]*\.so'"
check "libcurl, libjpeg and libpng bundled in pixload.libs/" \
  bash -c "ls '$site/pixload.libs' | grep -q '^libcurl-' && ls '$site/pixload.libs' | grep -q '^libjpeg-' &&
           ls '$site/pixload.libs' | grep -q '^libpng16-'"

cd "$work"
"${clean_env[@]}" "$py" - "$pkg" "http://127.0.0.1:$port/gradient.jpg" "$work/www/alpha.png" >"$work/py.out" 2>&1 <<'PY'
import os, sys
pkg, http_url, png_path = sys.argv[1:]
results = []
def check(name, ok):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name)

import pixload
bundled = os.path.join(pkg, "libpixload.so.0")
check(f"the bundled library is the one loaded ({pixload.library_origin})",
      pixload.library_origin == "next to the package: " + bundled)
with pixload.Loader(allowed_schemes={"http", "file"}) as loader:
    try:
        image = loader.fetch_sync(http_url, timeout=30, size=(150, 150), mode="fill")
        check(f"http image from nginx: {image.size} of {image.original_size}",
              image.size == (150, 150) and image.original_size == (640, 480))
    except Exception as e:
        check(f"http image from nginx: {e!r}", False)
    try:
        image = loader.fetch_sync("file://" + png_path, timeout=30)
        check(f"file:// image: {image.size}", image.size == (300, 200))
    except Exception as e:
        check(f"file:// image: {e!r}", False)
    check(f"the built-in formats only: {loader.formats()}", loader.formats() == ["jpeg", "png", "webp", "gif", "avif"])
    heic = os.path.join(os.getcwd(), "missing.heic")
    with open(heic, "wb") as f:
        f.write(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic")
    try:
        loader.fetch_sync("file://" + heic, timeout=30)
        check("a HEIC fails", False)
    except pixload.PixloadError as e:
        check(f"a HEIC names its package: {e}", "install libpixload-heif" in str(e))
# Which files the process really mapped: the bundled copies, not the system's. (Not
# libssl: Python's own ssl module maps the system's, next to the bundled one.)
mapped = {line.split()[-1] for line in open("/proc/self/maps") if len(line.split()) >= 6}
libs_dir = os.path.join(os.path.dirname(pkg), "pixload.libs") + os.sep
for stem in ("libpixload.so", "libcurl", "libjpeg", "libpng16", "libnghttp2"):
    paths = sorted(p for p in mapped if os.path.basename(p).startswith(stem))
    inside = paths and all(p == bundled or p.startswith(libs_dir) for p in paths)
    check(f"{stem} mapped from the wheel only: {paths}", bool(inside))
sys.exit(0 if all(results) else 1)
PY
cat "$work/py.out"
passed=$((passed + $(grep -c '^ok ' "$work/py.out")))
failed=$((failed + $(grep -c '^FAIL ' "$work/py.out")))
grep -qE '^(ok|FAIL) ' "$work/py.out" || { failed=$((failed + 1)); echo "FAIL the Python check ran"; }

# Outside the wheel only the manylinux allow-list (the dynamic loader and the vDSO are
# the kernel's and libc's). The allow-list is auditwheel's, for the wheel's own tag.
allowed=$(python3 -c '
import json, os, sys, auditwheel
policies = json.load(open(os.path.join(os.path.dirname(auditwheel.__file__), "policy", "manylinux-policy.json")))
print("\n".join(next(p["lib_whitelist"] for p in policies if p["name"] == sys.argv[1])))' "$policy") ||
  allowed=""
check "auditwheel's allow-list for $policy read" test -n "$allowed"
ldd_out=$("${clean_env[@]}" ldd "$pkg/libpixload.so.0" 2>&1)
check "ldd resolves every dependency" bash -c "! grep -q 'not found' <<<'$ldd_out'"
outside="" refused=""
while read -r name path; do
  case "$(realpath "$path")" in "$site/pixload.libs/"*) continue ;; esac
  outside+="$name "
  grep -qxF "$name" <<<"$allowed" || refused+="$name ($path) "
done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$ldd_out")
echo "     outside the wheel: $outside"
check "outside the wheel only $policy's allow-list${refused:+; not: $refused}" test -z "$refused"
check "auditwheel show: consistent with $tag" \
  bash -c "python3 -m auditwheel show '$wheel' 2>/dev/null | tr -s ' \n' ' ' | grep -q 'consistent with the following platform tag: \"$tag\"'"
finish
