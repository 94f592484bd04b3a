/*
 * abi_0_1.c: a program built against the 0.1.0 header (Tests/abi/pixload-0.1.0.h, a copy
 * of the header as released) runs against today's library. It uses the structs at their
 * 0.1.0 sizes, with a canary after each, and checks the library neither reads nor writes
 * past them, and drives a table with 0.1.0's callbacks (user_data first; 0.2.0 moved it
 * last, and kept 0.1.0's pxl_table_new symbol for programs like this one).
 *
 *   abi_0_1 IMAGE.jpg    (a 640x480 JPEG; Tests/abi/run.sh makes one)
 * Last line: "N passed, N failed".
 */
#define _DEFAULT_SOURCE /* realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pixload-0.1.0.h"

static int passed, failed;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) passed++;                                                          \
    else { failed++; fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); } \
  } while (0)

enum { CANARY = 64 };
static int canary_intact(const unsigned char *p) {
  for (int i = 0; i < CANARY; i++)
    if (p[i] != 0xA5) return 0;
  return 1;
}

struct result {
  int calls;
  pxl_status status;
  int width, height;
};

static void on_loaded(pxl_token token, const pxl_result *r, void *user_data) {
  (void)token;
  struct result *out = user_data;
  out->calls++;
  out->status = r->status;
  out->width = pxl_image_width(r->image);
  out->height = pxl_image_height(r->image);
}

struct table_host {
  const char *url;
  int requests, rows_delivered;
  int64_t last_row;
  pxl_status last_status;
};

static int table_request(void *user_data, int64_t row, pxl_request *request) {
  struct table_host *host = user_data;
  host->requests++;
  request->url = host->url;
  request->width = 32 + (int32_t)row;
  request->height = 32;
  return 1;
}

static void table_row(void *user_data, int64_t row, const pxl_result *result) {
  struct table_host *host = user_data;
  host->rows_delivered++;
  host->last_row = row;
  host->last_status = result->status;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s IMAGE.jpg\n", argv[0]);
    return 2;
  }
  printf("built against %s, running against %s\n", PXL_VERSION_STRING, pxl_version());
  CHECK(pxl_version_num() >= PXL_VERSION_NUM);
  CHECK(strcmp(pxl_status_string(PXL_E_NOT_CACHED), "not in the cache") == 0);

  struct { pxl_config c; unsigned char canary[CANARY]; } config;
  memset(&config, 0xA5, sizeof config);
  pxl_config_init(&config.c);
  CHECK(config.c.struct_size == sizeof(pxl_config));
  CHECK(config.c.max_concurrent_downloads == 8);
  CHECK(canary_intact(config.canary));
  config.c.allowed_schemes |= PXL_SCHEME_FILE;
  pxl_loader *loader = NULL;
  CHECK(pxl_loader_new(&config.c, &loader) == PXL_OK && loader != NULL);
  CHECK(canary_intact(config.canary));
  if (!loader) goto done;

  pxl_queue *queue = NULL;
  CHECK(pxl_queue_new(&queue) == PXL_OK);

  char url[4096];
  char *absolute = realpath(argv[1], NULL);
  snprintf(url, sizeof url, "file://%s", absolute ? absolute : argv[1]);
  free(absolute);
  struct { pxl_request r; unsigned char canary[CANARY]; } request;
  memset(&request, 0xA5, sizeof request);
  pxl_request_init(&request.r);
  CHECK(request.r.struct_size == sizeof(pxl_request));
  CHECK(canary_intact(request.canary));
  request.r.url = url;
  request.r.width = 64;
  request.r.height = 64;
  request.r.mode = PXL_MODE_FILL;
  struct result result = {0};
  pxl_token token = 0;
  CHECK(pxl_load(loader, &request.r, queue, on_loaded, &result, &token) == PXL_OK && token != 0);
  for (int i = 0; i < 100 && result.calls == 0; i++) {
    pxl_queue_wait(queue, 100);
    pxl_queue_dispatch(queue, 0);
  }
  CHECK(result.calls == 1);
  CHECK(result.status == PXL_OK);
  CHECK(result.width == 64 && result.height == 64);

  /* A memory hit through the 0.1.0 struct, then the stats at 0.1.0's size. */
  pxl_image *image = NULL;
  CHECK(pxl_lookup(loader, &request.r, &image) == PXL_OK && image != NULL);
  pxl_image_release(image);
  struct { pxl_stats s; unsigned char canary[CANARY]; } stats;
  memset(&stats, 0xA5, sizeof stats);
  stats.s.struct_size = sizeof(pxl_stats);
  CHECK(pxl_get_stats(loader, &stats.s) == PXL_OK);
  CHECK(stats.s.requests == 1 && stats.s.network_fetches == 1);
  CHECK(canary_intact(stats.canary));

  struct { pxl_table_config c; unsigned char canary[CANARY]; } table_config;
  memset(&table_config, 0xA5, sizeof table_config);
  pxl_table_config_init(&table_config.c);
  CHECK(table_config.c.struct_size == sizeof(pxl_table_config) && table_config.c.prefetch_rows == 8);
  CHECK(canary_intact(table_config.canary));

  /* A table, its callbacks as 0.1.0 declared them: row 0 of 3 visible. */
  struct table_host host = {url, 0, 0, 0, 0};
  pxl_table *table = NULL;
  CHECK(pxl_table_new(loader, queue, &table_config.c, 3, table_request, table_row, &host, &table) == PXL_OK);
  CHECK(pxl_table_set_visible(table, 0, 1, 0) == PXL_OK);
  for (int i = 0; i < 100 && host.rows_delivered == 0; i++) {
    pxl_queue_wait(queue, 100);
    pxl_queue_dispatch(queue, 0);
  }
  CHECK(host.requests >= 1);
  CHECK(host.rows_delivered == 1 && host.last_row == 0 && host.last_status == PXL_OK);
  pxl_table_free(table);

  pxl_loader_free(loader);
  pxl_queue_free(queue);
done:
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
