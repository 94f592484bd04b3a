/*
 * Fetchers for the host's own schemes and data: URIs (pixload.h, "Fetchers", and
 * PXL_SCHEME_DATA). The real fetcher here serves images out of a SQLite database, on a
 * thread of its own as pixload.h asks of blocking storage; a "silent" fetcher keeps its
 * handles and answers only when a test says, to play the misbehaving host (never
 * answers, writes after cancel, finishes an ended fetch, holds handles while the loader
 * is freed).
 */
#define _GNU_SOURCE /* mkdtemp */
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* ---- the SQLite fetcher: start queues the URL, its thread reads the blob ---- */

struct db_job {
  char *url;
  pxl_fetch *fetch;
  struct db_job *next;
};

struct db_fetcher {
  sqlite3 *db;
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  struct db_job *head, *tail;
  int stop;
  int hold;                 /* while set, the thread leaves queued jobs alone */
  atomic_int starts, cancels, destroys, after_destroy;
  char last_cancelled[256]; /* the URL of the last fetch cancel named */
  struct db_job *running[64]; /* started, not yet served: to name a cancelled one */
};

static void *db_thread(void *arg) {
  struct db_fetcher *f = arg;
  pthread_mutex_lock(&f->mutex);
  for (;;) {
    while (!f->stop && (f->hold || !f->head)) pthread_cond_wait(&f->cond, &f->mutex);
    if (f->stop && !f->head) break;
    struct db_job *job = f->head;
    f->head = job->next;
    if (!f->head) f->tail = NULL;
    pthread_mutex_unlock(&f->mutex);
    /* "db://images/NAME" -> the row named NAME */
    const char *name = strrchr(job->url, '/');
    name = name ? name + 1 : job->url;
    sqlite3_stmt *stmt = NULL;
    pxl_status status = PXL_E_IO;
    if (sqlite3_prepare_v2(f->db, "SELECT data FROM images WHERE name = ?", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_bind_text(stmt, 1, name, -1, SQLITE_TRANSIENT) == SQLITE_OK) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(stmt, 0);
        int size = sqlite3_column_bytes(stmt, 0);
        status = PXL_OK;
        /* In pieces, as a real reader would; a refused write means stop. */
        for (int at = 0; at < size; at += 4096) {
          int piece = size - at < 4096 ? size - at : 4096;
          if (pxl_fetch_write(job->fetch, blob + at, (size_t)piece) != PXL_OK) break;
        }
      } else if (rc == SQLITE_DONE) {
        status = PXL_E_NOT_FOUND;
      }
    }
    sqlite3_finalize(stmt);
    pxl_fetch_finish(job->fetch, status, status == PXL_E_NOT_FOUND ? "no such image in the database" : NULL);
    pthread_mutex_lock(&f->mutex);
    for (int i = 0; i < 64; i++)
      if (f->running[i] == job) f->running[i] = NULL;
    free(job->url);
    free(job);
  }
  pthread_mutex_unlock(&f->mutex);
  return NULL;
}

static void db_start(const char *url, pxl_fetch *fetch, void *user_data) {
  struct db_fetcher *f = user_data;
  if (atomic_load(&f->destroys)) atomic_fetch_add(&f->after_destroy, 1);
  atomic_fetch_add(&f->starts, 1);
  struct db_job *job = calloc(1, sizeof *job);
  job->url = strdup(url);
  job->fetch = fetch;
  pthread_mutex_lock(&f->mutex);
  if (f->tail) f->tail->next = job; else f->head = job;
  f->tail = job;
  for (int i = 0; i < 64; i++)
    if (!f->running[i]) { f->running[i] = job; break; }
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->mutex);
}

static void db_cancel(pxl_fetch *fetch, void *user_data) {
  struct db_fetcher *f = user_data;
  if (atomic_load(&f->destroys)) atomic_fetch_add(&f->after_destroy, 1);
  pthread_mutex_lock(&f->mutex);
  for (int i = 0; i < 64; i++)
    if (f->running[i] && f->running[i]->fetch == fetch)
      snprintf(f->last_cancelled, sizeof f->last_cancelled, "%s", f->running[i]->url);
  pthread_mutex_unlock(&f->mutex);
  atomic_fetch_add(&f->cancels, 1);
}

static void db_destroy(void *user_data) {
  struct db_fetcher *f = user_data;
  atomic_fetch_add(&f->destroys, 1);
}

static void db_put(const struct test_env *env, sqlite3 *db, const char *name, const char *fixture) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, fixture);
  FILE *in = fopen(path, "rb");
  CHECKF(in != NULL, "no fixture %s", path);
  if (!in) return;
  static unsigned char data[1 << 21];
  size_t size = fread(data, 1, sizeof data, in);
  fclose(in);
  sqlite3_stmt *stmt = NULL;
  CHECK(sqlite3_prepare_v2(db, "INSERT INTO images (name, data) VALUES (?, ?)", -1, &stmt, NULL) == SQLITE_OK);
  sqlite3_bind_text(stmt, 1, name, -1, SQLITE_TRANSIENT);
  sqlite3_bind_blob(stmt, 2, data, (int)size, SQLITE_TRANSIENT);
  CHECK(sqlite3_step(stmt) == SQLITE_DONE);
  sqlite3_finalize(stmt);
}

/* A database file in directory with gradient.jpg, alpha.png and progressive.jpg, and its
 * fetcher's thread. */
static void db_open(const struct test_env *env, struct db_fetcher *f, const char *directory) {
  memset(f, 0, sizeof *f);
  char path[512];
  snprintf(path, sizeof path, "%s/images.sqlite", directory);
  CHECK(sqlite3_open(path, &f->db) == SQLITE_OK);
  CHECK(sqlite3_exec(f->db, "CREATE TABLE images (name TEXT PRIMARY KEY, data BLOB)", NULL, NULL, NULL) == SQLITE_OK);
  db_put(env, f->db, "gradient.jpg", FIXTURE_GRADIENT_JPG);
  db_put(env, f->db, "alpha.png", FIXTURE_ALPHA_PNG);
  db_put(env, f->db, "progressive.jpg", FIXTURE_PROGRESSIVE_JPG);
  pthread_mutex_init(&f->mutex, NULL);
  pthread_cond_init(&f->cond, NULL);
  CHECK(pthread_create(&f->thread, NULL, db_thread, f) == 0);
}

static void db_close(struct db_fetcher *f) {
  pthread_mutex_lock(&f->mutex);
  f->stop = 1;
  f->hold = 0;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->mutex);
  pthread_join(f->thread, NULL);
  sqlite3_close(f->db);
  pthread_mutex_destroy(&f->mutex);
  pthread_cond_destroy(&f->cond);
}

static void db_hold(struct db_fetcher *f, int hold) {
  pthread_mutex_lock(&f->mutex);
  f->hold = hold;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->mutex);
}

static void add_db_fetcher(pxl_loader *loader, struct db_fetcher *f, int disk_cache, int32_t max_concurrent) {
  pxl_fetcher fetcher;
  CHECK_STATUS(pxl_fetcher_init(&fetcher), PXL_OK);
  CHECK_INT(fetcher.max_concurrent, 8);
  CHECK_INT(fetcher.disk_cache, 0);
  fetcher.start = db_start;
  fetcher.cancel = db_cancel;
  fetcher.destroy = db_destroy;
  fetcher.user_data = f;
  fetcher.disk_cache = disk_cache;
  if (max_concurrent) fetcher.max_concurrent = max_concurrent;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "DB", &fetcher), PXL_OK);
}

static void remove_dir(const char *directory) {
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  CHECK(system(command) == 0);
}

/* Twenty requests of one image in five sizes, while the fetcher holds its first answer:
 * one start for the key; every request gets its size, from the fetcher. A missing row is
 * the fetcher's status. A second loader on the same disk directory gets the image from
 * disk with no start, since this fetcher allows the disk cache. */
void test_fetcher_sqlite(const struct test_env *env) {
  char directory[] = "/tmp/pxl-fetchers.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char cache_dir[600];
  snprintf(cache_dir, sizeof cache_dir, "%s/cache", directory);
  struct db_fetcher f;
  db_open(env, &f, directory);
  for (int round = 0; round < 2; round++) {
    pxl_config config;
    pxl_config_init(&config);
    config.disk_cache_bytes = 8 << 20;
    config.disk_cache_dir = cache_dir;
    config.disk_variant_max_side = 0;
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    add_db_fetcher(loader, &f, 1, 0);
    int starts_before = atomic_load(&f.starts);
    if (round == 0) db_hold(&f, 1);
    struct capture c[20];
    memset(c, 0, sizeof c);
    atomic_int done = 0;
    for (int i = 0; i < 20; i++) {
      pxl_request request;
      request_for(&request, "db://images/gradient.jpg", 32 * (1 + i % 5), 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
      c[i].seq = &done;
      pxl_token token;
      CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c[i], &token), PXL_OK);
    }
    if (round == 0) {
      /* Everything merged before the fetcher's first answer: one start. */
      for (int waited = 0; atomic_load(&f.starts) == starts_before && waited < 2000; waited += 10) sleep_ms(10);
      sleep_ms(50);
      CHECK_INT(atomic_load(&f.starts) - starts_before, 1);
      db_hold(&f, 0);
    }
    int calls = 0;
    for (int waited = 0; waited < 30000 * env->slow_factor && calls < 20; waited += 10) {
      pxl_queue_wait(queue, 10);
      pxl_queue_dispatch(queue, 0);
      calls = 0;
      for (int i = 0; i < 20; i++) calls += atomic_load(&c[i].calls);
    }
    CHECK_INT(calls, 20);
    int from_disk = 0;
    for (int i = 0; i < 20; i++) {
      CHECKF(c[i].status == PXL_OK, "round %d request %d: %s", round, i, c[i].message);
      CHECK_INT(pxl_image_width(c[i].image), 32 * (1 + i % 5));
      if (round == 0) {
        CHECK_INT(c[i].source, PXL_SOURCE_FETCHER);
      } else {
        /* Nothing holds the disk: a size already decoded may come from memory. */
        CHECKF(c[i].source == PXL_SOURCE_DISK || c[i].source == PXL_SOURCE_MEMORY, "source %d", (int)c[i].source);
        from_disk += c[i].source == PXL_SOURCE_DISK;
      }
      capture_reset(&c[i]);
    }
    if (round == 1) CHECKF(from_disk >= 1, "%d from disk", from_disk);
    CHECK_INT(atomic_load(&f.starts) - starts_before, round == 0 ? 1 : 0);
    /* A fetcher's bytes are no transfer (pxl_stats.network_fetches). */
    pxl_stats stats = {.struct_size = sizeof stats};
    CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
    CHECK_INT(stats.network_fetches, 0);
    CHECK_INT(stats.bytes_downloaded, 0);
    /* A row the database lacks: the fetcher's status and message. */
    pxl_request request;
    request_for(&request, "db://images/missing.jpg", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture missing;
    memset(&missing, 0, sizeof missing);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &missing), PXL_OK);
    CHECK_STATUS(missing.status, PXL_E_NOT_FOUND);
    CHECKF(strstr(missing.message, "no such image") != NULL, "message: %s", missing.message);
    capture_reset(&missing);
    int destroys = atomic_load(&f.destroys);
    pxl_loader_free(loader);
    CHECK_INT(atomic_load(&f.destroys), destroys + 1);
    CHECK_INT(atomic_load(&f.after_destroy), 0);
    atomic_store(&f.destroys, 0);
    pxl_queue_free(queue);
  }
  db_close(&f);
  remove_dir(directory);
}

/* Cancels reach the fetcher: of two requests of one key, cancelling one leaves the fetch
 * running; cancelling the other cancels it, once. max_concurrent holds the rest back,
 * highest priority first. */
void test_fetcher_cancel_and_limit(const struct test_env *env) {
  char directory[] = "/tmp/pxl-fetchers.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  struct db_fetcher f;
  db_open(env, &f, directory);
  db_hold(&f, 1);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  add_db_fetcher(loader, &f, 0, 1);
  struct capture a, b, low, high;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&low, 0, sizeof low);
  memset(&high, 0, sizeof high);
  pxl_request request;
  pxl_token ta, tb, tlow, thigh;
  request_for(&request, "db://images/gradient.jpg", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &a, &ta), PXL_OK);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &b, &tb), PXL_OK);
  request_for(&request, "db://images/alpha.png", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.priority = 1;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &low, &tlow), PXL_OK);
  request_for(&request, "db://images/progressive.jpg", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.priority = 5;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &high, &thigh), PXL_OK);
  for (int waited = 0; atomic_load(&f.starts) == 0 && waited < 2000; waited += 10) sleep_ms(10);
  sleep_ms(50);
  CHECK_INT(atomic_load(&f.starts), 1); /* the limit: one at a time */
  CHECK_STATUS(pxl_cancel(loader, ta), PXL_OK);
  sleep_ms(50);
  CHECK_INT(atomic_load(&f.cancels), 0); /* b still wants it */
  CHECK_STATUS(pxl_cancel(loader, tb), PXL_OK);
  for (int waited = 0; atomic_load(&f.cancels) == 0 && waited < 2000; waited += 10) sleep_ms(10);
  CHECK_INT(atomic_load(&f.cancels), 1);
  CHECKF(strcmp(f.last_cancelled, "db://images/gradient.jpg") == 0, "cancelled %s", f.last_cancelled);
  /* The slot is free: the higher priority starts next. */
  for (int waited = 0; atomic_load(&f.starts) < 2 && waited < 2000; waited += 10) sleep_ms(10);
  sleep_ms(50);
  CHECK_INT(atomic_load(&f.starts), 2);
  pthread_mutex_lock(&f.mutex);
  CHECKF(f.tail && strstr(f.tail->url, "progressive.jpg"), "started second: %s", f.tail ? f.tail->url : "none");
  pthread_mutex_unlock(&f.mutex);
  db_hold(&f, 0);
  CHECK(drain_until(env, queue, &low.calls, 1, 30000));
  CHECK(drain_until(env, queue, &high.calls, 1, 30000));
  CHECK(drain_until(env, queue, &b.calls, 1, 30000));
  CHECK_STATUS(a.status, PXL_E_CANCELLED);
  CHECK_STATUS(b.status, PXL_E_CANCELLED);
  CHECK_STATUS(high.status, PXL_OK);
  CHECK_STATUS(low.status, PXL_OK);
  CHECK_INT(atomic_load(&f.cancels), 1);
  capture_reset(&a);
  capture_reset(&b);
  capture_reset(&low);
  capture_reset(&high);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  db_close(&f);
  remove_dir(directory);
}

/* ---- the silent fetcher: keeps its handles, answers when told ---- */

struct silent {
  pthread_mutex_t mutex;
  pxl_fetch *fetches[16];
  int count;
  atomic_int starts, cancels, destroys, in_start;
  atomic_int cancel_during_start;
  pxl_fetch *cancelled[16];
  int cancelled_count;
};

static void silent_start(const char *url, pxl_fetch *fetch, void *user_data) {
  (void)url;
  struct silent *s = user_data;
  atomic_store(&s->in_start, 1);
  pthread_mutex_lock(&s->mutex);
  s->fetches[s->count++] = fetch;
  pthread_mutex_unlock(&s->mutex);
  atomic_fetch_add(&s->starts, 1);
  sleep_ms(20); /* a cancel asked for meanwhile must wait for this to return */
  atomic_store(&s->in_start, 0);
}

static void silent_cancel(pxl_fetch *fetch, void *user_data) {
  struct silent *s = user_data;
  if (atomic_load(&s->in_start)) atomic_fetch_add(&s->cancel_during_start, 1);
  pthread_mutex_lock(&s->mutex);
  s->cancelled[s->cancelled_count++] = fetch;
  pthread_mutex_unlock(&s->mutex);
  atomic_fetch_add(&s->cancels, 1);
}

static void silent_destroy(void *user_data) {
  struct silent *s = user_data;
  atomic_fetch_add(&s->destroys, 1);
}

static void add_silent(pxl_loader *loader, struct silent *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mutex, NULL);
  pxl_fetcher fetcher;
  pxl_fetcher_init(&fetcher);
  fetcher.start = silent_start;
  fetcher.cancel = silent_cancel;
  fetcher.destroy = silent_destroy;
  fetcher.user_data = s;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "silent", &fetcher), PXL_OK);
}

static pxl_token load_silent(pxl_loader *loader, pxl_queue *queue, const char *url, struct capture *c) {
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  memset(c, 0, sizeof *c);
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, c, &token), PXL_OK);
  return token;
}

static void wait_for(atomic_int *value, int target) {
  for (int waited = 0; atomic_load(value) < target && waited < 5000; waited += 5) sleep_ms(5);
}

/* A fetcher that never answers ends in PXL_E_TIMEOUT after timeout_ms, with one cancel;
 * its late write and finish do nothing. A cancel asked for during start comes after start
 * returned; writes after it are refused. Over max_body_bytes: PXL_E_BODY_TOO_LARGE. */
void test_fetcher_misbehaving(const struct test_env *env) {
  pxl_config config;
  pxl_config_init(&config);
  config.timeout_ms = 300 * env->slow_factor;
  config.max_body_bytes = 1000;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct silent s;
  add_silent(loader, &s);

  struct capture never;
  double started = now_ms();
  load_silent(loader, queue, "silent:never", &never);
  CHECK(drain_until(env, queue, &never.calls, 1, 5000));
  CHECK_STATUS(never.status, PXL_E_TIMEOUT);
  CHECKF(now_ms() - started >= 280 * env->slow_factor, "timed out after %.0f ms", now_ms() - started);
  wait_for(&s.cancels, 1);
  CHECK_INT(atomic_load(&s.cancels), 1);
  CHECK(s.cancelled[0] == s.fetches[0]);
  static const unsigned char bytes[16] = {0xff, 0xd8};
  CHECK_STATUS(pxl_fetch_write(s.fetches[0], bytes, sizeof bytes), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[0], PXL_OK, NULL), PXL_E_CANCELLED); /* late: ignored, released */
  CHECK_INT(drain_for(queue, 50), 0);

  /* Cancelled while start still runs: cancel waits for start to return. */
  struct capture early;
  pxl_token token = load_silent(loader, queue, "silent:early", &early);
  wait_for(&s.in_start, 1);
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  wait_for(&s.cancels, 2);
  CHECK_INT(atomic_load(&s.cancels), 2);
  CHECK_INT(atomic_load(&s.cancel_during_start), 0);
  CHECK_STATUS(pxl_fetch_write(s.fetches[1], bytes, sizeof bytes), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[1], PXL_E_IO, "late"), PXL_E_CANCELLED);
  CHECK(drain_until(env, queue, &early.calls, 1, 5000));
  CHECK_STATUS(early.status, PXL_E_CANCELLED);

  /* The body-size limit counts the fetcher's bytes. */
  struct capture big;
  load_silent(loader, queue, "silent:big", &big);
  wait_for(&s.starts, 3);
  unsigned char chunk[600];
  memset(chunk, 0xab, sizeof chunk);
  CHECK_STATUS(pxl_fetch_write(s.fetches[2], chunk, sizeof chunk), PXL_OK);
  CHECK_STATUS(pxl_fetch_write(s.fetches[2], chunk, sizeof chunk), PXL_E_BODY_TOO_LARGE);
  CHECK_STATUS(pxl_fetch_write(s.fetches[2], chunk, 1), PXL_E_CANCELLED);
  CHECK(drain_until(env, queue, &big.calls, 1, 5000));
  CHECK_STATUS(big.status, PXL_E_BODY_TOO_LARGE);
  wait_for(&s.cancels, 3);
  CHECK_INT(atomic_load(&s.cancels), 3);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[2], PXL_OK, NULL), PXL_E_CANCELLED);

  /* A host status fails the request with it; bytes that are no image are not one. */
  struct capture failed, junk;
  load_silent(loader, queue, "silent:failed", &failed);
  load_silent(loader, queue, "silent:junk", &junk);
  wait_for(&s.starts, 5);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[3], PXL_E_NOT_FOUND, "gone"), PXL_OK);
  CHECK_STATUS(pxl_fetch_write(s.fetches[4], "hello", 5), PXL_OK);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[4], PXL_OK, NULL), PXL_OK);
  CHECK(drain_until(env, queue, &failed.calls, 1, 5000));
  CHECK(drain_until(env, queue, &junk.calls, 1, 5000));
  CHECK_STATUS(failed.status, PXL_E_NOT_FOUND);
  CHECKF(strcmp(failed.message, "gone") == 0, "message %s", failed.message);
  CHECK_STATUS(junk.status, PXL_E_NOT_AN_IMAGE);
  /* A status this library does not know counts as PXL_E_IO (pixload.h, "Extensions"). */
  struct capture unknown;
  load_silent(loader, queue, "silent:unknown", &unknown);
  wait_for(&s.starts, 6);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[5], (pxl_status)1234, "odd"), PXL_OK);
  CHECK(drain_until(env, queue, &unknown.calls, 1, 5000));
  CHECK_STATUS(unknown.status, PXL_E_IO);
  CHECKF(strcmp(unknown.message, "odd") == 0, "message %s", unknown.message);
  CHECK_INT(atomic_load(&s.cancels), 3);

  CHECK_INT(atomic_load(&s.destroys), 0);
  pxl_loader_free(loader);
  CHECK_INT(atomic_load(&s.destroys), 1);
  pxl_queue_free(queue);
  pthread_mutex_destroy(&s.mutex);
}

/* Freed with handles out: every request ends CANCELLED, each started fetch gets cancel
 * once, destroy comes last, and the handles stay valid (their writes do nothing). */
void test_fetcher_loader_freed(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct silent s;
  add_silent(loader, &s);
  struct capture c[3];
  load_silent(loader, queue, "silent:one", &c[0]);
  load_silent(loader, queue, "silent:two", &c[1]);
  load_silent(loader, queue, "silent:three", &c[2]);
  wait_for(&s.starts, 3);
  CHECK_INT(atomic_load(&s.starts), 3);
  pxl_loader_free(loader);
  CHECK_INT(atomic_load(&s.cancels), 3);
  CHECK_INT(atomic_load(&s.destroys), 1);
  for (int i = 0; i < 3; i++) CHECK(drain_until(env, queue, &c[i].calls, 1, 5000));
  for (int i = 0; i < 3; i++) CHECK_STATUS(c[i].status, PXL_E_CANCELLED);
  for (int i = 0; i < 3; i++) {
    CHECK_STATUS(pxl_fetch_write(s.fetches[i], "x", 1), PXL_E_CANCELLED);
    CHECK_STATUS(pxl_fetch_finish(s.fetches[i], PXL_OK, NULL), PXL_E_CANCELLED);
  }
  pxl_queue_free(queue);
  pthread_mutex_destroy(&s.mutex);
}

static void count_destroy(void *user_data) { atomic_fetch_add((atomic_int *)user_data, 1); }

/* Registration: which schemes a fetcher may take, removal ends its requests; a refusal
 * never calls destroy, as 0.5.0 promised (pixload.h, "Extensions"): a 0.5.0 host frees
 * user_data itself then. */
void test_fetcher_registration(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  pxl_fetcher fetcher;
  CHECK_STATUS(pxl_fetcher_init_size(&fetcher, 8), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetcher_init(&fetcher), PXL_OK);
  CHECK_INT(fetcher.struct_size, sizeof fetcher);
  atomic_int refused_destroys = 0;
  fetcher.destroy = count_destroy;
  fetcher.user_data = &refused_destroys;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "app", &fetcher), PXL_E_INVALID_ARGUMENT); /* no start */
  fetcher.start = silent_start;
  const char *refused[] = {"http", "HTTPS", "file", "data", "ftp", "", "a b", "1app", "app:"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    CHECKF(pxl_loader_add_fetcher(loader, refused[i], &fetcher) == PXL_E_INVALID_ARGUMENT, "scheme '%s'", refused[i]);
  fetcher.max_concurrent = 0;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "app", &fetcher), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_add_fetcher(NULL, "app", &fetcher), PXL_E_INVALID_ARGUMENT);
  fetcher.struct_size = 8;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "app", &fetcher), PXL_E_INVALID_ARGUMENT);
  fetcher.struct_size = sizeof fetcher;
  fetcher.max_concurrent = 1;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "app", NULL), PXL_E_INVALID_ARGUMENT); /* nothing to call */
  CHECK_INT(atomic_load(&refused_destroys), 0);
  CHECK_STATUS(pxl_loader_remove_fetcher(loader, "silent"), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_fetch_write(NULL, "x", 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(NULL, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);

  /* Not registered: not allowed. */
  pxl_request request;
  request_for(&request, "silent:x", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_token token;
  struct capture c;
  memset(&c, 0, sizeof c);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, &token), PXL_E_SCHEME_NOT_ALLOWED);

  struct silent s;
  add_silent(loader, &s);
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "SILENT", &fetcher), PXL_E_INVALID_ARGUMENT); /* taken */
  CHECK_INT(atomic_load(&refused_destroys), 0);
  struct capture waiting;
  load_silent(loader, queue, "Silent://host/x", &waiting);
  wait_for(&s.starts, 1);
  CHECK_STATUS(pxl_loader_remove_fetcher(loader, "silent"), PXL_OK);
  CHECK(drain_until(env, queue, &waiting.calls, 1, 5000));
  CHECK_STATUS(waiting.status, PXL_E_CANCELLED);
  wait_for(&s.destroys, 1);
  CHECK_INT(atomic_load(&s.cancels), 1);
  CHECK_INT(atomic_load(&s.destroys), 1);
  CHECK_STATUS(pxl_fetch_finish(s.fetches[0], PXL_OK, NULL), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, &token), PXL_E_SCHEME_NOT_ALLOWED);
  pxl_loader_free(loader);
  CHECK_INT(atomic_load(&s.destroys), 1);
  pxl_queue_free(queue);
  pthread_mutex_destroy(&s.mutex);
}

/* ---- misuse: a fetch finished twice, written after finish, stale, racing its end ---- */

/* A fetcher that answers "instant" URLs inside start and keeps the latest other fetch. */
struct latest_fetch {
  _Atomic(pxl_fetch *) fetch;
  atomic_int starts, cancels;
};

static void latest_start(const char *url, pxl_fetch *fetch, void *user_data) {
  struct latest_fetch *l = user_data;
  if (strstr(url, "instant")) {
    pxl_fetch_write(fetch, "x", 1);
    pxl_fetch_finish(fetch, PXL_E_NOT_FOUND, "instant");
  } else {
    atomic_store(&l->fetch, fetch);
  }
  atomic_fetch_add(&l->starts, 1);
}

static void latest_cancel(pxl_fetch *fetch, void *user_data) {
  (void)fetch;
  struct latest_fetch *l = user_data;
  atomic_fetch_add(&l->cancels, 1);
}

static void add_latest(pxl_loader *loader, struct latest_fetch *l) {
  memset(l, 0, sizeof *l);
  pxl_fetcher fetcher;
  pxl_fetcher_init(&fetcher);
  fetcher.start = latest_start;
  fetcher.cancel = latest_cancel;
  fetcher.user_data = l;
  CHECK_STATUS(pxl_loader_add_fetcher(loader, "latest", &fetcher), PXL_OK);
}

/* Loads url and returns the fetch its fetcher kept. */
static pxl_fetch *kept_fetch(pxl_loader *loader, pxl_queue *queue, struct latest_fetch *l, const char *url,
                             struct capture *c, pxl_token *token) {
  int before = atomic_load(&l->starts);
  atomic_store(&l->fetch, NULL);
  *token = load_silent(loader, queue, url, c);
  wait_for(&l->starts, before + 1);
  pxl_fetch *fetch = atomic_load(&l->fetch);
  CHECKF(fetch != NULL, "no fetch for %s", url);
  return fetch;
}

/* A fetch finished once is refused afterwards with PXL_E_INVALID_ARGUMENT (writes and
 * finishes alike) and nothing happens, also after a late finish that got PXL_E_CANCELLED,
 * and when later fetches took over its slot: a stale handle never reaches another fetch. */
void test_fetcher_finished_twice(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct latest_fetch l;
  add_latest(loader, &l);
  struct capture c;
  pxl_token token;

  pxl_fetch *done = kept_fetch(loader, queue, &l, "latest:done", &c, &token);
  CHECK_STATUS(pxl_fetch_write(done, "hello", 5), PXL_OK);
  CHECK_STATUS(pxl_fetch_finish(done, PXL_OK, NULL), PXL_OK);
  CHECK_STATUS(pxl_fetch_write(done, "more", 4), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(done, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(done, PXL_E_IO, "twice"), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_NOT_AN_IMAGE); /* "hello", not "hellomore" */

  pxl_fetch *failed = kept_fetch(loader, queue, &l, "latest:failed", &c, &token);
  CHECK_STATUS(pxl_fetch_finish(failed, PXL_E_NOT_FOUND, "gone"), PXL_OK);
  CHECK_STATUS(pxl_fetch_finish(failed, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_NOT_FOUND);

  /* Cancelled: writes and the first finish are late (CANCELLED), then misuse. */
  pxl_fetch *late = kept_fetch(loader, queue, &l, "latest:cancelled", &c, &token);
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  wait_for(&l.cancels, 1);
  CHECK_STATUS(pxl_fetch_write(late, "x", 1), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_fetch_finish(late, PXL_OK, NULL), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_fetch_write(late, "x", 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(late, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_CANCELLED);

  /* Many later fetches reuse what the finished ones held; the stale handle reaches none. */
  pxl_fetch *stale = kept_fetch(loader, queue, &l, "latest:stale", &c, &token);
  CHECK_STATUS(pxl_fetch_finish(stale, PXL_E_NOT_FOUND, NULL), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  for (int i = 0; i < 200; i++) {
    char url[48];
    snprintf(url, sizeof url, "latest:instant-%d", i);
    struct capture instant;
    load_silent(loader, queue, url, &instant);
    CHECK(drain_until(env, queue, &instant.calls, 1, 5000));
    CHECK_STATUS(instant.status, PXL_E_NOT_FOUND);
  }
  pxl_fetch *held = kept_fetch(loader, queue, &l, "latest:held", &c, &token);
  CHECK(held != stale);
  CHECK_STATUS(pxl_fetch_write(stale, "stale", 5), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(stale, PXL_E_IO, "stale"), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(drain_for(queue, 50), 0); /* the held fetch still waits for its own finish */
  CHECK_STATUS(pxl_fetch_write(held, "held", 4), PXL_OK);
  CHECK_STATUS(pxl_fetch_finish(held, PXL_E_NOT_FOUND, "held"), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_NOT_FOUND);
  CHECKF(strcmp(c.message, "held") == 0, "message %s", c.message);

  pxl_loader_free(loader);
  /* After the loader: handles finished before stay refused. */
  CHECK_STATUS(pxl_fetch_write(held, "x", 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(held, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);
  pxl_queue_free(queue);
}

struct finish_racer {
  pxl_fetch *fetch;
  pxl_status with;
  atomic_int *go;
  pxl_status write_status, finish_status;
};

static void *race_finish(void *arg) {
  struct finish_racer *r = arg;
  while (!atomic_load(r->go)) sched_yield();
  r->write_status = pxl_fetch_write(r->fetch, "x", 1);
  r->finish_status = pxl_fetch_finish(r->fetch, r->with, "raced");
  return NULL;
}

struct fetch_cancel_arg {
  pxl_loader *loader;
  pxl_token token;
};

static void fetch_cancel_end(void *arg) {
  struct fetch_cancel_arg *a = arg;
  pxl_cancel(a->loader, a->token);
}

static void fetch_free_end(void *arg) { pxl_loader_free(arg); }

/* Two threads write to and finish one fetch while end (a cancel, a loader free) runs on
 * this one: the first finish counts (PXL_OK, or PXL_E_CANCELLED when the end came first),
 * the other is refused, and no write or finish reaches freed memory. */
static void race_two_finishes(pxl_fetch *fetch, void (*end)(void *), void *arg) {
  atomic_int go = 0;
  struct finish_racer racers[2] = {{fetch, PXL_OK, &go, 0, 0}, {fetch, PXL_E_IO, &go, 0, 0}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, race_finish, &racers[i]);
  atomic_store(&go, 1);
  end(arg);
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  int refused = 0, counted = 0;
  for (int i = 0; i < 2; i++) {
    pxl_status w = racers[i].write_status, f = racers[i].finish_status;
    CHECKF(w == PXL_OK || w == PXL_E_CANCELLED || w == PXL_E_INVALID_ARGUMENT, "write returned %s",
           pxl_status_string(w));
    if (f == PXL_E_INVALID_ARGUMENT) refused++;
    if (f == PXL_OK || f == PXL_E_CANCELLED) counted++;
  }
  CHECKF(refused == 1 && counted == 1, "finishes returned %s and %s", pxl_status_string(racers[0].finish_status),
         pxl_status_string(racers[1].finish_status));
  CHECK_STATUS(pxl_fetch_write(fetch, "x", 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_fetch_finish(fetch, PXL_OK, NULL), PXL_E_INVALID_ARGUMENT);
}

/* Two host threads finish one fetch while its request is cancelled, or its loader freed:
 * the first finish counts, the other is refused, and the request ends exactly once. */
void test_fetcher_finish_races(const struct test_env *env) {
  pxl_queue *queue = new_queue();
  pxl_loader *loader = new_loader(NULL);
  struct latest_fetch l;
  add_latest(loader, &l);
  for (int round = 0; round < 50; round++) {
    char url[48];
    snprintf(url, sizeof url, "latest:race-cancel-%d", round);
    struct capture c;
    struct fetch_cancel_arg a = {loader, 0};
    pxl_fetch *fetch = kept_fetch(loader, queue, &l, url, &c, &a.token);
    race_two_finishes(fetch, fetch_cancel_end, &a);
    CHECK(drain_until(env, queue, &c.calls, 1, 5000));
    CHECKF(c.status == PXL_E_NOT_AN_IMAGE || c.status == PXL_E_CANCELLED || c.status == PXL_E_IO, "round %d: %s",
           round, pxl_status_string(c.status));
    CHECK_INT(drain_for(queue, 10), 0);
    CHECK_INT(atomic_load(&c.calls), 1);
  }
  pxl_loader_free(loader);
  for (int round = 0; round < 6; round++) {
    char url[48];
    snprintf(url, sizeof url, "latest:race-free-%d", round);
    loader = new_loader(NULL);
    add_latest(loader, &l);
    struct capture c;
    pxl_token token;
    pxl_fetch *fetch = kept_fetch(loader, queue, &l, url, &c, &token);
    race_two_finishes(fetch, fetch_free_end, loader);
    CHECK(drain_until(env, queue, &c.calls, 1, 5000));
    CHECK_INT(drain_for(queue, 10), 0);
    CHECK_INT(atomic_load(&c.calls), 1);
  }
  pxl_queue_free(queue);
}

/* ---- data: URIs ---- */

static char *data_uri(const struct test_env *env, const char *fixture, int base64) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, fixture);
  FILE *in = fopen(path, "rb");
  if (!in) return NULL;
  static unsigned char data[1 << 20];
  size_t size = fread(data, 1, sizeof data, in);
  fclose(in);
  char *out = malloc(64 + size * 3);
  size_t n = (size_t)sprintf(out, base64 ? "data:image/whatever;base64," : "data:,");
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (base64) {
    for (size_t i = 0; i < size; i += 3) {
      uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < size ? (uint32_t)data[i + 1] << 8 : 0) |
                   (i + 2 < size ? data[i + 2] : 0);
      out[n++] = alphabet[v >> 18 & 63];
      out[n++] = alphabet[v >> 12 & 63];
      out[n++] = i + 1 < size ? alphabet[v >> 6 & 63] : '=';
      out[n++] = i + 2 < size ? alphabet[v & 63] : '=';
    }
  } else {
    for (size_t i = 0; i < size; i++) n += (size_t)sprintf(out + n, "%%%02X", data[i]);
  }
  out[n] = 0;
  return out;
}

static struct capture load_data(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *uri,
                                uint32_t flags, pxl_status want_load) {
  pxl_request request;
  request_for(&request, uri, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags |= flags;
  struct capture c;
  memset(&c, 0, sizeof c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), want_load);
  return c;
}

/* data: URIs: base64 and percent-encoded, sniffed (the media type says nothing), behind
 * PXL_SCHEME_DATA, never on disk, too large refused before decoding. */
void test_data_uris(const struct test_env *env) {
  char directory[] = "/tmp/pxl-data.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char *png64 = data_uri(env, FIXTURE_ALPHA_PNG, 1);
  char *pngpct = data_uri(env, FIXTURE_ALPHA_PNG, 0);
  CHECK(png64 && pngpct);
  if (!png64 || !pngpct) return;

  pxl_loader *plain = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct capture c = load_data(env, plain, queue, png64, 0, PXL_E_SCHEME_NOT_ALLOWED);
  pxl_loader_free(plain);

  for (int round = 0; round < 2; round++) {
    pxl_config config;
    pxl_config_init(&config);
    config.allowed_schemes |= PXL_SCHEME_DATA;
    config.disk_cache_bytes = 8 << 20;
    config.disk_cache_dir = directory;
    pxl_loader *loader = new_loader(&config);
    if (round == 0) {
      c = load_data(env, loader, queue, png64, 0, PXL_OK);
      CHECKF(c.status == PXL_OK, "base64: %s", c.message);
      CHECK_INT(c.source, PXL_SOURCE_DATA);
      CHECK_INT(pxl_image_width(c.image), 300);
      capture_reset(&c);
      c = load_data(env, loader, queue, pngpct, 0, PXL_OK);
      CHECKF(c.status == PXL_OK, "percent: %s", c.message);
      CHECK_INT(c.source, PXL_SOURCE_DATA);
      CHECK_INT(pxl_image_height(c.image), 200);
      capture_reset(&c);
      c = load_data(env, loader, queue, png64, 0, PXL_OK); /* the memory cache */
      CHECK_INT(c.source, PXL_SOURCE_MEMORY);
      capture_reset(&c);
      c = load_data(env, loader, queue, "data:;base64,AAA*", 0, PXL_OK);
      CHECK_STATUS(c.status, PXL_E_MALFORMED_URL);
      capture_reset(&c);
      c = load_data(env, loader, queue, "data:,hello", 0, PXL_OK);
      CHECK_STATUS(c.status, PXL_E_NOT_AN_IMAGE);
      capture_reset(&c);
      load_data(env, loader, queue, "data:image/png;base64", 0, PXL_E_MALFORMED_URL);
    } else {
      /* A new loader on the same directory: nothing of them on disk. */
      c = load_data(env, loader, queue, png64, PXL_FLAG_CACHE_ONLY, PXL_OK);
      CHECK_STATUS(c.status, PXL_E_NOT_CACHED);
      capture_reset(&c);
      c = load_data(env, loader, queue, pngpct, PXL_FLAG_CACHE_ONLY, PXL_OK);
      CHECK_STATUS(c.status, PXL_E_NOT_CACHED);
      capture_reset(&c);
      CHECK_INT(pxl_disk_cache_bytes(loader), 0);
    }
    pxl_loader_free(loader);
  }

  /* max_body_bytes below the image: refused, and before decoding: a payload of invalid
   * base64 that size is refused as too large, not as malformed. */
  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes = PXL_SCHEME_DATA;
  config.max_body_bytes = 1000;
  pxl_loader *small = new_loader(&config);
  char *jpg64 = data_uri(env, FIXTURE_GRADIENT_JPG, 1);
  CHECKF(fixture_bytes(env, FIXTURE_GRADIENT_JPG) > 1000, "%ld bytes", fixture_bytes(env, FIXTURE_GRADIENT_JPG));
  c = load_data(env, small, queue, jpg64, 0, PXL_OK);
  CHECK_STATUS(c.status, PXL_E_BODY_TOO_LARGE);
  capture_reset(&c);
  free(jpg64);
  char *bad = malloc(4096);
  strcpy(bad, "data:;base64,");
  memset(bad + strlen(bad), '*', 2000);
  bad[13 + 2000] = 0;
  c = load_data(env, small, queue, bad, 0, PXL_OK);
  CHECK_STATUS(c.status, PXL_E_BODY_TOO_LARGE);
  capture_reset(&c);
  bad[13 + 1300] = 0; /* 975 bytes if it were base64: decoded, found invalid */
  c = load_data(env, small, queue, bad, 0, PXL_OK);
  CHECK_STATUS(c.status, PXL_E_MALFORMED_URL);
  capture_reset(&c);
  pxl_loader_free(small);
  pxl_queue_free(queue);
  free(bad);
  free(png64);
  free(pngpct);
  remove_dir(directory);
}

/* Rows of a table from the database: every visible row gets its image from the fetcher. */
struct fetch_rows {
  atomic_int done;
  int ok[6];
};

static int fetch_row_request(int64_t row, pxl_request *request, void *user_data) {
  (void)user_data;
  static const char *names[] = {"gradient.jpg", "alpha.png", "progressive.jpg"};
  static char url[6][64];
  snprintf(url[row % 6], sizeof url[0], "db://images/%s", names[row % 3]);
  request->url = url[row % 6];
  request->width = (int32_t)(16 + row);
  return 1;
}

static void fetch_row_result(int64_t row, const pxl_result *result, void *user_data) {
  struct fetch_rows *rows = user_data;
  if (result->preview) return;
  rows->ok[row] = result->status == PXL_OK && pxl_image_width(result->image) == 16 + row &&
                  result->source == PXL_SOURCE_FETCHER;
  atomic_fetch_add(&rows->done, 1);
}

void test_fetcher_table(const struct test_env *env) {
  char directory[] = "/tmp/pxl-fetchers.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  struct db_fetcher f;
  db_open(env, &f, directory);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  add_db_fetcher(loader, &f, 0, 2);
  struct fetch_rows rows;
  memset(&rows, 0, sizeof rows);
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_new(loader, queue, NULL, 6, fetch_row_request, fetch_row_result, &rows, &table), PXL_OK);
  db_hold(&f, 1); /* every row asks before the first answer: merged by key */
  CHECK_STATUS(pxl_table_set_visible(table, 0, 6, 0), PXL_OK);
  db_hold(&f, 0);
  CHECK(drain_until(env, queue, &rows.done, 6, 30000));
  for (int i = 0; i < 6; i++) CHECKF(rows.ok[i], "row %d", i);
  CHECK_INT(atomic_load(&f.starts), 3); /* three keys */
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  db_close(&f);
  remove_dir(directory);
}
