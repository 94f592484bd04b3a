/*
 * Images whose data ended early (pixload.h, "Images whose data ended early"): a cut JPEG
 * or GIF is delivered with pxl_result.incomplete = 1 (its decoder fills the rest), a cut
 * PNG, WebP or AVIF fails with PXL_E_CORRUPT_IMAGE, a complete file is never marked; an
 * incomplete thumbnail is not kept as a disk variant, and a complete decode of the same
 * variant takes its place in the memory cache. The cut files are made here from the
 * fixtures mkfixtures wrote (and a GIF written here), in the directory nginx serves.
 */
#define _GNU_SOURCE /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* fixture_dir/from's first `keep` bytes (a negative keep: all but -keep) into
 * fixture_dir/to. Returns the size written, or -1. */
static long cut_fixture(const struct test_env *env, const char *from, const char *to, long keep) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, from);
  FILE *in = fopen(path, "rb");
  if (!in) return -1;
  static unsigned char data[1 << 20];
  long size = (long)fread(data, 1, sizeof data, in);
  fclose(in);
  if (keep < 0) keep += size;
  if (keep > size) keep = size;
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, to);
  FILE *out = fopen(path, "wb");
  if (!out) return -1;
  size_t written = fwrite(data, 1, (size_t)keep, out);
  fclose(out);
  return written == (size_t)keep ? keep : -1;
}

/* Loads /name (a case of its own) in a new loader; c holds the result. */
static void load_fixture(const struct test_env *env, const char *name, int32_t width, int32_t height, uint32_t flags,
                         struct capture *c) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  char case_name[96];
  snprintf(case_name, sizeof case_name, "incomplete-%s-%dx%d-%u", name, width, height, flags);
  char path[128];
  snprintf(path, sizeof path, "/%s", name);
  struct test_url u = test_url(env, path, case_name);
  pxl_request request;
  request_for(&request, u.url, width, height, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags = flags;
  memset(c, 0, sizeof *c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, c), PXL_OK);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* One load: its status and incomplete flag as expected. */
static void expect(const struct test_env *env, const char *name, int32_t width, int32_t height, uint32_t flags,
                   pxl_status status, int incomplete) {
  struct capture c;
  load_fixture(env, name, width, height, flags, &c);
  CHECKF(c.status == status, "%s %dx%d: status %d (%s), expected %d", name, width, height, (int)c.status, c.message,
         (int)status);
  CHECKF(c.incomplete == incomplete, "%s %dx%d: incomplete %d, expected %d", name, width, height, (int)c.incomplete,
         incomplete);
  CHECKF(pxl_image_incomplete(c.image) == incomplete, "%s: pxl_image_incomplete", name);
  capture_reset(&c);
}

/* A cut baseline and progressive JPEG decode (libjpeg fills the rest) marked incomplete,
 * at full size, as a DCT-scaled thumbnail and as a 1/8 thumbnail of the progressive one
 * (whose DC-scans shortcut does not apply to a cut file); one lacking only its EOI
 * counts too (header: libjpeg cannot tell it from a cut). The complete files are not
 * marked. */
void test_truncated_jpeg(const struct test_env *env) {
  long whole = fixture_bytes(env, FIXTURE_GRADIENT_JPG);
  CHECK(cut_fixture(env, FIXTURE_GRADIENT_JPG, "cut-gradient.jpg", whole / 2) > 0);
  CHECK(cut_fixture(env, FIXTURE_GRADIENT_JPG, "no-eoi-gradient.jpg", -2) == whole - 2);
  CHECK(cut_fixture(env, FIXTURE_PROGRESSIVE_JPG, "cut-progressive.jpg",
                    fixture_bytes(env, FIXTURE_PROGRESSIVE_JPG) * 2 / 3) > 0);
  expect(env, FIXTURE_GRADIENT_JPG, 0, 0, 0, PXL_OK, 0);
  expect(env, FIXTURE_GRADIENT_JPG, 80, 60, 0, PXL_OK, 0);
  expect(env, FIXTURE_PROGRESSIVE_JPG, 60, 45, 0, PXL_OK, 0);
  expect(env, "cut-gradient.jpg", 0, 0, 0, PXL_OK, 1);
  expect(env, "cut-gradient.jpg", 80, 60, 0, PXL_OK, 1);
  expect(env, "no-eoi-gradient.jpg", 0, 0, 0, PXL_OK, 1);
  expect(env, "cut-progressive.jpg", 0, 0, 0, PXL_OK, 1);
  expect(env, "cut-progressive.jpg", 60, 45, 0, PXL_OK, 1);
}

/* The GIF: 300x188, cut after a third of its bytes. Rows of index y % 4 (red,
 * green, blue, white), no transparency: delivered with the rows after the cut transparent
 * and marked; the complete file is opaque to its last row and not marked. An animation
 * cut inside its second frame: the animated result (two frames, the second partly
 * drawn) is marked, the still result (the whole first frame) is not. */
#define GW 300
#define GH 188
void test_truncated_gif(const struct test_env *env) {
  static uint8_t indices[GW * GH];
  for (int y = 0; y < GH; y++) memset(indices + y * GW, y % 4, GW);
  FILE *f = gif_start(env, "rows.gif", GW, GH, 0);
  CHECK(f != NULL);
  if (!f) return;
  gif_put_frame(f, 0, 0, GW, GH, indices, 1, 10, -1);
  fputc(0x3b, f);
  fclose(f);
  long whole = fixture_bytes(env, "rows.gif");
  CHECK(cut_fixture(env, "rows.gif", "cut-rows.gif", whole / 3) == whole / 3);

  struct capture c;
  load_fixture(env, "rows.gif", 0, 0, 0, &c);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.incomplete, 0);
  if (c.image) CHECK(pixel_at(c.image, GW - 1, GH - 1)[3] == 255);
  capture_reset(&c);

  load_fixture(env, "cut-rows.gif", 0, 0, 0, &c);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.incomplete, 1);
  if (c.image) {
    CHECK_INT(pxl_image_width(c.image), GW);
    CHECK_INT(pxl_image_height(c.image), GH);
    const uint8_t *top = pixel_at(c.image, 0, 0), *bottom = pixel_at(c.image, 0, GH - 1);
    CHECKF(top[0] == 255 && top[1] == 0 && top[3] == 255, "row 0 = %d,%d,%d,%d", top[0], top[1], top[2], top[3]);
    CHECKF(bottom[3] == 0, "the last row's alpha %d: not the decoder's filling", bottom[3]);
  }
  capture_reset(&c);
  expect(env, "cut-rows.gif", 50, 50, 0, PXL_OK, 1); /* a thumbnail, rows streamed */

  /* Three full-canvas frames of 40x30. */
  static uint8_t frame[40 * 30];
  f = gif_start(env, "anim3.gif", 40, 30, 0);
  CHECK(f != NULL);
  if (!f) return;
  long frame_end[3];
  for (int i = 0; i < 3; i++) {
    memset(frame, i, sizeof frame);
    gif_put_frame(f, 0, 0, 40, 30, frame, 1, 10, -1);
    fflush(f);
    frame_end[i] = ftell(f);
  }
  fputc(0x3b, f);
  fclose(f);
  long second = frame_end[0] + (frame_end[1] - frame_end[0]) / 2;
  CHECK(cut_fixture(env, "anim3.gif", "cut-anim3.gif", second) == second);
  expect(env, "anim3.gif", 0, 0, PXL_FLAG_ANIMATE, PXL_OK, 0);
  load_fixture(env, "cut-anim3.gif", 0, 0, PXL_FLAG_ANIMATE, &c);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.incomplete, 1);
  if (c.image) CHECK_INT(pxl_image_frame_count(c.image), 2);
  capture_reset(&c);
  expect(env, "cut-anim3.gif", 0, 0, 0, PXL_OK, 0);
  /* Cut between the second and third frames: both there, the file ends early. */
  CHECK(cut_fixture(env, "anim3.gif", "cut2-anim3.gif", frame_end[1]) == frame_end[1]);
  expect(env, "cut2-anim3.gif", 0, 0, PXL_FLAG_ANIMATE, PXL_OK, 1);
}

/* libpng, libwebp and libavif refuse a cut file: PXL_E_CORRUPT_IMAGE, never an image. */
void test_truncated_png_webp_avif(const struct test_env *env) {
  static const char *const names[][2] = {
      {FIXTURE_ALPHA_PNG, "cut-alpha.png"},
      {FIXTURE_ALPHA_WEBP, "cut-alpha.webp"},
      {FIXTURE_ANIM_WEBP, "cut-anim.webp"},
      {"gradient.avif", "cut-gradient.avif"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    long whole = fixture_bytes(env, names[i][0]);
    CHECKF(whole > 0, "%s is missing", names[i][0]);
    CHECK(cut_fixture(env, names[i][0], names[i][1], whole * 2 / 3) > 0);
    expect(env, names[i][0], 0, 0, 0, PXL_OK, 0);
    expect(env, names[i][1], 0, 0, 0, PXL_E_CORRUPT_IMAGE, 0);
    expect(env, names[i][1], 50, 50, 0, PXL_E_CORRUPT_IMAGE, 0);
  }
  expect(env, "cut-anim.webp", 0, 0, PXL_FLAG_ANIMATE, PXL_E_CORRUPT_IMAGE, 0);
  /* A PNG without only its IEND chunk is refused as well (libpng's reader checks it). */
  CHECK(cut_fixture(env, FIXTURE_ALPHA_PNG, "no-iend-alpha.png", -12) > 0);
  expect(env, "no-iend-alpha.png", 0, 0, 0, PXL_E_CORRUPT_IMAGE, 0);
}

/* A loader with a disk cache keeps a complete thumbnail as a variant and not an
 * incomplete one: a second loader on the same directory gets the complete one as a
 * variant hit, and decodes the cut one again from its original (a disk hit, no variant
 * hit, still incomplete). */
void test_incomplete_not_on_disk(const struct test_env *env) {
  char directory[] = "/tmp/pxl-incomplete.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  CHECK(cut_fixture(env, FIXTURE_GRADIENT_JPG, "cut-disk.jpg", fixture_bytes(env, FIXTURE_GRADIENT_JPG) / 2) > 0);
  struct test_url cut = test_url(env, "/cut-disk.jpg", "incomplete-disk");
  struct test_url whole = test_url(env, "/" FIXTURE_GRADIENT_JPG, "incomplete-disk-control");
  for (int round = 0; round < 2; round++) {
    pxl_config config;
    pxl_config_init(&config);
    config.disk_cache_bytes = 8 << 20;
    config.disk_cache_dir = directory;
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    for (int which = 0; which < 2; which++) {
      pxl_request request;
      request_for(&request, which ? whole.url : cut.url, 40, 30, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
      struct capture c;
      memset(&c, 0, sizeof c);
      CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
      CHECKF(c.status == PXL_OK, "round %d, %s: %s", round, which ? "whole" : "cut", c.message);
      CHECKF(c.incomplete == !which, "round %d, %s: incomplete %d", round, which ? "whole" : "cut", c.incomplete);
      CHECKF(c.source == (round == 0 ? PXL_SOURCE_NETWORK : PXL_SOURCE_DISK), "round %d, %s: source %d", round,
             which ? "whole" : "cut", (int)c.source);
      capture_reset(&c);
    }
    if (round == 1) {
      pxl_stats stats;
      stats.struct_size = sizeof stats;
      CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
      CHECK_INT(stats.disk_hits, 2);
      CHECK_INT(stats.variant_hits, 1); /* the whole file's thumbnail only */
    }
    pxl_loader_free(loader); /* joins the disk threads: what was to be written is */
    pxl_queue_free(queue);
  }
  CHECK_INT(log_wait_count(env, cut.uri, 1, 1000), 1);
  char command[64];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  CHECK(system(command) == 0);
}

/* An incomplete image is served from the memory cache like any other (no request), and
 * a complete decode of the same variant (a reload after the server's file was fixed)
 * replaces it there. */
void test_incomplete_replaced_in_memory(const struct test_env *env) {
  CHECK(cut_fixture(env, FIXTURE_GRADIENT_JPG, "fixed-later.jpg", fixture_bytes(env, FIXTURE_GRADIENT_JPG) / 2) > 0);
  struct test_url u = test_url(env, "/fixed-later.jpg", "incomplete-memory");
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  pxl_request request;
  request_for(&request, u.url, 64, 48, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture c = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_NETWORK);
  CHECK_INT(c.incomplete, 1);
  capture_reset(&c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_MEMORY);
  CHECK_INT(c.incomplete, 1);
  capture_reset(&c);
  CHECK_INT(log_wait_count(env, u.uri, 1, 1000), 1);
  pxl_image *hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_OK);
  CHECK_INT(pxl_image_incomplete(hit), 1);
  pxl_image_release(hit);

  /* The server's file is whole now; a reload decodes it and replaces the cut one. */
  CHECK(cut_fixture(env, FIXTURE_GRADIENT_JPG, "fixed-later.jpg", fixture_bytes(env, FIXTURE_GRADIENT_JPG)) > 0);
  pxl_request reload = request;
  reload.flags = PXL_FLAG_RELOAD;
  CHECK_STATUS(load_and_wait(env, loader, queue, &reload, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_NETWORK);
  CHECK_INT(c.incomplete, 0);
  pxl_image *fixed = pxl_image_retain(c.image);
  capture_reset(&c);
  hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &hit), PXL_OK);
  CHECK(hit != NULL && hit == fixed);
  CHECK_INT(pxl_image_incomplete(hit), 0);
  pxl_image_release(hit);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_MEMORY);
  CHECK_INT(c.incomplete, 0);
  CHECK(c.image == fixed);
  capture_reset(&c);
  CHECK_INT(pxl_memory_cache_count(loader), 1);
  pxl_image_release(fixed);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
