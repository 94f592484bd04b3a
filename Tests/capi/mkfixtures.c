/*
 * mkfixtures: writes the images the C API tests load, into one directory.
 *
 *   mkfixtures DIR
 *
 * The pixel values are formulas (see fixture_*() below) so that the tests can check
 * decoded pixels against the same formulas instead of against stored reference data.
 * The corrupt fixture is decoded here with libjpeg before it is kept: the test means
 * "the decoder fails", and a file libjpeg merely warns about would not test that.
 *
 * Build: gcc -std=c11 -O1 Tests/capi/mkfixtures.c -ljpeg -lpng -o mkfixtures
 */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include "fixtures.h"

struct rgb_image {
  int width;
  int height;
  unsigned char *pixels; /* RGB, rows packed */
};

static void die(const char *what, const char *path) {
  fprintf(stderr, "mkfixtures: %s: %s: %s\n", what, path, errno ? strerror(errno) : "failed");
  exit(1);
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *path = malloc(n);
  if (!path) die("out of memory", name);
  snprintf(path, n, "%s/%s", dir, name);
  return path;
}

static struct rgb_image make_gradient(void) {
  struct rgb_image img = {FIXTURE_GRADIENT_W, FIXTURE_GRADIENT_H, NULL};
  img.pixels = malloc((size_t)img.width * img.height * 3);
  if (!img.pixels) die("out of memory", "gradient");
  for (int y = 0; y < img.height; y++) {
    for (int x = 0; x < img.width; x++) {
      unsigned char *p = img.pixels + ((size_t)y * img.width + x) * 3;
      p[0] = (unsigned char)fixture_gradient_r(x);
      p[1] = (unsigned char)fixture_gradient_g(y);
      p[2] = FIXTURE_GRADIENT_B;
    }
  }
  return img;
}

/* Noise compresses badly, which is the point: served through the rate-limited /slow/
 * location it keeps a transfer running for many seconds, long enough to cancel it, to
 * free a loader under it or to hold the only download slot. */
static struct rgb_image make_noise(int width, int height) {
  struct rgb_image img = {width, height, NULL};
  img.pixels = malloc((size_t)width * height * 3);
  if (!img.pixels) die("out of memory", "noise");
  uint32_t state = 12345u; /* fixed seed: the same file, and so the same size, each run */
  for (size_t i = 0; i < (size_t)width * height * 3; i++) {
    state = state * 1664525u + 1013904223u;
    img.pixels[i] = (unsigned char)(state >> 24);
  }
  return img;
}

/* Something like a photograph for the progressive fixture: smooth shading, sharp edges
 * (discs) and fine texture, so that each scan adds visible detail. */
static struct rgb_image make_scene(int width, int height) {
  struct rgb_image img = {width, height, NULL};
  img.pixels = malloc((size_t)width * height * 3);
  if (!img.pixels) die("out of memory", "scene");
  uint32_t state = 777u;
  for (int y = 0; y < height; y++) {
    for (int x = 0; x < width; x++) {
      state = state * 1664525u + 1013904223u;
      int grain = (int)(state >> 28) - 8;
      int cx = x % 96 - 48, cy = y % 96 - 48;
      int disc = cx * cx + cy * cy < 30 * 30;
      unsigned char *p = img.pixels + ((size_t)y * width + x) * 3;
      int r = x * 255 / width + grain, g = disc ? 230 + grain : y * 200 / height + grain, b = ((x / 4 + y / 4) % 2) * 90 + 60;
      p[0] = (unsigned char)(r < 0 ? 0 : r > 255 ? 255 : r);
      p[1] = (unsigned char)(g < 0 ? 0 : g > 255 ? 255 : g);
      p[2] = (unsigned char)b;
    }
  }
  return img;
}

/* progressive: 1 libjpeg's script at its default 4:2:0, 2 the same at 4:4:4 (no chroma
 * subsampling: a 1/8 thumbnail then reads DC coefficients only); 3 baseline with one
 * component, the luma (a grayscale JPEG). */
static void write_jpeg(const char *path, const struct rgb_image *img, int quality,
                       int exif_orientation, int progressive) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create", path);
  struct jpeg_compress_struct cinfo;
  struct jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr); /* a writer error here is a bug: let libjpeg exit */
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = (JDIMENSION)img->width;
  cinfo.image_height = (JDIMENSION)img->height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive == 3) jpeg_set_colorspace(&cinfo, JCS_GRAYSCALE);
  if (progressive == 2)
    for (int c = 0; c < cinfo.num_components; c++) cinfo.comp_info[c].h_samp_factor = cinfo.comp_info[c].v_samp_factor = 1;
  if (progressive == 1 || progressive == 2) jpeg_simple_progression(&cinfo); /* libjpeg's default script: 10 scans */
  if (exif_orientation) cinfo.write_JFIF_header = FALSE; /* an EXIF file has APP1 first */
  jpeg_start_compress(&cinfo, TRUE);
  if (exif_orientation) {
    /* "Exif\0\0", a little-endian TIFF header, one IFD with one entry: Orientation
     * (0x0112), SHORT, count 1, value. */
    unsigned char exif[] = {'E', 'x', 'i', 'f', 0, 0,
                            'I', 'I', 0x2a, 0, 8, 0, 0, 0,
                            1, 0,
                            0x12, 0x01, 3, 0, 1, 0, 0, 0, (unsigned char)exif_orientation, 0, 0, 0,
                            0, 0, 0, 0};
    jpeg_write_marker(&cinfo, JPEG_APP0 + 1, exif, sizeof exif);
  }
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = img->pixels + (size_t)cinfo.next_scanline * img->width * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  if (fclose(f) != 0) die("cannot write", path);
}

static void write_alpha_png(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create", path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) die("libpng init", path);
  if (setjmp(png_jmpbuf(png))) die("libpng write", path);
  png_init_io(png, f);
  png_set_IHDR(png, info, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H, 8, PNG_COLOR_TYPE_RGBA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  unsigned char row[FIXTURE_ALPHA_W * 4];
  for (int y = 0; y < FIXTURE_ALPHA_H; y++) {
    for (int x = 0; x < FIXTURE_ALPHA_W; x++) fixture_alpha_pixel(x, y, row + x * 4);
    png_write_row(png, row);
  }
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  if (fclose(f) != 0) die("cannot write", path);
}

static void write_bytes(const char *path, const void *data, size_t size);

static void le32(unsigned char *p, size_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The gradient as lossless WebP; with exif_orientation, wrapped in a VP8X container with
 * an EXIF chunk (big-endian TIFF, IFD0 holding only Orientation). */
static void write_gradient_webp(const char *path, const struct rgb_image *img, int exif_orientation) {
  uint8_t *simple = NULL;
  size_t n = WebPEncodeLosslessRGB(img->pixels, img->width, img->height, img->width * 3, &simple);
  if (n < 20) die("libwebp encode", path);
  static const unsigned char tiff[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1,
                                       0, 0, 0, 0, 0, 0, 0, 0};
  unsigned char t[sizeof tiff];
  memcpy(t, tiff, sizeof t);
  t[19] = (unsigned char)exif_orientation;
  size_t image = n - 12; /* the VP8L chunk, header included (even size: encoders pad) */
  size_t body = 4 + 18 + image + 8 + sizeof t;
  unsigned char *out = malloc(8 + body);
  if (!out) die("out of memory", path);
  memcpy(out, "RIFF", 4);
  le32(out + 4, body);
  memcpy(out + 8, "WEBPVP8X", 8);
  le32(out + 16, 10);
  memset(out + 20, 0, 10);
  out[20] = 0x08; /* EXIF present */
  le32(out + 24, (size_t)img->width - 1); /* 24-bit fields: each 4th byte is overwritten next */
  le32(out + 27, (size_t)img->height - 1);
  memcpy(out + 30, simple + 12, image);
  memcpy(out + 30 + image, "EXIF", 4);
  le32(out + 34 + image, sizeof t);
  memcpy(out + 38 + image, t, sizeof t);
  write_bytes(path, out, 8 + body);
  free(out);
  WebPFree(simple);
}

/* alpha.png's pixels as lossless WebP (exact: the colour under alpha 0 kept too). */
static uint8_t *alpha_pixels(int variant) {
  uint8_t *px = malloc((size_t)FIXTURE_ALPHA_W * FIXTURE_ALPHA_H * 4);
  if (!px) die("out of memory", "alpha");
  for (int y = 0; y < FIXTURE_ALPHA_H; y++)
    for (int x = 0; x < FIXTURE_ALPHA_W; x++) {
      uint8_t *p = px + ((size_t)y * FIXTURE_ALPHA_W + x) * 4;
      fixture_alpha_pixel(x, y, p);
      if (variant) p[2] = (uint8_t)(p[2] ^ (variant * 37)); /* later frames: another blue */
    }
  return px;
}

static void write_alpha_webp(const char *path) {
  uint8_t *px = alpha_pixels(0), *out = NULL;
  size_t n = WebPEncodeLosslessRGBA(px, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H, FIXTURE_ALPHA_W * 4, &out);
  if (n == 0) die("libwebp encode", path);
  write_bytes(path, out, n);
  WebPFree(out);
  free(px);
}

static void write_anim_webp(const char *path) {
  WebPAnimEncoderOptions options;
  WebPConfig config;
  if (!WebPAnimEncoderOptionsInit(&options) || !WebPConfigInit(&config)) die("libwebp init", path);
  config.lossless = 1;
  config.exact = 1;
  options.anim_params.loop_count = 2;
  WebPAnimEncoder *enc = WebPAnimEncoderNew(FIXTURE_ALPHA_W, FIXTURE_ALPHA_H, &options);
  if (!enc) die("libwebp anim encoder", path);
  int timestamp = 0;
  for (int i = 0; i < 3; i++) {
    WebPPicture pic;
    if (!WebPPictureInit(&pic)) die("libwebp picture", path);
    pic.use_argb = 1;
    pic.width = FIXTURE_ALPHA_W;
    pic.height = FIXTURE_ALPHA_H;
    uint8_t *px = alpha_pixels(i);
    if (!WebPPictureImportRGBA(&pic, px, FIXTURE_ALPHA_W * 4) || !WebPAnimEncoderAdd(enc, &pic, timestamp, &config))
      die("libwebp anim add", path);
    WebPPictureFree(&pic);
    free(px);
    timestamp += 100;
  }
  WebPData data;
  WebPDataInit(&data);
  if (!WebPAnimEncoderAdd(enc, NULL, timestamp, NULL) || !WebPAnimEncoderAssemble(enc, &data))
    die("libwebp anim assemble", path);
  write_bytes(path, data.bytes, data.size);
  WebPDataClear(&data);
  WebPAnimEncoderDelete(enc);
}

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = malloc((size_t)n);
  if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
  fclose(f);
  *size = (size_t)n;
  return data;
}

static void write_bytes(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create", path);
  if (fwrite(data, 1, size, f) != size || fclose(f) != 0) die("cannot write", path);
}

struct jpeg_failure {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
};

static void jpeg_fail(j_common_ptr cinfo) {
  longjmp(((struct jpeg_failure *)cinfo->err)->jump, 1);
}

static void jpeg_quiet(j_common_ptr cinfo) { (void)cinfo; }

/* 1 if libjpeg raises an error (not a warning) while decoding data. */
static int libjpeg_rejects(const unsigned char *data, size_t size) {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_failure err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.output_message = jpeg_quiet; /* the expected failure is not news */
  unsigned char *row = NULL;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    free(row);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  jpeg_start_decompress(&cinfo);
  row = malloc((size_t)cinfo.output_width * cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height) jpeg_read_scanlines(&cinfo, &row, 1);
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  free(row);
  return 0;
}

/* The gradient JPEG cut just before its frame header (SOF): a valid SOI and tables,
 * then the end of the data. libjpeg stops with "JPEG datastream contains no image",
 * an error; a file cut inside the scan data would only warn and decode grey rows. */
static void write_corrupt_jpeg(const char *path, const char *from) {
  size_t size;
  unsigned char *data = read_file(from, &size);
  size_t cut = 0;
  for (size_t i = 2; i + 1 < size; i++) {
    if (data[i] == 0xff && (data[i + 1] == 0xc0 || data[i + 1] == 0xc2)) {
      cut = i;
      break;
    }
  }
  if (cut == 0) die("no SOF marker in", from);
  if (!libjpeg_rejects(data, cut)) die("libjpeg accepts the truncated file", path);
  if (libjpeg_rejects(data, size)) die("libjpeg rejects the intact file", from);
  write_bytes(path, data, cut);
  free(data);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mkfixtures DIR\n");
    return 2;
  }
  const char *dir = argv[1];

  struct rgb_image gradient = make_gradient();
  char *path = join(dir, FIXTURE_GRADIENT_JPG);
  write_jpeg(path, &gradient, 92, 0, 0);
  char *corrupt = join(dir, FIXTURE_CORRUPT_JPG);
  write_corrupt_jpeg(corrupt, path);
  free(corrupt);
  free(path);

  path = join(dir, FIXTURE_ORIENTED_JPG);
  write_jpeg(path, &gradient, 92, 6, 0);
  free(path);
  path = join(dir, FIXTURE_GRAY_JPG);
  write_jpeg(path, &gradient, 92, 8, 3);
  free(path);
  path = join(dir, FIXTURE_ORIENTED_WEBP);
  write_gradient_webp(path, &gradient, 6);
  free(path);
  free(gradient.pixels);

  struct rgb_image noise = make_noise(FIXTURE_NOISE_W, FIXTURE_NOISE_H);
  path = join(dir, FIXTURE_NOISE_JPG);
  write_jpeg(path, &noise, 90, 0, 0);
  free(path);
  free(noise.pixels);

  noise = make_noise(FIXTURE_MEDIUM_W, FIXTURE_MEDIUM_H);
  path = join(dir, FIXTURE_MEDIUM_JPG);
  write_jpeg(path, &noise, 90, 0, 0);
  free(path);
  free(noise.pixels);

  struct rgb_image scene = make_scene(FIXTURE_PROGRESSIVE_W, FIXTURE_PROGRESSIVE_H);
  path = join(dir, FIXTURE_PROGRESSIVE_JPG);
  write_jpeg(path, &scene, 90, 0, 1);
  free(path);
  path = join(dir, FIXTURE_PROGRESSIVE444_JPG);
  write_jpeg(path, &scene, 90, 0, 2);
  free(path);
  free(scene.pixels);

  path = join(dir, FIXTURE_ALPHA_PNG);
  write_alpha_png(path);
  free(path);
  path = join(dir, FIXTURE_ALPHA_WEBP);
  write_alpha_webp(path);
  free(path);
  /* A photo-like lossy WebP big enough that its decode takes tens of ms (test_webp_streamed). */
  scene = make_scene(FIXTURE_PHOTO_WEBP_W, FIXTURE_PHOTO_WEBP_H);
  path = join(dir, FIXTURE_PHOTO_WEBP);
  uint8_t *photo = NULL;
  size_t photo_size = WebPEncodeRGB(scene.pixels, scene.width, scene.height, scene.width * 3, 80, &photo);
  if (photo_size == 0) die("libwebp encode", path);
  write_bytes(path, photo, photo_size);
  WebPFree(photo);
  free(path);
  free(scene.pixels);
  path = join(dir, FIXTURE_ANIM_WEBP);
  write_anim_webp(path);
  free(path);

  /* What a captive portal or a misconfigured CDN returns under an image URL. */
  static const char html[] =
      "<!DOCTYPE html>\n<html><head><title>Not Found</title></head>\n"
      "<body><h1>Sorry, this page is not an image</h1></body></html>\n";
  path = join(dir, FIXTURE_NOT_AN_IMAGE);
  write_bytes(path, html, sizeof html - 1);
  free(path);
  return 0;
}
