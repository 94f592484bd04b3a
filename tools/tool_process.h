/* tool_process.h: the --process grammar (tool_process.c). */
#ifndef PIXLOAD_TOOL_PROCESS_H
#define PIXLOAD_TOOL_PROCESS_H

#include <stddef.h>

#include "pixload.h"

/* --process SPEC: comma-separated steps into processors (PXL_MAX_PROCESSORS of them) and
 * their number into *count; 0 on success, -1 when SPEC is malformed. */
int parse_process(const char *spec, pxl_processor *processors, size_t *count);

#endif
