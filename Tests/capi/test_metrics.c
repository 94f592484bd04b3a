/*
 * test_metrics.c: pxl_result_metrics (0.5.0) in each path the C API offers (network over
 * http and over https + HTTP/2, memory, disk and disk variant in a fresh loader, a merged
 * request, a cancel), where the getter answers and where it refuses, and the placeholder
 * functions (pxl_placeholder_decode / _aspect_ratio / _encode) with their refusals.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

/* A capture that also copies the metrics inside the callback, and checks the getter's
 * refusals there (a copy of the result, a bad struct_size). */
struct measured {
  struct capture capture;
  pxl_metrics metrics;
  pxl_status got;
  pxl_status copy_refused;
  pxl_status small_refused;
};

static void measured_callback(pxl_token token, const pxl_result *result, void *user_data) {
  struct measured *m = user_data;
  m->metrics.struct_size = sizeof m->metrics;
  m->got = pxl_result_metrics(result, &m->metrics);
  pxl_result copy = *result;
  pxl_metrics other = {.struct_size = sizeof other};
  m->copy_refused = pxl_result_metrics(&copy, &other);
  other.struct_size = PXL_METRICS_SIZE_0_5 - 1;
  m->small_refused = pxl_result_metrics(result, &other);
  capture_callback(token, result, &m->capture);
}

static void measured_load(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                          const pxl_request *request, struct measured *m) {
  memset(m, 0, sizeof *m);
  CHECK_STATUS(pxl_load(loader, request, queue, measured_callback, m, NULL), PXL_OK);
  CHECK(drain_until(env, queue, &m->capture.calls, 1, 30000));
  CHECK_STATUS(m->got, PXL_OK);
  CHECK_STATUS(m->copy_refused, PXL_E_NOT_FOUND);
  CHECK_STATUS(m->small_refused, PXL_E_INVALID_ARGUMENT);
}

void test_metrics_tiers(const struct test_env *env) {
  char directory[] = "/tmp/pxl-metrics.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  pxl_config config;
  pxl_config_init(&config);
  config.disk_cache_bytes = 8 << 20;
  config.disk_cache_dir = directory;
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "metrics");
  pxl_request request;
  request_for(&request, u.url, 64, 48, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  struct measured m;

  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  measured_load(env, loader, queue, &request, &m);
  CHECK_INT(m.capture.status, PXL_OK);
  CHECK_INT(m.metrics.struct_size, sizeof m.metrics);
  CHECK_INT(m.metrics.tier, PXL_TIER_NETWORK);
  CHECK_INT(m.metrics.joined, 0);
  CHECK_INT(m.metrics.http_status, 200);
  CHECK(m.metrics.http_version == 10 || m.metrics.http_version == 11);
  CHECK_INT(m.metrics.bytes_received, fixture_bytes(env, FIXTURE_GRADIENT_JPG));
  CHECK_INT(m.metrics.decoded_bytes, 64 * 48 * 4);
  CHECK_INT(m.metrics.delivered_bytes, 64 * 48 * 4);
  CHECK(m.metrics.decode_us > 0);
  CHECK(m.metrics.disk_read_us > 0); /* the disk was asked first (a miss) */
  CHECK_INT(m.metrics.tls_us, 0);
  CHECK_INT(m.metrics.process_us, 0);
  /* Since 0.6.0: the last byte to the callback; at least the delivery's queue wait. */
  CHECK(m.metrics.after_last_byte_us > 0 && m.metrics.after_last_byte_us >= m.metrics.queue_wait_us);
  /* Outside any callback: nothing to find. */
  pxl_result none = {0};
  pxl_metrics outside = {.struct_size = sizeof outside};
  CHECK_STATUS(pxl_result_metrics(&none, &outside), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_result_metrics(NULL, &outside), PXL_E_INVALID_ARGUMENT);

  measured_load(env, loader, queue, &request, &m);
  CHECK_INT(m.metrics.tier, PXL_TIER_MEMORY);
  CHECK_INT(m.metrics.bytes_received, 0);
  CHECK_INT(m.metrics.after_last_byte_us, 0);
  CHECK_INT(m.metrics.decode_us, 0);
  CHECK_INT(m.metrics.delivered_bytes, 64 * 48 * 4);
  capture_reset(&m.capture);
  pxl_loader_free(loader);

  /* A fresh loader over the same directory: the kept thumbnail, then the original. */
  loader = new_loader(&config);
  measured_load(env, loader, queue, &request, &m);
  CHECK_INT(m.metrics.tier, PXL_TIER_DISK_VARIANT);
  CHECK_INT(m.metrics.decode_us, 0);
  CHECK(m.metrics.disk_read_us > 0);
  capture_reset(&m.capture);
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  measured_load(env, loader, queue, &request, &m);
  CHECK_INT(m.metrics.tier, PXL_TIER_DISK);
  CHECK(m.metrics.decode_us > 0 && m.metrics.disk_read_us > 0);
  CHECK_INT(m.metrics.after_last_byte_us, 0);
  CHECK_INT(m.metrics.bytes_received, 0);
  capture_reset(&m.capture);
  pxl_disk_cache_clear(loader);
  pxl_loader_free(loader);

  /* Merged: two requests for one slow image, the second joined the first's work. A
   * cancelled third has metrics too, with no tier. */
  loader = new_loader(NULL);
  struct test_url slow = test_url(env, "/slow/" FIXTURE_GRADIENT_JPG, "metrics-merge");
  request_for(&request, slow.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct measured a, b, c;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&c, 0, sizeof c);
  CHECK_STATUS(pxl_load(loader, &request, queue, measured_callback, &a, NULL), PXL_OK);
  CHECK_STATUS(pxl_load(loader, &request, queue, measured_callback, &b, NULL), PXL_OK);
  struct test_url medium = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "metrics-cancel");
  pxl_request cancelled;
  request_for(&cancelled, medium.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &cancelled, queue, measured_callback, &c, &token), PXL_OK);
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &c.capture.calls, 1, 30000));
  CHECK(drain_until(env, queue, &b.capture.calls, 1, 30000));
  CHECK(drain_until(env, queue, &a.capture.calls, 1, 30000));
  CHECK_INT(a.metrics.tier, PXL_TIER_NETWORK);
  CHECK_INT(b.metrics.tier, PXL_TIER_NETWORK);
  CHECK_INT(a.metrics.joined, 0);
  CHECK_INT(b.metrics.joined, 1);
  CHECK_INT(a.metrics.bytes_received, b.metrics.bytes_received);
  CHECK(a.metrics.first_byte_us + a.metrics.transfer_us > 0);
  CHECK_INT(a.metrics.transfer_us, b.metrics.transfer_us); /* one transfer, its figures */
  CHECK_STATUS(c.got, PXL_OK);
  CHECK_INT(c.capture.status, PXL_E_CANCELLED);
  CHECK_INT(c.metrics.tier, PXL_TIER_NONE);
  capture_reset(&a.capture);
  capture_reset(&b.capture);
  capture_reset(&c.capture);
  pxl_loader_free(loader);

  /* https + HTTP/2: the handshake is measured; a second request reuses the connection. */
  if (env->tls_url && env->ca_file) {
    pxl_config tls;
    pxl_config_init(&tls);
    tls.ca_file = env->ca_file;
    loader = new_loader(&tls);
    char url[512];
    for (int i = 0; i < 2; i++) {
      snprintf(url, sizeof url, "%s/%s?run=%ld&case=metrics-tls%d", env->tls_url, FIXTURE_GRADIENT_JPG,
               env->run_id, i);
      request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
      measured_load(env, loader, queue, &request, &m);
      CHECKF(m.capture.status == PXL_OK, "https: %s", m.capture.message);
      CHECK_INT(m.metrics.http_version, 20);
      if (i == 0) CHECK(m.metrics.tls_us > 0 && m.metrics.connection_reused == 0);
      else CHECK(m.metrics.tls_us == 0 && m.metrics.connection_reused == 1);
      capture_reset(&m.capture);
    }
    pxl_loader_free(loader);
  }

  /* A file:// read is a transfer, as PXL_SOURCE_NETWORK (0.1.0) says; a data: URL is
   * none: no bytes received, no network fetch. */
  pxl_config local;
  pxl_config_init(&local);
  local.allowed_schemes = PXL_SCHEME_FILE | PXL_SCHEME_DATA;
  loader = new_loader(&local);
  char file[1024];
  file_url(env, FIXTURE_GRADIENT_JPG, file, sizeof file);
  const char *urls[] = {
      file, "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="};
  const int tiers[] = {PXL_TIER_FILE, PXL_TIER_DATA};
  const long received[] = {fixture_bytes(env, FIXTURE_GRADIENT_JPG), 0};
  for (int i = 0; i < 2; i++) {
    request_for(&request, urls[i], 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    measured_load(env, loader, queue, &request, &m);
    CHECKF(m.capture.status == PXL_OK, "%s: %s", urls[i], m.capture.message);
    CHECK_INT(m.metrics.tier, tiers[i]);
    CHECK_INT(m.metrics.bytes_received, received[i]);
    capture_reset(&m.capture);
  }
  pxl_stats stats = {.struct_size = sizeof stats};
  CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
  CHECK_INT(stats.requests, 2);
  CHECK_INT(stats.network_fetches, 1);
  CHECK_INT(stats.bytes_downloaded, received[0]);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  rmdir(directory);
}

/* A measured request that also records its download progress (progress_interval_ms 0). */
struct progressing {
  struct measured m; /* first: the callbacks share user_data */
  uint64_t received;
};

static void progressing_progress(pxl_token token, uint64_t received, uint64_t expected, void *user_data) {
  (void)token;
  (void)expected;
  ((struct progressing *)user_data)->received = received;
}

static void progressing_load(pxl_loader *loader, pxl_queue *queue, pxl_request *request,
                             struct progressing *p, pxl_token *token) {
  memset(p, 0, sizeof *p);
  request->progress = progressing_progress;
  request->progress_interval_ms = 0;
  CHECK_STATUS(pxl_load(loader, request, queue, measured_callback, p, token), PXL_OK);
}

/* Dispatches queue until p's progress reached bytes. */
static int wait_received(const struct test_env *env, pxl_queue *queue, struct progressing *p, uint64_t bytes) {
  double deadline = now_ms() + 5000.0 * env->slow_factor;
  while (p->received < bytes && now_ms() < deadline) {
    pxl_queue_wait(queue, 20);
    pxl_queue_dispatch(queue, 0);
  }
  return p->received == bytes;
}

/* What a request cancelled mid-transfer measured until the cancel: the header's "a
 * request that failed or was cancelled has what was measured up to then" (the same
 * stalled transfer ended by a timeout keeps them). */
static void check_cancelled_mid_transfer(const char *what, const struct measured *m, uint64_t bytes) {
  CHECKF(m->got == PXL_OK && m->capture.status == PXL_E_CANCELLED, "%s: metrics %d, status %d", what,
         (int)m->got, (int)m->capture.status);
  CHECKF(m->metrics.tier == PXL_TIER_NONE, "%s: tier %d", what, (int)m->metrics.tier);
  CHECKF(m->metrics.http_status == 200 && m->metrics.bytes_received == bytes,
         "%s: http_status %d, bytes_received %llu (want 200 and %llu)", what, (int)m->metrics.http_status,
         (unsigned long long)m->metrics.bytes_received, (unsigned long long)bytes);
  CHECKF(m->metrics.http_version == 11, "%s: http_version %d", what, (int)m->metrics.http_version);
  /* A connection of its own was connected; a reused one was not. */
  CHECKF((m->metrics.connect_us > 0) != m->metrics.connection_reused && m->metrics.first_byte_us > 0,
         "%s: connect_us %llu, connection_reused %d, first_byte_us %llu", what,
         (unsigned long long)m->metrics.connect_us, (int)m->metrics.connection_reused,
         (unsigned long long)m->metrics.first_byte_us);
}

void test_metrics_cancelled_transfer(const struct test_env *env) {
  CHECKF(env->fault_url != NULL, "no --fault-url: run the tests through Tests/capi/run.sh");
  if (!env->fault_url) return;
  enum { FIRST = 20000 };
  pxl_config config;
  pxl_config_init(&config);
  config.stall_timeout_ms = 0; /* the gate holds the body as long as the test wants */
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue(), *other = new_queue();
  struct test_url gate = fault_url(env, 0, "/gate/at=20000/file=" FIXTURE_MEDIUM_JPG, "metrics-cancel-gate");

  /* Three requests share one transfer: a, b merged into one decode, c a processed variant
   * of it. a and c are cancelled after the first 20000 bytes (pxl_cancel, pxl_cancel_all
   * on c's queue), b goes on to the whole image. */
  pxl_request request;
  request_for(&request, gate.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct progressing *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
  pxl_token token_a = 0;
  progressing_load(loader, queue, &request, a, &token_a);
  progressing_load(loader, queue, &request, b, NULL);
  pxl_processor circle;
  memset(&circle, 0, sizeof circle);
  circle.kind = PXL_PROCESS_CIRCLE;
  request.processors = &circle;
  request.processor_count = 1;
  progressing_load(loader, other, &request, c, NULL);
  CHECKF(wait_received(env, queue, a, FIRST), "the gate's first bytes: %llu reported",
         (unsigned long long)a->received);
  CHECK_STATUS(pxl_cancel(loader, token_a), PXL_OK);
  CHECK_INT(pxl_cancel_all(loader, other), 1);
  CHECK(drain_until(env, queue, &a->m.capture.calls, 1, 5000));
  CHECK(drain_until(env, other, &c->m.capture.calls, 1, 5000));
  check_cancelled_mid_transfer("cancelled (pxl_cancel)", &a->m, FIRST);
  CHECK_INT(a->m.metrics.joined, 0);
  check_cancelled_mid_transfer("processed, cancelled (pxl_cancel_all)", &c->m, FIRST);
  CHECK_INT(b->m.capture.calls, 0);
  fault_release(env, gate.uri);
  CHECK(drain_until(env, queue, &b->m.capture.calls, 1, 10000));
  CHECKF(b->m.capture.status == PXL_OK, "the request left on the transfer: %s", b->m.capture.message);
  CHECK_INT(b->m.metrics.tier, PXL_TIER_NETWORK);
  CHECK_INT(b->m.metrics.joined, 1);
  CHECK_INT(b->m.metrics.http_status, 200);
  CHECK_INT(b->m.metrics.bytes_received, fixture_bytes(env, FIXTURE_MEDIUM_JPG));
  CHECK_INT(b->m.metrics.connect_us, a->m.metrics.connect_us); /* one transfer */
  capture_reset(&b->m.capture);

  /* A loader freed mid-transfer: its request ends CANCELLED with what it measured. */
  struct test_url stall = fault_url(env, 0, "/stall/after=20000/file=" FIXTURE_MEDIUM_JPG, "metrics-cancel-free");
  request_for(&request, stall.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  progressing_load(loader, queue, &request, a, NULL);
  CHECK(wait_received(env, queue, a, FIRST));
  pxl_loader_free(loader);
  CHECK_INT(a->m.capture.calls, 0);
  CHECK(drain_until(env, queue, &a->m.capture.calls, 1, 5000));
  check_cancelled_mid_transfer("its loader freed", &a->m, FIRST);
  free(a);
  free(b);
  free(c);
  pxl_queue_free(queue);
  pxl_queue_free(other);
}

/* A custom processor that holds its step until the request is cancelled (10 s at most). */
static pxl_status holding_processor(pxl_processor_frame *frame, char *message, size_t size, void *user_data) {
  (void)message;
  (void)size;
  atomic_store((atomic_int *)user_data, 1);
  double start = now_ms();
  while (!__atomic_load_n(frame->cancelled, __ATOMIC_ACQUIRE) && now_ms() - start < 10000) sleep_ms(1);
  return PXL_E_CANCELLED;
}

/* Cancelled after its transfer and decode, while its processor runs: it reports the
 * download and the decode it waited for. */
void test_metrics_cancelled_processing(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  atomic_int entered = 0;
  CHECK_STATUS(pxl_loader_add_processor(loader, "hold", 1, holding_processor, &entered, NULL), PXL_OK);
  pxl_processor hold;
  memset(&hold, 0, sizeof hold);
  hold.kind = PXL_PROCESS_CUSTOM;
  hold.id = "hold";
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "metrics-cancel-processing");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.processors = &hold;
  request.processor_count = 1;
  struct measured m;
  memset(&m, 0, sizeof m);
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, measured_callback, &m, &token), PXL_OK);
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while (!atomic_load(&entered) && now_ms() < deadline) sleep_ms(1);
  CHECK(atomic_load(&entered));
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &m.capture.calls, 1, 5000));
  CHECK_STATUS(m.got, PXL_OK);
  CHECK_STATUS(m.capture.status, PXL_E_CANCELLED);
  CHECK_INT(m.metrics.tier, PXL_TIER_NONE);
  CHECK_INT(m.metrics.http_status, 200);
  CHECK_INT(m.metrics.bytes_received, fixture_bytes(env, FIXTURE_GRADIENT_JPG));
  CHECKF(m.metrics.connect_us > 0 && m.metrics.decode_us > 0, "connect_us %llu, decode_us %llu",
         (unsigned long long)m.metrics.connect_us, (unsigned long long)m.metrics.decode_us);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_placeholder_api(const struct test_env *env) {
  (void)env;
  static const char blur[] = "LEHV6nWB2yk8pyo0adR*.7kCMdnj";
  pxl_image *image = NULL;
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 32, 32, &image), PXL_OK);
  CHECK_INT(pxl_image_width(image), 32);
  CHECK_INT(pxl_image_format(image), PXL_FORMAT_RGBA8);
  /* The reference (PyPI blurhash 1.1.5) gives (135, 164, 177) at (0, 0) and (148, 129,
   * 128) at (10, 16). */
  const uint8_t *p = pixel_at(image, 0, 0);
  CHECKF(abs(p[0] - 135) <= 2 && abs(p[1] - 164) <= 2 && abs(p[2] - 177) <= 2 && p[3] == 255,
         "(0,0) is %d,%d,%d,%d", p[0], p[1], p[2], p[3]);
  p = pixel_at(image, 10, 16);
  CHECKF(abs(p[0] - 148) <= 2 && abs(p[1] - 129) <= 2 && abs(p[2] - 128) <= 2, "(10,16) is %d,%d,%d", p[0], p[1], p[2]);
  double ratio = 0;
  CHECK_STATUS(pxl_placeholder_aspect_ratio(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), &ratio), PXL_OK);
  CHECK(ratio == 1.0);

  uint8_t out[PXL_PLACEHOLDER_MAX_BYTES + 1];
  size_t length = 0;
  CHECK_STATUS(pxl_placeholder_encode(PXL_PLACEHOLDER_BLURHASH, image, 4, 3, out, sizeof out, &length), PXL_OK);
  CHECK_INT(length, 28);
  CHECK_INT(out[length], 0);
  CHECK_STATUS(pxl_placeholder_encode(PXL_PLACEHOLDER_BLURHASH, image, 4, 3, out, 28, &length), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_encode(PXL_PLACEHOLDER_BLURHASH, image, 10, 3, out, sizeof out, &length),
               PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_encode(PXL_PLACEHOLDER_THUMBHASH, image, 0, 0, out, sizeof out, &length), PXL_OK);
  CHECK(length >= 5 && length <= 25);
  pxl_image *thumb = NULL;
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_THUMBHASH, out, length, 16, 16, &thumb), PXL_OK);
  const uint8_t *a = pixel_at(image, 16, 16), *t = pixel_at(thumb, 8, 8);
  CHECKF(abs(a[0] - t[0]) < 24 && abs(a[1] - t[1]) < 24 && abs(a[2] - t[2]) < 24,
         "the thumbhash's centre %d,%d,%d is far from the image's %d,%d,%d", t[0], t[1], t[2], a[0], a[1], a[2]);
  pxl_image_release(thumb);
  CHECK_STATUS(pxl_placeholder_aspect_ratio(PXL_PLACEHOLDER_THUMBHASH, out, length, &ratio), PXL_OK);
  CHECK(ratio == 1.0);
  pxl_image_release(image);

  /* Refusals: each leaves *image_out NULL. */
  image = (pxl_image *)1;
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur) - 1, 32, 32, &image),
               PXL_E_CORRUPT_IMAGE);
  CHECK(image == NULL);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, "LEHV6nWB2yk8pyo0adR*.7kCMd\"j", 28, 32, 32, &image),
               PXL_E_CORRUPT_IMAGE);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_THUMBHASH, out, length - 1, 32, 32, &image),
               PXL_E_CORRUPT_IMAGE);
  /* Too long to be any hash is malformed too, not a wrong argument; only what tells so is read. */
  static uint8_t long_hash[(1 << 16) + 1];
  memset(long_hash, 'L', sizeof long_hash);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, long_hash, sizeof long_hash, 32, 32, &image),
               PXL_E_CORRUPT_IMAGE);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_THUMBHASH, long_hash, sizeof long_hash, 32, 32, &image),
               PXL_E_CORRUPT_IMAGE);
  CHECK_STATUS(pxl_placeholder_aspect_ratio(PXL_PLACEHOLDER_THUMBHASH, long_hash, SIZE_MAX, &ratio),
               PXL_E_CORRUPT_IMAGE);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 257, 32, &image),
               PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 32, 0, &image),
               PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_decode(9, blur, strlen(blur), 32, 32, &image), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, NULL, 0, 32, 32, &image), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_placeholder_decode(PXL_PLACEHOLDER_BLURHASH, blur, strlen(blur), 32, 32, NULL),
               PXL_E_INVALID_ARGUMENT);
  CHECK(image == NULL);
}
