/*
 * test_abi.c: structs that grow (pixload.h, "Structs that grow") and the log callback.
 *
 * A struct from an older header (smaller struct_size) is read up to its size, with
 * defaults for the rest, and never written past its end; a struct from a newer header
 * (larger struct_size) is accepted only when the bytes this library does not know are
 * zero. The library writes nothing to stderr: diagnostics go to the log callback.
 * Tests/abi/run.sh runs a program built against the 0.1.0 header itself.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

enum { PAD = 64 };

static int all_bytes(const unsigned char *p, size_t n, unsigned char value) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != value) return 0;
  return 1;
}

static void test_config_sizes(void) {
  unsigned char buffer[sizeof(pxl_config) + PAD];
  pxl_config *config = (pxl_config *)(void *)buffer;
  pxl_loader *loader = NULL;

  /* A newer program's bigger struct: defaults, then zeros up to its size. */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_config_init_size(config, sizeof buffer), PXL_OK);
  CHECK_INT(config->struct_size, sizeof buffer);
  CHECK_INT(config->max_concurrent_downloads, 8);
  CHECK(all_bytes(buffer + sizeof(pxl_config), PAD, 0));
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_OK);
  pxl_loader_free(loader);

  /* ... whose unknown tail is not zero: a setting this library cannot honour. */
  buffer[sizeof(pxl_config) + 10] = 1;
  loader = (pxl_loader *)buffer;
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_E_INVALID_ARGUMENT);
  CHECK(loader == NULL);

  /* An older program's struct (0.1.0's size): nothing written past it, accepted, the
   * newer fields at their defaults (no log callback). */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_config_init_size(config, PXL_CONFIG_SIZE_0_1), PXL_OK);
  CHECK_INT(config->struct_size, PXL_CONFIG_SIZE_0_1);
  CHECK(all_bytes(buffer + PXL_CONFIG_SIZE_0_1, sizeof buffer - PXL_CONFIG_SIZE_0_1, 0xAA));
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_OK);
  pxl_loader_free(loader);

  /* 0.1.0's pxl_config_init (the function, not the macro) fills 0.1.0's fields only. */
  memset(buffer, 0xAA, sizeof buffer);
  (pxl_config_init)(config);
  CHECK_INT(config->struct_size, PXL_CONFIG_SIZE_0_1);
  CHECK(all_bytes(buffer + PXL_CONFIG_SIZE_0_1, sizeof buffer - PXL_CONFIG_SIZE_0_1, 0xAA));
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_OK);
  pxl_loader_free(loader);

  /* Smaller than any released struct: refused, nothing written. */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_config_init_size(config, PXL_CONFIG_SIZE_0_1 - 1), PXL_E_INVALID_ARGUMENT);
  CHECK(all_bytes(buffer, sizeof buffer, 0xAA));
  CHECK_STATUS(pxl_config_init_size(NULL, sizeof(pxl_config)), PXL_E_INVALID_ARGUMENT);
  pxl_config_init(config);
  config->struct_size = PXL_CONFIG_SIZE_0_1 - 1;
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_E_INVALID_ARGUMENT);
  CHECK(loader == NULL);

  /* 0.2.0's fields start past 0.1.0's struct, not in its padding; 0.3.0's past 0.2.0's
   * sizeof (its end rounded up to the struct's alignment), so that a 0.2.0 program's tail
   * padding is never read as disk_variant_max_side. */
  CHECK(offsetof(pxl_config, log) >= PXL_CONFIG_SIZE_0_1);
  size_t align = _Alignof(pxl_config);
  size_t sizeof_0_2 = (PXL_CONFIG_SIZE_0_2 + align - 1) / align * align;
  CHECKF(offsetof(pxl_config, disk_variant_max_side) >= sizeof_0_2, "disk_variant_max_side at %zu, 0.2.0's sizeof %zu",
         offsetof(pxl_config, disk_variant_max_side), sizeof_0_2);

  /* A 0.2.0 program's struct, tail padding full of garbage: accepted (the padding is not a
   * field), nothing written past it, the 0.3.0 field at its default. */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_config_init_size(config, sizeof_0_2), PXL_OK);
  CHECK(all_bytes(buffer + sizeof_0_2, sizeof buffer - sizeof_0_2, 0xAA));
  memset(buffer + PXL_CONFIG_SIZE_0_2, 0x55, sizeof_0_2 - PXL_CONFIG_SIZE_0_2);
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_OK);
  pxl_loader_free(loader);

  /* The macro fills this header's whole struct. */
  pxl_config plain;
  memset(&plain, 0xAA, sizeof plain);
  pxl_config_init(&plain);
  CHECK_INT(plain.struct_size, sizeof plain);
  CHECK(plain.log == NULL && plain.log_user_data == NULL);
  CHECK_INT(plain.log_level, PXL_LOG_WARNING);
  CHECK_INT(plain.disk_variant_max_side, 256);
  plain.disk_variant_max_side = -1;
  CHECK_STATUS(pxl_loader_new(&plain, &loader), PXL_E_INVALID_ARGUMENT);
}

static void test_request_sizes(const struct test_env *env, pxl_loader *loader, pxl_queue *queue) {
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "abi-request");
  unsigned char buffer[sizeof(pxl_request) + PAD];
  pxl_request *request = (pxl_request *)(void *)buffer;
  struct capture capture;
  memset(&capture, 0, sizeof capture);

  /* Padded with a non-zero tail: refused, no callback, nothing sent. */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_request_init_size(request, sizeof buffer), PXL_OK);
  CHECK(all_bytes(buffer + sizeof(pxl_request), PAD, 0));
  request->url = u.url;
  buffer[sizeof buffer - 1] = 7;
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, request, queue, capture_callback, &capture, &token), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_prefetch(loader, request, 1, NULL), PXL_E_INVALID_ARGUMENT);
  pxl_image *image = NULL;
  CHECK_STATUS(pxl_lookup(loader, request, &image), PXL_E_INVALID_ARGUMENT);

  /* The same with a zero tail loads. */
  buffer[sizeof buffer - 1] = 0;
  CHECK_STATUS(load_and_wait(env, loader, queue, request, &capture), PXL_OK);
  CHECK_STATUS(capture.status, PXL_OK);
  capture_reset(&capture);

  /* An array of padded requests: the elements are struct_size apart. */
  enum { STRIDE = sizeof(pxl_request) + PAD };
  unsigned char array[3 * STRIDE];
  memset(array, 0xAA, sizeof array);
  for (int i = 0; i < 3; i++) {
    pxl_request *element = (pxl_request *)(void *)(array + i * STRIDE);
    CHECK_STATUS(pxl_request_init_size(element, STRIDE), PXL_OK);
    element->url = u.url;
    element->width = 20 + i;
    element->height = 20;
  }
  pxl_token tokens[3] = {0, 0, 0};
  CHECK_STATUS(pxl_prefetch(loader, (const pxl_request *)(void *)array, 3, tokens), PXL_OK);
  CHECK(tokens[0] != 0 && tokens[1] != 0 && tokens[2] != 0);
  /* One element of another size is refused; the others are still accepted. */
  ((pxl_request *)(void *)(array + STRIDE))->struct_size = sizeof(pxl_request);
  CHECK_STATUS(pxl_prefetch(loader, (const pxl_request *)(void *)array, 3, tokens), PXL_E_INVALID_ARGUMENT);
  CHECK(tokens[0] != 0 && tokens[1] == 0 && tokens[2] != 0);

  /* 0.1.0's size (the end of its last field): loads, nothing read past it. */
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_request_init_size(request, PXL_REQUEST_SIZE_0_1), PXL_OK);
  CHECK(all_bytes(buffer + PXL_REQUEST_SIZE_0_1, sizeof buffer - PXL_REQUEST_SIZE_0_1, 0xAA));
  request->url = u.url;
  request->width = 16;
  request->height = 16;
  CHECK_STATUS(load_and_wait(env, loader, queue, request, &capture), PXL_OK);
  CHECK_STATUS(capture.status, PXL_OK);
  CHECK_INT(pxl_image_width(capture.image), 16);
  capture_reset(&capture);

  request->struct_size = PXL_REQUEST_SIZE_0_1 - 1;
  CHECK_STATUS(pxl_load(loader, request, queue, capture_callback, &capture, &token), PXL_E_INVALID_ARGUMENT);
  drain_for(queue, 50);
  CHECK_INT(atomic_load(&capture.calls), 0);  /* refused: never called */
}

static void test_stats_sizes(pxl_loader *loader) {
  unsigned char buffer[sizeof(pxl_stats) + PAD];
  pxl_stats *stats = (pxl_stats *)(void *)buffer;
  memset(buffer, 0xAA, sizeof buffer);
  stats->struct_size = sizeof buffer;
  CHECK_STATUS(pxl_loader_get_stats(loader, stats), PXL_OK);
  CHECK_INT(stats->struct_size, sizeof(pxl_stats));
  CHECK(stats->requests >= 2);
  CHECK(all_bytes(buffer + sizeof(pxl_stats), PAD, 0));
  /* 0.1.0's size is filled up to there and no further. */
  memset(buffer, 0xAA, sizeof buffer);
  stats->struct_size = PXL_STATS_SIZE_0_1;
  CHECK_STATUS(pxl_get_stats(loader, stats), PXL_OK);
  CHECK_INT(stats->struct_size, PXL_STATS_SIZE_0_1);
  CHECK(all_bytes(buffer + PXL_STATS_SIZE_0_1, sizeof buffer - PXL_STATS_SIZE_0_1, 0xAA));
  stats->struct_size = PXL_STATS_SIZE_0_1 - 1;
  CHECK_STATUS(pxl_loader_get_stats(loader, stats), PXL_E_INVALID_ARGUMENT);
}

/* Decoded thumbnails kept on disk: a fresh loader delivers the very pixels the first one
 * decoded, from the disk, without a request; with disk_variant_max_side 0 it decodes the
 * encoded entry instead. */
void test_disk_variants(const struct test_env *env) {
  char directory[] = "/tmp/pxl-variants.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "disk-variants");
  pxl_request request;
  request_for(&request, u.url, 40, 30, PXL_MODE_FILL, PXL_FORMAT_BGRA8_PREMUL);
  pxl_image *first = NULL;
  for (int round = 0; round < 3; round++) {
    pxl_config config;
    pxl_config_init(&config);
    config.disk_cache_bytes = 8 << 20;
    config.disk_cache_dir = directory;
    if (round == 2) config.disk_variant_max_side = 0;
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    struct capture capture;
    memset(&capture, 0, sizeof capture);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &capture), PXL_OK);
    CHECKF(capture.status == PXL_OK, "round %d: %s", round, capture.message);
    pxl_stats stats;
    stats.struct_size = sizeof stats;
    if (round == 0) {
      CHECK_INT(capture.source, PXL_SOURCE_NETWORK);
      first = pxl_image_retain(capture.image);
      capture_reset(&capture);
      pxl_loader_free(loader);  /* joins the disk threads: the thumbnail is written */
    } else {
      CHECK_INT(capture.source, PXL_SOURCE_DISK);
      CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
      CHECK_INT(stats.disk_hits, 1);
      CHECK_INT(stats.variant_hits, round == 1 ? 1 : 0);
      CHECK_INT(stats.variants_stored, 0);
      const pxl_image *image = capture.image;
      CHECK(image && first);
      if (image && first) {
        CHECK_INT(pxl_image_width(image), 40);
        CHECK_INT(pxl_image_height(image), 30);
        CHECK_INT(pxl_image_format(image), PXL_FORMAT_BGRA8_PREMUL);
        CHECK_INT(pxl_image_original_width(image), pxl_image_original_width(first));
        CHECK_INT(pxl_image_stride(image), pxl_image_stride(first));
        CHECKF(memcmp(pxl_image_pixels(image), pxl_image_pixels(first), pxl_image_byte_count(first)) == 0,
               "round %d: the pixels the first loader decoded", round);
      }
      capture_reset(&capture);
      pxl_loader_free(loader);
    }
    pxl_queue_free(queue);
  }
  CHECK_INT(log_wait_count(env, u.uri, 1, 1000), 1);  /* one request in all */
  pxl_image_release(first);

  /* A loader that stores one counts it. */
  pxl_config config;
  pxl_config_init(&config);
  config.disk_cache_bytes = 8 << 20;
  config.disk_cache_dir = directory;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  request_for(&request, u.url, 20, 20, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture capture;
  memset(&capture, 0, sizeof capture);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &capture), PXL_OK);
  capture_reset(&capture);
  pxl_stats stats;
  stats.struct_size = sizeof stats;
  double deadline = now_ms() + 5000;
  pxl_status got;
  do {  /* the write runs on a disk thread after the callback */
    got = pxl_loader_get_stats(loader, &stats);
  } while (got == PXL_OK && stats.variants_stored == 0 && now_ms() < deadline && (sleep_ms(1), 1));
  CHECK_STATUS(got, PXL_OK);
  CHECK_INT(stats.variants_stored, 1);
  CHECK(stats.variant_bytes_stored > 20 * 15 * 4);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  char command[64];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  CHECK(system(command) == 0);
}

static int no_request(int64_t row, pxl_request *request, void *user_data) {
  (void)row, (void)request, (void)user_data;
  return 0;
}
static void no_row(int64_t row, const pxl_result *result, void *user_data) {
  (void)row, (void)result, (void)user_data;
}

static void test_table_sizes(pxl_loader *loader, pxl_queue *queue) {
  unsigned char buffer[sizeof(pxl_table_config) + PAD];
  pxl_table_config *config = (pxl_table_config *)(void *)buffer;
  pxl_table *table = NULL;
  memset(buffer, 0xAA, sizeof buffer);
  CHECK_STATUS(pxl_table_config_init_size(config, sizeof buffer), PXL_OK);
  CHECK_INT(config->prefetch_rows, 8);
  CHECK_STATUS(pxl_table_new(loader, queue, config, 10, no_request, no_row, NULL, &table), PXL_OK);
  pxl_table_free(table);
  buffer[sizeof buffer - 3] = 1;
  CHECK_STATUS(pxl_table_new(loader, queue, config, 10, no_request, no_row, NULL, &table), PXL_E_INVALID_ARGUMENT);
  CHECK(table == NULL);

  unsigned char stats_buffer[sizeof(pxl_table_stats) + PAD];
  pxl_table_stats *stats = (pxl_table_stats *)(void *)stats_buffer;
  CHECK_STATUS(pxl_table_new(loader, queue, NULL, 10, no_request, no_row, NULL, &table), PXL_OK);
  memset(stats_buffer, 0xAA, sizeof stats_buffer);
  stats->struct_size = sizeof stats_buffer;
  CHECK_STATUS(pxl_table_get_stats(table, stats), PXL_OK);
  CHECK_INT(stats->struct_size, sizeof(pxl_table_stats));
  CHECK(all_bytes(stats_buffer + sizeof(pxl_table_stats), PAD, 0));
  stats->struct_size = PXL_TABLE_STATS_SIZE_0_1 - 1;
  CHECK_STATUS(pxl_table_get_stats(table, stats), PXL_E_INVALID_ARGUMENT);
  pxl_table_free(table);
}

void test_struct_sizes(const struct test_env *env) {
  test_config_sizes();
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  test_request_sizes(env, loader, queue);
  test_stats_sizes(loader);
  test_table_sizes(loader, queue);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

struct log_capture {
  atomic_int lines;
  atomic_int level;
  char first[256];
  atomic_int has_first;
};

static void capture_log(int32_t level, const char *message, void *user_data) {
  struct log_capture *log = user_data;
  int expected = 0;
  if (atomic_compare_exchange_strong(&log->has_first, &expected, 1)) {
    snprintf(log->first, sizeof log->first, "%s", message);
    atomic_store(&log->level, level);
  }
  atomic_fetch_add(&log->lines, 1);
}

/* A loader whose disk cache directory cannot exist: loads still work; the one line about
 * it goes to the log callback, and nothing at all to stderr. */
void test_log_callback(const struct test_env *env) {
  char unusable[] = "/proc/self/pixload-cannot-be-here";
  /* stderr goes to a file for the duration: the library must not write there. */
  char path[] = "/tmp/pxl-stderr.XXXXXX";
  int captured = mkstemp(path);
  CHECK(captured >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(captured, 2);

  for (int with_callback = 0; with_callback <= 1; with_callback++) {
    struct log_capture log;
    memset(&log, 0, sizeof log);
    pxl_config config;
    pxl_config_init(&config);
    config.disk_cache_bytes = 1 << 20;
    config.disk_cache_dir = unusable;
    if (with_callback) {
      config.log = capture_log;
      config.log_user_data = &log;
    }
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    pxl_request request;
    struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, with_callback ? "log-on" : "log-off");
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture capture;
    memset(&capture, 0, sizeof capture);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &capture), PXL_OK);
    CHECKF(capture.status == PXL_OK, "an unusable disk cache never fails a load (%s)", capture.message);
    capture_reset(&capture);
    pxl_loader_free(loader);  /* joins the disk threads: every log call has happened */
    pxl_queue_free(queue);
    if (with_callback) {
      CHECKF(atomic_load(&log.lines) == 1, "one log line, got %d", atomic_load(&log.lines));
      CHECK_INT(atomic_load(&log.level), PXL_LOG_WARNING);
      CHECKF(strstr(log.first, "without a disk cache") != NULL, "log line: %s", log.first);
    }
  }

  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  struct stat st;
  CHECK(fstat(captured, &st) == 0);
  CHECKF(st.st_size == 0, "the library wrote %ld bytes to stderr", (long)st.st_size);
  close(captured);
  unlink(path);
}
