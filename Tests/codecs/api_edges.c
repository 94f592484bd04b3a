/*
 * Edge cases of the CCodecs API that the corpus does not reach: invalid arguments,
 * message buffers, every truncation of a valid file, the progressive scan limit, the
 * pixel limits, EXIF parsing, and concurrent decodes. Self-contained (makes its own
 * images with libjpeg and by hand), so it runs without the corpus.
 */
// gcc -O2 -pthread -I Sources/CCodecs/include -I Sources/CCodecs Tests/codecs/api_edges.c Sources/CCodecs/*.c -ljpeg -lpng -o /tmp/api_edges
// /tmp/api_edges        (or under valgrind --leak-check=full --error-exitcode=1)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

#include "pxl_codecs.h"
#include "pxl_exif.h"

#include "check.h"

/* ---- image makers ---------------------------------------------------------------- */

/* A w x h colour JPEG from libjpeg's compressor; progressive when asked. */
/* progressive 2: baseline, one component (grayscale). */
static uint8_t *make_jpeg(int w, int h, int progressive, size_t *size) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  unsigned char *buf = NULL;
  unsigned long len = 0;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &buf, &len);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  if (progressive == 2) jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  else if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  uint8_t *row = malloc((size_t)w * 3);
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++) {
      row[3 * x] = (uint8_t)(x * 7 + y);
      row[3 * x + 1] = (uint8_t)(y * 5);
      row[3 * x + 2] = (uint8_t)(x ^ y);
    }
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(row);
  uint8_t *out = malloc(len);
  memcpy(out, buf, len);
  free(buf);
  *size = len;
  return out;
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return c ^ 0xffffffffu;
}

static size_t put_chunk(uint8_t *dst, const char *type, const uint8_t *data, uint32_t len) {
  dst[0] = (uint8_t)(len >> 24); dst[1] = (uint8_t)(len >> 16); dst[2] = (uint8_t)(len >> 8); dst[3] = (uint8_t)len;
  memcpy(dst + 4, type, 4);
  if (len) memcpy(dst + 8, data, len);
  uint32_t c = crc32_of(dst + 4, 4 + (size_t)len);
  uint8_t *t = dst + 8 + len;
  t[0] = (uint8_t)(c >> 24); t[1] = (uint8_t)(c >> 16); t[2] = (uint8_t)(c >> 8); t[3] = (uint8_t)c;
  return 12 + (size_t)len;
}

/* A w x h 8-bit gray PNG whose rows are all zero, stored uncompressed in zlib. Optional
 * eXIf payload before IDAT. Only for small images (w * h + h <= 65535). */
static uint8_t *make_png(uint32_t w, uint32_t h, const uint8_t *exif, uint32_t exif_len, size_t *size) {
  size_t raw = (size_t)(w + 1) * h;
  int idat_ok = raw <= 65535;
  uint8_t *p = calloc(1, 256 + exif_len + (idat_ok ? raw + 16 : 0));
  size_t n = 0;
  memcpy(p, "\x89PNG\r\n\x1a\n", 8);
  n = 8;
  uint8_t ihdr[13] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                      (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h, 8, 0, 0, 0, 0};
  n += put_chunk(p + n, "IHDR", ihdr, 13);
  if (exif) n += put_chunk(p + n, "eXIf", exif, exif_len);
  if (idat_ok) {
    /* zlib header, one stored block, adler32 of zeros (= 1 << 16 | 1 ... computed). */
    uint8_t *z = malloc(raw + 11);
    size_t k = 0;
    z[k++] = 0x78; z[k++] = 0x01; z[k++] = 0x01;
    z[k++] = (uint8_t)raw; z[k++] = (uint8_t)(raw >> 8); z[k++] = (uint8_t)~raw; z[k++] = (uint8_t)(~raw >> 8);
    memset(z + k, 0, raw);
    k += raw;
    uint32_t a = 1, b = (uint32_t)(raw % 65521); /* adler32 of raw zero bytes */
    z[k++] = (uint8_t)(b >> 8); z[k++] = (uint8_t)b; z[k++] = (uint8_t)(a >> 8); z[k++] = (uint8_t)a;
    n += put_chunk(p + n, "IDAT", z, (uint32_t)k);
    free(z);
  } else {
    n += put_chunk(p + n, "IDAT", NULL, 0);
  }
  n += put_chunk(p + n, "IEND", NULL, 0);
  *size = n;
  return p;
}

/* ---- checks ---------------------------------------------------------------------- */

static int terminated(const char *m, size_t cap) { return memchr(m, '\0', cap) != NULL; }

static void test_arguments(const uint8_t *jpg, size_t jn, const uint8_t *png, size_t pn) {
  pxl_codec_output o;
  pxl_codec_info info;
  char msg[64];

  CHECK(pxl_jpeg_decode(NULL, 0, 0, 1, 1000, &o) == PXL_CODEC_CORRUPT && o.pixels == NULL && o.message[0], "jpeg NULL data: %s", o.message);
  CHECK(pxl_png_decode(NULL, 0, 0, 1000, &o) == PXL_CODEC_CORRUPT && o.pixels == NULL && o.message[0], "png NULL data: %s", o.message);
  CHECK(pxl_jpeg_decode(jpg, 0, 0, 1, 1000, &o) == PXL_CODEC_CORRUPT, "jpeg size 0");
  CHECK(pxl_png_decode(png, 0, 0, 1000, &o) == PXL_CODEC_CORRUPT, "png size 0");
  CHECK(pxl_jpeg_read_info(NULL, 0, &info, msg, sizeof msg) == PXL_CODEC_CORRUPT && info.orientation == 1, "jpeg info NULL");
  CHECK(pxl_png_read_info(NULL, 0, &info, msg, sizeof msg) == PXL_CODEC_CORRUPT && info.orientation == 1, "png info NULL");
  CHECK(pxl_jpeg_decode(jpg, jn, 0, 1, 1000, NULL) == PXL_CODEC_UNSUPPORTED, "jpeg out NULL");
  CHECK(pxl_png_decode(png, pn, 0, 1000, NULL) == PXL_CODEC_UNSUPPORTED, "png out NULL");
  CHECK(pxl_jpeg_read_info(jpg, jn, NULL, msg, sizeof msg) == PXL_CODEC_UNSUPPORTED, "jpeg info out NULL");
  CHECK(pxl_png_read_info(png, pn, NULL, NULL, 0) == PXL_CODEC_UNSUPPORTED, "png info out NULL");

  int bad_layouts[] = {-1, 4, 1000};
  for (int i = 0; i < 3; i++) {
    CHECK(pxl_jpeg_decode(jpg, jn, bad_layouts[i], 1, 1u << 30, &o) == PXL_CODEC_UNSUPPORTED && o.pixels == NULL && o.message[0], "jpeg layout %d", bad_layouts[i]);
    CHECK(pxl_png_decode(png, pn, bad_layouts[i], 1u << 30, &o) == PXL_CODEC_UNSUPPORTED && o.pixels == NULL && o.message[0], "png layout %d", bad_layouts[i]);
  }
  int bad_scales[] = {0, -2, 3, 16};
  for (int i = 0; i < 4; i++)
    CHECK(pxl_jpeg_decode(jpg, jn, 0, bad_scales[i], 1u << 30, &o) == PXL_CODEC_UNSUPPORTED && o.message[0], "scale %d", bad_scales[i]);

  /* Message capacities: 0 leaves the buffer alone, 1 gets just the terminator. */
  char one[1] = {'x'}, zero[1] = {'x'};
  CHECK(pxl_jpeg_read_info(png, pn, &info, one, 1) == PXL_CODEC_CORRUPT && one[0] == '\0', "cap 1 jpeg");
  CHECK(pxl_png_read_info(jpg, jn, &info, one, 1) == PXL_CODEC_CORRUPT && one[0] == '\0', "cap 1 png");
  CHECK(pxl_jpeg_read_info(png, pn, &info, zero, 0) == PXL_CODEC_CORRUPT && zero[0] == 'x', "cap 0 jpeg");
  CHECK(pxl_jpeg_read_info(png, pn, &info, NULL, 100) == PXL_CODEC_CORRUPT, "NULL message");
  CHECK(pxl_jpeg_read_info(jpg, jn, &info, msg, sizeof msg) == PXL_CODEC_OK && msg[0] == '\0', "ok info has empty message");

  /* max_pixels 0 refuses everything, before any buffer. */
  CHECK(pxl_jpeg_decode(jpg, jn, 0, 1, 0, &o) == PXL_CODEC_TOO_MANY_PIXELS && o.pixels == NULL, "jpeg max 0");
  CHECK(pxl_png_decode(png, pn, 0, 0, &o) == PXL_CODEC_TOO_MANY_PIXELS && o.pixels == NULL, "png max 0");
}

/* Every prefix of a valid file: never a crash; success only with a warning (libjpeg
 * pads truncated data) and marked incomplete, or for the complete file, not marked. */
static void test_truncations(const uint8_t *d, size_t n, int is_png) {
  int bad = 0, ok_count = 0;
  for (size_t len = 0; len <= n; len++) {
    uint8_t *copy = malloc(len ? len : 1); /* exact size: valgrind/ASan catch overreads */
    memcpy(copy, d, len);
    pxl_codec_output o;
    pxl_codec_status st = is_png ? pxl_png_decode(copy, len, 0, 1u << 30, &o) : pxl_jpeg_decode(copy, len, 0, 1, 1u << 30, &o);
    if (st == PXL_CODEC_OK) {
      ok_count++;
      if (len < n && o.warnings == 0 && is_png) bad++; /* PNG must never accept a truncated file */
      if (o.incomplete != (len < n)) bad++;
    } else if (o.pixels != NULL || !terminated(o.message, sizeof o.message) || o.message[0] == '\0') {
      bad++;
    }
    free(o.pixels);
    pxl_codec_info info;
    char msg[32];
    st = is_png ? pxl_png_read_info(copy, len, &info, msg, sizeof msg) : pxl_jpeg_read_info(copy, len, &info, msg, sizeof msg);
    if (!terminated(msg, sizeof msg)) bad++;
    free(copy);
  }
  CHECK(bad == 0, "%s truncations: %d bad outcomes", is_png ? "png" : "jpeg", bad);
  if (is_png) CHECK(ok_count == 1, "png: %d prefixes decoded, expected only the whole file", ok_count);
  else CHECK(ok_count >= 1, "jpeg: whole file must decode");
}

/* Repeat the last scan of a progressive JPEG: libjpeg only warns about the bogus
 * progression, so only PXL_JPEG_MAX_SCANS stops the work. */
static void test_scan_limit(const uint8_t *prog, size_t n) {
  size_t last_sos = 0;
  for (size_t i = 0; i + 1 < n; i++)
    if (prog[i] == 0xff && prog[i + 1] == 0xda) last_sos = i;
  CHECK(last_sos > 0 && prog[n - 2] == 0xff && prog[n - 1] == 0xd9, "progressive JPEG layout");
  if (last_sos == 0) return;
  size_t seg = n - 2 - last_sos;
  int counts[2] = {PXL_JPEG_MAX_SCANS - 20, 5000};
  for (int t = 0; t < 2; t++) {
    int extra = counts[t];
    size_t m = n + (size_t)extra * seg;
    uint8_t *f = malloc(m), *p = f;
    memcpy(p, prog, n - 2); p += n - 2;
    for (int k = 0; k < extra; k++) { memcpy(p, prog + last_sos, seg); p += seg; }
    *p++ = 0xff; *p++ = 0xd9;
    pxl_codec_output o;
    clock_t t0 = clock();
    pxl_codec_status st = pxl_jpeg_decode(f, m, 0, 1, 1u << 30, &o);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (t == 0) CHECK(st == PXL_CODEC_OK, "%d scans: %s", extra, o.message);
    else CHECK(st == PXL_CODEC_CORRUPT && strstr(o.message, "scans") != NULL, "%d scans: status %d %s", extra, st, o.message);
    printf("  %d extra scans: status %d, %.2f s, \"%s\"\n", extra, st, secs, o.message);
    free(o.pixels);
    free(f);
  }
}

static void test_pixel_limits(void) {
  size_t n;
  pxl_codec_output o;
  pxl_codec_info info;
  char msg[128];
  uint8_t *p = make_png(1000001, 1, NULL, 0, &n);
  CHECK(pxl_png_read_info(p, n, &info, msg, sizeof msg) == PXL_CODEC_OK && info.width == 1000001, "png 1000001 wide info: %s", msg);
  CHECK(pxl_png_decode(p, n, 0, 100000000ull, &o) == PXL_CODEC_TOO_MANY_PIXELS && o.pixels == NULL, "png 1000001 wide: %s", o.message);
  free(p);
  p = make_png(10000, 10001, NULL, 0, &n);
  CHECK(pxl_png_decode(p, n, 0, 100000000ull, &o) == PXL_CODEC_TOO_MANY_PIXELS, "png 10000x10001: %s", o.message);
  CHECK(pxl_png_decode(p, n, 0, 100010000ull, &o) != PXL_CODEC_TOO_MANY_PIXELS, "png 10000x10001 within budget: %s", o.message);
  free(o.pixels);
  free(p);
  p = make_png(7, 3, NULL, 0, &n);
  CHECK(pxl_png_decode(p, n, 0, 21, &o) == PXL_CODEC_OK && o.width == 7 && o.height == 3 && o.stride == 28, "png 7x3 at exact budget: %s", o.message);
  free(o.pixels);
  CHECK(pxl_png_decode(p, n, 0, 20, &o) == PXL_CODEC_TOO_MANY_PIXELS, "png 7x3 budget 20");
  free(p);

  /* A JPEG header declaring 60000x60000 is refused before jpeg_start_decompress: the
   * scan data here is 8x8 worth, so reaching the decoder would warn and pad instead. */
  size_t jn;
  uint8_t *j = make_jpeg(8, 8, 0, &jn);
  for (size_t i = 0; i + 8 < jn; i++) {
    if (j[i] == 0xff && (j[i + 1] == 0xc0 || j[i + 1] == 0xc2)) {
      j[i + 5] = 0xea; j[i + 6] = 0x60; j[i + 7] = 0xea; j[i + 8] = 0x60; /* 60000 x 60000 */
      break;
    }
  }
  clock_t t0 = clock();
  CHECK(pxl_jpeg_decode(j, jn, 0, 1, 100000000ull, &o) == PXL_CODEC_TOO_MANY_PIXELS && o.pixels == NULL, "jpeg 60000^2: %s", o.message);
  CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 0.1, "jpeg refusal is immediate");
  CHECK(pxl_jpeg_read_info(j, jn, &info, msg, sizeof msg) == PXL_CODEC_OK && info.width == 60000, "jpeg 60000^2 info");
  free(j);
}

static size_t tiff_with_orientation(uint8_t *b, int big, uint16_t type, uint32_t value, uint16_t entries) {
  memset(b, 0, 64);
  memcpy(b, big ? "MM\0*" : "II*\0", 4);
  b[big ? 7 : 4] = 8; /* IFD0 at offset 8 */
  b[big ? 8 : 9] = (uint8_t)(entries >> 8);
  b[big ? 9 : 8] = (uint8_t)entries;
  uint8_t *e = b + 10;
  /* tag 0x0112 */
  if (big) { e[0] = 0x01; e[1] = 0x12; e[3] = (uint8_t)type; e[7] = 1; }
  else { e[0] = 0x12; e[1] = 0x01; e[2] = (uint8_t)type; e[4] = 1; }
  if (type == 3) { if (big) { e[8] = (uint8_t)(value >> 8); e[9] = (uint8_t)value; } else { e[8] = (uint8_t)value; e[9] = (uint8_t)(value >> 8); } }
  else if (type == 4) { if (big) e[11] = (uint8_t)value; else e[8] = (uint8_t)value; }
  else e[8] = (uint8_t)value;
  return 10 + 12 + 4;
}

static void test_exif(void) {
  uint8_t b[64];
  size_t n;
  for (int big = 0; big < 2; big++) {
    for (uint32_t v = 0; v <= 9; v++) {
      n = tiff_with_orientation(b, big, 3, v, 1);
      int want = (v >= 1 && v <= 8) ? (int)v : 1;
      CHECK(pxl_exif_orientation(b, n) == want, "big=%d value %u", big, v);
    }
    n = tiff_with_orientation(b, big, 4, 6, 1);
    CHECK(pxl_exif_orientation(b, n) == 6, "LONG orientation");
    n = tiff_with_orientation(b, big, 7, 6, 1);
    CHECK(pxl_exif_orientation(b, n) == 1, "UNDEFINED type is invalid");
    n = tiff_with_orientation(b, big, 3, 6, 60000); /* count far beyond the data */
    CHECK(pxl_exif_orientation(b, n) == 6, "huge entry count, tag first");
    /* Any cut inside the header or the entry (the first 22 bytes) loses the tag. */
    for (size_t cut = 0; cut < 22; cut++) CHECK(pxl_exif_orientation(b, cut) == 1, "truncated at %zu", cut);
  }
  n = tiff_with_orientation(b, 0, 3, 6, 1);
  b[4] = 0xf0; b[5] = 0xff; b[6] = 0xff; b[7] = 0xff; /* IFD offset near 4 GB */
  CHECK(pxl_exif_orientation(b, n) == 1, "IFD offset out of range");
  CHECK(pxl_exif_orientation(NULL, 100) == 1, "NULL exif");

  /* End to end through PNG eXIf, and a JPEG-style prefix tolerated there. */
  uint8_t ex[64];
  size_t en = tiff_with_orientation(ex, 1, 3, 8, 1);
  size_t pn;
  uint8_t *p = make_png(4, 4, ex, (uint32_t)en, &pn);
  pxl_codec_info info;
  char msg[64];
  CHECK(pxl_png_read_info(p, pn, &info, msg, sizeof msg) == PXL_CODEC_OK && info.orientation == 8, "png eXIf orientation %d", info.orientation);
  free(p);
}

typedef struct thread_arg {
  const uint8_t *d;
  size_t n;
  int is_png;
  uint32_t sum;
  int ok;
} thread_arg;

static void *decode_loop(void *p) {
  thread_arg *a = p;
  a->ok = 1;
  for (int i = 0; i < 50; i++) {
    pxl_codec_output o;
    pxl_codec_status st = a->is_png ? pxl_png_decode(a->d, a->n, 0, 1u << 30, &o) : pxl_jpeg_decode(a->d, a->n, 0, 2, 1u << 30, &o);
    if (st != PXL_CODEC_OK) { a->ok = 0; continue; }
    uint32_t s = 0;
    for (size_t k = 0; k < (size_t)o.stride * o.height; k++) s = s * 31 + o.pixels[k];
    if (i == 0) a->sum = s;
    else if (s != a->sum) a->ok = 0;
    free(o.pixels);
  }
  return NULL;
}

static void test_threads(const uint8_t *jpg, size_t jn, const uint8_t *png, size_t pn) {
  pthread_t t[4];
  thread_arg a[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (thread_arg){(i & 1) ? png : jpg, (i & 1) ? pn : jn, i & 1, 0, 0};
    pthread_create(&t[i], NULL, decode_loop, &a[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK(a[0].ok && a[1].ok && a[2].ok && a[3].ok && a[0].sum == a[2].sum && a[1].sum == a[3].sum, "concurrent decodes agree");
}

/* pxl_jpeg_decode_rows hands over exactly the rows pxl_jpeg_decode builds, at every DCT
 * scale and layout, baseline and progressive; a callback that stops fails the decode;
 * and the streamed resampler fed from it equals the resampler fed the whole bitmap. */
typedef struct rows_sink {
  const uint8_t *expected;
  size_t stride;
  int32_t rows, mismatches, stop_at;
} rows_sink;

static int compare_row(void *user, int32_t y, const uint8_t *row) {
  rows_sink *s = user;
  if (s->stop_at >= 0 && y == s->stop_at) return 1;
  if (y != s->rows || memcmp(row, s->expected + (size_t)y * s->stride, s->stride) != 0) s->mismatches++;
  s->rows++;
  return 0;
}

static void test_jpeg_rows(const uint8_t *jpg, size_t jn, const uint8_t *prog, size_t pn) {
  const uint8_t *files[2] = {jpg, prog};
  size_t sizes[2] = {jn, pn};
  for (int f = 0; f < 2; f++) {
    for (int32_t layout = 0; layout <= 3; layout++) {
      for (int32_t scale = 1; scale <= 8; scale *= 2) {
        pxl_codec_output whole, streamed;
        if (pxl_jpeg_decode(files[f], sizes[f], layout, scale, 1u << 30, &whole) != PXL_CODEC_OK) {
          CHECK(0, "jpeg %d layout %d scale %d: %s", f, layout, scale, whole.message);
          continue;
        }
        rows_sink sink = {whole.pixels, (size_t)whole.stride, 0, 0, -1};
        pxl_codec_status st = pxl_jpeg_decode_rows(files[f], sizes[f], layout, scale, 1u << 30, compare_row, &sink,
                                                   &streamed);
        CHECK(st == PXL_CODEC_OK && streamed.pixels == NULL && streamed.width == whole.width &&
              streamed.height == whole.height && streamed.channels == whole.channels &&
              sink.rows == whole.height && sink.mismatches == 0,
              "jpeg %d layout %d scale %d: rows differ from the bitmap (%d rows, %d mismatches, %s)", f, layout,
              scale, sink.rows, sink.mismatches, streamed.message);
        /* The resampler fed by the decoder equals the resampler fed the bitmap. */
        pxl_resampler *a = pxl_resampler_new(whole.width, whole.height, whole.channels, 0.7, 1.3,
                                             whole.width - 1.9, whole.height - 2.2, 5, 4, 0);
        pxl_resampler *b = pxl_resampler_new(whole.width, whole.height, whole.channels, 0.7, 1.3,
                                             whole.width - 1.9, whole.height - 2.2, 5, 4, 0);
        CHECK(a && b, "resampler_new");
        if (a && b) {
          st = pxl_jpeg_decode_rows(files[f], sizes[f], layout, scale, 1u << 30, pxl_resampler_add_row, a, &streamed);
          for (int32_t y = 0; y < whole.height; y++) pxl_resampler_add_row(b, y, whole.pixels + (size_t)y * whole.stride);
          uint8_t *ra = pxl_resampler_finish(a), *rb = pxl_resampler_finish(b);
          CHECK(st == PXL_CODEC_OK && ra && rb && memcmp(ra, rb, (size_t)5 * 4 * whole.channels) == 0,
                "jpeg %d layout %d scale %d: streamed resample differs", f, layout, scale);
          free(ra);
          free(rb);
        }
        pxl_resampler_free(a);
        pxl_resampler_free(b);
        sink = (rows_sink){whole.pixels, (size_t)whole.stride, 0, 0, whole.height / 2};
        st = pxl_jpeg_decode_rows(files[f], sizes[f], layout, scale, 1u << 30, compare_row, &sink, &streamed);
        CHECK(st == PXL_CODEC_CORRUPT && strstr(streamed.message, "stopped") != NULL && streamed.pixels == NULL,
              "jpeg %d: a stopping callback fails the decode (%d: %s)", f, st, streamed.message);
        free(whole.pixels);
      }
    }
  }
  pxl_codec_output o;
  CHECK(pxl_jpeg_decode_rows(jpg, jn, 0, 1, 1u << 30, NULL, NULL, &o) == PXL_CODEC_UNSUPPORTED && o.message[0],
        "jpeg rows: NULL row_fn");
  CHECK(pxl_jpeg_decode_rows(jpg, jn, 0, 1, 0, compare_row, NULL, &o) == PXL_CODEC_TOO_MANY_PIXELS,
        "jpeg rows: pixel limit before any row");
  /* The resampler refuses nonsense and a source that stopped early. */
  CHECK(pxl_resampler_new(0, 5, 4, 0, 0, 1, 1, 1, 1, 0) == NULL, "resampler: width 0");
  CHECK(pxl_resampler_new(5, 5, 2, 0, 0, 5, 5, 1, 1, 0) == NULL, "resampler: 2 channels");
  CHECK(pxl_resampler_new(5, 5, 4, 0, 0, 0, 5, 1, 1, 0) == NULL, "resampler: empty crop");
  pxl_resampler *r = pxl_resampler_new(4, 4, 1, 0, 0, 4, 4, 2, 2, 0);
  uint8_t row[4] = {10, 20, 30, 40};
  for (int32_t y = 0; y < 3; y++) pxl_resampler_add_row(r, y, row);
  CHECK(pxl_resampler_finish(r) == NULL, "resampler: a missing row is refused");
  pxl_resampler_add_row(r, 3, row);
  uint8_t *out = pxl_resampler_finish(r);
  CHECK(out && out[0] == 15 && out[1] == 35 && out[2] == 15 && out[3] == 35, "resampler: 2x2 box averages");
  free(out);
  pxl_resampler_free(r);
  pxl_resampler_free(NULL);
}

/* pxl_jpeg_decode_region: every row of the region it hands over equals the bitmap
 * pxl_jpeg_decode builds, on the region's columns, at every layout and scale (for a
 * 4:2:0 image whose region edges fall on iMCU boundaries, where fancy upsampling would
 * show a cut without the margin); and a resampler fed by it equals one fed the whole bitmap. */
typedef struct region_sink {
  const uint8_t *expected;
  size_t stride, channels;
  int32_t x, y, width, height, rows_seen, mismatches, last_y;
} region_sink;

static int compare_region_row(void *user, int32_t y, int32_t x0, const uint8_t *row) {
  region_sink *s = user;
  if (y <= s->last_y || x0 > s->x) s->mismatches++;
  s->last_y = y;
  if (y >= s->y && y < s->y + s->height) {
    s->rows_seen++;
    const uint8_t *want = s->expected + (size_t)y * s->stride + (size_t)s->x * s->channels;
    if (memcmp(row + (size_t)(s->x - x0) * s->channels, want, (size_t)s->width * s->channels) != 0) s->mismatches++;
  }
  return 0;
}

static void test_jpeg_region(void) {
  size_t sizes[2];
  uint8_t *files[2];
  files[0] = make_jpeg(301, 203, 0, &sizes[0]); /* 4:2:0: iMCUs of 16 pixels */
  files[1] = make_jpeg(301, 203, 1, &sizes[1]);
  for (int f = 0; f < 2; f++) {
    for (int32_t layout = 0; layout <= 3; layout++) {
      for (int32_t scale = 1; scale <= 4; scale *= 2) {
        pxl_codec_output whole, part;
        if (pxl_jpeg_decode(files[f], sizes[f], layout, scale, 1u << 30, &whole) != PXL_CODEC_OK) {
          CHECK(0, "region %d: %s", f, whole.message);
          continue;
        }
        /* Edges on iMCU boundaries (16 / scale pixels): where libjpeg would cut. */
        int32_t x = 5 * 16 / scale, y = 3 * 16 / scale;
        region_sink sink = {whole.pixels, (size_t)whole.stride, (size_t)whole.channels, x, y,
                            whole.width / 3, whole.height / 4, 0, 0, -1};
        pxl_codec_status st = pxl_jpeg_decode_region(files[f], sizes[f], layout, scale, 1u << 30, x, y, sink.width,
                                                     sink.height, compare_region_row, &sink, &part);
        CHECK(st == PXL_CODEC_OK && part.pixels == NULL && part.width == whole.width && part.height == whole.height &&
              sink.rows_seen == sink.height && sink.mismatches == 0,
              "region %d layout %d scale %d: %d rows seen of %d, %d mismatches (%s)", f, layout, scale,
              sink.rows_seen, sink.height, sink.mismatches, part.message);
        pxl_resampler *a = pxl_resampler_new(whole.width, whole.height, whole.channels, x + 0.4, y + 0.3,
                                             sink.width - 1.1, sink.height - 0.9, 7, 5, 0);
        pxl_resampler *b = pxl_resampler_new(whole.width, whole.height, whole.channels, x + 0.4, y + 0.3,
                                             sink.width - 1.1, sink.height - 0.9, 7, 5, 0);
        int32_t rx, ry, rw, rh;
        pxl_resampler_region(a, &rx, &ry, &rw, &rh);
        CHECK(rx == x && ry == y && rw >= sink.width - 2 && rh >= sink.height - 2, "resampler region %d %d %d %d", rx,
              ry, rw, rh);
        st = pxl_jpeg_decode_region(files[f], sizes[f], layout, scale, 1u << 30, rx, ry, rw, rh, pxl_resampler_add_row_at,
                                    a, &part);
        for (int32_t row = 0; row < whole.height; row++)
          pxl_resampler_add_row(b, row, whole.pixels + (size_t)row * whole.stride);
        uint8_t *ra = pxl_resampler_finish(a), *rb = pxl_resampler_finish(b);
        CHECK(st == PXL_CODEC_OK && ra && rb && memcmp(ra, rb, (size_t)7 * 5 * whole.channels) == 0,
              "region %d layout %d scale %d: resampled region differs", f, layout, scale);
        free(ra);
        free(rb);
        pxl_resampler_free(a);
        pxl_resampler_free(b);
        free(whole.pixels);
      }
    }
  }
  /* A row that starts right of the columns the taps read is refused. */
  pxl_resampler *r = pxl_resampler_new(8, 2, 1, 2, 0, 4, 2, 2, 1, 0);
  uint8_t row[8] = {0};
  CHECK(pxl_resampler_add_row_at(r, 0, 3, row) != 0, "resampler: a row missing needed columns is refused");
  pxl_resampler_free(r);
  pxl_codec_output o;
  CHECK(pxl_jpeg_decode_region(files[0], sizes[0], 0, 1, 1u << 30, 0, 0, 0, 5, compare_region_row, NULL, &o) ==
            PXL_CODEC_UNSUPPORTED, "region: empty");
  free(files[0]);
  free(files[1]);
}

/* pxl_orient against the per-pixel definition of each EXIF orientation (the stored pixel
 * shown at display (x, y)), for every pixel size and an odd, non-square image. */
static void test_orient(void) {
  const int32_t w = 7, h = 5;
  for (int32_t ch = 1; ch <= 4; ch++) {
    uint8_t src[7 * 5 * 4];
    for (int i = 0; i < w * h * ch; i++) src[i] = (uint8_t)(i * 7 + 3);
    for (int32_t o = 0; o <= 9; o++) {
      uint8_t *out = pxl_orient(src, w, h, ch, o);
      CHECK(out != NULL, "pxl_orient(%d channels, orientation %d) failed", ch, o);
      if (out == NULL) continue;
      int swaps = o >= 5 && o <= 8;
      int32_t ow = swaps ? h : w, oh = swaps ? w : h;
      int bad = 0;
      for (int32_t y = 0; y < oh; y++)
        for (int32_t x = 0; x < ow; x++) {
          int32_t sx, sy;
          switch (o) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            case 8: sx = w - 1 - y, sy = x; break;
            default: sx = x, sy = y; break;
          }
          bad += memcmp(out + (y * ow + x) * ch, src + (sy * w + sx) * ch, (size_t)ch) != 0;
        }
      CHECK(bad == 0, "pxl_orient(%d channels, orientation %d): %d pixels misplaced", ch, o, bad);
      free(out);
    }
  }
  CHECK(pxl_orient((const uint8_t *)"abcde", 1, 1, 5, 6) == NULL, "pxl_orient accepted 5 channels");
}

/* pxl_codec_info.gray says a JPEG is luma only (a thumbnail in a colour format is then
 * decoded as GRAY and expanded by pxl_gray_expand, as libjpeg expands it). */
static void test_gray(const uint8_t *jpg, size_t jn) {
  size_t gn;
  uint8_t *gray = make_jpeg(37, 23, 2, &gn);
  pxl_codec_info info;
  CHECK(pxl_jpeg_read_info(gray, gn, &info, NULL, 0) == PXL_CODEC_OK && info.gray == 1, "gray JPEG: gray %d", info.gray);
  CHECK(pxl_jpeg_read_info(jpg, jn, &info, NULL, 0) == PXL_CODEC_OK && info.gray == 0, "colour JPEG: gray %d", info.gray);
  /* Expanded luma is what libjpeg's own GRAY -> RGBA / RGB decode gives. */
  for (int32_t layout = PXL_CODEC_RGBA; layout <= PXL_CODEC_RGB; layout++) {
    pxl_codec_output luma = {0}, colour = {0};
    CHECK(pxl_jpeg_decode(gray, gn, PXL_CODEC_GRAY, 1, 1 << 20, &luma) == PXL_CODEC_OK, "GRAY decode");
    CHECK(pxl_jpeg_decode(gray, gn, layout, 1, 1 << 20, &colour) == PXL_CODEC_OK, "layout %d decode", layout);
    if (luma.pixels && colour.pixels) {
      int ch = colour.channels;
      uint8_t *x = pxl_gray_expand(luma.pixels, 37 * 23, ch);
      int off = 0;
      for (int i = 0; x && i < 37 * 23 * ch; i++) off += x[i] != colour.pixels[i];
      CHECK(x != NULL && off == 0, "layout %d: %d bytes of the expansion differ from libjpeg's", layout, off);
      free(x);
    }
    free(luma.pixels);
    free(colour.pixels);
  }
  free(gray);
}

int main(void) {
  size_t jn, pjn, pn;
  uint8_t *jpg = make_jpeg(37, 23, 0, &jn);
  uint8_t *prog = make_jpeg(64, 48, 1, &pjn);
  uint8_t *png = make_png(5, 3, NULL, 0, &pn);

  test_arguments(jpg, jn, png, pn);
  test_truncations(jpg, jn, 0);
  test_truncations(prog, pjn, 0);
  test_truncations(png, pn, 1);
  test_scan_limit(prog, pjn);
  test_pixel_limits();
  test_exif();
  test_threads(jpg, jn, png, pn);
  test_jpeg_rows(jpg, jn, prog, pjn);
  test_jpeg_region();
  test_orient();
  test_gray(jpg, jn);

  free(jpg);
  free(prog);
  free(png);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
