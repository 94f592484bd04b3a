/*
 * scroll_demo: a scrolling table of thumbnails driven by pixload's table object, the way
 * a UI toolkit would drive it, with the UI replaced by a script.
 *
 *   scroll_demo BASE_URL INDEX_FILE [--out contact.png]
 *
 * INDEX_FILE lists one image path per line (relative to BASE_URL); each is one row of
 * the table. VISIBLE_ROWS rows are on screen at a time, in as many reusable slots (the
 * "cells" of a table view: row r is drawn in slot r % VISIBLE_ROWS). A script scrolls
 * the table: slowly down, a fling, a stop, back up over rows already seen, and a jump.
 * Every 16 ms frame advances the script; between frames the host sleeps in poll() on the
 * queue's fd and dispatches completions as they come.
 *
 * The host does no per-row bookkeeping of requests. It tells a pxl_table which rows are
 * on screen and which way they move (pxl_table_set_visible, once per frame that moves);
 * the table loads the visible rows first, prefetches ahead into the memory cache,
 * cancels rows that scrolled away, and calls row_fn with a row's image only while that
 * row is on screen: from inside pxl_table_set_visible when the memory cache has it (a row
 * scrolled back to is drawn in the same frame, no placeholder), else from the queue.
 * row_fn still checks that the row's slot shows that row, so that the demo proves,
 * rather than assumes, that no stale image is ever drawn.
 *
 * The thumbnails are cards with rounded corners: a processor on every row's request, run
 * and cached by pixload, not by the host.
 *
 * It prints what happened (rows shown, requests started and cancelled and memory-cache
 * hits from pxl_table_get_stats, time from a row entering the view to its image being
 * drawn) and writes the last screen's thumbnails as a contact sheet PNG. Exit status 0
 * only if every row of the last screen was drawn and no stale image was ever drawn.
 *
 * Build: gcc -std=c11 -O2 -I include examples/c/scroll_demo.c -L DIR -lpixload -lpng -lm
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <png.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pixload.h"

enum {
  VISIBLE_ROWS = 8,
  THUMB_SIZE = 150,  /* square thumbnails, cropped to fill */
  FRAME_MS = 16,
  SHEET_COLUMNS = 4, /* the contact sheet: 4 x 2 tiles for the 8 visible rows */
  SHEET_ROWS = 2,
};

/* BGRA premultiplied is what Cairo (ARGB32) and Skia draw without a conversion. */
#define THUMB_FORMAT PXL_FORMAT_BGRA8_PREMUL

/* One reusable cell. */
struct slot {
  int row;            /* the row shown, -1 for none */
  pxl_image *image;   /* the thumbnail drawn, our reference; NULL: a placeholder */
  double entered_ms;  /* when the row entered the view */
};

struct samples {
  double *ms;
  size_t count;
};

struct stats {
  int rows_shown;          /* rows that entered the view */
  int revisits;            /* rows entering the view that had been drawn before */
  int revisits_at_once;    /* ... drawn inside pxl_table_set_visible, from memory */
  int load_errors;         /* row_fn with an error */
  int stale_draws;         /* an image for a row its slot no longer shows: never */
  struct samples time_to_visible;         /* every drawn row */
  struct samples network_time_to_visible; /* rows that waited for a load */
};

struct demo {
  pxl_loader *loader;
  pxl_queue *queue;
  pxl_table *table;
  char **urls;
  int rows;
  unsigned char *ever_drawn; /* per row */
  struct slot slots[VISIBLE_ROWS];
  int top;                   /* first visible row; -1 before the first frame */
  int direction;             /* what the table was last told */
  int in_set_visible;        /* row_fn running inside pxl_table_set_visible */
  double start_ms;
  struct stats stats;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void add_sample(struct samples *s, double ms) {
  double *grown = realloc(s->ms, (s->count + 1) * sizeof *grown);
  if (!grown) return; /* a lost sample only thins the statistics */
  s->ms = grown;
  s->ms[s->count++] = ms;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile (p in 0..1) of the samples; sorts them. */
static double percentile(struct samples *s, double p) {
  if (s->count == 0) return 0;
  qsort(s->ms, s->count, sizeof *s->ms, compare_doubles);
  size_t rank = (size_t)ceil(p * (double)s->count);
  return s->ms[rank ? rank - 1 : 0];
}

/* Every thumbnail's corners rounded, radius 12 px. */
static const pxl_processor card_corners = {
    .kind = PXL_PROCESS_ROUND, .radius_tl = 12, .radius_tr = 12, .radius_br = 12, .radius_bl = 12};

/* The table's request_fn: what row `row` shows. The table set up *request with
 * pxl_request_init and sets the priority itself. */
static int thumbnail_request(int64_t row, pxl_request *request, void *user_data) {
  const struct demo *demo = user_data;
  if (row < 0 || row >= demo->rows) return 0;
  request->url = demo->urls[row];
  request->width = THUMB_SIZE;
  request->height = THUMB_SIZE;
  request->mode = PXL_MODE_FILL;
  request->format = THUMB_FORMAT;
  request->processors = &card_corners;
  request->processor_count = 1;
  return 1;
}

/* The table's row_fn: a visible row's image (borrowed) or error. */
static void on_row(int64_t row, const pxl_result *result, void *user_data) {
  struct demo *demo = user_data;
  struct slot *slot = &demo->slots[row % VISIBLE_ROWS];
  if (slot->row != row) {
    /* The table promises this never happens; the demo checks it. */
    demo->stats.stale_draws++;
    return;
  }
  if (result->status != PXL_OK) {
    demo->stats.load_errors++;
    fprintf(stderr, "scroll_demo: row %lld: %s (%s)\n", (long long)row, result->message,
            pxl_status_string(result->status));
    return;
  }
  pxl_image_release(slot->image);
  slot->image = pxl_image_retain(result->image);
  double ms = now_ms() - slot->entered_ms;
  add_sample(&demo->stats.time_to_visible, ms);
  if (demo->in_set_visible) {
    if (demo->ever_drawn[row]) demo->stats.revisits_at_once++;
  } else {
    add_sample(&demo->stats.network_time_to_visible, ms);
  }
  demo->ever_drawn[row] = 1;
}

/* Moves the view so that new_top is the first visible row, moving in direction (+1 down,
 * -1 up, 0 still): cells of rows that left are emptied, rows that came in get theirs,
 * then the table learns the new screen (and draws cached rows before it returns). */
static void scroll_to(struct demo *demo, int new_top, int direction) {
  int old_top = demo->top;
  if (new_top == old_top && direction == demo->direction) return;
  for (int row = old_top; old_top >= 0 && row < old_top + VISIBLE_ROWS; row++) {
    if (row >= new_top && row < new_top + VISIBLE_ROWS) continue;
    struct slot *slot = &demo->slots[row % VISIBLE_ROWS];
    pxl_image_release(slot->image);
    slot->image = NULL;
    slot->row = -1;
  }
  double now = now_ms();
  for (int row = new_top; row < new_top + VISIBLE_ROWS; row++) {
    if (old_top >= 0 && row >= old_top && row < old_top + VISIBLE_ROWS) continue;
    struct slot *slot = &demo->slots[row % VISIBLE_ROWS];
    slot->row = row;
    slot->entered_ms = now;
    demo->stats.rows_shown++;
    demo->stats.revisits += demo->ever_drawn[row];
  }
  demo->top = new_top;
  demo->direction = direction;
  demo->in_set_visible = 1;
  pxl_status s = pxl_table_set_visible(demo->table, new_top, VISIBLE_ROWS, direction);
  demo->in_set_visible = 0;
  if (s != PXL_OK) fprintf(stderr, "scroll_demo: pxl_table_set_visible: %s\n", pxl_status_string(s));
}

static int screen_drawn(const struct demo *demo) {
  int drawn = 0;
  for (int i = 0; i < VISIBLE_ROWS; i++) drawn += demo->slots[i].image != NULL;
  return drawn;
}

/* ---- the scroll script ---- */

enum step_kind { MOVE, HOLD, JUMP };

struct step {
  const char *name;
  enum step_kind kind;
  double target;       /* MOVE, JUMP: the first visible row to reach */
  double rows_per_frame; /* MOVE */
  int min_ms;          /* HOLD: at least this long ... */
  int max_ms;          /* ... and until the screen is drawn, or this long */
};

/* The script, in rows, for a table of `rows` rows. The fling moves a whole screen per
 * frame: each row it passes is on screen for one frame, less than most loads take, so
 * it shows loads being cancelled even against a server on loopback. The holds wait for
 * the screen to be drawn (up to max_ms). */
static int make_script(int rows, struct step *steps) {
  double last = rows - VISIBLE_ROWS;
  double slow_end = fmin(last, 3 * VISIBLE_ROWS);
  double fling_end = fmax(slow_end, floor(last * 0.6));
  double back_to = fmax(0, slow_end - 2 * VISIBLE_ROWS);
  double jump_to = fmax(fling_end, floor(last * 0.9));
  int n = 0;
  steps[n++] = (struct step){"slow scroll down", MOVE, slow_end, 0.08, 0, 0};
  steps[n++] = (struct step){"settle", HOLD, 0, 0, 200, 5000};
  steps[n++] = (struct step){"fling down", MOVE, fling_end, VISIBLE_ROWS, 0, 0};
  steps[n++] = (struct step){"stop", HOLD, 0, 0, 300, 8000};
  steps[n++] = (struct step){"fling back up", MOVE, slow_end, 1.5, 0, 0};
  steps[n++] = (struct step){"slow scroll up", MOVE, back_to, 0.08, 0, 0};
  steps[n++] = (struct step){"jump", JUMP, jump_to, 0, 0, 0};
  steps[n++] = (struct step){"final screen", HOLD, 0, 0, 300, 15000};
  return n;
}

/* Advances the script by one frame. Returns 0 when it has ended. */
static int run_frame(struct demo *demo, const struct step *steps, int count, int *step,
                     double *position, double *step_started) {
  double now = now_ms();
  while (*step < count) {
    const struct step *s = &steps[*step];
    int done = 0, direction = 0; /* HOLD: still */
    if (s->kind == MOVE) {
      double delta = s->target - *position;
      direction = delta > 0 ? 1 : delta < 0 ? -1 : 0;
      if (fabs(delta) <= s->rows_per_frame) {
        *position = s->target;
        done = 1;
      } else {
        *position += delta > 0 ? s->rows_per_frame : -s->rows_per_frame;
      }
    } else if (s->kind == JUMP) {
      direction = s->target >= *position ? 1 : -1;
      *position = s->target;
      done = 1;
    } else {
      double held = now - *step_started;
      done = held >= s->min_ms && (screen_drawn(demo) == VISIBLE_ROWS || held >= s->max_ms);
    }
    scroll_to(demo, (int)floor(*position), direction);
    if (!done) return 1;
    printf("  %6.0f ms  %-16s top row %d\n", now - demo->start_ms, s->name, demo->top);
    (*step)++;
    *step_started = now;
    if (s->kind != HOLD) return 1; /* one movement per frame */
  }
  return 0;
}

/* The host's event loop: poll() on the queue's fd with a frame timer. */
static void run_script(struct demo *demo) {
  struct step steps[16];
  int count = make_script(demo->rows, steps);
  int step = 0;
  double position = 0, step_started = now_ms();
  struct pollfd fd = {pxl_queue_fd(demo->queue), POLLIN, 0};
  double next_frame = now_ms();
  for (;;) {
    double wait = next_frame - now_ms();
    if (wait > 0 && poll(&fd, 1, (int)ceil(wait)) > 0 && (fd.revents & POLLIN))
      pxl_queue_dispatch(demo->queue, 0);
    if (now_ms() < next_frame) continue;
    if (!run_frame(demo, steps, count, &step, &position, &step_started)) break;
    pxl_queue_dispatch(demo->queue, 0); /* memory hits queued this frame, if any */
    next_frame += FRAME_MS;
    if (next_frame < now_ms()) next_frame = now_ms(); /* a slow frame: don't catch up */
  }
}

/* ---- the contact sheet ---- */

/* A premultiplied channel over the opaque grey background (0x80). */
static uint8_t over_grey(uint8_t c, uint8_t a) { return (uint8_t)(c + (0x80u * (255u - a) + 127u) / 255u); }

/* The visible rows' thumbnails in screen order, SHEET_COLUMNS x SHEET_ROWS tiles, on a
 * grey background where a thumbnail is missing, smaller than a tile, or transparent (its
 * rounded corners). */
static const char *write_contact_sheet(const struct demo *demo, const char *path) {
  const int width = SHEET_COLUMNS * THUMB_SIZE, height = SHEET_ROWS * THUMB_SIZE;
  uint8_t *sheet = malloc((size_t)width * height * 4);
  if (!sheet) return "out of memory";
  for (size_t i = 0; i < (size_t)width * height; i++) memcpy(sheet + i * 4, (uint8_t[4]){0x80, 0x80, 0x80, 0xff}, 4);
  for (int i = 0; i < VISIBLE_ROWS && i < SHEET_COLUMNS * SHEET_ROWS; i++) {
    const pxl_image *image = demo->slots[(demo->top + i) % VISIBLE_ROWS].image;
    if (!image) continue;
    int ox = (i % SHEET_COLUMNS) * THUMB_SIZE, oy = (i / SHEET_COLUMNS) * THUMB_SIZE;
    int w = pxl_image_width(image) < THUMB_SIZE ? pxl_image_width(image) : THUMB_SIZE;
    int h = pxl_image_height(image) < THUMB_SIZE ? pxl_image_height(image) : THUMB_SIZE;
    for (int y = 0; y < h; y++) {
      const uint8_t *in = pxl_image_pixels(image) + (size_t)y * pxl_image_stride(image);
      uint8_t *out = sheet + ((size_t)(oy + y) * width + ox) * 4;
      for (int x = 0; x < w; x++, in += 4, out += 4) { /* BGRA premultiplied over grey -> RGB(A 255) */
        out[0] = over_grey(in[2], in[3]);
        out[1] = over_grey(in[1], in[3]);
        out[2] = over_grey(in[0], in[3]);
      }
    }
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(sheet);
    return strerror(errno);
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : NULL);
    fclose(f);
    free(sheet);
    return "libpng failed to write";
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGBA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; y++) png_write_row(png, sheet + (size_t)y * width * 4);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(sheet);
  return fclose(f) == 0 ? NULL : strerror(errno);
}

/* ---- setup ---- */

/* BASE_URL + "/" + each non-empty line of path. */
static char **read_urls(const char *base, const char *path, int *count) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "scroll_demo: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t base_len = strlen(base);
  while (base_len && base[base_len - 1] == '/') base_len--;
  char **urls = NULL, *line = NULL;
  size_t cap = 0;
  int n = 0;
  while (getline(&line, &cap, f) >= 0) {
    line[strcspn(line, "\r\n")] = '\0';
    const char *rel = line;
    while (*rel == '/') rel++;
    if (!*rel) continue;
    char **grown = realloc(urls, (size_t)(n + 1) * sizeof *grown);
    size_t size = base_len + strlen(rel) + 2;
    char *url = malloc(size);
    if (!grown || !url) {
      free(url);
      urls = grown ? grown : urls;
      break;
    }
    urls = grown;
    snprintf(url, size, "%.*s/%s", (int)base_len, base, rel);
    urls[n++] = url;
  }
  free(line);
  fclose(f);
  *count = n;
  return urls;
}

static int usage(void) {
  fprintf(stderr, "usage: scroll_demo BASE_URL INDEX_FILE [--out contact.png]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--out") == 0)) return usage();
  const char *sheet_path = argc == 5 ? argv[4] : "contact.png";

  struct demo demo = {.top = -1};
  demo.urls = read_urls(argv[1], argv[2], &demo.rows);
  if (!demo.urls) return 1;
  if (demo.rows < VISIBLE_ROWS) {
    fprintf(stderr, "scroll_demo: %s lists %d images; the table needs at least %d\n", argv[2],
            demo.rows, VISIBLE_ROWS);
    return 1;
  }
  demo.ever_drawn = calloc((size_t)demo.rows, 1);
  for (int i = 0; i < VISIBLE_ROWS; i++) demo.slots[i].row = -1;

  pxl_status s = pxl_loader_new(NULL, &demo.loader);
  if (s == PXL_OK) s = pxl_queue_new(&demo.queue);
  /* Defaults: 8 rows prefetched ahead, 2 kept loading behind. */
  if (s == PXL_OK)
    s = pxl_table_new(demo.loader, demo.queue, NULL, demo.rows, thumbnail_request, on_row, &demo,
                      &demo.table);
  if (s != PXL_OK || !demo.ever_drawn) {
    fprintf(stderr, "scroll_demo: setup failed: %s\n", pxl_status_string(s));
    return 1;
  }

  printf("scroll_demo: %d rows, %d visible, %d ms frames, pixload %s\n", demo.rows,
         VISIBLE_ROWS, FRAME_MS, pxl_version());
  demo.start_ms = now_ms();
  run_script(&demo);
  double total_ms = now_ms() - demo.start_ms;

  int drawn = screen_drawn(&demo);
  const char *sheet_error = write_contact_sheet(&demo, sheet_path);

  struct stats *st = &demo.stats;
  pxl_table_stats ts = {.struct_size = sizeof ts};
  pxl_table_get_stats(demo.table, &ts);
  size_t ttv_count = st->time_to_visible.count, net_count = st->network_time_to_visible.count;
  printf("\n");
  printf("scrolled for           %.1f s\n", total_ms / 1000.0);
  printf("rows shown             %d\n", st->rows_shown);
  printf("requests started       %llu (prefetches included; %llu row errors)\n",
         (unsigned long long)ts.started, (unsigned long long)ts.failed);
  printf("cancelled              %llu (their rows left the screen and the windows around it)\n",
         (unsigned long long)ts.cancelled);
  printf("memory-cache hits      %llu (rows scrolled back to: %d, drawn at once: %d)\n",
         (unsigned long long)ts.memory_hits, st->revisits, st->revisits_at_once);
  printf("time to visible        median %.1f ms, p95 %.1f ms (%zu rows drawn)\n",
         percentile(&st->time_to_visible, 0.5), percentile(&st->time_to_visible, 0.95), ttv_count);
  printf("  waiting for a load   median %.1f ms, p95 %.1f ms (%zu rows)\n",
         percentile(&st->network_time_to_visible, 0.5),
         percentile(&st->network_time_to_visible, 0.95), net_count);
  printf("final screen           %d of %d rows drawn (top row %d)\n", drawn, VISIBLE_ROWS, demo.top);
  printf("stale images drawn     %d\n", st->stale_draws);
  if (sheet_error) printf("contact sheet          not written: %s\n", sheet_error);
  else printf("contact sheet          %s\n", sheet_path);

  int ok = drawn == VISIBLE_ROWS && st->stale_draws == 0 && !sheet_error;
  printf("%s\n", ok ? "OK" : "FAILED");

  /* Shutdown: the table (cancelling anything it still loads; no row_fn after this), the
   * cells' images, the loader, then the queue. */
  pxl_table_free(demo.table);
  for (int i = 0; i < VISIBLE_ROWS; i++) pxl_image_release(demo.slots[i].image);
  pxl_loader_free(demo.loader);
  pxl_queue_free(demo.queue);
  for (int i = 0; i < demo.rows; i++) free(demo.urls[i]);
  free(demo.urls);
  free(demo.ever_drawn);
  free(st->time_to_visible.ms);
  free(st->network_time_to_visible.ms);
  return ok ? 0 : 1;
}
