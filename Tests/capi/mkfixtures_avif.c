/*
 * mkfixtures_avif: writes the AVIF fixtures of the C API tests (test_avif.c) into DIR.
 *
 *   mkfixtures_avif DIR
 *
 * Lossless AVIFs (libavif's encoder, aom, 4:4:4 with the identity matrix and quantizer 0)
 * of fixture_gradient (fixtures.h), so decoded pixels are exactly the formula:
 *   gradient.avif       640x480, as gradient.jpg
 *   gradient-irot1.avif the same pixels stored, irot angle 1 (90 degrees anticlockwise,
 *                       EXIF orientation 8): shown 480x640
 *   seq.avif            a 24x16 image sequence of 5 frames (frame i: the colour
 *                       ((x + 2y + i) % 4) of test_player.c's palette), 60 ms each, lossless
 * Each is decoded back here and compared with the formula before it is kept: the tests
 * mean "pixload decodes AVIF", and a lossy fixture would not let them say it exactly.
 *
 * Build: gcc -std=c11 -O1 Tests/capi/mkfixtures_avif.c -lavif -o mkfixtures_avif
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avif/avif.h>

#include "fixtures.h"

static void die(const char *what) {
  fprintf(stderr, "mkfixtures_avif: %s\n", what);
  exit(1);
}

/* A lossless-ready w x h image (4:4:4, identity matrix, full range) and an RGB buffer for
 * its pixels, which the caller fills and converts with avifImageRGBToYUV. */
static avifImage *new_image(int w, int h, avifRGBImage *rgb) {
  avifImage *image = avifImageCreate(w, h, 8, AVIF_PIXEL_FORMAT_YUV444);
  image->matrixCoefficients = AVIF_MATRIX_COEFFICIENTS_IDENTITY;
  image->yuvRange = AVIF_RANGE_FULL;
  avifRGBImageSetDefaults(rgb, image);
  rgb->format = AVIF_RGB_FORMAT_RGB;
  rgb->depth = 8;
  avifRGBImageAllocatePixels(rgb);
  return image;
}

/* out's bytes written as DIR/name. */
static void write_file(const char *dir, const char *name, const avifRWData *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(out->data, 1, out->size, f) != out->size || fclose(f) != 0) die("cannot write the fixture");
}

static void write_gradient(const char *dir, const char *name, int irot_angle) {
  const int w = FIXTURE_GRADIENT_W, h = FIXTURE_GRADIENT_H;
  avifRGBImage rgb;
  avifImage *image = new_image(w, h, &rgb);
  if (irot_angle >= 0) {
    image->transformFlags |= AVIF_TRANSFORM_IROT;
    image->irot.angle = (uint8_t)irot_angle;
  }
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = rgb.pixels + (size_t)y * rgb.rowBytes + (size_t)x * 3;
      p[0] = (uint8_t)fixture_gradient_r(x);
      p[1] = (uint8_t)fixture_gradient_g(y);
      p[2] = FIXTURE_GRADIENT_B;
    }
  if (avifImageRGBToYUV(image, &rgb) != AVIF_RESULT_OK) die("RGB to YUV failed");

  avifEncoder *encoder = avifEncoderCreate();
  encoder->minQuantizer = encoder->maxQuantizer = AVIF_QUANTIZER_LOSSLESS;
  encoder->speed = 10;
  avifRWData out = AVIF_DATA_EMPTY;
  avifResult r = avifEncoderWrite(encoder, image, &out);
  if (r != AVIF_RESULT_OK) die(avifResultToString(r));

  /* Decoded back: must be the formula exactly. */
  avifDecoder *decoder = avifDecoderCreate();
  avifImage *back = avifImageCreateEmpty();
  if (avifDecoderReadMemory(decoder, back, out.data, out.size) != AVIF_RESULT_OK) die("cannot decode what was written");
  avifRGBImage check;
  avifRGBImageSetDefaults(&check, back);
  check.format = AVIF_RGB_FORMAT_RGB;
  check.depth = 8;
  avifRGBImageAllocatePixels(&check);
  if (avifImageYUVToRGB(back, &check) != AVIF_RESULT_OK) die("YUV to RGB failed");
  for (int y = 0; y < h; y++)
    if (memcmp(check.pixels + (size_t)y * check.rowBytes, rgb.pixels + (size_t)y * rgb.rowBytes, (size_t)w * 3) != 0)
      die("the lossless AVIF does not decode to the gradient");

  write_file(dir, name, &out);
  avifRGBImageFreePixels(&check);
  avifImageDestroy(back);
  avifDecoderDestroy(decoder);
  avifRWDataFree(&out);
  avifEncoderDestroy(encoder);
  avifRGBImageFreePixels(&rgb);
  avifImageDestroy(image);
}

/* An image sequence: each frame a stripe pattern that moves, so no two in a row agree. */
static void write_sequence(const char *dir, const char *name) {
  static const uint8_t colours[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
  const int w = 24, h = 16, frames = 5;
  avifEncoder *encoder = avifEncoderCreate();
  encoder->minQuantizer = encoder->maxQuantizer = AVIF_QUANTIZER_LOSSLESS;
  encoder->speed = 10;
  encoder->timescale = 1000;
  for (int i = 0; i < frames; i++) {
    avifRGBImage rgb;
    avifImage *image = new_image(w, h, &rgb);
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) memcpy(rgb.pixels + (size_t)y * rgb.rowBytes + (size_t)x * 3, colours[(x + 2 * y + i) % 4], 3);
    if (avifImageRGBToYUV(image, &rgb) != AVIF_RESULT_OK) die("RGB to YUV failed");
    avifResult r = avifEncoderAddImage(encoder, image, 60, AVIF_ADD_IMAGE_FLAG_NONE);
    if (r != AVIF_RESULT_OK) die(avifResultToString(r));
    avifRGBImageFreePixels(&rgb);
    avifImageDestroy(image);
  }
  avifRWData out = AVIF_DATA_EMPTY;
  avifResult r = avifEncoderFinish(encoder, &out);
  if (r != AVIF_RESULT_OK) die(avifResultToString(r));
  write_file(dir, name, &out);
  avifRWDataFree(&out);
  avifEncoderDestroy(encoder);
}

int main(int argc, char **argv) {
  if (argc != 2) die("usage: mkfixtures_avif DIR");
  write_gradient(argv[1], "gradient.avif", -1);
  write_gradient(argv[1], "gradient-irot1.avif", 1);
  write_sequence(argv[1], "seq.avif");
  return 0;
}
