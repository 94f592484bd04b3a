/* bench/read_file.h: a whole file into a malloc'd buffer, for the benchmark programs that
 * time decoding from memory (color.c, first_scan.c, resample.c). */
#ifndef PXL_BENCH_READ_FILE_H
#define PXL_BENCH_READ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The file's bytes (the caller frees them) and their count in *size; NULL when it cannot
 * be opened or read, or is empty. */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = n > 0 ? malloc((size_t)n) : NULL;
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

#endif
