/* Tests/codecs/png_unfilter_test.c: png_fast.c's SIMD unfiltering (one pixel per step, two
 * Paeth rows as two chains, runs of 4, 8 and, with AVX2, 16 Paeth rows four or eight to a
 * register in bytes) against the PNG spec's byte-at-a-time filters written out here, on
 * the SSE2 path and, where the CPU has it, the AVX2 one. The byte-wise Paeth predictor against
 * the spec's for every (a, b, c); then whole images through pxl_png_fast_image_data (the
 * row grouping included): every width 1..80 and random ones up to 700, 1-4 channels,
 * random bytes, random filter-type sequences (mostly Paeth, in runs of every length,
 * and every other type between them) and flat images. The file is included so its static
 * functions can be called. */
#include "check.h"

#include "png_fast.c"

#include <zlib.h> /* compress2: the test PNGs' image data */

#include "rng.h"

/* PNG spec 9.4, as written there. */
static int spec_paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  if (pb <= pc) return b;
  return c;
}

static void spec_unfilter(uint8_t *raw, uint32_t h, size_t rowbytes, int bpp) {
  static const uint8_t none[1] = {0};
  for (uint32_t y = 0; y < h; y++) {
    uint8_t *row = raw + (size_t)y * (rowbytes + 1) + 1, type = row[-1];
    const uint8_t *up = y == 0 ? NULL : row - rowbytes - 1;
    for (size_t x = 0; x < rowbytes; x++) {
      int a = x >= (size_t)bpp ? row[x - (size_t)bpp] : 0, b = up ? up[x] : none[0];
      int c = up && x >= (size_t)bpp ? up[x - (size_t)bpp] : 0;
      int pred = type == 1 ? a : type == 2 ? b : type == 3 ? (a + b) / 2 : type == 4 ? spec_paeth(a, b, c) : 0;
      row[x] = (uint8_t)(row[x] + pred);
    }
  }
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* A PNG from the IDAT on (all pxl_png_fast_image_data reads): 8 bytes of signature and a
 * 13-byte IHDR chunk's worth of room before it, the zlib stream of raw, IEND. */
static uint8_t *png_of(const uint8_t *raw, size_t raw_size, size_t *size, size_t *idat_data) {
  uLongf zsize = compressBound((uLong)raw_size);
  uint8_t *png = calloc(33 + 12 + zsize + 12, 1);
  if (png == NULL || compress2(png + 41, &zsize, raw, (uLong)raw_size, 1) != Z_OK) exit(1);
  put32(png + 33, (uint32_t)zsize);
  memcpy(png + 37, "IDAT", 4);
  put32(png + 41 + zsize, (uint32_t)crc32(crc32(0L, NULL, 0), png + 37, (uInt)zsize + 4));
  static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
  memcpy(png + 45 + zsize, iend, 12);
  *size = 57 + zsize;
  *idat_data = 41;
  return png;
}

/* kind: 0 random bytes, 1 a flat image (every filter sees a = b = c), 2 bytes of few values. */
static int check_image(uint32_t w, uint32_t h, int channels, int paeth_percent, int kind) {
  size_t rowbytes = (size_t)w * (size_t)channels, raw_size = (rowbytes + 1) * h;
  uint8_t *raw = malloc(raw_size), *want = malloc(raw_size);
  for (uint32_t y = 0; y < h; y++) {
    uint8_t *row = raw + (size_t)y * (rowbytes + 1);
    row[0] = (uint8_t)(rand_in(1, 100) <= paeth_percent ? 4 : rand_in(0, 3));
    for (size_t x = 1; x <= rowbytes; x++)
      row[x] = (uint8_t)(kind == 0 ? (int)(next() & 0xff) : kind == 1 ? (y == 0 && x <= (size_t)channels ? 77 : 0) : rand_in(0, 2) * 127);
  }
  memcpy(want, raw, raw_size);
  spec_unfilter(want, h, rowbytes, channels);
  size_t size, idat_data;
  uint8_t *png = png_of(raw, raw_size, &size, &idat_data), *pixels = NULL;
  static const int color_types[5] = {0, 0, 4, 2, 6};
  char error[128] = "";
  pxl_png_fast_result r = pxl_png_fast_image_data(png, size, idat_data, w, h, color_types[channels], PXL_CODEC_RGBA, 4,
                                                  NULL, NULL, &pixels, error, sizeof error);
  int bad_at = -1;
  for (size_t i = 0; r == PXL_PNG_FAST_OK && bad_at < 0 && i < (size_t)w * h; i++) {
    const uint8_t *s = want + (i / w) * (rowbytes + 1) + 1 + (i % w) * (size_t)channels;
    uint8_t rgba[4] = {s[0], s[0], s[0], 0xff};
    if (channels == 2) rgba[3] = s[1];
    if (channels >= 3) { rgba[1] = s[1]; rgba[2] = s[2]; }
    if (channels == 4) rgba[3] = s[3];
    if (memcmp(pixels + i * 4, rgba, 4) != 0) bad_at = (int)i;
  }
  CHECK(r == PXL_PNG_FAST_OK && bad_at < 0, "%ux%u, %d channels, %d%% Paeth, kind %d: result %d (%s), first wrong pixel %d",
        w, h, channels, paeth_percent, kind, (int)r, error, bad_at);
  free(raw); free(want); free(png); free(pixels);
  return r == PXL_PNG_FAST_OK && bad_at < 0;
}

int main(void) {
#if defined(__SSE2__)
  /* paeth_bytes against the spec for every (a, b, c): 16 values of c per call. */
  long wrong = 0;
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++)
      for (int c0 = 0; c0 < 256; c0 += 16) {
        uint8_t cs[16], got[16];
        for (int i = 0; i < 16; i++) cs[i] = (uint8_t)(c0 + i);
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)cs);
        _mm_storeu_si128((__m128i *)(void *)got, paeth_bytes(_mm_set1_epi8((char)a), _mm_set1_epi8((char)b), c));
        for (int i = 0; i < 16; i++) wrong += got[i] != spec_paeth(a, b, c0 + i);
      }
  CHECK(wrong == 0, "paeth_bytes differs from the spec's predictor for %ld of 2^24 (a, b, c)", wrong);
#endif
  int paths = 1;
#ifdef PXL_PNG_AVX2
  __builtin_cpu_init();
  paths = __builtin_cpu_supports("avx2") ? 2 : 1;
  if (paths == 1) printf("  (no AVX2 here: the SSE2 path only)\n");
#endif
  for (int path = 0; path < paths; path++) {
#ifdef PXL_PNG_AVX2
    paeth_path = path;
#endif
    int ok = 1;
    for (int channels = 1; channels <= 4; channels++) {
      for (uint32_t w = 1; w <= 80 && ok; w++) {
        ok &= check_image(w, (uint32_t)rand_in(1, 40), channels, 100, 0);
        ok &= check_image(w, (uint32_t)rand_in(1, 40), channels, 70, 0);
      }
      for (int i = 0; i < 60 && ok; i++) {
        uint32_t w = (uint32_t)rand_in(81, 700), h = (uint32_t)rand_in(1, 40);
        ok &= check_image(w, h, channels, (int[]){100, 85, 60, 30}[i % 4], 0);
        ok &= check_image(w, h, channels, 80, 1 + i % 2);
      }
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
