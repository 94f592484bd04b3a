/* Tests/codecs/resample_test.c: the fixed-point area resampler (Sources/CCodecs/resample.c)
 * against the exact area average computed here in double precision, on every code path
 * the CPU has (scalar, SSE2, AVX2): random sizes and fractional crops at shrink ratios 1
 * to 40, odd sizes, 1-pixel images, 1, 3 and 4 channels (gray, RGB, RGBA/BGRA: the
 * resampler sees only the channel count, alpha last), premultiplied averaging and not,
 * noise, flat white and 0/255 stripes (the worst case for the weights' rounding). Each
 * output byte must be within 1 level of the exact (unrounded) average; the paths must
 * agree to the byte; rows are fed as region rows in buffers exactly as wide as the
 * region (a read past its end would be one past the allocation). */
#include "check.h"
#include "pxl_codecs.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
static double unit(void) { return (double)(next() >> 11) / 9007199254740992.0; }

/* The area taps, independently: coverage of [lo, hi) by each source pixel of the window
 * the resampler uses (at least one pixel, clamped to the image; the nearest one if the
 * window covers none). Returns the count, fills first and unnormalised weights. */
static int ref_taps(int i, int n, double start, double length, int limit, int *first, double *w) {
  double step = length / n, lo = start + i * step, hi = lo + step;
  long begin = (long)floor(lo);
  if (begin < 0) begin = 0;
  if (begin > limit - 1) begin = limit - 1;
  long end = (long)ceil(hi);
  if (end < begin + 1) end = begin + 1;
  if (end > limit) end = limit;
  double total = 0;
  for (long j = begin; j < end; j++) {
    double a = fmin(hi, (double)(j + 1)) - fmax(lo, (double)j);
    w[j - begin] = a > 0 ? a : 0;
    total += w[j - begin];
  }
  *first = (int)begin;
  if (total <= 0) {
    w[0] = 1;
    return 1;
  }
  return (int)(end - begin);
}

typedef struct {
  int w, h, ch, ow, oh, premultiply;
  double cx, cy, cw, chh;
  uint8_t *src; /* as delivered */
} job;

/* Runs the resampler on the current path, feeding region rows of exactly the region's
 * width. */
static uint8_t *run(const job *j, int *path) {
  pxl_resampler *r = pxl_resampler_new(j->w, j->h, j->ch, j->cx, j->cy, j->cw, j->chh, j->ow, j->oh, j->premultiply);
  if (r == NULL) return NULL;
  *path = pxl_resampler_path(r);
  int32_t rx, ry, rw, rh;
  pxl_resampler_region(r, &rx, &ry, &rw, &rh);
  uint8_t *row = malloc((size_t)rw * (size_t)j->ch);
  for (int y = 0; y < j->h; y++) {
    memcpy(row, j->src + ((size_t)y * (size_t)j->w + (size_t)rx) * (size_t)j->ch, (size_t)rw * (size_t)j->ch);
    pxl_resampler_add_row_at(r, y, rx, row);
  }
  free(row);
  uint8_t *out = pxl_resampler_finish(r);
  pxl_resampler_free(r);
  return out;
}

/* The largest distance of `out` from the exact average (premultiplied values are the
 * library's: (c * a + 127) / 255, integers). */
static double max_error(const job *j, const uint8_t *out) {
  double *wx = malloc(((size_t)j->w + 2) * sizeof *wx), *wy = malloc(((size_t)j->h + 2) * sizeof *wy);
  double worst = 0;
  for (int oy = 0; oy < j->oh; oy++) {
    int fy, ny = ref_taps(oy, j->oh, j->cy, j->chh, j->h, &fy, wy);
    for (int ox = 0; ox < j->ow; ox++) {
      int fx, nx = ref_taps(ox, j->ow, j->cx, j->cw, j->w, &fx, wx);
      for (int c = 0; c < j->ch; c++) {
        double sum = 0, total = 0;
        for (int b = 0; b < ny; b++)
          for (int a = 0; a < nx; a++) {
            const uint8_t *p = j->src + ((size_t)(fy + b) * (size_t)j->w + (size_t)(fx + a)) * (size_t)j->ch;
            unsigned v = p[c];
            if (j->premultiply && c < 3) v = (v * p[3] + 127) / 255;
            sum += wy[b] * wx[a] * v;
            total += wy[b] * wx[a];
          }
        double e = fabs(out[((size_t)oy * (size_t)j->ow + (size_t)ox) * (size_t)j->ch + (size_t)c] - sum / total);
        if (e > worst) worst = e;
      }
    }
  }
  free(wx);
  free(wy);
  return worst;
}

static void fill(job *j, int kind) {
  size_t n = (size_t)j->w * (size_t)j->h * (size_t)j->ch;
  j->src = malloc(n);
  for (size_t i = 0; i < n; i++) {
    size_t px = i / (size_t)j->ch, x = px % (size_t)j->w, y = px / (size_t)j->w;
    switch (kind) {
    case 0: j->src[i] = (uint8_t)next(); break;
    case 1: j->src[i] = 255; break;
    default: j->src[i] = ((x + y) & 1) ? 255 : 0; break; /* stripes both ways */
    }
  }
  if (j->ch == 4 && kind == 0) /* alpha: 0, 255 and everything between */
    for (size_t p = 3; p < n; p += 4) j->src[p] = (p / 4) % 5 == 0 ? 0 : (p / 4) % 5 == 1 ? 255 : j->src[p];
}

int main(void) {
  int paths[3], npaths = 0;
  for (int p = PXL_RESAMPLE_SCALAR; p <= PXL_RESAMPLE_AVX2; p++)
    if (pxl_resampler_force_path(p) == p) paths[npaths++] = p;
  printf("paths: %d (scalar%s%s)\n", npaths, npaths > 1 ? ", sse2" : "", npaths > 2 ? ", avx2" : "");
#if defined(__x86_64__)
  CHECK(npaths >= 2, "x86-64 has at least the scalar and SSE2 paths");
#endif
  CHECK(pxl_resampler_force_path(99) == -1, "an unknown path is refused");

  double worst[3] = {0, 0, 0};
  int cases = 0;
  for (int round = 0; round < 2000; round++) {
    job j = {0};
    j.ch = (int[]){1, 3, 4}[round % 3];
    int kind = round % 7 == 5 ? 1 : round % 7 == 6 ? 2 : 0;
    double ratio = round % 11 == 0 ? 1.0 : 1.0 + 39.0 * unit() * unit(); /* more of the small ratios thumbnails use */
    if (round % 13 == 0) ratio = 40.0;
    j.ow = round % 17 == 0 ? 1 : rand_in(1, ratio > 20 ? 12 : 40);
    j.oh = round % 19 == 0 ? 1 : rand_in(1, ratio > 20 ? 12 : 40);
    double ry = round % 5 == 0 ? ratio : 1.0 + (ratio - 1.0) * unit(); /* the axes differ in a fill crop */
    j.cw = j.ow * ratio;
    j.chh = j.oh * ry;
    int whole = round % 11 == 0;
    j.cx = whole ? 0 : unit() * 6;
    j.cy = whole ? 0 : unit() * 6;
    j.w = (int)ceil(j.cx + j.cw) + (whole ? 0 : rand_in(0, 5));
    j.h = (int)ceil(j.cy + j.chh) + (whole ? 0 : rand_in(0, 5));
    if (round == 1) { j.w = j.h = 1; j.cx = j.cy = 0; j.cw = j.chh = 1; j.ow = j.oh = 1; } /* a 1-pixel image */
    if (round == 2) { j.w = 1; j.h = 37; j.cx = j.cy = 0; j.cw = 1; j.chh = 37; j.ow = 1; j.oh = 3; }
    if (round == 3) { j.w = 41; j.h = 1; j.cx = j.cy = 0; j.cw = 41; j.chh = 1; j.ow = 3; j.oh = 1; }
    j.premultiply = j.ch == 4 && round % 2 == 0;
    fill(&j, kind);
    uint8_t *reference = NULL;
    for (int k = 0; k < npaths; k++) {
      pxl_resampler_force_path(paths[k]);
      int used = -1;
      uint8_t *out = run(&j, &used);
      CHECK(out != NULL && used == paths[k], "case %d path %d: no output", round, paths[k]);
      if (out == NULL) continue;
      double e = max_error(&j, out);
      if (e > worst[k]) worst[k] = e;
      CHECK(e <= 1.0, "case %d path %d: %dx%dx%d crop %.3f,%.3f %.3fx%.3f -> %dx%d premultiply %d: %.3f levels off",
            round, paths[k], j.w, j.h, j.ch, j.cx, j.cy, j.cw, j.chh, j.ow, j.oh, j.premultiply, e);
      if (whole && ratio == 1.0 && ry == 1.0 && !j.premultiply)
        CHECK(e == 0, "case %d path %d: the same size must give the same pixels", round, paths[k]);
      if (reference == NULL) {
        reference = out;
      } else {
        CHECK(memcmp(out, reference, (size_t)j.ow * (size_t)j.oh * (size_t)j.ch) == 0,
              "case %d: path %d differs from path %d", round, paths[k], paths[0]);
        free(out);
      }
    }
    free(reference);
    free(j.src);
    cases++;
  }
  pxl_resampler_force_path(-1);
  for (int k = 0; k < npaths; k++) printf("path %d: largest error %.3f levels over %d cases\n", paths[k], worst[k], cases);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
