/* Internal to CCodecs (not in include/, so not visible to Swift). */
#ifndef PXL_EXIF_H
#define PXL_EXIF_H

#include <stddef.h>
#include <stdint.h>

#include "pxl_codecs.h"

/* Orientation (1..8) from a TIFF-structured EXIF block (starting at the "II"/"MM" byte
 * order mark, i.e. after JPEG's "Exif\0\0" prefix). Returns 1 when the block is
 * malformed, has no orientation tag, or the value is outside 1..8. Reads only
 * tiff[0, size). */
int pxl_exif_orientation(const uint8_t *tiff, size_t size);

/* Bytes per pixel of a pxl_codec_layout (4, 4, 3, 1), 0 for an unknown one. */
int32_t pxl_layout_channels(int32_t layout);

/* A big-endian 16-bit field (JPEG marker segment lengths, frame sizes). */
static inline uint32_t pxl_be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Copies "<prefix>: <text>" into dst (capacity cap), always NUL-terminated when cap > 0. */
void pxl_set_message(char *dst, size_t cap, const char *prefix, const char *text);

/* Gives color a malloc'd copy of the ICC profile bytes[0, size) (nothing when size is 0).
 * Returns PXL_CODEC_OK, or PXL_CODEC_NO_MEMORY with color->icc left NULL. */
pxl_codec_status pxl_codec_color_copy_icc(pxl_codec_color *color, const uint8_t *bytes, size_t size);

#endif
