#!/usr/bin/env bash
# bindings/python/run_tests.sh [LIBDIR] [PYTEST_ARGS...]
#
# Installs the Python bindings (from this directory, as `pip install ./bindings/python`
# does) into a private venv with pytest, numpy and Pillow (and the blurhash and thumbhash
# packages, the placeholders' references), and runs their tests against a
# private nginx. With LIBDIR (e.g. build/lib), PIXLOAD_LIBRARY points at
# LIBDIR/libpixload.so.0; without it the package finds the library itself (a system
# install). The last line is pytest's summary ("N passed in S s"); the exit status is
# pytest's.
#
#   PXL_PY_VENV       the venv (default build/python-venv, created when missing)
#   PIXLOAD_CLI       the C client whose pixels are compared (default build/bin/pixload)
#   PXL_PY_TEST_PORT  nginx port (default: a free one)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
venv="${PXL_PY_VENV:-$root/build/python-venv}"

if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  libdir=$(cd "$1" && pwd); shift
  lib="$libdir/libpixload.so.0"
  [ -e "$lib" ] || lib="$libdir/libpixload.so"
  [ -e "$lib" ] || { echo "run_tests.sh: no libpixload.so.0 in $libdir (run make all)" >&2; exit 1; }
  export PIXLOAD_LIBRARY="$lib"
fi
export PIXLOAD_CLI="${PIXLOAD_CLI:-$root/build/bin/pixload}"

if [ ! -x "$venv/bin/python" ]; then
  # Debian splits ensurepip (needed by `python3 -m venv`) into python3-venv.
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    echo "run_tests.sh: python3 cannot create a venv: apt-get install python3-venv" >&2
    exit 1
  fi
  python3 -m venv "$venv"
fi

# pip builds in the source directory (setuptools' build/ and *.egg-info): build from a
# copy so the tree stays clean.
src=$(mktemp -d "${TMPDIR:-/tmp}/pxl-pysrc.XXXXXX")
trap 'rm -rf "$src"' EXIT
cp -r "$root/bindings/python/pyproject.toml" "$root/bindings/python/README.md" "$root/bindings/python/pixload" "$src/"
rm -rf "$src/pixload/__pycache__"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pytest
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$src"
# Optional: the tests that need them are skipped without.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy pillow qoi ||
  echo "run_tests.sh: numpy/Pillow/qoi not installed; their tests will be skipped" >&2
# The independent placeholder implementations test_placeholders.py compares with.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check blurhash==1.1.5 thumbhash==0.1.2 ||
  echo "run_tests.sh: blurhash/thumbhash not installed; test_placeholders.py will be skipped" >&2

# From the tests directory, so that `import pixload` is the installed package, not the
# source next to it.
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree free of __pycache__
cd "$root/bindings/python/tests"
"$venv/bin/pytest" -p no:cacheprovider "$@"  # not exec: the EXIT trap removes $src
