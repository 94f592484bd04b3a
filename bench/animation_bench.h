/*
 * bench/animation_bench.h: what bench/animation.c and bench/animation_table.c share: the
 * monotonic clock in ms, the process's peak RSS, and ending on a library error.
 * BENCH_NAME (defined before the include) prefixes the error.
 */
#ifndef PXL_BENCH_ANIMATION_BENCH_H
#define PXL_BENCH_ANIMATION_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pixload.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* VmHWM of /proc/self/status, -1 if unknown. */
static long peak_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

static void die(const char *what, pxl_status status) {
  fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, what, pxl_status_string(status));
  exit(1);
}

#endif
