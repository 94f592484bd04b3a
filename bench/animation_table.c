/*
 * bench/animation_table.c: a table of 1,000 animated rows (every row a sticker, an
 * animated GIF; cache key "row-N", so every row is its own image to the library)
 * scrolled by the scroll benchmark's session (bench/scroll_script.h: slow scroll, fling
 * to row ~600, stop, scroll back, jump to the end). As a host would: a player
 * (pxl_animation_load) for each row that enters the window (the VISIBLE rows on screen
 * and MARGIN rows on either side), tied to its row with pxl_table_bind_animation, freed
 * when the row leaves the window; once per 16 ms frame pxl_table_set_visible and, for
 * each visible row, pxl_animation_frame_at (the frame clock). Reports:
 *  - ring memory: the most frame bytes the live players held at once (sum of
 *    pxl_animation_stats.ring_bytes, sampled every frame), against the visible rows'
 *    rings (VISIBLE x 3 frames) and against what PXL_FLAG_ANIMATE images of the visible
 *    rows would hold (VISIBLE x every frame); the most a player out of view for over
 *    1.2 s held (its ring released: the shown frame);
 *  - decoding out of view: frames decoded by players while their row was out of view
 *    (from the moment pxl_table_set_visible paused them), and the table's
 *    animation_frames_decoded; peak RSS.
 *
 *   bench/animation_table FILE.gif      (make bench-animation builds and runs it)
 */
#define _XOPEN_SOURCE 700
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pixload.h"
#define BENCH_NAME "animation_table"
#include "animation_bench.h"
#include "scroll_script.h"

enum { ROWS = 1000, VISIBLE = 8, MARGIN = 8, FRAME_MS = 16, RING_FRAMES = 3, RELEASED_AFTER_MS = 1200, SETTLE_MS = 100 };

struct row {
  pxl_animation *a;
  int loaded;
  int visible;
  double left_view_at;     /* when it was last paused by the table (out of view) */
  uint64_t decoded_at_left; /* its frames_decoded then */
  int settled;              /* out of view for SETTLE_MS: a decode under way then has ended */
  uint64_t decoded_settled; /* its frames_decoded then */
};

struct bench {
  const char *url;
  pxl_loader *loader;
  pxl_queue *queue;
  pxl_table *table;
  struct row row[ROWS];
  int top;
  uint64_t frame_bytes;
  uint64_t players, leaves, offscreen_decoded, settled_decoded, peak_ring, peak_visible_ring, peak_released_row;
  uint64_t released_rows;
  uint64_t peak_cache;     /* pxl_memory_cache_bytes */ /* samples of rows out of view past RELEASED_AFTER_MS */
};

static uint64_t decoded(pxl_animation *a, uint64_t *ring) {
  pxl_animation_stats s = {.struct_size = sizeof s};
  pxl_animation_stats_get(a, &s);
  if (ring) *ring = s.ring_bytes;
  return s.frames_decoded;
}

static void on_event(pxl_animation *a, const pxl_animation_event *e, void *user_data) {
  (void)a;
  struct row *row = user_data;
  if (e->kind == PXL_ANIMATION_LOADED && e->status != PXL_OK) die("a row's load", e->status);
  if (e->kind == PXL_ANIMATION_FAILED) die("a row's frame", e->status);
  if (e->kind == PXL_ANIMATION_LOADED) row->loaded = 1;
}

static int no_request(int64_t row, pxl_request *request, void *user_data) {
  (void)row, (void)request, (void)user_data;
  return 0; /* the players load the rows */
}

static void no_result(int64_t row, const pxl_result *result, void *user_data) {
  (void)row, (void)result, (void)user_data;
}

/* A row out of view comes back or goes: count what its player decoded while away. */
static void away(struct bench *b, struct row *row) {
  uint64_t n = decoded(row->a, NULL);
  b->offscreen_decoded += n - row->decoded_at_left;
  if (row->settled) b->settled_decoded += n - row->decoded_settled;
}

static int in_window(int top, int r) { return top >= 0 && r >= top - MARGIN && r < top + VISIBLE + MARGIN; }

/* The screen moves to top: the table pauses and resumes the tied players, rows leaving
 * the window lose theirs, rows entering it get one. */
static void view(void *ctx, int top, int direction) {
  struct bench *b = ctx;
  double now = now_ms();
  /* What the rows coming back decoded while away, read before set_visible resumes them
   * (their decoder then walks back to the frame shown, in view). */
  for (int r = top < 0 ? 0 : top; r < top + VISIBLE && r < ROWS; r++)
    if (b->row[r].a && !b->row[r].visible) away(b, &b->row[r]);
  pxl_table_set_visible(b->table, top, VISIBLE, direction);
  for (int r = 0 > b->top - MARGIN ? 0 : b->top - MARGIN; b->top >= 0 && r < b->top + VISIBLE + MARGIN && r < ROWS;
       r++) {
    struct row *row = &b->row[r];
    if (!row->a) continue;
    int visible = r >= top && r < top + VISIBLE;
    if (row->visible && !visible) { /* paused by set_visible above */
      row->decoded_at_left = decoded(row->a, NULL);
      row->left_view_at = now;
      row->settled = 0;
      b->leaves++;
    }
    row->visible = visible;
    if (!in_window(top, r)) {
      if (!visible) away(b, row);
      pxl_animation_free(row->a);
      memset(row, 0, sizeof *row);
    }
  }
  for (int r = top - MARGIN < 0 ? 0 : top - MARGIN; r < top + VISIBLE + MARGIN && r < ROWS; r++) {
    struct row *row = &b->row[r];
    if (row->a) continue;
    char key[32];
    snprintf(key, sizeof key, "row-%d", r);
    pxl_request request;
    pxl_request_init(&request);
    request.url = b->url;
    request.cache_key = key;
    pxl_status status = pxl_animation_load(b->loader, &request, b->queue, on_event, row, &row->a);
    if (status != PXL_OK) die("pxl_animation_load", status);
    /* Tied before LOADED: a row out of view is paused before it decodes anything. */
    pxl_table_bind_animation(b->table, r, row->a);
    row->visible = r >= top && r < top + VISIBLE;
    row->left_view_at = now;
    row->decoded_at_left = 0;
    b->players++;
  }
  b->top = top;
}

static int drawn(void *ctx) {
  struct bench *b = ctx;
  int n = 0;
  for (int r = b->top; r < b->top + VISIBLE && r < ROWS; r++) n += b->row[r].loaded;
  return n;
}

/* The host's frame: each visible row shows the frame due now; ring bytes sampled. */
static void draw_and_sample(struct bench *b) {
  double now = now_ms();
  uint64_t total = 0, visible = 0;
  for (int r = b->top - MARGIN < 0 ? 0 : b->top - MARGIN; r < b->top + VISIBLE + MARGIN && r < ROWS; r++) {
    struct row *row = &b->row[r];
    if (!row->a) continue;
    if (row->visible) pxl_image_release(pxl_animation_frame_at(row->a, (int64_t)now, NULL));
    uint64_t ring = 0;
    uint64_t n = decoded(row->a, &ring);
    if (!row->visible && !row->settled && now - row->left_view_at >= SETTLE_MS) {
      row->settled = 1;
      row->decoded_settled = n;
    }
    total += ring;
    if (row->visible) visible += ring;
    if (!row->visible && row->loaded && now - row->left_view_at > RELEASED_AFTER_MS) {
      b->released_rows++;
      if (ring > b->peak_released_row) b->peak_released_row = ring;
    }
  }
  if (total > b->peak_ring) b->peak_ring = total;
  uint64_t cached = pxl_memory_cache_bytes(b->loader);
  if (cached > b->peak_cache) b->peak_cache = cached;
  if (visible > b->peak_visible_ring) b->peak_visible_ring = visible;
}

struct all_frames {
  int done;
  pxl_image *image;
};

static void on_all(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct all_frames *all = user_data;
  if (result->status != PXL_OK) die("PXL_FLAG_ANIMATE load", result->status);
  all->image = pxl_image_retain(result->image);
  all->done = 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: animation_table FILE.gif\n");
    return 2;
  }
  char path[4096], url[4200];
  if (!realpath(argv[1], path)) {
    perror(argv[1]);
    return 1;
  }
  snprintf(url, sizeof url, "file://%s", path);
  static struct bench bench;
  struct bench *b = &bench;
  b->url = url;
  b->top = -1;
  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes |= PXL_SCHEME_FILE;
  pxl_status status = pxl_loader_new(&config, &b->loader);
  if (status != PXL_OK) die("pxl_loader_new", status);
  if ((status = pxl_queue_new(&b->queue)) != PXL_OK) die("pxl_queue_new", status);
  pxl_table_config table_config;
  pxl_table_config_init(&table_config);
  status = pxl_table_create(b->loader, b->queue, &table_config, ROWS, no_request, no_result, NULL, &b->table);
  if (status != PXL_OK) die("pxl_table_create", status);

  struct scroll_script script;
  double t0 = now_ms();
  scroll_script_start(&script, ROWS, VISIBLE, t0);
  struct pollfd fd = {pxl_queue_fd(b->queue), POLLIN, 0};
  double next_frame = t0;
  int frames = 0;
  for (;;) {
    double wait = next_frame - now_ms();
    if (wait > 0 && poll(&fd, 1, (int)(wait + 1)) > 0 && (fd.revents & POLLIN)) pxl_queue_dispatch(b->queue, 0);
    if (now_ms() < next_frame) continue;
    if (!scroll_script_frame(&script, now_ms(), view, drawn, b)) break;
    pxl_queue_dispatch(b->queue, 0);
    draw_and_sample(b);
    frames++;
    next_frame += FRAME_MS;
    if (next_frame < now_ms()) next_frame = now_ms();
  }
  double session_ms = now_ms() - t0;
  for (int r = 0; r < ROWS; r++) /* rows still out of view at the end */
    if (b->row[r].a && !b->row[r].visible) away(b, &b->row[r]);
  pxl_table_stats ts = {.struct_size = sizeof ts};
  pxl_table_get_stats(b->table, &ts);
  /* One frame's bytes and the frame count, from PXL_FLAG_ANIMATE's image of the file. */
  struct all_frames all = {0};
  pxl_request request;
  pxl_request_init(&request);
  request.url = url;
  request.flags = PXL_FLAG_ANIMATE;
  status = pxl_load(b->loader, &request, b->queue, on_all, &all, NULL);
  if (status != PXL_OK) die("pxl_load", status);
  while (!all.done) {
    pxl_queue_wait(b->queue, 1000);
    pxl_queue_dispatch(b->queue, 0);
  }
  uint64_t frame_bytes = pxl_image_byte_count(all.image);
  int frame_count = pxl_image_frame_count(all.image);
  pxl_image_release(all.image);
  for (int r = 0; r < ROWS; r++) pxl_animation_free(b->row[r].a);
  pxl_table_free(b->table);
  pxl_loader_free(b->loader);
  pxl_queue_free(b->queue);

  printf("%s: table of %d animated rows (%d frames of %llu bytes each), %d visible, players for %d more on either "
         "side; scroll session %.1f s, %d frames, %llu players made\n",
         argv[1], ROWS, frame_count, (unsigned long long)frame_bytes, VISIBLE, MARGIN, session_ms / 1000, frames,
         (unsigned long long)b->players);
  printf("  peak ring memory, all live players      %9llu bytes\n", (unsigned long long)b->peak_ring);
  printf("  peak ring memory, visible rows' players %9llu bytes (visible rows' rings: %d x %d frames = %llu bytes)\n",
         (unsigned long long)b->peak_visible_ring, VISIBLE, RING_FRAMES,
         (unsigned long long)(VISIBLE * RING_FRAMES * frame_bytes));
  printf("  PXL_FLAG_ANIMATE images of the visible rows would hold %llu bytes (%d x %d frames)\n",
         (unsigned long long)(VISIBLE * (uint64_t)frame_count * frame_bytes), VISIBLE, frame_count);
  printf("  most a player out of view for over %d ms held: %llu bytes (%llu samples)\n", RELEASED_AFTER_MS,
         (unsigned long long)b->peak_released_row, (unsigned long long)b->released_rows);
  printf("  frames decoded by players while their row was out of view: %llu over %llu times a row left the view;\n"
         "    after its first %d ms out of view (a frame being decoded when it left has ended): %llu\n"
         "  frames decoded by the tied players in all (table animation_frames_decoded): %llu\n",
         (unsigned long long)b->offscreen_decoded, (unsigned long long)b->leaves, SETTLE_MS,
         (unsigned long long)b->settled_decoded, (unsigned long long)ts.animation_frames_decoded);
  printf("  peak RSS %ld KiB, of which the memory cache at most %llu bytes (each row seen: frame 0 and the file's\n"
         "    encoded bytes, which its players share; within the default memory_cache_bytes)\n",
         peak_rss_kib(), (unsigned long long)b->peak_cache);
  return 0;
}
