/*
 * Registered codecs (pixload.h, "Codecs") proven with a format pixload does not ship:
 * QOI (https://qoiformat.org/qoi-specification.pdf), encoded and decoded from the spec in
 * qoi_codec.h (which the QOI fuzz target registers too). Its files are written into the
 * served directory at test time from alpha.png's formula, so the codec's output at every
 * size and pixel format must equal the built-in PNG decoder's output of alpha.png (same
 * pixels in, same resize, colour and format path out). Also: registration rules, destroy exactly once (remove, failed add, loader free),
 * max_pixels before any buffer, codec errors, orientation, choose_size, frames, the
 * format list, the disk variant key changing with the codec's version, and the
 * "install libpixload-X" error for a known format without its module.
 */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

#include "qoi_codec.h"

/* alpha.png's pixels as QOI, written as alpha.qoi; also a truncated copy and a huge one. */
static void write_qoi_fixtures(const struct test_env *env) {
  uint8_t *rgba = malloc(FIXTURE_ALPHA_W * FIXTURE_ALPHA_H * 4);
  for (int y = 0; y < FIXTURE_ALPHA_H; y++)
    for (int x = 0; x < FIXTURE_ALPHA_W; x++) fixture_alpha_pixel(x, y, rgba + (y * FIXTURE_ALPHA_W + x) * 4);
  size_t size = 0;
  uint8_t *qoi = qoi_encode(rgba, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H, &size);
  write_fixture(env, "alpha.qoi", qoi, size);
  write_fixture(env, "truncated.qoi", qoi, size / 2);
  /* 100000 x 100000 declared, a few bytes of data. */
  uint8_t huge[22] = {'q', 'o', 'i', 'f', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  write_fixture(env, "huge.qoi", huge, sizeof huge);
  free(qoi);
  free(rgba);
}

/* Loads url at w x h mode format; the image (retained) or NULL, status in *status. */
static pxl_image *load(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *url, int w, int h,
                       pxl_mode mode, pxl_format format, uint32_t flags, pxl_status *status, char *message,
                       pxl_source *source) {
  pxl_request request;
  request_for(&request, url, w, h, mode, format);
  request.flags |= flags;
  struct capture got;
  memset(&got, 0, sizeof got);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  *status = got.status;
  if (message) snprintf(message, 256, "%s", got.message);
  if (source) *source = got.source;
  pxl_image *image = got.image ? pxl_image_retain(got.image) : NULL;
  capture_reset(&got);
  return image;
}

/* The last line the loader logged about pxl_loader_add_codec (other threads may log too). */
struct add_codec_log {
  pthread_mutex_t lock;
  char last[512];
};

static void keep_add_codec_log(int32_t level, const char *message, void *user_data) {
  struct add_codec_log *log = user_data;
  if (level != PXL_LOG_ERROR || !strstr(message, "pxl_loader_add_codec")) return;
  pthread_mutex_lock(&log->lock);
  snprintf(log->last, sizeof log->last, "%s", message);
  pthread_mutex_unlock(&log->lock);
}

static int add_codec_logged(struct add_codec_log *log, const char *words) {
  pthread_mutex_lock(&log->lock);
  int found = strstr(log->last, words) != NULL;
  if (!found) fprintf(stderr, "  log: \"%s\", wanted \"%s\"\n", log->last, words);
  log->last[0] = 0;
  pthread_mutex_unlock(&log->lock);
  return found;
}

/* Number of bytes that differ between two images of the same size and format. */
static long differing(const pxl_image *a, const pxl_image *b) {
  if (pxl_image_width(a) != pxl_image_width(b) || pxl_image_height(a) != pxl_image_height(b)) return -1;
  long bad = 0;
  int row = pxl_image_width(a) * pxl_format_bytes_per_pixel(pxl_image_format(a));
  for (int y = 0; y < pxl_image_height(a); y++) {
    const uint8_t *pa = pxl_image_pixels(a) + (size_t)y * pxl_image_stride(a);
    const uint8_t *pb = pxl_image_pixels(b) + (size_t)y * pxl_image_stride(b);
    for (int i = 0; i < row; i++) bad += pa[i] != pb[i];
  }
  return bad;
}

void test_codec_qoi(const struct test_env *env) {
  write_qoi_fixtures(env);
  struct test_url qoi = test_url(env, "/alpha.qoi", "codec-qoi");
  struct test_url png = test_url(env, "/" FIXTURE_ALPHA_PNG, "codec-qoi-png");
  struct test_url truncated = test_url(env, "/truncated.qoi", "codec-qoi");
  struct test_url huge = test_url(env, "/huge.qoi", "codec-qoi");
  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = ""; /* none: this test is about the interface */
  struct add_codec_log log = {PTHREAD_MUTEX_INITIALIZER, ""};
  config.log = keep_add_codec_log;
  config.log_user_data = &log;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  pxl_status status;
  char message[256];
  pxl_source source;

  char formats[128];
  CHECK_INT(pxl_loader_formats(loader, formats, sizeof formats), strlen("jpeg png webp gif avif"));
  CHECKF(strcmp(formats, "jpeg png webp gif avif") == 0, "formats: %s", formats);

  /* Before registration: not an image. */
  pxl_image *image = load(env, loader, queue, qoi.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_E_NOT_AN_IMAGE);
  CHECK(image == NULL);

  /* Refusals: each calls destroy once. */
  struct qoi_state bad = {0};
  pxl_codec c = qoi_codec(&bad, "1");
  CHECK_STATUS(pxl_loader_add_codec(NULL, &c), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_codec(loader, NULL), PXL_E_INVALID_ARGUMENT);
  c.id = "QOI";
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  CHECK(add_codec_logged(&log, "codec id \"QOI\""));
  c.id = "png";
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  c.id = "qoi";
  c.decode = NULL;
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  CHECK(add_codec_logged(&log, "no decode (required)"));
  c = qoi_codec(&bad, NULL); /* version is required, as id is */
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  CHECK(add_codec_logged(&log, "no version (required)"));
  c = qoi_codec(&bad, "1");
  c.struct_size = 8;
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  CHECK(add_codec_logged(&log, "struct_size 8"));
  c.struct_size = (size_t)1 << 20;
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_E_INVALID_ARGUMENT);
  /* A codec's rule (pixload.h, "Extensions"; not a processor's or a fetcher's): every
   * failure but the NULL codec calls destroy: NULL loader, bad id twice, no decode, no
   * version, struct_size twice. */
  CHECK_INT(atomic_load(&bad.destroyed), 7);
  CHECK_STATUS(pxl_codec_init_size(NULL, sizeof c), PXL_E_INVALID_ARGUMENT);

  struct qoi_state s = {0};
  c = qoi_codec(&s, "1.0");
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
  struct qoi_state twice = {0};
  pxl_codec c2 = qoi_codec(&twice, "2");
  CHECK_STATUS(pxl_loader_add_codec(loader, &c2), PXL_E_INVALID_ARGUMENT); /* the id is taken */
  CHECK_INT(atomic_load(&twice.destroyed), 1);
  size_t needed = pxl_loader_formats(loader, NULL, 0);
  CHECK_INT(needed, strlen("jpeg png webp gif avif qoi"));
  pxl_loader_formats(loader, formats, sizeof formats);
  CHECKF(strcmp(formats, "jpeg png webp gif avif qoi") == 0, "formats: %s", formats);
  char small[6];
  CHECK_INT(pxl_loader_formats(loader, small, sizeof small), needed);
  CHECKF(strcmp(small, "jpeg ") == 0, "truncated formats: '%s'", small);

  /* Every size, mode and format: the QOI's output equals alpha.png's. */
  static const struct { int w, h; pxl_mode mode; } sizes[] = {
      {0, 0, PXL_MODE_FIT}, {64, 64, PXL_MODE_FIT}, {40, 40, PXL_MODE_FILL}, {150, 0, PXL_MODE_FIT}, {33, 71, PXL_MODE_FILL}};
  static const pxl_format fmts[] = {PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL, PXL_FORMAT_BGRA8_PREMUL,
                                    PXL_FORMAT_RGB8, PXL_FORMAT_GRAY8};
  int compared = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
      pxl_image *a = load(env, loader, queue, qoi.url, sizes[i].w, sizes[i].h, sizes[i].mode, fmts[f], 0, &status, message, NULL);
      CHECKF(status == PXL_OK, "qoi %dx%d format %d: %d %s", sizes[i].w, sizes[i].h, fmts[f], status, message);
      pxl_image *b = load(env, loader, queue, png.url, sizes[i].w, sizes[i].h, sizes[i].mode, fmts[f], 0, &status, message, NULL);
      CHECK_STATUS(status, PXL_OK);
      if (a && b) {
        long d = differing(a, b);
        CHECKF(d == 0, "qoi vs png at %dx%d mode %d format %d: %ld bytes differ (%dx%d vs %dx%d)", sizes[i].w, sizes[i].h,
               sizes[i].mode, fmts[f], d, pxl_image_width(a), pxl_image_height(a), pxl_image_width(b), pxl_image_height(b));
        CHECK_INT(pxl_image_original_width(a), FIXTURE_ALPHA_W);
        compared++;
      }
      pxl_image_release(a);
      pxl_image_release(b);
    }
  CHECK_INT(compared, 25);
  int decodes = atomic_load(&s.decodes);
  /* The memory cache holds a QOI result like any other. */
  image = load(env, loader, queue, qoi.url, 64, 64, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, &source);
  CHECK_STATUS(status, PXL_OK);
  CHECK_INT(source, PXL_SOURCE_MEMORY);
  CHECK_INT(atomic_load(&s.decodes), decodes);
  pxl_image_release(image);

  /* Codec errors: corrupt with the codec's message; max_pixels before read past the header. */
  image = load(env, loader, queue, truncated.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_E_CORRUPT_IMAGE);
  CHECKF(strstr(message, "qoi: truncated") != NULL, "message: %s", message);
  decodes = atomic_load(&s.decodes);
  image = load(env, loader, queue, huge.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_E_TOO_MANY_PIXELS);
  CHECK_INT(atomic_load(&s.decodes), decodes);
  /* A status this library does not know counts as PXL_E_IO (pixload.h, "Extensions"). */
  s.fail_with = (pxl_status)1234;
  struct test_url odd = test_url(env, "/alpha.qoi", "codec-qoi-unknown-status");
  image = load(env, loader, queue, odd.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_E_IO);
  CHECKF(strstr(message, "qoi: told to fail") != NULL, "message: %s", message);
  s.fail_with = PXL_OK;

  /* Removal: the format is gone (and the memory cache's result, made by the codec, is
   * not served for the loader without it); destroy once. */
  CHECK_STATUS(pxl_loader_remove_codec(loader, "qoi"), PXL_OK);
  CHECK_INT(atomic_load(&s.destroyed), 1);
  CHECK_STATUS(pxl_loader_remove_codec(loader, "qoi"), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_loader_remove_codec(loader, NULL), PXL_E_INVALID_ARGUMENT);
  image = load(env, loader, queue, qoi.url, 64, 64, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_E_NOT_AN_IMAGE);

  /* Orientation 6 reported by the header: applied (axes swap), or not with the flag. */
  struct qoi_state oriented = {.orientation = 6};
  c = qoi_codec(&oriented, "1.0");
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
  struct test_url qoi2 = test_url(env, "/alpha.qoi", "codec-qoi-oriented");
  image = load(env, loader, queue, qoi2.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_OK);
  if (image) {
    CHECK_INT(pxl_image_width(image), FIXTURE_ALPHA_H);
    CHECK_INT(pxl_image_height(image), FIXTURE_ALPHA_W);
    /* Rotated 90 clockwise: display (x, y) is stored (y, H - 1 - x). */
    unsigned char want[4];
    fixture_alpha_pixel(7, FIXTURE_ALPHA_H - 1 - 5, want);
    CHECKF(memcmp(pixel_at(image, 5, 7), want, 4) == 0, "rotated pixel");
  }
  pxl_image_release(image);
  image = load(env, loader, queue, qoi2.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, PXL_FLAG_IGNORE_ORIENTATION, &status,
               message, NULL);
  CHECK_STATUS(status, PXL_OK);
  if (image) CHECK_INT(pxl_image_width(image), FIXTURE_ALPHA_W);
  pxl_image_release(image);
  CHECK_STATUS(pxl_loader_remove_codec(loader, "qoi"), PXL_OK);

  /* choose_size: asked for the whole image at the thumbnail's scale, drawn at that size. */
  struct qoi_state chooser = {.choose = 1};
  c = qoi_codec(&chooser, "1.0");
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
  struct test_url qoi3 = test_url(env, "/alpha.qoi", "codec-qoi-choose");
  image = load(env, loader, queue, qoi3.url, 30, 30, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_OK);
  CHECK_INT(atomic_load(&chooser.chosen), 1);
  CHECK_INT(chooser.asked_w, 30);
  CHECK_INT(chooser.asked_h, 20);
  if (image) { CHECK_INT(pxl_image_width(image), 30); CHECK_INT(pxl_image_height(image), 20); }
  pxl_image_release(image);
  CHECK_STATUS(pxl_loader_remove_codec(loader, "qoi"), PXL_OK);

  /* Frames: PXL_FLAG_ANIMATE gives each, resized; without it the first (decode). */
  struct qoi_state animated = {.frame_count = 3};
  c = qoi_codec(&animated, "1.0");
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
  struct test_url qoi4 = test_url(env, "/alpha.qoi", "codec-qoi-frames");
  image = load(env, loader, queue, qoi4.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, PXL_FLAG_ANIMATE, &status, message, NULL);
  CHECK_STATUS(status, PXL_OK);
  if (image) {
    CHECK_INT(pxl_image_frame_count(image), 3);
    CHECK_INT(pxl_image_source_frame_count(image), 3);
    CHECK_INT(pxl_image_frame_duration_ms(image, 2), 42);
    unsigned char want[4];
    fixture_alpha_pixel(100, 50, want);
    const uint8_t *f2 = pxl_image_frame_pixels(image, 2) + 50 * pxl_image_stride(image) + 100 * 4;
    CHECKF(f2[0] == (uint8_t)(want[0] + 20) && f2[1] == want[1], "frame 2 pixel %d,%d", f2[0], f2[1]);
  }
  pxl_image_release(image);
  CHECK_INT(atomic_load(&animated.frames_decodes), 1);
  image = load(env, loader, queue, qoi4.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECK_STATUS(status, PXL_OK);
  if (image) CHECK_INT(pxl_image_frame_count(image), 1);
  pxl_image_release(image);

  /* Freeing the loader destroys the codec still registered, before it returns. */
  pxl_loader_free(loader);
  CHECK_INT(atomic_load(&animated.destroyed), 1);
  CHECK_INT(atomic_load(&oriented.destroyed), 1);
  CHECK_INT(atomic_load(&chooser.destroyed), 1);
  pxl_queue_free(queue);
}

/* One loader's life over the disk cache in `directory`, with the QOI codec at `version`
 * (NULL: none) and no modules: a 48x48 thumbnail of `url`, then its stats; the loader
 * freed (which lets the disk tier write the variant before the next loader looks). */
struct disk_round {
  pxl_status status;
  char message[256];
  pxl_source source;
  int decodes;
  uint64_t variant_hits;
};

static struct disk_round disk_round(const struct test_env *env, const char *directory, const char *version,
                                    const char *url) {
  struct disk_round r = {.source = PXL_SOURCE_MEMORY};
  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = "";
  config.disk_cache_bytes = 8 << 20;
  config.disk_cache_dir = directory;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct qoi_state s = {0};
  if (version) {
    pxl_codec c = qoi_codec(&s, version);
    CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
  }
  pxl_image_release(load(env, loader, queue, url, 48, 48, PXL_MODE_FILL, PXL_FORMAT_RGBA8_PREMUL, 0, &r.status, r.message,
                         &r.source));
  pxl_stats stats;
  stats.struct_size = sizeof stats;
  CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
  r.variant_hits = stats.variant_hits;
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  r.decodes = atomic_load(&s.decodes);  /* after free: the codec's destroy ran */
  return r;
}

/* A thumbnail a codec made is kept on disk with the codec's id and version: a loader with
 * the same version is served from disk, one with another decodes anew, and one without
 * the codec drops it (so the codec back decodes anew too). */
void test_codec_disk_variants(const struct test_env *env) {
  write_qoi_fixtures(env);
  char directory[] = "/tmp/pxl-codec-variants.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  struct test_url u = test_url(env, "/alpha.qoi", "codec-disk");
  static const char *versions[] = {"1.0", "1.0", "2.0", "2.0", NULL, "2.0"};
  static const int decoded[] = {1, 0, 1, 0, 0, 1};
  for (int round = 0; round < 6; round++) {
    struct disk_round r = disk_round(env, directory, versions[round], u.url);
    const char *version = versions[round] ? versions[round] : "none";
    CHECKF(r.status == (versions[round] ? PXL_OK : PXL_E_NOT_AN_IMAGE), "round %d (version %s): %d %s", round, version,
           r.status, r.message);
    CHECKF(r.decodes == decoded[round], "round %d (version %s): %d decodes, want %d", round, version, r.decodes,
           decoded[round]);
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", directory);
  CHECK(system(command) == 0);
}

/* A thumbnail the built-in decoders made does not depend on the codecs registered: a
 * JPEG's stays a disk hit when a codec is added, upgraded or removed between loaders. */
void test_codec_disk_variants_builtin(const struct test_env *env) {
  char directory[] = "/tmp/pxl-codec-builtin.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "codec-builtin");
  static const char *versions[] = {NULL, "1.0", "2.0", NULL, "2.0"};
  for (int round = 0; round < 5; round++) {
    struct disk_round r = disk_round(env, directory, versions[round], u.url);
    const char *version = versions[round] ? versions[round] : "none";
    CHECKF(r.status == PXL_OK, "round %d: %s", round, r.message);
    CHECKF(r.source == (round == 0 ? PXL_SOURCE_NETWORK : PXL_SOURCE_DISK), "round %d (qoi %s): source %d", round,
           version, r.source);
    CHECKF(r.variant_hits == (round == 0 ? 0u : 1u), "round %d (qoi %s): %llu variant hits", round, version,
           (unsigned long long)r.variant_hits);
    CHECK_INT(r.decodes, 0);
  }
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", directory);
  CHECK(system(command) == 0);
}

/* A codec whose decode runs until its cancel flag is raised (at most 10 s), while `slow`;
 * a 2x2 grey image otherwise. */
struct slow_state {
  atomic_int slow, started, finished, saw_cancel;
  const volatile int32_t *_Atomic flag; /* the decode's flag, while it runs */
};

static int32_t slow_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  return size >= 4 && memcmp(data, "slow", 4) == 0;
}

static pxl_status slow_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message, size_t cap,
                              void *user_data) {
  (void)data; (void)size; (void)message; (void)cap; (void)user_data;
  header->width = 2;
  header->height = 2;
  return PXL_OK;
}

static pxl_status slow_decode(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap,
                              void *user_data) {
  (void)data; (void)size; (void)message; (void)cap;
  struct slow_state *s = user_data;
  memset(t->pixels, 128, t->stride * (size_t)t->height);
  if (!atomic_load(&s->slow)) return PXL_OK;
  atomic_store(&s->flag, t->cancel);
  atomic_store(&s->started, 1);
  double until = now_ms() + 10000;
  while (!__atomic_load_n(t->cancel, __ATOMIC_ACQUIRE) && now_ms() < until) sleep_ms(1);
  int cancelled = __atomic_load_n(t->cancel, __ATOMIC_ACQUIRE) != 0;
  atomic_store(&s->flag, NULL);
  atomic_store(&s->saw_cancel, cancelled);
  atomic_store(&s->finished, 1);
  return cancelled ? PXL_E_CANCELLED : PXL_OK;
}

/* Waits (dispatching nothing) until *flag is set; 1 if it was within timeout_ms. */
static int wait_flag(const struct test_env *env, atomic_int *flag, int timeout_ms) {
  double until = now_ms() + (double)timeout_ms * env->slow_factor;
  while (!atomic_load(flag) && now_ms() < until) sleep_ms(1);
  return atomic_load(flag) != 0;
}

/* The cancel flag a codec polls is raised when every request waiting on its decode is
 * cancelled, not only when the loader is freed: two merged requests, the first cancelled
 * (the decode goes on for the other), then the second (the flag rises, the codec stops). */
void test_codec_cancel_flag(const struct test_env *env) {
  write_fixture(env, "slow.bin", (const uint8_t *)"slow....", 8);
  struct test_url u = test_url(env, "/slow.bin", "codec-cancel");
  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = "";
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct slow_state s = {0};
  atomic_store(&s.slow, 1);
  pxl_codec c;
  pxl_codec_init(&c);
  c.id = "slow";
  c.version = "1";
  c.user_data = &s;
  c.sniff = slow_sniff;
  c.read_header = slow_header;
  c.decode = slow_decode;
  CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);

  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got[2];
  memset(got, 0, sizeof got);
  pxl_token tokens[2];
  for (int i = 0; i < 2; i++) CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], &tokens[i]), PXL_OK);
  CHECKF(wait_flag(env, &s.started, 10000), "the decode did not start");
  const volatile int32_t *flag = atomic_load(&s.flag);
  CHECK(flag != NULL);

  CHECK_STATUS(pxl_cancel(loader, tokens[0]), PXL_OK);
  /* The decode waits for the flag (or 10 s): it is still running, and its flag valid. */
  CHECKF(flag && *flag == 0 && !atomic_load(&s.finished), "one request still waits: the flag stays down");
  double cancelled_at = now_ms();
  CHECK_STATUS(pxl_cancel(loader, tokens[1]), PXL_OK);
  CHECKF(wait_flag(env, &s.finished, 5000), "the decode did not end after the last cancel");
  CHECKF(atomic_load(&s.saw_cancel), "the codec ended without seeing its flag raised");
  CHECKF(now_ms() - cancelled_at < 5000.0 * env->slow_factor, "%.0f ms to stop", now_ms() - cancelled_at);
  CHECK(drain_until(env, queue, &got[1].calls, 1, 10000));
  CHECK(drain_until(env, queue, &got[0].calls, 1, 10000));
  for (int i = 0; i < 2; i++) {
    CHECK_INT(got[i].status, PXL_E_CANCELLED);
    capture_reset(&got[i]);
  }

  /* Nothing of the cancelled decode stays: the next request decodes. */
  atomic_store(&s.slow, 0);
  struct capture again;
  memset(&again, 0, sizeof again);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &again), PXL_OK);
  CHECKF(again.status == PXL_OK, "%s", again.message);
  capture_reset(&again);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* A format pixload ships a module for, without the module: unsupported, naming the
 * package. */
void test_codec_module_missing(const struct test_env *env) {
  static const struct { const char *name; const char *package; const char *bytes; size_t size; } files[] = {
      {"missing.svg", "libpixload-svg", "\xef\xbb\xbf<?xml version=\"1.0\"?>\n<!-- c -->\n<!DOCTYPE svg>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"/>", 0},
      {"missing.jxl", "libpixload-jxl", "\xff\x0a\x00\x01\x02\x03\x04\x05", 8},
      {"missing.heic", "libpixload-heif", "\x00\x00\x00\x18" "ftypheic\x00\x00\x00\x00mif1heic", 24},
  };
  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = "";
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    write_fixture(env, files[i].name, (const uint8_t *)files[i].bytes, files[i].size ? files[i].size : strlen(files[i].bytes));
    char path[64];
    snprintf(path, sizeof path, "/%s", files[i].name);
    struct test_url u = test_url(env, path, "codec-missing");
    pxl_status status;
    char message[256];
    pxl_image *image = load(env, loader, queue, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
    CHECKF(status == PXL_E_UNSUPPORTED_IMAGE, "%s: %d %s", files[i].name, status, message);
    CHECKF(strstr(message, files[i].package) != NULL, "%s: message %s", files[i].name, message);
    pxl_image_release(image);
  }
  /* A listed module that is not there fails the loader. */
  config.codec_modules = "nosuchformat";
  pxl_loader *none = NULL;
  CHECK_STATUS(pxl_loader_new(&config, &none), PXL_E_UNSUPPORTED);
  CHECK(none == NULL);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ThreadSanitizer cannot start threads in a child forked from a threaded process: the
 * subtests that make a loader in a child are skipped under it. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif

static void log_into(int32_t level, const char *message, void *user_data) {
  (void)level;
  char *buffer = user_data;
  if (strstr(message, "runs without")) snprintf(buffer, 512, "%s", message);
}

/* In a child whose processes may create neither user namespaces nor landlock rulesets (a
 * seccomp filter, which the worker inherits): with PXL_ISOLATION_REQUIRED the isolated
 * format fails with PXL_E_DECODER_FAILED naming the missing layers; without, it decodes
 * and the log says once which layers are missing. 0 when both hold. */
static int degraded_isolation(const struct test_env *env, pxl_config *config, const char *url) {
  fflush(NULL);
  pid_t child = fork();
  if (child != 0) {
    int wstatus = 0;
    if (child < 0 || waitpid(child, &wstatus, 0) != child) return 100;
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 101;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_landlock_create_ruleset, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) _exit(10);
  int result = 0;
  pxl_queue *queue = new_queue();
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got;
  config->isolation = PXL_ISOLATION_MODULES | PXL_ISOLATION_REQUIRED;
  pxl_loader *loader = NULL;
  if (pxl_loader_new(config, &loader) != PXL_OK) _exit(11);
  memset(&got, 0, sizeof got);
  load_and_wait(env, loader, queue, &request, &got);
  if (got.status != PXL_E_DECODER_FAILED || !strstr(got.message, "PXL_ISOLATION_REQUIRED") ||
      !strstr(got.message, "namespaces") || !strstr(got.message, "landlock")) {
    fprintf(stderr, "required, degraded: %d %s\n", got.status, got.message);
    result |= 1;
  }
  capture_reset(&got);
  pxl_loader_free(loader);
  char logged[512] = "";
  config->isolation = PXL_ISOLATION_MODULES;
  config->log = log_into;
  config->log_user_data = logged;
  if (pxl_loader_new(config, &loader) != PXL_OK) _exit(12);
  memset(&got, 0, sizeof got);
  request.flags |= PXL_FLAG_RELOAD;
  load_and_wait(env, loader, queue, &request, &got);
  if (got.status != PXL_OK) result |= 2;
  if (!strstr(logged, "namespaces") || !strstr(logged, "landlock")) {
    fprintf(stderr, "degraded log: %s\n", logged);
    result |= 4;
  }
  capture_reset(&got);
  pxl_loader_free(loader);
  _exit(result);
}

/* PIXLOAD_CODEC_PATH set to PXL_TEST_HOSTILE_DIR (run.sh builds the hostile module
 * there), its old value in *saved for restore_codec_path; 0 when that is not set. */
static int use_hostile_module(char **saved) {
  const char *dir = getenv("PXL_TEST_HOSTILE_DIR");
  CHECKF(dir != NULL, "PXL_TEST_HOSTILE_DIR is not set (run.sh builds the hostile module)");
  if (!dir) return 0;
  const char *old_path = getenv("PIXLOAD_CODEC_PATH");
  *saved = old_path ? strdup(old_path) : NULL;
  setenv("PIXLOAD_CODEC_PATH", dir, 1);
  return 1;
}

static void restore_codec_path(char *saved) {
  if (saved) setenv("PIXLOAD_CODEC_PATH", saved, 1);
  else unsetenv("PIXLOAD_CODEC_PATH");
  free(saved);
}

/* Issue 39: a codec module that misbehaves on purpose (Tests/worker/hostile_module.c),
 * loaded as a module through pxl_config.codec_modules and PIXLOAD_CODEC_PATH (run.sh builds
 * it into PXL_TEST_HOSTILE_DIR), through a real loader at the default isolation: each
 * hostile case ends in PXL_E_DECODER_FAILED or a refusal, the host survives, what it
 * tried left no trace, and the next image decodes. With PXL_ISOLATION_NONE the segfault
 * does crash a child process (so this test can fail). */
void test_isolation_hostile_module(const struct test_env *env) {
  char *saved;
  if (!use_hostile_module(&saved)) return;

  /* What the module will try to reach. */
  char secret[1024], written[1024], pwned[1024];
  snprintf(secret, sizeof secret, "%s/isolation-secret.txt", env->fixture_dir);
  snprintf(written, sizeof written, "%s/isolation-written.txt", env->fixture_dir);
  snprintf(pwned, sizeof pwned, "%s/isolation-pwned.txt", env->fixture_dir);
  write_fixture(env, "isolation-secret.txt", (const uint8_t *)"SECRET", 6);
  unlink(written);
  unlink(pwned);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  CHECK(listener >= 0 && bind(listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(listener, 4) == 0 &&
        getsockname(listener, (struct sockaddr *)&addr, &len) == 0);

  pxl_config config;
  pxl_config_init(&config);
  CHECK_INT(config.isolation, PXL_ISOLATION_MODULES);
  CHECK_INT(config.decode_timeout_ms, 10000);
  config.codec_modules = "hostile";
  /* alloc16g must meet the worker's memory limit before its clock: a smaller max_pixels
   * makes the limit (and the pages touched to reach it) smaller, and a loaded machine took
   * over 2 s to fault in ~1.1 GB (a clean-clone run: "timed out" instead of "exceeded"). */
  config.max_pixels = 4000000;
  config.decode_timeout_ms = 6000 * env->slow_factor;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char layers[128] = "";
  pxl_loader_isolation(loader, layers, sizeof layers);
  CHECKF(strstr(layers, "seccomp") != NULL, "isolation: %s (is PIXLOAD_DECODE_WORKER set? make worker)", layers);
  if (!strstr(layers, "seccomp")) {
    /* Without a worker the hostile module would run in this process: stop here. */
    pxl_loader_free(loader);
    pxl_queue_free(queue);
    close(listener);
    restore_codec_path(saved);
    return;
  }

  struct { const char *line; pxl_status want; const char *says; } cases[] = {
      {"segv", PXL_E_DECODER_FAILED, "SIGSEGV"},
      {"spin", PXL_E_DECODER_FAILED, "timed out after"},
      {"alloc16g", PXL_E_DECODER_FAILED, "exceeded"},
      {"overflow", PXL_E_DECODER_FAILED, "decoder"},
      {"huge", PXL_E_TOO_MANY_PIXELS, NULL},
      {"read", PXL_OK, NULL}, /* any refusal: checked below */
      {"connect", PXL_E_DECODER_FAILED, "SIGSYS: a forbidden system call"},
      {"exec", PXL_E_DECODER_FAILED, "SIGSYS"},
      {"fork", PXL_E_DECODER_FAILED, "SIGSYS"},
      {"killparent", PXL_OK, NULL}, /* any refusal: we are alive to check it */
      {"write", PXL_OK, NULL},      /* any refusal */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char body[1200], name[64], path[80];
    const char *arg = strcmp(cases[i].line, "read") == 0 ? secret
                      : strcmp(cases[i].line, "write") == 0 ? written
                      : strcmp(cases[i].line, "exec") == 0 ? pwned : "";
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(addr.sin_port));
    if (strcmp(cases[i].line, "connect") == 0) arg = port;
    snprintf(body, sizeof body, "HOSTILE:%s %s\n", cases[i].line, arg);
    snprintf(name, sizeof name, "hostile-%s.bin", cases[i].line);
    write_fixture(env, name, (const uint8_t *)body, strlen(body));
    snprintf(path, sizeof path, "/%s", name);
    struct test_url u = test_url(env, path, "isolation");
    pxl_status status;
    char message[256] = "";
    pxl_image *image = load(env, loader, queue, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
    if (cases[i].want != PXL_OK) {
      CHECKF(status == cases[i].want, "%s: %d %s", cases[i].line, status, message);
    } else {
      CHECKF(status != PXL_OK, "%s decoded: %s", cases[i].line, message);
    }
    if (cases[i].says) CHECKF(strstr(message, cases[i].says) != NULL, "%s: message %s", cases[i].line, message);
    pxl_image_release(image);
    /* The next image decodes (a fresh worker when that one died). */
    write_fixture(env, "hostile-ok.bin", (const uint8_t *)"HOSTILE:ok\n", 11);
    struct test_url ok = test_url(env, "/hostile-ok.bin", cases[i].line);
    image = load(env, loader, queue, ok.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
    CHECKF(status == PXL_OK && image && pxl_image_width(image) == 4, "after %s: %d %s", cases[i].line, status, message);
    pxl_image_release(image);
  }
  CHECK(access(written, F_OK) != 0);
  CHECK(access(pwned, F_OK) != 0);
  CHECKF(accept(listener, NULL, NULL) < 0, "the listener saw a connection");
  close(listener);

  /* A failed decode is not cached: the same URL fails again, through a fresh worker. */
  struct test_url segv = test_url(env, "/hostile-segv.bin", "isolation");
  pxl_status status;
  char message[256] = "";
  pxl_image *image = load(env, loader, queue, segv.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_E_DECODER_FAILED, "segv again: %d %s", status, message);
  pxl_image_release(image);
  CHECK(strcmp(pxl_status_string(PXL_E_DECODER_FAILED), "the decoder failed (crashed, killed or timed out)") == 0);

  /* Two requests merged on one decode whose worker spins: both get DECODER_FAILED. */
  struct test_url spin = test_url(env, "/hostile-spin.bin", "merged");
  pxl_request merged;
  request_for(&merged, spin.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture both[2];
  memset(both, 0, sizeof both);
  atomic_int calls = 0;
  for (int i = 0; i < 2; i++) {
    both[i].seq = &calls;
    CHECK_STATUS(pxl_load(loader, &merged, queue, capture_callback, &both[i], NULL), PXL_OK);
  }
  CHECK(drain_until(env, queue, &calls, 2, 15000));
  for (int i = 0; i < 2; i++) {
    CHECKF(both[i].status == PXL_E_DECODER_FAILED && strstr(both[i].message, "timed out"), "merged %d: %d %s", i,
           both[i].status, both[i].message);
    capture_reset(&both[i]);
  }
  pxl_loader_free(loader);

  /* PXL_ISOLATION_ALL: the hostile module still decodes in its own workers. */
  config.isolation = PXL_ISOLATION_ALL;
  pxl_loader *all = new_loader(&config);
  struct test_url crash_all = test_url(env, "/hostile-segv.bin", "all");
  image = load(env, all, queue, crash_all.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_E_DECODER_FAILED, "segv under all: %d %s", status, message);
  pxl_image_release(image);
  pxl_loader_free(all);
  all = NULL;
  config.isolation = 0x7F;
  CHECK_STATUS(pxl_loader_new(&config, &all), PXL_E_INVALID_ARGUMENT);
  /* REQUIRED, where every layer is in force (test-worker proves the kernel here has them),
   * decodes; NONE isolates nothing. */
  config.isolation = PXL_ISOLATION_MODULES | PXL_ISOLATION_REQUIRED;
  loader = new_loader(&config);
  struct test_url ok = test_url(env, "/hostile-ok.bin", "required");
  image = load(env, loader, queue, ok.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_OK || strstr(message, "PXL_ISOLATION_REQUIRED") != NULL, "required: %d %s", status, message);
  pxl_image_release(image);
  pxl_loader_free(loader);
  config.isolation = PXL_ISOLATION_NONE;
  loader = new_loader(&config);
  pxl_loader_isolation(loader, layers, sizeof layers);
  CHECKF(strcmp(layers, "none") == 0, "isolation none: %s", layers);
  pxl_loader_free(loader);

  /* Layers missing: REQUIRED refuses, otherwise the log says which. */
  config.isolation = PXL_ISOLATION_MODULES;
  /* (Not under valgrind, which runs the child's system calls itself and reports the
   * in-process crash below as an invalid write.) */
  const char *valgrind = getenv("PXL_VALGRIND");
  int forks = !UNDER_TSAN && !(valgrind && strcmp(valgrind, "1") == 0);
  if (forks) CHECK_INT(degraded_isolation(env, &config, ok.url), 0);
  config.log = NULL;
  config.log_user_data = NULL;

  /* Without isolation, the segfault is the host's: in a child, which it kills. */
  fflush(NULL);
  pid_t child = forks ? fork() : -1;
  if (child == 0) {
    /* The fault kills the child as it would a host, without a sanitizer's report (which
     * would fail a sanitizer run) or valgrind's. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    config.isolation = PXL_ISOLATION_NONE;
    pxl_loader *host = NULL;
    if (pxl_loader_new(&config, &host) != PXL_OK) _exit(3);
    pxl_request request;
    request_for(&request, segv.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture got;
    memset(&got, 0, sizeof got);
    load_and_wait(env, host, queue, &request, &got);
    _exit(4); /* not reached: the decode crashed the process */
  }
  int wstatus = 0;
  if (!forks) wstatus = SIGSEGV; /* (no child under TSan or valgrind) */
  else CHECK(child > 0 && waitpid(child, &wstatus, 0) == child);
  /* Killed by the fault, or ended by a sanitizer that reported it (ASan exits 1). */
  int crashed = (WIFSIGNALED(wstatus) && (WTERMSIG(wstatus) == SIGSEGV || WTERMSIG(wstatus) == SIGABRT)) ||
                (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0 && WEXITSTATUS(wstatus) != 3 &&
                 WEXITSTATUS(wstatus) != 4);
  CHECKF(crashed, "the in-process child ended with %#x", wstatus);
  pxl_queue_free(queue);
  restore_codec_path(saved);
}

/* This process's decode workers alive (children named pixload-decode-worker, not yet
 * exited), and whether a thread named pxl-warm-* runs here. */
/* This process's decode workers (children named pixload-decode-*, alive): their count,
 * and up to cap of their pids into pids. */
static int worker_list(pid_t *pids, int cap) {
  int count = 0;
  DIR *proc = opendir("/proc");
  if (!proc) return -1;
  struct dirent *e;
  while ((e = readdir(proc))) {
    char path[300], line[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    /* pid (comm) state ppid */
    char *close_paren = strrchr(line, ')');
    char state = 0;
    int ppid = 0;
    if (close_paren && strstr(line, "(pixload-decode-") && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 &&
        ppid == getpid() && state != 'Z' && state != 'X') {
      if (count < cap) pids[count] = (pid_t)atoi(line);
      count++;
    }
  }
  closedir(proc);
  return count;
}

static int worker_children(void) { return worker_list(NULL, 0); }

static int warming_threads(void) {
  int count = 0;
  DIR *tasks = opendir("/proc/self/task");
  if (!tasks) return -1;
  struct dirent *e;
  while ((e = readdir(tasks))) {
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f) && strncmp(name, "pxl-warm-", 9) == 0) count++;
    fclose(f);
  }
  closedir(tasks);
  return count;
}

/* Waits until this process has `want` decode workers alive; 1 if it came to that. */
static int workers_become(const struct test_env *env, int want) {
  for (int waited = 0; waited < 5000 * env->slow_factor; waited += 5) {
    if (worker_children() == want) return 1;
    usleep(5000);
  }
  return 0;
}

/* Issue 39: the warm pool. A loader that never decodes an isolated format starts no
 * worker and no thread; once it does, a warming thread keeps a spare started ahead of the
 * next image, replaces a worker that crashed before anyone asks, and pxl_loader_free ends
 * (and reaps) them all. */
void test_isolation_warm_pool(const struct test_env *env) {
  char *saved;
  if (!use_hostile_module(&saved)) return;
  write_fixture(env, "warm-ok.bin", (const uint8_t *)"HOSTILE:ok\n", 11);
  write_fixture(env, "warm-segv.bin", (const uint8_t *)"HOSTILE:segv \n", 14);

  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = "hostile";
  config.decode_threads = 4;
  CHECK_INT(worker_children(), 0);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* Nothing started for a host that has not decoded an isolated format. */
  CHECK_INT(worker_children(), 0);
  CHECK_INT(warming_threads(), 0);

  struct test_url ok = test_url(env, "/warm-ok.bin", "warm");
  pxl_status status;
  char message[256] = "";
  pxl_image *image = load(env, loader, queue, ok.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_OK && image, "first: %d %s", status, message);
  pxl_image_release(image);
  CHECK_INT(warming_threads(), 1);
  /* The worker that decoded it, and a spare. */
  CHECKF(workers_become(env, 2), "after the first image: %d workers, not 2", worker_children());

  /* A crash: the worker is gone, and its replacement starts without a request asking. */
  struct test_url segv = test_url(env, "/warm-segv.bin", "warm");
  image = load(env, loader, queue, segv.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_E_DECODER_FAILED, "segv: %d %s", status, message);
  pxl_image_release(image);
  CHECKF(workers_become(env, 2), "after the crash: %d workers, not 2", worker_children());
  struct test_url again = test_url(env, "/warm-ok.bin", "warm-again");
  image = load(env, loader, queue, again.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_OK && image, "after the crash: %d %s", status, message);
  pxl_image_release(image);

  /* Freed: every worker ended and reaped, the warming thread joined. */
  pxl_loader_free(loader);
  CHECK_INT(worker_children(), 0);
  CHECK_INT(warming_threads(), 0);
  pxl_queue_free(queue);
  restore_codec_path(saved);
}

/* One image through a loader in the host (none) and an isolating one: the same status,
 * size and pixels, and the metrics say which decoded in a worker. `last_may_fail`: a
 * failure is expected (the same under both). */
static void same_isolated(const struct test_env *env, pxl_loader *none, pxl_loader *isolated, pxl_queue *queue,
                          const char *file, int32_t width, int32_t height, pxl_mode mode, pxl_format format,
                          const char *tag, int may_fail) {
  char path[128];
  snprintf(path, sizeof path, "/%s", file);
  struct test_url u = test_url(env, path, tag);
  pxl_status got[2];
  char message[2][256];
  pxl_image *image[2];
  pxl_metrics metrics[2];
  int32_t incomplete[2];
  for (int k = 0; k < 2; k++) {
    struct metered m;
    memset(&m, 0, sizeof m);
    pxl_request request;
    request_for(&request, u.url, width, height, mode, format);
    CHECK_STATUS(pxl_load(k ? isolated : none, &request, queue, metered_callback, &m, NULL), PXL_OK);
    CHECK(drain_until(env, queue, &m.capture.calls, 1, 30000));
    got[k] = m.capture.status;
    snprintf(message[k], sizeof message[k], "%s", m.capture.message);
    image[k] = m.capture.image ? pxl_image_retain(m.capture.image) : NULL;
    metrics[k] = m.metrics;
    incomplete[k] = m.capture.incomplete;
    capture_reset(&m.capture);
  }
  CHECK_INT(incomplete[1], incomplete[0]);
  CHECKF(got[0] == got[1], "%s: %d in the host, %d isolated (%s)", file, got[0], got[1], message[1]);
  if (got[0] != PXL_OK || got[1] != PXL_OK || !image[0] || !image[1]) {
    CHECKF(may_fail, "%s: %d %s", file, got[1], message[1]);
  } else {
    CHECK_INT(metrics[1].isolated, 1);
    CHECK_INT(metrics[0].isolated, 0);
    int32_t w = pxl_image_width(image[0]), h = pxl_image_height(image[0]);
    CHECKF(w == pxl_image_width(image[1]) && h == pxl_image_height(image[1]), "%s: %dx%d vs %dx%d", file, w, h,
           pxl_image_width(image[1]), pxl_image_height(image[1]));
    size_t stride0 = pxl_image_stride(image[0]), stride1 = pxl_image_stride(image[1]);
    int same = stride0 == stride1;
    for (int32_t y = 0; same && y < h; y++)
      same = memcmp(pxl_image_pixels(image[0]) + y * stride0, pxl_image_pixels(image[1]) + y * stride1,
                    (size_t)w * (size_t)pxl_format_bytes_per_pixel(format)) == 0;
    CHECKF(same, "%s (%dx%d mode %d format %d): the pixels differ in the host and isolated", file, width, height, mode,
           format);
  }
  pxl_image_release(image[0]);
  pxl_image_release(image[1]);
}

/* Issue 39: PXL_ISOLATION_ALL. The built-in formats decode in workers (the metrics say
 * isolated) to the same pixels, sizes and warnings as in the host (PXL_ISOLATION_NONE):
 * a JPEG full size, a FILL thumbnail at a DCT scale, an EXIF-oriented JPEG, a PNG with
 * alpha premultiplied, a WebP in gray; a corrupt JPEG fails the same way; a worker that
 * cannot serve (its time limit 1 ms) fails the image with PXL_E_DECODER_FAILED and the next
 * image decodes. Tests/worker/isolation_all.py compares the whole conformance corpus. */
void test_isolation_all(const struct test_env *env) {
  static const struct { const char *file; int32_t w, h; pxl_mode mode; pxl_format format; } cases[] = {
      {FIXTURE_GRADIENT_JPG, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8},
      {FIXTURE_GRADIENT_JPG, 64, 48, PXL_MODE_FILL, PXL_FORMAT_RGBA8},
      {FIXTURE_ORIENTED_JPG, 100, 100, PXL_MODE_FIT, PXL_FORMAT_RGB8},
      {FIXTURE_ALPHA_PNG, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8_PREMUL},
      {FIXTURE_ALPHA_WEBP, 77, 77, PXL_MODE_FILL, PXL_FORMAT_GRAY8},
      {FIXTURE_CORRUPT_JPG, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8},
  };
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.isolation = PXL_ISOLATION_NONE;
  pxl_loader *none = new_loader(&config);
  config.isolation = PXL_ISOLATION_ALL | PXL_ISOLATION_REQUIRED;
  pxl_loader *all = new_loader(&config);
  pxl_queue *queue = new_queue();
  char layers[128] = "";
  pxl_loader_isolation(all, layers, sizeof layers);
  CHECKF(strstr(layers, "seccomp") != NULL, "isolation all: %s", layers);
  size_t count = sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < count; i++)
    same_isolated(env, none, all, queue, cases[i].file, cases[i].w, cases[i].h, cases[i].mode, cases[i].format, "all",
                  i == count - 1);
  pxl_loader_free(all);

  /* A worker that cannot finish (1 ms): DECODER_FAILED, nothing cached, then it decodes. */
  config.isolation = PXL_ISOLATION_ALL;
  config.decode_timeout_ms = 1;
  all = new_loader(&config);
  struct test_url big = test_url(env, "/" FIXTURE_NOISE_JPG, "all-timeout");
  pxl_status status;
  char message[256];
  pxl_image *image = load(env, all, queue, big.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_E_DECODER_FAILED && strstr(message, "timed out"), "1 ms: %d %s", status, message);
  pxl_image_release(image);
  pxl_loader_free(all);
  config.decode_timeout_ms = 10000;
  all = new_loader(&config);
  image = load(env, all, queue, big.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
  CHECKF(status == PXL_OK && image, "after the timeout: %d %s", status, message);
  pxl_image_release(image);
  pxl_loader_free(all);
  pxl_loader_free(none);
  pxl_queue_free(queue);
}

/* Issue 39: the codec modules' thumbnails are resampled in their worker (only the
 * thumbnail crosses): HEIC, JPEG XL and SVG (run.sh copies the module fuzz seeds and
 * SVG seeds into modules/) through the shipped modules in the host (PXL_ISOLATION_NONE)
 * and isolated (the default): the same pixels for FILL and FIT thumbnails, full size, in
 * every format (GRAY8: the canvas crosses), with alpha (SVG's premultiplied canvas), an
 * ICC profile and nclx colour, an EXIF-less HEIC grid. */
void test_isolation_modules_resampled(const struct test_env *env) {
  static const char *files[] = {"modules/lossy-alpha.heic", "modules/icc.heic", "modules/no-alpha-nclx.heic",
                                "modules/grid.heic", "modules/lossy.jxl", "modules/lossless-alpha.jxl",
                                "modules/icc-container.jxl", "modules/shapes.svg", "modules/gradients.svg",
                                "modules/viewbox-only.svg"};
  static const struct { int32_t w, h; pxl_mode mode; } sizes[] = {
      {20, 20, PXL_MODE_FILL}, {33, 17, PXL_MODE_FIT}, {7, 40, PXL_MODE_FILL}, {0, 0, PXL_MODE_FIT}, {150, 150, PXL_MODE_FILL}};
  static const pxl_format formats[] = {PXL_FORMAT_RGBA8, PXL_FORMAT_RGBA8_PREMUL, PXL_FORMAT_BGRA8_PREMUL,
                                       PXL_FORMAT_RGB8, PXL_FORMAT_GRAY8};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", env->fixture_dir, files[i]);
    CHECKF(access(path, R_OK) == 0, "%s missing (run.sh copies it from the module fuzz seeds)", path);
  }
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.isolation = PXL_ISOLATION_NONE;
  pxl_loader *none = new_loader(&config);
  config.isolation = PXL_ISOLATION_MODULES;
  pxl_loader *modules = new_loader(&config);
  pxl_queue *queue = new_queue();
  int n = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
      /* Every format on the first size, then one in turn: 5 formats x 10 files, not 250 loads. */
      for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        if (j > 0 && k != (i + j) % (sizeof formats / sizeof formats[0])) continue;
        same_isolated(env, none, modules, queue, files[i], sizes[j].w, sizes[j].h, sizes[j].mode, formats[k], "modrs", 0);
        n++;
      }
    }
  CHECK(n > 80);
  pxl_loader_free(modules);
  pxl_loader_free(none);
  pxl_queue_free(queue);
}

/* PXL_ISOLATION_ALL: a JPEG or WebP dripping in slowly, which a loader otherwise decodes
 * while it downloads (with the host's libjpeg, libwebp), is decoded whole in a worker
 * (isolated). */
void test_isolation_all_stream(const struct test_env *env) {
  if (!env->fault_url) return;
  pxl_config config;
  pxl_config_init(&config);
  config.isolation = PXL_ISOLATION_ALL;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  static const char *const paths[] = {"/drip/rate=70000/piece=3500/file=medium.jpg",
                                      "/drip/rate=1000000/piece=32768/file=" FIXTURE_PHOTO_WEBP};
  for (int i = 0; i < 2; i++) {
    struct test_url u = fault_url(env, 0, paths[i], i ? "drip-all-webp" : "drip-all");
    struct metered m;
    memset(&m, 0, sizeof m);
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    CHECK_STATUS(pxl_load(loader, &request, queue, metered_callback, &m, NULL), PXL_OK);
    CHECK(drain_until(env, queue, &m.capture.calls, 1, 30000));
    CHECKF(m.capture.status == PXL_OK, "%s under ALL: %d %s", paths[i], m.capture.status, m.capture.message);
    CHECKF(m.metrics.isolated == 1, "%s under ALL decoded in the host (isolated %d)", paths[i], m.metrics.isolated);
    capture_reset(&m.capture);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* The log lines of test_isolation_manifest_version that name a version difference, counted
 * (the log is called from decode threads). */
struct version_log {
  pthread_mutex_t lock;
  int count;
  char last[512];
};

static void version_log_into(int32_t level, const char *message, void *user_data) {
  (void)level;
  struct version_log *log = user_data;
  if (!strstr(message, "built with version")) return;
  pthread_mutex_lock(&log->lock);
  log->count++;
  snprintf(log->last, sizeof log->last, "%s", message);
  pthread_mutex_unlock(&log->lock);
}

/* Issue 39: a module's manifest carries the version it was built with, its worker's
 * HEADER the version its codec reports as it runs (Tests/worker/version_module.c: "qoi 1.0
 * (built)" against "qoi 2.0 (runtime)", a decoding library upgraded under a module). The
 * loader's cache keys hold the manifest's; isolated, the library says so once, on the
 * codec's first decode, naming both; in-process (PXL_ISOLATION_NONE: the module's own
 * register, the runtime version everywhere) there is nothing to say. */
void test_isolation_manifest_version(const struct test_env *env) {
  char *saved;
  if (!use_hostile_module(&saved)) return;
  write_qoi_fixtures(env);
  for (int isolated = 1; isolated >= 0; isolated--) {
    struct version_log log = {.count = 0};
    pthread_mutex_init(&log.lock, NULL);
    pxl_config config;
    pxl_config_init(&config);
    config.codec_modules = "oldbuild";
    config.isolation = isolated ? PXL_ISOLATION_MODULES : PXL_ISOLATION_NONE;
    config.log = version_log_into;
    config.log_user_data = &log;
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    char layers[128] = "";
    pxl_loader_isolation(loader, layers, sizeof layers);
    CHECKF(isolated ? strcmp(layers, "none") != 0 : strcmp(layers, "none") == 0, "isolated %d: layers %s", isolated,
           layers);
    for (int i = 0; i < 3; i++) {
      char tag[32];
      snprintf(tag, sizeof tag, "version-%d-%d", isolated, i);
      struct test_url url = test_url(env, "/alpha.qoi", tag);
      pxl_status status;
      char message[256] = "";
      pxl_image *image = load(env, loader, queue, url.url, i == 2 ? 16 : 0, i == 2 ? 16 : 0, PXL_MODE_FILL,
                              PXL_FORMAT_RGBA8, 0, &status, message, NULL);
      CHECKF(status == PXL_OK && image, "isolated %d, image %d: %d %s", isolated, i, status, message);
      pxl_image_release(image);
    }
    pxl_loader_free(loader);
    pxl_queue_free(queue);
    if (isolated) {
      CHECKF(log.count == 1, "isolated: %d version lines, not 1 (%s)", log.count, log.last);
      CHECKF(strstr(log.last, "qoi 1.0 (built)") && strstr(log.last, "qoi 2.0 (runtime)"),
             "the line names both versions: %s", log.last);
    } else {
      CHECKF(log.count == 0, "in-process: %d version lines (%s)", log.count, log.last);
    }
    pthread_mutex_destroy(&log.lock);
  }
  restore_codec_path(saved);
}

/* The memfd mapping of /proc/self/maps that holds [address, address + size), as its name
 * ("/memfd:pixload-pixels (deleted)"), or "" when no /memfd: mapping holds it. */
static void memfd_mapping_of(const void *address, size_t size, char *name, size_t cap) {
  name[0] = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) return;
  char line[512];
  uintptr_t from = (uintptr_t)address, to = from + size;
  while (fgets(line, sizeof line, maps)) {
    unsigned long start, end;
    if (sscanf(line, "%lx-%lx", &start, &end) != 2 || from < start || to > end) continue;
    const char *memfd = strstr(line, "/memfd:");
    if (memfd) snprintf(name, cap, "%.*s", (int)strcspn(memfd, "\n"), memfd);
    break;
  }
  fclose(maps);
}

/* Issue 39, "no copy on the host": a full-size isolated decode whose result needs no step
 * that writes every pixel keeps the worker's sealed pixel memfd, mapped privately, as the
 * image's pixels: a built-in JPEG under PXL_ISOLATION_ALL and a HEIC through its module
 * (run.sh makes modules/large.heic from the gradient) under PXL_ISOLATION_MODULES. The
 * pixel pointer lies in a /memfd: mapping, the pixels are those the host decodes
 * (PXL_ISOLATION_NONE, whose pixels are in no memfd), and the mapping is gone after the last
 * release. A decode with a step that writes every pixel or allocates anew (an EXIF-rotated
 * JPEG, a HEIC in BGRA) gives the same pixels as in the host. */
void test_isolation_mapped(const struct test_env *env) {
  static const struct { const char *file; int32_t isolation; pxl_format format; int mapped; } cases[] = {
      {FIXTURE_GRADIENT_JPG, PXL_ISOLATION_ALL, PXL_FORMAT_RGBA8, 1},
      {FIXTURE_GRADIENT_JPG, PXL_ISOLATION_ALL, PXL_FORMAT_RGBA8_PREMUL, 1},
      {FIXTURE_ORIENTED_JPG, PXL_ISOLATION_ALL, PXL_FORMAT_RGBA8, 0},
      {"modules/large.heic", PXL_ISOLATION_MODULES, PXL_FORMAT_RGBA8, 1},
      {"modules/large.heic", PXL_ISOLATION_MODULES, PXL_FORMAT_RGBA8_PREMUL, 1},
      {"modules/large.heic", PXL_ISOLATION_MODULES, PXL_FORMAT_BGRA8_PREMUL, 0},
  };
  char path[1024];
  snprintf(path, sizeof path, "%s/modules/large.heic", env->fixture_dir);
  CHECKF(access(path, R_OK) == 0, "%s missing (run.sh makes it with heif-enc)", path);
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.isolation = PXL_ISOLATION_NONE;
  pxl_loader *none = new_loader(&config);
  pxl_queue *queue = new_queue();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    config.isolation = cases[i].isolation | PXL_ISOLATION_REQUIRED;
    pxl_loader *isolated = new_loader(&config);
    char url_path[128];
    snprintf(url_path, sizeof url_path, "/%s", cases[i].file);
    struct test_url u = test_url(env, url_path, "mapped");
    pxl_image *image[2];
    pxl_status status[2];
    char message[2][256];
    for (int k = 0; k < 2; k++)
      image[k] = load(env, k ? isolated : none, queue, u.url, 0, 0, PXL_MODE_FIT, cases[i].format, 0, &status[k],
                      message[k], NULL);
    CHECKF(status[0] == PXL_OK && status[1] == PXL_OK && image[0] && image[1], "%s: %d %s / %d %s", cases[i].file,
           status[0], message[0], status[1], message[1]);
    if (!image[0] || !image[1]) {
      pxl_image_release(image[0]);
      pxl_image_release(image[1]);
      pxl_loader_free(isolated);
      continue;
    }
    int32_t w = pxl_image_width(image[1]), h = pxl_image_height(image[1]);
    size_t stride = (size_t)pxl_image_stride(image[1]), size = stride * (size_t)h;
    CHECKF(w == pxl_image_width(image[0]) && h == pxl_image_height(image[0]) &&
               stride == (size_t)pxl_image_stride(image[0]) &&
               memcmp(pxl_image_pixels(image[0]), pxl_image_pixels(image[1]), size) == 0,
           "%s (format %d): isolated pixels differ from the host's", cases[i].file, cases[i].format);
    const uint8_t *pixels = pxl_image_pixels(image[1]);
    char mapping[256];
    memfd_mapping_of(pxl_image_pixels(image[0]), (size_t)pxl_image_stride(image[0]) * (size_t)h, mapping,
                     sizeof mapping);
    CHECKF(mapping[0] == 0, "%s: the host's own decode is in %s", cases[i].file, mapping);
    memfd_mapping_of(pixels, size, mapping, sizeof mapping);
    if (cases[i].mapped) {
      CHECKF(strstr(mapping, "pixload-pixels") != NULL, "%s (format %d, %dx%d): the pixels at %p were copied, not "
             "mapped from the worker's memfd (%s)", cases[i].file, cases[i].format, w, h, (const void *)pixels,
             mapping[0] ? mapping : "no memfd mapping");
      /* Valid while a reference lives, past the loader's end (whose threads may hold the
       * result a moment after delivering it): a second one, the first released. */
      pxl_loader_free(isolated);
      isolated = NULL;
      pxl_image *kept = pxl_image_retain(image[1]);
      pxl_image_release(image[1]);
      memfd_mapping_of(pixels, size, mapping, sizeof mapping);
      CHECKF(mapping[0] && memcmp(pxl_image_pixels(image[0]), pxl_image_pixels(kept), size) == 0,
             "%s: the mapping went with a reference still held", cases[i].file);
      pxl_image_release(kept);
      memfd_mapping_of(pixels, size, mapping, sizeof mapping);
      CHECKF(mapping[0] == 0, "%s: %s still mapped after the last release", cases[i].file, mapping);
    } else {
      pxl_image_release(image[1]);
    }
    pxl_image_release(image[0]);
    if (isolated) pxl_loader_free(isolated);
  }
  pxl_loader_free(none);
  pxl_queue_free(queue);
}
/* Protocol 4: one worker conversation an image. A worker is retired after 200 of them
 * (WorkerPool.maxDecodes), so a thumbnail that cost k conversations would retire its worker
 * after 200 / k images: one worker (one decode thread) serving 199 thumbnails in a row is
 * one conversation each, and the 200th retires it (the count is real). */
static void one_conversation_each(const struct test_env *env, const char *file, int32_t isolation, const char *tag) {
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.decode_threads = 1;
  config.isolation = isolation;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char path[128];
  snprintf(path, sizeof path, "/%s", file);
  struct test_url u = test_url(env, path, tag);
  pid_t first = 0, now[4];
  for (int i = 1; i <= 200; i++) {
    pxl_status status;
    char message[256] = "";
    pxl_image *image = load(env, loader, queue, u.url, 150, 150, PXL_MODE_FILL, PXL_FORMAT_RGBA8, 0, &status, message, NULL);
    pxl_image_release(image);
    if (status != PXL_OK) {
      CHECKF(0, "%s, thumbnail %d: %d %s", file, i, status, message);
      break;
    }
    if (i == 1) {
      CHECKF(workers_become(env, 1) && worker_list(&first, 1) == 1, "%s: %d workers after the first thumbnail", file,
             worker_children());
    } else if (i == 199) {
      int count = worker_list(now, 4);
      CHECKF(count == 1 && now[0] == first,
             "%s: after 199 thumbnails the first worker (%d) was retired (%d workers, the first %d): more than one "
             "conversation an image", file, (int)first, count, count ? (int)now[0] : 0);
    }
  }
  /* The 200th: retired, and a fresh worker in its place. */
  int retired = 0;
  for (int waited = 0; !retired && waited < 5000 * env->slow_factor; waited += 5) {
    int count = worker_list(now, 4);
    retired = count >= 1 && now[0] != first && (count < 2 || now[1] != first);
    if (!retired) usleep(5000);
  }
  CHECKF(retired, "%s: 200 thumbnails did not retire the worker (%d): its conversations are not counted", file,
         (int)first);
  printf("  %s: 199 thumbnails in one worker (pid %d), retired at the 200th\n", file, (int)first);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* An SVG thumbnail under PXL_ISOLATION_MODULES (its header, choose_size and pixels) and a
 * JPEG thumbnail under PXL_ISOLATION_ALL (INFO, then its rows resampled) are one worker
 * conversation each. */
void test_isolation_one_conversation(const struct test_env *env) {
  one_conversation_each(env, "modules/shapes.svg", PXL_ISOLATION_MODULES, "conv-svg");
  one_conversation_each(env, FIXTURE_GRADIENT_JPG, PXL_ISOLATION_ALL, "conv-jpeg");
}

