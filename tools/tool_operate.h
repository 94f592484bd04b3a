/* tool_operate.h: one run of fetch or hash over its URLs (tool_operate.c). */
#ifndef PIXLOAD_TOOL_OPERATE_H
#define PIXLOAD_TOOL_OPERATE_H

#include <stddef.h>
#include <stdint.h>

#include "pixload.h"

struct run; /* tool_operate.c: the run's clock, counts and outputs */

/* One URL of the run, and what came back for it. */
struct job {
  struct run *run;
  size_t index;
  const char *url;
  int finished;
  pxl_status status;
  int32_t http_status;
  pxl_source source;
  int32_t width, height;
  int incomplete; /* pxl_result.incomplete: printed "OK incomplete" */
  double ms;
  char *message; /* NULL when empty */
  int write_failed;
  pxl_metrics metrics; /* --metrics */
  int has_metrics;
  uint8_t hash[PXL_PLACEHOLDER_MAX_BYTES + 1]; /* hash */
  size_t hash_length;
};

/* `pixload fetch` (hash 0) or `pixload hash` (hash 1): argv[0] is the command. Returns
 * the exit status. */
int operate(int argc, char **argv, int hash);

#endif
