/*
 * EXIF orientation: the stored pixels turned upright into a new buffer
 * (pxl_codecs.h, pxl_orient). A thumbnail of a turned photo is turned after the resize,
 * so this runs on the output (150x150: 22,500 pixels); the loop it replaces copied each
 * pixel byte by byte through memmove and cost a thumbnail about as much as its resampler.
 * Here a pixel of 4 bytes is one 32-bit load and store, and each orientation has its
 * own loop with the source step fixed outside it. Also the expansion of a gray thumbnail
 * into a colour format.
 */
#include "pxl_codecs.h"

#include <stdlib.h>
#include <string.h>

/* The stored pixel shown at display (0, 0) and the steps (in pixels) from it to the next
 * display column and the next display row, for each EXIF orientation (1-8). */
static void orient_steps(int32_t orientation, int32_t width, int32_t height, long *start, long *dx, long *dy) {
  long w = width, h = height;
  switch (orientation) {
    case 2: *start = w - 1, *dx = -1, *dy = w; break;                      /* (w-1-x, y) */
    case 3: *start = (h - 1) * w + w - 1, *dx = -1, *dy = -w; break;       /* (w-1-x, h-1-y) */
    case 4: *start = (h - 1) * w, *dx = 1, *dy = -w; break;                /* (x, h-1-y) */
    case 5: *start = 0, *dx = w, *dy = 1; break;                           /* (y, x) */
    case 6: *start = (h - 1) * w, *dx = -w, *dy = 1; break;                /* (y, h-1-x) */
    case 7: *start = (h - 1) * w + w - 1, *dx = -w, *dy = -1; break;       /* (w-1-y, h-1-x) */
    case 8: *start = w - 1, *dx = w, *dy = -1; break;                      /* (w-1-y, x) */
    default: *start = 0, *dx = 1, *dy = w; break;                          /* (x, y) */
  }
}

uint8_t *pxl_orient(const uint8_t *src, int32_t width, int32_t height, int32_t channels, int32_t orientation) {
  if (src == NULL || width < 0 || height < 0 || channels < 1 || channels > 4) return NULL;
  size_t bytes = (size_t)width * (size_t)height * (size_t)channels;
  uint8_t *dst = malloc(bytes ? bytes : 1);
  if (dst == NULL) return NULL;
  int swaps = orientation >= 5 && orientation <= 8;
  int32_t out_w = swaps ? height : width, out_h = swaps ? width : height;
  long start, dx, dy;
  orient_steps(orientation, width, height, &start, &dx, &dy);
  if (channels == 4) {
    for (int32_t y = 0; y < out_h; y++) {
      const uint8_t *from = src + 4 * (start + y * dy);
      uint8_t *to = dst + (size_t)y * (size_t)out_w * 4;
      for (int32_t x = 0; x < out_w; x++, from += 4 * dx, to += 4) {
        uint32_t px;
        memcpy(&px, from, 4); /* one unaligned 32-bit move */
        memcpy(to, &px, 4);
      }
    }
    return dst;
  }
  for (int32_t y = 0; y < out_h; y++) {
    const uint8_t *from = src + (long)channels * (start + y * dy);
    uint8_t *to = dst + (size_t)y * (size_t)out_w * (size_t)channels;
    for (int32_t x = 0; x < out_w; x++, from += channels * dx, to += channels)
      for (int32_t c = 0; c < channels; c++) to[c] = from[c];
  }
  return dst;
}

/* A gray thumbnail into a colour format (ImageDecoder's resamplesGray): each luma value
 * as libjpeg's gray-to-RGB conversion writes it, R = G = B = Y and alpha 255. */
uint8_t *pxl_gray_expand(const uint8_t *gray, int32_t count, int32_t channels) {
  if (gray == NULL || count < 0 || (channels != 3 && channels != 4)) return NULL;
  uint8_t *out = malloc(count ? (size_t)count * (size_t)channels : 1);
  if (out == NULL) return NULL;
  if (channels == 4) { /* a loop of its own, with the pixel size fixed, so it vectorises */
    for (int32_t i = 0; i < count; i++) {
      uint8_t *px = out + 4 * (size_t)i;
      px[0] = px[1] = px[2] = gray[i];
      px[3] = 255;
    }
  } else {
    for (int32_t i = 0; i < count; i++) {
      uint8_t *px = out + 3 * (size_t)i;
      px[0] = px[1] = px[2] = gray[i];
    }
  }
  return out;
}
