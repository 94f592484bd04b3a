#!/usr/bin/env bash
# scripts/build-deb.sh STAGE DIST
#
# `make deb`: six Debian packages into DIST, cut from one `make install PREFIX=/usr
# LIBDIR=/usr/lib/MULTIARCH` into STAGE/deb/root (the install recipe is the one list of
# what ships):
#   libpixload0     the library under its SONAME, with shlibs and an ldconfig trigger
#   libpixload-dev  pixload.h, the libpixload.so link, pixload.pc, the CMake package
#   pixload-tools   the pixload client and its man page
#   libpixload-heif, libpixload-jxl, libpixload-svg
#                   one codec module each (LIBDIR/pixload/codecs/libpixload-NAME.so), so
#                   that libpixload0 keeps its dependencies and libheif, libjxl and librsvg
#                   (with its fontconfig, pango and cairo) come only with the format
# Version: the header's PXL_VERSION_STRING (a native package: no Debian revision).
# Depends: dpkg-shlibdeps over the ELF files (pixload-tools finds libpixload0 through its
# shlibs); a module depends on libpixload0 of its own version (it registers through the
# codec interface of that build) and on what dpkg-shlibdeps finds for its library;
# libpixload-dev needs its siblings' -dev packages because pixload.pc names
# libcurl and the codec libraries in Requires.private, which pkg-config resolves for --cflags.
# Then lintian on the six, its tags printed, not fatal.
#
# Only builds: dpkg-dev and lintian are named in one line when missing (`scripts/deps.sh
# test` installs them). DEB_MAINTAINER sets the Maintainer field.
set -euo pipefail
stage="${1:?usage: $0 STAGE DIST}"
dist="${2:?usage: $0 STAGE DIST}"
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dist"
dist_dir=$(cd "$dist" && pwd)
maintainer="${DEB_MAINTAINER:-The pixload authors <pixload@example.org>}"

missing=()
for tool in dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev dpkg-architecture:dpkg-dev lintian:lintian; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "pixload: missing build dependency of make deb: install the Debian packages ${missing[*]} (apt-get install ${missing[*]}; scripts/deps.sh test installs them)" >&2
  exit 1
fi

version=$(sed -n 's/^#define PXL_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/pixload.h")
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
libdir=/usr/lib/$multiarch
# Reproducible dates and mtimes: the last commit's.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"

work="$stage/deb"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
destdir="$work/root"
# Debian's hardening flags for the client (one compile-and-link step, so all in CFLAGS);
# no RPATH: the library is in the system's libdir.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
cflags="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get LDFLAGS)"
make -C "$root" --no-print-directory -s install DESTDIR="$destdir" PREFIX=/usr LIBDIR="$libdir" \
  CLI_RPATH= CFLAGS="$cflags" >/dev/null

pkgs="$work/debian"    # dpkg-shlibdeps looks for debian/control and debian/*/DEBIAN/shlibs
mkdir -p "$pkgs"
take() {  # take PACKAGE PATH...: move installed paths into the package's tree
  local pkg="$1"; shift
  local p
  for p in "$@"; do
    mkdir -p "$pkgs/$pkg/$(dirname "$p")"
    mv "$destdir/$p" "$pkgs/$pkg/$p"
  done
}
take libpixload0 "$libdir/libpixload.so.$version" "$libdir/libpixload.so.0" "$libdir/pixload/pixload-decode-worker" \
  "$libdir/pixload/pixload-decode-builtins.so"
take libpixload-dev /usr/include/pixload.h "$libdir/libpixload.so" "$libdir/pkgconfig/pixload.pc" \
  "$libdir/cmake/pixload/pixloadConfig.cmake" "$libdir/cmake/pixload/pixloadConfigVersion.cmake"
take pixload-tools /usr/bin/pixload /usr/share/man/man1/pixload.1
modules=(heif jxl svg)
for m in "${modules[@]}"; do take "libpixload-$m" "$libdir/pixload/codecs/libpixload-$m.so"; done
module_pkgs=("${modules[@]/#/libpixload-}")
all_pkgs=(libpixload0 libpixload-dev pixload-tools "${module_pkgs[@]}")
left=$(cd "$destdir" && find . \( -type f -o -type l \))
[ -z "$left" ] || { echo "build-deb.sh: installed but in no package: $left" >&2; exit 1; }

# Debian strips what it ships; debug info is most of the library's size.
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$pkgs/libpixload0/$libdir/libpixload.so.$version"
strip --strip-unneeded --remove-section=.comment "$pkgs/pixload-tools/usr/bin/pixload"
strip --strip-unneeded --remove-section=.comment "$pkgs/libpixload0/$libdir/pixload/pixload-decode-worker" \
  "$pkgs/libpixload0/$libdir/pixload/pixload-decode-builtins.so"
for m in "${modules[@]}"; do
  strip --strip-unneeded --remove-section=.comment "$pkgs/libpixload-$m/$libdir/pixload/codecs/libpixload-$m.so"
done
gzip -9n "$pkgs/pixload-tools/usr/share/man/man1/pixload.1"

# debian/control for dpkg-shlibdeps, which wants to know the binary packages.
cat >"$pkgs/control" <<EOF
Source: pixload
Maintainer: $maintainer

Package: libpixload0
Architecture: any

Package: libpixload-dev
Architecture: any

Package: pixload-tools
Architecture: any
$(for p in "${module_pkgs[@]}"; do printf '\nPackage: %s\nArchitecture: any\n' "$p"; done)
EOF
echo "libpixload 0 libpixload0 (>= $version)" >"$work/shlibs"

changelog_date=$(date -R -u -d "@$SOURCE_DATE_EPOCH")
year=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y)
for pkg in "${all_pkgs[@]}"; do
  doc="$pkgs/$pkg/usr/share/doc/$pkg"
  mkdir -p "$doc" "$pkgs/$pkg/DEBIAN"
  { echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: pixload"
    echo
    echo "Files: *"
    echo "Copyright: $(sed -n 's/^Copyright (c) //p' "$root/LICENSE")"
    echo "License: Expat"
    sed -e '1,/^Copyright/d' -e 's/^$/./' -e 's/^/ /' "$root/LICENSE"
  } >"$doc/copyright"
  # A native package's Debian changelog is changelog.gz (Policy 12.7).
  printf 'pixload (%s) unstable; urgency=medium\n\n  * Release %s, built from the pixload tree by make deb.\n\n -- %s  %s\n' \
    "$version" "$version" "$maintainer" "$changelog_date" | gzip -9n >"$doc/changelog.gz"
done

cd "$work"
# The decode worker (pixload.h, "Isolation") ships in libpixload0: its libseccomp too.
lib_depends=$(dpkg-shlibdeps -O -e"debian/libpixload0/$libdir/libpixload.so.$version" \
  -e"debian/libpixload0/$libdir/pixload/pixload-decode-worker" \
  -e"debian/libpixload0/$libdir/pixload/pixload-decode-builtins.so" 2>"$work/shlibdeps.err" |
  sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.err" >&2; exit 1; }
cp "$work/shlibs" debian/libpixload0/DEBIAN/shlibs
tools_depends=$(dpkg-shlibdeps -O -l"debian/libpixload0/$libdir" -Sdebian/libpixload0 \
  -e debian/pixload-tools/usr/bin/pixload 2>"$work/shlibdeps.err" | sed -n 's/^shlibs:Depends=//p') ||
  { cat "$work/shlibdeps.err" >&2; exit 1; }
grep -q libpixload0 <<<"$tools_depends" ||
  { cat "$work/shlibdeps.err" >&2; echo "build-deb.sh: dpkg-shlibdeps did not find libpixload0 for the client" >&2; exit 1; }
echo 'activate-noawait ldconfig' >debian/libpixload0/DEBIAN/triggers
# A module: libpixload0 of this very version (-x: not the shlibs' ">="), then its library's.
declare -A module_depends
for m in "${modules[@]}"; do
  found=$(dpkg-shlibdeps -O -l"debian/libpixload0/$libdir" -Sdebian/libpixload0 -xlibpixload0 \
    -e "debian/libpixload-$m/$libdir/pixload/codecs/libpixload-$m.so" 2>"$work/shlibdeps.err" |
    sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.err" >&2; exit 1; }
  module_depends[$m]="libpixload0 (= $version)${found:+, $found}"
done

control() {  # control PACKAGE SECTION MULTI-ARCH DEPENDS SUMMARY DESCRIPTION [SUGGESTS]
  local size
  size=$(du -k -s --apparent-size --exclude=DEBIAN "debian/$1" | cut -f1)
  { echo "Package: $1"
    echo "Source: pixload"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $size"
    echo "Depends: $4"
    [ -z "${7:-}" ] || echo "Suggests: $7"
    echo "Section: $2"
    echo "Priority: optional"
    [ -z "$3" ] || echo "Multi-Arch: $3"
    echo "Description: $5"
    sed 's/^/ /' <<<"$6"
  } >"debian/$1/DEBIAN/control"
}
about="pixload downloads images with libcurl, decodes JPEG and PNG off the
caller's thread, keeps decoded images in a memory cache, merges duplicate
requests, cancels what scrolled away and hands results back through a file
descriptor the host's event loop polls."
control libpixload0 libs same "$lib_depends" \
  "asynchronous image loading and caching for scrolling lists" \
  "$about
.
This package contains the shared library. It decodes JPEG, PNG, WebP, GIF
and AVIF; HEIC, JPEG XL and SVG come with the packages libpixload-heif,
libpixload-jxl and libpixload-svg." "$(IFS=,; echo "${module_pkgs[*]}" | sed 's/,/, /g')"
control libpixload-dev libdevel same \
  "libpixload0 (= $version), libcurl4-openssl-dev | libcurl-dev, libjpeg-dev, libpng-dev, libdeflate-dev, libwebp-dev, libgif-dev, libavif-dev, liblcms2-dev" \
  "asynchronous image loading and caching - development files" \
  "$about
.
This package contains the header pixload.h, the libpixload.so link,
pixload.pc for pkg-config (and Meson) and the CMake package for
find_package(pixload), with its imported target pixload::pixload."
control pixload-tools graphics "" "$tools_depends" \
  "asynchronous image loading and caching - command-line client" \
  "$about
.
This package contains pixload, a client that fetches images through the
library and writes their pixels out."
declare -A module_about=(
  [heif]="HEIC and HEIF (iPhone photos), through libheif: the primary image with
its rotation and mirroring, ICC or nclx colour, alpha, and thumbnails
from the file's own embedded thumbnail when it is large enough."
  [jxl]="JPEG XL, still and animated, through libjxl: alpha, ICC colour,
orientation, and previews of a file still arriving."
  [svg]="SVG, through librsvg: rendered at the requested size, with no external
resources (no file, no network), its size and element count bounded
before rendering."
)
declare -A module_name=([heif]="HEIC/HEIF" [jxl]="JPEG XL" [svg]="SVG")
for m in "${modules[@]}"; do
  control "libpixload-$m" libs same "${module_depends[$m]}" \
    "asynchronous image loading and caching - ${module_name[$m]} codec module" \
    "$about
.
This package contains the codec module for
${module_about[$m]}
libpixload0 loads it from $libdir/pixload/codecs
when a loader is created."
done

# Owners root, modes as Debian expects, mtimes from SOURCE_DATE_EPOCH.
trees=("${all_pkgs[@]/#/debian/}")
find "${trees[@]}" -type d -exec chmod 755 {} +
find "${trees[@]}" -type f -exec chmod 644 {} +
chmod 755 debian/pixload-tools/usr/bin/pixload
chmod 755 "debian/libpixload0/$libdir/pixload/pixload-decode-worker"  # the library spawns it
find "${trees[@]}" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

for pkg in "${all_pkgs[@]}"; do
  (cd "debian/$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0r md5sum >DEBIAN/md5sums)
  chmod 644 "debian/$pkg/DEBIAN/md5sums"
done

debs=()
for pkg in "${all_pkgs[@]}"; do
  rm -f "$dist_dir/${pkg}"_*.deb
  deb="$dist_dir/${pkg}_${version}_$arch.deb"
  dpkg-deb --root-owner-group -Zxz --build "debian/$pkg" "$deb" >/dev/null
  debs+=("$deb")
done
for deb in "${debs[@]}"; do
  echo "$dist/$(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"
done
# lintian refuses nothing here: its tags are the list of what is left to fix.
echo "lintian:"
lintian --allow-root --display-info --tag-display-limit 0 "${debs[@]}" 2>&1 | sed 's/^/  /' || true
