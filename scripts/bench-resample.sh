#!/usr/bin/env bash
# scripts/bench-resample.sh STAGE DATA_DIR [ROUNDS]
#
# `make bench-resample`: the area resampler alone (bench/resample.c), CPU per 150x150 FILL
# thumbnail of the demo JPEGs at their DCT scale, for RGBA, RGB and gray: the fixed-point
# resampler on each code path against the float one it replaced (Sources/CCodecs/resample.c
# as of f75b264, the last float version, built here with its symbols renamed).
set -euo pipefail
stage="${1:?usage: $0 STAGE DATA_DIR [ROUNDS]}" data="${2:?}" rounds="${3:-7}"
codec_libs="${CODEC_LIBS:?set CODEC_LIBS (make bench-resample does)}"
out="$stage/bench-resample"
mkdir -p "$out"
scripts/photos.sh "$data" 300
git show f75b264:Sources/CCodecs/resample.c > "$out/float_resample.c"
rename=""
for f in new add_row add_row_at finish free region; do rename+=" -Dpxl_resampler_$f=old_resampler_$f"; done
# shellcheck disable=SC2086
${CC:-cc} -O2 -std=c11 $rename -ISources/CCodecs/include -c "$out/float_resample.c" -o "$out/float_resample.o"
# shellcheck disable=SC2086
${CC:-cc} -O2 -Wall -Wextra -std=c11 -ISources/CCodecs/include bench/resample.c Sources/CCodecs/*.c \
  "$out/float_resample.o" -o "$out/bench-resample" $codec_libs -lm
mapfile -t files < <(grep '\.jpg$' "$data/index.txt" | sed "s|^|$data/|")
for layout in 4 3 1; do "$out/bench-resample" "$layout" "$rounds" "${files[@]}"; done
