/*
 * test_network.c: the download scheduler as a table UI feels it: a slow image never
 * holds up the others, a free slot is used at once, and connections are kept alive.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

void test_no_head_of_line_blocking(const struct test_env *env) {
  /* A fresh loader: no connection to the server is open yet. */
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url slow_url = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "hol-slow");
  pxl_request request;
  request_for(&request, slow_url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture slow = {0};
  pxl_token slow_token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &slow, &slow_token), PXL_OK);

  sleep_ms(200); /* the slow transfer is under way: it holds the only connection */

  /* Four fast images, well within the default 8 transfers (6 per host): they have free
   * slots, so the slow one, a dozen seconds long, must not delay them. */
  enum { FAST = 4 };
  atomic_int done = 0;
  struct capture fast[FAST] = {{0}};
  double start = now_ms();
  for (int i = 0; i < FAST; i++) {
    char name[32];
    snprintf(name, sizeof name, "hol-fast-%d", i);
    struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
    request_for(&request, u.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    fast[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &fast[i], NULL), PXL_OK);
  }
  int in_time = drain_until(env, queue, &done, FAST, 2000);
  CHECKF(in_time, "%d of %d fast images within 2 s of a slow one on the same host (the slow "
         "one still running: %s)", atomic_load(&done), FAST,
         atomic_load(&slow.calls) ? "no" : "yes");
  if (!in_time) {
    pxl_cancel(loader, slow_token); /* no need to sit out the slow one */
    drain_until(env, queue, &done, FAST, 30000);
    printf("  fast images done after %.0f ms, once the slow one was cancelled\n", now_ms() - start);
  }
  for (int i = 0; i < FAST; i++) {
    CHECK_STATUS(fast[i].status, PXL_OK);
    capture_reset(&fast[i]);
  }
  pxl_cancel(loader, slow_token);
  drain_until(env, queue, &slow.calls, 1, 5000);
  capture_reset(&slow);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Loads a 64x64 fill of the fault server's PATH, the case named NAME, into *capture. */
static void load_from_fault_server(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                                   const char *path, const char *name, struct capture *capture) {
  struct test_url u = fault_url(env, 0, path, name);
  pxl_request request;
  request_for(&request, u.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  memset(capture, 0, sizeof *capture);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, capture, NULL), PXL_OK);
}

void test_old_requests_are_not_starved(const struct test_env *env) {
  /* One slot, and among equal priorities the newest waiting transfer goes first (the row
   * that just became visible). A request that keeps being overtaken by newer ones must
   * still start once it has waited long enough (5 s), not only when new ones stop coming. */
  pxl_config config;
  pxl_config_init(&config);
  config.max_concurrent_downloads = 1;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  pxl_request request;
  struct test_url first = fault_url(env, 0, "/slow/delay=1000/file=" FIXTURE_GRADIENT_JPG, "starve-first");
  request_for(&request, first.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  struct capture first_got = {0}, old = {0};
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &first_got, NULL), PXL_OK);
  sleep_ms(100);
  struct test_url old_url = test_url(env, "/" FIXTURE_GRADIENT_JPG, "starve-old");
  request_for(&request, old_url.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &old, NULL), PXL_OK);
  double start = now_ms();
  /* Newer requests, one every 300 ms, each holding the slot for a second. */
  enum { MAX_NEWER = 100 };
  static struct capture newer[MAX_NEWER];
  int issued = 0;
  while (atomic_load(&old.calls) == 0 && issued < MAX_NEWER && now_ms() - start < 20000.0 * env->slow_factor) {
    char name[32];
    snprintf(name, sizeof name, "starve-new-%d", issued);
    load_from_fault_server(env, loader, queue, "/slow/delay=1000/file=" FIXTURE_GRADIENT_JPG, name, &newer[issued]);
    issued++;
    drain_for(queue, 300);
  }
  double waited = now_ms() - start;
  int newer_done = 0;
  for (int i = 0; i < issued; i++) newer_done += atomic_load(&newer[i].calls);
  printf("  the old request finished after %.0f ms, %d newer issued, %d of them done\n", waited, issued,
         newer_done);
  CHECKF(atomic_load(&old.calls) == 1, "the old request was still waiting after %.0f ms", waited);
  CHECK_STATUS(old.status, PXL_OK);
  CHECKF(newer_done < issued, "newer requests were all done first (%d of %d)", newer_done, issued);
  pxl_cancel_all(loader, queue);
  drain_for(queue, 200);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  capture_reset(&first_got);
  capture_reset(&old);
  for (int i = 0; i < issued; i++) capture_reset(&newer[i]);
}

void test_waiting_transfers_start_at_once(const struct test_env *env) {
  /* One slot: every transfer but the first waits for the one before it. Each takes a
   * millisecond or two on loopback, so ten in a row take well under a second, unless
   * the slot, once free, is not refilled until something else happens. */
  pxl_config config;
  pxl_config_init(&config);
  config.max_concurrent_downloads = 1;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  enum { N = 10 };
  atomic_int done = 0;
  struct capture got[N] = {{0}};
  double start = now_ms();
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "refill-%d", i);
    struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
    pxl_request request;
    request_for(&request, u.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECK(drain_until(env, queue, &done, N, 30000));
  double took = now_ms() - start;
  printf("  %d one-at-a-time loads: %.0f ms\n", N, took);
  CHECKF(took < 1500.0 * env->slow_factor, "%d one-at-a-time loads of a 17 KB file took %.0f ms",
         N, took);
  for (int i = 0; i < N; i++) {
    CHECK_STATUS(got[i].status, PXL_OK);
    capture_reset(&got[i]);
  }

  /* The same after a cancel: the cancelled transfer's slot goes to the next one now. */
  struct test_url blocker_url = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "refill-blocker");
  pxl_request request;
  request_for(&request, blocker_url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture blocker = {0}, next = {0};
  pxl_token blocker_token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &blocker, &blocker_token), PXL_OK);
  sleep_ms(300);
  struct test_url next_url = test_url(env, "/" FIXTURE_GRADIENT_JPG, "refill-next");
  request_for(&request, next_url.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &next, NULL), PXL_OK);
  sleep_ms(100);
  start = now_ms();
  CHECK_STATUS(pxl_cancel(loader, blocker_token), PXL_OK);
  CHECK(drain_until(env, queue, &next.calls, 1, 20000));
  took = now_ms() - start;
  CHECKF(took < 300.0 * env->slow_factor, "the waiting load finished %.0f ms after the cancel "
         "that freed its slot", took);
  CHECK_STATUS(next.status, PXL_OK);
  drain_until(env, queue, &blocker.calls, 1, 5000);
  capture_reset(&blocker);
  capture_reset(&next);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_connection_reuse(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  enum { N = 6 };
  struct test_url urls[N];
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "reuse-%d", i);
    urls[i] = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
    pxl_request request;
    request_for(&request, urls[i].url, 32, 32, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    struct capture got = {0};
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
    CHECK_STATUS(got.status, PXL_OK);
    capture_reset(&got);
  }
  /* One after another, to one host: one keep-alive connection serves them all. */
  long first = -1;
  int reused = 0;
  for (int i = 0; i < N; i++) {
    log_wait_count(env, urls[i].uri, 1, 2000);
    long connection = log_connection(env, urls[i].uri);
    if (i == 0) first = connection;
    else reused += connection == first;
  }
  CHECKF(first >= 0 && reused == N - 1, "%d of %d sequential loads reused the first connection",
         reused, N - 1);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
