/*
 * worker/worker_main.c: pixload-decode-worker, the process that decodes strangers' bytes
 * for pixload where an exploit cannot reach the host (worker/README.md).
 *
 *   pixload-decode-worker --modules DIR [--only heif,jxl] --max-pixels N
 *                         [--builtins pixload-decode-builtins.so]
 *                         [--max-input-bytes N] [--socket-fd 3] [--font-dir DIR]...
 *                         [--stderr] [--debug-seccomp]
 *
 * Started by the library with posix_spawn, its socket at fd 3. It locks itself before it
 * reads a byte, in this order (each step needs the ones before it, or must run before the
 * ones after):
 *   1. every descriptor but the socket closed (nothing of the host's leaks in);
 *   2. no_new_privs (needed by landlock and seccomp, sandbox.c);
 *   3. namespaces: while it is still one thread (unshare(CLONE_NEWUSER) demands it);
 *   4. the codec modules loaded and registered (dlopen needs their files, and their
 *      libraries' constructors may start threads), and the built-in formats' shims
 *      (--builtins: PXL_ISOLATION_ALL, native.c);
 *   5. resource limits: RLIMIT_AS from max_pixels, now that the libraries are mapped;
 *   6. landlock: read-only beneath the modules' and the fonts' directories;
 *   7. descriptors closed again (what a library opened while loading);
 *   8. seccomp last: it forbids the calls that steps 3-7 make.
 * Then it says HELLO with the layers in force and serves decodes, one at a time, until
 * its socket closes. It never forks, before or after locking.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codecs.h"
#include "pxl_codecs.h" /* the library's area resampler (Sources/CCodecs/resample.c) */
#include "native.h"
#include "pxl_worker_protocol.h"
#include "sandbox.h"
#include "wire.h"

typedef struct options {
  int sock;
  const char *modules;
  const char *only;
  const char *builtins;
  uint64_t max_pixels;
  uint64_t max_input_bytes;
  const char *font_dirs[8];
  int font_dir_count;
  int keep_stderr;
  int debug_seccomp;
} options;

static void usage(void) {
  fprintf(stderr, "usage: pixload-decode-worker --modules DIR [--only LIST] --max-pixels N "
                  "[--builtins SO] [--max-input-bytes N] [--socket-fd FD] [--font-dir DIR]... [--stderr] [--debug-seccomp]\n");
  exit(2);
}

static uint64_t number(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || !*s) usage();
  return v;
}

static options parse(int argc, char **argv) {
  options o = {.sock = PXL_WORKER_SOCKET_FD, .max_pixels = 100000000ull, .max_input_bytes = 256ull << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--stderr") == 0) o.keep_stderr = 1;
    else if (strcmp(a, "--debug-seccomp") == 0) o.debug_seccomp = o.keep_stderr = 1;
    else if (!v) usage();
    else if (strcmp(a, "--modules") == 0) o.modules = v, i++;
    else if (strcmp(a, "--only") == 0) o.only = v, i++;
    else if (strcmp(a, "--builtins") == 0) o.builtins = v, i++;
    else if (strcmp(a, "--max-pixels") == 0) o.max_pixels = number(v), i++;
    else if (strcmp(a, "--max-input-bytes") == 0) o.max_input_bytes = number(v), i++;
    else if (strcmp(a, "--socket-fd") == 0) o.sock = (int)number(v), i++;
    else if (strcmp(a, "--font-dir") == 0 && o.font_dir_count < 8) o.font_dirs[o.font_dir_count++] = v, i++;
    else usage();
  }
  if (!o.modules || o.sock < 0 || o.max_pixels == 0 || o.max_pixels > (1ull << 40)) usage();
  return o;
}

/* ---- the address-space limit ---- */

/* What the worker has mapped now (libraries, their data), from /proc before landlock. */
static uint64_t mapped_now(void) {
  unsigned long long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%llu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* RLIMIT_AS: what is mapped now, the input, the output (4 bytes a pixel) and the
 * decoder's own working copies of it (planes, a second RGBA image: three times the
 * output), and 512 MiB for thread stacks and malloc's arenas (capped at 2 below), which
 * reserve address space they may never touch. */
static uint64_t address_space_limit(const options *o) {
  return mapped_now() + o->max_input_bytes + o->max_pixels * 16 + (512ull << 20);
}

/* ---- fonts ---- */

/* Where fontconfig reads its configuration, fonts and caches (SVG text, librsvg through
 * pango): Debian's /etc/fonts/conf.d links into /usr/share/fontconfig, and landlock checks
 * the link's target. The user's fonts and cache too, read-only. */
static int font_paths(const char **paths, int cap) {
  static char user[4][4096];
  int n = 0;
  const char *system[] = {"/usr/share/fonts", "/usr/local/share/fonts", "/etc/fonts", "/usr/share/fontconfig",
                          "/var/cache/fontconfig"};
  for (size_t i = 0; i < sizeof system / sizeof system[0] && n < cap; i++) paths[n++] = system[i];
  const char *home = getenv("HOME"), *cache = getenv("XDG_CACHE_HOME"), *data = getenv("XDG_DATA_HOME");
  if (cache && *cache) snprintf(user[0], sizeof user[0], "%s/fontconfig", cache);
  else if (home) snprintf(user[0], sizeof user[0], "%s/.cache/fontconfig", home);
  if (data && *data) snprintf(user[1], sizeof user[1], "%s/fonts", data);
  else if (home) snprintf(user[1], sizeof user[1], "%s/.local/share/fonts", home);
  if (home) snprintf(user[2], sizeof user[2], "%s/.fonts", home);
  for (int i = 0; i < 3 && n < cap; i++)
    if (user[i][0]) paths[n++] = user[i];
  return n;
}

/* ---- serving decodes ---- */

static const volatile int32_t never_cancelled = 0;
static uint64_t as_limit;

static uint64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int send_error(int sock, uint32_t serial, pxl_status status, const char *message) {
  pxl_worker_msg_error e;
  memset(&e, 0, sizeof e);
  pxl_wire_head(&e.head, PXL_WORKER_ERROR, sizeof e, serial);
  e.status = status;
  /* An allocation refused under RLIMIT_AS is the limit, whatever the codec called it. */
  if (status == PXL_E_NO_MEMORY)
    snprintf(e.message, sizeof e.message, "decoder exceeded %llu MiB: %s", (unsigned long long)(as_limit >> 20), message);
  else
    snprintf(e.message, sizeof e.message, "%s", message);
  return pxl_wire_send(sock, &e, sizeof e, -1);
}

/* A RESAMPLE drawing's parameters (pxl_worker_protocol.h): the layout's channels, or 0 when
 * they are not ones the library sends. */
static int resample_channels(const pxl_worker_drawing *req) {
  if (req->out_width < 1 || req->out_height < 1 || req->out_width > (1 << 20) || req->out_height > (1 << 20)) return 0;
  switch (req->layout) {
  case PXL_CODEC_RGBA:
  case PXL_CODEC_BGRA: return 4;
  case PXL_CODEC_RGB: return req->premultiply ? 0 : 3;
  default: return 0;
  }
}

/* The canvas (straight RGBA, tightly packed, width x height) through what the library's
 * decode stage does to a registered codec's still before its colour step
 * (FrameCollector.render): each row converted to the layout, then area-resampled. The same
 * C resampler, the same parameters: the same bytes. Writes out_height rows of
 * out_width * channels into out; 0, or a pxl_status. */
static pxl_status resample_canvas(const uint8_t *canvas, int32_t width, int32_t height,
                                  const pxl_worker_drawing *req, int channels, uint8_t *out) {
  pxl_resampler *r = pxl_resampler_new(width, height, channels, req->crop[0], req->crop[1], req->crop[2], req->crop[3],
                                       req->out_width, req->out_height, req->premultiply ? 1 : 0);
  if (!r) return PXL_E_INVALID_ARGUMENT;
  uint8_t *row = req->layout == PXL_CODEC_RGBA ? NULL : malloc((size_t)width * (size_t)channels);
  if (req->layout != PXL_CODEC_RGBA && !row) {
    pxl_resampler_free(r);
    return PXL_E_NO_MEMORY;
  }
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = canvas + (size_t)y * (size_t)width * 4;
    if (req->layout == PXL_CODEC_BGRA) {
      for (int32_t x = 0; x < width; x++)
        row[4 * x] = s[4 * x + 2], row[4 * x + 1] = s[4 * x + 1], row[4 * x + 2] = s[4 * x], row[4 * x + 3] = s[4 * x + 3];
    } else if (req->layout == PXL_CODEC_RGB) {
      for (int32_t x = 0; x < width; x++) row[3 * x] = s[4 * x], row[3 * x + 1] = s[4 * x + 1], row[3 * x + 2] = s[4 * x + 2];
    }
    pxl_resampler_add_row(r, y, row ? row : s);
  }
  free(row);
  uint8_t *small = pxl_resampler_finish(r);
  pxl_resampler_free(r);
  if (!small) return PXL_E_NO_MEMORY;
  memcpy(out, small, (size_t)req->out_width * (size_t)req->out_height * (size_t)channels);
  free(small);
  return PXL_OK;
}

/* PixelOps.unpremultiply: what the library does to a premultiplying codec's canvas. */
static void unpremultiply(uint8_t *p, size_t count) {
  for (size_t i = 0; i < count; i++, p += 4) {
    uint32_t a = p[3];
    if (a == 0) {
      p[0] = p[1] = p[2] = 0;
    } else if (a != 255) {
      for (int c = 0; c < 3; c++) {
        uint32_t v = ((uint32_t)p[c] * 255 + a / 2) / a;
        p[c] = (uint8_t)(v < 255 ? v : 255);
      }
    }
  }
}

/* One image's conversation (pxl_worker_protocol.h): the bytes mapped once, the header read
 * once, the size answered for each target the library asks, then the pixels. */
/* The kept memfds' mappings (protocol 5): the modules' conversations' and the built-in
 * formats' (native.c). */
static pxl_worker_kept kept;

typedef struct conversation {
  int sock;
  uint32_t serial;
  const pxl_codec *codec;
  const uint8_t *data;
  size_t size;
  pxl_codec_header header;
  pxl_worker_msg_header answer; /* the last HEADER sent */
  uint64_t start;               /* CPU time at DECODE */
} conversation;

/* The size drawn for a target: choose_size's answer for a smaller one, the target itself
 * for a scalable codec asked for more (the library checks it against max_pixels before a
 * buffer exists), else the header's. */
static void size_for(const conversation *c, int32_t target_width, int32_t target_height, int32_t *width, int32_t *height) {
  const pxl_codec *codec = c->codec;
  *width = c->header.width, *height = c->header.height;
  if (target_width > 0 && target_height > 0 && codec->choose_size &&
      ((int64_t)target_width * target_height < (int64_t)*width * *height)) {
    int32_t w = target_width, h = target_height;
    if (codec->choose_size(c->data, c->size, c->header.flags, &w, &h, codec->user_data) == PXL_OK && w >= 1 && h >= 1)
      *width = w, *height = h;
  } else if (target_width > 0 && target_height > 0 && (codec->flags & PXL_CODEC_SCALABLE)) {
    *width = target_width, *height = target_height;
  }
}

/* HEADER for a codec's header, drawn at width x height. */
static void header_answer(pxl_worker_msg_header *answer, uint32_t serial, const pxl_codec *codec,
                          const pxl_codec_header *header, int32_t width, int32_t height) {
  memset(answer, 0, sizeof *answer);
  pxl_wire_head(&answer->head, PXL_WORKER_HEADER, sizeof *answer, serial);
  answer->image_width = header->width;
  answer->image_height = header->height;
  answer->width = width;
  answer->height = height;
  answer->frame_count = header->frame_count;
  answer->loop_count = header->loop_count;
  answer->orientation = header->orientation;
  answer->has_alpha = header->has_alpha;
  answer->cicp_primaries = header->cicp_primaries;
  answer->cicp_transfer = header->cicp_transfer;
  answer->cicp_matrix = header->cicp_matrix;
  answer->icc_size = codec->read_icc && header->icc_size <= UINT32_MAX ? (uint32_t)header->icc_size : 0;
  answer->codec_flags = codec->flags;
  snprintf(answer->codec, sizeof answer->codec, "%s", codec->id);
  snprintf(answer->codec_version, sizeof answer->codec_version, "%s", codec->version);
}

/* The library's answer to HEADER: PIXELS (1, *pixel_fd and *pixels), CANCEL (0), or a
 * broken conversation (-1). */
static int receive_pixels(int sock, uint32_t serial, int *pixel_fd, pxl_worker_msg_pixels *pixels) {
  union {
    pxl_worker_msg_head head;
    pxl_worker_msg_pixels pixels;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  ssize_t n = pxl_wire_recv(sock, &in, sizeof in, pixel_fd);
  int cancel = n > 0 && pxl_wire_valid(&in, n, PXL_WORKER_CANCEL, sizeof(pxl_worker_msg_cancel)) && in.head.serial == serial;
  if (cancel || n <= 0 || !pxl_wire_valid(&in, n, PXL_WORKER_PIXELS, sizeof in.pixels) || in.head.serial != serial ||
      *pixel_fd < 0) {
    if (*pixel_fd >= 0) close(*pixel_fd);
    *pixel_fd = -1;
    return cancel ? 0 : -1;
  }
  *pixels = in.pixels;
  return 1;
}

/* HEADER with the size drawn for a target. 0, or -1 (the socket failed). */
static int send_header(conversation *c, int32_t target_width, int32_t target_height) {
  size_for(c, target_width, target_height, &c->answer.width, &c->answer.height);
  return pxl_wire_send(c->sock, &c->answer, sizeof c->answer, -1);
}

/* The pixels into pixel_fd as `req` asks, at the size last answered (or the one its
 * target gives), then DONE or ERROR: the conversation's end. 0, or -1. */
static int draw(conversation *c, const pxl_worker_msg_draw *req, int pixel_fd) {
  uint32_t serial = c->serial;
  const pxl_codec *codec = c->codec;
  int32_t width = c->answer.width, height = c->answer.height;
  if (req->target_width != width || req->target_height != height)
    size_for(c, req->target_width, req->target_height, &width, &height);
  /* DRAW asks for a size: drawn exactly, or not at all (the library sized its memfd and its
   * plan for it). */
  if (width != req->target_width || height != req->target_height) {
    char message[PXL_WORKER_MESSAGE_CAP];
    snprintf(message, sizeof message, "the decoder draws %d x %d for %d x %d", width, height, req->target_width,
             req->target_height);
    if (pixel_fd >= 0) close(pixel_fd);
    return send_error(c->sock, serial, PXL_E_CORRUPT_IMAGE, message);
  }
  /* RESAMPLE: the memfd holds the resampler's output; the canvas is the worker's own. */
  const pxl_worker_drawing *drawing = &req->drawing;
  int channels = drawing->mode == PXL_WORKER_DECODE_RESAMPLE ? resample_channels(drawing) : 0;
  int in_kept = (req->flags & PXL_WORKER_KEPT_OUTPUT) != 0;
  if ((drawing->mode != PXL_WORKER_DECODE_WHOLE && channels == 0) || (in_kept && !channels)) {
    if (pixel_fd >= 0) close(pixel_fd);
    return send_error(c->sock, serial, PXL_E_INVALID_ARGUMENT, "the resample parameters are not ones the library sends");
  }
  uint64_t rows = channels ? (uint64_t)drawing->out_height : (uint64_t)height;
  uint64_t row_bytes = channels ? (uint64_t)channels * (uint64_t)drawing->out_width : 4ull * (uint64_t)width;
  uint64_t stride = req->stride, need = stride * rows + c->answer.icc_size;
  struct stat st;
  uint8_t *pixels;
  if (in_kept) {
    /* RESAMPLE into the kept output memfd (at least need bytes), left mapped. */
    int kept_ok = pxl_worker_keep(&kept.output, pixel_fd, PROT_READ | PROT_WRITE) == 0;
    if (pixel_fd >= 0) close(pixel_fd);
    if (!kept_ok || stride < row_bytes || stride > (1ull << 32) || req->size != need || need > kept.output.size)
      return send_error(c->sock, serial, PXL_E_INVALID_ARGUMENT, "the kept output buffer does not hold the output");
    pixels = kept.output.map;
  } else {
    if (fstat(pixel_fd, &st) != 0 || stride < row_bytes || stride > (1ull << 32) || req->size != need ||
        (uint64_t)st.st_size != need) {
      close(pixel_fd);
      return send_error(c->sock, serial, PXL_E_INVALID_ARGUMENT, "the pixel buffer's size does not match the header");
    }
    pixels = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, MAP_SHARED, pixel_fd, 0);
    close(pixel_fd);
    if (pixels == MAP_FAILED) return send_error(c->sock, serial, PXL_E_NO_MEMORY, "cannot map the pixel buffer");
  }
  /* Zeroed, as the library's canvas is (calloc) and a fresh memfd is. */
  uint8_t *canvas = channels ? calloc((size_t)width * (size_t)height, 4) : pixels;
  if (!canvas) {
    if (!in_kept) munmap(pixels, (size_t)need);
    return send_error(c->sock, serial, PXL_E_NO_MEMORY, "out of memory for the canvas");
  }
  char message[PXL_WORKER_MESSAGE_CAP] = {0};
  pxl_codec_target target;
  memset(&target, 0, sizeof target);
  target.struct_size = sizeof target;
  target.flags = c->header.flags | (req->flags & PXL_WORKER_PARTIAL ? PXL_CODEC_PARTIAL : 0);
  target.width = width;
  target.height = height;
  target.pixels = canvas;
  target.stride = channels ? (size_t)width * 4 : (size_t)stride;
  target.cancel = &never_cancelled;
  pxl_status status = codec->decode(c->data, c->size, &target, message, sizeof message, codec->user_data);
  message[sizeof message - 1] = 0;
  if (status == PXL_OK && channels) {
    if ((codec->flags & PXL_CODEC_PREMULTIPLIED) && c->header.has_alpha)
      unpremultiply(canvas, (size_t)width * (size_t)height);
    status = resample_canvas(canvas, width, height, drawing, channels, pixels);
    if (status != PXL_OK) snprintf(message, sizeof message, "cannot resample the %d x %d canvas", width, height);
  }
  if (channels) free(canvas);
  if (status == PXL_OK && c->answer.icc_size)
    status = codec->read_icc(c->data, c->size, pixels + stride * rows, c->answer.icc_size, codec->user_data);
  /* Unmapped before DONE: the library's F_SEAL_WRITE fails while a writable mapping exists
   * (the kept output memfd stays mapped: the library copies it out). */
  if (!in_kept) munmap(pixels, (size_t)need);
  if (status != PXL_OK) return send_error(c->sock, serial, status, message[0] ? message : "the decoder failed");
  pxl_worker_msg_done done;
  memset(&done, 0, sizeof done);
  pxl_wire_head(&done.head, PXL_WORKER_DONE, sizeof done, serial);
  done.cpu_ns = cpu_ns() - c->start;
  return pxl_wire_send(c->sock, &done, sizeof done, -1);
}

/* The library's next word in a conversation after HEADER: SIZE (answered, and the
 * conversation goes on), DRAW or PIXELS (the pixels: its end), CANCEL (its end). 0, or -1
 * when it is broken (the worker then exits). */
static int converse(conversation *c, const pxl_worker_msg_decode *req) {
  for (;;) {
    union {
      pxl_worker_msg_head head;
      pxl_worker_msg_pixels pixels;
      pxl_worker_msg_size size;
      pxl_worker_msg_draw draw;
      char bytes[PXL_WORKER_MSG_MAX];
    } in;
    int pixel_fd = -1;
    ssize_t n = pxl_wire_recv(c->sock, &in, sizeof in, &pixel_fd);
    int ours = n > 0 && in.head.serial == c->serial;
    if (ours && pxl_wire_valid(&in, n, PXL_WORKER_CANCEL, sizeof(pxl_worker_msg_cancel))) {
      if (pixel_fd >= 0) close(pixel_fd);
      return 0;
    }
    if (ours && pixel_fd < 0 && pxl_wire_valid(&in, n, PXL_WORKER_SIZE, sizeof in.size)) {
      if (send_header(c, in.size.target_width, in.size.target_height) != 0) return -1;
      continue;
    }
    if (ours && pxl_wire_valid(&in, n, PXL_WORKER_DRAW, sizeof in.draw) &&
        (pixel_fd >= 0 || (in.draw.flags & PXL_WORKER_KEPT_OUTPUT)))
      return draw(c, &in.draw, pixel_fd);
    if (ours && pixel_fd >= 0 && pxl_wire_valid(&in, n, PXL_WORKER_PIXELS, sizeof in.pixels)) {
      /* DECODE's drawing fields, at the size HEADER answered. */
      pxl_worker_msg_draw d;
      memset(&d, 0, sizeof d);
      d.target_width = c->answer.width, d.target_height = c->answer.height;
      d.flags = req->flags & (PXL_WORKER_KEEP_ORIENTATION | PXL_WORKER_PARTIAL);
      d.drawing = req->drawing;
      d.stride = in.pixels.stride, d.size = in.pixels.size;
      return draw(c, &d, pixel_fd);
    }
    if (pixel_fd >= 0) close(pixel_fd);
    return -1;
  }
}

/* One image: DECODE has arrived with data_fd. Returns 0 to go on, -1 when the
 * conversation is broken (the worker then exits: the library starts a fresh one). */
static int serve(int sock, const options *o, const pxl_worker_msg_decode *req, int data_fd) {
  conversation c;
  memset(&c, 0, sizeof c);
  c.sock = sock;
  c.serial = req->head.serial;
  c.start = cpu_ns();
  struct stat st;
  int in_kept = (req->flags & PXL_WORKER_KEPT_DATA) != 0;
  if (in_kept) {
    /* The bytes at the start of the kept data memfd (mapped afresh when it came again). */
    if (pxl_worker_keep(&kept.data, data_fd, PROT_READ) != 0 || req->data_size == 0 ||
        req->data_size > kept.data.size || req->data_size > o->max_input_bytes)
      return send_error(sock, c.serial, PXL_E_INVALID_ARGUMENT, "the data's size does not match the kept memfd");
    c.size = (size_t)req->data_size;
    c.data = kept.data.map;
  } else {
    if (fstat(data_fd, &st) != 0 || req->data_size == 0 || req->data_size > (uint64_t)st.st_size ||
        req->data_size > o->max_input_bytes)
      return send_error(sock, c.serial, PXL_E_INVALID_ARGUMENT, "the data's size does not match its memfd");
    c.size = (size_t)req->data_size;
    c.data = mmap(NULL, c.size, PROT_READ, MAP_PRIVATE, data_fd, 0);
    if (c.data == MAP_FAILED) return send_error(sock, c.serial, PXL_E_NO_MEMORY, "cannot map the data");
  }

  char id[PXL_WORKER_ID_CAP];
  memcpy(id, req->codec, sizeof id);
  id[sizeof id - 1] = 0;
  c.codec = id[0] ? pxl_worker_codec_named(id) : pxl_worker_codec_sniff(c.data, c.size);
  const pxl_codec *codec = c.codec;
  int rc = 0;
  if (!codec) {
    rc = send_error(sock, c.serial, PXL_E_NOT_AN_IMAGE, id[0] ? "no such codec in the worker" : "no codec takes these bytes");
    goto out;
  }

  char message[PXL_WORKER_MESSAGE_CAP] = {0};
  pxl_codec_header *header = &c.header;
  header->struct_size = sizeof *header;
  header->flags = req->flags & PXL_WORKER_KEEP_ORIENTATION ? PXL_CODEC_KEEP_ORIENTATION : 0;
  header->frame_count = 1;
  header->orientation = 1;
  header->has_alpha = 1;
  pxl_status status = codec->read_header(c.data, c.size, header, message, sizeof message, codec->user_data);
  message[sizeof message - 1] = 0;
  if (status != PXL_OK) {
    rc = send_error(sock, c.serial, status, message);
    goto out;
  }
  /* The library checks this too; answering it here keeps a codec's mistake a corrupt image
   * rather than a worker killed for a bad header. */
  if (header->width < 1 || header->height < 1) {
    snprintf(message, sizeof message, "%s reported a size of %d x %d", codec->id, header->width, header->height);
    rc = send_error(sock, c.serial, PXL_E_CORRUPT_IMAGE, message);
    goto out;
  }

  /* Its size: send_header's, for each target asked. */
  header_answer(&c.answer, c.serial, codec, header, 0, 0);
  rc = send_header(&c, req->target_width, req->target_height) == 0 ? converse(&c, req) : -1;
out:
  if (!in_kept) munmap((void *)c.data, c.size);
  return rc;
}

/* ---- frames (FRAMES_OPEN, FRAME_NEXT, FRAMES_CLOSE: pxl_worker_protocol.h) ---- */

/* The built-in formats' frame readers (native.c, in --builtins), when loaded. */
static pxl_worker_native_frames_open_fn native_frames_open;
static pxl_worker_native_frames_next_fn native_frames_next;
static pxl_worker_native_frames_close_fn native_frames_close;

/* The one animation open: its bytes (mapped until closed), the canvas the library shares
 * (width x height, 4 bytes a pixel, tightly packed), and one of: a built-in format's
 * reader; a module's open_frames state; a decode_frames-only (or still-only) codec's
 * frames, decoded at open. */
static struct {
  int open;
  const uint8_t *data;
  size_t size;
  uint8_t *canvas;
  size_t map_size;
  int32_t width, height;
  uint32_t flags;
  void *native;
  const pxl_codec *codec;
  void *state;
  uint8_t **all;
  int32_t *durations;
  int count, next;
} frames;

static void frames_close(void) {
  if (frames.native) native_frames_close(frames.native);
  if (frames.state) frames.codec->close_frames(frames.state, frames.codec->user_data);
  for (int i = 0; i < frames.count; i++) free(frames.all[i]);
  free(frames.all);
  free(frames.durations);
  if (frames.canvas) munmap(frames.canvas, frames.map_size);
  if (frames.data) munmap((void *)frames.data, frames.size);
  memset(&frames, 0, sizeof frames);
}

/* A shim's status as the pxl_status an ERROR carries (the library maps it back). */
static pxl_status from_codec_status(int32_t s) {
  switch (s) {
  case PXL_CODEC_TOO_MANY_PIXELS: return PXL_E_TOO_MANY_PIXELS;
  case PXL_CODEC_UNSUPPORTED: return PXL_E_UNSUPPORTED_IMAGE;
  case PXL_CODEC_NO_MEMORY: return PXL_E_NO_MEMORY;
  default: return PXL_E_CORRUPT_IMAGE;
  }
}

/* decode_frames' frame_done: keeps a copy of each canvas, within PXL_WORKER_FRAMES_MAX_BYTES
 * (over it: the first frame alone, as the library plays an animation over its bound). */
typedef struct collected {
  const uint8_t *canvas;
  size_t bytes;
  int over;
} collected;

static int32_t collect_frame(void *library, int32_t duration_ms) {
  collected *c = library;
  if ((uint64_t)(frames.count + 1) * c->bytes > PXL_WORKER_FRAMES_MAX_BYTES) {
    c->over = 1;
    return 1;
  }
  uint8_t **all = realloc(frames.all, sizeof *all * (size_t)(frames.count + 1));
  if (all) frames.all = all;
  int32_t *d = realloc(frames.durations, sizeof *d * (size_t)(frames.count + 1));
  if (d) frames.durations = d;
  uint8_t *copy = all && d ? malloc(c->bytes) : NULL;
  if (!copy) return 1;
  memcpy(copy, c->canvas, c->bytes);
  frames.all[frames.count] = copy;
  frames.durations[frames.count++] = duration_ms;
  return 0;
}

/* The target a module draws the open animation's frames into: the whole canvas, RGBA8,
 * at the canvas's size, orientation kept when the host asked. */
static pxl_codec_target frames_target(uint8_t *canvas) {
  pxl_codec_target target;
  memset(&target, 0, sizeof target);
  target.struct_size = sizeof target;
  target.flags = frames.flags & PXL_WORKER_KEEP_ORIENTATION ? PXL_CODEC_KEEP_ORIENTATION : 0;
  target.width = frames.width;
  target.height = frames.height;
  target.pixels = canvas;
  target.stride = (size_t)frames.width * 4;
  target.cancel = &never_cancelled;
  return target;
}

/* A decode_frames-only codec's frames (or a still-only codec's one frame), decoded now. */
static pxl_status collect_all(char *message, size_t cap) {
  size_t bytes = (size_t)frames.width * (size_t)frames.height * 4;
  uint8_t *canvas = calloc(1, bytes);
  if (!canvas) return snprintf(message, cap, "out of memory for the canvas"), PXL_E_NO_MEMORY;
  collected c = {canvas, bytes, 0};
  pxl_codec_target target = frames_target(canvas);
  const pxl_codec *codec = frames.codec;
  pxl_status status;
  if (codec->decode_frames) {
    target.frame_done = collect_frame;
    target.library = &c;
    status = codec->decode_frames(frames.data, frames.size, &target, message, cap, codec->user_data);
    if (status == PXL_OK && c.over) {
      /* Over the bound: frame 0 alone. */
      for (int i = 1; i < frames.count; i++) free(frames.all[i]);
      frames.count = frames.count > 0 ? 1 : 0;
    }
    if (status == PXL_OK && frames.count == 0) status = PXL_E_NO_MEMORY, snprintf(message, cap, "no frame kept");
  } else {
    status = codec->decode(frames.data, frames.size, &target, message, cap, codec->user_data);
    if (status == PXL_OK) {
      c.canvas = canvas;
      if (collect_frame(&c, 0) != 0) status = PXL_E_NO_MEMORY, snprintf(message, cap, "out of memory");
    }
  }
  free(canvas);
  return status;
}

/* FRAMES_OPEN with data_fd: opens the state, answers HEADER, takes the canvas (PIXELS),
 * writes the ICC profile after it and answers DONE. 0 to go on, -1: the conversation is
 * broken. */
static int serve_frames_open(int sock, const options *o, const pxl_worker_msg_frames_open *req, int data_fd) {
  frames_close();
  uint32_t serial = req->head.serial;
  uint64_t start = cpu_ns();
  struct stat st;
  if (fstat(data_fd, &st) != 0 || req->data_size == 0 || req->data_size > (uint64_t)st.st_size ||
      req->data_size > o->max_input_bytes)
    return send_error(sock, serial, PXL_E_INVALID_ARGUMENT, "the data's size does not match its memfd");
  frames.size = (size_t)req->data_size;
  frames.data = mmap(NULL, frames.size, PROT_READ, MAP_PRIVATE, data_fd, 0);
  if (frames.data == MAP_FAILED) {
    frames.data = NULL;
    return send_error(sock, serial, PXL_E_NO_MEMORY, "cannot map the data");
  }
  frames.flags = req->flags;
  char id[PXL_WORKER_ID_CAP], format[PXL_WORKER_ID_CAP], message[PXL_WORKER_MESSAGE_CAP] = {0};
  memcpy(id, req->codec, sizeof id);
  memcpy(format, req->format, sizeof format);
  id[sizeof id - 1] = format[sizeof format - 1] = 0;
  uint64_t max_pixels = req->max_pixels && req->max_pixels < o->max_pixels ? req->max_pixels : o->max_pixels;

  pxl_worker_msg_header answer;
  memset(&answer, 0, sizeof answer);
  pxl_wire_head(&answer.head, PXL_WORKER_HEADER, sizeof answer, serial);
  const pxl_codec *codec = NULL;
  pxl_codec_header header;
  if (format[0]) {
    if (!native_frames_open) {
      frames_close();
      return send_error(sock, serial, PXL_E_UNSUPPORTED_IMAGE, "no built-in formats in this worker");
    }
    pxl_codec_info info;
    int32_t first = -1, status = 0;
    frames.native = native_frames_open(format, frames.data, frames.size, max_pixels, &info, &first, &status, message,
                                       sizeof message);
    message[sizeof message - 1] = 0;
    if (!frames.native) {
      frames_close();
      return send_error(sock, serial, from_codec_status(status), message[0] ? message : "cannot read the frames");
    }
    answer.image_width = answer.width = info.width;
    answer.image_height = answer.height = info.height;
    answer.frame_count = info.frame_count;
    answer.loop_count = info.loop_count;
    answer.orientation = info.orientation;
    answer.has_alpha = info.has_alpha;
    answer.first_duration_ms = first;
    snprintf(answer.codec, sizeof answer.codec, "%s", format);
  } else {
    codec = id[0] ? pxl_worker_codec_named(id) : pxl_worker_codec_sniff(frames.data, frames.size);
    if (!codec) {
      frames_close();
      return send_error(sock, serial, PXL_E_NOT_AN_IMAGE, id[0] ? "no such codec in the worker" : "no codec takes these bytes");
    }
    memset(&header, 0, sizeof header);
    header.struct_size = sizeof header;
    header.flags = req->flags & PXL_WORKER_KEEP_ORIENTATION ? PXL_CODEC_KEEP_ORIENTATION : 0;
    header.frame_count = 1;
    header.orientation = 1;
    header.has_alpha = 1;
    pxl_status status = codec->read_header(frames.data, frames.size, &header, message, sizeof message, codec->user_data);
    message[sizeof message - 1] = 0;
    if (status == PXL_OK && (header.width < 1 || header.height < 1))
      status = PXL_E_CORRUPT_IMAGE, snprintf(message, sizeof message, "%s reported a size of %d x %d", codec->id,
                                             header.width, header.height);
    frames.codec = codec;
    if (status == PXL_OK && codec->open_frames && codec->next_frame && codec->close_frames) {
      memset(message, 0, sizeof message);
      void *state = NULL;
      status = codec->open_frames(frames.data, frames.size, &state, message, sizeof message, codec->user_data);
      message[sizeof message - 1] = 0;
      if (status == PXL_OK) frames.state = state;
    }
    if (status != PXL_OK) {
      frames_close();
      return send_error(sock, serial, status, message[0] ? message : "cannot read the frames");
    }
    header_answer(&answer, serial, codec, &header, header.width, header.height);
    answer.first_duration_ms = -1;
  }
  frames.width = answer.width;
  frames.height = answer.height;
  if ((uint64_t)frames.width * (uint64_t)frames.height > max_pixels) {
    snprintf(message, sizeof message, "%d x %d exceeds max_pixels (%llu)", frames.width, frames.height,
             (unsigned long long)max_pixels);
    frames_close();
    return send_error(sock, serial, PXL_E_TOO_MANY_PIXELS, message);
  }
  if (pxl_wire_send(sock, &answer, sizeof answer, -1) != 0) return frames_close(), -1;

  pxl_worker_msg_pixels px;
  int pixel_fd = -1;
  int got = receive_pixels(sock, serial, &pixel_fd, &px);
  if (got <= 0) {
    frames_close();
    return got;
  }
  uint64_t stride = 4ull * (uint64_t)frames.width, need = stride * (uint64_t)frames.height + answer.icc_size;
  if (fstat(pixel_fd, &st) != 0 || px.stride != stride || px.size != need || (uint64_t)st.st_size != need) {
    close(pixel_fd);
    frames_close();
    return send_error(sock, serial, PXL_E_INVALID_ARGUMENT, "the canvas's size does not match the header");
  }
  frames.canvas = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, MAP_SHARED, pixel_fd, 0);
  close(pixel_fd);
  if (frames.canvas == MAP_FAILED) {
    frames.canvas = NULL;
    frames_close();
    return send_error(sock, serial, PXL_E_NO_MEMORY, "cannot map the canvas");
  }
  frames.map_size = (size_t)need;
  pxl_status status = PXL_OK;
  memset(message, 0, sizeof message);
  if (codec && !frames.state) status = collect_all(message, sizeof message);
  if (status == PXL_OK && answer.icc_size)
    status = codec->read_icc(frames.data, frames.size, frames.canvas + stride * (uint64_t)frames.height, answer.icc_size,
                             codec->user_data);
  message[sizeof message - 1] = 0;
  if (status != PXL_OK) {
    frames_close();
    return send_error(sock, serial, status, message[0] ? message : "the decoder failed");
  }
  frames.open = 1;
  pxl_worker_msg_done done;
  memset(&done, 0, sizeof done);
  pxl_wire_head(&done.head, PXL_WORKER_DONE, sizeof done, serial);
  done.cpu_ns = cpu_ns() - start;
  return pxl_wire_send(sock, &done, sizeof done, -1);
}

/* FRAME_NEXT: the next frame into the canvas, FRAME (end 1 after the last), or ERROR (the
 * state closed). */
static int serve_frame_next(int sock, uint32_t serial) {
  uint64_t start = cpu_ns();
  if (!frames.open) return send_error(sock, serial, PXL_E_INVALID_ARGUMENT, "no frames open");
  pxl_worker_msg_frame f;
  memset(&f, 0, sizeof f);
  pxl_wire_head(&f.head, PXL_WORKER_FRAME, sizeof f, serial);
  char message[PXL_WORKER_MESSAGE_CAP] = {0};
  size_t row = (size_t)frames.width * 4;
  if (frames.native) {
    pxl_codec_frame frame;
    int32_t status = native_frames_next(frames.native, &frame);
    if (status != PXL_CODEC_OK) {
      frame.message[sizeof frame.message - 1] = 0;
      frames_close();
      return send_error(sock, serial, from_codec_status(status), frame.message);
    }
    if (!frame.rgba) {
      f.end = 1;
    } else {
      if ((size_t)frame.stride < row) {
        frames_close();
        return send_error(sock, serial, PXL_E_CORRUPT_IMAGE, "the reader's frame is narrower than its canvas");
      }
      for (int32_t y = 0; y < frames.height; y++)
        memcpy(frames.canvas + (size_t)y * row, frame.rgba + (size_t)y * (size_t)frame.stride, row);
      f.index = frame.index;
      f.duration_ms = frame.duration_ms;
      f.incomplete = frame.incomplete;
    }
  } else if (frames.state) {
    pxl_codec_target target = frames_target(frames.canvas);
    int32_t duration = 0;
    pxl_status status = frames.codec->next_frame(frames.state, &target, &duration, message, sizeof message,
                                                 frames.codec->user_data);
    message[sizeof message - 1] = 0;
    if (status == PXL_E_NOT_FOUND) {
      f.end = 1;
    } else if (status != PXL_OK) {
      frames_close();
      return send_error(sock, serial, status, message[0] ? message : "the decoder failed");
    } else {
      f.index = frames.next++;
      f.duration_ms = duration;
    }
  } else if (frames.next < frames.count) {
    memcpy(frames.canvas, frames.all[frames.next], row * (size_t)frames.height);
    f.duration_ms = frames.durations[frames.next];
    f.index = frames.next++;
  } else {
    f.end = 1;
  }
  f.cpu_ns = cpu_ns() - start;
  return pxl_wire_send(sock, &f, sizeof f, -1);
}

int main(int argc, char **argv) {
  options o = parse(argc, argv);
  pxl_worker_msg_hello hello;
  memset(&hello, 0, sizeof hello);

  /* 1-3 */
  if (pxl_sandbox_close_fds(o.sock, o.keep_stderr)) hello.layers |= PXL_WORKER_LAYER_FDS_CLOSED;
  if (pxl_sandbox_no_new_privs()) hello.layers |= PXL_WORKER_LAYER_NO_NEW_PRIVS;
  if (pxl_sandbox_namespaces()) hello.layers |= PXL_WORKER_LAYER_NAMESPACES;

  /* 4: modules. Two malloc arenas at most: each reserves 64 MiB of address space, which
   * counts against RLIMIT_AS whether touched or not. */
  mallopt(M_ARENA_MAX, 2);
  /* A decoder's large buffers (a row buffer, an output image) from the heap and kept there
   * between decodes, not mmap'd and unmapped each time: a worker serves many images, and
   * faulting their pages in afresh each time cost it a tenth of its CPU on thumbnails. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  char message[256] = "";
  int codecs = pxl_worker_codecs_load(o.modules, o.only, message, sizeof message);
  pxl_worker_native_serve_fn native = NULL;
  if (o.builtins && codecs >= 0) {
    void *handle = dlopen(o.builtins, RTLD_NOW | RTLD_LOCAL);
    native = handle ? (pxl_worker_native_serve_fn)dlsym(handle, "pxl_worker_native_serve") : NULL;
    if (native) {
      native_frames_open = (pxl_worker_native_frames_open_fn)dlsym(handle, "pxl_worker_native_frames_open");
      native_frames_next = (pxl_worker_native_frames_next_fn)dlsym(handle, "pxl_worker_native_frames_next");
      native_frames_close = (pxl_worker_native_frames_close_fn)dlsym(handle, "pxl_worker_native_frames_close");
      if (!native_frames_open || !native_frames_next || !native_frames_close) native = NULL;
    }
    if (!native) {
      snprintf(message, sizeof message, "cannot load the built-in formats (%s): %s", o.builtins, dlerror());
      codecs = -1;
    }
  }

  /* 5-8 */
  as_limit = address_space_limit(&o);
  if (pxl_sandbox_rlimits(as_limit, o.keep_stderr)) hello.layers |= PXL_WORKER_LAYER_RLIMITS;
  else as_limit = 0;
  const char *paths[16];
  int n = 0;
  paths[n++] = o.modules;
  for (int i = 0; i < o.font_dir_count; i++) paths[n++] = o.font_dirs[i];
  n += font_paths(paths + n, 15 - n);
  paths[n] = NULL;
  hello.landlock_abi = (uint32_t)pxl_landlock_apply(paths);
  if (hello.landlock_abi) hello.layers |= PXL_WORKER_LAYER_LANDLOCK;
  if (!pxl_sandbox_close_fds(o.sock, o.keep_stderr)) hello.layers &= ~PXL_WORKER_LAYER_FDS_CLOSED;
  if (pxl_seccomp_apply(o.debug_seccomp)) hello.layers |= PXL_WORKER_LAYER_SECCOMP;

  /* Locked. HELLO, or an ERROR saying why there are no codecs. */
  if (codecs < 0) {
    send_error(o.sock, 0, PXL_E_UNSUPPORTED, message);
    return 1;
  }
  pxl_wire_head(&hello.head, PXL_WORKER_HELLO, sizeof hello, 0);
  hello.pid = getpid();
  hello.as_limit = as_limit;
  hello.codec_count = (uint32_t)pxl_worker_codec_list(hello.codecs, sizeof hello.codecs);
  if (pxl_wire_send(o.sock, &hello, sizeof hello, -1) != 0) return 1;

  for (;;) {
    union {
      pxl_worker_msg_head head;
      pxl_worker_msg_decode decode;
      pxl_worker_msg_native native;
      pxl_worker_msg_frames_open frames_open;
      char bytes[PXL_WORKER_MSG_MAX];
    } in;
    int fd = -1;
    ssize_t got = pxl_wire_recv(o.sock, &in, sizeof in, &fd);
    if (got == 0) return 0; /* the library closed the socket: done */
    if (got > 0 && (fd >= 0 || (in.native.flags & PXL_WORKER_NATIVE_KEPT_DATA)) && native &&
        pxl_wire_valid(&in, got, PXL_WORKER_NATIVE, sizeof in.native)) {
      /* (The kept data memfd's NATIVE brings a descriptor only when it grew.) */
      int rc = native(o.sock, o.max_input_bytes, &in.native, fd, &kept);
      if (fd >= 0) close(fd);
      if (rc != 0) return 1;
      continue;
    }
    if (got > 0 && fd >= 0 && pxl_wire_valid(&in, got, PXL_WORKER_FRAMES_OPEN, sizeof in.frames_open)) {
      int rc = serve_frames_open(o.sock, &o, &in.frames_open, fd);
      close(fd);
      if (rc != 0) return 1;
      continue;
    }
    if (got > 0 && fd < 0 && pxl_wire_valid(&in, got, PXL_WORKER_FRAME_NEXT, sizeof(pxl_worker_msg_frame_next))) {
      if (serve_frame_next(o.sock, in.head.serial) != 0) return 1;
      continue;
    }
    if (got > 0 && fd < 0 && pxl_wire_valid(&in, got, PXL_WORKER_FRAMES_CLOSE, sizeof(pxl_worker_msg_frames_close))) {
      frames_close();
      continue;
    }
    if (got < 0 || !pxl_wire_valid(&in, got, PXL_WORKER_DECODE, sizeof in.decode) ||
        (fd < 0 && !(in.decode.flags & PXL_WORKER_KEPT_DATA)))
      return 1;
    int rc = serve(o.sock, &o, &in.decode, fd);
    if (fd >= 0) close(fd);
    if (rc != 0) return 1;
  }
}
