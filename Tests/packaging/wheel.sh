#!/usr/bin/env bash
# Tests/packaging/wheel.sh DIST
#
# The wheel `make wheel` wrote into DIST, as a pip user meets it: installed offline into a
# fresh venv, imported with PIXLOAD_LIBRARY and LD_LIBRARY_PATH unset, it must use the
# libpixload.so.0 inside the package and the libcurl, libjpeg and libpng of its
# pixload.libs/ (read from /proc/self/maps, so a system copy cannot pass for them), load
# a JPEG from a private nginx and a PNG through file://, decode the built-in formats and
# JPEG XL through the one codec module it bundles (a lossless JXL made here by cjxl gives
# its PNG's pixels; libjxl mapped from the wheel; a HEIC names libpixload-heif, an SVG
# libpixload-svg), ship py.typed and the licence of every grafted library, and every
# library ldd resolves for the bundled libpixload and module must be in the wheel or on
# the manylinux allow-list of the wheel's tag (auditwheel's policy file). Ends with
# "N passed, N failed".
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
cjxl -d 0 "$work/www/alpha.png" "$work/www/alpha.jxl" >/dev/null 2>&1 ||
  { echo "wheel.sh: cjxl cannot make alpha.jxl (libjxl-tools)" >&2; exit 1; }
started=""
for _ in 1 2 3 4 5; do  # a kernel-chosen free port can be taken again before nginx binds it
  port="${PXL_WHEEL_TEST_PORT:-$("$root/scripts/free-port.sh")}"
  if "$root/scripts/nginx.sh" start "$work/www" "$port" "$work/nginx" 2>"$work/nginx.err"; then started=1; break; fi
  [ -z "${PXL_WHEEL_TEST_PORT:-}" ] || break
done
[ -n "$started" ] || { cat "$work/nginx.err" >&2; echo "wheel.sh: nginx did not start" >&2; exit 1; }

# What a user without pixload has: no override, no library path; from a folder without
# the sources, so `import pixload` is the installed one.
clean_env=(env -u PIXLOAD_LIBRARY -u PIXLOAD_CODEC_PATH -u PIXLOAD_DECODE_WORKER -u LD_LIBRARY_PATH -u LD_PRELOAD -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1)
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
check "pip install --no-index into a fresh venv" \
  "${clean_env[@]}" "$py" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
pkg="$site/pixload"
check "py.typed shipped" test -f "$pkg/py.typed"
check "libpixload.so.0 bundled in the package" test -f "$pkg/libpixload.so.0"
# The one codec module a wheel may carry (scripts/build-wheel.sh says why): JPEG XL, in
# pixload/codecs beside the library, where the library looks.
only_jxl_module() {
  [ "$(python3 -m zipfile -l "$wheel" | grep -o 'libpixload-[a-z]*\.so' | tr '\n' ' ')" = "libpixload-jxl.so " ] &&
    test -f "$pkg/pixload/codecs/libpixload-jxl.so"
}
check "the JPEG XL codec module, and no other, in the package's pixload/codecs" only_jxl_module
check "the decode worker, executable, in the package's pixload/" test -x "$pkg/pixload/pixload-decode-worker"
worker_isolates() { "${clean_env[@]}" "$py" -c 'import pixload; assert "seccomp" in pixload.Loader().isolation().split()'; }
check "the JPEG XL module decodes in the worker (Loader().isolation() names seccomp)" worker_isolates
check "libjxl and libhwy bundled in pixload.libs/" \
  bash -c "ls '$site/pixload.libs' | grep -q '^libjxl-' && ls '$site/pixload.libs' | grep -q '^libhwy-'"
# Every library auditwheel grafted has its Debian package's copyright file in
# pixload/licenses (LIBRARIES.txt names it), and the Apache licence libhwy points to.
licensed() {
  local lib name file
  for lib in "$site"/pixload.libs/*; do
    name=$(basename "$lib" | sed -E 's/-[0-9a-f]{8}\././')
    file=$(awk -v n="$name" '$1 == n {print $3}' "$pkg/licenses/LIBRARIES.txt" 2>/dev/null)
    [ -n "$file" ] && [ -s "$pkg/licenses/$file" ] || { echo "     no licence for $name"; return 1; }
  done
  test -s "$pkg/licenses/common-licenses/Apache-2.0"
}
check "a licence for each of the $(ls "$site/pixload.libs" | wc -l) grafted libraries in pixload/licenses" licensed
check "libcurl, libjpeg and libpng bundled in pixload.libs/" \
  bash -c "ls '$site/pixload.libs' | grep -q '^libcurl-' && ls '$site/pixload.libs' | grep -q '^libjpeg-' &&
           ls '$site/pixload.libs' | grep -q '^libpng16-'"

cd "$work"
"${clean_env[@]}" "$py" - "$pkg" "http://127.0.0.1:$port/gradient.jpg" "$work/www/alpha.png" "$work/www/alpha.jxl" \
  >"$work/py.out" 2>&1 <<'PY'
import os, sys
pkg, http_url, png_path, jxl_path = sys.argv[1:]
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
    check(f"the built-in formats and the bundled jxl: {loader.formats()}",
          loader.formats() == ["jpeg", "png", "webp", "gif", "avif", "jxl"])
    try:
        # Lossless: the JXL's pixels are its PNG's (no colour management: like for like).
        jxl = loader.fetch_sync("file://" + jxl_path, timeout=30, no_color_management=True)
        png = loader.fetch_sync("file://" + png_path, timeout=30, no_color_management=True)
        check(f"a lossless JPEG XL decodes through the bundled module to its PNG's pixels: {jxl.size}",
              jxl.size == (300, 200) and jxl.tobytes() == png.tobytes())
        thumb = loader.fetch_sync("file://" + jxl_path, timeout=30, size=(150, 150), mode="fill")
        check(f"a JPEG XL thumbnail: {thumb.size}", thumb.size == (150, 150))
    except Exception as e:
        check(f"a JPEG XL decodes through the bundled module: {e!r}", False)
    for name, body, package in (
            ("missing.heic", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "libpixload-heif"),
            ("missing.svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>', "libpixload-svg")):
        path = os.path.join(os.getcwd(), name)
        with open(path, "wb") as f:
            f.write(body)
        try:
            loader.fetch_sync("file://" + path, timeout=30)
            check(f"{name} fails", False)
        except pixload.PixloadError as e:
            check(f"{name} names its package: {e}", "install " + package in str(e))
# Isolated (the default), the JPEG XL module and its libraries load in the decode worker,
# not here: the host reads the module's manifest (pixload.h, "Isolation").
mapped = {line.split()[-1] for line in open("/proc/self/maps") if len(line.split()) >= 6}
for stem in ("libpixload-jxl", "libjxl", "libhwy"):
    paths = sorted(p for p in mapped if os.path.basename(p).startswith(stem))
    check(f"{stem} not mapped in the host while isolated: {paths}", not paths)
# Decoded in this process, which files it really mapped: the bundled copies, not the
# system's. (Not libssl: Python's own ssl module maps the system's, next to the bundled one.)
with pixload.Loader(allowed_schemes={"file"}, isolation="none") as loader:
    try:
        image = loader.fetch_sync("file://" + jxl_path, timeout=30)
        check(f"a JPEG XL decodes in-process too (isolation none): {image.size}", image.size == (300, 200))
    except Exception as e:
        check(f"a JPEG XL decodes in-process too (isolation none): {e!r}", False)
mapped = {line.split()[-1] for line in open("/proc/self/maps") if len(line.split()) >= 6}
libs_dir = os.path.join(os.path.dirname(pkg), "pixload.libs") + os.sep
module = os.path.join(pkg, "pixload", "codecs", "libpixload-jxl.so")
for stem in ("libpixload.so", "libcurl", "libjpeg", "libpng16", "libnghttp2", "libpixload-jxl", "libjxl", "libhwy"):
    paths = sorted(p for p in mapped if os.path.basename(p).startswith(stem))
    inside = paths and all(p in (bundled, module) or p.startswith(libs_dir) for p in paths)
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
# The library and the module (whose libpixload.so.0 is the package's, through its RPATH).
ldd_out=$("${clean_env[@]}" ldd "$pkg/libpixload.so.0" "$pkg/pixload/codecs/libpixload-jxl.so" 2>&1)
check "ldd resolves every dependency" bash -c "! grep -q 'not found' <<<'$ldd_out'"
outside="" refused=""
while read -r name path; do
  case "$(realpath "$path")" in "$site/pixload.libs/"* | "$pkg/libpixload.so.0") continue ;; esac
  case " $outside " in *" $name "*) continue ;; esac
  outside+="$name "
  grep -qxF "$name" <<<"$allowed" || refused+="$name ($path) "
done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$ldd_out")
echo "     outside the wheel: $outside"
check "outside the wheel only $policy's allow-list${refused:+; not: $refused}" test -z "$refused"
check "auditwheel show: consistent with $tag" \
  bash -c "python3 -m auditwheel show '$wheel' 2>/dev/null | tr -s ' \n' ' ' | grep -q 'consistent with the following platform tag: \"$tag\"'"
finish
