#!/usr/bin/env bash
# scripts/check-build-deps.sh [SWIFT]
#
# What `make`, `make lib` and `make install` need, checked without installing anything:
# a C compiler, pkg-config, libcurl, libjpeg, libpng, libwebp, giflib, libavif, lcms2 and libseccomp (through pkg-config, so
# PKG_CONFIG_LIBDIR and PKG_CONFIG_PATH apply), and the Swift toolchain (SWIFT, default
# swift from PATH). Silent when all are there; otherwise one line naming the Debian
# packages to install, and exit status 1. scripts/deps.sh is what installs them
# (`make demo` and `make test` run it first).
set -uo pipefail
swift="${1:-swift}"

missing=()
command -v "${CC:-cc}" >/dev/null 2>&1 || missing+=(gcc)
if command -v pkg-config >/dev/null 2>&1; then
  # module name, Debian package (the same as scripts/deps.sh installs)
  for pair in libcurl:libcurl4-openssl-dev libjpeg:libjpeg62-turbo-dev libpng:libpng-dev libdeflate:libdeflate-dev zlib:zlib1g-dev \
      libwebp:libwebp-dev libwebpdemux:libwebp-dev libavif:libavif-dev lcms2:liblcms2-dev \
      libheif:libheif-dev libjxl:libjxl-dev librsvg-2.0:librsvg2-dev; do
    pkg-config --exists "${pair%%:*}" || missing+=("${pair#*:}")
  done
else
  missing+=(pkg-config libcurl4-openssl-dev libjpeg62-turbo-dev libpng-dev libdeflate-dev libwebp-dev libavif-dev liblcms2-dev
            libheif-dev libjxl-dev librsvg2-dev)
fi
# giflib ships no pkg-config file in Debian 12: look for its header.
echo '#include <gif_lib.h>' | "${CC:-cc}" -E -x c - >/dev/null 2>&1 || missing+=(libgif-dev)
# The decode worker's seccomp filter (worker/seccomp.c): libseccomp.
pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev)

# Not a Debian package: the toolchain comes from swift.org.
swift_note=""
command -v "$swift" >/dev/null 2>&1 ||
  swift_note="Swift 6.3 ($swift not found: install it from swift.org to /opt/swift, or set SWIFT=)"

# One line, whatever is missing: the first thing a user reads is what to install.
if [ ${#missing[@]} -gt 0 ]; then
  if [ ${#missing[@]} -eq 1 ]; then what="the Debian package ${missing[0]}"; else what="the Debian packages ${missing[*]}"; fi
  echo "pixload: missing build dependency: install $what (apt-get install ${missing[*]})${swift_note:+; and $swift_note}" >&2
  exit 1
fi
if [ -n "$swift_note" ]; then
  echo "pixload: missing build dependency: $swift_note" >&2
  exit 1
fi
