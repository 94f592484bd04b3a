/*
 * worker/codecs.h: the codecs inside the worker. Codec modules (pixload.h, "Codec
 * modules") are loaded with dlopen before the worker locks itself, and register through
 * the two library functions a module imports (pxl_codec_init_size and
 * pxl_loader_add_codec), which the worker's executable defines and exports: a module runs
 * here exactly as it runs inside libpixload, unaware of the difference.
 */
#ifndef PXL_WORKER_CODECS_H
#define PXL_WORKER_CODECS_H

#include <stddef.h>

#include "pixload.h"

#define PXL_WORKER_MAX_CODECS 16

/* Loads every libpixload-*.so in dir in file-name order (the library's order), or only
 * those named in only ("heif,jxl"; NULL: all). Returns the number of codecs registered,
 * -1 with message on an error (a listed module missing, a module that fails). */
int pxl_worker_codecs_load(const char *dir, const char *only, char *message, size_t cap);

/* The codec with this id, or the first whose sniff takes the data; NULL: none. */
const pxl_codec *pxl_worker_codec_named(const char *id);
const pxl_codec *pxl_worker_codec_sniff(const unsigned char *data, size_t size);

/* The ids, space separated, into list (NUL-terminated, truncated); returns the count. */
int pxl_worker_codec_list(char *list, size_t cap);

#endif
