/*
 * What the conformance runner does not check of the AVIF shim (pxl_avif.h), over the sets
 * it runs: `make test-codecs` builds this and runs it on build/conformance-gen/generated-avif
 * and Tests/fixtures/avif-suite.
 *
 *   avif_test SET_DIR...
 *
 * Per "ok" row of each SET_DIR/manifest.tsv:
 *  - pxl_avif_decode_rows gives exactly pxl_avif_decode's rows, in order, in every layout
 *    (the rows path converts in strips with margins: this is what proves the margins);
 *  - pxl_avif_decode_frames' first frame is pxl_avif_decode's RGBA, its frame count is
 *    read_info's, and a frame_fn returning non-zero stops after that frame with success;
 *  - decode_frames with max_pixels one below the canvas fails TOO_MANY_PIXELS, no frame.
 * Per row of SET_DIR/avif-extra.tsv (where present, written by gen-conformance-avif.py):
 *  - frame count, each frame's duration_ms and RGBA md5 (avifdec --index N's pixels);
 *  - pxl_avif_color: the ICC profile's md5 and the CICP triple.
 * Plus argument checks. The last line is "N passed, N failed"; exit 0 iff none failed.
 */
/* The runner's md5 and read_file (Tests/codecs/conformance.c), included rather than
 * copied; it comes first, as it sets _DEFAULT_SOURCE before any system header. */
#define main conformance_main
#include "conformance.c"
#undef main

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pxl_avif.h"

#include <avif/avif.h>

static int passed, failed;

static void check(int ok, const char *file, const char *fmt, ...) {
  if (ok) return;
  va_list ap;
  va_start(ap, fmt);
  printf("  FAIL %s: ", file);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  failed++;
}

typedef struct rows_acc {
  uint8_t *pixels;
  int32_t stride, height, next, out_of_order;
} rows_acc;

/* Threads of this process (Linux). */
static int thread_count(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}
static int threads_during_rows;

static int take_row(void *user, int32_t y, const uint8_t *row) {
  rows_acc *a = user;
  int threads = thread_count();
  if (threads > threads_during_rows) threads_during_rows = threads;
  if (y != a->next || y >= a->height) { a->out_of_order = 1; return 1; }
  memcpy(a->pixels + (size_t)y * a->stride, row, (size_t)a->stride);
  a->next++;
  return 0;
}

typedef struct frames_acc {
  int count, stop_after;
  int32_t durations[64];
  char md5s[64][33];
  uint8_t *first;
  size_t first_size;
  int32_t width, height;
} frames_acc;

static int take_frame(void *user, int32_t index, const uint8_t *rgba, int32_t stride, int32_t duration_ms) {
  frames_acc *a = user;
  if (index != a->count) return 1;
  size_t size = (size_t)stride * (size_t)a->height;
  if (a->count < 64) {
    a->durations[a->count] = duration_ms;
    md5_of(rgba, size, a->md5s[a->count]);
  }
  if (a->count == 0) {
    a->first = malloc(size);
    memcpy(a->first, rgba, size);
    a->first_size = size;
  }
  a->count++;
  return a->stop_after > 0 && a->count >= a->stop_after;
}

static void check_row(const char *file, const uint8_t *d, size_t n) {
  int before = failed;
  pxl_codec_info info;
  char msg[256];
  check(pxl_avif_read_info(d, n, &info, msg, sizeof msg) == PXL_CODEC_OK, file, "read_info: %s", msg);
  for (int32_t layout = PXL_CODEC_RGBA; layout <= PXL_CODEC_GRAY; layout++) {
    pxl_codec_output whole, rows;
    if (pxl_avif_decode(d, n, layout, 100000000ull, &whole) != PXL_CODEC_OK) {
      check(0, file, "decode layout %d: %s", layout, whole.message);
      continue;
    }
    rows_acc acc = {calloc((size_t)whole.stride * whole.height, 1), whole.stride, whole.height, 0, 0};
    pxl_codec_status st = pxl_avif_decode_rows(d, n, layout, 100000000ull, take_row, &acc, &rows);
    check(st == PXL_CODEC_OK && rows.pixels == NULL, file, "decode_rows layout %d: %s", layout, rows.message);
    check(!acc.out_of_order && acc.next == whole.height, file, "layout %d: rows out of order or missing", layout);
    check(rows.width == whole.width && rows.height == whole.height && rows.stride == whole.stride &&
              rows.channels == whole.channels && rows.has_alpha == whole.has_alpha,
          file, "layout %d: decode_rows describes another image", layout);
    check(memcmp(acc.pixels, whole.pixels, (size_t)whole.stride * whole.height) == 0, file,
          "layout %d: decode_rows' pixels differ from decode's", layout);
    if (layout == PXL_CODEC_RGBA) {
      frames_acc fa = {0};
      fa.height = whole.height;
      pxl_codec_output fo;
      st = pxl_avif_decode_frames(d, n, 100000000ull, take_frame, &fa, &fo);
      check(st == PXL_CODEC_OK && fo.pixels == NULL, file, "decode_frames: %s", fo.message);
      check(fa.count == info.frame_count, file, "decode_frames gave %d frames, read_info says %d", fa.count,
            info.frame_count);
      check(fo.width == whole.width && fo.height == whole.height && fo.stride == whole.width * 4, file,
            "decode_frames' canvas %dx%d", fo.width, fo.height);
      check(fa.first != NULL && fa.first_size == (size_t)whole.stride * whole.height &&
                memcmp(fa.first, whole.pixels, fa.first_size) == 0,
            file, "decode_frames' first frame is not decode's RGBA");
      free(fa.first);
      /* Stopping after the first frame: a success with one frame. */
      frames_acc one = {0};
      one.height = whole.height;
      one.stop_after = 1;
      st = pxl_avif_decode_frames(d, n, 100000000ull, take_frame, &one, &fo);
      check(st == PXL_CODEC_OK && one.count == 1, file, "stopped decode_frames: %d frames, status %d", one.count, st);
      free(one.first);
      /* The canvas over the budget: refused before any frame. */
      frames_acc none = {0};
      none.height = whole.height;
      st = pxl_avif_decode_frames(d, n, (uint64_t)whole.width * whole.height - 1, take_frame, &none, &fo);
      check(st == PXL_CODEC_TOO_MANY_PIXELS && none.count == 0 && fo.message[0], file,
            "decode_frames over max_pixels: status %d, %d frames", st, none.count);
    }
    free(acc.pixels);
    free(whole.pixels);
  }
  if (failed == before) passed++;
}

static void check_extra(const char *file, const uint8_t *d, size_t n, int frames, const char *durations,
                        const char *md5s, const char *icc_md5, const char *cicp) {
  int before = failed;
  pxl_codec_info info;
  char msg[256];
  pxl_avif_read_info(d, n, &info, msg, sizeof msg);
  check(info.frame_count == frames && info.loop_count == 0, file, "read_info: %d frames, loop %d; expected %d, 0",
        info.frame_count, info.loop_count, frames);
  frames_acc fa = {0};
  fa.height = info.height;
  pxl_codec_output fo;
  pxl_codec_status st = pxl_avif_decode_frames(d, n, 100000000ull, take_frame, &fa, &fo);
  check(st == PXL_CODEC_OK && fa.count == frames, file, "decode_frames: %d frames (%s)", fa.count, fo.message);
  free(fa.first);
  const char *p = durations;
  for (int i = 0; i < fa.count && i < 64 && *p; i++) {
    long want = strtol(p, (char **)&p, 10);
    if (*p == ',') p++;
    check(fa.durations[i] == want, file, "frame %d: duration %d ms, expected %ld", i, fa.durations[i], want);
  }
  if (md5s[0]) {
    const char *m = md5s;
    for (int i = 0; i < fa.count && i < 64 && *m; i++) {
      check(strncmp(fa.md5s[i], m, 32) == 0, file, "frame %d: md5 %s, avifdec --index %d %.32s", i, fa.md5s[i], i, m);
      m += 32;
      if (*m == ',') m++;
    }
  }
  if (cicp[0]) {
    pxl_codec_color color;
    st = pxl_avif_color(d, n, &color);
    check(st == PXL_CODEC_OK, file, "color: status %d", st);
    char got[64], icc[33] = "-";
    snprintf(got, sizeof got, "%d/%d/%d", color.cicp_primaries, color.cicp_transfer, color.cicp_matrix);
    if (color.icc) md5_of(color.icc, color.icc_size, icc);
    check(strcmp(got, cicp) == 0, file, "CICP %s, expected %s", got, cicp);
    check(strcmp(icc, icc_md5) == 0, file, "ICC md5 %s, expected %s", icc, icc_md5);
    check(color.srgb == (strncmp(cicp, "1/13/", 5) == 0), file, "srgb %d", color.srgb);
    pxl_codec_color_free(&color);
  }
  if (failed == before) passed++;
}

static void run_manifest(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.tsv", dir);
  FILE *f = fopen(path, "r");
  if (!f) { printf("FAIL: cannot read %s\n", path); failed++; return; }
  char line[8192];
  int rows = 0;
  fgets(line, sizeof line, f); /* header: file format expect ... */
  while (fgets(line, sizeof line, f)) {
    char *cols[8] = {0};
    int nc = 0;
    for (char *s = strtok(line, "\t\n"); s && nc < 8; s = strtok(NULL, "\t\n")) cols[nc++] = s;
    if (nc < 3 || strcmp(cols[1], "avif") != 0 || strcmp(cols[2], "ok") != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, cols[0]);
    size_t n = 0;
    uint8_t *d = read_file(path, &n);
    if (!d) { check(0, cols[0], "cannot read"); continue; }
    check_row(cols[0], d, n);
    free(d);
    rows++;
  }
  fclose(f);
  printf("[%s] %d decoded rows: rows path, frames path and pixel limit checked\n", dir, rows);

  snprintf(path, sizeof path, "%s/avif-extra.tsv", dir);
  f = fopen(path, "r");
  if (!f) return;
  rows = 0;
  fgets(line, sizeof line, f);
  while (fgets(line, sizeof line, f)) {
    char *cols[6];
    int nc = 0;
    char *s = line;
    for (; nc < 6; nc++) { /* empty columns matter here: split by hand */
      cols[nc] = s;
      char *t = strpbrk(s, "\t\n");
      if (!t) { nc++; break; }
      *t = '\0';
      s = t + 1;
    }
    if (nc < 6) continue;
    snprintf(path, sizeof path, "%s/%s", dir, cols[0]);
    size_t n = 0;
    uint8_t *d = read_file(path, &n);
    if (!d) { check(0, cols[0], "cannot read"); continue; }
    check_extra(cols[0], d, n, atoi(cols[1]), cols[2], cols[3], cols[4], cols[5]);
    free(d);
    rows++;
  }
  fclose(f);
  printf("[%s] %d frame/colour rows checked\n", dir, rows);
}

static void check_arguments(void) {
  int before = failed;
  pxl_codec_output o;
  pxl_codec_info info;
  char msg[64];
  static const uint8_t junk[] = "\0\0\0\x18" "ftypavif\0\0\0\0avifmif1 and nothing else";
  check(pxl_avif_decode(NULL, 0, PXL_CODEC_RGBA, 1000, &o) == PXL_CODEC_CORRUPT && o.message[0] && !o.pixels,
        "(args)", "NULL data");
  check(pxl_avif_decode(junk, sizeof junk, 9, 1000, &o) == PXL_CODEC_UNSUPPORTED && !o.pixels, "(args)", "bad layout");
  check(pxl_avif_decode(junk, sizeof junk, PXL_CODEC_RGBA, 1000, &o) == PXL_CODEC_CORRUPT && o.message[0], "(args)",
        "an ftyp alone");
  check(pxl_avif_decode_rows(junk, sizeof junk, PXL_CODEC_RGBA, 1000, NULL, NULL, &o) == PXL_CODEC_UNSUPPORTED,
        "(args)", "no row function");
  check(pxl_avif_decode_frames(junk, sizeof junk, 1000, NULL, NULL, &o) == PXL_CODEC_UNSUPPORTED, "(args)",
        "no frame function");
  check(pxl_avif_read_info(junk, sizeof junk, &info, msg, sizeof msg) == PXL_CODEC_CORRUPT && info.orientation == 1 &&
            info.width == 0 && strncmp(msg, "AVIF: ", 6) == 0,
        "(args)", "read_info of an ftyp alone: %s", msg);
  check(pxl_avif_read_info(junk, sizeof junk, NULL, NULL, 0) == PXL_CODEC_UNSUPPORTED, "(args)", "NULL info");
  pxl_codec_color color;
  check(pxl_avif_color(junk, sizeof junk, &color) == PXL_CODEC_CORRUPT && color.icc == NULL, "(args)", "color");
  /* One dav1d thread: decoding (its context alive while rows are handed over) adds none. */
  static const char *tall = "Tests/fixtures/avif-suite/fox.profile0.8bpc.yuv420.avif";
  size_t n = 0;
  uint8_t *d = read_file(tall, &n);
  if (d != NULL) {
    int before = thread_count();
    threads_during_rows = 0;
    rows_acc acc = {calloc((size_t)1204 * 4 * 800, 1), 1204 * 4, 800, 0, 0};
    pxl_codec_status st = pxl_avif_decode_rows(d, n, PXL_CODEC_RGBA, 100000000ull, take_row, &acc, &o);
    check(st == PXL_CODEC_OK && threads_during_rows == before, tall, "%d threads while decoding, %d before (%s)",
          threads_during_rows, before, o.message);
    free(acc.pixels);
    free(d);
  }
  /* avif_shim.c's settings (one thread, the frame size limit) were chosen for dav1d, the
   * decoder AVIF_CODEC_CHOICE_AUTO picks in Debian's build. */
  const char *codec = avifCodecName(AVIF_CODEC_CHOICE_AUTO, AVIF_CODEC_FLAG_CAN_DECODE);
  check(codec != NULL && strcmp(codec, "dav1d") == 0, "(args)", "AUTO decodes with %s, not dav1d", codec ? codec : "nothing");
  if (failed == before) passed++;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: avif_test SET_DIR...\n");
    return 2;
  }
  check_arguments();
  for (int i = 1; i < argc; i++) run_manifest(argv[i]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
