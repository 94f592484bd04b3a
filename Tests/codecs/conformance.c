/*
 * Conformance test for the CCodecs shims: fixtures generated at test time (differential
 * against reference decoders) and the shared image corpus.
 * Build and run from the repository root:
 */
// gcc -O2 -I Sources/CCodecs/include Tests/codecs/conformance.c Sources/CCodecs/*.c -ljpeg -lpng -o /tmp/conformance
// /tmp/conformance [-v] [-g generated_root] [-f fixtures_root] [corpus_root] [set ...]
/*
 * Two kinds of sets, same manifest format and same checks:
 *  - generated (-g): every generated_root subdirectory named generated... with a
 *    manifest.tsv, made at test time by the scripts/gen-conformance... scripts (`make
 *    test-codecs` runs them all, then this), whose expected pixels come from reference
 *    decoders run on the fixtures just made (djpeg, Pillow, dwebp, ...).
 *    Named but missing is a failure: the generators should have made them.
 *  - fixtures (-f): every set under fixtures_root (Tests/fixtures: small selections of
 *    public conformance suites kept in the repository, with their licences).
 *  - corpus: corpus_root defaults to ../shared/corpus, i.e. /work/shared/corpus when run
 *    from the repository root; if it is absent its sets are skipped, saying so. Without
 *    set names, every subdirectory holding a manifest.tsv is tested, in name order.
 * A summary line says which sets ran (rows passed, and failed if any) and which were
 * skipped. -v also prints the status and message of every rejected file and the last
 * warning of every file that warned. Exit status 0 iff no row failed.
 *
 * Per manifest row (see the corpus README for the columns):
 *  - ok / ok_with_warning: RGBA decode at scale 1 (max_pixels 1e8) must succeed with
 *    the manifest's width/height and rgba8_md5; "ok" must report 0 warnings and
 *    "ok_with_warning" at least one (counts differing from ref_warnings are printed as
 *    notes, not failures); JPEG thumbnails thumb_1_2/4/8 (WxH:md5) must match
 *    scale_denom 2/4/8; read_info must agree on the size. Extra consistency checks:
 *    BGRA and RGB are exact swizzles of RGBA, GRAY is exact where it can be derived
 *    (gray sources, PNG and WebP colour via the documented BT.601 formula), and max_pixels one
 *    below width*height is refused with PXL_CODEC_TOO_MANY_PIXELS and no buffer.
 *  - must_fail*: the decode must fail with pixels == NULL and a non-empty message;
 *    "must_fail (pixel limit)" must fail with PXL_CODEC_TOO_MANY_PIXELS. Rows whose
 *    format is "unknown" (no recognisable magic) must be rejected by both decoders.
 *  - exif_orientation, when it starts with a number, must equal read_info's orientation
 *    (values outside 1..8 mean "invalid", which the API reports as 1). A column starting
 *    with "(" carries only Pillow's opinion (the reference found no EXIF) and is not
 *    checked.
 * The last line of output is exactly "N passed, N failed", after the summary line.
 */
#define _DEFAULT_SOURCE /* strdup, d_type: the build uses -std=c11 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "pxl_codecs.h"
#include "pxl_avif.h"
#include "pxl_webp.h"

/* ---------------------------------------------------------------------------------
 * MD5 (RFC 1321). Written for this test and placed in the public domain.
 * ------------------------------------------------------------------------------- */
typedef struct md5_ctx {
  uint32_t a, b, c, d;
  uint64_t len;
  uint8_t buf[64];
  size_t used;
} md5_ctx;

static uint32_t rol(uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

static void md5_block(md5_ctx *m, const uint8_t *p) {
  static const uint32_t K[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
      0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
      0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
      0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
      0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
      0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
      0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
      0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
  static const int S[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};
  uint32_t X[16];
  for (int i = 0; i < 16; i++)
    X[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
  uint32_t a = m->a, b = m->b, c = m->c, d = m->d;
  for (int i = 0; i < 64; i++) {
    uint32_t f;
    int g, r = i / 16;
    switch (r) {
      case 0: f = (b & c) | (~b & d); g = i; break;
      case 1: f = (d & b) | (~d & c); g = (5 * i + 1) & 15; break;
      case 2: f = b ^ c ^ d; g = (3 * i + 5) & 15; break;
      default: f = c ^ (b | ~d); g = (7 * i) & 15; break;
    }
    uint32_t t = d;
    d = c;
    c = b;
    b = b + rol(a + f + K[i] + X[g], S[r][i & 3]);
    a = t;
  }
  m->a += a; m->b += b; m->c += c; m->d += d;
}

static void md5_init(md5_ctx *m) {
  m->a = 0x67452301; m->b = 0xefcdab89; m->c = 0x98badcfe; m->d = 0x10325476;
  m->len = 0; m->used = 0;
}

static void md5_update(md5_ctx *m, const uint8_t *p, size_t n) {
  m->len += n;
  while (n > 0) {
    size_t k = 64 - m->used;
    if (k > n) k = n;
    memcpy(m->buf + m->used, p, k);
    m->used += k; p += k; n -= k;
    if (m->used == 64) { md5_block(m, m->buf); m->used = 0; }
  }
}

static void md5_hex(md5_ctx *m, char hex[33]) {
  uint64_t bits = m->len * 8;
  uint8_t pad = 0x80, zero = 0, lenb[8];
  md5_update(m, &pad, 1);
  while (m->used != 56) md5_update(m, &zero, 1);
  for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)(bits >> (8 * i));
  md5_update(m, lenb, 8);
  uint32_t v[4] = {m->a, m->b, m->c, m->d};
  for (int i = 0; i < 16; i++) sprintf(hex + 2 * i, "%02x", (v[i / 4] >> (8 * (i % 4))) & 0xff);
  hex[32] = '\0';
}

static void md5_of(const uint8_t *p, size_t n, char hex[33]) {
  md5_ctx m;
  md5_init(&m);
  md5_update(&m, p, n);
  md5_hex(&m, hex);
}

/* ---------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------- */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (n == cap) {
      cap *= 2;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) { free(buf); fclose(f); return NULL; }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  fclose(f);
  *size = n;
  return buf;
}

static const char *status_name(pxl_codec_status s) {
  switch (s) {
    case PXL_CODEC_OK: return "OK";
    case PXL_CODEC_CORRUPT: return "CORRUPT";
    case PXL_CODEC_TOO_MANY_PIXELS: return "TOO_MANY_PIXELS";
    case PXL_CODEC_UNSUPPORTED: return "UNSUPPORTED";
    case PXL_CODEC_NO_MEMORY: return "NO_MEMORY";
    case PXL_CODEC_DECODER_FAILED: return "DECODER_FAILED";
  }
  return "?";
}

typedef enum { FMT_PNG, FMT_JPEG, FMT_AVIF, FMT_GIF, FMT_WEBP, FMT_UNKNOWN } fmt_t;

static pxl_codec_status decode(fmt_t fmt, const uint8_t *d, size_t n, int32_t layout, int32_t scale, uint64_t maxpx,
                               pxl_codec_output *out) {
  if (fmt == FMT_PNG) return pxl_png_decode(d, n, layout, maxpx, out);
  if (fmt == FMT_AVIF) return pxl_avif_decode(d, n, layout, maxpx, out);
  if (fmt == FMT_GIF) return pxl_gif_decode(d, n, layout, maxpx, out);
  if (fmt == FMT_WEBP) return pxl_webp_decode(d, n, layout, maxpx, out);
  return pxl_jpeg_decode(d, n, layout, scale, maxpx, out);
}

static pxl_codec_status read_info(fmt_t fmt, const uint8_t *d, size_t n, pxl_codec_info *info, char *msg, size_t cap) {
  if (fmt == FMT_PNG) return pxl_png_read_info(d, n, info, msg, cap);
  if (fmt == FMT_AVIF) return pxl_avif_read_info(d, n, info, msg, cap);
  if (fmt == FMT_GIF) return pxl_gif_read_info(d, n, info, msg, cap);
  if (fmt == FMT_WEBP) return pxl_webp_read_info(d, n, info, msg, cap);
  return pxl_jpeg_read_info(d, n, info, msg, cap);
}

/* Reasons collected for one row; a row passes when none were recorded. */
typedef struct row_result {
  char reasons[2048];
  size_t len;
  int failed;
} row_result;

static void fail(row_result *r, const char *fmt, ...) {
  va_list ap;
  r->failed = 1;
  if (r->len + 4 >= sizeof r->reasons) return;
  if (r->len) r->len += (size_t)snprintf(r->reasons + r->len, sizeof r->reasons - r->len, "; ");
  if (r->len >= sizeof r->reasons) { r->len = sizeof r->reasons - 1; return; }
  va_start(ap, fmt);
  int k = vsnprintf(r->reasons + r->len, sizeof r->reasons - r->len, fmt, ap);
  va_end(ap);
  if (k > 0) r->len += (size_t)k;
  if (r->len >= sizeof r->reasons) r->len = sizeof r->reasons - 1;
}

/* Output must be all-or-nothing: no buffer and a message on failure. */
static void check_failure_shape(row_result *r, const char *what, const pxl_codec_output *o) {
  if (o->pixels != NULL) fail(r, "%s: failed but returned pixels", what);
  if (o->message[0] == '\0') fail(r, "%s: failed without a message", what);
  if (memchr(o->message, '\0', sizeof o->message) == NULL) fail(r, "%s: message not terminated", what);
}

/* Progressive JPEGs whose 1/8 thumbnail came from their DC scans alone (pxl_jpeg_dc_scans),
 * each compared with the full decode (PXL_JPEG_ALL_SCANS) in every layout. */
static int first_scan_files, first_scan_identical, first_scan_transcoded, early_end_files;
/* Of them, Huffman-coded 4:2:0 ones (the chroma's 1/8 IDCT reads AC), and how many the
 * baseline transcode took (it must take them all: they are the camera photo's layout). */
static int first_scan_420, first_scan_420_transcoded;

/* Whether [d, d+n) has a Huffman progressive frame (SOF2) with 4:2:0 chroma: three
 * components, the first 2x2, the others 1x1. */
static int is_progressive_420(const uint8_t *d, size_t n) {
  for (size_t at = 2; at + 4 <= n && d[at] == 0xFF;) {
    uint8_t code = d[at + 1];
    size_t len = (size_t)d[at + 2] << 8 | d[at + 3];
    if (code == 0xDA || code == 0xD9) return 0;
    if (code == 0xC2 && at + 4 + 6 + 9 <= n)
      return d[at + 9] == 3 && d[at + 11] == 0x22 && d[at + 14] == 0x11 && d[at + 17] == 0x11;
    at += 2 + len;
  }
  return 0;
}
static size_t early_end_saved, early_end_total;

/* Decodes `bytes` at 1/8 with `options` and the whole file [d, d+n) at 1/8 with every scan,
 * both in `layout`; reports both statuses (and the first's warnings) and returns whether
 * both succeeded with the same size and pixels. */
static int same_as_all_scans(const uint8_t *bytes, size_t size, uint32_t options, const uint8_t *d, size_t n,
                             int32_t layout, pxl_codec_status *mine_status, pxl_codec_status *full_status,
                             int *mine_warnings) {
  pxl_codec_output mine, full;
  *mine_status = pxl_jpeg_decode_with_options(bytes, size, layout, 8, 100000000ull, options, &mine);
  *full_status = pxl_jpeg_decode_with_options(d, n, layout, 8, 100000000ull, PXL_JPEG_ALL_SCANS, &full);
  *mine_warnings = mine.warnings;
  int same = *mine_status == PXL_CODEC_OK && *full_status == PXL_CODEC_OK && mine.width == full.width &&
             mine.height == full.height && mine.stride == full.stride &&
             memcmp(mine.pixels, full.pixels, (size_t)mine.stride * mine.height) == 0;
  free(mine.pixels);
  free(full.pixels);
  return same;
}

static void check_first_scan(row_result *r, const uint8_t *d, size_t n) {
  uint8_t *dc = NULL;
  size_t dc_size = pxl_jpeg_dc_scans(d, n, &dc);
  free(dc);
  if (dc_size == 0) return; /* baseline, or not understood: the full decode ran anyway */
  if (dc_size >= n) fail(r, "first scans: the DC copy is %zu bytes of %zu", dc_size, n);
  first_scan_files++;
  pxl_codec_status a, b;
  int warnings;
  /* The DC-only baseline transcode, decoded on its own (the default path would fall back
   * to the DC scans if it failed): the same pixels, every layout, no warning. */
  uint8_t *baseline = NULL;
  size_t baseline_size = pxl_jpeg_dc_baseline(d, n, &baseline);
  int is_420 = is_progressive_420(d, n);
  first_scan_420 += is_420;
  if (baseline_size > 0) {
    first_scan_transcoded++;
    first_scan_420_transcoded += is_420;
    for (int32_t layout = PXL_CODEC_RGBA; layout <= PXL_CODEC_GRAY; layout++) {
      if (!same_as_all_scans(baseline, baseline_size, PXL_JPEG_ALL_SCANS, d, n, layout, &a, &b, &warnings) ||
          warnings != 0)
        fail(r, "DC baseline, layout %d: %s (%d warnings), not the full 1/8 decode's pixels", layout,
             status_name(a), warnings);
    }
  }
  free(baseline);
  /* The default path (whichever shortcut it takes): the full decode's status, and its
   * pixels when that succeeds. */
  int same = 1;
  for (int32_t layout = PXL_CODEC_RGBA; layout <= PXL_CODEC_GRAY; layout++) {
    int equal = same_as_all_scans(d, n, 0, d, n, layout, &a, &b, &warnings);
    if (a != b) {
      fail(r, "first scans, layout %d: %s, the full decode %s", layout, status_name(a), status_name(b));
      same = 0;
    } else if (a == PXL_CODEC_OK && !equal) {
      fail(r, "first scans, layout %d: pixels differ from the full 1/8 decode", layout);
      same = 0;
    }
  }
  first_scan_identical += same;

  /* The early end of a thumbnail's transfer: the prefix up to first_scans_end, with an
   * EOI, must decode at 1/8 to the same pixels as the whole file. */
  int32_t fw = 0, fh = 0;
  size_t end = pxl_jpeg_first_scans_end(d, n, &fw, &fh);
  if (end == 0) return;
  uint8_t *prefix = malloc(end + 2);
  memcpy(prefix, d, end);
  prefix[end] = 0xFF;
  prefix[end + 1] = 0xD9;
  if (!same_as_all_scans(prefix, end + 2, 0, d, n, PXL_CODEC_RGBA, &a, &b, &warnings))
    fail(r, "early end: the first %zu of %zu bytes do not decode to the full 1/8 thumbnail", end, n);
  else
    early_end_files++, early_end_saved += n - end, early_end_total += n;
  free(prefix);
}

static void check_thumb(row_result *r, fmt_t fmt, const uint8_t *d, size_t n, int denom, const char *spec) {
  unsigned ew = 0, eh = 0;
  char emd5[64] = "";
  if (sscanf(spec, "%ux%u:%63s", &ew, &eh, emd5) != 3) {
    fail(r, "thumb 1/%d: unparseable manifest value '%s'", denom, spec);
    return;
  }
  pxl_codec_output o;
  pxl_codec_status st = decode(fmt, d, n, PXL_CODEC_RGBA, denom, 100000000ull, &o);
  if (st != PXL_CODEC_OK) {
    fail(r, "thumb 1/%d: %s (%s)", denom, status_name(st), o.message);
    check_failure_shape(r, "thumb", &o);
    return;
  }
  char md5[33];
  md5_of(o.pixels, (size_t)o.stride * o.height, md5);
  if ((unsigned)o.width != ew || (unsigned)o.height != eh)
    fail(r, "thumb 1/%d: size %dx%d, expected %ux%u", denom, o.width, o.height, ew, eh);
  else if (strcmp(md5, emd5) != 0)
    fail(r, "thumb 1/%d: md5 %s, expected %s", denom, md5, emd5);
  free(o.pixels);
}

/* Animations (optional columns): every composited frame from the format's
 * decode_frames, "N:md5" of the N frames' RGBA rows concatenated; durations_ms
 * "d0,d1,..."; loop_count as read_info reports it. read_info's frame_count must be N. */
typedef struct frames_sink {
  md5_ctx md5;
  int32_t width, height, count;
  char durations[1024];
  size_t len;
} frames_sink;

static int on_frame_md5(void *user, int32_t index, const uint8_t *rgba, int32_t stride, int32_t duration_ms) {
  frames_sink *s = user;
  if (index != s->count) return 1; /* out of order: the count check fails */
  for (int32_t y = 0; y < s->height; y++) md5_update(&s->md5, rgba + (size_t)y * (size_t)stride, (size_t)s->width * 4);
  s->count++;
  if (s->len < sizeof s->durations)
    s->len += (size_t)snprintf(s->durations + s->len, sizeof s->durations - s->len, "%s%d", s->len ? "," : "", duration_ms);
  return 0;
}

static void check_frames(row_result *r, fmt_t fmt, const uint8_t *d, size_t n, const char *frames,
                         const char *durations, const char *loops) {
  if (fmt != FMT_GIF) return;
  unsigned want_count = 0;
  char want_md5[64] = "";
  if (sscanf(frames, "%u:%63s", &want_count, want_md5) != 2) {
    fail(r, "frames: unparseable manifest value '%s'", frames);
    return;
  }
  pxl_codec_info info;
  char msg[256];
  pxl_codec_status st = pxl_gif_read_info(d, n, &info, msg, sizeof msg);
  if (st != PXL_CODEC_OK) { fail(r, "frames: read_info %s (%s)", status_name(st), msg); return; }
  frames_sink sink;
  memset(&sink, 0, sizeof sink);
  md5_init(&sink.md5);
  sink.width = info.width;
  sink.height = info.height;
  pxl_codec_output o;
  st = pxl_gif_decode_frames(d, n, 100000000ull, on_frame_md5, &sink, &o);
  if (st != PXL_CODEC_OK) { fail(r, "decode_frames: %s (%s)", status_name(st), o.message); return; }
  char md5[33];
  md5_hex(&sink.md5, md5);
  if ((unsigned)sink.count != want_count || strcmp(md5, want_md5) != 0)
    fail(r, "frames: %d:%s, expected %s", sink.count, md5, frames);
  if ((unsigned)info.frame_count != want_count) fail(r, "read_info frame_count %d, expected %u", info.frame_count, want_count);
  if (durations[0] && strcmp(durations, sink.durations) != 0) fail(r, "durations %s, expected %s", sink.durations, durations);
  if (loops[0] && atoi(loops) != info.loop_count) fail(r, "loop_count %d, expected %s", info.loop_count, loops);
  if (o.pixels != NULL) fail(r, "decode_frames left out->pixels set");
}

/* PNG's fast path (png_fast.c) against libpng, for files it takes: the same pixels in
 * every layout, whole and row by row (pxl_png_decode_rows, which thumbnails use). */
static int png_fast_files, png_fast_identical;

typedef struct row_copy { uint8_t *pixels; size_t stride; int32_t rows; } row_copy;
static int copy_row(void *user, int32_t y, const uint8_t *row) {
  row_copy *c = user;
  memcpy(c->pixels + (size_t)y * c->stride, row, c->stride);
  c->rows = y + 1;
  return 0;
}

static void check_png_fast_path(row_result *r, const uint8_t *d, size_t n) {
  int identical = 1;
  for (int32_t layout = 0; layout < 4; layout++) {
    pxl_codec_output fast, ref;
    if (pxl_png_decode_with_options(d, n, layout, 100000000ull, PXL_PNG_FAST_PATH_ONLY, &fast) != PXL_CODEC_OK) {
      if (layout > 0) { fail(r, "png fast path taken for layout 0 but not for layout %d", layout); identical = 0; }
      return; /* not a file for the fast path */
    }
    if (layout == 0) png_fast_files++;
    if (pxl_png_decode_with_options(d, n, layout, 100000000ull, PXL_PNG_LIBPNG_ONLY, &ref) != PXL_CODEC_OK) {
      fail(r, "png fast path decoded layout %d, libpng failed: %s", layout, ref.message);
      identical = 0;
    } else if (fast.width != ref.width || fast.height != ref.height || fast.stride != ref.stride ||
               fast.has_alpha != ref.has_alpha || fast.warnings != ref.warnings ||
               memcmp(fast.pixels, ref.pixels, (size_t)ref.stride * ref.height) != 0) {
      fail(r, "png fast path differs from libpng in layout %d (warnings %d vs %d)", layout, fast.warnings, ref.warnings);
      identical = 0;
    } else {
      row_copy c = {calloc((size_t)ref.stride * ref.height + 1, 1), (size_t)ref.stride, 0};
      pxl_codec_output rows;
      if (c.pixels == NULL || pxl_png_decode_rows(d, n, layout, 100000000ull, copy_row, &c, &rows) != PXL_CODEC_OK ||
          c.rows != ref.height || memcmp(c.pixels, ref.pixels, (size_t)ref.stride * ref.height) != 0) {
        fail(r, "png rows (fast path) differ from libpng in layout %d", layout);
        identical = 0;
      }
      free(c.pixels);
    }
    free(fast.pixels);
    free(ref.pixels);
  }
  png_fast_identical += identical;
}

/* BGRA/RGB must be exact rearrangements of RGBA; GRAY exact where derivable. */
static void check_layouts(row_result *r, fmt_t fmt, const uint8_t *d, size_t n, const pxl_codec_output *rgba) {
  size_t px = (size_t)rgba->width * rgba->height;
  const uint8_t *s = rgba->pixels;
  pxl_codec_output o;
  pxl_codec_status st;

  st = decode(fmt, d, n, PXL_CODEC_BGRA, 1, 100000000ull, &o);
  if (st != PXL_CODEC_OK) fail(r, "BGRA: %s (%s)", status_name(st), o.message);
  else {
    int bad = o.width != rgba->width || o.height != rgba->height || o.channels != 4 || o.stride != rgba->width * 4 ||
              o.has_alpha != rgba->has_alpha;
    for (size_t i = 0; !bad && i < px; i++)
      bad = o.pixels[4 * i] != s[4 * i + 2] || o.pixels[4 * i + 1] != s[4 * i + 1] || o.pixels[4 * i + 2] != s[4 * i] ||
            o.pixels[4 * i + 3] != s[4 * i + 3];
    if (bad) fail(r, "BGRA is not a swizzle of RGBA");
    free(o.pixels);
  }

  st = decode(fmt, d, n, PXL_CODEC_RGB, 1, 100000000ull, &o);
  if (st != PXL_CODEC_OK) fail(r, "RGB: %s (%s)", status_name(st), o.message);
  else {
    int bad = o.width != rgba->width || o.height != rgba->height || o.channels != 3 || o.stride != rgba->width * 3 ||
              o.has_alpha != 0;
    for (size_t i = 0; !bad && i < px; i++)
      bad = o.pixels[3 * i] != s[4 * i] || o.pixels[3 * i + 1] != s[4 * i + 1] || o.pixels[3 * i + 2] != s[4 * i + 2];
    if (bad) fail(r, "RGB is not RGBA without alpha");
    free(o.pixels);
  }

  st = decode(fmt, d, n, PXL_CODEC_GRAY, 1, 100000000ull, &o);
  if (st != PXL_CODEC_OK) fail(r, "GRAY: %s (%s)", status_name(st), o.message);
  else {
    int bad = o.width != rgba->width || o.height != rgba->height || o.channels != 1 || o.stride != rgba->width ||
              o.has_alpha != 0;
    int neutral = 1;
    for (size_t i = 0; neutral && i < px; i++) neutral = s[4 * i] == s[4 * i + 1] && s[4 * i] == s[4 * i + 2];
    if (!bad && (neutral || fmt != FMT_JPEG)) {
      for (size_t i = 0; !bad && i < px; i++) {
        unsigned y = (19595u * s[4 * i] + 38470u * s[4 * i + 1] + 7471u * s[4 * i + 2] + 32768u) >> 16;
        bad = o.pixels[i] != y;
      }
    }
    /* A colour JPEG's GRAY is libjpeg's Y channel, which RGBA cannot reproduce exactly
     * (chroma rounding and clamping); only its shape is checked. */
    if (bad) fail(r, "GRAY inconsistent with RGBA");
    free(o.pixels);
  }

  /* One pixel under the budget: must be refused up front, with no buffer. */
  uint64_t need = (uint64_t)rgba->width * rgba->height;
  st = decode(fmt, d, n, PXL_CODEC_RGBA, 1, need - 1, &o);
  if (st != PXL_CODEC_TOO_MANY_PIXELS) fail(r, "max_pixels=%llu: got %s, expected TOO_MANY_PIXELS", (unsigned long long)(need - 1), status_name(st));
  else check_failure_shape(r, "pixel limit", &o);
  free(o.pixels);
}

/* ---------------------------------------------------------------------------------
 * Manifest
 * ------------------------------------------------------------------------------- */
#define MAX_COLS 64

static int split_tabs(char *line, char **cols) {
  int n = 0;
  cols[n++] = line;
  for (char *p = line; *p; p++) {
    if (*p == '\t') {
      *p = '\0';
      if (n < MAX_COLS) cols[n++] = p + 1;
    }
  }
  return n;
}

static int col_index(char **hdr, int nh, const char *name) {
  for (int i = 0; i < nh; i++)
    if (strcmp(hdr[i], name) == 0) return i;
  return -1;
}

static int verbose;

typedef struct totals {
  int rows, passed, failed;
} totals;

static void run_set(const char *root, const char *set, totals *all) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/manifest.tsv", root, set);
  size_t msize = 0;
  uint8_t *mbuf = read_file(path, &msize);
  if (!mbuf) {
    printf("[%s] cannot read %s\n", set, path);
    all->failed++;
    return;
  }
  char *text = realloc(mbuf, msize + 1);
  if (!text) { free(mbuf); return; }
  text[msize] = '\0';

  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  char *hdr[MAX_COLS];
  int nh = line ? split_tabs(line, hdr) : 0;
  if (nh > 0) { char *cr = strchr(hdr[nh - 1], '\r'); if (cr) *cr = '\0'; }
  int c_file = col_index(hdr, nh, "file"), c_fmt = col_index(hdr, nh, "format"), c_exp = col_index(hdr, nh, "expect"),
      c_w = col_index(hdr, nh, "width"), c_h = col_index(hdr, nh, "height"), c_md5 = col_index(hdr, nh, "rgba8_md5"),
      c_t2 = col_index(hdr, nh, "thumb_1_2"), c_t4 = col_index(hdr, nh, "thumb_1_4"), c_t8 = col_index(hdr, nh, "thumb_1_8"),
      c_exif = col_index(hdr, nh, "exif_orientation"), c_refw = col_index(hdr, nh, "ref_warnings"),
      c_frames = col_index(hdr, nh, "frames"), c_dur = col_index(hdr, nh, "durations_ms"),
      c_loop = col_index(hdr, nh, "loop_count");
  if (c_file < 0 || c_fmt < 0 || c_exp < 0 || c_w < 0 || c_h < 0 || c_md5 < 0) {
    printf("[%s] manifest lacks required columns\n", set);
    all->failed++;
    free(text);
    return;
  }

  int rows = 0, decoded = 0, md5ok = 0, rejected = 0, failures = 0, exif_checked = 0, warn_exact = 0, warn_rows = 0;
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    char *cols[MAX_COLS];
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
    if (ll == 0) continue;
    int nc = split_tabs(line, cols);
    for (int i = nc; i < MAX_COLS; i++) cols[i] = "";
    rows++;
    const char *file = cols[c_file], *fmts = cols[c_fmt], *expect = cols[c_exp];
    fmt_t fmt = strcmp(fmts, "png") == 0 ? FMT_PNG : strcmp(fmts, "jpeg") == 0 ? FMT_JPEG
                : strcmp(fmts, "avif") == 0 ? FMT_AVIF : strcmp(fmts, "gif") == 0 ? FMT_GIF
                : strcmp(fmts, "webp") == 0 ? FMT_WEBP : FMT_UNKNOWN;
    row_result r = {{0}, 0, 0};

    snprintf(path, sizeof path, "%s/%s/%s", root, set, file);
    size_t n = 0;
    uint8_t *d = read_file(path, &n);
    if (!d) {
      fail(&r, "cannot read file: %s", strerror(errno));
    } else if (strncmp(expect, "must_fail", 9) == 0) {
      int pixel_limit = strstr(expect, "pixel limit") != NULL;
      fmt_t tries[2];
      int ntries = 0;
      if (fmt == FMT_UNKNOWN) { tries[ntries++] = FMT_PNG; tries[ntries++] = FMT_JPEG; }
      else tries[ntries++] = fmt;
      int all_failed = 1;
      for (int t = 0; t < ntries; t++) {
        pxl_codec_output o;
        pxl_codec_status st = decode(tries[t], d, n, PXL_CODEC_RGBA, 1, 100000000ull, &o);
        const char *who = tries[t] == FMT_PNG ? "png" : tries[t] == FMT_AVIF ? "avif" : tries[t] == FMT_GIF ? "gif"
                          : tries[t] == FMT_WEBP ? "webp" : "jpeg";
        if (st == PXL_CODEC_OK) {
          fail(&r, "%s decode succeeded (%dx%d, %d warnings), expected failure", who, o.width, o.height, o.warnings);
          all_failed = 0;
          free(o.pixels);
          continue;
        }
        check_failure_shape(&r, who, &o);
        if (verbose) printf("  rejected %s/%s by %s: %s (%s), %d warnings\n", set, file, who, status_name(st), o.message, o.warnings);
        if (pixel_limit && st != PXL_CODEC_TOO_MANY_PIXELS)
          fail(&r, "%s: got %s (%s), expected TOO_MANY_PIXELS", who, status_name(st), o.message);
      }
      if (all_failed && !r.failed) rejected++;
    } else if (strcmp(expect, "ok") == 0 || strcmp(expect, "ok_with_warning") == 0) {
      pxl_codec_output o;
      pxl_codec_status st = fmt == FMT_UNKNOWN ? PXL_CODEC_UNSUPPORTED : decode(fmt, d, n, PXL_CODEC_RGBA, 1, 100000000ull, &o);
      if (fmt == FMT_UNKNOWN) {
        fail(&r, "manifest says ok but format is unknown");
      } else if (st != PXL_CODEC_OK) {
        fail(&r, "decode failed: %s (%s)", status_name(st), o.message);
      } else {
        decoded++;
        int ew = atoi(cols[c_w]), eh = atoi(cols[c_h]);
        char md5[33];
        md5_of(o.pixels, (size_t)o.stride * o.height, md5);
        if (o.width != ew || o.height != eh) fail(&r, "size %dx%d, expected %dx%d", o.width, o.height, ew, eh);
        else if (o.channels != 4 || o.stride != o.width * 4) fail(&r, "RGBA shape: channels %d stride %d", o.channels, o.stride);
        else if (strcmp(md5, cols[c_md5]) != 0) fail(&r, "md5 %s, expected %s", md5, cols[c_md5]);
        else md5ok++;
        if (verbose && o.warnings) printf("  warned %s/%s: %d warnings, last: %s\n", set, file, o.warnings, o.message);
        int want_warn = strcmp(expect, "ok_with_warning") == 0;
        if (want_warn && o.warnings == 0) fail(&r, "expected a warning, got none");
        if (!want_warn && o.warnings != 0) fail(&r, "expected no warning, got %d (%s)", o.warnings, o.message);
        if (c_refw >= 0 && cols[c_refw][0]) {
          warn_rows++;
          /* Informational: the shim skips PNG text chunks (see png_shim.c), so their
           * warnings ("zTXt: bad keyword") are not seen; the count may be lower. */
          if (o.warnings == atoi(cols[c_refw])) warn_exact++;
          else printf("  note: %s/%s: %d warnings, reference counted %s (last: %s)\n", set, file, o.warnings, cols[c_refw], o.message);
        }
        if (fmt == FMT_JPEG) {
          int cols_t[3] = {c_t2, c_t4, c_t8}, den[3] = {2, 4, 8};
          for (int k = 0; k < 3; k++) {
            if (cols_t[k] < 0 || cols[cols_t[k]][0] == '\0') fail(&r, "manifest has no thumb_1_%d", den[k]);
            else check_thumb(&r, fmt, d, n, den[k], cols[cols_t[k]]);
          }
          check_first_scan(&r, d, n);
        }
        pxl_codec_info info;
        char msg[256];
        pxl_codec_status ist = read_info(fmt, d, n, &info, msg, sizeof msg);
        if (ist != PXL_CODEC_OK) fail(&r, "read_info failed: %s (%s)", status_name(ist), msg);
        else if (info.width != ew || info.height != eh) fail(&r, "read_info size %dx%d", info.width, info.height);
        else if ((fmt == FMT_PNG || fmt == FMT_AVIF || fmt == FMT_WEBP) && info.has_alpha != o.has_alpha)
          fail(&r, "read_info has_alpha %d, decode %d", info.has_alpha, o.has_alpha);
        check_layouts(&r, fmt, d, n, &o);
        if (c_frames >= 0 && cols[c_frames][0])
          check_frames(&r, fmt, d, n, cols[c_frames], c_dur >= 0 ? cols[c_dur] : "", c_loop >= 0 ? cols[c_loop] : "");
        if (fmt == FMT_PNG) check_png_fast_path(&r, d, n);
        free(o.pixels);
      }
    } else {
      fail(&r, "unknown expect value '%s'", expect);
    }

    /* EXIF orientation, for every row that documents one. */
    if (d && c_exif >= 0) {
      const char *e = cols[c_exif];
      while (*e == ' ') e++;
      if ((*e >= '0' && *e <= '9') || *e == '-') {
        long v = strtol(e, NULL, 10);
        int want = (v >= 1 && v <= 8) ? (int)v : 1;
        pxl_codec_info info;
        char msg[256];
        /* The magic decides the parser; "unknown" rows have no EXIF to compare. */
        if (fmt != FMT_UNKNOWN) {
          (void)read_info(fmt, d, n, &info, msg, sizeof msg); /* failure reports orientation 1 */
          exif_checked++;
          if (info.orientation != want) fail(&r, "orientation %d, expected %d (column '%s')", info.orientation, want, cols[c_exif]);
        }
      }
    }
    free(d);

    if (r.failed) {
      failures++;
      all->failed++;
      printf("  FAIL %s/%s [%s]: %s\n", set, file, expect, r.reasons);
    } else {
      all->passed++;
    }
    all->rows++;
  }
  printf("[%s] %d rows: %d decoded, %d md5 matched, %d rejected as expected, %d EXIF checked, %d failures\n", set, rows,
         decoded, md5ok, rejected, exif_checked, failures);
  if (warn_rows) printf("[%s] warning counts equal to the reference's in %d/%d decoded rows\n", set, warn_exact, warn_rows);
  free(text);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "name N ok" (", N failed" when some did) for the summary line. */
static void summarise(char *sum, size_t cap, const char *name, const totals *before, const totals *after) {
  size_t len = strlen(sum);
  int ok = after->passed - before->passed, bad = after->failed - before->failed;
  if (bad) snprintf(sum + len, cap - len, "%s%s %d ok, %d failed", len ? ", " : "", name, ok, bad);
  else snprintf(sum + len, cap - len, "%s%s %d ok", len ? ", " : "", name, ok);
}

/* Runs every subdirectory of root holding a manifest.tsv whose name starts with prefix
 * ("" for all), in name order; appends "name N ok" per set to sum. Returns the set count. */
static int run_sets(const char *root, const char *prefix, totals *t, char *sum, size_t cap) {
  DIR *dir = opendir(root);
  char *sets[256];
  int ns = 0;
  struct dirent *de;
  struct stat st;
  while (dir && (de = readdir(dir)) != NULL && ns < 256) {
    char p[4096];
    if (de->d_name[0] == '.' || strncmp(de->d_name, prefix, strlen(prefix)) != 0) continue;
    snprintf(p, sizeof p, "%s/%s/manifest.tsv", root, de->d_name);
    if (stat(p, &st) == 0) sets[ns++] = strdup(de->d_name);
  }
  if (dir) closedir(dir);
  qsort(sets, (size_t)ns, sizeof *sets, cmp_str);
  for (int i = 0; i < ns; i++) {
    totals before = *t;
    run_set(root, sets[i], t);
    summarise(sum, cap, sets[i], &before, t);
    free(sets[i]);
  }
  return ns;
}

int main(int argc, char **argv) {
  const char *args[256];
  const char *generated = NULL, *fixtures = NULL;
  int nargs = 0;
  for (int i = 1; i < argc && nargs < 256; i++) {
    if (strcmp(argv[i], "-v") == 0) verbose = 1;
    else if (strcmp(argv[i], "-g") == 0 && i + 1 < argc) generated = argv[++i];
    else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) fixtures = argv[++i];
    else args[nargs++] = argv[i];
  }
  totals t = {0, 0, 0}, before;
  char gen_sum[1024] = "", fix_sum[1024] = "", corpus_sum[2048] = "";

  /* Generated sets: generated_root/generated* (one per generator script). Named but
   * missing is a failure: the generators should have made them. */
  if (generated) {
    if (run_sets(generated, "generated", &t, gen_sum, sizeof gen_sum) == 0) {
      printf("FAIL: no generated set under %s\n", generated);
      t.failed++;
    }
  } else {
    snprintf(gen_sum, sizeof gen_sum, "generated: skipped (no -g; make test-codecs generates it)");
  }
  /* Sets kept in the repository (Tests/fixtures: selections of public conformance suites). */
  if (fixtures && run_sets(fixtures, "", &t, fix_sum, sizeof fix_sum) == 0)
    snprintf(fix_sum, sizeof fix_sum, "fixtures: none in %s", fixtures);

  const char *root = nargs > 0 ? args[0] : "../shared/corpus";
  struct stat st;
  if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
    printf("SKIP: corpus not found at %s (pass the corpus root as the first argument)\n", root);
    snprintf(corpus_sum, sizeof corpus_sum, "corpus: skipped (%s absent)", root);
  } else if (nargs > 1) {
    for (int i = 1; i < nargs; i++) {
      before = t;
      run_set(root, args[i], &t);
      summarise(corpus_sum, sizeof corpus_sum, args[i], &before, &t);
    }
  } else if (run_sets(root, "", &t, corpus_sum, sizeof corpus_sum) == 0) {
    snprintf(corpus_sum, sizeof corpus_sum, "corpus: skipped (no set in %s)", root);
  }
  printf("first-scan thumbnails: %d progressive JPEGs decoded at 1/8 from their DC scans alone (%d of them as a "
         "baseline JPEG of their DC coefficients), %d identical to the full decode in every layout\n",
         first_scan_files, first_scan_transcoded, first_scan_identical);
  printf("early end: %d of them decode to the same 1/8 thumbnail from a prefix (%.0f%% of their bytes not needed)\n",
         early_end_files, early_end_total ? 100.0 * early_end_saved / early_end_total : 0.0);
  printf("png fast path: %d PNGs decoded by libdeflate + SSE2 filters, %d identical to libpng in every layout\n",
         png_fast_files, png_fast_identical);
  if (generated && png_fast_files == 0) {
    printf("FAIL: no generated PNG took the fast path\n");
    t.failed++;
  }
  printf("first-scan 4:2:0: %d of %d transcoded with the chroma's AC coefficients\n", first_scan_420_transcoded,
         first_scan_420);
  if (generated && (first_scan_420 == 0 || first_scan_420_transcoded != first_scan_420)) {
    printf("FAIL: a generated 4:2:0 progressive JPEG did not take the baseline transcode\n");
    t.failed++;
  }
  if (generated && first_scan_files == 0) {
    /* The generated set has progressive JPEGs: none taking the DC path means it broke. */
    printf("FAIL: no generated progressive JPEG took the first-scan path\n");
    t.failed++;
  }
  printf("conformance: %s%s%s; %s%s\n", gen_sum, fix_sum[0] ? "; " : "", fix_sum,
         strncmp(corpus_sum, "corpus:", 7) == 0 ? "" : "corpus ", corpus_sum);
  printf("%d passed, %d failed\n", t.passed, t.failed);
  return t.failed == 0 ? 0 : 1;
}
