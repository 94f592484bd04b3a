/* Tests/codecs/files.h: the files a shim test takes from directories (the corpus):
 * stream_decode_test.c, jpeg_progressive_test.c. */
#ifndef PXL_TESTS_FILES_H
#define PXL_TESTS_FILES_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* The file's bytes (the caller frees them) and their count in *size; NULL when it cannot
 * be opened or read, or is empty. */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = n > 0 ? malloc((size_t)n) : NULL;
  if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* Every file under dir, recursively (names starting with '.' skipped), of min_size to
 * max_size bytes, read whole and handed to fn (an empty one too, as 0 bytes). */
static void walk_files(const char *dir, long min_size, long max_size,
                       void (*fn)(const char *path, const uint8_t *data, size_t size)) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      walk_files(path, min_size, max_size, fn);
      continue;
    }
    if (st.st_size < min_size || st.st_size > max_size) continue;
    static const uint8_t empty[1] = {0};
    size_t size = 0;
    uint8_t *data = st.st_size > 0 ? read_file(path, &size) : NULL;
    if (data != NULL || st.st_size == 0) fn(path, data != NULL ? data : empty, size);
    free(data);
  }
  closedir(d);
}

#endif
