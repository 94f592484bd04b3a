/*
 * libavif called directly, as a C programmer would without pixload, for `make
 * bench-decode`: one decoder per image, one dav1d thread, parse, first frame, then
 * avifImageYUVToRGB at depth 8 with avifRGBImageSetDefaults' settings into a malloc'd
 * RGBA8 buffer.
 *
 * Same pixels as pixload's avif_shim.c (the benchmark checks full-size outputs are
 * byte-identical), so the same conversion format: RGBA when the image has an alpha plane,
 * else RGB into the RGBA buffer's rows, widened in place (avifdec's choice; libavif's RGBA
 * path differs for 10/12-bit subsampled images). An 8-bit 4:0:0 image without alpha is
 * its Y plane, as avifdec writes it.
 */
#include "avif_direct.h"

#include <stdlib.h>
#include <string.h>

#include <avif/avif.h>

int bench_is_avif(const uint8_t *d, size_t n) {
  if (n < 16 || memcmp(d + 4, "ftyp", 4) != 0) return 0;
  size_t box = (size_t)d[0] << 24 | (size_t)d[1] << 16 | (size_t)d[2] << 8 | d[3];
  if (box > n) box = n;
  for (size_t i = 8; i + 4 <= box; i += 4) {
    if (i == 12) continue; /* minor version */
    if (memcmp(d + i, "avif", 4) == 0 || memcmp(d + i, "avis", 4) == 0) return 1;
  }
  return 0;
}

static avifDecoder *parsed(const uint8_t *data, size_t size) {
  avifDecoder *d = avifDecoderCreate();
  d->maxThreads = 1;
  d->strictFlags = AVIF_STRICT_DISABLED;
  if (avifDecoderSetIOMemory(d, data, size) != AVIF_RESULT_OK || avifDecoderParse(d) != AVIF_RESULT_OK) {
    avifDecoderDestroy(d);
    return NULL;
  }
  return d;
}

int bench_avif_decode(const uint8_t *data, size_t size, int *has_alpha, bench_image *out) {
  avifDecoder *d = parsed(data, size);
  if (d == NULL) return 1;
  if (avifDecoderNextImage(d) != AVIF_RESULT_OK) { avifDecoderDestroy(d); return 1; }
  const avifImage *im = d->image;
  size_t stride = (size_t)im->width * 4;
  uint8_t *pixels = malloc(stride * im->height);
  if (pixels == NULL) { avifDecoderDestroy(d); return 1; }
  int alpha = im->alphaPlane != NULL;
  if (!alpha && im->yuvFormat == AVIF_PIXEL_FORMAT_YUV400 && im->depth == 8) {
    for (uint32_t y = 0; y < im->height; y++) {
      const uint8_t *s = im->yuvPlanes[AVIF_CHAN_Y] + (size_t)y * im->yuvRowBytes[AVIF_CHAN_Y];
      uint8_t *p = pixels + y * stride;
      for (uint32_t x = 0; x < im->width; x++) p[4 * x] = p[4 * x + 1] = p[4 * x + 2] = s[x], p[4 * x + 3] = 255;
    }
  } else {
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, im);
    rgb.depth = 8;
    /* 8-bit: RGBA, the same libyuv arithmetic as RGB and faster (see avif_shim.c). */
    int rgba = alpha || im->depth == 8;
    rgb.format = rgba ? AVIF_RGB_FORMAT_RGBA : AVIF_RGB_FORMAT_RGB;
    rgb.pixels = pixels;
    rgb.rowBytes = (uint32_t)stride;
    if (avifImageYUVToRGB(im, &rgb) != AVIF_RESULT_OK) { free(pixels); avifDecoderDestroy(d); return 1; }
    if (!rgba) {
      for (uint32_t y = 0; y < im->height; y++) {
        uint8_t *p = pixels + y * stride;
        for (uint32_t x = im->width; x-- > 0;) {
          p[4 * x + 3] = 255;
          p[4 * x + 2] = p[3 * x + 2];
          p[4 * x + 1] = p[3 * x + 1];
          p[4 * x] = p[3 * x];
        }
      }
    }
  }
  *has_alpha = alpha;
  out->pixels = pixels;
  out->width = (int32_t)im->width;
  out->height = (int32_t)im->height;
  avifDecoderDestroy(d);
  return 0;
}

const char *bench_avif_kind(const uint8_t *data, size_t size) {
  avifDecoder *d = parsed(data, size);
  if (d == NULL) return "unknown";
  static const char *names[2][3][4] = {
      {{"AVIF 8-bit 4:4:4", "AVIF 8-bit 4:2:2", "AVIF 8-bit 4:2:0", "AVIF 8-bit 4:0:0"},
       {"AVIF 10-bit 4:4:4", "AVIF 10-bit 4:2:2", "AVIF 10-bit 4:2:0", "AVIF 10-bit 4:0:0"},
       {"AVIF 12-bit 4:4:4", "AVIF 12-bit 4:2:2", "AVIF 12-bit 4:2:0", "AVIF 12-bit 4:0:0"}},
      {{"AVIF alpha 8-bit", "AVIF alpha 8-bit", "AVIF alpha 8-bit", "AVIF alpha 8-bit"},
       {"AVIF alpha 10-bit", "AVIF alpha 10-bit", "AVIF alpha 10-bit", "AVIF alpha 10-bit"},
       {"AVIF alpha 12-bit", "AVIF alpha 12-bit", "AVIF alpha 12-bit", "AVIF alpha 12-bit"}}};
  int depth = d->image->depth == 12 ? 2 : d->image->depth == 10 ? 1 : 0;
  int format = d->image->yuvFormat >= AVIF_PIXEL_FORMAT_YUV444 && d->image->yuvFormat <= AVIF_PIXEL_FORMAT_YUV400
                   ? (int)d->image->yuvFormat - (int)AVIF_PIXEL_FORMAT_YUV444 : 0;
  const char *kind = names[d->alphaPresent ? 1 : 0][depth][format];
  avifDecoderDestroy(d);
  return kind;
}
