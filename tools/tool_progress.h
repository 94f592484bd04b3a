/* tool_progress.h: the progress line on a terminal's stderr (tool_progress.c). */
#ifndef PIXLOAD_TOOL_PROGRESS_H
#define PIXLOAD_TOOL_PROGRESS_H

#include <stddef.h>

/* Decides whether this run shows the line: not --quiet, more than PROGRESS_MIN_URLS
 * URLs, stderr a terminal. */
void progress_start(size_t url_count, int quiet);

/* Whether this run shows the line. */
int progress_enabled(void);

/* Erases the line, if it is on the screen, before another line goes to stderr. */
void progress_clear(void);

/* Rewrites the line; last ends it with a newline. Does nothing when the run shows none. */
void progress_update(size_t finished, size_t failed, size_t total, int last);

#endif
