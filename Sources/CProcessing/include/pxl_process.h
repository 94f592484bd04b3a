/* The built-in image processors (pixload.h, "Processors") on premultiplied RGBA8 pixels,
 * tightly packed (stride = width * 4). No allocation except where a function says so; no
 * library beyond libc and libm. Called by PixloadCore/Processing only. */
#ifndef PXL_PROCESS_H
#define PXL_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rounds the corners of the whole image: radii top-left, top-right, bottom-right,
 * bottom-left in pixels (each already clamped to half the shorter side). Edge pixels are
 * scaled by the exact fraction of their area inside the shape; pixels wholly inside keep
 * their values, pixels wholly outside become transparent. A border of `border` pixels
 * (0: none) in `border_color` (premultiplied RGBA) is drawn inside the shape, over the
 * image. Without a border it allocates a table of the corners' coverage (once per distinct
 * radius). Returns 0, or -1 when out of memory (pixels unchanged). */
int pxl_process_round(uint8_t *pixels, int32_t width, int32_t height, const double radii[4], double border,
                      const uint8_t border_color[4]);

/* The exact area of the pixel [x0, x0+1] x [y0, y0+1] inside the rounded rectangle
 * [left, right] x [top, bottom] with corner radii `radii` (as above); for tests. */
double pxl_process_coverage(double x0, double y0, double left, double top, double right, double bottom,
                            const double radii[4]);

/* A Gaussian blur of standard deviation sigma (pixels), edges extended: direct
 * convolution below sigma 2, else three extended-box passes each way (cost independent of sigma).
 * sigma <= 0 is the identity. Returns 0, or -1 when out of memory (pixels unchanged). */
int pxl_process_blur(uint8_t *pixels, int32_t width, int32_t height, double sigma);

/* Copies the rectangle (x, y, w, h) of `src` (src_width wide) into `dst` (w * h * 4 bytes). */
void pxl_process_crop(const uint8_t *src, int32_t src_width, int32_t x, int32_t y, int32_t w, int32_t h,
                      uint8_t *dst);

/* Rotates `src` (width x height) clockwise by quarter_turns (1, 2 or 3) into `dst`, which is
 * height x width for 1 and 3. */
void pxl_process_rotate(const uint8_t *src, int32_t width, int32_t height, int32_t quarter_turns, uint8_t *dst);

/* Mirrors in place: left-right, or top-bottom when vertical is non-zero. */
void pxl_process_flip(uint8_t *pixels, int32_t width, int32_t height, int32_t vertical);

/* Replaces colour by its luma, with the GRAY8 format's weights (BT.601, libjpeg's integer
 * form); alpha kept. */
void pxl_process_gray(uint8_t *pixels, size_t count);

/* Composites `color` (straight RGBA) source-atop: it covers the pixels and keeps their
 * alpha. */
void pxl_process_tint(uint8_t *pixels, size_t count, const uint8_t color[4]);

/* Premultiplied RGBA8 into a delivered layout (pxl_format values: 0 RGBA8, 2 BGRA8
 * premultiplied, 3 RGB8, 4 GRAY8; 1 is the input itself). dst holds count pixels of it; it
 * may be src (in place: each pixel is read before its output, never larger, is written). */
void pxl_process_convert(const uint8_t *src, size_t count, int32_t format, uint8_t *dst);

/* A request's cancel flag, as a custom processor polls it (pixload.h: pxl_processor_frame). */
static inline void pxl_process_flag_set(int32_t *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
static inline int32_t pxl_process_flag_get(const int32_t *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

#ifdef __cplusplus
}
#endif
#endif
