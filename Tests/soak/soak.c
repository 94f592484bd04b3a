/*
 * Tests/soak/soak.c: the stress and soak test. Against the public header only.
 *
 *   soak NGINX_URL FAULT_URL DISK_DIR SECONDS
 *
 * Two "worlds" (a loader with two completion queues, each drained by a dispatcher thread,
 * plus a table on a queue of its own) live side by side; three worker threads throw random
 * loads, cancels, priority changes, synchronous lookups, prefetches and cancel-alls at
 * them, a table thread scrolls each world's table, and a recycler thread frees and
 * recreates queues, loaders and whole worlds (in random orders) all through the run.
 * Requests go to nginx (fast, /slow/, max-age=1, no-store, 404) and to the fault server
 * (slow, dripping, stalled, reset, truncated, 500 with retries, corrupt and non-image
 * bodies, redirects, an endless body) and to a host fetcher ("soak:" URLs, the same
 * fixtures' bytes, answered at once or slowly from a host thread), with a request hook on
 * every loader (answering at once or later), all at once. The caches are tiny (1 MiB / 16 images in
 * memory, 256 KiB on disk shared by both worlds) so that eviction runs all the time.
 *
 * Invariants, checked throughout (each is one "passed" or "failed" at the end):
 *   once       every accepted request gets exactly one callback (each request's user_data
 *              counts its calls; at every teardown and at the end nothing is outstanding)
 *   freed      no callback runs after pxl_queue_free of its queue returned, and one that
 *              starts after pxl_loader_free of its loader returned reports CANCELLED
 *   cancel     no image for a request whose pxl_cancel returned PXL_OK (header rule 3:
 *              the callback then reports PXL_E_CANCELLED, even if a result was queued)
 *   results    an image exactly when the status is OK, sizes within the request's bounds,
 *              message never NULL, pxl_set_priority/pxl_cancel/pxl_lookup statuses legal
 *   table      row_fn only for a visible row, never CANCELLED, never after pxl_table_free
 *   stuck      no request stays its world's oldest outstanding one for more than 60 s
 *              (every transfer here ends within ~11 s, one retry included, and a request
 *              waiting 5 s starts before newer ones, oldest first: the oldest is at the
 *              front of the line). A request may wait longer in a backlog: the workers
 *              keep up to 600 outstanding per world against 1-6 connections per host, so
 *              its age alone says nothing; a lost one becomes the oldest and stays so.
 *   watchdog   no thread's heartbeat older than 10 s (the run fails at once otherwise)
 *   rss        RSS flat after warm-up: the peak of the last quarter of the run is at most
 *              the peak of the quarter after warm-up (a fifth of the run) plus
 *              max(16 MiB, 15 %); judged in runs of 600 s or more only (RSS grows for the
 *              first 2-3 minutes), so the one-minute form checks the other nine
 *   fetcher    the host's fetcher for "soak:" URLs (answering at once, soon, or slowly from
 *              the host thread) gets no start or cancel after destroy or after
 *              pxl_loader_free returned, is destroyed exactly once by pxl_loader_free, and
 *              every fetch it started is finished once; write/finish statuses legal
 *   hook       the request hook (answering at once or up to 300 ms later from the host
 *              thread, never failing) is not called after pxl_loader_free returned, and every
 *              call is answered (OK, or CANCELLED once its request ended)
 * The last line is "N passed, N failed"; the exit status is 1 on any failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"

#define WORLDS 2
#define QUEUES_PER_WORLD 2
#define WORKERS 3
#define MAX_OUTSTANDING_PER_WORLD 600
#define LIVE_PER_WORKER 64
/* Prefetches a worker has not cancelled are cancelled at this age, as an app drops a
 * prefetch of rows it no longer expects to show. Without it a world with one connection
 * per host queued tens of thousands, and with them ahead, any load waited minutes. */
#define PREFETCH_LIFETIME_MS 10000.0
#define PREFETCHES_PER_WORKER 4096
static double STUCK_MS = 60000.0; /* PXL_SOAK_STUCK_MS overrides */
#define WATCHDOG_MS 10000.0

static const char *nginx_url, *fault_url, *disk_dir;
static double run_seconds;
static atomic_int running = 1;

/* ---- time, randomness, failures ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}
static double start_ms;

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
  nanosleep(&ts, NULL);
}

static uint64_t rng_next(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rnd(uint64_t *state, int n) { return (int)(rng_next(state) % (uint64_t)n); }

enum invariant { INV_ONCE, INV_FREED, INV_CANCEL, INV_RESULTS, INV_TABLE, INV_STUCK, INV_WATCHDOG, INV_RSS, INV_FETCHER, INV_HOOK, INV_COUNT };
static const char *invariant_name[INV_COUNT] = {"once", "freed", "cancel", "results", "table", "stuck", "watchdog", "rss", "fetcher", "hook"};
static atomic_long violations[INV_COUNT];

static void violation(enum invariant which, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(enum invariant which, const char *fmt, ...) {
  long n = atomic_fetch_add(&violations[which], 1);
  if (n >= 10) return; /* the first ten of each kind say enough */
  char text[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  printf("VIOLATION [%s] at %.1f s: %s\n", invariant_name[which], (now_ms() - start_ms) / 1000, text);
}

/* ---- counters ---- */

static atomic_long accepted, refused, callbacks, cancel_ok, cancel_notfound, prio_calls, lookups,
    lookup_hits, prefetches, cancel_alls, table_rows, table_images, world_recycles, queue_recycles,
    loader_recycles, table_recycles;
static atomic_long by_status[32];
static atomic_long late_results, longest_wait_ms; /* results (not CANCELLED) after STUCK_MS; the longest wait */

/* ---- heartbeats (the watchdog) ---- */

#define MAX_THREADS 32
static struct heartbeat {
  char name[32];
  _Atomic double at;
  atomic_int used;
} beats[MAX_THREADS];
static atomic_int beat_count;

static int beat_register(const char *name) {
  int i = atomic_fetch_add(&beat_count, 1);
  snprintf(beats[i].name, sizeof beats[i].name, "%s", name);
  atomic_store(&beats[i].at, now_ms());
  atomic_store(&beats[i].used, 1);
  return i;
}
static void beat(int i) { atomic_store(&beats[i].at, now_ms()); }

/* ---- requests ---- */

#define REQ_MAGIC 0x50584C52u
struct world;
/* One queue instance; never freed during the run (a few hundred small records), so a
 * late callback can always be checked against it. */
struct queue_record {
  atomic_int freed;         /* 1 once pxl_queue_free returned (callbacks then are violations) */
};

/* One loader instance, likewise kept: after pxl_loader_free returned, a callback that
 * starts must report CANCELLED (the free cancelled every request not yet called back). */
struct loader_record {
  atomic_int freed;
  struct host_record *host;
};

struct req {
  uint32_t magic;
  int queue_slot;
  struct queue_record *queue_record;
  struct loader_record *loader_record;
  atomic_int in_live;       /* a worker may still use it (freed only at 0 and once called back) */
  struct world *world;
  long generation;          /* the world's generation when issued */
  int max_w, max_h;         /* the bounds the image must fit in (0: none) */
  char url[200];            /* for reports */
  char flags[8];
  int fill;
  double issued_ms;
  atomic_int calls;
  atomic_int finished;      /* the callback no longer touches it */
  atomic_int cancelled_ok;  /* pxl_cancel returned PXL_OK */
  atomic_int done_status;   /* -1 until the callback ran, then its status */
  _Atomic pxl_token token;  /* set by the issuer after pxl_load */
  struct req *next_all;     /* the world's list of every request it accepted */
};

struct queue_slot {
  pxl_queue *queue;
  struct queue_record *record;
  atomic_int stop;
  pthread_t dispatcher;
  int has_dispatcher;
};

struct world {
  int index;
  pthread_rwlock_t lock;    /* workers hold it shared while calling into the world */
  long generation;
  pxl_loader *loader;
  struct loader_record *loader_record;
  struct queue_slot queues[QUEUES_PER_WORLD];
  pthread_mutex_t reqs_lock;
  struct req *all;          /* requests accepted since the world was (re)made, until the
                               watchdog frees those called back and no longer in use */
  long settles;             /* world_settle calls: it frees every request of the world */
  atomic_long outstanding;
  int storm_limit;          /* the loader's cancel_storm_limit, for reports */
  int per_host_limit;       /* the loader's max_downloads_per_host, for reports */
  int download_limit;       /* the loader's max_concurrent_downloads, for reports */
  /* The stuck check (the watchdog thread only): the oldest outstanding request and since when. */
  pxl_token oldest_token;
  double oldest_issued_ms, oldest_since_ms;
};
static struct world worlds[WORLDS];

static void check_image_bounds(struct req *r, const pxl_result *res) {
  pxl_image *img = res->image;
  int w = pxl_image_width(img), h = pxl_image_height(img);
  if (w <= 0 || h <= 0 || pxl_image_pixels(img) == NULL)
    violation(INV_RESULTS, "image %dx%d pixels %p", w, h, (const void *)pxl_image_pixels(img));
  if (r->fill && r->max_w > 0 && r->max_h > 0) {
    if (w > r->max_w || h > r->max_h) violation(INV_RESULTS, "fill %dx%d gave %dx%d", r->max_w, r->max_h, w, h);
  } else {
    if (r->max_w > 0 && w > r->max_w) violation(INV_RESULTS, "fit width %d gave %d", r->max_w, w);
    if (r->max_h > 0 && h > r->max_h) violation(INV_RESULTS, "fit height %d gave %d", r->max_h, h);
  }
}

static void on_result(pxl_token token, const pxl_result *res, void *user_data) {
  struct req *r = user_data;
  if (r == NULL || r->magic != REQ_MAGIC) {
    violation(INV_ONCE, "callback with a bad user_data %p (token %" PRIu64 ")", user_data, token);
    return;
  }
  int loader_gone = atomic_load(&r->loader_record->freed); /* read as the callback starts */
  int calls = atomic_fetch_add(&r->calls, 1);
  if (calls != 0) violation(INV_ONCE, "token %" PRIu64 " called back %d times", token, calls + 1);
  pxl_token known = atomic_load(&r->token);
  if (known != 0 && known != token) violation(INV_ONCE, "token %" PRIu64 " delivered as %" PRIu64, known, token);
  if (atomic_load(&r->queue_record->freed))
    violation(INV_FREED, "token %" PRIu64 " called back after its queue was freed", token);
  if (res == NULL || res->message == NULL) {
    violation(INV_RESULTS, "token %" PRIu64 ": NULL result or message", token);
  } else {
    int status = (int)res->status;
    atomic_fetch_add(&by_status[status >= 0 && status < 32 ? status : 31], 1);
    if ((status == PXL_OK) != (res->image != NULL))
      violation(INV_RESULTS, "token %" PRIu64 ": status %d with image %p", token, status, (void *)res->image);
    if (status == PXL_OK && res->image) check_image_bounds(r, res);
    if (loader_gone && status != PXL_E_CANCELLED)
      violation(INV_FREED, "token %" PRIu64 ": status %d after its loader was freed", token, status);
    if (atomic_load(&r->cancelled_ok) && status != PXL_E_CANCELLED)
      violation(INV_CANCEL, "token %" PRIu64 ": pxl_cancel returned OK, yet the callback reports %d", token, status);
    atomic_store(&r->done_status, status);
    /* How long results waited in the backlog (reported, not judged: see "stuck"). */
    long waited = (long)(now_ms() - r->issued_ms);
    if (status != PXL_E_CANCELLED) {
      if (waited > STUCK_MS) atomic_fetch_add(&late_results, 1);
      long longest = atomic_load(&longest_wait_ms);
      while (waited > longest && !atomic_compare_exchange_weak(&longest_wait_ms, &longest, waited)) {}
    }
  }
  struct world *world = r->world;
  atomic_fetch_add(&callbacks, 1);
  atomic_store(&r->finished, 1); /* r may be freed from here on */
  atomic_fetch_sub(&world->outstanding, 1);
}

/* ---- URLs ---- */

static void random_url(uint64_t *rng, char *out, size_t size, int *expect_image) {
  int k = rnd(rng, 64); /* a small key space, so that caches hit and evict */
  *expect_image = 1;
  switch (rnd(rng, 28)) {
  case 0: case 1: case 2: case 3: snprintf(out, size, "%s/gradient.jpg?v=%d", nginx_url, k); break;
  case 4: snprintf(out, size, "%s/oriented6.jpg?v=%d", nginx_url, k); break;
  case 5: case 6: snprintf(out, size, "%s/alpha.png?v=%d", nginx_url, k); break;
  case 7: snprintf(out, size, "%s/noise.jpg?v=%d", nginx_url, k % 8); break;
  case 8: snprintf(out, size, "%s/slow/medium.jpg?v=%d", nginx_url, k); break;
  case 9: snprintf(out, size, "%s/maxage1/gradient.jpg?v=%d", nginx_url, k); break;
  case 10: snprintf(out, size, "%s/nostore/alpha.png?v=%d", nginx_url, k); break;
  case 11: snprintf(out, size, "%s/missing-%d.jpg", nginx_url, k); *expect_image = 0; break;
  case 12: snprintf(out, size, "%s/slow/delay=%d/file=gradient.jpg?s=%d", fault_url, 50 + rnd(rng, 400), k); break;
  case 13: snprintf(out, size, "%s/drip/rate=40000/file=medium.jpg?s=%d", fault_url, k); break;
  case 14: snprintf(out, size, "%s/stall/after=2000/hold=3000?s=%d", fault_url, k); *expect_image = 0; break;
  case 15: snprintf(out, size, "%s/reset/send=1000?s=%d", fault_url, k); *expect_image = 0; break;
  case 16: snprintf(out, size, "%s/short/send=1000?s=%d", fault_url, k); *expect_image = 0; break;
  case 17: snprintf(out, size, "%s/status/code=500?s=%d", fault_url, k); *expect_image = 0; break;
  case 18: snprintf(out, size, "%s/image/file=corrupt.jpg?s=%d", fault_url, k); *expect_image = 0; break;
  case 19: snprintf(out, size, "%s/image/file=not-an-image.jpg?s=%d", fault_url, k); *expect_image = 0; break;
  case 20: snprintf(out, size, "%s/fail/n=1/code=503/file=alpha.png?s=%d&t=%d", fault_url, k, rnd(rng, 1 << 20)); break;
  case 21: snprintf(out, size, "%s/redirect/hops=2/file=gradient.jpg?s=%d", fault_url, k); break;
  case 22: snprintf(out, size, "%s/never?s=%d", fault_url, k); *expect_image = 0; break;
  case 23: snprintf(out, size, "%s/grow/total=%d?s=%d", fault_url, 3 << 20, k); *expect_image = 0; break;
  case 24: case 25: case 26: { /* the host's fetcher, mode m: 0 at once, 1 soon, 2 slowly, 3 half at once */
    static const char *files[] = {"gradient.jpg", "alpha.png", "medium.jpg", "oriented6.jpg", "noise.jpg"};
    snprintf(out, size, "soak:%s?v=%d&m=%d", files[rnd(rng, 5)], k, rnd(rng, 4));
    break;
  }
  default:
    snprintf(out, size, "soak:%s?v=%d&m=%d", rnd(rng, 3) ? (rnd(rng, 2) ? "corrupt.jpg" : "not-an-image.jpg") : "missing.jpg",
             k, rnd(rng, 4));
    *expect_image = 0;
    break;
  }
}

static void random_request(uint64_t *rng, pxl_request *req, char *url, size_t url_size, int *fill) {
  int expect;
  random_url(rng, url, url_size, &expect);
  pxl_request_init(req);
  req->url = url;
  static const int sizes[][3] = {{0, 0, 0}, {150, 150, 1}, {64, 64, 0}, {32, 0, 0}, {100, 40, 1}};
  const int *s = sizes[rnd(rng, 5)];
  req->width = s[0];
  req->height = s[1];
  req->mode = s[2] ? PXL_MODE_FILL : PXL_MODE_FIT;
  *fill = s[2];
  req->format = rnd(rng, 5);
  req->priority = rnd(rng, 3) == 0 ? PXL_PRIORITY_PREFETCH : rnd(rng, 2) ? PXL_PRIORITY_VISIBLE : PXL_PRIORITY_NORMAL;
  uint32_t flags = 0;
  if (rnd(rng, 16) == 0) flags |= PXL_FLAG_SKIP_MEMORY_CACHE;
  if (rnd(rng, 24) == 0) flags |= PXL_FLAG_RELOAD;
  if (rnd(rng, 16) == 0) flags |= PXL_FLAG_CACHE_ONLY;
  if (rnd(rng, 8) == 0) flags |= PXL_FLAG_IGNORE_ORIENTATION;
  if ((flags & PXL_FLAG_RELOAD) && (flags & PXL_FLAG_CACHE_ONLY)) flags &= ~PXL_FLAG_RELOAD;
  req->flags = flags;
}

/* ---- the host: a fetcher for "soak:" URLs and the request hook ----
 *
 * Every loader gets a fetcher for "soak:FILE?...&m=MODE" serving the fixtures' bytes
 * (read once at start from the www directory next to DISK_DIR) and a request hook adding
 * "X-Soak-Token: N". Each answers at once or, through a job list, from the host thread:
 * soon, or slowly in chunks so that cancels and loader frees race the answers. Both keep
 * their per-loader records for the whole run, so a late callback can be checked. */

#define SOAK_FILES 7
static const char *soak_file_names[SOAK_FILES] = {"gradient.jpg", "alpha.png", "medium.jpg", "oriented6.jpg",
                                                  "noise.jpg", "corrupt.jpg", "not-an-image.jpg"};
static unsigned char *soak_file_bytes[SOAK_FILES];
static size_t soak_file_sizes[SOAK_FILES];

static void soak_files_load(void) {
  char path[1024];
  for (int i = 0; i < SOAK_FILES; i++) {
    snprintf(path, sizeof path, "%s/../www/%s", disk_dir, soak_file_names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
      fprintf(stderr, "soak: cannot read %s\n", path);
      exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    soak_file_bytes[i] = malloc(size > 0 ? (size_t)size : 1);
    soak_file_sizes[i] = fread(soak_file_bytes[i], 1, (size_t)size, f);
    fclose(f);
  }
}

/* One loader's fetcher and hook (kept for the run). */
struct host_record {
  struct loader_record *loader;
  atomic_uint_fast64_t rng;  /* the fetch and network threads' randomness */
  atomic_int destroys;
};

static atomic_long fetch_starts, fetch_finishes, fetch_cancels, fetch_finish_late, hook_calls, hook_answered,
    hook_answered_late;

enum job_kind { JOB_FETCH, JOB_HOOK };
struct job {
  enum job_kind kind;
  double due_ms;
  struct job *next;
  /* JOB_FETCH */
  pxl_fetch *fetch;
  int file;                 /* -1: a missing file */
  size_t sent, chunk;
  double chunk_gap_ms;
  atomic_int cancelled;     /* the fetcher's cancel named it */
  /* JOB_HOOK */
  pxl_hook_call *call;
};
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *host_jobs;
static atomic_int host_stop;

static int host_rnd(struct host_record *h, int n) {
  uint64_t state = atomic_fetch_add(&h->rng, 0x9E3779B97F4A7C15ull);
  return rnd(&state, n);
}

static void host_push(struct job *j) {
  pthread_mutex_lock(&host_lock);
  j->next = host_jobs;
  host_jobs = j;
  pthread_mutex_unlock(&host_lock);
}

static void fetch_end(pxl_fetch *fetch, pxl_status status) {
  pxl_status st = pxl_fetch_finish(fetch, status, NULL);
  atomic_fetch_add(&fetch_finishes, 1);
  if (st == PXL_E_CANCELLED) atomic_fetch_add(&fetch_finish_late, 1);
  else if (st != PXL_OK) violation(INV_FETCHER, "pxl_fetch_finish returned %d", st);
}

/* Writes the next chunk of a fetch job; 1 when the job is done (the handle finished). */
static int fetch_step(struct job *j) {
  if (j->cancelled || j->file < 0) {
    fetch_end(j->fetch, j->file < 0 ? PXL_E_NOT_FOUND : PXL_E_CANCELLED);
    return 1;
  }
  size_t size = soak_file_sizes[j->file], n = size - j->sent < j->chunk ? size - j->sent : j->chunk;
  pxl_status st = pxl_fetch_write(j->fetch, soak_file_bytes[j->file] + j->sent, n);
  if (st != PXL_OK && st != PXL_E_CANCELLED) violation(INV_FETCHER, "pxl_fetch_write returned %d", st);
  j->sent += n;
  if (st == PXL_E_CANCELLED || j->sent >= size) {
    fetch_end(j->fetch, PXL_OK);
    return 1;
  }
  j->due_ms = now_ms() + j->chunk_gap_ms;
  return 0;
}

static void fetch_start(const char *url, pxl_fetch *fetch, void *user_data) {
  struct host_record *h = user_data;
  atomic_fetch_add(&fetch_starts, 1);
  if (atomic_load(&h->loader->freed)) violation(INV_FETCHER, "fetch start after pxl_loader_free returned: %s", url);
  if (atomic_load(&h->destroys)) violation(INV_FETCHER, "fetch start after destroy: %s", url);
  struct job *j = calloc(1, sizeof *j);
  j->kind = JOB_FETCH;
  j->fetch = fetch;
  j->file = -1;
  const char *name = strncmp(url, "soak:", 5) == 0 ? url + 5 : url;
  size_t len = strcspn(name, "?");
  for (int i = 0; i < SOAK_FILES; i++)
    if (strlen(soak_file_names[i]) == len && strncmp(name, soak_file_names[i], len) == 0) j->file = i;
  const char *m = strstr(url, "m=");
  int mode = m ? atoi(m + 2) : 0;
  size_t size = j->file >= 0 ? soak_file_sizes[j->file] : 0;
  j->chunk = size ? size : 1;
  if (mode == 0) { /* at once, inside start */
    while (!fetch_step(j)) {}
    free(j);
    return;
  }
  if (mode == 3 && j->file >= 0) { /* half now, the rest from the host thread */
    j->chunk = size / 2 + 1;
    if (fetch_step(j)) {
      free(j);
      return;
    }
  }
  if (mode == 2) { /* slowly: quarters 100-600 ms apart */
    j->chunk = size / 4 + 1;
    j->chunk_gap_ms = 100 + host_rnd(h, 500);
  }
  j->due_ms = now_ms() + (mode == 2 ? j->chunk_gap_ms : host_rnd(h, 20));
  host_push(j);
}

static void fetch_cancel(pxl_fetch *fetch, void *user_data) {
  struct host_record *h = user_data;
  atomic_fetch_add(&fetch_cancels, 1);
  if (atomic_load(&h->loader->freed)) violation(INV_FETCHER, "fetch cancel after pxl_loader_free returned");
  if (atomic_load(&h->destroys)) violation(INV_FETCHER, "fetch cancel after destroy");
  pthread_mutex_lock(&host_lock);
  for (struct job *j = host_jobs; j; j = j->next)
    if (j->kind == JOB_FETCH && j->fetch == fetch) {
      atomic_store(&j->cancelled, 1); /* a job the host thread holds sees it at its next step */
      j->due_ms = 0;
    }
  pthread_mutex_unlock(&host_lock);
}

static void fetch_destroy(void *user_data) {
  struct host_record *h = user_data;
  if (atomic_fetch_add(&h->destroys, 1) != 0) violation(INV_FETCHER, "fetcher destroyed twice");
  if (atomic_load(&h->loader->freed)) violation(INV_FETCHER, "fetcher destroyed after pxl_loader_free returned");
}

static void hook_answer(pxl_hook_call *call) {
  static atomic_long token;
  char line[64];
  snprintf(line, sizeof line, "X-Soak-Token: %ld", atomic_fetch_add(&token, 1));
  const char *headers[1] = {line};
  pxl_status st = pxl_hook_answer(call, headers, 1);
  atomic_fetch_add(&hook_answered, 1);
  if (st == PXL_E_CANCELLED) atomic_fetch_add(&hook_answered_late, 1);
  else if (st != PXL_OK) violation(INV_HOOK, "pxl_hook_answer returned %d", st);
}

static void request_hook(const char *url, const char *const *headers, size_t header_count, int32_t status,
                         pxl_hook_call *call, void *user_data) {
  struct host_record *h = user_data;
  (void)headers, (void)header_count, (void)status;
  atomic_fetch_add(&hook_calls, 1);
  if (atomic_load(&h->loader->freed)) violation(INV_HOOK, "hook called after pxl_loader_free returned: %s", url);
  if (call == NULL) {
    violation(INV_HOOK, "hook called with a NULL call: %s", url);
    return;
  }
  if (host_rnd(h, 2) == 0) {
    hook_answer(call);
    return;
  }
  struct job *j = calloc(1, sizeof *j);
  j->kind = JOB_HOOK;
  j->call = call;
  j->due_ms = now_ms() + host_rnd(h, 300);
  host_push(j);
}

/* Runs the jobs that are due (all of them once host_stop is set, and then until none is left). */
static void *host_main(void *arg) {
  (void)arg;
  int hb = beat_register("host");
  for (;;) {
    beat(hb);
    int stopping = atomic_load(&host_stop);
    double now = now_ms();
    struct job *due = NULL;
    pthread_mutex_lock(&host_lock);
    for (struct job **link = &host_jobs; *link;) {
      struct job *j = *link;
      if (stopping || j->due_ms <= now) {
        *link = j->next;
        j->next = due;
        due = j;
      } else {
        link = &j->next;
      }
    }
    int empty = host_jobs == NULL;
    pthread_mutex_unlock(&host_lock);
    if (stopping && empty && due == NULL) break;
    while (due) {
      struct job *j = due;
      due = j->next;
      if (j->kind == JOB_HOOK) {
        hook_answer(j->call);
        free(j);
      } else if (stopping) {
        fetch_end(j->fetch, PXL_E_CANCELLED);
        free(j);
      } else if (fetch_step(j)) {
        free(j);
      } else {
        host_push(j);
      }
    }
    sleep_ms(2);
  }
  return NULL;
}

/* Called after the loader was made: its fetcher (the hook is in its config). */
static void host_attach(pxl_loader *loader, struct host_record *h, uint64_t *rng) {
  pxl_fetcher fetcher;
  pxl_fetcher_init(&fetcher);
  fetcher.start = fetch_start;
  fetcher.cancel = fetch_cancel;
  fetcher.destroy = fetch_destroy;
  fetcher.user_data = h;
  fetcher.max_concurrent = 1 + rnd(rng, 8);
  fetcher.disk_cache = rnd(rng, 2);
  pxl_status st = pxl_loader_add_fetcher(loader, "soak", &fetcher);
  if (st != PXL_OK) {
    fprintf(stderr, "soak: pxl_loader_add_fetcher: %s\n", pxl_status_string(st));
    exit(2);
  }
}

/* ---- worlds ---- */

static void *dispatcher_main(void *arg) {
  struct queue_slot *slot = arg;
  char name[32];
  snprintf(name, sizeof name, "dispatch-%p", (void *)slot);
  int hb = -1;
  /* Heartbeat slots are reused by name: a dispatcher is restarted with its queue. */
  for (int i = 0; i < atomic_load(&beat_count); i++)
    if (strcmp(beats[i].name, name) == 0) hb = i;
  if (hb < 0) hb = beat_register(name);
  atomic_store(&beats[hb].used, 1);
  while (!atomic_load(&slot->stop)) {
    beat(hb);
    pxl_queue_wait(slot->queue, 50);
    pxl_queue_dispatch(slot->queue, 0);
  }
  atomic_store(&beats[hb].used, 0);
  return NULL;
}

static void start_dispatcher(struct queue_slot *slot) {
  atomic_store(&slot->stop, 0);
  pthread_create(&slot->dispatcher, NULL, dispatcher_main, slot);
  slot->has_dispatcher = 1;
}

static void stop_dispatcher(struct queue_slot *slot) {
  if (!slot->has_dispatcher) return;
  atomic_store(&slot->stop, 1);
  pxl_queue_wakeup(slot->queue);
  pthread_join(slot->dispatcher, NULL);
  slot->has_dispatcher = 0;
}

/* The library's log lines go to stderr, which run.sh keeps in library.log. */
static void log_to_stderr(int32_t level, const char *message, void *user_data) {
  (void)level, (void)user_data;
  fprintf(stderr, "%s\n", message);
}

/* pxl_config.isolation of every loader: PXL_SOAK_ISOLATION none, modules (the default) or
 * all (Tests/soak/run.sh). */
static int32_t soak_isolation(void) {
  const char *name = getenv("PXL_SOAK_ISOLATION");
  if (!name || !*name || strcmp(name, "modules") == 0) return PXL_ISOLATION_MODULES;
  if (strcmp(name, "none") == 0) return PXL_ISOLATION_NONE;
  if (strcmp(name, "all") == 0) return PXL_ISOLATION_ALL;
  fprintf(stderr, "soak: PXL_SOAK_ISOLATION '%s': none, modules or all\n", name);
  exit(2);
}

static int last_storm_limit, last_per_host_limit, last_download_limit;
static pxl_loader *make_loader(uint64_t *rng, struct host_record *host) {
  pxl_config cfg;
  pxl_config_init(&cfg);
  cfg.log = log_to_stderr;
  cfg.memory_cache_bytes = 1 << 20;
  cfg.memory_cache_count = 16;
  cfg.disk_cache_bytes = 256 << 10;
  cfg.disk_cache_dir = disk_dir;
  cfg.max_concurrent_downloads = 2 + rnd(rng, 7);
  cfg.max_downloads_per_host = 1 + rnd(rng, 6);
  cfg.decode_threads = 1 + rnd(rng, 2);
  cfg.stall_timeout_ms = 1000;
  cfg.timeout_ms = 5000;
  cfg.connect_timeout_ms = 2000;
  cfg.max_body_bytes = 2 << 20;
  cfg.max_retries = 1;
  cfg.retry_base_delay_ms = 20;
  cfg.retry_max_delay_ms = 200;
  cfg.cancel_storm_limit = rnd(rng, 2) ? 16 : 0;
  if (getenv("PXL_SOAK_STORM_LIMIT")) cfg.cancel_storm_limit = atoi(getenv("PXL_SOAK_STORM_LIMIT"));
  if (getenv("PXL_SOAK_PER_HOST")) cfg.max_downloads_per_host = atoi(getenv("PXL_SOAK_PER_HOST"));
  if (getenv("PXL_SOAK_DOWNLOADS")) cfg.max_concurrent_downloads = atoi(getenv("PXL_SOAK_DOWNLOADS"));
  last_storm_limit = cfg.cancel_storm_limit;
  last_per_host_limit = cfg.max_downloads_per_host;
  last_download_limit = cfg.max_concurrent_downloads;
  cfg.ignore_http_freshness = rnd(rng, 2);
  cfg.request_hook = request_hook;
  cfg.request_hook_user_data = host;
  cfg.isolation = soak_isolation();
  pxl_loader *loader = NULL;
  pxl_status st = pxl_loader_new(&cfg, &loader);
  if (st != PXL_OK || loader == NULL) {
    fprintf(stderr, "soak: pxl_loader_new: %s\n", pxl_status_string(st));
    exit(2);
  }
  host_attach(loader, host, rng);
  return loader;
}

static pxl_queue *make_queue(void) {
  pxl_queue *q = NULL;
  pxl_status st = pxl_queue_new(&q);
  if (st != PXL_OK) {
    fprintf(stderr, "soak: pxl_queue_new: %s\n", pxl_status_string(st));
    exit(2);
  }
  return q;
}

static void slot_open(struct queue_slot *slot) {
  slot->queue = make_queue();
  slot->record = calloc(1, sizeof *slot->record);
  start_dispatcher(slot);
}

static void slot_free(struct queue_slot *slot) {
  pxl_queue_free(slot->queue);
  atomic_store(&slot->record->freed, 1);
  slot->queue = NULL;
}

static void loader_open(struct world *w, uint64_t *rng) {
  w->loader_record = calloc(1, sizeof *w->loader_record);
  w->loader_record->host = calloc(1, sizeof *w->loader_record->host);
  w->loader_record->host->loader = w->loader_record;
  w->loader_record->host->rng = rng_next(rng);
  w->loader = make_loader(rng, w->loader_record->host);
  w->storm_limit = last_storm_limit;
  w->per_host_limit = last_per_host_limit;
  w->download_limit = last_download_limit;
}

static void loader_close(struct world *w) {
  pxl_loader_free(w->loader);
  atomic_store(&w->loader_record->freed, 1);
  int destroys = atomic_load(&w->loader_record->host->destroys);
  if (destroys != 1) violation(INV_FETCHER, "fetcher destroyed %d times by pxl_loader_free", destroys);
  w->loader = NULL;
}

static void world_open(struct world *w, uint64_t *rng) {
  loader_open(w, rng);
  for (int i = 0; i < QUEUES_PER_WORLD; i++) {
    slot_open(&w->queues[i]);
  }
}

/* Checks that every request of the world had its one callback, and forgets them.
 * Write lock held, every queue and the loader freed. */
static void world_settle(struct world *w, const char *what) {
  pthread_mutex_lock(&w->reqs_lock);
  long missing = 0;
  for (struct req *r = w->all; r;) {
    struct req *next = r->next_all;
    if (atomic_load(&r->calls) != 1) {
      if (missing++ < 3)
        violation(INV_ONCE, "%s: token %" PRIu64 " had %d callbacks", what, atomic_load(&r->token), atomic_load(&r->calls));
    }
    r->magic = 0xDEADu;
    free(r);
    r = next;
  }
  w->all = NULL;
  w->settles++;
  pthread_mutex_unlock(&w->reqs_lock);
  long out = atomic_load(&w->outstanding);
  if (out != 0) violation(INV_ONCE, "%s: %ld requests outstanding after their queues and loader were freed", what, out);
  atomic_store(&w->outstanding, 0);
}

/* Frees the whole world in a random order, checks, and makes a new one. */
static void world_recycle(struct world *w, uint64_t *rng) {
  pthread_rwlock_wrlock(&w->lock);
  for (int i = 0; i < QUEUES_PER_WORLD; i++) stop_dispatcher(&w->queues[i]);
  int order = rnd(rng, 3);
  if (order == 0) { /* queues first: their callbacks run inside pxl_queue_free */
    for (int i = 0; i < QUEUES_PER_WORLD; i++) {
      slot_free(&w->queues[i]);
    }
    loader_close(w);
  } else if (order == 1) { /* loader first, then free the queues undrained */
    loader_close(w);
    for (int i = 0; i < QUEUES_PER_WORLD; i++) {
      slot_free(&w->queues[i]);
    }
  } else { /* loader first, drain the cancellations, then free the queues */
    loader_close(w);
    for (int i = 0; i < QUEUES_PER_WORLD; i++) {
      pxl_queue_dispatch(w->queues[i].queue, 0);
      slot_free(&w->queues[i]);
    }
  }
  world_settle(w, "world teardown");
  w->generation++;
  world_open(w, rng);
  atomic_fetch_add(&world_recycles, 1);
  pthread_rwlock_unlock(&w->lock);
}

/* Frees one queue (its requests end CANCELLED inside the free) and makes a new one. */
static void queue_recycle(struct world *w, uint64_t *rng) {
  pthread_rwlock_wrlock(&w->lock);
  struct queue_slot *slot = &w->queues[rnd(rng, QUEUES_PER_WORLD)];
  stop_dispatcher(slot);
  struct queue_record *old = slot->record;
  slot_free(slot);
  /* Every request of that queue has had its callback now. */
  pthread_mutex_lock(&w->reqs_lock);
  for (struct req *r = w->all; r; r = r->next_all)
    if (r->queue_record == old && atomic_load(&r->calls) != 1)
      violation(INV_ONCE, "queue free: token %" PRIu64 " had %d callbacks", atomic_load(&r->token), atomic_load(&r->calls));
  pthread_mutex_unlock(&w->reqs_lock);
  slot_open(slot);
  atomic_fetch_add(&queue_recycles, 1);
  pthread_rwlock_unlock(&w->lock);
}

/* Frees the loader under live queues (requests end CANCELLED at the next dispatch). */
static void loader_recycle(struct world *w, uint64_t *rng) {
  pthread_rwlock_wrlock(&w->lock);
  loader_close(w);
  loader_open(w, rng);
  w->generation++; /* tokens are unique per loader: the workers forget the old ones */
  atomic_fetch_add(&loader_recycles, 1);
  pthread_rwlock_unlock(&w->lock);
}

/* ---- workers ---- */

struct live { struct req *req; struct world *world; long generation; long settles; pxl_token token; };
struct prefetched { struct world *world; long generation; pxl_token token; double issued_ms; };

/* Cancels this worker's prefetches in w (read lock held) older than PREFETCH_LIFETIME_MS,
 * or the oldest when the ring is full; forgets those of loaders that are gone. The ring
 * is in issue order. */
static void expire_prefetches(struct prefetched *ring, int *head, int *count, struct world *w, int make_room) {
  double now = now_ms();
  while (*count > 0) {
    struct prefetched *p = &ring[*head];
    int gone = p->world->generation != p->generation;
    if (!gone && !(make_room && *count == PREFETCHES_PER_WORKER) && now - p->issued_ms < PREFETCH_LIFETIME_MS) break;
    if (!gone && p->world != w) break; /* cancelled when its world is next in hand */
    if (!gone) {
      pxl_status st = pxl_cancel(w->loader, p->token);
      if (st != PXL_OK && st != PXL_E_NOT_FOUND) violation(INV_RESULTS, "pxl_cancel of a prefetch returned %d", st);
    }
    *head = (*head + 1) % PREFETCHES_PER_WORKER;
    (*count)--;
    make_room = 0;
  }
}

static void *worker_main(void *arg) {
  long id = (long)arg;
  char name[32];
  snprintf(name, sizeof name, "worker-%ld", id);
  int hb = beat_register(name);
  uint64_t rng = 0x1234567ull * (uint64_t)(id + 1) ^ (uint64_t)time(NULL);
  struct live live[LIVE_PER_WORKER];
  static __thread struct prefetched prefetched[PREFETCHES_PER_WORKER];
  int prefetch_head = 0, prefetch_count = 0;
  int nlive = 0;
  char url[512];
  while (atomic_load(&running)) {
    beat(hb);
    struct world *w = &worlds[rnd(&rng, WORLDS)];
    pthread_rwlock_rdlock(&w->lock);
    /* Forget live entries of worlds (or generations) that are gone. */
    for (int i = 0; i < nlive;) {
      if (live[i].world->generation != live[i].generation) {
        if (live[i].world->settles == live[i].settles) atomic_fetch_sub(&live[i].req->in_live, 1);
        live[i] = live[--nlive];
      } else {
        i++;
      }
    }
    expire_prefetches(prefetched, &prefetch_head, &prefetch_count, w, 0);
    int action = rnd(&rng, 100);
    if (action < 55) {
      if (atomic_load(&w->outstanding) < MAX_OUTSTANDING_PER_WORLD) {
        pxl_request req;
        int fill;
        random_request(&rng, &req, url, sizeof url, &fill);
        int slot = rnd(&rng, QUEUES_PER_WORLD);
        struct req *r = calloc(1, sizeof *r);
        r->magic = REQ_MAGIC;
        r->queue_slot = slot;
        r->queue_record = w->queues[slot].record;
        r->loader_record = w->loader_record;
        atomic_store(&r->in_live, 1);
        r->world = w;
        r->generation = w->generation;
        snprintf(r->url, sizeof r->url, "%.199s", url);
        snprintf(r->flags, sizeof r->flags, "%s%s%s", req.flags & PXL_FLAG_RELOAD ? "R" : "",
                 req.flags & PXL_FLAG_CACHE_ONLY ? "C" : "", req.flags & PXL_FLAG_SKIP_MEMORY_CACHE ? "S" : "");
        r->max_w = req.width;
        r->max_h = req.height;
        r->fill = fill;
        r->issued_ms = now_ms();
        atomic_store(&r->done_status, -1);
        /* Counted before the call: the callback may run (and decrement) before it returns. */
        atomic_fetch_add(&w->outstanding, 1);
        pthread_mutex_lock(&w->reqs_lock);
        r->next_all = w->all;
        w->all = r;
        pthread_mutex_unlock(&w->reqs_lock);
        pxl_token token = 0;
        pxl_status st = pxl_load(w->loader, &req, w->queues[slot].queue, on_result, r, &token);
        if (st == PXL_OK) {
          atomic_store(&r->token, token);
          atomic_fetch_add(&accepted, 1);
          if (nlive < LIVE_PER_WORKER) {
            live[nlive++] = (struct live){r, w, w->generation, w->settles, token};
          } else {
            int victim = rnd(&rng, LIVE_PER_WORKER);
            atomic_fetch_sub(&live[victim].req->in_live, 1);
            live[victim] = (struct live){r, w, w->generation, w->settles, token};
          }
        } else {
          atomic_store(&r->in_live, 0);
          atomic_store(&r->finished, 1);
          /* Refused: no callback will come; mark it as called so the settle check agrees. */
          atomic_fetch_add(&refused, 1);
          atomic_store(&r->calls, 1);
          atomic_fetch_sub(&w->outstanding, 1);
          violation(INV_RESULTS, "pxl_load refused %s: %s", url, pxl_status_string(st));
        }
      }
    } else if (action < 72 && nlive > 0) {
      int i = rnd(&rng, nlive);
      if (live[i].world == w) {
        struct req *r = live[i].req;
        pxl_status st = pxl_cancel(w->loader, live[i].token);
        if (st == PXL_OK) {
          atomic_store(&r->cancelled_ok, 1);
          atomic_fetch_add(&cancel_ok, 1);
          int done = atomic_load(&r->done_status);
          if (done != -1 && done != PXL_E_CANCELLED)
            violation(INV_CANCEL, "pxl_cancel returned OK after the callback had reported %d", done);
        } else if (st == PXL_E_NOT_FOUND) {
          atomic_fetch_add(&cancel_notfound, 1);
        } else {
          violation(INV_RESULTS, "pxl_cancel returned %d", st);
        }
        atomic_fetch_sub(&r->in_live, 1);
        live[i] = live[--nlive];
      }
    } else if (action < 80 && nlive > 0) {
      int i = rnd(&rng, nlive);
      if (live[i].world == w) {
        pxl_status st = pxl_set_priority(w->loader, live[i].token, rnd(&rng, 400) - 200);
        if (st != PXL_OK && st != PXL_E_NOT_FOUND) violation(INV_RESULTS, "pxl_set_priority returned %d", st);
        atomic_fetch_add(&prio_calls, 1);
      }
    } else if (action < 92) {
      pxl_request req;
      int fill;
      random_request(&rng, &req, url, sizeof url, &fill);
      pxl_image *img = (pxl_image *)1;
      pxl_status st = pxl_lookup(w->loader, &req, &img);
      atomic_fetch_add(&lookups, 1);
      if (st == PXL_OK) {
        atomic_fetch_add(&lookup_hits, 1);
        if (img == NULL || pxl_image_width(img) <= 0) violation(INV_RESULTS, "pxl_lookup OK without an image");
        pxl_image_release(img);
      } else if (st != PXL_E_NOT_FOUND || img != NULL) {
        violation(INV_RESULTS, "pxl_lookup returned %d with image %p", st, (void *)img);
      }
    } else if (action < 96) {
      pxl_request reqs[4];
      char urls[4][512];
      int fill;
      for (int i = 0; i < 4; i++) random_request(&rng, &reqs[i], urls[i], sizeof urls[i], &fill);
      pxl_token tokens[4];
      pxl_status st = pxl_prefetch(w->loader, reqs, 4, tokens);
      if (st != PXL_OK) violation(INV_RESULTS, "pxl_prefetch returned %d", st);
      atomic_fetch_add(&prefetches, 4);
      int dropped = rnd(&rng, 2) ? rnd(&rng, 4) : -1;
      if (dropped >= 0) pxl_cancel(w->loader, tokens[dropped]);
      for (int i = 0; i < 4; i++) {
        if (i == dropped || tokens[i] == 0) continue;
        expire_prefetches(prefetched, &prefetch_head, &prefetch_count, w, 1);
        if (prefetch_count == PREFETCHES_PER_WORKER) break; /* the oldest is another world's: let this one run */
        prefetched[(prefetch_head + prefetch_count) % PREFETCHES_PER_WORKER] =
            (struct prefetched){w, w->generation, tokens[i], now_ms()};
        prefetch_count++;
      }
    } else if (action < 97 && rnd(&rng, 200) == 0) { /* rare: it ends hundreds of requests */
      pxl_cancel_all(w->loader, w->queues[rnd(&rng, QUEUES_PER_WORLD)].queue);
      atomic_fetch_add(&cancel_alls, 1);
    }
    pthread_rwlock_unlock(&w->lock);
    sleep_ms(1 + rnd(&rng, 3));
  }
  return NULL;
}

/* ---- tables ---- */

struct table_state {
  struct world *world;
  int64_t first;
  int32_t count;
  atomic_int freed;
};

static int table_request(int64_t row, pxl_request *request, void *user_data) {
  struct table_state *t = user_data;
  static __thread char url[256];
  (void)t;
  if (row % 5 == 2) /* a host's fetcher's rows, slow ones among them */
    snprintf(url, sizeof url, "soak:%s?row=%" PRId64 "&m=%d", row % 3 ? "gradient.jpg" : "medium.jpg", row % 300, (int)(row % 4));
  else
    snprintf(url, sizeof url, "%s/%s?row=%" PRId64, nginx_url, row % 7 == 3 ? "slow/medium.jpg" : "gradient.jpg", row % 300);
  request->url = url;
  request->width = 64;
  request->height = 64;
  request->mode = PXL_MODE_FILL;
  return row % 50 != 49; /* some rows have no image */
}

static void table_row(int64_t row, const pxl_result *result, void *user_data) {
  struct table_state *t = user_data;
  atomic_fetch_add(&table_rows, 1);
  if (atomic_load(&t->freed)) violation(INV_TABLE, "row %" PRId64 " delivered after pxl_table_free", row);
  if (row < t->first || row >= t->first + t->count)
    violation(INV_TABLE, "row %" PRId64 " delivered while rows %" PRId64 "..%" PRId64 " are visible", row, t->first,
              t->first + t->count - 1);
  if (result->status == PXL_E_CANCELLED) violation(INV_TABLE, "row %" PRId64 " reported CANCELLED", row);
  if ((result->status == PXL_OK) != (result->image != NULL))
    violation(INV_TABLE, "row %" PRId64 ": status %d with image %p", row, result->status, (void *)result->image);
  if (result->status == PXL_OK) {
    atomic_fetch_add(&table_images, 1);
    if (pxl_image_width(result->image) > 64 || pxl_image_height(result->image) > 64)
      violation(INV_TABLE, "row %" PRId64 " image %dx%d for 64x64 fill", row, pxl_image_width(result->image),
                pxl_image_height(result->image));
  }
}

static void *table_main(void *arg) {
  struct world *w = arg;
  char name[32];
  snprintf(name, sizeof name, "table-%d", w->index);
  int hb = beat_register(name);
  uint64_t rng = 0xABCDEFull + (uint64_t)w->index;
  pxl_queue *queue = make_queue();
  struct table_state *state = NULL;
  pxl_table *table = NULL;
  long generation = -1;
  int direction = 1;
  while (atomic_load(&running)) {
    beat(hb);
    pthread_rwlock_rdlock(&w->lock);
    if (table == NULL || generation != w->generation || rnd(&rng, 400) == 0) {
      /* A new loader (or now and then, just a new table): the old table is freed after its
       * loader (allowed: "tables and their loader may be freed in any order"). */
      if (table) {
        pxl_table_free(table);
        atomic_store(&state->freed, 1);
        pxl_queue_dispatch(queue, 0); /* the cancellations of the old table's requests */
        /* state is kept (a few bytes per table): a row_fn after the free must find it. */
        atomic_fetch_add(&table_recycles, 1);
      }
      state = calloc(1, sizeof *state);
      state->world = w;
      state->count = 0;
      pxl_table_config tc;
      pxl_table_config_init(&tc);
      if (pxl_table_new(w->loader, queue, &tc, 100000, table_request, table_row, state, &table) != PXL_OK) {
        fprintf(stderr, "soak: pxl_table_new failed\n");
        exit(2);
      }
      generation = w->generation;
    }
    /* Scroll: mostly small steps, sometimes a fling, sometimes a reversal. */
    int step = rnd(&rng, 10) == 0 ? 40 + rnd(&rng, 200) : rnd(&rng, 4);
    if (rnd(&rng, 30) == 0) direction = -direction;
    int64_t first = state->first + direction * step;
    if (first < 0) { first = 0; direction = 1; }
    if (first > 99000) { first = 99000; direction = -1; }
    state->first = first;
    state->count = 6 + rnd(&rng, 6);
    if (pxl_table_set_visible(table, state->first, state->count, direction) != PXL_OK)
      violation(INV_TABLE, "pxl_table_set_visible failed");
    if (rnd(&rng, 200) == 0) pxl_table_cancel_all(table);
    pxl_queue_dispatch(queue, 0);
    pthread_rwlock_unlock(&w->lock);
    /* A frame: wait for completions, then drain them (under the world lock again, since a
     * row callback is the table's business and the table uses the loader). */
    pxl_queue_wait(queue, 16);
    pthread_rwlock_rdlock(&w->lock);
    if (generation == w->generation) pxl_queue_dispatch(queue, 0);
    pthread_rwlock_unlock(&w->lock);
  }
  pthread_rwlock_rdlock(&w->lock);
  if (table) {
    pxl_table_free(table);
    atomic_store(&state->freed, 1);
  }
  pxl_queue_free(queue);
  pthread_rwlock_unlock(&w->lock);
  return NULL;
}

/* ---- the recycler ---- */

static void *recycler_main(void *arg) {
  (void)arg;
  int hb = beat_register("recycler");
  uint64_t rng = 0xFEEDull ^ (uint64_t)time(NULL);
  double next = now_ms() + 3000 + rnd(&rng, 4000);
  int recycle = getenv("PXL_SOAK_RECYCLE") == NULL || atoi(getenv("PXL_SOAK_RECYCLE")) != 0;
  while (atomic_load(&running)) {
    beat(hb);
    sleep_ms(100);
    if (!recycle || now_ms() < next) continue;
    next = now_ms() + 3000 + rnd(&rng, 6000);
    struct world *w = &worlds[rnd(&rng, WORLDS)];
    switch (rnd(&rng, 3)) {
    case 0: world_recycle(w, &rng); break;
    case 1: queue_recycle(w, &rng); break;
    default: loader_recycle(w, &rng); break;
    }
  }
  return NULL;
}

/* ---- watchdog, RSS ---- */

#define MAX_SAMPLES 100000
static long rss_kb[MAX_SAMPLES];
static double rss_at[MAX_SAMPLES];
static int rss_samples;
static long peak_rss_kb;

static long current_rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long size = 0, resident = 0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void summary(int watchdog_fired);

/* A request that stays its world's oldest outstanding one for STUCK_MS (see "stuck"). */
static void scan_stuck(void) {
  double now = now_ms();
  for (int i = 0; i < WORLDS; i++) {
    struct world *w = &worlds[i];
    if (pthread_rwlock_tryrdlock(&w->lock) != 0) continue;
    pthread_mutex_lock(&w->reqs_lock);
    struct req *oldest = NULL;
    for (struct req **link = &w->all; *link;) {
      struct req *r = *link;
      if (atomic_load(&r->finished) && atomic_load(&r->in_live) == 0) {
        /* Called back and no worker holds it: done with (keeps the run's memory flat). */
        *link = r->next_all;
        r->magic = 0xDEADu;
        free(r);
        continue;
      }
      if (atomic_load(&r->calls) == 0 && atomic_load(&r->token) != 0 &&
          (oldest == NULL || r->issued_ms < oldest->issued_ms))
        oldest = r;
      link = &r->next_all;
    }
    if (oldest == NULL) {
      w->oldest_token = 0;
    } else if (atomic_load(&oldest->token) != w->oldest_token || oldest->issued_ms != w->oldest_issued_ms) {
      w->oldest_token = atomic_load(&oldest->token);
      w->oldest_issued_ms = oldest->issued_ms;
      w->oldest_since_ms = now;
    } else if (now - w->oldest_since_ms > STUCK_MS) {
      violation(INV_STUCK, "token %" PRIu64 " the oldest of world %d for %.0f s, outstanding for %.0f s (%ld "
                "outstanding, max_concurrent_downloads %d, max_downloads_per_host %d, cancel_storm_limit %d; "
                "flags %s): %s", w->oldest_token, w->index, (now - w->oldest_since_ms) / 1000,
                (now - oldest->issued_ms) / 1000, atomic_load(&w->outstanding), w->download_limit,
                w->per_host_limit, w->storm_limit, oldest->flags, oldest->url);
      w->oldest_since_ms = now; /* report it once a minute at most */
    }
    pthread_mutex_unlock(&w->reqs_lock);
    pthread_rwlock_unlock(&w->lock);
  }
}

static void *watchdog_main(void *arg) {
  (void)arg;
  long last_report = -1;
  while (atomic_load(&running)) {
    sleep_ms(1000);
    double now = now_ms();
    long kb = current_rss_kb();
    if (kb > peak_rss_kb) peak_rss_kb = kb;
    if (rss_samples < MAX_SAMPLES) {
      rss_kb[rss_samples] = kb;
      rss_at[rss_samples] = (now - start_ms) / 1000;
      rss_samples++;
    }
    for (int i = 0; i < atomic_load(&beat_count); i++) {
      if (!atomic_load(&beats[i].used)) continue;
      double age = now - atomic_load(&beats[i].at);
      if (age > WATCHDOG_MS) {
        violation(INV_WATCHDOG, "thread %s made no progress for %.1f s", beats[i].name, age / 1000);
        summary(1);
        fflush(stdout);
        _exit(1);
      }
    }
    scan_stuck();
    long elapsed = (long)((now - start_ms) / 1000);
    /* A progress line every tenth of the run (between 10 s and a minute apart). */
    long every = (long)(run_seconds / 10) < 10 ? 10 : (long)(run_seconds / 10) > 60 ? 60 : (long)(run_seconds / 10);
    if (elapsed / every != last_report && elapsed >= every) {
      last_report = elapsed / every;
      printf("[%4ld s] requests %ld, callbacks %ld, table rows %ld, recycles %ld/%ld/%ld, RSS %ld KiB\n", elapsed,
             atomic_load(&accepted), atomic_load(&callbacks), atomic_load(&table_rows), atomic_load(&world_recycles),
             atomic_load(&queue_recycles), atomic_load(&loader_recycles), kb);
      fflush(stdout);
    }
  }
  return NULL;
}

/* Peak RSS of the samples taken between from and to seconds. */
static long peak_between(double from, double to) {
  long peak = 0;
  for (int i = 0; i < rss_samples; i++)
    if (rss_at[i] >= from && rss_at[i] <= to && rss_kb[i] > peak) peak = rss_kb[i];
  return peak;
}

static int rss_verdict_done;
/* Short runs (make test's minute) end inside the warm-up: the verdict needs a long run. */
#define RSS_JUDGED_FROM_S 600
static int rss_not_judged;
static void check_rss(void) {
  if (rss_verdict_done) return;
  rss_verdict_done = 1;
  /* Warm-up: a fifth of the run (caches fill, threads and connection pools start, the
   * allocator grows its arenas). Then the quarter after warm-up against the last quarter. */
  double warm = run_seconds / 5, early_to = warm + run_seconds / 4, late_from = run_seconds * 3 / 4;
  long early = peak_between(warm, early_to), late = peak_between(late_from, run_seconds + 5);
  long slack = early * 15 / 100 > 16384 ? early * 15 / 100 : 16384;
  printf("RSS: peak %ld KiB; after warm-up (%.0f-%.0f s) %ld KiB; last quarter (%.0f s-end) %ld KiB; "
         "allowed %ld KiB (+max(16 MiB, 15%%))\n",
         peak_rss_kb, warm, early_to, early, late_from, late, early + slack);
  if (run_seconds < RSS_JUDGED_FROM_S) {
    printf("RSS not judged: the allocator and caches still grow for the first minutes (measured: "
           "40 -> 80 MiB over 2-3 min, then flat); runs of %d s or more judge it\n", RSS_JUDGED_FROM_S);
    rss_not_judged = 1;
  } else if (early == 0 || late == 0) violation(INV_RSS, "too few RSS samples");
  else if (late > early + slack) violation(INV_RSS, "RSS grew from %ld KiB to %ld KiB", early, late);
}

static void summary(int watchdog_fired) {
  static const char *status_names[23] = {"OK", "INVALID_ARGUMENT", "MALFORMED_URL", "SCHEME_NOT_ALLOWED", "DNS",
                                         "CONNECT", "TLS", "TIMEOUT", "HTTP", "BODY_TOO_LARGE", "NOT_AN_IMAGE",
                                         "CORRUPT_IMAGE", "TOO_MANY_PIXELS", "CANCELLED", "LOADER_CLOSED", "NETWORK",
                                         "UNSUPPORTED_IMAGE", "NO_MEMORY", "NOT_FOUND", "IO", "TOO_MANY_REDIRECTS",
                                         "NOT_CACHED", "UNSUPPORTED"};
  if (!watchdog_fired) check_rss();
  printf("duration %.1f s\n", (now_ms() - start_ms) / 1000);
  printf("requests accepted %ld, refused %ld, callbacks %ld\n", atomic_load(&accepted), atomic_load(&refused),
         atomic_load(&callbacks));
  printf("results by status:");
  for (int i = 0; i < 32; i++) {
    long n = atomic_load(&by_status[i]);
    if (n) printf(" %s=%ld", i < 22 ? status_names[i] : "?", n);
  }
  printf("\n");
  printf("cancels OK %ld, NOT_FOUND %ld; priority changes %ld; lookups %ld (hits %ld); prefetches %ld; "
         "cancel_all %ld\n",
         atomic_load(&cancel_ok), atomic_load(&cancel_notfound), atomic_load(&prio_calls), atomic_load(&lookups),
         atomic_load(&lookup_hits), atomic_load(&prefetches), atomic_load(&cancel_alls));
  printf("table rows delivered %ld (images %ld); tables recreated %ld\n", atomic_load(&table_rows),
         atomic_load(&table_images), atomic_load(&table_recycles));
  printf("longest wait for a result %.1f s; results after more than %.0f s in a backlog: %ld\n",
         atomic_load(&longest_wait_ms) / 1000.0, STUCK_MS / 1000, atomic_load(&late_results));
  printf("recycled: worlds %ld, queues %ld, loaders %ld\n", atomic_load(&world_recycles),
         atomic_load(&queue_recycles), atomic_load(&loader_recycles));
  printf("fetcher: starts %ld, cancels %ld, finishes %ld (%ld after the fetch ended); hook: calls %ld, answered %ld "
         "(%ld after the call ended)\n", atomic_load(&fetch_starts), atomic_load(&fetch_cancels),
         atomic_load(&fetch_finishes), atomic_load(&fetch_finish_late), atomic_load(&hook_calls),
         atomic_load(&hook_answered), atomic_load(&hook_answered_late));
  printf("peak RSS %ld KiB\n", peak_rss_kb);
  int passed = 0, failed = 0;
  for (int i = 0; i < INV_COUNT; i++) {
    long n = atomic_load(&violations[i]);
    if (i == INV_RSS && rss_not_judged) {
      printf("  --    %s (not judged in a run under %d s)\n", invariant_name[i], RSS_JUDGED_FROM_S);
      continue;
    }
    if (i == INV_WATCHDOG && !watchdog_fired && n == 0) {
      printf("  ok    %s\n", invariant_name[i]);
      passed++;
      continue;
    }
    if (n) printf("  FAIL  %s (%ld violations)\n", invariant_name[i], n), failed++;
    else printf("  ok    %s\n", invariant_name[i]), passed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: soak NGINX_URL FAULT_URL DISK_DIR SECONDS\n");
    return 2;
  }
  nginx_url = argv[1];
  fault_url = argv[2];
  disk_dir = argv[3];
  run_seconds = atof(argv[4]);
  if (getenv("PXL_SOAK_STUCK_MS")) STUCK_MS = atof(getenv("PXL_SOAK_STUCK_MS"));
  if (run_seconds < 10) run_seconds = 10;
  setvbuf(stdout, NULL, _IOLBF, 0);
  {
    /* The isolation every loader runs with, and the layers of its workers (a loader of its
     * own: pxl_loader_isolation starts a worker). ALL without a worker would soak the
     * in-process decode under ALL's name: stop. */
    pxl_config cfg;
    pxl_config_init(&cfg);
    cfg.isolation = soak_isolation();
    pxl_loader *probe = NULL;
    char layers[128] = "";
    if (pxl_loader_new(&cfg, &probe) != PXL_OK) return 2;
    pxl_loader_isolation(probe, layers, sizeof layers);
    pxl_loader_free(probe);
    printf("soak: isolation %s, workers' layers: %s\n", getenv("PXL_SOAK_ISOLATION") ? getenv("PXL_SOAK_ISOLATION") : "modules",
           layers);
    if (cfg.isolation == PXL_ISOLATION_ALL && strcmp(layers, "none") == 0) {
      fprintf(stderr, "soak: PXL_SOAK_ISOLATION=all, but no decode worker starts (pixload/ beside the library?)\n");
      return 2;
    }
  }
  start_ms = now_ms();
  uint64_t rng = (uint64_t)time(NULL);
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  /* Writers (the recycler) must not starve behind a stream of readers (the workers). */
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  for (int i = 0; i < WORLDS; i++) {
    worlds[i].index = i;
    pthread_rwlock_init(&worlds[i].lock, &attr);
    pthread_mutex_init(&worlds[i].reqs_lock, NULL);
    world_open(&worlds[i], &rng);
  }
  pthread_t workers[WORKERS], tables[WORLDS], recycler, watchdog, host;
  soak_files_load();
  pthread_create(&host, NULL, host_main, NULL);
  pthread_create(&watchdog, NULL, watchdog_main, NULL);
  for (long i = 0; i < WORKERS; i++) pthread_create(&workers[i], NULL, worker_main, (void *)i);
  for (int i = 0; i < WORLDS; i++) pthread_create(&tables[i], NULL, table_main, &worlds[i]);
  pthread_create(&recycler, NULL, recycler_main, NULL);

  while (now_ms() - start_ms < run_seconds * 1000) sleep_ms(200);
  /* The RSS verdict covers the run itself, before the teardown frees everything. */
  check_rss();
  atomic_store(&running, 0);
  pthread_join(recycler, NULL);
  for (int i = 0; i < WORKERS; i++) pthread_join(workers[i], NULL);
  for (int i = 0; i < WORLDS; i++) pthread_join(tables[i], NULL);
  pthread_join(watchdog, NULL);
  /* The end: free everything (half the worlds queue-first, half loader-first) and check
   * that every accepted request had its one callback. */
  for (int i = 0; i < WORLDS; i++) {
    struct world *w = &worlds[i];
    pthread_rwlock_wrlock(&w->lock);
    for (int q = 0; q < QUEUES_PER_WORLD; q++) stop_dispatcher(&w->queues[q]);
    if (i % 2) loader_close(w);
    for (int q = 0; q < QUEUES_PER_WORLD; q++) slot_free(&w->queues[q]);
    if (i % 2 == 0) loader_close(w);
    world_settle(w, "final teardown");
    pthread_rwlock_unlock(&w->lock);
  }
  /* Every loader is gone: the host finishes the fetches it still holds and answers its
   * kept hook calls (late, so PXL_E_CANCELLED), then every start and call had its answer. */
  atomic_store(&host_stop, 1);
  pthread_join(host, NULL);
  if (atomic_load(&fetch_starts) != atomic_load(&fetch_finishes))
    violation(INV_FETCHER, "%ld fetches started, %ld finished", atomic_load(&fetch_starts), atomic_load(&fetch_finishes));
  if (atomic_load(&hook_calls) != atomic_load(&hook_answered))
    violation(INV_HOOK, "%ld hook calls, %ld answered", atomic_load(&hook_calls), atomic_load(&hook_answered));
  if (atomic_load(&accepted) != atomic_load(&callbacks))
    violation(INV_ONCE, "%ld accepted, %ld callbacks", atomic_load(&accepted), atomic_load(&callbacks));
  summary(0);
  long total = 0;
  for (int i = 0; i < INV_COUNT; i++) total += atomic_load(&violations[i]);
  return total ? 1 : 0;
}
