/*
 * Tests/worker/version_module.c: a codec module (libpixload-oldbuild.so, test-only) whose
 * manifest says the version it was "built" with while its codec registers another, as
 * libpixload-heif does after libheif is upgraded under it without a rebuild (the manifest
 * keeps LIBHEIF_VERSION, the codec reports heif_get_version()). The codec is the QOI test
 * codec (Tests/capi/qoi_codec.h). test_isolation_manifest_version (Tests/capi) loads it:
 * isolated, the library logs the difference once; in-process there is none to log.
 */
#pragma GCC diagnostic ignored "-Wunused-function" /* qoi_codec.h's encoder: the tests' */
#include "../capi/qoi_codec.h"

#define OLDBUILD_MANIFEST_VERSION "qoi 1.0 (built)"
#define OLDBUILD_RUNTIME_VERSION "qoi 2.0 (runtime)"

static struct qoi_state oldbuild_state = {.choose = 1};

PXL_MODULE_MANIFEST const pxl_codec_manifest pxl_codec_module_manifest = {
    PXL_CODEC_MANIFEST_MAGIC, sizeof(pxl_codec_manifest), 1, 0,
    {{"qoi", OLDBUILD_MANIFEST_VERSION, 0, 1, 1, {{PXL_SNIFF_BYTES, 0, 4, "qoif"}}}}};

__attribute__((visibility("default"))) pxl_status pxl_codec_module_register(pxl_loader *loader) {
  pxl_codec codec = qoi_codec(&oldbuild_state, OLDBUILD_RUNTIME_VERSION);
  return pxl_loader_add_codec(loader, &codec);
}
