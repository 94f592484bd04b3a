/*
 * bench_direct.h: libjpeg-turbo, libpng and libwebp called directly, the way a competent C
 * programmer would without pixload: the yardstick of `make bench-decode`.
 *
 * Same decode settings as pixload's shims (pxl_codecs.h): JPEG with JDCT_ISLOW, fancy
 * upsampling, straight into JCS_EXT_RGBA; PNG through the low-level API with expand,
 * strip_16, gray_to_rgb, an opaque filler alpha and Adam7 handling, no gamma. Full size
 * decodes therefore give byte-identical RGBA8 to pixload's (the benchmark checks it).
 * WebP with libwebp's one call, WebPDecodeRGBA (fancy upsampling, straight alpha).
 *
 * A thumbnail (target_w, target_h > 0) is "fill": JPEGs decode at the largest DCT
 * reduction (1/8, 1/4, 1/2) that still covers the target, then a straightforward box
 * average of the centred crop (bench/baseline.c's fill_box; alpha-weighted when the PNG
 * has alpha, so transparent pixels do not darken edges, as pixload promises) gives the
 * target size; never scaled up.
 */
#ifndef BENCH_DIRECT_H
#define BENCH_DIRECT_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_image {
  uint8_t *pixels; /* malloc'd RGBA8, width * 4 bytes per row; free() it */
  int32_t width, height;
} bench_image;

/* 0 on success. target 0x0: full size. */
int bench_direct_decode(const uint8_t *data, size_t size, int32_t target_w, int32_t target_h, bench_image *out);

/* bench_direct_decode with options: BENCH_PNG_SIMPLIFIED decodes PNGs through libpng's
 * simplified API (png_image_finish_read into PNG_FORMAT_RGBA), as issue 41's outside loop
 * does, instead of the low-level API above. */
#define BENCH_PNG_SIMPLIFIED 1
int bench_direct_decode_with(const uint8_t *data, size_t size, int32_t target_w, int32_t target_h, int flags,
                             bench_image *out);

/* What kind of file this is for the report: "JPEG 4:2:0 baseline", "JPEG 4:4:4 baseline",
 * "JPEG progressive", "JPEG 4:2:2 baseline", "JPEG gray", "JPEG other", "PNG", "PNG alpha",
 * "GIF", "GIF interlaced", "GIF animated", "WebP lossy", "WebP lossy alpha", "WebP lossless",
 * "WebP lossless alpha", the AVIF kinds (bench_avif_kind) or "unknown". A static string. */
const char *bench_kind(const uint8_t *data, size_t size);

/* GIF (bench_direct_gif.c): the first frame with giflib directly, into a transparent RGBA
 * canvas; interlaced and frames (1, or 2 for "more than one") are for the report and
 * may be NULL. */
int bench_direct_is_gif(const uint8_t *data, size_t size);
int bench_direct_decode_gif(const uint8_t *data, size_t size, int *has_alpha, int *interlaced, int *frames,
                            bench_image *out);

/* CPU time of the calling thread, in milliseconds. */
double bench_thread_cpu_ms(void);

/* Peak resident set of the process so far (getrusage ru_maxrss), in KiB. */
long bench_max_rss_kib(void);

#endif
