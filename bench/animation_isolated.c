/*
 * bench/animation_isolated.c: what an animation's frames cost decoded in a worker
 * (worker/README.md, "An animation's frames") against in-process: PXL_FLAG_ANIMATE loads of
 * FILE (every frame, full size, no cache) by one warm loader per isolation, interleaved,
 * the median wall time of ROUNDS loads after one warm-up load, and that per frame; and the
 * process's CPU (the workers' included: they are reaped at pxl_loader_free, so each
 * isolation's loader is made and freed for its own CPU count) per frame.
 *
 *   make bench-animation-isolated FILE=... [ISOLATION=all|modules] [ROUNDS=31]
 *   build/bench-animation-isolated FILE [all|modules [ROUNDS]]
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pixload.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void) {
  struct rusage self, children;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return (self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec + children.ru_stime.tv_sec) * 1e3 +
         (self.ru_utime.tv_usec + self.ru_stime.tv_usec + children.ru_utime.tv_usec + children.ru_stime.tv_usec) / 1e3;
}

struct wait {
  atomic_int done;
  pxl_status status;
  int frames;
};

static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct wait *w = user_data;
  w->status = result->status;
  w->frames = result->image ? pxl_image_frame_count(result->image) : 0;
  atomic_store(&w->done, 1);
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum { MAX_ROUNDS = 201 };

/* ROUNDS loads with one loader: the median wall ms, the CPU ms per load (workers included),
 * and the frame count. */
static void measure(const char *url, int32_t isolation, int rounds, double *wall, double *cpu, int *frames) {
  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes |= PXL_SCHEME_FILE;
  config.memory_cache_bytes = 0;
  config.isolation = isolation;
  double cpu_start = cpu_ms();
  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  if (pxl_loader_new(&config, &loader) != PXL_OK || pxl_queue_new(&queue) != PXL_OK) exit(1);
  double times[MAX_ROUNDS];
  for (int i = -1; i < rounds; i++) { /* -1: the warm-up (the worker's start) */
    pxl_request request;
    pxl_request_init(&request);
    request.url = url;
    request.flags = PXL_FLAG_ANIMATE;
    struct wait w = {0};
    double start = now_ms();
    if (pxl_load(loader, &request, queue, on_result, &w, NULL) != PXL_OK) exit(1);
    while (!atomic_load(&w.done)) {
      pxl_queue_wait(queue, 100);
      pxl_queue_dispatch(queue, 0);
    }
    if (w.status != PXL_OK) {
      fprintf(stderr, "bench-animation-isolated: %s: %s\n", url, pxl_status_string(w.status));
      exit(1);
    }
    if (i >= 0) times[i] = now_ms() - start;
    *frames = w.frames;
    if (i == -1) cpu_start = cpu_ms();
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  *cpu = (cpu_ms() - cpu_start) / rounds;
  qsort(times, (size_t)rounds, sizeof times[0], compare);
  *wall = times[rounds / 2];
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench-animation-isolated FILE [all|modules [ROUNDS]]\n");
    return 2;
  }
  int32_t isolated = argc > 2 && strcmp(argv[2], "modules") == 0 ? PXL_ISOLATION_MODULES : PXL_ISOLATION_ALL;
  int rounds = argc > 3 ? atoi(argv[3]) : 31;
  if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 31;
  char url[4096];
  snprintf(url, sizeof url, "file://%s", realpath(argv[1], NULL));
  double wall[2][3], cpu[2][3];
  int frames = 0;
  for (int r = 0; r < 3; r++) /* interleaved: in-process, isolated, three times */
    for (int k = 0; k < 2; k++) measure(url, k ? isolated : PXL_ISOLATION_NONE, rounds, &wall[k][r], &cpu[k][r], &frames);
  printf("%s: %d frames, PXL_FLAG_ANIMATE, median of %d loads (3 interleaved runs)\n", argv[1], frames, rounds);
  for (int k = 0; k < 2; k++) {
    qsort(wall[k], 3, sizeof(double), compare);
    qsort(cpu[k], 3, sizeof(double), compare);
    printf("  %-9s wall %8.2f ms (%.3f ms a frame)  CPU %8.2f ms (%.3f ms a frame)\n",
           k ? (isolated == PXL_ISOLATION_ALL ? "all" : "modules") : "none", wall[k][1], wall[k][1] / frames, cpu[k][1],
           cpu[k][1] / frames);
  }
  printf("  isolated / in-process: wall %.2fx, CPU %.2fx\n", wall[1][1] / wall[0][1], cpu[1][1] / cpu[0][1]);
  return 0;
}
