/*
 * bench/first_scan.c: CPU cost of a progressive JPEG's 1/8 thumbnail decoded from its DC
 * scans alone (pxl_jpeg_decode, the default) against the full decode of every scan
 * (PXL_JPEG_ALL_SCANS), same files, same process, interleaved file by file, REPS rounds.
 * Each file's pixels are compared too: a difference is a failure (exit 1).
 *
 *   first_scan REPS NAME:LISTFILE [NAME:LISTFILE ...]
 *
 * LISTFILE holds one path per line; files that are not progressive (the DC path does
 * not apply) are counted and skipped. Per set it prints the median over rounds of the
 * summed thread CPU time of each path and their ratio; the last line is
 * "first-scan thumbnails: N.Nx cheaper" for the last set (the camera photographs).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pxl_codecs.h"
#include "read_file.h"

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Decodes at 1/8 in RGBA; returns CPU seconds, the output in *out (caller frees). */
static double timed_decode(const uint8_t *data, size_t size, uint32_t options, pxl_codec_output *out) {
  double start = cpu_seconds();
  pxl_codec_status st = pxl_jpeg_decode_with_options(data, size, PXL_CODEC_RGBA, 8, 400000000ull, options, out);
  double spent = cpu_seconds() - start;
  if (st != PXL_CODEC_OK) out->pixels = NULL;
  return spent;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s REPS NAME:LISTFILE ...\n", argv[0]);
    return 2;
  }
  int reps = atoi(argv[1]);
  if (reps < 1) reps = 1;
  int failures = 0;
  double last_ratio = 0;
  for (int s = 2; s < argc; s++) {
    char *name = argv[s], *list = strchr(argv[s], ':');
    if (!list) return 2;
    *list++ = '\0';
    FILE *lf = fopen(list, "r");
    if (!lf) {
      printf("%s: no list %s, skipped\n", name, list);
      continue;
    }
    char path[4096];
    uint8_t *files[512];
    size_t sizes[512], bytes = 0, kept_bytes = 0, needed_bytes = 0;
    int n = 0, baseline = 0;
    while (n < 512 && fgets(path, sizeof path, lf)) {
      path[strcspn(path, "\n")] = '\0';
      size_t size;
      uint8_t *data = path[0] ? read_file(path, &size) : NULL;
      if (!data) continue;
      uint8_t *dc = NULL;
      size_t dc_size = pxl_jpeg_dc_scans(data, size, &dc);
      free(dc);
      if (dc_size == 0) {
        baseline++;
        free(data);
        continue;
      }
      files[n] = data;
      sizes[n++] = size;
      bytes += size;
      kept_bytes += dc_size;
      /* What a thumbnail's transfer downloads when it ends early (pixload.h). */
      int32_t w, h;
      size_t needed = pxl_jpeg_first_scans_end(data, size, &w, &h);
      needed_bytes += needed ? needed : size;
    }
    fclose(lf);
    if (n == 0) {
      printf("%s: no progressive JPEG (%d others), skipped\n", name, baseline);
      continue;
    }
    double *full = calloc((size_t)reps, sizeof *full), *fast = calloc((size_t)reps, sizeof *fast);
    for (int r = 0; r < reps; r++) {
      for (int i = 0; i < n; i++) {
        pxl_codec_output a, b;
        /* Alternate which goes first, so cache warmth favours neither. */
        if ((r + i) % 2) {
          fast[r] += timed_decode(files[i], sizes[i], 0, &a);
          full[r] += timed_decode(files[i], sizes[i], PXL_JPEG_ALL_SCANS, &b);
        } else {
          full[r] += timed_decode(files[i], sizes[i], PXL_JPEG_ALL_SCANS, &b);
          fast[r] += timed_decode(files[i], sizes[i], 0, &a);
        }
        if (!a.pixels || !b.pixels || a.width != b.width || a.height != b.height ||
            memcmp(a.pixels, b.pixels, (size_t)a.stride * a.height) != 0) {
          if (r == 0) printf("FAIL %s file %d: the first-scan thumbnail differs from the full decode\n", name, i);
          failures++;
        }
        free(a.pixels);
        free(b.pixels);
      }
    }
    qsort(full, (size_t)reps, sizeof *full, cmp_double);
    qsort(fast, (size_t)reps, sizeof *fast, cmp_double);
    double mf = full[reps / 2], ms = fast[reps / 2];
    last_ratio = ms > 0 ? mf / ms : 0;
    printf("%s: %d progressive JPEGs (%.1f MB; DC scans kept %.0f%% of the bytes), %d others skipped; 1/8 RGBA, "
           "median of %d: all scans %.2f ms/image, first scans %.2f ms/image CPU: %.1fx cheaper; "
           "early stop: a thumbnail's transfer needs %.0f%% of the bytes (%.0f%% saved)\n",
           name, n, bytes / 1e6, 100.0 * kept_bytes / bytes, baseline, reps, mf * 1e3 / n, ms * 1e3 / n, last_ratio,
           100.0 * needed_bytes / bytes, 100.0 - 100.0 * needed_bytes / bytes);
    for (int i = 0; i < n; i++) free(files[i]);
    free(full);
    free(fast);
  }
  printf("first-scan thumbnails: %.1fx cheaper\n", last_ratio);
  return failures ? 1 : 0;
}
