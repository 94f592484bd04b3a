/*
 * libFuzzer target on gif_shim.c alone (`make fuzz-gif`): every entry point of the GIF
 * shim on each input, under AddressSanitizer and UBSan, checking what pxl_codecs.h
 * promises (a failure has a message and no pixels; a success has the size read_info
 * gave; every frame handed over is readable, with in-order indices). A plain build
 * (`cc ... gif_fuzz.c -DGIF_FUZZ_MAIN`) replays files given as arguments.
 *
 * The layout is chosen by the input's length, so every seed is valid as it stands.
 * max_pixels is 4 Mpx: enough for the seeds, small enough that libFuzzer's RSS limit
 * is never the finding.
 */
#include "pxl_codecs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS 4000000ull

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "gif_fuzz: broken promise: %s\n", what);
    abort();
  }
}

static volatile uint32_t sink;

/* decode_rows must hand over exactly pxl_gif_decode's rows, in order. */
typedef struct rows {
  int32_t row_bytes, next;
  const uint8_t *expect; /* pxl_gif_decode's pixels, NULL when it failed */
  int mismatch;
} rows;

static int on_row(void *user, int32_t y, const uint8_t *row) {
  rows *r = user;
  if (y != r->next++) r->mismatch = 1;
  for (int32_t i = 0; i < r->row_bytes; i++) sink += row[i];
  if (r->expect && !r->mismatch && memcmp(row, r->expect + (size_t)y * (size_t)r->row_bytes, (size_t)r->row_bytes) != 0)
    r->mismatch = 1;
  return 0;
}

typedef struct frames { int32_t width, height, next; } frames;

static int on_frame(void *user, int32_t index, const uint8_t *rgba, int32_t stride, int32_t duration_ms) {
  frames *f = user;
  check(index == f->next++, "frame indices in order");
  check(stride == f->width * 4 && duration_ms >= 0, "frame shape");
  for (int32_t y = 0; y < f->height; y++) sink += rgba[(size_t)y * stride] + rgba[(size_t)y * stride + stride - 1];
  return f->next >= 64; /* the caller's bound: stop after 64 frames */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pxl_codec_info info;
  char msg[256];
  pxl_codec_status ist = pxl_gif_read_info(data, size, &info, msg, sizeof msg);
  int32_t layout = (int32_t)(size % 4);
  pxl_codec_output o;
  pxl_codec_status st = pxl_gif_decode(data, size, layout, MAX_PIXELS, &o);
  uint8_t *decoded = NULL;
  if (st == PXL_CODEC_OK) {
    check(ist == PXL_CODEC_OK && o.width == info.width && o.height == info.height, "decode agrees with read_info");
    size_t n = (size_t)o.stride * o.height;
    for (size_t i = 0; i < n; i++) sink += o.pixels[i];
    decoded = o.pixels;
  } else {
    check(o.pixels == NULL && o.message[0] != '\0', "a failure has a message and no pixels");
  }
  int32_t decoded_warnings = o.warnings;
  rows r = {ist == PXL_CODEC_OK ? info.width * (layout == 2 ? 3 : layout == 3 ? 1 : 4) : 0, 0, decoded, 0};
  pxl_codec_status rst = pxl_gif_decode_rows(data, size, layout, MAX_PIXELS, on_row, &r, &o);
  check(rst == st && o.pixels == NULL, "decode_rows agrees with decode");
  if (st == PXL_CODEC_OK) {
    check(!r.mismatch && r.next == info.height, "decode_rows hands over decode's rows, in order");
    check(o.warnings == decoded_warnings, "decode_rows warns as decode");
  }
  free(decoded);
  frames f = {info.width, info.height, 0};
  pxl_codec_status fst = pxl_gif_decode_frames(data, size, MAX_PIXELS, on_frame, &f, &o);
  check(o.pixels == NULL, "decode_frames leaves no pixels");
  if (st == PXL_CODEC_OK) check(fst == PXL_CODEC_OK && f.next >= 1, "an image that decodes has a first frame");
  pxl_codec_color c;
  if (pxl_gif_color(data, size, &c) == PXL_CODEC_OK && c.icc) sink += c.icc[c.icc_size - 1];
  pxl_codec_color_free(&c);
  return 0;
}

#ifdef GIF_FUZZ_MAIN
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    FILE *fp = fopen(argv[i], "rb");
    if (!fp) continue;
    static uint8_t buf[1 << 24];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, n);
    printf("%s: ok\n", argv[i]);
  }
  return 0;
}
#endif
