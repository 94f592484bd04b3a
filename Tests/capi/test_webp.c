/*
 * WebP through the whole library and nginx: lossless with alpha (every pixel format,
 * premultiplied transparent pixels at 0), EXIF orientation from a VP8X EXIF chunk, an
 * animation (the still load shows its first frame) and a thumbnail. Truncated and corrupt
 * WebP are checked below the library (Tests/codecs/webp_api.c, WebPDecoderTests).
 * The fixtures are written by mkfixtures.c with libwebp's encoders from the pixel
 * formulas of fixtures.h, and are lossless: decoded pixels must equal the formulas.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* Compares every pixel of a straight RGBA8 image of the alpha fixture with the formula
 * (the colour of fully transparent pixels is the file's business: only alpha there).
 * Returns the number of pixels that differ. */
static int alpha_mismatches(const pxl_image *image) {
  int bad = 0;
  for (int y = 0; y < FIXTURE_ALPHA_H; y++)
    for (int x = 0; x < FIXTURE_ALPHA_W; x++) {
      unsigned char s[4];
      fixture_alpha_pixel(x, y, s);
      const uint8_t *p = pixel_at(image, x, y);
      if (p[3] != s[3] || (s[3] != 0 && (p[0] != s[0] || p[1] != s[1] || p[2] != s[2]))) bad++;
    }
  return bad;
}

void test_webp_over_http(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  pxl_request request;
  struct capture got = {0};

  /* Lossless with alpha: exact in RGBA8; premultiplied formats zero where alpha is 0. */
  struct test_url alpha = test_url(env, "/" FIXTURE_ALPHA_WEBP, "webp-alpha");
  static const pxl_format formats[] = {PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL, PXL_FORMAT_BGRA8_PREMUL,
                                       PXL_FORMAT_RGB8, PXL_FORMAT_GRAY8};
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
    request_for(&request, alpha.url, 0, 0, PXL_MODE_FIT, formats[f]);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
    CHECKF(got.status == PXL_OK, "alpha.webp format %d: status %d (%s)", formats[f], got.status, got.message);
    if (got.image) {
      CHECK_INT(pxl_image_width(got.image), FIXTURE_ALPHA_W);
      CHECK_INT(pxl_image_height(got.image), FIXTURE_ALPHA_H);
      CHECK_INT(pxl_image_format(got.image), formats[f]);
      if (formats[f] == PXL_FORMAT_RGBA8) CHECKF(alpha_mismatches(got.image) == 0, "alpha.webp: %d pixels differ", alpha_mismatches(got.image));
      if (formats[f] == PXL_FORMAT_RGBA8_PREMUL || formats[f] == PXL_FORMAT_BGRA8_PREMUL) {
        const uint8_t *p = pixel_at(got.image, 0, 100), *q = pixel_at(got.image, 200, 50);
        unsigned char s[4];
        fixture_alpha_pixel(200, 50, s);
        int r = (s[0] * s[3] + 127) / 255, b = (s[2] * s[3] + 127) / 255;
        int qr = formats[f] == PXL_FORMAT_RGBA8_PREMUL ? q[0] : q[2], qb = formats[f] == PXL_FORMAT_RGBA8_PREMUL ? q[2] : q[0];
        CHECKF(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0, "transparent premultiplied pixel %d,%d,%d,%d", p[0], p[1], p[2], p[3]);
        CHECKF(abs(qr - r) <= 1 && abs(qb - b) <= 1 && q[3] == s[3], "premultiplied (200,50): r %d b %d a %d, want %d %d %d", qr, qb, q[3], r, b, s[3]);
      }
      if (formats[f] == PXL_FORMAT_GRAY8) {
        unsigned char s[4];
        fixture_alpha_pixel(150, 100, s);
        int y = (19595 * s[0] + 38470 * s[1] + 7471 * s[2] + 32768) >> 16;
        CHECKF(pixel_at(got.image, 150, 100)[0] == y, "GRAY8 (150,100) %d, want %d", pixel_at(got.image, 150, 100)[0], y);
      }
    }
    capture_reset(&got);
  }

  /* A thumbnail: fill 60x60 of the 300x200 image. */
  request_for(&request, alpha.url, 60, 60, PXL_MODE_FILL, PXL_FORMAT_RGBA8_PREMUL);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECKF(got.image && pxl_image_width(got.image) == 60 && pxl_image_height(got.image) == 60,
         "alpha.webp 60x60 fill: status %d (%s)", got.status, got.message);
  capture_reset(&got);

  /* EXIF orientation 6 from the VP8X container: the stored 640x480 gradient, upright. */
  struct test_url oriented = test_url(env, "/" FIXTURE_ORIENTED_WEBP, "webp-exif");
  request_for(&request, oriented.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECKF(got.status == PXL_OK, "oriented6.webp: %d (%s)", got.status, got.message);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), FIXTURE_GRADIENT_H);
    CHECK_INT(pxl_image_height(got.image), FIXTURE_GRADIENT_W);
    /* Turned 90 degrees clockwise: displayed (x, y) is stored (y, H - 1 - x). */
    int bad = 0;
    for (int y = 0; y < FIXTURE_GRADIENT_W; y += 7)
      for (int x = 0; x < FIXTURE_GRADIENT_H; x += 5) {
        const uint8_t *p = pixel_at(got.image, x, y);
        int sx = y, sy = FIXTURE_GRADIENT_H - 1 - x;
        if (p[0] != fixture_gradient_r(sx) || p[1] != fixture_gradient_g(sy) || p[2] != FIXTURE_GRADIENT_B || p[3] != 255) bad++;
      }
    CHECKF(bad == 0, "oriented6.webp: %d sampled pixels differ from the turned gradient", bad);
  }
  capture_reset(&got);

  /* An animation loads as its first frame (frame 1 is alpha.png's pixels). */
  struct test_url anim = test_url(env, "/" FIXTURE_ANIM_WEBP, "webp-anim");
  request_for(&request, anim.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECKF(got.status == PXL_OK, "anim.webp: %d (%s)", got.status, got.message);
  if (got.image) CHECKF(alpha_mismatches(got.image) == 0, "anim.webp: %d pixels differ from frame 1", alpha_mismatches(got.image));
  capture_reset(&got);
  CHECKF(log_count(env, alpha.uri) >= 1 && log_count(env, oriented.uri) == 1 && log_count(env, anim.uri) == 1,
         "nginx served alpha %d, oriented %d, anim %d times", log_count(env, alpha.uri), log_count(env, oriented.uri),
         log_count(env, anim.uri));

  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Decoding while downloading, for WebP: a 2400x1600 lossy WebP dripped by the fault
 * server at 1 MB/s is decoded as its bytes arrive, so its callback comes a short time
 * after the last byte (metrics after_last_byte_us); the same file from nginx at once is
 * decoded whole after its last byte. Thumbnail and full size; the best of 3 of each (the
 * machine may be busy), the dripped one under a third of the fast one's; the same pixels. */
void test_webp_streamed(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "needs --fault-url");
    return;
  }
  static const struct { int32_t w, h; } sizes[] = {{150, 150}, {0, 0}};
  for (int k = 0; k < 2; k++) {
    long best[2] = {-1, -1}; /* fast, dripped */
    pxl_image *images[2] = {NULL, NULL};
    for (int run = 0; run < 3; run++) {
      for (int dripped = 0; dripped < 2; dripped++) {
        char name[64];
        snprintf(name, sizeof name, "webp-streamed-%d-%d-%d", k, run, dripped);
        struct test_url u = dripped ? fault_url(env, 0, "/drip/rate=1000000/piece=32768/file=" FIXTURE_PHOTO_WEBP, name)
                                    : test_url(env, "/" FIXTURE_PHOTO_WEBP, name);
        pxl_loader *loader = new_loader(NULL);
        pxl_queue *queue = new_queue();
        pxl_request request;
        request_for(&request, u.url, sizes[k].w, sizes[k].h, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
        struct metered t;
        memset(&t, 0, sizeof t);
        CHECK_STATUS(pxl_load(loader, &request, queue, metered_callback, &t, NULL), PXL_OK);
        CHECK(drain_until(env, queue, &t.capture.calls, 1, 30000));
        CHECKF(t.capture.status == PXL_OK, "%s: status %d (%s)", name, t.capture.status, t.capture.message);
        CHECKF(t.metrics.tier == PXL_TIER_NETWORK && t.metrics.after_last_byte_us > 0, "%s: tier %d, after_last_byte %lld",
               name, t.metrics.tier, (long long)t.metrics.after_last_byte_us);
        long after = (long)t.metrics.after_last_byte_us;
        if (after > 0 && (best[dripped] < 0 || after < best[dripped])) best[dripped] = after;
        if (images[dripped] == NULL && t.capture.image != NULL) {
          images[dripped] = t.capture.image;
          t.capture.image = NULL;
        }
        capture_reset(&t.capture);
        pxl_queue_free(queue);
        pxl_loader_free(loader);
      }
    }
    printf("  %dx%d: last byte -> callback %ld us fetched at once (decoded whole), %ld us dripped at 1 MB/s\n",
           sizes[k].w, sizes[k].h, best[0], best[1]);
    CHECKF(best[0] > 0 && best[1] > 0 && best[1] * 3 < best[0],
           "%dx%d: the dripped WebP's callback came %ld us after its last byte, the whole decode's %ld us", sizes[k].w,
           sizes[k].h, best[1], best[0]);
    CHECKF(images[0] != NULL && images[1] != NULL && pxl_image_width(images[0]) == pxl_image_width(images[1]) &&
               pxl_image_height(images[0]) == pxl_image_height(images[1]) &&
               pxl_image_stride(images[0]) == pxl_image_stride(images[1]) &&
               memcmp(pxl_image_pixels(images[0]), pxl_image_pixels(images[1]),
                      (size_t)pxl_image_stride(images[0]) * (size_t)pxl_image_height(images[0])) == 0,
           "%dx%d: the streamed image differs from the whole decode's", sizes[k].w, sizes[k].h);
    for (int i = 0; i < 2; i++)
      if (images[i] != NULL) pxl_image_release(images[i]);
  }
}
