/*
 * Colour management (color.c) and the JPEG/PNG colour readers, against the fixtures
 * scripts/gen-color-fixtures.py makes at test time (expected pixels from Pillow's ImageCms,
 * relative colorimetric to sRGB), and PngSuite's gAMA/cHRM files where ../shared/corpus is
 * present (the manifest lists them by path; absent, they are skipped, saying so).
 */
// python3 scripts/gen-color-fixtures.py /tmp/colorfix
// gcc -O2 -pthread -I Sources/CCodecs/include Tests/codecs/color_test.c Sources/CCodecs/*.c
//     -ljpeg -lpng -lwebp -lwebpdemux -lgif -lavif -llcms2 -o /tmp/color_test; /tmp/color_test /tmp/colorfix
/*
 * Tolerance: 2 levels per channel against ImageCms. Both sides run lcms2's optimised 8-bit
 * matrix-shaper path, but Pillow bundles lcms2 2.19 and Debian ships 2.14, whose fixed-point
 * rounding of the same transform differs by a level here and there; 2 leaves room for
 * that and for a libjpeg build difference of 1 in the decoded JPEG pixels, and still
 * fails for any real mistake (a wrong intent, a missed TRC, swapped channels: tens of
 * levels on the saturated patches). The maximum difference seen is printed.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lcms2.h>

#include "pxl_codecs.h"

#define TOLERANCE 2

#include "check.h"

/* name in dir, or name itself when it is absolute (the manifest's PngSuite rows). */
static uint8_t *read_file(const char *dir, const char *name, size_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s%s%s", name[0] == '/' ? "" : dir, name[0] == '/' ? "" : "/", name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc(n > 0 ? (size_t)n : 1);
  if (d && fread(d, 1, (size_t)n, f) != (size_t)n) { free(d); d = NULL; }
  fclose(f);
  *size = (size_t)n;
  return d;
}

static int is_png(const uint8_t *d, size_t n) { return n >= 8 && d[0] == 0x89 && d[1] == 'P'; }

static pxl_codec_status decode(const uint8_t *d, size_t n, int32_t layout, pxl_codec_output *out) {
  return is_png(d, n) ? pxl_png_decode(d, n, layout, 100000000, out) : pxl_jpeg_decode(d, n, layout, 1, 100000000, out);
}

static pxl_codec_status color_of(const uint8_t *d, size_t n, pxl_codec_color *c) {
  return is_png(d, n) ? pxl_png_color(d, n, c) : pxl_jpeg_color(d, n, c);
}

static int max_diff(const uint8_t *a, const uint8_t *b, size_t n) {
  int m = 0;
  for (size_t i = 0; i < n; i++) {
    int d = abs((int)a[i] - (int)b[i]);
    if (d > m) m = d;
  }
  return m;
}

static uint8_t premul(unsigned c, unsigned a) { return (uint8_t)((c * a + 127) / 255); }

/* Every layout of one converted file agrees with the RGBA conversion. */
static void check_layouts(const char *name, const uint8_t *data, size_t size, pxl_color_transform *t,
                          const uint8_t *rgba, int w, int h) {
  char msg[256];
  size_t n = (size_t)w * h;
  pxl_codec_output o;
  /* BGRA: the same conversion, swizzled. */
  CHECK(decode(data, size, PXL_CODEC_BGRA, &o) == PXL_CODEC_OK, "%s: BGRA decode", name);
  CHECK(pxl_color_transform_apply(t, o.pixels, w, h, o.stride, PXL_CODEC_BGRA, 0, msg, sizeof msg), "%s: %s", name, msg);
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += o.pixels[4 * i] != rgba[4 * i + 2] || o.pixels[4 * i + 1] != rgba[4 * i + 1] ||
           o.pixels[4 * i + 2] != rgba[4 * i] || o.pixels[4 * i + 3] != rgba[4 * i + 3];
  CHECK(bad == 0, "%s: BGRA differs from RGBA in %d pixels", name, bad);
  free(o.pixels);
  /* RGB. */
  CHECK(decode(data, size, PXL_CODEC_RGB, &o) == PXL_CODEC_OK, "%s: RGB decode", name);
  CHECK(pxl_color_transform_apply(t, o.pixels, w, h, o.stride, PXL_CODEC_RGB, 0, msg, sizeof msg), "%s: %s", name, msg);
  bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += memcmp(o.pixels + 3 * i, rgba + 4 * i, 3) != 0;
  CHECK(bad == 0, "%s: RGB differs from RGBA in %d pixels", name, bad);
  free(o.pixels);
  /* GRAY: an RGB profile goes through RGB, then luma; a gray one converts gray itself. */
  uint8_t *gray = malloc(n);
  if (pxl_color_transform_is_gray(t)) {
    CHECK(decode(data, size, PXL_CODEC_GRAY, &o) == PXL_CODEC_OK, "%s: GRAY decode", name);
    CHECK(pxl_color_transform_apply(t, o.pixels, w, h, o.stride, PXL_CODEC_GRAY, 0, msg, sizeof msg), "%s: %s", name, msg);
    memcpy(gray, o.pixels, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += gray[i] != rgba[4 * i];
    CHECK(bad == 0, "%s: gray profile on GRAY differs from RGBA's R in %d pixels", name, bad);
  } else {
    CHECK(decode(data, size, PXL_CODEC_RGB, &o) == PXL_CODEC_OK, "%s: RGB decode", name);
    CHECK(pxl_color_transform_apply_gray(t, o.pixels, w, h, gray, msg, sizeof msg), "%s: %s", name, msg);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      const uint8_t *p = rgba + 4 * i;
      bad += gray[i] != (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16);
    }
    CHECK(bad == 0, "%s: GRAY is not the luma of the converted RGB in %d pixels", name, bad);
  }
  free(gray);
  free(o.pixels);
  /* Premultiplied RGBA: divided by alpha, converted, multiplied again. Checked against
   * that done by hand with the straight conversion: the rounding of 8-bit premultiplied
   * values is amplified where a converted channel nears 0 (P3 green turns sRGB red
   * negative, clipped), so the result of converting the straight pixels is no reference
   * for translucent ones; opaque pixels must equal it. */
  CHECK(decode(data, size, PXL_CODEC_RGBA, &o) == PXL_CODEC_OK, "%s: RGBA decode", name);
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) o.pixels[4 * i + c] = premul(o.pixels[4 * i + c], o.pixels[4 * i + 3]);
  uint8_t *by_hand = malloc(n * 4);
  for (size_t i = 0; i < n * 4; i++) {
    unsigned a = o.pixels[i | 3], v = o.pixels[i];
    by_hand[i] = (i & 3) == 3 || a == 0 || a == 255 ? (uint8_t)v : (uint8_t)(v >= a ? 255 : (v * 255 + a / 2) / a);
  }
  CHECK(pxl_color_transform_apply(t, by_hand, w, h, w * 4, PXL_CODEC_RGBA, 0, msg, sizeof msg), "%s: %s", name, msg);
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) by_hand[4 * i + c] = premul(by_hand[4 * i + c], by_hand[4 * i + 3]);
  CHECK(pxl_color_transform_apply(t, o.pixels, w, h, o.stride, PXL_CODEC_RGBA, 1, msg, sizeof msg), "%s: %s", name, msg);
  CHECK(memcmp(o.pixels, by_hand, n * 4) == 0, "%s: premultiplied conversion is not unpremultiply-convert-premultiply",
        name);
  int opaque = 0;
  for (size_t i = 0; i < n; i++) opaque += rgba[4 * i + 3] == 255 && memcmp(o.pixels + 4 * i, rgba + 4 * i, 4) != 0;
  CHECK(opaque == 0, "%s: %d opaque pixels differ between premultiplied and straight", name, opaque);
  free(by_hand);
  free(o.pixels);
}

/* The manifest's rows: its own files by name, PngSuite's gAMA/cHRM files (when the
 * corpus is present) by path. PngSuite's rows print a line each where they have cHRM, and
 * one summary line for the gAMA-alone ones. For a PNG that converts, the decode itself
 * (what colour management off gives) must be exactly the decoded values Pillow gives,
 * gAMA and cHRM not applied. */
typedef struct suite_summary {
  int converted, same, worst;
  int worst_to_decoded; /* how far the conversion moved the decoded values, at most */
  char worst_name[64];
} suite_summary;

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static void test_manifest(const char *dir) {
  size_t msize;
  char *manifest = (char *)read_file(dir, "manifest.tsv", &msize);
  if (manifest == NULL) {
    CHECK(0, "no %s/manifest.tsv (run scripts/gen-color-fixtures.py)", dir);
    return;
  }
  manifest = realloc(manifest, msize + 1);
  manifest[msize] = '\0';
  int rows = 0;
  suite_summary suite = {0};
  for (char *line = strtok(manifest, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    char name[512], expect[32], source[32], expected[256], note[128] = "";
    if (sscanf(line, "%511[^\t]\t%31[^\t]\t%31[^\t]\t%255[^\t]\t%127[^\n]", name, expect, source, expected, note) < 4)
      continue;
    rows++;
    int in_suite = name[0] == '/';
    suite.same += in_suite && strcmp(expect, "same") == 0;
    size_t size;
    uint8_t *data = read_file(dir, name, &size);
    CHECK(data != NULL, "%s: missing", name);
    if (data == NULL) continue;
    pxl_codec_output o;
    CHECK(decode(data, size, PXL_CODEC_RGBA, &o) == PXL_CODEC_OK, "%s: decode: %s", name, o.message);
    pxl_codec_color c;
    CHECK(color_of(data, size, &c) == PXL_CODEC_OK, "%s: colour", name);
    char msg[256];
    uint64_t before = pxl_color_transforms_built();
    pxl_color_transform *t = pxl_color_transform_get(&c, msg, sizeof msg);
    if (strcmp(expect, "convert") == 0) {
      CHECK(t != NULL, "%s: no transform (%s)", name, msg);
      size_t esize = 0;
      uint8_t *want = read_file(dir, expected, &esize);
      size_t n = (size_t)o.width * o.height;
      CHECK(want != NULL && esize == n * 4, "%s: expected pixels", name);
      char decoded_name[300];
      snprintf(decoded_name, sizeof decoded_name, "%.*s.decoded.rgba", (int)strlen(expected) - 5, expected);
      size_t dsize = 0;
      uint8_t *decoded = is_png(data, size) ? read_file(dir, decoded_name, &dsize) : NULL;
      if (is_png(data, size))
        CHECK(decoded != NULL && dsize == n * 4 && memcmp(o.pixels, decoded, dsize) == 0,
              "%s: the decode (colour management off) is not the decoded values", name);
      if (t && want && esize == n * 4) {
        CHECK(pxl_color_transform_apply(t, o.pixels, o.width, o.height, o.stride, PXL_CODEC_RGBA, 0, msg, sizeof msg),
              "%s: apply: %s", name, msg);
        int d = max_diff(o.pixels, want, n * 4);
        int moved = decoded && dsize == n * 4 ? max_diff(o.pixels, decoded, n * 4) : -1;
        if (!in_suite)
          printf("  %-16s converted: max difference to ImageCms %d (tolerance %d)\n", name, d, TOLERANCE);
        else if (strstr(note, "cHRM"))
          printf("  %-16s converted (PngSuite, %s): max difference to ImageCms %d (tolerance %d), to the decoded values %d\n",
                 base_name(name), note + strlen("PngSuite: "), d, TOLERANCE, moved);
        if (in_suite) {
          suite.converted++;
          if (d > suite.worst || suite.worst_name[0] == '\0') {
            suite.worst = d;
            snprintf(suite.worst_name, sizeof suite.worst_name, "%.63s", base_name(name));
          }
          if (moved > suite.worst_to_decoded) suite.worst_to_decoded = moved;
        }
        CHECK(d <= TOLERANCE, "%s: %d levels from ImageCms", name, d);
        check_layouts(name, data, size, t, o.pixels, o.width, o.height);
      }
      free(decoded);
      free(want);
    } else if (strcmp(expect, "same") == 0) {
      CHECK(t == NULL && msg[0] == '\0', "%s: a transform for an untagged or sRGB file (%s)", name, msg);
      CHECK(pxl_color_transforms_built() == before, "%s: built a transform", name);
    } else {
      printf("  %-16s not applied: %s\n", name, msg);
      CHECK(t == NULL && strstr(msg, "colour profile not applied") != NULL, "%s: a broken profile must say so", name);
      CHECK(c.icc != NULL, "%s: the profile should have been read", name);
    }
    pxl_color_transform_release(t);
    pxl_codec_color_free(&c);
    free(o.pixels);
    free(data);
  }
  if (suite.converted + suite.same == 0)
    printf("  PngSuite gAMA/cHRM rows skipped: the corpus is absent (gen-color-fixtures.py said where it looked)\n");
  else
    printf("  PngSuite gAMA/cHRM: %d converted (max difference to ImageCms %d, %s; up to %d levels from the decoded "
           "values), %d gAMA 1/2.2 taken as sRGB\n",
           suite.converted, suite.worst, suite.worst_name, suite.worst_to_decoded, suite.same);
  CHECK(rows >= 16, "only %d manifest rows", rows);
  free(manifest);
}

/* A profile met again (another file, another thread) reuses its transform. */
static void test_reuse(const char *dir) {
  size_t jn, pn;
  uint8_t *jpg = read_file(dir, "p3.jpg", &jn), *png = read_file(dir, "p3.png", &pn);
  if (!jpg || !png) { CHECK(0, "p3 fixtures"); free(jpg); free(png); return; }
  pxl_color_cache_clear();
  pxl_codec_color a, b;
  pxl_jpeg_color(jpg, jn, &a);
  pxl_png_color(png, pn, &b);
  CHECK(a.icc_size == b.icc_size && a.icc && b.icc && memcmp(a.icc, b.icc, a.icc_size) == 0,
        "JPEG APP2 and PNG iCCP give different bytes for one profile");
  uint8_t px[4 * 4] = {255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0, 10, 20, 30, 40};
  uint64_t start = pxl_color_transforms_built();
  pxl_color_transform *t1 = pxl_color_transform_get(&a, NULL, 0);
  pxl_color_transform_apply(t1, px, 4, 1, 16, PXL_CODEC_RGBA, 0, NULL, 0);
  pxl_color_transform *t2 = pxl_color_transform_get(&b, NULL, 0);
  pxl_color_transform_apply(t2, px, 4, 1, 16, PXL_CODEC_RGBA, 0, NULL, 0);
  CHECK(t1 == t2, "one profile, two cache entries");
  CHECK(pxl_color_transforms_built() - start == 1, "%llu transforms for one profile and layout",
        (unsigned long long)(pxl_color_transforms_built() - start));
  CHECK(px[3] == 255 && px[7] == 128 && px[11] == 0 && px[15] == 40, "alpha changed");
  pxl_color_transform_release(t1);
  pxl_color_transform_release(t2);
  /* The cache stays bounded: many distinct sources evict the old ones, which still work
   * for whoever holds them, and come back rebuilt. */
  pxl_color_transform *held = pxl_color_transform_get(&a, NULL, 0);
  for (int g = 0; g < 40; g++) {
    static const int32_t srgb_chrm[8] = {31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000};
    pxl_codec_color c = {0};
    c.has_chrm = 1;
    memcpy(c.chrm, srgb_chrm, sizeof c.chrm);
    c.gamma = 50000 + 1000 * g; /* clear of 45000..46000, taken as sRGB */
    pxl_color_transform *t = pxl_color_transform_get(&c, NULL, 0);
    CHECK(t != NULL, "gAMA %d: no transform", c.gamma);
    pxl_color_transform_release(t);
  }
  uint8_t one[4] = {200, 100, 50, 255};
  CHECK(pxl_color_transform_apply(held, one, 1, 1, 4, PXL_CODEC_RGBA, 0, NULL, 0), "an evicted entry in use");
  pxl_color_transform_release(held);
  start = pxl_color_transforms_built();
  pxl_color_transform *again = pxl_color_transform_get(&a, NULL, 0);
  pxl_color_transform_apply(again, one, 1, 1, 4, PXL_CODEC_RGBA, 0, NULL, 0);
  CHECK(pxl_color_transforms_built() - start == 1, "an evicted profile should be rebuilt once");
  pxl_color_transform_release(again);
  pxl_codec_color_free(&a);
  pxl_codec_color_free(&b);
  free(jpg);
  free(png);
}

/* nclx: P3 primaries with the sRGB transfer is the Display P3 profile; sRGB and
 * unspecified cost nothing; PQ and unknown codes say why they are left alone. */
static void test_cicp(const char *dir) {
  size_t pn;
  uint8_t *png = read_file(dir, "p3.png", &pn);
  if (!png) { CHECK(0, "p3.png"); return; }
  pxl_codec_color icc;
  pxl_png_color(png, pn, &icc);
  pxl_codec_color nclx = {0};
  nclx.cicp_primaries = 12;
  nclx.cicp_transfer = 13;
  nclx.cicp_matrix = 6;
  uint8_t a[256 * 4], b[256 * 4];
  for (int i = 0; i < 256; i++) {
    a[4 * i] = (uint8_t)i;
    a[4 * i + 1] = (uint8_t)(255 - i);
    a[4 * i + 2] = (uint8_t)(i * 7);
    a[4 * i + 3] = 255;
  }
  memcpy(b, a, sizeof a);
  pxl_color_transform *t1 = pxl_color_transform_get(&icc, NULL, 0), *t2 = pxl_color_transform_get(&nclx, NULL, 0);
  CHECK(t1 && t2, "P3 transforms");
  pxl_color_transform_apply(t1, a, 256, 1, sizeof a, PXL_CODEC_RGBA, 0, NULL, 0);
  pxl_color_transform_apply(t2, b, 256, 1, sizeof b, PXL_CODEC_RGBA, 0, NULL, 0);
  CHECK(max_diff(a, b, sizeof a) <= 1, "nclx 12/13 and the P3 ICC differ by %d", max_diff(a, b, sizeof a));
  pxl_color_transform_release(t1);
  pxl_color_transform_release(t2);
  static const struct { int p, t, convert, says; } cases[] = {
    {1, 13, 0, 0}, {2, 2, 0, 0}, {1, 2, 0, 0}, {2, 13, 0, 0},
    {9, 1, 1, 0}, {9, 14, 1, 0}, {12, 4, 1, 0}, {1, 5, 1, 0}, {1, 8, 1, 0}, {11, 13, 1, 0}, {6, 6, 1, 0},
    {9, 16, 0, 1}, {9, 18, 0, 1}, {99, 13, 0, 1}, {1, 99, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pxl_codec_color c = {0};
    c.cicp_primaries = cases[i].p;
    c.cicp_transfer = cases[i].t;
    char msg[256];
    uint64_t before = pxl_color_transforms_built();
    pxl_color_transform *t = pxl_color_transform_get(&c, msg, sizeof msg);
    CHECK((t != NULL) == cases[i].convert, "nclx %d/%d: transform %s", cases[i].p, cases[i].t, t ? "made" : "not made");
    CHECK((msg[0] != '\0') == cases[i].says, "nclx %d/%d: message \"%s\"", cases[i].p, cases[i].t, msg);
    if (!cases[i].convert) CHECK(pxl_color_transforms_built() == before, "nclx %d/%d built", cases[i].p, cases[i].t);
    pxl_color_transform_release(t);
  }
  pxl_codec_color_free(&icc);
  free(png);
}

/* Hostile APP2 sets: a gap, a duplicate, a bad count are no profile; nothing is read
 * past the buffer (every truncation). */
static void test_jpeg_chunks(const char *dir) {
  size_t n;
  uint8_t *jpg = read_file(dir, "big.jpg", &n);
  if (!jpg) { CHECK(0, "big.jpg"); return; }
  pxl_codec_color c;
  CHECK(pxl_jpeg_color(jpg, n, &c) == PXL_CODEC_OK && c.icc_size > 65519, "big.jpg: %zu profile bytes", c.icc_size);
  size_t whole = c.icc_size;
  pxl_codec_color_free(&c);
  uint8_t *copy = malloc(n);
  /* The second chunk's sequence number made 1: a duplicate. */
  memcpy(copy, jpg, n);
  uint8_t *second = NULL;
  for (size_t i = 0, seen = 0; i + 14 < n; i++)
    if (memcmp(copy + i, "ICC_PROFILE\0", 12) == 0 && ++seen == 2) { second = copy + i; break; }
  CHECK(second != NULL, "no second chunk");
  if (second) {
    second[12] = 1;
    CHECK(pxl_jpeg_color(copy, n, &c) == PXL_CODEC_OK && c.icc == NULL, "duplicate chunk accepted");
    second[12] = 3;
    CHECK(pxl_jpeg_color(copy, n, &c) == PXL_CODEC_OK && c.icc == NULL, "chunk past the count accepted");
    second[12] = 2;
    second[13] = 3;
    CHECK(pxl_jpeg_color(copy, n, &c) == PXL_CODEC_OK && c.icc == NULL, "inconsistent count accepted");
  }
  int incomplete = 0;
  for (size_t len = 0; len < n; len += 97) {
    uint8_t *cut = malloc(len ? len : 1);
    memcpy(cut, jpg, len);
    if (pxl_jpeg_color(cut, len, &c) == PXL_CODEC_OK && c.icc != NULL && c.icc_size != whole) incomplete++;
    pxl_codec_color_free(&c);
    free(cut);
  }
  CHECK(incomplete == 0, "%d truncations gave a partial profile", incomplete);
  free(copy);
  free(jpg);
}

typedef struct thread_job {
  pxl_codec_color *color;
  const uint8_t *src;
  uint8_t out[64 * 64 * 4];
} thread_job;

static void *convert_loop(void *p) {
  thread_job *job = p;
  for (int i = 0; i < 50; i++) {
    memcpy(job->out, job->src, sizeof job->out);
    pxl_color_transform *t = pxl_color_transform_get(job->color, NULL, 0);
    pxl_color_transform_apply(t, job->out, 64, 64, 64 * 4, PXL_CODEC_RGBA, 0, NULL, 0);
    pxl_color_transform_release(t);
  }
  return NULL;
}

/* Eight threads start on a cold cache at once: one transform is built, all share it, all
 * get the same pixels. */
static void test_threads(const char *dir) {
  size_t n;
  uint8_t *jpg = read_file(dir, "adobe.jpg", &n);
  if (!jpg) { CHECK(0, "adobe.jpg"); return; }
  pxl_codec_color c;
  pxl_jpeg_color(jpg, n, &c);
  uint8_t *src = malloc(64 * 64 * 4);
  for (int i = 0; i < 64 * 64 * 4; i++) src[i] = (uint8_t)(i * 31 + i / 7);
  pxl_color_cache_clear();
  uint64_t start = pxl_color_transforms_built();
  enum { THREADS = 8 };
  thread_job *jobs = calloc(THREADS, sizeof *jobs);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i].color = &c;
    jobs[i].src = src;
    pthread_create(&th[i], NULL, convert_loop, &jobs[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(pxl_color_transforms_built() - start == 1, "%llu transforms built by %d threads for one profile",
        (unsigned long long)(pxl_color_transforms_built() - start), THREADS);
  int differ = 0;
  for (int i = 1; i < THREADS; i++) differ += memcmp(jobs[i].out, jobs[0].out, sizeof jobs[0].out) != 0;
  CHECK(differ == 0, "%d threads got other pixels", differ);
  CHECK(memcmp(jobs[0].out, src, sizeof jobs[0].out) != 0, "nothing converted");
  free(jobs);
  free(src);
  pxl_codec_color_free(&c);
  free(jpg);
}

/* The table-and-matrix path (matrix/TRC sources) against an lcms2 transform of the same
 * profile, on every 8-bit RGB colour whose channels are multiples of 3 (and 255): within
 * one level everywhere. */
static void test_fast_path_matches_lcms(const char *dir) {
  const char *names[] = {"p3.icc", "adobe.icc", "big.icc"};
  for (int k = 0; k < 3; k++) {
    size_t n;
    uint8_t *icc = read_file(dir, names[k], &n);
    if (!icc) { CHECK(0, "%s missing", names[k]); continue; }
    cmsHPROFILE src = cmsOpenProfileFromMem(icc, (cmsUInt32Number)n), srgb = cmsCreate_sRGBProfile();
    cmsHTRANSFORM x = cmsCreateTransform(src, TYPE_RGB_8, srgb, TYPE_RGB_8, INTENT_RELATIVE_COLORIMETRIC, 0);
    enum { STEPS = 86 }; /* 0, 3, ..., 252, 255 */
    size_t count = (size_t)STEPS * STEPS * STEPS;
    uint8_t *a = malloc(count * 3), *b = malloc(count * 3);
    size_t i = 0;
    for (int r = 0; r < STEPS; r++)
      for (int g = 0; g < STEPS; g++)
        for (int bl = 0; bl < STEPS; bl++, i++) {
          a[3 * i] = (uint8_t)(r == STEPS - 1 ? 255 : 3 * r);
          a[3 * i + 1] = (uint8_t)(g == STEPS - 1 ? 255 : 3 * g);
          a[3 * i + 2] = (uint8_t)(bl == STEPS - 1 ? 255 : 3 * bl);
        }
    memcpy(b, a, count * 3);
    cmsDoTransform(x, b, b, (cmsUInt32Number)count);
    pxl_codec_color c = {0};
    c.icc = icc;
    c.icc_size = n;
    pxl_color_transform *t = pxl_color_transform_get(&c, NULL, 0);
    CHECK(t != NULL, "%s: no transform", names[k]);
    if (t) pxl_color_transform_apply(t, a, (int32_t)count, 1, (int32_t)count * 3, PXL_CODEC_RGB, 0, NULL, 0);
    size_t off = 0;
    for (size_t j = 0; j < count * 3; j++) off += a[j] != b[j];
    int d = max_diff(a, b, count * 3);
    printf("  %-16s all colours: max difference to an lcms2 transform %d, %.2f %% of samples off by one\n", names[k],
           d, 100.0 * off / (count * 3));
    CHECK(d <= 1, "%s: %d levels from lcms2", names[k], d);
    pxl_color_transform_release(t);
    cmsDeleteTransform(x);
    cmsCloseProfile(src);
    cmsCloseProfile(srgb);
    free(a);
    free(b);
    free(icc);
  }
}

/* Samples the Display P3 -> Lab transform into the CLUT of a LUT-based profile. */
static int sample_p3(const cmsUInt16Number in[], cmsUInt16Number out[], void *cargo) {
  cmsDoTransform((cmsHTRANSFORM)cargo, in, out, 1);
  return 1;
}

/* A profile with lookup tables (A2B0, a 33-point CLUT sampled from Display P3) goes
 * through lcms2 transforms, one per layout: exactly lcms2's own result, and close to the
 * Display P3 matrix conversion it was sampled from. */
static void test_lut_profile(const char *dir) {
  size_t n;
  uint8_t *p3icc = read_file(dir, "p3.icc", &n);
  if (!p3icc) { CHECK(0, "p3.icc"); return; }
  cmsHPROFILE p3 = cmsOpenProfileFromMem(p3icc, (cmsUInt32Number)n), lab = cmsCreateLab4Profile(NULL);
  cmsHTRANSFORM to_lab = cmsCreateTransform(p3, TYPE_RGB_16, lab, TYPE_Lab_16, INTENT_RELATIVE_COLORIMETRIC, 0);
  cmsPipeline *pipe = cmsPipelineAlloc(NULL, 3, 3);
  cmsStage *clut = cmsStageAllocCLut16bit(NULL, 33, 3, 3, NULL);
  cmsStageSampleCLut16bit(clut, sample_p3, to_lab, 0);
  /* lutAtoBType wants A curves, CLUT, B curves: identity curves around the CLUT. */
  cmsPipelineInsertStage(pipe, cmsAT_END, cmsStageAllocToneCurves(NULL, 3, NULL));
  cmsPipelineInsertStage(pipe, cmsAT_END, clut);
  cmsPipelineInsertStage(pipe, cmsAT_END, cmsStageAllocToneCurves(NULL, 3, NULL));
  cmsHPROFILE lut = cmsCreateProfilePlaceholder(NULL);
  cmsSetProfileVersion(lut, 4.3);
  cmsSetDeviceClass(lut, cmsSigDisplayClass);
  cmsSetColorSpace(lut, cmsSigRgbData);
  cmsSetPCS(lut, cmsSigLabData);
  cmsWriteTag(lut, cmsSigMediaWhitePointTag, cmsD50_XYZ());
  cmsWriteTag(lut, cmsSigAToB0Tag, pipe);
  cmsUInt32Number size = 0;
  CHECK(cmsSaveProfileToMem(lut, NULL, &size) && size > 0, "LUT profile: not saved");
  uint8_t *bytes = malloc(size ? size : 1);
  cmsSaveProfileToMem(lut, bytes, &size);
  pxl_codec_color c = {0};
  c.icc = bytes;
  c.icc_size = size;
  uint64_t before = pxl_color_transforms_built();
  char why[256];
  pxl_color_transform *t = pxl_color_transform_get(&c, why, sizeof why);
  CHECK(t != NULL, "LUT profile: no transform: %s", why);
  cmsHPROFILE reread = cmsOpenProfileFromMem(bytes, size), srgb = cmsCreate_sRGBProfile();
  cmsHTRANSFORM direct = cmsCreateTransform(reread, TYPE_RGBA_8, srgb, TYPE_RGBA_8, INTENT_RELATIVE_COLORIMETRIC,
                                            cmsFLAGS_COPY_ALPHA);
  cmsHTRANSFORM matrix = cmsCreateTransform(p3, TYPE_RGBA_8, srgb, TYPE_RGBA_8, INTENT_RELATIVE_COLORIMETRIC,
                                            cmsFLAGS_COPY_ALPHA);
  CHECK(direct != NULL && matrix != NULL, "LUT profile: lcms2 cannot convert it");
  if (direct == NULL || matrix == NULL) return;
  enum { N = 4096 };
  uint8_t *ours = malloc(N * 4), *want = malloc(N * 4), *near = malloc(N * 4);
  for (int i = 0; i < N * 4; i++) ours[i] = (uint8_t)(i % 4 == 3 ? i / 4 % 251 : (i * 37 + i / 4 * 11) & 255);
  memcpy(want, ours, N * 4);
  memcpy(near, ours, N * 4);
  if (t) {
    CHECK(pxl_color_transform_apply(t, ours, N, 1, N * 4, PXL_CODEC_RGBA, 0, NULL, 0), "LUT profile: apply");
    uint8_t bgra[4 * 4] = {10, 200, 30, 255, 0, 0, 255, 0, 255, 128, 0, 77, 1, 2, 3, 4};
    CHECK(pxl_color_transform_apply(t, bgra, 4, 1, 16, PXL_CODEC_BGRA, 0, NULL, 0), "LUT profile: BGRA");
    CHECK(pxl_color_transform_apply(t, bgra, 4, 1, 12, PXL_CODEC_RGB, 0, NULL, 0), "LUT profile: RGB");
    CHECK(pxl_color_transforms_built() - before == 3, "LUT profile: %llu transforms for three layouts",
          (unsigned long long)(pxl_color_transforms_built() - before));
  }
  cmsDoTransform(direct, want, want, N);
  cmsDoTransform(matrix, near, near, N);
  CHECK(memcmp(ours, want, N * 4) == 0, "LUT profile: differs from lcms2's own transform");
  int d = max_diff(ours, near, N * 4);
  printf("  LUT profile      lcms2 transform; max difference to the matrix profile it samples %d\n", d);
  CHECK(d <= 4, "LUT profile: %d levels from the Display P3 it was sampled from", d);
  pxl_color_transform_release(t);
  free(ours), free(want), free(near), free(bytes), free(p3icc);
  cmsDeleteTransform(direct), cmsDeleteTransform(matrix), cmsDeleteTransform(to_lab);
  cmsCloseProfile(reread), cmsCloseProfile(srgb), cmsCloseProfile(lut), cmsCloseProfile(p3), cmsCloseProfile(lab);
  cmsPipelineFree(pipe);
}

/* The AVX2 path of the matrix/TRC conversion gives the scalar path's pixels exactly: every
 * layout of 4 bytes, straight and premultiplied (opaque, transparent and half-transparent
 * pixels mixed in the same groups of eight), widths that leave a tail. */
static void test_fast_paths_agree(const char *dir) {
  if (pxl_color_force_path(1) != 1) {
    printf("  (no AVX2 on this CPU: the scalar path only)\n");
    pxl_color_force_path(-1);
    return;
  }
  const char *names[] = {"p3.icc", "adobe.icc"};
  for (int k = 0; k < 2; k++) {
    size_t n;
    uint8_t *icc = read_file(dir, names[k], &n);
    if (!icc) { CHECK(0, "%s missing", names[k]); continue; }
    pxl_codec_color c = {0};
    c.icc = icc;
    c.icc_size = n;
    pxl_color_transform *t = pxl_color_transform_get(&c, NULL, 0);
    CHECK(t != NULL, "%s: no transform", names[k]);
    const int32_t width = 203, height = 61; /* 203 = 25 groups of eight and 3 */
    size_t bytes = (size_t)width * height * 4;
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    uint32_t seed = 41;
    for (size_t i = 0; i < bytes; i++) {
      seed = seed * 1664525u + 1013904223u;
      a[i] = (uint8_t)(seed >> 24);
    }
    for (size_t i = 3; i < bytes; i += 4)
      if ((i / 4) % 3 != 0) a[i] = 255; /* two pixels in three opaque: some groups all opaque */
    for (size_t p = 0; p < (size_t)width * height; p += 97) a[4 * p + 3] = 0;
    const int32_t layouts[2] = {PXL_CODEC_RGBA, PXL_CODEC_BGRA};
    for (int l = 0; l < 2 && t; l++)
      for (int pm = 0; pm <= 1; pm++) {
        memcpy(b, a, bytes);
        uint8_t *c2 = malloc(bytes);
        memcpy(c2, a, bytes);
        if (pm) /* premultiplied input: colour never above alpha */
          for (size_t i = 0; i < bytes; i += 4)
            for (int ch = 0; ch < 3; ch++) {
              int at = layouts[l] == PXL_CODEC_BGRA ? 2 - ch : ch;
              b[i + at] = c2[i + at] = (uint8_t)((a[i + at] * a[i + 3] + 127) / 255);
            }
        pxl_color_force_path(0);
        pxl_color_transform_apply(t, b, width, height, width * 4, layouts[l], pm, NULL, 0);
        pxl_color_force_path(1);
        pxl_color_transform_apply(t, c2, width, height, width * 4, layouts[l], pm, NULL, 0);
        size_t off = 0, changed = 0;
        for (size_t i = 0; i < bytes; i++) off += b[i] != c2[i], changed += b[i] != a[i];
        CHECK(off == 0 && changed > 0, "%s %s%s: %zu samples differ between scalar and AVX2 (%zu converted)",
              names[k], l ? "BGRA" : "RGBA", pm ? " premultiplied" : "", off, changed);
        free(c2);
      }
    pxl_color_force_path(-1);
    pxl_color_transform_release(t);
    free(a);
    free(b);
    free(icc);
  }
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/color-fixtures";
  test_manifest(dir);
  test_reuse(dir);
  test_cicp(dir);
  test_jpeg_chunks(dir);
  test_threads(dir);
  test_fast_path_matches_lcms(dir);
  test_fast_paths_agree(dir);
  test_lut_profile(dir);
  pxl_color_cache_clear();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
