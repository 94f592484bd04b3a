/*
 * bench/animation.c: an animation player (pxl_animation_*) against PXL_FLAG_ANIMATE and
 * the still first frame, on the file the issue measured: a 150-frame 480x270 GIF
 * (bench/animation_gif.py writes it). Each mode runs in a process of its own (fork), with
 * a fresh loader, so that its peak RSS (VmHWM) is its own:
 *   still    pxl_load of the first frame: time to the callback
 *   animate  pxl_load with PXL_FLAG_ANIMATE: time to the callback (every frame decoded)
 *   player   pxl_animation_load: time to LOADED (frame 0), then one loop played through
 *            the events with the host's clock at each due time (as fast as frames are
 *            decoded: the decode cost of a loop), its peak ring bytes and late frames
 *            (a FRAME_READY after its due time, on the real clock, had the host slept
 *            until each due time)
 * Median of ROUNDS runs (5), the modes interleaved; RSS of the last. FRAMES: the player
 * plays at most that many frames (default one loop; bench/animation.sh gives 200 for the
 * 2,000-frame WebP, whose timed loop `pixload play` plays).
 *
 *   make bench-animation        (bench/animation.sh: this program, `pixload play`, and
 *                                bench/animation_table.c)
 *   build/bench-animation FILE [ROUNDS [FRAMES]]
 *   BENCH_ISOLATION=none|modules|all build/bench-animation FILE: pxl_config.isolation (the
 *                                cost of a worker's frames: worker/README.md)
 */
#define _XOPEN_SOURCE 700
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"
#define BENCH_NAME "bench-animation"
#include "animation_bench.h"

enum { MAX_ROUNDS = 9 };

static int rounds = 5, max_frames = 0;

/* A fresh loader (file:// allowed), a queue and a request for url. */
static pxl_loader *loader_new(pxl_queue **queue, pxl_request *request, const char *url) {
  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes |= PXL_SCHEME_FILE;
  /* BENCH_ISOLATION=none|modules|all: the frames decoded in the host or in workers. */
  const char *isolation = getenv("BENCH_ISOLATION");
  if (isolation)
    config.isolation = strcmp(isolation, "all") == 0    ? PXL_ISOLATION_ALL
                       : strcmp(isolation, "none") == 0 ? PXL_ISOLATION_NONE
                                                        : PXL_ISOLATION_MODULES;
  pxl_loader *loader = NULL;
  pxl_status status = pxl_loader_new(&config, &loader);
  if (status != PXL_OK) die("pxl_loader_new", status);
  if ((status = pxl_queue_new(queue)) != PXL_OK) die("pxl_queue_new", status);
  pxl_request_init(request);
  request->url = url;
  return loader;
}

struct result {
  double first_ms;   /* to the callback, or to LOADED */
  double loop_ms;    /* player: one loop's frames decoded */
  long rss_kib;
  uint64_t frame_bytes; /* animate: every frame; player: peak ring */
  int frames, late;
};

static atomic_int done;
static pxl_image *got;
static pxl_status got_status;

static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  (void)user_data;
  got_status = result->status;
  got = pxl_image_retain(result->image);
  atomic_store(&done, 1);
}

static void wait_for(pxl_queue *queue, atomic_int *flag, int target) {
  while (atomic_load(flag) < target) {
    pxl_queue_wait(queue, 1000);
    pxl_queue_dispatch(queue, 0);
  }
}

static struct result run_load(const char *url, uint32_t flags) {
  pxl_queue *queue = NULL;
  pxl_request request;
  pxl_loader *loader = loader_new(&queue, &request, url);
  request.flags = flags;
  double start = now_ms();
  pxl_status status = pxl_load(loader, &request, queue, on_result, NULL, NULL);
  if (status != PXL_OK) die("pxl_load", status);
  wait_for(queue, &done, 1);
  struct result r = {.first_ms = now_ms() - start};
  if (got_status != PXL_OK) die("load", got_status);
  r.frames = pxl_image_frame_count(got);
  r.frame_bytes = (uint64_t)pxl_image_byte_count(got) * (uint64_t)r.frames;
  r.rss_kib = peak_rss_kib();
  pxl_image_release(got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  return r;
}

struct player_state {
  atomic_int events;
  int kind, frame_count;
  int64_t due;
  double ready_at; /* real clock at the last FRAME_READY */
};

static void on_event(pxl_animation *a, const pxl_animation_event *e, void *user_data) {
  (void)a;
  struct player_state *s = user_data;
  if (e->kind == PXL_ANIMATION_LOADED && e->status != PXL_OK) die("player load", e->status);
  if (e->kind == PXL_ANIMATION_FAILED) die("player frame", e->status);
  s->kind = e->kind;
  if (e->kind == PXL_ANIMATION_LOADED) s->frame_count = e->frame_count;
  s->due = e->due_ms;
  s->ready_at = now_ms();
  atomic_fetch_add(&s->events, 1);
}

static struct result run_player(const char *url) {
  pxl_queue *queue = NULL;
  pxl_request request;
  pxl_loader *loader = loader_new(&queue, &request, url);
  struct player_state s = {0};
  pxl_animation *a = NULL;
  double start = now_ms();
  pxl_status status = pxl_animation_load(loader, &request, queue, on_event, &s, &a);
  if (status != PXL_OK) die("pxl_animation_load", status);
  wait_for(queue, &s.events, 1);
  struct result r = {.first_ms = now_ms() - start};
  /* One loop: the host's clock starts at 0 and is at each frame's due time when it asks;
   * a frame is late when it was decoded after its due time measured from the loop's
   * start on the real clock (what a host sleeping until each due time would see). */
  pxl_animation_frame f = {.struct_size = sizeof f};
  double loop_start = now_ms();
  int64_t clock = 0;
  int seen = 1;
  int frames = max_frames > 0 && max_frames < s.frame_count ? max_frames : s.frame_count;
  while (r.frames < frames) {
    pxl_image_release(pxl_animation_frame_at(a, clock, &f));
    if (++r.frames == frames) break;
    wait_for(queue, &s.events, ++seen);
    if (s.kind != PXL_ANIMATION_FRAME_READY) break;
    if (s.ready_at - loop_start > (double)s.due) r.late++;
    clock = s.due;
  }
  r.loop_ms = now_ms() - loop_start;
  pxl_animation_stats stats = {.struct_size = sizeof stats};
  pxl_animation_stats_get(a, &stats);
  r.frame_bytes = stats.peak_ring_bytes;
  r.rss_kib = peak_rss_kib();
  pxl_animation_free(a);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  return r;
}

static int compare(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* One run of a mode in a child process. */
static struct result run_child(const char *url, int mode) {
  struct result r = {0};
  int fds[2];
  if (pipe(fds) != 0) exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    r = mode == 0 ? run_load(url, 0) : mode == 1 ? run_load(url, PXL_FLAG_ANIMATE) : run_player(url);
    if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  if (read(fds[0], &r, sizeof r) != (ssize_t)sizeof r) {
    fprintf(stderr, "bench-animation: a child failed\n");
    exit(1);
  }
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return r;
}

/* The three modes ROUNDS times, interleaved (a busy moment of the machine hits them
 * alike): each mode's median first_ms, the rest from its last run. */
static void measure(const char *url, struct result out[3]) {
  double firsts[3][MAX_ROUNDS];
  for (int i = 0; i < rounds; i++)
    for (int mode = 0; mode < 3; mode++) {
      out[mode] = run_child(url, mode);
      firsts[mode][i] = out[mode].first_ms;
    }
  for (int mode = 0; mode < 3; mode++) {
    qsort(firsts[mode], rounds, sizeof firsts[mode][0], compare);
    out[mode].first_ms = firsts[mode][rounds / 2];
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: bench-animation FILE [ROUNDS [FRAMES]]\n");
    return 2;
  }
  if (argc > 2) rounds = atoi(argv[2]) < 1 ? 1 : atoi(argv[2]) > MAX_ROUNDS ? MAX_ROUNDS : atoi(argv[2]);
  if (argc > 3) max_frames = atoi(argv[3]);
  char path[4096], url[4200];
  if (!realpath(argv[1], path)) {
    perror(argv[1]);
    return 1;
  }
  snprintf(url, sizeof url, "file://%s", path);
  struct result modes[3];
  measure(url, modes);
  struct result still = modes[0], animate = modes[1], player = modes[2];
  printf("%s (median of %d runs, each in its own process)\n", argv[1], rounds);
  printf("  still    first frame %7.1f ms                          peak RSS %6ld KiB\n", still.first_ms,
         still.rss_kib);
  printf("  animate  all %3d frames %6.1f ms  frames %9llu bytes  peak RSS %6ld KiB\n", animate.frames,
         animate.first_ms, (unsigned long long)animate.frame_bytes, animate.rss_kib);
  if (animate.frames == 1)
    printf("  animate: its frames exceed PXL_ANIMATION_MAX_BYTES (%u MiB): PXL_FLAG_ANIMATE gives frame 0 alone\n",
           PXL_ANIMATION_MAX_BYTES >> 20);
  printf("  player   first frame %7.1f ms  peak ring %7llu bytes  peak RSS %6ld KiB; %d frames "
         "decoded in %.0f ms, %d late\n",
         player.first_ms, (unsigned long long)player.frame_bytes, player.rss_kib, player.frames, player.loop_ms,
         player.late);
  printf("  player first frame / still: %.2fx\n", player.first_ms / still.first_ms);
  return 0;
}
