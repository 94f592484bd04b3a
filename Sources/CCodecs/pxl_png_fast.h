/* Internal to CCodecs: png_fast.c, the image data of clean 8-bit PNGs without libpng's
 * row machinery (see there for why and for exactly which files). */
#ifndef PXL_PNG_FAST_H
#define PXL_PNG_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "pxl_codecs.h"

typedef enum pxl_png_fast_result {
  PXL_PNG_FAST_OK = 0,           /* decoded: *pixels_out (whole mode) or every row handed over */
  PXL_PNG_FAST_NOT_HANDLED = 1,  /* not the clean common case; nothing was handed over: use libpng */
  PXL_PNG_FAST_STOPPED = 2,      /* row_fn returned non-zero (error says so) */
  PXL_PNG_FAST_NO_MEMORY = 3
} pxl_png_fast_result;

/* After libpng's png_read_info stopped at the first IDAT: idat_data is the offset of that
 * chunk's data (libpng has read its length and type). w, h, color_type from IHDR (8-bit,
 * not interlaced, no tRNS: the caller checks). Output in layout with channels per pixel:
 * into a malloc'd bitmap in *pixels_out when row_fn is NULL, else row by row to row_fn. */
pxl_png_fast_result pxl_png_fast_image_data(const uint8_t *data, size_t size, size_t idat_data, uint32_t w, uint32_t h,
                                            int color_type, int32_t layout, int32_t channels, pxl_codec_row_fn row_fn,
                                            void *user, uint8_t **pixels_out, char *error, size_t error_cap);

#endif
