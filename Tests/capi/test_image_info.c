/*
 * test_image_info.c: pxl_image_get_info (0.6.0) gives what each accessor gives, for a
 * still image and an animation, and refuses NULL and a bad struct_size without writing.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "fixtures.h"
#include "harness.h"

static void check_info(const char *what, const pxl_image *image) {
  pxl_image_info info;
  memset(&info, 0xA5, sizeof info);
  info.struct_size = sizeof info;
  CHECK_STATUS(pxl_image_get_info(image, &info), PXL_OK);
  CHECKF(info.struct_size == sizeof info && info.width == pxl_image_width(image) &&
             info.height == pxl_image_height(image) && info.stride == pxl_image_stride(image) &&
             info.format == (int32_t)pxl_image_format(image) && info.pixels == pxl_image_pixels(image),
         "%s: %dx%d stride %d format %d, the accessors say %dx%d stride %d format %d", what, info.width,
         info.height, info.stride, info.format, pxl_image_width(image), pxl_image_height(image),
         pxl_image_stride(image), (int)pxl_image_format(image));
  CHECKF(info.original_width == pxl_image_original_width(image) &&
             info.original_height == pxl_image_original_height(image) &&
             info.frame_count == pxl_image_frame_count(image) &&
             info.source_frame_count == pxl_image_source_frame_count(image) &&
             info.loop_count == pxl_image_loop_count(image) && info.incomplete == pxl_image_incomplete(image),
         "%s: original %dx%d, frames %d of %d, loops %d, incomplete %d", what, info.original_width,
         info.original_height, info.frame_count, info.source_frame_count, info.loop_count, info.incomplete);
}

void test_image_get_info(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct capture c;
  memset(&c, 0, sizeof c);
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "image-info");
  pxl_request request;
  request_for(&request, u.url, 64, 40, PXL_MODE_FILL, PXL_FORMAT_RGB8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECKF(c.status == PXL_OK && c.image, "the still: %s", c.message);
  if (c.image) {
    check_info("still", c.image);
    CHECK_INT(pxl_image_width(c.image), 64);
    CHECK_INT(pxl_image_format(c.image), PXL_FORMAT_RGB8);
    CHECK_INT(pxl_image_original_width(c.image), 640);

    /* Refusals leave the struct as it was. */
    pxl_image_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info - 1;
    CHECK_STATUS(pxl_image_get_info(c.image, &info), PXL_E_INVALID_ARGUMENT);
    CHECK(info.struct_size == sizeof info - 1 && info.width == 0);
    info.struct_size = sizeof info;
    CHECK_STATUS(pxl_image_get_info(NULL, &info), PXL_E_INVALID_ARGUMENT);
    CHECK(info.width == 0);
    CHECK_STATUS(pxl_image_get_info(c.image, NULL), PXL_E_INVALID_ARGUMENT);
    /* A caller that knows a later, larger struct: the rest is zeroed, struct_size says
     * what was filled. */
    unsigned char larger[sizeof(pxl_image_info) + 16];
    memset(larger, 0xA5, sizeof larger);
    size_t declared = sizeof larger;
    memcpy(larger, &declared, sizeof declared);
    CHECK_STATUS(pxl_image_get_info(c.image, (pxl_image_info *)(void *)larger), PXL_OK);
    size_t filled = 0;
    memcpy(&filled, larger, sizeof filled);
    CHECK_INT(filled, sizeof(pxl_image_info));
    int zeroed = 1;
    for (size_t i = sizeof(pxl_image_info); i < sizeof larger; i++) zeroed &= larger[i] == 0;
    CHECK(zeroed);
  }
  capture_reset(&c);

  /* An animation: its frames and loop count. */
  struct test_url gif = test_url(env, "/" FIXTURE_ANIM_WEBP, "image-info-animated");
  request_for(&request, gif.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags |= PXL_FLAG_ANIMATE;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECKF(c.status == PXL_OK && c.image, "the animation: %s", c.message);
  if (c.image) {
    check_info("animated", c.image);
    CHECK(pxl_image_frame_count(c.image) > 1);
  }
  capture_reset(&c);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
