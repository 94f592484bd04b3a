/*
 * worker/codecs.c: loading codec modules and the library's side of their registration,
 * inside the worker (codecs.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs.h"

static pxl_codec codecs[PXL_WORKER_MAX_CODECS];
static int codec_count;

/* Exported from the executable (Makefile: --export-dynamic-symbol): a module's undefined
 * pxl_codec_init_size and pxl_loader_add_codec bind here. As the library's own. */
pxl_status pxl_codec_init_size(pxl_codec *codec, size_t size) {
  if (!codec || size < sizeof codec->struct_size) return PXL_E_INVALID_ARGUMENT;
  memset(codec, 0, size);
  codec->struct_size = size < sizeof *codec ? size : sizeof *codec;
  return PXL_OK;
}

static int valid_id(const char *id) {
  size_t n = strlen(id);
  if (n < 1 || n > 31) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-')) return 0;
  return 1;
}

/* The worker's stand-in for a loader: modules only pass it back. */
static char loader_stand_in;

pxl_status pxl_loader_add_codec(pxl_loader *loader, const pxl_codec *codec) {
  if (loader != (pxl_loader *)&loader_stand_in || !codec || codec->struct_size != sizeof *codec) return PXL_E_INVALID_ARGUMENT;
  int ok = codec->id && codec->version && codec->sniff && codec->read_header && codec->decode && valid_id(codec->id) &&
           codec_count < PXL_WORKER_MAX_CODECS && !pxl_worker_codec_named(codec->id);
  if (!ok) {
    if (codec->destroy) codec->destroy(codec->user_data);
    return PXL_E_INVALID_ARGUMENT;
  }
  codecs[codec_count] = *codec;
  codecs[codec_count].id = strdup(codec->id);
  codecs[codec_count].version = strdup(codec->version);
  codec_count++;
  return PXL_OK;
}

static int listed(const char *name, const char *only) {
  if (!only) return 1;
  size_t n = strlen(name);
  for (const char *p = only; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int pxl_worker_codecs_load(const char *dir, const char *only, char *message, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(message, cap, "cannot read the module directory %s", dir);
    return -1;
  }
  char *names[64];
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) && count < 64) {
    size_t n = strlen(e->d_name);
    if (n > 15 && strncmp(e->d_name, "libpixload-", 11) == 0 && strcmp(e->d_name + n - 3, ".so") == 0)
      names[count++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)count, sizeof names[0], by_name);
  int found = 0, failed = 0;
  for (int i = 0; i < count; i++) {
    char module[256];
    snprintf(module, sizeof module, "%.*s", (int)(strlen(names[i]) - 14), names[i] + 11);
    if (!failed && listed(module, only)) {
      found++;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      /* RTLD_NOW: every symbol bound before landlock and seccomp, so nothing is looked up
       * (or loaded) later. */
      void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      pxl_codec_module_register_fn reg = handle ? (pxl_codec_module_register_fn)dlsym(handle, "pxl_codec_module_register") : NULL;
      if (!reg || reg((pxl_loader *)&loader_stand_in) != PXL_OK) {
        snprintf(message, cap, "module %s: %s", module, handle ? "registration failed" : dlerror());
        failed = 1;
      }
    }
    free(names[i]);
  }
  if (failed) return -1;
  if (only) {
    int wanted = 1;
    for (const char *p = only; *p; p++) wanted += *p == ',';
    if (*only && found < wanted) {
      snprintf(message, cap, "a listed module is missing from %s (%s)", dir, only);
      return -1;
    }
  }
  return codec_count;
}

const pxl_codec *pxl_worker_codec_named(const char *id) {
  for (int i = 0; i < codec_count; i++)
    if (strcmp(codecs[i].id, id) == 0) return &codecs[i];
  return NULL;
}

const pxl_codec *pxl_worker_codec_sniff(const unsigned char *data, size_t size) {
  size_t n = size < PXL_CODEC_SNIFF_BYTES ? size : PXL_CODEC_SNIFF_BYTES;
  for (int i = 0; i < codec_count; i++)
    if (codecs[i].sniff(data, n, codecs[i].user_data) == 1) return &codecs[i];
  return NULL;
}

int pxl_worker_codec_list(char *list, size_t cap) {
  size_t used = 0;
  if (cap) list[0] = 0;
  for (int i = 0; i < codec_count && used < cap; i++) {
    int n = snprintf(list + used, cap - used, "%s%s", i ? " " : "", codecs[i].id);
    if (n < 0) break;
    used += (size_t)n;
  }
  return codec_count;
}
