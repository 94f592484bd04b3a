/*
 * bench/placeholder.c: the time pxl_placeholder_decode takes on the caller's thread (a
 * scroll frame's budget), BlurHash 4x3 and ThumbHash, 32x32 and 256x256, and the time
 * pxl_placeholder_encode takes on a 100x100 image. Median of ROUNDS rounds of N calls.
 *
 *   make bench-placeholder      (cc ... -lpixload; prints one line per case)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pixload.h"

enum { ROUNDS = 9 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double decode_us(int32_t kind, const void *hash, size_t length, int side, int n) {
  double rounds[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double start = now_us();
    for (int i = 0; i < n; i++) {
      pxl_image *image = NULL;
      if (pxl_placeholder_decode(kind, hash, length, side, side, &image) != PXL_OK) {
        fprintf(stderr, "bench-placeholder: decode failed\n");
        exit(1);
      }
      pxl_image_release(image);
    }
    rounds[r] = (now_us() - start) / n;
  }
  qsort(rounds, ROUNDS, sizeof rounds[0], compare);
  return rounds[ROUNDS / 2];
}

int main(void) {
  static const char blur[] = "LEHV6nWB2yk8pyo0adR*.7kCMdnj";
  pxl_image *source = NULL;
  if (pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 100, 100, &source) != PXL_OK) return 1;
  uint8_t thumb[PXL_PLACEHOLDER_MAX_BYTES + 1];
  size_t thumb_length = 0;
  if (pxl_placeholder_encode(PXL_PLACEHOLDER_THUMBHASH, source, 0, 0, thumb, sizeof thumb, &thumb_length) != PXL_OK)
    return 1;
  printf("pixload %s: placeholder decode, median of %d rounds\n", pxl_version(), ROUNDS);
  printf("  BlurHash 4x3  32x32   %8.2f us\n", decode_us(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 32, 2000));
  printf("  ThumbHash     32x32   %8.2f us\n", decode_us(PXL_PLACEHOLDER_THUMBHASH, thumb, thumb_length, 32, 2000));
  printf("  BlurHash 4x3  256x256 %8.2f us\n", decode_us(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 256, 50));
  printf("  ThumbHash     256x256 %8.2f us\n", decode_us(PXL_PLACEHOLDER_THUMBHASH, thumb, thumb_length, 256, 50));
  uint8_t out[PXL_PLACEHOLDER_MAX_BYTES + 1];
  size_t length;
  for (int kind = PXL_PLACEHOLDER_BLURHASH; kind <= PXL_PLACEHOLDER_THUMBHASH; kind++) {
    double rounds[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
      double start = now_us();
      for (int i = 0; i < 20; i++) pxl_placeholder_encode(kind, source, 4, 3, out, sizeof out, &length);
      rounds[r] = (now_us() - start) / 20;
    }
    qsort(rounds, ROUNDS, sizeof rounds[0], compare);
    printf("  encode %-9s 100x100 %8.2f us\n", kind == PXL_PLACEHOLDER_BLURHASH ? "BlurHash" : "ThumbHash",
           rounds[ROUNDS / 2]);
  }
  pxl_image_release(source);
  return 0;
}
