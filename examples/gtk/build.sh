#!/usr/bin/env bash
# examples/gtk/build.sh STAGE OUT
#
# Compiles the GTK 4 example (examples/gtk/pixload_gtk.c) into OUT against the library
# staged in STAGE (STAGE/include/pixload.h, STAGE/lib/libpixload.so; `make` puts them in
# build/). The test and `make gtk-demo` both build through here.
set -euo pipefail
stage=$(cd "${1:?usage: $0 STAGE OUT}" && pwd)
out="${2:?usage: $0 STAGE OUT}"
here=$(cd "$(dirname "$0")" && pwd)

pkg-config --exists gtk4 || { echo "build.sh: GTK 4 not found: apt-get install libgtk-4-dev" >&2; exit 1; }
# GTK's X11 backend needs libX11 on the link line for the window's place on the screen
# (scripted mode prints each thumbnail's rectangle in screen pixels for the Xvfb test).
pkgs=(gtk4)
pkg-config --exists gtk4-x11 && pkgs+=(x11)

# shellcheck disable=SC2046  # pkg-config's flags are meant to split
cc -std=c11 -O2 -g -Wall -Wextra "$here/pixload_gtk.c" -o "$out" $(pkg-config --cflags --libs "${pkgs[@]}") \
  -I"$stage/include" -L"$stage/lib" -Wl,-rpath,"$stage/lib" -lpixload -lm
