/*
 * bench/modules.c REPS FILES THUMBS
 *
 * The codec modules' rows of `make bench-decode` (scripts/bench-modules.sh builds and runs
 * it): CPU per image of pixload decoding through its modules against the format's library
 * called directly to the same output, in one process, interleaved image by image.
 *
 *   ours    pxl_load on a loader that loaded the modules (libpixload-heif, -jxl, -svg),
 *           the bytes served from memory by a host fetcher ("bench:N"), full size, RGBA8
 *           straight, PXL_FLAG_NO_COLOR_MANAGEMENT | PXL_FLAG_SKIP_MEMORY_CACHE, one
 *           decode thread, no disk cache: the whole pipeline (fetch, sniff, the module's
 *           header and decode, the library's canvas and delivery), from pxl_load to the
 *           callback.
 *   direct  HEIC: libheif (heif_context_read_from_memory_without_copy, the primary image,
 *           heif_decode_image to interleaved RGBA); JPEG XL: libjxl (JxlDecoder, RGBA8,
 *           the full image); SVG: librsvg (rsvg_handle_new_from_data, rendered to a cairo
 *           ARGB32 surface at the intrinsic size in pixels, then reordered to RGBA and
 *           unpremultiplied: what pixload's RGBA8 is).
 *
 * CPU time is the process's (CLOCK_PROCESS_CPUTIME_ID) on both sides: pixload decodes on
 * its own threads, and libde265 may use worker threads. FILES has KIND<TAB>PATH lines
 * (the kind's first word is the format: heic, jxl or svg); each repetition times every
 * file on both sides, alternating which goes first. Printed per kind: the median over
 * repetitions of the CPU ms per image, ours / direct, and whether it is within 1.10.
 *
 * THUMBS names 12 MP HEICs with an embedded thumbnail, one per line: pixload's 150x150
 * FILL (from the embedded thumbnail) against pixload's and libheif's full decode of the
 * same file, interleaved; the target is at most 0.2 of the full decode.
 *
 * Before timing, one untimed pass checks that both sides give the same size and says how
 * many images are byte-identical and the mean difference.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cairo.h>
#include <jxl/decode.h>
#include <libheif/heif.h>
#include <librsvg/rsvg.h>

#include "pixload.h"

enum { MAX_FILES = 256, MAX_KINDS = 16, MAX_REPS = 99, THUMB = 150 };

struct file {
  char kind[64];
  char path[1024];
  uint8_t *data;
  size_t size;
  int width, height;
};

static struct file files[MAX_FILES];
static int file_count;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "bench-modules: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) fail("cannot open", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
  if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) fail("cannot read", path);
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* --- direct: the format's library -------------------------------------------------- */

/* Straight RGBA8, tightly packed; `keep` (untimed checks only): a malloc'd copy. */
struct pixels {
  int width, height;
  uint8_t *rgba;
};

static int direct_heic(const struct file *f, struct pixels *keep) {
  struct heif_context *context = heif_context_alloc();
  struct heif_image_handle *handle = NULL;
  struct heif_image *image = NULL;
  int ok = heif_context_read_from_memory_without_copy(context, f->data, f->size, NULL).code == heif_error_Ok &&
           heif_context_get_primary_image_handle(context, &handle).code == heif_error_Ok &&
           heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGBA, NULL).code ==
               heif_error_Ok;
  if (ok && keep) {
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
    keep->width = heif_image_get_width(image, heif_channel_interleaved);
    keep->height = heif_image_get_height(image, heif_channel_interleaved);
    keep->rgba = malloc((size_t)keep->width * keep->height * 4);
    for (int y = 0; y < keep->height; y++)
      memcpy(keep->rgba + (size_t)y * keep->width * 4, plane + (size_t)y * stride, (size_t)keep->width * 4);
  }
  if (image) heif_image_release(image);
  if (handle) heif_image_handle_release(handle);
  heif_context_free(context);
  return ok;
}

static int direct_jxl(const struct file *f, struct pixels *keep) {
  static const JxlPixelFormat rgba8 = {4, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
  JxlDecoder *dec = JxlDecoderCreate(NULL);
  JxlDecoderSubscribeEvents(dec, JXL_DEC_BASIC_INFO | JXL_DEC_FULL_IMAGE);
  JxlDecoderSetUnpremultiplyAlpha(dec, JXL_TRUE);
  JxlDecoderSetInput(dec, f->data, f->size);
  JxlDecoderCloseInput(dec);
  JxlBasicInfo info;
  uint8_t *buffer = NULL;
  int ok = 0;
  for (;;) {
    JxlDecoderStatus s = JxlDecoderProcessInput(dec);
    if (s == JXL_DEC_BASIC_INFO) {
      JxlDecoderGetBasicInfo(dec, &info);
    } else if (s == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
      size_t bytes = 0;
      JxlDecoderImageOutBufferSize(dec, &rgba8, &bytes);
      buffer = malloc(bytes);
      if (!buffer || JxlDecoderSetImageOutBuffer(dec, &rgba8, buffer, bytes) != JXL_DEC_SUCCESS) break;
    } else if (s == JXL_DEC_FULL_IMAGE) {
      ok = 1;
      break;
    } else {
      break;
    }
  }
  JxlDecoderDestroy(dec);
  if (ok && keep) {
    keep->width = (int)info.xsize;
    keep->height = (int)info.ysize;
    keep->rgba = buffer;
  } else {
    free(buffer);
  }
  return ok;
}

static int direct_svg(const struct file *f, struct pixels *keep) {
  RsvgHandle *handle = rsvg_handle_new_from_data(f->data, f->size, NULL);
  if (!handle) return 0;
  rsvg_handle_set_dpi(handle, 96.0);
  double w = 0, h = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle, &w, &h)) {
    g_object_unref(handle);
    return 0;
  }
  int width = (int)ceil(w), height = (int)ceil(h);
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  cairo_t *cr = cairo_create(surface);
  RsvgRectangle viewport = {0, 0, width, height};
  int ok = rsvg_handle_render_document(handle, cr, &viewport, NULL);
  cairo_destroy(cr);
  cairo_surface_flush(surface);
  /* cairo's premultiplied B,G,R,A (native-endian ARGB32 words) to straight R,G,B,A,
   * rounding as pixload does. */
  uint8_t *data = cairo_image_surface_get_data(surface);
  int stride = cairo_image_surface_get_stride(surface);
  for (int y = 0; ok && y < height; y++) {
    uint8_t *p = data + (size_t)y * stride;
    for (int x = 0; x < width; x++, p += 4) {
      uint32_t b = p[0], g = p[1], r = p[2], a = p[3];
      if (a == 0) {
        r = g = b = 0;
      } else if (a != 255) {
        r = (r * 255 + a / 2) / a;
        g = (g * 255 + a / 2) / a;
        b = (b * 255 + a / 2) / a;
        if (r > 255) r = 255;
        if (g > 255) g = 255;
        if (b > 255) b = 255;
      }
      p[0] = (uint8_t)r;
      p[1] = (uint8_t)g;
      p[2] = (uint8_t)b;
    }
  }
  if (ok && keep) {
    keep->width = width;
    keep->height = height;
    keep->rgba = malloc((size_t)width * height * 4);
    for (int y = 0; y < height; y++)
      memcpy(keep->rgba + (size_t)y * width * 4, data + (size_t)y * stride, (size_t)width * 4);
  }
  cairo_surface_destroy(surface);
  g_object_unref(handle);
  return ok;
}

static int direct_decode(const struct file *f, struct pixels *keep) {
  if (strncmp(f->kind, "heic", 4) == 0) return direct_heic(f, keep);
  if (strncmp(f->kind, "jxl", 3) == 0) return direct_jxl(f, keep);
  if (strncmp(f->kind, "svg", 3) == 0) return direct_svg(f, keep);
  fail("unknown kind", f->kind);
  return 0;
}

/* --- ours: pixload through its modules ---------------------------------------------- */

static pxl_loader *loader;
static pxl_queue *queue;

/* The fetcher of "bench:N": file N's bytes, from memory. */
static void fetch_start(const char *url, pxl_fetch *fetch, void *user_data) {
  (void)user_data;
  int index = atoi(url + strlen("bench:"));
  if (index < 0 || index >= file_count) {
    pxl_fetch_finish(fetch, PXL_E_NOT_FOUND, "no such file");
    return;
  }
  pxl_fetch_write(fetch, files[index].data, files[index].size);
  pxl_fetch_finish(fetch, PXL_OK, NULL);
}

struct outcome {
  int done;
  pxl_status status;
  char message[256];
  pxl_image *image; /* retained when asked */
  int keep;
  int width, height;
};

static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct outcome *outcome = user_data;
  outcome->done = 1;
  outcome->status = result->status;
  snprintf(outcome->message, sizeof outcome->message, "%s", result->message);
  if (result->status == PXL_OK) {
    outcome->width = pxl_image_width(result->image);
    outcome->height = pxl_image_height(result->image);
    if (outcome->keep) outcome->image = pxl_image_retain(result->image);
  }
}

/* Loads file `index` at size x size FILL (0: full size), RGBA8, and waits for it. */
static int ours_decode(int index, int size, pxl_image **keep) {
  char url[32];
  snprintf(url, sizeof url, "bench:%d", index);
  pxl_request request;
  pxl_request_init(&request);
  request.url = url;
  request.width = size;
  request.height = size;
  request.mode = PXL_MODE_FILL;
  request.format = PXL_FORMAT_RGBA8;
  request.flags = PXL_FLAG_NO_COLOR_MANAGEMENT | PXL_FLAG_SKIP_MEMORY_CACHE;
  struct outcome outcome = {.keep = keep != NULL};
  if (pxl_load(loader, &request, queue, on_result, &outcome, NULL) != PXL_OK) fail("pxl_load refused", url);
  while (!outcome.done) {
    pxl_queue_wait(queue, 60000);
    pxl_queue_dispatch(queue, 0);
  }
  if (outcome.status != PXL_OK) {
    fprintf(stderr, "bench-modules: %s: %s: %s\n", files[index].path, pxl_status_string(outcome.status),
            outcome.message);
    return 0;
  }
  if (size > 0 && (outcome.width != size || outcome.height != size)) {
    fprintf(stderr, "bench-modules: %s: a %dx%d thumbnail\n", files[index].path, outcome.width, outcome.height);
    return 0;
  }
  if (keep) *keep = outcome.image;
  return 1;
}

static void new_loader(void) {
  pxl_config config;
  pxl_config_init(&config);
  config.decode_threads = 1;
  config.disk_cache_bytes = 0;
  if (pxl_loader_new(&config, &loader) != PXL_OK) fail("pxl_loader_new failed", NULL);
  pxl_fetcher fetcher;
  pxl_fetcher_init(&fetcher);
  fetcher.start = fetch_start;
  if (pxl_loader_add_fetcher(loader, "bench", &fetcher) != PXL_OK) fail("pxl_loader_add_fetcher failed", NULL);
  if (pxl_queue_new(&queue) != PXL_OK) fail("pxl_queue_new failed", NULL);
  char formats[256];
  pxl_loader_formats(loader, formats, sizeof formats);
  printf("pixload %s, formats: %s\n", pxl_version(), formats);
  if (!strstr(formats, "heic") || !strstr(formats, "jxl") || !strstr(formats, "svg"))
    fail("the loader lacks a codec module (make modules)", formats);
}

/* --- report ---------------------------------------------------------------------- */

static double median(double *values, int n) {
  double sorted[MAX_REPS];
  memcpy(sorted, values, sizeof(double) * (size_t)n);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      double t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* Untimed: both sides decode every file once (also the warm-up); same size, identical
 * bytes, mean difference. */
static void compare_outputs(void) {
  int identical = 0, same_size = 0;
  double diff = 0, bytes = 0;
  for (int i = 0; i < file_count; i++) {
    struct pixels direct = {0};
    pxl_image *ours = NULL;
    if (!direct_decode(&files[i], &direct)) fail("direct failed to decode", files[i].path);
    if (!ours_decode(i, 0, &ours)) fail("pixload failed to decode", files[i].path);
    files[i].width = direct.width;
    files[i].height = direct.height;
    if (pxl_image_width(ours) == direct.width && pxl_image_height(ours) == direct.height) {
      same_size++;
      const uint8_t *p = pxl_image_pixels(ours);
      int stride = pxl_image_stride(ours), differs = 0;
      for (int y = 0; y < direct.height; y++) {
        const uint8_t *a = p + (size_t)y * stride, *b = direct.rgba + (size_t)y * direct.width * 4;
        for (int x = 0; x < direct.width * 4; x++) {
          int d = abs(a[x] - b[x]);
          diff += d;
          differs |= d;
        }
      }
      bytes += (double)direct.width * direct.height * 4;
      if (!differs) identical++;
    } else {
      printf("  size differs: %s: pixload %dx%d, direct %dx%d\n", files[i].path, pxl_image_width(ours),
             pxl_image_height(ours), direct.width, direct.height);
    }
    pxl_image_release(ours);
    free(direct.rgba);
  }
  printf("full size outputs: %d/%d byte-identical, %d/%d same size, mean |difference| %.3f levels\n", identical,
         file_count, same_size, file_count, bytes > 0 ? diff / bytes : 0);
}

static void full_size_rows(int reps) {
  char kinds[MAX_KINDS][64];
  int kind_count = 0;
  for (int i = 0; i < file_count; i++) {
    int k = 0;
    while (k < kind_count && strcmp(kinds[k], files[i].kind) != 0) k++;
    if (k == kind_count) {
      if (kind_count == MAX_KINDS) fail("too many kinds", NULL);
      snprintf(kinds[kind_count++], sizeof kinds[0], "%s", files[i].kind);
    }
  }
  static double ours[MAX_KINDS][MAX_REPS], direct[MAX_KINDS][MAX_REPS];
  for (int rep = 0; rep < reps; rep++) {
    for (int i = 0; i < file_count; i++) {
      int k = 0;
      while (strcmp(kinds[k], files[i].kind) != 0) k++;
      for (int turn = 0; turn < 2; turn++) {
        int ours_side = ((rep + i + turn) % 2) == 0;
        double start = cpu_ms();
        int ok = ours_side ? ours_decode(i, 0, NULL) : direct_decode(&files[i], NULL);
        double spent = cpu_ms() - start;
        if (!ok) fail(ours_side ? "pixload failed to decode" : "direct failed to decode", files[i].path);
        (ours_side ? ours : direct)[k][rep] += spent;
      }
    }
  }
  printf("\nfull size, RGBA8, no colour management: CPU ms per image (process CPU), median of %d repetitions\n", reps);
  printf("  %-18s %5s %6s  %9s %9s %12s  %s\n", "kind", "files", "Mpx", "pixload", "direct", "pixload/dir", "within 1.10x");
  for (int k = 0; k < kind_count; k++) {
    int n = 0;
    double mpx = 0;
    for (int i = 0; i < file_count; i++)
      if (strcmp(files[i].kind, kinds[k]) == 0) {
        n++;
        mpx += (double)files[i].width * files[i].height / 1e6;
      }
    double o = median(ours[k], reps) / n, d = median(direct[k], reps) / n;
    printf("  %-18s %5d %6.2f  %9.2f %9.2f %12.3f  %s\n", kinds[k], n, mpx / n, o, d, o / d,
           o / d <= 1.10 ? "yes" : "NO");
  }
}

/* 150x150 FILL through pixload (the embedded thumbnail) against full decodes. */
static void thumbnail_row(const char *list, int reps) {
  FILE *f = fopen(list, "r");
  if (!f) fail("cannot open", list);
  int indices[MAX_FILES], count = 0;
  char line[1100];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!*line) continue;
    int found = -1;
    for (int i = 0; i < file_count && found < 0; i++)
      if (strcmp(files[i].path, line) == 0) found = i;
    if (found < 0) fail("a thumbnail file is not in the file list", line);
    indices[count++] = found;
  }
  fclose(f);
  if (count == 0) return;
  static double thumb[MAX_REPS], full[MAX_REPS], direct[MAX_REPS];
  for (int c = 0; c < count; c++)
    if (!ours_decode(indices[c], THUMB, NULL)) fail("pixload failed to make a thumbnail", files[indices[c]].path);
  for (int rep = 0; rep < reps; rep++) {
    for (int c = 0; c < count; c++) {
      const struct file *file = &files[indices[c]];
      for (int turn = 0; turn < 3; turn++) {
        int side = (rep + c + turn) % 3; /* 0 thumbnail, 1 pixload full, 2 direct full */
        double start = cpu_ms();
        int ok = side == 0 ? ours_decode(indices[c], THUMB, NULL)
               : side == 1 ? ours_decode(indices[c], 0, NULL)
                           : direct_decode(file, NULL);
        double spent = cpu_ms() - start;
        if (!ok) fail("decode failed", file->path);
        (side == 0 ? thumb : side == 1 ? full : direct)[rep] += spent;
      }
    }
  }
  double t = median(thumb, reps) / count, o = median(full, reps) / count, d = median(direct, reps) / count;
  printf("\nHEIC 150x150 FILL from the embedded thumbnail, %d files of %.1f Mpx, CPU ms per image, median of %d "
         "repetitions\n", count, (double)files[indices[0]].width * files[indices[0]].height / 1e6, reps);
  printf("  thumbnail %.2f  pixload full %.2f  libheif full %.2f  thumbnail/pixload full %.3f  "
         "thumbnail/libheif full %.3f  at most 0.2x: %s\n", t, o, d, t / o, t / d, t / o <= 0.2 && t / d <= 0.2 ? "yes" : "NO");
}

int main(int argc, char **argv) {
  if (argc != 4) fail("usage: modules REPS FILES THUMBS", NULL);
  int reps = atoi(argv[1]);
  if (reps < 1 || reps > MAX_REPS) fail("bad REPS", argv[1]);
  FILE *list = fopen(argv[2], "r");
  if (!list) fail("cannot open", argv[2]);
  char line[1100];
  while (fgets(line, sizeof line, list)) {
    line[strcspn(line, "\n")] = 0;
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    if (file_count == MAX_FILES) fail("too many files", NULL);
    *tab = 0;
    struct file *file = &files[file_count++];
    snprintf(file->kind, sizeof file->kind, "%s", line);
    snprintf(file->path, sizeof file->path, "%s", tab + 1);
    file->data = read_file(file->path, &file->size);
  }
  fclose(list);
  if (file_count == 0) fail("no files in", argv[2]);
  new_loader();
  printf("bench-modules: %d files, %d repetitions, both sides interleaved image by image\n", file_count, reps);
  compare_outputs();
  full_size_rows(reps);
  thumbnail_row(argv[3], reps);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
  return 0;
}
