/*
 * What the format shims share: EXIF orientation (JPEG APP1, PNG eXIf, WebP EXIF), the
 * bytes per pixel of a layout, the message helper, and pxl_codec_color_free.
 *
 * Only IFD0's Orientation tag (0x0112) matters to us, so this is a bounds-checked
 * walk of one IFD rather than a TIFF parser: every offset comes from the file and is
 * checked against size before it is read, with 64-bit arithmetic so that no sum can
 * wrap.
 */
#include "pxl_exif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pxl_codecs.h"

static uint32_t rd16(const uint8_t *p, int big_endian) {
  return big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t rd32(const uint8_t *p, int big_endian) {
  return big_endian ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
                    : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int pxl_exif_orientation(const uint8_t *tiff, size_t size) {
  if (tiff == NULL || size < 8) return 1;
  int big;
  if (tiff[0] == 'I' && tiff[1] == 'I') big = 0;
  else if (tiff[0] == 'M' && tiff[1] == 'M') big = 1;
  else return 1;
  if (rd16(tiff + 2, big) != 42) return 1;

  uint64_t ifd = rd32(tiff + 4, big);
  if (ifd + 2 > size) return 1;
  uint32_t count = rd16(tiff + ifd, big);
  for (uint32_t i = 0; i < count; i++) {
    uint64_t e = ifd + 2 + (uint64_t)i * 12;
    if (e + 12 > size) return 1;  /* truncated IFD: no later entry can be trusted */
    if (rd16(tiff + e, big) != 0x0112) continue;
    uint32_t type = rd16(tiff + e + 2, big);
    uint32_t n = rd32(tiff + e + 4, big);
    uint32_t v;
    if (n < 1) return 1;
    /* The spec says SHORT; some writers use LONG or BYTE. The value is inline (it fits
     * the 4-byte value field) and, for big-endian files, left-justified in it. */
    if (type == 3) v = rd16(tiff + e + 8, big);
    else if (type == 4) v = rd32(tiff + e + 8, big);
    else if (type == 1) v = tiff[e + 8];
    else return 1;
    return (v >= 1 && v <= 8) ? (int)v : 1;
  }
  return 1;
}

int32_t pxl_layout_channels(int32_t layout) {
  switch (layout) {
    case PXL_CODEC_RGBA:
    case PXL_CODEC_BGRA: return 4;
    case PXL_CODEC_RGB: return 3;
    case PXL_CODEC_GRAY: return 1;
    default: return 0;
  }
}

void pxl_set_message(char *dst, size_t cap, const char *prefix, const char *text) {
  if (dst == NULL || cap == 0) return;
  /* snprintf truncates and always terminates; "%s" keeps library text from being
   * interpreted as a format. */
  if (text == NULL || text[0] == '\0') dst[0] = '\0';
  else snprintf(dst, cap, "%s: %s", prefix, text);
}

pxl_codec_status pxl_codec_color_copy_icc(pxl_codec_color *color, const uint8_t *bytes, size_t size) {
  if (size == 0) return PXL_CODEC_OK;
  color->icc = malloc(size);
  if (color->icc == NULL) return PXL_CODEC_NO_MEMORY;
  memcpy(color->icc, bytes, size);
  color->icc_size = size;
  return PXL_CODEC_OK;
}

void pxl_codec_color_free(pxl_codec_color *color) {
  if (color == NULL) return;
  free(color->icc);
  color->icc = NULL;
  color->icc_size = 0;
}
