/*
 * test_avif.c: AVIF through the whole library and nginx: a lossless AVIF of the
 * gradient fixture (mkfixtures_avif.c) at full size (exactly the formula), as a 150x150
 * thumbnail (fill and fit, area-averaged: within a level or two of the formula), and with
 * irot turned upright (EXIF orientation 8) or, with PXL_FLAG_IGNORE_ORIENTATION, as stored.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* Pixel (x, y) against the gradient at stored (sx, sy), within tolerance. */
static void check_gradient(const pxl_image *image, int x, int y, double sx, double sy, int tolerance) {
  const uint8_t *p = pixel_at(image, x, y);
  int r = (int)(sx * 255 / (FIXTURE_GRADIENT_W - 1) + 0.5), g = (int)(sy * 255 / (FIXTURE_GRADIENT_H - 1) + 0.5);
  CHECKF(abs(p[0] - r) <= tolerance && abs(p[1] - g) <= tolerance && abs(p[2] - FIXTURE_GRADIENT_B) <= tolerance &&
             p[3] == 255,
         "pixel (%d,%d) is %d,%d,%d,%d; the gradient at (%.1f,%.1f) is %d,%d,%d,255", x, y, p[0], p[1], p[2], p[3], sx,
         sy, r, g, FIXTURE_GRADIENT_B);
}

void test_avif_through_nginx(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/gradient.avif", "avif");
  pxl_request request;
  struct capture got = {0};

  /* Full size: lossless, so exactly the formula everywhere. */
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), FIXTURE_GRADIENT_W);
    CHECK_INT(pxl_image_height(got.image), FIXTURE_GRADIENT_H);
    int wrong = 0;
    for (int y = 0; y < FIXTURE_GRADIENT_H; y++)
      for (int x = 0; x < FIXTURE_GRADIENT_W; x++) {
        const uint8_t *p = pixel_at(got.image, x, y);
        wrong += p[0] != fixture_gradient_r(x) || p[1] != fixture_gradient_g(y) || p[2] != FIXTURE_GRADIENT_B ||
                 p[3] != 255;
      }
    CHECKF(wrong == 0, "%d pixels differ from the gradient formula", wrong);
  }
  capture_reset(&got);

  /* A 150x150 fill thumbnail: the centred 480x480 crop, each pixel the mean of 3.2x3.2. */
  request_for(&request, u.url, 150, 150, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), 150);
    CHECK_INT(pxl_image_height(got.image), 150);
    CHECK_INT(pxl_image_original_width(got.image), FIXTURE_GRADIENT_W);
    int points[][2] = {{0, 0}, {149, 0}, {0, 149}, {149, 149}, {75, 75}, {10, 120}};
    for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
      int x = points[i][0], y = points[i][1];
      check_gradient(got.image, x, y, 80 + (x + 0.5) * 3.2 - 0.5, (y + 0.5) * 3.2 - 0.5, 2);
    }
  }
  capture_reset(&got);

  /* Fit in 150x150, BGRA premultiplied (opaque: the same values, swapped). */
  request_for(&request, u.url, 150, 150, PXL_MODE_FIT, PXL_FORMAT_BGRA8_PREMUL);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), 150);
    CHECKF(pxl_image_height(got.image) == 112 || pxl_image_height(got.image) == 113, "fit gave 150x%d",
           pxl_image_height(got.image));
    const uint8_t *p = pixel_at(got.image, 149, 0);
    CHECKF(p[2] >= 250 && p[1] <= 5 && abs(p[0] - FIXTURE_GRADIENT_B) <= 2 && p[3] == 255,
           "top right is B,G,R,A %d,%d,%d,%d", p[0], p[1], p[2], p[3]);
  }
  capture_reset(&got);
  CHECKF(log_count(env, u.uri) >= 1, "nginx never served %s", u.uri);

  /* irot 1 (90 degrees anticlockwise, EXIF 8): shown 480x640; display (x, y) is stored
   * (639 - y, x). */
  struct test_url turned = test_url(env, "/gradient-irot1.avif", "avif-irot");
  request_for(&request, turned.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), FIXTURE_GRADIENT_H);
    CHECK_INT(pxl_image_height(got.image), FIXTURE_GRADIENT_W);
    check_gradient(got.image, 0, 0, 639, 0, 0);
    check_gradient(got.image, 479, 0, 639, 479, 0);
    check_gradient(got.image, 0, 639, 0, 0, 0);
    check_gradient(got.image, 200, 300, 339, 200, 0);
  }
  capture_reset(&got);
  request.flags = PXL_FLAG_IGNORE_ORIENTATION;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), FIXTURE_GRADIENT_W);
    check_gradient(got.image, 639, 0, 639, 0, 0);
  }
  capture_reset(&got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
