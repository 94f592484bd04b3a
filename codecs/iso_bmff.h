/*
 * codecs/iso_bmff.h: whether an ISO-BMFF file's ftyp box names a brand, as its major brand
 * or among the compatible ones. Shared by the HEIC module's sniff (heif.c) and the decode
 * worker's manifest rules (worker/manifest.c, which the library compiles too), so that a
 * manifest's brand rule accepts exactly what the module's sniff accepts.
 */
#ifndef PXL_ISO_BMFF_H
#define PXL_ISO_BMFF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* brand: 4 bytes. Reads at most the ftyp box within [data, data+size). */
static inline int pxl_ftyp_has_brand(const uint8_t *data, size_t size, const void *brand) {
  if (size < 16 || memcmp(data + 4, "ftyp", 4) != 0) return 0;
  size_t box = (size_t)data[0] << 24 | (size_t)data[1] << 16 | (size_t)data[2] << 8 | data[3];
  if (box < 16) return 0;
  size_t end = box < size ? box : size;
  if (memcmp(data + 8, brand, 4) == 0) return 1;
  for (size_t i = 16; i + 4 <= end; i += 4)
    if (memcmp(data + i, brand, 4) == 0) return 1;
  return 0;
}

#endif
