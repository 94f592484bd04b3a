/*
 * test_queue.c: the queue fd's level against wakeups, as a level-triggered event loop
 * sees it (GLib g_unix_fd_add, asyncio add_reader, libuv uv_poll, epoll without
 * EPOLLET; test_queue_fd_edge_triggered covers EPOLLET): the fd is readable exactly
 * while a completion is pending or a wakeup is
 * unconsumed; pxl_queue_dispatch and pxl_queue_wait consume a wakeup; a wait in progress
 * returns for a wakeup even when another thread's dispatch consumed it first.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

static int readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A loader, a queue and a request whose next loads are memory-cache hits: pxl_load then
 * queues its result at once on the calling thread, and no library thread touches the
 * queue afterwards. */
struct hit_source {
  pxl_loader *loader;
  pxl_queue *queue;
  struct test_url url;
  pxl_request request;
};

static int hit_source_open(const struct test_env *env, struct hit_source *s, const char *name) {
  s->loader = new_loader(NULL);
  s->queue = new_queue();
  s->url = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
  request_for(&s->request, s->url.url, 16, 16, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  struct capture first = {0};
  CHECK_STATUS(load_and_wait(env, s->loader, s->queue, &s->request, &first), PXL_OK);
  int ok = atomic_load(&first.calls) == 1 && first.status == PXL_OK;
  capture_reset(&first);
  return ok;
}

static void hit_source_close(struct hit_source *s) {
  pxl_loader_free(s->loader);
  pxl_queue_free(s->queue);
}

static void wakeup_callback(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  (void)result;
  pxl_queue_wakeup(user_data);
}

void test_queue_fd_and_wakeup(const struct test_env *env) {
  struct hit_source s;
  if (!hit_source_open(env, &s, "fd-wakeup")) {
    CHECKF(0, "the first load failed; nothing to test");
    hit_source_close(&s);
    return;
  }
  pxl_queue *queue = s.queue;
  int fd = pxl_queue_fd(queue);
  CHECK(!readable(fd));

  /* A dispatch consumes a wakeup even when it runs nothing: else a level-triggered loop
   * spins for ever on a readable fd with nothing to do. */
  pxl_queue_wakeup(queue);
  CHECK(readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 0), 0);
  CHECK(!readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 0), 0);
  CHECK(!readable(fd));
  /* ... and the consumed wakeup no longer ends a wait. */
  double start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 150), 0);
  double took = now_ms() - start;
  CHECKF(took >= 140, "a wakeup consumed by dispatch still ended a later wait after %.0f ms", took);

  /* Wakeups do not add up: two, then one dispatch, leave nothing. */
  pxl_queue_wakeup(queue);
  pxl_queue_wakeup(queue);
  CHECK(readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 1), 0);
  CHECK(!readable(fd));

  /* A wait returns at once for a wakeup issued before it, and consumes it. */
  pxl_queue_wakeup(queue);
  start = now_ms();
  CHECK_INT(pxl_queue_wait(queue, 5000), 0);
  took = now_ms() - start;
  CHECKF(took < 1000, "the wait after a wakeup took %.0f ms", took);
  CHECK(!readable(fd));

  /* Completions and a wakeup together: readable until every completion ran, then not. */
  struct capture hits[2] = {{0}};
  for (int i = 0; i < 2; i++)
    CHECK_STATUS(pxl_load(s.loader, &s.request, queue, capture_callback, &hits[i], NULL), PXL_OK);
  CHECK_INT(pxl_queue_pending(queue), 2);
  CHECK(readable(fd));
  pxl_queue_wakeup(queue);
  CHECK_INT(pxl_queue_dispatch(queue, 1), 1);
  CHECK(readable(fd)); /* one completion still pending */
  CHECK_INT(pxl_queue_dispatch(queue, 1), 1);
  CHECK(!readable(fd));
  for (int i = 0; i < 2; i++) {
    CHECK_INT(atomic_load(&hits[i].calls), 1);
    CHECK_INT(hits[i].source, PXL_SOURCE_MEMORY);
    capture_reset(&hits[i]);
  }

  /* Completions alone: readable while pending, not after the dispatch of all. */
  for (int i = 0; i < 2; i++)
    CHECK_STATUS(pxl_load(s.loader, &s.request, queue, capture_callback, &hits[i], NULL), PXL_OK);
  CHECK(readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 0), 2);
  CHECK(!readable(fd));
  for (int i = 0; i < 2; i++) capture_reset(&hits[i]);

  /* A wakeup issued during a dispatch (here by a callback) outlives that dispatch: the
   * loop comes back, and the next dispatch consumes it. */
  CHECK_STATUS(pxl_load(s.loader, &s.request, queue, wakeup_callback, queue, NULL), PXL_OK);
  CHECK_INT(pxl_queue_dispatch(queue, 0), 1);
  CHECK(readable(fd));
  CHECK_INT(pxl_queue_dispatch(queue, 0), 0);
  CHECK(!readable(fd));
  hit_source_close(&s);
}

/* The scheduler state of thread tid ('S': blocked), from /proc. */
static char thread_state(pid_t tid) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  char *paren = strrchr(line, ')'); /* the name may hold spaces and parentheses */
  return paren && paren[1] == ' ' ? paren[2] : '?';
}

struct waiter {
  pxl_queue *queue;
  atomic_int tid;
  atomic_int stop;
  atomic_int returns; /* waits that returned */
  atomic_int exited;
};

static void *waiter_main(void *arg) {
  struct waiter *w = arg;
  atomic_store(&w->tid, (int)syscall(SYS_gettid));
  while (!atomic_load(&w->stop)) {
    pxl_queue_wait(w->queue, -1);
    atomic_fetch_add(&w->returns, 1);
  }
  atomic_store(&w->exited, 1);
  return NULL;
}

/* Waits (bounded) until the waiter is blocked: no other thread holds the queue's lock
 * meanwhile, so it is blocked inside pxl_queue_wait, past any point where it could still
 * miss a wakeup issued now. */
static int waiter_blocked(const struct test_env *env, struct waiter *w) {
  double deadline = now_ms() + 5000.0 * env->slow_factor;
  while (now_ms() < deadline) {
    int tid = atomic_load(&w->tid);
    if (tid != 0 && thread_state(tid) == 'S') return 1;
    sleep_ms(1);
  }
  return 0;
}

void test_queue_wakeup_reaches_a_waiter(const struct test_env *env) {
  struct hit_source s;
  if (!hit_source_open(env, &s, "wakeup-waiter")) {
    CHECKF(0, "the first load failed; nothing to test");
    hit_source_close(&s);
    return;
  }
  /* Each round: one thread waits with no timeout while this one completes and dispatches
   * loads, then wakes it and at once completes and dispatches one more. A dispatch that
   * empties the queue must not swallow the wakeup the waiting thread is owed. */
  enum { ROUNDS = 30, LOADS = 20 };
  int hung = 0;
  for (int round = 0; round < ROUNDS && !hung; round++) {
    struct waiter w = {.queue = s.queue};
    pthread_t thread;
    pthread_create(&thread, NULL, waiter_main, &w);
    struct capture hit = {0};
    for (int i = 0; i < LOADS; i++) {
      CHECK_STATUS(pxl_load(s.loader, &s.request, s.queue, capture_callback, &hit, NULL), PXL_OK);
      pxl_queue_dispatch(s.queue, 0);
      capture_reset(&hit);
    }
    CHECKF(waiter_blocked(env, &w), "round %d: the waiting thread never blocked", round);
    atomic_store(&w.stop, 1);
    pxl_queue_wakeup(s.queue);
    CHECK_STATUS(pxl_load(s.loader, &s.request, s.queue, capture_callback, &hit, NULL), PXL_OK);
    CHECK_INT(pxl_queue_dispatch(s.queue, 0), 1);
    capture_reset(&hit);
    double deadline = now_ms() + 5000.0 * env->slow_factor;
    while (!atomic_load(&w.exited) && now_ms() < deadline) sleep_ms(1);
    if (!atomic_load(&w.exited)) {
      hung = 1;
      CHECKF(0, "round %d: pxl_queue_wait(-1) still blocked 5 s after pxl_queue_wakeup "
             "(a dispatch swallowed the wakeup)", round);
      /* Free the thread for the join: wakeups until it notices. */
      while (!atomic_load(&w.exited)) {
        pxl_queue_wakeup(s.queue);
        sleep_ms(10);
      }
    }
    pthread_join(thread, NULL);
  }
  CHECK(!hung);
  hit_source_close(&s);
}

/* An edge-triggered loop (epoll with EPOLLET) hears of every arrival: a completion or a
 * wakeup that comes while the fd is already readable (results not yet dispatched, or
 * arriving during a dispatch) still makes a new edge, or such a loop would sleep on
 * pending callbacks for ever. */
void test_queue_fd_edge_triggered(const struct test_env *env) {
  struct hit_source s;
  if (!hit_source_open(env, &s, "fd-edge")) {
    CHECKF(0, "the first load failed; nothing to test");
    hit_source_close(&s);
    return;
  }
  int ep = epoll_create1(0);
  struct epoll_event want = {.events = EPOLLIN | EPOLLET};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pxl_queue_fd(s.queue), &want) == 0);
  struct epoll_event got;
  CHECK_INT(epoll_wait(ep, &got, 1, 0), 0);

  struct capture hits[3];
  memset(hits, 0, sizeof hits);
  for (int i = 0; i < 3; i++) {
    /* A memory hit: queued at once, nothing dispatched in between. */
    CHECK_STATUS(pxl_load(s.loader, &s.request, s.queue, capture_callback, &hits[i], NULL), PXL_OK);
    CHECKF(epoll_wait(ep, &got, 1, 0) == 1, "completion %d while the fd was readable: no new edge", i + 1);
  }
  pxl_queue_wakeup(s.queue);
  CHECKF(epoll_wait(ep, &got, 1, 0) == 1, "a wakeup while the fd was readable: no new edge");
  CHECK_INT(pxl_queue_dispatch(s.queue, 1), 1);
  /* Still pending: a further arrival after a partial dispatch is an edge too. */
  pxl_queue_wakeup(s.queue);
  CHECK_INT(epoll_wait(ep, &got, 1, 0), 1);
  CHECK_INT(pxl_queue_dispatch(s.queue, 0), 2);
  CHECK_INT(epoll_wait(ep, &got, 1, 0), 0);
  for (int i = 0; i < 3; i++) {
    CHECK_INT(atomic_load(&hits[i].calls), 1);
    capture_reset(&hits[i]);
  }
  close(ep);
  hit_source_close(&s);
}
