/*
 * worker/native.c: the built-in formats in the decode worker (PXL_ISOLATION_ALL): the
 * library's own shims (Sources/CCodecs: JPEG, PNG, WebP, GIF, AVIF), linked into the
 * worker and called with the arguments the library's decode stage passes them in-process
 * (pxl_worker_protocol.h, "A built-in format's conversation"), so the pixels are the same.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "native.h"
#include "pxl_avif.h"
#include "pxl_codecs.h"
#include "pxl_webp.h"
#include "wire.h"

typedef pxl_codec_status (*read_info_fn)(const uint8_t *, size_t, pxl_codec_info *, char *, size_t);
typedef pxl_codec_status (*color_fn)(const uint8_t *, size_t, pxl_codec_color *);

static pxl_codec_status jpeg_decode(const uint8_t *d, size_t n, int32_t layout, int32_t scale, uint64_t max,
                                    pxl_codec_output *out) {
  return pxl_jpeg_decode(d, n, layout, scale, max, out);
}
#define UNSCALED(name)                                                                                              \
  static pxl_codec_status name##_decode(const uint8_t *d, size_t n, int32_t layout, int32_t scale, uint64_t max, \
                                        pxl_codec_output *out) {                                                  \
    (void)scale;                                                                                                  \
    return pxl_##name##_decode(d, n, layout, max, out);                                                           \
  }
UNSCALED(png)
UNSCALED(webp)
UNSCALED(gif)
UNSCALED(avif)

typedef pxl_codec_status (*rows_fn)(const uint8_t *, size_t, int32_t, int32_t, uint64_t, pxl_codec_row_fn, void *,
                                    pxl_codec_output *);
static pxl_codec_status jpeg_rows(const uint8_t *d, size_t n, int32_t layout, int32_t scale, uint64_t max,
                                  pxl_codec_row_fn fn, void *user, pxl_codec_output *out) {
  return pxl_jpeg_decode_rows(d, n, layout, scale, max, fn, user, out);
}
#define UNSCALED_ROWS(name)                                                                                       \
  static pxl_codec_status name##_rows(const uint8_t *d, size_t n, int32_t layout, int32_t scale, uint64_t max, \
                                      pxl_codec_row_fn fn, void *user, pxl_codec_output *out) {               \
    (void)scale;                                                                                                \
    return pxl_##name##_decode_rows(d, n, layout, max, fn, user, out);                                          \
  }
UNSCALED_ROWS(png)
UNSCALED_ROWS(webp)
UNSCALED_ROWS(gif)
UNSCALED_ROWS(avif)

static const struct format {
  const char *id;
  read_info_fn read_info;
  color_fn color;
  pxl_codec_status (*decode)(const uint8_t *, size_t, int32_t, int32_t, uint64_t, pxl_codec_output *);
  rows_fn rows;
} formats[] = {
    {"jpeg", pxl_jpeg_read_info, pxl_jpeg_color, jpeg_decode, jpeg_rows},
    {"png", pxl_png_read_info, pxl_png_color, png_decode, png_rows},
    {"webp", pxl_webp_read_info, pxl_webp_color, webp_decode, webp_rows},
    {"gif", pxl_gif_read_info, pxl_gif_color, gif_decode, gif_rows},
    {"avif", pxl_avif_read_info, pxl_avif_color, avif_decode, avif_rows},
};

/* REGION: the region's rows, region_width pixels each from column region_x, packed. */
typedef struct region_rows {
  uint8_t *pixels;
  int32_t x, y, width, height, channels;
} region_rows;

static int region_row(void *user, int32_t y, int32_t x0, const uint8_t *row) {
  region_rows *r = user;
  if (y < r->y || y >= r->y + r->height) return 0;
  if (x0 < 0 || x0 > r->x) return 1; /* the row does not hold the region's columns */
  size_t bytes = (size_t)r->width * (size_t)r->channels;
  memcpy(r->pixels + (size_t)(y - r->y) * bytes, row + (size_t)(r->x - x0) * (size_t)r->channels, bytes);
  return 0;
}

static int layout_channels(int32_t layout) {
  return layout == PXL_CODEC_RGB ? 3 : layout == PXL_CODEC_GRAY ? 1 : 4;
}

static uint64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Waits for PIXELS (a memfd of exactly `bytes`) and maps it writable; NULL after CANCEL
 * (*broken 0) or a broken conversation (*broken 1). */
static uint8_t *pixel_buffer(int sock, uint32_t serial, uint64_t bytes, int *broken) {
  union {
    pxl_worker_msg_head head;
    pxl_worker_msg_pixels pixels;
    char raw[PXL_WORKER_MSG_MAX];
  } in;
  int fd = -1;
  *broken = 1;
  ssize_t n = pxl_wire_recv(sock, &in, sizeof in, &fd);
  if (n > 0 && pxl_wire_valid(&in, n, PXL_WORKER_CANCEL, sizeof(pxl_worker_msg_cancel)) && in.head.serial == serial) {
    if (fd >= 0) close(fd);
    *broken = 0;
    return NULL;
  }
  struct stat st;
  if (n <= 0 || !pxl_wire_valid(&in, n, PXL_WORKER_PIXELS, sizeof in.pixels) || in.head.serial != serial || fd < 0 ||
      in.pixels.size != bytes || fstat(fd, &st) != 0 || (uint64_t)st.st_size != bytes) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  uint8_t *map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return NULL;
  *broken = 0;
  return map;
}

/* One operation of a conversation over the mapped bytes, answered (NATIVE_RESULT, then the
 * bytes after it through PIXELS, or into output_fd when the library sent one with it). 0,
 * or -1 when the conversation is broken. */
static int operate(int sock, const struct format *format, const uint8_t *data, size_t size,
                   const pxl_worker_msg_native *req, uint32_t serial, int output_fd, pxl_worker_kept *kept,
                   int32_t *status) {
  uint64_t start = cpu_ns();
  pxl_worker_msg_native_result r;
  memset(&r, 0, sizeof r);
  pxl_wire_head(&r.head, PXL_WORKER_NATIVE_RESULT, sizeof r, serial);
  r.status = PXL_CODEC_UNSUPPORTED;
  r.color_status = PXL_CODEC_UNSUPPORTED;

  pxl_codec_output out;
  memset(&out, 0, sizeof out);
  pxl_codec_color color;
  memset(&color, 0, sizeof color);
  const uint8_t *icc = NULL;
  const uint8_t *pixels = NULL;
  uint64_t pixel_bytes = 0;
  if (req->op == PXL_WORKER_NATIVE_INFO) {
    pxl_codec_info info;
    memset(&info, 0, sizeof info);
    r.status = format->read_info(data, size, &info, r.message, sizeof r.message);
    r.width = info.width, r.height = info.height, r.has_alpha = info.has_alpha, r.orientation = info.orientation;
    r.frame_count = info.frame_count, r.loop_count = info.loop_count;
    if (r.status == PXL_CODEC_OK) {
      r.color_status = format->color(data, size, &color);
      if (r.color_status == PXL_CODEC_OK) {
        r.srgb = color.srgb, r.has_chrm = color.has_chrm, r.gamma = color.gamma;
        memcpy(r.chrm, color.chrm, sizeof r.chrm);
        r.cicp_primaries = color.cicp_primaries, r.cicp_transfer = color.cicp_transfer, r.cicp_matrix = color.cicp_matrix;
        if (color.icc && color.icc_size && color.icc_size <= PXL_ICC_MAX_BYTES) {
          icc = color.icc;
          r.icc_size = (uint32_t)color.icc_size;
        }
      }
    }
  } else if (req->op == PXL_WORKER_NATIVE_DECODE) {
    r.status = format->decode(data, size, req->layout, req->scale, req->max_pixels, &out);
    memcpy(r.message, out.message, sizeof r.message);
    r.message[sizeof r.message - 1] = 0;
    if (r.status == PXL_CODEC_OK && !out.pixels) r.status = PXL_CODEC_CORRUPT;
    if (r.status == PXL_CODEC_OK) {
      r.out_width = out.width, r.out_height = out.height, r.out_stride = out.stride;
      r.out_channels = out.channels, r.out_has_alpha = out.has_alpha;
      r.out_warnings = out.warnings, r.out_incomplete = out.incomplete;
      pixels = out.pixels;
      pixel_bytes = (uint64_t)out.stride * (uint64_t)out.height;
    }
  } else if (req->op == PXL_WORKER_NATIVE_REGION && strcmp(format->id, "jpeg") == 0 && req->region_x >= 0 &&
             req->region_y >= 0 && req->region_width >= 1 && req->region_height >= 1 &&
             (uint64_t)req->region_width * (uint64_t)req->region_height <= req->max_pixels) {
    region_rows rows = {NULL, req->region_x, req->region_y, req->region_width, req->region_height,
                        layout_channels(req->layout)};
    size_t bytes = (size_t)rows.width * (size_t)rows.channels * (size_t)rows.height;
    rows.pixels = calloc(1, bytes);
    r.status = rows.pixels ? pxl_jpeg_decode_region(data, size, req->layout, req->scale, req->max_pixels, rows.x, rows.y,
                                                    rows.width, rows.height, region_row, &rows, &out)
                           : PXL_CODEC_NO_MEMORY;
    memcpy(r.message, out.message, sizeof r.message);
    r.message[sizeof r.message - 1] = 0;
    free(out.pixels); /* (none: rows went to region_row) */
    out.pixels = rows.pixels;
    if (r.status == PXL_CODEC_OK && (out.width < rows.x + rows.width || out.height < rows.y + rows.height))
      r.status = PXL_CODEC_CORRUPT;
    if (r.status == PXL_CODEC_OK) {
      r.out_width = out.width, r.out_height = out.height, r.out_stride = rows.width * rows.channels;
      r.out_channels = rows.channels, r.out_has_alpha = out.has_alpha;
      r.out_warnings = out.warnings, r.out_incomplete = out.incomplete;
      pixels = rows.pixels;
      pixel_bytes = bytes;
    }
  } else if (req->op == PXL_WORKER_NATIVE_RESAMPLE) {
    /* The decode stage's resampler (AreaResampler), made here with its parameters: the
     * rows stream into it as in-process, and only its output crosses. */
    const int32_t *p = req->resample;
    int region = req->region_width > 0;
    pxl_resampler *resampler =
        p[2] == layout_channels(req->layout) && (uint64_t)p[3] * (uint64_t)p[4] <= req->max_pixels &&
                (!region || strcmp(format->id, "jpeg") == 0)
            ? pxl_resampler_new(p[0], p[1], p[2], req->crop[0], req->crop[1], req->crop[2], req->crop[3], p[3], p[4],
                                p[5])
            : NULL;
    if (!resampler) {
      snprintf(r.message, sizeof r.message, "bad resampler parameters");
    } else {
      r.status = region ? pxl_jpeg_decode_region(data, size, req->layout, req->scale, req->max_pixels, req->region_x,
                                                 req->region_y, req->region_width, req->region_height,
                                                 pxl_resampler_add_row_at, resampler, &out)
                        : format->rows(data, size, req->layout, req->scale, req->max_pixels, pxl_resampler_add_row,
                                       resampler, &out);
      memcpy(r.message, out.message, sizeof r.message);
      r.message[sizeof r.message - 1] = 0;
      free(out.pixels);
      /* NULL when a row never came: nothing crosses, and the library's own finish says so
       * as in-process. */
      out.pixels = r.status == PXL_CODEC_OK ? pxl_resampler_finish(resampler) : NULL;
      pxl_resampler_free(resampler);
      if (r.status == PXL_CODEC_OK) {
        r.out_width = out.width, r.out_height = out.height, r.out_stride = p[3] * p[2];
        r.out_channels = p[2], r.out_has_alpha = out.has_alpha;
        r.out_warnings = out.warnings, r.out_incomplete = out.incomplete;
        pixels = out.pixels;
        pixel_bytes = pixels ? (uint64_t)p[3] * (uint64_t)p[4] * (uint64_t)p[2] : 0;
      }
    }
  } else {
    snprintf(r.message, sizeof r.message, "unknown operation %u", req->op);
  }
  r.bytes = pixel_bytes + r.icc_size;
  int rc;
  if (req->flags & PXL_WORKER_NATIVE_KEPT_OUTPUT) {
    /* Into the kept output memfd (at least the output's size), left mapped. */
    if (pixel_bytes && (pxl_worker_keep(&kept->output, output_fd, PROT_READ | PROT_WRITE) != 0 || pixel_bytes > kept->output.size)) {
      r.status = PXL_CODEC_NO_MEMORY;
      snprintf(r.message, sizeof r.message, "cannot write the kept output buffer (%llu bytes)", (unsigned long long)pixel_bytes);
      r.bytes = 0;
    } else if (pixel_bytes) {
      memcpy(kept->output.map, pixels, (size_t)pixel_bytes);
    } else if (output_fd >= 0) {
      pxl_worker_keep(&kept->output, output_fd, PROT_READ | PROT_WRITE); /* (for the next one) */
    }
    r.cpu_ns = cpu_ns() - start;
    rc = pxl_wire_send(sock, &r, sizeof r, -1);
  } else if (output_fd >= 0) {
    /* The output memfd came with the request, sized for the resampler's output. */
    struct stat st;
    uint8_t *map = NULL;
    if (pixel_bytes && (fstat(output_fd, &st) != 0 || (uint64_t)st.st_size != pixel_bytes ||
                        (map = mmap(NULL, (size_t)pixel_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, output_fd, 0)) == MAP_FAILED)) {
      map = NULL;
      r.status = PXL_CODEC_NO_MEMORY;
      snprintf(r.message, sizeof r.message, "cannot write the output buffer (not %llu bytes?)", (unsigned long long)pixel_bytes);
      r.bytes = 0;
    }
    if (map) {
      memcpy(map, pixels, (size_t)pixel_bytes);
      /* Unmapped before the answer: the library's F_SEAL_WRITE fails while a writable mapping exists. */
      munmap(map, (size_t)pixel_bytes);
    }
    r.cpu_ns = cpu_ns() - start;
    rc = pxl_wire_send(sock, &r, sizeof r, -1);
  } else {
    r.cpu_ns = cpu_ns() - start;
    rc = pxl_wire_send(sock, &r, sizeof r, -1);
    if (rc == 0 && r.bytes) {
      int broken;
      uint8_t *map = pixel_buffer(sock, serial, r.bytes, &broken);
      if (map) {
        if (pixel_bytes) memcpy(map, pixels, (size_t)pixel_bytes);
        if (r.icc_size) memcpy(map + pixel_bytes, icc, r.icc_size);
        /* Unmapped before DONE: the library's F_SEAL_WRITE fails while a writable mapping exists. */
        munmap(map, (size_t)r.bytes);
        pxl_worker_msg_done done;
        memset(&done, 0, sizeof done);
        pxl_wire_head(&done.head, PXL_WORKER_DONE, sizeof done, serial);
        done.cpu_ns = cpu_ns() - start;
        rc = pxl_wire_send(sock, &done, sizeof done, -1);
      } else if (broken) {
        rc = -1;
      }
    }
  }
  free(out.pixels);
  pxl_codec_color_free(&color);
  *status = r.status;
  return rc;
}

/* The library's next word in a conversation kept open (PXL_WORKER_NATIVE_STAY): a NATIVE
 * of the same serial (no descriptor, or the output memfd with PXL_WORKER_NATIVE_OUTPUT), or
 * CANCEL. 1: *next and *fd filled; 0: CANCEL; -1: broken. */
static int next_request(int sock, uint32_t serial, pxl_worker_msg_native *next, int *fd) {
  union {
    pxl_worker_msg_head head;
    pxl_worker_msg_native native;
    char raw[PXL_WORKER_MSG_MAX];
  } in;
  ssize_t n = pxl_wire_recv(sock, &in, sizeof in, fd);
  int ours = n > 0 && in.head.serial == serial;
  if (ours && pxl_wire_valid(&in, n, PXL_WORKER_CANCEL, sizeof(pxl_worker_msg_cancel))) {
    if (*fd >= 0) close(*fd), *fd = -1;
    return 0;
  }
  if (ours && pxl_wire_valid(&in, n, PXL_WORKER_NATIVE, sizeof in.native) &&
      !(in.native.flags & PXL_WORKER_NATIVE_KEPT_DATA) &&
      ((in.native.flags & PXL_WORKER_NATIVE_KEPT_OUTPUT) ? in.native.op == PXL_WORKER_NATIVE_RESAMPLE
       : (in.native.flags & PXL_WORKER_NATIVE_OUTPUT) ? *fd >= 0 && in.native.op == PXL_WORKER_NATIVE_RESAMPLE
                                                      : *fd < 0)) {
    *next = in.native;
    return 1;
  }
  if (*fd >= 0) close(*fd), *fd = -1;
  return -1;
}

__attribute__((visibility("default"))) int pxl_worker_native_serve(int sock, uint64_t max_input_bytes, const pxl_worker_msg_native *req, int data_fd,
                                                                   pxl_worker_kept *kept) {
  uint32_t serial = req->head.serial;
  const struct format *format = NULL;
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
    if (strncmp(req->format, formats[i].id, sizeof req->format) == 0) format = &formats[i];
  struct stat st;
  const uint8_t *data = MAP_FAILED;
  size_t size = (size_t)req->data_size;
  int in_kept = (req->flags & PXL_WORKER_NATIVE_KEPT_DATA) != 0;
  int usable;
  if (in_kept) {
    /* The bytes at the start of the kept data memfd (mapped afresh when it came again). */
    usable = format && pxl_worker_keep(&kept->data, data_fd, PROT_READ) == 0 && req->data_size != 0 &&
             req->data_size <= kept->data.size && req->data_size <= max_input_bytes;
    if (usable) data = kept->data.map;
  } else {
    usable = format && data_fd >= 0 && fstat(data_fd, &st) == 0 && req->data_size != 0 &&
             req->data_size <= (uint64_t)st.st_size && req->data_size <= max_input_bytes;
    if (usable) data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, data_fd, 0);
  }
  if (data == MAP_FAILED) {
    pxl_worker_msg_native_result r;
    memset(&r, 0, sizeof r);
    pxl_wire_head(&r.head, PXL_WORKER_NATIVE_RESULT, sizeof r, serial);
    r.status = usable ? PXL_CODEC_NO_MEMORY : PXL_CODEC_UNSUPPORTED;
    r.color_status = PXL_CODEC_UNSUPPORTED;
    snprintf(r.message, sizeof r.message, "%s",
             usable ? "cannot map the data" : format ? "the data's size does not match its memfd" : "no such format");
    return pxl_wire_send(sock, &r, sizeof r, -1);
  }
  /* The conversation: this operation, and while an INFO asks to stay, the next ones. */
  pxl_worker_msg_native current = *req;
  current.flags &= PXL_WORKER_NATIVE_STAY;
  /* (An operation that does not continue a conversation brings none of the kept flags.) */
  int output_fd = -1, rc;
  for (;;) {
    int32_t status = PXL_CODEC_UNSUPPORTED;
    rc = operate(sock, format, data, size, &current, serial, output_fd, kept, &status);
    if (output_fd >= 0) close(output_fd), output_fd = -1;
    /* Only an INFO that succeeded keeps the conversation open (the library knows it so). */
    if (rc != 0 || status != PXL_CODEC_OK || current.op != PXL_WORKER_NATIVE_INFO ||
        !(current.flags & PXL_WORKER_NATIVE_STAY))
      break;
    int more = next_request(sock, serial, &current, &output_fd);
    if (more <= 0) {
      rc = more;
      break;
    }
    if (strncmp(current.format, format->id, sizeof current.format) != 0) {
      if (output_fd >= 0) close(output_fd);
      rc = -1;
      break;
    }
  }
  if (!in_kept) munmap((void *)data, size);
  return rc;
}

/* ---- frames (FRAMES_OPEN: an animation's frames, one at a time) ---- */

/* A built-in format's frame reader (pxl_codecs.h, "Frame readers"), as the decode stage's
 * FrameSource opens it in-process: the same reader, the same arguments, the same canvas. */
typedef struct native_frames {
  void *reader;
  pxl_codec_status (*next)(void *, pxl_codec_frame *);
  void (*close)(void *);
} native_frames;

#define READER(name)                                                                                             \
  static void *name##_open(const uint8_t *d, size_t n, uint64_t max, pxl_codec_status *s, char *m, size_t cap) { \
    return pxl_##name##_frames_open(d, n, max, s, m, cap);                                                       \
  }                                                                                                              \
  static pxl_codec_status name##_next(void *r, pxl_codec_frame *f) { return pxl_##name##_frames_next(r, f); }    \
  static void name##_close(void *r) { pxl_##name##_frames_close(r); }
READER(gif)
READER(webp)
READER(avif)

static const struct reader_format {
  const char *id;
  void *(*open)(const uint8_t *, size_t, uint64_t, pxl_codec_status *, char *, size_t);
  pxl_codec_status (*next)(void *, pxl_codec_frame *);
  void (*close)(void *);
  int32_t (*first_duration)(const uint8_t *, size_t);
} readers[] = {
    {"gif", gif_open, gif_next, gif_close, pxl_gif_first_duration},
    {"webp", webp_open, webp_next, webp_close, pxl_webp_first_duration},
    {"avif", avif_open, avif_next, avif_close, pxl_avif_first_duration},
};

__attribute__((visibility("default"))) void *pxl_worker_native_frames_open(const char *format, const uint8_t *data, size_t size, uint64_t max_pixels,
                                    pxl_codec_info *info, int32_t *first_duration, int32_t *status, char *message,
                                    size_t cap) {
  const struct reader_format *rf = NULL;
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
    if (strcmp(readers[i].id, format) == 0) rf = &readers[i];
  const struct format *f = NULL;
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
    if (strcmp(formats[i].id, format) == 0) f = &formats[i];
  *status = PXL_CODEC_UNSUPPORTED;
  if (!rf || !f) {
    snprintf(message, cap, "%s has no frame reader", format);
    return NULL;
  }
  memset(info, 0, sizeof *info);
  pxl_codec_status s = f->read_info(data, size, info, message, cap);
  if (s != PXL_CODEC_OK) {
    *status = s;
    return NULL;
  }
  native_frames *nf = calloc(1, sizeof *nf);
  if (!nf) {
    *status = PXL_CODEC_NO_MEMORY;
    snprintf(message, cap, "out of memory");
    return NULL;
  }
  s = PXL_CODEC_OK;
  nf->reader = rf->open(data, size, max_pixels, &s, message, cap);
  if (!nf->reader) {
    free(nf);
    *status = s == PXL_CODEC_OK ? PXL_CODEC_CORRUPT : s;
    return NULL;
  }
  nf->next = rf->next;
  nf->close = rf->close;
  *first_duration = rf->first_duration(data, size);
  *status = PXL_CODEC_OK;
  return nf;
}

__attribute__((visibility("default"))) int32_t pxl_worker_native_frames_next(void *frames, pxl_codec_frame *frame) {
  native_frames *nf = frames;
  memset(frame, 0, sizeof *frame);
  return nf->next(nf->reader, frame);
}

__attribute__((visibility("default"))) void pxl_worker_native_frames_close(void *frames) {
  native_frames *nf = frames;
  if (!nf) return;
  nf->close(nf->reader);
  free(nf);
}
