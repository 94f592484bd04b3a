/*
 * pixload-gtk: a GTK 4 list of 1,000 circular avatars with captions, loaded by pixload.
 *
 *   pixload-gtk [options] BASE_URL        (or PIXLOAD_GTK_BASE_URL in the environment)
 *
 *   --index FILE        image paths, one a line, relative to BASE_URL (default: the
 *                       environment's PIXLOAD_GTK_INDEX, else build/demo-data/index.txt)
 *   --urls FILE         full URLs, one a line, instead of BASE_URL + --index (or
 *                       PIXLOAD_GTK_URLS in the environment)
 *   --rows N            rows in the list (default 1000); row i shows image i % count with
 *                       "?row=i" added, so every row is a URL of its own
 *   --script[=still|=animated]  scroll by itself (slow scroll, fling, stop, back;
 *                       "still": only wait for the first screen; "animated": away from the
 *                       first screen's animated rows and back), report, exit with a status
 *   --deadline-ms N     scripted: the longest a visible row may wait for its image after
 *                       the view settles (default 200; the first screen is exempt)
 *   --settle-timeout-ms N  scripted: give up waiting for a screen after this (default 3000)
 *   --hold-until FILE   scripted: after printing the screen geometry and SCREENSHOT-READY,
 *                       keep the final frame on screen until FILE exists (a test takes its
 *                       screenshot meanwhile), at most 60 s
 *   --placeholders FILE BlurHashes, one "PATH<TAB>HASH" line per image (PATH as in the
 *                       index, or the URL as in --urls): a row still loading shows its
 *                       image's hash, blurred and round, instead of the flat placeholder
 *                       (scripts/demo-blurhashes.sh makes the file with `pixload hash`)
 *
 * How it drives pixload, the way the API intends:
 *  - The completion queue's fd is watched by the GLib main loop (g_unix_fd_add), so every
 *    pixload callback runs on the GTK thread, inside pxl_queue_dispatch.
 *  - A pxl_table owns the requests. The vertical adjustment's value-changed tells it which
 *    rows are on screen and which way they move; a frame without movement tells it the
 *    view is still. It loads the visible rows first, prefetches ahead, cancels what left,
 *    and calls on_row only for rows on screen.
 *  - A list item's bind asks the memory cache first (pxl_lookup, synchronous), so a row
 *    scrolled back to is drawn in the same frame, never as a placeholder. Otherwise the
 *    cell shows the placeholder until on_row brings the row's image. Unbind detaches the
 *    cell from its row: the table cancels the row's load once the row leaves its window,
 *    and never delivers a result for a row that is not visible.
 *  - Images become textures without a copy: gdk_memory_texture_new over a GBytes that
 *    wraps the pxl_image's pixels and releases the image when GTK frees the texture.
 *    PXL_FORMAT_BGRA8_PREMUL is GDK_MEMORY_DEFAULT (B8G8R8A8_PREMULTIPLIED), the format
 *    GDK's renderers take as is.
 *  - Every pxl_* call is timed (PXL_TIMED): the main loop must never spend a frame (16 ms)
 *    inside pixload.
 *  - With --placeholders, each row's request carries its image's BlurHash: the table hands
 *    on_row the decoded hash (32x32 RGBA8, preview PXL_PREVIEW_PLACEHOLDER) inside the
 *    pxl_table_set_visible that shows the row, never after its image. The app scales it
 *    to the slot, cuts it to the avatar's disc and keeps it per row until the row's image
 *    (or error) comes or the row leaves the screen: GTK binds a row after the adjustment
 *    moves, so the hash often arrives before the row has a cell, and the bind draws it.
 *  - Animated rows play through animation players, never PXL_FLAG_ANIMATE: every row
 *    loads as a still (an animation's first frame, as fast as a photo). A row whose
 *    result says it is animated (pxl_image_source_frame_count > 1) gets a player of the
 *    same request (pxl_animation_load; its LOADED frame 0 is that still, from memory),
 *    tied to the row with pxl_table_bind_animation: the table pauses it while the row is
 *    out of view and resumes it where it was when the row comes back, so only visible
 *    rows decode frames (a ring of 3, whatever the animation's length). The GTK frame
 *    clock drives them: a tick callback (while an animated row plays on screen) asks each
 *    visible animated row's player for the frame due at the clock's frame time
 *    (pxl_animation_frame_at, in ms) and swaps the cell's texture when the frame index
 *    changes. FRAME_READY events only make sure that tick runs: no timers. A player belongs to its row, not
 *    to a cell: its frames are drawn only into the cell bound to that row now, so a
 *    recycled cell never shows another row's frame, and a row bound again shows the
 *    frame its player is at. Players of rows far from the view (PLAYER_KEEP_ROWS), or
 *    whose row failed, are freed; all are freed before the table and the loader.
 *    --script=animated checks it (animated rows on the first screen: --index with
 *    examples/gtk/animated-data.sh's rows): pxl_table_stats.animation_frames_decoded
 *    grows while they are on screen, stays still while the view is away from them, and
 *    grows again once back.
 *
 * Build: examples/gtk/build.sh build OUT, that is
 *   cc -std=c11 -O2 pixload_gtk.c $(pkg-config --cflags --libs gtk4 x11) \
 *      -I build/include -L build/lib -Wl,-rpath,$PWD/build/lib -lpixload -lm
 * (x11 only where GTK has its X11 backend: scripted mode asks X where the window is.)
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <gtk/gtk.h>
#include <glib-unix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef GDK_WINDOWING_X11
#include <gdk/x11/gdkx.h>
#endif

#include "pixload.h"

enum {
  THUMB_WIDTH = 96, /* the avatars' column: discs of 96 px */
  THUMB_HEIGHT = 96,
  DISPATCH_BATCH = 32,  /* callbacks per main-loop turn: input and drawing stay responsive */
  FRAME_BUDGET_US = 16000,
  PAUSE_BETWEEN_PHASES_MS = 250,
  HOLD_LIMIT_MS = 60000,
  PLAYER_KEEP_ROWS = 24,  /* an animated row's player lives while the row is this close to the view */
};

/* BGRA premultiplied is GDK_MEMORY_DEFAULT: cairo's ARGB32, uploaded and drawn as is. */
#define THUMB_FORMAT PXL_FORMAT_BGRA8_PREMUL
#define THUMB_GDK_FORMAT GDK_MEMORY_B8G8R8A8_PREMULTIPLIED

/* The placeholder: a flat colour no photograph has, so a screenshot tells it apart. */
#define PLACEHOLDER_BGRA {0xff, 0x00, 0xff, 0xff} /* magenta */

/* ---- timing every pixload call ---- */

/* The longest time the main loop spent inside one pixload call, with and without the
 * host's own callbacks that ran inside it (on_row makes textures). Calls made from inside
 * a pixload call (pxl_image_* in on_row) count toward the outer one. Lifecycle calls
 * (new/free, before and after the session) are kept apart. A slow call also records the
 * thread's CPU time and context switches during it, which tell pixload's own work from
 * waiting: a voluntary switch is a wait on a lock, an involuntary one is the kernel
 * running another thread (on a busy machine, the decoders or another process). */
struct slow_call {
  const char *name;
  gint64 at_us, took_us;
  gint64 host_us;            /* of which in the host's callbacks */
  gint64 cpu_us;             /* calls over 4 ms: the thread's CPU time in the call */
  long waits, preemptions;   /* ... and its voluntary and involuntary context switches */
};

struct call_clock {
  int depth;
  gint64 started_us, started_cpu_us;
  struct rusage started_usage;
  gint64 host_us;            /* host callback time inside the current outer call */
  guint64 calls;
  struct slow_call longest;
  guint64 over_4ms, over_8ms;  /* outer calls that took that long */
  struct slow_call slow[16];   /* the first calls over 4 ms */
  int slow_count;
  gint64 lifecycle_longest_us;
  const char *lifecycle_longest_name;
};
static struct call_clock pxl_clock;

static gint64 thread_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (gint64)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void pxl_clock_enter(void) {
  if (pxl_clock.depth++ == 0) {
    pxl_clock.host_us = 0;
    getrusage(RUSAGE_THREAD, &pxl_clock.started_usage);
    pxl_clock.started_cpu_us = thread_cpu_us();
    pxl_clock.started_us = g_get_monotonic_time();
  }
}

static void pxl_clock_leave(const char *name, gboolean lifecycle) {
  if (--pxl_clock.depth > 0) return;
  gint64 elapsed = g_get_monotonic_time() - pxl_clock.started_us;
  pxl_clock.calls++;
  if (lifecycle) {
    if (elapsed > pxl_clock.lifecycle_longest_us) {
      pxl_clock.lifecycle_longest_us = elapsed;
      pxl_clock.lifecycle_longest_name = name;
    }
    return;
  }
  struct slow_call call = {.name = name, .at_us = pxl_clock.started_us, .took_us = elapsed,
                           .host_us = pxl_clock.host_us};
  if (elapsed > 4000) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    call.cpu_us = thread_cpu_us() - pxl_clock.started_cpu_us;
    call.waits = usage.ru_nvcsw - pxl_clock.started_usage.ru_nvcsw;
    call.preemptions = usage.ru_nivcsw - pxl_clock.started_usage.ru_nivcsw;
    pxl_clock.over_4ms++;
    pxl_clock.over_8ms += elapsed > 8000;
    if (pxl_clock.slow_count < (int)G_N_ELEMENTS(pxl_clock.slow)) pxl_clock.slow[pxl_clock.slow_count++] = call;
  }
  if (elapsed > pxl_clock.longest.took_us) pxl_clock.longest = call;
}

/* Host callbacks measure themselves so that their time can be told apart. */
static gint64 host_callback_begin(void) { return g_get_monotonic_time(); }
static void host_callback_end(gint64 began_us) {
  if (pxl_clock.depth > 0) pxl_clock.host_us += g_get_monotonic_time() - began_us;
}

#define PXL_TIMED(name, expr) do { pxl_clock_enter(); expr; pxl_clock_leave(name, FALSE); } while (0)
#define PXL_TIMED_LIFECYCLE(name, expr) do { pxl_clock_enter(); expr; pxl_clock_leave(name, TRUE); } while (0)

/* ---- the application ---- */

/* One list item's widgets; lives from setup to teardown, shows one row at a time. */
struct cell {
  GtkWidget *picture, *title, *detail;
  int64_t row;        /* -1 while unbound */
  gint64 bound_us;    /* when it was bound to row */
  gint64 image_us;    /* when row's texture was set; 0 while the placeholder shows */
};

struct settle_report {
  const char *name;
  int visible, placeholders;
  double slowest_ms;  /* from the view settling to a visible row's texture */
  int players_in_view;          /* animated rows on screen with a player, at the settle */
  int foreign_frames;           /* visible cells drawing another row's player's frame */
  uint64_t decoded_at_settle;   /* pxl_table_stats.animation_frames_decoded then */
  uint64_t decoded_after_pause; /* ... and when the pause after the settle ended */
};

struct app {
  GtkApplication *gtk;
  GtkWidget *window, *scroller, *list, *status;
  GtkAdjustment *vadj;
  GdkTexture *placeholder;
  pxl_loader *loader;
  pxl_queue *queue;
  pxl_table *table;
  guint queue_source;
  char **urls;
  int64_t rows;
  char **hash_of_source;      /* per image of the index (row % source_count): its
                                 BlurHash, or NULL (none given) */
  int64_t source_count;
  GdkTexture **placeholder_of_row; /* per visible row still loading: its hash, drawn */
  struct cell **cell_of_row;  /* the bound cell showing each row, or NULL */
  guint8 *ever_shown;         /* per row: had its image on screen once */
  gint64 *entered_us;         /* per row: when it last entered the visible range */
  int64_t told_first;         /* the visible range the table was last told */
  int32_t told_count;
  GArray *time_to_visible_ms; /* per row shown while visible: from entering the view (or
                                 its bind, if later) to its texture */
  pxl_status *row_error;      /* per row: the error on_row reported, PXL_OK if none */
  GPtrArray *cells;           /* every cell, bound or not */
  struct player **player_of_row; /* per row: its animation player, or NULL */
  GPtrArray *players;         /* the live players */
  guint animation_tick;       /* the frame clock's callback while players live */
  double last_value;          /* the adjustment value the table was last told about */
  gboolean moved_this_frame;
  guint still_tick;
  guint status_timer;

  /* counters */
  guint64 textures, textures_copied;
  guint64 bind_memory_hits, placeholder_flashes, deliveries_to_unbound_rows;
  guint64 players_made, animation_frames_drawn;
  guint64 hash_placeholders;  /* on_row calls with a row's hash */
  guint64 waited_without_hash; /* rows with a hash whose image came from disk or network
                                  with no hash before it */

  /* scripted mode */
  const char *script;         /* NULL, "full", "still" or "animated" */
  const char *hold_file;
  int deadline_ms, settle_timeout_ms;
  int phase;
  enum { SCRIPT_MOVING, SCRIPT_SETTLING, SCRIPT_PAUSING, SCRIPT_FINISHING, SCRIPT_HOLDING } stage;
  gint64 session_started_us, stage_started_us, settle_us;
  double move_from;
  int finishing_frames;
  struct settle_report reports[8];
  int report_count;
  int exit_status;
};

/* The BlurHash of row's image, or NULL. */
static const char *row_hash(const struct app *app, int64_t row) {
  return app->hash_of_source ? app->hash_of_source[row % app->source_count] : NULL;
}

/* The request for a row: the table's request_fn and the bind's lookup use this one, so
 * the lookup finds exactly what the table loads. */
static void fill_request(const struct app *app, int64_t row, pxl_request *request) {
  /* pixload cuts the avatar's disc on its decoder threads (every frame a player
   * decodes too), and caches the disc: the GTK thread only draws it. */
  static const pxl_processor circle = {.kind = PXL_PROCESS_CIRCLE};
  request->url = app->urls[row];
  request->width = THUMB_WIDTH;
  request->height = THUMB_HEIGHT;
  request->mode = PXL_MODE_FILL;
  request->format = THUMB_FORMAT;
  /* No PXL_FLAG_ANIMATE: every row loads as a still (an animation's frame 0); an
   * animated row then gets a player of this same request (ensure_player). */
  request->processors = &circle;
  request->processor_count = 1;
  const char *hash = row_hash(app, row);
  if (hash) {
    request->placeholder_kind = PXL_PLACEHOLDER_BLURHASH;
    request->placeholder = hash;
    request->placeholder_length = strlen(hash);
  }
}

static int request_for_row(int64_t row, pxl_request *request, void *user_data) {
  const struct app *app = user_data;
  if (row < 0 || row >= app->rows) return 0;
  fill_request(app, row, request);
  return 1;
}

/* ---- textures without a copy ---- */

struct texture_pixels {
  pxl_image *image;
  gboolean released;  /* GTK dropped the bytes: the texture copied them */
  gboolean texture_made;
};

static void release_texture_pixels(gpointer data) {
  struct texture_pixels *pixels = data;
  /* A renderer may free a texture off the main thread; pxl_image_release is safe on any
   * thread, the call clock is the main loop's alone. */
  if (g_main_context_is_owner(g_main_context_default()))
    PXL_TIMED("pxl_image_release", pxl_image_release(pixels->image));
  else
    pxl_image_release(pixels->image);
  if (pixels->texture_made) g_free(pixels);
  else pixels->released = TRUE;  /* still inside texture_from_image, which frees it */
}

/* A texture over the image's own pixels (image borrowed; the texture keeps a reference
 * until GTK frees it). NULL for a format GDK would need converted. */
static GdkTexture *texture_from_image(struct app *app, pxl_image *image) {
  pxl_format format;
  int32_t width, height, stride;
  const uint8_t *data;
  size_t size;
  PXL_TIMED("pxl_image_format", format = pxl_image_format(image));
  if (format != THUMB_FORMAT) return NULL;
  struct texture_pixels *pixels = g_new0(struct texture_pixels, 1);
  PXL_TIMED("pxl_image_retain", pixels->image = pxl_image_retain(image));
  PXL_TIMED("pxl_image_width", width = pxl_image_width(image));
  PXL_TIMED("pxl_image_height", height = pxl_image_height(image));
  PXL_TIMED("pxl_image_stride", stride = pxl_image_stride(image));
  PXL_TIMED("pxl_image_pixels", data = pxl_image_pixels(image));
  PXL_TIMED("pxl_image_byte_count", size = pxl_image_byte_count(image));
  GBytes *bytes = g_bytes_new_with_free_func(data, size, release_texture_pixels, pixels);
  GdkTexture *texture = gdk_memory_texture_new(width, height, THUMB_GDK_FORMAT, bytes, (gsize)stride);
  g_bytes_unref(bytes);
  app->textures++;
  /* gdk_memory_texture_new copies only pixels it cannot use as they are (misaligned
   * rows); then it has already dropped our bytes. Count it: the goal is zero. */
  if (pixels->released) {
    app->textures_copied++;
    g_free(pixels);
  } else {
    pixels->texture_made = TRUE;
  }
  return texture;
}

/* ---- animated rows: one player a row, driven by the frame clock ---- */

/* An animated row's player. It belongs to the row, not to a cell: GTK recycles cells,
 * and a player's frames are only ever drawn into cell_of_row[row], the cell bound to its
 * own row now (none while the row has no cell). The table pauses it while the row is out
 * of view; it is freed once the row is PLAYER_KEEP_ROWS away from the visible rows. */
struct player {
  struct app *app;
  int64_t row;
  pxl_animation *animation;
  gboolean loaded;      /* LOADED came (frame 0: the still the row already shows) */
  gboolean ended;       /* ENDED or FAILED: its last frame stays shown */
  int32_t index;        /* the frame last drawn (0: the still) */
  GdkTexture *texture;  /* that frame's texture; NULL while it is the still */
};

static void start_animation_tick(struct app *app);

static void free_player(struct app *app, int64_t row) {
  struct player *player = row >= 0 && row < app->rows ? app->player_of_row[row] : NULL;
  if (!player) return;
  PXL_TIMED("pxl_animation_free", pxl_animation_free(player->animation));
  app->player_of_row[row] = NULL;
  g_ptr_array_remove_fast(app->players, player);
  g_clear_object(&player->texture);
  g_free(player);
}

/* The player's events, on the GTK thread (inside pxl_queue_dispatch). Drawing is the
 * frame clock's (animation_tick): FRAME_READY only makes sure it runs. */
static void on_player_event(pxl_animation *animation, const pxl_animation_event *event, void *user_data) {
  (void)animation;
  gint64 began = host_callback_begin();
  struct player *player = user_data;
  struct app *app = player->app;
  switch (event->kind) {
  case PXL_ANIMATION_LOADED:
    if (event->status != PXL_OK) {
      free_player(app, player->row);  /* the row keeps its still */
      break;
    }
    player->loaded = TRUE;
    start_animation_tick(app);
    break;
  case PXL_ANIMATION_FRAME_READY:
    start_animation_tick(app);
    break;
  case PXL_ANIMATION_ENDED:
  case PXL_ANIMATION_FAILED:  /* playback stops at the last good frame */
    player->ended = TRUE;
    break;
  }
  host_callback_end(began);
}

/* A row whose still says it is animated gets a player of the same request (its LOADED
 * frame 0 is that still, from the memory cache), tied to the row in the table. */
static void ensure_player(struct app *app, int64_t row, pxl_image *still) {
  int32_t frames;
  if (app->player_of_row[row] || !app->table) return;
  PXL_TIMED("pxl_image_source_frame_count", frames = pxl_image_source_frame_count(still));
  if (frames < 2) return;
  struct player *player = g_new0(struct player, 1);
  player->app = app;
  player->row = row;
  pxl_request request;
  pxl_status status;
  PXL_TIMED("pxl_request_init", pxl_request_init(&request));
  fill_request(app, row, &request);
  PXL_TIMED("pxl_animation_load",
            status = pxl_animation_load(app->loader, &request, app->queue, on_player_event, player,
                                        &player->animation));
  if (status != PXL_OK) {
    g_warning("pxl_animation_load: %s", pxl_status_string(status));
    g_free(player);
    return;
  }
  PXL_TIMED("pxl_table_bind_animation", status = pxl_table_bind_animation(app->table, row, player->animation));
  if (status != PXL_OK) g_warning("pxl_table_bind_animation: %s", pxl_status_string(status));
  app->player_of_row[row] = player;
  g_ptr_array_add(app->players, player);
  app->players_made++;
}

static gboolean row_in_view(const struct app *app, int64_t row) {
  return row >= app->told_first && row < app->told_first + app->told_count;
}

/* Once per frame while an animated row plays on screen: each visible animated cell asks
 * its row's player for the frame due at the frame clock's time, and gets a new texture
 * when the frame changed. Rows out of view are not asked (the table has paused their
 * players). With none playing on screen the callback goes (the frame clock may idle);
 * LOADED, FRAME_READY, a bind and a scroll bring it back. */
static gboolean animation_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data) {
  (void)widget;
  struct app *app = user_data;
  int64_t now_ms = gdk_frame_clock_get_frame_time(clock) / 1000;
  gboolean playing = FALSE;
  for (guint i = 0; i < app->players->len; i++) {
    struct player *player = g_ptr_array_index(app->players, i);
    struct cell *cell = app->cell_of_row[player->row];
    if (!player->loaded || player->ended || !cell || !cell->image_us || !row_in_view(app, player->row)) continue;
    playing = TRUE;
    pxl_animation_frame frame = {.struct_size = sizeof frame};
    pxl_image *image;
    PXL_TIMED("pxl_animation_frame_at", image = pxl_animation_frame_at(player->animation, now_ms, &frame));
    if (!image) continue;
    if (frame.index != player->index) {
      GdkTexture *texture = texture_from_image(app, image);
      if (texture) {
        gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(texture));
        g_clear_object(&player->texture);
        player->texture = texture;
        player->index = frame.index;
        app->animation_frames_drawn++;
      }
    }
    if (frame.ended) player->ended = TRUE;
    PXL_TIMED("pxl_image_release", pxl_image_release(image));
  }
  if (playing) return G_SOURCE_CONTINUE;
  app->animation_tick = 0;
  return G_SOURCE_REMOVE;
}

static void start_animation_tick(struct app *app) {
  if (!app->animation_tick && app->list && app->players->len)
    app->animation_tick = gtk_widget_add_tick_callback(app->list, animation_tick, app, NULL);
}

/* Players of rows far from the view go (their rows, back on screen, get a new one). */
static void free_far_players(struct app *app) {
  for (guint i = app->players->len; i-- > 0;) {
    struct player *player = g_ptr_array_index(app->players, i);
    if (player->row < app->told_first - PLAYER_KEEP_ROWS ||
        player->row >= app->told_first + app->told_count + PLAYER_KEEP_ROWS)
      free_player(app, player->row);
  }
}

static GdkTexture *make_placeholder(void) {
  static const guint8 bgra[4] = PLACEHOLDER_BGRA;
  gsize size = (gsize)THUMB_WIDTH * THUMB_HEIGHT * 4;
  guint8 *data = g_malloc(size);
  for (gsize i = 0; i < size; i += 4) memcpy(data + i, bgra, 4);
  GBytes *bytes = g_bytes_new_take(data, size);
  GdkTexture *texture = gdk_memory_texture_new(THUMB_WIDTH, THUMB_HEIGHT, THUMB_GDK_FORMAT, bytes,
                                               THUMB_WIDTH * 4);
  g_bytes_unref(bytes);
  return texture;
}

/* A row's hash placeholder (the table's decoded BlurHash: small, RGBA8 straight) as the
 * avatar's slot shows it: scaled to cover the slot (bilinear), cut to the same disc as
 * pixload's Circle (anti-aliased rim, transparent corners), premultiplied BGRA. A copy
 * by nature (it is a new picture, 96x96 from 32x32): not counted with the textures.
 * NULL for another format. */
static GdkTexture *texture_from_placeholder(pxl_image *image) {
  pxl_format format;
  int32_t width, height, stride;
  const uint8_t *src;
  PXL_TIMED("pxl_image_format", format = pxl_image_format(image));
  PXL_TIMED("pxl_image_width", width = pxl_image_width(image));
  PXL_TIMED("pxl_image_height", height = pxl_image_height(image));
  PXL_TIMED("pxl_image_stride", stride = pxl_image_stride(image));
  PXL_TIMED("pxl_image_pixels", src = pxl_image_pixels(image));
  if (format != PXL_FORMAT_RGBA8 || !src || width < 1 || height < 1) return NULL;
  const double scale = MAX((double)THUMB_WIDTH / width, (double)THUMB_HEIGHT / height);
  const double radius = MIN(THUMB_WIDTH, THUMB_HEIGHT) / 2.0;
  guint8 *out = g_malloc((gsize)THUMB_WIDTH * THUMB_HEIGHT * 4);
  for (int y = 0; y < THUMB_HEIGHT; y++) {
    double dy = y + 0.5 - THUMB_HEIGHT / 2.0;
    double sy = CLAMP(dy / scale + height / 2.0 - 0.5, 0.0, height - 1.0);
    int y0 = (int)sy, y1 = MIN(y0 + 1, height - 1);
    double fy = sy - y0;
    for (int x = 0; x < THUMB_WIDTH; x++) {
      double dx = x + 0.5 - THUMB_WIDTH / 2.0;
      double sx = CLAMP(dx / scale + width / 2.0 - 0.5, 0.0, width - 1.0);
      int x0 = (int)sx, x1 = MIN(x0 + 1, width - 1);
      double fx = sx - x0;
      const uint8_t *p00 = src + (size_t)y0 * stride + 4 * x0, *p01 = src + (size_t)y0 * stride + 4 * x1;
      const uint8_t *p10 = src + (size_t)y1 * stride + 4 * x0, *p11 = src + (size_t)y1 * stride + 4 * x1;
      double rgba[4];
      for (int c = 0; c < 4; c++)
        rgba[c] = (p00[c] * (1 - fx) + p01[c] * fx) * (1 - fy) + (p10[c] * (1 - fx) + p11[c] * fx) * fy;
      double coverage = CLAMP(radius + 0.5 - sqrt(dx * dx + dy * dy), 0.0, 1.0);
      double alpha = rgba[3] / 255.0 * coverage;
      guint8 *o = out + ((size_t)y * THUMB_WIDTH + x) * 4;
      o[0] = (guint8)(rgba[2] * alpha + 0.5);
      o[1] = (guint8)(rgba[1] * alpha + 0.5);
      o[2] = (guint8)(rgba[0] * alpha + 0.5);
      o[3] = (guint8)(alpha * 255.0 + 0.5);
    }
  }
  GBytes *bytes = g_bytes_new_take(out, (gsize)THUMB_WIDTH * THUMB_HEIGHT * 4);
  GdkTexture *texture = gdk_memory_texture_new(THUMB_WIDTH, THUMB_HEIGHT, THUMB_GDK_FORMAT, bytes,
                                               THUMB_WIDTH * 4);
  g_bytes_unref(bytes);
  return texture;
}

/* The row's image (or error) came, or the row left the screen: its hash goes. */
static void drop_placeholder(struct app *app, int64_t row) {
  if (row >= 0 && row < app->rows) g_clear_object(&app->placeholder_of_row[row]);
}

/* ---- cells ---- */

static const char *source_name(pxl_source source) {
  switch (source) {
  case PXL_SOURCE_MEMORY: return "memory";
  case PXL_SOURCE_NETWORK: return "network";
  case PXL_SOURCE_DISK: return "disk";
  case PXL_SOURCE_REVALIDATED: return "revalidated";
  default: return "?";
  }
}

/* The row's still (frame 0), or, for an animated row whose player has moved on, the frame
 * its player last drew: a row scrolled back to shows where its animation is. */
static void show_image(struct app *app, struct cell *cell, pxl_image *image, const char *source) {
  ensure_player(app, cell->row, image);
  struct player *player = app->player_of_row[cell->row];
  GdkTexture *texture = player && player->texture ? g_object_ref(player->texture) : texture_from_image(app, image);
  if (!texture) return;
  if (player) start_animation_tick(app);
  gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(texture));
  g_object_unref(texture);
  drop_placeholder(app, cell->row);
  cell->image_us = g_get_monotonic_time();
  app->ever_shown[cell->row] = 1;
  if (cell->row >= app->told_first && cell->row < app->told_first + app->told_count) {
    double ms = (double)(cell->image_us - MAX(app->entered_us[cell->row], cell->bound_us)) / 1000.0;
    g_array_append_val(app->time_to_visible_ms, ms);
  }
  int32_t width, height;
  PXL_TIMED("pxl_image_original_width", width = pxl_image_original_width(image));
  PXL_TIMED("pxl_image_original_height", height = pxl_image_original_height(image));
  char text[128];
  int32_t frames;
  PXL_TIMED("pxl_image_source_frame_count", frames = pxl_image_source_frame_count(image));
  char kind[32] = "photo";
  if (frames > 1) snprintf(kind, sizeof kind, "animation, %d frames", frames);
  snprintf(text, sizeof text, "%s \xc2\xb7 %d\xc3\x97%d %s \xc2\xb7 from %s",
           strrchr(app->urls[cell->row], '/') + 1, width, height, kind, source);
  gtk_label_set_text(GTK_LABEL(cell->detail), text);
}

/* A preview of a progressive JPEG still loading: drawn, but the row's final call is still
 * to come (it replaces this texture and is what counts as the row's image). */
static void show_preview(struct app *app, struct cell *cell, pxl_image *image) {
  GdkTexture *texture = texture_from_image(app, image);
  if (!texture) return;
  gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(texture));
  g_object_unref(texture);
  gtk_label_set_text(GTK_LABEL(cell->detail), "loading (preview)");
}

static void show_error(struct cell *cell, pxl_status status) {
  char text[96];
  snprintf(text, sizeof text, "failed: %s", pxl_status_string(status));
  gtk_label_set_text(GTK_LABEL(cell->detail), text);
}

/* The table's row_fn: a visible row's image (borrowed) or error, on the GTK thread. */
static void on_row(int64_t row, const pxl_result *result, void *user_data) {
  gint64 began = host_callback_begin();
  struct app *app = user_data;
  struct cell *cell = row >= 0 && row < app->rows ? app->cell_of_row[row] : NULL;
  app->row_error[row] = result->status;  /* PXL_OK clears an earlier error */
  /* pxl_table_config.previews (on by default): blurry, then sharper, then the final call.
   * A row whose request carried a hash gets it first (PXL_PREVIEW_PLACEHOLDER). */
  int32_t preview = result->struct_size >= offsetof(pxl_result, preview) + sizeof(int32_t) ? result->preview : 0;
  if (result->status == PXL_OK && !preview) {
    /* The row's image: its hash must have come first unless the image was in memory. */
    if (result->source != PXL_SOURCE_MEMORY && row_hash(app, row) && !app->placeholder_of_row[row])
      app->waited_without_hash++;
    drop_placeholder(app, row);
  }
  if (result->status != PXL_OK) {
    drop_placeholder(app, row);  /* a failed row: the flat colour and why */
    free_player(app, row);
    if (cell) {
      gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(app->placeholder));
      show_error(cell, result->status);
    }
  } else if (preview == PXL_PREVIEW_PLACEHOLDER) {
    app->hash_placeholders++;
    GdkTexture *texture = texture_from_placeholder(result->image);
    if (texture) {
      g_clear_object(&app->placeholder_of_row[row]);
      app->placeholder_of_row[row] = texture;
      if (cell && !cell->image_us) {
        gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(texture));
        gtk_label_set_text(GTK_LABEL(cell->detail), "loading (its placeholder)");
      }
    }
  } else if (preview) {
    if (cell && !cell->image_us) show_preview(app, cell, result->image);
  } else if (!cell) {
    /* The row is on screen by the adjustment but GTK has not bound it yet (value-changed
     * comes before the list's layout). Its image is in the memory cache now, where the
     * bind's lookup will find it. */
    app->deliveries_to_unbound_rows++;
  } else if (!cell->image_us) {
    show_image(app, cell, result->image, source_name(result->source));
  }
  host_callback_end(began);
}

static void on_setup(GtkSignalListItemFactory *factory, GtkListItem *item, gpointer user_data) {
  (void)factory;
  struct app *app = user_data;
  struct cell *cell = g_new0(struct cell, 1);
  cell->row = -1;
  GtkWidget *box = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 12);
  cell->picture = gtk_picture_new_for_paintable(GDK_PAINTABLE(app->placeholder));
  gtk_picture_set_can_shrink(GTK_PICTURE(cell->picture), FALSE);
  gtk_widget_set_size_request(cell->picture, THUMB_WIDTH, THUMB_HEIGHT);
  gtk_widget_set_valign(cell->picture, GTK_ALIGN_CENTER);
  GtkWidget *captions = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
  gtk_widget_set_valign(captions, GTK_ALIGN_CENTER);
  cell->title = gtk_label_new(NULL);
  cell->detail = gtk_label_new(NULL);
  gtk_widget_add_css_class(cell->title, "heading");
  gtk_widget_add_css_class(cell->detail, "dim-label");
  gtk_label_set_xalign(GTK_LABEL(cell->title), 0);
  gtk_label_set_xalign(GTK_LABEL(cell->detail), 0);
  gtk_label_set_ellipsize(GTK_LABEL(cell->detail), PANGO_ELLIPSIZE_END);
  gtk_box_append(GTK_BOX(captions), cell->title);
  gtk_box_append(GTK_BOX(captions), cell->detail);
  gtk_box_append(GTK_BOX(box), cell->picture);
  gtk_box_append(GTK_BOX(box), captions);
  gtk_list_item_set_child(item, box);
  g_object_set_data(G_OBJECT(item), "pixload-cell", cell);
  g_ptr_array_add(app->cells, cell);
}

/* A cell now shows `row`: from memory at once if it is there (a row scrolled back to
 * never flashes the placeholder), else its hash (if the table gave it already) or the
 * flat placeholder until on_row brings the image. */
static void on_bind(GtkSignalListItemFactory *factory, GtkListItem *item, gpointer user_data) {
  (void)factory;
  struct app *app = user_data;
  struct cell *cell = g_object_get_data(G_OBJECT(item), "pixload-cell");
  int64_t row = gtk_list_item_get_position(item);
  cell->row = row;
  cell->bound_us = g_get_monotonic_time();
  cell->image_us = 0;
  app->cell_of_row[row] = cell;
  char title[32];
  snprintf(title, sizeof title, "Row %" G_GINT64_FORMAT, (gint64)row);
  gtk_label_set_text(GTK_LABEL(cell->title), title);

  pxl_request request;
  pxl_image *image = NULL;
  pxl_status status;
  PXL_TIMED("pxl_request_init", pxl_request_init(&request));
  fill_request(app, row, &request);
  PXL_TIMED("pxl_lookup", status = pxl_lookup(app->loader, &request, &image));
  if (status == PXL_OK) {
    app->bind_memory_hits++;
    show_image(app, cell, image, "memory");
    PXL_TIMED("pxl_image_release", pxl_image_release(image));
    return;
  }
  /* A row that was on screen before and is not in memory any more comes back as a
   * placeholder: with the default 64 MiB cache and these thumbnails, it never should. */
  if (app->ever_shown[row]) app->placeholder_flashes++;
  GdkTexture *hash = app->placeholder_of_row[row];
  gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(hash ? hash : app->placeholder));
  if (app->row_error[row] != PXL_OK) show_error(cell, app->row_error[row]);
  else if (hash) gtk_label_set_text(GTK_LABEL(cell->detail), "loading (its placeholder)");
  else gtk_label_set_text(GTK_LABEL(cell->detail), strrchr(app->urls[row], '/') + 1);
}

/* The cell leaves its row: no result and no animation frame may land in it any more
 * (both go to cell_of_row[row], which no longer is this cell), and it drops its texture
 * (and with it the image's pixels). The row's load is the table's to cancel: it does so
 * once the row leaves the window it keeps (visible rows, prefetch ahead, a few behind).
 * An animated row's player stays with the row (paused by the table while the row is out
 * of view) until the row is far away (free_far_players). */
static void on_unbind(GtkSignalListItemFactory *factory, GtkListItem *item, gpointer user_data) {
  (void)factory;
  struct app *app = user_data;
  struct cell *cell = g_object_get_data(G_OBJECT(item), "pixload-cell");
  if (cell->row >= 0 && app->cell_of_row[cell->row] == cell) app->cell_of_row[cell->row] = NULL;
  cell->row = -1;
  cell->image_us = 0;
  gtk_picture_set_paintable(GTK_PICTURE(cell->picture), GDK_PAINTABLE(app->placeholder));
}

static void on_teardown(GtkSignalListItemFactory *factory, GtkListItem *item, gpointer user_data) {
  (void)factory;
  struct app *app = user_data;
  struct cell *cell = g_object_get_data(G_OBJECT(item), "pixload-cell");
  g_ptr_array_remove_fast(app->cells, cell);
  g_free(cell);
}

/* ---- telling the table what is on screen ---- */

/* The rows the viewport shows, from the adjustment: rows are all alike, so the list's
 * height over its row count is the row height. */
static gboolean visible_rows(const struct app *app, int64_t *first, int32_t *count) {
  double value = gtk_adjustment_get_value(app->vadj);
  double page = gtk_adjustment_get_page_size(app->vadj);
  double upper = gtk_adjustment_get_upper(app->vadj);
  if (page <= 0 || upper <= 0 || app->rows == 0) return FALSE;
  double row_height = upper / (double)app->rows;
  int64_t top = (int64_t)floor(value / row_height);
  int64_t bottom = (int64_t)ceil((value + page) / row_height); /* exclusive */
  if (top < 0) top = 0;
  if (bottom > app->rows) bottom = app->rows;
  if (bottom <= top) return FALSE;
  *first = top;
  *count = (int32_t)MIN(bottom - top, 65536);
  return TRUE;
}

static void tell_table(struct app *app, int direction) {
  int64_t first;
  int32_t count;
  if (!app->table || !visible_rows(app, &first, &count)) return;
  gint64 now = g_get_monotonic_time();
  for (int64_t row = first; row < first + count; row++)
    if (row < app->told_first || row >= app->told_first + app->told_count) app->entered_us[row] = now;
  int64_t was_first = app->told_first, was_end = app->told_first + app->told_count;
  app->told_first = first;
  app->told_count = count;
  pxl_status status;
  PXL_TIMED("pxl_table_set_visible", status = pxl_table_set_visible(app->table, first, count, direction));
  if (status != PXL_OK) g_warning("pxl_table_set_visible: %s", pxl_status_string(status));
  /* Hashes come only for visible rows: those of rows that left go. */
  for (int64_t row = was_first; row < was_end; row++)
    if (row < first || row >= first + count) drop_placeholder(app, row);
  free_far_players(app);
  start_animation_tick(app);  /* animated rows may have come into view */
}

/* A frame without movement: the view is still. The table then prefetches both ways and
 * starts at once the rows where a fling stopped. */
static gboolean still_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data) {
  (void)widget, (void)clock;
  struct app *app = user_data;
  if (app->moved_this_frame) {
    app->moved_this_frame = FALSE;
    return G_SOURCE_CONTINUE;
  }
  tell_table(app, 0);
  app->still_tick = 0;
  return G_SOURCE_REMOVE;
}

static void on_scrolled(GtkAdjustment *adjustment, gpointer user_data) {
  struct app *app = user_data;
  double value = gtk_adjustment_get_value(adjustment);
  int direction = value > app->last_value ? 1 : value < app->last_value ? -1 : 0;
  app->last_value = value;
  tell_table(app, direction);
  app->moved_this_frame = TRUE;
  if (!app->still_tick) app->still_tick = gtk_widget_add_tick_callback(app->list, still_tick, app, NULL);
}

/* Page size or list height changed (first layout, a resize): the same screen, new rows. */
static void on_adjustment_changed(GtkAdjustment *adjustment, gpointer user_data) {
  (void)adjustment;
  tell_table(user_data, 0);
}

/* ---- the completion queue in the GLib main loop ---- */

static gboolean on_queue_readable(gint fd, GIOCondition condition, gpointer user_data) {
  (void)fd, (void)condition;
  struct app *app = user_data;
  /* A batch at a time: the fd stays readable while more are pending, so the loop comes
   * back after drawing a frame and handling input. */
  PXL_TIMED("pxl_queue_dispatch", pxl_queue_dispatch(app->queue, DISPATCH_BATCH));
  return G_SOURCE_CONTINUE;
}

static gboolean update_status(gpointer user_data) {
  struct app *app = user_data;
  pxl_table_stats stats = {.struct_size = sizeof stats};
  uint64_t memory_bytes;
  PXL_TIMED("pxl_table_get_stats", pxl_table_get_stats(app->table, &stats));
  PXL_TIMED("pxl_memory_cache_bytes", memory_bytes = pxl_memory_cache_bytes(app->loader));
  char text[256];
  snprintf(text, sizeof text,
           "%" G_GINT64_FORMAT " rows \xc2\xb7 %" G_GUINT64_FORMAT " loads, %" G_GUINT64_FORMAT
           " cancelled, %" G_GUINT64_FORMAT " memory hits \xc2\xb7 %.1f MB \xc2\xb7 "
           "longest call %.1f ms",
           (gint64)app->rows, stats.started, stats.cancelled, stats.memory_hits,
           (double)memory_bytes / 1e6, (double)pxl_clock.longest.took_us / 1000.0);
  gtk_label_set_text(GTK_LABEL(app->status), text);
  return G_SOURCE_CONTINUE;
}

/* ---- scripted mode ---- */

struct phase {
  const char *name;
  double to_row;     /* the first visible row where the move would end */
  double seconds;    /* 0: no move, only wait for the screen */
  gboolean fling;    /* eased out (fast, then slowing down) instead of steady */
  double stop_at;    /* the user stops the move at this fraction of its time (1: it ends) */
  int pause_ms;      /* the wait after the settle (0: PAUSE_BETWEEN_PHASES_MS) */
  gboolean away;     /* animated script: the view has left the animated rows */
};

static const struct phase full_script[] = {
  {"first screen", 0, 0, FALSE, 1, 0, FALSE},
  {"slow scroll", 30, 5.0, FALSE, 1, 0, FALSE},  /* 6 rows a second */
  {"fling", 330, 1.5, TRUE, 1, 0, FALSE},        /* 300 rows from 600 rows a second to rest */
  {"fling, stop", 930, 2.0, TRUE, 0.3, 0, FALSE},  /* stopped dead at ~440 rows a second: the
                                                     rows where it stops appeared a frame earlier */
  {"back", 12, 1.2, TRUE, 1, 0, FALSE},          /* to rows the slow scroll showed: from memory */
};
static const struct phase still_script[] = {
  {"first screen", 0, 0, FALSE, 1, 0, FALSE},
};
/* With animated rows on the first screen (examples/gtk/animated-data.sh): they play, the
 * view leaves them (their players must decode nothing while out of view) and comes back
 * (they play on). The final screen has them playing, for two screenshots. */
static const struct phase animated_script[] = {
  {"first screen", 0, 0, FALSE, 1, 600, FALSE},
  {"away", 20, 0.6, FALSE, 1, 1000, TRUE},
  {"back", 0, 0.6, FALSE, 1, 600, FALSE},
};

static const struct phase *script_phases(const struct app *app, int *count) {
  if (strcmp(app->script, "still") == 0) {
    *count = G_N_ELEMENTS(still_script);
    return still_script;
  }
  if (strcmp(app->script, "animated") == 0) {
    *count = G_N_ELEMENTS(animated_script);
    return animated_script;
  }
  *count = G_N_ELEMENTS(full_script);
  return full_script;
}

static double row_height(const struct app *app) {
  return gtk_adjustment_get_upper(app->vadj) / (double)app->rows;
}

/* The bound cells whose picture the viewport shows, and its rectangle in the window. */
static gboolean cell_on_screen(const struct app *app, const struct cell *cell, graphene_rect_t *out) {
  graphene_rect_t picture, viewport;
  if (cell->row < 0 || !gtk_widget_get_mapped(cell->picture)) return FALSE;
  if (!gtk_widget_compute_bounds(cell->picture, app->window, &picture) ||
      !gtk_widget_compute_bounds(app->scroller, app->window, &viewport))
    return FALSE;
  if (!graphene_rect_intersection(&picture, &viewport, out)) return FALSE;
  return out->size.width >= 1 && out->size.height >= 1;
}

static int compare_cells_by_row(gconstpointer a, gconstpointer b) {
  const struct cell *x = *(struct cell *const *)a, *y = *(struct cell *const *)b;
  return (x->row > y->row) - (x->row < y->row);
}

/* The visible cells in row order (a new array, borrowed cells). */
static GPtrArray *visible_cells(const struct app *app) {
  GPtrArray *cells = g_ptr_array_new();
  graphene_rect_t rect;
  for (guint i = 0; i < app->cells->len; i++) {
    struct cell *cell = g_ptr_array_index(app->cells, i);
    if (cell_on_screen(app, cell, &rect)) g_ptr_array_add(cells, cell);
  }
  g_ptr_array_sort(cells, compare_cells_by_row);
  return cells;
}

static double ms_between(gint64 from_us, gint64 to_us) { return (double)(to_us - from_us) / 1000.0; }

/* Frames decoded so far by the players tied to the table's rows. */
static uint64_t table_frames_decoded(const struct app *app) {
  pxl_table_stats stats = {.struct_size = sizeof stats};
  PXL_TIMED("pxl_table_get_stats", pxl_table_get_stats(app->table, &stats));
  return stats.animation_frames_decoded;
}

/* Prints the settled screen: per visible row, when it was bound and when its texture was
 * set, counted from the moment the view stopped. */
static void report_settle(struct app *app, const struct phase *phase, gboolean timed_out) {
  GPtrArray *cells = visible_cells(app);
  struct settle_report *report = &app->reports[app->report_count++];
  report->name = phase->name;
  report->visible = (int)cells->len;
  report->placeholders = 0;
  report->slowest_ms = 0;
  report->players_in_view = 0;
  report->foreign_frames = 0;
  report->decoded_at_settle = table_frames_decoded(app);
  for (guint i = 0; i < app->players->len; i++) {
    const struct player *player = g_ptr_array_index(app->players, i);
    report->players_in_view += row_in_view(app, player->row);
    /* A recycled cell must never show a frame of the row it showed before. */
    for (guint j = 0; j < cells->len && player->texture; j++) {
      const struct cell *cell = g_ptr_array_index(cells, j);
      GdkPaintable *shown = gtk_picture_get_paintable(GTK_PICTURE(cell->picture));
      report->foreign_frames += cell->row != player->row && shown == GDK_PAINTABLE(player->texture);
    }
  }
  int64_t told_first = -1;
  int32_t told_count = 0;
  visible_rows(app, &told_first, &told_count);
  printf("settle \"%s\": rows %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT " told to the table, %u visible%s\n",
         phase->name, (gint64)told_first, (gint64)(told_first + told_count - 1), cells->len,
         timed_out ? " (timed out)" : "");
  for (guint i = 0; i < cells->len; i++) {
    const struct cell *cell = g_ptr_array_index(cells, i);
    if (cell->row < told_first || cell->row >= told_first + told_count)
      printf("  row %" G_GINT64_FORMAT ": visible but not told to the table\n", (gint64)cell->row);
    double bound = ms_between(app->settle_us, cell->bound_us);
    if (!cell->image_us) {
      report->placeholders++;
      printf("  row %4" G_GINT64_FORMAT ": bound %+8.1f ms, PLACEHOLDER%s%s%s\n", (gint64)cell->row, bound,
             app->placeholder_of_row[cell->row] ? " (its hash)" : "",
             app->row_error[cell->row] != PXL_OK ? ", failed: " : "",
             app->row_error[cell->row] != PXL_OK ? pxl_status_string(app->row_error[cell->row]) : "");
      continue;
    }
    double after_settle = MAX(0.0, ms_between(app->settle_us, cell->image_us));
    double after_entering = ms_between(MAX(app->entered_us[cell->row], cell->bound_us), cell->image_us);
    report->slowest_ms = MAX(report->slowest_ms, after_settle);
    printf("  row %4" G_GINT64_FORMAT ": bound %+8.1f ms, image %6.1f ms after settle, %6.1f ms after "
           "entering the view%s\n", (gint64)cell->row, bound, after_settle, after_entering,
           app->player_of_row[cell->row] ? ", animated (a player)" : "");
  }
  printf("settle \"%s\": %d visible, %d placeholders, slowest %.1f ms after settle\n", phase->name,
         report->visible, report->placeholders, report->slowest_ms);
  if (app->players_made)
    printf("settle \"%s\": %d animated rows in view, animation frames decoded (table): %" G_GUINT64_FORMAT
           ", cells showing another row's frame: %d\n", phase->name, report->players_in_view,
           report->decoded_at_settle, report->foreign_frames);
  fflush(stdout);
  g_ptr_array_unref(cells);
}

static gboolean screen_complete(const struct app *app) {
  GPtrArray *cells = visible_cells(app);
  gboolean complete = cells->len > 0;
  for (guint i = 0; i < cells->len && complete; i++)
    complete = ((const struct cell *)g_ptr_array_index(cells, i))->image_us != 0;
  g_ptr_array_unref(cells);
  return complete;
}

/* The surface's origin on the X screen, for a test that reads pixels off the screen. */
static gboolean window_origin_on_screen(const struct app *app, int *x, int *y) {
#ifdef GDK_WINDOWING_X11
  GdkSurface *surface = gtk_native_get_surface(GTK_NATIVE(app->window));
  if (surface && GDK_IS_X11_SURFACE(surface)) {
    Display *display = gdk_x11_display_get_xdisplay(gdk_surface_get_display(surface));
    Window child;
    XTranslateCoordinates(display, gdk_x11_surface_get_xid(surface), DefaultRootWindow(display), 0, 0,
                          x, y, &child);
    return TRUE;
  }
#endif
  (void)app, (void)x, (void)y;
  return FALSE;
}

/* "cell row=R x= y= w= h=": each visible thumbnail's rectangle on the screen, in device
 * pixels, clipped to the viewport. */
static void print_geometry(struct app *app) {
  int origin_x = 0, origin_y = 0;
  double offset_x = 0, offset_y = 0;
  gboolean on_screen = window_origin_on_screen(app, &origin_x, &origin_y);
  gtk_native_get_surface_transform(GTK_NATIVE(app->window), &offset_x, &offset_y);
  int scale = gtk_widget_get_scale_factor(app->window);
  GdkSurface *surface = gtk_native_get_surface(GTK_NATIVE(app->window));
  printf("geometry: %s, scale %d, surface origin %d,%d size %dx%d\n", on_screen ? "x11" : "unknown", scale,
         origin_x, origin_y, gdk_surface_get_width(surface) * scale, gdk_surface_get_height(surface) * scale);
  GPtrArray *cells = visible_cells(app);
  graphene_rect_t rect;
  for (guint i = 0; i < cells->len; i++) {
    const struct cell *cell = g_ptr_array_index(cells, i);
    if (!cell_on_screen(app, cell, &rect)) continue;
    int x = origin_x + (int)ceil((rect.origin.x + offset_x) * scale);
    int y = origin_y + (int)ceil((rect.origin.y + offset_y) * scale);
    int right = origin_x + (int)floor((rect.origin.x + rect.size.width + offset_x) * scale);
    int bottom = origin_y + (int)floor((rect.origin.y + rect.size.height + offset_y) * scale);
    printf("cell row=%" G_GINT64_FORMAT " x=%d y=%d w=%d h=%d\n", (gint64)cell->row, x, y, right - x,
           bottom - y);
  }
  g_ptr_array_unref(cells);
}

static gboolean hold_file_appeared(gpointer user_data) {
  struct app *app = user_data;
  if (app->hold_file && !g_file_test(app->hold_file, G_FILE_TEST_EXISTS) &&
      g_get_monotonic_time() - app->stage_started_us < (gint64)HOLD_LIMIT_MS * 1000)
    return G_SOURCE_CONTINUE;
  g_application_quit(G_APPLICATION(app->gtk));
  return G_SOURCE_REMOVE;
}

static int compare_doubles(gconstpointer a, gconstpointer b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile (p in 0..1) of sorted samples. */
static double percentile(const GArray *sorted, double p) {
  guint rank = (guint)ceil(p * sorted->len);
  return g_array_index(sorted, double, rank ? rank - 1 : 0);
}

/* The animated script's check, around its "away" phase: the animated rows played on the
 * screen before it (their players decoded frames), decoded nothing while the view was
 * away (the table paused them), and played again once back. Other scripts: TRUE. */
static gboolean check_animation(const struct app *app) {
  int phase_count;
  const struct phase *phases = script_phases(app, &phase_count);
  gboolean ok = TRUE;
  for (int i = 1; i + 1 < app->report_count && i + 1 < phase_count; i++) {
    if (!phases[i].away) continue;
    const struct settle_report *before = &app->reports[i - 1], *away = &app->reports[i], *back = &app->reports[i + 1];
    const char *problem =
      before->players_in_view == 0 ? "no animated row with a player on the screen before"
      : before->decoded_after_pause == 0 ? "no frame decoded while the animated rows were in view"
      : away->players_in_view > 0 ? "animated rows still in view after moving away"
      : away->decoded_after_pause != away->decoded_at_settle ? "frames decoded while the animated rows were out of view"
      : back->players_in_view == 0 ? "no animated row with a player after coming back"
      : back->decoded_after_pause <= away->decoded_after_pause ? "no frame decoded after coming back"
      : app->animation_frames_drawn == 0 ? "no animation frame drawn" : NULL;
    printf("animation frames decoded (table): %" G_GUINT64_FORMAT " in view before \"%s\", %" G_GUINT64_FORMAT
           " when it settled away from the animated rows, %" G_GUINT64_FORMAT " after %d ms out of view, %"
           G_GUINT64_FORMAT " after %d ms back in view: %s%s\n", before->decoded_after_pause, phases[i].name,
           away->decoded_at_settle, away->decoded_after_pause, phases[i].pause_ms, back->decoded_after_pause,
           phases[i + 1].pause_ms, problem ? "FAILED, " : "OK", problem ? problem : "");
    ok = ok && !problem;
  }
  printf("animation players: %" G_GUINT64_FORMAT " made, %u live; %" G_GUINT64_FORMAT " frames drawn\n",
         app->players_made, app->players->len, app->animation_frames_drawn);
  return ok;
}

static void finish_script(struct app *app) {
  int failures = 0;
  for (int i = 0; i < app->report_count; i++) {
    const struct settle_report *r = &app->reports[i];
    if (r->placeholders > 0 || r->visible == 0 || r->foreign_frames > 0) failures++;
    else if (i > 0 && r->slowest_ms > app->deadline_ms) failures++;  /* the first screen
                                                    pays for connections: exempt */
  }
  if (app->placeholder_flashes > 0) failures++;
  if (pxl_clock.longest.took_us >= FRAME_BUDGET_US) failures++;
  failures += !check_animation(app);
  app->exit_status = failures ? 1 : 0;
  printf("rows shown again from memory at bind: %" G_GUINT64_FORMAT " (images that came before their "
         "row was bound: %" G_GUINT64_FORMAT "), placeholder flashes on rows seen before: %" G_GUINT64_FORMAT "\n",
         app->bind_memory_hits, app->deliveries_to_unbound_rows, app->placeholder_flashes);
  printf("hash placeholders: %" G_GUINT64_FORMAT " drawn; rows whose image came from disk or network "
         "without one first: %" G_GUINT64_FORMAT "\n", app->hash_placeholders, app->waited_without_hash);
  GArray *ttv = app->time_to_visible_ms;
  g_array_sort(ttv, compare_doubles);
  if (ttv->len)
    printf("time to visible: %u rows, median %.1f ms, p95 %.1f ms, max %.1f ms (from entering the view "
           "to the texture; rows from memory count 0)\n", ttv->len, percentile(ttv, 0.5),
           percentile(ttv, 0.95), g_array_index(ttv, double, ttv->len - 1));
  printf("textures: %" G_GUINT64_FORMAT " made, %" G_GUINT64_FORMAT " copied their pixels\n",
         app->textures, app->textures_copied);
  const struct slow_call *longest = &pxl_clock.longest;
  printf("longest pixload call on the main loop: %.2f ms (%s; %.2f ms of it in the host's callbacks), "
         "%" G_GUINT64_FORMAT " calls, %" G_GUINT64_FORMAT " over 4 ms, %" G_GUINT64_FORMAT " over 8 ms\n",
         (double)longest->took_us / 1000.0, longest->name ? longest->name : "-",
         (double)longest->host_us / 1000.0, pxl_clock.calls, pxl_clock.over_4ms, pxl_clock.over_8ms);
  for (int i = 0; i < pxl_clock.slow_count; i++) {
    const struct slow_call *call = &pxl_clock.slow[i];
    printf("  over 4 ms: %s %.2f ms at %.0f ms: %.2f ms on the CPU, %ld waits, %ld preemptions\n", call->name,
           (double)call->took_us / 1000.0, ms_between(app->session_started_us, call->at_us),
           (double)call->cpu_us / 1000.0, call->waits, call->preemptions);
  }
  printf("script: %s\n", failures ? "FAILED" : "OK");
  fflush(stdout);
}

static gboolean script_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data) {
  (void)widget;
  struct app *app = user_data;
  gint64 now = gdk_frame_clock_get_frame_time(clock);
  int phase_count;
  const struct phase *phases = script_phases(app, &phase_count);
  const struct phase *phase = &phases[app->phase];
  double elapsed_s = (double)(now - app->stage_started_us) / 1e6;
  if (app->stage_started_us == 0) {  /* the first frame: the session starts */
    app->session_started_us = app->stage_started_us = app->settle_us = now;
    app->move_from = gtk_adjustment_get_value(app->vadj);
    return G_SOURCE_CONTINUE;
  }
  switch (app->stage) {
  case SCRIPT_MOVING: {
    double target = MIN(phase->to_row * row_height(app),
                        gtk_adjustment_get_upper(app->vadj) - gtk_adjustment_get_page_size(app->vadj));
    double t = phase->seconds > 0 ? MIN(phase->stop_at, elapsed_s / phase->seconds) : 1.0;
    double progress = phase->fling ? 1.0 - pow(1.0 - t, 3.0) : t;
    gtk_adjustment_set_value(app->vadj, app->move_from + (target - app->move_from) * progress);
    if (t >= phase->stop_at || phase->seconds <= 0) {
      app->stage = SCRIPT_SETTLING;
      app->stage_started_us = app->settle_us = g_get_monotonic_time();
    }
    break;
  }
  case SCRIPT_SETTLING: {
    gboolean timed_out = elapsed_s * 1000.0 >= app->settle_timeout_ms;
    if (screen_complete(app) || timed_out) {
      printf("phase \"%s\" settled %.0f ms into the session\n", phase->name,
             ms_between(app->session_started_us, app->settle_us));
      report_settle(app, phase, timed_out);
      app->stage = SCRIPT_PAUSING;
      app->stage_started_us = now;
    }
    break;
  }
  case SCRIPT_PAUSING:
    if (elapsed_s * 1000.0 < (phase->pause_ms ? phase->pause_ms : PAUSE_BETWEEN_PHASES_MS)) break;
    app->reports[app->report_count - 1].decoded_after_pause = table_frames_decoded(app);
    if (++app->phase < phase_count) {
      app->stage = SCRIPT_MOVING;
      app->stage_started_us = now;
      app->move_from = gtk_adjustment_get_value(app->vadj);
    } else {
      app->phase = phase_count - 1;
      finish_script(app);
      app->stage = SCRIPT_FINISHING;
      app->finishing_frames = 0;
    }
    break;
  case SCRIPT_FINISHING:
    /* Two more frames, then a round trip to the X server: the final screen is drawn and
     * in the framebuffer before the test is told to look. */
    if (++app->finishing_frames < 3) break;
    gdk_display_sync(gtk_widget_get_display(app->window));
    print_geometry(app);
    printf("SCREENSHOT-READY\n");
    fflush(stdout);
    app->stage = SCRIPT_HOLDING;
    app->stage_started_us = g_get_monotonic_time();
    g_timeout_add(50, hold_file_appeared, app);
    return G_SOURCE_REMOVE;
  case SCRIPT_HOLDING:
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

/* ---- setup and shutdown ---- */

static void on_activate(GtkApplication *gtk, gpointer user_data) {
  struct app *app = user_data;
  pxl_status status;
  PXL_TIMED_LIFECYCLE("pxl_loader_new", status = pxl_loader_new(NULL, &app->loader));
  if (status == PXL_OK) PXL_TIMED_LIFECYCLE("pxl_queue_new", status = pxl_queue_new(&app->queue));
  /* Defaults: 8 rows prefetched ahead, 2 kept loading behind. */
  if (status == PXL_OK)
    PXL_TIMED_LIFECYCLE("pxl_table_new", status = pxl_table_new(app->loader, app->queue, NULL, app->rows,
                                                                  request_for_row, on_row, app, &app->table));
  if (status != PXL_OK) {
    g_printerr("pixload-gtk: setup failed: %s\n", pxl_status_string(status));
    app->exit_status = 1;
    return;
  }
  int fd;
  PXL_TIMED("pxl_queue_fd", fd = pxl_queue_fd(app->queue));
  app->queue_source = g_unix_fd_add(fd, G_IO_IN, on_queue_readable, app);

  GtkCssProvider *css = gtk_css_provider_new();
  gtk_css_provider_load_from_data(css, "listview row { padding: 4px 12px; }", -1);
  gtk_style_context_add_provider_for_display(gdk_display_get_default(), GTK_STYLE_PROVIDER(css),
                                             GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  g_object_unref(css);
  app->placeholder = make_placeholder();

  GtkStringList *rows = gtk_string_list_new(NULL);
  for (int64_t i = 0; i < app->rows; i++) gtk_string_list_append(rows, "");
  GtkListItemFactory *factory = gtk_signal_list_item_factory_new();
  g_signal_connect(factory, "setup", G_CALLBACK(on_setup), app);
  g_signal_connect(factory, "bind", G_CALLBACK(on_bind), app);
  g_signal_connect(factory, "unbind", G_CALLBACK(on_unbind), app);
  g_signal_connect(factory, "teardown", G_CALLBACK(on_teardown), app);
  app->list = gtk_list_view_new(GTK_SELECTION_MODEL(gtk_no_selection_new(G_LIST_MODEL(rows))), factory);

  app->scroller = gtk_scrolled_window_new();
  gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(app->scroller), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC);
  gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(app->scroller), app->list);
  gtk_widget_set_vexpand(app->scroller, TRUE);
  app->vadj = gtk_scrolled_window_get_vadjustment(GTK_SCROLLED_WINDOW(app->scroller));
  g_signal_connect(app->vadj, "value-changed", G_CALLBACK(on_scrolled), app);
  g_signal_connect(app->vadj, "changed", G_CALLBACK(on_adjustment_changed), app);

  app->status = gtk_label_new(NULL);
  gtk_label_set_xalign(GTK_LABEL(app->status), 0);
  gtk_label_set_ellipsize(GTK_LABEL(app->status), PANGO_ELLIPSIZE_END);
  gtk_widget_set_margin_start(app->status, 12);
  gtk_widget_set_margin_end(app->status, 12);
  gtk_widget_set_margin_top(app->status, 6);
  gtk_widget_set_margin_bottom(app->status, 6);
  GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
  gtk_box_append(GTK_BOX(box), app->scroller);
  gtk_box_append(GTK_BOX(box), gtk_separator_new(GTK_ORIENTATION_HORIZONTAL));
  gtk_box_append(GTK_BOX(box), app->status);

  app->window = gtk_application_window_new(gtk);
  gtk_window_set_title(GTK_WINDOW(app->window), "pixload \xe2\x80\x94 GTK 4 example");
  gtk_window_set_default_size(GTK_WINDOW(app->window), 680, 720);
  gtk_window_set_child(GTK_WINDOW(app->window), box);
  update_status(app);
  app->status_timer = g_timeout_add(250, update_status, app);
  if (app->script) gtk_widget_add_tick_callback(app->list, script_tick, app, NULL);
  gtk_window_present(GTK_WINDOW(app->window));
}

static void on_shutdown(GApplication *gtk, gpointer user_data) {
  (void)gtk;
  struct app *app = user_data;
  if (app->status_timer) g_source_remove(app->status_timer);
  /* The players first (no event after pxl_animation_free returns), the table (no on_row
   * after it returns), then the loader; the queue's source goes before the queue.
   * Textures still on screen keep their images: they stay valid. The frame clock's
   * callback, if it runs again, finds no player and removes itself. */
  while (app->players->len) free_player(app, ((struct player *)g_ptr_array_index(app->players, 0))->row);
  PXL_TIMED_LIFECYCLE("pxl_table_free", pxl_table_free(app->table));
  app->table = NULL;
  PXL_TIMED_LIFECYCLE("pxl_loader_free", pxl_loader_free(app->loader));
  app->loader = NULL;
  if (app->queue_source) g_source_remove(app->queue_source);
  PXL_TIMED_LIFECYCLE("pxl_queue_free", pxl_queue_free(app->queue));
  app->queue = NULL;
  if (app->script)
    printf("lifecycle: longest %.2f ms (%s)\n", (double)pxl_clock.lifecycle_longest_us / 1000.0,
           pxl_clock.lifecycle_longest_name ? pxl_clock.lifecycle_longest_name : "-");
}

/* ---- the rows' URLs ---- */

/* Each non-empty line of path, trimmed. */
static GPtrArray *read_list(const char *path) {
  char *text = NULL;
  GError *error = NULL;
  if (!g_file_get_contents(path, &text, NULL, &error)) {
    g_printerr("pixload-gtk: %s\n", error->message);
    g_error_free(error);
    return NULL;
  }
  GPtrArray *list = g_ptr_array_new_with_free_func(g_free);
  char **lines = g_strsplit(text, "\n", -1);
  for (char **line = lines; *line; line++) {
    char *entry = g_strstrip(*line);
    if (*entry) g_ptr_array_add(list, g_strdup(entry));
  }
  g_strfreev(lines);
  g_free(text);
  return list;
}

/* An index entry's URL: base + "/" + entry (slashes between them collapsed to one). */
static char *source_url(const char *base, const char *entry) {
  size_t n = strlen(base);
  while (n && base[n - 1] == '/') n--;
  while (*entry == '/') entry++;
  return g_strdup_printf("%.*s/%s", (int)n, base, entry);
}

/* --placeholders FILE: "PATH<TAB>HASH" lines -> per entry of the index (or --urls) its
 * hash (new strings), NULL for an entry the file does not list. NULL if unreadable. */
static char **read_hashes(const char *path, const GPtrArray *entries) {
  GPtrArray *lines = read_list(path);
  if (!lines) return NULL;
  GHashTable *known = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < lines->len; i++) {
    char *line = g_ptr_array_index(lines, i), *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = '\0';
    g_hash_table_insert(known, line, g_strstrip(tab + 1));
  }
  char **hashes = g_new0(char *, entries->len);
  for (guint i = 0; i < entries->len; i++) {
    const char *hash = g_hash_table_lookup(known, g_ptr_array_index(entries, i));
    hashes[i] = hash && *hash ? g_strdup(hash) : NULL;
  }
  g_hash_table_unref(known);
  g_ptr_array_unref(lines);
  return hashes;
}

static int usage(void) {
  g_printerr("usage: pixload-gtk [--index FILE | --urls FILE] [--rows N] [--script[=still|=animated]]\n"
             "                   [--deadline-ms N] [--settle-timeout-ms N] [--hold-until FILE]\n"
             "                   [--placeholders FILE] [BASE_URL]\n"
             "BASE_URL may also come from PIXLOAD_GTK_BASE_URL, --index from PIXLOAD_GTK_INDEX,\n"
             "--urls from PIXLOAD_GTK_URLS.\n");
  return 2;
}

int main(int argc, char **argv) {
  struct app app = {.rows = 1000, .deadline_ms = 200, .settle_timeout_ms = 3000};
  const char *base = g_getenv("PIXLOAD_GTK_BASE_URL");
  const char *index = g_getenv("PIXLOAD_GTK_INDEX");
  const char *url_file = g_getenv("PIXLOAD_GTK_URLS");
  const char *hash_file = NULL;
  if (!index) index = "build/demo-data/index.txt";
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--script") == 0) app.script = "full";
    else if (strcmp(arg, "--script=still") == 0) app.script = "still";
    else if (strcmp(arg, "--script=animated") == 0) app.script = "animated";
    else if (strcmp(arg, "--index") == 0 && next) index = argv[++i];
    else if (strcmp(arg, "--urls") == 0 && next) url_file = argv[++i];
    else if (strcmp(arg, "--rows") == 0 && next) app.rows = g_ascii_strtoll(argv[++i], NULL, 10);
    else if (strcmp(arg, "--deadline-ms") == 0 && next) app.deadline_ms = atoi(argv[++i]);
    else if (strcmp(arg, "--settle-timeout-ms") == 0 && next) app.settle_timeout_ms = atoi(argv[++i]);
    else if (strcmp(arg, "--hold-until") == 0 && next) app.hold_file = argv[++i];
    else if (strcmp(arg, "--placeholders") == 0 && next) hash_file = argv[++i];
    else if (arg[0] != '-') base = arg;
    else return usage();
  }
  if (app.rows <= 0 || (!base && !url_file)) return usage();
  GPtrArray *sources = read_list(url_file ? url_file : index);
  if (!sources) return 1;
  if (sources->len == 0) {
    g_printerr("pixload-gtk: no URLs\n");
    return 1;
  }
  app.source_count = sources->len;
  if (hash_file && !(app.hash_of_source = read_hashes(hash_file, sources))) return 1;
  /* Row i: image i % count with its own query string, so every row is its own URL (no
   * two rows share a download or a cache entry). */
  app.urls = g_new(char *, app.rows);
  for (int64_t i = 0; i < app.rows; i++) {
    const char *entry = g_ptr_array_index(sources, (guint)(i % sources->len));
    char *url = url_file ? g_strdup(entry) : source_url(base, entry);
    app.urls[i] = g_strdup_printf("%s%crow=%" G_GINT64_FORMAT, url, strchr(url, '?') ? '&' : '?', (gint64)i);
    g_free(url);
  }
  g_ptr_array_unref(sources);
  app.cell_of_row = g_new0(struct cell *, app.rows);
  app.placeholder_of_row = g_new0(GdkTexture *, app.rows);
  app.ever_shown = g_new0(guint8, app.rows);
  app.entered_us = g_new0(gint64, app.rows);
  app.time_to_visible_ms = g_array_new(FALSE, FALSE, sizeof(double));
  app.row_error = g_new0(pxl_status, app.rows);  /* PXL_OK is 0 */
  app.cells = g_ptr_array_new();
  app.player_of_row = g_new0(struct player *, app.rows);
  app.players = g_ptr_array_new();

  printf("pixload-gtk: %" G_GINT64_FORMAT " rows, pixload %s, GTK %u.%u.%u\n", (gint64)app.rows,
         pxl_version(), gtk_get_major_version(), gtk_get_minor_version(), gtk_get_micro_version());
  fflush(stdout);
  app.gtk = gtk_application_new("org.pixload.GtkExample", G_APPLICATION_NON_UNIQUE);
  g_signal_connect(app.gtk, "activate", G_CALLBACK(on_activate), &app);
  g_signal_connect(app.gtk, "shutdown", G_CALLBACK(on_shutdown), &app);
  int status = g_application_run(G_APPLICATION(app.gtk), 1, argv);
  g_object_unref(app.gtk);
  g_clear_object(&app.placeholder);
  for (int64_t i = 0; i < app.rows; i++) {
    g_free(app.urls[i]);
    g_clear_object(&app.placeholder_of_row[i]);
  }
  g_free(app.urls);
  g_free(app.placeholder_of_row);
  if (app.hash_of_source)
    for (int64_t i = 0; i < app.source_count; i++) g_free(app.hash_of_source[i]);
  g_free(app.hash_of_source);
  g_free(app.cell_of_row);
  g_free(app.ever_shown);
  g_free(app.entered_us);
  g_array_unref(app.time_to_visible_ms);
  g_free(app.row_error);
  g_ptr_array_unref(app.cells);
  g_free(app.player_of_row);
  g_ptr_array_unref(app.players);
  return status ? status : app.exit_status;
}
