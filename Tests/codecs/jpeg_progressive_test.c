/* Tests/codecs/jpeg_progressive_test.c: jpeg_progressive.c, the progressive Huffman
 * decoder put in place of libjpeg's, against libjpeg's own (pxl_jpeg_progressive_mode(0)):
 * the same status, pixels, size, warnings, incomplete flag and message, to the bit.
 *
 * - Progressive JPEGs made here with libjpeg's encoder: random sizes (1x1 to 300x300 and
 *   a few larger), grayscale, YCbCr at 4:4:4, 4:2:2, 4:2:0, 4:1:1 and odd sampling, CMYK
 *   and YCCK, qualities 20-100, jpeg_simple_progression and random scripts (spectral bands,
 *   successive approximation up to Al 3, DC interleaved or not, scans of components and
 *   bands interleaved), restart intervals, optimized Huffman tables.
 * - Every JPEG under the directories given (the shared corpus when present).
 * Each whole and at every scale (1/8 through the full decode), and damaged: truncated
 * at random points, bytes of its scans overwritten, restart and other markers dropped in.
 * Some also fed through the streaming decoder in random chunks (suspensions at every
 * point of an MCU, which the refinement scans must back out of) against libjpeg's whole
 * decode.
 *
 * Built with PXL_JPEG_PROGRESSIVE_CHECK: at every refinement MCU the decoder's kept
 * nonzero mask is checked against the block's coefficients (abort on a difference), and
 * the count of decodes it ran is checked to be most of the progressive ones. */
#define _DEFAULT_SOURCE
#include "check.h"
#include "files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jpeglib.h>

#include "pxl_codecs.h"
#include "pxl_jpeg_progressive.h"
#include "rng.h"

extern long pxl_jpeg_progressive_installs; /* jpeg_progressive.c, PXL_JPEG_PROGRESSIVE_CHECK builds */

typedef struct result {
  pxl_codec_status status;
  pxl_codec_output out;
} result;

static result decode(const uint8_t *data, size_t size, int layout, int scale, int mode) {
  result r;
  pxl_jpeg_progressive_mode(mode);
  r.status = pxl_jpeg_decode_with_options(data, size, layout, scale, 1ull << 28, PXL_JPEG_ALL_SCANS, &r.out);
  pxl_jpeg_progressive_mode(1);
  return r;
}

static int same(const result *a, const result *b) {
  if (a->status != b->status || a->out.warnings != b->out.warnings || a->out.incomplete != b->out.incomplete) return 0;
  if (strcmp(a->out.message, b->out.message) != 0) return 0;
  if (a->status != PXL_CODEC_OK) return 1;
  if (a->out.width != b->out.width || a->out.height != b->out.height || a->out.stride != b->out.stride) return 0;
  return memcmp(a->out.pixels, b->out.pixels, (size_t)a->out.stride * (size_t)a->out.height) == 0;
}

static long compared, differed;

/* VERBOSE=1: each decode named before it runs (a crash or an abort then says where). */
static void trace(const char *kind, const char *what, int scale) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("VERBOSE") != NULL;
  if (!verbose) return;
  printf("%s %s 1/%d\n", kind, what, scale);
  fflush(stdout);
}

/* One input, one scale and layout: the decoders agree (ours with the CPU's BMI2 and
 * POPCNT, where it has them, and without). */
static void compare(const char *what, const uint8_t *data, size_t size, int layout, int scale) {
  trace("compare", what, scale);
  result theirs = decode(data, size, layout, scale, 0);
  for (int mode = 1; mode <= 2; mode++) {
    result ours = decode(data, size, layout, scale, mode);
    compared++;
    if (!same(&theirs, &ours)) {
      differed++;
      CHECK(0, "%s (%zu bytes, layout %d, 1/%d, mode %d): libjpeg %d %dx%d w%d \"%s\", ours %d %dx%d w%d \"%s\"",
            what, size, layout, scale, mode, theirs.status, theirs.out.width, theirs.out.height, theirs.out.warnings,
            theirs.out.message, ours.status, ours.out.width, ours.out.height, ours.out.warnings, ours.out.message);
    }
    free(ours.out.pixels);
  }
  free(theirs.out.pixels);
}

/* A streaming decode's rows, kept as a bitmap. */
typedef struct rows_buf {
  uint8_t *pixels;
  size_t stride, cap_rows;
} rows_buf;

static int keep_row(void *user, int32_t y, const uint8_t *row) {
  rows_buf *b = user;
  if (y < 0 || (size_t)y >= b->cap_rows) return 1;
  memcpy(b->pixels + (size_t)y * b->stride, row, b->stride);
  return 0;
}

typedef struct streamed {
  pxl_codec_status status;
  int state;
  pxl_codec_output out;
  rows_buf rows;
} streamed;

/* The streaming decoder in random chunks (suspensions anywhere in an MCU), ours against
 * libjpeg's fed the same chunks: libjpeg warns again for what it decodes again after a
 * suspension, so the whole decode is not the reference for damaged data. */
static void compare_streamed(const char *what, const uint8_t *data, size_t size, int layout, int scale) {
  trace("streamed", what, scale);
  size_t *chunks = malloc((size + 1) * sizeof *chunks);
  for (size_t i = 0; i <= size; i++) chunks[i] = (size_t)rand_in(1, 1 + (int)(next() % 3 == 0 ? 4000 : 64));
  /* The row buffer's size from libjpeg's whole decode. */
  result whole = decode(data, size, layout, scale, 0);
  size_t stride = whole.status == PXL_CODEC_OK ? (size_t)whole.out.stride : 0;
  size_t rows = whole.status == PXL_CODEC_OK ? (size_t)whole.out.height : 0;
  free(whole.out.pixels);
  streamed theirs, ours;
  for (int mode = 0; mode <= 2; mode++) {
    streamed *r = mode == 0 ? &theirs : &ours;
    memset(r, 0, sizeof *r);
    r->rows.stride = stride;
    r->rows.cap_rows = rows;
    r->rows.pixels = calloc(rows ? rows : 1, stride ? stride : 1);
    pxl_jpeg_progressive_mode(mode);
    pxl_jpeg_stream *s = pxl_jpeg_stream_new(layout, scale, 1ull << 28, keep_row, NULL, &r->rows, 0, 0, 0, 0, NULL);
    r->state = PXL_STREAM_MORE;
    size_t at = 0;
    for (int i = 0; r->status == PXL_CODEC_OK && r->state == PXL_STREAM_MORE; i++) {
      size_t n = chunks[i] < size - at ? chunks[i] : size - at;
      r->status = pxl_jpeg_stream_feed(s, data + at, n, at + n == size, &r->state, &r->out);
      at += n;
    }
    pxl_jpeg_stream_free(s);
    pxl_jpeg_progressive_mode(1);
    if (mode == 0) continue;
    compared++;
    int ok = ours.status == theirs.status && ours.state == theirs.state && ours.out.width == theirs.out.width &&
             ours.out.height == theirs.out.height && ours.out.warnings == theirs.out.warnings &&
             ours.out.incomplete == theirs.out.incomplete && strcmp(ours.out.message, theirs.out.message) == 0 &&
             memcmp(ours.rows.pixels, theirs.rows.pixels, stride * rows) == 0;
    if (!ok) differed++;
    CHECK(ok, "%s streamed (%zu bytes, layout %d, 1/%d, mode %d): libjpeg %d %dx%d w%d \"%s\", ours %d %dx%d w%d \"%s\"",
          what, size, layout, scale, mode, theirs.status, theirs.out.width, theirs.out.height, theirs.out.warnings,
          theirs.out.message, ours.status, ours.out.width, ours.out.height, ours.out.warnings, ours.out.message);
    free(ours.out.pixels);
    free(ours.rows.pixels);
  }
  free(theirs.out.pixels);
  free(theirs.rows.pixels);
  free(chunks);
}

/* ---- progressive JPEGs made here -------------------------------------------------- */

/* A random script libjpeg's encoder accepts: the DC first scans, then the DC refinements
 * and each component's AC bands (a first scan, then refinements to Al 0) interleaved in a
 * random order, each sequence in its own. */
typedef struct seq {
  jpeg_scan_info scans[8];
  int n, at;
} seq;

static int random_script(int comps, jpeg_scan_info *out) {
  int n = 0;
  int dc_al = rand_in(0, 2), dc_together = comps <= 4 && rand_in(0, 1);
  seq seqs[64];
  int nseq = 0;
  for (int c = 0; c < (dc_together ? 1 : comps); c++) {
    jpeg_scan_info *s = &out[n++];
    memset(s, 0, sizeof *s);
    s->comps_in_scan = dc_together ? comps : 1;
    for (int i = 0; i < s->comps_in_scan; i++) s->component_index[i] = dc_together ? i : c;
    s->Al = dc_al;
    if (dc_al > 0) {
      seq *q = &seqs[nseq++];
      q->n = q->at = 0;
      for (int al = dc_al; al > 0; al--) {
        jpeg_scan_info *r = &q->scans[q->n++];
        *r = *s;
        r->Ah = al;
        r->Al = al - 1;
      }
    }
  }
  for (int c = 0; c < comps; c++) {
    int bands = rand_in(1, 4), start = 1;
    for (int b = 0; b < bands && start <= 63; b++) {
      int end = b == bands - 1 ? 63 : rand_in(start, 63);
      int al = rand_in(0, 3);
      seq *q = &seqs[nseq++];
      q->n = q->at = 0;
      for (int level = al; level >= 0; level--) {
        jpeg_scan_info *r = &q->scans[q->n++];
        memset(r, 0, sizeof *r);
        r->comps_in_scan = 1;
        r->component_index[0] = c;
        r->Ss = start;
        r->Se = end;
        r->Ah = level == al ? 0 : level + 1;
        r->Al = level;
      }
      start = end + 1;
    }
  }
  for (;;) {
    int left = 0;
    for (int i = 0; i < nseq; i++) left += seqs[i].n - seqs[i].at;
    if (left == 0) break;
    int pick = rand_in(0, left - 1);
    for (int i = 0; i < nseq; i++) {
      int here = seqs[i].n - seqs[i].at;
      if (pick < here) {
        out[n++] = seqs[i].scans[seqs[i].at++];
        break;
      }
      pick -= here;
    }
  }
  return n;
}

typedef struct made {
  unsigned char *data;
  unsigned long size;
  char what[160];
} made;

static made make_jpeg(int index) {
  made m = {0};
  int w = rand_in(1, 300), h = rand_in(1, 300);
  if (index % 25 == 0) {
    w = rand_in(600, 1400);
    h = rand_in(400, 1000);
  }
  int kind = rand_in(0, 9); /* 0 gray, 1 CMYK, 2 YCCK, else YCbCr */
  int comps = kind == 0 ? 1 : kind <= 2 ? 4 : 3;
  /* Content: a smooth field, edges and noise, so every band has coefficients. */
  uint8_t *px = malloc((size_t)w * h * comps);
  int noise = rand_in(0, 60), fx = rand_in(1, 40), fy = rand_in(1, 40);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < comps; c++) {
        int v = (x * 255 / (w + 1) + y * (c + 1) * 97 / (h + 1) + ((x / fx + y / fy) % 2) * 60) & 255;
        v += noise ? (int)(next() % (uint64_t)(2 * noise + 1)) - noise : 0;
        px[((size_t)y * w + x) * comps + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &m.data, &m.size);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = comps;
  c.in_color_space = kind == 0 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  if (kind == 2) jpeg_set_colorspace(&c, JCS_YCCK);
  static const int sampling[][2] = {{1, 1}, {2, 1}, {2, 2}, {4, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}};
  int samp = rand_in(0, 7);
  if (kind != 0) {
    c.comp_info[0].h_samp_factor = sampling[samp][0];
    c.comp_info[0].v_samp_factor = sampling[samp][1];
    for (int i = 1; i < comps; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    if (comps == 4 && rand_in(0, 1)) { /* a fourth component sampled like the first */
      c.comp_info[3].h_samp_factor = sampling[samp][0];
      c.comp_info[3].v_samp_factor = sampling[samp][1];
    }
  }
  int quality = rand_in(20, 100);
  jpeg_set_quality(&c, quality, TRUE);
  c.optimize_coding = rand_in(0, 1);
  c.restart_interval = rand_in(0, 3) == 0 ? (unsigned)rand_in(1, 40) : 0;
  static jpeg_scan_info script[400];
  int simple = rand_in(0, 2) == 0;
  if (simple) {
    jpeg_simple_progression(&c);
  } else {
    c.num_scans = random_script(comps, script);
    c.scan_info = script;
  }
  snprintf(m.what, sizeof m.what, "made #%d %dx%d %s samp %dx%d q%d %s%s restart %u", index, w, h,
           kind == 0 ? "gray" : kind == 1 ? "CMYK" : kind == 2 ? "YCCK" : "YCbCr", sampling[samp][0],
           sampling[samp][1], quality, simple ? "simple" : "random script", c.optimize_coding ? " optimized" : "",
           c.restart_interval);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = px + (size_t)c.next_scanline * w * comps;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(px);
  return m;
}

/* Damage: a copy truncated, with bytes overwritten, or with a marker dropped in. */
static uint8_t *damaged(const uint8_t *data, size_t size, size_t *out_size, char *how, size_t how_cap) {
  uint8_t *d = malloc(size + 2);
  memcpy(d, data, size);
  *out_size = size;
  size_t start = size / 8; /* mostly past the header */
  switch (rand_in(0, 3)) {
    case 0:
      *out_size = (size_t)rand_in((int)start, (int)size - 1);
      snprintf(how, how_cap, "truncated at %zu", *out_size);
      break;
    case 1: {
      int n = rand_in(1, 6);
      for (int i = 0; i < n; i++) d[rand_in((int)start, (int)size - 3)] = (uint8_t)next();
      snprintf(how, how_cap, "%d bytes overwritten", n);
      break;
    }
    case 2: {
      size_t at = (size_t)rand_in((int)start, (int)size - 3);
      memmove(d + at + 2, d + at, size - at);
      d[at] = 0xFF;
      d[at + 1] = (uint8_t)(rand_in(0, 1) ? 0xD0 + rand_in(0, 7) : rand_in(0xC0, 0xFE));
      *out_size = size + 2;
      snprintf(how, how_cap, "marker %02X at %zu", d[at + 1], at);
      break;
    }
    default: {
      size_t at = (size_t)rand_in((int)start, (int)size - 3);
      d[at] = 0xFF;
      d[at + 1] = 0x00;
      snprintf(how, how_cap, "FF00 at %zu", at);
      break;
    }
  }
  return d;
}

static int is_progressive(const uint8_t *d, size_t n) {
  for (size_t i = 2; i + 1 < n; i++)
    if (d[i] == 0xFF && (d[i + 1] == 0xC2 || d[i + 1] == 0xC6 || d[i + 1] == 0xCA)) return 1;
  return 0;
}

static long progressive_inputs;

static void check_file(const char *what, const uint8_t *data, size_t size, int damage_rounds, int streamed) {
  int prog = is_progressive(data, size);
  progressive_inputs += prog ? 8 : 0;
  for (int scale = 1; scale <= 8; scale *= 2) compare(what, data, size, rand_in(0, 3), scale);
  if (!prog) return;
  if (streamed) compare_streamed(what, data, size, rand_in(0, 3), 1 << rand_in(0, 2));
  for (int i = 0; i < damage_rounds && size > 16; i++) {
    char how[64], label[256];
    size_t n;
    uint8_t *d = damaged(data, size, &n, how, sizeof how);
    snprintf(label, sizeof label, "%s, %s", what, how);
    compare(label, d, n, rand_in(0, 3), 1 << rand_in(0, 3));
    progressive_inputs += 2;
    if (i % 4 == 0) compare_streamed(label, d, n, rand_in(0, 3), 1 << rand_in(0, 2));
    free(d);
  }
}

static int corpus_files;

/* A corpus file named .jpg or .jpeg (walk_files over each directory given). */
static void check_corpus_file(const char *path, const uint8_t *data, size_t size) {
  size_t len = strlen(path);
  if (len < 5 || (strcasecmp(path + len - 4, ".jpg") != 0 && strcasecmp(path + len - 5, ".jpeg") != 0)) return;
  check_file(path, data, size, 6, 1);
  corpus_files++;
}

int main(int argc, char **argv) {
  int made_count = argc > 1 && strcmp(argv[1], "--made") == 0 ? atoi(argv[2]) : 400;
  int first_dir = argc > 1 && strcmp(argv[1], "--made") == 0 ? 3 : 1;
  for (int i = 0; i < made_count; i++) {
    made m = make_jpeg(i);
    trace("made", m.what, 0);
    check_file(m.what, m.data, m.size, 12, i % 3 == 0);
    free(m.data);
  }
  printf("made: %d progressive JPEGs, %ld comparisons so far, %ld differed\n", made_count, compared, differed);
  for (int i = first_dir; i < argc; i++) {
    corpus_files = 0;
    walk_files(argv[i], 0, 64 << 20, check_corpus_file);
    if (corpus_files == 0) printf("no JPEG under %s: skipped\n", argv[i]);
    else printf("%s: %d JPEGs\n", argv[i], corpus_files);
  }
  /* Not vacuous: the new decoder ran on most progressive decodes (not on those libjpeg
   * refuses before its first scan, or that take the DC shortcut). */
  printf("%ld comparisons, %ld differed; the new decoder installed %ld times for %ld progressive inputs\n", compared,
         differed, pxl_jpeg_progressive_installs, progressive_inputs);
  CHECK(pxl_jpeg_progressive_installs * 2 > progressive_inputs, "the new decoder ran %ld times for %ld inputs",
        pxl_jpeg_progressive_installs, progressive_inputs);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
