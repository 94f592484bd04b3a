/* tool_getparam.h: fetch's and hash's options (tool_getparam.c). */
#ifndef PIXLOAD_TOOL_GETPARAM_H
#define PIXLOAD_TOOL_GETPARAM_H

#include <stddef.h>
#include <stdint.h>

#include "pixload.h"

struct fetch_options {
  pxl_config config;
  pxl_request request; /* url filled per job */
  const char *out_file;
  const char *out_dir;
  int quiet;
  int metrics;       /* --metrics */
  int32_t hash_kind; /* hash: --blurhash or --thumbhash */
  long frames;       /* play: --frames (0: one loop) */
  char **urls;
  size_t url_count;
  size_t url_capacity;
  const char **headers; /* --header lines (pointing into argv), NULL-terminated */
  size_t header_count;
  pxl_processor processors[PXL_MAX_PROCESSORS]; /* --process, pointed to by request */
};

/* fetch's, hash's and play's options. Fills o (zeroed by the caller) from argv; returns 0, or the exit status of a usage
 * error (2). --help prints the usage and exits. fetch_options_free frees what it holds,
 * also after an error. */
int parse_fetch_options(int argc, char **argv, struct fetch_options *o);

void fetch_options_free(struct fetch_options *o);

#endif
