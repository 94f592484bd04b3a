/*
 * Tests/modules/make_oriented.c OUT_DIR: files whose orientation lives in the container or
 * codestream, which Debian's command-line encoders cannot write (heif-enc adds no irot/imir;
 * cjxl sets no orientation from a PNG). For each orientation 1-8, the same 48x32 pattern
 * stored as-is, with the orientation declared:
 *   OUT_DIR/orient-N.heic  libheif's encoder with heif_encoding_options.image_orientation
 *                          (written as irot/imir boxes), lossless
 *   OUT_DIR/orient-N.jxl   libjxl's encoder with JxlBasicInfo.orientation, lossless
 * The pattern (also OUT_DIR/orient-source.ppm): four quadrants in distinct colours, so any
 * flip or rotation shows. Tests/modules/orientation.py checks what pixload makes of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jxl/encode.h>
#include <libheif/heif.h>

enum { W = 48, H = 32 };

static const unsigned char quadrant[4][3] = {{230, 30, 30}, {30, 200, 40}, {40, 60, 230}, {240, 220, 30}};

static void pattern(unsigned char *rgb) {
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) memcpy(rgb + 3 * (y * W + x), quadrant[(y >= H / 2) * 2 + (x >= W / 2)], 3);
}

static int write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size) { perror(path); if (f) fclose(f); return 1; }
  return fclose(f) != 0;
}

static int heic(const char *path, const unsigned char *rgb, int orientation) {
  struct heif_context *ctx = heif_context_alloc();
  struct heif_encoder *encoder = NULL;
  struct heif_image *image = NULL;
  struct heif_error err = heif_context_get_encoder_for_format(ctx, heif_compression_HEVC, &encoder);
  if (err.code) goto fail;
  heif_encoder_set_lossless(encoder, 1);
  err = heif_image_create(W, H, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &image);
  if (err.code) goto fail;
  err = heif_image_add_plane(image, heif_channel_interleaved, W, H, 8);
  if (err.code) goto fail;
  int stride;
  uint8_t *plane = heif_image_get_plane(image, heif_channel_interleaved, &stride);
  for (int y = 0; y < H; y++) memcpy(plane + y * stride, rgb + 3 * W * y, 3 * W);
  struct heif_encoding_options *options = heif_encoding_options_alloc();
  options->image_orientation = (enum heif_orientation)orientation;
  err = heif_context_encode_image(ctx, image, encoder, options, NULL);
  heif_encoding_options_free(options);
  if (err.code) goto fail;
  err = heif_context_write_to_file(ctx, path);
  if (err.code) goto fail;
  heif_image_release(image);
  heif_encoder_release(encoder);
  heif_context_free(ctx);
  return 0;
fail:
  fprintf(stderr, "%s: %s\n", path, err.message);
  if (image) heif_image_release(image);
  if (encoder) heif_encoder_release(encoder);
  heif_context_free(ctx);
  return 1;
}

static int jxl(const char *path, const unsigned char *rgb, int orientation) {
  JxlEncoder *enc = JxlEncoderCreate(NULL);
  JxlBasicInfo info;
  JxlEncoderInitBasicInfo(&info);
  info.xsize = W;
  info.ysize = H;
  info.bits_per_sample = 8;
  info.uses_original_profile = JXL_TRUE;
  info.orientation = (JxlOrientation)orientation;
  JxlColorEncoding srgb;
  JxlColorEncodingSetToSRGB(&srgb, JXL_FALSE);
  JxlPixelFormat format = {3, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
  JxlEncoderFrameSettings *settings = NULL;
  int failed = JxlEncoderSetBasicInfo(enc, &info) != JXL_ENC_SUCCESS ||
               JxlEncoderSetColorEncoding(enc, &srgb) != JXL_ENC_SUCCESS ||
               !(settings = JxlEncoderFrameSettingsCreate(enc, NULL)) ||
               JxlEncoderSetFrameLossless(settings, JXL_TRUE) != JXL_ENC_SUCCESS ||
               JxlEncoderAddImageFrame(settings, &format, rgb, (size_t)W * H * 3) != JXL_ENC_SUCCESS;
  JxlEncoderCloseInput(enc);
  size_t cap = 1 << 16, used = 0;
  unsigned char *out = malloc(cap);
  while (!failed) {
    uint8_t *next = out + used;
    size_t avail = cap - used;
    JxlEncoderStatus s = JxlEncoderProcessOutput(enc, &next, &avail);
    used = (size_t)(next - out);
    if (s == JXL_ENC_SUCCESS) break;
    if (s != JXL_ENC_NEED_MORE_OUTPUT) { failed = 1; break; }
    cap *= 2;
    out = realloc(out, cap);
  }
  JxlEncoderDestroy(enc);
  if (failed) fprintf(stderr, "%s: libjxl's encoder failed\n", path);
  else failed = write_file(path, out, used);
  free(out);
  return failed;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]); return 2; }
  unsigned char rgb[W * H * 3];
  pattern(rgb);
  char path[4096], header[32];
  int n = snprintf(header, sizeof header, "P6\n%d %d\n255\n", W, H);
  unsigned char ppm[sizeof header + sizeof rgb];
  memcpy(ppm, header, (size_t)n);
  memcpy(ppm + n, rgb, sizeof rgb);
  snprintf(path, sizeof path, "%s/orient-source.ppm", argv[1]);
  int failed = write_file(path, ppm, (size_t)n + sizeof rgb);
  for (int o = 1; o <= 8; o++) {
    snprintf(path, sizeof path, "%s/orient-%d.heic", argv[1], o);
    failed |= heic(path, rgb, o);
    snprintf(path, sizeof path, "%s/orient-%d.jxl", argv[1], o);
    failed |= jxl(path, rgb, o);
  }
  return failed;
}
