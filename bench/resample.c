/* bench/resample.c: the area resampler's CPU per 150x150 FILL thumbnail, alone, on JPEGs
 * decoded once at the DCT scale pixload uses (the largest 1/1..1/8 keeping the short side
 * >= 150), fed row by row as a decoder would: the fixed-point resampler on each code path
 * against the float one it replaced (the previous Sources/CCodecs/resample.c, built with
 * its symbols renamed old_*; scripts/bench-resample.sh does that). Interleaved rounds,
 * medians of the per-round means, in ns per thumbnail.
 *
 *   bench-resample LAYOUT ROUNDS FILE.jpg...    (LAYOUT: 4 = RGBA, 3 = RGB, 1 = gray) */
#define _POSIX_C_SOURCE 200809L
#include "pxl_codecs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "read_file.h"

pxl_resampler *old_resampler_new(int32_t, int32_t, int32_t, double, double, double, double, int32_t, int32_t,
                                 int32_t);
int old_resampler_add_row(void *, int32_t, const uint8_t *);
uint8_t *old_resampler_finish(pxl_resampler *);
void old_resampler_free(pxl_resampler *);

typedef struct {
  uint8_t *pixels;
  int32_t w, h, stride, ch;
} bitmap;

static double cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One thumbnail: the centred square of the short side, to 150x150. */
static uint64_t thumb(const bitmap *b, int old) {
  double side = b->w < b->h ? b->w : b->h;
  double cx = (b->w - side) / 2, cy = (b->h - side) / 2;
  pxl_resampler *r = old ? old_resampler_new(b->w, b->h, b->ch, cx, cy, side, side, 150, 150, 0)
                         : pxl_resampler_new(b->w, b->h, b->ch, cx, cy, side, side, 150, 150, 0);
  for (int32_t y = 0; y < b->h; y++)
    (old ? old_resampler_add_row : pxl_resampler_add_row)(r, y, b->pixels + (size_t)y * (size_t)b->stride);
  uint8_t *out = old ? old_resampler_finish(r) : pxl_resampler_finish(r);
  uint64_t sum = out ? out[0] + out[150 * 75 * b->ch] : 0;
  free(out);
  (old ? old_resampler_free : pxl_resampler_free)(r);
  return sum;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int layout = atoi(argv[1]), rounds = atoi(argv[2]);
  int32_t codec_layout = layout == 4 ? PXL_CODEC_RGBA : layout == 3 ? PXL_CODEC_RGB : PXL_CODEC_GRAY;
  int n = 0;
  bitmap *maps = calloc((size_t)argc, sizeof *maps);
  long long source_px = 0;
  for (int i = 3; i < argc; i++) {
    size_t size;
    uint8_t *data = read_file(argv[i], &size);
    pxl_codec_info info;
    if (!data || pxl_jpeg_read_info(data, size, &info, NULL, 0) != PXL_CODEC_OK) continue;
    int32_t shortest = info.width < info.height ? info.width : info.height, d = 8;
    while (d > 1 && shortest / d < 150) d /= 2;
    pxl_codec_output o;
    if (pxl_jpeg_decode(data, size, codec_layout, d, 1ull << 30, &o) == PXL_CODEC_OK && o.height >= 150 &&
        o.width >= 150) {
      maps[n++] = (bitmap){o.pixels, o.width, o.height, o.stride, o.channels};
      source_px += (long long)o.width * o.height;
    }
    free(data);
  }
  const char *names[] = {"float (before)", "fixed scalar", "fixed sse2", "fixed avx2"};
  int variants = 1;
  for (int p = PXL_RESAMPLE_SCALAR; p <= PXL_RESAMPLE_AVX2; p++)
    if (pxl_resampler_force_path(p) == p) variants = p + 2;
  double *samples = calloc((size_t)(rounds * variants), sizeof *samples);
  uint64_t sink = 0;
  for (int round = -1; round < rounds; round++) /* round -1: warm-up */
    for (int v = 0; v < variants; v++) {
      if (v > 0) pxl_resampler_force_path(v - 1);
      double t0 = cpu_ns();
      for (int i = 0; i < n; i++) sink += thumb(&maps[i], v == 0);
      if (round >= 0) samples[v * rounds + round] = (cpu_ns() - t0) / n;
    }
  pxl_resampler_force_path(-1);
  printf("%d JPEGs at their DCT scale (mean %.0f source px), %d channels, 150x150 fill, %d rounds (sink %llu)\n",
         n, (double)source_px / n, layout, rounds, (unsigned long long)sink);
  double base = 0;
  for (int v = 0; v < variants; v++) {
    qsort(samples + v * rounds, (size_t)rounds, sizeof(double), cmp);
    double med = samples[v * rounds + rounds / 2];
    if (v == 0) base = med;
    printf("  %-15s %8.1f us per thumbnail  %.2fx the float one\n", names[v], med / 1000, med / base);
  }
  for (int i = 0; i < n; i++) free(maps[i].pixels);
  free(maps);
  free(samples);
  return 0;
}
