/*
 * test_metrics_total.c: pxl_metrics.total_us and other_us (0.6.0). In every path (a cold
 * download held back by the server, a failed one, a cancelled one, memory, disk variant,
 * disk original, a processed variant, a joined request) the stage fields and other_us add
 * up to total_us exactly; total_us is the time from pxl_load to the callback as the host
 * sees it (a joined request's from the intake of the request whose work it shares); and
 * the time goes to the stage that spent it: a server that holds its answer back shows in
 * first_byte_us, not in other_us.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

/* One request: its metrics read inside the callback, and the host's clock around it. */
struct timed {
  struct capture capture;
  pxl_metrics metrics;
  pxl_status got;
  double loaded_ms;   /* just before pxl_load */
  double called_ms;   /* on entering the callback */
};

static void timed_callback(pxl_token token, const pxl_result *result, void *user_data) {
  struct timed *t = user_data;
  t->called_ms = now_ms();
  t->metrics.struct_size = sizeof t->metrics;
  t->got = pxl_result_metrics(result, &t->metrics);
  capture_callback(token, result, &t->capture);
}

static void timed_start(pxl_loader *loader, pxl_queue *queue, const pxl_request *request, struct timed *t,
                        pxl_token *token) {
  memset(t, 0, sizeof *t);
  t->loaded_ms = now_ms();
  CHECK_STATUS(pxl_load(loader, request, queue, timed_callback, t, token), PXL_OK);
}

static void timed_load(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                       const pxl_request *request, struct timed *t) {
  timed_start(loader, queue, request, t, NULL);
  CHECK(drain_until(env, queue, &t->capture.calls, 1, 30000));
}

static uint64_t stages_us(const pxl_metrics *m) {
  return m->slot_wait_us + m->dns_us + m->connect_us + m->tls_us + m->first_byte_us + m->transfer_us +
         m->disk_read_us + m->decode_us + m->process_us + m->queue_wait_us;
}

/* The stages and other_us are total_us, exactly; total_us is the host's pxl_load-to-callback
 * time measured from since_ms (its own pxl_load, or for a joined request the one it joined):
 * not more (the library's clock reads are inside that span), and not less than it by more
 * than the calls around them cost (slack_us). Also that the fields are there at all. */
static void check_adds_up(const struct test_env *env, const char *what, const struct timed *t, double since_ms,
                          uint64_t slack_us) {
  const pxl_metrics *m = &t->metrics;
  CHECKF(t->got == PXL_OK && m->struct_size == sizeof *m, "%s: pxl_result_metrics %d, struct_size %zu", what,
         (int)t->got, m->struct_size);
  CHECKF(stages_us(m) + m->other_us == m->total_us,
         "%s: stages %llu + other_us %llu != total_us %llu", what, (unsigned long long)stages_us(m),
         (unsigned long long)m->other_us, (unsigned long long)m->total_us);
  uint64_t host_us = (uint64_t)((t->called_ms - since_ms) * 1000.0);
  slack_us *= (uint64_t)env->slow_factor;
  CHECKF(m->total_us <= host_us + 1000 && m->total_us + slack_us >= host_us,
         "%s: total_us %llu, the host saw %llu from pxl_load to the callback", what,
         (unsigned long long)m->total_us, (unsigned long long)host_us);
}

/* other_us is what is left: here less than limit_us (a few thread hand-offs, a disk write
 * of a small file), so no stage's time went unmeasured. */
static void check_other_small(const struct test_env *env, const char *what, const pxl_metrics *m,
                              uint64_t limit_us) {
  CHECKF(m->other_us < limit_us * (uint64_t)env->slow_factor, "%s: other_us %llu of total_us %llu", what,
         (unsigned long long)m->other_us, (unsigned long long)m->total_us);
}

void test_metrics_add_up(const struct test_env *env) {
  CHECKF(env->fault_url != NULL, "no --fault-url: run the tests through Tests/capi/run.sh");
  if (!env->fault_url) return;
  char directory[] = "/tmp/pxl-metrics-total.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  pxl_config config;
  disk_cache_config(&config, directory);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  pxl_request request;
  struct timed t;

  /* Cold, the server holding its status line back 300 ms: that wait is the first byte's. */
  struct test_url held = fault_url(env, 0, "/slow/delay=300/file=" FIXTURE_GRADIENT_JPG, "metrics-total-held");
  request_for(&request, held.url, 64, 48, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  timed_load(env, loader, queue, &request, &t);
  CHECKF(t.capture.status == PXL_OK, "held: %s", t.capture.message);
  CHECK_INT(t.metrics.tier, PXL_TIER_NETWORK);
  check_adds_up(env, "cold, held back", &t, t.loaded_ms, 50000);
  CHECKF(t.metrics.first_byte_us >= 290000, "first_byte_us %llu for a 300 ms hold",
         (unsigned long long)t.metrics.first_byte_us);
  CHECK(t.metrics.decode_us > 0 && t.metrics.disk_read_us > 0 && t.metrics.queue_wait_us > 0);
  check_other_small(env, "cold, held back", &t.metrics, 100000);
  capture_reset(&t.capture);

  /* Memory: the lookup is intake; the queue wait and other_us are all of it. */
  timed_load(env, loader, queue, &request, &t);
  CHECK_INT(t.metrics.tier, PXL_TIER_MEMORY);
  check_adds_up(env, "memory", &t, t.loaded_ms, 50000);
  CHECK_INT(stages_us(&t.metrics), t.metrics.queue_wait_us);
  capture_reset(&t.capture);

  /* Failed: a 404 measured up to its answer. */
  struct test_url missing = fault_url(env, 0, "/status/code=404", "metrics-total-404");
  pxl_request failing;
  request_for(&failing, missing.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  timed_load(env, loader, queue, &failing, &t);
  CHECK(t.capture.status != PXL_OK);
  CHECK_INT(t.metrics.http_status, 404);
  check_adds_up(env, "failed (404)", &t, t.loaded_ms, 50000);
  CHECK(t.metrics.first_byte_us > 0);
  check_other_small(env, "failed (404)", &t.metrics, 100000);
  capture_reset(&t.capture);

  /* Processed: a circle of the cached thumbnail's variant, its step in process_us. */
  struct test_url plain = test_url(env, "/" FIXTURE_GRADIENT_JPG, "metrics-total-processed");
  pxl_request processed;
  request_for(&processed, plain.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_processor circle;
  memset(&circle, 0, sizeof circle);
  circle.kind = PXL_PROCESS_CIRCLE;
  processed.processors = &circle;
  processed.processor_count = 1;
  timed_load(env, loader, queue, &processed, &t);
  CHECKF(t.capture.status == PXL_OK, "processed: %s", t.capture.message);
  check_adds_up(env, "processed", &t, t.loaded_ms, 50000);
  CHECK(t.metrics.process_us > 0 && t.metrics.decode_us > 0);
  check_other_small(env, "processed", &t.metrics, 100000);
  capture_reset(&t.capture);

  /* Cancelled while the server holds it back: what was measured, and the rest in other_us. */
  struct test_url stalled = fault_url(env, 0, "/slow/delay=5000/file=" FIXTURE_GRADIENT_JPG, "metrics-total-cancel");
  pxl_request cancelled;
  request_for(&cancelled, stalled.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_token token = 0;
  timed_start(loader, queue, &cancelled, &t, &token);
  CHECK(fault_wait_requests(env, "uri", stalled.uri, 1, 5000) == 1);
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &t.capture.calls, 1, 5000));
  CHECK_INT(t.capture.status, PXL_E_CANCELLED);
  check_adds_up(env, "cancelled", &t, t.loaded_ms, 50000);
  capture_reset(&t.capture);
  pxl_loader_free(loader);

  /* A fresh loader over the same directory: the kept thumbnail, then the original. */
  loader = new_loader(&config);
  timed_load(env, loader, queue, &request, &t);
  CHECK_INT(t.metrics.tier, PXL_TIER_DISK_VARIANT);
  check_adds_up(env, "disk variant", &t, t.loaded_ms, 50000);
  CHECK(t.metrics.disk_read_us > 0 && t.metrics.decode_us == 0 && t.metrics.first_byte_us == 0);
  check_other_small(env, "disk variant", &t.metrics, 100000);
  capture_reset(&t.capture);
  request_for(&request, held.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  timed_load(env, loader, queue, &request, &t);
  CHECK_INT(t.metrics.tier, PXL_TIER_DISK);
  check_adds_up(env, "disk original", &t, t.loaded_ms, 50000);
  CHECK(t.metrics.disk_read_us > 0 && t.metrics.decode_us > 0 && t.metrics.first_byte_us == 0);
  check_other_small(env, "disk original", &t.metrics, 100000);
  capture_reset(&t.capture);
  pxl_disk_cache_clear(loader);
  pxl_loader_free(loader);

  /* Joined: b comes 100 ms into a's held-back download and reports its figures, so its
   * total_us runs from a's intake (more than its own wait by those 100 ms at least). */
  loader = new_loader(NULL);
  struct test_url shared = fault_url(env, 0, "/slow/delay=300/file=" FIXTURE_GRADIENT_JPG, "metrics-total-joined");
  request_for(&request, shared.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct timed *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  timed_start(loader, queue, &request, a, NULL);
  sleep_ms(100);
  timed_start(loader, queue, &request, b, NULL);
  CHECK(drain_until(env, queue, &a->capture.calls, 1, 30000));
  CHECK(drain_until(env, queue, &b->capture.calls, 1, 30000));
  CHECK(a->capture.status == PXL_OK && b->capture.status == PXL_OK);
  CHECK_INT(a->metrics.joined, 0);
  CHECK_INT(b->metrics.joined, 1);
  check_adds_up(env, "joining (a)", a, a->loaded_ms, 50000);
  check_adds_up(env, "joined (b)", b, a->loaded_ms, 50000);
  CHECK_INT(b->metrics.first_byte_us, a->metrics.first_byte_us);
  CHECKF(b->metrics.total_us >= (uint64_t)((b->called_ms - b->loaded_ms) * 1000.0) + 90000,
         "joined: total_us %llu, its own wait %.1f ms", (unsigned long long)b->metrics.total_us,
         b->called_ms - b->loaded_ms);
  check_other_small(env, "joined (b)", &b->metrics, 100000);
  capture_reset(&a->capture);
  capture_reset(&b->capture);
  pxl_loader_free(loader);

  /* The shared work's own other_us: a first answer of 503, then a backoff of 300 to 900 ms
   * (600 with its jitter) before the retry (no stage's: the phases are the last
   * attempt's). b joins 100 ms into the backoff and reports that work, so its total_us runs from a's intake too and holds
   * the backoff in other_us; counted from its own intake it would miss 100 ms. */
  pxl_config retrying;
  pxl_config_init(&retrying);
  retrying.max_retries = 1;
  retrying.retry_base_delay_ms = 600;
  loader = new_loader(&retrying);
  struct test_url retried = fault_url(env, 0, "/fail/n=1/code=503/file=" FIXTURE_GRADIENT_JPG, "metrics-total-retry");
  request_for(&request, retried.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  timed_start(loader, queue, &request, a, NULL);
  CHECK(fault_wait_requests(env, "uri", retried.uri, 1, 5000) == 1);
  sleep_ms(100);
  timed_start(loader, queue, &request, b, NULL);
  CHECK(drain_until(env, queue, &a->capture.calls, 1, 30000));
  CHECK(drain_until(env, queue, &b->capture.calls, 1, 30000));
  CHECKF(a->capture.status == PXL_OK && b->capture.status == PXL_OK, "retried: %s, %s", a->capture.message,
         b->capture.message);
  CHECK_INT(b->metrics.joined, 1);
  check_adds_up(env, "retried (a)", a, a->loaded_ms, 50000);
  check_adds_up(env, "retried, joined (b)", b, a->loaded_ms, 50000);
  CHECKF(a->metrics.other_us >= 250000 && b->metrics.other_us >= 250000,
         "a backoff of at least 300 ms: other_us %llu (a), %llu (b)", (unsigned long long)a->metrics.other_us,
         (unsigned long long)b->metrics.other_us);
  capture_reset(&a->capture);
  capture_reset(&b->capture);
  free(a);
  free(b);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  rmdir(directory);
}
