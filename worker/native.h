/*
 * worker/native.h: the built-in formats' shims in the decode worker (native.c), built as
 * pixload-decode-builtins.so beside the worker, which loads it (--builtins PATH) before it
 * locks itself, only for the pool of PXL_ISOLATION_ALL.
 */
#ifndef PXL_WORKER_NATIVE_H
#define PXL_WORKER_NATIVE_H

#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "pxl_codecs.h"
#include "pxl_worker_protocol.h"

/* The kept memfds' mappings (protocol 5, pxl_worker_protocol.h), the worker's for its life,
 * shared by its module and built-in conversations: replaced when the library sends the
 * memfd again (it grew, or it is a new one). */
typedef struct pxl_worker_kept_map {
  uint8_t *map;
  size_t size;
} pxl_worker_kept_map;
typedef struct pxl_worker_kept {
  pxl_worker_kept_map data, output;
} pxl_worker_kept;

/* fd (when one came: -1, the mapping k has) mapped shared as k, the old mapping dropped; 0,
 * or -1 (k then empty). The caller closes fd. */
static inline int pxl_worker_keep(pxl_worker_kept_map *k, int fd, int prot) {
  if (fd < 0) return k->map ? 0 : -1;
  if (k->map) munmap(k->map, k->size);
  k->map = NULL;
  k->size = 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || (uint64_t)st.st_size > PXL_WORKER_KEPT_MAX) return -1;
  void *map = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return -1;
  k->map = map;
  k->size = (size_t)st.st_size;
  return 0;
}

/* Serves one NATIVE request that arrived with data_fd (-1: none, the kept data memfd's).
 * Returns 0 to go on, -1 when the conversation is broken (the worker then exits). */
int pxl_worker_native_serve(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req, int data_fd,
                            pxl_worker_kept *kept);
typedef int (*pxl_worker_native_serve_fn)(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req,
                                          int data_fd, pxl_worker_kept *kept);

/* A built-in format's frame reader (pxl_codecs.h, "Frame readers": gif, webp, avif), with
 * read_info's answer and the first frame's duration: the state, or NULL with *status (a
 * pxl_codec_status) and message. The data stays mapped until close. */
void *pxl_worker_native_frames_open(const char *format, const uint8_t *data, size_t size, uint64_t max_pixels,
                                    pxl_codec_info *info, int32_t *first_duration, int32_t *status, char *message,
                                    size_t cap);
/* The next frame (frame->rgba NULL: no more), a pxl_codec_status. */
int32_t pxl_worker_native_frames_next(void *frames, pxl_codec_frame *frame);
void pxl_worker_native_frames_close(void *frames);
typedef void *(*pxl_worker_native_frames_open_fn)(const char *, const uint8_t *, size_t, uint64_t, pxl_codec_info *,
                                                  int32_t *, int32_t *, char *, size_t);
typedef int32_t (*pxl_worker_native_frames_next_fn)(void *, pxl_codec_frame *);
typedef void (*pxl_worker_native_frames_close_fn)(void *);

#endif
