/*
 * worker/native.h: the built-in formats' shims in the decode worker (native.c), built as
 * pixload-decode-builtins.so beside the worker, which loads it (--builtins PATH) before it
 * locks itself, only for the pool of PXL_ISOLATION_ALL.
 */
#ifndef PXL_WORKER_NATIVE_H
#define PXL_WORKER_NATIVE_H

#include <stdint.h>

#include "pxl_codecs.h"
#include "pxl_worker_protocol.h"

/* Serves one NATIVE request that arrived with data_fd. Returns 0 to go on, -1 when the
 * conversation is broken (the worker then exits). */
int pxl_worker_native_serve(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req, int data_fd);
typedef int (*pxl_worker_native_serve_fn)(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req,
                                          int data_fd);

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
