/*
 * JPEG through libjpeg-turbo, with every libjpeg call behind a setjmp.
 *
 * Structure (same in png_shim.c): the public function owns a zeroed "job" struct and
 * calls a guarded function that does setjmp and then all library work. Everything the
 * cleanup needs (the decompress object, the pixel buffer) lives in the job, in the
 * public function's frame, and is reached through a pointer that never changes. That
 * sidesteps C's rule that non-volatile locals of the function containing setjmp are
 * indeterminate after longjmp, and keeps cleanup in one place that runs on every path.
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"

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
  int fatal_code; /* libjpeg msg_code of the error, or FATAL_SCAN_LIMIT */
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
  cinfo->err->num_warnings++;
  (*cinfo->err->format_message)(cinfo, g->last_warning);
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void on_progress(j_common_ptr cinfo) {
  /* Bounded work on hostile progressive files: see PXL_JPEG_MAX_SCANS. */
  if (!cinfo->is_decompressor) return;
  if (((j_decompress_ptr)cinfo)->input_scan_number <= PXL_JPEG_MAX_SCANS) return;
  jpeg_guard *g = (jpeg_guard *)cinfo->err;
  snprintf(g->fatal, sizeof g->fatal, "Progressive JPEG has more than %d scans", PXL_JPEG_MAX_SCANS);
  g->fatal_code = FATAL_SCAN_LIMIT;
  longjmp(g->jmp, 1);
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

/* The end of both modes: reads to EOI so trailing problems are reported as warnings, as
 * libjpeg's own tools do, and describes the output. */
static pxl_codec_status jpeg_end(jpeg_job *job, JDIMENSION width, uint64_t stride) {
  j_decompress_ptr c = &job->cinfo;
  (void)jpeg_finish_decompress(c);
  pxl_codec_output *out = job->out;
  out->width = (int32_t)width;
  out->height = (int32_t)c->output_height;
  out->stride = (int32_t)stride;
  out->channels = pxl_layout_channels(job->layout);
  out->has_alpha = 0;
  return PXL_CODEC_OK;
}

/* Rows and region mode, after jpeg_start_decompress: libjpeg fills a strip of
 * rec_outbuf_height rows per call (more rows per call would only be copied), each is
 * handed to the callback.
 *
 * Region mode decodes only what the region needs, and what it hands over is what a whole
 * decode gives, to the bit: columns outside it are cut by jpeg_crop_scanline (no IDCT,
 * upsampling or colour conversion for them), rows above it are skipped and rows below it
 * are skipped but for the last one (entropy-decoded only, so every byte of the scan is
 * still read and checked as before). libjpeg aligns a crop to iMCU boundaries and fancy
 * upsampling near an edge it is told about differs from the whole image, so one iMCU of
 * margin is kept on every side; rows and columns beyond the region are handed over too
 * (a caller ignores them). */
static pxl_codec_status jpeg_run_rows(jpeg_job *job) {
  j_decompress_ptr c = &job->cinfo;
  int cmyk = c->out_color_space == JCS_CMYK;
  JDIMENSION full_width = c->output_width, x0 = 0, skip_top = 0, stop_at = c->output_height;
  if (job->region_fn != NULL) {
    long imcu_w = (long)c->max_h_samp_factor * c->min_DCT_scaled_size;
    long imcu_h = (long)c->max_v_samp_factor * c->min_DCT_scaled_size;
    long left = (long)job->region_x - imcu_w, right = (long)job->region_x + job->region_width + imcu_w;
    long top = (long)job->region_y - imcu_h, bottom = (long)job->region_y + job->region_height + imcu_h;
    if (left < 0) left = 0;
    if (right > (long)full_width) right = (long)full_width;
    if (top > 0) skip_top = (JDIMENSION)top;
    if (bottom < (long)c->output_height) stop_at = (JDIMENSION)bottom;
    if (left > 0 || right < (long)full_width) {
      JDIMENSION width = (JDIMENSION)(right - left);
      x0 = (JDIMENSION)left;
      jpeg_crop_scanline(c, &x0, &width); /* x0 moves down to an iMCU boundary */
    }
  }
  size_t row_bytes = (size_t)c->output_width * (size_t)pxl_layout_channels(job->layout);
  JDIMENSION strip_rows = c->rec_outbuf_height > 0 ? (JDIMENSION)c->rec_outbuf_height : 1;
  if (strip_rows > 16) strip_rows = 16;
  size_t read_stride = cmyk ? (size_t)c->output_width * 4u : row_bytes;
  job->strip = malloc(read_stride * strip_rows);
  if (cmyk) job->cmyk_row = malloc(row_bytes);
  if (job->strip == NULL || (cmyk && job->cmyk_row == NULL)) {
    snprintf(job->shim_error, sizeof job->shim_error, "out of memory for a strip of %u rows", (unsigned)strip_rows);
    return PXL_CODEC_NO_MEMORY;
  }
  if (skip_top > 0) (void)jpeg_skip_scanlines(c, skip_top);
  JSAMPROW rows[16];
  for (JDIMENSION i = 0; i < strip_rows; i++) rows[i] = job->strip + i * read_stride;
  while (c->output_scanline < c->output_height) {
    JDIMENSION y = c->output_scanline, want = c->output_height - y;
    if (y >= stop_at && want > 1) {
      /* Below the region: entropy decoding only, up to the last row, which is read so
       * that the scan is consumed as a whole decode would. */
      (void)jpeg_skip_scanlines(c, want - 1);
      continue;
    }
    if (want > strip_rows) want = strip_rows;
    JDIMENSION got = jpeg_read_scanlines(c, rows, want);
    if (got == 0) {
      snprintf(job->shim_error, sizeof job->shim_error, "decoder made no progress");
      return PXL_CODEC_CORRUPT;
    }
    for (JDIMENSION i = 0; i < got; i++) {
      const uint8_t *row = rows[i];
      if (cmyk) {
        cmyk_to_layout(row, job->cmyk_row, c->output_width, job->layout);
        row = job->cmyk_row;
      }
      job->rows_delivered = 1;
      int stop = job->region_fn != NULL ? job->region_fn(job->row_user, (int32_t)(y + i), (int32_t)x0, row)
                                        : job->row_fn(job->row_user, (int32_t)(y + i), row);
      if (stop != 0) {
        snprintf(job->shim_error, sizeof job->shim_error, "stopped by the caller");
        return PXL_CODEC_CORRUPT;
      }
    }
  }
  /* The output is described at the image's (scaled) size, whatever the crop. */
  return jpeg_end(job, full_width, (uint64_t)full_width * (uint64_t)pxl_layout_channels(job->layout));
}

/* All libjpeg calls happen here, after the setjmp. Returns with job->pixels set on
 * success; the caller cleans up on every path. */
static pxl_codec_status jpeg_run(jpeg_job *job) {
  j_decompress_ptr c = &job->cinfo;
  jpeg_guard *g = &job->guard;

  c->err = jpeg_std_error(&g->mgr);
  g->mgr.error_exit = on_error_exit;
  g->mgr.emit_message = on_emit_message;
  g->mgr.output_message = on_output_message;
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
    return PXL_CODEC_OK;
  }

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

  jpeg_start_decompress(c);
  if (c->output_components != (cmyk ? 4 : channels) || c->output_width == 0 || c->output_height == 0) {
    snprintf(job->shim_error, sizeof job->shim_error, "unexpected output format from libjpeg");
    return PXL_CODEC_CORRUPT;
  }
  if (job->row_fn != NULL || job->region_fn != NULL) return jpeg_run_rows(job);
  job->pixels = malloc((size_t)total);
  if (cmyk) job->cmyk_row = malloc((size_t)c->output_width * 4u);
  if (job->pixels == NULL || (cmyk && job->cmyk_row == NULL)) {
    snprintf(job->shim_error, sizeof job->shim_error, "out of memory for %llu bytes", (unsigned long long)total);
    return PXL_CODEC_NO_MEMORY;
  }

  while (c->output_scanline < c->output_height) {
    JDIMENSION y = c->output_scanline, got;
    if (cmyk) {
      JSAMPROW row = job->cmyk_row;
      got = jpeg_read_scanlines(c, &row, 1);
      if (got == 1) cmyk_to_layout(row, job->pixels + (size_t)y * stride, c->output_width, job->layout);
    } else {
      JSAMPROW rows[8];
      JDIMENSION want = c->output_height - y;
      if (want > 8) want = 8;
      for (JDIMENSION i = 0; i < want; i++) rows[i] = job->pixels + (size_t)(y + i) * stride;
      got = jpeg_read_scanlines(c, rows, want);
    }
    if (got == 0) {
      /* Only a suspending source returns 0 rows; guard anyway so no input can spin. */
      snprintf(job->shim_error, sizeof job->shim_error, "decoder made no progress");
      return PXL_CODEC_CORRUPT;
    }
  }
  return jpeg_end(job, c->output_width, stride);
}

/* Common tail of both entry points, run on every path: destroy libjpeg state, free what
 * the caller will not own, and pick the message. */
static pxl_codec_status jpeg_finish_job(jpeg_job *job, pxl_codec_status st, char *msg, size_t cap) {
  jpeg_destroy_decompress(&job->cinfo); /* safe on a zeroed or half-created object */
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
  pxl_codec_info tmp = {0, 0, 0, 1, 1, 0};
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

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* At 1/8 scale libjpeg gives each component the smallest IDCT whose output it need not
 * upsample (jdmaster.c, jpeg_core_output_dimensions): 1x1 for full-resolution components,
 * 2x2 or 4x4 for subsampled ones (4:2:0 chroma: 2x2). The 1x1 IDCT reads the DC
 * coefficient only; the reduced 2x2 and 4x4 ones read AC coefficients too. */
static int needs_ac_at_one_eighth(int h, int v, int max_h, int max_v) {
  int ssize = 1;
  while (ssize < 8 && max_h % (h * ssize * 2) == 0 && max_v % (v * ssize * 2) == 0) ssize *= 2;
  return ssize > 1;
}

/* A walk over a progressive JPEG's marker segments and scans, without decoding: what
 * first-scan thumbnails, previews and the early end of a thumbnail's transfer share.
 * Only a consistent progression is walked (libjpeg's own Ss/Se/Ah/Al and
 * coefficient-state checks, jdphuff.c): on a bogus one the full decode's result depends
 * on every scan's order. Never reads outside [data, data+size). */
typedef struct scan_walk {
  const uint8_t *data;
  size_t size, at;
  int progressive, scans;
  /* The frame's components (id, sampling factors) from SOF2/SOF10. */
  int ncomp, comp_id[4], comp_h[4], comp_v[4], max_h, max_v, width, height;
  /* Each coefficient's successive-approximation state, as libjpeg tracks it: -1 before
   * its first scan, then the Al of its last scan (0: final precision). */
  signed char coef_bits[4][64];
  /* The segment walk_next returned: [segment, end) with fill bytes dropped; for a scan,
   * end is where its entropy-coded data ends (the next marker), and these: */
  size_t segment, end;
  int ss, ah, al, scan_comps, scan_comp[4], scan_table[4];
  size_t scan_data; /* where a scan's entropy-coded data starts */
} scan_walk;

enum { WALK_SEGMENT = 1, WALK_SCAN = 2, WALK_END = 0, WALK_STOP = -1 };

static void walk_start(scan_walk *w, const uint8_t *data, size_t size) {
  memset(w, 0, sizeof *w);
  memset(w->coef_bits, -1, sizeof w->coef_bits);
  w->data = data;
  w->size = size;
  w->at = 2;
  w->max_h = w->max_v = 1;
}

/* The next marker segment (WALK_SEGMENT) or complete scan (WALK_SCAN), WALK_END at EOI,
 * or WALK_STOP: truncated, not progressive, or not understood. */
static int walk_next(scan_walk *w) {
  const uint8_t *data = w->data;
  size_t size = w->size, at = w->at;
  if (w->at == 2 && (size < 4 || data[0] != 0xFF || data[1] != 0xD8)) return WALK_STOP;
  /* A marker: 0xFF, any fill 0xFFs, then its code. */
  if (at >= size || data[at] != 0xFF) return WALK_STOP;
  while (at < size && data[at] == 0xFF) at++;
  if (at >= size) return WALK_STOP;
  uint8_t code = data[at++];
  if (code == 0xD9) return WALK_END;
  if (code == 0x00 || code == 0x01 || (code >= 0xD0 && code <= 0xD8)) return WALK_STOP;
  if (at + 2 > size) return WALK_STOP;
  size_t length = be16(data + at);
  if (length < 2 || at + length > size) return WALK_STOP;
  w->segment = at - 2; /* from the marker's last 0xFF */
  const uint8_t *body = data + at + 2;
  w->end = at + length;
  int is_frame = code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC;
  if (is_frame) {
    /* One frame, progressive (SOF2, SOF10): P, Y, X, Nf, Nf x (C, H/V, Tq). Other frame
     * types (baseline, lossless, hierarchical) have no scans to tell apart. */
    if (w->progressive || (code != 0xC2 && code != 0xCA) || length < 8) return WALK_STOP;
    w->height = (int)be16(body + 1);
    w->width = (int)be16(body + 3);
    w->ncomp = body[5];
    if (w->ncomp < 1 || w->ncomp > 4 || length != 8 + 3 * (size_t)w->ncomp) return WALK_STOP;
    for (int i = 0; i < w->ncomp; i++) {
      w->comp_id[i] = body[6 + 3 * i];
      w->comp_h[i] = body[7 + 3 * i] >> 4;
      w->comp_v[i] = body[7 + 3 * i] & 15;
      if (w->comp_h[i] < 1 || w->comp_h[i] > 4 || w->comp_v[i] < 1 || w->comp_v[i] > 4) return WALK_STOP;
      if (w->comp_h[i] > w->max_h) w->max_h = w->comp_h[i];
      if (w->comp_v[i] > w->max_v) w->max_v = w->comp_v[i];
    }
    w->progressive = 1;
  }
  if (code != 0xDA) {
    w->at = w->end;
    return WALK_SEGMENT;
  }
  /* SOS: Ns, Ns x (Cs, Td/Ta), Ss, Se, Ah/Al; then entropy-coded data up to the next
   * marker that is neither a stuffed 0xFF00 nor a restart marker. */
  if (!w->progressive || length < 6) return WALK_STOP;
  size_t ns = body[0];
  if (ns < 1 || ns > 4 || length != 6 + 2 * ns) return WALK_STOP;
  int ss = body[1 + 2 * ns], se = body[2 + 2 * ns], ah = body[3 + 2 * ns] >> 4, al = body[3 + 2 * ns] & 15;
  if (w->scans >= PXL_JPEG_MAX_SCANS) return WALK_STOP;
  if (ss == 0 ? se != 0 : (se < ss || se > 63 || ns != 1)) return WALK_STOP;
  if ((ah != 0 && al != ah - 1) || al > 13) return WALK_STOP;
  size_t data_end = w->end;
  for (;;) {
    const uint8_t *ff = memchr(data + data_end, 0xFF, size - data_end);
    if (ff == NULL) return WALK_STOP; /* the scan's end has not arrived */
    data_end = (size_t)(ff - data);
    size_t next = data_end + 1;
    while (next < size && data[next] == 0xFF) next++;
    if (next >= size) return WALK_STOP;
    if (data[next] == 0x00 || (data[next] >= 0xD0 && data[next] <= 0xD7)) {
      data_end = next + 1;
      continue;
    }
    break; /* data_end: the 0xFF (first of any fill) of the next marker */
  }
  /* Complete: its coefficients take their new state. */
  w->ss = ss;
  w->scan_comps = (int)ns;
  for (size_t j = 0; j < ns; j++) {
    int c = 0;
    while (c < w->ncomp && w->comp_id[c] != body[1 + 2 * j]) c++;
    if (c == w->ncomp) return WALK_STOP;
    if (ss > 0 && w->coef_bits[c][0] < 0) return WALK_STOP; /* AC before DC */
    for (int k = ss; k <= se; k++) {
      if (ah != (w->coef_bits[c][k] < 0 ? 0 : w->coef_bits[c][k])) return WALK_STOP;
      w->coef_bits[c][k] = (signed char)al;
    }
    w->scan_comp[j] = c;
    w->scan_table[j] = body[2 + 2 * j] >> 4; /* its DC Huffman table */
  }
  w->ah = ah;
  w->al = al;
  w->scan_data = w->end;
  w->scans++;
  w->end = data_end;
  w->at = data_end;
  return WALK_SCAN;
}

/* Whether a 1/8 decode reads the AC coefficients of the walk's component c. */
static int walk_needs_ac(const scan_walk *w, int c) {
  return needs_ac_at_one_eighth(w->comp_h[c], w->comp_v[c], w->max_h, w->max_v);
}

/* Whether the scans walked so far hold every coefficient a 1/8 decode reads at its final
 * precision. */
static int walk_has_first_scans(const scan_walk *w) {
  for (int c = 0; c < w->ncomp; c++) {
    int last = walk_needs_ac(w, c) ? 63 : 0;
    for (int k = 0; k <= last; k++)
      if (w->coef_bits[c][k] != 0) return 0;
  }
  return w->ncomp > 0;
}

size_t pxl_jpeg_dc_scans(const uint8_t *data, size_t size, uint8_t **out) {
  *out = NULL;
  if (data == NULL || size < 4) return 0;
  uint8_t *copy = malloc(size); /* the kept scans are a part; never more than size */
  if (copy == NULL) return 0;
  size_t used = 0;
  int step;
  copy[used++] = 0xFF;
  copy[used++] = 0xD8;
  scan_walk w;
  walk_start(&w, data, size);
  while ((step = walk_next(&w)) > 0) {
    /* DC scans, first pass and refinements: always kept. An AC scan (one component)
     * when that component's IDCT reads AC coefficients. */
    int keep = step == WALK_SEGMENT || w.ss == 0 || walk_needs_ac(&w, w.scan_comp[0]);
    if (keep) {
      memcpy(copy + used, data + w.segment, w.end - w.segment);
      used += w.end - w.segment;
    }
  }
  /* Incomplete needed coefficients (a file cut short): libjpeg's own decode, whose block
   * smoothing estimates what is missing, as djpeg shows it. With all of them there, the
   * copy is decoded without smoothing, as the whole file would be (smoothing runs only
   * while coefficients are missing; libjpeg-turbo 2.1+ then smooths even DC), also when
   * the AC scans it does not need never came (a thumbnail's transfer ended early). */
  if (step != WALK_END || !walk_has_first_scans(&w)) {
    free(copy);
    return 0;
  }
  copy[used++] = 0xFF;
  copy[used++] = 0xD9;
  *out = copy;
  return used;
}

/* ---- DC-only thumbnails as a baseline JPEG ----
 *
 * When no component's 1/8 IDCT reads AC coefficients (4:4:4, 4:2:2, grayscale: only
 * 4:2:0-style vertical subsampling makes libjpeg pick a 2x2 IDCT), a 1/8 thumbnail is a
 * function of the DC coefficients alone. Decoding the DC scans here (Huffman only: a
 * DC coefficient is a category and its bits, a refinement one bit) and writing them as
 * a baseline JPEG whose AC is empty lets libjpeg decode the thumbnail without the
 * whole-image coefficient buffer a progressive file needs (tens of MB to fault in for a
 * camera photo, most of the first-scan decode's time), through the same IDCT,
 * upsampling and colour conversion: the same pixels. Anything unexpected (a marker
 * inside a scan's data, a value out of range, an odd layout) gives up, and the caller
 * takes the progressive path. */

typedef struct dc_table {
  int present;
  /* Canonical Huffman decoding (JPEG Annex F.2.2.3): per code length, the first code,
   * how many, and where their symbols start in vals. */
  int32_t mincode[17], maxcode[18], valptr[17];
  uint8_t vals[256];
  /* 8-bit lookahead: length (0: longer) and symbol of the code starting with those bits. */
  uint8_t look_len[256], look_sym[256];
} dc_table;

static int dc_table_parse(dc_table *t, const uint8_t *counts, const uint8_t *symbols, int total) {
  memset(t, 0, sizeof *t);
  if (total > 256) return 0;
  memcpy(t->vals, symbols, (size_t)total);
  int32_t code = 0, k = 0;
  for (int len = 1; len <= 16; len++) {
    t->valptr[len] = k;
    t->mincode[len] = code;
    code += counts[len - 1];
    k += counts[len - 1];
    t->maxcode[len] = counts[len - 1] ? code - 1 : -1;
    if (code > (1 << len)) return 0; /* over-subscribed */
    code <<= 1;
  }
  t->maxcode[17] = 0x7fffffff;
  /* The lookahead table, for codes of up to 8 bits. */
  code = 0;
  k = 0;
  for (int len = 1; len <= 8; len++) {
    for (int i = 0; i < counts[len - 1]; i++, k++, code++) {
      int fill = 1 << (8 - len);
      for (int j = 0; j < fill; j++) {
        t->look_len[(code << (8 - len)) | j] = (uint8_t)len;
        t->look_sym[(code << (8 - len)) | j] = symbols[k];
      }
    }
    code <<= 1;
  }
  t->present = 1;
  return 1;
}

typedef struct bit_reader {
  const uint8_t *data;
  size_t at, end;
  uint32_t acc; /* bits, most significant first */
  int count;
  int failed;   /* a marker, or the end, inside the data: give up */
} bit_reader;

/* Stops at the end of the data or at a marker (a restart, or the scan's end): bits_get
 * then fails if it needs bits beyond it. */
static inline void bits_fill(bit_reader *b) {
  while (b->count <= 24) {
    if (b->at >= b->end) return;
    uint8_t byte = b->data[b->at];
    if (byte == 0xFF) {
      if (b->at + 1 >= b->end || b->data[b->at + 1] != 0x00) return;
      b->at += 2;
    } else {
      b->at++;
    }
    b->acc |= (uint32_t)byte << (24 - b->count);
    b->count += 8;
  }
}

static inline int bits_get(bit_reader *b, int n) {
  if (n == 0) return 0;
  if (b->count < n) bits_fill(b);
  if (b->count < n) {
    b->failed = 1;
    return 0;
  }
  int v = (int)(b->acc >> (32 - n));
  b->acc <<= n;
  b->count -= n;
  return v;
}

static inline int huff_decode(bit_reader *b, const dc_table *t) {
  if (b->count < 16) bits_fill(b);
  if (b->count >= 8) {
    int look = (int)(b->acc >> 24);
    if (t->look_len[look]) {
      int len = t->look_len[look];
      b->acc <<= len;
      b->count -= len;
      return t->look_sym[look];
    }
  }
  int32_t code = 0;
  for (int len = 1; len <= 16; len++) {
    code = (code << 1) | bits_get(b, 1);
    if (b->failed) return -1;
    if (t->maxcode[len] >= 0 && code <= t->maxcode[len] && code >= t->mincode[len])
      return t->vals[t->valptr[len] + code - t->mincode[len]];
  }
  b->failed = 1;
  return -1;
}

/* At a restart marker: byte-align, step over RSTn, which must be next. */
static void bits_restart(bit_reader *b) {
  /* Whole bytes still in the accumulator were read past the marker's position only if
   * the fill crossed it, and bits_fill never does: drop the partial byte's bits. */
  b->acc = 0;
  b->count = 0;
  if (b->at + 1 >= b->end || b->data[b->at] != 0xFF || b->data[b->at + 1] < 0xD0 || b->data[b->at + 1] > 0xD7) {
    b->failed = 1;
    return;
  }
  b->at += 2;
}

typedef struct bit_writer {
  uint8_t *out;
  size_t used, cap;
  uint64_t acc; /* pending bits, the oldest highest, `count` of them */
  int count;
  int failed;
} bit_writer;

static int grow(bit_writer *w, size_t need) {
  if (w->used + need <= w->cap) return 1;
  size_t cap = w->cap * 2 + need + 4096;
  uint8_t *grown = realloc(w->out, cap);
  if (!grown) {
    w->failed = 1;
    return 0;
  }
  w->out = grown;
  w->cap = cap;
  return 1;
}

static void put_byte(bit_writer *w, uint8_t byte) {
  if (grow(w, 1)) w->out[w->used++] = byte;
}

/* Appends n <= 32 bits, 0xFF bytes stuffed with 0x00 as entropy-coded data requires. */
static void put_bits(bit_writer *w, uint32_t bits, int n) {
  w->acc = (w->acc << n) | (bits & (n == 32 ? 0xFFFFFFFFu : (1u << n) - 1));
  w->count += n;
  if (w->count < 8 || !grow(w, 10)) return;
  while (w->count >= 8) {
    uint8_t byte = (uint8_t)(w->acc >> (w->count - 8));
    w->out[w->used++] = byte;
    if (byte == 0xFF) w->out[w->used++] = 0x00;
    w->count -= 8;
  }
}

static void put_raw(bit_writer *w, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) put_byte(w, bytes[i]);
}

/* The DC table written: JPEG's example luminance DC table (Annex K.3), categories 0-11. */
static const uint8_t dc_counts[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t dc_symbols[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

size_t pxl_jpeg_dc_baseline(const uint8_t *data, size_t size, uint8_t **out) {
  *out = NULL;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  dc_table tables[4];
  memset(tables, 0, sizeof tables);
  int32_t *dc[4] = {NULL, NULL, NULL, NULL};
  int blocks_w[4] = {0}, blocks_h[4] = {0}, mcus_w = 0, mcus_h = 0, restart = 0, ok = 0, step, scans = 0;
  const uint8_t *sof = NULL; /* the frame's segment, rewritten as SOF0 */
  size_t sof_len = 0;
  /* The segments libjpeg reads to pick the colour space and the quantisation: kept. */
  bit_writer o = {0};
  put_byte(&o, 0xFF);
  put_byte(&o, 0xD8);
  while ((step = walk_next(&w)) > 0) {
    const uint8_t *seg = data + w.segment;
    size_t seg_len = w.end - w.segment;
    if (step == WALK_SEGMENT) {
      uint8_t code = seg[1];
      /* A table redefined between scans would apply only to the scans after it. */
      if (code == 0xDB && scans > 0) goto done;
      if (code == 0xDB || code == 0xE0 || code == 0xEE) put_raw(&o, seg, seg_len); /* DQT, JFIF, Adobe */
      if (code == 0xDD) {
        if (seg_len != 6) goto done;
        restart = (int)be16(seg + 4);
      }
      if (code == 0xC4) {
        /* DHT: Tc/Th, 16 counts, symbols; repeated. Only DC tables matter here. */
        size_t at = 4;
        while (at < seg_len) {
          if (at + 17 > seg_len) goto done;
          int tc = seg[at] >> 4, th = seg[at] & 15, total = 0;
          for (int i = 0; i < 16; i++) total += seg[at + 1 + i];
          if (th > 3 || at + 17 + (size_t)total > seg_len) goto done;
          if (tc == 0 && !dc_table_parse(&tables[th], seg + at + 1, seg + at + 17, total)) goto done;
          at += 17 + (size_t)total;
        }
      }
      if (code == 0xC2 || code == 0xCA) {
        if (seg[4] != 8 || code == 0xCA) goto done; /* 8-bit, Huffman-coded only */
        sof = seg;
        sof_len = seg_len;
        for (int c = 0; c < w.ncomp; c++)
          if (walk_needs_ac(&w, c)) goto done; /* its 1/8 IDCT reads AC: not DC-only */
        mcus_w = (w.width + 8 * w.max_h - 1) / (8 * w.max_h);
        mcus_h = (w.height + 8 * w.max_v - 1) / (8 * w.max_v);
        if (w.width == 0 || w.height == 0) goto done;
        for (int c = 0; c < w.ncomp; c++) {
          blocks_w[c] = mcus_w * w.comp_h[c];
          blocks_h[c] = mcus_h * w.comp_v[c];
          dc[c] = calloc((size_t)blocks_w[c] * (size_t)blocks_h[c], sizeof(int32_t));
          if (!dc[c]) goto done;
        }
      }
      continue;
    }
    scans++;
    if (w.ss != 0) continue; /* AC scans: not needed */
    /* A DC scan: first pass (Ah 0) or refinement. */
    bit_reader b = {data, w.scan_data, w.end, 0, 0, 0};
    int32_t pred[4] = {0, 0, 0, 0};
    for (int j = 0; j < w.scan_comps; j++)
      if (w.ah == 0 && !tables[w.scan_table[j]].present) goto done;
    long units, per_row;
    int single = w.scan_comps == 1;
    if (single) {
      /* Non-interleaved: the component's own blocks, row by row (libjpeg's
       * downsampled size: ceil(width * h / max_h), in blocks). */
      int c = w.scan_comp[0];
      int cw = ((w.width * w.comp_h[c] + w.max_h - 1) / w.max_h + 7) / 8;
      int ch = ((w.height * w.comp_v[c] + w.max_v - 1) / w.max_v + 7) / 8;
      per_row = cw;
      units = (long)cw * ch;
    } else {
      per_row = mcus_w;
      units = (long)mcus_w * mcus_h;
    }
    /* Locals, not the walker's fields: the stores into dc[] could alias those. */
    const int ah = w.ah, al = w.al, ncomps = w.scan_comps;
    int comp[4], hs[4], vs[4], stride[4];
    const dc_table *table[4];
    for (int j = 0; j < ncomps; j++) {
      comp[j] = w.scan_comp[j];
      hs[j] = single ? 1 : w.comp_h[comp[j]];
      vs[j] = single ? 1 : w.comp_v[comp[j]];
      stride[j] = blocks_w[comp[j]];
      table[j] = &tables[w.scan_table[j]];
    }
    long row = 0, col = 0;
    for (long u = 0; u < units; u++) {
      if (restart && u > 0 && u % restart == 0) {
        bits_restart(&b);
        memset(pred, 0, sizeof pred);
      }
      for (int j = 0; j < ncomps; j++) {
        int32_t *base = dc[comp[j]] + (row * vs[j]) * stride[j] + col * hs[j];
        for (int v = 0; v < vs[j]; v++) {
          for (int h = 0; h < hs[j]; h++) {
            int32_t *coef = base + v * stride[j] + h;
            if (ah == 0) {
              int t = huff_decode(&b, table[j]);
              if (t < 0 || t > 11) goto done;
              int diff = bits_get(&b, t);
              if (t && diff < (1 << (t - 1))) diff -= (1 << t) - 1; /* JPEG's EXTEND */
              pred[j] += diff;
              if (pred[j] < -32768 || pred[j] > 32767) goto done; /* no real DC; and no overflow */
              *coef = (int32_t)((uint32_t)pred[j] << al);
            } else if (bits_get(&b, 1)) {
              *coef |= 1 << al;
            }
          }
        }
      }
      if (b.failed) goto done;
      if (++col == per_row) {
        col = 0;
        row++;
      }
    }
  }
  if (step != WALK_END || !sof || !walk_has_first_scans(&w)) goto done;
  {
    /* SOF0: precision 8, the frame's size and components (ids, sampling, tables). */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xC0);
    put_raw(&o, sof + 2, sof_len - 2);
    /* DHT: DC table 0 (categories 0-11), AC table 0 with one code, "0", for EOB. */
    uint8_t dht[] = {0xFF, 0xC4, 0, 2 + 17 + 12 + 17 + 1, 0x00};
    put_raw(&o, dht, sizeof dht);
    put_raw(&o, dc_counts, 16);
    put_raw(&o, dc_symbols, 12);
    uint8_t ac[18] = {0x10, 1};
    put_raw(&o, ac, sizeof ac); /* Tc 1 Th 0, one code of length 1, then its symbol 0x00 */
    /* SOS: every component, tables 0/0, Ss 0, Se 63, Ah/Al 0. */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xDA);
    put_byte(&o, 0);
    put_byte(&o, (uint8_t)(6 + 2 * w.ncomp));
    put_byte(&o, (uint8_t)w.ncomp);
    for (int c = 0; c < w.ncomp; c++) {
      put_byte(&o, (uint8_t)w.comp_id[c]);
      put_byte(&o, 0x00);
    }
    put_byte(&o, 0);
    put_byte(&o, 63);
    put_byte(&o, 0);
    /* The DC table's codes (canonical, from dc_counts). */
    uint16_t codes[12];
    uint8_t lengths[12];
    int code = 0, k = 0;
    for (int len = 1; len <= 16; len++, code <<= 1)
      for (int i = 0; i < dc_counts[len - 1]; i++, k++, code++) {
        codes[k] = (uint16_t)code;
        lengths[k] = (uint8_t)len;
      }
    int32_t pred[4] = {0, 0, 0, 0};
    for (int my = 0; my < mcus_h; my++)
      for (int mx = 0; mx < mcus_w; mx++)
        for (int c = 0; c < w.ncomp; c++)
          for (int v = 0; v < w.comp_v[c]; v++)
            for (int h = 0; h < w.comp_h[c]; h++) {
              int32_t value = dc[c][(long)(my * w.comp_v[c] + v) * blocks_w[c] + mx * w.comp_h[c] + h];
              int32_t diff = value - pred[c];
              pred[c] = value;
              uint32_t magnitude = (uint32_t)(diff < 0 ? -diff : diff);
              int t = magnitude ? 32 - __builtin_clz(magnitude) : 0;
              if (t > 11) goto done;
              /* The category's code, its t bits (negative: diff - 1), then EOB ("0"). */
              uint32_t extra = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << t) - 1);
              put_bits(&o, ((uint32_t)codes[t] << (t + 1)) | (extra << 1), lengths[t] + t + 1);
            }
    if (o.count) put_bits(&o, 0xFF, 8 - o.count); /* pad with ones */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xD9);
    ok = !o.failed;
  }
done:
  for (int c = 0; c < 4; c++) free(dc[c]);
  if (!ok) {
    free(o.out);
    return 0;
  }
  *out = o.out;
  return o.used;
}

size_t pxl_jpeg_progressive_prefix(const uint8_t *data, size_t size, int32_t *scans) {
  *scans = 0;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  size_t complete = 0;
  int step;
  while ((step = walk_next(&w)) > 0) {
    if (step == WALK_SCAN) complete = w.end;
  }
  if (!w.progressive || w.scans == 0) return 0;
  *scans = w.scans;
  return complete;
}

size_t pxl_jpeg_first_scans_end(const uint8_t *data, size_t size, int32_t *width, int32_t *height) {
  *width = *height = 0;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  int step;
  while ((step = walk_next(&w)) > 0) {
    if (step == WALK_SCAN && walk_has_first_scans(&w)) {
      /* The frame's size, for the caller to check that 1/8 covers what it wants. */
      *width = w.width;
      *height = w.height;
      return w.end;
    }
  }
  return 0;
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
  pxl_codec_status st = jpeg_finish_job(job, jpeg_run(job), out->message, sizeof out->message);
  *rows_delivered = job->rows_delivered;
  if (st == PXL_CODEC_OK) {
    out->pixels = job->pixels;
    out->warnings = job->guard.warnings;
  } else {
    /* Nothing half-filled leaks out: a failed decode reports only the message and the
     * warnings seen before the error. */
    out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
    out->warnings = job->guard.warnings;
  }
  free(job);
  return st;
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
    size_t len = be16(data + pos + 2);
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
