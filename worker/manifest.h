/* worker/manifest.h: a codec module's manifest read from its file without loading it
 * (worker/manifest.c). */
#ifndef PXL_WORKER_MANIFEST_H
#define PXL_WORKER_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "pixload.h"

/* 1 and *out filled when the file at path exports a valid pxl_codec_module_manifest; 0
 * otherwise (no such file, not ELF64, no manifest, a manifest that fails a check). */
int pxl_manifest_read(const char *path, pxl_codec_manifest *out);

/* 1 when one of codec's rules takes the first bytes of a file. */
int pxl_manifest_sniff(const pxl_codec_manifest_codec *codec, const uint8_t *data, size_t size);

#endif
