/*
 * JPEG through libjpeg-turbo, with every libjpeg call behind a setjmp.
 *
 * Structure (same in png_shim.c): the public function owns a zeroed "job" struct and
 * calls a guarded function that does setjmp and then all library work. Everything the
 * cleanup needs (the decompress object, the pixel buffer) lives in the job, in the
 * public function's frame, and is reached through a pointer that never changes. That
 * sidesteps C's rule that non-volatile locals of the function containing setjmp are
 * indeterminate after longjmp, and keeps cleanup in one place that runs on every path.
 * The scan walks that pick the cheapest decode (DC scans, the DC-only baseline) and give
 * previews their prefixes need no libjpeg: they are in jpeg_scans.c.
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"
#include "pxl_jpeg_progressive.h"

#include <limits.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t declared first */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

typedef struct jpeg_guard {
  struct jpeg_error_mgr mgr; /* first member: libjpeg only gives us cinfo->err back */
  struct jpeg_progress_mgr progress;
  jmp_buf jmp;
  int32_t warnings;
  int data_ended; /* JWRN_JPEG_EOF or JWRN_HIT_MARKER: libjpeg filled in what the data lacked */
  int fatal_code; /* libjpeg msg_code of the error, or FATAL_SCAN_LIMIT */
  void *progressive; /* pxl_jpeg_progressive_install's decoder, freed after jpeg_destroy_decompress */
  char fatal[JMSG_LENGTH_MAX];
  char last_warning[JMSG_LENGTH_MAX];
} jpeg_guard;

#define FATAL_SCAN_LIMIT (-1)

typedef struct jpeg_job {
  struct jpeg_decompress_struct cinfo;
  jpeg_guard guard;
  const uint8_t *data;
  size_t size;
  int info_only;
  int dc_scans_only; /* the input is pxl_jpeg_dc_scans' copy: block smoothing off */
  int rows_delivered; /* a row reached row_fn or region_fn */
  int32_t layout, scale_denom;
  uint64_t max_pixels;
  pxl_codec_info *info;
  pxl_codec_output *out;
  uint8_t *pixels;   /* owned until handed to out on success */
  uint8_t *cmyk_row; /* scratch for the CMYK path */
  pxl_codec_row_fn row_fn; /* rows mode: hand rows over instead of keeping a bitmap */
  pxl_codec_region_row_fn region_fn; /* region mode: rows mode over part of the image */
  void *row_user;
  int32_t region_x, region_y, region_width, region_height;
  uint8_t *strip;    /* rows mode: the few rows one jpeg_read_scanlines call fills */
  /* Set by jpeg_begin_output for jpeg_read_rows: */
  int streaming;         /* fed by pxl_jpeg_stream: input may suspend; no row is skipped */
  uint64_t stride;       /* bitmap mode: bytes per row */
  JDIMENSION full_width, x0, skip_top, stop_at, strip_rows;
  size_t read_stride;
  const int32_t *cancel; /* streaming: polled between strips */
  char shim_error[128]; /* failures detected by the shim itself, not by libjpeg */
} jpeg_job;

static void on_error_exit(j_common_ptr cinfo) {
  jpeg_guard *g = (jpeg_guard *)cinfo->err;
  (*cinfo->err->format_message)(cinfo, g->fatal);
  g->fatal_code = cinfo->err->msg_code;
  longjmp(g->jmp, 1);
}

static void on_emit_message(j_common_ptr cinfo, int msg_level) {
  /* msg_level >= 0 are trace messages; only negative levels are warnings. libjpeg's
   * default prints the first warning to stderr; a library must not write there. */
  if (msg_level >= 0) return;
  jpeg_guard *g = (jpeg_guard *)cinfo->err;
  if (g->warnings < INT32_MAX) g->warnings++;
  /* The file ended (the source manager then feeds a fake EOI) or a scan's data did (a
   * marker where entropy-coded data was needed): the rest is libjpeg's filling. */
  if (cinfo->err->msg_code == JWRN_JPEG_EOF || cinfo->err->msg_code == JWRN_HIT_MARKER) g->data_ended = 1;
  cinfo->err->num_warnings++;
  (*cinfo->err->format_message)(cinfo, g->last_warning);
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  jpeg_guard *guard = (jpeg_guard *)cinfo->err;
  /* The first call of a progressive file's jpeg_start_decompress comes before any scan
   * data is decoded: the moment to put the faster progressive decoder in place. */
  if (guard->progressive == NULL) guard->progressive = pxl_jpeg_progressive_install((j_decompress_ptr)cinfo);
  /* Bounded work on hostile progressive files: see PXL_JPEG_MAX_SCANS. */
  if (((j_decompress_ptr)cinfo)->input_scan_number <= PXL_JPEG_MAX_SCANS) return;
  snprintf(guard->fatal, sizeof guard->fatal, "Progressive JPEG has more than %d scans", PXL_JPEG_MAX_SCANS);
  guard->fatal_code = FATAL_SCAN_LIMIT;
  longjmp(guard->jmp, 1);
}

static pxl_codec_status status_for_fatal(const jpeg_job *job) {
  const struct jpeg_decompress_struct *c = &job->cinfo;
  switch (job->guard.fatal_code) {
    case JERR_OUT_OF_MEMORY:
      return PXL_CODEC_NO_MEMORY;
    case JERR_BAD_PRECISION:
      /* 12- and 16-bit are real JPEG precisions this build cannot decode; any other
       * value is a broken header. */
      return (c->data_precision == 12 || c->data_precision == 16) ? PXL_CODEC_UNSUPPORTED : PXL_CODEC_CORRUPT;
    case JERR_SOF_UNSUPPORTED: /* lossless, hierarchical */
    case JERR_ARITH_NOTIMPL:
    case JERR_NOT_COMPILED:
    case JERR_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL: /* e.g. a 2-component image into RGBA */
    case JERR_WIDTH_OVERFLOW:
      return PXL_CODEC_UNSUPPORTED;
    case JERR_IMAGE_TOO_BIG:
      /* Over libjpeg's 65500 px per side. The header was parsed, so the caller's own
       * limit can still decide whether this is "too big for you" or "too big for us". */
      if (!job->info_only && (uint64_t)c->image_width * c->image_height > job->max_pixels)
        return PXL_CODEC_TOO_MANY_PIXELS;
      return PXL_CODEC_UNSUPPORTED;
    default:
      return PXL_CODEC_CORRUPT;
  }
}

/* Pillow's MULDIV255: a*b/255 rounded, exact for 8-bit operands. */
static inline unsigned muldiv255(unsigned a, unsigned b) {
  unsigned t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

/*
 * CMYK as Pillow decodes it, so the md5s match: Pillow reads every 4-component JPEG
 * with rawmode "CMYK;I" (Adobe's inverted convention, which is what Photoshop writes
 * and what all APP14-tagged files use), i.e. ink = 255 - sample, and then converts with
 * R = (255-K) - (255-K)*C/255. With ink = 255 - sample that is R = k - k*(255-c)/255,
 * computed below with Pillow's exact rounding. Not colour-managed (no ICC), like Pillow.
 */
static void cmyk_to_layout(const uint8_t *in, uint8_t *dst, uint32_t width, int32_t layout) {
  for (uint32_t x = 0; x < width; x++, in += 4) {
    unsigned nk = in[3]; /* 255 - ink K */
    unsigned r = nk - muldiv255(255u - in[0], nk);
    unsigned g = nk - muldiv255(255u - in[1], nk);
    unsigned b = nk - muldiv255(255u - in[2], nk);
    switch (layout) {
      case PXL_CODEC_RGBA: dst[0] = (uint8_t)r; dst[1] = (uint8_t)g; dst[2] = (uint8_t)b; dst[3] = 0xff; dst += 4; break;
      case PXL_CODEC_BGRA: dst[0] = (uint8_t)b; dst[1] = (uint8_t)g; dst[2] = (uint8_t)r; dst[3] = 0xff; dst += 4; break;
      case PXL_CODEC_RGB: dst[0] = (uint8_t)r; dst[1] = (uint8_t)g; dst[2] = (uint8_t)b; dst += 3; break;
      default: /* GRAY: libjpeg's own rgb->gray weights, so all JPEG luma agrees */
        *dst++ = (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
        break;
    }
  }
}

static int orientation_from_markers(j_decompress_ptr c) {
  for (jpeg_saved_marker_ptr m = c->marker_list; m != NULL; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 6) continue;
    if (memcmp(m->data, "Exif\0\0", 6) != 0) continue;
    /* The first Exif APP1 wins (what Pillow and most viewers do); XMP APP1s are skipped
     * by the prefix test above. */
    return pxl_exif_orientation(m->data + 6, m->data_length - 6);
  }
  return 1;
}

/* After jpeg_start_decompress: checks libjpeg's output and sets up what jpeg_read_rows
 * fills: the bitmap (job->pixels), or, in rows and region mode, a strip of
 * rec_outbuf_height rows per call (more rows per call would only be copied), each handed
 * to the callback.
 *
 * Region mode decodes only what the region needs, and what it hands over is what a whole
 * decode gives, to the bit: columns outside it are cut by jpeg_crop_scanline (no IDCT,
 * upsampling or colour conversion for them), rows above it are skipped and rows below it
 * are skipped but for the last one (entropy-decoded only, so every byte of the scan is
 * still read and checked as before). libjpeg aligns a crop to iMCU boundaries and fancy
 * upsampling near an edge it is told about differs from the whole image, so one iMCU of
 * margin is kept on every side; rows and columns beyond the region are handed over too
 * (a caller ignores them). A streaming decode skips no row (jpeg_skip_scanlines does not
 * resume after a suspension): it hands them all over. */
static pxl_codec_status jpeg_begin_output(jpeg_job *job) {
  j_decompress_ptr c = &job->cinfo;
  int cmyk = c->out_color_space == JCS_CMYK;
  int32_t channels = pxl_layout_channels(job->layout);
  if (c->output_components != (cmyk ? 4 : channels) || c->output_width == 0 || c->output_height == 0) {
    snprintf(job->shim_error, sizeof job->shim_error, "unexpected output format from libjpeg");
    return PXL_CODEC_CORRUPT;
  }
  job->full_width = c->output_width;
  job->x0 = 0;
  job->skip_top = 0;
  job->stop_at = c->output_height;
  job->stride = (uint64_t)c->output_width * (uint64_t)channels;
  if (job->row_fn == NULL && job->region_fn == NULL) {
    uint64_t total = job->stride * c->output_height;
    job->pixels = malloc((size_t)total);
    if (cmyk) job->cmyk_row = malloc((size_t)c->output_width * 4u);
    if (job->pixels == NULL || (cmyk && job->cmyk_row == NULL)) {
      snprintf(job->shim_error, sizeof job->shim_error, "out of memory for %llu bytes", (unsigned long long)total);
      return PXL_CODEC_NO_MEMORY;
    }
    return PXL_CODEC_OK;
  }
  if (job->region_fn != NULL) {
    JDIMENSION full_width = c->output_width;
    long imcu_w = (long)c->max_h_samp_factor * c->min_DCT_scaled_size;
    long imcu_h = (long)c->max_v_samp_factor * c->min_DCT_scaled_size;
    long left = (long)job->region_x - imcu_w, right = (long)job->region_x + job->region_width + imcu_w;
    long top = (long)job->region_y - imcu_h, bottom = (long)job->region_y + job->region_height + imcu_h;
    if (left < 0) left = 0;
    if (right > (long)full_width) right = (long)full_width;
    if (!job->streaming) {
      if (top > 0) job->skip_top = (JDIMENSION)top;
      if (bottom < (long)c->output_height) job->stop_at = (JDIMENSION)bottom;
    }
    if (left > 0 || right < (long)full_width) {
      JDIMENSION width = (JDIMENSION)(right - left);
      job->x0 = (JDIMENSION)left;
      jpeg_crop_scanline(c, &job->x0, &width); /* x0 moves down to an iMCU boundary */
    }
  }
  size_t row_bytes = (size_t)c->output_width * (size_t)channels;
  job->strip_rows = c->rec_outbuf_height > 0 ? (JDIMENSION)c->rec_outbuf_height : 1;
  if (job->strip_rows > 16) job->strip_rows = 16;
  job->read_stride = cmyk ? (size_t)c->output_width * 4u : row_bytes;
  job->strip = malloc(job->read_stride * job->strip_rows);
  if (cmyk) job->cmyk_row = malloc(row_bytes);
  if (job->strip == NULL || (cmyk && job->cmyk_row == NULL)) {
    snprintf(job->shim_error, sizeof job->shim_error, "out of memory for a strip of %u rows",
             (unsigned)job->strip_rows);
    return PXL_CODEC_NO_MEMORY;
  }
  if (job->skip_top > 0) (void)jpeg_skip_scanlines(c, job->skip_top);
  return PXL_CODEC_OK;
}

/* Reads rows into the bitmap or hands them to the callback until the last one, or until
 * a suspending source runs out of input (streaming: returns with *suspended set). */
static pxl_codec_status jpeg_read_rows(jpeg_job *job, int *suspended) {
  j_decompress_ptr c = &job->cinfo;
  int cmyk = c->out_color_space == JCS_CMYK;
  int bitmap = job->row_fn == NULL && job->region_fn == NULL;
  *suspended = 0;
  while (c->output_scanline < c->output_height) {
    if (job->cancel != NULL && __atomic_load_n(job->cancel, __ATOMIC_RELAXED) != 0) {
      snprintf(job->shim_error, sizeof job->shim_error, "cancelled");
      return PXL_CODEC_CORRUPT;
    }
    JDIMENSION y = c->output_scanline, want = c->output_height - y, got;
    if (bitmap) {
      if (cmyk) {
        JSAMPROW row = job->cmyk_row;
        got = jpeg_read_scanlines(c, &row, 1);
        if (got == 1) cmyk_to_layout(row, job->pixels + (size_t)y * job->stride, c->output_width, job->layout);
      } else {
        JSAMPROW rows[8];
        if (want > 8) want = 8;
        for (JDIMENSION i = 0; i < want; i++) rows[i] = job->pixels + (size_t)(y + i) * job->stride;
        got = jpeg_read_scanlines(c, rows, want);
      }
    } else {
      if (y >= job->stop_at && want > 1) {
        /* Below the region: entropy decoding only, up to the last row, which is read so
         * that the scan is consumed as a whole decode would. */
        (void)jpeg_skip_scanlines(c, want - 1);
        continue;
      }
      JSAMPROW rows[16];
      for (JDIMENSION i = 0; i < job->strip_rows; i++) rows[i] = job->strip + i * job->read_stride;
      if (want > job->strip_rows) want = job->strip_rows;
      got = jpeg_read_scanlines(c, rows, want);
      for (JDIMENSION i = 0; i < got; i++) {
        const uint8_t *row = rows[i];
        if (cmyk) {
          cmyk_to_layout(row, job->cmyk_row, c->output_width, job->layout);
          row = job->cmyk_row;
        }
        job->rows_delivered = 1;
        int stop = job->region_fn != NULL ? job->region_fn(job->row_user, (int32_t)(y + i), (int32_t)job->x0, row)
                                          : job->row_fn(job->row_user, (int32_t)(y + i), row);
        if (stop != 0) {
          snprintf(job->shim_error, sizeof job->shim_error, "stopped by the caller");
          return PXL_CODEC_CORRUPT;
        }
      }
    }
    if (got == 0) {
      /* Only a suspending source returns 0 rows (it resumes with more input); guard
       * anyway so no input can spin. */
      if (job->streaming) {
        *suspended = 1;
        return PXL_CODEC_OK;
      }
      snprintf(job->shim_error, sizeof job->shim_error, "decoder made no progress");
      return PXL_CODEC_CORRUPT;
    }
  }
  return PXL_CODEC_OK;
}

/* The output's description once every row is read (rows and region mode: at the image's
 * scaled size, whatever the crop). */
static void jpeg_describe(jpeg_job *job) {
  pxl_codec_output *out = job->out;
  int32_t channels = pxl_layout_channels(job->layout);
  out->width = (int32_t)job->full_width;
  out->height = (int32_t)job->cinfo.output_height;
  out->stride = (int32_t)((uint64_t)job->full_width * (uint64_t)channels);
  out->channels = channels;
  out->has_alpha = 0;
}

/* After jpeg_read_header: the limits, the output colour space and the scale, set on
 * cinfo as every decode sets them (the md5s depend on them). */
static pxl_codec_status jpeg_prepare(jpeg_job *job) {
  j_decompress_ptr c = &job->cinfo;
  uint64_t declared = (uint64_t)c->image_width * c->image_height;
  if (declared > job->max_pixels) {
    snprintf(job->shim_error, sizeof job->shim_error, "%ux%u is over the limit of %llu pixels",
             (unsigned)c->image_width, (unsigned)c->image_height, (unsigned long long)job->max_pixels);
    return PXL_CODEC_TOO_MANY_PIXELS;
  }

  int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
  int32_t channels = pxl_layout_channels(job->layout);
  if (cmyk) {
    c->out_color_space = JCS_CMYK; /* libjpeg turns YCCK into CMYK; we do CMYK -> RGB */
  } else {
    /* libjpeg-turbo converts gray sources to the RGB family itself. */
    static const J_COLOR_SPACE spaces[] = {JCS_EXT_RGBA, JCS_EXT_BGRA, JCS_EXT_RGB, JCS_GRAYSCALE};
    c->out_color_space = spaces[job->layout];
  }
  /* Set explicitly rather than trusting build defaults: the md5s depend on them. */
  c->dct_method = JDCT_ISLOW;
  c->do_fancy_upsampling = TRUE;
  /* Smoothing estimates missing AC coefficients; the 1x1 IDCT would ignore them anyway. */
  if (job->dc_scans_only) c->do_block_smoothing = FALSE;
  c->scale_num = 1;
  c->scale_denom = (unsigned)job->scale_denom;
  jpeg_calc_output_dimensions(c);

  uint64_t stride = (uint64_t)c->output_width * (uint64_t)channels;
  uint64_t total = stride * c->output_height;
  if (stride > INT32_MAX || total > SIZE_MAX) {
    snprintf(job->shim_error, sizeof job->shim_error, "output too large for this platform");
    return PXL_CODEC_TOO_MANY_PIXELS;
  }
  return PXL_CODEC_OK;
}

/* Sets the error manager up (the caller does setjmp next). */
static void jpeg_guard_init(jpeg_job *job) {
  jpeg_guard *g = &job->guard;
  job->cinfo.err = jpeg_std_error(&g->mgr);
  g->mgr.error_exit = on_error_exit;
  g->mgr.emit_message = on_emit_message;
  g->mgr.output_message = on_output_message;
}

/* All libjpeg calls happen here, after the setjmp. Returns with job->pixels set on
 * success; the caller cleans up on every path. */
static pxl_codec_status jpeg_run(jpeg_job *job) {
  j_decompress_ptr c = &job->cinfo;
  jpeg_guard *g = &job->guard;

  jpeg_guard_init(job);
  if (setjmp(g->jmp)) return status_for_fatal(job);

  jpeg_create_decompress(c);
  g->progress.progress_monitor = on_progress;
  c->progress = &g->progress;
  /* jpeg_mem_src reads only [data, data+size) and, at the end, feeds a fake EOI with a
   * "Premature end of JPEG file" warning instead of reading further. */
  jpeg_mem_src(c, job->data, (unsigned long)job->size);
  if (job->info_only) jpeg_save_markers(c, JPEG_APP0 + 1, 0xFFFF);
  (void)jpeg_read_header(c, TRUE); /* TRUE: a tables-only stream is an error, not a result */

  if (job->info_only) {
    job->info->width = (int32_t)c->image_width; /* <= 65500: libjpeg refuses larger */
    job->info->height = (int32_t)c->image_height;
    job->info->has_alpha = 0;
    job->info->orientation = orientation_from_markers(c);
    job->info->gray = c->jpeg_color_space == JCS_GRAYSCALE;
    return PXL_CODEC_OK;
  }

  pxl_codec_status st = jpeg_prepare(job);
  if (st != PXL_CODEC_OK) return st;
  jpeg_start_decompress(c);
  if ((st = jpeg_begin_output(job)) != PXL_CODEC_OK) return st;
  int suspended;
  if ((st = jpeg_read_rows(job, &suspended)) != PXL_CODEC_OK) return st;
  /* Reads to EOI so trailing problems are reported as warnings, as libjpeg's own tools
   * do. */
  (void)jpeg_finish_decompress(c);
  jpeg_describe(job);
  return PXL_CODEC_OK;
}

/* Common tail of both entry points, run on every path: destroy libjpeg state, free what
 * the caller will not own, and pick the message. */
static pxl_codec_status jpeg_finish_job(jpeg_job *job, pxl_codec_status st, char *msg, size_t cap) {
  jpeg_destroy_decompress(&job->cinfo); /* safe on a zeroed or half-created object */
  free(job->guard.progressive);
  job->guard.progressive = NULL;
  free(job->cmyk_row);
  job->cmyk_row = NULL;
  free(job->strip);
  job->strip = NULL;
  if (st != PXL_CODEC_OK) {
    free(job->pixels);
    job->pixels = NULL;
    const char *why = job->shim_error[0] ? job->shim_error : job->guard.fatal;
    pxl_set_message(msg, cap, "JPEG", why[0] ? why : "decode failed");
  } else {
    pxl_set_message(msg, cap, "JPEG", job->guard.last_warning);
  }
  return st;
}

pxl_codec_status pxl_jpeg_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap) {
  if (message != NULL && message_cap > 0) message[0] = '\0';
  if (info == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(info, 0, sizeof *info);
  info->orientation = 1;
  if (data == NULL) size = 0; /* libjpeg then reports "Empty input file" */

  jpeg_job *job = calloc(1, sizeof *job); /* calloc: the zeroed state cleanup relies on */
  if (job == NULL) {
    pxl_set_message(message, message_cap, "JPEG", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  pxl_codec_info tmp = {0, 0, 0, 1, 1, 0, 0};
  static const uint8_t empty[1] = {0};
  job->data = data ? data : empty;
  job->size = size;
  job->info_only = 1;
  job->info = &tmp;
  pxl_codec_status st = jpeg_finish_job(job, jpeg_run(job), message, message_cap);
  if (st == PXL_CODEC_OK) *info = tmp;
  free(job);
  return st;
}

typedef struct jpeg_rows_request {
  pxl_codec_row_fn row_fn;
  pxl_codec_region_row_fn region_fn;
  void *user;
  int32_t x, y, width, height;
} jpeg_rows_request;

static pxl_codec_status jpeg_decode_into(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                         uint64_t max_pixels, uint32_t options, const jpeg_rows_request *rows,
                                         pxl_codec_output *out);

/* What a decode (whole or streaming) is asked for, into a zeroed job. */
static void jpeg_job_setup(jpeg_job *job, int32_t layout, int32_t scale_denom, uint64_t max_pixels,
                           const jpeg_rows_request *rows, pxl_codec_output *out) {
  job->layout = layout;
  job->scale_denom = scale_denom;
  job->max_pixels = max_pixels;
  job->out = out;
  if (rows != NULL) {
    job->row_fn = rows->row_fn;
    job->region_fn = rows->region_fn;
    job->row_user = rows->user;
    job->region_x = rows->x;
    job->region_y = rows->y;
    job->region_width = rows->width;
    job->region_height = rows->height;
  }
}
static pxl_codec_status jpeg_decode_once(const uint8_t *data, size_t size, int dc_scans_only, int32_t layout,
                                         int32_t scale_denom, uint64_t max_pixels, const jpeg_rows_request *rows,
                                         pxl_codec_output *out, int *rows_delivered);

pxl_codec_status pxl_jpeg_decode(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom, uint64_t max_pixels, pxl_codec_output *out) {
  return jpeg_decode_into(data, size, layout, scale_denom, max_pixels, 0, NULL, out);
}

pxl_codec_status pxl_jpeg_decode_with_options(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                              uint64_t max_pixels, uint32_t options, pxl_codec_output *out) {
  return jpeg_decode_into(data, size, layout, scale_denom, max_pixels, options, NULL, out);
}

pxl_codec_status pxl_jpeg_decode_rows(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                      uint64_t max_pixels, pxl_codec_row_fn row_fn, void *user,
                                      pxl_codec_output *out) {
  if (row_fn == NULL) {
    if (out == NULL) return PXL_CODEC_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    pxl_set_message(out->message, sizeof out->message, "JPEG", "row_fn is NULL");
    return PXL_CODEC_UNSUPPORTED;
  }
  jpeg_rows_request rows = {row_fn, NULL, user, 0, 0, 0, 0};
  return jpeg_decode_into(data, size, layout, scale_denom, max_pixels, 0, &rows, out);
}

pxl_codec_status pxl_jpeg_decode_region(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                        uint64_t max_pixels, int32_t x, int32_t y, int32_t width, int32_t height,
                                        pxl_codec_region_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (row_fn == NULL || x < 0 || y < 0 || width < 1 || height < 1) {
    if (out == NULL) return PXL_CODEC_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    pxl_set_message(out->message, sizeof out->message, "JPEG", "row_fn is NULL or the region is empty");
    return PXL_CODEC_UNSUPPORTED;
  }
  jpeg_rows_request rows = {NULL, row_fn, user, x, y, width, height};
  return jpeg_decode_into(data, size, layout, scale_denom, max_pixels, 0, &rows, out);
}

/* Validation, then the cheapest decode that gives the full decode's pixels (see
 * pxl_jpeg_dc_baseline and pxl_jpeg_dc_scans), falling back to the full decode when a
 * shortcut fails before it delivered a row (rows already streamed cannot be taken back). */
static pxl_codec_status jpeg_decode_into(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                         uint64_t max_pixels, uint32_t options, const jpeg_rows_request *rows,
                                         pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  if (pxl_layout_channels(layout) == 0) {
    pxl_set_message(out->message, sizeof out->message, "JPEG", "invalid layout");
    return PXL_CODEC_UNSUPPORTED;
  }
  if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
    pxl_set_message(out->message, sizeof out->message, "JPEG", "scale_denom must be 1, 2, 4 or 8");
    return PXL_CODEC_UNSUPPORTED;
  }
  if (data == NULL) size = 0;
#if ULONG_MAX < SIZE_MAX
  if (size > ULONG_MAX) { /* jpeg_mem_src takes unsigned long */
    pxl_set_message(out->message, sizeof out->message, "JPEG", "input too large");
    return PXL_CODEC_UNSUPPORTED;
  }
#endif

  uint8_t *dc_scans = NULL;
  size_t dc_size = 0;
  pxl_codec_status st;
  if (scale_denom == 8 && !(options & PXL_JPEG_ALL_SCANS)) {
    /* Cheapest first: a baseline JPEG of the DC coefficients, then the DC scans. */
    dc_size = pxl_jpeg_dc_baseline(data, size, &dc_scans);
    if (dc_size != 0) {
      int delivered = 0;
      st = jpeg_decode_once(dc_scans, dc_size, 0, layout, scale_denom, max_pixels, rows, out, &delivered);
      free(dc_scans);
      dc_scans = NULL;
      if (st == PXL_CODEC_OK || st == PXL_CODEC_TOO_MANY_PIXELS || st == PXL_CODEC_NO_MEMORY || delivered) return st;
      memset(out, 0, sizeof *out);
    }
    dc_size = pxl_jpeg_dc_scans(data, size, &dc_scans);
  }
  if (dc_size != 0) {
    int delivered = 0;
    st = jpeg_decode_once(dc_scans, dc_size, 1, layout, scale_denom, max_pixels, rows, out, &delivered);
    free(dc_scans);
    /* A file the DC copy fails on gets the full decode: its error (or its image) is the
     * one the caller would have had without this shortcut. */
    if (st == PXL_CODEC_OK || st == PXL_CODEC_TOO_MANY_PIXELS || st == PXL_CODEC_NO_MEMORY || delivered) return st;
    memset(out, 0, sizeof *out);
  }
  static const uint8_t empty[1] = {0};
  int delivered = 0;
  return jpeg_decode_once(data ? data : empty, size, 0, layout, scale_denom, max_pixels, rows, out, &delivered);
}

/* One decode of [data, data+size) into *out or rows (see pxl_jpeg_decode and
 * pxl_jpeg_decode_rows); *rows_delivered tells whether any row reached a callback. */
static pxl_codec_status jpeg_decode_once(const uint8_t *data, size_t size, int dc_scans_only, int32_t layout,
                                         int32_t scale_denom, uint64_t max_pixels, const jpeg_rows_request *rows,
                                         pxl_codec_output *out, int *rows_delivered) {
  /* Heap, not stack: the job is ~1.5 KB and this may run on small-stack threads. */
  jpeg_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    pxl_set_message(out->message, sizeof out->message, "JPEG", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  job->data = data;
  job->size = size;
  job->dc_scans_only = dc_scans_only;
  jpeg_job_setup(job, layout, scale_denom, max_pixels, rows, out);
  pxl_codec_status st = jpeg_finish_job(job, jpeg_run(job), out->message, sizeof out->message);
  *rows_delivered = job->rows_delivered;
  if (st == PXL_CODEC_OK) {
    out->pixels = job->pixels;
    out->warnings = job->guard.warnings;
    out->incomplete = job->guard.data_ended;
  } else {
    /* Nothing half-filled leaks out: a failed decode reports only the message and the
     * warnings seen before the error. */
    out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
    out->warnings = job->guard.warnings;
  }
  free(job);
  return st;
}

/* ---- decoding while the bytes arrive ------------------------------------------------ */

/* A decode fed as its bytes arrive, through libjpeg's suspending source: each call to
 * pxl_jpeg_stream_feed hands it the next bytes and runs libjpeg until they run out (the
 * header, jpeg_start_decompress, which for a progressive file takes in every scan, then
 * rows), keeping the decompress object across calls. libjpeg backs up to the start of what
 * it could not finish (a marker, an MCU) and says so; the bytes from there are kept in
 * `buf` and the next bytes appended. At the end (at_end) the source behaves exactly as
 * jpeg_mem_src does at the end of its buffer (a fake EOI and the same warning), so a
 * truncated file decodes as it does whole. */
struct pxl_jpeg_stream {
  jpeg_job job;
  struct jpeg_source_mgr src;
  uint8_t *buf;
  size_t cap;
  size_t skip; /* bytes skip_input_data asked to pass that have not arrived yet */
  int at_end;
  int stage; /* 0 header, 1 start_decompress, 2 rows, 3 finish_decompress, 4 over */
  int declined;
  pxl_codec_status failed;
  pxl_codec_output out;
};

static void stream_init_source(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean stream_fill_input_buffer(j_decompress_ptr cinfo) {
  pxl_jpeg_stream *s = (pxl_jpeg_stream *)((char *)cinfo->src - offsetof(pxl_jpeg_stream, src));
  if (!s->at_end) return FALSE; /* suspend: the next feed brings more */
  /* What jpeg_mem_src's fill_mem_input_buffer does. */
  static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
  WARNMS(cinfo, JWRN_JPEG_EOF);
  cinfo->src->next_input_byte = eoi;
  cinfo->src->bytes_in_buffer = 2;
  return TRUE;
}

/* jpeg_mem_src's skip at the end: the fake EOIs count down what is left to pass. */
static void stream_skip_at_end(j_decompress_ptr cinfo, size_t n) {
  struct jpeg_source_mgr *src = cinfo->src;
  while (n > src->bytes_in_buffer) {
    n -= src->bytes_in_buffer;
    (void)stream_fill_input_buffer(cinfo);
  }
  src->next_input_byte += n;
  src->bytes_in_buffer -= n;
}

static void stream_skip_input_data(j_decompress_ptr cinfo, long num_bytes) {
  pxl_jpeg_stream *s = (pxl_jpeg_stream *)((char *)cinfo->src - offsetof(pxl_jpeg_stream, src));
  if (num_bytes <= 0) return;
  size_t n = (size_t)num_bytes;
  if (s->at_end) {
    stream_skip_at_end(cinfo, n);
  } else if (n <= s->src.bytes_in_buffer) {
    s->src.next_input_byte += n;
    s->src.bytes_in_buffer -= n;
  } else {
    /* The rest is passed over as it arrives (a skip cannot suspend). */
    s->skip = n - s->src.bytes_in_buffer;
    s->src.next_input_byte += s->src.bytes_in_buffer;
    s->src.bytes_in_buffer = 0;
  }
}

static void stream_term_source(j_decompress_ptr cinfo) { (void)cinfo; }

static int64_t streams_live;

int64_t pxl_jpeg_streams_live(void) { return __atomic_load_n(&streams_live, __ATOMIC_RELAXED); }

pxl_jpeg_stream *pxl_jpeg_stream_new(int32_t layout, int32_t scale_denom, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, pxl_codec_region_row_fn region_fn, void *user,
                                     int32_t x, int32_t y, int32_t width, int32_t height, const int32_t *cancel) {
  if (pxl_layout_channels(layout) == 0) return NULL;
  if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) return NULL;
  pxl_jpeg_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  jpeg_job *job = &s->job;
  job->streaming = 1;
  jpeg_rows_request rows = {row_fn, region_fn, user, x, y, width, height};
  jpeg_job_setup(job, layout, scale_denom, max_pixels, &rows, &s->out);
  job->cancel = cancel;
  jpeg_guard_init(job);
  if (setjmp(job->guard.jmp)) {
    jpeg_destroy_decompress(&job->cinfo);
    free(s);
    return NULL;
  }
  jpeg_create_decompress(&job->cinfo);
  job->guard.progress.progress_monitor = on_progress;
  job->cinfo.progress = &job->guard.progress;
  s->src.init_source = stream_init_source;
  s->src.fill_input_buffer = stream_fill_input_buffer;
  s->src.skip_input_data = stream_skip_input_data;
  s->src.resync_to_restart = jpeg_resync_to_restart;
  s->src.term_source = stream_term_source;
  job->cinfo.src = &s->src;
  __atomic_add_fetch(&streams_live, 1, __ATOMIC_RELAXED);
  return s;
}

/* Runs libjpeg as far as the input goes; after the setjmp (see jpeg_run). */
static pxl_codec_status stream_run(pxl_jpeg_stream *s, int *suspended) {
  jpeg_job *job = &s->job;
  j_decompress_ptr c = &job->cinfo;
  if (setjmp(job->guard.jmp)) return status_for_fatal(job);
  pxl_codec_status st;
  *suspended = 1;
  switch (s->stage) {
    case 0:
      if (jpeg_read_header(c, TRUE) == JPEG_SUSPENDED) return PXL_CODEC_OK;
      /* A progressive file at 1/8 decodes from its DC scans alone when whole
       * (pxl_jpeg_dc_scans); here every scan would be decoded: the caller decodes it
       * whole instead. libjpeg's arithmetic decoder cannot suspend (JERR_CANT_SUSPEND). */
      if ((c->progressive_mode && job->scale_denom == 8) || c->arith_code) {
        s->declined = 1;
        return PXL_CODEC_OK;
      }
      if ((st = jpeg_prepare(job)) != PXL_CODEC_OK) return st;
      s->stage = 1;
      /* fall through */
    case 1:
      if (!jpeg_start_decompress(c)) return PXL_CODEC_OK;
      if ((st = jpeg_begin_output(job)) != PXL_CODEC_OK) return st;
      s->stage = 2;
      /* fall through */
    case 2: {
      int rows_suspended;
      if ((st = jpeg_read_rows(job, &rows_suspended)) != PXL_CODEC_OK) return st;
      if (rows_suspended) return PXL_CODEC_OK;
      s->stage = 3;
    }
      /* fall through */
    case 3:
      if (!jpeg_finish_decompress(c)) return PXL_CODEC_OK;
      jpeg_describe(job);
      s->stage = 4;
      *suspended = 0;
      return PXL_CODEC_OK;
    default:
      *suspended = 0;
      return PXL_CODEC_OK;
  }
}

pxl_codec_status pxl_jpeg_stream_feed(pxl_jpeg_stream *s, const uint8_t *data, size_t size, int at_end,
                                      int *state, pxl_codec_output *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (s == NULL || state == NULL || out == NULL) return PXL_CODEC_UNSUPPORTED;
  *state = PXL_STREAM_MORE;
  if (s->failed != PXL_CODEC_OK || s->stage == 4 || s->declined) {
    pxl_set_message(out->message, sizeof out->message, "JPEG", "the stream is over");
    return PXL_CODEC_UNSUPPORTED;
  }
  if (data == NULL) size = 0;
  /* Bytes a skip still passes over. */
  size_t skipped = size < s->skip ? size : s->skip;
  s->skip -= skipped;
  data += skipped;
  size -= skipped;
  /* Keep what libjpeg has not consumed, then append. */
  size_t keep = s->src.bytes_in_buffer;
  if (keep + size > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < keep + size) cap *= 2;
    uint8_t *bigger = malloc(cap);
    if (bigger == NULL) {
      s->failed = PXL_CODEC_NO_MEMORY;
      pxl_set_message(out->message, sizeof out->message, "JPEG", "out of memory");
      return PXL_CODEC_NO_MEMORY;
    }
    if (keep > 0) memcpy(bigger, s->src.next_input_byte, keep);
    free(s->buf);
    s->buf = bigger;
    s->cap = cap;
  } else if (keep > 0 && s->src.next_input_byte != s->buf) {
    memmove(s->buf, s->src.next_input_byte, keep);
  }
  if (size > 0) memcpy(s->buf + keep, data, size);
  s->src.next_input_byte = s->buf;
  s->src.bytes_in_buffer = keep + size;
  if (at_end) {
    s->at_end = 1;
    /* A skip longer than the file: as jpeg_mem_src would pass it. */
    if (s->skip > 0) {
      size_t n = s->skip;
      s->skip = 0;
      stream_skip_at_end(&s->job.cinfo, n);
    }
  }
  int suspended = 1;
  pxl_codec_status st = stream_run(s, &suspended);
  jpeg_job *job = &s->job;
  if (st != PXL_CODEC_OK) {
    s->failed = st;
    const char *why = job->shim_error[0] ? job->shim_error : job->guard.fatal;
    pxl_set_message(out->message, sizeof out->message, "JPEG", why[0] ? why : "decode failed");
    out->warnings = job->guard.warnings;
    return st;
  }
  if (s->declined) {
    *state = PXL_STREAM_DECLINED;
    return PXL_CODEC_OK;
  }
  if (suspended) {
    if (s->at_end) { /* cannot happen: the source never suspends at the end */
      s->failed = PXL_CODEC_CORRUPT;
      pxl_set_message(out->message, sizeof out->message, "JPEG", "decoder made no progress");
      return PXL_CODEC_CORRUPT;
    }
    return PXL_CODEC_OK;
  }
  *state = PXL_STREAM_DONE;
  *out = s->out;
  out->pixels = job->pixels;
  job->pixels = NULL; /* the caller's now */
  out->warnings = job->guard.warnings;
  out->incomplete = job->guard.data_ended;
  pxl_set_message(out->message, sizeof out->message, "JPEG", job->guard.last_warning);
  return PXL_CODEC_OK;
}

void pxl_jpeg_stream_free(pxl_jpeg_stream *s) {
  if (s == NULL) return;
  __atomic_sub_fetch(&streams_live, 1, __ATOMIC_RELAXED);
  jpeg_destroy_decompress(&s->job.cinfo);
  free(s->job.guard.progressive);
  free(s->job.cmyk_row);
  free(s->job.strip);
  free(s->job.pixels);
  free(s->buf);
  free(s);
}

/* The end of a JPEG's header: the offset just past its first SOS segment (what
 * pxl_jpeg_read_info, pxl_jpeg_color and the plan of a decode read), 0 while the bytes
 * end before it, -1 for a marker sequence this walk does not follow (garbage between
 * segments: the caller decodes such a file whole, as libjpeg's recovery decides). */
int64_t pxl_jpeg_header_end(const uint8_t *data, size_t size) {
  if (data == NULL || size < 2) return 0;
  if (data[0] != 0xFF || data[1] != 0xD8) return -1;
  size_t pos = 2;
  while (pos + 2 <= size) {
    if (data[pos] != 0xFF) return -1;
    uint8_t code = data[pos + 1];
    if (code == 0xFF) { pos++; continue; } /* fill byte */
    if (code == 0xD8 || code == 0xD9 || code == 0x01 || (code >= 0xD0 && code <= 0xD7)) return -1;
    if (pos + 4 > size) return 0;
    size_t len = pxl_be16(data + pos + 2);
    if (len < 2) return -1;
    if (len > size - pos - 2) return 0;
    pos += 2 + len;
    if (code == 0xDA) return (int64_t)pos;
  }
  return 0;
}

/* ---- colour ----------------------------------------------------------------------- */

/* APP2 "ICC_PROFILE\0" chunks (ICC.1 B.4): each carries its sequence number (1-based) and
 * the chunk count, then a piece of the profile. A walk over the marker segments up to the
 * first scan, no libjpeg needed. A set with a gap, a duplicate, inconsistent counts or more
 * than PXL_ICC_MAX_BYTES is ignored (no profile), as libjpeg's jpeg_read_icc_profile does. */
pxl_codec_status pxl_jpeg_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  if (color == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(color, 0, sizeof *color);
  if (data == NULL || size < 4 || data[0] != 0xFF || data[1] != 0xD8) return PXL_CODEC_CORRUPT;
  const uint8_t *chunk[256] = {0};
  size_t chunk_size[256] = {0};
  int count = 0, bad = 0;
  size_t total = 0, pos = 2;
  while (pos + 4 <= size) {
    if (data[pos] != 0xFF) break; /* not a marker where one must be: stop, keep what we have */
    uint8_t code = data[pos + 1];
    if (code == 0xFF) { pos++; continue; } /* fill byte */
    if (code == 0xD8 || code == 0x01 || (code >= 0xD0 && code <= 0xD7)) { pos += 2; continue; }
    if (code == 0xDA || code == 0xD9) break; /* the first scan (or the end): no APP2 after it counts */
    size_t len = pxl_be16(data + pos + 2);
    if (len < 2 || len > size - pos - 2) break;
    const uint8_t *seg = data + pos + 4;
    size_t n = len - 2;
    if (code == 0xE2 && n >= 14 && memcmp(seg, "ICC_PROFILE\0", 12) == 0) {
      int seq = seg[12], of = seg[13];
      if (seq == 0 || of == 0 || seq > of || (count != 0 && of != count) || chunk[seq] != NULL) bad = 1;
      else {
        count = of;
        chunk[seq] = seg + 14;
        chunk_size[seq] = n - 14;
        total += n - 14;
        if (total > PXL_ICC_MAX_BYTES) bad = 1;
      }
    }
    pos += 2 + len;
  }
  if (count == 0 || bad || total == 0) return PXL_CODEC_OK;
  for (int i = 1; i <= count; i++)
    if (chunk[i] == NULL) return PXL_CODEC_OK;
  uint8_t *icc = malloc(total);
  if (icc == NULL) return PXL_CODEC_NO_MEMORY;
  size_t at = 0;
  for (int i = 1; i <= count; i++) {
    memcpy(icc + at, chunk[i], chunk_size[i]);
    at += chunk_size[i];
  }
  color->icc = icc;
  color->icc_size = total;
  return PXL_CODEC_OK;
}
