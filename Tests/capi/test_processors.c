/*
 * Processors through the C API (pixload.h, "Processors"): built-ins on a served JPEG and
 * PNG, the chain in the memory-cache key, merged work counted by a custom processor's own
 * calls, bad chains refused before any work with a log line naming the step, and custom
 * processors that fail, resize, are cancelled through their flag, unregistered, or
 * outlive their loader, each request ending with one callback and destroy called once;
 * and processed images through a table (the chain from request_fn), an animated GIF
 * (every frame processed, still animated) and a progressive JPEG's preview (circular).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

static pxl_processor step(pxl_processor_kind kind) {
  pxl_processor p;
  memset(&p, 0, sizeof p);
  p.kind = kind;
  return p;
}

void test_processors_builtin(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "processors-builtin");
  pxl_processor chain[2] = {step(PXL_PROCESS_CIRCLE), step(PXL_PROCESS_ROTATE)};
  chain[0].border_width = 2;
  chain[0].color = 0xffffffffu;
  chain[1].degrees = 90;
  pxl_request request;
  request_for(&request, u.url, 120, 80, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.processors = chain;
  request.processor_count = 2;
  struct capture c = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  if (c.image) {
    CHECK_INT(pxl_image_width(c.image), 80); /* the centred 80x80 square */
    CHECK_INT(pxl_image_height(c.image), 80);
    CHECK_INT(pixel_at(c.image, 0, 0)[3], 0);        /* outside the disc */
    CHECK_INT(pixel_at(c.image, 40, 40)[3], 255);    /* inside */
    const uint8_t *border = pixel_at(c.image, 40, 0); /* the white border at the top */
    CHECKF(border[0] == 255 && border[1] == 255 && border[2] == 255, "border %d %d %d", border[0], border[1],
           border[2]);
    /* Rotated clockwise: the gradient's red (rising left to right) now rises top to bottom. */
    CHECKF(pixel_at(c.image, 40, 70)[0] > pixel_at(c.image, 40, 10)[0] + 40, "rotated red %d -> %d",
           pixel_at(c.image, 40, 10)[0], pixel_at(c.image, 40, 70)[0]);
  }
  /* The chain is part of the memory key. */
  pxl_image *found = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &found), PXL_OK);
  CHECK(found != NULL && found == c.image);
  pxl_image_release(found);
  chain[1].degrees = 180;
  CHECK_STATUS(pxl_lookup(loader, &request, &found), PXL_E_NOT_FOUND);
  request.processor_count = 0;
  CHECK_STATUS(pxl_lookup(loader, &request, &found), PXL_E_NOT_FOUND);
  capture_reset(&c);

  /* Premultiplied alpha input: rounded corners keep the PNG's alpha inside. */
  struct test_url a = test_url(env, "/" FIXTURE_ALPHA_PNG, "processors-alpha");
  pxl_processor round = step(PXL_PROCESS_ROUND);
  round.radius_tl = round.radius_tr = round.radius_br = round.radius_bl = 20;
  request_for(&request, a.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.processors = &round;
  request.processor_count = 1;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  if (c.image) {
    unsigned char want[4];
    fixture_alpha_pixel(150, 100, want);
    const uint8_t *mid = pixel_at(c.image, 150, 100);
    CHECKF(abs(mid[0] - want[0]) <= 2 && abs(mid[3] - want[3]) <= 1, "inside kept: %d/%d vs %d/%d", mid[0], mid[3],
           want[0], want[3]);
    CHECK_INT(pixel_at(c.image, 299, 0)[3], 0); /* the opaque column's corner cut away */
  }
  capture_reset(&c);

  /* A crop outside the image as it turns out: an error result, not a crash. */
  pxl_processor crop = step(PXL_PROCESS_CROP);
  crop.x = 250, crop.y = 0, crop.width = 100, crop.height = 10;
  request.processors = &crop;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_E_INVALID_ARGUMENT);
  CHECKF(strstr(c.message, "crop") != NULL, "message: %s", c.message);
  capture_reset(&c);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}

struct log_lines {
  pthread_mutex_t lock;
  char last[512];
  int count;
};

static void keep_log(int32_t level, const char *message, void *user_data) {
  (void)level;
  struct log_lines *log = user_data;
  pthread_mutex_lock(&log->lock);
  snprintf(log->last, sizeof log->last, "%s", message);
  log->count++;
  pthread_mutex_unlock(&log->lock);
}

static void count_destroy(void *user_data) { atomic_fetch_add((atomic_int *)user_data, 1); }

static pxl_status ok_processor(pxl_processor_frame *frame, char *message, size_t size, void *user_data) {
  (void)frame, (void)message, (void)size;
  atomic_fetch_add((atomic_int *)user_data, 1);
  return PXL_OK;
}

/* Registrations tried on a closed loader: from the destroy of a processor that
 * pxl_loader_free retires (the loader is still valid there, and closed). */
struct closed_probe {
  pxl_loader *loader;
  pxl_status processor, fetcher, codec;
  atomic_int processor_destroys, fetcher_destroys, codec_destroys;
};

static void never_start(const char *url, pxl_fetch *fetch, void *user_data) { (void)url, (void)fetch, (void)user_data; }
static int32_t never_sniff(const uint8_t *data, size_t size, void *user_data) { (void)data, (void)size, (void)user_data; return 0; }
static pxl_status never_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message,
                               size_t cap, void *user_data) {
  (void)data, (void)size, (void)header, (void)message, (void)cap, (void)user_data;
  return PXL_E_CORRUPT_IMAGE;
}
static pxl_status never_decode(const uint8_t *data, size_t size, pxl_codec_target *target, char *message, size_t cap,
                               void *user_data) {
  (void)data, (void)size, (void)target, (void)message, (void)cap, (void)user_data;
  return PXL_E_CORRUPT_IMAGE;
}

static void probe_closed_loader(void *user_data) {
  struct closed_probe *p = user_data;
  p->processor = pxl_loader_add_processor(p->loader, "late", 1, ok_processor, &p->processor_destroys, count_destroy);
  pxl_fetcher fetcher;
  pxl_fetcher_init(&fetcher);
  fetcher.start = never_start;
  fetcher.destroy = count_destroy;
  fetcher.user_data = &p->fetcher_destroys;
  p->fetcher = pxl_loader_add_fetcher(p->loader, "late", &fetcher);
  pxl_codec codec;
  pxl_codec_init(&codec);
  codec.id = "late";
  codec.version = "1";
  codec.sniff = never_sniff;
  codec.read_header = never_header;
  codec.decode = never_decode;
  codec.destroy = count_destroy;
  codec.user_data = &p->codec_destroys;
  p->codec = pxl_loader_add_codec(p->loader, &codec);
}

void test_processors_invalid(const struct test_env *env) {
  struct log_lines log = {PTHREAD_MUTEX_INITIALIZER, "", 0};
  pxl_config config;
  pxl_config_init(&config);
  config.log = keep_log;
  config.log_user_data = &log;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "processors-invalid");
  pxl_request request;
  request_for(&request, u.url, 32, 32, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture c = {0};
  pxl_processor chain[PXL_MAX_PROCESSORS + 1];
  for (int i = 0; i <= PXL_MAX_PROCESSORS; i++) chain[i] = step(PXL_PROCESS_GRAY);
  request.processors = chain;

  struct { const char *what; const char *words; } cases[] = {
      {"sigma", "processor 1 (blur)"}, {"radius", "processor 1 (round)"}, {"rotate", "processor 1 (rotate)"},
      {"kind", "unknown kind"},        {"custom", "no processor 'nobody'"}, {"long", "exceeds the limit"},
      {"crop", "processor 1 (crop)"},      {"nan", "processor 1 (circle)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    request.processor_count = 2;
    chain[1] = step(PXL_PROCESS_GRAY);
    const char *what = cases[i].what;
    if (!strcmp(what, "sigma")) chain[1] = step(PXL_PROCESS_BLUR), chain[1].sigma = PXL_MAX_BLUR_SIGMA + 1;
    if (!strcmp(what, "radius")) chain[1] = step(PXL_PROCESS_ROUND), chain[1].radius_br = -1;
    if (!strcmp(what, "rotate")) chain[1] = step(PXL_PROCESS_ROTATE), chain[1].degrees = 45;
    if (!strcmp(what, "kind")) chain[1] = step((pxl_processor_kind)99);
    if (!strcmp(what, "custom")) chain[1] = step(PXL_PROCESS_CUSTOM), chain[1].id = "nobody";
    if (!strcmp(what, "long")) request.processor_count = PXL_MAX_PROCESSORS + 1;
    if (!strcmp(what, "crop")) chain[1] = step(PXL_PROCESS_CROP), chain[1].x = -1, chain[1].width = 4, chain[1].height = 4;
    if (!strcmp(what, "nan")) chain[1] = step(PXL_PROCESS_CIRCLE), chain[1].border_width = NAN;
    int before = log.count;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, NULL), PXL_E_INVALID_ARGUMENT);
    pxl_image *img = NULL;
    CHECK_STATUS(pxl_lookup(loader, &request, &img), PXL_E_INVALID_ARGUMENT);
    pthread_mutex_lock(&log.lock);
    CHECKF(log.count > before && strstr(log.last, cases[i].words) != NULL, "%s: log \"%s\"", what, log.last);
    pthread_mutex_unlock(&log.lock);
  }
  /* A radius or border past any image is clamped to it (a lookup that misses), not refused. */
  chain[1] = step(PXL_PROCESS_ROUND);
  chain[1].radius_tl = chain[1].radius_tr = chain[1].radius_br = chain[1].radius_bl = INFINITY;
  chain[1].border_width = 2e6;
  request.processor_count = 2;
  pxl_image *img = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &img), PXL_E_NOT_FOUND);
  CHECK_INT(drain_for(queue, 100), 0); /* no callback for a refused request */
  CHECK_INT(log_count(env, u.uri), 0);  /* and no request reached the server */

  /* Registration arguments: a refusal never calls a processor's destroy, as 0.5.0
   * promised (pixload.h, "Extensions"): user_data is still the caller's. */
  atomic_int calls = 0;
  char long_id[258];
  memset(long_id, 'a', sizeof long_id - 1);
  long_id[sizeof long_id - 1] = 0;
  CHECK_STATUS(pxl_loader_add_processor(NULL, "x", 1, ok_processor, &calls, count_destroy), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_processor(loader, NULL, 1, ok_processor, &calls, count_destroy), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_processor(loader, "", 1, ok_processor, &calls, count_destroy), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_processor(loader, long_id, 1, ok_processor, &calls, count_destroy), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_processor(loader, "x", 1, NULL, &calls, count_destroy), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(atomic_load(&calls), 0);
  CHECK_STATUS(pxl_loader_add_processor(loader, "x", 1, NULL, &calls, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_remove_processor(loader, "x"), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_loader_remove_processor(NULL, "x"), PXL_E_INVALID_ARGUMENT);

  /* A closed loader: PXL_E_LOADER_CLOSED, and the per-kind rule still holds: destroy is
   * called for the codec only, never for the processor or the fetcher. */
  struct closed_probe probe = {.loader = loader, .processor = PXL_OK, .fetcher = PXL_OK, .codec = PXL_OK};
  /* "probe" never runs: its destroy, during pxl_loader_free, tries the registrations. */
  CHECK_STATUS(pxl_loader_add_processor(loader, "probe", 1, ok_processor, &probe, probe_closed_loader), PXL_OK);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
  CHECK_STATUS(probe.processor, PXL_E_LOADER_CLOSED);
  CHECK_STATUS(probe.fetcher, PXL_E_LOADER_CLOSED);
  CHECK_STATUS(probe.codec, PXL_E_LOADER_CLOSED);
  CHECK_INT(atomic_load(&probe.processor_destroys), 0);
  CHECK_INT(atomic_load(&probe.fetcher_destroys), 0);
  CHECK_INT(atomic_load(&probe.codec_destroys), 1);
}

/* ---- custom processors ---- */

struct custom_state {
  atomic_int calls;
  atomic_int destroyed;
  atomic_int saw_cancel;
  atomic_int entered;
  int mode; /* 0 invert, 1 fail, 2 resize to 10x5, 3 wait for the cancel flag, 4 fail with
              a status the library does not know */
};

static pxl_status custom_processor(pxl_processor_frame *frame, char *message, size_t size, void *user_data) {
  struct custom_state *state = user_data;
  atomic_fetch_add(&state->calls, 1);
  atomic_store(&state->entered, 1);
  switch (state->mode) {
  case 1:
    snprintf(message, size, "no faces in this %dx%d image", frame->width, frame->height);
    return PXL_E_UNSUPPORTED_IMAGE;
  case 4:
    snprintf(message, size, "told to fail");
    return (pxl_status)1234;
  case 2: {
    uint8_t *out = pxl_processor_frame_resize(frame, 10, 5);
    if (!out || frame->width != 10 || frame->stride != 40 || frame->pixels != out) return PXL_E_NO_MEMORY;
    for (int i = 0; i < 10 * 5; i++) memcpy(out + i * 4, frame->input, 4); /* the input's first pixel */
    CHECK(pxl_processor_frame_resize(frame, 0, 5) == NULL);
    return PXL_OK;
  }
  case 3: {
    double start = now_ms();
    /* An atomic load, as the header asks: the library raises it from another thread. */
    while (!__atomic_load_n(frame->cancelled, __ATOMIC_ACQUIRE) && now_ms() - start < 10000) sleep_ms(1);
    if (__atomic_load_n(frame->cancelled, __ATOMIC_ACQUIRE)) atomic_store(&state->saw_cancel, 1);
    return PXL_E_CANCELLED;
  }
  default:
    for (int32_t y = 0; y < frame->height; y++) {
      uint8_t *row = frame->pixels + (size_t)y * frame->stride;
      for (int32_t x = 0; x < frame->width * 4; x += 4) {
        for (int k = 0; k < 3; k++) row[x + k] = (uint8_t)(row[x + 3] - row[x + k]); /* premultiplied invert */
      }
    }
    return PXL_OK;
  }
}

static void destroy_state(void *user_data) { atomic_fetch_add(&((struct custom_state *)user_data)->destroyed, 1); }

void test_processors_custom(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct custom_state invert = {0}, failing = {0}, resize = {0};
  failing.mode = 1;
  resize.mode = 2;
  CHECK_STATUS(pxl_loader_add_processor(loader, "invert", 1, custom_processor, &invert, destroy_state), PXL_OK);
  CHECK_STATUS(pxl_loader_add_processor(loader, "fail", 1, custom_processor, &failing, destroy_state), PXL_OK);
  CHECK_STATUS(pxl_loader_add_processor(loader, "resize", 1, custom_processor, &resize, destroy_state), PXL_OK);

  /* Merged per prefix: [invert], [invert, gray] and [invert, blur 2] together run invert once. */
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "processors-merged");
  pxl_processor chains[3][2];
  pxl_request requests[3];
  struct capture captures[3];
  memset(captures, 0, sizeof captures);
  atomic_int done = 0;
  for (int i = 0; i < 3; i++) {
    chains[i][0] = step(PXL_PROCESS_CUSTOM);
    chains[i][0].id = "invert";
    chains[i][1] = step(i == 1 ? PXL_PROCESS_GRAY : PXL_PROCESS_BLUR);
    chains[i][1].sigma = 2;
    request_for(&requests[i], u.url, 64, 48, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    requests[i].processors = chains[i];
    requests[i].processor_count = i == 0 ? 1 : 2;
    captures[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &requests[i], queue, capture_callback, &captures[i], NULL), PXL_OK);
  }
  int all = 1;
  for (int i = 0; i < 3; i++) all &= drain_until(env, queue, &captures[i].calls, 1, 10000);
  CHECK(all);
  CHECK_INT(atomic_load(&invert.calls), 1);
  CHECK_INT(log_count(env, u.uri), 1);
  if (captures[0].image) {
    /* The gradient's top-left is dark: inverted, bright. */
    CHECKF(pixel_at(captures[0].image, 0, 0)[0] > 200, "inverted %d", pixel_at(captures[0].image, 0, 0)[0]);
  }
  for (int i = 0; i < 3; i++) {
    CHECK_STATUS(captures[i].status, PXL_OK);
    capture_reset(&captures[i]);
  }

  /* A failing processor: its status and message are the request's. */
  pxl_processor one = step(PXL_PROCESS_CUSTOM);
  one.id = "fail";
  pxl_request request;
  request_for(&request, u.url, 64, 48, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.processors = &one;
  request.processor_count = 1;
  struct capture c = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_E_UNSUPPORTED_IMAGE);
  CHECKF(strcmp(c.message, "no faces in this 64x48 image") == 0, "message: %s", c.message);
  CHECK_INT(atomic_load(&c.calls), 1);
  capture_reset(&c);

  /* A status this library does not know counts as PXL_E_IO (pixload.h, "Extensions"). */
  struct custom_state odd = {0};
  odd.mode = 4;
  CHECK_STATUS(pxl_loader_add_processor(loader, "odd", 1, custom_processor, &odd, destroy_state), PXL_OK);
  one.id = "odd";
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_E_IO);
  CHECKF(strcmp(c.message, "told to fail") == 0, "message: %s", c.message);
  capture_reset(&c);

  /* A new size, asked of the library. */
  one.id = "resize";
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  if (c.image) {
    CHECK_INT(pxl_image_width(c.image), 10);
    CHECK_INT(pxl_image_height(c.image), 5);
  }
  capture_reset(&c);

  /* Unregistered: destroy once, later requests refused. */
  CHECK_STATUS(pxl_loader_remove_processor(loader, "fail"), PXL_OK);
  CHECK_INT(atomic_load(&failing.destroyed), 1);
  one.id = "fail";
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, NULL), PXL_E_INVALID_ARGUMENT);

  /* Cancelled through its flag while it runs. */
  struct custom_state slow = {0};
  slow.mode = 3;
  CHECK_STATUS(pxl_loader_add_processor(loader, "slow", 1, custom_processor, &slow, destroy_state), PXL_OK);
  one.id = "slow";
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, &token), PXL_OK);
  double start = now_ms();
  while (!atomic_load(&slow.entered) && now_ms() - start < 10000 * env->slow_factor) sleep_ms(1);
  CHECK(atomic_load(&slow.entered));
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 10000));
  CHECK_STATUS(c.status, PXL_E_CANCELLED);
  start = now_ms();
  while (!atomic_load(&slow.saw_cancel) && now_ms() - start < 10000 * env->slow_factor) sleep_ms(1);
  CHECK(atomic_load(&slow.saw_cancel));
  CHECK_INT(drain_for(queue, 50), 0);
  CHECK_INT(atomic_load(&c.calls), 1);
  capture_reset(&c);

  /* The loader freed while a processor runs: the call sees its flag and returns before
   * pxl_loader_free does; every destroy has run by then; the request's one callback is
   * CANCELLED. */
  struct custom_state last = {0};
  last.mode = 3;
  CHECK_STATUS(pxl_loader_add_processor(loader, "last", 1, custom_processor, &last, destroy_state), PXL_OK);
  one.id = "last";
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, NULL), PXL_OK);
  start = now_ms();
  while (!atomic_load(&last.entered) && now_ms() - start < 10000 * env->slow_factor) sleep_ms(1);
  CHECK(atomic_load(&last.entered));
  pxl_loader_free(loader);
  CHECK(atomic_load(&last.saw_cancel));
  int calls_at_free = atomic_load(&last.calls);
  CHECK_INT(atomic_load(&last.destroyed), 1);
  CHECK_INT(atomic_load(&slow.destroyed), 1);
  CHECK_INT(atomic_load(&invert.destroyed), 1);
  CHECK_INT(atomic_load(&resize.destroyed), 1);
  CHECK_INT(atomic_load(&failing.destroyed), 1);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_CANCELLED);
  CHECK_INT(drain_for(queue, 50), 0);
  CHECK_INT(atomic_load(&last.calls), calls_at_free);
  capture_reset(&c);
  pxl_queue_free(queue);
}

/* ---- processed images through tables, animations and previews ---- */

/* Frame `frame`'s pixel (x, y), RGBA8. */
static const uint8_t *frame_pixel(const pxl_image *image, int frame, int x, int y) {
  return pxl_image_frame_pixels(image, frame) + (size_t)y * pxl_image_stride(image) + (size_t)x * 4;
}

struct table_rows {
  char url[3][512];
  pxl_processor circle, round;
  pxl_image *image[3]; /* each row's final image, retained */
  int calls[3];
};

/* Rows 0 and 2 are circular avatars, row 1 a card with rounded corners: the chain comes
 * from request_fn, like the URL. */
static int table_rows_request(int64_t row, pxl_request *request, void *user_data) {
  struct table_rows *t = user_data;
  if (row < 0 || row >= 3) return 0;
  request->url = t->url[row];
  request->width = 64;
  request->height = 64;
  request->mode = PXL_MODE_FILL;
  request->processors = row == 1 ? &t->round : &t->circle;
  request->processor_count = 1;
  return 1;
}

static void table_rows_row(int64_t row, const pxl_result *result, void *user_data) {
  struct table_rows *t = user_data;
  if (row < 0 || row >= 3 || result->preview) return;
  t->calls[row]++;
  if (result->status == PXL_OK && result->image && !t->image[row]) t->image[row] = pxl_image_retain(result->image);
}

void test_processors_table(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct table_rows *t = calloc(1, sizeof *t);
  const char *names[3] = {"processors-table-0", "processors-table-1", "processors-table-2"};
  for (int i = 0; i < 3; i++)
    snprintf(t->url[i], sizeof t->url[i], "%s", test_url(env, "/" FIXTURE_GRADIENT_JPG, names[i]).url);
  t->circle = step(PXL_PROCESS_CIRCLE);
  t->round = step(PXL_PROCESS_ROUND);
  t->round.radius_tl = t->round.radius_tr = t->round.radius_br = t->round.radius_bl = 8;
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_new(loader, queue, NULL, 3, table_rows_request, table_rows_row, t, &table), PXL_OK);
  CHECK_STATUS(pxl_table_set_visible(table, 0, 3, 0), PXL_OK);
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while ((!t->calls[0] || !t->calls[1] || !t->calls[2]) && now_ms() < deadline) {
    pxl_queue_wait(queue, 50);
    pxl_queue_dispatch(queue, 0);
  }
  for (int row = 0; row < 3; row++) {
    CHECKF(t->calls[row] == 1 && t->image[row] != NULL, "row %d: %d calls, image %p", row, t->calls[row],
           (void *)t->image[row]);
    if (!t->image[row]) continue;
    CHECK_INT(pxl_image_width(t->image[row]), 64);
    CHECK_INT(pxl_image_height(t->image[row]), 64);
    CHECK_INT(pixel_at(t->image[row], 0, 0)[3], 0);     /* outside either shape */
    CHECK_INT(pixel_at(t->image[row], 32, 32)[3], 255); /* inside */
    /* (4, 4): 4.9 px from a radius-8 corner's centre (inside the card), 38.9 px from the
     * disc's centre (outside the avatar). */
    CHECK_INT(pixel_at(t->image[row], 4, 4)[3], row == 1 ? 255 : 0);
  }
  /* The rows' images are in the memory cache under their chains. */
  pxl_request request;
  request_for(&request, t->url[0], 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.processors = &t->circle;
  request.processor_count = 1;
  pxl_image *found = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &found), PXL_OK);
  CHECK(found != NULL && found == t->image[0]);
  pxl_image_release(found);
  pxl_table_free(table);
  for (int row = 0; row < 3; row++) pxl_image_release(t->image[row]);
  free(t);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}

/* A table whose rows 1, 3 and 4 ask for a chain that is refused (rotate by 45 degrees):
 * each refused row's reason goes to the log once while it stays refused, not once per
 * pxl_table_set_visible (rows in the prefetch window are converted again on each call). */
struct refused_rows {
  int bad[16];
  pxl_processor rotate;
  atomic_int lines; /* log lines about a refused request */
  atomic_int results;
};

static void count_request_log(int32_t level, const char *message, void *user_data) {
  (void)level;
  if (strstr(message, "pixload: request:")) atomic_fetch_add(&((struct refused_rows *)user_data)->lines, 1);
}

static int refused_rows_request(int64_t row, pxl_request *request, void *user_data) {
  struct refused_rows *t = user_data;
  if (row < 0 || row >= 16 || !t->bad[row]) return 0; /* no image: nothing reaches the network */
  request->url = "http://127.0.0.1:9/never.png";
  request->processors = &t->rotate;
  request->processor_count = 1;
  return 1;
}

static void refused_rows_row(int64_t row, const pxl_result *result, void *user_data) {
  (void)row, (void)result;
  atomic_fetch_add(&((struct refused_rows *)user_data)->results, 1);
}

void test_processors_table_refused_log(const struct test_env *env) {
  (void)env;
  struct refused_rows t = {.bad = {[1] = 1, [3] = 1, [4] = 1}};
  t.rotate = step(PXL_PROCESS_ROTATE);
  t.rotate.degrees = 45;
  pxl_config config;
  pxl_config_init(&config);
  config.log = count_request_log;
  config.log_user_data = &t;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_create(loader, queue, NULL, 16, refused_rows_request, refused_rows_row, &t, &table), PXL_OK);
  CHECK_STATUS(pxl_table_set_visible(table, 0, 2, 0), PXL_OK);
  pxl_queue_dispatch(queue, 0);
  int first = atomic_load(&t.lines);
  /* Row 1 (visible) and at least one prefetched row (3, 4) were refused and logged. */
  CHECKF(first >= 2 && first <= 3, "%d log lines after the first set_visible", first);
  for (int frame = 0; frame < 20; frame++) {
    CHECK_STATUS(pxl_table_set_visible(table, 0, 2, frame % 2 ? 1 : 0), PXL_OK);
    pxl_queue_dispatch(queue, 0);
  }
  CHECKF(atomic_load(&t.lines) == first, "%d log lines after 21 set_visible calls, %d after the first",
         atomic_load(&t.lines), first);
  CHECK(atomic_load(&t.results) >= 1); /* the visible row's refusal reached row_fn */
  /* Row 3 accepted (no image) and refused again: its reason is news, logged once more. */
  t.bad[3] = 0;
  CHECK_STATUS(pxl_table_set_visible(table, 2, 2, 0), PXL_OK);
  t.bad[3] = 1;
  for (int frame = 0; frame < 5; frame++) CHECK_STATUS(pxl_table_set_visible(table, 2, 2, 0), PXL_OK);
  pxl_queue_dispatch(queue, 0);
  int after = atomic_load(&t.lines);
  CHECKF(after >= first + 1 && after <= first + 2, "%d log lines after row 3 came back refused, %d before", after, first);
  pxl_table_free(table);
  /* pxl_load keeps its one line per call. */
  pxl_request request;
  request_for(&request, "http://127.0.0.1:9/never.png", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.processors = &t.rotate;
  request.processor_count = 1;
  struct capture c = {0};
  for (int i = 0; i < 3; i++)
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(atomic_load(&t.lines), after + 3);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}

/* A 12x8 GIF of three frames, each one colour of the palette (red, green, blue), 100,
 * 200 and 300 ms: through a circle it stays animated, every frame its own 8x8 disc. */
void test_processors_animated(const struct test_env *env) {
  FILE *f = gif_start(env, "processors-anim.gif", 12, 8, 0);
  CHECK(f != NULL);
  if (!f) return;
  uint8_t indices[12 * 8];
  for (int frame = 0; frame < 3; frame++) {
    memset(indices, frame, sizeof indices);
    gif_put_frame(f, 0, 0, 12, 8, indices, 1, 10 * (frame + 1), -1);
  }
  fputc(0x3b, f);
  fclose(f);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/processors-anim.gif", "processors-animated");
  pxl_processor circle = step(PXL_PROCESS_CIRCLE);
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags = PXL_FLAG_ANIMATE;
  request.processors = &circle;
  request.processor_count = 1;
  struct capture c = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  if (c.image) {
    CHECK_INT(pxl_image_width(c.image), 8);
    CHECK_INT(pxl_image_height(c.image), 8);
    CHECK_INT(pxl_image_frame_count(c.image), 3);
    const uint8_t colours[3][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    for (int frame = 0; frame < 3 && frame < pxl_image_frame_count(c.image); frame++) {
      CHECK_INT(pxl_image_frame_duration_ms(c.image, frame), 100 * (frame + 1));
      CHECKF(frame_pixel(c.image, frame, 0, 0)[3] == 0 && frame_pixel(c.image, frame, 7, 7)[3] == 0,
             "frame %d: corners %d %d, not cut away", frame, frame_pixel(c.image, frame, 0, 0)[3],
             frame_pixel(c.image, frame, 7, 7)[3]);
      const uint8_t *mid = frame_pixel(c.image, frame, 4, 4);
      CHECKF(mid[0] == colours[frame][0] && mid[1] == colours[frame][1] && mid[2] == colours[frame][2] &&
                 mid[3] == 255,
             "frame %d centre %d,%d,%d,%d", frame, mid[0], mid[1], mid[2], mid[3]);
    }
  }
  capture_reset(&c);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}

struct preview_avatar {
  struct capture capture; /* first: the final callback's user_data is this struct */
  pxl_image *preview;     /* the first preview, retained */
  int previews;
};

static void keep_preview(pxl_token token, pxl_image *image, void *user_data) {
  (void)token;
  struct preview_avatar *p = user_data;
  if (p->previews++ == 0) p->preview = pxl_image_retain(image);
}

/* A circular avatar's preview is circular: the progressive JPEG's first scan, held by the
 * fault server's /gate until the test saw its preview, then the rest. */
void test_processors_preview(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  char at[512], path[640];
  scan_cuts(env, FIXTURE_PROGRESSIVE_JPG, at, sizeof at);
  snprintf(path, sizeof path, "/gate/%.*s/file=" FIXTURE_PROGRESSIVE_JPG, (int)strcspn(at, ","), at);
  struct test_url u = fault_url(env, 0, path, "processors-preview");
  pxl_processor circle = step(PXL_PROCESS_CIRCLE);
  pxl_request request;
  request_for(&request, u.url, 160, 120, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.processors = &circle;
  request.processor_count = 1;
  request.preview = keep_preview;
  struct preview_avatar p = {0};
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &p, NULL), PXL_OK);
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while (p.previews == 0 && now_ms() < deadline) {
    pxl_queue_wait(queue, 50);
    pxl_queue_dispatch(queue, 0);
  }
  CHECKF(p.preview != NULL, "no preview of the first scan");
  CHECK_INT(atomic_load(&p.capture.calls), 0);
  if (p.preview) {
    CHECK_INT(pxl_image_width(p.preview), 120); /* the centred square of the 160x120 */
    CHECK_INT(pxl_image_height(p.preview), 120);
    CHECK_INT(pxl_image_format(p.preview), PXL_FORMAT_RGBA8);
    CHECK_INT(pixel_at(p.preview, 0, 0)[3], 0);
    CHECK_INT(pixel_at(p.preview, 119, 119)[3], 0);
    CHECK_INT(pixel_at(p.preview, 60, 60)[3], 255);
  }
  fault_release(env, u.uri);
  CHECK(drain_until(env, queue, &p.capture.calls, 1, 10000));
  CHECK_STATUS(p.capture.status, PXL_OK);
  if (p.capture.image) {
    CHECK_INT(pxl_image_width(p.capture.image), 120);
    CHECK_INT(pixel_at(p.capture.image, 0, 0)[3], 0);
    CHECK_INT(pixel_at(p.capture.image, 60, 60)[3], 255);
  }
  pxl_image_release(p.preview);
  capture_reset(&p.capture);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}
