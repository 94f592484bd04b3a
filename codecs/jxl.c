/*
 * libpixload-jxl: JPEG XL through libjxl 0.7, as a pixload codec module.
 *
 * - Sniffed by the codestream signature (FF 0A) or the container's signature box.
 * - Pixels as stored (JxlDecoderSetKeepOrientation): the header reports the codestream's
 *   orientation and the library applies it (or not, for PXL_FLAG_IGNORE_ORIENTATION).
 * - RGBA8, straight alpha (libjxl unpremultiplies a premultiplied image); the colour
 *   profile of the pixel data (JXL_COLOR_PROFILE_TARGET_DATA) goes to the library's
 *   colour stage as ICC.
 * - Animation: every displayed frame, coalesced on the canvas, its duration from the
 *   ticks per second; loop count from the animation header. One frame at a time
 *   (open_frames, next_frame, close_frames): one libjxl decoder fed the whole file once,
 *   each JXL_DEC_FULL_IMAGE written straight into the canvas the library gives, so a
 *   player holds the decoder's state (its reference frames) and that canvas, never the
 *   animation's frames. decode_frames is the same loop calling frame_done after each.
 * - Progressive: a prefix of a file still arriving (PXL_CODEC_PARTIAL) is flushed with
 *   JxlDecoderFlushImage once libjxl has a pass to show (PXL_E_NOT_FOUND before that).
 */
#include <stdlib.h>

#include <jxl/decode.h>
#include <jxl/version.h>

#include "common.h"

static int32_t jxl_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  JxlSignature signature = JxlSignatureCheck(data, size);
  return signature == JXL_SIG_CODESTREAM || signature == JXL_SIG_CONTAINER;
}

/* What one pass over the file wants. */
struct jxl_job {
  pxl_codec_header *header;   /* fill the header (and count frames) */
  uint8_t *icc;               /* copy the ICC profile here */
  size_t icc_size;
  pxl_codec_target *target;   /* draw the first frame */
};

static const JxlPixelFormat rgba8 = {4, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};

/* Hands target's buffer to libjxl: RGBA8 rows of target->stride bytes (a stride wider than
 * the row is libjxl's scanline alignment: its rows then start stride bytes apart). */
static JxlDecoderStatus jxl_out_buffer(JxlDecoder *dec, const pxl_codec_target *target) {
  JxlPixelFormat format = rgba8;
  if (target->stride != (size_t)target->width * 4) format.align = target->stride;
  return JxlDecoderSetImageOutBuffer(dec, &format, target->pixels, target->stride * (size_t)target->height);
}

/* A frame's duration in ms from its ticks and the animation's ticks per second. */
static int32_t jxl_duration_ms(const JxlBasicInfo *info, uint32_t ticks) {
  uint64_t ms = info->animation.tps_numerator
                    ? (uint64_t)ticks * 1000 * info->animation.tps_denominator / info->animation.tps_numerator
                    : 0;
  return (int32_t)(ms > 0x7fffffff ? 0x7fffffff : ms);
}

static pxl_status jxl_run(const uint8_t *data, size_t size, struct jxl_job *job, char *message, size_t cap) {
  JxlDecoder *dec = JxlDecoderCreate(NULL);
  if (!dec) return PXL_E_NO_MEMORY;
  int events = JXL_DEC_BASIC_INFO;
  if (job->header || job->icc) events |= JXL_DEC_COLOR_ENCODING;
  if (job->header) events |= JXL_DEC_FRAME;
  if (job->target) events |= JXL_DEC_FULL_IMAGE;
  int partial = job->target && (job->target->flags & PXL_CODEC_PARTIAL);
  pxl_status status = PXL_OK;
  if (JxlDecoderSubscribeEvents(dec, events) != JXL_DEC_SUCCESS || JxlDecoderSetKeepOrientation(dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetUnpremultiplyAlpha(dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetInput(dec, data, size) != JXL_DEC_SUCCESS) {
    JxlDecoderDestroy(dec);
    return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "cannot set up the decoder");
  }
  if (!partial) JxlDecoderCloseInput(dec);
  JxlBasicInfo info;
  memset(&info, 0, sizeof info);
  int frames = 0, drawn = 0;
  for (;;) {
    JxlDecoderStatus s = JxlDecoderProcessInput(dec);
    if (s == JXL_DEC_ERROR) { status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: decoding failed"); break; }
    if (s == JXL_DEC_NEED_MORE_INPUT) {
      if (partial && drawn == 0 && JxlDecoderFlushImage(dec) == JXL_DEC_SUCCESS) { drawn = 1; break; }
      if (partial) { status = PXL_E_NOT_FOUND; break; }
      /* Counting frames only: a file cut after its first frame still says it. */
      if (job->header && !job->target && frames > 0) break;
      status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: truncated file");
      break;
    }
    if (s == JXL_DEC_SUCCESS) break;
    if (s == JXL_DEC_BASIC_INFO) {
      if (JxlDecoderGetBasicInfo(dec, &info) != JXL_DEC_SUCCESS) { status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: no basic info"); break; }
      if (job->header) {
        job->header->width = (int32_t)info.xsize;
        job->header->height = (int32_t)info.ysize;
        job->header->orientation = (int32_t)info.orientation;
        job->header->has_alpha = info.alpha_bits != 0;
        job->header->loop_count = info.have_animation ? (int32_t)info.animation.num_loops : 0;
        if (info.xsize > 0x7fffffff || info.ysize > 0x7fffffff) { status = PXL_E_TOO_MANY_PIXELS; break; }
      }
      if (job->target && ((uint32_t)job->target->width != info.xsize || (uint32_t)job->target->height != info.ysize)) {
        status = pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "asked for another size");
        break;
      }
    } else if (s == JXL_DEC_COLOR_ENCODING) {
      size_t icc_size = 0;
      if (JxlDecoderGetICCProfileSize(dec, &rgba8, JXL_COLOR_PROFILE_TARGET_DATA, &icc_size) == JXL_DEC_SUCCESS) {
        if (job->header) job->header->icc_size = icc_size;
        if (job->icc) {
          if (icc_size != job->icc_size ||
              JxlDecoderGetColorAsICCProfile(dec, &rgba8, JXL_COLOR_PROFILE_TARGET_DATA, job->icc, icc_size) != JXL_DEC_SUCCESS)
            status = PXL_E_CORRUPT_IMAGE;
          break;
        }
      }
    } else if (s == JXL_DEC_FRAME) {
      JxlFrameHeader frame;
      memset(&frame, 0, sizeof frame);
      JxlDecoderGetFrameHeader(dec, &frame);
      frames++;
      if (job->header && !job->target) {
        job->header->frame_count = frames;
        if (!info.have_animation || frame.is_last) break;
        continue;
      }
    } else if (s == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
      if (__atomic_load_n(job->target->cancel, __ATOMIC_ACQUIRE)) { status = PXL_E_CANCELLED; break; }
      if (jxl_out_buffer(dec, job->target) != JXL_DEC_SUCCESS) {
        status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: refused the buffer");
        break;
      }
    } else if (s == JXL_DEC_FULL_IMAGE) {
      drawn++;
      break;
    }
  }
  JxlDecoderDestroy(dec);
  if (status == PXL_OK && job->target && drawn == 0)
    status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: no frame");
  return status;
}

static pxl_status jxl_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message, size_t cap,
                             void *user_data) {
  (void)user_data;
  struct jxl_job job = {.header = header};
  return jxl_run(data, size, &job, message, cap);
}

static pxl_status jxl_icc(const uint8_t *data, size_t size, uint8_t *icc, size_t icc_size, void *user_data) {
  (void)user_data;
  char message[64];
  struct jxl_job job = {.icc = icc, .icc_size = icc_size};
  return jxl_run(data, size, &job, message, sizeof message);
}

static pxl_status jxl_decode(const uint8_t *data, size_t size, pxl_codec_target *target, char *message, size_t cap,
                             void *user_data) {
  (void)user_data;
  struct jxl_job job = {.target = target};
  return jxl_run(data, size, &job, message, cap);
}

/* An animation read one frame at a time: one decoder over the whole file (pxl_codec's
 * open_frames: data stays valid until close_frames). */
struct jxl_reader {
  JxlDecoder *dec;
  JxlBasicInfo info;
  uint32_t ticks; /* the frame header's duration of the frame being decoded */
  int drawn;      /* frames handed over */
  int ended;      /* JXL_DEC_SUCCESS seen: every frame handed over */
};

static void jxl_close_frames(void *state, void *user_data) {
  (void)user_data;
  struct jxl_reader *f = state;
  if (!f) return;
  JxlDecoderDestroy(f->dec);
  free(f);
}

/* The decoder over data, run up to its basic info (cheap: the header only; nothing the
 * size of a frame is allocated before next_frame, whose canvas the library sized from
 * read_header within max_pixels). */
static pxl_status jxl_open_frames(const uint8_t *data, size_t size, void **state, char *message, size_t cap,
                                  void *user_data) {
  (void)user_data;
  *state = NULL;
  struct jxl_reader *f = calloc(1, sizeof *f);
  if (!f) return pxl_module_fail(PXL_E_NO_MEMORY, message, cap, "out of memory");
  f->dec = JxlDecoderCreate(NULL);
  if (!f->dec) {
    free(f);
    return pxl_module_fail(PXL_E_NO_MEMORY, message, cap, "out of memory for the decoder");
  }
  if (JxlDecoderSubscribeEvents(f->dec, JXL_DEC_BASIC_INFO | JXL_DEC_FRAME | JXL_DEC_FULL_IMAGE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetCoalescing(f->dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetKeepOrientation(f->dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetUnpremultiplyAlpha(f->dec, JXL_TRUE) != JXL_DEC_SUCCESS ||
      JxlDecoderSetInput(f->dec, data, size) != JXL_DEC_SUCCESS) {
    jxl_close_frames(f, NULL);
    return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "cannot set up the decoder");
  }
  JxlDecoderCloseInput(f->dec);
  JxlDecoderStatus s = JxlDecoderProcessInput(f->dec);
  if (s != JXL_DEC_BASIC_INFO || JxlDecoderGetBasicInfo(f->dec, &f->info) != JXL_DEC_SUCCESS) {
    jxl_close_frames(f, NULL);
    return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, s == JXL_DEC_NEED_MORE_INPUT ? "libjxl: truncated file"
                                                                                           : "libjxl: no basic info");
  }
  *state = f;
  return PXL_OK;
}

/* The next displayed frame, coalesced, into target->pixels (libjxl writes the whole
 * canvas); PXL_E_NOT_FOUND after the last. */
static pxl_status jxl_next_frame(void *state, pxl_codec_target *target, int32_t *duration_ms, char *message,
                                 size_t cap, void *user_data) {
  (void)user_data;
  struct jxl_reader *f = state;
  if (f->ended) return PXL_E_NOT_FOUND;
  if ((uint32_t)target->width != f->info.xsize || (uint32_t)target->height != f->info.ysize)
    return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "asked for another size");
  for (;;) {
    JxlDecoderStatus s = JxlDecoderProcessInput(f->dec);
    if (s == JXL_DEC_ERROR) return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: decoding failed");
    if (s == JXL_DEC_NEED_MORE_INPUT) return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: truncated file");
    if (s == JXL_DEC_SUCCESS) {
      f->ended = 1;
      if (f->drawn == 0) return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: no frame");
      return PXL_E_NOT_FOUND;
    }
    if (s == JXL_DEC_FRAME) {
      JxlFrameHeader frame;
      f->ticks = JxlDecoderGetFrameHeader(f->dec, &frame) == JXL_DEC_SUCCESS ? frame.duration : 0;
    } else if (s == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
      if (target->cancel && __atomic_load_n(target->cancel, __ATOMIC_ACQUIRE))
        return pxl_module_fail(PXL_E_CANCELLED, message, cap, "cancelled");
      if (jxl_out_buffer(f->dec, target) != JXL_DEC_SUCCESS)
        return pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libjxl: refused the buffer");
    } else if (s == JXL_DEC_FULL_IMAGE) {
      f->drawn++;
      *duration_ms = jxl_duration_ms(&f->info, f->ticks);
      return PXL_OK;
    }
  }
}

/* Every frame: next_frame's loop, handing each over with frame_done (so both give the
 * same frames by construction). */
static pxl_status jxl_frames(const uint8_t *data, size_t size, pxl_codec_target *target, char *message, size_t cap,
                             void *user_data) {
  void *state = NULL;
  pxl_status status = jxl_open_frames(data, size, &state, message, cap, user_data);
  if (status != PXL_OK) return status;
  int32_t duration = 0;
  while ((status = jxl_next_frame(state, target, &duration, message, cap, user_data)) == PXL_OK)
    if (target->frame_done(target->library, duration)) break;
  jxl_close_frames(state, user_data);
  return status == PXL_E_NOT_FOUND ? PXL_OK : status;
}

#define PXL_JXL_STR2(x) #x
#define PXL_JXL_STR(x) PXL_JXL_STR2(x)
/* The manifest (pixload.h, "Codec modules"): JxlSignatureCheck's two signatures. */
PXL_MODULE_MANIFEST const pxl_codec_manifest pxl_codec_module_manifest = {
    PXL_CODEC_MANIFEST_MAGIC, sizeof(pxl_codec_manifest), 1, 0,
    {{"jxl",
      PXL_VERSION_STRING " libjxl " PXL_JXL_STR(JPEGXL_MAJOR_VERSION) "." PXL_JXL_STR(JPEGXL_MINOR_VERSION) "."
          PXL_JXL_STR(JPEGXL_PATCH_VERSION),
      PXL_CODEC_PROGRESSIVE, 0, 2,
      {{PXL_SNIFF_BYTES, 0, 2, {0xFF, 0x0A}},
       {PXL_SNIFF_BYTES, 0, 12, {0, 0, 0, 0x0C, 'J', 'X', 'L', ' ', 0x0D, 0x0A, 0x87, 0x0A}}}}}};

PXL_MODULE_EXPORT pxl_status pxl_codec_module_register(pxl_loader *loader) {
  static char version[64];
  uint32_t v = JxlDecoderVersion();
  snprintf(version, sizeof version, "%s libjxl %u.%u.%u", PXL_VERSION_STRING, v / 1000000, v / 1000 % 1000, v % 1000);
  pxl_codec codec;
  pxl_codec_init(&codec);
  codec.id = "jxl";
  codec.version = version;
  codec.flags = PXL_CODEC_PROGRESSIVE;
  codec.sniff = jxl_sniff;
  codec.read_header = jxl_header;
  codec.read_icc = jxl_icc;
  codec.decode = jxl_decode;
  codec.decode_frames = jxl_frames;
  codec.open_frames = jxl_open_frames;
  codec.next_frame = jxl_next_frame;
  codec.close_frames = jxl_close_frames;
  return pxl_loader_add_codec(loader, &codec);
}
