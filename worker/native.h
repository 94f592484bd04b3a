/*
 * worker/native.h: the built-in formats' shims in the decode worker (native.c), built as
 * pixload-decode-builtins.so beside the worker, which loads it (--builtins PATH) before it
 * locks itself, only for the pool of PXL_ISOLATION_ALL.
 */
#ifndef PXL_WORKER_NATIVE_H
#define PXL_WORKER_NATIVE_H

#include <stdint.h>

#include "pxl_worker_protocol.h"

/* Serves one NATIVE request that arrived with data_fd. Returns 0 to go on, -1 when the
 * conversation is broken (the worker then exits). */
int pxl_worker_native_serve(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req, int data_fd);
typedef int (*pxl_worker_native_serve_fn)(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req,
                                          int data_fd);

#endif
