/*
 * tool_writepng.c: the files --out and --out-dir write. PNG through libpng (premultiplied
 * formats un-premultiplied: PNG alpha is straight), raw pixels with the rows packed,
 * --out-dir's NNNN-NAME.png names (and NNNN-NAME.fNNN.png for --animate's further
 * frames), and mkdir -p for --out-dir.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool_progress.h"
#include "tool_writepng.h"

/* Straight alpha from premultiplied: PNG stores straight alpha. */
static uint8_t unpremultiply(uint8_t c, uint8_t a) {
  if (a == 0) return 0;
  unsigned v = ((unsigned)c * 255u + a / 2u) / a;
  return (uint8_t)(v > 255u ? 255u : v);
}

/* One row of one frame of image as PNG samples (RGBA, RGB or gray) in out. */
static void png_row(const pxl_image *image, int frame, int y, uint8_t *out) {
  const uint8_t *in = pxl_image_frame_pixels(image, frame) + (size_t)y * (size_t)pxl_image_stride(image);
  int width = pxl_image_width(image);
  switch (pxl_image_format(image)) {
    case PXL_FORMAT_RGBA8_PREMUL:
      for (int x = 0; x < width; x++, in += 4, out += 4) {
        out[0] = unpremultiply(in[0], in[3]);
        out[1] = unpremultiply(in[1], in[3]);
        out[2] = unpremultiply(in[2], in[3]);
        out[3] = in[3];
      }
      break;
    case PXL_FORMAT_BGRA8_PREMUL:
      for (int x = 0; x < width; x++, in += 4, out += 4) {
        out[0] = unpremultiply(in[2], in[3]);
        out[1] = unpremultiply(in[1], in[3]);
        out[2] = unpremultiply(in[0], in[3]);
        out[3] = in[3];
      }
      break;
    default: /* RGBA8, RGB8 and GRAY8 are already PNG's sample layout */
      memcpy(out, in, (size_t)width * (size_t)pxl_format_bytes_per_pixel(pxl_image_format(image)));
      break;
  }
}

static int png_color_type(pxl_format format) {
  switch (format) {
    case PXL_FORMAT_RGB8: return PNG_COLOR_TYPE_RGB;
    case PXL_FORMAT_GRAY8: return PNG_COLOR_TYPE_GRAY;
    default: return PNG_COLOR_TYPE_RGBA;
  }
}

/* Returns NULL on success, else what went wrong. */
static const char *write_png(const char *path, const pxl_image *image, int frame) {
  FILE *f = fopen(path, "wb");
  if (!f) return strerror(errno);
  int width = pxl_image_width(image);
  uint8_t *row = malloc((size_t)width * 4);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!row || !info) {
    png_destroy_write_struct(&png, NULL);
    free(row);
    fclose(f);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
    return "libpng failed to write";
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)pxl_image_height(image), 8,
               png_color_type(pxl_image_format(image)), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < pxl_image_height(image); y++) {
    png_row(image, frame, y, row);
    png_write_row(png, row);
  }
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(row);
  return fclose(f) == 0 ? NULL : strerror(errno);
}

/* Rows packed tightly: a reader needs only width, height and format, not the stride. */
static const char *write_raw(const char *path, const pxl_image *image) {
  FILE *f = fopen(path, "wb");
  if (!f) return strerror(errno);
  size_t row_bytes = (size_t)pxl_image_width(image) *
                     (size_t)pxl_format_bytes_per_pixel(pxl_image_format(image));
  for (int y = 0; y < pxl_image_height(image); y++) {
    const uint8_t *row = pxl_image_pixels(image) + (size_t)y * (size_t)pxl_image_stride(image);
    if (fwrite(row, 1, row_bytes, f) != row_bytes) {
      fclose(f);
      return strerror(errno);
    }
  }
  return fclose(f) == 0 ? NULL : strerror(errno);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* DIR/NNNN-NAME.png: NAME from the URL's last path component, without query, fragment
 * or extension, reduced to characters that are safe in a file name. The index makes
 * names unique when several URLs end alike (.../a/1.jpg, .../b/1.jpg). */
static char *output_name(const char *dir, size_t index, const char *url) {
  const char *end = url + strcspn(url, "?#");
  const char *start = end;
  while (start > url && start[-1] != '/') start--;
  const char *dot = end;
  for (const char *p = start; p < end; p++) {
    if (*p == '.') dot = p;
  }
  char name[128];
  size_t n = 0;
  for (const char *p = start; p < dot && n < sizeof name - 1; p++) {
    char c = *p;
    int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
    name[n++] = safe ? c : '_';
  }
  name[n] = '\0';
  size_t size = strlen(dir) + n + 32;
  char *path = malloc(size);
  if (path) snprintf(path, size, "%s/%04zu-%s.png", dir, index, n ? name : "image");
  return path;
}

/* mkdir -p: DIR and its missing parents, with the umask's permissions. Returns NULL on
 * success, else what went wrong. */
const char *make_dirs(const char *dir) {
  if (!*dir) return "empty directory name";
  char *path = strdup(dir);
  if (!path) return "out of memory";
  const char *error = NULL;
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char end = *p;
    *p = '\0';
    struct stat st;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) error = strerror(errno);
    else if (stat(path, &st) != 0) error = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) error = "not a directory";
    *p = end;
    if (error || end == '\0') break;
  }
  free(path);
  return error;
}

int write_output(const char *out_file, const char *out_dir, size_t index, const char *url,
                 const pxl_image *image) {
  char *path = NULL;
  if (out_file) path = strdup(out_file);
  else if (out_dir) path = output_name(out_dir, index, url);
  else return 0;
  const char *error = !path ? "out of memory"
                      : ends_with(path, ".png") ? write_png(path, image, 0)
                                                : write_raw(path, image);
  /* --animate --out-dir: every further frame as NNNN-NAME.fNNN.png (frame 0 is the
   * usual NNNN-NAME.png), so a person can step through them. */
  for (int frame = 1; !error && out_dir && frame < pxl_image_frame_count(image); frame++) {
    size_t size = strlen(path) + 16;
    char *frame_path = malloc(size);
    if (!frame_path) { error = "out of memory"; break; }
    snprintf(frame_path, size, "%.*s.f%03d.png", (int)(strlen(path) - 4), path, frame);
    error = write_png(frame_path, image, frame);
    free(frame_path);
  }
  if (error) {
    progress_clear();
    fprintf(stderr, "pixload: cannot write %s: %s\n", path ? path : "output", error);
  }
  free(path);
  return error ? -1 : 0;
}
