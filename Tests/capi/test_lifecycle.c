/*
 * test_lifecycle.c: freeing queues and loaders with requests in flight (rule 9), in
 * either order, and the queue's wait / wakeup / fd contract.
 */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

enum { PHASE_BEFORE = 0, PHASE_DURING = 1, PHASE_AFTER = 2 };
enum { SLOW_LOADS = 3 };

/* Leaves one load whose result is queued but not dispatched, and SLOW_LOADS transfers
 * that take many seconds (distinct URLs, so each is its own download). */
static void start_in_flight(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                            const char *tag, struct capture captures[SLOW_LOADS + 1],
                            struct test_url urls[SLOW_LOADS]) {
  char name[64];
  snprintf(name, sizeof name, "%s-queued", tag);
  struct test_url fast = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
  pxl_request request;
  request_for(&request, fast.url, 50, 50, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &captures[SLOW_LOADS], NULL), PXL_OK);
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while (pxl_queue_pending(queue) == 0 && now_ms() < deadline) pxl_queue_wait(queue, 100);
  CHECKF(pxl_queue_pending(queue) == 1, "%s: %d pending, want the fast one's result", tag,
         pxl_queue_pending(queue));
  for (int i = 0; i < SLOW_LOADS; i++) {
    snprintf(name, sizeof name, "%s-%d", tag, i);
    urls[i] = test_url(env, "/slow/" FIXTURE_NOISE_JPG, name);
    request_for(&request, urls[i].url, 50, 50, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &captures[i], NULL), PXL_OK);
  }
  sleep_ms(300); /* the slow transfers are under way by now */
}

/* Every request ended exactly once, CANCELLED, in the given phase. */
static void check_all_cancelled(struct capture captures[SLOW_LOADS + 1], int phase, const char *tag) {
  for (int i = 0; i <= SLOW_LOADS; i++) {
    CHECKF(atomic_load(&captures[i].calls) == 1, "%s: request %d had %d callbacks", tag, i,
           atomic_load(&captures[i].calls));
    CHECKF(captures[i].status == PXL_E_CANCELLED, "%s: request %d ended %d (%s)", tag, i,
           (int)captures[i].status, captures[i].message);
    CHECKF(captures[i].phase == phase, "%s: request %d called back in phase %d, want %d", tag, i,
           captures[i].phase, phase);
  }
}

/* The downloads nobody wants any more stop: nginx logs each one that had reached it,
 * cut short, soon. (A transfer that never reached the server leaves no line; at least
 * one did, or there was nothing to stop.) */
static void check_transfers_stopped(const struct test_env *env, struct test_url urls[SLOW_LOADS],
                                    const char *tag) {
  sleep_ms(3000); /* the server logs in real time, valgrind or not */
  int logged = 0;
  for (int i = 0; i < SLOW_LOADS; i++) {
    int n = log_count(env, urls[i].uri);
    long sent = log_bytes(env, urls[i].uri);
    CHECKF(n <= 1, "%s: transfer %d logged %d times", tag, i, n);
    if (n == 0) continue;
    logged++;
    CHECKF(sent < 100000, "%s: transfer %d sent %ld bytes: it ran on after the free", tag, i, sent);
  }
  CHECKF(logged > 0, "%s: no transfer ended within 3 s of the free: left running?", tag);
}

void test_free_queue_in_flight(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *doomed = new_queue();
  pxl_queue *other = new_queue();
  atomic_int phase = PHASE_BEFORE;
  struct capture captures[SLOW_LOADS + 1] = {{0}};
  for (int i = 0; i <= SLOW_LOADS; i++) captures[i].phase_source = &phase;
  struct test_url urls[SLOW_LOADS];

  /* A request on another queue must not be touched by freeing this one. */
  struct test_url survivor_url = test_url(env, "/" FIXTURE_GRADIENT_JPG, "fq-survivor");
  pxl_request request;
  request_for(&request, survivor_url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture survivor = {0};
  CHECK_STATUS(pxl_load(loader, &request, other, capture_callback, &survivor, NULL), PXL_OK);

  start_in_flight(env, loader, doomed, "fq", captures, urls);
  atomic_store(&phase, PHASE_DURING);
  pxl_queue_free(doomed);
  atomic_store(&phase, PHASE_AFTER);
  check_all_cancelled(captures, PHASE_DURING, "queue free");

  CHECK(drain_until(env, other, &survivor.calls, 1, 10000));
  CHECK_STATUS(survivor.status, PXL_OK);
  drain_for(other, 300);
  for (int i = 0; i <= SLOW_LOADS; i++) CHECK_INT(atomic_load(&captures[i].calls), 1);
  check_transfers_stopped(env, urls, "queue free");

  /* The loader still works for the surviving queue. */
  capture_reset(&survivor);
  CHECK_STATUS(load_and_wait(env, loader, other, &request, &survivor), PXL_OK);
  CHECK_STATUS(survivor.status, PXL_OK);
  CHECK_INT(survivor.source, PXL_SOURCE_MEMORY);
  capture_reset(&survivor);
  for (int i = 0; i <= SLOW_LOADS; i++) capture_reset(&captures[i]);
  pxl_loader_free(loader);
  pxl_queue_free(other);
}

void test_free_loader_in_flight(const struct test_env *env) {
  atomic_int phase = PHASE_BEFORE;
  struct capture captures[SLOW_LOADS + 1] = {{0}};
  struct test_url urls[SLOW_LOADS];

  /* Loader first, then the queue is dispatched: the CANCELLED results wait in it. */
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  for (int i = 0; i <= SLOW_LOADS; i++) captures[i].phase_source = &phase;
  start_in_flight(env, loader, queue, "fl", captures, urls);
  double start = now_ms();
  pxl_loader_free(loader);
  double took = now_ms() - start;
  /* It stops the transfers; it does not wait for them to finish. */
  CHECKF(took < 3000.0 * env->slow_factor, "pxl_loader_free took %.0f ms", took);
  /* Callbacks run only in dispatch or queue free, never inside pxl_loader_free. */
  for (int i = 0; i <= SLOW_LOADS; i++) CHECK_INT(atomic_load(&captures[i].calls), 0);
  CHECK_INT(pxl_queue_pending(queue), SLOW_LOADS + 1);
  atomic_store(&phase, PHASE_DURING);
  CHECK_INT(pxl_queue_dispatch(queue, 0), SLOW_LOADS + 1);
  atomic_store(&phase, PHASE_AFTER);
  /* "Still in flight" includes the one whose image sat in the queue: its callback had
   * not run, so (rules 3 and 9) it ends CANCELLED too. */
  check_all_cancelled(captures, PHASE_DURING, "loader free, then dispatch");
  CHECK_INT(drain_for(queue, 300), 0);
  check_transfers_stopped(env, urls, "loader free");
  pxl_queue_free(queue);
  for (int i = 0; i <= SLOW_LOADS; i++) capture_reset(&captures[i]);

  /* Loader first, then the queue is freed without a dispatch: the free runs them. */
  atomic_store(&phase, PHASE_BEFORE);
  loader = new_loader(NULL);
  queue = new_queue();
  for (int i = 0; i <= SLOW_LOADS; i++) captures[i].phase_source = &phase;
  start_in_flight(env, loader, queue, "fl2", captures, urls);
  pxl_loader_free(loader);
  atomic_store(&phase, PHASE_DURING);
  pxl_queue_free(queue);
  atomic_store(&phase, PHASE_AFTER);
  check_all_cancelled(captures, PHASE_DURING, "loader free, then queue free");
  for (int i = 0; i <= SLOW_LOADS; i++) capture_reset(&captures[i]);
}

void test_free_orders(const struct test_env *env) {
  /* Queue first, with work in flight, then the loader. */
  atomic_int phase = PHASE_BEFORE;
  struct capture captures[SLOW_LOADS + 1] = {{0}};
  struct test_url urls[SLOW_LOADS];
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  for (int i = 0; i <= SLOW_LOADS; i++) captures[i].phase_source = &phase;
  start_in_flight(env, loader, queue, "fo", captures, urls);
  atomic_store(&phase, PHASE_DURING);
  pxl_queue_free(queue);
  atomic_store(&phase, PHASE_AFTER);
  double start = now_ms();
  pxl_loader_free(loader);
  CHECKF(now_ms() - start < 3000.0 * env->slow_factor, "pxl_loader_free took %.0f ms", now_ms() - start);
  check_all_cancelled(captures, PHASE_DURING, "queue free, then loader free");
  for (int i = 0; i <= SLOW_LOADS; i++) capture_reset(&captures[i]);

  /* Empty ones, both orders. */
  loader = new_loader(NULL);
  queue = new_queue();
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  loader = new_loader(NULL);
  queue = new_queue();
  pxl_queue_free(queue);
  pxl_loader_free(loader);

  /* One queue, two loaders: freeing one loader leaves the other's request alone, and
   * images the host retained outlive the loader that made them. */
  pxl_loader *first = new_loader(NULL);
  pxl_loader *second = new_loader(NULL);
  queue = new_queue();
  struct test_url kept_url = test_url(env, "/" FIXTURE_GRADIENT_JPG, "fo-kept");
  pxl_request request;
  request_for(&request, kept_url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture kept = {0};
  CHECK_STATUS(load_and_wait(env, first, queue, &request, &kept), PXL_OK);
  CHECK_STATUS(kept.status, PXL_OK);

  struct test_url slow_url = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "fo-second");
  request_for(&request, slow_url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture others = {0};
  CHECK_STATUS(pxl_load(second, &request, queue, capture_callback, &others, NULL), PXL_OK);
  pxl_loader_free(first);
  CHECK(drain_until(env, queue, &others.calls, 1, 20000));
  CHECKF(others.status == PXL_OK, "the second loader's request ended %d (%s)", (int)others.status,
         others.message);
  if (kept.image) {
    /* Read every byte of the retained image (valgrind would see a use after free). */
    unsigned sum = 0;
    for (int y = 0; y < pxl_image_height(kept.image); y++)
      for (int x = 0; x < 640 * 4; x++) sum += pxl_image_pixels(kept.image)[(size_t)y * pxl_image_stride(kept.image) + x];
    CHECK(sum > 0);
    CHECK_INT(pxl_image_width(kept.image), 640);
  }
  capture_reset(&kept);
  capture_reset(&others);
  pxl_loader_free(second);
  pxl_queue_free(queue);
}

struct wakeup_later {
  pxl_queue *queue;
  int delay_ms;
};

static void *wakeup_thread(void *arg) {
  struct wakeup_later *w = arg;
  sleep_ms(w->delay_ms);
  pxl_queue_wakeup(w->queue);
  return NULL;
}

void test_queue_wait_and_wakeup(const struct test_env *env) {
  (void)env;
  pxl_queue *queue = new_queue();
  CHECK_INT(pxl_queue_pending(queue), 0);
  CHECK_INT(pxl_queue_dispatch(queue, 0), 0);

  double start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 0), 0);
  CHECKF(now_ms() - start < 50, "wait(0) took %.0f ms", now_ms() - start);

  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 150), 0);
  double took = now_ms() - start;
  CHECKF(took >= 140 && took < 1000, "wait(150) with nothing pending took %.0f ms", took);

  /* A wakeup from another thread ends a long wait early. */
  struct wakeup_later w = {queue, 150};
  pthread_t thread;
  pthread_create(&thread, NULL, wakeup_thread, &w);
  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 10000), 0);
  took = now_ms() - start;
  pthread_join(thread, NULL);
  CHECKF(took >= 100 && took < 3000, "wakeup after 150 ms ended the wait after %.0f ms", took);

  /* A negative timeout waits for ever, until the wakeup. */
  pthread_create(&thread, NULL, wakeup_thread, &w);
  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, -1), 0);
  took = now_ms() - start;
  pthread_join(thread, NULL);
  CHECKF(took >= 100 && took < 3000, "wait(-1) ended after %.0f ms", took);

  /* A wakeup with no wait in progress ends the next one, and only that one. */
  pxl_queue_wakeup(queue);
  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 5000), 0);
  CHECKF(now_ms() - start < 1000, "the wait after a wakeup took %.0f ms", now_ms() - start);
  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 150), 0);
  took = now_ms() - start;
  CHECKF(took >= 140, "a used-up wakeup still ended a later wait after %.0f ms", took);
  pxl_queue_free(queue);
}

static int readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

void test_queue_fd(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  int fd = pxl_queue_fd(queue);
  CHECK(fd >= 0);
  CHECK_INT(pxl_queue_fd(queue), fd);
  CHECK(!readable(fd));

  /* poll() alone must be enough to know when to dispatch: that is the fd's purpose. */
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "fd");
  pxl_request request;
  request_for(&request, u.url, 32, 32, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got, NULL), PXL_OK);
  struct pollfd p = {fd, POLLIN, 0};
  int n = poll(&p, 1, 10000 * env->slow_factor);
  CHECKF(n == 1 && (p.revents & POLLIN), "poll on the queue fd: %d, revents %d", n, p.revents);
  CHECK(pxl_queue_pending(queue) > 0);
  CHECK_INT(atomic_load(&got.calls), 0); /* nothing runs before dispatch */
  CHECK_INT(pxl_queue_dispatch(queue, 0), 1);
  CHECK_INT(atomic_load(&got.calls), 1);
  CHECK_STATUS(got.status, PXL_OK);
  CHECK_INT(pxl_queue_pending(queue), 0);
  /* "Readable while completions are pending": not after they are dispatched, or a
   * poll() loop would spin. */
  CHECK(!readable(fd));
  capture_reset(&got);

  /* dispatch(max) runs at most max. */
  struct capture many[3] = {{0}};
  for (int i = 0; i < 3; i++)
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &many[i], NULL), PXL_OK);
  double deadline = now_ms() + 5000.0 * env->slow_factor;
  while (pxl_queue_pending(queue) < 3 && now_ms() < deadline) pxl_queue_wait(queue, 100);
  CHECK_INT(pxl_queue_pending(queue), 3);
  CHECK(readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 1), 1);
  CHECK_INT(pxl_queue_pending(queue), 2);
  CHECK(readable(fd)); /* still pending, still readable */
  CHECK_INT(pxl_queue_wait(queue, 0), 2);
  CHECK_INT(pxl_queue_dispatch(queue, 0), 2);
  CHECK(!readable(fd));
  for (int i = 0; i < 3; i++) {
    CHECK_INT(atomic_load(&many[i].calls), 1);
    CHECK_INT(many[i].source, PXL_SOURCE_MEMORY);
    capture_reset(&many[i]);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
