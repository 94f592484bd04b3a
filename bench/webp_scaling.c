/*
 * bench/webp_scaling.c: is libwebp's own scaler (WebPDecoderConfig use_scaling) worth
 * using for WebP thumbnails? Three ways to a 150x150 fill thumbnail (centred crop with
 * fractional edges, RGBA8), same files, interleaved, thread CPU time:
 *   full     full-size decode (pxl_webp_decode_rows) streamed into our area resampler:
 *            the exact area average of the reference pixels, so it is also the quality
 *            reference for the other two
 *   scaled2x libwebp scales the whole image to about twice the target (no crop), then our
 *            resampler takes the crop to the exact size
 *   direct   pxl_webp_decode_scaled: libwebp crops (integer edges) and scales straight to
 *            150x150
 * Quality: mean and max |difference| in levels against "full", and PSNR. With
 * WEBP_SCALING_DUMP=DIR set, each way's thumbnail of file i is also written to
 * DIR/i.WAY.rgba (raw RGBA8), so a script can compare all three with the area average of
 * the image the WebP was encoded from (what a thumbnail should show).
 *
 *   cc -O2 -std=c11 -ISources/CCodecs/include bench/webp_scaling.c Sources/CCodecs/*.c \
 *     -o webp_scaling -ljpeg -lpng -lwebp -lwebpdemux -lgif -lavif -llcms2 -lm
 *   ./webp_scaling REPS FILE...
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pxl_codecs.h"
#include "pxl_webp.h"

#define T 150

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc((size_t)len);
  if (d && fread(d, 1, (size_t)len, f) != (size_t)len) { free(d); d = NULL; }
  fclose(f);
  *n = (size_t)len;
  return d;
}

typedef struct { double x, y, w, h; } rect;

/* The fill crop: the largest centred rectangle of the target's aspect ratio. */
static rect fill_crop(int sw, int sh) {
  rect r = {0, 0, sw, sh};
  if ((double)sw / sh > 1.0) { r.w = sh; r.x = (sw - r.w) / 2; }
  else { r.h = sw; r.y = (sh - r.h) / 2; }
  return r;
}

static uint8_t *way_full(const uint8_t *d, size_t n, int sw, int sh, int alpha) {
  rect c = fill_crop(sw, sh);
  pxl_resampler *rs = pxl_resampler_new(sw, sh, 4, c.x, c.y, c.w, c.h, T, T, alpha);
  pxl_codec_output o;
  if (pxl_webp_decode_rows(d, n, PXL_CODEC_RGBA, 1u << 30, pxl_resampler_add_row, rs, &o) != PXL_CODEC_OK) {
    pxl_resampler_free(rs);
    return NULL;
  }
  uint8_t *px = pxl_resampler_finish(rs);
  pxl_resampler_free(rs);
  return px;
}

static uint8_t *way_scaled2x(const uint8_t *d, size_t n, int sw, int sh, int alpha) {
  rect c = fill_crop(sw, sh);
  double k = 2.0 * T / (c.w < c.h ? c.w : c.h);
  if (k > 1) k = 1;
  int iw = (int)ceil(sw * k), ih = (int)ceil(sh * k);
  pxl_codec_output o;
  if (pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, 1u << 30, 0, 0, 0, 0, iw, ih, &o) != PXL_CODEC_OK) return NULL;
  double kx = (double)iw / sw, ky = (double)ih / sh;
  pxl_resampler *rs = pxl_resampler_new(iw, ih, 4, c.x * kx, c.y * ky, c.w * kx, c.h * ky, T, T, alpha);
  for (int y = 0; y < ih; y++) pxl_resampler_add_row(rs, y, o.pixels + (size_t)y * o.stride);
  free(o.pixels);
  uint8_t *px = pxl_resampler_finish(rs);
  pxl_resampler_free(rs);
  return px;
}

static uint8_t *way_direct(const uint8_t *d, size_t n, int sw, int sh, int alpha) {
  (void)alpha;
  rect c = fill_crop(sw, sh);
  int x = (int)lround(c.x), y = (int)lround(c.y), w = (int)lround(c.w), h = (int)lround(c.h);
  pxl_codec_output o;
  if (pxl_webp_decode_scaled(d, n, PXL_CODEC_RGBA, 1u << 30, x, y, w, h, T, T, &o) != PXL_CODEC_OK) return NULL;
  return o.pixels;
}

typedef uint8_t *(*way_fn)(const uint8_t *, size_t, int, int, int);

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s REPS FILE...\n", argv[0]); return 2; }
  int reps = atoi(argv[1]), nf = argc - 2;
  way_fn ways[3] = {way_full, way_scaled2x, way_direct};
  const char *names[3] = {"full+resampler", "webp-scaled-2x+resampler", "webp-crop+scale-direct"};
  double *tot = calloc((size_t)3 * reps, sizeof *tot);
  double diff_sum[3] = {0}, sq_sum[3] = {0}, bytes = 0;
  int maxdiff[3] = {0};
  for (int f = 0; f < nf; f++) {
    size_t n;
    uint8_t *d = read_all(argv[f + 2], &n);
    pxl_codec_info info;
    if (!d || pxl_webp_read_info(d, n, &info, NULL, 0) != PXL_CODEC_OK) { fprintf(stderr, "skip %s\n", argv[f + 2]); free(d); continue; }
    int sw = info.width, sh = info.height, alpha = info.has_alpha;
    uint8_t *ref = way_full(d, n, sw, sh, alpha);
    for (int w = 1; w < 3; w++) {
      uint8_t *px = ways[w](d, n, sw, sh, alpha);
      if (!px || !ref) { fprintf(stderr, "%s failed on %s\n", names[w], argv[f + 2]); return 1; }
      for (int i = 0; i < T * T * 4; i++) {
        int e = abs((int)px[i] - (int)ref[i]);
        diff_sum[w] += e;
        sq_sum[w] += (double)e * e;
        if (e > maxdiff[w]) maxdiff[w] = e;
      }
      free(px);
    }
    bytes += T * T * 4;
    const char *dump = getenv("WEBP_SCALING_DUMP");
    for (int w = 0; dump && w < 3; w++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%d.%d.rgba", dump, f, w);
      uint8_t *px = w == 0 ? ref : ways[w](d, n, sw, sh, alpha);
      FILE *out = fopen(path, "wb");
      if (out && px) fwrite(px, 1, T * T * 4, out);
      if (out) fclose(out);
      if (w != 0) free(px);
    }
    free(ref);
    for (int r = 0; r < reps; r++)
      for (int k = 0; k < 3; k++) {
        int w = (k + r + f) % 3;
        double t0 = cpu_ms();
        uint8_t *px = ways[w](d, n, sw, sh, alpha);
        tot[w * reps + r] += cpu_ms() - t0;
        free(px);
      }
    free(d);
  }
  printf("webp_scaling: %d files, 150x150 fill RGBA8, thread CPU ms per image, median of %d repetitions\n", nf, reps);
  for (int w = 0; w < 3; w++) {
    qsort(tot + w * reps, (size_t)reps, sizeof *tot, cmp_d);
    double med = tot[w * reps + reps / 2] / nf;
    if (w == 0) printf("  %-26s %7.2f ms  (quality reference)\n", names[w], med);
    else {
      double mse = sq_sum[w] / bytes;
      printf("  %-26s %7.2f ms  mean |diff| %.3f levels, max %d, PSNR %.1f dB\n", names[w], med, diff_sum[w] / bytes,
             maxdiff[w], mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99.0);
    }
  }
  free(tot);
  return 0;
}
