/*
 * Tests/capi/qoi_codec.h: the QOI codec pixload's codec tests register (QOI,
 * https://qoiformat.org/qoi-specification.pdf, encoded and decoded from the spec), written
 * against the public pxl_codec interface only. Shared by Tests/capi/test_codecs.c (pixels
 * checked against the PNG path, through a real loader) and the QOI fuzz target
 * (Tests/fuzz/qoi, `make fuzz-qoi`), so the codec the tests prove is the one fuzzed.
 * Static functions: include it from one .c file.
 */
#ifndef PXL_TEST_QOI_CODEC_H
#define PXL_TEST_QOI_CODEC_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pixload.h"

/* ---- QOI, from the specification ---- */

#define QOI_OP_INDEX 0x00
#define QOI_OP_DIFF 0x40
#define QOI_OP_LUMA 0x80
#define QOI_OP_RUN 0xc0
#define QOI_OP_RGB 0xfe
#define QOI_OP_RGBA 0xff
#define QOI_HASH(p) (((p)[0] * 3 + (p)[1] * 5 + (p)[2] * 7 + (p)[3] * 11) % 64)

static void put32(uint8_t *out, size_t *n, uint32_t v) {
  out[(*n)++] = (uint8_t)(v >> 24); out[(*n)++] = (uint8_t)(v >> 16);
  out[(*n)++] = (uint8_t)(v >> 8); out[(*n)++] = (uint8_t)v;
}

/* The spec's encoder (every op); returns a malloc'd file and its size. */
static uint8_t *qoi_encode(const uint8_t *rgba, uint32_t w, uint32_t h, size_t *size) {
  uint8_t *out = malloc(14 + (size_t)w * h * 5 + 8);
  size_t n = 0;
  memcpy(out, "qoif", 4); n = 4;
  put32(out, &n, w); put32(out, &n, h);
  out[n++] = 4; out[n++] = 0;
  uint8_t index[64][4] = {{0}}, prev[4] = {0, 0, 0, 255};
  int run = 0;
  size_t count = (size_t)w * h;
  for (size_t i = 0; i < count; i++) {
    const uint8_t *px = rgba + i * 4;
    if (memcmp(px, prev, 4) == 0) {
      run++;
      if (run == 62 || i == count - 1) { out[n++] = (uint8_t)(QOI_OP_RUN | (run - 1)); run = 0; }
      continue;
    }
    if (run > 0) { out[n++] = (uint8_t)(QOI_OP_RUN | (run - 1)); run = 0; }
    int h6 = QOI_HASH(px);
    if (memcmp(index[h6], px, 4) == 0) {
      out[n++] = (uint8_t)(QOI_OP_INDEX | h6);
    } else {
      memcpy(index[h6], px, 4);
      if (px[3] == prev[3]) {
        int8_t vr = (int8_t)(px[0] - prev[0]), vg = (int8_t)(px[1] - prev[1]), vb = (int8_t)(px[2] - prev[2]);
        int8_t vgr = (int8_t)(vr - vg), vgb = (int8_t)(vb - vg);
        if (vr > -3 && vr < 2 && vg > -3 && vg < 2 && vb > -3 && vb < 2) {
          out[n++] = (uint8_t)(QOI_OP_DIFF | (vr + 2) << 4 | (vg + 2) << 2 | (vb + 2));
        } else if (vgr > -9 && vgr < 8 && vg > -33 && vg < 32 && vgb > -9 && vgb < 8) {
          out[n++] = (uint8_t)(QOI_OP_LUMA | (vg + 32));
          out[n++] = (uint8_t)((vgr + 8) << 4 | (vgb + 8));
        } else {
          out[n++] = QOI_OP_RGB; out[n++] = px[0]; out[n++] = px[1]; out[n++] = px[2];
        }
      } else {
        out[n++] = QOI_OP_RGBA; memcpy(out + n, px, 4); n += 4;
      }
    }
    memcpy(prev, px, 4);
  }
  static const uint8_t end[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  memcpy(out + n, end, 8); n += 8;
  *size = n;
  return out;
}

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The spec's decoder into rows of stride bytes; 0 on success, -1 for a truncated file. */
static int qoi_decode(const uint8_t *data, size_t size, uint32_t w, uint32_t h, uint8_t *pixels, size_t stride,
                      const volatile int32_t *cancel) {
  uint8_t index[64][4] = {{0}}, px[4] = {0, 0, 0, 255};
  size_t p = 14, end = size >= 8 ? size - 8 : 0;
  int run = 0;
  for (uint32_t y = 0; y < h; y++) {
    if (cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE)) return -2;
    for (uint32_t x = 0; x < w; x++) {
      if (run > 0) {
        run--;
      } else {
        if (p >= end) return -1;
        uint8_t b1 = data[p++];
        if (b1 == QOI_OP_RGB) {
          if (p + 3 > end) return -1;
          px[0] = data[p++]; px[1] = data[p++]; px[2] = data[p++];
        } else if (b1 == QOI_OP_RGBA) {
          if (p + 4 > end) return -1;
          px[0] = data[p++]; px[1] = data[p++]; px[2] = data[p++]; px[3] = data[p++];
        } else if ((b1 & 0xc0) == QOI_OP_INDEX) {
          memcpy(px, index[b1], 4);
        } else if ((b1 & 0xc0) == QOI_OP_DIFF) {
          px[0] += ((b1 >> 4) & 3) - 2; px[1] += ((b1 >> 2) & 3) - 2; px[2] += (b1 & 3) - 2;
        } else if ((b1 & 0xc0) == QOI_OP_LUMA) {
          if (p >= end) return -1;
          uint8_t b2 = data[p++];
          int vg = (b1 & 0x3f) - 32;
          px[0] += vg - 8 + ((b2 >> 4) & 0x0f); px[1] += vg; px[2] += vg - 8 + (b2 & 0x0f);
        } else {
          run = b1 & 0x3f;
        }
        memcpy(index[QOI_HASH(px)], px, 4);
      }
      memcpy(pixels + y * stride + x * 4, px, 4);
    }
  }
  return 0;
}

/* ---- the codec ---- */

struct qoi_state {
  atomic_int headers, decodes, frames_decodes, chosen, destroyed;
  int32_t orientation;    /* reported by read_header */
  int32_t frame_count;    /* > 1: decode_frames gives this many, frame i shifted by i */
  int choose;             /* choose_size draws what it is asked */
  int32_t asked_w, asked_h;
  pxl_status fail_with;   /* not PXL_OK: decode returns it, with the message "told to fail" */
};

static int32_t qoi_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  return size >= 14 && memcmp(data, "qoif", 4) == 0;
}

static pxl_status qoi_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message, size_t cap,
                             void *user_data) {
  struct qoi_state *s = user_data;
  atomic_fetch_add(&s->headers, 1);
  if (size < 22) { snprintf(message, cap, "%zu bytes is too short", size); return PXL_E_CORRUPT_IMAGE; }
  uint32_t w = get32(data + 4), h = get32(data + 8);
  if (w == 0 || h == 0 || w > 0x7fffffff || h > 0x7fffffff) { snprintf(message, cap, "bad size"); return PXL_E_CORRUPT_IMAGE; }
  header->width = (int32_t)w;
  header->height = (int32_t)h;
  header->has_alpha = data[12] == 4;
  header->orientation = s->orientation ? s->orientation : 1;
  header->frame_count = s->frame_count ? s->frame_count : 1;
  return PXL_OK;
}

/* Draws the QOI at target's size: the file's, or (choose_size) nearest-neighbour. */
static pxl_status qoi_draw(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap) {
  uint32_t w = get32(data + 4), h = get32(data + 8);
  uint8_t *full = t->pixels;
  size_t stride = t->stride;
  int scaled = (uint32_t)t->width != w || (uint32_t)t->height != h;
  if (scaled) { full = malloc((size_t)w * h * 4); stride = (size_t)w * 4; }
  int r = qoi_decode(data, size, w, h, full, stride, t->cancel);
  if (r == 0 && scaled) {
    for (int y = 0; y < t->height; y++)
      for (int x = 0; x < t->width; x++)
        memcpy(t->pixels + y * t->stride + x * 4, full + ((size_t)y * h / t->height) * stride + ((size_t)x * w / t->width) * 4, 4);
  }
  if (scaled) free(full);
  if (r == -2) return PXL_E_CANCELLED;
  if (r != 0) { snprintf(message, cap, "truncated"); return PXL_E_CORRUPT_IMAGE; }
  return PXL_OK;
}

static pxl_status qoi_decode_fn(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap,
                                void *user_data) {
  struct qoi_state *s = user_data;
  atomic_fetch_add(&s->decodes, 1);
  if (s->fail_with != PXL_OK) {
    snprintf(message, cap, "told to fail");
    return s->fail_with;
  }
  return qoi_draw(data, size, t, message, cap);
}

static pxl_status qoi_frames(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap,
                             void *user_data) {
  struct qoi_state *s = user_data;
  atomic_fetch_add(&s->frames_decodes, 1);
  for (int i = 0; i < s->frame_count; i++) {
    pxl_status st = qoi_draw(data, size, t, message, cap);
    if (st != PXL_OK) return st;
    /* Frame i: red channel + 10 * i. */
    for (int y = 0; y < t->height; y++)
      for (int x = 0; x < t->width; x++) t->pixels[y * t->stride + x * 4] += (uint8_t)(10 * i);
    if (t->frame_done(t->library, 40 + i)) break;
  }
  return PXL_OK;
}

static pxl_status qoi_choose(const uint8_t *data, size_t size, uint32_t flags, int32_t *w, int32_t *h, void *user_data) {
  (void)data; (void)size; (void)flags;
  struct qoi_state *s = user_data;
  atomic_fetch_add(&s->chosen, 1);
  s->asked_w = *w;
  s->asked_h = *h;
  return PXL_OK; /* exactly what was asked */
}

static void qoi_destroy(void *user_data) {
  struct qoi_state *s = user_data;
  atomic_fetch_add(&s->destroyed, 1);
}

static pxl_codec qoi_codec(struct qoi_state *s, const char *version) {
  pxl_codec c;
  pxl_codec_init(&c);
  c.id = "qoi";
  c.version = version;
  c.user_data = s;
  c.sniff = qoi_sniff;
  c.read_header = qoi_header;
  c.decode = qoi_decode_fn;
  c.destroy = qoi_destroy;
  if (s->frame_count > 1) c.decode_frames = qoi_frames;
  if (s->choose) c.choose_size = qoi_choose;
  return c;
}

#endif
