/* Tests/codecs/stream_decode_test.c: the JPEG decode fed as the bytes arrive
 * (pxl_jpeg_stream) against the whole-buffer decode of the same bytes, for every JPEG of
 * the corpus (argument: its directory; skipped with a message when absent) and files made
 * here with libjpeg (baseline 4:2:0 and 4:4:4, progressive, restart markers, gray): the
 * bytes in random chunks from 1 byte up, at scales 1/1, 1/2, 1/4, 1/8, as a bitmap
 * (pxl_jpeg_decode) and as a region's rows (pxl_jpeg_decode_region); also each file cut
 * short (marked incomplete as the whole decode marks it) and with bytes damaged (same
 * status). Same pixels, status and incomplete flag everywhere; a stream that declines
 * (a progressive file at 1/8) must do so before any row. The corpus's PNGs through
 * pxl_png_stream likewise (bitmap and rows): where it does not decline, the whole decode's
 * pixels. WebP through pxl_webp_stream likewise (bitmap and rows, every layout): the
 * corpus's and files made here with cwebp (lossy and lossless, with alpha, odd sizes, an
 * ICC profile and an EXIF orientation added by webpmux), where each clean still file made
 * here must stream to the end (the EXIF-oriented one must decline: its header planned
 * orientation 1), and a file over max_pixels must decline. Then a cancelled stream stops
 * (JPEG and WebP) and every WebP stream was freed.
 * Ends with "N passed, N failed". */
#define _DEFAULT_SOURCE
#include "check.h"
#include "files.h"
#include "pxl_codecs.h"
#include "pxl_webp.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* A chunk size from 1 byte up, mostly small, sometimes large. */
static size_t chunk_size(void) {
  switch (next_random() % 4) {
    case 0: return 1 + next_random() % 4;
    case 1: return 1 + next_random() % 64;
    case 2: return 1 + next_random() % 1024;
    default: return 1 + next_random() % 65536;
  }
}

/* Region rows collected into a bitmap of the scaled image (as the resampler would see
 * them). */
typedef struct rows_sink {
  uint8_t *pixels;
  int32_t width, height, channels;
  int32_t x, y, w, h; /* the region asked */
} rows_sink;

static int take_region_row(void *user, int32_t y, int32_t x0, const uint8_t *row) {
  rows_sink *s = user;
  if (y < 0 || y >= s->height || x0 < 0) return 1;
  /* Only the region itself is compared: rows and columns around it are a margin. */
  if (y < s->y || y >= s->y + s->h) return 0;
  memcpy(s->pixels + ((size_t)y * s->width + s->x) * s->channels, row + (size_t)(s->x - x0) * s->channels,
         (size_t)s->w * s->channels);
  return 0;
}

static int32_t layout_channels(int32_t layout) { return layout == PXL_CODEC_RGB ? 3 : layout == PXL_CODEC_GRAY ? 1 : 4; }

/* region: x, y, width, height in percent of the w x h scaled image. */
static rows_sink region_sink(const int32_t *region, int32_t w, int32_t h, int32_t layout) {
  int32_t channels = layout_channels(layout);
  rows_sink sink = {calloc((size_t)w * h, (size_t)channels), w, h, channels, 0, 0, 0, 0};
  sink.x = region[0] * w / 100, sink.y = region[1] * h / 100;
  sink.w = region[2] * w / 100, sink.h = region[3] * h / 100;
  if (sink.w < 1) sink.w = 1;
  if (sink.h < 1) sink.h = 1;
  if (sink.x + sink.w > w) sink.x = w - sink.w;
  if (sink.y + sink.h > h) sink.y = h - sink.h;
  return sink;
}

#define NO_PLAN ((pxl_codec_status)-1)

typedef struct decoded {
  pxl_codec_status status;
  int declined;
  int incomplete;
  int32_t width, height;
  uint8_t *pixels; /* bitmap, or the region's rows in a bitmap */
  size_t size;
} decoded;

static void decoded_free(decoded *d) {
  free(d->pixels);
  memset(d, 0, sizeof *d);
}

/* region: NULL for the bitmap. */
static decoded whole_decode(const uint8_t *data, size_t size, int32_t layout, int32_t scale, const int32_t *region) {
  decoded d = {0};
  pxl_codec_output out;
  if (region == NULL) {
    d.status = pxl_jpeg_decode(data, size, layout, scale, 1u << 28, &out);
    d.pixels = out.pixels;
    d.size = (size_t)out.stride * out.height;
  } else {
    pxl_codec_info info;
    char message[128];
    if (pxl_jpeg_read_info(data, size, &info, message, sizeof message) != PXL_CODEC_OK) {
      d.status = NO_PLAN; /* the loader makes no plan, starts no stream: nothing to compare */
      return d;
    }
    int32_t w = (info.width + scale - 1) / scale, h = (info.height + scale - 1) / scale;
    rows_sink sink = region_sink(region, w, h, layout);
    d.status = pxl_jpeg_decode_region(data, size, layout, scale, 1u << 28, sink.x, sink.y, sink.w, sink.h,
                                      take_region_row, &sink, &out);
    d.pixels = sink.pixels;
    d.size = (size_t)w * h * sink.channels;
  }
  d.incomplete = out.incomplete;
  d.width = out.width;
  d.height = out.height;
  if (d.status != PXL_CODEC_OK) {
    pxl_codec_status failed_with = d.status;
    decoded_free(&d);
    d.status = failed_with;
  }
  return d;
}

static decoded stream_decode(const uint8_t *data, size_t size, int32_t layout, int32_t scale, const int32_t *region,
                             const decoded *whole) {
  decoded d = {0};
  pxl_codec_output out;
  rows_sink sink = {0};
  pxl_jpeg_stream *s;
  if (region == NULL) {
    s = pxl_jpeg_stream_new(layout, scale, 1u << 28, NULL, NULL, NULL, 0, 0, 0, 0, NULL);
  } else {
    /* The whole decode's size gives the region (a file it refused has none: any will do). */
    sink = region_sink(region, whole->width > 0 ? whole->width : 1, whole->height > 0 ? whole->height : 1, layout);
    s = pxl_jpeg_stream_new(layout, scale, 1u << 28, NULL, take_region_row, &sink, sink.x, sink.y, sink.w, sink.h,
                            NULL);
  }
  size_t at = 0;
  int state = PXL_STREAM_MORE;
  pxl_codec_status st = PXL_CODEC_OK;
  while (s != NULL) {
    size_t n = chunk_size();
    if (n > size - at) n = size - at;
    st = pxl_jpeg_stream_feed(s, data + at, n, at + n == size, &state, &out);
    at += n;
    if (st != PXL_CODEC_OK || state != PXL_STREAM_MORE) break;
    if (at == size) {
      st = PXL_CODEC_CORRUPT; /* MORE after the last byte: a bug */
      break;
    }
  }
  pxl_jpeg_stream_free(s);
  d.status = s == NULL ? PXL_CODEC_NO_MEMORY : st;
  d.declined = state == PXL_STREAM_DECLINED;
  if (d.status == PXL_CODEC_OK && state == PXL_STREAM_DONE) {
    d.incomplete = out.incomplete;
    d.width = out.width;
    d.height = out.height;
    if (region == NULL) {
      d.pixels = out.pixels;
      d.size = (size_t)out.stride * out.height;
    } else {
      d.pixels = sink.pixels;
      d.size = (size_t)sink.width * sink.height * sink.channels;
      sink.pixels = NULL;
    }
  } else {
    free(out.pixels);
  }
  free(sink.pixels);
  return d;
}

static int compared, declines;

static void compare(const char *name, const uint8_t *data, size_t size, const char *what) {
  static const int32_t scales[] = {1, 2, 4, 8};
  static const int32_t regions[][4] = {{20, 0, 60, 100}, {0, 25, 100, 50}};
  for (int i = 0; i < 4; i++) {
    for (int r = -1; r < 2; r++) {
      const int32_t *region = r < 0 ? NULL : regions[r];
      int32_t layout = (next_random() % 2) ? PXL_CODEC_RGBA : PXL_CODEC_RGB;
      decoded whole = whole_decode(data, size, layout, scales[i], region);
      if (whole.status == NO_PLAN) continue;
      decoded streamed = stream_decode(data, size, layout, scales[i], region, &whole);
      compared++;
      if (streamed.declined) {
        declines++;
        CHECK(scales[i] == 8 || strstr(name, "ari") != NULL, "%s (%s) 1/%d: declined at a scale it must take", name,
              what, scales[i]);
      } else {
        CHECK(whole.status == streamed.status, "%s (%s) 1/%d %s: status %d whole, %d streamed", name, what, scales[i],
              region ? "region" : "bitmap", whole.status, streamed.status);
        if (whole.status == PXL_CODEC_OK && streamed.status == PXL_CODEC_OK) {
          CHECK(whole.width == streamed.width && whole.height == streamed.height && whole.size == streamed.size &&
                    memcmp(whole.pixels, streamed.pixels, whole.size) == 0,
                "%s (%s) 1/%d %s: pixels differ", name, what, scales[i], region ? "region" : "bitmap");
          CHECK(whole.incomplete == streamed.incomplete, "%s (%s) 1/%d: incomplete %d whole, %d streamed", name, what,
                scales[i], whole.incomplete, streamed.incomplete);
        }
      }
      decoded_free(&whole);
      decoded_free(&streamed);
    }
  }
}

typedef void (*compare_fn)(const char *name, const uint8_t *data, size_t size, const char *what);

/* The file whole, cut short, and damaged. */
static void check_with(compare_fn compare_as, const char *name, const uint8_t *data, size_t size) {
  compare_as(name, data, size, "whole");
  if (size > 64) {
    compare_as(name, data, size / 2 + next_random() % (size / 2), "truncated");
    uint8_t *damaged = malloc(size);
    memcpy(damaged, data, size);
    for (int i = 0; i < 4; i++) damaged[size / 3 + next_random() % (size / 2)] ^= (uint8_t)(1u << (next_random() % 8));
    compare_as(name, damaged, size, "damaged");
    free(damaged);
  }
}

static void check_file(const char *name, const uint8_t *data, size_t size) { check_with(compare, name, data, size); }

/* A w x h gradient with some detail, compressed by libjpeg as asked. */
static uint8_t *make_jpeg(int w, int h, int components, int progressive, int restart_rows, int h_samp,
                          unsigned long *size) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  unsigned char *out = NULL;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &out, size);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 85, TRUE);
  if (components == 3) {
    c.comp_info[0].h_samp_factor = h_samp;
    c.comp_info[0].v_samp_factor = h_samp;
  }
  if (progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = restart_rows;
  jpeg_start_compress(&c, TRUE);
  uint8_t *row = malloc((size_t)w * components);
  while (c.next_scanline < c.image_height) {
    int y = (int)c.next_scanline;
    for (int x = 0; x < w; x++)
      for (int k = 0; k < components; k++)
        row[x * components + k] = (uint8_t)((x * 3 + y * (k + 1) + ((x ^ y) & 31) * 4) & 0xFF);
    JSAMPROW rows[1] = {row};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(row);
  return out;
}

/* PNG: the rows (pxl_png_decode_rows) into a bitmap, as the resampler would see them. */
static int take_png_row(void *user, int32_t y, const uint8_t *row) {
  rows_sink *s = user;
  if (y < 0 || y >= s->height) return 1;
  memcpy(s->pixels + (size_t)y * s->width * s->channels, row, (size_t)s->width * s->channels);
  return 0;
}

/* A format whose stream declines anything but a clean file (PNG, WebP): its whole
 * decodes and its stream behind one shape. stream_new returns NULL where the loader starts
 * no stream (a WebP whose header it cannot plan from); plan_info (may be NULL) is the size
 * the loader plans the rows for when the whole file's info is not there (cut short). */
typedef struct clean_format {
  const char *name;
  int compared, streamed;
  pxl_codec_status (*read_info)(const uint8_t *, size_t, pxl_codec_info *, char *, size_t);
  int (*plan_info)(const uint8_t *, size_t, pxl_codec_info *);
  pxl_codec_status (*decode)(const uint8_t *, size_t, int32_t, uint64_t, pxl_codec_output *);
  pxl_codec_status (*decode_rows)(const uint8_t *, size_t, int32_t, uint64_t, pxl_codec_row_fn, void *,
                                  pxl_codec_output *);
  void *(*stream_new)(const uint8_t *, size_t, int32_t, pxl_codec_row_fn, void *);
  pxl_codec_status (*feed)(void *, const uint8_t *, size_t, int, int *, pxl_codec_output *);
  void (*stream_free)(void *);
} clean_format;

/* The file whole (bitmap and rows, a random layout each) and fed in random chunks: a
 * stream that does not decline gives the whole decode's output, to the byte. must_stream:
 * a clean file that must stream to the end. Returns how many streamed to the end. */
static int compare_clean(clean_format *f, const char *name, const uint8_t *data, size_t size, const char *what,
                         int must_stream) {
  int done = 0;
  for (int rows = 0; rows < 2; rows++) {
    int32_t layout = (int32_t)(next_random() % 4), channels = layout_channels(layout);
    pxl_codec_output whole, out;
    memset(&out, 0, sizeof out);
    rows_sink whole_rows = {0}, stream_rows = {0};
    pxl_codec_info info;
    char message[128];
    if (rows) {
      if ((f->read_info(data, size, &info, message, sizeof message) != PXL_CODEC_OK &&
           (f->plan_info == NULL || !f->plan_info(data, size, &info))) ||
          info.width > 8192 || info.height > 8192)
        continue;
      whole_rows = (rows_sink){calloc((size_t)info.width * info.height, (size_t)channels), info.width, info.height,
                               channels, 0, 0, 0, 0};
      stream_rows = (rows_sink){calloc((size_t)info.width * info.height, (size_t)channels), info.width, info.height,
                                channels, 0, 0, 0, 0};
    }
    pxl_codec_status whole_status = rows ? f->decode_rows(data, size, layout, 1u << 28, take_png_row, &whole_rows,
                                                          &whole)
                                         : f->decode(data, size, layout, 1u << 28, &whole);
    void *s = f->stream_new(data, size, layout, rows ? take_png_row : NULL, &stream_rows);
    CHECK(s != NULL || !must_stream, "%s (%s): no stream for a clean file", name, what);
    size_t at = 0;
    int state = PXL_STREAM_MORE;
    pxl_codec_status st = PXL_CODEC_OK;
    while (s != NULL && at < size) {
      size_t n = chunk_size();
      if (n > size - at) n = size - at;
      st = f->feed(s, data + at, n, at + n == size, &state, &out);
      at += n;
      if (st != PXL_CODEC_OK || state != PXL_STREAM_MORE) break;
    }
    if (s != NULL) {
      f->stream_free(s);
      f->compared++;
      CHECK(st == PXL_CODEC_OK, "%s (%s): the %s stream failed (%d) instead of declining", name, what, f->name, st);
      CHECK(state != PXL_STREAM_MORE || size == 0, "%s (%s): the %s stream wants more after the last byte", name,
            what, f->name);
      CHECK(!must_stream || state == PXL_STREAM_DONE, "%s (%s) %s layout %d: declined a clean file (%s)", name, what,
            rows ? "rows" : "bitmap", layout, out.message);
    }
    if (s != NULL && state == PXL_STREAM_DONE) {
      f->streamed++;
      done++;
      size_t bytes = (size_t)whole.stride * whole.height;
      int same = whole_status == PXL_CODEC_OK && out.width == whole.width && out.height == whole.height &&
                 out.stride == whole.stride && out.channels == whole.channels && out.has_alpha == whole.has_alpha &&
                 out.incomplete == whole.incomplete &&
                 (rows ? out.pixels == NULL && memcmp(whole_rows.pixels, stream_rows.pixels, bytes) == 0
                       : memcmp(whole.pixels, out.pixels, bytes) == 0);
      CHECK(same, "%s (%s) %s layout %d: status %d whole; streamed output differs", name, what,
            rows ? "rows" : "bitmap", layout, whole_status);
    }
    free(out.pixels);
    free(whole.pixels);
    free(whole_rows.pixels);
    free(stream_rows.pixels);
  }
  return done;
}

static void *png_stream(const uint8_t *data, size_t size, int32_t layout, pxl_codec_row_fn row_fn, void *user) {
  (void)data, (void)size;
  return pxl_png_stream_new(layout, 1u << 28, row_fn, user, NULL);
}
static pxl_codec_status png_feed(void *s, const uint8_t *data, size_t size, int at_end, int *state,
                                 pxl_codec_output *out) {
  return pxl_png_stream_feed(s, data, size, at_end, state, out);
}
static void png_free(void *s) { pxl_png_stream_free(s); }
static clean_format png_format = {"PNG", 0, 0, pxl_png_read_info, NULL, pxl_png_decode, pxl_png_decode_rows,
                                  png_stream, png_feed, png_free};

static void compare_png(const char *name, const uint8_t *data, size_t size, const char *what) {
  compare_clean(&png_format, name, data, size, what, 0);
}

/* ---- WebP ---- */

static int webps_seen;

/* As StreamingDecode plans: from pxl_webp_header_end's bytes. */
static int webp_plan_info(const uint8_t *data, size_t size, pxl_codec_info *info) {
  int64_t end = pxl_webp_header_end(data, size);
  char message[8];
  return end > 0 && pxl_webp_header_info(data, (size_t)end, info, message, sizeof message) == PXL_CODEC_OK;
}
static void *webp_stream(const uint8_t *data, size_t size, int32_t layout, pxl_codec_row_fn row_fn, void *user) {
  int64_t end = pxl_webp_header_end(data, size);
  return end > 0 ? pxl_webp_stream_new(layout, 1u << 28, (size_t)end, row_fn, user, NULL) : NULL;
}
static pxl_codec_status webp_feed(void *s, const uint8_t *data, size_t size, int at_end, int *state,
                                  pxl_codec_output *out) {
  return pxl_webp_stream_feed(s, data, size, at_end, state, out);
}
static void webp_free(void *s) { pxl_webp_stream_free(s); }
static clean_format webp_format = {"WebP", 0, 0, pxl_webp_read_info, webp_plan_info, pxl_webp_decode,
                                   pxl_webp_decode_rows, webp_stream, webp_feed, webp_free};

static void compare_webp(const char *name, const uint8_t *data, size_t size, const char *what) {
  compare_clean(&webp_format, name, data, size, what, 0);
}

static char webp_dir[64];

/* A w x h picture with detail (and a varying alpha when asked) written as PAM and
 * compressed by cwebp with `options`; then, when `mux` is set, webpmux's arguments (an
 * ICC profile, EXIF). NULL if a tool failed. */
static uint8_t *make_webp(int w, int h, int alpha, const char *options, const char *mux, size_t *size) {
  char pam[128], webp[128], muxed[128], command[1024];
  snprintf(pam, sizeof pam, "%s/in.pam", webp_dir);
  snprintf(webp, sizeof webp, "%s/out.webp", webp_dir);
  snprintf(muxed, sizeof muxed, "%s/muxed.webp", webp_dir);
  FILE *f = fopen(pam, "wb");
  if (f == NULL) return NULL;
  fprintf(f, "P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n", w, h, alpha ? 4 : 3,
          alpha ? "RGB_ALPHA" : "RGB");
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t px[4] = {(uint8_t)((x * 3 + y + ((x ^ y) & 31) * 4) & 0xFF), (uint8_t)((y * 5 + (x * y) / 7) & 0xFF),
                       (uint8_t)(((x + y) * 2 + (next_random() & 15)) & 0xFF),
                       (uint8_t)(alpha ? ((x * 255 / (w > 1 ? w - 1 : 1)) ^ ((y & 8) ? 0x40 : 0)) : 255)};
      fwrite(px, 1, alpha ? 4 : 3, f);
    }
  fclose(f);
  snprintf(command, sizeof command, "cwebp -quiet %s '%s' -o '%s'", options, pam, webp);
  if (system(command) != 0) return NULL;
  if (mux != NULL) {
    snprintf(command, sizeof command, "webpmux %s '%s' -o '%s' >/dev/null 2>&1", mux, webp, muxed);
    if (system(command) != 0) return NULL;
  }
  return read_file(mux != NULL ? muxed : webp, size);
}

static void check_made_webps(void) {
  snprintf(webp_dir, sizeof webp_dir, "/tmp/pxl-webp-stream.XXXXXX");
  if (mkdtemp(webp_dir) == NULL || system("command -v cwebp >/dev/null && command -v webpmux >/dev/null") != 0) {
    CHECK(0, "cwebp and webpmux are needed (Debian's webp package)");
    return;
  }
  /* EXIF with orientation 6 (TIFF, little-endian, one IFD entry), and the ICC profile beside this test. */
  char exif[128], icc_arg[512], exif_arg[256];
  snprintf(exif, sizeof exif, "%s/orientation6.exif", webp_dir);
  static const uint8_t tiff[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 1, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
  FILE *f = fopen(exif, "wb");
  if (f != NULL) {
    fwrite(tiff, 1, sizeof tiff, f);
    fclose(f);
  }
  snprintf(exif_arg, sizeof exif_arg, "-set exif '%s'", exif);
  snprintf(icc_arg, sizeof icc_arg, "-set icc '%s'", "Tests/codecs/display-p3.icc");
  struct { int w, h, alpha; const char *options; int exif, icc; } made[] = {
      {333, 211, 0, "-q 80", 0, 0},          {333, 211, 1, "-q 75", 0, 0},        {257, 129, 0, "-lossless", 0, 0},
      {257, 129, 1, "-lossless", 0, 0},      {17, 9, 1, "-q 90 -sharp_yuv", 0, 0}, {1, 1, 0, "-q 50", 0, 0},
      {1, 1, 1, "-lossless", 0, 0},          {641, 479, 1, "-q 60 -alpha_q 50", 0, 0},
      {301, 97, 0, "-lossless -z 9", 0, 0},  {300, 200, 0, "-q 70 -segments 1 -partition_limit 50", 0, 0},
      {1024, 768, 0, "-q 85 -m 6", 0, 0},    {513, 385, 1, "-lossless -exact", 0, 0},
      {200, 150, 1, "-q 80", 0, 1},          {200, 150, 0, "-lossless", 0, 1},
      {200, 150, 0, "-q 80", 1, 0},
  };
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
    size_t size = 0;
    const char *mux = made[i].exif ? exif_arg : made[i].icc ? icc_arg : NULL;
    uint8_t *data = make_webp(made[i].w, made[i].h, made[i].alpha, made[i].options, mux, &size);
    char name[160];
    snprintf(name, sizeof name, "made %dx%d%s %s%s%s", made[i].w, made[i].h, made[i].alpha ? " alpha" : "",
             made[i].options, made[i].exif ? " +EXIF orientation 6" : "", made[i].icc ? " +ICC" : "");
    CHECK(data != NULL, "%s: cwebp/webpmux failed", name);
    if (data == NULL) continue;
    /* An EXIF orientation after the image data differs from what the header planned. */
    int streamed = compare_clean(&webp_format, name, data, size, "whole", !made[i].exif);
    CHECK(!made[i].exif || streamed == 0, "%s: streamed though its orientation is not the header's", name);
    if (size > 64) {
      compare_webp(name, data, size / 2 + next_random() % (size / 2), "truncated");
      for (int k = 0; k < 3; k++) {
        uint8_t *damaged = malloc(size);
        memcpy(damaged, data, size);
        for (int j = 0; j < 4; j++) damaged[size / 3 + next_random() % (size - size / 3)] ^= (uint8_t)(1u << (next_random() % 8));
        compare_webp(name, damaged, size, "damaged");
        free(damaged);
      }
    }
    /* Over max_pixels: declined before any buffer (the whole decode refuses it). */
    int64_t end = pxl_webp_header_end(data, size);
    pxl_webp_stream *s = pxl_webp_stream_new(PXL_CODEC_RGBA, (uint64_t)made[i].w * made[i].h - 1, (size_t)(end > 0 ? end : 0),
                                             NULL, NULL, NULL);
    int state = 0;
    pxl_codec_output out;
    pxl_codec_status st = pxl_webp_stream_feed(s, data, size, 1, &state, &out);
    CHECK(made[i].w * made[i].h == 1 || (st == PXL_CODEC_OK && state == PXL_STREAM_DECLINED && out.pixels == NULL),
          "%s: over max_pixels: status %d state %d", name, st, state);
    free(out.pixels);
    pxl_webp_stream_free(s);
    webps_seen++;
    free(data);
  }
  /* An animation (img2webp: two pictures of make_webp, whose grain differs) keeps today's
   * path: no header end, so the loader starts no stream. */
  char command[1024], first[128], second[128];
  size_t anim_size = 0;
  uint8_t *anim = NULL;
  snprintf(first, sizeof first, "%s/first.pam", webp_dir);
  snprintf(second, sizeof second, "%s/in.pam", webp_dir);
  free(make_webp(64, 48, 1, "-q 80", NULL, &anim_size));
  int made_frames = rename(second, first) == 0;
  free(make_webp(64, 48, 1, "-q 80", NULL, &anim_size));
  snprintf(command, sizeof command, "img2webp -loop 0 '%s' '%s' -o '%s/anim.webp' >/dev/null 2>&1", first, second,
           webp_dir);
  if (made_frames && system(command) == 0) {
    snprintf(command, sizeof command, "%s/anim.webp", webp_dir);
    anim = read_file(command, &anim_size);
  }
  CHECK(anim != NULL && pxl_webp_header_end(anim, anim_size) == -1, "an animation: header end %lld",
        anim ? (long long)pxl_webp_header_end(anim, anim_size) : 0ll);
  if (anim != NULL) {
    /* Fed to a stream all the same, it declines (before any row). */
    pxl_webp_stream *s = pxl_webp_stream_new(PXL_CODEC_RGBA, 1u << 28, 0, NULL, NULL, NULL);
    int state = 0;
    pxl_codec_output out;
    pxl_codec_status st = pxl_webp_stream_feed(s, anim, anim_size, 1, &state, &out);
    CHECK(st == PXL_CODEC_OK && state == PXL_STREAM_DECLINED, "an animation streamed: status %d state %d", st, state);
    free(out.pixels);
    pxl_webp_stream_free(s);
    webps_seen++;
  }
  free(anim);
  snprintf(command, sizeof command, "rm -rf '%s'", webp_dir);
  if (system(command) != 0) printf("  could not remove %s\n", webp_dir);
}

static int files_seen, pngs_seen;

/* A corpus file, by its first bytes: a JPEG, PNG or WebP (walk_files over the corpus);
 * big ones only at 1/8 and 1/4 chunks would take long: every file is still fed whole. */
static void check_corpus_file(const char *path, const uint8_t *data, size_t size) {
  if (data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    files_seen++;
    check_file(path, data, size);
  } else if (size >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
    pngs_seen++;
    check_with(compare_png, path, data, size);
  } else if (size >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) {
    webps_seen++;
    for (int k = 0; k < 2; k++) check_with(compare_webp, path, data, size);
  }
}

static int rows_until_cancel;
static int32_t cancel_flag;
static int count_and_cancel(void *user, int32_t y, int32_t x0, const uint8_t *row) {
  (void)user, (void)y, (void)x0, (void)row;
  if (--rows_until_cancel == 0) __atomic_store_n(&cancel_flag, 1, __ATOMIC_RELAXED);
  return 0;
}

int main(int argc, char **argv) {
  struct { int w, h, components, progressive, restart, samp; } made[] = {
      {333, 211, 3, 0, 0, 2, }, {333, 211, 3, 0, 0, 1}, {640, 480, 3, 1, 0, 2}, {257, 129, 3, 1, 0, 1},
      {500, 375, 3, 0, 1, 2},   {500, 375, 3, 0, 3, 1}, {301, 97, 1, 0, 0, 1},  {301, 97, 1, 1, 2, 1},
      {17, 9, 3, 0, 0, 2},      {1, 1, 3, 1, 0, 2},
  };
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
    unsigned long size = 0;
    uint8_t *data = make_jpeg(made[i].w, made[i].h, made[i].components, made[i].progressive, made[i].restart,
                              made[i].samp, &size);
    char name[96];
    snprintf(name, sizeof name, "made %dx%d c%d%s rst%d samp%d", made[i].w, made[i].h, made[i].components,
             made[i].progressive ? " progressive" : "", made[i].restart, made[i].samp);
    check_file(name, data, size);
    free(data);
  }
  int corpus = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      corpus = 1;
      walk_files(argv[i], 3, 12 * 1024 * 1024, check_corpus_file);
    }
  }
  if (!corpus) printf("  corpus not found (%s): only the generated files\n", argc > 1 ? argv[1] : "no argument");
  printf("  %d corpus JPEGs, %d comparisons, %d declined (progressive at 1/8, arithmetic coding)\n", files_seen, compared, declines);
  printf("  %d corpus PNGs, %d comparisons, %d streamed to the end (the rest declined)\n", pngs_seen,
         png_format.compared, png_format.streamed);
  check_made_webps();
  printf("  %d WebPs (corpus and made with cwebp), %d comparisons, %d streamed to the end (the rest declined)\n",
         webps_seen, webp_format.compared, webp_format.streamed);

  /* Cancelled mid-way: stops at the next strip with "cancelled", frees cleanly. */
  unsigned long size = 0;
  uint8_t *data = make_jpeg(800, 600, 3, 0, 0, 2, &size);
  rows_until_cancel = 40;
  pxl_jpeg_stream *s = pxl_jpeg_stream_new(PXL_CODEC_RGBA, 1, 1u << 28, NULL, count_and_cancel, NULL, 0, 0, 800, 600,
                                           &cancel_flag);
  int state = 0;
  pxl_codec_output out;
  pxl_codec_status st = pxl_jpeg_stream_feed(s, data, size / 2, 0, &state, &out);
  CHECK(st == PXL_CODEC_CORRUPT && strstr(out.message, "cancelled") != NULL && rows_until_cancel > -16,
        "a cancelled stream: status %d, message %s, %d rows after the cancel", st, out.message, -rows_until_cancel);
  st = pxl_jpeg_stream_feed(s, data + size / 2, size - size / 2, 1, &state, &out);
  CHECK(st != PXL_CODEC_OK, "a cancelled stream took more bytes");
  pxl_jpeg_stream_free(s);
  free(data);

  /* WebP: the next feed after a cancel fails at once; every stream was freed. */
  snprintf(webp_dir, sizeof webp_dir, "/tmp/pxl-webp-stream.XXXXXX");
  size_t webp_size = 0;
  uint8_t *webp = mkdtemp(webp_dir) != NULL ? make_webp(640, 480, 0, "-q 80", NULL, &webp_size) : NULL;
  CHECK(webp != NULL, "cwebp failed");
  if (webp != NULL) {
    cancel_flag = 0;
    rows_until_cancel = 1 << 30;
    pxl_webp_stream *w = pxl_webp_stream_new(PXL_CODEC_RGBA, 1u << 28, (size_t)pxl_webp_header_end(webp, webp_size),
                                             NULL, NULL, &cancel_flag);
    CHECK(pxl_webp_streams_live() == 1, "a WebP stream lives: %lld", (long long)pxl_webp_streams_live());
    st = pxl_webp_stream_feed(w, webp, webp_size / 2, 0, &state, &out);
    CHECK(st == PXL_CODEC_OK && state == PXL_STREAM_MORE, "half a WebP: status %d state %d", st, state);
    cancel_flag = 1;
    st = pxl_webp_stream_feed(w, webp + webp_size / 2, webp_size - webp_size / 2, 1, &state, &out);
    CHECK(st == PXL_CODEC_CORRUPT && strstr(out.message, "cancelled") != NULL && out.pixels == NULL,
          "a cancelled WebP stream: status %d, message %s", st, out.message);
    pxl_webp_stream_free(w);
    free(webp);
  }
  rmdir(webp_dir);
  CHECK(pxl_webp_streams_live() == 0, "WebP streams left: %lld", (long long)pxl_webp_streams_live());
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
