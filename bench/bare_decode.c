/*
 * bench/bare_decode.c: the bare decode that pixload's whole process is held against.
 *
 *   bare-decode [--size WxH] [--threads N] [--repeat R] [--warmup] [--png-simplified] FILE_LIST
 *
 * Reads every file of the list (one path per line) into memory first, untimed; then N
 * threads (default 1) take the files in turn and decode each one with libjpeg-turbo or
 * libpng called directly (bench/direct/bench_direct.c: RGBA8, JPEG DCT-scaled to the
 * largest 1/1..1/8 that still covers the target, then a box average of the centred
 * crop), freeing the pixels at once. No network, no cache, no queue: the least work
 * that turns the bytes into the thumbnails. --repeat decodes the whole list R times.
 *
 * Prints the same line as the other benchmark programs:
 *   bare: N images, X.X images/s, Y.YYY ms CPU/image (user+sys, getrusage RUSAGE_SELF), wall Z.ZZ s
 * Any failure to decode is reported and makes the exit status 1.
 *
 * Build: cc -O2 bench/bare_decode.c bench/direct/bench_direct.c -Ibench/direct/include
 *        -ljpeg -lpng -lpthread
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_direct.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct file {
  char *path;
  uint8_t *data;
  size_t size;
} file;

static file *files;
static size_t file_count, total;
static int target_w, target_h, decode_flags;
static atomic_size_t next_index;
static atomic_int failures;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    size_t i = atomic_fetch_add(&next_index, 1);
    if (i >= total) return NULL;
    const file *f = &files[i % file_count];
    bench_image image;
    if (bench_direct_decode_with(f->data, f->size, target_w, target_h, decode_flags, &image) != 0) {
      fprintf(stderr, "bare-decode: cannot decode %s\n", f->path);
      atomic_fetch_add(&failures, 1);
      continue;
    }
    free(image.pixels);
  }
}

static int read_file(file *f) {
  FILE *in = fopen(f->path, "rb");
  if (!in) return -1;
  size_t cap = 1 << 20;
  f->data = malloc(cap);
  f->size = 0;
  size_t n;
  while (f->data && (n = fread(f->data + f->size, 1, cap - f->size, in)) > 0) {
    f->size += n;
    if (f->size == cap) f->data = realloc(f->data, cap *= 2);
  }
  fclose(in);
  return f->data ? 0 : -1;
}

static void usage(void) {
  fprintf(stderr, "usage: bare-decode [--size WxH] [--threads N] [--repeat R] [--warmup] [--png-simplified] FILE_LIST\n");
  exit(2);
}

int main(int argc, char **argv) {
  int threads = 1, repeat = 1, warmup = 0;
  const char *list = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      if (sscanf(argv[++i], "%dx%d", &target_w, &target_h) != 2 || target_w < 1 || target_h < 1) usage();
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      if ((threads = atoi(argv[++i])) < 1 || threads > 64) usage();
    } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      if ((repeat = atoi(argv[++i])) < 1) usage();
    } else if (!strcmp(argv[i], "--warmup")) {
      warmup = 1;
    } else if (!strcmp(argv[i], "--png-simplified")) {
      decode_flags |= BENCH_PNG_SIMPLIFIED;
    } else if (argv[i][0] != '-' && !list) {
      list = argv[i];
    } else {
      usage();
    }
  }
  if (!list) usage();
  FILE *in = fopen(list, "r");
  if (!in) { perror(list); return 2; }
  char line[8192];
  size_t cap = 0;
  while (fgets(line, sizeof line, in)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    if (file_count == cap) files = realloc(files, (cap = cap ? cap * 2 : 256) * sizeof *files);
    files[file_count].path = strdup(line);
    if (read_file(&files[file_count]) != 0) { fprintf(stderr, "bare-decode: cannot read %s\n", line); return 2; }
    file_count++;
  }
  fclose(in);
  if (!file_count) { fprintf(stderr, "bare-decode: no files in %s\n", list); return 2; }
  if (warmup) { /* one untimed pass over the list, on this thread */
    total = file_count;
    worker(NULL);
    atomic_store(&next_index, 0);
  }
  total = file_count * (size_t)repeat;

  double t0 = now(), cpu0 = cpu_seconds();
  pthread_t tids[64];
  for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, worker, NULL);
  for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
  double wall = now() - t0, cpu = cpu_seconds() - cpu0;
  if (atomic_load(&failures)) {
    fprintf(stderr, "bare-decode: FAILED: %d of %zu images\n", atomic_load(&failures), total);
    return 1;
  }
  printf("bare: %zu images, %.1f images/s, %.3f ms CPU/image (user+sys, getrusage RUSAGE_SELF), wall %.2f s\n",
         total, (double)total / wall, cpu * 1000.0 / (double)total, wall);
  return 0;
}
