/* tool_writeout.h: the text line per URL and the hash line (tool_writeout.c). */
#ifndef PIXLOAD_TOOL_WRITEOUT_H
#define PIXLOAD_TOOL_WRITEOUT_H

#include <stdint.h>

#include "pixload.h"
#include "tool_operate.h"

/* The enum's own names ("OK", "NOT_FOUND"), so the output can be grepped and matched to
 * pixload.h. */
const char *status_name(pxl_status status);

/* STATUS WxH SOURCE MS URL[  (message, HTTP n)][  (not written)] */
void print_job(const struct job *job);

/* hash: the BlurHash text, or the ThumbHash in standard base64 with padding. */
void print_hash(const struct job *job, int32_t kind);

#endif
