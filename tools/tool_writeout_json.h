/* tool_writeout_json.h: --metrics, one JSON object per URL (tool_writeout_json.c). */
#ifndef PIXLOAD_TOOL_WRITEOUT_JSON_H
#define PIXLOAD_TOOL_WRITEOUT_JSON_H

#include "tool_operate.h"

void print_metrics(const struct job *job);

#endif
