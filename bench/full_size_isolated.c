/*
 * bench/full_size_isolated.c ISOLATION FORMAT RUNS URL: what a full-size isolated decode
 * costs the host (issue 39, "no copy on the host"): one loader (isolation "none",
 * "modules" or "all"; memory cache off), one untimed load of URL (the worker starts), then
 * RUNS loads of it at full size in FORMAT ("rgba8" or "rgba8_premul"), one at a time, each
 * image's pages read once (as a host uploading it would) and released. Prints the medians
 * of the loads' wall and of this process's CPU (the worker's is not in it: another
 * process), and the process's peak resident memory (VmHWM).
 *
 *   cc -O2 -Iinclude bench/full_size_isolated.c -o full_size_isolated -Lbuild/lib -lpixload
 *   LD_LIBRARY_PATH=build/lib ./full_size_isolated all rgba8 9 file:///path/photo.jpg
 *
 * Run it in a process of its own per measurement (VmHWM is the process's), alternating
 * the libraries compared.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pixload.h"

enum { MAX_RUNS = 64 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static long peak_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

struct got {
  int done;
  pxl_status status;
  pxl_image *image;
  int isolated;
};

static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct got *got = user_data;
  got->status = result->status;
  if (result->status != PXL_OK) fprintf(stderr, "full_size_isolated: %s: %s\n", pxl_status_string(result->status),
                                        result->message);
  got->image = result->image ? pxl_image_retain(result->image) : NULL;
  pxl_metrics metrics;
  memset(&metrics, 0, sizeof metrics);
  metrics.struct_size = sizeof metrics;
  got->isolated = pxl_result_metrics(result, &metrics) == PXL_OK && metrics.isolated;
  got->done = 1;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s none|modules|all rgba8|rgba8_premul RUNS URL\n", argv[0]);
    return 2;
  }
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.allowed_schemes |= PXL_SCHEME_FILE;
  config.isolation = !strcmp(argv[1], "all") ? PXL_ISOLATION_ALL
                     : !strcmp(argv[1], "none") ? PXL_ISOLATION_NONE : PXL_ISOLATION_MODULES;
  pxl_format format = !strcmp(argv[2], "rgba8") ? PXL_FORMAT_RGBA8 : PXL_FORMAT_RGBA8_PREMUL;
  int runs = atoi(argv[3]);
  if (runs < 1 || runs > MAX_RUNS) runs = 9;
  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  pxl_status made = pxl_loader_new(&config, &loader);
  if (made != PXL_OK || pxl_queue_new(&queue) != PXL_OK) {
    fprintf(stderr, "full_size_isolated: pxl_loader_new: %s\n", pxl_status_string(made));
    return 1;
  }
  double wall[MAX_RUNS], cpu[MAX_RUNS];
  long sum = 0;
  int isolated = 1;
  for (int run = -1; run < runs; run++) {
    struct got got;
    memset(&got, 0, sizeof got);
    pxl_request request;
    pxl_request_init(&request);
    request.url = argv[4];
    request.format = format;
    double w0 = now_ms(), c0 = cpu_ms();
    pxl_status status = pxl_load(loader, &request, queue, on_result, &got, NULL);
    if (status != PXL_OK) {
      fprintf(stderr, "full_size_isolated: pxl_load: %s\n", pxl_status_string(status));
      return 1;
    }
    while (!got.done) {
      pxl_queue_wait(queue, 10000);
      pxl_queue_dispatch(queue, 0);
    }
    if (got.status != PXL_OK || !got.image) return 1;
    const uint8_t *pixels = pxl_image_pixels(got.image);
    size_t size = (size_t)pxl_image_stride(got.image) * (size_t)pxl_image_height(got.image);
    for (size_t i = 0; i < size; i += 4096) sum += pixels[i];
    pxl_image_release(got.image);
    if (run >= 0) {
      wall[run] = now_ms() - w0;
      cpu[run] = cpu_ms() - c0;
      isolated &= got.isolated == (config.isolation != PXL_ISOLATION_NONE);
    }
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  qsort(wall, runs, sizeof wall[0], by_value);
  qsort(cpu, runs, sizeof cpu[0], by_value);
  printf("wall_ms %.2f host_cpu_ms %.2f peak_kb %ld isolated %d (%ld)\n", wall[runs / 2], cpu[runs / 2], peak_kb(),
         isolated, sum % 2);
  return isolated ? 0 : 1;
}
