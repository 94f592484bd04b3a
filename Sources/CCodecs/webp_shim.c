/*
 * WebP through libwebp: WebPDemux for the container (canvas, flags, frames, loop count,
 * ICCP and EXIF chunks), WebPDecode for a still image, WebPAnimDecoder for an animation
 * (it composites each frame on the canvas: disposal and blending). libwebp reports errors
 * by return codes, so unlike jpeg_shim.c and png_shim.c nothing here needs setjmp.
 *
 * Every entry point first parses the container with WebPDemuxPartial, which refuses a
 * malformed RIFF and tells a truncated one (its state stops before WEBP_DEMUX_DONE) apart,
 * so both get a clear message before any decoder runs; then the canvas is checked against
 * max_pixels, and only then is a pixel buffer made.
 */
#include "pxl_webp.h"
#include "pxl_exif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

typedef struct webp_file {
  WebPDemuxer *demux;
  int32_t width, height, frames, loop, flags;
  int32_t animated;
} webp_file;

/* GRAY from RGB, in place: the BT.601 integer weights of pxl_codecs.h (as png_shim.c). */
static void rgb_to_gray(uint8_t *dst, const uint8_t *rgb, size_t pixels) {
  for (size_t i = 0; i < pixels; i++)
    dst[i] = (uint8_t)((19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2] + 32768u) >> 16);
}

/* RGBA (straight) into another layout, in place (every layout is at most 4 bytes). */
static void rgba_to_layout(uint8_t *p, size_t pixels, int32_t layout) {
  switch (layout) {
    case PXL_CODEC_BGRA:
      for (size_t i = 0; i < pixels; i++) {
        uint8_t r = p[4 * i];
        p[4 * i] = p[4 * i + 2];
        p[4 * i + 2] = r;
      }
      break;
    case PXL_CODEC_RGB:
      for (size_t i = 0; i < pixels; i++) {
        p[3 * i] = p[4 * i];
        p[3 * i + 1] = p[4 * i + 1];
        p[3 * i + 2] = p[4 * i + 2];
      }
      break;
    case PXL_CODEC_GRAY:
      for (size_t i = 0; i < pixels; i++)
        p[i] = (uint8_t)((19595u * p[4 * i] + 38470u * p[4 * i + 1] + 7471u * p[4 * i + 2] + 32768u) >> 16);
      break;
    default: break;
  }
}

static pxl_codec_status from_vp8(VP8StatusCode code, char *msg, size_t cap) {
  switch (code) {
    case VP8_STATUS_OK: return PXL_CODEC_OK;
    case VP8_STATUS_OUT_OF_MEMORY: pxl_set_message(msg, cap, "WebP", "out of memory"); return PXL_CODEC_NO_MEMORY;
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      pxl_set_message(msg, cap, "WebP", "unsupported feature");
      return PXL_CODEC_UNSUPPORTED;
    case VP8_STATUS_NOT_ENOUGH_DATA: pxl_set_message(msg, cap, "WebP", "truncated image data"); return PXL_CODEC_CORRUPT;
    case VP8_STATUS_INVALID_PARAM: pxl_set_message(msg, cap, "WebP", "invalid parameter"); return PXL_CODEC_CORRUPT;
    case VP8_STATUS_BITSTREAM_ERROR: pxl_set_message(msg, cap, "WebP", "bitstream error"); return PXL_CODEC_CORRUPT;
    case VP8_STATUS_SUSPENDED: /* WebPDecode's word for a partition running past the data */
      pxl_set_message(msg, cap, "WebP", "image data shorter than its headers say");
      return PXL_CODEC_CORRUPT;
    default: pxl_set_message(msg, cap, "WebP", "decode failed"); return PXL_CODEC_CORRUPT;
  }
}

/* Parses the container; on success f->demux must be deleted with WebPDemuxDelete.
 * partial: the bytes may end inside the image data (a download's header: see
 * pxl_webp_header_info), as long as the headers and the first frame's are all there. */
static pxl_codec_status webp_open_as(const uint8_t *data, size_t size, webp_file *f, int partial, char *msg,
                                     size_t cap) {
  memset(f, 0, sizeof *f);
  if (data == NULL || size < 12 || memcmp(data, "RIFF", 4) != 0 || memcmp(data + 8, "WEBP", 4) != 0) {
    pxl_set_message(msg, cap, "WebP", size < 12 && data != NULL && size > 0 ? "truncated header" : "not a WebP file");
    return PXL_CODEC_CORRUPT;
  }
  WebPData wd = {data, size};
  WebPDemuxState state = WEBP_DEMUX_PARSE_ERROR;
  WebPDemuxer *demux = WebPDemuxPartial(&wd, &state);
  if (demux == NULL || (state != WEBP_DEMUX_DONE && !(partial && state == WEBP_DEMUX_PARSED_HEADER))) {
    const char *why;
    if (state == WEBP_DEMUX_PARSE_ERROR) why = "invalid file (malformed chunks, bad bitstream header, or a frame outside the canvas)";
    else if (state == WEBP_DEMUX_PARSING_HEADER) why = "truncated header";
    else why = "truncated file (the last chunk is incomplete)";
    WebPDemuxDelete(demux);
    pxl_set_message(msg, cap, "WebP", why);
    return state == WEBP_DEMUX_DONE ? PXL_CODEC_NO_MEMORY : PXL_CODEC_CORRUPT;
  }
  f->demux = demux;
  f->width = (int32_t)WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  f->height = (int32_t)WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  f->flags = (int32_t)WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS);
  f->frames = (int32_t)WebPDemuxGetI(demux, WEBP_FF_FRAME_COUNT);
  f->loop = (int32_t)WebPDemuxGetI(demux, WEBP_FF_LOOP_COUNT);
  f->animated = (f->flags & ANIMATION_FLAG) != 0;
  if (f->width <= 0 || f->height <= 0 || f->frames < 1) {
    WebPDemuxDelete(demux);
    f->demux = NULL;
    pxl_set_message(msg, cap, "WebP", f->frames < 1 ? "no image data" : "invalid canvas size");
    return PXL_CODEC_CORRUPT;
  }
  return PXL_CODEC_OK;
}

static pxl_codec_status webp_open(const uint8_t *data, size_t size, webp_file *f, char *msg, size_t cap) {
  return webp_open_as(data, size, f, 0, msg, cap);
}

/* Whether pixels may be transparent: the alpha flag, or (an animation) a frame that does
 * not cover the canvas, which leaves the transparent background showing. */
static int32_t webp_has_alpha(const webp_file *f) {
  if (f->flags & ALPHA_FLAG) return 1;
  if (!f->animated) {
    /* A simple (non-VP8X) lossless file says so in its bitstream, not in flags. */
    WebPIterator it;
    int alpha = 0;
    if (WebPDemuxGetFrame(f->demux, 1, &it)) {
      alpha = it.has_alpha;
      WebPDemuxReleaseIterator(&it);
    }
    return alpha;
  }
  WebPIterator it;
  int32_t alpha = 0;
  if (WebPDemuxGetFrame(f->demux, 1, &it)) {
    do {
      if (it.has_alpha || it.x_offset != 0 || it.y_offset != 0 || it.width != f->width || it.height != f->height)
        alpha = 1;
    } while (!alpha && WebPDemuxNextFrame(&it));
    WebPDemuxReleaseIterator(&it);
  }
  return alpha;
}

static int32_t webp_orientation(const webp_file *f) {
  WebPChunkIterator ci;
  int32_t orientation = 1;
  if (WebPDemuxGetChunk(f->demux, "EXIF", 1, &ci)) {
    const uint8_t *p = ci.chunk.bytes;
    size_t n = ci.chunk.size;
    /* The container spec says the payload is TIFF data; some writers keep JPEG's prefix. */
    if (n >= 6 && memcmp(p, "Exif\0\0", 6) == 0) {
      p += 6;
      n -= 6;
    }
    orientation = pxl_exif_orientation(p, n);
    WebPDemuxReleaseChunkIterator(&ci);
  }
  return orientation;
}

static pxl_codec_status check_limit(const webp_file *f, uint64_t max_pixels, char *msg, size_t cap) {
  if ((uint64_t)f->width * (uint64_t)f->height <= max_pixels) return PXL_CODEC_OK;
  char text[128];
  snprintf(text, sizeof text, "%dx%d exceeds the limit of %llu pixels", f->width, f->height,
           (unsigned long long)max_pixels);
  pxl_set_message(msg, cap, "WebP", text);
  return PXL_CODEC_TOO_MANY_PIXELS;
}

/* An opened file's info, as pxl_webp_read_info gives it. */
static void info_of(const webp_file *f, pxl_codec_info *info) {
  memset(info, 0, sizeof *info);
  info->width = f->width;
  info->height = f->height;
  info->has_alpha = webp_has_alpha(f);
  info->orientation = webp_orientation(f);
  info->frame_count = f->animated ? f->frames : 1;
  info->loop_count = f->animated ? f->loop : 0;
}

static pxl_codec_status read_info_as(const uint8_t *data, size_t size, int partial, pxl_codec_info *info,
                                     char *message, size_t message_cap) {
  if (message != NULL && message_cap > 0) message[0] = '\0';
  if (info == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(info, 0, sizeof *info);
  info->orientation = 1;
  webp_file f;
  pxl_codec_status st = webp_open_as(data, size, &f, partial, message, message_cap);
  if (st != PXL_CODEC_OK) return st;
  info_of(&f, info);
  WebPDemuxDelete(f.demux);
  return PXL_CODEC_OK;
}

pxl_codec_status pxl_webp_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                    size_t message_cap) {
  return read_info_as(data, size, 0, info, message, message_cap);
}

pxl_codec_status pxl_webp_header_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                      size_t message_cap) {
  return read_info_as(data, size, 1, info, message, message_cap);
}

/* WebPDecode of the configured (maybe cropped and scaled) image straight into buf, in the
 * layout (RGBA, BGRA or RGB; GRAY comes from RGB), stride bytes a row, total bytes. */
static VP8StatusCode decode_into(WebPDecoderConfig *config, const uint8_t *data, size_t size, int32_t layout,
                                 uint8_t *buf, size_t stride, size_t total) {
  config->output.colorspace = layout == PXL_CODEC_RGBA ? MODE_RGBA : layout == PXL_CODEC_BGRA ? MODE_BGRA : MODE_RGB;
  config->output.is_external_memory = 1;
  config->output.u.RGBA.rgba = buf;
  config->output.u.RGBA.stride = (int)stride;
  config->output.u.RGBA.size = total;
  VP8StatusCode vs = WebPDecode(data, size, config);
  WebPFreeDecBuffer(&config->output); /* external memory: frees nothing of ours */
  return vs;
}

/* A still image, whole, into a new buffer in the layout (GRAY through RGB). */
static pxl_codec_status decode_still(const uint8_t *data, size_t size, const webp_file *f, int32_t layout,
                                     uint8_t **pixels, char *msg, size_t cap) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return from_vp8(VP8_STATUS_INVALID_PARAM, msg, cap);
  /* The frame's own bitstream features must match the canvas (demux checked VP8X vs frame). */
  VP8StatusCode vs = WebPGetFeatures(data, size, &config.input);
  if (vs != VP8_STATUS_OK) return from_vp8(vs, msg, cap);
  if (config.input.width != f->width || config.input.height != f->height) {
    pxl_set_message(msg, cap, "WebP", "image size differs from the canvas");
    return PXL_CODEC_CORRUPT;
  }
  int32_t channels = layout == PXL_CODEC_GRAY ? 3 : pxl_layout_channels(layout);
  size_t stride = (size_t)f->width * (size_t)channels, total = stride * (size_t)f->height;
  uint8_t *buf = malloc(total);
  if (buf == NULL) {
    pxl_set_message(msg, cap, "WebP", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  vs = decode_into(&config, data, size, layout, buf, stride, total);
  if (vs != VP8_STATUS_OK) {
    free(buf);
    return from_vp8(vs, msg, cap);
  }
  if (layout == PXL_CODEC_GRAY) {
    size_t n = (size_t)f->width * (size_t)f->height;
    rgb_to_gray(buf, buf, n);
    uint8_t *shrunk = realloc(buf, n);
    if (shrunk != NULL) buf = shrunk;
  }
  *pixels = buf;
  return PXL_CODEC_OK;
}

static WebPAnimDecoder *anim_open(const uint8_t *data, size_t size, char *msg, size_t cap) {
  WebPAnimDecoderOptions opts;
  if (!WebPAnimDecoderOptionsInit(&opts)) return NULL;
  opts.color_mode = MODE_RGBA;
  opts.use_threads = 0;
  WebPData wd = {data, size};
  WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &opts);
  if (dec == NULL) pxl_set_message(msg, cap, "WebP", "cannot set up the animation decoder (invalid or out of memory)");
  return dec;
}

/* The first frame of an animation, composited, into a new buffer in the layout. */
static pxl_codec_status decode_first_frame(const uint8_t *data, size_t size, const webp_file *f, int32_t layout,
                                           uint8_t **pixels, char *msg, size_t cap) {
  size_t n = (size_t)f->width * (size_t)f->height;
  uint8_t *buf = malloc(n * 4);
  if (buf == NULL) {
    pxl_set_message(msg, cap, "WebP", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  WebPAnimDecoder *dec = anim_open(data, size, msg, cap);
  if (dec == NULL) {
    free(buf);
    return PXL_CODEC_CORRUPT;
  }
  uint8_t *canvas = NULL;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(dec, &canvas, &timestamp) || canvas == NULL) {
    WebPAnimDecoderDelete(dec);
    free(buf);
    pxl_set_message(msg, cap, "WebP", "the first frame cannot be decoded (corrupt or truncated bitstream)");
    return PXL_CODEC_CORRUPT;
  }
  memcpy(buf, canvas, n * 4);
  WebPAnimDecoderDelete(dec);
  rgba_to_layout(buf, n, layout);
  if (pxl_layout_channels(layout) < 4) {
    uint8_t *shrunk = realloc(buf, n * (size_t)pxl_layout_channels(layout));
    if (shrunk != NULL) buf = shrunk;
  }
  *pixels = buf;
  return PXL_CODEC_OK;
}

static void set_output(pxl_codec_output *out, const webp_file *f, int32_t channels, int32_t has_alpha) {
  out->width = f->width;
  out->height = f->height;
  out->channels = channels;
  out->stride = f->width * channels;
  out->has_alpha = channels == 4 ? has_alpha : 0;
}

static pxl_codec_status decode_any(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                   pxl_codec_output *out, uint8_t **pixels) {
  webp_file f;
  pxl_codec_status st = webp_open(data, size, &f, out->message, sizeof out->message);
  if (st != PXL_CODEC_OK) return st;
  st = check_limit(&f, max_pixels, out->message, sizeof out->message);
  if (st == PXL_CODEC_OK) {
    st = f.animated ? decode_first_frame(data, size, &f, layout, pixels, out->message, sizeof out->message)
                    : decode_still(data, size, &f, layout, pixels, out->message, sizeof out->message);
  }
  if (st == PXL_CODEC_OK) {
    set_output(out, &f, pxl_layout_channels(layout), webp_has_alpha(&f));
    out->message[0] = '\0';
  }
  WebPDemuxDelete(f.demux);
  return st;
}

static int start_output(pxl_codec_output *out, int32_t layout) {
  if (out == NULL) return 0;
  memset(out, 0, sizeof *out);
  if (pxl_layout_channels(layout) == 0) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "invalid layout");
    return 0;
  }
  return 1;
}

pxl_codec_status pxl_webp_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                 pxl_codec_output *out) {
  if (!start_output(out, layout)) return PXL_CODEC_UNSUPPORTED;
  uint8_t *pixels = NULL;
  pxl_codec_status st = decode_any(data, size, layout, max_pixels, out, &pixels);
  if (st == PXL_CODEC_OK) out->pixels = pixels;
  else out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
  return st;
}

/* libwebp has no row callback: the image is decoded whole, then handed over row by row,
 * so a thumbnail holds the full-size bitmap for a moment (libwebp's own scaler would not,
 * but it gives worse thumbnails: see pxl_webp_decode_scaled in pxl_webp.h). */
pxl_codec_status pxl_webp_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                      pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (!start_output(out, layout)) return PXL_CODEC_UNSUPPORTED;
  if (row_fn == NULL) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "no row function");
    return PXL_CODEC_UNSUPPORTED;
  }
  uint8_t *pixels = NULL;
  pxl_codec_status st = decode_any(data, size, layout, max_pixels, out, &pixels);
  if (st == PXL_CODEC_OK) {
    for (int32_t y = 0; y < out->height; y++) {
      if (row_fn(user, y, pixels + (size_t)y * (size_t)out->stride) != 0) {
        pxl_set_message(out->message, sizeof out->message, "WebP", "stopped by the caller");
        st = PXL_CODEC_CORRUPT;
        break;
      }
    }
    free(pixels);
  }
  if (st != PXL_CODEC_OK) out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
  return st;
}

pxl_codec_status pxl_webp_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                        pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out) {
  if (!start_output(out, PXL_CODEC_RGBA)) return PXL_CODEC_UNSUPPORTED;
  if (frame_fn == NULL) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "no frame function");
    return PXL_CODEC_UNSUPPORTED;
  }
  webp_file f;
  pxl_codec_status st = webp_open(data, size, &f, out->message, sizeof out->message);
  if (st != PXL_CODEC_OK) return st;
  st = check_limit(&f, max_pixels, out->message, sizeof out->message);
  if (st == PXL_CODEC_OK && !f.animated) {
    uint8_t *pixels = NULL;
    st = decode_still(data, size, &f, PXL_CODEC_RGBA, &pixels, out->message, sizeof out->message);
    if (st == PXL_CODEC_OK) {
      (void)frame_fn(user, 0, pixels, f.width * 4, 0); /* the only frame: stopping changes nothing */
      free(pixels);
    }
  } else if (st == PXL_CODEC_OK) {
    WebPAnimDecoder *dec = anim_open(data, size, out->message, sizeof out->message);
    WebPIterator it;
    int have_it = dec != NULL && WebPDemuxGetFrame(f.demux, 1, &it);
    if (dec == NULL) {
      st = PXL_CODEC_CORRUPT;
    } else if (!have_it) {
      st = PXL_CODEC_CORRUPT;
      pxl_set_message(out->message, sizeof out->message, "WebP", "no frame");
    } else {
      for (int32_t index = 0; WebPAnimDecoderHasMoreFrames(dec); index++) {
        uint8_t *canvas = NULL;
        int timestamp = 0;
        if (!WebPAnimDecoderGetNext(dec, &canvas, &timestamp) || canvas == NULL) {
          char text[96];
          snprintf(text, sizeof text, "frame %d cannot be decoded (corrupt or truncated bitstream)", index + 1);
          pxl_set_message(out->message, sizeof out->message, "WebP", text);
          st = PXL_CODEC_CORRUPT;
          break;
        }
        /* The demuxer's iterator walks the same frames in the same order: its duration is
         * the file's, where the decoder's timestamps are running sums. */
        int32_t duration = it.duration;
        if (frame_fn(user, index, canvas, f.width * 4, duration) != 0) break;
        if (!WebPDemuxNextFrame(&it)) break;
      }
      WebPDemuxReleaseIterator(&it);
    }
    WebPAnimDecoderDelete(dec);
  }
  if (st == PXL_CODEC_OK) {
    set_output(out, &f, 4, webp_has_alpha(&f));
    out->message[0] = '\0';
  }
  WebPDemuxDelete(f.demux);
  return st;
}

/* The pull-style reader (pxl_codecs.h, "Frame readers"): decode_frames' calls, one frame
 * per call. A still image is its one frame. */
struct pxl_webp_frames {
  webp_file f;
  WebPAnimDecoder *dec;
  WebPIterator it;
  int32_t have_it, index, done;
  uint8_t *still;
};

pxl_webp_frames *pxl_webp_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                      pxl_codec_status *status, char *message, size_t message_cap) {
  char text[256] = "";
  pxl_webp_frames *r = calloc(1, sizeof *r);
  pxl_codec_status st = PXL_CODEC_NO_MEMORY;
  if (r == NULL) {
    pxl_set_message(text, sizeof text, "WebP", "out of memory");
  } else {
    st = webp_open(data, size, &r->f, text, sizeof text);
    if (st == PXL_CODEC_OK) st = check_limit(&r->f, max_pixels, text, sizeof text);
    if (st == PXL_CODEC_OK && !r->f.animated) {
      st = decode_still(data, size, &r->f, PXL_CODEC_RGBA, &r->still, text, sizeof text);
    } else if (st == PXL_CODEC_OK) {
      r->dec = anim_open(data, size, text, sizeof text);
      r->have_it = r->dec != NULL && WebPDemuxGetFrame(r->f.demux, 1, &r->it);
      if (r->dec == NULL) {
        st = PXL_CODEC_CORRUPT;
      } else if (!r->have_it) {
        st = PXL_CODEC_CORRUPT;
        pxl_set_message(text, sizeof text, "WebP", "no frame");
      }
    }
  }
  if (message && message_cap) snprintf(message, message_cap, "%s", st == PXL_CODEC_OK ? "" : text);
  if (status) *status = st;
  if (st != PXL_CODEC_OK) {
    pxl_webp_frames_close(r);
    return NULL;
  }
  return r;
}

pxl_codec_status pxl_webp_frames_next(pxl_webp_frames *r, pxl_codec_frame *frame) {
  memset(frame, 0, sizeof *frame);
  if (r->done) return PXL_CODEC_OK;
  frame->stride = r->f.width * 4;
  frame->index = r->index;
  if (r->still) {
    r->done = 1;
    frame->rgba = r->still;
    return PXL_CODEC_OK;
  }
  if (r->index > 0 && !WebPDemuxNextFrame(&r->it)) r->done = 1;
  if (r->done || !WebPAnimDecoderHasMoreFrames(r->dec)) {
    r->done = 1;
    return PXL_CODEC_OK;
  }
  uint8_t *canvas = NULL;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(r->dec, &canvas, &timestamp) || canvas == NULL) {
    char text[96];
    snprintf(text, sizeof text, "frame %d cannot be decoded (corrupt or truncated bitstream)", r->index + 1);
    pxl_set_message(frame->message, sizeof frame->message, "WebP", text);
    r->done = 1;
    return PXL_CODEC_CORRUPT;
  }
  frame->rgba = canvas;
  frame->duration_ms = r->it.duration;
  r->index++;
  return PXL_CODEC_OK;
}

int32_t pxl_webp_first_duration(const uint8_t *data, size_t size) {
  webp_file f;
  char message[8];
  if (webp_open(data, size, &f, message, sizeof message) != PXL_CODEC_OK) return -1;
  int32_t duration = 0;
  WebPIterator it;
  if (f.animated && WebPDemuxGetFrame(f.demux, 1, &it)) {
    duration = it.duration;
    WebPDemuxReleaseIterator(&it);
  }
  WebPDemuxDelete(f.demux);
  return duration;
}

void pxl_webp_frames_close(pxl_webp_frames *r) {
  if (r == NULL) return;
  if (r->have_it) WebPDemuxReleaseIterator(&r->it);
  WebPAnimDecoderDelete(r->dec);
  WebPDemuxDelete(r->f.demux);
  free(r->still);
  free(r);
}

/* An opened file's colour (its ICC profile), as pxl_webp_color gives it. */
static pxl_codec_status color_of(const webp_file *f, pxl_codec_color *color) {
  memset(color, 0, sizeof *color);
  pxl_codec_status st = PXL_CODEC_OK;
  WebPChunkIterator ci;
  if (WebPDemuxGetChunk(f->demux, "ICCP", 1, &ci)) {
    st = pxl_codec_color_copy_icc(color, ci.chunk.bytes, ci.chunk.size);
    WebPDemuxReleaseChunkIterator(&ci);
  }
  return st;
}

static pxl_codec_status color_as(const uint8_t *data, size_t size, int partial, pxl_codec_color *color) {
  if (color == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(color, 0, sizeof *color);
  webp_file f;
  char msg[8];
  pxl_codec_status st = webp_open_as(data, size, &f, partial, msg, sizeof msg);
  if (st != PXL_CODEC_OK) return st;
  st = color_of(&f, color);
  WebPDemuxDelete(f.demux);
  return st;
}

pxl_codec_status pxl_webp_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  return color_as(data, size, 0, color);
}

pxl_codec_status pxl_webp_header_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  return color_as(data, size, 1, color);
}

pxl_codec_status pxl_webp_decode_scaled(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                        int32_t crop_x, int32_t crop_y, int32_t crop_width, int32_t crop_height,
                                        int32_t out_width, int32_t out_height, pxl_codec_output *out) {
  if (!start_output(out, layout)) return PXL_CODEC_UNSUPPORTED;
  webp_file f;
  pxl_codec_status st = webp_open(data, size, &f, out->message, sizeof out->message);
  if (st != PXL_CODEC_OK) return st;
  st = check_limit(&f, max_pixels, out->message, sizeof out->message);
  int cropping = crop_width > 0 && crop_height > 0;
  if (st == PXL_CODEC_OK && f.animated) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "scaled decode of an animation");
    st = PXL_CODEC_UNSUPPORTED;
  } else if (st == PXL_CODEC_OK && out_width > 0 && out_height > 0 &&
             (uint64_t)out_width * (uint64_t)out_height > max_pixels) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "output size exceeds the pixel limit");
    st = PXL_CODEC_TOO_MANY_PIXELS;
  } else if (st == PXL_CODEC_OK &&
             (out_width <= 0 || out_height <= 0 || out_width > (1 << 24) || out_height > (1 << 24) ||
              (cropping && (crop_x < 0 || crop_y < 0 || crop_width > f.width - crop_x || crop_height > f.height - crop_y)))) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "invalid crop or output size");
    st = PXL_CODEC_UNSUPPORTED;
  }
  uint8_t *buf = NULL;
  if (st == PXL_CODEC_OK) {
    WebPDecoderConfig config;
    VP8StatusCode vs = WebPInitDecoderConfig(&config) ? WebPGetFeatures(data, size, &config.input)
                                                     : VP8_STATUS_INVALID_PARAM;
    int32_t channels = layout == PXL_CODEC_GRAY ? 3 : pxl_layout_channels(layout);
    size_t stride = (size_t)out_width * (size_t)channels, total = stride * (size_t)out_height;
    if (vs == VP8_STATUS_OK && (config.input.width != f.width || config.input.height != f.height)) {
      pxl_set_message(out->message, sizeof out->message, "WebP", "image size differs from the canvas");
      st = PXL_CODEC_CORRUPT;
    } else if (vs != VP8_STATUS_OK) {
      st = from_vp8(vs, out->message, sizeof out->message);
    } else if ((buf = malloc(total)) == NULL) {
      pxl_set_message(out->message, sizeof out->message, "WebP", "out of memory");
      st = PXL_CODEC_NO_MEMORY;
    } else {
      config.options.use_cropping = cropping;
      config.options.crop_left = crop_x;
      config.options.crop_top = crop_y;
      config.options.crop_width = crop_width;
      config.options.crop_height = crop_height;
      config.options.use_scaling = 1;
      config.options.scaled_width = out_width;
      config.options.scaled_height = out_height;
      vs = decode_into(&config, data, size, layout, buf, stride, total);
      st = from_vp8(vs, out->message, sizeof out->message);
    }
  }
  if (st == PXL_CODEC_OK) {
    size_t n = (size_t)out_width * (size_t)out_height;
    if (layout == PXL_CODEC_GRAY) {
      rgb_to_gray(buf, buf, n);
      uint8_t *shrunk = realloc(buf, n);
      if (shrunk != NULL) buf = shrunk;
    }
    int32_t channels = pxl_layout_channels(layout);
    out->pixels = buf;
    out->width = out_width;
    out->height = out_height;
    out->channels = channels;
    out->stride = out_width * channels;
    out->has_alpha = channels == 4 ? webp_has_alpha(&f) : 0;
    out->message[0] = '\0';
  } else {
    free(buf);
  }
  if (f.demux != NULL) WebPDemuxDelete(f.demux);
  return st;
}

/* ---- decoding while the bytes arrive ------------------------------------------------ */

/* A still WebP decoded as its bytes arrive, by libwebp's incremental decoder (WebPIDecode,
 * fed with WebPIUpdate over the stream's own copy of the bytes, which it needs whole at
 * the end anyway): the same configuration as decode_still (libwebp's defaults: fancy
 * upsampling, no scaling or cropping) into the same full-size buffer, so the same pixels;
 * the rows libwebp has finished (WebPIDecGetRGB's last_y) reach row_fn as they come. The
 * whole decode's result only for a file that decodes cleanly and whose container, info
 * and colour, read from all its bytes, are those its header promised (what the caller
 * planned from): anything else is declined (pxl_codecs.h). */
struct pxl_webp_stream {
  int32_t layout;
  uint64_t max_pixels;
  size_t planned; /* the header bytes the caller planned from (pxl_webp_header_end) */
  pxl_codec_info planned_info;   /* what those bytes say (pxl_webp_header_info), */
  pxl_codec_color planned_color; /* and their ICC profile (pxl_webp_header_color) */
  pxl_codec_row_fn row_fn;
  void *user;
  const int32_t *cancel;
  uint8_t *data; /* every byte so far */
  size_t size, cap;
  WebPDecoderConfig config; /* outlives idec, which points into it */
  WebPIDecoder *idec;
  uint8_t *pixels; /* width x height in the layout (RGB for GRAY) */
  uint8_t *gray_row;
  size_t stride;
  int32_t width, height, rows_given, complete, over;
};

static int64_t webp_streams_live;

int64_t pxl_webp_streams_live(void) { return __atomic_load_n(&webp_streams_live, __ATOMIC_RELAXED); }

pxl_webp_stream *pxl_webp_stream_new(int32_t layout, uint64_t max_pixels, size_t planned_size,
                                     pxl_codec_row_fn row_fn, void *user, const int32_t *cancel) {
  if (pxl_layout_channels(layout) == 0) return NULL;
  pxl_webp_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  if (!WebPInitDecoderConfig(&s->config)) {
    free(s);
    return NULL;
  }
  s->layout = layout;
  s->max_pixels = max_pixels;
  s->planned = planned_size;
  s->row_fn = row_fn;
  s->user = user;
  s->cancel = cancel;
  __atomic_add_fetch(&webp_streams_live, 1, __ATOMIC_RELAXED);
  return s;
}

static int webp_stream_append(pxl_webp_stream *s, const uint8_t *data, size_t size) {
  if (size == 0) return 1;
  if (size > s->cap - s->size) {
    size_t cap = s->cap ? s->cap : 65536;
    while (cap - s->size < size) {
      if (cap > SIZE_MAX / 2) return 0;
      cap *= 2;
    }
    uint8_t *grown = realloc(s->data, cap);
    if (grown == NULL) return 0;
    s->data = grown;
    s->cap = cap;
  }
  memcpy(s->data + s->size, data, size);
  s->size += size;
  return 1;
}

/* The bitstream's header is in: the buffer (the limit checked first) and the decoder.
 * 0: declined (an animation, too many pixels, no memory: the whole decode says so). */
static int webp_stream_start(pxl_webp_stream *s) {
  WebPBitstreamFeatures *in = &s->config.input;
  if (in->has_animation || in->width <= 0 || in->height <= 0 ||
      (uint64_t)in->width * (uint64_t)in->height > s->max_pixels)
    return 0;
  /* The rows must be those the caller planned for: the canvas its header gave (a
   * bitstream of another size fails the whole decode, which says so). */
  char text[8];
  if (s->planned > s->size ||
      pxl_webp_header_info(s->data, s->planned, &s->planned_info, text, sizeof text) != PXL_CODEC_OK ||
      s->planned_info.width != in->width || s->planned_info.height != in->height ||
      pxl_webp_header_color(s->data, s->planned, &s->planned_color) != PXL_CODEC_OK)
    return 0;
  s->width = in->width;
  s->height = in->height;
  int32_t channels = s->layout == PXL_CODEC_GRAY ? 3 : pxl_layout_channels(s->layout);
  s->stride = (size_t)s->width * (size_t)channels;
  size_t total = s->stride * (size_t)s->height;
  s->pixels = malloc(total);
  if (s->pixels == NULL) return 0;
  if (s->row_fn != NULL && s->layout == PXL_CODEC_GRAY && (s->gray_row = malloc((size_t)s->width)) == NULL) return 0;
  WebPDecBuffer *o = &s->config.output;
  o->colorspace = s->layout == PXL_CODEC_RGBA ? MODE_RGBA : s->layout == PXL_CODEC_BGRA ? MODE_BGRA : MODE_RGB;
  o->is_external_memory = 1;
  o->u.RGBA.rgba = s->pixels;
  o->u.RGBA.stride = (int)s->stride;
  o->u.RGBA.size = total;
  s->idec = WebPIDecode(NULL, 0, &s->config);
  return s->idec != NULL;
}

/* Rows libwebp has finished since the last call, to row_fn; 0 when row_fn stopped. */
static int webp_stream_rows(pxl_webp_stream *s) {
  int last_y = 0, w = 0, h = 0, stride = 0;
  if (s->row_fn == NULL || WebPIDecGetRGB(s->idec, &last_y, &w, &h, &stride) == NULL) return 1;
  for (; s->rows_given < last_y && s->rows_given < s->height; s->rows_given++) {
    const uint8_t *row = s->pixels + (size_t)s->rows_given * s->stride;
    if (s->gray_row != NULL) {
      rgb_to_gray(s->gray_row, row, (size_t)s->width);
      row = s->gray_row;
    }
    if (s->row_fn(s->user, s->rows_given, row) != 0) return 0;
  }
  return 1;
}

/* All the bytes are in and the image decoded: whether the whole decode of these bytes
 * would have given this image from this plan (its container check, the info and colour
 * from all the bytes equal to those from the planned header, kept since the start, the
 * bitstream's size). */
static int webp_stream_agrees(pxl_webp_stream *s, webp_file *f, char *msg, size_t cap) {
  if (webp_open(s->data, s->size, f, msg, cap) != PXL_CODEC_OK) return 0;
  int same = !f->animated && check_limit(f, s->max_pixels, msg, cap) == PXL_CODEC_OK && f->width == s->width &&
             f->height == s->height;
  WebPBitstreamFeatures features;
  same = same && WebPGetFeatures(s->data, s->size, &features) == VP8_STATUS_OK && features.width == s->width &&
         features.height == s->height;
  pxl_codec_info whole;
  info_of(f, &whole);
  same = same && memcmp(&whole, &s->planned_info, sizeof whole) == 0;
  if (same) {
    pxl_codec_color a;
    const pxl_codec_color *b = &s->planned_color;
    same = color_of(f, &a) == PXL_CODEC_OK && a.icc_size == b->icc_size &&
           (a.icc_size == 0 || memcmp(a.icc, b->icc, a.icc_size) == 0);
    pxl_codec_color_free(&a);
  }
  if (!same) {
    WebPDemuxDelete(f->demux);
    f->demux = NULL;
  }
  return same;
}

pxl_codec_status pxl_webp_stream_feed(pxl_webp_stream *s, const uint8_t *data, size_t size, int at_end, int *state,
                                      pxl_codec_output *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (s == NULL || state == NULL || out == NULL || (data == NULL && size > 0)) return PXL_CODEC_UNSUPPORTED;
  *state = PXL_STREAM_MORE;
  if (s->over) {
    pxl_set_message(out->message, sizeof out->message, "WebP", "the stream is over");
    return PXL_CODEC_UNSUPPORTED;
  }
  const char *why = NULL;
  if (s->cancel != NULL && __atomic_load_n(s->cancel, __ATOMIC_RELAXED) != 0) {
    s->over = 1;
    pxl_set_message(out->message, sizeof out->message, "WebP", "cancelled");
    return PXL_CODEC_CORRUPT;
  }
  if (!webp_stream_append(s, data, size)) {
    why = "out of memory";
  } else if (s->idec == NULL) {
    if (s->size < s->planned && !at_end) return PXL_CODEC_OK; /* the header the caller planned from first */
    VP8StatusCode vs = WebPGetFeatures(s->data, s->size, &s->config.input);
    if (vs == VP8_STATUS_NOT_ENOUGH_DATA && !at_end) return PXL_CODEC_OK;
    if (vs != VP8_STATUS_OK || !webp_stream_start(s)) why = "not a still image it can stream";
  }
  if (why == NULL && !s->complete) {
    VP8StatusCode vs = WebPIUpdate(s->idec, s->data, s->size);
    if (vs == VP8_STATUS_OK) s->complete = 1;
    else if (vs != VP8_STATUS_SUSPENDED) why = "the incremental decoder failed";
    if (why == NULL && !webp_stream_rows(s)) {
      s->over = 1;
      pxl_set_message(out->message, sizeof out->message, "WebP", "stopped by the caller");
      return PXL_CODEC_CORRUPT;
    }
    if (s->cancel != NULL && __atomic_load_n(s->cancel, __ATOMIC_RELAXED) != 0) {
      s->over = 1;
      pxl_set_message(out->message, sizeof out->message, "WebP", "cancelled");
      return PXL_CODEC_CORRUPT;
    }
  }
  if (why == NULL && !at_end) return PXL_CODEC_OK;
  webp_file f = {0};
  if (why == NULL && !s->complete) why = "the data ended before the image";
  if (why == NULL && !webp_stream_agrees(s, &f, out->message, sizeof out->message))
    why = "the file is not what its header said";
  s->over = 1;
  if (why != NULL) {
    pxl_set_message(out->message, sizeof out->message, "WebP", why);
    *state = PXL_STREAM_DECLINED;
    return PXL_CODEC_OK;
  }
  *state = PXL_STREAM_DONE;
  int32_t channels = pxl_layout_channels(s->layout);
  set_output(out, &f, channels, webp_has_alpha(&f));
  WebPDemuxDelete(f.demux);
  if (s->row_fn == NULL) {
    if (s->layout == PXL_CODEC_GRAY) {
      size_t n = (size_t)s->width * (size_t)s->height;
      rgb_to_gray(s->pixels, s->pixels, n);
      uint8_t *shrunk = realloc(s->pixels, n);
      if (shrunk != NULL) s->pixels = shrunk;
    }
    out->pixels = s->pixels;
    s->pixels = NULL;
  }
  return PXL_CODEC_OK;
}

void pxl_webp_stream_free(pxl_webp_stream *s) {
  if (s == NULL) return;
  __atomic_sub_fetch(&webp_streams_live, 1, __ATOMIC_RELAXED);
  WebPIDelete(s->idec);
  WebPFreeDecBuffer(&s->config.output); /* external memory: frees nothing of ours */
  free(s->pixels);
  free(s->gray_row);
  free(s->data);
  pxl_codec_color_free(&s->planned_color);
  free(s);
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int64_t pxl_webp_header_end(const uint8_t *data, size_t size) {
  if (data == NULL || size < 12) return 0;
  if (memcmp(data, "RIFF", 4) != 0 || memcmp(data + 8, "WEBP", 4) != 0) return -1;
  size_t pos = 12;
  while (size - pos >= 8) {
    const uint8_t *c = data + pos;
    uint32_t len = le32(c + 4);
    if (memcmp(c, "VP8 ", 4) == 0 || memcmp(c, "VP8L", 4) == 0) {
      /* Enough of the bitstream for its own header (VP8: 10 bytes, VP8L: 5). */
      uint64_t end = (uint64_t)pos + 8 + (len < 30 ? len : 30);
      if (end > size) return 0;
      webp_file f;
      char msg[8];
      if (webp_open_as(data, (size_t)end, &f, 1, msg, sizeof msg) != PXL_CODEC_OK) return -1;
      int still = !f.animated;
      WebPDemuxDelete(f.demux);
      return still ? (int64_t)end : -1;
    }
    if (memcmp(c, "ANIM", 4) == 0 || memcmp(c, "ANMF", 4) == 0) return -1;
    if (memcmp(c, "VP8X", 4) == 0 && len >= 1 && size - pos >= 9 && (c[8] & ANIMATION_FLAG)) return -1;
    if ((uint64_t)len + 8 + (len & 1) > size - pos) return 0;
    pos += 8 + (size_t)len + (len & 1);
  }
  return 0;
}
