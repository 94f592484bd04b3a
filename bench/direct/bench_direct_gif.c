/* bench_direct.h's GIF side: giflib called directly, no pixload code. The first frame
 * as a competent C programmer would write it with giflib 5.2: DGifOpen on memory, the
 * records up to the first image (its Graphic Control Extension for the transparent
 * index), DGifGetLine row by row (deinterlaced) into a transparent RGBA canvas, the
 * colour table looked up per pixel. Same output as pixload's pxl_gif_decode. */
#include "bench_direct.h"

#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

typedef struct gif_mem { const uint8_t *data; size_t size, pos; } gif_mem;

static int read_mem(GifFileType *gif, GifByteType *buf, int len) {
  gif_mem *m = gif->UserData;
  size_t n = (size_t)len;
  if (n > m->size - m->pos) n = m->size - m->pos;
  memcpy(buf, m->data + m->pos, n);
  m->pos += n;
  return (int)n;
}

int bench_direct_is_gif(const uint8_t *d, size_t n) {
  return n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0);
}

int bench_direct_decode_gif(const uint8_t *data, size_t size, int *has_alpha, int *interlaced, int *frames,
                            bench_image *out) {
  gif_mem mem = {data, size, 0};
  int err = 0, transparent = -1, rc = 1;
  GifFileType *gif = DGifOpen(&mem, read_mem, &err);
  GifPixelType *line = NULL;
  if (gif == NULL) return 1;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR || type == TERMINATE_RECORD_TYPE) goto done;
    if (type == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType *ext;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) goto done;
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) transparent = (ext[1] & 1) ? ext[4] : -1;
      while (ext != NULL)
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) goto done;
    } else if (type == IMAGE_DESC_RECORD_TYPE) {
      break;
    }
  }
  if (DGifGetImageDesc(gif) == GIF_ERROR) goto done;
  int W = gif->SWidth, H = gif->SHeight;
  GifImageDesc *d = &gif->Image;
  ColorMapObject *map = d->ColorMap ? d->ColorMap : gif->SColorMap;
  out->pixels = calloc((size_t)W * H, 4);
  line = malloc((size_t)d->Width + 1);
  if (!out->pixels || !line || !map) goto done;
  static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
  for (int pass = 0; pass < (d->Interlace ? 4 : 1); pass++) {
    for (int y = d->Interlace ? start[pass] : 0; y < d->Height; y += d->Interlace ? step[pass] : 1) {
      if (DGifGetLine(gif, line, d->Width) == GIF_ERROR) goto done;
      int cy = d->Top + y;
      if (cy >= H) continue;
      uint8_t *dst = out->pixels + ((size_t)cy * W + d->Left) * 4;
      for (int x = 0; x < d->Width && d->Left + x < W; x++, dst += 4) {
        int i = line[x];
        if (i == transparent || i >= map->ColorCount) continue;
        dst[0] = map->Colors[i].Red;
        dst[1] = map->Colors[i].Green;
        dst[2] = map->Colors[i].Blue;
        dst[3] = 255;
      }
    }
  }
  out->width = W;
  out->height = H;
  *has_alpha = transparent >= 0 || d->Left || d->Top || d->Width < W || d->Height < H;
  if (interlaced) *interlaced = d->Interlace;
  if (frames != NULL) {  /* for the report only (not timed): does another image follow? */
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    *frames = 1;
    while (DGifGetRecordType(gif, &type) != GIF_ERROR && type == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType *ext;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) break;
      while (ext != NULL)
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) break;
    }
    if (type == IMAGE_DESC_RECORD_TYPE) *frames = 2;
  }
  rc = 0;
done:
  free(line);
  if (rc != 0) { free(out->pixels); out->pixels = NULL; }
  DGifCloseFile(gif, &err);
  return rc;
}
