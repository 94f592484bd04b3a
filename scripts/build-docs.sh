#!/usr/bin/env bash
# scripts/build-docs.sh STAGE
#
# `make docs`: the browsable documentation into STAGE/docs (open STAGE/docs/index.html):
#   c/index.html        the C reference, rendered from include/pixload.h by
#                       scripts/docs/c_reference.py; an undocumented public declaration
#                       is a warning and fails the build
#   python/             the Python API (the pixload package's docstrings) by pdoc, from
#                       PyPI in its own venv (STAGE/docs-venv); any warning fails
#   *.html              docs/guide/*.md: the index, a guide per host, the cookbook
#                       (scripts/docs/render_guides.py, markdown2 from pdoc's venv)
# then scripts/docs/check_links.py: every internal link and #fragment resolves.
# pdoc imports the package, so the library is STAGE/lib's (make lib first).
set -euo pipefail
stage="${1:?usage: $0 STAGE}"
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$(cd "$stage" && pwd)
out="$stage/docs"
venv="$stage/docs-venv"
lib="$stage/lib/libpixload.so.0"
[ -e "$lib" ] || { echo "build-docs.sh: no $lib (run make lib)" >&2; exit 1; }

if [ ! -x "$venv/bin/pdoc" ]; then
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    echo "build-docs.sh: python3 cannot create a venv: apt-get install python3-venv" >&2
    exit 1
  fi
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check pdoc
fi

rm -rf "$out"
mkdir -p "$out/c" "$out/python"
python3 "$root/scripts/docs/c_reference.py" "$root/include/pixload.h" "$out/c/index.html"

# The package from the source tree, no bytecode left there; its library from STAGE.
err="$stage/docs-pdoc.err"
PYTHONPATH="$root/bindings/python" PYTHONDONTWRITEBYTECODE=1 PIXLOAD_LIBRARY="$lib" \
  "$venv/bin/pdoc" --docformat markdown --no-show-source -o "$out/python" pixload 2>"$err" ||
  { cat "$err" >&2; exit 1; }
if [ -s "$err" ]; then
  echo "build-docs.sh: pdoc warned (warnings fail the docs):" >&2; cat "$err" >&2; exit 1
fi
echo "pdoc: $(ls "$out/python" | wc -l) files, 0 warnings -> $out/python"

"$venv/bin/python" "$root/scripts/docs/render_guides.py" "$root/docs/guide" "$out"
python3 "$root/scripts/docs/check_links.py" "$out"
echo "docs: open $out/index.html"
