/*
 * GIF through giflib 5.2, record by record.
 *
 * giflib reports errors by return codes (no longjmp), so no setjmp is needed here; every
 * call's result is checked and turned into a status. The file is read from memory by a
 * reader that never goes past [data, data + size).
 *
 * The record-by-record API (DGifGetRecordType, DGifGetImageDesc, DGifGetLine) is used
 * rather than DGifSlurp, which would keep every frame's indices in memory at once: here a
 * decode holds one canvas, one row of indices and, for "restore to previous" frames, one
 * saved copy of the canvas (giflib itself keeps each image's descriptor and local colour
 * table, under 1 KB a frame, bounded by PXL_GIF_MAX_FRAMES); the first frame's rows for a
 * thumbnail stream through one row when the frame is not interlaced. Image data that is
 * not needed (frames after the first for a still decode, the frame count of read_info)
 * is skipped block by block without LZW decoding, a memcpy per 255-byte block.
 *
 * What a frame looks like (pxl_codec_frame_fn, and the first frame of pxl_gif_decode):
 *  - The canvas starts fully transparent, (0,0,0,0): the logical screen's background
 *    colour is ignored, as browsers ignore it.
 *  - A frame's pixels are drawn at its offset, clipped to the canvas (a frame partly or
 *    wholly outside it is legal and drawn where it overlaps). The transparent index of
 *    its Graphic Control Extension leaves the canvas as it was; every other pixel is the
 *    palette colour (local table, else the global one), alpha 255. Interlaced frames are
 *    deinterlaced.
 *  - After the frame is shown, its disposal method is applied: 0 (unspecified) and 1
 *    (leave) keep it, 2 ("restore to background") clears its rectangle to transparent
 *    (what browsers do, not the background colour), 3 ("restore to previous") puts back
 *    the rectangle's pixels from before the frame; 4..7 (undefined) are treated as 0.
 *  - A pixel index beyond the frame's colour table (or any index when the frame has no
 *    table at all) is an error in that frame's data, like an invalid LZW code.
 *  - Errors inside a frame's data (truncated file, invalid LZW code, a bad index): the
 *    frame is shown with the rows decoded up to the error (the row holding a bad index
 *    up to that pixel), the rest of its rectangle as the canvas was, one warning is
 *    counted, and the decode ends there: it is the last frame. This is what giflib's
 *    own tools and browsers show for a truncated last frame. If that happens before a
 *    single row of the FIRST frame was decoded, the file is corrupt (there is nothing
 *    to show). A file that ends between frames (no trailer) ends the animation there,
 *    with a warning, when the decode reads that far. When the data ended (the file, or
 *    a shown frame's LZW data before its last row; for the frames decode also a file
 *    that ends between frames) out->incomplete is 1; an invalid code or index is a
 *    corrupt frame, not an early end, and leaves it 0.
 *  - pxl_gif_decode and pxl_gif_decode_rows read only as far as the end of the first
 *    frame: what comes after it (later frames, a missing trailer) does not change their
 *    result or their warnings.
 *  - Durations: the GCE delay in 1/100 s times 10, as the file says it (0 allowed;
 *    players usually show 0 and 10 ms as 100 ms, which is theirs to decide).
 *  - loop_count: 0 (forever) when the NETSCAPE2.0 (or ANIMEXTS1.0) extension says 0, or
 *    for a still image; otherwise the number of times the animation plays: 1 without
 *    the extension, n + 1 for a loop count n (the extension counts repeats), capped at
 *    INT32_MAX.
 *  - has_alpha: read_info says 1 when any frame has a transparent index or does not
 *    cover the whole canvas; a first-frame decode says 1 when the first frame does (or
 *    ended early), i.e. when its output may hold alpha < 255.
 *
 * Limits (hostile files): max_pixels bounds the canvas, checked before any pixel buffer
 * exists. A frame may declare up to 65535x65535 and costs LZW work for every row it
 * decodes, whatever the canvas: rows below the canvas of a non-interlaced frame are
 * skipped without decoding, and the total LZW work of one call is bounded by
 * PXL_GIF_MAX_DECODE_PIXELS, the frame count by PXL_GIF_MAX_FRAMES. Past either, an
 * animation ends with a warning at the last frame within them; a first frame over the
 * work bound is refused as corrupt.
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

/* Frames beyond this are ignored (with a warning); read_info counts up to it. */
#define PXL_GIF_MAX_FRAMES 20000
/* LZW output (pixels, counted as frame width x decoded rows) one call decodes at most:
 * 2^29, about a second of CPU. A legitimate animation that long is 500 frames of
 * 1 Mpx, far more than any caller's memory bound for the composited frames. */
#define PXL_GIF_MAX_DECODE_PIXELS (1ull << 29)

typedef struct gif_reader {
  const uint8_t *data;
  size_t size, pos;
} gif_reader;

static int read_memory(GifFileType *gif, GifByteType *buf, int len) {
  gif_reader *r = gif->UserData;
  if (len <= 0) return 0;
  size_t n = (size_t)len;
  if (n > r->size - r->pos) n = r->size - r->pos; /* short read: giflib reports READ_FAILED */
  memcpy(buf, r->data + r->pos, n);
  r->pos += n;
  return (int)n;
}

/* One image of the file as the walker found it, with the GCE that preceded it. */
typedef struct gif_frame {
  int32_t left, top, width, height, interlace;
  int32_t disposal, transparent, delay_cs;
  const ColorMapObject *map; /* local, else global; NULL when the file has neither */
} gif_frame;

typedef struct gif_walk {
  GifFileType *gif;
  gif_reader reader;
  int32_t width, height;        /* the canvas */
  int32_t loop_count;           /* as in pxl_codec_info; set once the extension is seen */
  int32_t has_loop_extension;
  int32_t frames;               /* image descriptors read so far */
  int32_t gce_disposal, gce_transparent, gce_delay; /* the pending GCE */
  uint64_t work;                /* LZW pixels decoded so far */
  int32_t warnings;
  int32_t data_ended;           /* a shown frame's rows, or the file between frames, ended early */
  char message[256];            /* the error, or the last warning */
  uint8_t **icc;                /* when non-NULL: collect the first ICCRGBG1012 profile here */
  size_t *icc_size;
  GifPixelType *line;
  size_t line_cap;
} gif_walk;

/* Counts a warning; what (NULL: the message already set) becomes the last warning. */
static void warn(gif_walk *w, const char *what) {
  if (w->warnings < INT32_MAX) w->warnings++;
  if (what) snprintf(w->message, sizeof w->message, "%s", what);
}

static const char *gif_error_text(int code) {
  const char *s = GifErrorString(code);
  return s ? s : "unknown giflib error";
}

static void reset_gce(gif_walk *w) {
  w->gce_disposal = 0;
  w->gce_transparent = -1;
  w->gce_delay = 0;
}

static pxl_codec_status walk_open(gif_walk *w, const uint8_t *data, size_t size) {
  memset(w, 0, sizeof *w);
  reset_gce(w);
  w->loop_count = 1;
  if (data == NULL || size < 6 || (memcmp(data, "GIF87a", 6) != 0 && memcmp(data, "GIF89a", 6) != 0)) {
    snprintf(w->message, sizeof w->message, "not a GIF file (no GIF87a/GIF89a signature)");
    return PXL_CODEC_CORRUPT;
  }
  w->reader.data = data;
  w->reader.size = size;
  int err = 0;
  w->gif = DGifOpen(&w->reader, read_memory, &err);
  if (w->gif == NULL) {
    if (err == D_GIF_ERR_NOT_ENOUGH_MEM) {
      snprintf(w->message, sizeof w->message, "%s", gif_error_text(err));
      return PXL_CODEC_NO_MEMORY;
    }
    snprintf(w->message, sizeof w->message, "%s", err == D_GIF_ERR_READ_FAILED
             ? "truncated in the header (logical screen or global colour table)" : gif_error_text(err));
    return PXL_CODEC_CORRUPT;
  }
  w->width = w->gif->SWidth;
  w->height = w->gif->SHeight;
  if (w->width <= 0 || w->height <= 0) {
    snprintf(w->message, sizeof w->message, "empty logical screen %dx%d", w->width, w->height);
    return PXL_CODEC_CORRUPT;
  }
  return PXL_CODEC_OK;
}

static void walk_close(gif_walk *w) {
  if (w->gif) {
    int err = 0;
    DGifCloseFile(w->gif, &err);
    w->gif = NULL;
  }
  free(w->line);
  w->line = NULL;
}

/* An application extension's first block (its identifier) and the blocks after it. */
static void read_application_extension(gif_walk *w, const GifByteType *ident, int *failed) {
  int netscape = ident[0] == 11 && (memcmp(ident + 1, "NETSCAPE2.0", 11) == 0 || memcmp(ident + 1, "ANIMEXTS1.0", 11) == 0);
  int icc = w->icc != NULL && *w->icc == NULL && ident[0] == 11 && memcmp(ident + 1, "ICCRGBG1012", 11) == 0;
  uint8_t *profile = NULL;
  size_t profile_size = 0;
  GifByteType *block = NULL;
  for (;;) {
    if (DGifGetExtensionNext(w->gif, &block) == GIF_ERROR) { *failed = 1; break; }
    if (block == NULL) break;
    if (netscape && block[0] >= 3 && block[1] == 1) {
      unsigned loops = (unsigned)block[2] | (unsigned)block[3] << 8;
      w->has_loop_extension = 1;
      w->loop_count = loops == 0 ? 0 : (int32_t)loops + 1;
      netscape = 0; /* the first loop sub-block counts */
    } else if (icc && block[0] > 0) {
      uint8_t *grown = realloc(profile, profile_size + block[0]);
      if (grown == NULL) { icc = 0; free(profile); profile = NULL; continue; }
      profile = grown;
      memcpy(profile + profile_size, block + 1, block[0]);
      profile_size += block[0];
    }
  }
  if (icc && !*failed && profile_size > 0) {
    *w->icc = profile;
    *w->icc_size = profile_size;
  } else {
    free(profile);
  }
}

enum { WALK_FRAME = 1, WALK_END = 0, WALK_ERROR = -1 };

/*
 * Reads records up to the next image descriptor and describes that image in *f (with
 * the GCE before it). WALK_END at the trailer, and also when the file ends or breaks
 * between frames after at least one frame (a warning then); WALK_ERROR (message set)
 * when there is no frame at all.
 */
static int walk_next(gif_walk *w, gif_frame *f) {
  for (;;) {
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    const char *broken = NULL;
    if (DGifGetRecordType(w->gif, &type) == GIF_ERROR) {
      broken = w->gif->Error == D_GIF_ERR_READ_FAILED ? "file ends without a trailer" : gif_error_text(w->gif->Error);
    } else if (type == TERMINATE_RECORD_TYPE) {
      if (w->frames > 0) return WALK_END;
      snprintf(w->message, sizeof w->message, "no image in the file");
      return WALK_ERROR;
    } else if (type == EXTENSION_RECORD_TYPE) {
      int code = 0, failed = 0;
      GifByteType *block = NULL;
      if (DGifGetExtension(w->gif, &code, &block) == GIF_ERROR) {
        failed = 1;
      } else if (block != NULL) {
        if (code == GRAPHICS_EXT_FUNC_CODE && block[0] >= 4) {
          w->gce_disposal = (block[1] >> 2) & 7;
          w->gce_delay = (int32_t)block[2] | (int32_t)block[3] << 8;
          w->gce_transparent = (block[1] & 1) ? block[4] : -1;
        }
        if (code == APPLICATION_EXT_FUNC_CODE) {
          read_application_extension(w, block, &failed);
        } else {
          while (!failed && block != NULL)
            if (DGifGetExtensionNext(w->gif, &block) == GIF_ERROR) failed = 1;
        }
      }
      if (failed) broken = w->gif->Error == D_GIF_ERR_READ_FAILED ? "truncated in an extension" : gif_error_text(w->gif->Error);
    } else if (type == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(w->gif) == GIF_ERROR) {
        if (w->gif->Error == D_GIF_ERR_NOT_ENOUGH_MEM) {
          snprintf(w->message, sizeof w->message, "%s", gif_error_text(w->gif->Error));
          return WALK_ERROR;
        }
        broken = w->gif->Error == D_GIF_ERR_READ_FAILED ? "truncated in an image descriptor" : gif_error_text(w->gif->Error);
      } else {
        const GifImageDesc *d = &w->gif->Image;
        f->left = d->Left;
        f->top = d->Top;
        f->width = d->Width;
        f->height = d->Height;
        f->interlace = d->Interlace ? 1 : 0;
        f->map = d->ColorMap ? d->ColorMap : w->gif->SColorMap;
        f->disposal = w->gce_disposal;
        f->transparent = w->gce_transparent;
        f->delay_cs = w->gce_delay;
        reset_gce(w);
        w->frames++;
        return WALK_FRAME;
      }
    }
    if (broken) {
      if (w->gif->Error == D_GIF_ERR_READ_FAILED) w->data_ended = 1;
      if (w->frames > 0) {
        char text[200];
        snprintf(text, sizeof text, "%s after frame %d", broken, w->frames);
        warn(w, text);
        return WALK_END;
      }
      snprintf(w->message, sizeof w->message, "%s", broken);
      return WALK_ERROR;
    }
  }
}

/* Skips the current image's data blocks. 0, or -1 when the data is cut short. */
static int walk_skip_image(gif_walk *w) {
  int code_size = 0;
  GifByteType *block = NULL;
  if (DGifGetCode(w->gif, &code_size, &block) == GIF_ERROR) return -1;
  while (block != NULL)
    if (DGifGetCodeNext(w->gif, &block) == GIF_ERROR) return -1;
  return 0;
}

/* Receives row y of the frame (frame coordinates), width indices. Returns 0 to go on,
 * 1 to stop (the row held an invalid index: w->message says which). */
typedef int (*gif_line_fn)(void *user, const gif_frame *f, int32_t y, const GifPixelType *line);

/* The frame's rows the canvas shows: non-interlaced rows past the canvas's bottom are
 * not decoded at all. */
static int32_t rows_needed(const gif_walk *w, const gif_frame *f) {
  if (f->interlace) return f->height;
  int64_t visible = (int64_t)w->height - f->top;
  if (visible < 0) visible = 0;
  return visible < f->height ? (int32_t)visible : f->height;
}

/*
 * Decodes the current image's rows, handing each to line_fn in file order (interlaced
 * frames in pass order, with their frame row). Returns the number of rows decoded when
 * all needed rows were, or -(rows decoded) - 1 on an error in the data (message set),
 * or -2^30 when the work bound refuses the frame before any decoding.
 */
#define WALK_OVER_BUDGET (-(1 << 30))
static int32_t walk_decode_image(gif_walk *w, const gif_frame *f, gif_line_fn line_fn, void *user) {
  int32_t needed = rows_needed(w, f);
  uint64_t cost = (uint64_t)f->width * (uint64_t)needed;
  if (cost > PXL_GIF_MAX_DECODE_PIXELS - w->work) {
    snprintf(w->message, sizeof w->message, "frame %d (%dx%d) exceeds the decode work bound of %llu pixels",
             w->frames, f->width, f->height, (unsigned long long)PXL_GIF_MAX_DECODE_PIXELS);
    return WALK_OVER_BUDGET;
  }
  w->work += cost;
  if (f->width == 0 || f->height == 0) {
    if (walk_skip_image(w) != 0) {
      snprintf(w->message, sizeof w->message, "truncated in frame %d's data", w->frames);
      return -1;
    }
    return 0;
  }
  if ((size_t)f->width > w->line_cap) {
    GifPixelType *grown = realloc(w->line, (size_t)f->width);
    if (grown == NULL) {
      snprintf(w->message, sizeof w->message, "out of memory for a row of %d pixels", f->width);
      return -1;
    }
    w->line = grown;
    w->line_cap = (size_t)f->width;
  }
  static const int32_t start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
  int32_t done = 0;
  for (int pass = 0; pass < (f->interlace ? 4 : 1); pass++) {
    int32_t y0 = f->interlace ? start[pass] : 0, dy = f->interlace ? step[pass] : 1;
    for (int32_t y = y0; y < (f->interlace ? f->height : needed); y += dy) {
      if (DGifGetLine(w->gif, w->line, f->width) == GIF_ERROR) {
        int e = w->gif->Error;
        /* The file, or the frame's LZW data, ended: the rows after are the canvas's. */
        if (e == D_GIF_ERR_READ_FAILED || e == D_GIF_ERR_EOF_TOO_SOON) w->data_ended = 1;
        snprintf(w->message, sizeof w->message, "frame %d: %s at row %d", w->frames,
                 e == D_GIF_ERR_READ_FAILED ? "data ends" : gif_error_text(e), y);
        return -done - 1;
      }
      if (line_fn(user, f, y, w->line) != 0) return -done - 1;
      done++;
    }
  }
  if (needed < f->height && walk_skip_image(w) != 0) {
    /* The rows the canvas shows are all there; only the invisible rest is cut short. */
    snprintf(w->message, sizeof w->message, "truncated in frame %d's data", w->frames);
    return -done - 1;
  }
  return done;
}

/* The part of the frame inside the canvas, in canvas coordinates (empty: x0 >= x1). */
static void clip(const gif_walk *w, const gif_frame *f, int32_t *x0, int32_t *y0, int32_t *x1, int32_t *y1) {
  int64_t l = f->left, t = f->top, r = (int64_t)f->left + f->width, b = (int64_t)f->top + f->height;
  *x0 = (int32_t)(l < w->width ? l : w->width);
  *y0 = (int32_t)(t < w->height ? t : w->height);
  *x1 = (int32_t)(r < w->width ? r : w->width);
  *y1 = (int32_t)(b < w->height ? b : w->height);
}

static int covers_canvas(const gif_walk *w, const gif_frame *f) {
  return f->left == 0 && f->top == 0 && f->width >= w->width && f->height >= w->height;
}

/* ---------------------------------------------------------------------------------
 * Drawing a frame's rows onto a canvas in any layout.
 * ------------------------------------------------------------------------------- */
typedef struct gif_canvas {
  gif_walk *walk;
  uint8_t *pixels;
  int32_t stride, channels;
  /* Per palette index, in the layout: the pixel's bytes, and whether it is drawn (1),
   * left alone (0: the transparent index), or invalid (2: beyond the colour table). */
  uint8_t colour[256][4];
  uint8_t kind[256];
} gif_canvas;

static void prepare_palette(gif_canvas *c, const gif_frame *f, int32_t layout) {
  int count = f->map ? f->map->ColorCount : 0;
  if (count > 256) count = 256;
  for (int i = 0; i < 256; i++) {
    c->kind[i] = i < count ? 1 : 2;
    uint8_t r = 0, g = 0, b = 0;
    if (i < count) {
      r = f->map->Colors[i].Red;
      g = f->map->Colors[i].Green;
      b = f->map->Colors[i].Blue;
    }
    uint8_t *p = c->colour[i];
    switch (layout) {
      case PXL_CODEC_BGRA: p[0] = b; p[1] = g; p[2] = r; p[3] = 255; break;
      case PXL_CODEC_RGB: p[0] = r; p[1] = g; p[2] = b; p[3] = 0; break;
      case PXL_CODEC_GRAY:
        p[0] = (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
        p[1] = p[2] = p[3] = 0;
        break;
      default: p[0] = r; p[1] = g; p[2] = b; p[3] = 255; break;
    }
  }
  if (f->transparent >= 0 && f->transparent < 256) c->kind[f->transparent] = 0;
}

static int draw_line(void *user, const gif_frame *f, int32_t y, const GifPixelType *line) {
  gif_canvas *c = user;
  gif_walk *w = c->walk;
  int64_t cy = (int64_t)f->top + y;
  if (cy >= w->height) return 0;
  int32_t x0 = f->left < w->width ? f->left : w->width;
  int64_t right = (int64_t)f->left + f->width;
  int32_t x1 = right < w->width ? (int32_t)right : w->width;
  uint8_t *dst = c->pixels + (size_t)cy * (size_t)c->stride + (size_t)x0 * (size_t)c->channels;
  const GifPixelType *src = line;
  const int32_t ch = c->channels;
  for (int32_t x = x0; x < x1; x++, src++, dst += ch) {
    uint8_t kind = c->kind[*src];
    if (kind == 1) {
      const uint8_t *p = c->colour[*src];
      if (ch == 4) memcpy(dst, p, 4);
      else if (ch == 3) { dst[0] = p[0]; dst[1] = p[1]; dst[2] = p[2]; }
      else dst[0] = p[0];
    } else if (kind == 2) {
      snprintf(w->message, sizeof w->message, "frame %d: pixel index %d beyond its colour table of %d entries",
               w->frames, *src, f->map ? f->map->ColorCount : 0);
      return 1;
    }
  }
  /* Indices outside the canvas are checked too: the file is as corrupt there. They are
   * line[from ..] (from is 0 for a frame wholly right of the canvas): starting the loop
   * at a negative index cost a frame 64000 columns right of a 1-pixel canvas 64000 empty
   * iterations per row (a fuzzer timeout, Tests/fuzz-regressions/gif). */
  int32_t from = x1 - f->left > 0 ? x1 - f->left : 0;
  for (int32_t x = from; x < f->width; x++) {
    if (c->kind[line[x]] == 2) {
      snprintf(w->message, sizeof w->message, "frame %d: pixel index %d beyond its colour table of %d entries",
               w->frames, line[x], f->map ? f->map->ColorCount : 0);
      return 1;
    }
  }
  return 0;
}

static void fail(pxl_codec_output *out, const char *message) {
  free(out->pixels);
  out->pixels = NULL;
  snprintf(out->message, sizeof out->message, "%s", message);
}

static pxl_codec_status check_canvas(gif_walk *w, uint64_t max_pixels) {
  if ((uint64_t)w->width * (uint64_t)w->height > max_pixels) {
    snprintf(w->message, sizeof w->message, "%dx%d exceeds the limit of %llu pixels", w->width, w->height,
             (unsigned long long)max_pixels);
    return PXL_CODEC_TOO_MANY_PIXELS;
  }
  return PXL_CODEC_OK;
}

/* ---------------------------------------------------------------------------------
 * Public functions
 * ------------------------------------------------------------------------------- */
pxl_codec_status pxl_gif_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap) {
  pxl_codec_info zero = {0, 0, 0, 1, 0, 0, 0};
  if (info) *info = zero;
  if (message && message_cap) message[0] = '\0';
  gif_walk w;
  pxl_codec_status st = walk_open(&w, data, size);
  int32_t has_alpha = 0;
  if (st == PXL_CODEC_OK) {
    gif_frame f;
    int r;
    while (w.frames < PXL_GIF_MAX_FRAMES && (r = walk_next(&w, &f)) == WALK_FRAME) {
      if (f.transparent >= 0 || !covers_canvas(&w, &f)) has_alpha = 1;
      if (walk_skip_image(&w) != 0) {
        warn(&w, "file ends inside an image's data");
        break;
      }
    }
    if (w.frames == 0) st = w.gif && w.gif->Error == D_GIF_ERR_NOT_ENOUGH_MEM ? PXL_CODEC_NO_MEMORY : PXL_CODEC_CORRUPT;
  }
  if (st == PXL_CODEC_OK && info) {
    info->width = w.width;
    info->height = w.height;
    info->has_alpha = has_alpha;
    info->orientation = 1;
    info->frame_count = w.frames;
    info->loop_count = w.frames > 1 ? w.loop_count : 0;
  }
  if (message && message_cap) snprintf(message, message_cap, "%s", w.message);
  walk_close(&w);
  return st;
}

/* The first frame into a bitmap of the layout. */
pxl_codec_status pxl_gif_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  int32_t channels = pxl_layout_channels(layout);
  if (channels == 0) {
    fail(out, "unknown layout");
    return PXL_CODEC_UNSUPPORTED;
  }
  gif_walk w;
  gif_canvas *c = NULL;
  gif_frame f;
  pxl_codec_status st = walk_open(&w, data, size);
  if (st == PXL_CODEC_OK) st = check_canvas(&w, max_pixels);
  if (st == PXL_CODEC_OK && walk_next(&w, &f) != WALK_FRAME) st = PXL_CODEC_CORRUPT;
  if (st == PXL_CODEC_OK) {
    c = malloc(sizeof *c);
    size_t bytes = (size_t)w.width * (size_t)w.height * (size_t)channels;
    out->pixels = calloc(bytes, 1);
    if (c == NULL || out->pixels == NULL) {
      snprintf(w.message, sizeof w.message, "out of memory for %dx%d pixels", w.width, w.height);
      st = PXL_CODEC_NO_MEMORY;
    }
  }
  if (st == PXL_CODEC_OK) {
    c->walk = &w;
    c->pixels = out->pixels;
    c->channels = channels;
    c->stride = w.width * channels;
    prepare_palette(c, &f, layout);
    int32_t rows = walk_decode_image(&w, &f, draw_line, c);
    int complete = rows >= 0;
    if (rows == WALK_OVER_BUDGET || rows == -1) {
      st = PXL_CODEC_CORRUPT; /* not one row: nothing to show */
    } else if (rows < 0) {
      warn(&w, NULL);
    }
    if (st == PXL_CODEC_OK) {
      out->width = w.width;
      out->height = w.height;
      out->channels = channels;
      out->stride = c->stride;
      out->has_alpha = channels == 4 && (f.transparent >= 0 || !covers_canvas(&w, &f) || !complete);
      out->warnings = w.warnings;
      out->incomplete = w.data_ended;
    }
  }
  free(c);
  if (st != PXL_CODEC_OK) fail(out, w.message[0] ? w.message : "cannot decode");
  else snprintf(out->message, sizeof out->message, "%s", w.warnings ? w.message : "");
  walk_close(&w);
  return st;
}

/* Streaming the first frame's rows: one row buffer, handed over as each frame row is
 * drawn, with the transparent rows above, below and (for a frame cut short) after it. */
typedef struct row_stream {
  gif_canvas *canvas;
  pxl_codec_row_fn row_fn;
  void *user;
  int32_t next_y;   /* the next canvas row to hand over */
  int stopped;      /* row_fn said stop */
} row_stream;

static int hand_over(row_stream *r, int32_t until) {
  gif_walk *w = r->canvas->walk;
  size_t bytes = (size_t)w->width * (size_t)r->canvas->channels;
  for (; r->next_y < until; r->next_y++) {
    memset(r->canvas->pixels, 0, bytes);
    if (r->row_fn(r->user, r->next_y, r->canvas->pixels) != 0) return r->stopped = 1;
  }
  return 0;
}

static int stream_line(void *user, const gif_frame *f, int32_t y, const GifPixelType *line) {
  row_stream *r = user;
  int32_t cy = f->top + y; /* < canvas height: rows_needed stops at the bottom */
  if (hand_over(r, cy) != 0) return 1;
  memset(r->canvas->pixels, 0, (size_t)r->canvas->walk->width * (size_t)r->canvas->channels);
  gif_frame shifted = *f;
  shifted.top = 0; /* draw_line writes row 0 of the one-row buffer */
  int bad = draw_line(r->canvas, &shifted, 0, line);
  /* The row with a bad index is shown up to it, as pxl_gif_decode leaves it. */
  if (r->row_fn(r->user, cy, r->canvas->pixels) != 0) return r->stopped = 1;
  r->next_y = cy + 1;
  return bad;
}

/* The first frame's rows. A non-interlaced first frame is streamed through one row (a
 * thumbnail of a large GIF never holds its bitmap); an interlaced one is drawn into one
 * bitmap of the layout first (its rows arrive in four passes) and then handed over. */
pxl_codec_status pxl_gif_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  int32_t channels = pxl_layout_channels(layout);
  if (row_fn == NULL || channels == 0) {
    fail(out, row_fn == NULL ? "no row function" : "unknown layout");
    return PXL_CODEC_UNSUPPORTED;
  }
  gif_walk w;
  gif_frame f;
  gif_canvas *c = NULL;
  pxl_codec_status st = walk_open(&w, data, size);
  if (st == PXL_CODEC_OK) st = check_canvas(&w, max_pixels);
  if (st == PXL_CODEC_OK && walk_next(&w, &f) != WALK_FRAME) st = PXL_CODEC_CORRUPT;
  if (st == PXL_CODEC_OK && f.interlace) {
    walk_close(&w);
    st = pxl_gif_decode(data, size, layout, max_pixels, out);
    if (st != PXL_CODEC_OK) return st;
    for (int32_t y = 0; y < out->height; y++) {
      if (row_fn(user, y, out->pixels + (size_t)y * (size_t)out->stride) != 0) {
        fail(out, "stopped by the caller");
        return PXL_CODEC_CORRUPT;
      }
    }
    free(out->pixels);
    out->pixels = NULL;
    return PXL_CODEC_OK;
  }
  if (st == PXL_CODEC_OK) {
    c = malloc(sizeof *c);
    if (c) c->pixels = malloc((size_t)w.width * (size_t)channels);
    if (c == NULL || c->pixels == NULL) {
      snprintf(w.message, sizeof w.message, "out of memory for a row of %d pixels", w.width);
      st = PXL_CODEC_NO_MEMORY;
    }
  }
  if (st == PXL_CODEC_OK) {
    c->walk = &w;
    c->channels = channels;
    c->stride = 0;
    prepare_palette(c, &f, layout);
    row_stream r = {c, row_fn, user, 0, 0};
    int32_t rows = walk_decode_image(&w, &f, stream_line, &r);
    int complete = rows >= 0;
    if (r.stopped) {
      snprintf(w.message, sizeof w.message, "stopped by the caller");
      st = PXL_CODEC_CORRUPT;
    } else if (rows == WALK_OVER_BUDGET || rows == -1) {
      st = PXL_CODEC_CORRUPT; /* not one row: nothing to show */
    } else {
      if (rows < 0) warn(&w, NULL);
      if (hand_over(&r, w.height) != 0) {
        snprintf(w.message, sizeof w.message, "stopped by the caller");
        st = PXL_CODEC_CORRUPT;
      }
    }
    if (st == PXL_CODEC_OK) {
      out->width = w.width;
      out->height = w.height;
      out->channels = channels;
      out->stride = w.width * channels;
      out->has_alpha = channels == 4 && (f.transparent >= 0 || !covers_canvas(&w, &f) || !complete);
      out->warnings = w.warnings;
      out->incomplete = w.data_ended;
    }
  }
  if (c) free(c->pixels);
  free(c);
  if (st != PXL_CODEC_OK) fail(out, w.message[0] ? w.message : "cannot decode");
  else snprintf(out->message, sizeof out->message, "%s", w.warnings ? w.message : "");
  walk_close(&w);
  return st;
}

/* The pull-style reader (pxl_codecs.h, "Frame readers"): the state decode_frames keeps
 * between frames, kept between calls instead. The disposal of the frame last handed over
 * is applied when the next one is asked for, so the canvas handed over stays as shown. */
struct pxl_gif_frames {
  gif_walk w;
  gif_canvas c;
  uint8_t *saved;       /* the canvas before a "restore to previous" frame */
  int32_t has_alpha;
  int32_t done;         /* the last frame was handed over (or the reader failed) */
  int32_t dispose, x0, y0, x1, y1; /* the pending disposal of the frame handed over */
};

pxl_gif_frames *pxl_gif_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                    pxl_codec_status *status, char *message, size_t message_cap) {
  pxl_gif_frames *r = calloc(1, sizeof *r);
  pxl_codec_status st = PXL_CODEC_NO_MEMORY;
  const char *text = "out of memory";
  if (r) {
    st = walk_open(&r->w, data, size);
    if (st == PXL_CODEC_OK) st = check_canvas(&r->w, max_pixels);
    if (st == PXL_CODEC_OK) {
      r->c.pixels = calloc((size_t)r->w.width * (size_t)r->w.height, 4);
      if (r->c.pixels == NULL) {
        snprintf(r->w.message, sizeof r->w.message, "out of memory for %dx%d pixels", r->w.width, r->w.height);
        st = PXL_CODEC_NO_MEMORY;
      }
    }
    text = r->w.message[0] ? r->w.message : "cannot decode";
  }
  if (message && message_cap) snprintf(message, message_cap, "%s", st == PXL_CODEC_OK ? "" : text);
  if (status) *status = st;
  if (st != PXL_CODEC_OK) {
    pxl_gif_frames_close(r);
    return NULL;
  }
  r->c.walk = &r->w;
  r->c.channels = 4;
  r->c.stride = r->w.width * 4;
  return r;
}

pxl_codec_status pxl_gif_frames_next(pxl_gif_frames *r, pxl_codec_frame *frame) {
  memset(frame, 0, sizeof *frame);
  if (r->done) return PXL_CODEC_OK;
  gif_walk *w = &r->w;
  gif_canvas *c = &r->c;
  if (r->dispose) { /* saved exists for such a 3 */
    for (int32_t y = r->y0; y < r->y1; y++) {
      uint8_t *row = c->pixels + (size_t)y * c->stride + (size_t)r->x0 * 4;
      if (r->dispose == 2) memset(row, 0, (size_t)(r->x1 - r->x0) * 4);
      else memcpy(row, r->saved + (size_t)y * c->stride + (size_t)r->x0 * 4, (size_t)(r->x1 - r->x0) * 4);
    }
    r->dispose = 0;
  }
  pxl_codec_status st = PXL_CODEC_OK;
  if (w->frames >= PXL_GIF_MAX_FRAMES) {
    char text[96];
    snprintf(text, sizeof text, "more than %d frames: the rest are ignored", PXL_GIF_MAX_FRAMES);
    warn(w, text);
    r->done = 1;
    return PXL_CODEC_OK;
  }
  gif_frame f;
  int n = walk_next(w, &f);
  if (n == WALK_END) { r->done = 1; return PXL_CODEC_OK; }
  if (n == WALK_ERROR) st = PXL_CODEC_CORRUPT;
  int32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  if (st == PXL_CODEC_OK) {
    clip(w, &f, &x0, &y0, &x1, &y1);
    if (f.disposal == 3 && x0 < x1 && y0 < y1) {
      if (r->saved == NULL) r->saved = malloc((size_t)w->width * (size_t)w->height * 4);
      if (r->saved == NULL) {
        snprintf(w->message, sizeof w->message, "out of memory for %dx%d pixels", w->width, w->height);
        st = PXL_CODEC_NO_MEMORY;
      } else {
        for (int32_t y = y0; y < y1; y++)
          memcpy(r->saved + (size_t)y * c->stride + (size_t)x0 * 4, c->pixels + (size_t)y * c->stride + (size_t)x0 * 4,
                 (size_t)(x1 - x0) * 4);
      }
    }
  }
  if (st == PXL_CODEC_OK) {
    prepare_palette(c, &f, PXL_CODEC_RGBA);
    int32_t rows = walk_decode_image(w, &f, draw_line, c);
    if (rows < 0) {
      if (w->frames == 1 && (rows == -1 || rows == WALK_OVER_BUDGET)) st = PXL_CODEC_CORRUPT;
      else if (rows == WALK_OVER_BUDGET) { warn(w, NULL); r->done = 1; return PXL_CODEC_OK; } /* not shown */
      else { warn(w, NULL); r->done = 1; }
    }
  }
  if (st != PXL_CODEC_OK) {
    r->done = 1;
    snprintf(frame->message, sizeof frame->message, "%s", w->message[0] ? w->message : "cannot decode");
    return st;
  }
  if (f.transparent >= 0 || !covers_canvas(w, &f) || r->done) r->has_alpha = 1;
  if ((f.disposal == 2 || f.disposal == 3) && x0 < x1 && y0 < y1) {
    r->dispose = f.disposal;
    r->x0 = x0; r->y0 = y0; r->x1 = x1; r->y1 = y1;
  }
  frame->rgba = c->pixels;
  frame->stride = c->stride;
  frame->duration_ms = f.delay_cs * 10;
  frame->index = w->frames - 1;
  frame->incomplete = w->data_ended;
  snprintf(frame->message, sizeof frame->message, "%s", w->warnings ? w->message : "");
  return PXL_CODEC_OK;
}

int32_t pxl_gif_first_duration(const uint8_t *data, size_t size) {
  gif_walk w;
  gif_frame f;
  int32_t duration = -1;
  if (walk_open(&w, data, size) == PXL_CODEC_OK && walk_next(&w, &f) == WALK_FRAME) duration = f.delay_cs * 10;
  walk_close(&w);
  return duration;
}

void pxl_gif_frames_close(pxl_gif_frames *r) {
  if (r == NULL) return;
  free(r->c.pixels);
  free(r->saved);
  walk_close(&r->w);
  free(r);
}

pxl_codec_status pxl_gif_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                       pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  if (frame_fn == NULL) {
    fail(out, "no frame function");
    return PXL_CODEC_UNSUPPORTED;
  }
  pxl_codec_status st;
  pxl_gif_frames *r = pxl_gif_frames_open(data, size, max_pixels, &st, out->message, sizeof out->message);
  if (r == NULL) return st;
  pxl_codec_frame frame;
  while ((st = pxl_gif_frames_next(r, &frame)) == PXL_CODEC_OK && frame.rgba != NULL) {
    if (frame_fn(user, frame.index, frame.rgba, frame.stride, frame.duration_ms) != 0) break;
  }
  if (st == PXL_CODEC_OK) {
    out->width = r->w.width;
    out->height = r->w.height;
    out->channels = 4;
    out->stride = r->w.width * 4;
    out->has_alpha = r->has_alpha;
    out->warnings = r->w.warnings;
    out->incomplete = r->w.data_ended;
    snprintf(out->message, sizeof out->message, "%s", r->w.warnings ? r->w.message : "");
  } else {
    fail(out, frame.message);
  }
  pxl_gif_frames_close(r);
  return st;
}

pxl_codec_status pxl_gif_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  if (color == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(color, 0, sizeof *color);
  gif_walk w;
  pxl_codec_status st = walk_open(&w, data, size);
  if (st == PXL_CODEC_OK) {
    /* The ICCRGBG1 application extension, if any, comes before the first image. */
    w.icc = &color->icc;
    w.icc_size = &color->icc_size;
    gif_frame f;
    if (walk_next(&w, &f) == WALK_ERROR && w.frames == 0 && color->icc == NULL) st = PXL_CODEC_CORRUPT;
  }
  walk_close(&w);
  return st;
}
