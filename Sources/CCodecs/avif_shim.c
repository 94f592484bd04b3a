/*
 * AVIF through libavif 0.11 (Debian's libavif15: AV1 decoding by dav1d, which
 * AVIF_CODEC_CHOICE_AUTO picks before libgav1 and aom).
 *
 * libavif reports every error as a returned avifResult (no longjmp, no callbacks), so
 * unlike jpeg_shim.c and png_shim.c there is no setjmp here: each call is checked and
 * turned into a pxl_codec_status with libavif's own words ("AVIF: Truncated data: ...").
 *
 * Decoder settings, chosen for a library decoding many images at once:
 *  - maxThreads 1: decodes already run in parallel on the caller's pool; dav1d with one
 *    thread creates no threads of its own.
 *  - strictFlags AVIF_STRICT_DISABLED: files from libheif <= 1.11 (no 'pixi') and cavif
 *    (alpha without 'ispe') decode, as they do in browsers. The pixels of every file
 *    strict mode accepts are unchanged; the conformance sets take expected pixels from
 *    avifdec (with --no-strict where only that decodes, said in their manifests).
 *  - imageCountLimit PXL_AVIF_MAX_FRAMES: libavif builds one sample entry per frame a
 *    sample table declares before reading any of them, so its default (2.6 M frames)
 *    lets a few hundred bytes cost ~120 MB.
 *  - imageSizeLimit: libavif's default while parsing (a larger image then reports
 *    TOO_MANY_PIXELS from our check, not a parse error), then max_pixels (capped at
 *    libavif's default) before the first frame is decoded, so dav1d itself refuses an
 *    AV1 frame larger than max_pixels whatever the container says (its frame_size_limit).
 *    A grid whose cells overhang the image by more than max_pixels allows fails there.
 *  - ignoreExif/ignoreXMP: never read (orientation comes from irot/imir, as MIAF says).
 *
 * Pixels are exactly avifdec's PNG output with -d 8 (apps/shared/avifpng.c in 0.11.1),
 * the conformance reference:
 *  - an image with an alpha plane is converted to AVIF_RGB_FORMAT_RGBA, one without to
 *    AVIF_RGB_FORMAT_RGB (an 8-bit one to RGBA: the same pixels, see source_channels), at depth 8 with avifRGBImageSetDefaults' settings (chroma
 *    upsampling AUTOMATIC, libyuv where it applies, straight alpha). The format matters:
 *    for 10/12-bit 4:2:0 and 4:2:2 libyuv handles RGBA but not RGB, and the two paths
 *    upsample differently (up to 58 levels apart), so we use the one avifdec uses.
 *  - an 8-bit 4:0:0 image without alpha is its Y plane as stored, as avifdec writes it
 *    (PNG gray): identical to libavif's conversion for full range (avifenc's default);
 *    a limited-range one is therefore NOT expanded to full range.
 *  Then RGBA is expanded/reordered to the layout; GRAY from colour uses the BT.601
 *  formula png_shim.c uses (see pxl_codecs.h), so GRAY of a gray image is Y exactly.
 *
 * What libavif 0.11 does not do and we do not either: irot/imir (reported as EXIF
 * orientation, applied by the caller), clap (not cropped, as avifdec), the repetition
 * count of a sequence (0.11 does not parse 'elst': loop_count is 0, forever).
 * libavif 0.11's allocator aborts the process when malloc fails (src/mem.c); our own
 * buffers are malloc'd here and fail cleanly with PXL_CODEC_NO_MEMORY.
 */
#include "pxl_avif.h"
#include "pxl_exif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avif/avif.h>

/* The most frames (sample entries) a sequence may declare: ~5 MB of libavif's sample
 * table at most, and 27 minutes of 60 fps animation. */
#define PXL_AVIF_MAX_FRAMES 100000u

/* Rows mode converts the image to RGB in strips of this many rows (plus a margin above
 * and below that is converted but not handed over, so that chroma upsampling, which
 * reads the neighbouring chroma rows, sees exactly what it sees in a whole-image
 * conversion): a thumbnail never holds the full-size RGB bitmap. Both even, as a 4:2:0
 * view must start on an even row. libavif's and libyuv's bilinear upsampling read one
 * chroma row either side, i.e. two luma rows: the margin is twice that (avif_test.c
 * compares the rows with a whole-image conversion; a margin of 0 fails it). */
#define PXL_AVIF_STRIP_ROWS 256
#define PXL_AVIF_STRIP_MARGIN 4

static pxl_codec_status status_of(avifResult r) {
  switch (r) {
    case AVIF_RESULT_OK: return PXL_CODEC_OK;
    case AVIF_RESULT_OUT_OF_MEMORY: return PXL_CODEC_NO_MEMORY;
    case AVIF_RESULT_UNSUPPORTED_DEPTH:
    case AVIF_RESULT_NOT_IMPLEMENTED:
    case AVIF_RESULT_NO_CODEC_AVAILABLE: return PXL_CODEC_UNSUPPORTED;
    default: return PXL_CODEC_CORRUPT;
  }
}

/* "<libavif's name for r>: <its diagnostic>" into msg. */
static pxl_codec_status fail_with(avifDecoder *d, avifResult r, const char *what, char *msg, size_t cap) {
  char text[400];
  const char *diag = d != NULL ? d->diag.error : "";
  snprintf(text, sizeof text, "%s%s%s%s%s", what ? what : "", what ? ": " : "", avifResultToString(r),
           diag[0] ? ": " : "", diag);
  pxl_set_message(msg, cap, "AVIF", text);
  /* libavif's own size limits (16384 x 16384 pixels, 32768 per side) fail the parse
   * with a generic result; they are pixel limits all the same. */
  if (r == AVIF_RESULT_BMFF_PARSE_FAILED && strstr(diag, "too large") != NULL) return PXL_CODEC_TOO_MANY_PIXELS;
  return status_of(r);
}

/* A parsed decoder (header, item properties, sample tables; no AV1 decoded yet), or NULL
 * with the status in *status and the reason in msg. */
static avifDecoder *open_parsed(const uint8_t *data, size_t size, pxl_codec_status *status, char *msg, size_t cap) {
  if (data == NULL || size == 0) {
    pxl_set_message(msg, cap, "AVIF", "no data");
    *status = PXL_CODEC_CORRUPT;
    return NULL;
  }
  avifDecoder *d = avifDecoderCreate();
  d->maxThreads = 1;
  d->codecChoice = AVIF_CODEC_CHOICE_AUTO;
  d->strictFlags = AVIF_STRICT_DISABLED;
  d->imageCountLimit = PXL_AVIF_MAX_FRAMES;
  d->ignoreExif = AVIF_TRUE;
  d->ignoreXMP = AVIF_TRUE;
  avifResult r = avifDecoderSetIOMemory(d, data, size); /* zero-copy: the data outlives d */
  if (r == AVIF_RESULT_OK) r = avifDecoderParse(d);
  if (r == AVIF_RESULT_OK && (d->image->width == 0 || d->image->height == 0)) {
    pxl_set_message(msg, cap, "AVIF", "the image has no pixels (width or height 0)");
    avifDecoderDestroy(d);
    *status = PXL_CODEC_CORRUPT;
    return NULL;
  }
  if (r != AVIF_RESULT_OK) {
    *status = fail_with(d, r, "parse", msg, cap);
    avifDecoderDestroy(d);
    return NULL;
  }
  *status = PXL_CODEC_OK;
  return d;
}

/* irot (anticlockwise quarter turns) then imir (MIAF 7.3.6.7 order) as the EXIF
 * orientation that shows the stored pixels the same way (Orientation.swift's table);
 * the inverse of libavif's own EXIF -> irot/imir mapping (src/exif.c). */
static int32_t orientation_of(const avifImage *image) {
  int angle = (image->transformFlags & AVIF_TRANSFORM_IROT) ? image->irot.angle & 3 : 0;
  int mirror = (image->transformFlags & AVIF_TRANSFORM_IMIR) ? (image->imir.mode ? 1 : 0) : -1;
  static const int32_t table[4][3] = {
      /* no imir, imir mode 0 (top-bottom), imir mode 1 (left-right) */
      {1, 4, 2}, /* irot 0 */
      {8, 5, 7}, /* irot 1: 90 degrees anticlockwise */
      {3, 2, 4}, /* irot 2 */
      {6, 7, 5}, /* irot 3 */
  };
  return table[angle][mirror + 1];
}

static void fill_info(const avifDecoder *d, pxl_codec_info *info) {
  info->width = (int32_t)(d->image->width > INT32_MAX ? INT32_MAX : d->image->width);
  info->height = (int32_t)(d->image->height > INT32_MAX ? INT32_MAX : d->image->height);
  info->has_alpha = d->alphaPresent ? 1 : 0;
  info->orientation = orientation_of(d->image);
  info->frame_count = d->imageCount > 0 ? d->imageCount : 1;
  info->loop_count = 0; /* libavif 0.11 does not read the repetition count: forever */
}

pxl_codec_status pxl_avif_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                    size_t message_cap) {
  if (message != NULL && message_cap > 0) message[0] = '\0';
  if (info == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(info, 0, sizeof *info);
  info->orientation = 1;
  pxl_codec_status st;
  avifDecoder *d = open_parsed(data, size, &st, message, message_cap);
  if (d == NULL) return st;
  fill_info(d, info);
  avifDecoderDestroy(d);
  return PXL_CODEC_OK;
}

/* Refuses images over max_pixels (before any pixel buffer exists), then lowers
 * libavif's limit to it for the AV1 decode (see the top of the file). */
static pxl_codec_status check_size(avifDecoder *d, uint64_t max_pixels, char *msg, size_t cap) {
  uint64_t w = d->image->width, h = d->image->height;
  if (w * h > max_pixels) {
    char text[160];
    snprintf(text, sizeof text, "%llux%llu is over the limit of %llu pixels", (unsigned long long)w,
             (unsigned long long)h, (unsigned long long)max_pixels);
    pxl_set_message(msg, cap, "AVIF", text);
    return PXL_CODEC_TOO_MANY_PIXELS;
  }
  uint64_t limit = max_pixels < AVIF_DEFAULT_IMAGE_SIZE_LIMIT ? max_pixels : AVIF_DEFAULT_IMAGE_SIZE_LIMIT;
  d->imageSizeLimit = (uint32_t)(limit > 0 ? limit : 1);
  return PXL_CODEC_OK;
}

/* Decodes the next frame; checks it has the size the header promised (libavif scales
 * AV1 frames to it, so anything else means a broken file). */
static pxl_codec_status next_frame(avifDecoder *d, uint32_t width, uint32_t height, char *msg, size_t cap) {
  avifResult r = avifDecoderNextImage(d);
  if (r != AVIF_RESULT_OK) return fail_with(d, r, "decode", msg, cap);
  if (d->image->width != width || d->image->height != height || d->image->yuvPlanes[AVIF_CHAN_Y] == NULL) {
    char text[160];
    snprintf(text, sizeof text, "frame %d decoded as %ux%u, the header says %ux%u", d->imageIndex,
             (unsigned)d->image->width, (unsigned)d->image->height, (unsigned)width, (unsigned)height);
    pxl_set_message(msg, cap, "AVIF", text);
    return PXL_CODEC_CORRUPT;
  }
  return PXL_CODEC_OK;
}

/* How avifdec turns the decoded frame into 8-bit pixels (see the top of the file):
 * 1 = the Y plane as it is, 3 = AVIF_RGB_FORMAT_RGB, 4 = AVIF_RGB_FORMAT_RGBA. One
 * exception: an opaque 8-bit image is converted to RGBA too (alpha 255). For 8-bit input
 * libavif hands both formats to libyuv's same YUV->RGB arithmetic (RGB24 or ARGB output),
 * so the pixels are avifdec's; the RGB24 kernels are plain C and the ARGB ones SIMD, which
 * makes the conversion ~6x faster (3.3 -> 0.5 ms for 1 Mpx 4:2:0), a third of the decode.
 * The conformance sets check the identity on every 8-bit file. */
static int source_channels(const avifImage *image) {
  if (image->alphaPlane != NULL) return 4;
  if (image->yuvFormat == AVIF_PIXEL_FORMAT_YUV400 && image->depth == 8) return 1;
  return image->depth == 8 ? 4 : 3;
}

/* Converts rows [y0, y0 + rows) of the frame to `channels` (3 or 4) 8-bit samples per
 * pixel into dst (row_bytes apart). Rows outside [keep0, keep1) may be wrong (they
 * are the margin of a strip); rows inside are those of a whole-image conversion. */
static avifResult convert_rows(const avifImage *image, int channels, uint32_t y0, uint32_t rows, uint8_t *dst,
                               uint32_t row_bytes) {
  avifImage *view = avifImageCreateEmpty();
  avifCropRect rect = {0, y0, image->width, rows};
  avifResult r = avifImageSetViewRect(view, image, &rect);
  if (r == AVIF_RESULT_OK) {
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, view);
    rgb.depth = 8;
    rgb.format = channels == 4 ? AVIF_RGB_FORMAT_RGBA : AVIF_RGB_FORMAT_RGB;
    rgb.pixels = dst;
    rgb.rowBytes = row_bytes;
    r = avifImageYUVToRGB(view, &rgb);
  }
  avifImageDestroy(view);
  return r;
}

/* One row from `sc` samples per pixel (1 gray, 3 RGB, 4 RGBA) into the layout. dst may
 * equal src: widening runs right to left, narrowing left to right. */
static void to_layout(const uint8_t *src, int sc, uint8_t *dst, int32_t layout, uint32_t w) {
  if (layout == PXL_CODEC_GRAY) {
    if (sc == 1) {
      if (dst != src) memcpy(dst, src, w);
      return;
    }
    for (uint32_t i = 0; i < w; i++) {
      const uint8_t *p = src + (size_t)i * sc;
      dst[i] = (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16);
    }
    return;
  }
  int dc = layout == PXL_CODEC_RGB ? 3 : 4;
  int bgr = layout == PXL_CODEC_BGRA;
  if (dc > sc) { /* widening: right to left so that in-place works */
    for (uint32_t k = w; k-- > 0;) {
      const uint8_t *p = src + (size_t)k * sc;
      uint8_t r = p[0], g = sc == 1 ? p[0] : p[1], b = sc == 1 ? p[0] : p[2];
      uint8_t a = sc == 4 ? p[3] : 0xff;
      uint8_t *q = dst + (size_t)k * dc;
      q[0] = bgr ? b : r;
      q[1] = g;
      q[2] = bgr ? r : b;
      if (dc == 4) q[3] = a;
    }
    return;
  }
  for (uint32_t k = 0; k < w; k++) { /* same width or narrowing: left to right */
    const uint8_t *p = src + (size_t)k * sc;
    uint8_t r = p[0], g = p[1], b = p[2];
    uint8_t a = sc == 4 ? p[3] : 0xff;
    uint8_t *q = dst + (size_t)k * dc;
    q[0] = bgr ? b : r;
    q[1] = g;
    q[2] = bgr ? r : b;
    if (dc == 4) q[3] = a;
  }
}

/* Whether pixels converted to `sc` samples per pixel are already in the layout. */
static int already_layout(int sc, int32_t layout) {
  return (sc == 4 && layout == PXL_CODEC_RGBA) || (sc == 3 && layout == PXL_CODEC_RGB) ||
         (sc == 1 && layout == PXL_CODEC_GRAY);
}

/* The current frame, whole, into a malloc'd bitmap in the layout (stride w * channels). */
static pxl_codec_status frame_to_bitmap(const avifImage *image, int32_t layout, uint8_t **out, char *msg, size_t cap) {
  uint32_t w = image->width, h = image->height;
  int sc = source_channels(image), dc = pxl_layout_channels(layout);
  int wide = sc > dc ? sc : dc;
  uint64_t total = (uint64_t)w * h * (uint64_t)wide;
  uint8_t *buf = total <= SIZE_MAX ? malloc(total ? (size_t)total : 1) : NULL;
  if (buf == NULL) {
    pxl_set_message(msg, cap, "AVIF", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  size_t conv_stride = (size_t)w * (size_t)wide, out_stride = (size_t)w * (size_t)dc;
  if (sc == 1) {
    const uint8_t *yp = image->yuvPlanes[AVIF_CHAN_Y];
    for (uint32_t y = 0; y < h; y++) memcpy(buf + y * conv_stride, yp + (size_t)y * image->yuvRowBytes[AVIF_CHAN_Y], w);
  } else {
    avifResult r = convert_rows(image, sc, 0, h, buf, (uint32_t)conv_stride);
    if (r != AVIF_RESULT_OK) {
      free(buf);
      return fail_with(NULL, r, "conversion to RGB", msg, cap);
    }
  }
  /* In place, row by row in increasing y: row y's output starts at or before its input
   * and ends before row y + 1's input starts. Nothing to do when libavif wrote the layout. */
  if (!already_layout(sc, layout))
    for (uint32_t y = 0; y < h; y++) to_layout(buf + y * conv_stride, sc, buf + y * out_stride, layout, w);
  if (out_stride < conv_stride) {
    uint8_t *shrunk = realloc(buf, out_stride * h > 0 ? out_stride * h : 1);
    if (shrunk != NULL) buf = shrunk; /* a failed shrink leaves a valid, larger block */
  }
  *out = buf;
  return PXL_CODEC_OK;
}

static void set_output(pxl_codec_output *out, const avifImage *image, int32_t channels) {
  out->width = (int32_t)image->width;
  out->height = (int32_t)image->height;
  out->channels = channels;
  out->stride = (int32_t)((size_t)image->width * (size_t)channels);
  out->has_alpha = channels == 4 && image->alphaPlane != NULL ? 1 : 0;
}

/* The first frame's rows to row_fn, converted strip by strip (see PXL_AVIF_STRIP_ROWS). */
static pxl_codec_status frame_to_rows(const avifImage *image, int32_t layout, pxl_codec_row_fn row_fn, void *user,
                                      char *msg, size_t cap) {
  uint32_t w = image->width, h = image->height;
  int sc = source_channels(image), dc = pxl_layout_channels(layout);
  uint32_t span = PXL_AVIF_STRIP_ROWS + 2 * PXL_AVIF_STRIP_MARGIN;
  uint32_t strip_rows = h < span ? h : span;
  size_t conv_stride = (size_t)w * (size_t)sc;
  uint8_t *strip = sc == 1 ? NULL : malloc(conv_stride * strip_rows);
  uint8_t *row = malloc((size_t)w * (size_t)dc);
  if ((sc != 1 && strip == NULL) || row == NULL) {
    free(strip);
    free(row);
    pxl_set_message(msg, cap, "AVIF", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  pxl_codec_status st = PXL_CODEC_OK;
  for (uint32_t top = 0; top < h && st == PXL_CODEC_OK; top += PXL_AVIF_STRIP_ROWS) {
    uint32_t end = h - top < PXL_AVIF_STRIP_ROWS ? h : top + PXL_AVIF_STRIP_ROWS; /* rows [top, end) handed over */
    uint32_t y0 = 0, y1 = h;
    if (sc != 1) {
      y0 = top > PXL_AVIF_STRIP_MARGIN ? top - PXL_AVIF_STRIP_MARGIN : 0;
      y1 = h - end > PXL_AVIF_STRIP_MARGIN ? end + PXL_AVIF_STRIP_MARGIN : h;
      avifResult r = convert_rows(image, sc, y0, y1 - y0, strip, (uint32_t)conv_stride);
      if (r != AVIF_RESULT_OK) {
        st = fail_with(NULL, r, "conversion to RGB", msg, cap);
        break;
      }
    }
    for (uint32_t y = top; y < end; y++) {
      const uint8_t *src = sc == 1 ? image->yuvPlanes[AVIF_CHAN_Y] + (size_t)y * image->yuvRowBytes[AVIF_CHAN_Y]
                                   : strip + (size_t)(y - y0) * conv_stride;
      if (!already_layout(sc, layout)) {
        to_layout(src, sc, row, layout, w);
        src = row;
      }
      if (row_fn(user, (int32_t)y, src) != 0) {
        pxl_set_message(msg, cap, "AVIF", "stopped by the caller");
        st = PXL_CODEC_CORRUPT;
        break;
      }
    }
  }
  free(strip);
  free(row);
  return st;
}

static pxl_codec_status avif_decode_into(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                         pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  int32_t channels = pxl_layout_channels(layout);
  if (channels == 0) {
    pxl_set_message(out->message, sizeof out->message, "AVIF", "invalid layout");
    return PXL_CODEC_UNSUPPORTED;
  }
  pxl_codec_status st;
  avifDecoder *d = open_parsed(data, size, &st, out->message, sizeof out->message);
  if (d == NULL) return st;
  uint32_t w = d->image->width, h = d->image->height;
  st = check_size(d, max_pixels, out->message, sizeof out->message);
  if (st == PXL_CODEC_OK) st = next_frame(d, w, h, out->message, sizeof out->message);
  if (st == PXL_CODEC_OK) {
    if (row_fn != NULL) st = frame_to_rows(d->image, layout, row_fn, user, out->message, sizeof out->message);
    else st = frame_to_bitmap(d->image, layout, &out->pixels, out->message, sizeof out->message);
  }
  if (st == PXL_CODEC_OK) {
    set_output(out, d->image, channels);
    out->message[0] = '\0';
  }
  avifDecoderDestroy(d);
  return st;
}

pxl_codec_status pxl_avif_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                 pxl_codec_output *out) {
  return avif_decode_into(data, size, layout, max_pixels, NULL, NULL, out);
}

pxl_codec_status pxl_avif_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                      pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (row_fn == NULL) {
    if (out != NULL) {
      memset(out, 0, sizeof *out);
      pxl_set_message(out->message, sizeof out->message, "AVIF", "no row function");
    }
    return PXL_CODEC_UNSUPPORTED;
  }
  return avif_decode_into(data, size, layout, max_pixels, row_fn, user, out);
}

/* A frame's duration in milliseconds, rounded; 0 for a still (nothing to time). */
static int32_t duration_ms(const avifDecoder *d) {
  if (d->imageCount <= 1 || d->imageTiming.timescale == 0) return 0;
  uint64_t t = d->imageTiming.durationInTimescales, scale = d->imageTiming.timescale;
  uint64_t ms = t > UINT64_MAX / 1000 ? t / scale * 1000 : (t * 1000 + scale / 2) / scale;
  return ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
}

pxl_codec_status pxl_avif_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                        pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  if (frame_fn == NULL) {
    pxl_set_message(out->message, sizeof out->message, "AVIF", "no frame function");
    return PXL_CODEC_UNSUPPORTED;
  }
  pxl_codec_status st;
  avifDecoder *d = open_parsed(data, size, &st, out->message, sizeof out->message);
  if (d == NULL) return st;
  uint32_t w = d->image->width, h = d->image->height;
  int count = d->imageCount > 0 ? d->imageCount : 1;
  st = check_size(d, max_pixels, out->message, sizeof out->message);
  /* Every frame of a sequence covers the whole canvas (no disposal or blending in AVIF),
   * so each is converted on its own into one RGBA buffer, reused. */
  for (int i = 0; i < count && st == PXL_CODEC_OK; i++) {
    st = next_frame(d, w, h, out->message, sizeof out->message);
    uint8_t *rgba = NULL;
    if (st == PXL_CODEC_OK) st = frame_to_bitmap(d->image, PXL_CODEC_RGBA, &rgba, out->message, sizeof out->message);
    if (st != PXL_CODEC_OK) break;
    if (i == 0) set_output(out, d->image, 4);
    if (d->image->alphaPlane != NULL) out->has_alpha = 1;
    int stop = frame_fn(user, i, rgba, (int32_t)(w * 4), duration_ms(d));
    free(rgba);
    if (stop) break; /* the caller's memory bound: a success with the frames so far */
  }
  if (st == PXL_CODEC_OK) out->message[0] = '\0';
  else out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
  avifDecoderDestroy(d);
  return st;
}

/* The pull-style reader (pxl_codecs.h, "Frame readers"): decode_frames' steps, one frame
 * per call, the parsed decoder kept between them. */
struct pxl_avif_frames {
  avifDecoder *d;
  uint32_t width, height;
  int32_t count, index;
  uint8_t *rgba; /* the frame last handed over */
};

pxl_avif_frames *pxl_avif_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                      pxl_codec_status *status, char *message, size_t message_cap) {
  char text[256] = "";
  pxl_codec_status st = PXL_CODEC_NO_MEMORY;
  pxl_avif_frames *r = calloc(1, sizeof *r);
  if (r == NULL) pxl_set_message(text, sizeof text, "AVIF", "out of memory");
  else r->d = open_parsed(data, size, &st, text, sizeof text);
  if (r && r->d) {
    r->width = r->d->image->width;
    r->height = r->d->image->height;
    r->count = r->d->imageCount > 0 ? r->d->imageCount : 1;
    st = check_size(r->d, max_pixels, text, sizeof text);
  }
  if (message && message_cap) snprintf(message, message_cap, "%s", st == PXL_CODEC_OK ? "" : text);
  if (status) *status = st;
  if (st != PXL_CODEC_OK) {
    pxl_avif_frames_close(r);
    return NULL;
  }
  return r;
}

pxl_codec_status pxl_avif_frames_next(pxl_avif_frames *r, pxl_codec_frame *frame) {
  memset(frame, 0, sizeof *frame);
  free(r->rgba);
  r->rgba = NULL;
  if (r->index >= r->count) return PXL_CODEC_OK;
  pxl_codec_status st = next_frame(r->d, r->width, r->height, frame->message, sizeof frame->message);
  if (st == PXL_CODEC_OK) st = frame_to_bitmap(r->d->image, PXL_CODEC_RGBA, &r->rgba, frame->message, sizeof frame->message);
  if (st != PXL_CODEC_OK) {
    r->index = r->count; /* every later call ends */
    return st;
  }
  frame->rgba = r->rgba;
  frame->stride = (int32_t)(r->width * 4);
  frame->index = r->index++;
  frame->duration_ms = duration_ms(r->d);
  return PXL_CODEC_OK;
}

void pxl_avif_frames_close(pxl_avif_frames *r) {
  if (r == NULL) return;
  if (r->d) avifDecoderDestroy(r->d);
  free(r->rgba);
  free(r);
}

int32_t pxl_avif_first_duration(const uint8_t *data, size_t size) {
  pxl_codec_status st;
  char message[8];
  avifDecoder *d = open_parsed(data, size, &st, message, sizeof message);
  if (d == NULL) return -1;
  int32_t duration = 0;
  avifImageTiming timing;
  if (d->imageCount > 1 && avifDecoderNthImageTiming(d, 0, &timing) == AVIF_RESULT_OK && timing.timescale != 0) {
    uint64_t t = timing.durationInTimescales, scale = timing.timescale;
    uint64_t ms = t > UINT64_MAX / 1000 ? t / scale * 1000 : (t * 1000 + scale / 2) / scale;
    duration = ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
  }
  avifDecoderDestroy(d);
  return duration;
}

pxl_codec_status pxl_avif_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  if (color == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(color, 0, sizeof *color);
  pxl_codec_status st;
  char msg[8];
  avifDecoder *d = open_parsed(data, size, &st, msg, sizeof msg);
  if (d == NULL) return st;
  const avifImage *image = d->image;
  if (pxl_codec_color_copy_icc(color, image->icc.data, image->icc.size) != PXL_CODEC_OK) {
    avifDecoderDestroy(d);
    return PXL_CODEC_NO_MEMORY;
  }
  /* The colr 'nclx' box, or, without one, the AV1 sequence header's colour description
   * (libavif reads it while parsing); 2 = unspecified. */
  color->cicp_primaries = image->colorPrimaries;
  color->cicp_transfer = image->transferCharacteristics;
  color->cicp_matrix = image->matrixCoefficients;
  color->srgb = image->colorPrimaries == AVIF_COLOR_PRIMARIES_BT709 &&
                image->transferCharacteristics == AVIF_TRANSFER_CHARACTERISTICS_SRGB;
  avifDecoderDestroy(d);
  return PXL_CODEC_OK;
}
