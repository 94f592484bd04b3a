/*
 * libFuzzer target on one codec module (`make fuzz-heif`, `fuzz-jxl`, `fuzz-svg`): the
 * module's .c (codecs/NAME.c) is compiled into this program, under AddressSanitizer and
 * UBSan, and this file stands in for libpixload. A module imports two functions from the
 * library (`nm -D --undefined-only libpixload-NAME.so`: pxl_codec_init_size and
 * pxl_loader_add_codec); this file defines them, so the module's own
 * pxl_codec_module_register hands its pxl_codec here, checked as the library checks it.
 *
 * Each input is then decoded the way the library's decode stage calls a registered codec
 * (Sources/PixloadCore/Decoding/ImageDecoder+Codecs.swift, through CCodec in
 * Sources/Pixload/API+Codecs.swift): sniff on the first PXL_CODEC_SNIFF_BYTES; read_header
 * into a header the library initialised (frame_count 1, orientation 1, has_alpha 1); the
 * header's size, frame count and orientation checked, width x height against MAX_PIXELS
 * before any buffer exists; a PXL_CODEC_SCALABLE codec's size enlarged to a larger request
 * (within MAX_PIXELS); read_icc into a buffer of exactly icc_size bytes when the header
 * announces a profile (at most 4 MiB, PXL_ICC_MAX_BYTES); for an animation, decode_frames on
 * a zeroed canvas of the header's size with a frame_done that reads each frame and stops at
 * the library's animation bound (128 MiB of frames), and when the codec has open_frames
 * (next_frame, close_frames) the frames again as an animation player reads them, one at a
 * time into one canvas of the header's size, each (pixels and duration) checked against
 * decode_frames' and the state closed early when the input says so; else choose_size (when the request is
 * smaller than the image) and decode into a zeroed buffer of exactly the size drawn. A
 * codec that declares PXL_CODEC_PROGRESSIVE also gets a prefix of the input, copied to a
 * buffer of its own length, decoded with PXL_CODEC_PARTIAL (PXL_E_NOT_FOUND: nothing yet).
 * Every buffer the codec sees is exactly as long as the library's would be, so reading or
 * writing past one is an ASan report.
 *
 * The request (orientation kept or applied, the size asked, animation on or off, the
 * cancel flag, the prefix length) is chosen from the input's length and last 8 bytes (as
 * Tests/fuzz/driver's FuzzChoices does), so every seed file is valid as it stands.
 *
 * The libraries behind the modules (libheif, libjxl, librsvg) are the system's builds,
 * not instrumented: a fault inside one still stops the run (SEGV), but an over-read
 * inside one that stays in mapped memory is not seen.
 *
 * A plain build (-DMODULE_FUZZ_MAIN, no -fsanitize=fuzzer) replays files given as
 * arguments: one line per file and "N passed, N failed" last (`make test-modules` replays
 * the regressions and the seeds so).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pixload.h"

/* Large enough for every seed; small enough that libFuzzer's RSS limit is never the finding. */
#define MAX_PIXELS 4000000ull
/* The library's bounds: PXL_ICC_MAX_BYTES (Sources/CCodecs/include/pxl_codecs.h) and
 * Animation.maxBytes (Sources/PixloadCore/Model/Image.swift). */
#define ICC_MAX_BYTES ((size_t)4 << 20)
#define ANIMATION_MAX_BYTES ((size_t)128 << 20)
#define MESSAGE_CAP 256 /* CCodec's messageCapacity */

pxl_status pxl_codec_module_register(pxl_loader *loader);

/* ---- the library's side of registration ---- */

static pxl_codec registered;
static int registrations;

pxl_status pxl_codec_init_size(pxl_codec *codec, size_t size) {
  if (!codec || size < sizeof codec->struct_size) return PXL_E_INVALID_ARGUMENT;
  memset(codec, 0, size);
  codec->struct_size = size < sizeof *codec ? size : sizeof *codec;
  return PXL_OK;
}

static int valid_id(const char *id) {
  size_t n = strlen(id);
  if (n < 1 || n > 31) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-')) return 0;
  return 1;
}

/* What pxl_loader_add_codec checks before the codec joins the loader's CodecTable. */
pxl_status pxl_loader_add_codec(pxl_loader *loader, const pxl_codec *codec) {
  if (!loader || !codec || codec->struct_size != sizeof *codec) return PXL_E_INVALID_ARGUMENT;
  if (!codec->id || !codec->version || !codec->sniff || !codec->read_header || !codec->decode ||
      !valid_id(codec->id) || registrations > 0) {
    if (codec->destroy) codec->destroy(codec->user_data);
    return PXL_E_INVALID_ARGUMENT;
  }
  registered = *codec;
  registered.id = strdup(codec->id); /* copied, as the library does */
  registered.version = strdup(codec->version);
  registrations++;
  return PXL_OK;
}

static void broken(const char *what);

static void register_module(void) {
  if (registrations) return;
  static char loader_stand_in;
  if (pxl_codec_module_register((pxl_loader *)&loader_stand_in) != PXL_OK || registrations != 1) {
    fprintf(stderr, "module_fuzz: the module did not register a codec\n");
    abort();
  }
}

/* ---- checks ---- */

static int replaying, failures;

static void broken(const char *what) {
  fprintf(stderr, "module_fuzz: %s: broken promise: %s\n", registered.id, what);
  if (!replaying) abort();
  failures++;
}

static void check(int ok, const char *what) {
  if (!ok) broken(what);
}

static volatile uint32_t sink;

/* What the last input ended with (pxl_status values, the codec's last message), for the
 * replay's lines. */
static char report[512];
static char last_message[MESSAGE_CAP];

/* A message the codec wrote is NUL-terminated inside its buffer (pixload.h: "message
 * (message_cap bytes, NUL-terminate it)"). The buffer starts zeroed, as CCodec's. */
static void check_message(const char *message) {
  check(memchr(message, 0, MESSAGE_CAP) != NULL, "a message not NUL-terminated within message_cap");
  snprintf(last_message, sizeof last_message, "%.*s", MESSAGE_CAP - 1, message);
}

/* ---- choices from the input (FuzzChoices) ---- */

typedef struct choices { uint64_t bits; } choices;

static choices choices_of(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull, length = size;
  for (int i = 0; i < 8; i++) hash = (hash ^ (uint8_t)(length >> (8 * i))) * 0x100000001b3ull;
  for (size_t i = size > 8 ? size - 8 : 0; i < size; i++) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return (choices){hash};
}

static uint32_t take(choices *c, uint32_t n) {
  uint32_t digit = (uint32_t)(c->bits % n);
  c->bits /= n;
  return digit;
}

/* ---- one decode, as ImageDecoder.decodeWithCodec ---- */

typedef struct request {
  uint32_t flags;       /* PXL_CODEC_KEEP_ORIENTATION, PXL_CODEC_PARTIAL */
  int32_t side;         /* the FIT box asked for; 0: full size */
  int animate;          /* PXL_FLAG_ANIMATE */
  int32_t cancel;       /* the decode's cancel flag, raised before the decode */
  int32_t play;         /* frames an animation player reads before it closes; 0: all */
} request;

/* Frames whose pixels and durations are remembered, to compare decode_frames' with
 * next_frame's (pixload.h: "Each frame must be what decode_frames hands over for it"). */
#define KEPT_FRAMES 256

/* What frame_done sees (the FrameCollector's part that matters here). */
typedef struct frames {
  const uint8_t *canvas;
  int32_t width, height;
  size_t frame_bytes, bytes;
  int count, over_bound;
  uint64_t hash[KEPT_FRAMES];
  int32_t duration[KEPT_FRAMES];
} frames;

/* FNV-1a over 8-byte words (the canvas is width x height x 4 bytes, a multiple of 4). */
static uint64_t canvas_hash(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static int32_t frame_done(void *library, int32_t duration_ms) {
  frames *f = library;
  if (f->bytes + f->frame_bytes > ANIMATION_MAX_BYTES) {
    f->over_bound = 1;
    return 1;
  }
  /* The collector reads every row of the canvas; the first and last column of each row
   * is enough for ASan to see a canvas the codec shrank (the buffer is ours). */
  size_t stride = (size_t)f->width * 4;
  for (int32_t y = 0; y < f->height; y++) sink += f->canvas[y * stride] + f->canvas[y * stride + stride - 1];
  if (f->count < KEPT_FRAMES) {
    f->hash[f->count] = canvas_hash(f->canvas, stride * (size_t)f->height);
    f->duration[f->count] = duration_ms;
  }
  f->bytes += f->frame_bytes;
  f->count++;
  return 0;
}

static pxl_codec_target target_for(const request *r, uint8_t *pixels, int32_t width, int32_t height) {
  pxl_codec_target t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.flags = r->flags;
  t.width = width;
  t.height = height;
  t.pixels = pixels;
  t.stride = (size_t)width * 4;
  t.cancel = &r->cancel;
  return t;
}

/* The frames again as an animation player reads them (FrameSource: open_frames, then
 * next_frame into one zeroed canvas of the header's size, the same buffer every call,
 * close_frames at the end or after r->play frames): each the same as decode_frames' (f),
 * the end where decode_frames' was (PXL_E_NOT_FOUND after its last frame, or the error it
 * ended with). */
static void play_frames(const uint8_t *data, size_t size, const request *r, const pxl_codec_header *header,
                        const frames *f, pxl_status frames_status) {
  const pxl_codec *c = &registered;
  char message[MESSAGE_CAP];
  memset(message, 0, sizeof message);
  void *state = NULL;
  pxl_status status = c->open_frames(data, size, &state, message, sizeof message, c->user_data);
  if (status != PXL_OK) {
    check_message(message);
    check(frames_status != PXL_OK || f->count == 0, "open_frames failed where decode_frames gave frames");
    return;
  }
  size_t bytes = (size_t)header->width * (size_t)header->height * 4;
  uint8_t *canvas = calloc(bytes, 1);
  pxl_codec_target t = target_for(r, canvas, header->width, header->height);
  int n = 0;
  for (;;) {
    if (r->play && n == r->play) break; /* a player closing mid-animation (paused, freed) */
    int32_t duration = -1;
    memset(message, 0, sizeof message);
    status = c->next_frame(state, &t, &duration, message, sizeof message, c->user_data);
    if (status != PXL_OK) {
      check_message(message);
      break;
    }
    for (int32_t y = 0; y < header->height; y++) sink += canvas[(size_t)y * t.stride] + canvas[(size_t)y * t.stride + t.stride - 1];
    if (n < f->count && n < KEPT_FRAMES) {
      check(canvas_hash(canvas, bytes) == f->hash[n], "next_frame drew another frame than decode_frames");
      check(duration == f->duration[n], "next_frame gave another duration than decode_frames");
    }
    n++;
    if (n > f->count && frames_status == PXL_OK && !r->cancel) {
      broken("next_frame gave more frames than decode_frames");
      break;
    }
  }
  c->close_frames(state, c->user_data);
  free(canvas);
  /* Cancelled, decode_frames may stop at any frame; otherwise both end alike. */
  if (!r->play && !r->cancel) {
    check(frames_status != PXL_OK || (status == PXL_E_NOT_FOUND && n == f->count),
          "next_frame ended otherwise than decode_frames (frames or PXL_E_NOT_FOUND)");
    check(frames_status == PXL_OK || status != PXL_OK, "next_frame went on where decode_frames failed");
  }
}

/* Returns the status the request would end with (PXL_OK: pixels delivered). */
static pxl_status decode_as_library(const uint8_t *data, size_t size, const request *r) {
  const pxl_codec *c = &registered;
  char message[MESSAGE_CAP];
  memset(message, 0, sizeof message);
  pxl_codec_header header;
  memset(&header, 0, sizeof header);
  header.struct_size = sizeof header;
  header.flags = r->flags & PXL_CODEC_KEEP_ORIENTATION;
  header.frame_count = 1;
  header.orientation = 1;
  header.has_alpha = 1;
  pxl_status status = c->read_header(data, size, &header, message, sizeof message, c->user_data);
  if (status != PXL_OK) {
    check_message(message);
    return status;
  }
  if (header.width <= 0 || header.height <= 0 || header.frame_count < 1 || header.orientation < 1 ||
      header.orientation > 8)
    return PXL_E_CORRUPT_IMAGE; /* the library refuses such a header */
  if ((uint64_t)header.width * (uint64_t)header.height > MAX_PIXELS) return PXL_E_TOO_MANY_PIXELS;

  /* Colour: the profile the header announced (CCodec: only with a read_icc). */
  if (c->read_icc && header.icc_size > 0 && header.icc_size <= ICC_MAX_BYTES) {
    uint8_t *icc = malloc(header.icc_size);
    if (c->read_icc(data, size, icc, header.icc_size, c->user_data) == PXL_OK) sink += icc[0] + icc[header.icc_size - 1];
    free(icc);
  }

  /* PXL_CODEC_SCALABLE (a vector): a request larger than the header's size is drawn at the
   * size it asks, FIT into side x side, within MAX_PIXELS (ImageDecoder.enlarged; a square
   * box is the same for every orientation). */
  if ((c->flags & PXL_CODEC_SCALABLE) && r->side > 0) {
    double scale = (double)r->side / (header.width > header.height ? header.width : header.height);
    double cap = sqrt((double)MAX_PIXELS / ((double)header.width * header.height));
    if (cap < scale) scale = cap;
    if (scale > 1) {
      int64_t w = (int64_t)llround(header.width * scale), h = (int64_t)llround(header.height * scale);
      if (w < 1) w = 1;
      if (h < 1) h = 1;
      while ((uint64_t)w * (uint64_t)h > MAX_PIXELS && w > 1 && h > 1) {
        if (w >= h) w--; else h--;
      }
      header.width = (int32_t)w;
      header.height = (int32_t)h;
    }
  }

  /* The size the request wants (FIT into side x side, never up); rotated sides for 5..8
   * do not change a square box. */
  int32_t want_w = header.width, want_h = header.height;
  if (r->side > 0 && (header.width > r->side || header.height > r->side)) {
    double scale = header.width > header.height ? (double)r->side / header.width : (double)r->side / header.height;
    want_w = (int32_t)(header.width * scale + 0.999);
    want_h = (int32_t)(header.height * scale + 0.999);
    if (want_w < 1) want_w = 1;
    if (want_h < 1) want_h = 1;
    if (want_w > header.width) want_w = header.width;
    if (want_h > header.height) want_h = header.height;
  }

  int partial = (r->flags & PXL_CODEC_PARTIAL) != 0;
  if (r->animate && header.frame_count > 1 && c->decode_frames && !partial) {
    size_t frame_bytes = (size_t)want_w * (size_t)want_h * 4;
    if ((size_t)header.frame_count <= ANIMATION_MAX_BYTES / frame_bytes) {
      uint8_t *canvas = calloc((size_t)header.width * (size_t)header.height, 4);
      frames f = {canvas, header.width, header.height, frame_bytes, 0, 0, 0};
      pxl_codec_target t = target_for(r, canvas, header.width, header.height);
      t.frame_done = frame_done;
      t.library = &f;
      memset(message, 0, sizeof message);
      status = c->decode_frames(data, size, &t, message, sizeof message, c->user_data);
      if (status != PXL_OK) check_message(message);
      if (c->open_frames && c->next_frame && c->close_frames && !f.over_bound) play_frames(data, size, r, &header, &f, status);
      free(canvas);
      if (!f.over_bound) {
        if (status != PXL_OK) return status;
        return f.count > 0 ? PXL_OK : PXL_E_CORRUPT_IMAGE;
      }
      /* Over the bound: the first frame as a still, below. */
    }
  }

  int32_t width = header.width, height = header.height;
  if ((want_w < width || want_h < height) && c->choose_size) {
    int32_t w = want_w, h = want_h;
    uint32_t flags = r->flags & PXL_CODEC_KEEP_ORIENTATION;
    if (c->choose_size(data, size, flags, &w, &h, c->user_data) == PXL_OK && w >= want_w && h >= want_h &&
        w <= width && h <= height) {
      width = w;
      height = h;
    }
  }
  uint8_t *pixels = calloc((size_t)width * (size_t)height, 4);
  pxl_codec_target t = target_for(r, pixels, width, height);
  memset(message, 0, sizeof message);
  status = c->decode(data, size, &t, message, sizeof message, c->user_data);
  if (status == PXL_OK) {
    size_t count = (size_t)width * (size_t)height;
    for (size_t i = 0; i < count; i++) {
      const uint8_t *p = pixels + 4 * i;
      /* PXL_CODEC_PREMULTIPLIED: no colour channel above its alpha. */
      if ((c->flags & PXL_CODEC_PREMULTIPLIED) && (p[0] > p[3] || p[1] > p[3] || p[2] > p[3])) {
        broken("a premultiplying codec wrote a channel above its alpha");
        break;
      }
      sink += p[0];
    }
  } else {
    check_message(message);
  }
  free(pixels);
  return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  register_module();
  if (size == 0) return 0; /* CodecTable.acquire: an empty body goes to no codec */
  /* sniff sees at most PXL_CODEC_SNIFF_BYTES, in a buffer of that length. */
  size_t head_size = size < PXL_CODEC_SNIFF_BYTES ? size : PXL_CODEC_SNIFF_BYTES;
  uint8_t *head = malloc(head_size);
  memcpy(head, data, head_size);
  report[0] = '\0';
  int32_t taken = registered.sniff(head, head_size, registered.user_data);
  free(head);
  if (!taken) return 0;

  choices c = choices_of(data, size);
  static const int32_t sides[] = {0, 150, 1, 64, 7, 2000}; /* 2000: a vector enlarged to the cap */
  request r = {0, 0, 0, 0, 0};
  r.flags = take(&c, 2) ? PXL_CODEC_KEEP_ORIENTATION : 0;
  r.side = sides[take(&c, sizeof sides / sizeof sides[0])];
  r.animate = take(&c, 4) != 0;
  r.cancel = take(&c, 16) == 0; /* nobody waits any more: the codec may stop */
  /* The prefix's length, then the player's frames: chosen after the others so that they
   * stay what they were for every seed. */
  uint32_t eighths = take(&c, 8);
  static const int32_t plays[] = {0, 0, 1, 2};
  r.play = plays[take(&c, 4)];
  last_message[0] = '\0';
  pxl_status status = decode_as_library(data, size, &r);
  snprintf(report, sizeof report, "status %d%s%s", (int)status, last_message[0] ? " " : "", last_message);

  if (registered.flags & PXL_CODEC_PROGRESSIVE) {
    /* A file still arriving: 1/8 .. 7/8 of it, or all but its last byte. */
    size_t prefix_size = eighths ? size * eighths / 8 : size - 1;
    if (prefix_size > 0) {
      uint8_t *prefix = malloc(prefix_size);
      memcpy(prefix, data, prefix_size);
      request p = r;
      p.flags |= PXL_CODEC_PARTIAL;
      p.animate = 0;
      /* PXL_E_NOT_FOUND: no pass to show yet */
      last_message[0] = '\0';
      status = decode_as_library(prefix, prefix_size, &p);
      size_t used = strlen(report);
      snprintf(report + used, sizeof report - used, "; %zu-byte prefix: status %d%s%s", prefix_size, (int)status,
               last_message[0] ? " " : "", last_message);
      free(prefix);
    }
  }
  return 0;
}

#ifdef MODULE_FUZZ_MAIN
int main(int argc, char **argv) {
  replaying = 1;
  int passed = 0, failed = 0;
  for (int i = 1; i < argc; i++) {
    FILE *fp = fopen(argv[i], "rb");
    if (!fp) {
      printf("FAIL  %s: cannot open\n", argv[i]);
      failed++;
      continue;
    }
    size_t cap = 1 << 20, n = 0, got;
    uint8_t *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
      n += got;
      if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(fp);
    /* Its own allocation of exactly n bytes, as libFuzzer gives. */
    uint8_t *input = malloc(n ? n : 1);
    memcpy(input, buf, n);
    free(buf);
    int before = failures;
    LLVMFuzzerTestOneInput(input, n);
    free(input);
    int ok = failures == before;
    printf("%s  %s: %s\n", ok ? "ok  " : "FAIL", argv[i], report[0] ? report : "not sniffed");
    fflush(stdout); /* before LeakSanitizer's report at exit, which ends the process */
    if (ok) passed++; else failed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
#endif
