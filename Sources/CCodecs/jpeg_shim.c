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
  int32_t layout, scale_denom;
  uint64_t max_pixels;
  pxl_codec_info *info;
  pxl_codec_output *out;
  uint8_t *pixels;   /* owned until handed to out on success */
  uint8_t *cmyk_row; /* scratch for the CMYK path */
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

static int32_t layout_channels(int32_t layout) {
  switch (layout) {
    case PXL_CODEC_RGBA:
    case PXL_CODEC_BGRA: return 4;
    case PXL_CODEC_RGB: return 3;
    case PXL_CODEC_GRAY: return 1;
    default: return 0;
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
  int32_t channels = layout_channels(job->layout);
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
  /* Reads to EOI so trailing problems are reported as warnings, as libjpeg's own tools do. */
  (void)jpeg_finish_decompress(c);

  pxl_codec_output *out = job->out;
  out->width = (int32_t)c->output_width;
  out->height = (int32_t)c->output_height;
  out->stride = (int32_t)stride;
  out->channels = channels;
  out->has_alpha = 0;
  return PXL_CODEC_OK;
}

/* Common tail of both entry points, run on every path: destroy libjpeg state, free what
 * the caller will not own, and pick the message. */
static pxl_codec_status jpeg_finish_job(jpeg_job *job, pxl_codec_status st, char *msg, size_t cap) {
  jpeg_destroy_decompress(&job->cinfo); /* safe on a zeroed or half-created object */
  free(job->cmyk_row);
  job->cmyk_row = NULL;
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
  pxl_codec_info tmp = {0, 0, 0, 1};
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

static pxl_codec_status jpeg_decode_once(const uint8_t *data, size_t size, int dc_scans_only, int32_t layout,
                                         int32_t scale_denom, uint64_t max_pixels, pxl_codec_output *out);

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
  int ss, scan_comps, scan_comp[4];
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
  }
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

pxl_codec_status pxl_jpeg_decode(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom, uint64_t max_pixels, pxl_codec_output *out) {
  return pxl_jpeg_decode_with_options(data, size, layout, scale_denom, max_pixels, 0, out);
}

pxl_codec_status pxl_jpeg_decode_with_options(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                              uint64_t max_pixels, uint32_t options, pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  if (layout_channels(layout) == 0) {
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
  if (scale_denom == 8 && !(options & PXL_JPEG_ALL_SCANS)) dc_size = pxl_jpeg_dc_scans(data, size, &dc_scans);
  pxl_codec_status st;
  if (dc_size != 0) {
    st = jpeg_decode_once(dc_scans, dc_size, 1, layout, scale_denom, max_pixels, out);
    free(dc_scans);
    /* A file the DC copy fails on gets the full decode: its error (or its image) is the
     * one the caller would have had without this shortcut. */
    if (st == PXL_CODEC_OK || st == PXL_CODEC_TOO_MANY_PIXELS || st == PXL_CODEC_NO_MEMORY) return st;
    memset(out, 0, sizeof *out);
  }
  static const uint8_t empty[1] = {0};
  return jpeg_decode_once(data ? data : empty, size, 0, layout, scale_denom, max_pixels, out);
}

/* One decode of [data, data+size) into *out (see pxl_jpeg_decode). */
static pxl_codec_status jpeg_decode_once(const uint8_t *data, size_t size, int dc_scans_only, int32_t layout,
                                         int32_t scale_denom, uint64_t max_pixels, pxl_codec_output *out) {
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
  pxl_codec_status st = jpeg_finish_job(job, jpeg_run(job), out->message, sizeof out->message);
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
