/*
 * The QOI test codec (Tests/capi/qoi_codec.h, the one test_codecs.c proves against the PNG
 * path) as a codec module: pxl_codec_module_register adds it with pxl_loader_add_codec, as
 * libpixload-heif/-jxl/-svg add theirs, so the QOI fuzz target registers it the way the
 * library registers a module's codec. With every optional function on: choose_size (draws
 * at the size asked, nearest neighbour) and decode_frames (three frames), so the fuzzer
 * reaches every path of the interface.
 */
#include "include/qoi_module.h"

#include "../../../capi/qoi_codec.h"

#ifndef QOI_WRITE_SEEDS
static struct qoi_state fuzz_state = {.frame_count = 3, .choose = 1};

pxl_status pxl_codec_module_register(pxl_loader *loader) {
  pxl_codec codec = qoi_codec(&fuzz_state, "fuzz");
  return pxl_loader_add_codec(loader, &codec);
}
#else
/* `cc -DQOI_WRITE_SEEDS ... qoi_module.c` writes the fuzz target's seeds into argv[1] with
 * the spec's encoder: small images that use every op (runs, index, diff, luma, RGB, RGBA). */
static void write_seed(const char *dir, const char *name, uint32_t w, uint32_t h, int pattern) {
  uint8_t *rgba = malloc((size_t)w * h * 4);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *p = rgba + ((size_t)y * w + x) * 4;
      p[0] = (uint8_t)(pattern == 0 ? x * 16 : x < w / 2 ? 200 : x * 3);
      p[1] = (uint8_t)(pattern == 0 ? y * 16 : 40 + (x + y) % 3);
      p[2] = (uint8_t)(pattern == 2 ? (x * y) * 37 : 90);
      p[3] = (uint8_t)(pattern == 1 ? 255 : (x * 255) / (w > 1 ? w - 1 : 1));
    }
  size_t size = 0;
  uint8_t *qoi = qoi_encode(rgba, w, h, &size);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(qoi, 1, size, f) != size) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
  free(qoi);
  free(rgba);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  write_seed(argv[1], "gradient-alpha.qoi", 16, 16, 0);
  write_seed(argv[1], "runs-opaque.qoi", 40, 24, 1);
  write_seed(argv[1], "noise.qoi", 13, 7, 2);
  write_seed(argv[1], "one-pixel.qoi", 1, 1, 0);
  return 0;
}
#endif
