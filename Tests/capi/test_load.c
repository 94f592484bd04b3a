/*
 * test_load.c: successful loads: defaults, the memory cache, sizes, pixel formats,
 * alpha and EXIF orientation, each checked against the fixtures' pixel formulas.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* JPEG is lossy and scaling averages neighbours: a decoded gradient pixel is within
 * this of the formula. Wrong channel order or a wrong crop is off by far more. */
#define JPEG_TOLERANCE 12

static int near(int got, int want, int tolerance) { return abs(got - want) <= tolerance; }

void test_constants_and_defaults(const struct test_env *env) {
  (void)env;
  CHECK(strcmp(pxl_version(), PXL_VERSION_STRING) == 0);
  CHECK_INT(pxl_version_num(), PXL_VERSION_NUM);
  CHECK(pxl_status_string(PXL_E_CANCELLED) != NULL && pxl_status_string(PXL_E_CANCELLED)[0]);
  CHECK(pxl_status_string((pxl_status)9999) != NULL);
  CHECK(strcmp(pxl_status_string(PXL_OK), pxl_status_string(PXL_E_HTTP)) != 0);

  CHECK_INT(pxl_format_bytes_per_pixel(PXL_FORMAT_RGBA8), 4);
  CHECK_INT(pxl_format_bytes_per_pixel(PXL_FORMAT_RGBA8_PREMUL), 4);
  CHECK_INT(pxl_format_bytes_per_pixel(PXL_FORMAT_BGRA8_PREMUL), 4);
  CHECK_INT(pxl_format_bytes_per_pixel(PXL_FORMAT_RGB8), 3);
  CHECK_INT(pxl_format_bytes_per_pixel(PXL_FORMAT_GRAY8), 1);
  CHECK_INT(pxl_format_bytes_per_pixel((pxl_format)99), 0);
  CHECK_INT(pxl_format_bytes_per_pixel((pxl_format)-1), 0);

  pxl_config config;
  memset(&config, 0xab, sizeof config); /* init must set every field, not rely on zeroes */
  pxl_config_init(&config);
  CHECK_INT(config.struct_size, sizeof(pxl_config));
  CHECK_INT(config.memory_cache_bytes, 64ull << 20);
  CHECK_INT(config.max_concurrent_downloads, 8);
  CHECK_INT(config.max_downloads_per_host, 6);
  CHECK_INT(config.decode_threads, 0);
  CHECK_INT(config.connect_timeout_ms, 10000);
  CHECK_INT(config.timeout_ms, 30000);
  CHECK_INT(config.max_body_bytes, 32ull << 20);
  CHECK_INT(config.max_pixels, 100000000ull);
  CHECK_INT(config.allowed_schemes, PXL_SCHEME_HTTP | PXL_SCHEME_HTTPS);
  CHECK(config.user_agent == NULL);

  pxl_request request;
  memset(&request, 0xab, sizeof request);
  pxl_request_init(&request);
  CHECK_INT(request.struct_size, sizeof(pxl_request));
  CHECK(request.url == NULL);
  CHECK(request.cache_key == NULL);
  CHECK_INT(request.width, 0);
  CHECK_INT(request.height, 0);
  CHECK_INT(request.mode, PXL_MODE_FIT);
  CHECK_INT(request.format, PXL_FORMAT_RGBA8);
  CHECK_INT(request.priority, PXL_PRIORITY_NORMAL);
  CHECK_INT(request.flags, 0);
}

void test_null_handles(const struct test_env *env) {
  (void)env;
  /* Destructors and accessors accept NULL (the header's Memory section). */
  pxl_queue_free(NULL);
  pxl_loader_free(NULL);
  pxl_image_release(NULL);
  CHECK(pxl_image_retain(NULL) == NULL);
  CHECK_INT(pxl_image_width(NULL), 0);
  CHECK_INT(pxl_image_height(NULL), 0);
  CHECK_INT(pxl_image_stride(NULL), 0);
  CHECK(pxl_image_pixels(NULL) == NULL);
  CHECK_INT(pxl_image_original_width(NULL), 0);
  CHECK_INT(pxl_image_original_height(NULL), 0);
  CHECK_INT(pxl_image_byte_count(NULL), 0);
  CHECK_INT(pxl_queue_fd(NULL), -1);
  CHECK_INT(pxl_queue_dispatch(NULL, 0), 0);
}

/* Checks the geometry every image must have, whatever its source. */
static void check_image_layout(const pxl_image *image, int width, int height, pxl_format format) {
  CHECK_INT(pxl_image_width(image), width);
  CHECK_INT(pxl_image_height(image), height);
  CHECK_INT(pxl_image_format(image), format);
  int bpp = pxl_format_bytes_per_pixel(format);
  CHECKF(pxl_image_stride(image) >= pxl_image_width(image) * bpp, "stride %d < %d x %d",
         pxl_image_stride(image), pxl_image_width(image), bpp);
  CHECK_INT(pxl_image_byte_count(image),
            (size_t)pxl_image_stride(image) * (size_t)pxl_image_height(image));
  CHECK(pxl_image_pixels(image) != NULL);
}

/* Compares the gradient's pixel at source (sx, sy) with an RGBA8 image's (x, y). */
static void check_gradient_rgba(const pxl_image *image, int x, int y, int sx, int sy) {
  const uint8_t *p = pixel_at(image, x, y);
  CHECKF(near(p[0], fixture_gradient_r(sx), JPEG_TOLERANCE) &&
             near(p[1], fixture_gradient_g(sy), JPEG_TOLERANCE) &&
             near(p[2], FIXTURE_GRADIENT_B, JPEG_TOLERANCE) && p[3] == 255,
         "pixel (%d,%d) is %d,%d,%d,%d; the gradient at (%d,%d) is %d,%d,%d,255", x, y, p[0],
         p[1], p[2], p[3], sx, sy, fixture_gradient_r(sx), fixture_gradient_g(sy),
         FIXTURE_GRADIENT_B);
}

static uint64_t checksum(const pxl_image *image) {
  uint64_t sum = 1469598103934665603ull;
  for (int y = 0; y < pxl_image_height(image); y++) {
    const uint8_t *row = pxl_image_pixels(image) + (size_t)y * pxl_image_stride(image);
    for (int i = 0; i < pxl_image_width(image) * pxl_format_bytes_per_pixel(pxl_image_format(image)); i++)
      sum = (sum ^ row[i]) * 1099511628211ull;
  }
  return sum;
}

void test_load_and_memory_cache(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "load");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);

  struct capture first = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &first), PXL_OK);
  CHECK_STATUS(first.status, PXL_OK);
  CHECK_INT(first.source, PXL_SOURCE_NETWORK);
  CHECK_INT(first.http_status, 200);
  if (first.image) {
    check_image_layout(first.image, 640, 480, PXL_FORMAT_RGBA8);
    CHECK_INT(pxl_image_original_width(first.image), 640);
    CHECK_INT(pxl_image_original_height(first.image), 480);
    check_gradient_rgba(first.image, 0, 0, 0, 0);
    check_gradient_rgba(first.image, 639, 0, 639, 0);
    check_gradient_rgba(first.image, 320, 240, 320, 240);
    check_gradient_rgba(first.image, 639, 479, 639, 479);
  }
  CHECK_INT(pxl_memory_cache_count(loader), 1);
  CHECK(pxl_memory_cache_bytes(loader) >= 640ull * 480 * 4);

  /* The same request again: decoded pixels straight from memory. */
  struct capture second = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &second), PXL_OK);
  CHECK_STATUS(second.status, PXL_OK);
  CHECK_INT(second.source, PXL_SOURCE_MEMORY);
  if (second.image) check_image_layout(second.image, 640, 480, PXL_FORMAT_RGBA8);
  CHECK_INT(log_wait_count(env, u.uri, 1, 2000), 1);

  pxl_image *hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_OK);
  CHECK(hit != NULL);
  if (hit) {
    check_image_layout(hit, 640, 480, PXL_FORMAT_RGBA8);
    CHECK(pxl_image_retain(hit) == hit); /* the reference is ours to add to and drop */
    pxl_image_release(hit);
    pxl_image_release(hit);
  }

  /* Misses: each part of the lookup key on its own. The sentinel proves *image_out is
   * written on a miss. */
  pxl_image *sentinel = (pxl_image *)&request;
  pxl_request other = request;
  other.width = other.height = 150;
  hit = sentinel;
  CHECK_STATUS(pxl_lookup(loader, &other, &hit), PXL_E_NOT_FOUND);
  CHECK(hit == NULL);
  other = request;
  other.format = PXL_FORMAT_BGRA8_PREMUL;
  hit = sentinel;
  CHECK_STATUS(pxl_lookup(loader, &other, &hit), PXL_E_NOT_FOUND);
  CHECK(hit == NULL);
  other = request;
  other.flags = PXL_FLAG_IGNORE_ORIENTATION;
  hit = sentinel;
  CHECK_STATUS(pxl_lookup(loader, &other, &hit), PXL_E_NOT_FOUND);
  CHECK(hit == NULL);
  struct test_url never = test_url(env, "/" FIXTURE_GRADIENT_JPG, "never-loaded");
  other = request;
  other.url = never.url;
  hit = sentinel;
  CHECK_STATUS(pxl_lookup(loader, &other, &hit), PXL_E_NOT_FOUND);
  CHECK(hit == NULL);
  CHECK_INT(log_count(env, never.uri), 0); /* a lookup never downloads */

  /* A trim drops the cache's references, never the host's. */
  uint64_t before = first.image ? checksum(first.image) : 0;
  pxl_memory_cache_trim(loader, 0);
  CHECK_INT(pxl_memory_cache_count(loader), 0);
  CHECK_INT(pxl_memory_cache_bytes(loader), 0);
  hit = sentinel;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_E_NOT_FOUND);
  CHECK(hit == NULL);
  if (first.image) CHECK(checksum(first.image) == before);

  capture_reset(&first);
  capture_reset(&second);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* A file:// load reports PXL_SOURCE_FILE (0.6.0; NETWORK before), so that no front end
 * reads the scheme from the URL; the memory cache's hit of it stays MEMORY. A disk cache
 * keeps no file:// images: a second loader on the same directory reads the file again
 * (FILE, not DISK). */
void test_file_url_source(const struct test_env *env) {
  char directory[] = "/tmp/pxl-file-source.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char url[1024];
  file_url(env, FIXTURE_GRADIENT_JPG, url, sizeof url);
  pxl_request request;
  request_for(&request, url, 40, 30, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  for (int round = 0; round < 2; round++) {
    pxl_config config;
    pxl_config_init(&config);
    config.allowed_schemes = PXL_SCHEME_FILE;
    config.disk_cache_bytes = 8 << 20;
    config.disk_cache_dir = directory;
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    struct capture first = {0}, again = {0};
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &first), PXL_OK);
    CHECKF(first.status == PXL_OK, "round %d: %s", round, first.message);
    CHECKF(first.source == PXL_SOURCE_FILE, "round %d: source %d, want PXL_SOURCE_FILE", round, (int)first.source);
    CHECK_INT(first.http_status, 0);
    if (first.image) check_image_layout(first.image, 40, 30, PXL_FORMAT_RGBA8);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &again), PXL_OK);
    CHECKF(again.status == PXL_OK, "round %d, again: %s", round, again.message);
    CHECKF(again.source == PXL_SOURCE_MEMORY, "round %d, again: source %d", round, (int)again.source);
    capture_reset(&first);
    capture_reset(&again);
    pxl_loader_free(loader); /* joins the disk threads: whatever they would write is written */
    pxl_queue_free(queue);
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", directory);
  CHECK(system(command) == 0);
}

void test_cache_key_and_cache_flags(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();

  /* Two signed URLs of one image share a cache key: the second never reaches the server. */
  struct test_url signed1 = test_url(env, "/" FIXTURE_GRADIENT_JPG, "key&sig=1");
  struct test_url signed2 = test_url(env, "/" FIXTURE_GRADIENT_JPG, "key&sig=2");
  char key[128];
  snprintf(key, sizeof key, "gradient-%ld", env->run_id);
  pxl_request request;
  request_for(&request, signed1.url, 100, 100, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.cache_key = key;
  struct capture a = {0}, b = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &a), PXL_OK);
  CHECK_STATUS(a.status, PXL_OK);
  CHECK_INT(a.source, PXL_SOURCE_NETWORK);
  request.url = signed2.url;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &b), PXL_OK);
  CHECK_STATUS(b.status, PXL_OK);
  CHECK_INT(b.source, PXL_SOURCE_MEMORY);
  pxl_image *hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_OK);
  pxl_image_release(hit);
  CHECK_INT(log_wait_count(env, signed1.uri, 1, 2000), 1);
  CHECK_INT(log_count(env, signed2.uri), 0);
  capture_reset(&a);
  capture_reset(&b);

  /* PXL_FLAG_SKIP_MEMORY_CACHE neither reads nor writes the cache. */
  struct test_url skip = test_url(env, "/" FIXTURE_GRADIENT_JPG, "skip");
  request_for(&request, skip.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGB8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &a), PXL_OK);
  CHECK_INT(a.source, PXL_SOURCE_NETWORK);
  int32_t count = pxl_memory_cache_count(loader);
  request.flags = PXL_FLAG_SKIP_MEMORY_CACHE;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &b), PXL_OK);
  CHECK_STATUS(b.status, PXL_OK);
  CHECK_INT(b.source, PXL_SOURCE_NETWORK);
  CHECK_INT(pxl_memory_cache_count(loader), count);
  capture_reset(&a);
  capture_reset(&b);
  struct test_url skip2 = test_url(env, "/" FIXTURE_GRADIENT_JPG, "skip-only");
  request.url = skip2.url;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &a), PXL_OK);
  request.flags = 0;
  hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_E_NOT_FOUND);
  capture_reset(&a);
  pxl_loader_free(loader);

  /* memory_cache_bytes = 0 disables the cache. */
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  loader = new_loader(&config);
  struct test_url nocache = test_url(env, "/" FIXTURE_GRADIENT_JPG, "nocache");
  request_for(&request, nocache.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &a), PXL_OK);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &b), PXL_OK);
  CHECK_STATUS(b.status, PXL_OK);
  CHECK_INT(b.source, PXL_SOURCE_NETWORK);
  CHECK_INT(pxl_memory_cache_count(loader), 0);
  hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_E_NOT_FOUND);
  capture_reset(&a);
  capture_reset(&b);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

struct size_case {
  int32_t width, height;
  pxl_mode mode;
  int32_t want_width, want_height;
  int32_t alt_height; /* another acceptable height (rounding), or 0 */
};

void test_fit_and_fill_sizes(const struct test_env *env) {
  /* 640x480 in a 150x150 box: 150 x 112.5, which rounds to the nearest pixel (the
   * header: halves round up) = 113. A 0 side is unconstrained; FILL with a 0 side fits. */
  static const struct size_case cases[] = {
      {150, 150, PXL_MODE_FIT, 150, 113, 0},
      {150, 0, PXL_MODE_FIT, 150, 113, 0},
      {0, 120, PXL_MODE_FIT, 160, 120, 0},
      {150, 0, PXL_MODE_FILL, 150, 113, 0},
      {150, 150, PXL_MODE_FILL, 150, 150, 0},
      {150, 100, PXL_MODE_FILL, 150, 100, 0},
      {100, 150, PXL_MODE_FILL, 100, 150, 0},
      {320, 1000, PXL_MODE_FIT, 320, 240, 0},
      {1000, 120, PXL_MODE_FIT, 160, 120, 0},
      /* Never scaled up: FIT keeps the size, FILL crops to the target's aspect ratio at
       * the source's own resolution. */
      {1000, 1000, PXL_MODE_FIT, 640, 480, 0},
      {1000, 1000, PXL_MODE_FILL, 480, 480, 0},
      {2000, 1000, PXL_MODE_FILL, 640, 320, 0},
      {640, 480, PXL_MODE_FILL, 640, 480, 0},
  };
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "sizes");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct size_case *c = &cases[i];
    pxl_request request;
    request_for(&request, u.url, c->width, c->height, c->mode, PXL_FORMAT_RGBA8);
    struct capture got = {0};
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
    CHECK_STATUS(got.status, PXL_OK);
    if (!got.image) continue;
    int w = pxl_image_width(got.image), h = pxl_image_height(got.image);
    CHECKF(w == c->want_width && (h == c->want_height || (c->alt_height && h == c->alt_height)),
           "%s %dx%d of 640x480 gave %dx%d, expected %dx%d%s", c->mode == PXL_MODE_FIT ? "fit" : "fill",
           c->width, c->height, w, h, c->want_width, c->want_height,
           c->alt_height ? " (or the other rounding)" : "");
    CHECK_INT(pxl_image_original_width(got.image), 640);
    CHECK_INT(pxl_image_original_height(got.image), 480);
    /* The content: corners of a FIT image are the source's corners; a FILL is a centre
     * crop, so its centre is the source's centre and its top-left is inset. */
    check_gradient_rgba(got.image, w / 2, h / 2, 320, 240);
    if (c->mode == PXL_MODE_FIT) {
      check_gradient_rgba(got.image, 0, 0, 0, 0);
      check_gradient_rgba(got.image, w - 1, h - 1, 639, 479);
    } else {
      /* The crop keeps the full source extent along the axis that limits the scale. */
      double scale = (double)w / 640 > (double)h / 480 ? (double)w / 640 : (double)h / 480;
      if (scale > 1) scale = 1;
      int sx = (int)(320 - (w / 2.0) / scale), sy = (int)(240 - (h / 2.0) / scale);
      check_gradient_rgba(got.image, 0, 0, sx < 0 ? 0 : sx, sy < 0 ? 0 : sy);
    }
    capture_reset(&got);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* A FILL thumbnail of url in format into *got, checked to be there in that layout: 1 when
 * it is (got->image set). */
static int load_fill(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *url, int w,
                     int h, pxl_format format, struct capture *got) {
  pxl_request request;
  request_for(&request, url, w, h, PXL_MODE_FILL, format);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, got), PXL_OK);
  CHECK_STATUS(got->status, PXL_OK);
  if (!got->image) return 0;
  check_image_layout(got->image, w, h, format);
  return 1;
}

void test_pixel_formats(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "formats");
  static const pxl_format formats[] = {PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL,
                                       PXL_FORMAT_BGRA8_PREMUL, PXL_FORMAT_RGB8,
                                       PXL_FORMAT_GRAY8};
  const int want_r = fixture_gradient_r(320), want_g = fixture_gradient_g(240),
            want_b = FIXTURE_GRADIENT_B;
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    struct capture got = {0};
    if (!load_fill(env, loader, queue, u.url, 150, 150, formats[i], &got)) continue;
    const uint8_t *p = pixel_at(got.image, 75, 75);
    const int t = JPEG_TOLERANCE;
    switch (formats[i]) {
      case PXL_FORMAT_RGBA8:
      case PXL_FORMAT_RGBA8_PREMUL: /* opaque: premultiplying changes nothing */
        CHECKF(near(p[0], want_r, t) && near(p[1], want_g, t) && near(p[2], want_b, t) && p[3] == 255,
               "format %d centre %d,%d,%d,%d, want %d,%d,%d,255", (int)formats[i], p[0], p[1],
               p[2], p[3], want_r, want_g, want_b);
        break;
      case PXL_FORMAT_BGRA8_PREMUL:
        CHECKF(near(p[2], want_r, t) && near(p[1], want_g, t) && near(p[0], want_b, t) && p[3] == 255,
               "BGRA centre %d,%d,%d,%d, want %d,%d,%d,255", p[0], p[1], p[2], p[3], want_b,
               want_g, want_r);
        break;
      case PXL_FORMAT_RGB8:
        CHECKF(near(p[0], want_r, t) && near(p[1], want_g, t) && near(p[2], want_b, t),
               "RGB centre %d,%d,%d, want %d,%d,%d", p[0], p[1], p[2], want_r, want_g, want_b);
        break;
      case PXL_FORMAT_GRAY8: {
        /* Any luma is a weighted mean of R, G and B. */
        int lo = want_b < want_r ? (want_b < want_g ? want_b : want_g) : (want_r < want_g ? want_r : want_g);
        int hi = want_b > want_r ? (want_b > want_g ? want_b : want_g) : (want_r > want_g ? want_r : want_g);
        CHECKF(p[0] >= lo - t && p[0] <= hi + t, "gray centre %d, want between %d and %d", p[0], lo, hi);
        /* And it follows the gradient: the bottom-right is brighter than the top-left. */
        CHECK(*pixel_at(got.image, 149, 149) > *pixel_at(got.image, 0, 0) + 40);
        break;
      }
    }
    capture_reset(&got);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* A grayscale JPEG's thumbnail in every format is its GRAY8 thumbnail with the luma in each
 * colour channel and alpha 255, pixel for pixel: the colour formats are decoded and
 * resampled as one channel and expanded at the end (ImageDecoder's resamplesGray), which
 * must give what a decode to RGBA gives. Orientation 8 turns it (a 480x640 display). */
void test_gray_jpeg_formats(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRAY_JPG, "gray");
  static const pxl_format formats[] = {PXL_FORMAT_GRAY8, PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL,
                                       PXL_FORMAT_BGRA8_PREMUL, PXL_FORMAT_RGB8};
  pxl_image *gray = NULL;
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    struct capture got = {0};
    if (!load_fill(env, loader, queue, u.url, 150, 100, formats[i], &got)) continue;
    if (i == 0) {
      gray = got.image; /* kept: capture_reset would release it */
      got.image = NULL;
      capture_reset(&got);
      /* Orientation 8 turned it: the gradient's red (left to right in the stored image)
       * now rises from the bottom up, so the top row is brighter than the bottom one. */
      CHECKF(*pixel_at(gray, 75, 0) > *pixel_at(gray, 75, 99) + 20, "gray top %d, bottom %d",
             *pixel_at(gray, 75, 0), *pixel_at(gray, 75, 99));
      continue;
    }
    if (!gray) {
      capture_reset(&got);
      continue;
    }
    int bpp = pxl_format_bytes_per_pixel(formats[i]), off = 0;
    for (int y = 0; y < 100; y++)
      for (int x = 0; x < 150; x++) {
        const uint8_t *p = pixel_at(got.image, x, y), l = *pixel_at(gray, x, y);
        off += p[0] != l || p[1] != l || p[2] != l || (bpp == 4 && p[3] != 255);
      }
    CHECKF(off == 0, "format %d: %d pixels are not the GRAY8 thumbnail's luma", (int)formats[i], off);
    capture_reset(&got);
  }
  pxl_image_release(gray);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_alpha_and_premultiplied(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_ALPHA_PNG, "alpha");
  static const int points[][2] = {{299, 0}, {299, 199}, {150, 100}, {200, 50}, {75, 150}, {30, 30}};
  static const pxl_format formats[] = {PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL,
                                       PXL_FORMAT_BGRA8_PREMUL, PXL_FORMAT_RGB8};
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, formats[f]);
    struct capture got = {0};
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
    CHECK_STATUS(got.status, PXL_OK);
    if (!got.image) continue;
    check_image_layout(got.image, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H, formats[f]);
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
      int x = points[i][0], y = points[i][1];
      unsigned char s[4];
      fixture_alpha_pixel(x, y, s);
      const uint8_t *p = pixel_at(got.image, x, y);
      int pr = (s[0] * s[3] + 127) / 255, pg = (s[1] * s[3] + 127) / 255, pb = (s[2] * s[3] + 127) / 255;
      switch (formats[f]) {
        case PXL_FORMAT_RGBA8: /* lossless PNG, straight alpha: the file's values */
          CHECKF(p[3] == s[3] && near(p[0], s[0], s[3] == 255 ? 0 : 1) &&
                     near(p[1], s[1], s[3] == 255 ? 0 : 1) && near(p[2], s[2], s[3] == 255 ? 0 : 1),
                 "RGBA8 (%d,%d) is %d,%d,%d,%d, the file has %d,%d,%d,%d", x, y, p[0], p[1], p[2],
                 p[3], s[0], s[1], s[2], s[3]);
          break;
        case PXL_FORMAT_RGBA8_PREMUL:
          CHECKF(p[3] == s[3] && near(p[0], pr, 1) && near(p[1], pg, 1) && near(p[2], pb, 1),
                 "RGBA8_PREMUL (%d,%d) is %d,%d,%d,%d, want %d,%d,%d,%d", x, y, p[0], p[1], p[2],
                 p[3], pr, pg, pb, s[3]);
          break;
        case PXL_FORMAT_BGRA8_PREMUL:
          CHECKF(p[3] == s[3] && near(p[2], pr, 1) && near(p[1], pg, 1) && near(p[0], pb, 1),
                 "BGRA8_PREMUL (%d,%d) is %d,%d,%d,%d, want %d,%d,%d,%d", x, y, p[0], p[1], p[2],
                 p[3], pb, pg, pr, s[3]);
          break;
        default: /* RGB8: "alpha dropped", the colour left as it is */
          CHECKF(near(p[0], s[0], 1) && near(p[1], s[1], 1) && near(p[2], s[2], 1),
                 "RGB8 (%d,%d) is %d,%d,%d, the file has %d,%d,%d", x, y, p[0], p[1], p[2], s[0],
                 s[1], s[2]);
          break;
      }
    }
    /* Column 0 is fully transparent: premultiplied colour must be 0 there. */
    if (formats[f] == PXL_FORMAT_RGBA8_PREMUL || formats[f] == PXL_FORMAT_BGRA8_PREMUL) {
      const uint8_t *p = pixel_at(got.image, 0, 100);
      CHECKF(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0, "transparent premul pixel %d,%d,%d,%d",
             p[0], p[1], p[2], p[3]);
    }
    capture_reset(&got);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_exif_orientation(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_ORIENTED_JPG, "exif");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECK_STATUS(got.status, PXL_OK);
  if (got.image) {
    /* Orientation 6: the stored 640x480 is shown turned 90 degrees clockwise, so the
     * stored left column becomes the top row. */
    CHECK_INT(pxl_image_width(got.image), 480);
    CHECK_INT(pxl_image_height(got.image), 640);
    CHECK_INT(pxl_image_original_width(got.image), 480);
    CHECK_INT(pxl_image_original_height(got.image), 640);
    check_gradient_rgba(got.image, 0, 0, 0, 479);
    check_gradient_rgba(got.image, 479, 0, 0, 0);
    check_gradient_rgba(got.image, 0, 639, 639, 479);
    check_gradient_rgba(got.image, 479, 639, 639, 0);
  }
  capture_reset(&got);

  request.width = request.height = 150;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    int w = pxl_image_width(got.image);
    CHECKF((w == 112 || w == 113) && pxl_image_height(got.image) == 150,
           "oriented fit 150x150 gave %dx%d", w, pxl_image_height(got.image));
  }
  capture_reset(&got);

  request.width = request.height = 0;
  request.flags = PXL_FLAG_IGNORE_ORIENTATION;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), 640);
    CHECK_INT(pxl_image_height(got.image), 480);
    check_gradient_rgba(got.image, 0, 0, 0, 0);
    check_gradient_rgba(got.image, 639, 479, 639, 479);
  }
  capture_reset(&got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
