#!/usr/bin/env bash
# examples/gtk/test_xvfb.sh [STAGE]
#
# The GTK 4 example end to end, on a virtual screen: builds examples/gtk against the
# library in STAGE (default build/), serves the demo photos from a private nginx, runs the
# app's scripted session (slow scroll, fling, fling stopped dead, back) under Xvfb, takes
# a screenshot of the final frame while the app holds it, and checks from the pixels that
# every visible thumbnail cell holds a picture, not the magenta placeholder. A control run
# against missing images proves the pixel check sees the placeholder when nothing loads.
# Also checks what the app measured: every visible row showed its image within 200 ms of
# the view settling, and no pixload call kept the GTK main loop for 16 ms or more.
# Placeholders: the demo photos' BlurHashes are computed first by pixload's own encoder
# (scripts/demo-blurhashes.sh: `pixload hash --blurhash`, at the rows' 96x96 FILL) and
# given to the app. The session must draw a hash before every image that came from disk
# or network. A further run serves the first screen from examples/qt/held_server.py,
# which never answers row HELD_ROW's request: the screenshot must show that row's own
# BlurHash (decoded by the checker's own decoder), not the magenta and not flat, every
# other row a picture; checked against the next row's hash instead, the held cell fails.
# Animated rows: a run over the photos with two animated GIFs as rows 1 and 3
# (animated-data.sh) and the app's --script=animated (the view leaves them and comes
# back: the table's animation_frames_decoded must not grow while they are out of view).
# On its final screen two screenshots ANIM_APART_MS apart: the animated cells show a
# frame of their own GIF in each, a different one, every still cell is unchanged.
#
# Renderer: GSK_RENDERER=cairo. Xvfb has no GPU, and GL through llvmpipe would put a
# software rasteriser on the same two cores as the decoders and the main loop; cairo
# draws the same frame with a fraction of the CPU, and what is under test is the loading,
# not the renderer.
#
# Artefacts: STAGE/artifacts/gtk-screenshot.png (the app's window; -control.png for the
# control run, -held.png for the held-back row, -animated.png for the animated run) and the app's output, STAGE/artifacts/gtk-session.txt.
# PXL_GTK_DOCS_SCREENSHOT=FILE also copies the screenshot to FILE (docs/gtk-screenshot.png,
# the README's).
# Ports: nginx on PXL_GTK_TEST_PORT (default: one scripts/free-port.sh finds); Xvfb on the
# first free display of PXL_GTK_TEST_DISPLAY (default 40) .. 49.
# Ends with "N passed, N failed"; exits non-zero on a failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(cd "${1:-$root/build}" && pwd)
data="$stage/demo-data"
artifacts="$stage/artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-gtk.XXXXXX")
app_pid="" xvfb_pid="" held_pid=""
HELD_ROW=2
ANIM_APART_MS=700  # photos.gif shows a frame 600 ms, dots.gif 80 ms (12 a loop): both move

cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null
  [ -n "$held_pid" ] && kill "$held_pid" 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null && wait "$xvfb_pid" 2>/dev/null
  "$root/scripts/nginx.sh" stop "$work/nginx" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

for tool in Xvfb pkg-config python3 convert; do
  command -v "$tool" >/dev/null || { echo "test_xvfb.sh: $tool not found (apt-get install xvfb libgtk-4-dev)"; failed=$((failed + 1)); finish; }
done

"$root/examples/gtk/build.sh" "$stage" "$work/pixload-gtk"
check "the example builds against $stage" "[ -x '$work/pixload-gtk' ]"
[ -x "$work/pixload-gtk" ] || finish

"$root/scripts/photos.sh" "$data" 300

# The photos' BlurHashes as the rows show them, by pixload's encoder: PATH<TAB>HASH lines.
hashes="$work/blurhash.txt"
"$root/scripts/demo-blurhashes.sh" "$stage" "$data/index.txt" "$hashes"
hash_rc=$?
hashed=$(awk -F'\t' 'NF == 2 && length($2) >= 6' "$hashes" | wc -l)
check "pixload hash --blurhash: one hash per demo photo ($hashed)" "[ $hash_rc -eq 0 ]"

port=${PXL_GTK_TEST_PORT:-$("$root/scripts/free-port.sh")}
"$root/scripts/nginx.sh" start "$data" "$port" "$work/nginx" 2>/dev/null
check "nginx serves the demo photos on port $port" "[ -f '$work/nginx/nginx.pid' ]"
[ -f "$work/nginx/nginx.pid" ] || finish

# Xvfb keeps its framebuffer in an XWD file under -fbdir: a screenshot is a copy of it.
mkdir -p "$work/fb" "$work/run" && chmod 700 "$work/run"
display=${PXL_GTK_TEST_DISPLAY:-40}
while [ "$display" -le 49 ]; do
  if [ ! -e "/tmp/.X$display-lock" ]; then
    Xvfb ":$display" -screen 0 1280x800x24 -fbdir "$work/fb" -nolisten tcp >"$work/xvfb.log" 2>&1 &
    xvfb_pid=$!
    for _ in $(seq 50); do [ -S "/tmp/.X11-unix/X$display" ] && break; kill -0 "$xvfb_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$xvfb_pid" 2>/dev/null && [ -S "/tmp/.X11-unix/X$display" ] && break
    xvfb_pid=""
  fi
  display=$((display + 1))
done
check "Xvfb runs on :$display" "[ -n '$xvfb_pid' ]"
[ -n "$xvfb_pid" ] || finish

# run_app NAME ARGS...: runs the scripted app, copies the framebuffer once it says
# SCREENSHOT-READY (it holds the final frame until then), lets it exit; its exit status is
# left in $work/NAME.rc, its output in $work/NAME.out. With second_shot_ms set, a second
# copy that much later, NAME-2.xwd.
second_shot_ms=""
run_app() {
  local name="$1"; shift
  rm -f "$work/$name.held"
  env DISPLAY=":$display" GDK_BACKEND=x11 GSK_RENDERER=cairo GTK_A11Y=none NO_AT_BRIDGE=1 \
    XDG_RUNTIME_DIR="$work/run" \
    "$work/pixload-gtk" --script"$1" --hold-until "$work/$name.held" --index "$data/index.txt" "${@:2}" \
    >"$work/$name.out" 2>"$work/$name.err" &
  app_pid=$!
  local ready=0
  for _ in $(seq 1200); do   # the session takes ~10 s; 120 s for a machine under load
    grep -q '^SCREENSHOT-READY$' "$work/$name.out" && { ready=1; break; }
    kill -0 "$app_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ "$ready" -eq 1 ] && cp "$work/fb/Xvfb_screen0" "$work/$name.xwd"
  if [ "$ready" -eq 1 ] && [ -n "$second_shot_ms" ]; then
    sleep "$(awk "BEGIN { print $second_shot_ms / 1000 }")"
    cp "$work/fb/Xvfb_screen0" "$work/$name-2.xwd"
  fi
  touch "$work/$name.held"
  wait "$app_pid"; echo $? >"$work/$name.rc"
  app_pid=""
}

mkdir -p "$artifacts"
run_app session "" --placeholders "$hashes" "http://127.0.0.1:$port/"
cp "$work/session.out" "$artifacts/gtk-session.txt"
grep -v '^  row\|^cell\|^  over' "$work/session.out" | sed 's/^/    /'
[ -s "$work/session.err" ] && { echo "    stderr:"; head -20 "$work/session.err" | sed 's/^/    /'; }

check "the scripted session reached its final frame" "[ -f '$work/session.xwd' ]"
check "the app's own checks passed (exit status 0, \"script: OK\")" \
  "[ \"\$(cat '$work/session.rc')\" = 0 ] && grep -q '^script: OK$' '$work/session.out'"
check "five settles reported, none with a placeholder" \
  "[ \$(grep -c '^settle \".*\": [0-9]* visible, 0 placeholders' '$work/session.out') -eq 5 ]"
# After the first screen (which pays for the connections), per settle: the slowest row.
slowest=$(grep '^settle ".*": [0-9]* visible' "$work/session.out" | tail -n +2 |
  sed -E 's/.*slowest ([0-9.]+) ms.*/\1/' | sort -g | tail -1)
check "every visible row had its image within 200 ms of the view settling (slowest ${slowest:-?} ms)" \
  "[ -n '$slowest' ] && awk 'BEGIN { exit !($slowest <= 200) }'"
longest=$(sed -nE 's/^longest pixload call on the main loop: ([0-9.]+) ms.*/\1/p' "$work/session.out")
check "no pixload call kept the main loop 16 ms or more (longest ${longest:-?} ms)" \
  "[ -n '$longest' ] && awk 'BEGIN { exit !($longest < 16) }'"
check "rows scrolled back to came from memory: no placeholder flash" \
  "grep -q 'placeholder flashes on rows seen before: 0$' '$work/session.out'"
check "textures wrap the images' pixels: none copied" "grep -q '^textures: [1-9][0-9]* made, 0 copied' '$work/session.out'"
check "every image from disk or network came after its row's hash placeholder" \
  "grep -q '^hash placeholders: [1-9][0-9]* drawn; rows whose image came from disk or network without one first: 0$' '$work/session.out'"

if [ -f "$work/session.xwd" ]; then
  python3 "$root/examples/gtk/screen_check.py" "$work/session.xwd" "$work/session.out" \
    "$artifacts/gtk-screenshot.png" >"$work/session.pixels"
  rc=$?
  sed 's/^/    /' "$work/session.pixels"
  check "the screenshot: every visible thumbnail cell holds a picture" "[ $rc -eq 0 ]"
  if [ -n "${PXL_GTK_DOCS_SCREENSHOT:-}" ] && [ $rc -eq 0 ]; then
    cp "$artifacts/gtk-screenshot.png" "$PXL_GTK_DOCS_SCREENSHOT"
  fi
fi

# A row held back: the first screen from held_server.py, which never answers row
# HELD_ROW's request. The app must fail (that row never settles) and hold the frame; the
# screenshot must show HELD_ROW's own BlurHash, every other row a picture.
rm -f "$work/held.port"
python3 "$root/examples/qt/held_server.py" "$data" "$work/held.port" --hold-row "$HELD_ROW" 2>"$work/held.log" &
held_pid=$!
for _ in $(seq 100); do [ -s "$work/held.port" ] && break; sleep 0.05; done
if [ -s "$work/held.port" ]; then
  run_app held "=still" --settle-timeout-ms 1500 --placeholders "$hashes" "http://127.0.0.1:$(cat "$work/held.port")/"
  kill "$held_pid" 2>/dev/null; wait "$held_pid" 2>/dev/null; held_pid=""
  check "held row: the server held row $HELD_ROW's request and sent the others" \
    "grep -q '^held /.*[?&]row=$HELD_ROW\$' '$work/held.log' && ! grep -q '^sent /.*[?&]row=$HELD_ROW\$' '$work/held.log' && grep -q '^sent ' '$work/held.log'"
  check "held row: the app fails (row $HELD_ROW never settles) and reports it on its hash" \
    "[ \"\$(cat '$work/held.rc')\" != 0 ] && grep -q '^  row *$HELD_ROW: .*PLACEHOLDER (its hash)' '$work/held.out'"
  if [ -f "$work/held.xwd" ]; then
    python3 "$root/examples/gtk/screen_check.py" "$work/held.xwd" "$work/held.out" "$artifacts/gtk-screenshot-held.png" \
      --hashes "$hashes" --index "$data/index.txt" --held-row "$HELD_ROW" >"$work/held.pixels"
    rc=$?
    sed 's/^/    /' "$work/held.pixels"
    check "held row: row $HELD_ROW shows its own BlurHash, every other cell a picture" "[ $rc -eq 0 ]"
    python3 "$root/examples/gtk/screen_check.py" "$work/held.xwd" "$work/held.out" "$work/held-shifted.png" \
      --hashes "$hashes" --index "$data/index.txt" --held-row "$HELD_ROW" --claim-shift 1 >"$work/held-shifted.pixels"
    rc=$?
    echo "    claimed one row off: $(grep "^cell row $HELD_ROW " "$work/held-shifted.pixels")"
    check "control: the held cell checked against the next row's hash fails" \
      "[ $rc -ne 0 ] && grep -q '^cell row $HELD_ROW .*<-- not row $((HELD_ROW + 1))' '$work/held-shifted.pixels'"
  else
    check "held row: the app reached its final frame" "false"
  fi
else
  check "held_server.py listens" "false"
fi

# Animated rows: the photos with photos.gif and dots.gif as rows 1 and 3 (and every
# 302nd row after them), played by players; the app's own check around "away".
anim_index="$work/index-animated.txt"
"$root/examples/gtk/animated-data.sh" "$data" "$data/index.txt" "$anim_index"
second_shot_ms=$ANIM_APART_MS
run_app animated "=animated" --index "$anim_index" "http://127.0.0.1:$port/"
second_shot_ms=""
cp "$work/animated.out" "$artifacts/gtk-session-animated.txt"
grep '^settle ".*": [0-9]* animated\|^animation\|^longest' "$work/animated.out" | sed 's/^/    /'
[ -s "$work/animated.err" ] && { echo "    stderr:"; head -20 "$work/animated.err" | sed 's/^/    /'; }
check "animated: rows 1 and 3 got players and the app's checks passed (exit status 0, \"script: OK\")" \
  "[ \"\$(cat '$work/animated.rc')\" = 0 ] && grep -q '^script: OK$' '$work/animated.out' &&
   grep -q '^  row    1: .*animated (a player)' '$work/animated.out' && grep -q '^  row    3: .*animated (a player)' '$work/animated.out'"
check "animated: no frame decoded while the animated rows were out of view (pxl_table_stats.animation_frames_decoded)" \
  "grep -q '^animation frames decoded (table): [1-9][0-9]* in view .* after [0-9]* ms back in view: OK$' '$work/animated.out'"
check "animated: no cell showed another row's frame at any settle (recycled cells)" \
  "[ \$(grep -c \"^settle .*, cells showing another row's frame: 0\$\" '$work/animated.out') -eq 3 ]"
if [ -f "$work/animated.xwd" ] && [ -f "$work/animated-2.xwd" ]; then
  python3 "$root/examples/gtk/screen_check.py" "$work/animated.xwd" "$work/animated.out" \
    "$artifacts/gtk-screenshot-animated.png" --second "$work/animated-2.xwd" --index "$anim_index" --data "$data" \
    >"$work/animated.pixels"
  rc=$?
  sed 's/^/    /' "$work/animated.pixels"
  check "animated: ${ANIM_APART_MS} ms apart, each animated cell shows another frame of its own GIF, every still cell the same picture" \
    "[ $rc -eq 0 ] && [ \$(grep -c '^cell row [0-9]*: animated' '$work/animated.pixels') -ge 2 ]"
  # Controls: the same screenshot twice (a frozen screen), and rows 1 and 3 claimed as
  # each other's GIF, must both fail.
  python3 "$root/examples/gtk/screen_check.py" "$work/animated.xwd" "$work/animated.out" "$work/frozen.png" \
    --second "$work/animated.xwd" --index "$anim_index" --data "$data" >"$work/frozen.pixels"
  frozen_rc=$?
  awk 'NR == 2 { two = $0 } NR == 4 { four = $0 } { line[NR] = $0 }
       END { line[2] = four; line[4] = two; for (i = 1; i <= NR; i++) print line[i] }' "$anim_index" >"$work/swapped.txt"
  python3 "$root/examples/gtk/screen_check.py" "$work/animated.xwd" "$work/animated.out" "$work/swapped.png" \
    --second "$work/animated-2.xwd" --index "$work/swapped.txt" --data "$data" >"$work/swapped.pixels"
  swapped_rc=$?
  check "control: a frozen screen fails the two-screenshot check, so do rows 1 and 3 checked against each other's GIF" \
    "[ $frozen_rc -ne 0 ] && grep -q 'the same frame in both' '$work/frozen.pixels' &&
     [ $swapped_rc -ne 0 ] && grep -q \"none of dots.gif's frames\" '$work/swapped.pixels'"
else
  check "animated: the app reached its final frame and both screenshots were taken" "false"
fi

# The control: every image missing (HTTP 404), so every cell keeps the placeholder; the
# same pixel check must see it in every cell, or it could not fail above.
run_app control "=still" --settle-timeout-ms 1500 "http://127.0.0.1:$port/no-such-dir/"
check "control: the app fails when rows keep their placeholders" "[ \"\$(cat '$work/control.rc')\" != 0 ]"
if [ -f "$work/control.xwd" ]; then
  python3 "$root/examples/gtk/screen_check.py" "$work/control.xwd" "$work/control.out" \
    "$artifacts/gtk-screenshot-control.png" --expect placeholder >"$work/control.pixels"
  rc=$?
  sed 's/^/    /' "$work/control.pixels"
  check "control: the pixel check sees the placeholder in every cell" "[ $rc -eq 0 ]"
else
  check "control: the app reached its final frame" "false"
fi

finish
