/*
 * tool_play.c: `pixload play URL [--size WxH] [--frames N] [fetch's options]`: plays an
 * animation through a player (pxl_animation_load), frame by frame at the durations the
 * file gives, the way a host's frame clock would: this thread sleeps on the queue until
 * the next frame is due (or, when it is late, decoded), then asks the player for the
 * frame due now. One line per frame shown:
 *
 *   frame INDEX WxH DURATION ms, due DUE ms, shown SHOWN ms[, late][, skipped N]
 *
 * DUE and SHOWN count from frame 0's showing; "late" marks a frame shown more than 16 ms
 * (a 60 Hz refresh) after it fell due; "skipped N" the frames passed over before it
 * because the previous one was shown too late. It plays N frames (--frames; default one
 * loop: the source's frame count), fewer when the animation's loop count ends first, and
 * ends with exactly
 *
 *   played N frames, first after T ms, peak frame memory B bytes
 *
 * T: from the load's start to frame 0 (the player's LOADED event); B: the most decoded
 * frame bytes the player held at once (pxl_animation_stats.peak_ring_bytes). Exit status
 * 0, 1 when the load or a frame failed, 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tool_getparam.h"
#include "tool_help.h"
#include "tool_play.h"

#define LATE_MS 16

static int64_t clock_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the player's events said; written by on_event on this thread (inside dispatch). */
struct player_state {
  int loaded;
  pxl_status status; /* the load's, then a later frame's failure */
  char message[256];
  int failed;
  int32_t frame_count;
  int64_t loaded_ms;
};

static void on_event(pxl_animation *animation, const pxl_animation_event *event, void *user_data) {
  (void)animation;
  struct player_state *st = user_data;
  if (event->kind == PXL_ANIMATION_LOADED) {
    st->loaded = 1;
    st->loaded_ms = clock_ms();
    st->status = event->status;
    st->frame_count = event->frame_count;
  } else if (event->kind == PXL_ANIMATION_FAILED) {
    st->failed = 1;
    st->status = event->status;
  } else {
    return;
  }
  snprintf(st->message, sizeof st->message, "%s",
           event->message && event->message[0] ? event->message : pxl_status_string(event->status));
}

/* Sleeps on the queue for at most ms, then runs its callbacks. */
static void pump(pxl_queue *queue, int64_t ms) {
  if (pxl_queue_dispatch(queue, 0) > 0) return;
  pxl_queue_wait(queue, (int32_t)(ms < 1 ? 1 : ms > 1000 ? 1000 : ms));
  pxl_queue_dispatch(queue, 0);
}

int play(int argc, char **argv) {
  struct fetch_options o = {0};
  int rc = parse_fetch_options(argc, argv, &o);
  if (rc) goto out_options;
  if (o.url_count != 1 || o.hash_kind || o.out_file || o.out_dir || o.metrics ||
      (o.request.flags & PXL_FLAG_ANIMATE)) {
    rc = usage_error("%s", "play takes one URL, and none of --out, --out-dir, --metrics, --animate");
    goto out_options;
  }
  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  pxl_animation *animation = NULL;
  pxl_status s = pxl_loader_new(&o.config, &loader);
  if (s == PXL_OK) s = pxl_queue_new(&queue);
  if (s != PXL_OK) {
    fprintf(stderr, "pixload: cannot create a loader: %s\n", pxl_status_string(s));
    rc = 1;
    goto out_handles;
  }
  struct player_state st = {0};
  o.request.url = o.urls[0];
  int64_t start = clock_ms();
  s = pxl_animation_load(loader, &o.request, queue, on_event, &st, &animation);
  if (s != PXL_OK) {
    fprintf(stderr, "pixload: %s: %s\n", o.urls[0], pxl_status_string(s));
    rc = 1;
    goto out_handles;
  }
  while (!st.loaded) pump(queue, 1000);
  if (st.status != PXL_OK) {
    fprintf(stderr, "pixload: %s: %s\n", o.urls[0], st.message);
    rc = 1;
    goto out_handles;
  }

  long target = o.frames > 0 ? o.frames : (st.frame_count > 0 ? st.frame_count : 1);
  long shown = 0, passed = 0; /* frames shown, and shown or skipped */
  int32_t last_index = -1;
  int64_t last_due = -1, origin = -1;
  for (;;) {
    int64_t now = clock_ms();
    pxl_animation_frame f = {.struct_size = sizeof f};
    pxl_image *image = pxl_animation_frame_at(animation, now, &f);
    if (image && (f.index != last_index || f.due_ms != last_due)) {
      if (origin < 0) origin = f.due_ms;
      last_index = f.index;
      last_due = f.due_ms;
      shown++;
      passed += 1 + f.skipped;
      printf("frame %d %dx%d %d ms, due %lld ms, shown %lld ms%s", f.index, pxl_image_width(image),
             pxl_image_height(image), f.duration_ms, (long long)(f.due_ms - origin), (long long)(now - origin),
             now - f.due_ms > LATE_MS ? ", late" : "");
      if (f.skipped) printf(", skipped %d", f.skipped);
      printf("\n");
      fflush(stdout);
    }
    pxl_image_release(image);
    if (passed >= target || f.ended || (image && f.next_due_ms < 0)) break;
    if (st.failed) {
      fprintf(stderr, "pixload: %s: frame after %d: %s\n", o.urls[0], last_index, st.message);
      rc = 1;
      break;
    }
    /* Until the next frame is due; when it is due already, until it is decoded
     * (PXL_ANIMATION_FRAME_READY wakes the queue). */
    pump(queue, f.next_due_ms > now ? f.next_due_ms - now : 100);
  }
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  pxl_animation_stats_get(animation, &stats);
  printf("played %ld frames, first after %lld ms, peak frame memory %llu bytes\n", shown,
         (long long)(st.loaded_ms - start), (unsigned long long)stats.peak_ring_bytes);
out_handles:
  pxl_animation_free(animation);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
out_options:
  fetch_options_free(&o);
  return rc;
}
