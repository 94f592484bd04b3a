/*
 * test_table.c: table-style loading against the real library and nginx: pxl_table_*,
 * pxl_bind, pxl_prefetch, pxl_cancel_all and the cancel-storm limit.
 *
 * A "host" below plays the UI: it owns the table's request_fn and row_fn, knows which
 * rows it last declared visible, and records every row_fn call, so each test can say
 * which rows got what, when, and whether a call came for a row that was not on screen.
 * Slow rows go through nginx's /slow/ location (20 KB/s) so their requests are still in
 * flight when the test scrolls; the access log then shows what the server really did.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

enum { THUMB = 64 }; /* every table row asks for a THUMB x THUMB FILL RGBA8 image */

static long file_size(const struct test_env *env, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* ---- the host ---- */

struct row_record {
  int calls;          /* row_fn calls for this row */
  int sync_calls;     /* ... made from inside pxl_table_set_visible */
  pxl_status status;  /* of the last call */
  pxl_source source;
  int32_t http_status;
  int order;          /* 1-based position of the last call among all row_fn calls */
};

struct host {
  const struct test_env *env;
  int rows;
  struct test_url *urls;  /* per row */
  char (*keys)[128];      /* per row cache key, when use_keys */
  int use_keys;
  int64_t first;          /* the range the host last declared visible */
  int32_t count;
  int in_set_visible;
  int seq;                /* row_fn calls so far */
  int request_calls;
  int bad_request_rows;   /* request_fn asked for a row outside 0 .. rows - 1 */
  int not_visible_calls;  /* row_fn for a row not on screen at that moment: never */
  int cancelled_calls;    /* row_fn with PXL_E_CANCELLED: never */
  int inconsistent_calls; /* image without OK, OK without image, NULL message, bad size */
  struct row_record *rec;
};

/* rows rows, each path?run=ID&case=CASE-rN. */
static void host_init(struct host *h, const struct test_env *env, const char *case_name,
                      int rows, const char *path) {
  memset(h, 0, sizeof *h);
  h->env = env;
  h->rows = rows;
  h->urls = calloc((size_t)rows, sizeof *h->urls);
  h->keys = calloc((size_t)rows, sizeof *h->keys);
  h->rec = calloc((size_t)rows, sizeof *h->rec);
  for (int row = 0; row < rows; row++) {
    char name[64];
    snprintf(name, sizeof name, "%s-r%d", case_name, row);
    h->urls[row] = test_url(env, path, name);
    snprintf(h->keys[row], sizeof h->keys[row], "key-%ld-%s", env->run_id, name);
  }
}

/* Row row is served from path instead (same query string). */
static void host_set_path(struct host *h, int row, const char *path, const char *case_name) {
  char name[64];
  snprintf(name, sizeof name, "%s-r%d", case_name, row);
  h->urls[row] = test_url(h->env, path, name);
}

static void host_free(struct host *h) {
  free(h->urls);
  free(h->keys);
  free(h->rec);
}

static void thumb_request(pxl_request *request, const char *url) {
  request_for(request, url, THUMB, THUMB, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
}

static int host_request(int64_t row, pxl_request *request, void *user_data) {
  struct host *h = user_data;
  h->request_calls++;
  if (row < 0 || row >= h->rows) {
    h->bad_request_rows++;
    return 0;
  }
  /* Only the fields the table asks us to fill: it set up the rest with pxl_request_init. */
  request->url = h->urls[row].url;
  request->width = THUMB;
  request->height = THUMB;
  request->mode = PXL_MODE_FILL;
  request->format = PXL_FORMAT_RGBA8;
  if (h->use_keys) request->cache_key = h->keys[row];
  return 1;
}

static void host_row(int64_t row, const pxl_result *result, void *user_data) {
  struct host *h = user_data;
  h->seq++;
  if (row < h->first || row >= h->first + h->count || row < 0 || row >= h->rows) {
    h->not_visible_calls++;
    fprintf(stderr, "  row_fn for row %lld, not visible (visible %lld + %d)\n", (long long)row,
            (long long)h->first, (int)h->count);
    if (row < 0 || row >= h->rows) return;
  }
  if (result->status == PXL_E_CANCELLED) h->cancelled_calls++;
  if ((result->status == PXL_OK) != (result->image != NULL) || result->message == NULL ||
      (result->image && (pxl_image_width(result->image) != THUMB ||
                         pxl_image_height(result->image) != THUMB)))
    h->inconsistent_calls++;
  struct row_record *r = &h->rec[row];
  r->calls++;
  r->sync_calls += h->in_set_visible;
  r->status = result->status;
  r->source = result->source;
  r->http_status = result->http_status;
  r->order = h->seq;
}

static pxl_table *host_table(struct host *h, pxl_loader *loader, pxl_queue *queue,
                             int prefetch_rows, int keep_rows) {
  pxl_table_config config;
  pxl_table_config_init(&config);
  if (prefetch_rows >= 0) config.prefetch_rows = prefetch_rows;
  if (keep_rows >= 0) config.keep_rows = keep_rows;
  pxl_table *table = NULL;
  pxl_status s = pxl_table_new(loader, queue, &config, h->rows, host_request, host_row, h, &table);
  CHECK_STATUS(s, PXL_OK);
  if (s != PXL_OK || !table) {
    fprintf(stderr, "FATAL: pxl_table_new failed\n");
    exit(1);
  }
  return table;
}

/* What a UI does each frame while scrolling. */
static pxl_status host_show(struct host *h, pxl_table *table, int64_t first, int32_t count,
                            int32_t direction) {
  h->first = first;
  h->count = count;
  h->in_set_visible = 1;
  pxl_status s = pxl_table_set_visible(table, first, count, direction);
  h->in_set_visible = 0;
  return s;
}

/* Dispatches queue until rows first .. first + count - 1 all had a row_fn call. */
static int host_wait_rows(struct host *h, pxl_queue *queue, int first, int count, int timeout_ms) {
  double deadline = now_ms() + (double)timeout_ms * h->env->slow_factor;
  for (;;) {
    int missing = 0;
    for (int row = first; row < first + count; row++) missing += h->rec[row].calls == 0;
    if (!missing) return 1;
    double left = deadline - now_ms();
    if (left <= 0) return 0;
    pxl_queue_wait(queue, (int32_t)(left < 50 ? left + 1 : 50));
    pxl_queue_dispatch(queue, 0);
  }
}

/* The rules every row_fn call obeys, whatever the test. */
static void host_check_rules(const struct host *h) {
  CHECKF(h->not_visible_calls == 0, "%d row_fn calls for rows not on screen", h->not_visible_calls);
  CHECKF(h->cancelled_calls == 0, "%d row_fn calls reported CANCELLED", h->cancelled_calls);
  CHECKF(h->inconsistent_calls == 0, "%d inconsistent row_fn results", h->inconsistent_calls);
  CHECKF(h->bad_request_rows == 0, "request_fn asked for %d rows out of range", h->bad_request_rows);
}

static pxl_table_stats table_stats(pxl_table *table) {
  pxl_table_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_STATUS(pxl_table_get_stats(table, &stats), PXL_OK);
  return stats;
}

/* Waits, dispatching queue, until the memory cache holds url's thumbnail. */
static int wait_cached(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                       const char *url, int timeout_ms) {
  pxl_request request;
  thumb_request(&request, url);
  double deadline = now_ms() + (double)timeout_ms * env->slow_factor;
  while (now_ms() < deadline) {
    pxl_image *image = NULL;
    if (pxl_lookup(loader, &request, &image) == PXL_OK) {
      pxl_image_release(image);
      return 1;
    }
    pxl_queue_wait(queue, 20);
    pxl_queue_dispatch(queue, 0);
  }
  return 0;
}

/* What the access log says about the requests whose $request_uri starts with prefix. */
struct log_summary {
  int lines;       /* requests the server saw */
  int complete;    /* ... answered with the whole body (full_size bytes) */
  int connections; /* distinct connections they came on */
};

static struct log_summary log_summarize(const struct test_env *env, const char *prefix,
                                        long full_size) {
  struct log_summary sum = {0, 0, 0};
  FILE *f = fopen(env->access_log, "r");
  if (!f) return sum;
  char line[1024];
  size_t len = strlen(prefix);
  long *seen = NULL;
  size_t seen_count = 0;
  while (fgets(line, sizeof line, f)) {
    char uri[768];
    int status;
    long bytes, connection;
    if (strncmp(line, prefix, len) != 0 ||
        sscanf(line, "%767s %d %ld %ld", uri, &status, &bytes, &connection) != 4)
      continue;
    sum.lines++;
    sum.complete += status == 200 && bytes == full_size;
    size_t i = 0;
    while (i < seen_count && seen[i] != connection) i++;
    if (i == seen_count) {
      long *grown = realloc(seen, (seen_count + 1) * sizeof *seen);
      if (!grown) break;
      seen = grown;
      seen[seen_count++] = connection;
    }
  }
  fclose(f);
  free(seen);
  sum.connections = (int)seen_count;
  return sum;
}

/* Loads url's thumbnail and waits: the memory cache then holds it. */
static void warm(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *url) {
  pxl_request request;
  thumb_request(&request, url);
  struct capture got = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECK_STATUS(got.status, PXL_OK);
  capture_reset(&got);
}

/* ---- a row scrolled away never receives its image ---- */

void test_table_row_scrolled_away(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "away", 100, "/" FIXTURE_GRADIENT_JPG);
  host_set_path(&h, 0, "/slow/" FIXTURE_NOISE_JPG, "away"); /* ~13 s each */
  host_set_path(&h, 1, "/slow/" FIXTURE_NOISE_JPG, "away");
  host_set_path(&h, 60, "/slow/" FIXTURE_MEDIUM_JPG, "away"); /* ~3.5 s */
  pxl_table *table = host_table(&h, loader, queue, -1, -1);     /* defaults: 8 ahead, 2 kept */

  /* Rows 0 and 1 start loading, then the user jumps far away before they arrive. */
  CHECK_STATUS(host_show(&h, table, 0, 2, 1), PXL_OK);
  drain_for(queue, 500);
  CHECK_INT(h.rec[0].calls + h.rec[1].calls, 0);
  CHECK_STATUS(host_show(&h, table, 50, 2, 1), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 50, 2, 10000));
  drain_for(queue, 500); /* a late result for rows 0 or 1 would show up now */
  CHECK_INT(h.rec[0].calls, 0);
  CHECK_INT(h.rec[1].calls, 0);
  CHECK_STATUS(h.rec[50].status, PXL_OK);
  CHECK_STATUS(h.rec[51].status, PXL_OK);
  pxl_table_stats stats = table_stats(table);
  CHECKF(stats.cancelled >= 2, "stats.cancelled %llu", (unsigned long long)stats.cancelled);
  /* The server stopped sending: nginx logs the cut response when the connection closes. */
  long noise = file_size(env, FIXTURE_NOISE_JPG);
  for (int row = 0; row < 2; row++) {
    CHECKF(log_wait_count(env, h.urls[row].uri, 1, 3000) == 1,
           "row %d: no log line within 3 s: was its transfer left running?", row);
    long sent = log_bytes(env, h.urls[row].uri);
    CHECKF(sent >= 0 && sent < noise, "row %d: %ld of %ld bytes sent", row, sent, noise);
  }

  /* Row 60 leaves the screen but stays within the kept rows: its load finishes, into the
   * memory cache, and row_fn is not called while it is off screen. */
  CHECK_STATUS(host_show(&h, table, 60, 2, 1), PXL_OK);
  drain_for(queue, 300);
  CHECK_STATUS(host_show(&h, table, 62, 2, 1), PXL_OK);
  CHECKF(wait_cached(env, loader, queue, h.urls[60].url, 10000), "row 60 never reached the cache");
  drain_for(queue, 200);
  CHECK_INT(h.rec[60].calls, 0);
  CHECK_INT(log_count(env, h.urls[60].uri), 1);
  CHECK_INT(log_bytes(env, h.urls[60].uri), file_size(env, FIXTURE_MEDIUM_JPG));
  /* Back on screen: from memory, inside set_visible. */
  CHECK_STATUS(host_show(&h, table, 60, 2, -1), PXL_OK);
  CHECK_INT(h.rec[60].calls, 1);
  CHECK_INT(h.rec[60].sync_calls, 1);
  CHECK_INT(h.rec[60].source, PXL_SOURCE_MEMORY);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

/* ---- a rebound slot never shows the old row's image ---- */

void test_bind_slot(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url a = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "bind-a");
  struct test_url b = test_url(env, "/" FIXTURE_GRADIENT_JPG, "bind-b");
  struct test_url c = test_url(env, "/" FIXTURE_GRADIENT_JPG, "bind-c");
  warm(env, loader, queue, b.url);
  pxl_request ra, rb, rc;
  thumb_request(&ra, a.url);
  thumb_request(&rb, b.url);
  thumb_request(&rc, c.url);

  /* The slot shows row A: not cached, so a load starts. */
  pxl_token slot = 0;
  pxl_image *now = (pxl_image *)&slot; /* must be set to NULL */
  struct capture ca = {0}, cb = {0}, cc = {0};
  CHECK_STATUS(pxl_bind(loader, &ra, queue, capture_callback, &ca, &slot, &now), PXL_OK);
  CHECK(now == NULL);
  CHECK(slot != 0);
  pxl_token ta = slot;
  drain_for(queue, 300);

  /* Reused for row B, which the cache holds: drawn at once, A's load cancelled. */
  CHECK_STATUS(pxl_bind(loader, &rb, queue, capture_callback, &cb, &slot, &now), PXL_OK);
  CHECK(now != NULL);
  CHECK_INT(slot, 0);
  CHECK_INT(pxl_image_width(now), THUMB);
  pxl_image_release(now);
  CHECK(drain_until(env, queue, &ca.calls, 1, 3000));
  CHECK_STATUS(ca.status, PXL_E_CANCELLED);
  CHECK(ca.image == NULL);
  CHECK(ca.token == ta);
  CHECK_STATUS(pxl_cancel(loader, ta), PXL_E_NOT_FOUND);

  /* Reused for row C, not cached: the callback brings C with the slot's token. */
  CHECK_STATUS(pxl_bind(loader, &rc, queue, capture_callback, &cc, &slot, &now), PXL_OK);
  CHECK(now == NULL);
  pxl_token tc = slot;
  CHECK(tc != 0 && tc != ta);
  CHECK(drain_until(env, queue, &cc.calls, 1, 10000));
  CHECK_STATUS(cc.status, PXL_OK);
  CHECK(cc.token == tc);
  drain_for(queue, 300);
  CHECK_INT(atomic_load(&cb.calls), 0); /* B was drawn from memory: no callback for it */
  CHECK_INT(atomic_load(&ca.calls), 1);
  CHECK_INT(log_count(env, b.uri), 1); /* the warm-up only */
  long noise = file_size(env, FIXTURE_NOISE_JPG);
  CHECK(log_wait_count(env, a.uri, 1, 3000) == 1);
  CHECKF(log_bytes(env, a.uri) < noise, "A: %ld of %ld bytes: transfer not cut", log_bytes(env, a.uri), noise);

  /* Binding over a finished load: nothing to cancel, the new one starts. */
  struct capture ca2 = {0};
  CHECK_STATUS(pxl_bind(loader, &ra, queue, capture_callback, &ca2, &slot, &now), PXL_OK);
  CHECK(slot != 0 && now == NULL);
  CHECK_INT(atomic_load(&cc.calls), 1);

  /* A refused bind: the previous load is cancelled and the slot is 0 ("on an error *slot
   * is 0"), so the host never keeps a token that may still deliver to this slot. */
  struct capture never = {0};
  pxl_request bad_url;
  thumb_request(&bad_url, "http://[::1");
  CHECK_STATUS(pxl_bind(loader, &bad_url, queue, capture_callback, &never, &slot, &now),
               PXL_E_MALFORMED_URL);
  CHECK_INT(slot, 0);
  CHECK(now == NULL);
  CHECK(drain_until(env, queue, &ca2.calls, 1, 3000));
  CHECK_STATUS(ca2.status, PXL_E_CANCELLED);

  struct capture ca3 = {0};
  CHECK_STATUS(pxl_bind(loader, &ra, queue, capture_callback, &ca3, &slot, &now), PXL_OK);
  pxl_token ta3 = slot;
  CHECK(ta3 != 0);
  pxl_request bad_size;
  thumb_request(&bad_size, c.url);
  bad_size.width = -1;
  pxl_status s = pxl_bind(loader, &bad_size, queue, capture_callback, &never, &slot, &now);
  CHECK_STATUS(s, PXL_E_INVALID_ARGUMENT);
  CHECKF(slot == 0, "pxl_bind refused an invalid request but left *slot = %llu (the previous "
         "load, still running)", (unsigned long long)slot);
  if (slot != 0) pxl_cancel(loader, slot); /* keep the rest of the test meaningful */
  slot = 0;
  CHECK(drain_until(env, queue, &ca3.calls, 1, 3000));
  CHECK_STATUS(ca3.status, PXL_E_CANCELLED);

  /* A bind that would be refused on a miss is refused on a hit as well: a NULL callback
   * or queue is an invalid argument whatever the cache holds. */
  s = pxl_bind(loader, &rb, queue, NULL, &never, &slot, &now);
  CHECKF(s == PXL_E_INVALID_ARGUMENT, "pxl_bind with a NULL callback, cached image: %d (%s)",
         (int)s, pxl_status_string(s));
  pxl_image_release(now);
  s = pxl_bind(loader, &rb, NULL, capture_callback, &never, &slot, &now);
  CHECKF(s == PXL_E_INVALID_ARGUMENT, "pxl_bind with a NULL queue, cached image: %d (%s)",
         (int)s, pxl_status_string(s));
  pxl_image_release(now);
  slot = 0;
  struct test_url d = test_url(env, "/" FIXTURE_GRADIENT_JPG, "bind-d"); /* a miss */
  pxl_request rd;
  thumb_request(&rd, d.url);
  CHECK_STATUS(pxl_bind(loader, &rd, NULL, capture_callback, &never, &slot, &now),
               PXL_E_INVALID_ARGUMENT);
  CHECK_INT(slot, 0);
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&never.calls), 0);

  capture_reset(&ca);
  capture_reset(&cb);
  capture_reset(&cc);
  capture_reset(&ca2);
  capture_reset(&ca3);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- priorities: visible first, prefetches raised in place ---- */

/* One download slot, held by a slow transfer until release_blocker. */
static pxl_loader *one_slot_loader(void) {
  pxl_config config;
  pxl_config_init(&config);
  config.max_concurrent_downloads = 1;
  config.max_downloads_per_host = 1;
  config.decode_threads = 1;
  return new_loader(&config);
}

static pxl_token start_blocker(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                               const char *name, struct capture *capture) {
  struct test_url u = test_url(env, "/slow/" FIXTURE_NOISE_JPG, name);
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, capture, &token), PXL_OK);
  sleep_ms(500 * env->slow_factor); /* no event says "transfer started"; give it time */
  return token;
}

/* Log positions of rows; waits for each row's line first (those expected to be served). */
static void positions(const struct host *h, const int *rows, int n, int *out) {
  for (int i = 0; i < n; i++) {
    log_wait_count(h->env, h->urls[rows[i]].uri, 1, 3000);
    out[i] = log_position(h->env, h->urls[rows[i]].uri);
  }
}

static void print_positions(const char *what, const int *rows, const int *pos, int n) {
  printf("  %s:", what);
  for (int i = 0; i < n; i++) printf(" r%d@%d", rows[i], pos[i]);
  printf("\n");
}

/* Every row of high[] reached the server before every row of low[]. */
static void check_before(const char *phase, const int *high_rows, const int *high, int nh,
                         const int *low_rows, const int *low, int nl) {
  int last_high = -1, first_low = -1, late_row = -1, early_row = -1;
  for (int i = 0; i < nh; i++) {
    CHECKF(high[i] >= 0, "%s: visible row %d never reached the server", phase, high_rows[i]);
    if (high[i] > last_high) last_high = high[i], late_row = high_rows[i];
  }
  for (int j = 0; j < nl; j++)
    if (low[j] >= 0 && (first_low < 0 || low[j] < first_low)) first_low = low[j], early_row = low_rows[j];
  CHECKF(first_low < 0 || last_high < first_low,
         "%s: visible row %d reached the server (log position %d) after prefetch row %d (%d)",
         phase, late_row, last_high, early_row, first_low);
}

void test_table_visible_before_prefetch(const struct test_env *env) {
  pxl_loader *loader = one_slot_loader();
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "vis", 100, "/" FIXTURE_GRADIENT_JPG);
  pxl_table *table = host_table(&h, loader, queue, 4, 0);

  /* Scrolling down: rows 0-1 visible, 2-5 prefetched, all queued behind the blocker. The
   * prefetches were requested after the visible rows, so "newest first" alone would
   * serve them first: only priority puts the visible rows ahead. */
  struct capture blocker = {0};
  pxl_token bt = start_blocker(env, loader, queue, "vis-blocker-1", &blocker);
  CHECK_STATUS(host_show(&h, table, 0, 2, 1), PXL_OK);
  CHECK_STATUS(pxl_cancel(loader, bt), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 0, 2, 10000));
  {
    const int high_rows[] = {0, 1}, low_rows[] = {2, 3, 4, 5};
    int high[2], low[4];
    positions(&h, high_rows, 2, high);
    positions(&h, low_rows, 4, low);
    print_positions("scrolling: visible", high_rows, high, 2);
    print_positions("scrolling: prefetch", low_rows, low, 4);
    check_before("scrolling", high_rows, high, 2, low_rows, low, 4);
  }
  capture_reset(&blocker);

  /* The user stops (direction 0): prefetch then looks both ways, and the rows on screen
   * must stay ahead of it. */
  bt = start_blocker(env, loader, queue, "vis-blocker-2", &blocker);
  CHECK_STATUS(host_show(&h, table, 20, 2, 1), PXL_OK);
  CHECK_STATUS(host_show(&h, table, 20, 2, 0), PXL_OK);
  CHECK_STATUS(pxl_cancel(loader, bt), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 20, 2, 10000));
  {
    const int high_rows[] = {20, 21}, low_rows[] = {18, 19, 22, 23};
    int high[2], low[4];
    positions(&h, high_rows, 2, high);
    positions(&h, low_rows, 4, low);
    print_positions("stopped: visible", high_rows, high, 2);
    print_positions("stopped: prefetch", low_rows, low, 4);
    check_before("stopped", high_rows, high, 2, low_rows, low, 4);
  }
  capture_reset(&blocker);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

void test_table_prefetch_raised(const struct test_env *env) {
  pxl_loader *loader = one_slot_loader();
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "raise", 100, "/" FIXTURE_GRADIENT_JPG);
  pxl_table *table = host_table(&h, loader, queue, 4, 0);

  struct capture blocker = {0};
  pxl_token bt = start_blocker(env, loader, queue, "raise-blocker", &blocker);
  CHECK_STATUS(host_show(&h, table, 40, 2, 1), PXL_OK); /* 40-41 visible, 42-45 prefetched */
  /* One row per call, a call every 150 ms: a slow scroll, each row on screen for 300 ms.
   * A whole screen per call, or calls in quick succession (each row on screen for a
   * fraction of the 50 ms speed window), would be a fling: no prefetch then. */
  sleep_ms(150);
  CHECK_STATUS(host_show(&h, table, 41, 2, 1), PXL_OK); /* 42 raised, 46 prefetched */
  sleep_ms(150);
  CHECK_STATUS(host_show(&h, table, 42, 2, 1), PXL_OK); /* 43 raised, 47 prefetched */
  pxl_table_stats stats = table_stats(table);
  CHECK_INT(stats.started, 8); /* 40..47, once each */
  CHECK_STATUS(pxl_cancel(loader, bt), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 42, 2, 10000));
  const int high_rows[] = {42, 43}, low_rows[] = {44, 45, 46, 47};
  int high[2], low[4];
  positions(&h, high_rows, 2, high);
  positions(&h, low_rows, 4, low);
  print_positions("raised", high_rows, high, 2);
  print_positions("still prefetching", low_rows, low, 4);
  check_before("raised", high_rows, high, 2, low_rows, low, 4);
  sleep_ms(300); /* a second request for a row would be logged by now */
  for (int row = 42; row <= 47; row++)
    CHECKF(log_count(env, h.urls[row].uri) == 1, "row %d requested %d times", row,
           log_count(env, h.urls[row].uri));
  /* Rows 40-41 left (no kept rows) while still waiting for the slot: never sent. */
  CHECK_INT(log_count(env, h.urls[40].uri), 0);
  CHECK_INT(log_count(env, h.urls[41].uri), 0);
  stats = table_stats(table);
  CHECK_INT(stats.started, 8);
  CHECK_INT(stats.cancelled, 2);
  CHECK_INT(stats.delivered, 2);
  drain_for(queue, 200);
  for (int row = 44; row <= 47; row++) CHECK_INT(h.rec[row].calls, 0); /* prefetches call nobody */
  /* ... but warmed the cache: scrolling on shows them at once. */
  for (int row = 44; row <= 47; row++) wait_cached(env, loader, queue, h.urls[row].url, 5000);
  CHECK_STATUS(host_show(&h, table, 44, 4, 1), PXL_OK);
  for (int row = 44; row <= 47; row++) {
    CHECK_INT(h.rec[row].sync_calls, 1);
    CHECK_INT(h.rec[row].source, PXL_SOURCE_MEMORY);
  }
  capture_reset(&blocker);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

/* ---- independence: tables, queues ---- */

void test_table_two_tables(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue(); /* one queue for both: only the table tells them apart */
  struct host ha, hb;
  host_init(&ha, env, "two-a", 10, "/" FIXTURE_GRADIENT_JPG);
  host_init(&hb, env, "two-b", 10, "/" FIXTURE_GRADIENT_JPG);
  host_set_path(&ha, 0, "/slow/" FIXTURE_NOISE_JPG, "two-a");
  /* A's row 1 and B's row 0 are the same image: one shared download. */
  struct test_url shared = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "two-shared");
  ha.urls[1] = shared;
  hb.urls[0] = shared;
  pxl_table *a = host_table(&ha, loader, queue, 0, 0);
  pxl_table *b = host_table(&hb, loader, queue, 0, 0);
  CHECK_STATUS(host_show(&ha, a, 0, 2, 0), PXL_OK);
  CHECK_STATUS(host_show(&hb, b, 0, 2, 0), PXL_OK);
  drain_for(queue, 300);
  pxl_table_cancel_all(a);
  CHECK(host_wait_rows(&hb, queue, 0, 2, 15000));
  drain_for(queue, 300);
  CHECK_INT(ha.rec[0].calls + ha.rec[1].calls, 0);
  CHECK_STATUS(hb.rec[0].status, PXL_OK);
  CHECK_STATUS(hb.rec[1].status, PXL_OK);
  pxl_table_stats sa = table_stats(a), sb = table_stats(b);
  CHECK_INT(sa.cancelled, 2);
  CHECK_INT(sa.delivered, 0);
  CHECK_INT(sb.cancelled, 0);
  CHECK_INT(sb.delivered, 2);
  /* The shared transfer ran once, to its end; A's own was cut. */
  CHECK(log_wait_count(env, shared.uri, 1, 3000) == 1);
  CHECK_INT(log_bytes(env, shared.uri), file_size(env, FIXTURE_MEDIUM_JPG));
  CHECK(log_wait_count(env, ha.urls[0].uri, 1, 3000) == 1);
  CHECKF(log_bytes(env, ha.urls[0].uri) < file_size(env, FIXTURE_NOISE_JPG),
         "A's row 0: %ld bytes sent", log_bytes(env, ha.urls[0].uri));

  /* "Forgets which rows were shown": the next set_visible reloads; the shared image is
   * in memory now and arrives inside the call. */
  CHECK_STATUS(host_show(&ha, a, 0, 2, 0), PXL_OK);
  CHECK_INT(ha.rec[1].sync_calls, 1);
  CHECK_STATUS(ha.rec[1].status, PXL_OK);
  pxl_table_cancel_all(b); /* nothing in flight: a no-op */
  CHECK_INT(table_stats(b).cancelled, 0);
  host_check_rules(&ha);
  host_check_rules(&hb);
  pxl_table_free(a);
  pxl_table_free(b);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&ha);
  host_free(&hb);
}

void test_cancel_all_by_queue(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *q1 = new_queue(), *q2 = new_queue();
  struct test_url a1 = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "qall-a1");
  struct test_url a2 = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "qall-a2");
  struct test_url b1 = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "qall-b1");
  struct test_url p1 = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "qall-p1");
  struct capture ca1 = {0}, ca2 = {0}, cb1 = {0};
  pxl_request r;
  thumb_request(&r, a1.url);
  CHECK_STATUS(pxl_load(loader, &r, q1, capture_callback, &ca1, NULL), PXL_OK);
  thumb_request(&r, a2.url);
  CHECK_STATUS(pxl_load(loader, &r, q1, capture_callback, &ca2, NULL), PXL_OK);
  thumb_request(&r, b1.url);
  CHECK_STATUS(pxl_load(loader, &r, q2, capture_callback, &cb1, NULL), PXL_OK);
  thumb_request(&r, p1.url);
  pxl_token pt = 0;
  CHECK_STATUS(pxl_prefetch(loader, &r, 1, &pt), PXL_OK);
  struct host h;
  host_init(&h, env, "qall-t", 10, "/slow/" FIXTURE_MEDIUM_JPG);
  pxl_table *table = host_table(&h, loader, q1, 0, 0);
  CHECK_STATUS(host_show(&h, table, 0, 1, 0), PXL_OK);
  drain_for(q1, 300);

  /* q1 holds two loads and the table's one row; q2's load and the prefetch go on. */
  CHECK_INT(pxl_cancel_all(loader, q1), 3);
  CHECK(drain_until(env, q1, &ca2.calls, 1, 3000));
  CHECK(drain_until(env, q1, &ca1.calls, 1, 3000));
  CHECK_STATUS(ca1.status, PXL_E_CANCELLED);
  CHECK_STATUS(ca2.status, PXL_E_CANCELLED);
  drain_for(q1, 200);
  CHECK_INT(h.rec[0].calls, 0); /* the table swallows its CANCELLED: row_fn never sees one */
  CHECK_INT(pxl_cancel_all(loader, q1), 0);
  /* The table notices and loads the row again at its next set_visible. */
  CHECK_STATUS(host_show(&h, table, 0, 1, 0), PXL_OK);
  CHECK(drain_until(env, q2, &cb1.calls, 1, 15000));
  CHECK_STATUS(cb1.status, PXL_OK);
  CHECK(host_wait_rows(&h, q1, 0, 1, 15000));
  CHECK_STATUS(h.rec[0].status, PXL_OK);
  CHECK_INT(log_wait_count(env, h.urls[0].uri, 2, 3000), 2); /* cut once, then loaded */

  /* The prefetch survived q1's cancel; NULL reaches it. */
  CHECK_STATUS(pxl_set_priority(loader, pt, 1), PXL_OK);
  CHECK_INT(pxl_cancel_all(loader, NULL), 1);
  CHECK_STATUS(pxl_cancel(loader, pt), PXL_E_NOT_FOUND);
  long noise = file_size(env, FIXTURE_NOISE_JPG);
  CHECK(log_wait_count(env, p1.uri, 1, 3000) == 1);
  CHECKF(log_bytes(env, p1.uri) < noise, "prefetch: %ld bytes sent", log_bytes(env, p1.uri));
  CHECK(log_wait_count(env, a1.uri, 1, 3000) == 1);
  CHECKF(log_bytes(env, a1.uri) < noise, "a1: %ld bytes sent", log_bytes(env, a1.uri));
  CHECK_INT(pxl_cancel_all(NULL, q1), 0);
  host_check_rules(&h);
  capture_reset(&ca1);
  capture_reset(&ca2);
  capture_reset(&cb1);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(q1);
  pxl_queue_free(q2);
  host_free(&h);
}

/* ---- pxl_prefetch ---- */

void test_prefetch(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u[3] = {test_url(env, "/" FIXTURE_GRADIENT_JPG, "pre-0"),
                          test_url(env, "/" FIXTURE_ALPHA_PNG, "pre-1"),
                          test_url(env, "/" FIXTURE_GRADIENT_JPG, "pre-2")};
  pxl_request requests[4];
  thumb_request(&requests[0], u[0].url);
  thumb_request(&requests[1], u[1].url);
  thumb_request(&requests[2], "ftp://example.org/x.jpg"); /* refused: scheme */
  thumb_request(&requests[3], u[2].url);
  pxl_token tokens[4] = {99, 99, 99, 99};
  CHECK_STATUS(pxl_prefetch(loader, requests, 4, tokens), PXL_E_SCHEME_NOT_ALLOWED);
  CHECK(tokens[0] != 0 && tokens[1] != 0 && tokens[3] != 0);
  CHECK_INT(tokens[2], 0);
  CHECK(tokens[0] != tokens[1] && tokens[1] != tokens[3] && tokens[0] != tokens[3]);
  for (int i = 0; i < 3; i++) {
    CHECKF(wait_cached(env, loader, queue, u[i].url, 10000), "prefetch %d never reached the cache", i);
    CHECK_INT(log_wait_count(env, u[i].uri, 1, 3000), 1);
  }
  CHECK_INT(pxl_queue_pending(queue), 0); /* nobody was called */
  CHECK_INT(drain_for(queue, 100), 0);
  /* Finished: the tokens are spent. */
  CHECK_STATUS(pxl_cancel(loader, tokens[0]), PXL_E_NOT_FOUND);

  /* A prefetch and a load of the same image share one download. */
  struct test_url m = test_url(env, "/slow/" FIXTURE_MEDIUM_JPG, "pre-merge");
  pxl_request rm;
  thumb_request(&rm, m.url);
  pxl_token pm = 0;
  CHECK_STATUS(pxl_prefetch(loader, &rm, 1, &pm), PXL_OK);
  struct capture got = {0};
  CHECK_STATUS(pxl_load(loader, &rm, queue, capture_callback, &got, NULL), PXL_OK);
  CHECK(drain_until(env, queue, &got.calls, 1, 15000));
  CHECK_STATUS(got.status, PXL_OK);
  CHECK_INT(got.source, PXL_SOURCE_NETWORK);
  sleep_ms(200);
  CHECK_INT(log_count(env, m.uri), 1);
  capture_reset(&got);

  /* Cancelled: the transfer stops, the cache stays cold. */
  struct test_url n = test_url(env, "/slow/" FIXTURE_NOISE_JPG, "pre-cancel");
  pxl_request rn;
  thumb_request(&rn, n.url);
  pxl_token pn = 0;
  CHECK_STATUS(pxl_prefetch(loader, &rn, 1, &pn), PXL_OK);
  sleep_ms(300);
  CHECK_STATUS(pxl_cancel(loader, pn), PXL_OK);
  CHECK_STATUS(pxl_cancel(loader, pn), PXL_E_NOT_FOUND);
  CHECK(log_wait_count(env, n.uri, 1, 3000) == 1);
  CHECK(log_bytes(env, n.uri) < file_size(env, FIXTURE_NOISE_JPG));
  pxl_image *image = NULL;
  CHECK_STATUS(pxl_lookup(loader, &rn, &image), PXL_E_NOT_FOUND);

  /* Arguments: count 0 is fine without an array; tokens_out may be NULL. */
  CHECK_STATUS(pxl_prefetch(loader, NULL, 0, NULL), PXL_OK);
  CHECK_STATUS(pxl_prefetch(loader, requests, 1, NULL), PXL_OK); /* merged or from memory */
  CHECK_STATUS(pxl_prefetch(NULL, requests, 1, tokens), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_prefetch(loader, NULL, 1, tokens), PXL_E_INVALID_ARGUMENT);
  pxl_request bad = requests[0];
  bad.struct_size = 0;
  tokens[0] = 99;
  CHECK_STATUS(pxl_prefetch(loader, &bad, 1, tokens), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(tokens[0], 0);
  CHECK_INT(drain_for(queue, 100), 0);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- row_fn inside set_visible; errors; re-entering rows ---- */

void test_table_cached_rows_sync(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "sync", 20, "/" FIXTURE_GRADIENT_JPG);
  for (int row = 0; row < 4; row++) warm(env, loader, queue, h.urls[row].url);
  pxl_table *table = host_table(&h, loader, queue, 0, 2);

  CHECK_STATUS(host_show(&h, table, 0, 4, 0), PXL_OK);
  /* Drawn before set_visible returned, with no placeholder and no request. */
  for (int row = 0; row < 4; row++) {
    CHECKF(h.rec[row].sync_calls == 1, "row %d: %d calls inside set_visible", row, h.rec[row].sync_calls);
    CHECK_INT(h.rec[row].source, PXL_SOURCE_MEMORY);
  }
  pxl_table_stats stats = table_stats(table);
  CHECK_INT(stats.memory_hits, 4);
  CHECK_INT(stats.started, 0);
  CHECK_INT(stats.delivered, 4);
  drain_for(queue, 200);
  for (int row = 0; row < 4; row++) CHECK_INT(h.rec[row].calls, 1);
  for (int row = 0; row < 4; row++) CHECK_INT(log_count(env, h.urls[row].uri), 1); /* warm-up */

  /* Same screen again: nothing new. */
  CHECK_STATUS(host_show(&h, table, 0, 4, 0), PXL_OK);
  drain_for(queue, 100);
  for (int row = 0; row < 4; row++) CHECK_INT(h.rec[row].calls, 1);

  /* Down by two rows (0 and 1 are now the kept rows behind), then back: rows 0 and 1
   * enter the screen again, the host's cells for them were reused meanwhile, and the
   * cache holds their images: row_fn must bring them again, inside set_visible. */
  CHECK_STATUS(host_show(&h, table, 2, 4, 1), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 4, 2, 10000));
  CHECK_STATUS(host_show(&h, table, 0, 4, -1), PXL_OK);
  for (int row = 0; row < 2; row++)
    CHECKF(h.rec[row].calls == 2 && h.rec[row].sync_calls == 2,
           "row %d re-entered the screen (it had left it into the kept rows) with its image in "
           "memory: %d row_fn calls, %d inside set_visible (want 2 and 2)",
           row, h.rec[row].calls, h.rec[row].sync_calls);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

void test_table_row_errors(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "err", 20, "/" FIXTURE_GRADIENT_JPG);
  host_set_path(&h, 1, "/missing.jpg", "err");
  host_set_path(&h, 2, "/" FIXTURE_NOT_AN_IMAGE, "err");
  snprintf(h.urls[3].url, sizeof h.urls[3].url, "http://[::1");          /* malformed */
  snprintf(h.urls[12].url, sizeof h.urls[12].url, "gopher://127.0.0.1/x"); /* scheme */
  pxl_table *table = host_table(&h, loader, queue, 2, 0);

  /* A visible row gets its error, once. */
  CHECK_STATUS(host_show(&h, table, 0, 4, 0), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 0, 4, 10000));
  CHECK_STATUS(h.rec[0].status, PXL_OK);
  CHECK_STATUS(h.rec[1].status, PXL_E_HTTP);
  CHECK_INT(h.rec[1].http_status, 404);
  CHECK_STATUS(h.rec[2].status, PXL_E_NOT_AN_IMAGE);
  CHECK_STATUS(h.rec[3].status, PXL_E_MALFORMED_URL);
  CHECK_INT(h.rec[3].sync_calls, 1); /* refused at once: reported at once */
  drain_for(queue, 200);
  for (int row = 0; row < 4; row++) CHECK_INT(h.rec[row].calls, 1);
  pxl_table_stats stats = table_stats(table);
  CHECK_INT(stats.delivered, 1);
  CHECK_INT(stats.failed, 3);

  /* Row 12 is refused while it is only prefetched; once visible, the host must learn
   * about it like any visible row: "a visible row's result ... or an error". */
  CHECK_STATUS(host_show(&h, table, 10, 2, 1), PXL_OK); /* prefetches 12, 13 */
  CHECK(host_wait_rows(&h, queue, 10, 2, 10000));
  CHECK_INT(h.rec[12].calls, 0);
  CHECK_STATUS(host_show(&h, table, 12, 2, 1), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 13, 1, 10000));
  drain_for(queue, 200);
  CHECKF(h.rec[12].calls == 1 && h.rec[12].status == PXL_E_SCHEME_NOT_ALLOWED,
         "row 12 (refused while prefetched) is visible: %d row_fn calls, status %d",
         h.rec[12].calls, (int)h.rec[12].status);
  stats = table_stats(table);
  CHECKF(stats.failed == (uint64_t)(3 + h.rec[12].calls),
         "stats.failed %llu, but %d error callbacks ran", (unsigned long long)stats.failed,
         3 + h.rec[12].calls);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

/* Every way a row's request can be refused, one row each: request_fn fills a request that
 * pxl_load would refuse, or whose URL the loader refuses. The header: "a request refused
 * for a visible row is reported through row_fn with its status and message, as a
 * delivered row is". */
enum refusal {
  REFUSED_NONE, REFUSED_ROTATE_33, REFUSED_FLAG_BIT, REFUSED_NULL_URL, REFUSED_NEGATIVE_WIDTH,
  REFUSED_MODE, REFUSED_FORMAT, REFUSED_RELOAD_AND_CACHE_ONLY, REFUSED_HEADER, REFUSED_SMALL_STRUCT,
  REFUSED_LARGE_STRUCT, REFUSED_PLACEHOLDER_KIND, REFUSED_NULL_PROCESSORS, REFUSED_CUSTOM_ID,
  REFUSED_INTERVAL, REFUSED_SCHEME, REFUSED_MALFORMED_URL, REFUSAL_COUNT
};

struct refusing_host {
  struct host host;
  pxl_processor rotate, custom;
  const char *bad_headers[2];
  char message[REFUSAL_COUNT][256]; /* of each row's last call */
  pxl_tier tier[REFUSAL_COUNT];
};

/* Row r < REFUSAL_COUNT gets refusal r; the rows past them are good ones. */
static int refusing_request(int64_t row, pxl_request *request, void *user_data) {
  struct refusing_host *r = user_data;
  if (!host_request(row, request, &r->host)) return 0;
  switch (row) {
  case REFUSED_ROTATE_33:
    request->processors = &r->rotate;
    request->processor_count = 1;
    break;
  case REFUSED_FLAG_BIT: request->flags = 1u << 30; break;
  case REFUSED_NULL_URL: request->url = NULL; break;
  case REFUSED_NEGATIVE_WIDTH: request->width = -1; break;
  case REFUSED_MODE: request->mode = 99; break;
  case REFUSED_FORMAT: request->format = 99; break;
  case REFUSED_RELOAD_AND_CACHE_ONLY: request->flags = PXL_FLAG_RELOAD | PXL_FLAG_CACHE_ONLY; break;
  case REFUSED_HEADER: request->headers = r->bad_headers; break;
  case REFUSED_SMALL_STRUCT: request->struct_size = 8; break;
  /* Only the library's bytes exist: a larger size must not make it read past them. */
  case REFUSED_LARGE_STRUCT: request->struct_size = sizeof *request + 64; break;
  case REFUSED_PLACEHOLDER_KIND: request->placeholder_kind = 99; break;
  case REFUSED_NULL_PROCESSORS: request->processor_count = 1; break;
  case REFUSED_CUSTOM_ID:
    request->processors = &r->custom;
    request->processor_count = 1;
    break;
  case REFUSED_INTERVAL: request->progress_interval_ms = -1; break;
  case REFUSED_SCHEME: request->url = "gopher://127.0.0.1/x"; break;
  case REFUSED_MALFORMED_URL: request->url = "http://[::1"; break;
  default: break;
  }
  return 1;
}

static void refusing_row(int64_t row, const pxl_result *result, void *user_data) {
  struct refusing_host *r = user_data;
  host_row(row, result, &r->host);
  if (row < 0 || row >= REFUSAL_COUNT) return;
  snprintf(r->message[row], sizeof r->message[row], "%s", result->message ? result->message : "(NULL)");
  pxl_metrics metrics = {.struct_size = sizeof metrics};
  r->tier[row] = pxl_result_metrics(result, &metrics) == PXL_OK ? (pxl_tier)metrics.tier : (pxl_tier)-1;
}

void test_table_refused_requests(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct refusing_host *r = calloc(1, sizeof *r);
  host_init(&r->host, env, "refused", 200, "/" FIXTURE_GRADIENT_JPG);
  r->rotate.kind = PXL_PROCESS_ROTATE;
  r->rotate.degrees = 33;
  r->custom.kind = PXL_PROCESS_CUSTOM;
  r->custom.id = "never-registered";
  r->bad_headers[0] = "no colon here";
  pxl_table_config config;
  pxl_table_config_init(&config);
  config.prefetch_rows = 0;
  config.keep_rows = 0;
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_new(loader, queue, &config, r->host.rows, refusing_request, refusing_row, r, &table),
               PXL_OK);
  if (!table) return;

  /* Each refused row is reported inside set_visible, with its status and a message. */
  CHECK_STATUS(host_show(&r->host, table, 0, REFUSAL_COUNT, 0), PXL_OK);
  for (int row = 1; row < REFUSAL_COUNT; row++) {
    pxl_status want = row == REFUSED_SCHEME          ? PXL_E_SCHEME_NOT_ALLOWED
                      : row == REFUSED_MALFORMED_URL ? PXL_E_MALFORMED_URL
                                                     : PXL_E_INVALID_ARGUMENT;
    CHECKF(r->host.rec[row].sync_calls == 1 && r->host.rec[row].status == want,
           "refusal %d: %d row_fn calls inside set_visible (want 1), status %d (want %d)", row,
           r->host.rec[row].sync_calls, (int)r->host.rec[row].status, (int)want);
    CHECKF(r->message[row][0] != '\0', "refusal %d: an empty message", row);
    CHECKF(r->tier[row] == PXL_TIER_NONE, "refusal %d: metrics tier %d (want PXL_TIER_NONE)", row,
           (int)r->tier[row]);
  }
  /* The message says what is wrong. */
  CHECKF(strstr(r->message[REFUSED_ROTATE_33], "33") != NULL, "rotate 33: \"%s\"", r->message[REFUSED_ROTATE_33]);
  CHECKF(strstr(r->message[REFUSED_FLAG_BIT], "flag") != NULL, "flag bit: \"%s\"", r->message[REFUSED_FLAG_BIT]);
  CHECKF(strstr(r->message[REFUSED_SMALL_STRUCT], "struct_size") != NULL, "struct_size: \"%s\"",
         r->message[REFUSED_SMALL_STRUCT]);
  CHECKF(strstr(r->message[REFUSED_CUSTOM_ID], "never-registered") != NULL, "custom id: \"%s\"",
         r->message[REFUSED_CUSTOM_ID]);
  CHECK(host_wait_rows(&r->host, queue, 0, 1, 10000));
  CHECK_STATUS(r->host.rec[0].status, PXL_OK);

  /* Once while the rows stay visible. */
  CHECK_STATUS(host_show(&r->host, table, 0, REFUSAL_COUNT, 0), PXL_OK);
  drain_for(queue, 100);
  for (int row = 0; row < REFUSAL_COUNT; row++)
    CHECKF(r->host.rec[row].calls == 1, "row %d still on screen: %d row_fn calls (want 1)", row,
           r->host.rec[row].calls);
  pxl_table_stats stats = table_stats(table);
  CHECK_INT(stats.failed, REFUSAL_COUNT - 1);

  /* Away and back: reported again, as a delivered row is delivered again. */
  CHECK_STATUS(host_show(&r->host, table, 100, REFUSAL_COUNT, 1), PXL_OK);
  CHECK(host_wait_rows(&r->host, queue, 100, REFUSAL_COUNT, 10000));
  CHECK_STATUS(host_show(&r->host, table, 0, REFUSAL_COUNT, -1), PXL_OK);
  for (int row = 1; row < REFUSAL_COUNT; row++)
    CHECKF(r->host.rec[row].calls == 2 && r->host.rec[row].sync_calls == 2,
           "refusal %d came back on screen: %d row_fn calls, %d inside set_visible (want 2 and 2)", row,
           r->host.rec[row].calls, r->host.rec[row].sync_calls);
  stats = table_stats(table);
  CHECK_INT(stats.failed, 2 * (REFUSAL_COUNT - 1));
  host_check_rules(&r->host);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&r->host);
  free(r);
}

/* ---- rows appended and removed ---- */

void test_table_row_count(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "count", 40, "/" FIXTURE_GRADIENT_JPG);
  pxl_table *table = host_table(&h, loader, queue, 0, 0);
  CHECK_STATUS(pxl_table_set_row_count(table, 10), PXL_OK);
  /* The screen shows rows 8-12 of a 10-row table: 8 and 9 exist. */
  CHECK_STATUS(host_show(&h, table, 8, 5, 1), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 8, 2, 10000));
  drain_for(queue, 100);
  CHECK_INT(h.rec[10].calls, 0);
  /* Rows appended ("keeps the visible range"): 10-12 are on screen, so they load. */
  CHECK_STATUS(pxl_table_set_row_count(table, 20), PXL_OK);
  CHECKF(host_wait_rows(&h, queue, 10, 3, 5000),
         "after set_row_count(20) with rows 8-12 declared visible, rows 10-12 got %d, %d, %d "
         "row_fn calls", h.rec[10].calls, h.rec[11].calls, h.rec[12].calls);
  CHECK_INT(h.rec[8].calls, 1); /* still on screen: not again */
  /* Rows removed: nothing for rows past the end. */
  CHECK_STATUS(pxl_table_set_row_count(table, 9), PXL_OK);
  CHECK_STATUS(host_show(&h, table, 5, 8, 0), PXL_OK);
  drain_for(queue, 300);
  for (int row = 9; row < 40; row++) CHECK(h.rec[row].calls <= 1);
  CHECK_INT(h.rec[13].calls + h.rec[14].calls, 0);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

/* ---- pxl_table_free ---- */

void test_table_free_stops_callbacks(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();

  /* In flight: freed, then nothing, and the transfers stop. */
  struct host h1;
  host_init(&h1, env, "free1", 10, "/slow/" FIXTURE_NOISE_JPG);
  pxl_table *t1 = host_table(&h1, loader, queue, 0, 0);
  CHECK_STATUS(host_show(&h1, t1, 0, 2, 0), PXL_OK);
  drain_for(queue, 300);
  pxl_table_free(t1);
  drain_for(queue, 500);
  CHECK_INT(h1.seq, 0);
  for (int row = 0; row < 2; row++) {
    CHECK(log_wait_count(env, h1.urls[row].uri, 1, 3000) == 1);
    CHECK(log_bytes(env, h1.urls[row].uri) < file_size(env, FIXTURE_NOISE_JPG));
  }

  /* Done and queued, not yet dispatched: freed, then dispatched: nothing. */
  struct host h2;
  host_init(&h2, env, "free2", 10, "/" FIXTURE_GRADIENT_JPG);
  pxl_table *t2 = host_table(&h2, loader, queue, 0, 0);
  CHECK_STATUS(host_show(&h2, t2, 0, 3, 0), PXL_OK);
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while (pxl_queue_pending(queue) < 3 && now_ms() < deadline) pxl_queue_wait(queue, 20);
  CHECK_INT(pxl_queue_pending(queue), 3);
  pxl_table_free(t2);
  drain_for(queue, 200);
  CHECK_INT(h2.seq, 0); /* the three images were queued, yet reach no row_fn */

  /* The loader first, then the table (any order). */
  struct host h3;
  host_init(&h3, env, "free3", 10, "/slow/" FIXTURE_NOISE_JPG);
  pxl_loader *loader3 = new_loader(NULL);
  pxl_table *t3 = host_table(&h3, loader3, queue, -1, -1);
  CHECK_STATUS(host_show(&h3, t3, 0, 2, 1), PXL_OK);
  drain_for(queue, 200);
  pxl_loader_free(loader3);
  drain_for(queue, 200);
  pxl_table_free(t3);
  drain_for(queue, 100);
  CHECK_INT(h3.seq, 0);

  pxl_table_free(NULL);
  host_check_rules(&h1);
  host_check_rules(&h2);
  host_check_rules(&h3);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h1);
  host_free(&h2);
  host_free(&h3);
}

/* ---- invalid arguments ---- */

/* Runs body(table) in a child process: a call that traps must fail the check, not the
 * whole run. Returns 1 if the child exited normally with 0. */
static int survives(void (*body)(pxl_table *), pxl_table *table) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    /* Only this thread lives on in the child: a lock some library thread held at the
     * fork would never be released. The bodies below stay off the loader (their rows
     * are out of range, so request_fn declines them), and the alarm bounds the rest. */
    alarm(10);
    body(table);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  if (WIFSIGNALED(status)) printf("  child killed by signal %d\n", WTERMSIG(status));
  else if (WEXITSTATUS(status)) printf("  child exited with %d\n", WEXITSTATUS(status));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void visible_at_int64_max(pxl_table *table) {
  _exit(pxl_table_set_visible(table, INT64_MAX, 8, 1) == PXL_OK ? 0 : 3);
}

static void visible_near_int64_max(pxl_table *table) {
  if (pxl_table_set_row_count(table, INT64_MAX) != PXL_OK) _exit(3);
  _exit(pxl_table_set_visible(table, INT64_MAX - 4, 8, 0) == PXL_OK ? 0 : 4);
}

static void visible_at_int64_min(pxl_table *table) {
  /* Over 65536 visible rows is refused (the header); at the limit it must not overflow. */
  if (pxl_table_set_visible(table, INT64_MIN, INT32_MAX, -1) != PXL_E_INVALID_ARGUMENT) _exit(3);
  _exit(pxl_table_set_visible(table, INT64_MIN, 65536, -1) == PXL_OK ? 0 : 3);
}

void test_table_invalid_arguments(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct host h;
  host_init(&h, env, "inval", 10, "/" FIXTURE_GRADIENT_JPG);

  pxl_table_config config;
  memset(&config, 0xab, sizeof config);
  pxl_table_config_init(&config);
  CHECK_INT(config.struct_size, sizeof config);
  CHECK_INT(config.prefetch_rows, 8);
  CHECK_INT(config.keep_rows, 2);
  CHECK_INT(config.visible_priority, PXL_PRIORITY_VISIBLE);
  CHECK_INT(config.prefetch_priority, PXL_PRIORITY_PREFETCH);

  pxl_table *t = (pxl_table *)&h;
#define EXPECT_NEW(expr)                                    \
  do {                                                      \
    t = (pxl_table *)&h;                                    \
    CHECK_STATUS(expr, PXL_E_INVALID_ARGUMENT);             \
    CHECKF(t == NULL, "%s left *out set", #expr);           \
  } while (0)
  EXPECT_NEW(pxl_table_new(NULL, queue, NULL, 10, host_request, host_row, &h, &t));
  EXPECT_NEW(pxl_table_new(loader, NULL, NULL, 10, host_request, host_row, &h, &t));
  EXPECT_NEW(pxl_table_new(loader, queue, NULL, 10, NULL, host_row, &h, &t));
  EXPECT_NEW(pxl_table_new(loader, queue, NULL, 10, host_request, NULL, &h, &t));
  EXPECT_NEW(pxl_table_new(loader, queue, NULL, -1, host_request, host_row, &h, &t));
  pxl_table_config bad = config;
  bad.struct_size = 0;
  EXPECT_NEW(pxl_table_new(loader, queue, &bad, 10, host_request, host_row, &h, &t));
  bad = config;
  bad.prefetch_rows = -1;
  EXPECT_NEW(pxl_table_new(loader, queue, &bad, 10, host_request, host_row, &h, &t));
  bad = config;
  bad.keep_rows = -1;
  EXPECT_NEW(pxl_table_new(loader, queue, &bad, 10, host_request, host_row, &h, &t));
#undef EXPECT_NEW
  CHECK_STATUS(pxl_table_new(loader, queue, NULL, 10, host_request, host_row, &h, NULL),
               PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_new(loader, queue, NULL, 0, host_request, host_row, &h, &t), PXL_OK);
  pxl_table_free(t);

  pxl_table *table = host_table(&h, loader, queue, -1, -1);
  CHECK_STATUS(pxl_table_set_visible(NULL, 0, 1, 0), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_set_visible(table, 0, -1, 0), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_set_row_count(NULL, 5), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_set_row_count(table, -1), PXL_E_INVALID_ARGUMENT);
  pxl_table_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_STATUS(pxl_table_get_stats(NULL, &stats), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_get_stats(table, NULL), PXL_E_INVALID_ARGUMENT);
  stats.struct_size = PXL_TABLE_STATS_SIZE_0_1 - 1; /* below the smallest (0.1.0's) */
  CHECK_STATUS(pxl_table_get_stats(table, &stats), PXL_E_INVALID_ARGUMENT);
  pxl_table_cancel_all(NULL);
  CHECK_INT(h.request_calls, 0);

  /* Rows outside 0 .. row_count - 1 are ignored, never asked for. */
  CHECK_STATUS(host_show(&h, table, -5, 3, 0), PXL_OK);
  CHECK_STATUS(host_show(&h, table, 10, 5, 0), PXL_OK);
  CHECK_STATUS(host_show(&h, table, 8, 5, 1), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 8, 2, 10000));
  CHECK_STATUS(pxl_table_set_row_count(table, 3), PXL_OK); /* visible rows are gone now */
  CHECK_STATUS(host_show(&h, table, 0, 3, 0), PXL_OK);
  CHECK(host_wait_rows(&h, queue, 0, 3, 10000));
  h.rows = 3; /* the children's request_fn declines every row the screen does not show */
  CHECKF(survives(visible_at_int64_min, table), "set_visible(INT64_MIN, INT32_MAX) not refused, or (INT64_MIN, 65536) not OK");
  CHECKF(survives(visible_at_int64_max, table), "set_visible(INT64_MAX, 8) crashed or failed");
  CHECKF(survives(visible_near_int64_max, table),
         "set_row_count(INT64_MAX) + set_visible(INT64_MAX - 4, 8) crashed or failed");
  host_check_rules(&h);

  /* pxl_bind and pxl_cancel_all */
  pxl_request r;
  thumb_request(&r, h.urls[0].url);
  pxl_token slot = 0;
  pxl_image *now = NULL;
  struct capture never = {0};
  CHECK_STATUS(pxl_bind(NULL, &r, queue, capture_callback, &never, &slot, &now), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_bind(loader, NULL, queue, capture_callback, &never, &slot, &now), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_bind(loader, &r, queue, capture_callback, &never, NULL, &now), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_bind(loader, &r, queue, capture_callback, &never, &slot, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(pxl_cancel_all(NULL, NULL), 0);
  drain_for(queue, 100);
  CHECK_INT(atomic_load(&never.calls), 0);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  host_free(&h);
}

/* ---- the fling ---- */

enum { STORM_ROWS = 2000, STORM_VISIBLE = 8, STORM_CALLS = 1000, STORM_STEP = 2 };

/* Flings through STORM_ROWS rows without waiting (no dispatch either: a UI thread busy
 * scrolling), stops on the last screen, and says what the server saw. */
struct fling_result {
  double fling_ms, settle_ms; /* the 1,000 calls; from the stop to the last screen drawn */
  pxl_table_stats stats;
  struct log_summary log;
};

static struct fling_result fling(const struct test_env *env, int storm_limit, const char *path,
                                 const char *file, const char *case_name) {
  struct fling_result out;
  memset(&out, 0, sizeof out);
  pxl_config config;
  pxl_config_init(&config);
  config.cancel_storm_limit = storm_limit;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct host h;
  /* One small file under STORM_ROWS names (distinct query strings) and distinct cache
   * keys: as far as the library knows, STORM_ROWS different images. */
  host_init(&h, env, case_name, STORM_ROWS, path);
  h.use_keys = 1;
  pxl_table *table = host_table(&h, loader, queue, -1, -1); /* 8 ahead, 2 kept */

  const int last = STORM_ROWS - STORM_VISIBLE;
  double start = now_ms();
  for (int i = 0; i < STORM_CALLS; i++) {
    int first = i * STORM_STEP < last ? i * STORM_STEP : last;
    host_show(&h, table, first, STORM_VISIBLE, 1);
  }
  out.fling_ms = now_ms() - start;
  double stop = now_ms();
  CHECK_STATUS(host_show(&h, table, last, STORM_VISIBLE, 0), PXL_OK);
  CHECKF(host_wait_rows(&h, queue, last, STORM_VISIBLE, 30000), "%s: the last screen was not drawn", case_name);
  out.settle_ms = now_ms() - stop;
  for (int row = last; row < STORM_ROWS; row++) CHECK_STATUS(h.rec[row].status, PXL_OK);
  out.stats = table_stats(table);
  host_check_rules(&h);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  sleep_ms(500); /* cut transfers are logged when their connections close */
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s?run=%ld&case=%s-r", path, env->run_id, case_name);
  out.log = log_summarize(env, prefix, file_size(env, file));
  host_free(&h);
  return out;
}

static void print_fling(const char *what, const struct fling_result *r) {
  printf("  %s: %d calls in %.0f ms; server: %d requests (%d complete, %d cut) on %d connections; "
         "last screen %.0f ms after the stop; table started %llu, cancelled %llu\n",
         what, STORM_CALLS, r->fling_ms, r->log.lines, r->log.complete, r->log.lines - r->log.complete,
         r->log.connections, r->settle_ms, (unsigned long long)r->stats.started,
         (unsigned long long)r->stats.cancelled);
}

void test_table_fling_storm(const struct test_env *env) {
  /* Small images at full speed: most transfers end before their rows leave. */
  struct fling_result fast = fling(env, 16, "/" FIXTURE_GRADIENT_JPG, FIXTURE_GRADIENT_JPG, "storm");
  print_fling("small, limit 16", &fast);
  /* Slow images (2.5 s each through /slow/): every transfer is still running when its row
   * leaves, so each start is later a cut: the storm limit is what keeps them few. */
  struct fling_result slow = fling(env, 16, "/slow/" FIXTURE_MEDIUM_JPG, FIXTURE_MEDIUM_JPG, "storm-slow");
  print_fling("slow,  limit 16", &slow);
  struct fling_result slow_free = fling(env, 0, "/slow/" FIXTURE_MEDIUM_JPG, FIXTURE_MEDIUM_JPG, "storm-slow0");
  print_fling("slow,  limit 0 ", &slow_free);

  /* The table starts (and then cancels) a load for nearly every row it passes; what must
   * stay small is what reaches the server. A row is wanted for about 9 calls (8 ahead +
   * 8 visible + 2 kept, 2 rows per call), well under a millisecond of this fling, and at
   * most max_concurrent_downloads (8) transfers run at once: only rows whose small
   * transfer completes within that window reach nginx. On loopback that is about 2 per
   * millisecond of fling (100-200 of 2,000 here); the bound, a quarter of the rows,
   * leaves room for a machine twice as busy and still says "not every row". */
  CHECKF(fast.log.lines > 0 && fast.log.lines <= STORM_ROWS / 4,
         "small images: %d requests for %d rows flung past (bound %d)", fast.log.lines, STORM_ROWS,
         STORM_ROWS / 4);
  CHECK(fast.stats.started >= (uint64_t)STORM_ROWS / 2); /* the table did start (and cancel) them */
  /* Slow images: every request is a transfer opened and dropped. The final screen's
   * windows account for 8 visible + 8 ahead (+ 2 kept) = 18; the rest of the fling is
   * held to the storm budget: 8 transfers running when cuts begin, the bucket's 16
   * tokens, its refill at 16 per second over a fling of well under a second (16), and
   * the floor of -16 it may dip to (16): 18 + 8 + 16 + 16 + 16 = 74. */
  CHECKF(slow.log.lines > 0 && slow.log.lines <= 74,
         "slow images: %d requests for %d rows flung past (bound 74)", slow.log.lines, STORM_ROWS);
  CHECKF(fast.settle_ms < 5000.0 * env->slow_factor && slow.settle_ms < 10000.0 * env->slow_factor,
         "the last screen took %.0f ms (small) and %.0f ms (slow) after the stop", fast.settle_ms,
         slow.settle_ms);
}

/* ---- the queue drained on another thread than the one scrolling ---- */

/* The header allows a table's queue to be drained on any thread. A row that leaves while
 * its load runs and comes back at once has the old load's CANCELLED result still queued
 * while the new load starts; dispatched on the other thread at that moment, it must not
 * be taken for the new load's result (which left the row blank for good, with no callback
 * and no error, until the next pxl_table_set_visible showing it). */
enum { ELSEWHERE_ROWS = 200, ELSEWHERE_VISIBLE = 10 };

/* Row row asks for a (16 + row) x 16 thumbnail: the image's width says which row's
 * request it answers. */
static int32_t elsewhere_width(int64_t row) { return (int32_t)(16 + row); }

struct elsewhere {
  struct test_url urls[ELSEWHERE_ROWS];
  pxl_queue *queue;
  atomic_int stop;
  atomic_int epoch;                     /* pxl_table_set_visible calls so far */
  int entered[ELSEWHERE_ROWS];          /* epoch at which the row last came on screen */
  atomic_int delivered[ELSEWHERE_ROWS]; /* epoch of the row's last row_fn call with its image */
  atomic_int wrong_images;              /* an image of another size than its row asked for */
  atomic_int errors;                    /* row_fn with an error (CANCELLED included) */
  int64_t first;                        /* the visible range, as last declared */
};

static int elsewhere_request(int64_t row, pxl_request *request, void *user_data) {
  struct elsewhere *e = user_data;
  if (row < 0 || row >= ELSEWHERE_ROWS) return 0;
  request->url = e->urls[row].url;
  request->width = elsewhere_width(row);
  request->height = 16;
  request->mode = PXL_MODE_FILL;
  request->format = PXL_FORMAT_RGBA8;
  return 1;
}

static void elsewhere_row(int64_t row, const pxl_result *result, void *user_data) {
  struct elsewhere *e = user_data;
  if (row < 0 || row >= ELSEWHERE_ROWS) return;
  if (result->status != PXL_OK || !result->image) {
    atomic_fetch_add(&e->errors, 1);
    fprintf(stderr, "  row %lld: status %d (%s)\n", (long long)row, (int)result->status,
            result->message ? result->message : "");
    return;
  }
  if (pxl_image_width(result->image) != elsewhere_width(row) || pxl_image_height(result->image) != 16) {
    atomic_fetch_add(&e->wrong_images, 1);
    return;
  }
  atomic_store(&e->delivered[row], atomic_load(&e->epoch));
}

static void *elsewhere_drain(void *arg) {
  struct elsewhere *e = arg;
  while (!atomic_load(&e->stop)) {
    pxl_queue_wait(e->queue, 20);
    pxl_queue_dispatch(e->queue, 0);
  }
  return NULL;
}

static void busy_wait_us(int us) {
  double until = now_ms() + us / 1000.0;
  while (now_ms() < until) {
  }
}

static void elsewhere_show(struct elsewhere *e, pxl_table *table, int64_t first) {
  int epoch = atomic_fetch_add(&e->epoch, 1) + 1;
  for (int64_t row = first; row < first + ELSEWHERE_VISIBLE; row++)
    if (row < e->first || row >= e->first + ELSEWHERE_VISIBLE) e->entered[row] = epoch;
  int32_t direction = first > e->first ? 1 : first < e->first ? -1 : 0;
  e->first = first;
  CHECK_STATUS(pxl_table_set_visible(table, first, ELSEWHERE_VISIBLE, direction), PXL_OK);
}

/* Waits (bounded) until every visible row had its image since it came on screen; returns
 * how many did not. */
static int elsewhere_blank_rows(const struct test_env *env, struct elsewhere *e, char *list,
                                size_t size) {
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  for (;;) {
    int blank = 0;
    list[0] = 0;
    for (int64_t row = e->first; row < e->first + ELSEWHERE_VISIBLE; row++) {
      if (atomic_load(&e->delivered[row]) >= e->entered[row]) continue;
      blank++;
      snprintf(list + strlen(list), size - strlen(list), " %lld", (long long)row);
    }
    if (!blank || now_ms() >= deadline) return blank;
    sleep_ms(1);
  }
}

void test_table_drained_on_other_thread(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  struct elsewhere *e = calloc(1, sizeof *e);
  e->queue = new_queue();
  for (int row = 0; row < ELSEWHERE_ROWS; row++) {
    char name[64];
    snprintf(name, sizeof name, "elsewhere-r%d", row);
    e->urls[row] = test_url(env, "/" FIXTURE_GRADIENT_JPG, name);
  }
  pxl_table_config config;
  pxl_table_config_init(&config);
  config.prefetch_rows = 0; /* a row that leaves is cancelled at once */
  config.keep_rows = 0;
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_new(loader, e->queue, &config, ELSEWHERE_ROWS, elsewhere_request, elsewhere_row,
                             e, &table), PXL_OK);
  pthread_t drainer;
  pthread_create(&drainer, NULL, elsewhere_drain, e);

  /* A finger scrolling down a row at a time, jittering back a row at every step: the row
   * that just entered at the bottom leaves before its image arrives and comes straight
   * back, its CANCELLED result queued meanwhile. After each step every row on screen gets
   * its image. */
  unsigned seed = (unsigned)env->run_id;
  int blank_steps = 0, steps = 0;
  char list[256];
  elsewhere_show(e, table, 0);
  for (int64_t first = 0; first + 1 + ELSEWHERE_VISIBLE <= ELSEWHERE_ROWS && blank_steps == 0; first++, steps++) {
    elsewhere_show(e, table, first + 1);
    busy_wait_us((int)(rand_r(&seed) % 100));
    elsewhere_show(e, table, first);
    busy_wait_us((int)(rand_r(&seed) % 100));
    elsewhere_show(e, table, first + 1);
    int blank = elsewhere_blank_rows(env, e, list, sizeof list);
    if (blank) {
      blank_steps++;
      CHECKF(0, "rows%s of the screen %lld + %d stayed blank for 10 s", list, (long long)e->first,
             ELSEWHERE_VISIBLE);
      /* Shown again, the row loads: it was forgotten, not stuck. */
      elsewhere_show(e, table, e->first + 1);
      elsewhere_show(e, table, e->first - 1);
      CHECK(elsewhere_blank_rows(env, e, list, sizeof list) == 0);
    }
  }
  printf("  %d steps of a jittery scroll with the queue drained on another thread\n", steps);
  CHECK_INT(blank_steps, 0);
  CHECK_INT(atomic_load(&e->wrong_images), 0);
  CHECK_INT(atomic_load(&e->errors), 0);
  atomic_store(&e->stop, 1);
  pxl_queue_wakeup(e->queue);
  pthread_join(drainer, NULL);
  pxl_table_free(table);
  pxl_loader_free(loader);
  pxl_queue_free(e->queue);
  free(e);
}
