/*
 * scroll_demo: a scrolling table of thumbnails driven by pixload, the way a UI toolkit
 * would drive it, with the UI replaced by a script.
 *
 *   scroll_demo BASE_URL INDEX_FILE [--out contact.png]
 *
 * INDEX_FILE lists one image path per line (relative to BASE_URL); each is one row of
 * the table. VISIBLE_ROWS rows are on screen at a time, in as many reusable slots (the
 * "cells" of a table view: row r is drawn in slot r % VISIBLE_ROWS). A script scrolls
 * the table: slowly down, a fling, a stop, slowly back up over rows already seen, and a
 * jump. Every 16 ms frame advances the script; between frames the host sleeps in poll()
 * on the queue's fd and dispatches completions as they come.
 *
 * What it shows, and checks:
 *  - a row entering the view is first looked up in the memory cache (pxl_lookup), so a
 *    row scrolled back to is drawn in the same frame, with no placeholder;
 *  - otherwise it is loaded at PXL_PRIORITY_VISIBLE, and cancelled if it leaves the view
 *    before its image arrives;
 *  - a slot remembers the token of its current request, and a completion whose token is
 *    not its slot's is never drawn: that slot may show another row by now.
 *
 * It prints what happened (rows shown, requests, cancels, cache hits, time from a row
 * entering the view to its image being drawn) and writes the last screen's thumbnails
 * as a contact sheet PNG. Exit status 0 only if every row of the last screen was drawn,
 * every row scrolled back to came from the memory cache, and no stale image was drawn.
 *
 * Build: gcc -std=c11 -O2 -I include examples/c/scroll_demo.c -L DIR -lpixload -lpng
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
  pxl_token token;    /* the request for that row still waiting for its callback, or 0 */
  pxl_image *image;   /* the thumbnail drawn, our reference; NULL: a placeholder */
  double entered_ms;  /* when the row entered the view */
};

/* The user_data of one pxl_load: what the callback needs to find its slot. Freed in the
 * callback, which runs exactly once whatever happens (rule 2). */
struct pending {
  struct demo *demo;
  int slot;
  int row;
};

struct samples {
  double *ms;
  size_t count;
};

struct stats {
  int rows_shown;          /* rows that entered the view */
  int requests_started;    /* pxl_load accepted */
  int requests_refused;    /* pxl_load failed */
  int cancelled;           /* pxl_cancel returned PXL_OK */
  int memory_hits;         /* rows drawn at once from pxl_lookup */
  int revisits;            /* rows entering the view that had been drawn before */
  int revisit_misses;      /* ... that pxl_lookup did not find */
  int load_errors;         /* callbacks with an error other than CANCELLED */
  int ignored_completions; /* callbacks for a token that was no longer its slot's */
  int images_after_cancel; /* ... that carried an image anyway (rule 3 broken) */
  int stale_draws;         /* an image drawn in a slot showing another row: never */
  struct samples time_to_visible;         /* every drawn row */
  struct samples network_time_to_visible; /* rows that waited for a load */
};

struct demo {
  pxl_loader *loader;
  pxl_queue *queue;
  char **urls;
  int rows;
  unsigned char *ever_drawn; /* per row */
  struct slot slots[VISIBLE_ROWS];
  int top;                   /* first visible row; -1 before the first frame */
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

static void thumbnail_request(const struct demo *demo, int row, pxl_request *request) {
  pxl_request_init(request);
  request->url = demo->urls[row];
  request->width = THUMB_SIZE;
  request->height = THUMB_SIZE;
  request->mode = PXL_MODE_FILL;
  request->format = THUMB_FORMAT;
  request->priority = PXL_PRIORITY_VISIBLE;
}

/* Takes over the caller's reference to image. */
static void draw(struct demo *demo, struct slot *slot, int row, pxl_image *image, int waited) {
  if (slot->row != row) {
    /* The token check in on_thumbnail makes this unreachable; it is here so that the
     * demo proves it rather than assumes it. */
    demo->stats.stale_draws++;
    pxl_image_release(image);
    return;
  }
  pxl_image_release(slot->image);
  slot->image = image;
  demo->ever_drawn[row] = 1;
  double ms = now_ms() - slot->entered_ms;
  add_sample(&demo->stats.time_to_visible, ms);
  if (waited) add_sample(&demo->stats.network_time_to_visible, ms);
}

static void on_thumbnail(pxl_token token, const pxl_result *result, void *user_data) {
  struct pending *pending = user_data;
  struct demo *demo = pending->demo;
  struct slot *slot = &demo->slots[pending->slot];
  if (token != slot->token) {
    /* The row left the view and we cancelled it; the slot may show another row now. */
    demo->stats.ignored_completions++;
    if (result->image) demo->stats.images_after_cancel++;
  } else {
    slot->token = 0;
    if (result->status == PXL_OK) {
      draw(demo, slot, pending->row, pxl_image_retain(result->image), 1);
    } else {
      demo->stats.load_errors++;
      fprintf(stderr, "scroll_demo: row %d: %s (%s)\n", pending->row, result->message,
              pxl_status_string(result->status));
    }
  }
  free(pending);
}

static void show_row(struct demo *demo, int row) {
  struct slot *slot = &demo->slots[row % VISIBLE_ROWS];
  slot->row = row;
  slot->entered_ms = now_ms();
  demo->stats.rows_shown++;
  int revisit = demo->ever_drawn[row];
  demo->stats.revisits += revisit;

  pxl_request request;
  thumbnail_request(demo, row, &request);
  pxl_image *cached = NULL;
  if (pxl_lookup(demo->loader, &request, &cached) == PXL_OK) {
    demo->stats.memory_hits++;
    draw(demo, slot, row, cached, 0);
    return;
  }
  demo->stats.revisit_misses += revisit;

  struct pending *pending = malloc(sizeof *pending);
  if (!pending) {
    demo->stats.requests_refused++;
    return;
  }
  *pending = (struct pending){demo, row % VISIBLE_ROWS, row};
  pxl_status s = pxl_load(demo->loader, &request, demo->queue, on_thumbnail, pending, &slot->token);
  if (s == PXL_OK) {
    demo->stats.requests_started++;
  } else {
    free(pending); /* a refused load never calls back */
    slot->token = 0;
    demo->stats.requests_refused++;
    fprintf(stderr, "scroll_demo: row %d: %s\n", row, pxl_status_string(s));
  }
}

static void hide_row(struct demo *demo, int row) {
  struct slot *slot = &demo->slots[row % VISIBLE_ROWS];
  if (slot->token) {
    /* Its callback will still come, with PXL_E_CANCELLED, and free its pending. */
    if (pxl_cancel(demo->loader, slot->token) == PXL_OK) demo->stats.cancelled++;
    slot->token = 0;
  }
  pxl_image_release(slot->image);
  slot->image = NULL;
  slot->row = -1;
}

/* Moves the view so that new_top is the first visible row: rows that left are hidden
 * first, so that their slots are free for the rows that came in. */
static void scroll_to(struct demo *demo, int new_top) {
  int old_top = demo->top;
  if (new_top == old_top) return;
  for (int row = old_top; old_top >= 0 && row < old_top + VISIBLE_ROWS; row++) {
    if (row < new_top || row >= new_top + VISIBLE_ROWS) hide_row(demo, row);
  }
  for (int row = new_top; row < new_top + VISIBLE_ROWS; row++) {
    if (old_top < 0 || row < old_top || row >= old_top + VISIBLE_ROWS) show_row(demo, row);
  }
  demo->top = new_top;
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
 * it shows loads being cancelled even against a server on loopback. */
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
    int done = 0;
    if (s->kind == MOVE) {
      double delta = s->target - *position;
      if (fabs(delta) <= s->rows_per_frame) {
        *position = s->target;
        done = 1;
      } else {
        *position += delta > 0 ? s->rows_per_frame : -s->rows_per_frame;
      }
    } else if (s->kind == JUMP) {
      *position = s->target;
      done = 1;
    } else {
      double held = now - *step_started;
      done = held >= s->min_ms && (screen_drawn(demo) == VISIBLE_ROWS || held >= s->max_ms);
    }
    scroll_to(demo, (int)floor(*position));
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

static uint8_t unpremultiply(uint8_t c, uint8_t a) {
  if (a == 0) return 0;
  unsigned v = ((unsigned)c * 255u + a / 2u) / a;
  return (uint8_t)(v > 255u ? 255u : v);
}

/* The visible rows' thumbnails in screen order, SHEET_COLUMNS x SHEET_ROWS tiles, on a
 * grey background where a thumbnail is missing or smaller than a tile. */
static const char *write_contact_sheet(const struct demo *demo, const char *path) {
  const int width = SHEET_COLUMNS * THUMB_SIZE, height = SHEET_ROWS * THUMB_SIZE;
  uint8_t *sheet = malloc((size_t)width * height * 4);
  if (!sheet) return "out of memory";
  memset(sheet, 0x80, (size_t)width * height * 4);
  for (int i = 0; i < VISIBLE_ROWS && i < SHEET_COLUMNS * SHEET_ROWS; i++) {
    const pxl_image *image = demo->slots[(demo->top + i) % VISIBLE_ROWS].image;
    if (!image) continue;
    int ox = (i % SHEET_COLUMNS) * THUMB_SIZE, oy = (i / SHEET_COLUMNS) * THUMB_SIZE;
    int w = pxl_image_width(image) < THUMB_SIZE ? pxl_image_width(image) : THUMB_SIZE;
    int h = pxl_image_height(image) < THUMB_SIZE ? pxl_image_height(image) : THUMB_SIZE;
    for (int y = 0; y < h; y++) {
      const uint8_t *in = pxl_image_pixels(image) + (size_t)y * pxl_image_stride(image);
      uint8_t *out = sheet + ((size_t)(oy + y) * width + ox) * 4;
      for (int x = 0; x < w; x++, in += 4, out += 4) { /* BGRA premultiplied -> RGBA */
        out[0] = unpremultiply(in[2], in[3]);
        out[1] = unpremultiply(in[1], in[3]);
        out[2] = unpremultiply(in[0], in[3]);
        out[3] = in[3];
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
  size_t ttv_count = st->time_to_visible.count, net_count = st->network_time_to_visible.count;
  printf("\n");
  printf("scrolled for           %.1f s\n", total_ms / 1000.0);
  printf("rows shown             %d\n", st->rows_shown);
  printf("requests started       %d (%d refused, %d failed)\n", st->requests_started,
         st->requests_refused, st->load_errors);
  printf("cancelled              %d\n", st->cancelled);
  printf("memory-cache hits      %d (rows scrolled back to: %d, missed: %d)\n",
         st->memory_hits, st->revisits, st->revisit_misses);
  printf("completions ignored    %d (for rows no longer shown; with an image: %d)\n",
         st->ignored_completions, st->images_after_cancel);
  printf("time to visible        median %.1f ms, p95 %.1f ms (%zu rows drawn)\n",
         percentile(&st->time_to_visible, 0.5), percentile(&st->time_to_visible, 0.95), ttv_count);
  printf("  waiting for a load   median %.1f ms, p95 %.1f ms (%zu rows)\n",
         percentile(&st->network_time_to_visible, 0.5),
         percentile(&st->network_time_to_visible, 0.95), net_count);
  printf("final screen           %d of %d rows drawn (top row %d)\n", drawn, VISIBLE_ROWS, demo.top);
  printf("stale images drawn     %d\n", st->stale_draws);
  if (sheet_error) printf("contact sheet          not written: %s\n", sheet_error);
  else printf("contact sheet          %s\n", sheet_path);

  int ok = drawn == VISIBLE_ROWS && st->stale_draws == 0 && st->images_after_cancel == 0 &&
           st->revisit_misses == 0 && !sheet_error;
  printf("%s\n", ok ? "OK" : "FAILED");

  /* Shutdown: hide the screen (cancelling anything still loading), free the loader, then
   * the queue, whose free runs the last CANCELLED callbacks, which free their pendings. */
  for (int row = demo.top; row < demo.top + VISIBLE_ROWS; row++) hide_row(&demo, row);
  pxl_loader_free(demo.loader);
  pxl_queue_free(demo.queue);
  for (int i = 0; i < demo.rows; i++) free(demo.urls[i]);
  free(demo.urls);
  free(demo.ever_drawn);
  free(st->time_to_visible.ms);
  free(st->network_time_to_visible.ms);
  return ok ? 0 : 1;
}
