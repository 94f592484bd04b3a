/* tool_writepng.h: the image files --out and --out-dir write (tool_writepng.c). */
#ifndef PIXLOAD_TOOL_WRITEPNG_H
#define PIXLOAD_TOOL_WRITEPNG_H

#include <stddef.h>

#include "pixload.h"

/* mkdir -p: DIR and its missing parents, with the umask's permissions. Returns NULL on
 * success, else what went wrong. */
const char *make_dirs(const char *dir);

/* Writes the image of the URL at position index: to out_file (PNG if it ends in .png,
 * else raw pixels), or to out_dir as NNNN-NAME.png (with --animate, every further frame
 * beside it), or nowhere when both are NULL. Returns 0, or -1 after saying on stderr
 * what could not be written. Only inside the callback that lends image. */
int write_output(const char *out_file, const char *out_dir, size_t index, const char *url,
                 const pxl_image *image);

#endif
