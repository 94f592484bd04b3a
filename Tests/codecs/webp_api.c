/*
 * The WebP shim's functions beyond what the conformance runner checks: every composited
 * frame of an animation (count, durations, loop count, pixels against the PNGs the
 * animation was made from, lossless), stopping early, the pixel limit on the canvas,
 * decode_rows against decode, the ICCP bytes and EXIF orientation, the scaled decode, and
 * every truncation of an animation. Inputs: DIR/webp-api, written by
 * scripts/gen-conformance-webp.py (`make test-codecs` runs it first).
 */
// cc -O2 -I Sources/CCodecs/include Tests/codecs/webp_api.c Sources/CCodecs/*.c $(CODEC_LIBS) -o /tmp/webp_api
// /tmp/webp_api build/conformance-gen/webp-api
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pxl_codecs.h"
#include "pxl_webp.h"

#include "check.h"

static const char *dir;

static uint8_t *load(const char *name, size_t *n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc(len > 0 ? (size_t)len : 1);
  if (d && fread(d, 1, (size_t)len, f) != (size_t)len) { free(d); d = NULL; }
  fclose(f);
  *n = (size_t)len;
  return d;
}

/* Zeroes the RGB of fully transparent pixels (lossless keeps only visible pixels exactly). */
static void mask_invisible(uint8_t *p, size_t pixels) {
  for (size_t i = 0; i < pixels; i++)
    if (p[4 * i + 3] == 0) p[4 * i] = p[4 * i + 1] = p[4 * i + 2] = 0;
}

#define MAX_FRAMES 16
typedef struct collected {
  int count, stop_after;
  int32_t width, height;
  int32_t index[MAX_FRAMES], duration[MAX_FRAMES], stride[MAX_FRAMES];
  uint8_t *frame[MAX_FRAMES];
} collected;

static int collect(void *user, int32_t index, const uint8_t *rgba, int32_t stride, int32_t duration_ms) {
  collected *c = user;
  if (c->count < MAX_FRAMES) {
    size_t n = (size_t)stride * (size_t)c->height;
    c->frame[c->count] = malloc(n);
    memcpy(c->frame[c->count], rgba, n);
    c->index[c->count] = index;
    c->duration[c->count] = duration_ms;
    c->stride[c->count] = stride;
  }
  c->count++;
  return c->stop_after > 0 && c->count >= c->stop_after;
}

static void collected_free(collected *c) {
  for (int i = 0; i < c->count && i < MAX_FRAMES; i++) free(c->frame[i]);
}

typedef struct rows_ctx {
  const uint8_t *expect;
  int32_t stride, next, stop_at, mismatches;
} rows_ctx;

static int check_row(void *user, int32_t y, const uint8_t *row) {
  rows_ctx *r = user;
  if (y != r->next || memcmp(row, r->expect + (size_t)y * r->stride, (size_t)r->stride) != 0) r->mismatches++;
  r->next++;
  return r->stop_at >= 0 && y >= r->stop_at;
}

/* One animation of cases.tsv: "file loop duration..." */
static void check_case(char *line) {
  char *save = NULL, *name = strtok_r(line, "\t", &save), *loop_s = strtok_r(NULL, "\t", &save);
  int32_t durations[MAX_FRAMES];
  int nframes = 0;
  for (char *t; (t = strtok_r(NULL, "\t", &save)) != NULL && nframes < MAX_FRAMES;) durations[nframes++] = atoi(t);
  size_t n;
  uint8_t *d = load(name, &n);
  CHECK(d != NULL, "cannot read %s", name);
  if (!d) return;

  pxl_codec_info info;
  char msg[256];
  CHECK(pxl_webp_read_info(d, n, &info, msg, sizeof msg) == PXL_CODEC_OK, "%s: read_info: %s", name, msg);
  CHECK(info.frame_count == nframes, "%s: frame_count %d, expected %d", name, info.frame_count, nframes);
  CHECK(info.loop_count == atoi(loop_s), "%s: loop_count %d, expected %s", name, info.loop_count, loop_s);

  collected c = {0};
  c.height = info.height;
  pxl_codec_output out;
  pxl_codec_status st = pxl_webp_decode_frames(d, n, 100000000ull, collect, &c, &out);
  CHECK(st == PXL_CODEC_OK, "%s: decode_frames: %s", name, out.message);
  CHECK(out.pixels == NULL && out.width == info.width && out.height == info.height && out.channels == 4,
        "%s: frames output %dx%d x%d", name, out.width, out.height, out.channels);
  CHECK(c.count == nframes, "%s: %d frames, expected %d", name, c.count, nframes);
  for (int i = 0; i < c.count && i < nframes; i++) {
    CHECK(c.index[i] == i, "%s: frame %d has index %d", name, i, c.index[i]);
    CHECK(c.duration[i] == durations[i], "%s: frame %d duration %d, expected %d", name, i, c.duration[i], durations[i]);
    CHECK(c.stride[i] == info.width * 4, "%s: frame %d stride %d", name, i, c.stride[i]);
    char fname[512];
    snprintf(fname, sizeof fname, "%s.%d.rgba", name, i);
    size_t en;
    uint8_t *expect = load(fname, &en);
    size_t px = (size_t)info.width * info.height;
    CHECK(expect && en == px * 4, "%s missing or of the wrong size", fname);
    if (expect && en == px * 4) {
      mask_invisible(c.frame[i], px);
      CHECK(memcmp(expect, c.frame[i], en) == 0, "%s: composited frame %d differs from its source", name, i);
    }
    free(expect);
  }

  /* The still paths give the first frame: decode, and decode_rows row by row. */
  pxl_codec_output first;
  st = pxl_webp_decode(d, n, PXL_CODEC_RGBA, 100000000ull, &first);
  CHECK(st == PXL_CODEC_OK, "%s: decode: %s", name, first.message);
  if (st == PXL_CODEC_OK && c.count > 0) {
    uint8_t *copy = malloc((size_t)first.stride * first.height);
    memcpy(copy, first.pixels, (size_t)first.stride * first.height);
    mask_invisible(copy, (size_t)first.width * first.height);
    mask_invisible(c.frame[0], (size_t)first.width * first.height); /* already masked: idempotent */
    CHECK(memcmp(copy, c.frame[0], (size_t)first.stride * first.height) == 0, "%s: decode is not frame 1", name);
    free(copy);
    for (int32_t layout = PXL_CODEC_RGBA; layout <= PXL_CODEC_GRAY; layout++) {
      pxl_codec_output whole, rows_out;
      if (pxl_webp_decode(d, n, layout, 100000000ull, &whole) != PXL_CODEC_OK) { CHECK(0, "%s: layout %d", name, layout); continue; }
      rows_ctx r = {whole.pixels, whole.stride, 0, -1, 0};
      st = pxl_webp_decode_rows(d, n, layout, 100000000ull, check_row, &r, &rows_out);
      CHECK(st == PXL_CODEC_OK && r.next == whole.height && r.mismatches == 0 && rows_out.pixels == NULL &&
                rows_out.width == whole.width && rows_out.channels == whole.channels,
            "%s: decode_rows layout %d: %d rows, %d mismatches", name, layout, r.next, r.mismatches);
      rows_ctx stop = {whole.pixels, whole.stride, 0, 2, 0};
      st = pxl_webp_decode_rows(d, n, layout, 100000000ull, check_row, &stop, &rows_out);
      CHECK(st == PXL_CODEC_CORRUPT && stop.next == 3 && strstr(rows_out.message, "stopped by the caller"),
            "%s: a row function that stops: %d after %d rows (%s)", name, st, stop.next, rows_out.message);
      free(whole.pixels);
    }
  }
  free(first.pixels);
  collected_free(&c);

  /* Stopping after the first frame succeeds with that frame alone. */
  collected one = {0};
  one.height = info.height;
  one.stop_after = 1;
  st = pxl_webp_decode_frames(d, n, 100000000ull, collect, &one, &out);
  CHECK(st == PXL_CODEC_OK && one.count == 1, "%s: stop after 1: %d, %d frames", name, st, one.count);
  collected_free(&one);

  /* The limit is the canvas: one pixel less is refused before any frame. */
  collected none = {0};
  none.height = info.height;
  st = pxl_webp_decode_frames(d, n, (uint64_t)info.width * info.height - 1, collect, &none, &out);
  CHECK(st == PXL_CODEC_TOO_MANY_PIXELS && none.count == 0 && out.message[0], "%s: limit: %d, %d frames", name, st, none.count);
  collected_free(&none);

  /* Every truncation fails cleanly, with a message, before any frame is handed over. */
  int bad = 0;
  for (size_t k = 0; k < n; k++) {
    collected t = {0};
    t.height = info.height;
    st = pxl_webp_decode_frames(d, k, 100000000ull, collect, &t, &out);
    pxl_codec_output o2;
    pxl_codec_status st2 = pxl_webp_decode(d, k, PXL_CODEC_RGBA, 100000000ull, &o2);
    if (st == PXL_CODEC_OK || t.count != 0 || !out.message[0] || st2 == PXL_CODEC_OK || o2.pixels || !o2.message[0]) bad++;
    free(o2.pixels);
    collected_free(&t);
  }
  CHECK(bad == 0, "%s: %d of %zu truncations not refused cleanly", name, bad, n);

  /* The scaled decode refuses animations (their frames need compositing first). */
  if (nframes > 1) {
    st = pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, 100000000ull, 0, 0, 0, 0, 8, 8, &out);
    CHECK(st == PXL_CODEC_UNSUPPORTED && out.pixels == NULL, "%s: scaled decode of an animation: %d", name, st);
  }
  free(d);
}

static void check_color_and_scaling(void) {
  size_t n, pn;
  uint8_t *d = load("icc-exif6.webp", &n), *profile = load("profile.icc", &pn);
  CHECK(d && profile, "icc-exif6.webp or profile.icc missing");
  if (!d || !profile) { free(d); free(profile); return; }
  pxl_codec_color color;
  CHECK(pxl_webp_color(d, n, &color) == PXL_CODEC_OK, "color failed");
  CHECK(color.icc && color.icc_size == pn && memcmp(color.icc, profile, pn) == 0, "ICCP bytes differ (%zu vs %zu)",
        color.icc_size, pn);
  pxl_codec_color_free(&color);
  CHECK(color.icc == NULL, "color_free left icc");
  pxl_codec_info info;
  CHECK(pxl_webp_read_info(d, n, &info, NULL, 0) == PXL_CODEC_OK && info.orientation == 6 && info.frame_count == 1 &&
            info.loop_count == 0, "orientation %d frames %d", info.orientation, info.frame_count);

  /* Without ICCP: OK, nothing set. */
  size_t an;
  uint8_t *anim = load("opaque-4-frames.webp", &an);
  CHECK(anim && pxl_webp_color(anim, an, &color) == PXL_CODEC_OK && color.icc == NULL && color.icc_size == 0,
        "color of a file without ICCP");
  pxl_codec_color_free(&color);
  CHECK(pxl_webp_color(d, 20, &color) == PXL_CODEC_CORRUPT && color.icc == NULL, "color of a truncated file");
  free(anim);

  /* Scaled: exact size, every layout consistent in shape; a bad crop is refused. */
  pxl_codec_output out;
  pxl_codec_status st = pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, 100000000ull, 2, 2, 40, 30, 20, 15, &out);
  CHECK(st == PXL_CODEC_OK && out.width == 20 && out.height == 15 && out.stride == 80 && out.pixels,
        "scaled: %d %dx%d (%s)", st, out.width, out.height, out.message);
  free(out.pixels);
  st = pxl_webp_decode_scaled(d, n, PXL_CODEC_GRAY, 100000000ull, 0, 0, 0, 0, 7, 5, &out);
  CHECK(st == PXL_CODEC_OK && out.width == 7 && out.channels == 1 && out.stride == 7, "scaled gray: %d", st);
  free(out.pixels);
  st = pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, 100000000ull, 30, 0, 40, 10, 4, 4, &out);
  CHECK(st == PXL_CODEC_UNSUPPORTED && out.pixels == NULL && out.message[0], "crop outside: %d", st);
  st = pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, (uint64_t)info.width * info.height - 1, 0, 0, 0, 0, 4, 4, &out);
  CHECK(st == PXL_CODEC_TOO_MANY_PIXELS && out.pixels == NULL, "scaled limit: %d", st);
  st = pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, (uint64_t)info.width * info.height, 0, 0, 0, 0, info.width * 2,
                              info.height, &out);
  CHECK(st == PXL_CODEC_TOO_MANY_PIXELS && out.pixels == NULL, "scaled output over the limit: %d", st);

  /* Arguments. */
  CHECK(pxl_webp_decode(d, n, 9, 100000000ull, &out) == PXL_CODEC_UNSUPPORTED && out.message[0], "bad layout");
  CHECK(pxl_webp_decode(NULL, 0, PXL_CODEC_RGBA, 100000000ull, &out) == PXL_CODEC_CORRUPT && out.message[0], "NULL data");
  CHECK(pxl_webp_decode_rows(d, n, PXL_CODEC_RGBA, 100000000ull, NULL, NULL, &out) == PXL_CODEC_UNSUPPORTED, "no row fn");
  CHECK(pxl_webp_decode_frames(d, n, 100000000ull, NULL, NULL, &out) == PXL_CODEC_UNSUPPORTED, "no frame fn");
  CHECK(pxl_webp_read_info(d, n, NULL, NULL, 0) == PXL_CODEC_UNSUPPORTED, "NULL info");
  free(d);
  free(profile);
}

int main(int argc, char **argv) {
  dir = argc > 1 ? argv[1] : "build/conformance-gen/webp-api";
  size_t n;
  uint8_t *cases = load("cases.tsv", &n);
  if (!cases) {
    printf("webp_api: cannot read %s/cases.tsv (scripts/gen-conformance-webp.py writes it)\n", dir);
    printf("0 passed, 1 failed\n");
    return 1;
  }
  char *text = realloc(cases, n + 1);
  text[n] = '\0';
  char *save = NULL;
  int ncases = 0;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (*line == '\0') continue;
    char *copy = strdup(line);
    check_case(copy);
    free(copy);
    ncases++;
  }
  free(text);
  check_color_and_scaling();
  printf("webp_api: %d animations and stills, colour, scaling, arguments\n", ncases);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
