/* tool_help.h: the usage text and usage errors (tool_help.c). */
#ifndef PIXLOAD_TOOL_HELP_H
#define PIXLOAD_TOOL_HELP_H

/* What `pixload --help` prints, and what follows every usage error. */
extern const char usage_text[];

/* Prints "pixload: " fmt (with arg) on stderr unless fmt is NULL, then the usage text;
 * returns 2, the exit status of a usage error. */
int usage_error(const char *fmt, const char *arg);

#endif
