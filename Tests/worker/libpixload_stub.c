/*
 * Tests/worker/libpixload_stub.c: a library with libpixload's soname and the two functions
 * a codec module imports, to link the shipped modules (codecs/NAME.c) against in `make
 * test-worker` without building the Swift library. The modules then carry NEEDED
 * libpixload.so.0 as they ship; in the worker (and the test) the program itself has that
 * soname and these functions, so this file is never loaded: if it were, they abort.
 */
#include <stdlib.h>

#include "pixload.h"

pxl_status pxl_codec_init_size(pxl_codec *codec, size_t size) {
  (void)codec, (void)size;
  abort();
}

pxl_status pxl_loader_add_codec(pxl_loader *loader, const pxl_codec *codec) {
  (void)loader, (void)codec;
  abort();
}
