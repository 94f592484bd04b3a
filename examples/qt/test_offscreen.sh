#!/usr/bin/env bash
# examples/qt/test_offscreen.sh [--bench] [STAGE]
#
# The Qt for Python gallery (examples/qt/gallery.py) end to end, under Qt's offscreen
# platform (no X server, no GPU: Qt's raster engine draws into memory): serves the demo
# photos from a private nginx, runs the app's scripted session (slow scroll, fling, fling
# stopped dead, back) against the library in STAGE (default build/), and checks the window
# it drew at the end cell by cell: every visible cell shows its own row's image, not
# another row's and not the placeholder, round (pixload's Circle: the slot's colour in the
# corners) (examples/qt/screen_check.py). Two controls prove the pixel check can fail: the
# same screenshot checked as if every row showed the next row's image must fail on every
# cell, and a run against missing images (HTTP 404) must fail in the app and show the
# flat placeholder in every cell.
# Placeholders: the demo photos' BlurHashes are computed first by pixload's own encoder
# (`pixload hash --blurhash`, at the rows' 96x96 FILL) and given to the app. The session
# must draw a hash before every image that came from disk or network. A third run serves
# the first screen from examples/qt/held_server.py, which never answers row HELD_ROW's
# request: its screenshot must show that row's own BlurHash (decoded by screen_check.py's
# own decoder), not the flat colour and not another row's, and every other row its image;
# checked as if each row showed the next row's, every cell must fail.
# Also checks what the app saw: every settled screen complete, no row seen before drawn
# as a placeholder again, every QImage over pixload's pixels (none copied).
# Animations: the rows are the demo photos with two GIFs among them
# (examples/gtk/animated-data.sh: rows 1 and 3 of every 302, so on the first screen),
# which the app plays with pixload's players on a QTimer. A fourth run waits on the first
# screen and takes two screenshots 700 ms apart (longer than any frame of the two GIFs, and
# not a whole loop of either): each animated cell must show a frame of its own animation
# in both and have changed between them, every still cell be identical pixel for pixel;
# the control compares the first screenshot with itself, where every animated cell must
# fail. Then the view leaves the animated rows for 0.5 s: their players (kept, tied to
# their rows, asked for frames every tick all the same) must decode nothing (their own
# frames_decoded; without Table.bind_animation they decode 8 frames there), and play on
# when the rows are back.
#
# --bench: runs the scripted session PXL_QT_BENCH_RUNS times (default 3) and reports,
# per run, the time the Qt thread spent inside pixload calls per frame of the list
# (median, p99, max); no checks (`make bench-qt`).
#
# PySide6 (PySide6-Essentials: QtCore, QtGui, QtWidgets, the part of PySide6 the gallery
# uses) comes from PyPI into its own venv, PXL_QT_VENV (default STAGE/qt-venv); the
# Debian libraries its wheels link come from `scripts/deps.sh test`.
# Artefacts: STAGE/artifacts/qt-screenshot.png (-control.png for the 404 run, -held.png
# for the held-back row) and the app's output, STAGE/artifacts/qt-session.txt.
# Ports: nginx on PXL_QT_TEST_PORT (default: one scripts/free-port.sh finds).
# Ends with "N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
bench=0
[ "${1:-}" = --bench ] && { bench=1; shift; }
root=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(cd "${1:-$root/build}" && pwd)
data="$stage/demo-data"
artifacts="$stage/artifacts"
venv="${PXL_QT_VENV:-$stage/qt-venv}"
# Pinned: PySide6 6.12.0 drops a reference to None when a Python override returns it
# (QAbstractItemModel.data), which aborts Python 3.11 (Debian 12's, where None is not
# immortal) with "none_dealloc" a few thousand calls later.
pyside=PySide6-Essentials==6.11.3
work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-qt.XXXXXX")
app_pid=""
held_pid=""
HELD_ROW=2

cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null
  [ -n "$held_pid" ] && kill "$held_pid" 2>/dev/null
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

lib="$stage/lib/libpixload.so.0"
check "the library is built ($lib)" "[ -e '$lib' ]"
[ -e "$lib" ] || finish

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || { echo "test_offscreen.sh: no venv (apt-get install python3-venv)"; }
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('PySide6-Essentials') != '${pyside#*==}')" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pyside"
fi
check "PySide6 in $venv ($pyside)" "'$venv/bin/python' -c 'import PySide6.QtWidgets' 2>'$work/import.err'"
[ -s "$work/import.err" ] && sed 's/^/    /' "$work/import.err" | tail -5
"$venv/bin/python" -c 'import PySide6.QtWidgets' 2>/dev/null || finish

"$root/scripts/photos.sh" "$data" 300
# The rows: the photos of index.txt with the two GIFs among them (in DATA_DIR: the
# BlurHashes are made from the files next to the index).
rows="$data/index-qt.txt"
"$root/examples/gtk/animated-data.sh" "$data" "$data/index.txt" "$rows"
check "the animated rows' GIFs are made ($data/anim)" "[ -s '$rows' ] && [ -s '$data/anim/dots.gif' ]"
[ -s "$rows" ] || finish

# The photos' BlurHashes as the rows show them (96x96 FILL), by pixload's encoder:
# PATH<TAB>HASH lines for the app's --placeholders and screen_check.py's --hashes.
hashes="$work/blurhash.txt"
"$root/scripts/demo-blurhashes.sh" "$stage" "$rows" "$hashes"
hash_rc=$?
hashed=$(awk -F'\t' 'NF == 2 && length($2) >= 6' "$hashes" | wc -l)
check "pixload hash --blurhash: one hash per demo photo ($hashed)" "[ $hash_rc -eq 0 ]"

port=${PXL_QT_TEST_PORT:-$("$root/scripts/free-port.sh")}
"$root/scripts/nginx.sh" start "$data" "$port" "$work/nginx" 2>/dev/null
check "nginx serves the demo photos on port $port" "[ -f '$work/nginx/nginx.pid' ]"
[ -f "$work/nginx/nginx.pid" ] || finish

# run_app NAME ARGS...: the scripted gallery, its output in $work/NAME.out (stderr in
# .err, Qt's offscreen plugin's "does not support propagateSizeHints()" notes left out),
# its exit status in $work/NAME.rc. The pixload package from the source tree, the
# library from STAGE; XDG_RUNTIME_DIR private (Qt warns without one). Rows from
# index-qt.txt unless ARGS give another --index.
mkdir -p "$work/run" && chmod 700 "$work/run"
run_app() {
  local name="$1"; shift
  env QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$work/run" PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH="$root/bindings/python" PIXLOAD_LIBRARY="$lib" \
    timeout 120 "$venv/bin/python" "$root/examples/qt/gallery.py" --index "$rows" "$@" \
    >"$work/$name.out" 2>"$work/$name.err.all" &
  app_pid=$!
  wait "$app_pid"; echo $? >"$work/$name.rc"
  app_pid=""
  grep -v 'does not support propagateSizeHints' "$work/$name.err.all" >"$work/$name.err"
}

mkdir -p "$artifacts"
if [ "$bench" -eq 1 ]; then
  runs=${PXL_QT_BENCH_RUNS:-3}
  for run in $(seq "$runs"); do
    run_app "bench$run" --script full "http://127.0.0.1:$port/"
    figures=$(sed -n 's/^time in pixload calls per frame: //p' "$work/bench$run.out")
    own=$(sed -n 's/^  without our on_row callbacks: //p' "$work/bench$run.out")
    longest=$(sed -nE 's/^longest pixload call on the Qt thread: ([0-9.]+ ms \([^;]*).*/\1)/p' "$work/bench$run.out")
    echo "run $run: time the Qt thread spent inside pixload calls per frame: ${figures:-?}"
    echo "       of which pixload's own (our on_row callbacks left out): ${own:-?}; longest single call ${longest:-?}"
    check "run $run: the scripted session completed" "[ \"\$(cat '$work/bench$run.rc')\" = 0 ] && [ -n '$figures' ]"
    [ -s "$work/bench$run.err" ] && head -5 "$work/bench$run.err" | sed 's/^/    /'
  done
  finish
fi

run_app session --script full --placeholders "$hashes" --screenshot "$artifacts/qt-screenshot.png" \
  "http://127.0.0.1:$port/"
cp "$work/session.out" "$artifacts/qt-session.txt"
grep -v '^  row\|^cell\|^  over' "$work/session.out" | sed 's/^/    /'
[ -s "$work/session.err" ] && { echo "    stderr:"; head -20 "$work/session.err" | sed 's/^/    /'; }

check "the app's own checks passed (exit status 0, \"script: OK\")" \
  "[ \"\$(cat '$work/session.rc')\" = 0 ] && grep -q '^script: OK$' '$work/session.out'"
check "five settles reported, none with a placeholder" \
  "[ \$(grep -c '^settle \".*\": [1-9][0-9]* visible, 0 placeholders' '$work/session.out') -eq 5 ]"
check "rows scrolled back to came from memory: no placeholder flash" \
  "grep -q '^placeholder flashes on rows seen before: 0$' '$work/session.out'"
check "QImages wrap the images' pixels: none copied" "grep -q '^qimages: [1-9][0-9]* made, 0 copied' '$work/session.out'"
check "every image from disk or network came after its row's hash placeholder" \
  "grep -q '^hash placeholders: [1-9][0-9]* drawn; rows whose image came from disk or network without one first: 0$' '$work/session.out'"
check "the window was saved with its cells' geometry" \
  "[ -s '$artifacts/qt-screenshot.png' ] && grep -q '^cell row=' '$work/session.out'"

if [ -s "$artifacts/qt-screenshot.png" ]; then
  python3 "$root/examples/qt/screen_check.py" "$artifacts/qt-screenshot.png" "$work/session.out" "$data" \
    --index "$rows" >"$work/session.pixels"
  rc=$?
  sed 's/^/    /' "$work/session.pixels"
  check "the screenshot: every visible cell shows its own row's image" "[ $rc -eq 0 ]"
  # The control: the same pixels checked as if each row showed the next row's image.
  python3 "$root/examples/qt/screen_check.py" "$artifacts/qt-screenshot.png" "$work/session.out" "$data" \
    --index "$rows" --claim-shift 1 >"$work/shifted.pixels"
  summary=$(tail -1 "$work/shifted.pixels")
  echo "    claimed one row off: $summary"
  check "control: checked against the next row's image, every cell fails" \
    "echo '$summary' | grep -qE '^([1-9][0-9]*) cells judged, \\1 wrong$'"
fi

# The animated rows on the first screen: two screenshots 700 ms apart.
run_app animated --script still --placeholders "$hashes" --screenshot "$work/animated.png" --later-ms 700 \
  "http://127.0.0.1:$port/"
grep '^animations:\|^later screenshot\|^out of view\|^back in view' "$work/animated.out" | sed 's/^/    /'
[ -s "$work/animated.err" ] && { echo "    stderr:"; head -20 "$work/animated.err" | sed 's/^/    /'; }
check "animated: the first screen settled, its animated rows playing (exit status 0)" \
  "[ \"\$(cat '$work/animated.rc')\" = 0 ] && grep -q '^animations: [1-9][0-9]* players near the screen, [1-9][0-9]* frames drawn' '$work/animated.out' && ! grep -q '^animated rows not playing' '$work/animated.out'"
check "out of view: the players kept for the animated rows decode nothing (the table paused them)" \
  "grep -qE '^out of view: .*, [1-9][0-9]* players kept for rows off it \\(0 on it\\), 0 frames decoded by them' '$work/animated.out'"
check "back in view: they play on (frames decoded and drawn)" \
  "grep -qE '^back in view: [1-9][0-9]* frames drawn, [1-9][0-9]* decoded' '$work/animated.out'"
if [ -s "$work/animated.png" ] && [ -s "$work/animated-later.png" ]; then
  cp "$work/animated.png" "$artifacts/qt-screenshot-animated.png"
  cp "$work/animated-later.png" "$artifacts/qt-screenshot-animated-later.png"
  for shot in animated animated-later; do
    python3 "$root/examples/qt/screen_check.py" "$work/$shot.png" "$work/animated.out" "$data" --index "$rows" \
      $([ "$shot" = animated-later ] && echo --later-frames) >"$work/$shot.pixels"
    rc=$?
    sed 's/^/    /' "$work/$shot.pixels"
    check "$shot: every cell shows its own row's image, an animated one the frame of its animation the app drew" \
      "[ $rc -eq 0 ] && [ \$(grep -c 'frame [0-9]* of [0-9]*' '$work/$shot.pixels') -ge 2 ]"
  done
  python3 "$root/examples/qt/screen_check.py" "$work/animated.png" "$work/animated.out" "$data" --index "$rows" \
    --later "$work/animated-later.png" >"$work/animated.compare"
  rc=$?
  sed 's/^/    /' "$work/animated.compare"
  check "700 ms later: the animated cells changed, the still ones are identical" \
    "[ $rc -eq 0 ] && grep -qE '^[0-9]+ cells compared, ([2-9]|[1-9][0-9]+) animated, 0 wrong$' '$work/animated.compare'"
  python3 "$root/examples/qt/screen_check.py" "$work/animated.png" "$work/animated.out" "$data" --index "$rows" \
    --later "$work/animated.png" >"$work/animated.same"
  summary=$(tail -1 "$work/animated.same")
  echo "    compared with itself: $summary"
  check "control: a screenshot compared with itself fails on every animated cell" \
    "echo '$summary' | grep -qE '^[0-9]+ cells compared, ([1-9][0-9]*) animated, \\1 wrong$'"
else
  check "animated: the app saved both screenshots" "false"
fi

# A row held back: the first screen from held_server.py, which never answers row
# HELD_ROW's request. The app must fail (that row never settles), its screenshot show
# HELD_ROW's own BlurHash, every other row its image.
rm -f "$work/held.port"
python3 "$root/examples/qt/held_server.py" "$data" "$work/held.port" --hold-row "$HELD_ROW" 2>"$work/held.log" &
held_pid=$!
for _ in $(seq 100); do [ -s "$work/held.port" ] && break; sleep 0.05; done
if [ -s "$work/held.port" ]; then
  run_app held --index "$data/index.txt" --script still --settle-timeout-ms 1500 --placeholders "$hashes" --screenshot "$work/held.png" \
    "http://127.0.0.1:$(cat "$work/held.port")/"
  kill "$held_pid" 2>/dev/null; wait "$held_pid" 2>/dev/null; held_pid=""
  check "held row: the server held row $HELD_ROW's request and sent the others" \
    "grep -q '^held /.*[?&]row=$HELD_ROW\$' '$work/held.log' && ! grep -q '^sent /.*[?&]row=$HELD_ROW\$' '$work/held.log' && grep -q '^sent ' '$work/held.log'"
  check "held row: the app fails (row $HELD_ROW never settles) and reports it on its hash" \
    "[ \"\$(cat '$work/held.rc')\" = 1 ] && grep -q '^  row *$HELD_ROW: PLACEHOLDER (its hash)' '$work/held.out'"
  if [ -s "$work/held.png" ]; then
    cp "$work/held.png" "$artifacts/qt-screenshot-held.png"
    python3 "$root/examples/qt/screen_check.py" "$work/held.png" "$work/held.out" "$data" \
      --hashes "$hashes" --held-row "$HELD_ROW" >"$work/held.pixels"
    rc=$?
    sed 's/^/    /' "$work/held.pixels"
    check "held row: row $HELD_ROW shows its own BlurHash, every other cell its own image" "[ $rc -eq 0 ]"
    python3 "$root/examples/qt/screen_check.py" "$work/held.png" "$work/held.out" "$data" \
      --hashes "$hashes" --held-row "$HELD_ROW" --claim-shift 1 >"$work/held-shifted.pixels"
    summary=$(tail -1 "$work/held-shifted.pixels")
    echo "    claimed one row off: $summary"
    check "control: the held screen checked against the next row's image and hash, every cell fails" \
      "echo '$summary' | grep -qE '^([1-9][0-9]*) cells judged, \\1 wrong$'"
  else
    check "held row: the app saved its window" "false"
  fi
else
  check "held_server.py listens" "false"
fi

# The control: every image missing (HTTP 404), so every cell keeps the placeholder; the
# app must fail, and the same pixel check must see the placeholder in every cell. No
# hashes: the flat colour.
run_app control --index "$data/index.txt" --script still --settle-timeout-ms 1500 --screenshot "$work/control.png" \
  "http://127.0.0.1:$port/no-such-dir/"
check "control: the app fails when rows keep their placeholders" "[ \"\$(cat '$work/control.rc')\" = 1 ]"
if [ -s "$work/control.png" ]; then
  cp "$work/control.png" "$artifacts/qt-screenshot-control.png"
  python3 "$root/examples/qt/screen_check.py" "$work/control.png" "$work/control.out" "$data" \
    --expect placeholder >"$work/control.pixels"
  rc=$?
  echo "    control: $(tail -1 "$work/control.pixels")"
  check "control: the pixel check sees the placeholder in every cell" "[ $rc -eq 0 ]"
else
  check "control: the app saved its window" "false"
fi

finish
