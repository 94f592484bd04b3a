/*
 * bench/color.c: where a thumbnail's colour conversion goes. Over the CCodecs shims, as
 * ImageDecoder calls them, for 150x150 FILL RGBA8 thumbnails of tagged files:
 *   none    rows (DCT-scaled for JPEG) -> area resampler                  (no conversion)
 *   after   rows -> resampler -> convert the 150x150 result               (what pixload does)
 *   before  rows -> convert each row -> resampler                         (the alternative)
 * CPU ms per image (the thread's CPU clock), median of REPS interleaved repetitions, and
 * how far apart `after` and `before` are (max and mean |difference| in levels, and the
 * share of samples that differ by more than 1).
 *
 *   color REPS FILE...
 * (scripts/bench-color.sh makes the tagged files and runs this and pixload-bench-decode --color.)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pxl_codecs.h"
#include "read_file.h"

#define THUMB 150

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct job {
  const uint8_t *data;
  size_t size;
  int jpeg;
  int32_t width, height; /* decoded (DCT-scaled) */
  int scale;
  double cx, cy, cw, ch;  /* centre crop */
  pxl_color_transform *t;
  pxl_resampler *r;
  uint8_t *row;           /* `before`: a converted copy of the row */
} job;

static int convert_row(void *user, int32_t y, const uint8_t *row) {
  job *j = user;
  memcpy(j->row, row, (size_t)j->width * 4);
  pxl_color_transform_apply(j->t, j->row, j->width, 1, j->width * 4, PXL_CODEC_RGBA, 0, NULL, 0);
  return pxl_resampler_add_row(j->r, y, j->row);
}

/* mode 0 none, 1 after, 2 before. Returns the malloc'd thumbnail. */
static uint8_t *thumbnail(job *j, int mode) {
  j->r = pxl_resampler_new(j->width, j->height, 4, j->cx, j->cy, j->cw, j->ch, THUMB, THUMB, 0);
  pxl_codec_output out;
  pxl_codec_row_fn fn = mode == 2 ? convert_row : pxl_resampler_add_row;
  void *user = mode == 2 ? (void *)j : (void *)j->r;
  pxl_codec_status st = j->jpeg ? pxl_jpeg_decode_rows(j->data, j->size, PXL_CODEC_RGBA, j->scale, 1u << 30, fn, user, &out)
                                : pxl_png_decode_rows(j->data, j->size, PXL_CODEC_RGBA, 1u << 30, fn, user, &out);
  uint8_t *px = st == PXL_CODEC_OK ? pxl_resampler_finish(j->r) : NULL;
  pxl_resampler_free(j->r);
  if (px && mode == 1) pxl_color_transform_apply(j->t, px, THUMB, THUMB, THUMB * 4, PXL_CODEC_RGBA, 0, NULL, 0);
  return px;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: color REPS FILE...\n");
    return 2;
  }
  int reps = atoi(argv[1]);
  int files = argc - 2;
  double *totals = calloc((size_t)reps * 3, sizeof(double));
  int maxdiff = 0;
  double diffsum = 0, samples = 0, over1 = 0;
  int used = 0;
  for (int rep = 0; rep < reps; rep++) {
    for (int f = 0; f < files; f++) {
      size_t size;
      uint8_t *data = read_file(argv[2 + f], &size);
      if (!data) { fprintf(stderr, "cannot read %s\n", argv[2 + f]); return 1; }
      job j = {0};
      j.data = data;
      j.size = size;
      j.jpeg = size > 2 && data[0] == 0xFF;
      pxl_codec_info info;
      if ((j.jpeg ? pxl_jpeg_read_info : pxl_png_read_info)(data, size, &info, NULL, 0) != PXL_CODEC_OK) return 1;
      j.scale = 1;
      if (j.jpeg)
        for (int s = 8; s > 1; s /= 2)
          if ((info.width + s - 1) / s >= THUMB && (info.height + s - 1) / s >= THUMB) { j.scale = s; break; }
      j.width = (info.width + j.scale - 1) / j.scale;
      j.height = (info.height + j.scale - 1) / j.scale;
      double side = j.width < j.height ? j.width : j.height;
      j.cw = j.ch = side;
      j.cx = (j.width - side) / 2;
      j.cy = (j.height - side) / 2;
      pxl_codec_color c;
      (j.jpeg ? pxl_jpeg_color : pxl_png_color)(data, size, &c);
      j.t = pxl_color_transform_get(&c, NULL, 0);
      pxl_codec_color_free(&c);
      if (!j.t) { fprintf(stderr, "%s: not tagged (or sRGB)\n", argv[2 + f]); return 1; }
      j.row = malloc((size_t)j.width * 4);
      uint8_t *px[3] = {0};
      for (int k = 0; k < 3; k++) {
        int mode = (k + rep + f) % 3; /* interleaved */
        double start = cpu_ms();
        px[mode] = thumbnail(&j, mode);
        totals[rep * 3 + mode] += cpu_ms() - start;
        if (!px[mode]) { fprintf(stderr, "%s: decode failed\n", argv[2 + f]); return 1; }
      }
      if (rep == 0) {
        used++;
        for (size_t i = 0; i < (size_t)THUMB * THUMB * 4; i++) {
          if ((i & 3) == 3) continue;
          int d = abs((int)px[1][i] - (int)px[2][i]);
          if (d > maxdiff) maxdiff = d;
          diffsum += d;
          samples++;
          over1 += d > 1;
        }
      }
      for (int k = 0; k < 3; k++) free(px[k]);
      free(j.row);
      pxl_color_transform_release(j.t);
      free(data);
    }
  }
  static const char *names[3] = {"none (no conversion)", "after resampling (pixload)", "before resampling (per row)"};
  printf("%d tagged files, 150x150 fill RGBA8, CPU ms per image, median of %d repetitions:\n", used, reps);
  double med[3];
  for (int m = 0; m < 3; m++) {
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) v[r] = totals[r * 3 + m] / files;
    qsort(v, (size_t)reps, sizeof(double), cmp);
    med[m] = reps % 2 ? v[reps / 2] : (v[reps / 2 - 1] + v[reps / 2]) / 2;
    free(v);
  }
  for (int m = 0; m < 3; m++)
    printf("  %-30s %8.3f ms  (+%.3f ms, %+.1f %%)\n", names[m], med[m], med[m] - med[0],
           med[0] > 0 ? 100 * (med[m] - med[0]) / med[0] : 0);
  printf("  after vs before: max |difference| %d levels, mean %.3f, %.2f %% of samples differ by more than 1\n",
         maxdiff, samples ? diffsum / samples : 0, samples ? 100 * over1 / samples : 0);
  free(totals);
  pxl_color_cache_clear();
  return 0;
}
