/*
 * tool_operate.c: one run of fetch or hash. Every URL is loaded through one loader and
 * one queue, all at once; this thread drains the queue (the host loop) until every URL
 * has called back, then the lines are printed in the order the URLs were given,
 * followed by the summary
 *
 *   N loaded, N failed, X.X images/s, Y.YYY ms CPU/image
 *
 * MS (a line's time) is from the start of the run (just before the first pxl_load) to
 * that URL's callback. images/s is loaded images per wall-clock second from the first
 * pxl_load to the last callback; CPU is user + system time of the whole process (the
 * library's network and decode threads included, from getrusage) over the same span,
 * divided by the number of URLs. Output files are written inside the callbacks, so with
 * --out or --out-dir both figures include PNG encoding; benchmarks use --quiet without
 * output.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tool_getparam.h"
#include "tool_help.h"
#include "tool_operate.h"
#include "tool_progress.h"
#include "tool_writeout.h"
#include "tool_writeout_json.h"
#include "tool_writepng.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

struct run {
  double start_ms;
  size_t finished;
  size_t failed; /* of those finished: not loaded, or not written */
  const char *out_file; /* --out */
  const char *out_dir;  /* --out-dir */
  int32_t hash_kind;    /* hash: a pxl_placeholder_kind */
};

static void finish_job(struct job *job, pxl_status status, const char *message) {
  job->finished = 1;
  job->status = status;
  job->ms = now_ms() - job->run->start_ms;
  job->message = message && message[0] ? strdup(message) : NULL;
  job->run->finished++;
  if (status != PXL_OK) job->run->failed++;
}

static void on_loaded(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct job *job = user_data;
  finish_job(job, result->status, result->message);
  job->http_status = result->http_status;
  job->source = result->source;
  job->metrics.struct_size = sizeof job->metrics;
  job->has_metrics = pxl_result_metrics(result, &job->metrics) == PXL_OK;
  const pxl_image *image = result->image; /* borrowed: used only inside this callback */
  if (!image) return;
  job->width = pxl_image_width(image);
  job->height = pxl_image_height(image);
  job->incomplete = result->struct_size >= offsetof(pxl_result, incomplete) + sizeof result->incomplete &&
                    result->incomplete;

  struct run *run = job->run;
  if (run->hash_kind) {
    pxl_status s = pxl_placeholder_encode(run->hash_kind, image, 4, 3, job->hash, sizeof job->hash,
                                          &job->hash_length);
    if (s != PXL_OK) {
      progress_clear();
      fprintf(stderr, "pixload: cannot encode %s: %s\n", job->url, pxl_status_string(s));
      job->write_failed = 1;
      run->failed++;
    }
    return;
  }
  if (write_output(run->out_file, run->out_dir, job->index, job->url, image) != 0) {
    job->write_failed = 1;
    run->failed++;
  }
}

int operate(int argc, char **argv, int hash) {
  struct fetch_options o = {0};
  int rc = parse_fetch_options(argc, argv, &o);
  if (rc) goto out_options;
  if (o.frames) {
    rc = usage_error("%s", "--frames is play's option");
    goto out_options;
  }
  if (!hash && o.hash_kind) {
    rc = usage_error("%s", "--blurhash and --thumbhash are hash's options");
    goto out_options;
  }
  if (hash && (!o.hash_kind || o.out_file || o.out_dir || o.metrics)) {
    rc = usage_error("%s", "hash wants --blurhash or --thumbhash, and no --out, --out-dir or --metrics");
    goto out_options;
  }
  /* The encoders read at most 100x100: a smaller decode costs less (a ThumbHash keeps the
   * aspect ratio of what it reads). */
  if (hash && o.request.width == 0 && o.request.height == 0) o.request.width = o.request.height = 100;
  fetch_memory_cache_default(&o);

  if (o.out_dir) {
    const char *error = make_dirs(o.out_dir);
    if (error) {
      fprintf(stderr, "pixload: cannot create %s: %s\n", o.out_dir, error);
      rc = 1;
      goto out_options;
    }
  }

  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  pxl_status s = pxl_loader_new(&o.config, &loader);
  if (s != PXL_OK) {
    fprintf(stderr, "pixload: cannot create a loader: %s\n", pxl_status_string(s));
    rc = 1;
    goto out_options;
  }
  if ((s = pxl_queue_new(&queue)) != PXL_OK) {
    fprintf(stderr, "pixload: cannot create a queue: %s\n", pxl_status_string(s));
    pxl_loader_free(loader);
    rc = 1;
    goto out_options;
  }

  struct job *jobs = calloc(o.url_count, sizeof *jobs);
  if (!jobs) {
    fprintf(stderr, "pixload: out of memory\n");
    rc = 1;
    goto out_handles;
  }
  struct run run = {0, 0, 0, o.out_file, o.out_dir, o.hash_kind};
  progress_start(o.url_count, o.quiet);
  double cpu_start = cpu_ms();
  run.start_ms = now_ms();
  for (size_t i = 0; i < o.url_count; i++) {
    jobs[i] = (struct job){.run = &run, .index = i, .url = o.urls[i]};
    pxl_request request = o.request;
    request.url = o.urls[i];
    s = pxl_load(loader, &request, queue, on_loaded, &jobs[i], NULL);
    /* A refused load never calls back (rule 1): it is finished now. */
    if (s != PXL_OK) finish_job(&jobs[i], s, pxl_status_string(s));
  }
  /* The host loop: sleep until completions are pending, then run their callbacks here.
   * The timeout only bounds each sleep; the loader's own timeouts end every request. */
  double shown_ms = 0;
  while (run.finished < o.url_count) {
    pxl_queue_wait(queue, 1000);
    pxl_queue_dispatch(queue, 0);
    /* At most ten redraws a second: a terminal is slower than a warm cache. */
    if (progress_enabled() && now_ms() - shown_ms >= 100) {
      progress_update(run.finished, run.failed, o.url_count, 0);
      shown_ms = now_ms();
    }
  }
  progress_update(run.finished, run.failed, o.url_count, 1);
  double wall_ms = 0, cpu = cpu_ms() - cpu_start;
  size_t loaded = 0;
  for (size_t i = 0; i < o.url_count; i++) {
    if (jobs[i].ms > wall_ms) wall_ms = jobs[i].ms;
    if (jobs[i].status == PXL_OK && !jobs[i].write_failed) loaded++;
    if (hash) {
      if (jobs[i].status == PXL_OK && !jobs[i].write_failed) print_hash(&jobs[i], o.hash_kind);
      else if (jobs[i].status != PXL_OK)
        fprintf(stderr, "pixload: %s: %s\n", jobs[i].url,
                jobs[i].message ? jobs[i].message : pxl_status_string(jobs[i].status));
    } else if (o.metrics) {
      print_metrics(&jobs[i]);
    } else if (!o.quiet) {
      print_job(&jobs[i]);
    }
  }
  if (!hash) fprintf(o.metrics ? stderr : stdout, "%zu loaded, %zu failed, %.1f images/s, %.3f ms CPU/image\n", loaded,
         o.url_count - loaded, wall_ms > 0 ? (double)loaded * 1000.0 / wall_ms : 0.0,
         cpu / (double)o.url_count);
  if (o.metrics)
    fprintf(stderr, "memory cache: %d images, %llu bytes\n", (int)pxl_memory_cache_count(loader),
            (unsigned long long)pxl_memory_cache_bytes(loader));
  rc = loaded == o.url_count ? 0 : 1;
  for (size_t i = 0; i < o.url_count; i++) free(jobs[i].message);
  free(jobs);
out_handles:
  pxl_loader_free(loader);
  pxl_queue_free(queue);
out_options:
  fetch_options_free(&o);
  return rc;
}
