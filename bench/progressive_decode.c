/* bench/progressive_decode.c: CPU per decode of progressive JPEGs at the DCT scale of a
 * SIZExSIZE FILL thumbnail (the largest 1/1..1/8 keeping the short side >= SIZE; 1/8 with
 * every scan, as a file without the first-scan shortcut decodes), from memory, with
 * libjpeg-turbo's own progressive Huffman decoder against Sources/CCodecs/jpeg_progressive.c
 * (with BMI2/POPCNT where the CPU has them, and without). Baseline files given are skipped.
 * Interleaved rounds, medians of the per-round means.
 *
 *   bench-progressive SIZE ROUNDS FILE.jpg...    (make bench-progressive) */
#define _POSIX_C_SOURCE 200809L
#include "pxl_codecs.h"
#include "pxl_jpeg_progressive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "read_file.h"

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int is_progressive(const uint8_t *d, size_t n) {
  /* The frame marker, walking the segments: SOF2 (progressive Huffman). */
  size_t at = 2;
  while (at + 4 <= n && d[at] == 0xFF) {
    uint8_t code = d[at + 1];
    if (code == 0xC2) return 1;
    if (code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC) return 0;
    at += 2 + (size_t)(d[at + 2] << 8 | d[at + 3]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s SIZE ROUNDS FILE.jpg...\n", argv[0]);
    return 2;
  }
  int size = atoi(argv[1]), rounds = atoi(argv[2]);
  int n = 0;
  uint8_t **data = calloc((size_t)argc, sizeof *data);
  size_t *sizes = calloc((size_t)argc, sizeof *sizes);
  int *scales = calloc((size_t)argc, sizeof *scales);
  double pixels = 0;
  for (int i = 3; i < argc; i++) {
    size_t len;
    uint8_t *d = read_file(argv[i], &len);
    pxl_codec_info info;
    if (d == NULL || !is_progressive(d, len) || pxl_jpeg_read_info(d, len, &info, NULL, 0) != PXL_CODEC_OK) {
      free(d);
      continue;
    }
    int short_side = info.width < info.height ? info.width : info.height, scale = 1;
    for (int s = 8; s >= 1; s /= 2)
      if ((short_side + s - 1) / s >= size) {
        scale = s;
        break;
      }
    data[n] = d;
    sizes[n] = len;
    scales[n++] = scale;
    pixels += (double)info.width * info.height;
  }
  if (n == 0) {
    fprintf(stderr, "bench-progressive: no progressive JPEG among the files\n");
    return 1;
  }
  static const char *names[3] = {"libjpeg-turbo's decoder", "jpeg_progressive.c", "jpeg_progressive.c, no BMI2"};
  double *per_round[3];
  for (int m = 0; m < 3; m++) per_round[m] = calloc((size_t)rounds, sizeof(double));
  for (int r = 0; r < rounds; r++)
    for (int m = 0; m < 3; m++) {
      pxl_jpeg_progressive_mode(m);
      double t0 = cpu_ms();
      for (int i = 0; i < n; i++) {
        pxl_codec_output out;
        if (pxl_jpeg_decode_with_options(data[i], sizes[i], 0, scales[i], UINT64_MAX, PXL_JPEG_ALL_SCANS, &out) !=
            PXL_CODEC_OK) {
          fprintf(stderr, "bench-progressive: %s failed: %s\n", argv[3 + i], out.message);
          return 1;
        }
        free(out.pixels);
      }
      per_round[m][r] = (cpu_ms() - t0) / n;
    }
  printf("%d progressive JPEGs (%.1f MP on average) at the DCT scale of a %dx%d thumbnail, %d interleaved rounds:\n",
         n, pixels / n / 1e6, size, size, rounds);
  double base = 0;
  for (int m = 0; m < 3; m++) {
    qsort(per_round[m], (size_t)rounds, sizeof(double), by_value);
    double median = per_round[m][rounds / 2];
    if (m == 0) base = median;
    printf("  %-30s %8.3f ms CPU per decode  %.3fx\n", names[m], median, median / base);
  }
  return 0;
}
