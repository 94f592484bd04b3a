/* Previews of progressive JPEGs (pxl_request.preview), served a scan at a time by the
 * fault server's /gate (or at 20 KB/s by nginx's /slow/): one per scan, each closer to the
 * final image than the one before, all on the queue's thread before the final callback;
 * none after a cancel, none for a baseline JPEG, none for a memory-cache hit; every
 * requester merged into one download gets its own. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

#define MAX_PREVIEWS 64

struct preview_probe {
  struct capture capture; /* the final callback */
  pthread_t host;
  pxl_token token;
  int calls;
  int off_thread;
  int after_final;
  int wrong_token;
  int after_cancel;       /* previews once pxl_cancel had returned */
  int cancelled;          /* set when the test cancelled it */
  double at[MAX_PREVIEWS];
  pxl_image *image[MAX_PREVIEWS]; /* retained */
};

static void on_preview(pxl_token token, pxl_image *image, void *user_data) {
  struct preview_probe *p = user_data;
  if (!pthread_equal(pthread_self(), p->host)) p->off_thread++;
  if (atomic_load(&p->capture.calls) > 0) p->after_final++;
  if (p->cancelled) p->after_cancel++;
  if (p->token && token != p->token) p->wrong_token++;
  if (p->calls < MAX_PREVIEWS) {
    p->at[p->calls] = now_ms();
    p->image[p->calls] = pxl_image_retain(image);
  }
  p->calls++;
}

static void probe_free(struct preview_probe *p) {
  for (int i = 0; i < p->calls && i < MAX_PREVIEWS; i++) pxl_image_release(p->image[i]);
  capture_reset(&p->capture);
}

/* Mean absolute difference per channel byte between two images of one size and format;
 * -1 when their sizes differ. */
static double mean_difference(const pxl_image *a, const pxl_image *b) {
  int w = pxl_image_width(a), h = pxl_image_height(a);
  if (w != pxl_image_width(b) || h != pxl_image_height(b) || pxl_image_format(a) != pxl_image_format(b)) return -1;
  int bpp = pxl_image_stride(a) / w;
  double sum = 0;
  for (int y = 0; y < h; y++) {
    const uint8_t *ra = pxl_image_pixels(a) + (size_t)y * pxl_image_stride(a);
    const uint8_t *rb = pxl_image_pixels(b) + (size_t)y * pxl_image_stride(b);
    for (int x = 0; x < w * bpp; x++) sum += ra[x] > rb[x] ? ra[x] - rb[x] : rb[x] - ra[x];
  }
  return sum / ((double)w * h * bpp);
}

/* What every previewed request obeys. */
static void check_previews(const char *what, const struct preview_probe *p, int interval_ms, int min_calls) {
  CHECKF(p->calls >= min_calls, "%s: %d previews, expected at least %d", what, p->calls, min_calls);
  CHECKF(p->off_thread == 0, "%s: %d previews off the queue's thread", what, p->off_thread);
  CHECKF(p->after_final == 0, "%s: %d previews after the final callback", what, p->after_final);
  CHECKF(p->after_cancel == 0, "%s: %d previews after pxl_cancel returned", what, p->after_cancel);
  CHECKF(p->wrong_token == 0, "%s: %d previews with another token", what, p->wrong_token);
  int n = p->calls < MAX_PREVIEWS ? p->calls : MAX_PREVIEWS;
  for (int i = 1; i < n && interval_ms > 0; i++)
    CHECKF(p->at[i] - p->at[i - 1] >= interval_ms - 1.0, "%s: previews %d and %d %.1f ms apart (interval %d ms)",
           what, i - 1, i, p->at[i] - p->at[i - 1], interval_ms);
  if (p->capture.status != PXL_OK || p->capture.image == NULL) return;
  /* In the request's size and format, each at least as close to the final as the one
   * before (more scans, more detail), the last closer than the first. */
  double first = -1, previous = 1e9, last = -1;
  int same_shape = 1, sharper = 1;
  printf("  preview %-12s %d previews, difference from the final:", what, p->calls);
  for (int i = 0; i < n; i++) {
    double d = mean_difference(p->image[i], p->capture.image);
    printf(" %.2f", d);
    if (d < 0) {
      same_shape = 0;
      continue;
    }
    if (d > previous + 1e-9) sharper = 0;
    if (first < 0) first = d;
    previous = last = d;
  }
  printf("\n");
  CHECKF(same_shape, "%s: a preview differs from the final image in size or format", what);
  CHECKF(sharper, "%s: a preview is further from the final image than the one before it", what);
  if (n >= 2) CHECKF(last < first, "%s: the last preview (%.2f) is no closer than the first (%.2f)", what, last, first);
}

/* Where the fault server's /gate pauses a progressive JPEG: 2 bytes into each start-of-scan
 * marker after the first, so that each piece completes one more scan (the marker after a
 * scan is what shows it complete). "at=C1,C2,..." into at; returns the number of cuts. */
int scan_cuts(const struct test_env *env, const char *name, char *at, size_t size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  FILE *f = fopen(path, "rb");
  long length = fixture_bytes(env, name);
  uint8_t *data = f && length > 0 ? malloc((size_t)length) : NULL;
  int ok = data && fread(data, 1, (size_t)length, f) == (size_t)length;
  if (f) fclose(f);
  int cuts = 0, sos = 0;
  size_t n = (size_t)snprintf(at, size, "at=");
  /* FF DA is a marker wherever it appears: entropy-coded data stuffs every FF with 00. */
  for (long i = 0; ok && i + 1 < length; i++) {
    if (data[i] != 0xFF || data[i + 1] != 0xDA || sos++ == 0) continue;
    n += (size_t)snprintf(at + n, size > n ? size - n : 0, "%s%ld", cuts ? "," : "", i + 2);
    cuts++;
  }
  free(data);
  CHECKF(ok && cuts >= 3, "%s: %d scans to pause between", name, cuts);
  return cuts;
}

/* Waits up to 20 ms for the queue and dispatches it; cancels to_cancel at its first
 * preview. */
static void pump(pxl_queue *queue, pxl_loader *loader, struct preview_probe *to_cancel) {
  pxl_queue_wait(queue, 20);
  pxl_queue_dispatch(queue, 0);
  if (!to_cancel->cancelled && to_cancel->calls >= 1) {
    CHECK_STATUS(pxl_cancel(loader, to_cancel->token), PXL_OK);
    to_cancel->cancelled = 1;
  }
}

/* The progressive JPEG comes through the fault server's /gate one scan at a time: the test
 * lets the next scan go only once both merged requests have had the preview of the last
 * (and, for the one with an interval, once that interval has passed since its last
 * preview ran). So every scan gets its preview, whatever the machine's load: none of it
 * rides on how a rate-limited server happens to split its bursts. */
void test_previews(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  enum { FIRST, MERGED, CANCELLED, BASELINE, N };
  struct preview_probe *probes = calloc(N, sizeof *probes);
  char at[512], path[640];
  int cuts = scan_cuts(env, FIXTURE_PROGRESSIVE_JPG, at, sizeof at);
  snprintf(path, sizeof path, "/gate/%s/file=" FIXTURE_PROGRESSIVE_JPG, at);
  struct test_url progressive = fault_url(env, 0, path, "preview");
  /* Its first scan, then held until the test goes away. */
  snprintf(path, sizeof path, "/gate/%.*s/file=" FIXTURE_PROGRESSIVE_JPG, (int)strcspn(at, ","), at);
  struct test_url cancelled = fault_url(env, 0, path, "preview-cancel");
  struct test_url baseline = test_url(env, "/slow/" FIXTURE_GRADIENT_JPG, "preview-baseline");
  const char *urls[N] = {progressive.url, progressive.url, cancelled.url, baseline.url};
  int intervals[N] = {100, 0, 0, 0};
  atomic_int done = 0;
  for (int i = 0; i < N; i++) {
    pxl_request request;
    request_for(&request, urls[i], 160, 120, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    request.preview = on_preview;
    request.preview_interval_ms = intervals[i];
    probes[i].host = pthread_self();
    probes[i].capture.seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &probes[i], &probes[i].token), PXL_OK);
  }
  double deadline = now_ms() + 20000.0 * env->slow_factor;
  for (int scan = 1; scan <= cuts && now_ms() < deadline; scan++) {
    while ((probes[FIRST].calls < scan || probes[MERGED].calls < scan) && now_ms() < deadline)
      pump(queue, loader, &probes[CANCELLED]);
    CHECKF(probes[MERGED].calls == scan && probes[FIRST].calls == scan,
           "after %d of %d scans: %d and %d previews (first, merged)", scan, cuts + 1, probes[FIRST].calls,
           probes[MERGED].calls);
    if (probes[FIRST].calls != scan || probes[MERGED].calls != scan) break;
    /* The next preview may run once the first request's interval has passed. */
    double due = probes[FIRST].at[scan - 1] + intervals[FIRST];
    while (now_ms() < due) pump(queue, loader, &probes[CANCELLED]);
    fault_release(env, progressive.uri);
  }
  while (atomic_load(&done) < N && now_ms() < deadline) pump(queue, loader, &probes[CANCELLED]);
  CHECKF(atomic_load(&done) == N, "%d of %d previewed loads finished", atomic_load(&done), N);
  drain_for(queue, 400); /* previews that should not come have their chance to */

  CHECK_STATUS(probes[FIRST].capture.status, PXL_OK);
  check_previews("first", &probes[FIRST], 100, cuts);
  CHECK_STATUS(probes[MERGED].capture.status, PXL_OK);
  check_previews("merged", &probes[MERGED], 0, cuts);
  /* One download for both. */
  CHECK_INT(fault_wait_requests(env, "uri", progressive.uri, 1, 0), 1);
  CHECK_STATUS(probes[CANCELLED].capture.status, PXL_E_CANCELLED);
  check_previews("cancelled", &probes[CANCELLED], 0, 1);
  CHECK_INT(probes[CANCELLED].calls, 1);
  CHECK_STATUS(probes[BASELINE].capture.status, PXL_OK);
  CHECK_INT(probes[BASELINE].calls, 0);

  /* A memory-cache hit has its image at once: no preview. */
  struct preview_probe hit = {0};
  hit.host = pthread_self();
  pxl_request request;
  request_for(&request, progressive.url, 160, 120, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.preview = on_preview;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &hit, &hit.token), PXL_OK);
  drain_until(env, queue, &hit.capture.calls, 1, 2000);
  CHECK_INT(hit.capture.source, PXL_SOURCE_MEMORY);
  CHECK_INT(hit.calls, 0);

  probe_free(&hit);
  for (int i = 0; i < N; i++) probe_free(&probes[i]);
  free(probes);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}

/* ---- previews decoded in a worker (issue 39) ---- */

/* The previews a loader delivers for www's `file` served by the fault server's /gate at
 * `at` (pieces cuts): after each piece, up to wait_ms for a preview of it, then the next.
 * Those delivered before the last piece was released are retained into out (at most cap);
 * their count, or -1 when the load failed. */
static int gated_previews(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *file,
                          const char *at, int pieces, const char *tag, int wait_ms, pxl_image **out, int cap) {
  char path[640];
  snprintf(path, sizeof path, "/gate/%s/file=%s", at, file);
  struct test_url u = fault_url(env, 0, path, tag);
  struct preview_probe *p = calloc(1, sizeof *p);
  p->host = pthread_self();
  pxl_request request;
  request_for(&request, u.url, 96, 72, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.preview = on_preview;
  request.preview_interval_ms = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, p, &p->token), PXL_OK);
  /* Previews of the pieces before the last: once the last is released, whether one more
   * preview (of the whole body, raced by the final decode) comes first is timing. */
  int settled = 0;
  for (int piece = 0; piece <= pieces; piece++) {
    int before = p->calls;
    double deadline = now_ms() + wait_ms * env->slow_factor;
    while (p->calls == before && atomic_load(&p->capture.calls) == 0 && now_ms() < deadline) {
      pxl_queue_wait(queue, 20);
      pxl_queue_dispatch(queue, 0);
    }
    if (piece == pieces - 1) settled = p->calls;
    if (piece < pieces) fault_release(env, u.uri);
  }
  drain_until(env, queue, &p->capture.calls, 1, 20000);
  int ok = atomic_load(&p->capture.calls) == 1 && p->capture.status == PXL_OK;
  CHECKF(ok, "%s (%s): %d %s", file, tag, p->capture.status, p->capture.message);
  int n = settled < cap ? settled : cap;
  for (int i = 0; i < n; i++) out[i] = pxl_image_retain(p->image[i]);
  probe_free(p);
  free(p);
  return ok ? n : -1;
}

/* The same file's previews through a loader decoding in the host and one decoding in
 * workers: as many, each with the same pixels, and at least `least`. */
static void same_previews(const struct test_env *env, const char *file, const char *at, int pieces,
                          int32_t isolation, int wait_ms, int least, const char *tag) {
  pxl_config config;
  pxl_config_init(&config);
  config.memory_cache_bytes = 0;
  config.isolation = PXL_ISOLATION_NONE;
  pxl_loader *none = new_loader(&config);
  config.isolation = isolation | PXL_ISOLATION_REQUIRED;
  pxl_loader *isolated = new_loader(&config);
  pxl_queue *queue = new_queue();
  pxl_image *in_host[MAX_PREVIEWS] = {0}, *in_worker[MAX_PREVIEWS] = {0};
  char tags[2][64];
  snprintf(tags[0], sizeof tags[0], "%s-none", tag);
  snprintf(tags[1], sizeof tags[1], "%s-isolated", tag);
  int host = gated_previews(env, none, queue, file, at, pieces, tags[0], wait_ms, in_host, MAX_PREVIEWS);
  int worker = gated_previews(env, isolated, queue, file, at, pieces, tags[1], wait_ms, in_worker, MAX_PREVIEWS);
  printf("  %s: %d previews in the host, %d isolated\n", file, host, worker);
  CHECKF(host >= least, "%s: %d previews in the host, expected at least %d", file, host, least);
  CHECKF(worker == host, "%s: %d previews isolated, %d in the host", file, worker, host);
  for (int i = 0; i < host && i < worker; i++) {
    double d = mean_difference(in_host[i], in_worker[i]);
    CHECKF(d == 0, "%s: preview %d differs isolated (mean difference %.3f, -1: size)", file, i, d);
  }
  for (int i = 0; i < MAX_PREVIEWS; i++) {
    if (in_host[i]) pxl_image_release(in_host[i]);
    if (in_worker[i]) pxl_image_release(in_worker[i]);
  }
  pxl_queue_free(queue);
  pxl_loader_free(isolated);
  pxl_loader_free(none);
}

/* Previews when the decoder runs in a worker: a progressive JPEG's scans under
 * PXL_ISOLATION_ALL (the host finds the scan boundaries, the worker decodes them) and a
 * progressive JPEG XL's passes under PXL_ISOLATION_MODULES (PXL_CODEC_PARTIAL in the
 * worker): the same previews, pixel for pixel, as a loader that decodes in the host. */
void test_previews_isolated(const struct test_env *env) {
  char at[512];
  int cuts = scan_cuts(env, FIXTURE_PROGRESSIVE_JPG, at, sizeof at);
  same_previews(env, FIXTURE_PROGRESSIVE_JPG, at, cuts, PXL_ISOLATION_ALL, 5000, cuts, "piso-jpeg");
  /* progressive.jxl (run.sh makes it from progressive.jpg: 480x360, cjxl -p): its passes,
   * cut in three. */
  long size = fixture_bytes(env, "progressive.jxl");
  CHECKF(size > 3000, "progressive.jxl: %ld bytes", size);
  snprintf(at, sizeof at, "at=%ld,%ld,%ld", size * 2 / 5, size * 3 / 5, size * 4 / 5);
  same_previews(env, "progressive.jxl", at, 3, PXL_ISOLATION_MODULES, 3000, 1, "piso-jxl");
}

/* ---- tables ---- */

struct table_probe {
  char url[512];          /* every row's image */
  int previews[4];        /* row_fn calls with result->preview 1, per row */
  int finals[4];
  int preview_after_final;
  int preview_without_flag; /* a second call for a row with preview 0 */
};

static int table_request(int64_t row, pxl_request *request, void *user_data) {
  struct table_probe *p = user_data;
  if (row < 0 || row >= 4) return 0;
  request->url = p->url;
  request->width = 96;
  request->height = 72;
  return 1;
}

static void table_row(int64_t row, const pxl_result *result, void *user_data) {
  struct table_probe *p = user_data;
  if (row < 0 || row >= 4) return;
  int preview = result->struct_size >= offsetof(pxl_result, preview) + sizeof(int32_t) && result->preview;
  if (preview) {
    if (p->finals[row]) p->preview_after_final++;
    p->previews[row]++;
    CHECKF(result->status == PXL_OK && result->image != NULL, "a preview row call without an image");
  } else {
    if (p->finals[row]) p->preview_without_flag++;
    p->finals[row]++;
  }
}

/* A table passes previews to its visible rows (on by default), flagged, before the row's
 * final call and never after it; previews 0 turns them off. */
void test_table_previews(const struct test_env *env) {
  for (int on = 1; on >= 0; on--) {
    pxl_loader *loader = new_loader(NULL);
    pxl_queue *queue = new_queue();
    struct table_probe probe = {0};
    struct test_url u = test_url(env, "/slow/" FIXTURE_PROGRESSIVE_JPG, on ? "table-preview" : "table-no-preview");
    snprintf(probe.url, sizeof probe.url, "%s", u.url);
    pxl_table_config config;
    pxl_table_config_init(&config);
    CHECK_INT(config.previews, 1);
    config.previews = on;
    config.prefetch_rows = 0;
    pxl_table *table = NULL;
    CHECK_STATUS(pxl_table_new(loader, queue, &config, 4, table_request, table_row, &probe, &table), PXL_OK);
    CHECK_STATUS(pxl_table_set_visible(table, 0, 1, 0), PXL_OK);
    double deadline = now_ms() + 20000.0 * env->slow_factor;
    while (probe.finals[0] == 0 && now_ms() < deadline) {
      pxl_queue_wait(queue, 50);
      pxl_queue_dispatch(queue, 0);
    }
    drain_for(queue, 300);
    CHECK_INT(probe.finals[0], 1);
    if (on) {
      CHECKF(probe.previews[0] >= 2, "table: %d previews for a visible progressive row", probe.previews[0]);
    } else {
      CHECK_INT(probe.previews[0], 0);
    }
    CHECK_INT(probe.preview_after_final, 0);
    CHECK_INT(probe.preview_without_flag, 0);
    printf("  table previews %s: %d previews, then the final image\n", on ? "on" : "off", probe.previews[0]);
    pxl_table_free(table);
    pxl_queue_free(queue);
    pxl_loader_free(loader);
  }
}

/* ---- the early end of a thumbnail's transfer ---- */

/* A 1/8-scale thumbnail of a progressive 4:4:4 JPEG needs only its DC scans: with no disk
 * cache the transfer ends once they are in (previews or not), the bytes not received are
 * counted, and the thumbnail is the one the whole file gives. */
void test_early_end(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url slow = test_url(env, "/slow/" FIXTURE_PROGRESSIVE444_JPG, "early-end");
  struct test_url whole = test_url(env, "/" FIXTURE_PROGRESSIVE444_JPG, "early-end-whole");
  /* The thumbnail asks for previews: they must not keep its transfer going. Both requests
   * pass a preview_probe (a capture first) as user_data. */
  struct preview_probe thumb_probe = {0};
  thumb_probe.host = pthread_self();
  struct capture *thumb_capture = &thumb_probe.capture;
  struct preview_probe ref = {0};
  ref.host = pthread_self();
  struct capture *reference = &ref.capture;
  pxl_request request;
  request_for(&request, slow.url, 48, 36, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.preview = on_preview;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &thumb_probe, NULL), PXL_OK);
  /* The reference: the whole file, its transfer kept going by a full-size request for the
   * same URL merged into it (previews would not keep it going). */
  request_for(&request, whole.url, 48, 36, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.preview = on_preview;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &ref, NULL), PXL_OK);
  struct capture full = {0};
  request_for(&request, whole.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &full, NULL), PXL_OK);
  drain_until(env, queue, &thumb_capture->calls, 1, 20000);
  drain_until(env, queue, &reference->calls, 1, 20000);
  drain_until(env, queue, &full.calls, 1, 20000);
  CHECK_STATUS(full.status, PXL_OK);
  capture_reset(&full);
  CHECK_STATUS(thumb_capture->status, PXL_OK);
  CHECK_STATUS(reference->status, PXL_OK);

  long size = fixture_bytes(env, FIXTURE_PROGRESSIVE444_JPG);
  log_wait_count(env, slow.uri, 1, 5000);
  long sent = log_bytes(env, slow.uri);
  pxl_stats stats;
  stats.struct_size = sizeof stats;
  CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
  printf("  early end: %ld of %ld bytes sent by the server; bytes_saved %llu\n", sent, size,
         (unsigned long long)stats.bytes_saved);
  /* What the client did not receive: the server may still have pushed more into socket
   * buffers than the client read (under ASan on a loaded machine it pushed all of it). */
  CHECKF(stats.bytes_saved >= (uint64_t)size / 4 && stats.bytes_saved < (uint64_t)size,
         "bytes_saved %llu of %ld: the transfer did not end at the first scans",
         (unsigned long long)stats.bytes_saved, size);
  CHECKF(sent > 0, "the server logged no bytes for the thumbnail's transfer");
  if (thumb_capture->image && reference->image) {
    CHECK_INT(pxl_image_width(thumb_capture->image), 48);
    CHECK_INT(pxl_image_height(thumb_capture->image), 36);
    CHECKF(mean_difference(thumb_capture->image, reference->image) == 0.0,
           "the early-ended thumbnail differs from the whole file's (%.3f)", mean_difference(thumb_capture->image, reference->image));
  }
  probe_free(&thumb_probe);
  probe_free(&ref);
  pxl_queue_free(queue);
  pxl_loader_free(loader);
}
