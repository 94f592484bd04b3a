/*
 * Animated images through the C API (PXL_FLAG_ANIMATE), served by the harness's nginx.
 * The GIFs are written here, into the served directory, by a minimal encoder whose LZW
 * stream sends a Clear code before the table would grow (so every code is a literal of
 * one width): the frames' pixels are known exactly without any reference data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Palette of the test animation: 16 entries, the first four used. */
static const uint8_t palette[16][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};

struct bits {
  uint8_t data[1 << 20]; /* a frame of up to about 1.5 million pixels (5 bits a pixel, and a Clear every 13) */
  size_t len;
  uint32_t acc;
  int n;
};

static void put_code(struct bits *b, unsigned code, int width) {
  b->acc |= code << b->n;
  b->n += width;
  while (b->n >= 8) {
    b->data[b->len++] = (uint8_t)(b->acc & 0xff);
    b->acc >>= 8;
    b->n -= 8;
  }
}

/* One image: GCE (disposal, delay in 1/100 s, transparent index or -1), descriptor,
 * LZW data with minimum code size 4 (Clear every 13 literals), in sub-blocks. */
void gif_put_frame(FILE *f, int left, int top, int w, int h, const uint8_t *indices, int disposal, int delay,
                      int transparent) {
  uint8_t gce[8] = {0x21, 0xf9, 4, (uint8_t)(disposal << 2 | (transparent >= 0)), (uint8_t)delay,
                    (uint8_t)(delay >> 8), (uint8_t)(transparent >= 0 ? transparent : 0), 0};
  fwrite(gce, 1, sizeof gce, f);
  uint8_t desc[10] = {0x2c, (uint8_t)left, (uint8_t)(left >> 8), (uint8_t)top, (uint8_t)(top >> 8),
                      (uint8_t)w, (uint8_t)(w >> 8), (uint8_t)h, (uint8_t)(h >> 8), 0};
  fwrite(desc, 1, sizeof desc, f);
  static struct bits b;
  memset(&b, 0, sizeof b);
  for (int i = 0; i < w * h; i++) {
    if (i % 13 == 0) put_code(&b, 16, 5); /* Clear */
    put_code(&b, indices[i], 5);
  }
  put_code(&b, 17, 5); /* End of Information */
  if (b.n > 0) b.data[b.len++] = (uint8_t)b.acc;
  fputc(4, f);
  for (size_t i = 0; i < b.len; i += 255) {
    size_t n = b.len - i < 255 ? b.len - i : 255;
    fputc((int)n, f);
    fwrite(b.data + i, 1, n, f);
  }
  fputc(0, f);
}

FILE *gif_start(const struct test_env *env, const char *name, int w, int h, int loop) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return NULL;
  uint8_t screen[13] = {'G', 'I', 'F', '8', '9', 'a', (uint8_t)w, (uint8_t)(w >> 8), (uint8_t)h, (uint8_t)(h >> 8),
                        0xf3 /* global table of 16 */, 0, 0};
  fwrite(screen, 1, sizeof screen, f);
  fwrite(palette, 1, sizeof palette, f);
  uint8_t netscape[19] = {0x21, 0xff, 11, 'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0', 3, 1,
                          (uint8_t)loop, (uint8_t)(loop >> 8), 0};
  fwrite(netscape, 1, sizeof netscape, f);
  return f;
}

/* The 8x6 animation: red canvas; a 3x2 green block at (2,1), left in place; a 4x4 block
 * at (0,0) whose checkerboard is blue and transparent, then restored to what was there
 * before it ("previous"); and a last frame of one white pixel at (7,5). */
#define AW 8
#define AH 6
static int expected_index(int frame, int x, int y) {
  int green = x >= 2 && x < 5 && y >= 1 && y < 3;
  int blue = x < 4 && y < 4 && (x + y) % 2 == 0;
  if (frame == 2 && blue) return 2;
  if (frame == 3 && x == 7 && y == 5) return 3;
  return frame >= 1 && green ? 1 : 0;
}

static void write_animation(const struct test_env *env) {
  FILE *f = gif_start(env, "anim.gif", AW, AH, 2);
  if (!f) return;
  uint8_t red[AW * AH], green[6], checker[16], white[1] = {3};
  memset(red, 0, sizeof red);
  memset(green, 1, sizeof green);
  for (int i = 0; i < 16; i++) checker[i] = ((i % 4) + (i / 4)) % 2 == 0 ? 2 : 5; /* 5: transparent */
  gif_put_frame(f, 0, 0, AW, AH, red, 1, 10, -1);
  gif_put_frame(f, 2, 1, 3, 2, green, 1, 20, -1);
  gif_put_frame(f, 0, 0, 4, 4, checker, 3, 30, 5);
  gif_put_frame(f, 7, 5, 1, 1, white, 0, 0, -1);
  fputc(0x3b, f);
  fclose(f);
}

static void check_frame(const pxl_image *image, int frame) {
  const uint8_t *pixels = pxl_image_frame_pixels(image, frame);
  CHECKF(pixels != NULL, "frame %d has pixels", frame);
  if (!pixels) return;
  int bad = 0;
  for (int y = 0; y < AH && !bad; y++) {
    for (int x = 0; x < AW && !bad; x++) {
      const uint8_t *p = pixels + (size_t)y * pxl_image_stride(image) + (size_t)x * 4;
      const uint8_t *want = palette[expected_index(frame, x, y)];
      if (p[0] != want[0] || p[1] != want[1] || p[2] != want[2] || p[3] != 255) {
        CHECKF(0, "frame %d pixel (%d,%d) = %d,%d,%d,%d, expected %d,%d,%d,255", frame, x, y, p[0], p[1], p[2], p[3],
               want[0], want[1], want[2]);
        bad = 1;
      }
    }
  }
}

void test_animated_gif(const struct test_env *env) {
  write_animation(env);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/anim.gif", "animated");
  pxl_request animated, still;
  request_for(&animated, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  animated.flags = PXL_FLAG_ANIMATE;
  request_for(&still, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);

  struct capture a = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &animated, &a), PXL_OK);
  CHECK_STATUS(a.status, PXL_OK);
  if (a.image) {
    CHECK_INT(pxl_image_width(a.image), AW);
    CHECK_INT(pxl_image_height(a.image), AH);
    CHECK_INT(pxl_image_frame_count(a.image), 4);
    CHECK_INT(pxl_image_source_frame_count(a.image), 4);
    CHECK_INT(pxl_image_loop_count(a.image), 3); /* NETSCAPE2.0 repeat count 2: plays 3 times */
    CHECK_INT(pxl_image_frame_duration_ms(a.image, 0), 100);
    CHECK_INT(pxl_image_frame_duration_ms(a.image, 1), 200);
    CHECK_INT(pxl_image_frame_duration_ms(a.image, 2), 300);
    CHECK_INT(pxl_image_frame_duration_ms(a.image, 3), 0);
    CHECK_INT(pxl_image_frame_duration_ms(a.image, 4), -1);
    CHECK_INT(pxl_image_frame_duration_ms(a.image, -1), -1);
    CHECK(pxl_image_frame_pixels(a.image, 0) == pxl_image_pixels(a.image));
    CHECK(pxl_image_frame_pixels(a.image, 4) == NULL);
    for (int frame = 0; frame < 4; frame++) check_frame(a.image, frame);
  }

  /* The same URL without the flag: the first frame alone, a variant of its own. */
  struct capture s = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &still, &s), PXL_OK);
  CHECK_STATUS(s.status, PXL_OK);
  if (s.image && a.image) {
    CHECK_INT(pxl_image_frame_count(s.image), 1);
    CHECK_INT(pxl_image_source_frame_count(s.image), 4);
    CHECK_INT(pxl_image_loop_count(s.image), 0);
    CHECK(s.image != a.image);
    CHECK(memcmp(pxl_image_pixels(s.image), pxl_image_pixels(a.image), (size_t)AW * AH * 4) == 0);
  }
  /* Both are in the memory cache, each under its own variant. */
  CHECK_INT(pxl_memory_cache_count(loader), 2);
  CHECK(pxl_memory_cache_bytes(loader) >= 5ull * AW * AH * 4);
  pxl_image *hit = NULL;
  CHECK_STATUS(pxl_lookup(loader, &animated, &hit), PXL_OK);
  if (hit) {
    CHECK(hit == a.image);
    CHECK_INT(pxl_image_frame_count(hit), 4);
    pxl_image_release(hit);
  }
  CHECK_STATUS(pxl_lookup(loader, &still, &hit), PXL_OK);
  if (hit) {
    CHECK(hit == s.image);
    CHECK_INT(pxl_image_frame_count(hit), 1);
    pxl_image_release(hit);
  }
  /* A thumbnail animates too, every frame through the same resampling as a still. */
  struct capture t = {0}, ts = {0};
  pxl_request thumb = animated, thumb_still = still;
  thumb.width = thumb_still.width = 4;
  thumb.height = thumb_still.height = 3;
  CHECK_STATUS(load_and_wait(env, loader, queue, &thumb, &t), PXL_OK);
  CHECK_STATUS(load_and_wait(env, loader, queue, &thumb_still, &ts), PXL_OK);
  if (t.image && ts.image) {
    CHECK_INT(pxl_image_width(t.image), 4);
    CHECK_INT(pxl_image_frame_count(t.image), 4);
    CHECK(memcmp(pxl_image_pixels(t.image), pxl_image_pixels(ts.image), 4 * 3 * 4) == 0);
    const uint8_t *f1 = pxl_image_frame_pixels(t.image, 1);
    /* Output pixel (1,0) averages source (2..3, 0..1): two red, two green. */
    if (f1) CHECKF(f1[4] > 100 && f1[4] < 155 && f1[5] > 100 && f1[5] < 155, "frame 1 (1,0) = %d,%d", f1[4], f1[5]);
  }
  capture_reset(&a);
  capture_reset(&s);
  capture_reset(&t);
  capture_reset(&ts);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Over PXL_ANIMATION_MAX_BYTES: a 2000x2000 canvas (16 MB of RGBA a frame) with nine
 * one-pixel frames is 144 MB at full size: delivered as its first frame alone, which
 * pxl_image_source_frame_count tells. A 100x100 thumbnail of it animates. */
void test_animation_memory_bound(const struct test_env *env) {
  FILE *f = gif_start(env, "anim-big.gif", 2000, 2000, 0);
  if (f) {
    for (int i = 0; i < 9; i++) {
      uint8_t px[1] = {(uint8_t)(i % 4)};
      gif_put_frame(f, i, i, 1, 1, px, 1, 5, -1);
    }
    fputc(0x3b, f);
    fclose(f);
  }
  CHECK(9ull * 2000 * 2000 * 4 > PXL_ANIMATION_MAX_BYTES);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/anim-big.gif", "bound");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags = PXL_FLAG_ANIMATE;
  struct capture c = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  if (c.image) {
    CHECK_INT(pxl_image_width(c.image), 2000);
    CHECK_INT(pxl_image_frame_count(c.image), 1);
    CHECK_INT(pxl_image_source_frame_count(c.image), 9);
    const uint8_t *p = pxl_image_pixels(c.image);
    CHECK(p[0] == 255 && p[1] == 0 && p[3] == 255); /* frame 0: one red pixel at (0,0) */
    CHECK(p[4 * 1 + 3] == 0);                       /* the rest of the canvas transparent */
  }
  struct capture t = {0};
  request.width = request.height = 100;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &t), PXL_OK);
  if (t.image) {
    CHECK_INT(pxl_image_frame_count(t.image), 9);
    CHECK_INT(pxl_image_source_frame_count(t.image), 9);
  }
  capture_reset(&c);
  capture_reset(&t);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
