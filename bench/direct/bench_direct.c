/* See bench_direct.h. Plain C over libjpeg-turbo, libpng and libwebp; no pixload code. */
#define _POSIX_C_SOURCE 200809L
#include "bench_direct.h"
#include "avif_direct.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

/* ---- fill: box average of the centred crop (bench/baseline.c's fill_box) ---- */

static uint8_t *fill_box(const uint8_t *src, int sw, int sh, int tw, int th, int alpha,
                         int *out_w, int *out_h) {
  int cw = sw, ch = sh;
  if ((int64_t)sw * th > (int64_t)sh * tw) cw = (int)((int64_t)sh * tw / th);
  else ch = (int)((int64_t)sw * th / tw);
  if (cw < 1) cw = 1;
  if (ch < 1) ch = 1;
  int ow = cw < tw ? cw : tw, oh = ch < th ? ch : th; /* never scale up */
  int x0 = (sw - cw) / 2, y0 = (sh - ch) / 2;

  uint8_t *dst = malloc((size_t)ow * oh * 4);
  uint32_t *acc = malloc((size_t)ow * 4 * sizeof *acc);
  int *xs = malloc((size_t)(ow + 1) * sizeof *xs);
  if (!dst || !acc || !xs) { free(dst); free(acc); free(xs); return NULL; }
  for (int x = 0; x <= ow; x++) xs[x] = x0 + (int)((int64_t)x * cw / ow);

  for (int y = 0; y < oh; y++) {
    int ya = y0 + (int)((int64_t)y * ch / oh), yb = y0 + (int)((int64_t)(y + 1) * ch / oh);
    memset(acc, 0, (size_t)ow * 4 * sizeof *acc);
    for (int sy = ya; sy < yb; sy++) { /* every source pixel is read exactly once */
      const uint8_t *row = src + (size_t)sy * sw * 4;
      uint32_t *a = acc;
      if (alpha) { /* colour weighted by alpha: the average of premultiplied pixels */
        for (int x = 0; x < ow; x++, a += 4)
          for (const uint8_t *p = row + xs[x] * 4, *e = row + xs[x + 1] * 4; p < e; p += 4) {
            a[0] += p[0] * p[3]; a[1] += p[1] * p[3]; a[2] += p[2] * p[3]; a[3] += p[3];
          }
      } else {
        for (int x = 0; x < ow; x++, a += 4)
          for (const uint8_t *p = row + xs[x] * 4, *e = row + xs[x + 1] * 4; p < e; p += 4) {
            a[0] += p[0]; a[1] += p[1]; a[2] += p[2]; a[3] += p[3];
          }
      }
    }
    uint8_t *d = dst + (size_t)y * ow * 4;
    for (int x = 0; x < ow; x++, d += 4) {
      uint32_t n = (uint32_t)(xs[x + 1] - xs[x]) * (uint32_t)(yb - ya), *a = acc + x * 4;
      if (alpha) {
        uint32_t as = a[3];
        for (int c = 0; c < 3; c++) d[c] = as ? (uint8_t)((a[c] + as / 2) / as) : 0;
        d[3] = (uint8_t)((as + n / 2) / n);
      } else {
        for (int c = 0; c < 4; c++) d[c] = (uint8_t)((a[c] + n / 2) / n);
      }
    }
  }
  free(acc);
  free(xs);
  *out_w = ow;
  *out_h = oh;
  return dst;
}

/* ---- JPEG ---- */

typedef struct {
  struct jpeg_error_mgr mgr;
  jmp_buf jmp;
} jpeg_err;

static void jpeg_error_exit(j_common_ptr cinfo) { longjmp(((jpeg_err *)cinfo->err)->jmp, 1); }
static void jpeg_quiet(j_common_ptr cinfo, int level) { (void)cinfo; (void)level; }

static int decode_jpeg(const uint8_t *data, size_t size, int tw, int th, bench_image *out) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  uint8_t *volatile pixels = NULL;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jmp)) {
    jpeg_destroy_decompress(&cinfo);
    free(pixels);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_EXT_RGBA;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  if (tw > 0) { /* the largest DCT reduction whose output still covers the target */
    unsigned denom = 8;
    while (denom > 1 && ((cinfo.image_width + denom - 1) / denom < (unsigned)tw ||
                         (cinfo.image_height + denom - 1) / denom < (unsigned)th))
      denom /= 2;
    cinfo.scale_num = 1;
    cinfo.scale_denom = denom;
  }
  jpeg_start_decompress(&cinfo);
  size_t stride = (size_t)cinfo.output_width * 4;
  pixels = malloc(stride * cinfo.output_height);
  if (!pixels) longjmp(err.jmp, 1);
  JSAMPROW rows[16];
  while (cinfo.output_scanline < cinfo.output_height) {
    JDIMENSION y = cinfo.output_scanline, n = cinfo.output_height - y;
    if (n > 16) n = 16;
    for (JDIMENSION i = 0; i < n; i++) rows[i] = pixels + stride * (y + i);
    jpeg_read_scanlines(&cinfo, rows, n);
  }
  jpeg_finish_decompress(&cinfo);
  out->pixels = pixels;
  out->width = (int32_t)cinfo.output_width;
  out->height = (int32_t)cinfo.output_height;
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

/* ---- PNG ---- */

typedef struct {
  const uint8_t *data;
  size_t size, pos;
} png_reader;

static void png_read_mem(png_structp png, png_bytep dst, size_t len) {
  png_reader *r = png_get_io_ptr(png);
  if (len > r->size - r->pos) png_error(png, "Read Error");
  memcpy(dst, r->data + r->pos, len);
  r->pos += len;
}

static void png_quiet(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static int decode_png(const uint8_t *data, size_t size, int *has_alpha, bench_image *out) {
  png_reader reader = {data, size, 0};
  uint8_t *volatile pixels = NULL;
  png_bytep *volatile rows = NULL;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, png_quiet);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    free(pixels);
    free(rows);
    return 1;
  }
  png_set_read_fn(png, &reader, png_read_mem);
  png_read_info(png, info);
  png_uint_32 w, h;
  int depth, ctype;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, NULL, NULL, NULL);
  *has_alpha = (ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  (void)png_set_interlace_handling(png);
  png_read_update_info(png, info);
  size_t stride = (size_t)w * 4;
  pixels = malloc(stride * h);
  rows = malloc(h * sizeof *rows);
  if (!pixels || !rows) png_error(png, "out of memory");
  for (png_uint_32 y = 0; y < h; y++) rows[y] = pixels + y * stride;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  out->pixels = pixels;
  out->width = (int32_t)w;
  out->height = (int32_t)h;
  return 0;
}

/* The issue-41 loop's PNG: libpng's simplified API (png_image, PNG_FORMAT_RGBA), which also
 * converts 16-bit and gamma-tagged files to 8-bit sRGB, so its pixels may differ from
 * decode_png's; it is only timed. */
static int decode_png_simplified(const uint8_t *data, size_t size, int *has_alpha, bench_image *out) {
  png_image image;
  memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data, size)) return 1;
  *has_alpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  image.format = PNG_FORMAT_RGBA;
  uint8_t *pixels = malloc(PNG_IMAGE_SIZE(image));
  if (!pixels || !png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
    png_image_free(&image);
    free(pixels);
    return 1;
  }
  out->pixels = pixels;
  out->width = (int32_t)image.width;
  out->height = (int32_t)image.height;
  return 0;
}

/* ---- WebP: the one-call API (fancy upsampling, straight RGBA), as dwebp and pixload ---- */

static int is_webp(const uint8_t *d, size_t n) {
  return n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0;
}

static int decode_webp(const uint8_t *data, size_t size, int *has_alpha, bench_image *out) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(data, size, &features) != VP8_STATUS_OK) return 1;
  *has_alpha = features.has_alpha;
  int w = 0, h = 0;
  /* libwebp allocates with malloc (WebPFree is free in Debian's build): the caller frees. */
  out->pixels = WebPDecodeRGBA(data, size, &w, &h);
  if (!out->pixels) return 1;
  out->width = w;
  out->height = h;
  return 0;
}

/* ---- entry points ---- */

static int is_jpeg(const uint8_t *d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
static int is_png(const uint8_t *d, size_t n) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return n >= 8 && memcmp(d, sig, 8) == 0;
}

int bench_direct_decode(const uint8_t *data, size_t size, int32_t tw, int32_t th, bench_image *out) {
  return bench_direct_decode_with(data, size, tw, th, 0, out);
}

int bench_direct_decode_with(const uint8_t *data, size_t size, int32_t tw, int32_t th, int flags,
                             bench_image *out) {
  memset(out, 0, sizeof *out);
  int alpha = 0, rc;
  if (is_jpeg(data, size)) rc = decode_jpeg(data, size, tw, th, out);
  else if (is_png(data, size) && (flags & BENCH_PNG_SIMPLIFIED)) rc = decode_png_simplified(data, size, &alpha, out);
  else if (is_png(data, size)) rc = decode_png(data, size, &alpha, out);
  else if (bench_is_avif(data, size)) rc = bench_avif_decode(data, size, &alpha, out);
  else if (bench_direct_is_gif(data, size)) rc = bench_direct_decode_gif(data, size, &alpha, NULL, NULL, out);
  else if (is_webp(data, size)) rc = decode_webp(data, size, &alpha, out);
  else return 1;
  if (rc != 0 || tw <= 0 || th <= 0) return rc;
  int w = 0, h = 0;
  uint8_t *small = fill_box(out->pixels, out->width, out->height, tw, th, alpha, &w, &h);
  free(out->pixels);
  out->pixels = small;
  out->width = w;
  out->height = h;
  return small ? 0 : 1;
}

const char *bench_kind(const uint8_t *data, size_t size) {
  if (is_png(data, size)) {
    bench_image img;
    int alpha = 0;
    if (decode_png(data, size, &alpha, &img) != 0) return "unknown";
    free(img.pixels);
    return alpha ? "PNG alpha" : "PNG";
  }
  if (bench_is_avif(data, size)) return bench_avif_kind(data, size);
  if (bench_direct_is_gif(data, size)) {
    bench_image img;
    int alpha = 0, interlaced = 0, frames = 0;
    if (bench_direct_decode_gif(data, size, &alpha, &interlaced, &frames, &img) != 0) return "unknown";
    free(img.pixels);
    return frames > 1 ? "GIF animated" : interlaced ? "GIF interlaced" : "GIF";
  }
  if (is_webp(data, size)) {
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(data, size, &f) != VP8_STATUS_OK || f.has_animation) return "unknown";
    return f.format == 2 ? (f.has_alpha ? "WebP lossless alpha" : "WebP lossless")
                         : (f.has_alpha ? "WebP lossy alpha" : "WebP lossy");
  }
  if (!is_jpeg(data, size)) return "unknown";
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  const char *kind = "JPEG other";
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jmp)) {
    jpeg_destroy_decompress(&cinfo);
    return "unknown";
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  const jpeg_component_info *c = cinfo.comp_info;
  if (cinfo.progressive_mode) kind = "JPEG progressive";
  else if (cinfo.num_components == 1) kind = "JPEG gray";
  else if (cinfo.num_components == 3 && c[1].h_samp_factor == 1 && c[1].v_samp_factor == 1 &&
           c[2].h_samp_factor == 1 && c[2].v_samp_factor == 1) {
    if (c[0].h_samp_factor == 2 && c[0].v_samp_factor == 2) kind = "JPEG 4:2:0 baseline";
    else if (c[0].h_samp_factor == 1 && c[0].v_samp_factor == 1) kind = "JPEG 4:4:4 baseline";
    else if (c[0].h_samp_factor == 2 && c[0].v_samp_factor == 1) kind = "JPEG 4:2:2 baseline";
  }
  jpeg_destroy_decompress(&cinfo);
  return kind;
}

double bench_thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

long bench_max_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}
