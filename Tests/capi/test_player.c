/*
 * Animation players (pxl_animation_*, pixload.h "Animation players") against files the
 * harness's nginx serves: GIFs written here by test_animation.c's encoder (every frame a
 * different pattern, so no encoder merges two), and animated WebPs made from them by
 * gif2webp. The host's clock is the test's own (the times passed to frame_at), so
 * playback is checked without sleeping: the events say when the decoder is done.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

struct events {
  atomic_int count;
  int loaded, ready, ended, failed;
  int last_kind;
  pxl_status status;          /* of LOADED, or of FAILED */
  char message[256];
  pxl_image *first;           /* LOADED's image, retained */
  int32_t ready_index;
  int64_t ready_due;
  int32_t frame_count, loop_count;
  int freed;                  /* set before pxl_animation_free */
  atomic_int after_free;      /* events that ran after it */
  int free_in_callback;       /* free the player at LOADED */
};

static void on_event(pxl_animation *animation, const pxl_animation_event *e, void *user_data) {
  struct events *ev = user_data;
  CHECK(e->struct_size >= sizeof *e);
  if (ev->freed) atomic_fetch_add(&ev->after_free, 1);
  ev->last_kind = e->kind;
  switch (e->kind) {
    case PXL_ANIMATION_LOADED:
      ev->loaded++;
      ev->status = e->status;
      CHECK((e->status == PXL_OK) == (e->image != NULL));
      if (e->image) ev->first = pxl_image_retain(e->image);
      break;
    case PXL_ANIMATION_FRAME_READY:
      ev->ready++;
      ev->ready_index = e->index;
      ev->ready_due = e->due_ms;
      break;
    case PXL_ANIMATION_ENDED: ev->ended++; break;
    case PXL_ANIMATION_FAILED:
      ev->failed++;
      ev->status = e->status;
      snprintf(ev->message, sizeof ev->message, "%s", e->message ? e->message : "");
      break;
    default: CHECKF(0, "unknown event kind %d", e->kind);
  }
  ev->frame_count = e->frame_count;
  ev->loop_count = e->loop_count;
  atomic_fetch_add(&ev->count, 1);
  if (ev->free_in_callback && e->kind == PXL_ANIMATION_LOADED) {
    ev->freed = 1;
    pxl_animation_free(animation);
  }
}

static void events_reset(struct events *ev) {
  pxl_image_release(ev->first);
  memset(ev, 0, sizeof *ev);
}

/* A frames-frame w x h GIF: frame i is the pattern (x + 2y + i) % 4 of the palette's
 * first four colours, delay_cs each, loop as gif_start takes it. */
static void write_gif(const struct test_env *env, const char *name, int w, int h, int frames, int delay_cs,
                      int loop) {
  FILE *f = gif_start(env, name, w, h, loop);
  CHECK(f != NULL);
  if (!f) return;
  uint8_t *indices = malloc((size_t)w * h);
  for (int i = 0; i < frames; i++) {
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) indices[y * w + x] = (uint8_t)((x + 2 * y + i) % 4);
    gif_put_frame(f, 0, 0, w, h, indices, 1, delay_cs, -1);
  }
  free(indices);
  fputc(0x3b, f);
  fclose(f);
}

/* gif2webp (libwebp's tools) turns a GIF of the served directory into an animated WebP. */
static int make_webp(const struct test_env *env, const char *gif, const char *webp, const char *options) {
  char command[2048];
  snprintf(command, sizeof command, "gif2webp -quiet %s '%s/%s' -o '%s/%s'", options, env->fixture_dir, gif,
           env->fixture_dir, webp);
  int rc = system(command);
  CHECKF(rc == 0, "%s: exit %d (is gif2webp installed? libwebp's tools, Debian webp)", command, rc);
  return rc == 0;
}

static pxl_animation *start(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                            const pxl_request *request, struct events *ev) {
  pxl_animation *a = NULL;
  CHECK_STATUS(pxl_animation_load(loader, request, queue, on_event, ev, &a), PXL_OK);
  CHECK(a != NULL);
  CHECKF(drain_until(env, queue, &ev->count, 1, 10000), "LOADED arrived");
  CHECK_INT(ev->loaded, 1);
  return a;
}

/* Waits for the event after a frame_at: one more than seen. */
static int next_event(const struct test_env *env, pxl_queue *queue, struct events *ev, int *seen) {
  *seen += 1;
  int ok = drain_until(env, queue, &ev->count, *seen, 10000);
  CHECKF(ok, "event %d arrived", *seen);
  return ok;
}

/* A loader, a queue and a player of a served file at full size, LOADED. */
struct session {
  pxl_loader *loader;
  pxl_queue *queue;
  struct events ev;
  pxl_animation *a;
  int seen; /* events waited for */
};

static void session_start(const struct test_env *env, struct session *s, const char *path, const char *case_name,
                          const pxl_config *config) {
  memset(s, 0, sizeof *s);
  s->loader = new_loader(config);
  s->queue = new_queue();
  struct test_url u = test_url(env, path, case_name);
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  s->a = start(env, s->loader, s->queue, &request, &s->ev);
  s->seen = 1;
}

static void session_end(struct session *s) {
  pxl_animation_free(s->a);
  events_reset(&s->ev);
  pxl_loader_free(s->loader);
  pxl_queue_free(s->queue);
}

static int same_pixels(const pxl_image *a, const uint8_t *b) {
  return a && b && memcmp(pxl_image_pixels(a), b, pxl_image_byte_count(a)) == 0;
}

/* A registered codec's frame 0 duration is known once the decoder read it: the first
 * frame_at may come before (pxl_animation_frame.duration_ms -1). */
static int frame0_duration_may_be_unknown;

/* Plays `plays` frames through the events, the clock at each due time, and checks each
 * frame against the PXL_FLAG_ANIMATE image of the same request. */
static void play_and_compare(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                             const pxl_request *request, int plays, int expect_end, const char *what) {
  struct capture all = {0};
  pxl_request animated = *request;
  animated.flags |= PXL_FLAG_ANIMATE;
  CHECK_STATUS(load_and_wait(env, loader, queue, &animated, &all), PXL_OK);
  CHECKF(all.status == PXL_OK, "%s: PXL_FLAG_ANIMATE status %d (%s)", what, all.status, all.message);
  struct capture still = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, request, &still), PXL_OK);
  struct events ev = {0};
  pxl_animation *a = start(env, loader, queue, request, &ev);
  int n = all.image ? pxl_image_frame_count(all.image) : 0;
  CHECKF(n > 2, "%s: %d frames", what, n);
  CHECKF(ev.status == PXL_OK, "%s: LOADED %d", what, ev.status);
  if (!all.image || !ev.first || !still.image) {
    pxl_animation_free(a);
    capture_reset(&all);
    capture_reset(&still);
    events_reset(&ev);
    return;
  }
  CHECK_INT(ev.frame_count, n);
  CHECK_INT(ev.loop_count, pxl_image_loop_count(all.image));
  CHECKF(same_pixels(still.image, pxl_image_pixels(ev.first)), "%s: frame 0 is the still's pixels", what);
  int64_t now = 5000, due = 5000;
  int seen = 1, bad = 0;
  pxl_animation_frame f = {.struct_size = sizeof f};
  for (int i = 0; i < plays && !bad; i++) {
    pxl_image *image = pxl_animation_frame_at(a, now, &f);
    int index = i % n;
    int unknown = i == 0 && frame0_duration_may_be_unknown && f.duration_ms == -1;
    CHECKF(image != NULL && f.index == index, "%s: play %d: frame %d, expected %d", what, i, f.index, index);
    CHECKF(f.due_ms == due, "%s: frame %d due %lld, expected %lld", what, i, (long long)f.due_ms, (long long)due);
    CHECKF(f.skipped == 0, "%s: frame %d skipped %d", what, i, f.skipped);
    if (!unknown) CHECK_INT(f.duration_ms, pxl_image_frame_duration_ms(all.image, index));
    if (!same_pixels(image, pxl_image_frame_pixels(all.image, index))) {
      CHECKF(0, "%s: play %d (frame %d): pixels differ from PXL_FLAG_ANIMATE's", what, i, index);
      bad = 1;
    }
    if (i == 0) CHECKF(image == ev.first, "%s: frame 0 is LOADED's image", what);
    pxl_image_release(image);
    int duration = pxl_image_frame_duration_ms(all.image, index);
    due += duration <= 10 ? 100 : duration;
    if (i + 1 == plays && expect_end) break;
    if (!next_event(env, queue, &ev, &seen)) break;
    CHECKF(ev.last_kind == PXL_ANIMATION_FRAME_READY, "%s: after frame %d: event %d", what, i, ev.last_kind);
    CHECK_INT(ev.ready_index, (i + 1) % n);
    CHECK_INT(ev.ready_due, due);
    if (!unknown) CHECK(f.next_due_ms == due);
    now = ev.ready_due;
  }
  if (expect_end && !bad) {
    CHECKF(f.ended == 1 && f.next_due_ms == -1, "%s: the last frame ends it (ended %d, next %lld)", what, f.ended,
           (long long)f.next_due_ms);
    next_event(env, queue, &ev, &seen);
    CHECK_INT(ev.ended, 1);
    /* The last frame stays shown. */
    pxl_image *last = pxl_animation_frame_at(a, now + 100000, &f);
    CHECK(last != NULL && f.index == n - 1 && f.ended == 1);
    pxl_image_release(last);
    CHECK_INT(drain_for(queue, 50), 0);
  }
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  CHECK_STATUS(pxl_animation_stats_get(a, &stats), PXL_OK);
  uint64_t frame_bytes = pxl_image_byte_count(all.image);
  CHECKF(stats.peak_ring_bytes <= 3 * frame_bytes && stats.peak_ring_bytes >= frame_bytes,
         "%s: peak ring %llu bytes, frames of %llu", what, (unsigned long long)stats.peak_ring_bytes,
         (unsigned long long)frame_bytes);
  CHECKF(stats.frames_shown == (uint64_t)plays, "%s: shown %llu of %d", what, (unsigned long long)stats.frames_shown,
         plays);
  CHECK_INT(stats.frames_skipped, 0);
  CHECKF(stats.frames_decoded >= (uint64_t)plays - 1, "%s: decoded %llu", what,
         (unsigned long long)stats.frames_decoded);
  if (expect_end) CHECK_INT(stats.loops_played, pxl_image_loop_count(all.image));
  pxl_animation_free(a);
  capture_reset(&all);
  capture_reset(&still);
  events_reset(&ev);
}

/* GIF: every frame in order at its duration, pixels as PXL_FLAG_ANIMATE's, the loop
 * count honoured (NETSCAPE repeat 1: two plays, then ENDED), at full size and as a
 * thumbnail (resampled), in another format and through a processor. */
void test_player_gif(const struct test_env *env) {
  write_gif(env, "player.gif", 20, 12, 5, 7, 1);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/player.gif", "player-gif");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  play_and_compare(env, loader, queue, &request, 10, 1, "gif");
  request_for(&request, u.url, 9, 9, PXL_MODE_FILL, PXL_FORMAT_BGRA8_PREMUL);
  play_and_compare(env, loader, queue, &request, 10, 1, "gif 9x9 fill bgra");
  pxl_processor circle;
  memset(&circle, 0, sizeof circle);
  circle.kind = PXL_PROCESS_CIRCLE;
  request.processors = &circle;
  request.processor_count = 1;
  play_and_compare(env, loader, queue, &request, 10, 1, "gif circle");
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* WebP made by gif2webp (lossless and lossy), looping forever: two loops' frames. */
void test_player_webp(const struct test_env *env) {
  write_gif(env, "player-w.gif", 24, 16, 4, 5, 0);
  int lossless = make_webp(env, "player-w.gif", "player.webp", "");
  int lossy = make_webp(env, "player-w.gif", "player-lossy.webp", "-lossy");
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  pxl_request request;
  if (lossless) {
    struct test_url u = test_url(env, "/player.webp", "player-webp");
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    play_and_compare(env, loader, queue, &request, 9, 0, "webp");
    request_for(&request, u.url, 10, 0, PXL_MODE_FIT, PXL_FORMAT_RGB8);
    play_and_compare(env, loader, queue, &request, 6, 0, "webp 10 wide rgb");
  }
  if (lossy) {
    struct test_url u = test_url(env, "/player-lossy.webp", "player-webp-lossy");
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    play_and_compare(env, loader, queue, &request, 9, 0, "lossy webp");
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* An AVIF image sequence (mkfixtures_avif.c's seq.avif: 5 frames, 60 ms, forever). */
void test_player_avif(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/seq.avif", "player-avif");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  play_and_compare(env, loader, queue, &request, 12, 0, "avif");
  request_for(&request, u.url, 12, 12, PXL_MODE_FILL, PXL_FORMAT_GRAY8);
  play_and_compare(env, loader, queue, &request, 7, 0, "avif 12x12 fill gray");
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* 300 frames played to the end: the ring never holds more than its 3 frames, and with
 * animation_ring_bytes at two frames' bytes, never more than 2. */
void test_player_ring_bound(const struct test_env *env) {
  write_gif(env, "player-300.gif", 64, 48, 300, 2, 1);
  const uint64_t frame_bytes = 64 * 48 * 4;
  for (int budget = 0; budget < 2; budget++) {
    pxl_config config;
    pxl_config_init(&config);
    if (budget) config.animation_ring_bytes = 2 * frame_bytes;
    struct session s;
    session_start(env, &s, "/player-300.gif", "player-ring", &config);
    CHECK_INT(s.ev.frame_count, 300);
    CHECK_INT(s.ev.loop_count, 2);
    int64_t now = 0;
    int played = 0;
    pxl_animation_frame f = {.struct_size = sizeof f};
    for (;;) {
      pxl_image *image = pxl_animation_frame_at(s.a, now, &f);
      CHECK(image != NULL);
      pxl_image_release(image);
      if (f.index != played % 300) {
        CHECKF(0, "play %d: frame %d", played, f.index);
        break;
      }
      played++;
      if (!next_event(env, s.queue, &s.ev, &s.seen) || s.ev.last_kind != PXL_ANIMATION_FRAME_READY) break;
      now = s.ev.ready_due;
    }
    CHECK_INT(played, 600);
    CHECK_INT(s.ev.ended, 1);
    pxl_animation_stats stats = {.struct_size = sizeof stats};
    CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
    uint64_t bound = (budget ? 2 : 3) * frame_bytes;
    CHECKF(stats.peak_ring_bytes <= bound, "ring budget %d: peak %llu bytes > %llu", budget,
           (unsigned long long)stats.peak_ring_bytes, (unsigned long long)bound);
    CHECK_INT(stats.frames_decoded, 600);
    CHECK_INT(stats.frames_shown, 600);
    CHECK_INT(stats.loops_played, 2);
    CHECK(stats.ring_bytes <= bound);
    session_end(&s);
  }
}

/* A host that falls behind: 100 frames of 100 ms; at 5 s the frame shown is 50, the
 * frames before it never shown are skipped (those the decoder knew were late are not
 * rendered), and the skip counts add up. */
void test_player_skips_when_late(const struct test_env *env) {
  write_gif(env, "player-late.gif", 16, 16, 100, 10, 0);
  struct session s;
  session_start(env, &s, "/player-late.gif", "player-late", NULL);
  pxl_animation_frame f = {.struct_size = sizeof f};
  pxl_image *image = pxl_animation_frame_at(s.a, 0, &f);
  CHECK(image != NULL && f.index == 0);
  pxl_image_release(image);
  next_event(env, s.queue, &s.ev, &s.seen);
  CHECK_INT(s.ev.ready_index, 1);
  /* The ring full (frames 0..2 decoded, the decoder idle) before the clock jumps. */
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  double deadline = now_ms() + 10000.0 * env->slow_factor;
  while (pxl_animation_stats_get(s.a, &stats) == PXL_OK && stats.frames_decoded < 3 && now_ms() < deadline)
    drain_for(s.queue, 5);
  CHECK_INT(stats.frames_decoded, 3);
  image = pxl_animation_frame_at(s.a, 5000, &f);
  int first_jump = f.index, skipped = f.skipped;
  CHECKF(f.index == 2 && f.skipped == 1, "at 5000 before decoding caught up: frame %d, skipped %d", f.index,
         f.skipped);
  pxl_image_release(image);
  next_event(env, s.queue, &s.ev, &s.seen);
  CHECK_INT(s.ev.last_kind, PXL_ANIMATION_FRAME_READY);
  CHECK_INT(s.ev.ready_index, 50);
  CHECK_INT(s.ev.ready_due, 5000);
  image = pxl_animation_frame_at(s.a, 5000, &f);
  CHECK(image != NULL && f.index == 50);
  CHECK_INT(f.skipped, 50 - first_jump - 1);
  skipped += f.skipped;
  pxl_image_release(image);
  CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
  CHECK_INT(stats.frames_skipped, 48);
  CHECK_INT(skipped, 48);
  CHECK_INT(stats.frames_shown, 3);
  session_end(&s);
}

/* Paused: no decoding (frames_decoded stays), the playhead frozen whatever the clock
 * says; resumed: it continues from where it was. */
void test_player_pause_resume(const struct test_env *env) {
  write_gif(env, "player-pause.gif", 16, 16, 50, 10, 0);
  struct session s;
  session_start(env, &s, "/player-pause.gif", "player-pause", NULL);
  pxl_animation_frame f = {.struct_size = sizeof f};
  pxl_image_release(pxl_animation_frame_at(s.a, 1000, &f));
  next_event(env, s.queue, &s.ev, &s.seen);
  pxl_image_release(pxl_animation_frame_at(s.a, 1100, &f));
  CHECK_INT(f.index, 1);
  next_event(env, s.queue, &s.ev, &s.seen);
  pxl_animation_pause(s.a);
  drain_for(s.queue, 100); /* a frame being decoded when it paused may finish */
  pxl_animation_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  CHECK_STATUS(pxl_animation_stats_get(s.a, &before), PXL_OK);
  /* Time passes, the host asks: the same frame, nothing decoded. */
  pxl_image_release(pxl_animation_frame_at(s.a, 60000, &f));
  CHECK_INT(f.index, 1);
  CHECK_INT(f.skipped, 0);
  CHECK_INT(drain_for(s.queue, 300), 0); /* frame 2's FRAME_READY came before: no new one */
  CHECK_STATUS(pxl_animation_stats_get(s.a, &after), PXL_OK);
  CHECK_INT(after.frames_decoded, before.frames_decoded);
  CHECK(before.frames_decoded <= 4);
  /* Resumed at 100000: frame 1 had shown 0 ms of its 100 when paused (at 1100). */
  pxl_animation_resume(s.a, 100000);
  pxl_image_release(pxl_animation_frame_at(s.a, 100099, &f));
  CHECK_INT(f.index, 1);
  pxl_image_release(pxl_animation_frame_at(s.a, 100100, &f));
  CHECK_INT(f.index, 2);
  CHECK_INT(f.due_ms, 100100);
  next_event(env, s.queue, &s.ev, &s.seen);
  CHECK_INT(s.ev.ready_index, 3); /* decoded before the pause */
  pxl_image_release(pxl_animation_frame_at(s.a, 100200, &f));
  CHECK_INT(f.index, 3);
  next_event(env, s.queue, &s.ev, &s.seen);
  CHECK_INT(s.ev.ready_index, 4); /* decoded after the resume */
  CHECK_STATUS(pxl_animation_stats_get(s.a, &after), PXL_OK);
  CHECK(after.frames_decoded > before.frames_decoded);
  session_end(&s);
}

/* Paused for over a second, a player releases what it decoded ahead and keeps the frame
 * shown; resumed, it decodes again from the start of the loop up to that frame (each
 * frame of this GIF draws one more square over the ones before, disposal "none", so a
 * frame decoded without its predecessors would differ) and continues at the right index
 * with PXL_FLAG_ANIMATE's pixels. */
void test_player_release_when_paused(const struct test_env *env) {
  enum { W = 32, H = 32, FRAMES = 20 };
  FILE *gif = gif_start(env, "player-release.gif", W, H, 0);
  CHECK(gif != NULL);
  if (!gif) return;
  uint8_t full[W * H], square[16];
  memset(full, 0, sizeof full);
  gif_put_frame(gif, 0, 0, W, H, full, 1, 10, -1);
  for (int i = 1; i < FRAMES; i++) {
    memset(square, (uint8_t)(1 + i % 3), sizeof square);
    gif_put_frame(gif, (i * 4) % W, (i / 8) * 4, 4, 4, square, 1, 10, -1);
  }
  fputc(0x3b, gif);
  fclose(gif);
  struct session s;
  session_start(env, &s, "/player-release.gif", "player-release", NULL);
  struct capture all = {0};
  struct test_url u = test_url(env, "/player-release.gif", "player-release-all");
  pxl_request animated;
  request_for(&animated, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  animated.flags |= PXL_FLAG_ANIMATE;
  CHECK_STATUS(load_and_wait(env, s.loader, s.queue, &animated, &all), PXL_OK);
  CHECK(all.image != NULL && pxl_image_frame_count(all.image) == FRAMES);
  if (!all.image || pxl_image_frame_count(all.image) != FRAMES) {
    capture_reset(&all);
    session_end(&s);
    return;
  }
  uint64_t frame_bytes = pxl_image_byte_count(all.image);
  pxl_animation_frame f = {.struct_size = sizeof f};
  /* Frames 0..6 at their due times (100 ms each), then a pause on frame 6. */
  int64_t clock = 1000;
  for (int i = 0; i <= 6; i++) {
    pxl_image_release(pxl_animation_frame_at(s.a, clock, &f));
    CHECK_INT(f.index, i);
    next_event(env, s.queue, &s.ev, &s.seen);
    clock += 100;
  }
  pxl_animation_pause(s.a);
  double paused_at = now_ms();
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  /* Frame 7 is decoded ahead (its FRAME_READY came): the ring holds it and frame 6. */
  CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
  CHECKF(stats.ring_bytes >= 2 * frame_bytes, "ring %llu bytes when paused", (unsigned long long)stats.ring_bytes);
  /* Released after the delay: only the frame shown is left. */
  double released_at = 0;
  while (now_ms() - paused_at < 5000) {
    CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
    if (stats.ring_bytes <= frame_bytes) {
      released_at = now_ms();
      break;
    }
    drain_for(s.queue, 20);
  }
  CHECKF(released_at > 0, "ring released within 5 s of the pause (%llu bytes left)",
         (unsigned long long)stats.ring_bytes);
  CHECKF(released_at == 0 || released_at - paused_at >= 1000, "released %.0f ms after the pause, not before 1000",
         released_at - paused_at);
  CHECK_INT(stats.ring_bytes, frame_bytes);
  uint64_t decoded = stats.frames_decoded;
  /* Still paused: the frame shown is frame 6, nothing decodes. */
  pxl_image *image = pxl_animation_frame_at(s.a, 90000, &f);
  CHECK_INT(f.index, 6);
  CHECKF(same_pixels(image, pxl_image_frame_pixels(all.image, 6)), "frame 6 kept");
  pxl_image_release(image);
  drain_for(s.queue, 100);
  CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
  CHECK_INT(stats.frames_decoded, decoded);
  /* Resumed at 100000: frame 6 had shown 0 ms of its 100 (paused at 1600), so frame 7 is
   * due at 100100; then frames 7.. play in order with PXL_FLAG_ANIMATE's pixels. */
  pxl_animation_resume(s.a, 100000);
  image = pxl_animation_frame_at(s.a, 100000, &f);
  CHECK_INT(f.index, 6);
  pxl_image_release(image);
  clock = 100100;
  for (int i = 7; i < FRAMES + 3; i++) {
    if (!next_event(env, s.queue, &s.ev, &s.seen)) break;
    CHECK_INT(s.ev.last_kind, PXL_ANIMATION_FRAME_READY);
    CHECK_INT(s.ev.ready_index, i % FRAMES);
    CHECK_INT(s.ev.ready_due, clock);
    image = pxl_animation_frame_at(s.a, clock, &f);
    CHECK_INT(f.index, i % FRAMES);
    CHECK_INT(f.skipped, 0);
    CHECKF(same_pixels(image, pxl_image_frame_pixels(all.image, i % FRAMES)), "frame %d after the resume: pixels",
           i % FRAMES);
    pxl_image_release(image);
    clock += 100;
  }
  CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
  /* The decoder walked frames 0..6 again (not rendered, not skipped). */
  CHECKF(stats.frames_decoded >= decoded + 7, "decoded %llu, %llu before the resume",
         (unsigned long long)stats.frames_decoded, (unsigned long long)decoded);
  CHECK_INT(stats.frames_skipped, 0);
  CHECK(stats.peak_ring_bytes <= 3 * frame_bytes);
  capture_reset(&all);
  session_end(&s);
}

/* Freed while decoding, and from inside its own callback: no callback after free. */
void test_player_free(const struct test_env *env) {
  write_gif(env, "player-free.gif", 200, 150, 40, 2, 0);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/player-free.gif", "player-free");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct events ev = {0};
  pxl_animation *a = start(env, loader, queue, &request, &ev);
  pxl_image *image = pxl_animation_frame_at(a, 0, NULL);
  CHECK(image != NULL);
  ev.freed = 1;
  pxl_animation_free(a);
  drain_for(queue, 300);
  CHECK_INT(atomic_load(&ev.after_free), 0);
  CHECK(pxl_image_width(image) == 200); /* the host's reference outlives the player */
  pxl_image_release(image);
  events_reset(&ev);
  /* Freed at LOADED, by its callback. */
  ev.free_in_callback = 1;
  a = NULL;
  CHECK_STATUS(pxl_animation_load(loader, &request, queue, on_event, &ev, &a), PXL_OK);
  CHECK(drain_until(env, queue, &ev.count, 1, 10000));
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&ev.count), 1);
  CHECK_INT(atomic_load(&ev.after_free), 0);
  events_reset(&ev);
  /* Freed before anything arrived: not even LOADED. */
  CHECK_STATUS(pxl_animation_load(loader, &request, queue, on_event, &ev, &a), PXL_OK);
  pxl_animation_free(a);
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&ev.count), 0);
  events_reset(&ev);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Errors: a 404 is LOADED's status and nothing follows; a WebP whose last frame's data is
 * broken plays the frames before it, then FAILED; invalid arguments. */
void test_player_errors(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url missing = test_url(env, "/player-missing.gif", "player-404");
  pxl_request request;
  request_for(&request, missing.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct events ev = {0};
  pxl_animation *a = start(env, loader, queue, &request, &ev);
  CHECK_STATUS(ev.status, PXL_E_HTTP);
  CHECK(ev.first == NULL);
  CHECK(pxl_animation_frame_at(a, 0, NULL) == NULL);
  CHECK_INT(drain_for(queue, 100), 0);
  pxl_animation_free(a);
  events_reset(&ev);

  write_gif(env, "player-bad.gif", 24, 16, 4, 5, 0);
  if (make_webp(env, "player-bad.gif", "player-bad.webp", "")) {
    /* Zero the last frame's VP8L data after its 5-byte header: its Huffman codes become
     * invalid (the container and the header stay valid). */
    char path[1024];
    snprintf(path, sizeof path, "%s/player-bad.webp", env->fixture_dir);
    FILE *f = fopen(path, "r+b");
    uint8_t buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    long last = -1;
    for (size_t i = 0; i + 8 < n; i++)
      if (memcmp(buf + i, "VP8L", 4) == 0) last = (long)i;
    CHECK(last > 0);
    if (last > 0) {
      uint32_t size = buf[last + 4] | buf[last + 5] << 8 | buf[last + 6] << 16 | (uint32_t)buf[last + 7] << 24;
      for (size_t i = (size_t)last + 8 + 5; i < (size_t)last + 8 + size && i < n; i++) buf[i] = 0;
      fseek(f, 0, SEEK_SET);
      fwrite(buf, 1, n, f);
    }
    if (f) fclose(f);
    struct test_url bad = test_url(env, "/player-bad.webp", "player-bad");
    request_for(&request, bad.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    a = start(env, loader, queue, &request, &ev);
    CHECK_STATUS(ev.status, PXL_OK);
    int seen = 1, shown = 0;
    int64_t now = 0;
    pxl_animation_frame fr = {.struct_size = sizeof fr};
    /* FAILED comes when the decoder reaches frame 3, maybe in the same drain as frame
     * 2's FRAME_READY: play until frame_at says nothing follows. */
    for (int i = 0; i < 10; i++) {
      pxl_image *image = pxl_animation_frame_at(a, now, &fr);
      CHECK(image != NULL);
      pxl_image_release(image);
      shown = fr.index;
      if (fr.next_due_ms == -1 || !next_event(env, queue, &ev, &seen)) break;
      now = ev.ready_due;
    }
    CHECK_INT(ev.failed, 1);
    CHECK_INT(ev.ended, 0);
    CHECK_STATUS(ev.status, PXL_E_CORRUPT_IMAGE);
    CHECKF(strstr(ev.message, "WebP") != NULL, "FAILED message: %s", ev.message);
    CHECK_INT(shown, 2); /* frames 0..2 played, frame 3 broken */
    pxl_image *image = pxl_animation_frame_at(a, now + 100000, &fr);
    CHECK(image != NULL && fr.index == 2 && fr.next_due_ms == -1);
    pxl_image_release(image);
    pxl_animation_free(a);
    events_reset(&ev);
  }

  CHECK_STATUS(pxl_animation_load(NULL, &request, queue, on_event, &ev, &a), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_animation_load(loader, &request, queue, NULL, &ev, &a), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_animation_load(loader, &request, queue, on_event, &ev, NULL), PXL_E_INVALID_ARGUMENT);
  CHECK(pxl_animation_frame_at(NULL, 0, NULL) == NULL);
  pxl_animation_stats stats = {.struct_size = 4};
  CHECK_STATUS(pxl_animation_stats_get(NULL, &stats), PXL_E_INVALID_ARGUMENT);
  pxl_animation_pause(NULL);
  pxl_animation_resume(NULL, 0);
  pxl_animation_free(NULL);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Two players of one request: one download, one memory-cache entry (holding the encoded
 * bytes), each its own playhead. */
void test_player_shared_source(const struct test_env *env) {
  write_gif(env, "player-shared.gif", 30, 20, 6, 10, 0);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/player-shared.gif", "player-shared");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct events e1 = {0}, e2 = {0};
  pxl_animation *a1 = start(env, loader, queue, &request, &e1);
  pxl_animation *a2 = start(env, loader, queue, &request, &e2);
  CHECK(e1.first != NULL && e1.first == e2.first);
  CHECK_INT(pxl_memory_cache_count(loader), 1);
  CHECK(pxl_memory_cache_bytes(loader) >= 30 * 20 * 4 + (uint64_t)fixture_bytes(env, "player-shared.gif"));
  CHECK_INT(log_wait_count(env, u.uri, 1, 5000), 1);
  pxl_animation_frame f1 = {.struct_size = sizeof f1}, f2 = {.struct_size = sizeof f2};
  int s1 = 1, s2 = 1;
  pxl_image_release(pxl_animation_frame_at(a1, 0, &f1));
  next_event(env, queue, &e1, &s1);
  pxl_image_release(pxl_animation_frame_at(a1, 100, &f1));
  pxl_image_release(pxl_animation_frame_at(a2, 100, &f2));
  CHECK_INT(f1.index, 1);
  CHECK_INT(f2.index, 0);
  next_event(env, queue, &e2, &s2);
  pxl_animation_free(a1);
  pxl_animation_free(a2);
  events_reset(&e1);
  events_reset(&e2);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- A registered codec that reads frames one at a time (pxl_codec.open_frames) ----
 * "PXAN": magic, u16 width, height, frame count (little-endian), then per frame u16
 * duration, x, y, w, h and w * h RGBA pixels drawn at (x, y) over what was there. */
static atomic_int pxan_opens, pxan_nexts, pxan_closes, pxan_all_at_once;

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static int32_t pxan_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  return size >= 4 && memcmp(data, "PXAN", 4) == 0;
}

static pxl_status pxan_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message,
                              size_t message_cap, void *user_data) {
  (void)user_data;
  if (size < 10) {
    snprintf(message, message_cap, "no header");
    return PXL_E_CORRUPT_IMAGE;
  }
  header->width = rd16(data + 4);
  header->height = rd16(data + 6);
  header->frame_count = rd16(data + 8);
  header->has_alpha = 0;
  return PXL_OK;
}

static pxl_status pxan_draw(const uint8_t *data, size_t size, size_t *pos, pxl_codec_target *t, int32_t *duration,
                            char *message, size_t message_cap) {
  const uint8_t *f = data + *pos;
  if (*pos + 10 > size) {
    snprintf(message, message_cap, "frame header cut");
    return PXL_E_CORRUPT_IMAGE;
  }
  int x = rd16(f + 2), y = rd16(f + 4), w = rd16(f + 6), h = rd16(f + 8);
  if (x + w > t->width || y + h > t->height || *pos + 10 + (size_t)w * h * 4 > size) {
    snprintf(message, message_cap, "frame outside the canvas or cut");
    return PXL_E_CORRUPT_IMAGE;
  }
  for (int r = 0; r < h; r++)
    memcpy(t->pixels + (size_t)(y + r) * t->stride + (size_t)x * 4, f + 10 + (size_t)r * w * 4, (size_t)w * 4);
  *duration = rd16(f);
  *pos += 10 + (size_t)w * h * 4;
  return PXL_OK;
}

static pxl_status pxan_decode(const uint8_t *data, size_t size, pxl_codec_target *target, char *message,
                              size_t message_cap, void *user_data) {
  (void)user_data;
  size_t pos = 10;
  int32_t duration;
  return pxan_draw(data, size, &pos, target, &duration, message, message_cap);
}

static pxl_status pxan_decode_frames(const uint8_t *data, size_t size, pxl_codec_target *target, char *message,
                                     size_t message_cap, void *user_data) {
  (void)user_data;
  atomic_fetch_add(&pxan_all_at_once, 1);
  size_t pos = 10;
  for (int i = 0; i < rd16(data + 8); i++) {
    int32_t duration;
    pxl_status status = pxan_draw(data, size, &pos, target, &duration, message, message_cap);
    if (status != PXL_OK) return status;
    if (target->frame_done(target->library, duration) != 0) break;
  }
  return PXL_OK;
}

struct pxan_state {
  const uint8_t *data;
  size_t size, pos;
  int index, count;
};

static pxl_status pxan_open(const uint8_t *data, size_t size, void **state, char *message, size_t message_cap,
                            void *user_data) {
  (void)user_data;
  struct pxan_state *s = calloc(1, sizeof *s);
  if (!s || size < 10) {
    free(s);
    snprintf(message, message_cap, "cannot open");
    return PXL_E_CORRUPT_IMAGE;
  }
  *s = (struct pxan_state){data, size, 10, 0, rd16(data + 8)};
  *state = s;
  atomic_fetch_add(&pxan_opens, 1);
  return PXL_OK;
}

static pxl_status pxan_next(void *state, pxl_codec_target *target, int32_t *duration_ms, char *message,
                            size_t message_cap, void *user_data) {
  (void)user_data;
  struct pxan_state *s = state;
  if (s->index >= s->count) return PXL_E_NOT_FOUND;
  atomic_fetch_add(&pxan_nexts, 1);
  s->index++;
  return pxan_draw(s->data, s->size, &s->pos, target, duration_ms, message, message_cap);
}

static void pxan_close(void *state, void *user_data) {
  (void)user_data;
  atomic_fetch_add(&pxan_closes, 1);
  free(state);
}

static void write_pxan(const struct test_env *env, const char *name) {
  enum { W = 20, H = 12, N = 6 };
  uint8_t file[10 + N * (10 + W * H * 4)];
  size_t n = 0;
  memcpy(file, "PXAN", 4);
  uint16_t head[3] = {W, H, N};
  for (int i = 0; i < 3; i++) { file[4 + 2 * i] = (uint8_t)head[i]; file[5 + 2 * i] = (uint8_t)(head[i] >> 8); }
  n = 10;
  for (int i = 0; i < N; i++) {
    int x = i == 0 ? 0 : 3 * i, y = i == 0 ? 0 : i, w = i == 0 ? W : 4, h = i == 0 ? H : 4;
    uint16_t fh[5] = {(uint16_t)(40 + 10 * i), (uint16_t)x, (uint16_t)y, (uint16_t)w, (uint16_t)h};
    for (int k = 0; k < 5; k++) { file[n++] = (uint8_t)fh[k]; file[n++] = (uint8_t)(fh[k] >> 8); }
    for (int p = 0; p < w * h; p++) {
      file[n++] = (uint8_t)(i * 40 + p); file[n++] = (uint8_t)(255 - i * 30); file[n++] = (uint8_t)(p * 7);
      file[n++] = 255;
    }
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    fwrite(file, 1, n, f);
    fclose(f);
  }
}

/* Its frames, played, are decode_frames' (PXL_FLAG_ANIMATE's) frames, read one at a time:
 * decode_frames runs once (for PXL_FLAG_ANIMATE), never for the player. Without
 * open_frames the player decodes them all at once through decode_frames, same pixels. */
void test_player_codec_frames(const struct test_env *env) {
  write_pxan(env, "player.pxan");
  frame0_duration_may_be_unknown = 1;
  struct test_url u = test_url(env, "/player.pxan", "player-codec");
  for (int reads = 1; reads >= 0; reads--) {
    pxl_loader *loader = new_loader(NULL);
    pxl_queue *queue = new_queue();
    pxl_codec c;
    pxl_codec_init(&c);
    c.id = "pxan";
    c.version = "1";
    c.sniff = pxan_sniff;
    c.read_header = pxan_header;
    c.decode = pxan_decode;
    c.decode_frames = pxan_decode_frames;
    if (reads) {
      c.open_frames = pxan_open;
      c.next_frame = pxan_next;
      c.close_frames = pxan_close;
    }
    CHECK_STATUS(pxl_loader_add_codec(loader, &c), PXL_OK);
    atomic_store(&pxan_opens, 0);
    atomic_store(&pxan_nexts, 0);
    atomic_store(&pxan_closes, 0);
    atomic_store(&pxan_all_at_once, 0);
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    play_and_compare(env, loader, queue, &request, 14, 0, reads ? "pxan read frame by frame" : "pxan all at once");
    if (reads) {
      CHECK_INT(atomic_load(&pxan_all_at_once), 1);
      CHECKF(atomic_load(&pxan_opens) >= 3 && atomic_load(&pxan_nexts) >= 14, "opens %d, nexts %d",
             atomic_load(&pxan_opens), atomic_load(&pxan_nexts));
    } else {
      CHECK(atomic_load(&pxan_all_at_once) >= 2);
      CHECK_INT(atomic_load(&pxan_opens), 0);
    }
    pxl_loader_free(loader);
    pxl_queue_free(queue);
    if (reads) CHECK_INT(atomic_load(&pxan_closes), atomic_load(&pxan_opens));
  }
  frame0_duration_may_be_unknown = 0;
}

/* ---- Tables: players tied to rows decode only while their rows are visible ---- */

static int no_row_request(int64_t row, pxl_request *request, void *user_data) {
  (void)row;
  (void)request;
  (void)user_data;
  return 0; /* the rows show players, not loads */
}

static void no_row_result(int64_t row, const pxl_result *result, void *user_data) {
  (void)row;
  (void)result;
  (void)user_data;
}

static uint64_t table_frames(pxl_table *table) {
  pxl_table_stats stats = {.struct_size = sizeof stats};
  CHECK_STATUS(pxl_table_get_stats(table, &stats), PXL_OK);
  return stats.animation_frames_decoded;
}

/* Three rows of one animation: visible, their players decode (the table counts it);
 * scrolled away, paused: nothing decoded however long, the playheads frozen; back, they
 * go on where they were. */
void test_player_table_rows(const struct test_env *env) {
  write_gif(env, "player-rows.gif", 16, 16, 60, 10, 0);
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  pxl_table_config config;
  pxl_table_config_init(&config);
  pxl_table *table = NULL;
  CHECK_STATUS(pxl_table_create(loader, queue, &config, 1000, no_row_request, no_row_result, NULL, &table), PXL_OK);
  struct test_url u = test_url(env, "/player-rows.gif", "player-rows");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  enum { ROWS = 3 };
  struct events ev[ROWS];
  pxl_animation *a[ROWS];
  int seen[ROWS];
  CHECK_STATUS(pxl_table_set_visible(table, 0, ROWS, 0), PXL_OK);
  for (int i = 0; i < ROWS; i++) {
    memset(&ev[i], 0, sizeof ev[i]);
    a[i] = start(env, loader, queue, &request, &ev[i]);
    seen[i] = 1;
    CHECK_STATUS(pxl_table_bind_animation(table, i, a[i]), PXL_OK);
  }
  pxl_animation_frame f = {.struct_size = sizeof f};
  int64_t now = 1000;
  for (int step = 0; step < 5; step++, now += 100) {
    for (int i = 0; i < ROWS; i++) {
      pxl_image_release(pxl_animation_frame_at(a[i], now, &f));
      CHECK_INT(f.index, step);
      next_event(env, queue, &ev[i], &seen[i]);
    }
  }
  uint64_t shown = table_frames(table);
  /* Frames 3 and 4 at least were decoded once tied (before the first frame_at a player
   * decodes two ahead of frame 0, maybe before its tie). */
  CHECKF(shown >= ROWS * 2, "tied players decoded %llu frames", (unsigned long long)shown);
  /* Scrolled away: paused (a frame being decoded then may finish). */
  CHECK_STATUS(pxl_table_set_visible(table, 500, ROWS, 1), PXL_OK);
  drain_for(queue, 100);
  uint64_t away = table_frames(table);
  for (int i = 0; i < ROWS; i++) {
    pxl_image_release(pxl_animation_frame_at(a[i], now + 60000, &f));
    CHECK_INT(f.index, 4);
  }
  drain_for(queue, 300);
  CHECK_INT(table_frames(table), away);
  /* Back: each goes on from frame 4, at its next frame_at. Frames up to 6 may have been
   * decoded before it left (two ahead of frame 4); 7 is decoded after it came back. */
  CHECK_STATUS(pxl_table_set_visible(table, 0, ROWS, -1), PXL_OK);
  now = 200000;
  for (int i = 0; i < ROWS; i++) {
    pxl_image_release(pxl_animation_frame_at(a[i], now, &f));
    CHECK_INT(f.index, 4);
    for (int index = 5; index <= 6; index++) {
      pxl_image_release(pxl_animation_frame_at(a[i], now + 100 * (index - 4), &f));
      CHECK_INT(f.index, index);
      next_event(env, queue, &ev[i], &seen[i]);
      CHECK_INT(ev[i].ready_index, index + 1);
    }
  }
  CHECKF(table_frames(table) >= away + ROWS, "decoding again: %llu frames, %llu when away",
         (unsigned long long)table_frames(table), (unsigned long long)away);
  /* Untied (row -1), a row's player is left alone by later scrolls: it decodes on. */
  CHECK_STATUS(pxl_table_bind_animation(table, -1, a[0]), PXL_OK);
  CHECK_STATUS(pxl_table_set_visible(table, 700, ROWS, 1), PXL_OK);
  pxl_image_release(pxl_animation_frame_at(a[0], now + 300, &f));
  CHECK_INT(f.index, 7);
  next_event(env, queue, &ev[0], &seen[0]);
  CHECK_INT(ev[0].ready_index, 8);
  CHECK_STATUS(pxl_table_bind_animation(NULL, 0, a[0]), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_bind_animation(table, -2, a[0]), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_table_bind_animation(table, 0, NULL), PXL_E_INVALID_ARGUMENT);
  /* Freed players and a freed table: nothing dangles. */
  pxl_animation_free(a[1]);
  CHECK_STATUS(pxl_table_set_visible(table, 0, ROWS, -1), PXL_OK);
  pxl_table_free(table);
  for (int i = 0; i < ROWS; i++) {
    if (i != 1) pxl_animation_free(a[i]);
    events_reset(&ev[i]);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- Isolated animations (worker/pxl_worker_protocol.h: FRAMES_OPEN, FRAME_NEXT) ---- */

/* Whether process pid maps an animation's canvas (the memfd "pixload-pixels" a worker
 * keeps mapped while an animation is open in it; an idle worker maps none). */
static int maps_canvas(long pid) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%ld/maps", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, "memfd:pixload-pixels") != NULL;
  fclose(f);
  return found;
}

/* Process pid's VmHWM (peak resident memory) in KB, or -1. */
static long vm_hwm_kb(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long hwm = -1;
  while (fgets(line, sizeof line, f) && sscanf(line, "VmHWM: %ld", &hwm) != 1) continue;
  fclose(f);
  return hwm;
}

/* The decode workers this process started (children named pixload-decode-worker) that hold
 * an animation open: how many (killed with SIGKILL when kill_them; the last one's VmHWM
 * in *hwm_kb when not NULL). */
static int canvas_workers_scan(int kill_them, long *hwm_kb) {
  int killed = 0;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    char *open = strchr(stat, '('), *close = strrchr(stat, ')');
    if (!open || !close || close < open) continue;
    int ppid = 0;
    char state;
    if (sscanf(close + 1, " %c %d", &state, &ppid) != 2 || ppid != getpid()) continue;
    if (strncmp(open + 1, "pixload-decode", 14) != 0 || !maps_canvas(pid)) continue;
    if (hwm_kb) *hwm_kb = vm_hwm_kb(pid);
    if (!kill_them || kill((pid_t)pid, SIGKILL) == 0) killed++;
  }
  closedir(d);
  return killed;
}

static int canvas_workers(int kill_them) { return canvas_workers_scan(kill_them, NULL); }

/* What a player showed: each frame's index and a copy of its pixels. */
struct played {
  int count, frame_count, loop_count;
  int index[64];
  uint8_t *pixels[64];
  size_t bytes;
  pxl_animation_stats stats;
};

static void played_free(struct played *p) {
  for (int i = 0; i < p->count; i++) free(p->pixels[i]);
  memset(p, 0, sizeof *p);
}

/* Plays request on loader at the events' times: one loop (two when it loops forever), at
 * most 64 frames, every frame copied. */
static void play_all(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const pxl_request *request,
                     struct played *p, const char *what) {
  memset(p, 0, sizeof *p);
  struct events ev = {0};
  pxl_animation *a = start(env, loader, queue, request, &ev);
  CHECKF(ev.status == PXL_OK, "%s: LOADED %d (%s)", what, ev.status, ev.message);
  p->frame_count = ev.frame_count;
  p->loop_count = ev.loop_count;
  int plays = ev.frame_count * (ev.loop_count == 0 ? 2 : 1);
  if (plays > 64) plays = 64;
  int64_t now = 1000;
  int seen = 1;
  pxl_animation_frame f = {.struct_size = sizeof f};
  for (int i = 0; i < plays && ev.status == PXL_OK; i++) {
    pxl_image *image = pxl_animation_frame_at(a, now, &f);
    CHECKF(image != NULL, "%s: play %d: no frame", what, i);
    if (!image) break;
    p->bytes = pxl_image_byte_count(image);
    p->pixels[i] = malloc(p->bytes);
    memcpy(p->pixels[i], pxl_image_pixels(image), p->bytes);
    p->index[i] = f.index;
    p->count++;
    pxl_image_release(image);
    if (i + 1 == plays) break;
    if (!next_event(env, queue, &ev, &seen)) break;
    if (ev.last_kind != PXL_ANIMATION_FRAME_READY) {
      CHECKF(0, "%s: after frame %d: event %d (status %d: %s)", what, i, ev.last_kind, ev.status, ev.message);
      break;
    }
    now = ev.ready_due;
  }
  p->stats.struct_size = sizeof p->stats;
  CHECK_STATUS(pxl_animation_stats_get(a, &p->stats), PXL_OK);
  pxl_animation_free(a);
  events_reset(&ev);
}

/* The same request played by an isolated loader and by an in-process one (NONE): every
 * frame, in the same order, with the same pixels; and PXL_FLAG_ANIMATE's frames too. */
static void same_frames(const struct test_env *env, pxl_loader *none, pxl_loader *isolated, pxl_queue *queue,
                        const pxl_request *request, int frames, const char *what) {
  struct played in = {0}, out = {0};
  play_all(env, none, queue, request, &in, what);
  play_all(env, isolated, queue, request, &out, what);
  CHECKF(in.frame_count == frames && out.frame_count == frames, "%s: %d frames in-process, %d isolated (%d expected)",
         what, in.frame_count, out.frame_count, frames);
  CHECK_INT(out.loop_count, in.loop_count);
  CHECKF(out.count == in.count && in.count >= frames, "%s: played %d isolated, %d in-process", what, out.count,
         in.count);
  for (int i = 0; i < in.count && i < out.count; i++) {
    CHECKF(out.index[i] == in.index[i] && out.index[i] == i % frames, "%s: play %d: frame %d isolated, %d in-process",
           what, i, out.index[i], in.index[i]);
    CHECKF(out.bytes == in.bytes && memcmp(out.pixels[i], in.pixels[i], in.bytes) == 0,
           "%s: play %d (frame %d): isolated pixels differ from in-process", what, i, in.index[i]);
  }
  CHECKF(out.stats.frames_decoded >= (uint64_t)out.count - 1, "%s: %llu frames decoded isolated", what,
         (unsigned long long)out.stats.frames_decoded);
  played_free(&in);
  played_free(&out);

  struct capture a = {0}, b = {0};
  pxl_request animated = *request;
  animated.flags |= PXL_FLAG_ANIMATE;
  CHECK_STATUS(load_and_wait(env, none, queue, &animated, &a), PXL_OK);
  CHECK_STATUS(load_and_wait(env, isolated, queue, &animated, &b), PXL_OK);
  CHECKF(a.status == PXL_OK && b.status == PXL_OK, "%s: PXL_FLAG_ANIMATE %d in-process, %d isolated (%s)", what,
         a.status, b.status, b.message);
  if (a.image && b.image) {
    int n = pxl_image_frame_count(a.image);
    CHECKF(n == frames && pxl_image_frame_count(b.image) == n, "%s: PXL_FLAG_ANIMATE %d frames in-process, %d isolated",
           what, n, pxl_image_frame_count(b.image));
    CHECK_INT(pxl_image_byte_count(b.image), pxl_image_byte_count(a.image));
    for (int i = 0; i < n && i < pxl_image_frame_count(b.image); i++) {
      CHECK_INT(pxl_image_frame_duration_ms(b.image, i), pxl_image_frame_duration_ms(a.image, i));
      CHECKF(memcmp(pxl_image_frame_pixels(a.image, i), pxl_image_frame_pixels(b.image, i),
                    pxl_image_byte_count(a.image)) == 0,
             "%s: PXL_FLAG_ANIMATE frame %d: isolated pixels differ", what, i);
    }
  }
  capture_reset(&a);
  capture_reset(&b);
}

/* A player whose worker is killed mid-animation: FAILED with PXL_E_DECODER_FAILED (an
 * in-process player, which has no worker, would play on: the frames come from the
 * worker); the host goes on, and the next image decodes in a fresh worker. */
static void killed_mid_animation(const struct test_env *env, const pxl_config *config, const char *path,
                                 const char *still_path, const char *what) {
  struct session s;
  session_start(env, &s, path, what, config);
  CHECK_INT(s.ev.status, PXL_OK);
  pxl_animation_frame f = {.struct_size = sizeof f};
  pxl_image *frame = pxl_animation_frame_at(s.a, 0, &f);
  pxl_image_release(frame);
  next_event(env, s.queue, &s.ev, &s.seen);
  CHECKF(s.ev.last_kind == PXL_ANIMATION_FRAME_READY, "%s: frame 1 ready (event %d)", what, s.ev.last_kind);
  CHECKF(canvas_workers(1) == 1, "%s: one decode worker holds the animation", what);
  for (int i = 0; i < 20 && !s.ev.failed; i++) {
    frame = pxl_animation_frame_at(s.a, s.ev.ready_due, &f);
    pxl_image_release(frame);
    if (!next_event(env, s.queue, &s.ev, &s.seen)) break;
  }
  CHECKF(s.ev.failed == 1 && s.ev.status == PXL_E_DECODER_FAILED, "%s: FAILED %d, status %d (%s)", what, s.ev.failed,
         s.ev.status, s.ev.message);
  struct capture c = {0};
  struct test_url u = test_url(env, still_path, "after-kill");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, s.loader, s.queue, &request, &c), PXL_OK);
  CHECKF(c.status == PXL_OK, "%s: the next image: %d (%s)", what, c.status, c.message);
  capture_reset(&c);
  session_end(&s);
}

/* An in-process loader (PXL_ISOLATION_NONE) and one isolating as `isolation` says, both
 * with config's settings and no memory cache; config is left with the isolating one's. */
static void loader_pair(pxl_config *config, int32_t isolation, pxl_loader **none, pxl_loader **isolated) {
  config->memory_cache_bytes = 0;
  config->isolation = PXL_ISOLATION_NONE;
  *none = new_loader(config);
  config->isolation = isolation;
  *isolated = new_loader(config);
}

/* PXL_ISOLATION_ALL: the host never decodes a built-in format itself; an animation's frames
 * come from a worker's frame reader, the same pixels as in-process: WebP, GIF and AVIF,
 * full size and as a premultiplied thumbnail, played and with PXL_FLAG_ANIMATE. */
void test_player_isolation_all(const struct test_env *env) {
  write_gif(env, "player-iso.gif", 30, 20, 12, 3, 0);
  pxl_config config;
  pxl_config_init(&config);
  pxl_loader *none, *all;
  loader_pair(&config, PXL_ISOLATION_ALL, &none, &all);
  pxl_queue *queue = new_queue();
  static const struct { const char *path; int frames; } files[] = {
      {"/anim.webp", 3}, {"/player-iso.gif", 12}, {"/seq.avif", 5}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    struct test_url u = test_url(env, files[i].path, "player-all");
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    same_frames(env, none, all, queue, &request, files[i].frames, files[i].path);
    request_for(&request, u.url, 9, 7, PXL_MODE_FILL, PXL_FORMAT_BGRA8_PREMUL);
    same_frames(env, none, all, queue, &request, files[i].frames, files[i].path);
  }
  pxl_loader_free(all);
  pxl_loader_free(none);
  pxl_queue_free(queue);
  killed_mid_animation(env, &config, "/player-iso.gif", "/anim.webp", "all-killed");
}

/* A codec module's animation isolated (PXL_ISOLATION_MODULES, the default): an animated
 * JPEG XL made now by cjxl from a GIF, decoded by the JPEG XL module in a worker (its
 * open_frames state there, one frame per FRAME_NEXT), every frame the same as
 * the module's in-process (PXL_ISOLATION_NONE); a worker killed mid-animation: FAILED. */
void test_player_isolation_modules(const struct test_env *env) {
  write_gif(env, "player-jxl.gif", 24, 16, 5, 4, 0);
  char command[2048];
  snprintf(command, sizeof command, "cjxl '%s/player-jxl.gif' '%s/player.jxl' >/dev/null 2>&1", env->fixture_dir,
           env->fixture_dir);
  int rc = system(command);
  CHECKF(rc == 0, "%s: exit %d (cjxl: Debian libjxl-tools)", command, rc);
  if (rc != 0) return;
  pxl_config config;
  pxl_config_init(&config);
  pxl_loader *none, *modules;
  loader_pair(&config, PXL_ISOLATION_MODULES, &none, &modules);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/player.jxl", "player-jxl");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  same_frames(env, none, modules, queue, &request, 5, "jxl");
  request_for(&request, u.url, 10, 10, PXL_MODE_FILL, PXL_FORMAT_RGB8);
  same_frames(env, none, modules, queue, &request, 5, "jxl 10x10 fill rgb");
  pxl_loader_free(modules);
  pxl_loader_free(none);
  pxl_queue_free(queue);
  killed_mid_animation(env, &config, "/player.jxl", "/player.jxl", "modules-killed");
}

/* The VmHWM (peak resident KB) of the decode worker of this process that holds an
 * animation open (maps_canvas); -1 when none or several do. */
static long canvas_worker_hwm_kb(void) {
  long hwm = -1;
  return canvas_workers_scan(0, &hwm) == 1 ? hwm : -1;
}

/* Bytes the process has allocated with malloc now (every arena, mmapped chunks too). */
static uint64_t malloc_bytes(void) {
  struct mallinfo2 m = mallinfo2();
  return (uint64_t)m.uordblks + (uint64_t)m.hblkhd;
}

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

enum { JXL_W = 400, JXL_H = 300, JXL_FRAMES = 120 };

/* What a player showed of an animated JPEG XL: each frame's hash and duration. */
struct jxl_played {
  int shown;
  uint64_t hash[JXL_FRAMES];
  int32_t duration[JXL_FRAMES];
  int32_t loop_count;
  uint64_t grown;       /* in-process: most bytes malloc'd while playing over those before it */
  long worker_hwm_kb;   /* isolated: the worker's VmHWM, the highest read while playing */
  pxl_animation_stats stats;
};

/* Plays request once through (frames frames, at most JXL_FRAMES) at the frames' due
 * times, every frame hashed. */
static void play_jxl(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const pxl_request *request,
                     int frames, struct jxl_played *p, const char *what) {
  memset(p, 0, sizeof *p);
  p->worker_hwm_kb = -1;
  uint64_t before = malloc_bytes(), peak = before;
  struct events ev = {0};
  pxl_animation *a = start(env, loader, queue, request, &ev);
  CHECKF(ev.status == PXL_OK, "%s: LOADED %d (%s)", what, ev.status, ev.message);
  CHECKF(ev.frame_count == frames, "%s: %d frames, %d expected", what, ev.frame_count, frames);
  p->loop_count = ev.loop_count;
  int seen = 1;
  int64_t now = 1000;
  pxl_animation_frame f = {.struct_size = sizeof f};
  while (ev.status == PXL_OK && p->shown < frames && p->shown < JXL_FRAMES) {
    pxl_image *image = pxl_animation_frame_at(a, now, &f);
    if (!image || f.index != p->shown) {
      CHECKF(0, "%s: play %d: frame %d", what, p->shown, image ? f.index : -1);
      pxl_image_release(image);
      break;
    }
    p->hash[p->shown] = fnv1a(pxl_image_pixels(image), pxl_image_byte_count(image));
    p->duration[p->shown] = f.duration_ms;
    pxl_image_release(image);
    uint64_t held = malloc_bytes();
    if (held > peak) peak = held;
    /* Read while playing: after the last frame is decoded the player gives its worker
     * back (the animation ended), and that can come before this loop's last turn. */
    long hwm = canvas_worker_hwm_kb();
    if (hwm > p->worker_hwm_kb) p->worker_hwm_kb = hwm;
    if (++p->shown == frames) break;
    if (!next_event(env, queue, &ev, &seen) || ev.last_kind != PXL_ANIMATION_FRAME_READY) break;
    /* Frame 0's duration may not be known at the first call (-1): FRAME_READY's due time says it. */
    if (p->duration[p->shown - 1] == -1) p->duration[p->shown - 1] = (int32_t)(ev.ready_due - now);
    CHECKF(ev.ready_due - now == p->duration[p->shown - 1], "%s: frame %d due %lld ms after frame %d of %d ms", what,
           p->shown, (long long)(ev.ready_due - now), p->shown - 1, p->duration[p->shown - 1]);
    now = ev.ready_due;
  }
  p->grown = peak - before;
  p->stats.struct_size = sizeof p->stats;
  CHECK_STATUS(pxl_animation_stats_get(a, &p->stats), PXL_OK);
  pxl_animation_free(a);
  events_reset(&ev);
}

/* PXL_FLAG_ANIMATE's frames of request (decode_frames), in-process and from the worker:
 * the frames the two plays showed (played[0] in-process, played[1] isolated), each with
 * its duration, and the same loop count. */
static void jxl_same_as_animate(const struct test_env *env, pxl_loader *none, pxl_loader *modules, pxl_queue *queue,
                                const pxl_request *request, int frames, const struct jxl_played played[2],
                                const char *what) {
  pxl_request animated = *request;
  animated.flags |= PXL_FLAG_ANIMATE;
  for (int isolated = 0; isolated < 2; isolated++) {
    struct capture all = {0};
    CHECK_STATUS(load_and_wait(env, isolated ? modules : none, queue, &animated, &all), PXL_OK);
    int n = all.image ? pxl_image_frame_count(all.image) : -1;
    CHECKF(n == frames, "%s: PXL_FLAG_ANIMATE %s: %d frames (%s)", what, isolated ? "isolated" : "in-process", n,
           all.message);
    for (int k = 0; k < 2 && n == frames; k++) {
      const struct jxl_played *p = &played[k];
      CHECK_INT(p->loop_count, pxl_image_loop_count(all.image));
      int same = 0, durations = 0;
      for (int i = 0; i < p->shown; i++) {
        same += fnv1a(pxl_image_frame_pixels(all.image, i), pxl_image_byte_count(all.image)) == p->hash[i];
        durations += pxl_image_frame_duration_ms(all.image, i) == p->duration[i];
      }
      CHECKF(p->shown == frames && same == frames && durations == frames,
             "%s: played %s, %d frames, %d the same as PXL_FLAG_ANIMATE's %s, %d with its duration (of %d)", what,
             k ? "isolated" : "in-process", p->shown, same, isolated ? "isolated" : "in-process", durations, frames);
    }
    capture_reset(&all);
  }
}

/* cjxl's animated JPEG XL of the served GIF gif (Debian libjxl-tools): 1 when made. */
static int make_jxl(const struct test_env *env, const char *gif, const char *jxl) {
  char command[2048];
  snprintf(command, sizeof command, "cjxl '%s/%s' '%s/%s' >/dev/null 2>&1", env->fixture_dir, gif, env->fixture_dir,
           jxl);
  int rc = system(command);
  CHECKF(rc == 0, "%s: exit %d (cjxl: Debian libjxl-tools)", command, rc);
  return rc == 0;
}

/* A GIF whose frames build on each other: a 48x40 canvas of index 0, then small
 * rectangles with transparent pixels, kept (disposal 1) or restored to the background
 * (disposal 2), of different delays: cjxl makes blended, cropped JPEG XL frames of it,
 * which libjxl coalesces. */
static void write_layered_gif(const struct test_env *env, const char *name, int frames) {
  FILE *f = gif_start(env, name, 48, 40, 0);
  CHECK(f != NULL);
  if (!f) return;
  uint8_t indices[48 * 40];
  for (int i = 0; i < 48 * 40; i++) indices[i] = (uint8_t)(i % 48 < 24);
  gif_put_frame(f, 0, 0, 48, 40, indices, 1, 4, -1);
  for (int k = 1; k < frames; k++) {
    int w = 8 + k % 5, h = 6 + k % 4, left = (k * 7) % (48 - w), top = (k * 5) % (40 - h);
    for (int i = 0; i < w * h; i++) indices[i] = (uint8_t)((i + k) % 3 == 0 ? 3 : 1 + (k + i / w) % 2);
    gif_put_frame(f, left, top, w, h, indices, k % 3 == 0 ? 2 : 1, 2 + k % 4, 3);
  }
  fputc(0x3b, f);
  fclose(f);
}

/* Animated JPEG XLs played by the JPEG XL module one frame at a time
 * (pxl_codec.open_frames), in-process (PXL_ISOLATION_NONE) and isolated
 * (PXL_ISOLATION_MODULES): every frame, its duration and the loop count the same as
 * PXL_FLAG_ANIMATE's (decode_frames), in-process and isolated, for a long one (cjxl from
 * a 120-frame 400x300 GIF, 55 MB of frames), one of blended, cropped frames (cjxl from a
 * layered GIF, also as a 20x16 RGB8 thumbnail), the libjxl conformance suite's
 * animation_spline (60 frames of splines) and the module fuzz seeds' animation. The long
 * one: the ring within its 3 frames, and the decoding side never holds the animation's
 * frames: in-process, the bytes the process has malloc'd while playing grow by less than a
 * quarter of them; isolated, the worker's peak resident memory stays under half of them
 * (decoding everything at once, as the module did before it read frames one at a time,
 * holds all of them there). The plays come first: a PXL_FLAG_ANIMATE image the loader's
 * threads release after its callback would blur the in-process count. */
void test_player_jxl_frames(const struct test_env *env) {
  const uint64_t frame_bytes = (uint64_t)JXL_W * JXL_H * 4, all_frames = JXL_FRAMES * frame_bytes;
  write_gif(env, "player-jxl-long.gif", JXL_W, JXL_H, JXL_FRAMES, 3, 2);
  write_layered_gif(env, "player-jxl-layered.gif", 24);
  if (!make_jxl(env, "player-jxl-long.gif", "player-long.jxl") ||
      !make_jxl(env, "player-jxl-layered.gif", "player-layered.jxl"))
    return;
  pxl_config config;
  pxl_config_init(&config);
  pxl_loader *none, *modules;
  loader_pair(&config, PXL_ISOLATION_MODULES, &none, &modules);
  pxl_queue *queue = new_queue();
  pxl_request request;
  static struct jxl_played played[2];

  struct test_url u = test_url(env, "/player-long.jxl", "player-jxl-long");
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  for (int isolated = 0; isolated < 2; isolated++) {
    const char *what = isolated ? "long, isolated" : "long, in-process";
    struct jxl_played *p = &played[isolated];
    play_jxl(env, isolated ? modules : none, queue, &request, JXL_FRAMES, p, what);
    CHECKF(p->stats.peak_ring_bytes <= 3 * frame_bytes, "%s: peak ring %llu bytes, over 3 frames (%llu)", what,
           (unsigned long long)p->stats.peak_ring_bytes, (unsigned long long)(3 * frame_bytes));
    if (isolated) {
      CHECKF(p->worker_hwm_kb > 0 && (uint64_t)p->worker_hwm_kb * 1024 < all_frames / 2,
             "isolated: the worker's peak resident memory %ld KB, not under half the frames' %llu KB",
             p->worker_hwm_kb, (unsigned long long)(all_frames / 1024));
      printf("  jxl %d frames %dx%d isolated: worker VmHWM %ld KB (frames %llu KB)\n", JXL_FRAMES, JXL_W, JXL_H,
             p->worker_hwm_kb, (unsigned long long)(all_frames / 1024));
    } else {
      CHECKF(p->grown < all_frames / 4,
             "in-process: %llu KB more malloc'd while playing, not under a quarter of the frames' %llu KB",
             (unsigned long long)(p->grown / 1024), (unsigned long long)(all_frames / 1024));
      printf("  jxl %d frames %dx%d in-process: %llu KB more malloc'd while playing (frames %llu KB)\n", JXL_FRAMES,
             JXL_W, JXL_H, (unsigned long long)(p->grown / 1024), (unsigned long long)(all_frames / 1024));
    }
  }
  jxl_same_as_animate(env, none, modules, queue, &request, JXL_FRAMES, played, "long");

  static const struct { const char *path; int frames, w, h, format; } files[] = {
      {"/player-layered.jxl", 24, 0, 0, PXL_FORMAT_RGBA8},
      {"/player-layered.jxl", 24, 20, 16, PXL_FORMAT_RGB8},
      {"/modules/animation_spline.jxl", 60, 0, 0, PXL_FORMAT_RGBA8},
      {"/modules/animation.jxl", 0, 0, 0, PXL_FORMAT_RGBA8},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    u = test_url(env, files[i].path, "player-jxl");
    request_for(&request, u.url, files[i].w, files[i].h, PXL_MODE_FILL, files[i].format);
    int frames = files[i].frames;
    if (frames == 0) { /* as many as PXL_FLAG_ANIMATE gives, more than one */
      struct capture all = {0};
      request.flags |= PXL_FLAG_ANIMATE;
      CHECK_STATUS(load_and_wait(env, none, queue, &request, &all), PXL_OK);
      request.flags &= ~PXL_FLAG_ANIMATE;
      frames = all.image ? pxl_image_frame_count(all.image) : 0;
      capture_reset(&all);
      CHECKF(frames > 1 && frames <= JXL_FRAMES, "%s: %d frames", files[i].path, frames);
      if (frames < 2 || frames > JXL_FRAMES) continue;
    }
    play_jxl(env, none, queue, &request, frames, &played[0], files[i].path);
    play_jxl(env, modules, queue, &request, frames, &played[1], files[i].path);
    jxl_same_as_animate(env, none, modules, queue, &request, frames, played, files[i].path);
  }
  pxl_loader_free(modules);
  pxl_loader_free(none);
  pxl_queue_free(queue);
}

/* A module's codec that reads frames one at a time (open_frames: the hostile test module's
 * "animate", Tests/worker/hostile_module.c) isolated: the same frames as in-process; and
 * one whose next_frame crashes at frame 2 ("animsegv"): the worker dies mid-animation,
 * the player FAILS with PXL_E_DECODER_FAILED, the host goes on and the next image decodes. */
void test_player_isolation_module_frames(const struct test_env *env) {
  const char *dir = getenv("PXL_TEST_HOSTILE_DIR");
  CHECKF(dir != NULL, "PXL_TEST_HOSTILE_DIR is not set (run.sh builds the hostile module)");
  if (!dir) return;
  const char *old_path = getenv("PIXLOAD_CODEC_PATH");
  char *saved = old_path ? strdup(old_path) : NULL;
  setenv("PIXLOAD_CODEC_PATH", dir, 1);
  write_fixture(env, "hostile-anim.bin", (const uint8_t *)"HOSTILE:animate\n", 16);
  write_fixture(env, "hostile-animsegv.bin", (const uint8_t *)"HOSTILE:animsegv\n", 17);
  write_fixture(env, "hostile-ok.bin", (const uint8_t *)"HOSTILE:ok\n", 11);
  pxl_config config;
  pxl_config_init(&config);
  config.codec_modules = "hostile";
  pxl_loader *none, *modules;
  loader_pair(&config, PXL_ISOLATION_MODULES, &none, &modules);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/hostile-anim.bin", "player-hostile");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  same_frames(env, none, modules, queue, &request, 4, "hostile animate");
  request_for(&request, u.url, 3, 2, PXL_MODE_FILL, PXL_FORMAT_BGRA8_PREMUL);
  same_frames(env, none, modules, queue, &request, 4, "hostile animate 3x2");
  pxl_loader_free(modules);
  pxl_loader_free(none);
  pxl_queue_free(queue);

  struct session s;
  session_start(env, &s, "/hostile-animsegv.bin", "player-hostile-segv", &config);
  CHECK_INT(s.ev.status, PXL_OK);
  pxl_animation_frame f = {.struct_size = sizeof f};
  int64_t now = 0;
  for (int i = 0; i < 10 && !s.ev.failed; i++) {
    pxl_image *frame = pxl_animation_frame_at(s.a, now, &f);
    pxl_image_release(frame);
    if (!next_event(env, s.queue, &s.ev, &s.seen)) break;
    now = s.ev.ready_due;
  }
  CHECKF(s.ev.failed == 1 && s.ev.status == PXL_E_DECODER_FAILED, "animsegv: FAILED %d, status %d (%s)", s.ev.failed,
         s.ev.status, s.ev.message);
  CHECKF(strstr(s.ev.message, "SIGSEGV") != NULL, "animsegv: %s", s.ev.message);
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  CHECK_STATUS(pxl_animation_stats_get(s.a, &stats), PXL_OK);
  CHECKF(stats.frames_decoded == 2, "animsegv: %llu frames decoded before the crash",
         (unsigned long long)stats.frames_decoded);
  struct capture c = {0};
  struct test_url ok = test_url(env, "/hostile-ok.bin", "player-hostile-after");
  request_for(&request, ok.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, s.loader, s.queue, &request, &c), PXL_OK);
  CHECKF(c.status == PXL_OK, "after animsegv: %d (%s)", c.status, c.message);
  capture_reset(&c);
  session_end(&s);
  if (saved) setenv("PIXLOAD_CODEC_PATH", saved, 1);
  else unsetenv("PIXLOAD_CODEC_PATH");
  free(saved);
}

/* Waits until `want` decode workers hold an animation open: 1 if it came to that. */
static int canvas_workers_become(const struct test_env *env, pxl_queue *queue, int want) {
  for (int waited = 0; waited < 5000 * env->slow_factor; waited += 20) {
    if (canvas_workers(0) == want) return 1;
    drain_for(queue, 20);
  }
  return 0;
}

/* PXL_ISOLATION_ALL: a player holds one worker while its decoder's state lives, gives it back
 * when its ring is released (paused 1 s), takes one again when resumed (the frames after
 * the pause, through a new loop, the same as in-process), and gives it back when freed. */
void test_player_isolation_release(const struct test_env *env) {
  write_gif(env, "player-iso-release.gif", 30, 20, 12, 3, 0);
  pxl_config config;
  pxl_config_init(&config);
  pxl_loader *none, *all;
  loader_pair(&config, PXL_ISOLATION_ALL, &none, &all);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/player-iso-release.gif", "player-iso-release");
  struct capture frames = {0};
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.flags |= PXL_FLAG_ANIMATE;
  CHECK_STATUS(load_and_wait(env, none, queue, &request, &frames), PXL_OK);
  request.flags &= ~PXL_FLAG_ANIMATE;
  CHECK(frames.image && pxl_image_frame_count(frames.image) == 12);
  struct events ev = {0};
  pxl_animation *a = start(env, all, queue, &request, &ev);
  int seen = 1;
  pxl_animation_frame f = {.struct_size = sizeof f};
  int64_t clock = 1000;
  for (int i = 0; i <= 3; i++) {
    pxl_image_release(pxl_animation_frame_at(a, clock, &f));
    CHECK_INT(f.index, i);
    next_event(env, queue, &ev, &seen);
    clock = ev.ready_due;
  }
  CHECKF(canvas_workers(0) == 1, "playing: %d workers hold the animation", canvas_workers(0));
  pxl_animation_pause(a);
  CHECKF(canvas_workers_become(env, queue, 0), "paused: %d workers still hold it", canvas_workers(0));
  /* Frame 3 stays shown at the resume; frames 4.. follow as they are decoded again. */
  pxl_animation_resume(a, 100000);
  pxl_image_release(pxl_animation_frame_at(a, 100000, &f));
  CHECK_INT(f.index, 3);
  for (int i = 4; i < 12 + 4 && frames.image; i++) {
    if (!next_event(env, queue, &ev, &seen) || ev.last_kind != PXL_ANIMATION_FRAME_READY) break;
    pxl_image *image = pxl_animation_frame_at(a, ev.ready_due, &f);
    CHECKF(f.index == i % 12 && same_pixels(image, pxl_image_frame_pixels(frames.image, i % 12)),
           "after the resume, play %d: frame %d (%d expected), pixels as in-process", i, f.index, i % 12);
    pxl_image_release(image);
    if (i == 4) CHECKF(canvas_workers(0) == 1, "resumed: %d workers hold the animation", canvas_workers(0));
  }
  CHECKF(f.index == 3, "played on to frame %d after a loop", f.index);
  pxl_animation_free(a);
  CHECKF(canvas_workers_become(env, queue, 0), "freed: %d workers still hold it", canvas_workers(0));
  events_reset(&ev);
  capture_reset(&frames);
  pxl_loader_free(all);
  pxl_loader_free(none);
  pxl_queue_free(queue);
}
