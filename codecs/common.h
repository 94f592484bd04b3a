/*
 * codecs/common.h: what the three codec modules share. Each module is a shared object
 * built only on the public header (pixload.h, "Codecs" and "Codec modules"), exactly as
 * a host's codec would be.
 */
#ifndef PXL_MODULE_COMMON_H
#define PXL_MODULE_COMMON_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pixload.h"

#define PXL_MODULE_EXPORT __attribute__((visibility("default")))

/* printf into a codec's message buffer; returns status. */
static inline pxl_status pxl_module_fail(pxl_status status, char *message, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline pxl_status pxl_module_fail(pxl_status status, char *message, size_t cap, const char *fmt, ...) {
  if (message && cap > 0) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, cap, fmt, args);
    va_end(args);
  }
  return status;
}

#endif
