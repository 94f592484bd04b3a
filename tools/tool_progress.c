/*
 * tool_progress.c: while more than PROGRESS_MIN_URLS load and stderr is a terminal, one
 * line there counts what has finished, rewritten in place. Whoever else writes to
 * stderr meanwhile (the log, a write error) clears it first.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <unistd.h>

#include "tool_progress.h"

enum { PROGRESS_MIN_URLS = 20 };

static int progress_on;    /* this run shows the line */
static int progress_shown; /* the line is on the screen, unfinished */

void progress_start(size_t url_count, int quiet) {
  progress_on = !quiet && url_count > PROGRESS_MIN_URLS && isatty(STDERR_FILENO);
}

int progress_enabled(void) { return progress_on; }

void progress_clear(void) {
  if (progress_shown) fputs("\r\033[K", stderr);
  progress_shown = 0;
}

void progress_update(size_t finished, size_t failed, size_t total, int last) {
  if (!progress_on) return;
  fprintf(stderr, "\r\033[Kpixload: %zu of %zu done, %zu failed", finished, total, failed);
  progress_shown = 1;
  if (last) {
    fputc('\n', stderr);
    progress_shown = 0;
  }
  fflush(stderr);
}
