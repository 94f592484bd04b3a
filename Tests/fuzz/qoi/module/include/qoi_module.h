#ifndef PXL_FUZZ_QOI_MODULE_H
#define PXL_FUZZ_QOI_MODULE_H

#include "pixload.h"

/* What a codec module exports (pixload.h, "Codec modules"): adds the QOI test codec. */
pxl_status pxl_codec_module_register(pxl_loader *loader);

#endif
