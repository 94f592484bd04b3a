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
  int memory_cache_set; /* --memory-cache-mb given (else fetch_memory_cache_default decides) */
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

/* The memory cache a run of fetch or hash gets without --memory-cache-mb: the library's
 * default when a URL appears twice in the list, none when every URL is distinct. A
 * one-shot process never asks for an image again, so a cache of distinct URLs can never
 * answer: it only keeps every thumbnail alive to the end, each written into fresh pages
 * (on 300 web photos ~22 page faults and ~4 % of the CPU per thumbnail). */
void fetch_memory_cache_default(struct fetch_options *o);

#endif
