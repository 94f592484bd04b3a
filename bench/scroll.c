/*
 * bench/scroll.c: the scroll benchmark. One scripted scrolling session over a table of
 * thumbnails, played three times in the same run, once per strategy:
 *
 *   a  no cancellation: pxl_load each row as it becomes visible, never cancel (what a
 *      newcomer writes first); a result is drawn only if its row is still on screen
 *   b  per-row cancel: pxl_lookup, else pxl_load at PXL_PRIORITY_VISIBLE when a row
 *      enters the screen, pxl_cancel when it leaves; no prefetch
 *   c  the table object: pxl_table_set_visible once per frame that moves
 *
 *   scroll BASE_URL DATA_DIR ACCESS_LOG [--rows N] [--runs N] [--tag TAG] [--check target|clean]
 *          [--trace FILE] [--isolation none|modules|all[,...]]
 *
 * --isolation (pxl_config.isolation, default modules): with a list, each run plays the
 * session under each in turn (interleaved), and the medians are printed per isolation;
 * the trace is the first one's. An isolation whose loader starts no worker under ALL
 * stops the program (it would measure the in-process decode under ALL's name).
 *
 * Exit status 1 if a run drew an image for a row not on screen or missed a final-screen
 * image (strategy a's final screen excepted: on a slow network it waits behind every load
 * a never cancelled, a is made to show that), or (--check target, the default) missed one of issue 17's targets: the table
 * leaves no more visits undrawn than per-row cancel, its p95 time to visible is no worse
 * than per-row cancel's, and it wastes under 10% of the bytes strategy a wastes. After
 * the runs, the medians over them with their range (min-max).
 *
 * DATA_DIR/index.txt lists the photos (scripts/photos.sh), served by nginx at BASE_URL
 * with its access log at ACCESS_LOG ("$request_uri $status $body_bytes_sent
 * $connection", scripts/nginx.sh). Row r shows photo r % photos, fetched as
 * BASE_URL/PHOTO?bench=TAG-RUN&s=STRATEGY&row=r with cache key "row-r": every row is a
 * distinct image to the library, and the access log tells each strategy's and each
 * row's requests apart.
 *
 * The session (1,000 rows, 8 visible, 16 ms frames): a slow scroll over the first rows,
 * a fling that starts at 10 rows per frame and decelerates to a stop near row 600, a
 * pause, a scroll back up over 40 rows, and a jump to the end, held until drawn.
 *
 * What it reports, per strategy:
 *  - time to visible (ms) of rows that stay on screen: from a row entering the screen
 *    to its thumbnail drawn, over every visit (a stretch of time a row is continuously
 *    on screen) that lasts at least STAY_MS; a visit whose row is never drawn counts as
 *    infinitely slow ("undrawn"); median and p95;
 *  - wasted bytes: body_bytes_sent at the server for rows never drawn in the session
 *    (and the number of those rows); total bytes downloaded;
 *  - requests the server saw, and how many of them were cut (fewer bytes than the file);
 *  - loads started and cancelled, as the library counts them (pxl_load / pxl_cancel
 *    returning PXL_OK; pxl_table_get_stats for the table);
 *  - memory-cache hits when scrolling back: rows entering the screen during the scroll
 *    back that were drawn from memory, of all rows entering then.
 * Strategy a never cancels, so every load it made would run to its end: its waste is the
 * whole file of every row it requested and never drew, also of loads still under way when
 * the session ended (the benchmark does not wait for them).
 *
 * --trace FILE writes the first run's events, per strategy and row, one a line, tab-
 * separated: STRATEGY ROW EVENT MS [DETAIL], MS from that strategy's session start:
 *   visit START END   a stretch of time the row was on screen (END: when it left, or the
 *                     session's end), MS = START
 *   start             a: pxl_load; b: pxl_load (not a pxl_lookup hit); c: the table asked
 *                     for the row's request (it does before a load, or a memory lookup)
 *   cancel            b: pxl_cancel of the row's load
 *   finish STATUS     a, b: the load's callback (ok, cancelled or the error's status);
 *                     the table reports results of visible rows only: c has none
 *   preview           c: a progressive JPEG's preview of a visible row
 *   drawn memory|load the row's image reached the screen (from memory at once, or loaded)
 *   bytes SENT CUT    after the session: what nginx sent for the row (MS 0), CUT
 *                     responses cut short
 * bench/scroll_plot.py draws it (bench/scroll.sh: build/bench-scroll-CONDITION.png).
 *
 * SCROLL_DEBUG=1 prints every visit that stayed and was drawn later than SCROLL_DEBUG_MS
 * (default 25) or never, and SCROLL_WASTED_ROWS=1 the bytes of every row never drawn, on
 * stderr.
 *
 * Build: cc -O2 -std=c11 -Iinclude bench/scroll.c -Lbuild/lib -lpixload -lm
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pixload.h"
#include "scroll_script.h"

enum {
  VISIBLE = 8,
  THUMB = 150,
  FRAME_MS = 16,
  STAY_MS = 300, /* a visit this long is a row that "stays on screen" */
  A_DRAIN_MS = 180000, /* how long a's loads may take to finish after the session */
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* ---- the table's rows ---- */

struct photo {
  char path[256]; /* relative to BASE_URL */
  long size;      /* bytes on disk: what a complete response sends */
};

struct row {
  int visible;
  int drawn_this_visit;
  int ever_drawn;
  double visit_start;
  double drawn_at;
  int previewed_this_visit; /* c: a table preview (progressive JPEG) came before the image */
  double preview_at;
  pxl_token token; /* b: the pending load of this row, or 0 */
  int requested;   /* a: pxl_load was called for it */
};

/* ---- one strategy's run ---- */

struct samples {
  double *v;
  size_t n, cap;
};

static void add_sample(struct samples *s, double v) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    double *grown = realloc(s->v, cap * sizeof *grown);
    if (!grown) return;
    s->v = grown;
    s->cap = cap;
  }
  s->v[s->n++] = v;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest rank; sorts. INFINITY stands for undrawn visits. */
static double percentile(struct samples *s, double p) {
  if (s->n == 0) return NAN;
  qsort(s->v, s->n, sizeof *s->v, compare_doubles);
  size_t rank = (size_t)ceil(p * (double)s->n);
  return s->v[rank ? rank - 1 : 0];
}

struct result {
  char key;
  const char *name;
  double ttv_median, ttv_p95;
  size_t stays, undrawn;     /* visits >= STAY_MS, of which never drawn */
  long long wasted_bytes, total_bytes;
  int wasted_rows;           /* rows with bytes at the server, never drawn */
  int requests, cut;         /* at the server */
  uint64_t started, cancelled; /* as the library counts */
  int back_entered, back_hits;
  int stale;                 /* an image for a row not on screen reached the draw code */
  int final_drawn;
  int outstanding;           /* a, b: loads still waiting for their callback at the end */
  int undrained;             /* a: loads still unfinished A_DRAIN_MS after the end */
  /* c: visits that stayed, drawn, with a preview first: medians of the time to the first
   * preview and to the image (NAN when none). */
  size_t previewed;
  double preview_median, final_median;
};

struct bench {
  const char *base_url;
  struct photo *photos;
  int photo_count;
  int rows;
  char strategy;
  char tag[64];
  pxl_loader *loader;
  pxl_queue *queue;
  pxl_table *table;
  struct row *row;
  int top;           /* -1 before the first frame */
  int direction;     /* of the last set_visible (c) */
  struct scroll_script script;
  int outstanding;   /* a, b: loads whose callback has not run */
  struct samples ttv;
  struct samples preview_ms, final_ms; /* c: visits with a preview (see struct result) */
  struct result res;
  char url[512];
  char key[64];
  FILE *trace;       /* --trace, first run only; NULL otherwise */
  double t0;         /* the session's start */
};

/* One trace line (see --trace): STRATEGY ROW EVENT MS[ DETAIL]. */
static void trace(struct bench *b, int r, const char *event, double at, const char *detail) {
  if (!b->trace) return;
  fprintf(b->trace, "%c\t%d\t%s\t%.1f%s%s\n", b->strategy, r, event, at - b->t0, detail ? "\t" : "", detail ? detail : "");
}

static void row_url(struct bench *b, int r) {
  const struct photo *p = &b->photos[r % b->photo_count];
  snprintf(b->url, sizeof b->url, "%s/%s?bench=%s&s=%c&row=%d", b->base_url, p->path, b->tag,
           b->strategy, r);
  snprintf(b->key, sizeof b->key, "row-%d", r);
}

static void fill_request(struct bench *b, int r, pxl_request *req) {
  row_url(b, r);
  req->url = b->url;
  req->cache_key = b->key;
  req->width = THUMB;
  req->height = THUMB;
  req->mode = PXL_MODE_FILL;
  req->format = PXL_FORMAT_BGRA8_PREMUL;
  req->priority = PXL_PRIORITY_VISIBLE;
}

static void draw(struct bench *b, int r, int from_memory) {
  struct row *row = &b->row[r];
  if (!row->visible) {
    b->res.stale++;
    return;
  }
  if (b->script.step == STEP_BACK && !row->drawn_this_visit && from_memory &&
      now_ms() - row->visit_start < FRAME_MS * 2)
    b->res.back_hits++;
  if (row->drawn_this_visit) return;
  row->drawn_this_visit = 1;
  row->ever_drawn = 1;
  row->drawn_at = now_ms();
  trace(b, r, "drawn", row->drawn_at, from_memory ? "memory" : "load");
}

static void end_visit(struct bench *b, int r, double at) {
  struct row *row = &b->row[r];
  if (b->trace) {
    char detail[64];
    snprintf(detail, sizeof detail, "%.1f\t%.1f", row->visit_start - b->t0, at - b->t0);
    trace(b, r, "visit", row->visit_start, detail);
  }
  if (at - row->visit_start < STAY_MS) return;
  b->res.stays++;
  if (row->drawn_this_visit) {
    add_sample(&b->ttv, row->drawn_at - row->visit_start);
    if (row->previewed_this_visit) {
      add_sample(&b->preview_ms, row->preview_at - row->visit_start);
      add_sample(&b->final_ms, row->drawn_at - row->visit_start);
    }
    if (getenv("SCROLL_DEBUG") && row->drawn_at - row->visit_start > (getenv("SCROLL_DEBUG_MS") ? atof(getenv("SCROLL_DEBUG_MS")) : 25))
      fprintf(stderr, "  %c: row %d drawn after %.0f ms (step %d, photo %s)\n", b->strategy, r,
              row->drawn_at - row->visit_start, b->script.step, b->photos[r % b->photo_count].path);
  } else {
    b->res.undrawn++;
    add_sample(&b->ttv, INFINITY);
    if (getenv("SCROLL_DEBUG"))
      fprintf(stderr, "  %c: row %d undrawn for %.0f ms (step %d, photo %s, drawn before: %d)\n",
              b->strategy, r, at - row->visit_start, b->script.step, b->photos[r % b->photo_count].path,
              row->ever_drawn);
  }
}

/* a and b: the user_data of one pxl_load. */
struct pending {
  struct bench *bench;
  int row;
};

static void on_load(pxl_token token, const pxl_result *result, void *user_data) {
  struct pending *p = user_data;
  struct bench *b = p->bench;
  b->outstanding--;
  struct row *row = &b->row[p->row];
  trace(b, p->row, "finish", now_ms(), result->status == PXL_OK ? "ok"
        : result->status == PXL_E_CANCELLED ? "cancelled" : pxl_status_string(result->status));
  if (b->strategy == 'b') {
    if (row->token == token) row->token = 0;
    else if (result->status == PXL_OK) b->res.stale++; /* cancelled, yet an image: never */
    else goto done;
  }
  if (result->status == PXL_OK && row->visible) draw(b, p->row, result->source == PXL_SOURCE_MEMORY);
  else if (result->status != PXL_OK && result->status != PXL_E_CANCELLED)
    fprintf(stderr, "scroll: row %d: %s\n", p->row, result->message);
done:
  free(p);
}

static void start_load(struct bench *b, int r) {
  pxl_request req;
  pxl_request_init(&req);
  fill_request(b, r, &req);
  struct pending *p = malloc(sizeof *p);
  if (!p) return;
  *p = (struct pending){b, r};
  pxl_token token = 0;
  if (pxl_load(b->loader, &req, b->queue, on_load, p, &token) != PXL_OK) {
    free(p);
    return;
  }
  b->outstanding++;
  b->res.started++;
  trace(b, r, "start", now_ms(), NULL);
  b->row[r].requested = 1;
  if (b->strategy == 'b') b->row[r].token = token;
}

static void enter_row(struct bench *b, int r) {
  if (b->script.step == STEP_BACK) b->res.back_entered++;
  if (b->strategy == 'a') {
    start_load(b, r);
  } else if (b->strategy == 'b') {
    pxl_request req;
    pxl_request_init(&req);
    fill_request(b, r, &req);
    pxl_image *image = NULL;
    if (pxl_lookup(b->loader, &req, &image) == PXL_OK) {
      pxl_image_release(image); /* a real host would keep it in its cell */
      draw(b, r, 1);
    } else {
      start_load(b, r);
    }
  }
}

static void leave_row(struct bench *b, int r) {
  if (b->strategy == 'b' && b->row[r].token) {
    if (pxl_cancel(b->loader, b->row[r].token) == PXL_OK) {
      b->res.cancelled++;
      trace(b, r, "cancel", now_ms(), NULL);
    }
    b->row[r].token = 0;
  }
}

/* c */
static int table_request(int64_t r, pxl_request *req, void *user_data) {
  trace(user_data, (int)r, "start", now_ms(), NULL);
  fill_request(user_data, (int)r, req);
  return 1;
}

static void table_row(int64_t r, const pxl_result *result, void *user_data) {
  struct bench *b = user_data;
  /* A preview (pxl_table_config.previews, on by default) is not the row's image: time to
   * visible counts the image; previews are timed on their own. */
  int preview = result->struct_size >= offsetof(pxl_result, preview) + sizeof(int32_t) && result->preview;
  if (preview) {
    struct row *row = &b->row[r];
    if (row->visible && !row->drawn_this_visit && !row->previewed_this_visit) {
      row->previewed_this_visit = 1;
      row->preview_at = now_ms();
      trace(b, (int)r, "preview", row->preview_at, NULL);
    }
    return;
  }
  if (result->status == PXL_OK) draw(b, (int)r, result->source == PXL_SOURCE_MEMORY);
  else fprintf(stderr, "scroll: row %lld: %s\n", (long long)r, result->message);
}

/* Moves the screen so that new_top is the first visible row. */
static void set_view(struct bench *b, int new_top, int direction) {
  double now = now_ms();
  int old = b->top;
  if (new_top != old) {
    for (int r = old; old >= 0 && r < old + VISIBLE; r++) {
      if (r >= new_top && r < new_top + VISIBLE) continue;
      end_visit(b, r, now);
      b->row[r].visible = 0;
      leave_row(b, r);
    }
    for (int r = new_top; r < new_top + VISIBLE; r++) {
      if (old >= 0 && r >= old && r < old + VISIBLE) continue;
      b->row[r].visible = 1;
      b->row[r].drawn_this_visit = 0;
      b->row[r].previewed_this_visit = 0;
      b->row[r].visit_start = now;
      enter_row(b, r);
    }
    b->top = new_top;
  }
  if (b->strategy == 'c' && (new_top != old || direction != b->direction)) {
    b->direction = direction;
    pxl_table_set_visible(b->table, new_top, VISIBLE, direction);
  }
}

static int screen_drawn(const struct bench *b) {
  int n = 0;
  for (int r = b->top; r >= 0 && r < b->top + VISIBLE; r++) n += b->row[r].drawn_this_visit;
  return n;
}

static void view_cb(void *b, int top, int direction) { set_view(b, top, direction); }
static int drawn_cb(void *b) { return screen_drawn(b); }

static void run_session(struct bench *b) {
  b->t0 = now_ms();
  scroll_script_start(&b->script, b->rows, VISIBLE, b->t0);
  struct pollfd fd = {pxl_queue_fd(b->queue), POLLIN, 0};
  double next_frame = now_ms();
  for (;;) {
    double wait = next_frame - now_ms();
    if (wait > 0 && poll(&fd, 1, (int)ceil(wait)) > 0 && (fd.revents & POLLIN))
      pxl_queue_dispatch(b->queue, 0);
    if (now_ms() < next_frame) continue;
    if (!scroll_script_frame(&b->script, now_ms(), view_cb, drawn_cb, b)) break;
    pxl_queue_dispatch(b->queue, 0);
    next_frame += FRAME_MS;
    if (next_frame < now_ms()) next_frame = now_ms();
  }
  double end = now_ms();
  b->res.final_drawn = screen_drawn(b);
  for (int r = b->top; r < b->top + VISIBLE; r++) end_visit(b, r, end);
}

/* ---- the server's view ---- */

/* Sums, per row of this strategy's run, what nginx sent; fills the byte and request
 * counts of b->res. */
static void read_access_log(struct bench *b, const char *access_log) {
  long long *bytes = calloc((size_t)b->rows, sizeof *bytes);
  int *cut = calloc((size_t)b->rows, sizeof *cut);
  FILE *f = fopen(access_log, "r");
  if (!f || !bytes || !cut) {
    fprintf(stderr, "scroll: %s: %s\n", access_log, strerror(errno));
    free(bytes);
    free(cut);
    if (f) fclose(f);
    return;
  }
  char marker[128];
  snprintf(marker, sizeof marker, "?bench=%s&s=%c&row=", b->tag, b->strategy);
  char line[2048];
  while (fgets(line, sizeof line, f)) {
    char uri[1024];
    int status, r;
    long long sent;
    long connection;
    if (sscanf(line, "%1023s %d %lld %ld", uri, &status, &sent, &connection) != 4) continue;
    char *m = strstr(uri, marker);
    if (!m || sscanf(m + strlen(marker), "%d", &r) != 1 || r < 0 || r >= b->rows) continue;
    b->res.requests++;
    if (sent < b->photos[r % b->photo_count].size) {
      b->res.cut++;
      cut[r]++;
    }
    bytes[r] += sent;
    b->res.total_bytes += sent;
  }
  fclose(f);
  for (int r = 0; r < b->rows && b->trace; r++) {
    if (!bytes[r]) continue;
    char detail[64];
    snprintf(detail, sizeof detail, "%lld\t%d", bytes[r], cut[r]);
    trace(b, r, "bytes", b->t0, detail);
  }
  free(cut);
  for (int r = 0; r < b->rows; r++) {
    if (b->row[r].ever_drawn) continue;
    long long waste = bytes[r];
    if (waste > 0) {
      b->res.wasted_bytes += waste;
      b->res.wasted_rows++;
      if (getenv("SCROLL_WASTED_ROWS")) fprintf(stderr, "wasted %c row %d: %lld bytes\n", b->strategy, r, waste);
    }
  }
  free(bytes);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* pxl_config.isolation of every loader (--isolation: none, modules, all). */
static const char *const isolation_names[] = {"modules", "none", "all"}; /* PXL_ISOLATION_* 0, 1, 2 */

static int isolation_of(const char *name) {
  for (int i = 0; i < 3; i++)
    if (strcmp(name, isolation_names[i]) == 0) return i;
  return -1;
}

static struct result run_strategy(const char *base_url, struct photo *photos, int photo_count, int rows,
                                  const char *access_log, const char *tag, char strategy, FILE *trace_file,
                                  int isolation) {
  static const char *const names[] = {"a no cancel", "b per-row cancel", "c table"};
  struct bench *b = calloc(1, sizeof *b);
  b->base_url = base_url;
  b->photos = photos;
  b->photo_count = photo_count;
  b->rows = rows;
  b->strategy = strategy;
  snprintf(b->tag, sizeof b->tag, "%s", tag);
  b->row = calloc((size_t)rows, sizeof *b->row);
  b->top = -1;
  b->trace = trace_file;
  b->t0 = now_ms();
  b->res.key = strategy;
  b->res.name = names[strategy - 'a'];
  pxl_config config;
  pxl_config_init(&config);
  config.isolation = isolation;
  if (pxl_loader_new(&config, &b->loader) != PXL_OK || pxl_queue_new(&b->queue) != PXL_OK) {
    fprintf(stderr, "scroll: setup failed\n");
    exit(1);
  }
  if (strategy == 'c' &&
      pxl_table_new(b->loader, b->queue, NULL, rows, table_request, table_row, b, &b->table) != PXL_OK) {
    fprintf(stderr, "scroll: pxl_table_new failed\n");
    exit(1);
  }
  run_session(b);
  b->res.outstanding = b->outstanding;
  if (strategy == 'a') {
    /* a never cancels: its loads run to their end. Let them (nothing more is drawn: the
     * screen is gone), so that what it downloads for rows it never drew is measured at
     * the server, not modelled. */
    for (int r = 0; r < rows; r++) b->row[r].visible = 0;
    double deadline = now_ms() + A_DRAIN_MS;
    while (b->outstanding > 0 && now_ms() < deadline) {
      pxl_queue_wait(b->queue, 100);
      pxl_queue_dispatch(b->queue, 0);
    }
    b->res.undrained = b->outstanding;
  }
  if (b->table) {
    pxl_table_stats stats = {.struct_size = sizeof stats};
    pxl_table_get_stats(b->table, &stats);
    b->res.started = stats.started;
    b->res.cancelled = stats.cancelled;
    pxl_table_free(b->table);
  }
  pxl_loader_free(b->loader); /* cancels what is left (b's and c's last screens are done) */
  pxl_queue_free(b->queue);
  sleep_ms(300);              /* cut transfers are logged when their connections close */
  read_access_log(b, access_log);
  b->res.ttv_median = percentile(&b->ttv, 0.5);
  b->res.ttv_p95 = percentile(&b->ttv, 0.95);
  b->res.previewed = b->preview_ms.n;
  b->res.preview_median = percentile(&b->preview_ms, 0.5);
  b->res.final_median = percentile(&b->final_ms, 0.5);
  struct result res = b->res;
  free(b->ttv.v);
  free(b->preview_ms.v);
  free(b->final_ms.v);
  free(b->row);
  free(b);
  return res;
}

/* ---- setup and report ---- */

static struct photo *read_photos(const char *dir, int *count) {
  char path[1024];
  snprintf(path, sizeof path, "%s/index.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "scroll: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  struct photo *photos = NULL;
  int n = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0]) continue;
    struct photo *grown = realloc(photos, (size_t)(n + 1) * sizeof *grown);
    if (!grown) break;
    photos = grown;
    snprintf(photos[n].path, sizeof photos[n].path, "%.255s", line);
    char file[1024];
    snprintf(file, sizeof file, "%s/%s", dir, line);
    struct stat st;
    photos[n].size = stat(file, &st) == 0 ? (long)st.st_size : -1;
    n++;
  }
  fclose(f);
  *count = n;
  return photos;
}

static const char *ms_text(double v, char *buf, size_t size) {
  if (isnan(v)) snprintf(buf, size, "-");
  else if (isinf(v)) snprintf(buf, size, "undrawn");
  else snprintf(buf, size, "%.0f", v);
  return buf;
}

static void print_results(const struct result *r, int n) {
  printf("  %-17s %8s %8s %9s %14s %9s %13s %13s %9s\n", "strategy", "ttv med", "ttv p95",
         "undrawn", "wasted MB/rows", "total MB", "req/cut srv", "start/cancel", "back hit");
  for (int i = 0; i < n; i++) {
    char med[16], p95[16], wasted[32], req[32], lib[32], back[32], undrawn[32];
    snprintf(wasted, sizeof wasted, "%.1f/%d", r[i].wasted_bytes / 1e6, r[i].wasted_rows);
    snprintf(req, sizeof req, "%d/%d", r[i].requests, r[i].cut);
    snprintf(lib, sizeof lib, "%llu/%llu", (unsigned long long)r[i].started, (unsigned long long)r[i].cancelled);
    snprintf(back, sizeof back, "%d/%d", r[i].back_hits, r[i].back_entered);
    snprintf(undrawn, sizeof undrawn, "%zu/%zu", r[i].undrawn, r[i].stays);
    printf("  %-17s %8s %8s %9s %14s %9.1f %13s %13s %9s\n", r[i].name,
           ms_text(r[i].ttv_median, med, sizeof med), ms_text(r[i].ttv_p95, p95, sizeof p95),
           undrawn, wasted, r[i].total_bytes / 1e6, req, lib, back);
  }
  /* The table's previews (progressive JPEGs): how much sooner a visible row shows
   * something than its image. */
  for (int i = 0; i < n; i++) {
    if (r[i].key != 'c' || r[i].previewed == 0) continue;
    printf("  table previews: %zu visits drawn after a preview: first preview median %.0f ms, image median "
           "%.0f ms (%.1fx sooner)\n", r[i].previewed, r[i].preview_median, r[i].final_median,
           r[i].preview_median > 0 ? r[i].final_median / r[i].preview_median : 0.0);
  }
}

/* The targets for one run: the table leaves no more visits undrawn than per-row
 * cancel (so none where it leaves none), its p95 time to visible is no worse, and it
 * wastes under 10% of the bytes strategy a wastes. */
struct verdict {
  int undrawn_ok, p95_ok, waste_ok;
  double waste_share; /* the table's waste, % of a's */
};

static double waste_share(const struct result *r, int s) {
  return r[0].wasted_bytes > 0 ? 100.0 * (double)r[s].wasted_bytes / (double)r[0].wasted_bytes : 0;
}

static struct verdict judge(const struct result *r) {
  struct verdict v;
  v.undrawn_ok = r[2].undrawn <= r[1].undrawn;
  v.p95_ok = r[2].ttv_p95 <= r[1].ttv_p95; /* undrawn ones (infinite) only tie each other */
  v.waste_share = waste_share(r, 2);
  v.waste_ok = r[2].wasted_bytes * 10 < r[0].wasted_bytes;
  return v;
}

/* Median and range of one figure over the runs (v sorted in place). */
static void median_range(double *v, int n, double *median, double *lo, double *hi) {
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  *median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  *lo = v[0];
  *hi = v[n - 1];
}

static const char *figure(double median, double lo, double hi, const char *fmt, char *buf, size_t size) {
  char m[16], l[16], h[16];
  if (isinf(median)) snprintf(m, sizeof m, "undrawn");
  else snprintf(m, sizeof m, fmt, median);
  if (isinf(lo)) snprintf(l, sizeof l, "undrawn");
  else snprintf(l, sizeof l, fmt, lo);
  if (isinf(hi)) snprintf(h, sizeof h, "undrawn");
  else snprintf(h, sizeof h, fmt, hi);
  if (lo == hi) snprintf(buf, size, "%s", m);
  else snprintf(buf, size, "%s [%s-%s]", m, l, h);
  return buf;
}

/* Medians over the runs, with their range: undrawn visits, p95 time to visible, and
 * wasted bytes as a share of a's. */
static void print_summary(const struct result *all, int runs) {
  double *v = calloc((size_t)runs, sizeof *v);
  if (!v) return;
  printf("medians of %d runs [min-max]\n  %-17s %16s %22s %20s\n", runs, "strategy", "undrawn",
         "ttv p95 ms", "waste % of a's");
  for (int s = 0; s < 3; s++) {
    char undrawn[64], p95[64], waste[64];
    double med, lo, hi;
    for (int i = 0; i < runs; i++) v[i] = (double)all[i * 3 + s].undrawn;
    median_range(v, runs, &med, &lo, &hi);
    figure(med, lo, hi, "%.0f", undrawn, sizeof undrawn);
    for (int i = 0; i < runs; i++) v[i] = all[i * 3 + s].ttv_p95;
    median_range(v, runs, &med, &lo, &hi);
    figure(med, lo, hi, "%.0f", p95, sizeof p95);
    for (int i = 0; i < runs; i++) v[i] = waste_share(&all[i * 3], s);
    median_range(v, runs, &med, &lo, &hi);
    figure(med, lo, hi, "%.1f", waste, sizeof waste);
    printf("  %-17s %16s %22s %20s\n", all[s].name, undrawn, p95, waste);
  }
  free(v);
}

static int usage(void) {
  fprintf(stderr, "usage: scroll BASE_URL DATA_DIR ACCESS_LOG [--rows N] [--runs N] [--tag TAG] "
          "[--check target|clean] [--trace FILE] [--isolation none|modules|all[,...]]\n"
          "  --isolation: each run plays the session under each isolation in turn (default modules)\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 4) return usage();
  const char *base_url = argv[1], *data = argv[2], *access_log = argv[3];
  int rows = 1000, runs = 1, check_target = 1;
  const char *trace_path = NULL;
  int isolations[3] = {0}, isolation_count = 1; /* PXL_ISOLATION_MODULES */
  char tag[32];
  snprintf(tag, sizeof tag, "%ld", (long)time(NULL));
  for (int i = 4; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--rows") == 0) rows = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--tag") == 0) snprintf(tag, sizeof tag, "%s", argv[i + 1]);
    else if (strcmp(argv[i], "--check") == 0) check_target = strcmp(argv[i + 1], "target") == 0;
    else if (strcmp(argv[i], "--trace") == 0) trace_path = argv[i + 1];
    else if (strcmp(argv[i], "--isolation") == 0) {
      char list[64];
      snprintf(list, sizeof list, "%s", argv[i + 1]);
      isolation_count = 0;
      for (char *save, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (isolation_count == 3 || (isolations[isolation_count] = isolation_of(name)) < 0) return usage();
        isolation_count++;
      }
      if (isolation_count == 0) return usage();
    } else return usage();
  }
  if ((argc - 4) % 2 || rows < 100 || runs < 1) return usage();
  FILE *trace_file = NULL;
  if (trace_path && !(trace_file = fopen(trace_path, "w"))) {
    fprintf(stderr, "scroll: %s: %s\n", trace_path, strerror(errno));
    return 1;
  }
  int photo_count = 0;
  struct photo *photos = read_photos(data, &photo_count);
  if (!photos || photo_count == 0) return 1;
  size_t base_len = strlen(base_url);
  char *base = strdup(base_url);
  while (base_len && base[base_len - 1] == '/') base[--base_len] = '\0';

  printf("scroll: %s: %d rows (%d photos), %d visible, %dx%d fill thumbnails, %d ms frames, pixload %s\n",
         base, rows, photo_count, VISIBLE, THUMB, THUMB, FRAME_MS, pxl_version());
  printf("  ttv: ms from a row entering the screen to its image drawn, over visits of >= %d ms\n"
         "  (rows that stay on screen); undrawn: such visits never drawn (count as infinite).\n"
         "  wasted: bytes nginx sent for rows never drawn (a never cancels: its loads are left\n"
         "  to finish after the session, and counted). req/cut srv: requests nginx logged,\n"
         "  and those cut short. start/cancel: loads started and cancelled, library's count.\n"
         "  back hit: rows drawn from memory at once / rows entering while scrolling back.\n",
         STAY_MS);
  /* Each isolation's layers, from a loader of its own (pxl_loader_isolation starts a
   * worker: not in a measured loader's pool). ALL without a worker would measure the
   * in-process decode under ALL's name: stop instead. */
  for (int k = 0; k < isolation_count; k++) {
    pxl_config config;
    pxl_config_init(&config);
    config.isolation = isolations[k];
    pxl_loader *probe = NULL;
    char layers[128] = "";
    if (pxl_loader_new(&config, &probe) != PXL_OK) return 1;
    pxl_loader_isolation(probe, layers, sizeof layers);
    pxl_loader_free(probe);
    printf("  isolation %s: %s\n", isolation_names[isolations[k]], layers);
    if (isolations[k] == PXL_ISOLATION_ALL && strcmp(layers, "none") == 0) {
      fprintf(stderr, "scroll: --isolation all, but no decode worker starts (pixload/ beside the library?)\n");
      return 1;
    }
  }
  int failed_runs = 0;
  struct result *all = calloc((size_t)runs * 3 * (size_t)isolation_count, sizeof *all);
  if (!all) return 1;
  /* all[k * runs * 3 + (run - 1) * 3 + s]: isolation k's runs, contiguous for print_summary. */
  for (int run = 1; run <= runs; run++)
  for (int k = 0; k < isolation_count; k++) {
    struct result *r = &all[(size_t)k * runs * 3 + (size_t)(run - 1) * 3];
    char run_tag[64];
    snprintf(run_tag, sizeof run_tag, "%s-%d%s", tag, run, k ? isolation_names[isolations[k]] : "");
    for (int s = 0; s < 3; s++)
      r[s] = run_strategy(base, photos, photo_count, rows, access_log, run_tag, (char)('a' + s),
                          run == 1 && k == 0 ? trace_file : NULL, isolations[k]);
    if (isolation_count > 1) printf("run %d, isolation %s\n", run, isolation_names[isolations[k]]);
    else printf("run %d\n", run);
    print_results(r, 3);
    int clean = 1;
    for (int s = 0; s < 3; s++) {
      if (r[s].stale) printf("  %s: %d images reached the draw code for rows not on screen\n", r[s].name, r[s].stale);
      if (r[s].final_drawn != VISIBLE) printf("  %s: final screen %d of %d drawn\n", r[s].name, r[s].final_drawn, VISIBLE);
      /* a's final screen waits behind every load it never cancelled: on a slow network
       * that is its own failing (reported above), not the library's. */
      clean &= r[s].stale == 0 && (r[s].final_drawn == VISIBLE || s == 0);
    }
    struct verdict v = judge(r);
    char p95_c[16], p95_b[16];
    printf("  a: %d loads still running or waiting at the end of the session (%d unfinished %d s later).\n"
           "  targets: table undrawn %zu <= per-row cancel's %zu: %s; table p95 %s <= per-row cancel's %s: %s; "
           "table waste %.1f%% of a's < 10%%: %s\n",
           r[0].outstanding, r[0].undrained, A_DRAIN_MS / 1000, r[2].undrawn, r[1].undrawn,
           v.undrawn_ok ? "yes" : "NO", ms_text(r[2].ttv_p95, p95_c, sizeof p95_c),
           ms_text(r[1].ttv_p95, p95_b, sizeof p95_b), v.p95_ok ? "yes" : "NO", v.waste_share,
           v.waste_ok ? "yes" : "NO");
    if ((check_target && !(v.undrawn_ok && v.p95_ok && v.waste_ok)) || !clean) failed_runs++;
  }
  if (trace_file && fclose(trace_file) != 0) {
    fprintf(stderr, "scroll: %s: %s\n", trace_path, strerror(errno));
    failed_runs++;
  }
  for (int k = 0; k < isolation_count; k++) {
    if (isolation_count > 1) printf("isolation %s: ", isolation_names[isolations[k]]);
    print_summary(&all[(size_t)k * runs * 3], runs);
  }
  printf("targets%s met in %d of %d runs\n", check_target ? "" : " (not checked)", runs * isolation_count - failed_runs,
         runs * isolation_count);
  free(all);
  free(base);
  free(photos);
  return failed_runs ? 1 : 0;
}
