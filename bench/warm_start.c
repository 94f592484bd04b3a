/*
 * bench/warm_start.c URLS_FILE CACHE_DIR [RUNS]
 *
 * A warm start: the first screen of an app that showed these photographs before. A fresh
 * loader (new process state: empty memory cache, disk cache opened on first use) loads
 * the first 8 URLs as 150x150 FILL thumbnails from a disk cache a previous loader filled;
 * the time is from the first pxl_load to the 8th callback (all on this thread, in-process).
 *
 * Two ways, run alternately on caches of their own so that both see the same machine:
 *   kept      decoded thumbnails kept on disk (pxl_config.disk_variant_max_side, default)
 *   decoded   variants off (disk_variant_max_side = 0): every photograph decoded again
 *             from its encoded entry, as before the variants existed
 * Prints the median of RUNS (default 3) runs of each, after one untimed run each (the page
 * cache warm, as in an app started again). Every result must be an image from the disk
 * cache, else the benchmark fails.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pixload.h"

enum { SCREEN = 8, MAX_RUNS = 15 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct screen {
  int done;
  int bad;
  double last_ms;
  pxl_source source[SCREEN];
};

static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct screen *screen = user_data;
  if (result->status != PXL_OK) {
    fprintf(stderr, "warm_start: %s: %s\n", pxl_status_string(result->status), result->message);
    screen->bad++;
  } else if (pxl_image_width(result->image) != 150 || pxl_image_height(result->image) != 150) {
    fprintf(stderr, "warm_start: a %dx%d image\n", pxl_image_width(result->image), pxl_image_height(result->image));
    screen->bad++;
  } else if (result->source != PXL_SOURCE_DISK) {
    screen->bad++;
  }
  screen->done++;
  screen->last_ms = now_ms();
}

static pxl_loader *new_loader(const char *dir, int64_t variant_max_side) {
  pxl_config config;
  pxl_config_init(&config);
  config.disk_cache_bytes = (uint64_t)1 << 30;
  config.disk_cache_dir = dir;
  config.disk_variant_max_side = variant_max_side;
  pxl_loader *loader = NULL;
  pxl_status status = pxl_loader_new(&config, &loader);
  if (status != PXL_OK) {
    fprintf(stderr, "warm_start: pxl_loader_new: %s\n", pxl_status_string(status));
    exit(1);
  }
  return loader;
}

/* Loads the screen with a fresh loader; returns the ms from the first pxl_load to the
 * last callback, or -1 when a result was not what a warm start must give. */
static double load_screen(char **urls, int count, const char *dir, int64_t variant_max_side, int expect_disk,
                          uint64_t *variant_hits) {
  pxl_loader *loader = new_loader(dir, variant_max_side);
  pxl_queue *queue = NULL;
  if (pxl_queue_new(&queue) != PXL_OK) exit(1);
  struct screen screen;
  memset(&screen, 0, sizeof screen);
  double start = now_ms();
  for (int i = 0; i < count; i++) {
    pxl_request request;
    pxl_request_init(&request);
    request.url = urls[i];
    request.width = 150;
    request.height = 150;
    request.mode = PXL_MODE_FILL;
    request.priority = PXL_PRIORITY_VISIBLE;
    if (pxl_load(loader, &request, queue, on_result, &screen, NULL) != PXL_OK) exit(1);
  }
  while (screen.done < count) {
    pxl_queue_wait(queue, 10000);
    pxl_queue_dispatch(queue, 0);
  }
  pxl_stats stats;
  stats.struct_size = sizeof stats;
  pxl_loader_get_stats(loader, &stats);
  if (variant_hits) *variant_hits = stats.variant_hits;
  pxl_loader_free(loader);  /* joins the disk threads: what it stores is written */
  pxl_queue_free(queue);
  if (expect_disk && screen.bad) return -1;
  return screen.last_ms - start;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s URLS_FILE CACHE_DIR [RUNS]\n", argv[0]);
    return 2;
  }
  int runs = argc > 3 ? atoi(argv[3]) : 3;
  if (runs < 1 || runs > MAX_RUNS) runs = 3;
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  char *urls[SCREEN];
  int count = 0;
  char line[4096];
  while (count < SCREEN && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0]) urls[count++] = strdup(line);
  }
  fclose(f);
  if (count < SCREEN) {
    fprintf(stderr, "warm_start: %d URLs, a screen is %d\n", count, SCREEN);
    return 1;
  }

  struct way {
    const char *name;
    int64_t variant_max_side;
    char dir[4096];
    double ms[MAX_RUNS];
    uint64_t variant_hits;
  } ways[2] = {{"kept", 256, "", {0}, 0}, {"decoded", 0, "", {0}, 0}};
  for (int w = 0; w < 2; w++) {
    snprintf(ways[w].dir, sizeof ways[w].dir, "%s/%s", argv[2], ways[w].name);
    /* The earlier session: over the network, into the disk cache. */
    load_screen(urls, count, ways[w].dir, ways[w].variant_max_side, 0, NULL);
    /* One untimed warm start: the page cache holds what a start reads. */
    if (load_screen(urls, count, ways[w].dir, ways[w].variant_max_side, 1, NULL) < 0) {
      fprintf(stderr, "warm_start: %s: not every image came from the disk cache\n", ways[w].name);
      return 1;
    }
  }
  for (int run = 0; run < runs; run++) {
    for (int w = 0; w < 2; w++) {
      ways[w].ms[run] = load_screen(urls, count, ways[w].dir, ways[w].variant_max_side, 1, &ways[w].variant_hits);
      if (ways[w].ms[run] < 0) {
        fprintf(stderr, "warm_start: %s: not every image came from the disk cache\n", ways[w].name);
        return 1;
      }
    }
  }
  for (int w = 0; w < 2; w++) {
    double sorted[MAX_RUNS];
    memcpy(sorted, ways[w].ms, sizeof sorted);
    qsort(sorted, runs, sizeof sorted[0], by_value);
    char each[256] = "";
    for (int run = 0; run < runs; run++) {
      size_t used = strlen(each);
      snprintf(each + used, sizeof each - used, "%s%.1f", run ? " " : "", ways[w].ms[run]);
    }
    if (w == 0) {
      printf("warm start: first screen (8 photos, 150x150 fill) from the disk cache, fresh loader: %.1f ms "
             "(median of %d: %s; %llu of 8 from stored thumbnails; target <= 16 ms)\n",
             sorted[runs / 2], runs, each, (unsigned long long)ways[w].variant_hits);
    } else {
      printf("warm start, thumbnails not kept (disk_variant_max_side 0, every photo decoded): %.1f ms "
             "(median of %d: %s)\n", sorted[runs / 2], runs, each);
    }
  }
  for (int i = 0; i < count; i++) free(urls[i]);
  return 0;
}
