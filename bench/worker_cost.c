/*
 * bench/worker_cost.c (`make bench-worker`): what a decode costs through the decode
 * worker (worker/) against the same module in-process: wall and CPU per file (the worker's
 * CPU, as its DONE reports it, added to this process's), medians of 9 runs, one warm
 * worker with the heif, jxl and svg modules. The in-process decode writes into a fresh
 * anonymous mapping each run, as the library allocates each image's pixels; the worker's
 * into a fresh memfd (shared memory faults in page by page: most of the difference on large
 * images). Full-size decodes: the library's resize still runs in the host today.
 *
 *   worker_cost WORKER MODULE_DIR FILE...
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../worker/codecs.h"
#include "../worker/worker_client.h"

#define RUNS 9

static double ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v) {
  qsort(v, RUNS, sizeof v[0], by_value);
  return v[RUNS / 2];
}

/* A worker's start to its first decode, as the library starts one (one module alone,
 * --only): posix_spawn, the sandbox, the module loaded, HELLO, then the module's last file
 * on the command line (the small seeds) decoded; median of 9. The warm pool hides it after
 * a loader's first isolated image (it starts workers ahead of need). */
static int start_to_first_decode(const char *exe, const char *dir, int count, char **files) {
  static const struct { const char *ext, *module; } modules[] = {{".heic", "heif"}, {".jxl", "jxl"}, {".svg", "svg"}};
  printf("\n%-28s %12s %12s %12s\n", "worker start, module alone", "spawn ms", "+decode ms", "decode ms");
  for (size_t m = 0; m < sizeof modules / sizeof modules[0]; m++) {
    const char *file = NULL;
    for (int i = 0; i < count; i++) {
      const char *dot = strrchr(files[i], '.');
      if (dot && strcmp(dot, modules[m].ext) == 0) file = files[i];
    }
    if (!file) continue;
    static uint8_t data[4 << 20];
    FILE *f = fopen(file, "rb");
    if (!f) continue;
    size_t size = fread(data, 1, sizeof data, f);
    fclose(f);
    double spawn[RUNS], first[RUNS], decode[RUNS];
    char message[256];
    for (int r = 0; r < RUNS; r++) {
      pxl_worker_options o = {.executable = exe, .module_dir = dir, .only = modules[m].module, .max_pixels = 64u << 20};
      pxl_worker *w;
      double start = ms(CLOCK_MONOTONIC);
      if (pxl_worker_spawn(&o, 5000, &w, message, sizeof message) != PXL_OK) return puts(message), 1;
      spawn[r] = ms(CLOCK_MONOTONIC) - start;
      pxl_worker_result res;
      double sent = ms(CLOCK_MONOTONIC);
      pxl_worker_decode(w, data, size, NULL, 0, 0, 10000, &res);
      first[r] = ms(CLOCK_MONOTONIC) - start;
      decode[r] = ms(CLOCK_MONOTONIC) - sent;
      if (res.status != PXL_OK) return printf("%s: %s\n", file, res.message), 1;
      pxl_worker_result_release(&res);
      pxl_worker_free(w);
    }
    const char *name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    char label[64];
    snprintf(label, sizeof label, "%s (%s)", modules[m].module, name);
    printf("%-28s %12.2f %12.2f %12.2f\n", label, median(spawn), median(first), median(decode));
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s WORKER MODULE_DIR FILE...\n", argv[0]);
    return 2;
  }
  char message[256];
  if (pxl_worker_codecs_load(argv[2], "heif,jxl,svg", message, sizeof message) < 0) return puts(message), 1;
  pxl_worker_options o = {.executable = argv[1], .module_dir = argv[2], .only = "heif,jxl,svg", .max_pixels = 64u << 20};
  pxl_worker *w;
  if (pxl_worker_spawn(&o, 5000, &w, message, sizeof message) != PXL_OK) return puts(message), 1;
  printf("%-28s %12s %12s %12s %12s %7s %7s\n", "file", "in wall ms", "in cpu ms", "worker wall", "worker cpu", "wall x", "cpu x");
  static uint8_t data[32 << 20];
  for (int i = 3; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) continue;
    size_t size = fread(data, 1, sizeof data, f);
    fclose(f);
    const pxl_codec *c = pxl_worker_codec_sniff(data, size);
    if (!c) continue;
    double in_wall[RUNS], in_cpu[RUNS], w_wall[RUNS], w_cpu[RUNS];
    int failed = 0;
    for (int r = 0; r < RUNS; r++) {
      double wall = ms(CLOCK_MONOTONIC), cpu = ms(CLOCK_PROCESS_CPUTIME_ID);
      pxl_codec_header h = {.struct_size = sizeof h, .frame_count = 1, .orientation = 1, .has_alpha = 1};
      if (c->read_header(data, size, &h, message, sizeof message, c->user_data) != PXL_OK) failed = 1;
      size_t bytes = (size_t)h.width * h.height * 4;
      uint8_t *pixels = failed ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (pixels != MAP_FAILED) {
        static const volatile int32_t no = 0;
        pxl_codec_target t = {.struct_size = sizeof t, .width = h.width, .height = h.height, .pixels = pixels,
                              .stride = (size_t)h.width * 4, .cancel = &no};
        if (c->decode(data, size, &t, message, sizeof message, c->user_data) != PXL_OK) failed = 1;
        munmap(pixels, bytes);
      }
      in_wall[r] = ms(CLOCK_MONOTONIC) - wall;
      in_cpu[r] = ms(CLOCK_PROCESS_CPUTIME_ID) - cpu;
      pxl_worker_result res;
      wall = ms(CLOCK_MONOTONIC), cpu = ms(CLOCK_PROCESS_CPUTIME_ID);
      pxl_worker_decode(w, data, size, NULL, 0, 0, 10000, &res);
      w_wall[r] = ms(CLOCK_MONOTONIC) - wall;
      w_cpu[r] = ms(CLOCK_PROCESS_CPUTIME_ID) - cpu + res.worker_cpu_ns / 1e6;
      if (res.status != PXL_OK) failed = 1;
      pxl_worker_result_release(&res);
      if (!pxl_worker_alive(w)) return printf("%s: the worker ended: %s\n", argv[i], res.message), 1;
    }
    const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
    double iw = median(in_wall), ic = median(in_cpu), ww = median(w_wall), wc = median(w_cpu);
    printf("%-28s %12.2f %12.2f %12.2f %12.2f %7.3f %7.3f%s\n", name, iw, ic, ww, wc, ww / iw, wc / ic,
           failed ? "  (a decode failed)" : "");
  }
  pxl_worker_free(w);
  return start_to_first_decode(argv[1], argv[2], argc - 3, argv + 3);
}
