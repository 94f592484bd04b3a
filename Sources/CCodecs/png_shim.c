/*
 * PNG through libpng 1.6, with every libpng call behind a setjmp.
 *
 * Same structure as jpeg_shim.c: the public function owns a zeroed job, a guarded
 * function does setjmp and all libpng work, and cleanup runs once, outside, on every
 * path. libpng's own limits stay at their defaults (8 MB per ancillary chunk, 1000
 * cached ancillary chunks, CRC errors fatal in critical chunks and warnings in
 * ancillary ones, benign errors as warnings): that is the behaviour the corpus
 * expectations were recorded with. Three additions close the memory and CPU holes those
 * defaults leave open on hostile files: chunks longer than the data, and chains of iCCP
 * chunks, are refused before libpng sees them (chunk_precheck); text chunks are skipped
 * unparsed (png_run).
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"
#include "pxl_png_fast.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

/* libpng refuses wider/taller images by default (PNG_USER_WIDTH_MAX): its row buffers
 * grow with width, independent of the caller's pixel budget. We apply the same limit
 * ourselves, after the header is validated, so it reports TOO_MANY_PIXELS rather than
 * libpng's generic "Invalid IHDR data". */
#define PXL_PNG_MAX_DIMENSION 1000000u

typedef struct png_job {
  png_structp png;
  png_infop info;
  const uint8_t *data;
  size_t size, pos;
  int info_only;
  int32_t layout;
  uint64_t max_pixels;
  pxl_codec_info *info_out;
  pxl_codec_color *color_out; /* info_only: the colour chunks instead of the info */
  pxl_codec_output *out;
  uint8_t *pixels;  /* owned until handed to out on success */
  png_bytep *rows;
  pxl_codec_row_fn row_fn;  /* rows mode: hand rows over instead of keeping a bitmap */
  int no_fast_path;         /* PXL_PNG_LIBPNG_ONLY: every file through libpng (tests compare) */
  int fast_path_only;       /* PXL_PNG_FAST_PATH_ONLY: fail where png_fast.c does not apply */
  void *row_user;
  int32_t warnings;
  char fatal[256];
  char last_warning[256];
  char shim_error[128];
} png_job;

static void on_error(png_structp png, png_const_charp msg) {
  png_job *job = png_get_error_ptr(png);
  snprintf(job->fatal, sizeof job->fatal, "%s", msg ? msg : "error");
  png_longjmp(png, 1); /* never returns: libpng requires that of an error handler */
}

static void on_warning(png_structp png, png_const_charp msg) {
  /* libpng's default prints to stderr; a library must not. Benign errors (CRC errors in
   * ancillary chunks, "Extra compressed data", bad iCCP, ...) arrive here too because
   * libpng's read structs default to treating them as warnings. */
  png_job *job = png_get_error_ptr(png);
  if (job->warnings < INT32_MAX) job->warnings++;
  snprintf(job->last_warning, sizeof job->last_warning, "%s", msg ? msg : "warning");
}

static void on_read(png_structp png, png_bytep dst, size_t len) {
  png_job *job = png_get_io_ptr(png);
  if (len == 0) return;
  /* pos <= size always holds, so this cannot wrap. Short data is an error, exactly like
   * libpng's stdio reader (and with its message), never a read past the buffer. */
  if (len > job->size - job->pos) png_error(png, "Read Error");
  memcpy(dst, job->data + job->pos, len);
  job->pos += len;
}

static int orientation_of(png_structp png, png_infop info) {
#ifdef PNG_eXIf_SUPPORTED
  png_uint_32 n = 0;
  png_bytep exif = NULL;
  if (png_get_eXIf_1(png, info, &n, &exif) != 0 && exif != NULL) {
    /* eXIf holds the bare TIFF block; tolerate writers that kept JPEG's prefix. */
    if (n >= 6 && memcmp(exif, "Exif\0\0", 6) == 0) { exif += 6; n -= 6; }
    return pxl_exif_orientation(exif, n);
  }
#else
  (void)png; (void)info;
#endif
  return 1;
}

/* iCCP may appear once; libpng inflates every copy before IDAT (up to 8 MB each) and
 * keeps no count, so a chain of them costs ~2 s of CPU per MB of input. A few
 * duplicates are tolerated (libpng warns "too many profiles"), a chain is refused. */
#define PXL_PNG_MAX_ICCP 4

/*
 * A walk over the chunk headers before libpng sees the file, refusing two things whose
 * cost libpng's defaults do not bound (the whole file is in memory, so this is cheap):
 *  - a chunk longer than the data left. libpng only warns about an oversized chunk
 *    ("chunk data is too large" is a benign error), allocates the declared length, up
 *    to 2 GB for a 57-byte file, and only then fails with "Read Error". Refusing it
 *    first reaches the same outcome without the allocation.
 *  - more than PXL_PNG_MAX_ICCP iCCP chunks before IDAT.
 * The walk stops where libpng stops reading: IEND, or the first IDAT header for a
 * header-only parse. Returns 1 and fills why[] to refuse; 0 leaves every other problem
 * (bad signature, bad CRC, bad lengths over 2^31) for libpng to report in its words.
 */
static int chunk_precheck(const uint8_t *d, size_t size, int stop_at_idat, char *why, size_t cap) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (d == NULL || size < 8 || memcmp(d, sig, 8) != 0) return 0;
  size_t pos = 8;
  int iccp = 0, seen_idat = 0;
  while (size - pos >= 8) {
    const uint8_t *c = d + pos;
    uint32_t len = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
    if (len > PNG_UINT_31_MAX) return 0; /* libpng: "PNG unsigned integer out of range" */
    if (memcmp(c + 4, "IDAT", 4) == 0) {
      if (stop_at_idat) return 0;
      seen_idat = 1;
    }
    if (!seen_idat && memcmp(c + 4, "iCCP", 4) == 0 && ++iccp > PXL_PNG_MAX_ICCP) {
      snprintf(why, cap, "iCCP: more than %d profiles", PXL_PNG_MAX_ICCP);
      return 1;
    }
    if ((uint64_t)len + 12 > size - pos) {
      char name[20] = "";
      for (int i = 0, k = 0; i < 4; i++) { /* printable like libpng's chunk names */
        uint8_t b = c[4 + i];
        int alpha = (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z');
        k += snprintf(name + k, sizeof name - (size_t)k, alpha ? "%c" : "[%02X]", b);
      }
      snprintf(why, cap, "%s: chunk of %u bytes extends past the end of the data", name, (unsigned)len);
      return 1;
    }
    if (memcmp(c + 4, "IEND", 4) == 0) return 0;
    pos += (size_t)len + 12;
  }
  return 0; /* a truncated chunk header: libpng reports it */
}

/* GRAY from a colour source, in place: libjpeg's BT.601 integer weights on the stored
 * values (see the header). Output pixel i is written at i, after bytes 3i..3i+2 were read. */
static void rgb_to_gray(uint8_t *p, size_t pixels) {
  for (size_t i = 0; i < pixels; i++)
    p[i] = (uint8_t)((19595u * p[3 * i] + 38470u * p[3 * i + 1] + 7471u * p[3 * i + 2] + 32768u) >> 16);
}

static void set_output(png_job *job, png_uint_32 w, png_uint_32 h, int32_t channels, int has_alpha) {
  pxl_codec_output *out = job->out;
  out->width = (int32_t)w;
  out->height = (int32_t)h;
  out->channels = channels;
  out->stride = (int32_t)((size_t)w * (size_t)channels);
  out->has_alpha = (channels == 4) ? has_alpha : 0;
}

/* Rows mode: converts a row if needed and hands it over; non-zero when the caller stops. */
static int hand_over_row(png_job *job, png_uint_32 y, uint8_t *row, png_uint_32 w, int gray_from_colour) {
  if (gray_from_colour) rgb_to_gray(row, w);
  if (job->row_fn(job->row_user, (int32_t)y, row) == 0) return 0;
  snprintf(job->shim_error, sizeof job->shim_error, "stopped by the caller");
  return 1;
}

/* The colour chunks libpng kept (it drops, with a warning, an iCCP whose profile does not
 * fit the image, and a cHRM or gAMA out of range). */
static pxl_codec_status colour_of(png_job *job) {
  png_structp png = job->png;
  png_infop info = job->info;
  pxl_codec_color *c = job->color_out;
  png_charp name = NULL;
  int compression = 0;
  png_bytep profile = NULL;
  png_uint_32 length = 0;
  if (png_get_iCCP(png, info, &name, &compression, &profile, &length) != 0 && profile != NULL && length > 0 &&
      length <= PXL_ICC_MAX_BYTES) {
    c->icc = malloc(length);
    if (c->icc == NULL) {
      snprintf(job->shim_error, sizeof job->shim_error, "out of memory");
      return PXL_CODEC_NO_MEMORY;
    }
    memcpy(c->icc, profile, length);
    c->icc_size = length;
  }
  int intent = 0;
  c->srgb = png_get_sRGB(png, info, &intent) != 0;
  png_fixed_point v[8];
  if (png_get_valid(png, info, PNG_INFO_cHRM) &&
      png_get_cHRM_fixed(png, info, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 0) {
    c->has_chrm = 1;
    for (int i = 0; i < 8; i++) c->chrm[i] = (int32_t)v[i];
  }
  png_fixed_point gamma = 0;
  if (png_get_valid(png, info, PNG_INFO_gAMA) && png_get_gAMA_fixed(png, info, &gamma) != 0 && gamma > 0)
    c->gamma = (int32_t)gamma;
  return PXL_CODEC_OK;
}

/* The transformations to the layout asked, in libpng's own pipeline order, then
 * png_read_update_info (which starts the progressive reader's rows too), and a check of
 * the rows libpng will give. No png_set_gamma / png_set_background / png_set_alpha_mode:
 * stored sample values come out untouched. GRAY from a colour source
 * (*gray_from_colour): libpng delivers RGB and we apply the BT.601 weights ourselves (see
 * the header for why not png_set_rgb_to_gray_fixed). */
static pxl_codec_status png_transforms(png_job *job, int ctype, png_uint_32 w, int *gray_from_colour) {
  png_structp png = job->png;
  png_infop info = job->info;
  int32_t channels = pxl_layout_channels(job->layout);
  *gray_from_colour = job->layout == PXL_CODEC_GRAY && (ctype & PNG_COLOR_MASK_COLOR) != 0;
  int32_t decoded_channels = *gray_from_colour ? 3 : channels;
  png_set_expand(png);    /* palette -> RGB, gray 1/2/4 -> 8 bits, tRNS -> alpha */
  png_set_strip_16(png);  /* high byte, as the corpus md5s were made */
  switch (job->layout) {
    case PXL_CODEC_RGBA:
    case PXL_CODEC_BGRA:
      png_set_gray_to_rgb(png);
      png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER); /* only acts when there is no alpha */
      if (job->layout == PXL_CODEC_BGRA) png_set_bgr(png);
      break;
    default: /* RGB, GRAY */
      png_set_strip_alpha(png);
      if (job->layout == PXL_CODEC_RGB) png_set_gray_to_rgb(png);
      break;
  }
  (void)png_set_interlace_handling(png); /* Adam7: libpng merges the passes into our rows */
  png_read_update_info(png, info); /* the progressive reader's png_start_read_image too */
  size_t stride = (size_t)w * (size_t)decoded_channels; /* <= 1e6 * 4: no overflow */
  if (png_get_bit_depth(png, info) != 8 || png_get_channels(png, info) != decoded_channels ||
      png_get_rowbytes(png, info) != stride) {
    snprintf(job->shim_error, sizeof job->shim_error, "unexpected row format after transformations");
    return PXL_CODEC_CORRUPT;
  }
  return PXL_CODEC_OK;
}

static pxl_codec_status png_run(png_job *job) {
  png_structp png = job->png;
  png_infop info = job->info;
  if (setjmp(png_jmpbuf(png))) {
    if (strstr(job->fatal, "ut of memory") || strstr(job->fatal, "nsufficient memory")) return PXL_CODEC_NO_MEMORY;
    return PXL_CODEC_CORRUPT;
  }

  if (chunk_precheck(job->data, job->size, job->info_only, job->shim_error, sizeof job->shim_error)) return PXL_CODEC_CORRUPT;
  png_set_read_fn(png, job, on_read);
#ifdef PNG_HANDLE_AS_UNKNOWN_SUPPORTED
  /* Text chunks are never used here, and zTXt/iTXt are a decompression bomb under
   * libpng's defaults: each may inflate to 8 MB and up to 1000 are kept in memory, so a
   * 0.5 MB file can pin 470 MB and an 8 MB one about 8 GB. Listing them as "never"
   * makes libpng skip them (CRC-checked, not parsed, not inflated, not stored). */
  static const png_byte skipped[] = "tEXt\0zTXt\0iTXt"; /* 3 names, 5 bytes each */
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, skipped, 3);
#endif
  /* Size is our call (max_pixels + PXL_PNG_MAX_DIMENSION, checked below), made after
   * libpng has validated the header. */
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_read_info(png, info);

  png_uint_32 w = 0, h = 0;
  int depth = 0, ctype = 0, interlace = 0;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
  int has_alpha = (ctype & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS) != 0;

  if (job->color_out != NULL) return colour_of(job);
  if (job->info_only) {
    job->info_out->width = (int32_t)w; /* png_get_uint_31 already capped both at 2^31-1 */
    job->info_out->height = (int32_t)h;
    job->info_out->has_alpha = has_alpha;
    job->info_out->orientation = orientation_of(png, info);
    return PXL_CODEC_OK;
  }

  if ((uint64_t)w * h > job->max_pixels || w > PXL_PNG_MAX_DIMENSION || h > PXL_PNG_MAX_DIMENSION) {
    snprintf(job->shim_error, sizeof job->shim_error, "%ux%u is over the limit of %llu pixels (or %u per side)",
             (unsigned)w, (unsigned)h, (unsigned long long)job->max_pixels, PXL_PNG_MAX_DIMENSION);
    return PXL_CODEC_TOO_MANY_PIXELS;
  }

  int32_t channels = pxl_layout_channels(job->layout);
  if (depth == 8 && interlace == PNG_INTERLACE_NONE && ctype != PNG_COLOR_TYPE_PALETTE &&
      png_get_valid(png, info, PNG_INFO_tRNS) == 0 && channels > 0 && !job->no_fast_path) {
    /* The clean common case: the image data without libpng's rows (png_fast.c); libpng
     * keeps everything else, and this file if it is anything but clean. */
    pxl_png_fast_result fast = pxl_png_fast_image_data(job->data, job->size, job->pos, w, h, ctype, job->layout, channels,
                                                       job->row_fn, job->row_user, &job->pixels, job->shim_error,
                                                       sizeof job->shim_error);
    if (fast != PXL_PNG_FAST_NOT_HANDLED) {
      if (fast == PXL_PNG_FAST_NO_MEMORY) return PXL_CODEC_NO_MEMORY;
      if (fast == PXL_PNG_FAST_STOPPED) return PXL_CODEC_CORRUPT;
      set_output(job, w, h, channels, has_alpha);
      return PXL_CODEC_OK;
    }
  }
  if (job->fast_path_only) {
    snprintf(job->shim_error, sizeof job->shim_error, "not a file for the fast path");
    return PXL_CODEC_UNSUPPORTED;
  }
  int gray_from_colour = 0;
  pxl_codec_status st = png_transforms(job, ctype, w, &gray_from_colour);
  if (st != PXL_CODEC_OK) return st;
  size_t stride = (size_t)w * (size_t)(gray_from_colour ? 3 : channels);
  if (job->row_fn != NULL && interlace == PNG_INTERLACE_NONE) {
    /* Rows mode: one row buffer, never the bitmap. The caller's function runs between
     * png_read_row calls, so a libpng longjmp never crosses its frames. */
    job->pixels = malloc(stride ? stride : 1);
    if (job->pixels == NULL) {
      snprintf(job->shim_error, sizeof job->shim_error, "out of memory");
      return PXL_CODEC_NO_MEMORY;
    }
    for (png_uint_32 y = 0; y < h; y++) {
      png_read_row(png, job->pixels, NULL);
      if (hand_over_row(job, y, job->pixels, w, gray_from_colour)) return PXL_CODEC_CORRUPT;
    }
    png_read_end(png, NULL);
    free(job->pixels);
    job->pixels = NULL;
    set_output(job, w, h, channels, has_alpha);
    return PXL_CODEC_OK;
  }

  /* Both sides <= 1e6, so this fits in 64 bits; size_t may be 32 bits. The row pointer
   * array (h <= 1e6 pointers) always fits. */
  uint64_t total = (uint64_t)stride * h;
  if (total > SIZE_MAX) {
    snprintf(job->shim_error, sizeof job->shim_error, "output too large for this platform");
    return PXL_CODEC_TOO_MANY_PIXELS;
  }
  job->pixels = malloc((size_t)total);
  job->rows = malloc((size_t)h * sizeof(png_bytep));
  if (job->pixels == NULL || job->rows == NULL) {
    snprintf(job->shim_error, sizeof job->shim_error, "out of memory for %llu bytes", (unsigned long long)total);
    return PXL_CODEC_NO_MEMORY;
  }
  for (png_uint_32 y = 0; y < h; y++) job->rows[y] = job->pixels + (size_t)y * stride;
  png_read_image(png, job->rows);
  if (job->row_fn != NULL) {
    /* Rows mode on an interlaced image: Adam7 needs every pass before any row is final,
     * so the bitmap had to exist; hand its rows over and free it below. */
    png_read_end(png, NULL);
    for (png_uint_32 y = 0; y < h; y++)
      if (hand_over_row(job, y, job->rows[y], w, gray_from_colour)) return PXL_CODEC_CORRUPT;
    free(job->pixels);
    job->pixels = NULL;
    set_output(job, w, h, channels, has_alpha);
    return PXL_CODEC_OK;
  }
  /* Validate the rest of the file up to IEND: a truncated tail or a CRC-broken critical
   * chunk is an error, as in libpng's reference readers. NULL end-info: the chunks after
   * IDAT are only CRC-checked and skipped, never parsed or inflated (we have no use for
   * late text/eXIf), which is also what the corpus's warning counts were recorded with. */
  png_read_end(png, NULL);

  if (gray_from_colour) {
    size_t n = (size_t)w * h;
    rgb_to_gray(job->pixels, n);
    uint8_t *shrunk = realloc(job->pixels, n ? n : 1);
    if (shrunk != NULL) job->pixels = shrunk; /* a failed shrink leaves a valid, larger block */
  }
  set_output(job, w, h, channels, has_alpha);
  return PXL_CODEC_OK;
}

/* Creates libpng state, runs the job, destroys everything. Frees job->pixels unless OK. */
static pxl_codec_status png_do(png_job *job, char *msg, size_t cap) {
  pxl_codec_status st;
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, on_error, on_warning);
  if (job->png != NULL) job->info = png_create_info_struct(job->png);
  if (job->png == NULL || job->info == NULL) {
    snprintf(job->shim_error, sizeof job->shim_error, "out of memory");
    st = PXL_CODEC_NO_MEMORY;
  } else {
    st = png_run(job);
  }
  if (job->png != NULL) png_destroy_read_struct(&job->png, job->info ? &job->info : NULL, NULL);
  free(job->rows);
  job->rows = NULL;
  if (st != PXL_CODEC_OK) {
    free(job->pixels);
    job->pixels = NULL;
    const char *why = job->shim_error[0] ? job->shim_error : job->fatal;
    pxl_set_message(msg, cap, "PNG", why[0] ? why : "decode failed");
  } else {
    pxl_set_message(msg, cap, "PNG", job->last_warning);
  }
  return st;
}

pxl_codec_status pxl_png_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap) {
  if (message != NULL && message_cap > 0) message[0] = '\0';
  if (info == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(info, 0, sizeof *info);
  info->orientation = 1;
  png_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    pxl_set_message(message, message_cap, "PNG", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  pxl_codec_info tmp = {0, 0, 0, 1, 1, 0, 0};
  job->data = data;
  job->size = data ? size : 0; /* NULL data reads as empty: "Read Error" */
  job->info_only = 1;
  job->info_out = &tmp;
  pxl_codec_status st = png_do(job, message, message_cap);
  if (st == PXL_CODEC_OK) *info = tmp;
  free(job);
  return st;
}

static pxl_codec_status png_decode_into(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                        uint32_t options, pxl_codec_row_fn row_fn, void *row_user,
                                        pxl_codec_output *out);

pxl_codec_status pxl_png_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels, pxl_codec_output *out) {
  return png_decode_into(data, size, layout, max_pixels, 0, NULL, NULL, out);
}

pxl_codec_status pxl_png_decode_with_options(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                             uint32_t options, pxl_codec_output *out) {
  return png_decode_into(data, size, layout, max_pixels, options, NULL, NULL, out);
}

pxl_codec_status pxl_png_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out) {
  if (row_fn == NULL) {
    if (out != NULL) {
      memset(out, 0, sizeof *out);
      pxl_set_message(out->message, sizeof out->message, "PNG", "no row function");
    }
    return PXL_CODEC_UNSUPPORTED;
  }
  return png_decode_into(data, size, layout, max_pixels, 0, row_fn, user, out);
}

static pxl_codec_status png_decode_into(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                        uint32_t options, pxl_codec_row_fn row_fn, void *row_user,
                                        pxl_codec_output *out) {
  if (out == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  if (pxl_layout_channels(layout) == 0) {
    pxl_set_message(out->message, sizeof out->message, "PNG", "invalid layout");
    return PXL_CODEC_UNSUPPORTED;
  }
  png_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    pxl_set_message(out->message, sizeof out->message, "PNG", "out of memory");
    return PXL_CODEC_NO_MEMORY;
  }
  job->data = data;
  job->size = data ? size : 0;
  job->layout = layout;
  job->max_pixels = max_pixels;
  job->out = out;
  job->row_fn = row_fn;
  job->row_user = row_user;
  job->no_fast_path = (options & PXL_PNG_LIBPNG_ONLY) != 0;
  job->fast_path_only = (options & PXL_PNG_FAST_PATH_ONLY) != 0;
  pxl_codec_status st = png_do(job, out->message, sizeof out->message);
  if (st == PXL_CODEC_OK) {
    out->pixels = job->pixels;
  } else {
    out->width = out->height = out->stride = out->channels = out->has_alpha = 0;
  }
  out->warnings = job->warnings;
  free(job);
  return st;
}

/* Only files with a colour chunk before IDAT reach libpng (which inflates iCCP and
 * checks every one of them); the rest cost a walk over the chunk headers. */
pxl_codec_status pxl_png_color(const uint8_t *data, size_t size, pxl_codec_color *color) {
  if (color == NULL) return PXL_CODEC_UNSUPPORTED;
  memset(color, 0, sizeof *color);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (data == NULL || size < 8 || memcmp(data, sig, 8) != 0) return PXL_CODEC_CORRUPT;
  int found = 0;
  for (size_t pos = 8; size - pos >= 8 && !found;) {
    const uint8_t *c = data + pos;
    uint32_t len = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
    if (memcmp(c + 4, "IDAT", 4) == 0 || memcmp(c + 4, "IEND", 4) == 0) break;
    found = memcmp(c + 4, "iCCP", 4) == 0 || memcmp(c + 4, "sRGB", 4) == 0 || memcmp(c + 4, "cHRM", 4) == 0 ||
            memcmp(c + 4, "gAMA", 4) == 0;
    if ((uint64_t)len + 12 > size - pos) break;
    pos += (size_t)len + 12;
  }
  if (!found) return PXL_CODEC_OK;
  png_job *job = calloc(1, sizeof *job);
  if (job == NULL) return PXL_CODEC_NO_MEMORY;
  pxl_codec_info unused = {0, 0, 0, 1, 1, 0, 0};
  job->data = data;
  job->size = size;
  job->info_only = 1;
  job->info_out = &unused;
  job->color_out = color;
  pxl_codec_status st = png_do(job, NULL, 0);
  if (st != PXL_CODEC_OK) pxl_codec_color_free(color);
  if (st != PXL_CODEC_OK) memset(color, 0, sizeof *color);
  free(job);
  return st;
}

/* ---- decoding while the bytes arrive ------------------------------------------------ */

/* A PNG decode fed as its bytes arrive, through libpng's progressive reader
 * (png_process_data): the rows of a non-interlaced image reach the bitmap or the row
 * function as their data comes. It gives the whole decode's result only for a file that
 * decodes cleanly to IEND; anything else (interlaced, a warning, an error, the data ending
 * before IEND) it declines, and the caller decodes the whole body (pxl_codecs.h). */
struct pxl_png_stream {
  png_job job;
  const int32_t *cancel;
  png_uint_32 width, height;
  int32_t channels;
  int has_alpha, gray_from_colour;
  uint8_t *row; /* one transformed row, converted in place */
  int declined, done;
  pxl_codec_status failed;
  pxl_codec_output out;
};

static void png_stream_info(png_structp png, png_infop info) {
  pxl_png_stream *s = png_get_progressive_ptr(png);
  png_job *job = &s->job;
  int depth = 0, ctype = 0, interlace = 0;
  png_get_IHDR(png, info, &s->width, &s->height, &depth, &ctype, &interlace, NULL, NULL);
  s->has_alpha = (ctype & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (interlace != PNG_INTERLACE_NONE || (uint64_t)s->width * s->height > job->max_pixels ||
      s->width > PXL_PNG_MAX_DIMENSION || s->height > PXL_PNG_MAX_DIMENSION) {
    s->declined = 1;
    png_error(png, "declined");
  }
  s->channels = pxl_layout_channels(job->layout);
  if (png_transforms(job, ctype, s->width, &s->gray_from_colour) != PXL_CODEC_OK) png_error(png, job->shim_error);
  size_t stride = (size_t)s->width * (size_t)(s->gray_from_colour ? 3 : s->channels);
  s->row = malloc(stride ? stride : 1);
  if (job->row_fn == NULL) job->pixels = malloc((size_t)s->width * s->height * (size_t)s->channels + 1);
  if (s->row == NULL || (job->row_fn == NULL && job->pixels == NULL)) png_error(png, "out of memory");
}

static void png_stream_row(png_structp png, png_bytep row, png_uint_32 y, int pass) {
  (void)pass;
  pxl_png_stream *s = png_get_progressive_ptr(png);
  png_job *job = &s->job;
  if (row == NULL || y >= s->height) return;
  if (s->cancel != NULL && __atomic_load_n(s->cancel, __ATOMIC_RELAXED) != 0) png_error(png, "cancelled");
  memcpy(s->row, row, (size_t)s->width * (size_t)(s->gray_from_colour ? 3 : s->channels));
  if (job->row_fn != NULL) {
    if (hand_over_row(job, y, s->row, s->width, s->gray_from_colour)) png_error(png, job->shim_error);
    return;
  }
  if (s->gray_from_colour) rgb_to_gray(s->row, s->width);
  memcpy(job->pixels + (size_t)y * s->width * (size_t)s->channels, s->row, (size_t)s->width * (size_t)s->channels);
}

static void png_stream_end(png_structp png, png_infop info) {
  (void)info;
  pxl_png_stream *s = png_get_progressive_ptr(png);
  s->done = 1;
}

pxl_png_stream *pxl_png_stream_new(int32_t layout, uint64_t max_pixels, pxl_codec_row_fn row_fn, void *user,
                                   const int32_t *cancel) {
  if (pxl_layout_channels(layout) == 0) return NULL;
  pxl_png_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  png_job *job = &s->job;
  job->layout = layout;
  job->max_pixels = max_pixels;
  job->out = &s->out;
  job->row_fn = row_fn;
  job->row_user = user;
  s->cancel = cancel;
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, on_error, on_warning);
  if (job->png != NULL) job->info = png_create_info_struct(job->png);
  if (job->png == NULL || job->info == NULL) {
    pxl_png_stream_free(s);
    return NULL;
  }
#ifdef PNG_HANDLE_AS_UNKNOWN_SUPPORTED
  static const png_byte skipped[] = "tEXt\0zTXt\0iTXt"; /* as png_run: never inflated */
  png_set_keep_unknown_chunks(job->png, PNG_HANDLE_CHUNK_NEVER, skipped, 3);
#endif
  png_set_user_limits(job->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_set_progressive_read_fn(job->png, s, png_stream_info, png_stream_row, png_stream_end);
  return s;
}

/* png_process_data after the setjmp; 0 when libpng gave up (an error or a decline). */
static int png_stream_run(pxl_png_stream *s, const uint8_t *data, size_t size) {
  if (setjmp(png_jmpbuf(s->job.png))) return 0;
  png_process_data(s->job.png, s->job.info, (png_bytep)(uintptr_t)data, size);
  return 1;
}

pxl_codec_status pxl_png_stream_feed(pxl_png_stream *s, const uint8_t *data, size_t size, int at_end, int *state,
                                     pxl_codec_output *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (s == NULL || state == NULL || out == NULL) return PXL_CODEC_UNSUPPORTED;
  *state = PXL_STREAM_MORE;
  if (s->failed != PXL_CODEC_OK || s->declined || s->done) {
    pxl_set_message(out->message, sizeof out->message, "PNG", "the stream is over");
    return PXL_CODEC_UNSUPPORTED;
  }
  png_job *job = &s->job;
  int went_on = size == 0 || png_stream_run(s, data ? data : (const uint8_t *)"", size);
  if (!went_on && s->cancel != NULL && __atomic_load_n(s->cancel, __ATOMIC_RELAXED) != 0) {
    s->failed = PXL_CODEC_CORRUPT;
    pxl_set_message(out->message, sizeof out->message, "PNG", "cancelled");
    return PXL_CODEC_CORRUPT;
  }
  /* Anything but a clean file to IEND: the whole decode says what it is. */
  if (!went_on || job->warnings > 0 || (at_end && !s->done)) {
    const char *why = !went_on ? (job->shim_error[0] ? job->shim_error : job->fatal)
                               : job->warnings > 0 ? job->last_warning : "the data ended before IEND";
    pxl_set_message(out->message, sizeof out->message, "PNG", why);
    s->declined = 1;
    *state = PXL_STREAM_DECLINED;
    return PXL_CODEC_OK;
  }
  if (!s->done) return PXL_CODEC_OK;
  *state = PXL_STREAM_DONE;
  set_output(job, s->width, s->height, s->channels, s->has_alpha);
  *out = s->out;
  out->pixels = job->pixels;
  job->pixels = NULL;
  return PXL_CODEC_OK;
}

void pxl_png_stream_free(pxl_png_stream *s) {
  if (s == NULL) return;
  if (s->job.png != NULL) png_destroy_read_struct(&s->job.png, s->job.info ? &s->job.info : NULL, NULL);
  free(s->job.pixels);
  free(s->row);
  free(s);
}

/* The end of a PNG's header: just past the first IDAT's chunk header (what
 * pxl_png_read_info and pxl_png_color read), 0 while the bytes end before it, -1 for a file png_run's chunk walk refuses (decoded whole) or no PNG. */
int64_t pxl_png_header_end(const uint8_t *data, size_t size) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (data == NULL || size < 8) return 0;
  if (memcmp(data, sig, 8) != 0) return -1;
  size_t pos = 8;
  int iccp = 0;
  while (size - pos >= 8) {
    const uint8_t *c = data + pos;
    uint32_t len = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
    if (len > PNG_UINT_31_MAX) return -1;
    if (memcmp(c + 4, "IDAT", 4) == 0) return (int64_t)pos + 8; /* its header: png_read_info stops there */
    if (memcmp(c + 4, "iCCP", 4) == 0 && ++iccp > PXL_PNG_MAX_ICCP) return -1;
    if (memcmp(c + 4, "IEND", 4) == 0) return -1;
    if ((uint64_t)len + 12 > size - pos) return 0;
    pos += (size_t)len + 12;
  }
  return 0;
}
