/*
 * test_faults.c: the network engine against a server that misbehaves on purpose
 * (Tests/faultserver/faultserver.py) and against nginx over TLS + HTTP/2.
 *
 * Every failure mode is checked three ways: the exact status (and HTTP status) the
 * callback reports; that it came within the configured timeouts (small ones, so the file
 * runs in seconds); and how many requests reached the server, which is what the retry,
 * redirect and coalescing rules are about. Each test puts "?run=ID&case=NAME" on its
 * URLs, so the server's counters are per test and per run.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

/* How long past a configured timeout a result may come: libcurl checks its low-speed
 * window once a second, the engine thread has to notice, the queue has to wake us. */
#define TIMEOUT_SLACK_MS 700

/* A config whose retries do not make a test wait: the rules are the same, the backoff is
 * short. Tests that measure backoff set their own. */
static void quick_config(pxl_config *config) {
  pxl_config_init(config);
  config->max_retries = 2;
  config->retry_base_delay_ms = 20;
  config->retry_max_delay_ms = 1000;
}

/* Starts request and waits up to limit_ms (scaled) for its callback, then cancels it if
 * it did not come, so that nothing is left running. Returns the elapsed milliseconds. */
static double run_load(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                       const pxl_request *request, struct capture *got, int limit_ms) {
  double start = now_ms();
  pxl_token token = 0;
  pxl_status s = pxl_load(loader, request, queue, capture_callback, got, &token);
  CHECKF(s == PXL_OK, "pxl_load(%s) returned %d (%s)", request->url, (int)s, pxl_status_string(s));
  if (s != PXL_OK) return 0;
  int in_time = drain_until(env, queue, &got->calls, 1, limit_ms);
  double took = now_ms() - start;
  CHECKF(in_time, "%s: no callback within %d ms", request->url, limit_ms * env->slow_factor);
  if (!in_time) {
    pxl_cancel(loader, token);
    drain_until(env, queue, &got->calls, 1, 5000);
  }
  return took;
}

/* Loads url (original size, RGBA8) and checks its status and HTTP status (want_http < 0:
 * any). Returns the elapsed milliseconds. */
static double expect(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                     const char *url, pxl_status want, int want_http, int limit_ms) {
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  double took = run_load(env, loader, queue, &request, &got, limit_ms);
  CHECKF(got.status == want, "%s: status %d (%s: %s), expected %d (%s)", url, (int)got.status,
         pxl_status_string(got.status), got.message, (int)want, pxl_status_string(want));
  if (want_http >= 0)
    CHECKF(got.http_status == want_http, "%s: http_status %d, expected %d (%s)", url,
           (int)got.http_status, want_http, got.message);
  capture_reset(&got);
  return took;
}

/* Loads url and checks that it decodes to width x height. */
static void expect_image(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                         const char *url, int width, int height) {
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  run_load(env, loader, queue, &request, &got, 10000);
  CHECKF(got.status == PXL_OK, "%s: status %d (%s: %s)", url, (int)got.status,
         pxl_status_string(got.status), got.message);
  CHECKF(pxl_image_width(got.image) == width && pxl_image_height(got.image) == height,
         "%s: %dx%d, expected %dx%d", url, pxl_image_width(got.image),
         pxl_image_height(got.image), width, height);
  CHECK_INT(got.source, PXL_SOURCE_NETWORK);
  capture_reset(&got);
}

/* The number of requests the server saw for u (all paths with u's query: redirects). */
static int requests_for(const struct test_env *env, const struct test_url *u) {
  struct fault_stats *stats = malloc(sizeof *stats);
  int n = stats && fault_stats(env, "query", fault_query(u), stats) ? stats->requests : -1;
  free(stats);
  return n;
}

#define CHECK_REQUESTS(env, u, want)                                                          \
  do {                                                                                        \
    int got_ = requests_for((env), (u));                                                      \
    CHECKF(got_ == (want), "%s: the server saw %d requests, expected %d", (u)->uri, got_,     \
           (want));                                                                           \
  } while (0)

/* ---- statuses and retries ---- */

void test_fault_http_statuses(const struct test_env *env) {
  /* The defaults the network rules start from (pixload.h, pxl_config). */
  pxl_config config;
  pxl_config_init(&config);
  CHECK_INT(config.stall_timeout_ms, 10000);
  CHECK_INT(config.max_redirects, 5);
  CHECK_INT(config.max_retries, 2);
  CHECK_INT(config.retry_base_delay_ms, 250);
  CHECK_INT(config.retry_max_delay_ms, 10000);
  CHECK(config.ca_file == NULL);
  CHECK(config.headers == NULL);
  pxl_request request;
  pxl_request_init(&request);
  CHECK(request.headers == NULL);
  CHECK(request.progress == NULL);
  CHECK_INT(request.progress_interval_ms, 100);

  quick_config(&config);
  config.max_retries = 3;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  static const struct {
    const char *path;
    int code;
    int requests; /* 4xx: one; 5xx and 429: 1 + max_retries */
  } cases[] = {
      {"/status/code=404", 404, 1}, {"/status/code=410", 410, 1}, {"/status/code=403", 403, 1},
      {"/status/code=400", 400, 1}, {"/status/code=500", 500, 4}, {"/status/code=502", 502, 4},
      {"/status/code=503", 503, 4}, {"/status/code=429", 429, 4},
  };
  struct test_url urls[sizeof cases / sizeof cases[0]];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "status-%d", cases[i].code);
    urls[i] = fault_url(env, 0, cases[i].path, name);
    double took = expect(env, loader, queue, urls[i].url, PXL_E_HTTP, cases[i].code, 5000);
    if (cases[i].requests > 1) {
      /* Three backoffs of 20, 40 and 80 ms, each at least halved by the jitter. */
      CHECKF(took >= 70.0, "HTTP %d: 3 retries after %.0f ms, less than the shortest backoffs "
             "allow (70 ms)", cases[i].code, took);
    }
  }
  sleep_ms(300); /* a retry that should not happen has had its chance (backoff 20-30 ms) */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK_REQUESTS(env, &urls[i], cases[i].requests);
  pxl_loader_free(loader);

  config.max_retries = 0; /* 0 disables retries */
  loader = new_loader(&config);
  struct test_url once = fault_url(env, 0, "/status/code=503", "status-503-no-retry");
  expect(env, loader, queue, once.url, PXL_E_HTTP, 503, 5000);
  sleep_ms(200);
  CHECK_REQUESTS(env, &once, 1);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_fault_retry_then_success(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* "Fail N times, then succeed": as many attempts as it takes, within max_retries. */
  struct test_url twice = fault_url(env, 0, "/fail/n=2/code=503", "fail-2x503");
  expect_image(env, loader, queue, twice.url, 640, 480);
  struct test_url limited = fault_url(env, 0, "/fail/n=1/code=429", "fail-1x429");
  expect_image(env, loader, queue, limited.url, 640, 480);
  /* A 4xx is final even when the next attempt would have worked. */
  struct test_url gone = fault_url(env, 0, "/fail/n=1/code=404", "fail-1x404");
  expect(env, loader, queue, gone.url, PXL_E_HTTP, 404, 5000);
  pxl_loader_free(loader);

  config.max_retries = 1; /* one retry is not enough for two failures */
  loader = new_loader(&config);
  struct test_url short_of = fault_url(env, 0, "/fail/n=2/code=500", "fail-2x500-1-retry");
  expect(env, loader, queue, short_of.url, PXL_E_HTTP, 500, 5000);
  sleep_ms(300);
  CHECK_REQUESTS(env, &twice, 3);
  CHECK_REQUESTS(env, &limited, 2);
  CHECK_REQUESTS(env, &gone, 1);
  CHECK_REQUESTS(env, &short_of, 2);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* The gap between the first two requests the server saw for u, or -1. */
static double retry_gap_ms(const struct test_env *env, const struct test_url *u) {
  struct fault_stats *stats = malloc(sizeof *stats);
  double gap = -1;
  if (stats && fault_stats(env, "query", fault_query(u), stats) && stats->count >= 2)
    gap = stats->record[1].at_ms - stats->record[0].at_ms;
  free(stats);
  return gap;
}

void test_fault_retry_after(const struct test_env *env) {
  /* A base delay of 10 ms: any wait near a second is the server's Retry-After. */
  pxl_config config;
  quick_config(&config);
  config.max_retries = 1;
  config.retry_base_delay_ms = 10;
  config.retry_max_delay_ms = 5000;
  pxl_loader *loader = new_loader(&config);
  config.retry_max_delay_ms = 300; /* the cap also bounds a server's Retry-After */
  pxl_loader *capped = new_loader(&config);
  pxl_queue *queue = new_queue();

  enum { N = 4 };
  struct test_url urls[N] = {
      fault_url(env, 0, "/status/code=429/retry_after=1", "retry-after-429"),
      fault_url(env, 0, "/fail/n=1/code=503/retry_after=1", "retry-after-503-then-ok"),
      fault_url(env, 0, "/status/code=503/retry_after_date=2", "retry-after-http-date"),
      fault_url(env, 0, "/status/code=503/retry_after=30", "retry-after-capped"),
  };
  pxl_loader *loaders[N] = {loader, loader, loader, capped};
  struct capture got[N] = {{0}};
  atomic_int done = 0;
  double start = now_ms();
  for (int i = 0; i < N; i++) { /* all at once: the waits overlap */
    pxl_request request;
    request_for(&request, urls[i].url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(loaders[i], &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECKF(drain_until(env, queue, &done, N, 6000), "%d of %d Retry-After loads within 6 s",
         atomic_load(&done), N);
  CHECK_STATUS(got[0].status, PXL_E_HTTP);
  CHECK_INT(got[0].http_status, 429);
  CHECK_STATUS(got[1].status, PXL_OK);
  CHECK_STATUS(got[2].status, PXL_E_HTTP);
  CHECK_INT(got[2].http_status, 503);
  CHECK_STATUS(got[3].status, PXL_E_HTTP);
  CHECK_INT(got[3].http_status, 503);

  double gaps[N];
  for (int i = 0; i < N; i++) {
    CHECK_REQUESTS(env, &urls[i], 2);
    gaps[i] = retry_gap_ms(env, &urls[i]);
  }
  printf("  retry gaps: Retry-After 1 s: %.0f / %.0f ms, HTTP date +2 s: %.0f ms, 30 s capped "
         "at 300 ms: %.0f ms (callbacks after %.0f ms)\n", gaps[0], gaps[1], gaps[2], gaps[3],
         now_ms() - start);
  CHECKF(gaps[0] >= 1000.0, "429 with Retry-After: 1 retried after %.0f ms", gaps[0]);
  CHECKF(gaps[1] >= 1000.0, "503 with Retry-After: 1 retried after %.0f ms", gaps[1]);
  /* The date has whole seconds: 2 s from now is at least 1 s from now. And at most 3 s:
   * libcurl subtracts time(NULL), glibc's coarse clock, which can still read the previous
   * second a few ms after the server's clock turned (seen: 3002 ms, 1 run in 7). */
  CHECKF(gaps[2] >= 1000.0 && gaps[2] <= 3500.0 * env->slow_factor,
         "503 with Retry-After: <date 2 s ahead> retried after %.0f ms", gaps[2]);
  CHECKF(gaps[3] >= 300.0 && gaps[3] <= 1000.0 * env->slow_factor,
         "Retry-After: 30 with retry_max_delay_ms 300: retried after %.0f ms", gaps[3]);
  CHECKF(got[0].at_ms - start <= 2500.0 * env->slow_factor, "Retry-After 1 s: result after %.0f ms",
         got[0].at_ms - start);
  for (int i = 0; i < N; i++) capture_reset(&got[i]);
  pxl_loader_free(loader);
  pxl_loader_free(capped);
  pxl_queue_free(queue);
}

void test_fault_cancel_during_backoff(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  config.max_retries = 3;
  config.retry_max_delay_ms = 5000;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* Retry-After: 1 makes the backoff exactly one second long. */
  struct test_url u = fault_url(env, 0, "/status/code=503/retry_after=1", "cancel-in-backoff");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got, &token), PXL_OK);
  CHECK_INT(fault_wait_requests(env, "query", fault_query(&u), 1, 3000), 1);
  sleep_ms(200); /* the 503 is in; the engine is waiting out the backoff */
  CHECK_INT(pxl_queue_pending(queue), 0);
  double cancelled_at = now_ms();
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &got.calls, 1, 2000));
  double took = got.at_ms - cancelled_at;
  CHECK_STATUS(got.status, PXL_E_CANCELLED);
  CHECKF(took <= 100.0 * env->slow_factor, "the callback came %.0f ms after a cancel during "
         "a backoff", took);
  sleep_ms(1200); /* past the end of the backoff: a retry would have reached the server */
  CHECK_REQUESTS(env, &u, 1);
  CHECK_INT(drain_for(queue, 50), 0);
  capture_reset(&got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_fault_broken_bodies(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* Both are transient: retried max_retries (2) times, then PXL_E_NETWORK. */
  struct test_url truncated = fault_url(env, 0, "/short/send=1000", "truncated");
  expect(env, loader, queue, truncated.url, PXL_E_NETWORK, 200, 5000);
  struct test_url reset = fault_url(env, 0, "/reset/send=2000", "reset-mid-body");
  expect(env, loader, queue, reset.url, PXL_E_NETWORK, 200, 5000);
  sleep_ms(300);
  CHECK_REQUESTS(env, &truncated, 3);
  CHECK_REQUESTS(env, &reset, 3);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- timeouts ---- */

void test_fault_timeouts(const struct test_env *env) {
  pxl_queue *queue = new_queue();
  pxl_config config;
  quick_config(&config);
  config.timeout_ms = 5000;
  config.stall_timeout_ms = 3000;
  pxl_loader *patient = new_loader(&config);   /* a slow first byte within the limits */
  quick_config(&config);
  config.timeout_ms = 500;
  config.stall_timeout_ms = 0;
  pxl_loader *total = new_loader(&config);     /* the whole-transfer timeout */
  quick_config(&config);
  config.timeout_ms = 700;
  config.stall_timeout_ms = 0;
  pxl_loader *total_silent = new_loader(&config);
  quick_config(&config);
  config.timeout_ms = 20000;
  config.stall_timeout_ms = 1000;
  pxl_loader *stall = new_loader(&config);     /* nothing at all for a second */

  enum { N = 4 };
  struct {
    pxl_loader *loader;
    struct test_url u;
    pxl_status want;
    double min_ms, max_ms;
  } cases[N] = {
      {patient, fault_url(env, 0, "/slow/delay=600", "slow-first-byte-ok"), PXL_OK, 600, 3000},
      {total, fault_url(env, 0, "/slow/delay=3000", "slow-first-byte-timeout"), PXL_E_TIMEOUT, 0,
       500 + TIMEOUT_SLACK_MS},
      {total_silent, fault_url(env, 0, "/never", "never-total-timeout"), PXL_E_TIMEOUT, 0,
       700 + TIMEOUT_SLACK_MS},
      {stall, fault_url(env, 0, "/never", "never-stall-timeout"), PXL_E_TIMEOUT, 0,
       1000 + 1000 + TIMEOUT_SLACK_MS}, /* libcurl counts whole seconds */
  };
  struct capture got[N] = {{0}};
  atomic_int done = 0;
  double start = now_ms();
  for (int i = 0; i < N; i++) {
    pxl_request request;
    request_for(&request, cases[i].u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(cases[i].loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECKF(drain_until(env, queue, &done, N, 8000), "%d of %d timeout cases ended within 8 s",
         atomic_load(&done), N);
  for (int i = 0; i < N; i++) {
    double took = got[i].calls ? got[i].at_ms - start : -1;
    CHECKF(got[i].status == cases[i].want, "%s: status %d (%s: %s), expected %d (%s)",
           cases[i].u.uri, (int)got[i].status, pxl_status_string(got[i].status), got[i].message,
           (int)cases[i].want, pxl_status_string(cases[i].want));
    CHECKF(took >= cases[i].min_ms && took <= cases[i].max_ms * env->slow_factor,
           "%s: result after %.0f ms, expected %.0f to %.0f ms", cases[i].u.uri, took,
           cases[i].min_ms, cases[i].max_ms);
    if (cases[i].want == PXL_E_TIMEOUT) CHECK_INT(got[i].http_status, 0);
    printf("  %-28s %-8s after %5.0f ms\n", strstr(cases[i].u.uri, "case=") + 5,
           pxl_status_string(got[i].status), took);
  }
  sleep_ms(300);
  /* A timeout is not among the transient failures (pixload.h, max_retries): one request. */
  for (int i = 0; i < N; i++) CHECK_REQUESTS(env, &cases[i].u, 1);
  for (int i = 0; i < N; i++) capture_reset(&got[i]);
  pxl_loader_free(patient);
  pxl_loader_free(total);
  pxl_loader_free(total_silent);
  pxl_loader_free(stall);
  pxl_queue_free(queue);
}

void test_fault_stalled_body(const struct test_env *env) {
  /* Headers and 4 KB of body, then silence: the stall timeout, not the 20 s total one,
   * must end it, about a second after the last byte. */
  pxl_config config;
  quick_config(&config);
  config.timeout_ms = 20000;
  config.stall_timeout_ms = 1000;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct test_url u = fault_url(env, 0, "/stall/after=4000/hold=15000", "stall-mid-body");
  /* Waits long enough to see when it really ends; the bound is checked below. */
  double took = expect(env, loader, queue, u.url, PXL_E_TIMEOUT, 200, 16000);
  printf("  stalled after 4000 bytes: ended after %.0f ms (stall_timeout_ms 1000)\n", took);
  CHECKF(took <= (1000 + 1000 + TIMEOUT_SLACK_MS) * env->slow_factor,
         "a body stalled mid-way with stall_timeout_ms 1000 ended after %.0f ms", took);
  /* The server saw the client go away while it held back the rest. */
  struct fault_stats *stats = malloc(sizeof *stats);
  double deadline = now_ms() + 1500;
  while (fault_stats(env, "query", fault_query(&u), stats) && stats->count >= 1 &&
         !stats->record[0].closed && now_ms() < deadline)
    sleep_ms(50);
  CHECK_INT(stats->requests, 1);
  CHECKF(stats->count >= 1 && stats->record[0].closed && !stats->record[0].complete,
         "the stalled response: closed by the client %d, complete %d", stats->record[0].closed,
         stats->record[0].complete);
  free(stats);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* A listening socket whose accept queue is full: the kernel drops further SYNs, so a
 * connect to it neither succeeds nor is refused. Returns the port; fds receives the
 * listener and the connections that fill it (close them all). */
static int full_backlog_port(int fds[8], int *count) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      listen(listener, 0) != 0 || getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
    perror("full_backlog_port");
    exit(1);
  }
  fds[0] = listener;
  *count = 1;
  /* Connect until one hangs: that one shows the queue is full. */
  while (*count < 8) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    fds[(*count)++] = fd;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) continue;
    if (errno != EINPROGRESS) break;
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 200) == 0) break; /* no SYN-ACK: full */
  }
  return ntohs(addr.sin_port);
}

void test_fault_connect_timeout(const struct test_env *env) {
  int fds[8], count = 0;
  int port = full_backlog_port(fds, &count);
  pxl_config config;
  quick_config(&config);
  config.connect_timeout_ms = 500;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/never-accepted.jpg", port);
  double took = expect(env, loader, queue, url, PXL_E_TIMEOUT, 0, 5000);
  printf("  connect timeout 500 ms: ended after %.0f ms\n", took);
  CHECKF(took >= 450.0 && took <= (500 + TIMEOUT_SLACK_MS) * env->slow_factor,
         "connect_timeout_ms 500 to a full accept queue ended after %.0f ms", took);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  for (int i = 0; i < count; i++) close(fds[i]);
}

void test_fault_dns(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  config.connect_timeout_ms = 5000;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* .invalid never resolves (RFC 6761). */
  expect(env, loader, queue, "http://pixload-test.invalid/x.jpg", PXL_E_DNS, 0, 6000);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_fault_refused(const struct test_env *env) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/x.jpg", env->refused_port);
  pxl_queue *queue = new_queue();
  pxl_config config;
  quick_config(&config);
  config.max_retries = 0;
  pxl_loader *loader = new_loader(&config);
  double once = expect(env, loader, queue, url, PXL_E_CONNECT, 0, 5000);
  CHECKF(once <= 250.0 * env->slow_factor, "a refused connection without retries took %.0f ms", once);
  pxl_loader_free(loader);
  /* Refused is transient: two retries, after 200 and 400 ms less at most half. */
  config.max_retries = 2;
  config.retry_base_delay_ms = 200;
  loader = new_loader(&config);
  double retried = expect(env, loader, queue, url, PXL_E_CONNECT, 0, 5000);
  printf("  refused: %.0f ms without retries, %.0f ms with 2 retries (base 200 ms)\n", once, retried);
  CHECKF(retried >= 300.0 && retried <= 900.0 + 500.0 * env->slow_factor,
         "a refused connection with 2 retries (base 200 ms) took %.0f ms, expected 300 to 1400",
         retried);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- redirects and TLS ---- */

void test_fault_redirects(const struct test_env *env) {
  pxl_config config;
  quick_config(&config); /* max_redirects: the default 5 */
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();

  struct test_url three = fault_url(env, 0, "/redirect/hops=3", "redirect-3");
  expect_image(env, loader, queue, three.url, 640, 480);
  struct test_url five = fault_url(env, 0, "/redirect/hops=5", "redirect-5");
  expect_image(env, loader, queue, five.url, 640, 480);
  static const char *const kinds[] = {"301", "303", "307", "308"};
  struct test_url kind_urls[4];
  for (int i = 0; i < 4; i++) {
    char path[64], name[32];
    snprintf(path, sizeof path, "/redirect/hops=1/code=%s", kinds[i]);
    snprintf(name, sizeof name, "redirect-%s", kinds[i]);
    kind_urls[i] = fault_url(env, 0, path, name);
    expect_image(env, loader, queue, kind_urls[i].url, 640, 480);
  }
  struct test_url six = fault_url(env, 0, "/redirect/hops=6", "redirect-6");
  expect(env, loader, queue, six.url, PXL_E_TOO_MANY_REDIRECTS, 302, 5000);
  struct test_url loop = fault_url(env, 0, "/loop/a", "redirect-loop");
  expect(env, loader, queue, loop.url, PXL_E_TOO_MANY_REDIRECTS, 302, 5000);
  struct test_url to_file = fault_url(env, 0, "/to-file", "redirect-to-file");
  expect(env, loader, queue, to_file.url, PXL_E_SCHEME_NOT_ALLOWED, 302, 5000);
  pxl_loader_free(loader);

  config.max_redirects = 0;
  loader = new_loader(&config);
  struct test_url none = fault_url(env, 0, "/redirect/hops=1", "redirect-max-0");
  expect(env, loader, queue, none.url, PXL_E_TOO_MANY_REDIRECTS, 302, 5000);
  pxl_loader_free(loader);

  /* Not even when file:// URLs are allowed: a redirect never leaves http(s). */
  quick_config(&config);
  config.allowed_schemes = PXL_SCHEME_HTTP | PXL_SCHEME_FILE;
  loader = new_loader(&config);
  struct test_url to_file2 = fault_url(env, 0, "/to-file", "redirect-to-file-allowed");
  expect(env, loader, queue, to_file2.url, PXL_E_SCHEME_NOT_ALLOWED, 302, 5000);
  pxl_loader_free(loader);

  sleep_ms(200);
  CHECK_REQUESTS(env, &three, 4);
  CHECK_REQUESTS(env, &five, 6);
  for (int i = 0; i < 4; i++) CHECK_REQUESTS(env, &kind_urls[i], 2);
  CHECK_REQUESTS(env, &six, 6); /* the first request and 5 redirects followed; not retried */
  int loop_requests = requests_for(env, &loop);
  CHECKF(loop_requests >= 2 && loop_requests <= 6, "a redirect loop made %d requests",
         loop_requests);
  CHECK_REQUESTS(env, &to_file, 1);
  CHECK_REQUESTS(env, &none, 1);
  CHECK_REQUESTS(env, &to_file2, 1);
  pxl_queue_free(queue);
}

void test_fault_tls(const struct test_env *env) {
  CHECKF(env->ca_file && env->other_ca_file, "no --ca-file / --other-ca-file given");
  if (!env->ca_file || !env->other_ca_file || !env->fault_tls_url) return;
  pxl_queue *queue = new_queue();
  struct fault_stats *stats = malloc(sizeof *stats);
  fault_stats(env, "query", "none", stats);
  int failures_before = stats->tls_handshake_failures;

  /* The server's certificate is signed by the test CA, which the system does not trust. */
  pxl_config config;
  quick_config(&config);
  pxl_loader *loader = new_loader(&config);
  struct test_url untrusted = fault_url(env, 1, "/image", "tls-system-cas");
  expect(env, loader, queue, untrusted.url, PXL_E_TLS, 0, 5000);
  pxl_loader_free(loader);
  config.ca_file = env->other_ca_file;
  loader = new_loader(&config);
  struct test_url other = fault_url(env, 1, "/image", "tls-other-ca");
  expect(env, loader, queue, other.url, PXL_E_TLS, 0, 5000);
  pxl_loader_free(loader);

  config.ca_file = env->ca_file;
  loader = new_loader(&config);
  struct test_url trusted = fault_url(env, 1, "/image", "tls-ca-file");
  expect_image(env, loader, queue, trusted.url, 640, 480);
  /* https -> https redirects are followed; https -> http and https -> file are not. */
  struct test_url hops = fault_url(env, 1, "/redirect/hops=2", "tls-redirect-https");
  expect_image(env, loader, queue, hops.url, 640, 480);
  struct test_url downgrade = fault_url(env, 1, "/to-http", "tls-downgrade");
  expect(env, loader, queue, downgrade.url, PXL_E_SCHEME_NOT_ALLOWED, 302, 5000);
  struct test_url to_file = fault_url(env, 1, "/to-file", "tls-to-file");
  expect(env, loader, queue, to_file.url, PXL_E_SCHEME_NOT_ALLOWED, 302, 5000);
  /* http -> https is an upgrade: followed. */
  struct test_url upgrade = fault_url(env, 0, "/to-https", "tls-upgrade");
  expect_image(env, loader, queue, upgrade.url, 640, 480);
  pxl_loader_free(loader);

  sleep_ms(200);
  CHECK_REQUESTS(env, &untrusted, 0);
  CHECK_REQUESTS(env, &other, 0);
  fault_stats(env, "query", "none", stats);
  CHECKF(stats->tls_handshake_failures - failures_before == 2,
         "%d failed TLS handshakes for 2 untrusted loads (a TLS failure is not retried)",
         stats->tls_handshake_failures - failures_before);
  CHECK_REQUESTS(env, &trusted, 1);
  CHECK_REQUESTS(env, &hops, 3);
  /* The downgrade's target was never asked for: the only request is the https one. */
  fault_stats(env, "query", fault_query(&downgrade), stats);
  CHECKF(stats->requests == 1 && stats->record[0].tls == 1,
         "https -> http redirect: %d requests (the first over TLS: %d)", stats->requests,
         stats->record[0].tls);
  CHECK_REQUESTS(env, &to_file, 1);
  fault_stats(env, "query", fault_query(&upgrade), stats);
  CHECKF(stats->requests == 2 && stats->record[0].tls == 0 && stats->record[1].tls == 1,
         "http -> https redirect: %d requests", stats->requests);
  free(stats);
  pxl_queue_free(queue);
}

/* ---- bodies ---- */

/* Waits until the server has seen the client close the response of u (or gives up). */
static void body_cut_short(const struct test_env *env, const struct test_url *u, long total) {
  struct fault_stats *stats = malloc(sizeof *stats);
  double deadline = now_ms() + 2000.0 * env->slow_factor;
  while (fault_stats(env, "query", fault_query(u), stats) && stats->count >= 1 &&
         !stats->record[0].closed && !stats->record[0].complete && now_ms() < deadline)
    sleep_ms(50);
  CHECKF(stats->requests == 1, "%s: %d requests (too large is final)", u->uri, stats->requests);
  CHECKF(stats->count >= 1 && stats->record[0].closed && !stats->record[0].complete &&
             stats->record[0].bytes < total,
         "%s: the server sent %ld of %ld bytes (complete %d, closed by the client %d)", u->uri,
         stats->record[0].bytes, total, stats->record[0].complete, stats->record[0].closed);
  printf("  %s: the server got %ld of %ld bytes out before the client hung up\n",
         strstr(u->uri, "case=") + 5, stats->record[0].bytes, total);
  free(stats);
}

void test_fault_body_limits(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  config.max_body_bytes = 100000;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* Chunked, no length: only counting while streaming can stop it. 64 MiB would take
   * the server seconds to push through loopback if the client kept reading. */
  struct test_url grow = fault_url(env, 0, "/grow/total=67108864", "chunked-over-limit");
  double took = expect(env, loader, queue, grow.url, PXL_E_BODY_TOO_LARGE, 200, 10000);
  CHECKF(took <= 2000.0 * env->slow_factor, "chunked body over the limit: %.0f ms", took);
  body_cut_short(env, &grow, 67108864L);
  /* A declared length over the limit: no need to read any of it. */
  struct test_url declared = fault_url(env, 0, "/length/declared=1073741824", "length-over-limit");
  took = expect(env, loader, queue, declared.url, PXL_E_BODY_TOO_LARGE, 200, 10000);
  CHECKF(took <= 2000.0 * env->slow_factor, "Content-Length over the limit: %.0f ms", took);
  body_cut_short(env, &declared, 1073741824L);
  /* Chunked and under the limit: fine. */
  struct test_url small = fault_url(env, 0, "/drip/rate=10000000/chunked=1", "chunked-under-limit");
  expect_image(env, loader, queue, small.url, 640, 480);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_fault_content_types(const struct test_env *env) {
  pxl_config config;
  quick_config(&config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  /* A 200 with an HTML error page: not an image, and not worth a retry. */
  struct test_url html = fault_url(env, 0, "/html", "html-200");
  expect(env, loader, queue, html.url, PXL_E_NOT_AN_IMAGE, 200, 5000);
  /* Images are told apart by their bytes, whatever Content-Type says. */
  struct test_url as_html = fault_url(env, 0, "/image/ct=html", "jpeg-as-html");
  expect_image(env, loader, queue, as_html.url, 640, 480);
  struct test_url png_as_jpeg = fault_url(env, 0, "/image/file=alpha.png/ct=jpeg", "png-as-jpeg");
  expect_image(env, loader, queue, png_as_jpeg.url, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H);
  struct test_url untyped = fault_url(env, 0, "/image/ct=none", "jpeg-untyped");
  expect_image(env, loader, queue, untyped.url, 640, 480);
  struct test_url octets = fault_url(env, 0, "/image/file=alpha.png/ct=octet", "png-as-octets");
  expect_image(env, loader, queue, octets.url, FIXTURE_ALPHA_W, FIXTURE_ALPHA_H);
  sleep_ms(200);
  CHECK_REQUESTS(env, &html, 1);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- sharing, limits, headers, progress ---- */

void test_fault_coalesced_50(const struct test_env *env) {
  enum { N = 50 };
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  /* The first byte comes after 400 ms: all 50 join the one transfer while it waits. */
  struct test_url u = fault_url(env, 0, "/slow/delay=400", "coalesced-50");
  struct capture *got = calloc(N, sizeof *got);
  atomic_int done = 0;
  for (int i = 0; i < N; i++) {
    pxl_request request;
    int side = (i % 3) * 50; /* three variants: 0x0, 50x50, 100x100 */
    request_for(&request, u.url, side, side, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECKF(drain_until(env, queue, &done, N, 10000), "%d of %d callbacks", atomic_load(&done), N);
  int ok = 0;
  for (int i = 0; i < N; i++) {
    ok += got[i].status == PXL_OK;
    capture_reset(&got[i]);
  }
  CHECK_INT(ok, N);
  sleep_ms(200);
  CHECK_REQUESTS(env, &u, 1);
  free(got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_fault_cache_key(const struct test_env *env) {
  enum { N = 20, PLAIN = 4 };
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  char key[64], prefix[160];
  snprintf(key, sizeof key, "pxl-test-avatar-%ld", env->run_id);
  /* Tokenised URLs of one image: they differ only in the token. */
  snprintf(prefix, sizeof prefix, "/slow/delay=300?run=%ld&case=cache-key&token=", env->run_id);
  char urls[N + 1][256];
  struct capture got[N] = {{0}};
  atomic_int done = 0;
  for (int i = 0; i <= N; i++)
    snprintf(urls[i], sizeof urls[i], "%s%s%08x", env->fault_url ? env->fault_url : "", prefix,
             (unsigned)(i * 2654435761u));
  for (int i = 0; i < N; i++) {
    pxl_request request;
    request_for(&request, urls[i], 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    request.cache_key = key;
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECKF(drain_until(env, queue, &done, N, 10000), "%d of %d callbacks", atomic_load(&done), N);
  for (int i = 0; i < N; i++) {
    CHECK_STATUS(got[i].status, PXL_OK);
    capture_reset(&got[i]);
  }
  /* Yet another token, after the fact: the memory cache has it under the key. */
  pxl_request request;
  request_for(&request, urls[N], 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
  request.cache_key = key;
  pxl_image *cached = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &cached), PXL_OK);
  pxl_image_release(cached);
  struct capture later = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &later), PXL_OK);
  CHECK_STATUS(later.status, PXL_OK);
  CHECK_INT(later.source, PXL_SOURCE_MEMORY);
  capture_reset(&later);

  /* Without the key, every token is its own image. */
  struct test_url plain[PLAIN];
  atomic_int plain_done = 0;
  struct capture plain_got[PLAIN] = {{0}};
  for (int i = 0; i < PLAIN; i++) {
    char name[32];
    snprintf(name, sizeof name, "no-cache-key&token=%d", i);
    plain[i] = fault_url(env, 0, "/slow/delay=300", name);
    request_for(&request, plain[i].url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    plain_got[i].seq = &plain_done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &plain_got[i], NULL), PXL_OK);
  }
  CHECK(drain_until(env, queue, &plain_done, PLAIN, 10000));
  for (int i = 0; i < PLAIN; i++) capture_reset(&plain_got[i]);
  sleep_ms(200);
  struct fault_stats *stats = malloc(sizeof *stats);
  fault_stats(env, "prefix", prefix, stats);
  CHECKF(stats->requests == 1, "%d tokenised URLs with one cache_key (and one more later): %d "
         "requests at the server", N + 1, stats->requests);
  for (int i = 0; i < PLAIN; i++) CHECK_REQUESTS(env, &plain[i], 1);
  free(stats);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* Loads n distinct slow URLs named case_name-I and returns the elapsed milliseconds. */
static double load_distinct(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                            const char *path, const char *case_name, int n, struct capture *got,
                            atomic_int *done) {
  double start = now_ms();
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s-%d", case_name, i);
    struct test_url u = fault_url(env, 0, path, name);
    pxl_request request;
    request_for(&request, u.url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    got[i].seq = done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  return start;
}

void test_fault_transfer_limits(const struct test_env *env) {
  /* Transfers at once, counted at the server as connections (HTTP/1.1: one transfer per
   * connection at a time) and as time (12 transfers of 250 ms, 3 at a time: 4 rounds). */
  enum { N_TOTAL = 12, N_HOST = 8 };
  pxl_config config;
  pxl_config_init(&config);
  config.max_concurrent_downloads = 3;
  pxl_loader *overall = new_loader(&config);
  pxl_config_init(&config);
  config.max_downloads_per_host = 2;
  pxl_loader *per_host = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct capture a[N_TOTAL] = {{0}}, b[N_HOST] = {{0}};
  atomic_int done_a = 0, done_b = 0;
  double start_a = load_distinct(env, overall, queue, "/slow/delay=250", "limit-total", N_TOTAL,
                                 a, &done_a);
  double start_b = load_distinct(env, per_host, queue, "/slow/delay=250", "limit-host", N_HOST,
                                 b, &done_b);
  CHECK(drain_until(env, queue, &done_a, N_TOTAL, 10000));
  double took_a = now_ms() - start_a;
  CHECK(drain_until(env, queue, &done_b, N_HOST, 10000));
  double took_b = now_ms() - start_b;
  for (int i = 0; i < N_TOTAL; i++) {
    CHECK_STATUS(a[i].status, PXL_OK);
    capture_reset(&a[i]);
  }
  for (int i = 0; i < N_HOST; i++) {
    CHECK_STATUS(b[i].status, PXL_OK);
    capture_reset(&b[i]);
  }
  char prefix[160];
  struct fault_stats *stats = malloc(sizeof *stats);
  snprintf(prefix, sizeof prefix, "/slow/delay=250?run=%ld&case=limit-total-", env->run_id);
  fault_stats(env, "prefix", prefix, stats);
  printf("  max_concurrent_downloads 3: %d requests over %d connections in %.0f ms\n",
         stats->requests, stats->connections, took_a);
  CHECK_INT(stats->requests, N_TOTAL);
  CHECKF(stats->connections >= 1 && stats->connections <= 3,
         "max_concurrent_downloads 3: %d connections", stats->connections);
  CHECKF(took_a >= 4 * 250.0, "12 transfers of 250 ms, 3 at a time, took %.0f ms", took_a);
  snprintf(prefix, sizeof prefix, "/slow/delay=250?run=%ld&case=limit-host-", env->run_id);
  fault_stats(env, "prefix", prefix, stats);
  printf("  max_downloads_per_host 2: %d requests over %d connections in %.0f ms\n",
         stats->requests, stats->connections, took_b);
  CHECK_INT(stats->requests, N_HOST);
  CHECKF(stats->connections >= 1 && stats->connections <= 2,
         "max_downloads_per_host 2: %d connections", stats->connections);
  CHECKF(took_b >= 4 * 250.0, "8 transfers of 250 ms, 2 at a time, took %.0f ms", took_b);
  free(stats);
  pxl_loader_free(overall);
  pxl_loader_free(per_host);
  pxl_queue_free(queue);
}

/* Checks that the request of u the server saw first had header name = want (NULL: that
 * it did not have the header). */
static void check_header(const struct test_env *env, const struct test_url *u, int index,
                         const char *name, const char *want) {
  struct fault_stats *stats = malloc(sizeof *stats);
  char value[512] = "";
  int present = fault_stats(env, "query", fault_query(u), stats) && stats->count > index &&
                fault_header(&stats->record[index], name, value, sizeof value);
  if (want)
    CHECKF(present && strcmp(value, want) == 0, "%s: header %s is \"%s\"%s, expected \"%s\"",
           u->uri, name, value, present ? "" : " (absent)", want);
  else
    CHECKF(!present, "%s: header %s: %s is there, expected none", u->uri, name, value);
  free(stats);
}

/* Loads request twice at once, with the first and then the second header lines, and
 * checks both succeed. */
static void load_with_two_header_sets(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                                      pxl_request *request, const char *const *first_headers,
                                      const char *const *second_headers) {
  struct capture first = {0}, second = {0};
  request->headers = first_headers;
  CHECK_STATUS(pxl_load(loader, request, queue, capture_callback, &first, NULL), PXL_OK);
  request->headers = second_headers;
  CHECK_STATUS(pxl_load(loader, request, queue, capture_callback, &second, NULL), PXL_OK);
  CHECK(drain_until(env, queue, &first.calls, 1, 5000));
  CHECK(drain_until(env, queue, &second.calls, 1, 5000));
  CHECK_STATUS(first.status, PXL_OK);
  CHECK_STATUS(second.status, PXL_OK);
  capture_reset(&first);
  capture_reset(&second);
}

void test_fault_headers(const struct test_env *env) {
  /* Writable copies: the library must have copied them before the call returned. */
  char loader_line[] = "X-Pxl-Loader: loader-1";
  char auth_line[] = "Authorization: Bearer s3cret-token";
  const char *loader_headers[] = {loader_line, auth_line, NULL};
  pxl_config config;
  quick_config(&config);
  config.headers = loader_headers;
  pxl_loader *loader = new_loader(&config);
  memset(loader_line, 'x', sizeof loader_line - 1);
  memset(auth_line, 'y', sizeof auth_line - 1);
  pxl_queue *queue = new_queue();

  char request_line[] = "X-Pxl-Request: request-A";
  const char *request_headers[] = {request_line, NULL};
  struct test_url a = fault_url(env, 0, "/echo", "headers-a");
  pxl_request request;
  request_for(&request, a.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.headers = request_headers;
  struct capture got = {0};
  pxl_token token = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got, &token), PXL_OK);
  memset(request_line, 'z', sizeof request_line - 1);
  CHECK(drain_until(env, queue, &got.calls, 1, 5000));
  CHECK_STATUS(got.status, PXL_OK);
  capture_reset(&got);
  check_header(env, &a, 0, "X-Pxl-Loader", "loader-1");
  check_header(env, &a, 0, "Authorization", "Bearer s3cret-token");
  check_header(env, &a, 0, "X-Pxl-Request", "request-A");
  char agent[64];
  snprintf(agent, sizeof agent, "pixload/%s", pxl_version());
  check_header(env, &a, 0, "User-Agent", agent);

  /* The next request has the loader's headers and not the previous request's. */
  struct test_url b = fault_url(env, 0, "/echo", "headers-b");
  expect_image(env, loader, queue, b.url, 640, 480);
  check_header(env, &b, 0, "X-Pxl-Loader", "loader-1");
  check_header(env, &b, 0, "X-Pxl-Request", NULL);

  /* Other per-request headers are other credentials: the same URL at the same time goes
   * out once per set of headers, each with its own (rule 5), and neither is answered
   * from the other's memory entry afterwards. */
  struct test_url apart = fault_url(env, 0, "/slow/delay=300", "headers-apart");
  const char *first_headers[] = {"X-Pxl-Request: first", NULL};
  const char *second_headers[] = {"X-Pxl-Request: second", NULL};
  request_for(&request, apart.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  load_with_two_header_sets(env, loader, queue, &request, first_headers, second_headers);
  CHECK_REQUESTS(env, &apart, 2);
  char value_a[64] = "", value_b[64] = "";
  struct fault_stats *seen = malloc(sizeof *seen);
  if (seen && fault_stats(env, "query", fault_query(&apart), seen) && seen->count == 2) {
    fault_header(&seen->record[0], "X-Pxl-Request", value_a, sizeof value_a);
    fault_header(&seen->record[1], "X-Pxl-Request", value_b, sizeof value_b);
  }
  free(seen);
  CHECKF((!strcmp(value_a, "first") && !strcmp(value_b, "second")) ||
             (!strcmp(value_a, "second") && !strcmp(value_b, "first")),
         "each transfer carries its own request's headers: \"%s\", \"%s\"", value_a, value_b);
  pxl_image *cached = NULL;
  request.headers = NULL;
  CHECK_STATUS(pxl_lookup(loader, &request, &cached), PXL_E_NOT_FOUND);
  const char *third_headers[] = {"X-Pxl-Request: third", NULL};
  request.headers = third_headers;
  CHECK_STATUS(pxl_lookup(loader, &request, &cached), PXL_E_NOT_FOUND);
  request.headers = second_headers;
  CHECK_STATUS(pxl_lookup(loader, &request, &cached), PXL_OK);
  pxl_image_release(cached);

  /* With one explicit cache key the caller says they are the same image: one transfer,
   * sent with the headers of the request that started it. */
  struct test_url shared = fault_url(env, 0, "/slow/delay=300", "headers-shared");
  request_for(&request, shared.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.cache_key = shared.uri;
  load_with_two_header_sets(env, loader, queue, &request, first_headers, second_headers);
  CHECK_REQUESTS(env, &shared, 1);
  check_header(env, &shared, 0, "X-Pxl-Request", "first");
  pxl_loader_free(loader);

  /* A user agent of the host's own. */
  quick_config(&config);
  char agent_copy[] = "pixload-tests/1.0 (faults)";
  config.user_agent = agent_copy;
  loader = new_loader(&config);
  memset(agent_copy, 'q', sizeof agent_copy - 1);
  struct test_url c = fault_url(env, 0, "/echo", "headers-agent");
  expect_image(env, loader, queue, c.url, 640, 480);
  check_header(env, &c, 0, "User-Agent", "pixload-tests/1.0 (faults)");
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* One request's progress calls. capture must stay first: capture_callback gets the same
 * user_data. */
struct progress_probe {
  struct capture capture;
  pthread_t host;
  int calls;
  int off_thread;   /* calls not on the host's (queue-draining) thread */
  int after_final;  /* calls after the final callback */
  int wrong_token;
  pxl_token token;
  double at[256];
  uint64_t received[256], expected[256];
};

static void on_progress(pxl_token token, uint64_t received, uint64_t expected, void *user_data) {
  struct progress_probe *p = user_data;
  if (!pthread_equal(pthread_self(), p->host)) p->off_thread++;
  if (atomic_load(&p->capture.calls) > 0) p->after_final++;
  if (p->token && token != p->token) p->wrong_token++;
  if (p->calls < 256) {
    p->at[p->calls] = now_ms();
    p->received[p->calls] = received;
    p->expected[p->calls] = expected;
  }
  p->calls++;
}

/* The checks every request's progress obeys; interval_ms 0 skips the spacing check. */
static void check_progress(const char *what, const struct progress_probe *p, int interval_ms,
                           long expected, int min_calls) {
  int n = p->calls < 256 ? p->calls : 256;
  CHECKF(p->calls >= min_calls, "%s: %d progress calls, expected at least %d", what, p->calls,
         min_calls);
  CHECKF(p->off_thread == 0, "%s: %d progress calls off the queue's thread", what, p->off_thread);
  CHECKF(p->after_final == 0, "%s: %d progress calls after the final callback", what,
         p->after_final);
  CHECKF(p->wrong_token == 0, "%s: %d progress calls with another token", what, p->wrong_token);
  double min_gap = 1e9;
  int monotonic = 1, bounded = 1, right_total = 1;
  for (int i = 0; i < n; i++) {
    if (i > 0 && p->at[i] - p->at[i - 1] < min_gap) min_gap = p->at[i] - p->at[i - 1];
    if (i > 0 && p->received[i] < p->received[i - 1]) monotonic = 0;
    if (p->expected[i] && p->received[i] > p->expected[i]) bounded = 0;
    if ((long)p->expected[i] != expected) right_total = 0;
  }
  CHECKF(monotonic, "%s: bytes received went backwards", what);
  CHECKF(bounded, "%s: more bytes received than expected", what);
  CHECKF(right_total, "%s: expected total is not %ld in every call (first: %llu)", what, expected,
         n ? (unsigned long long)p->expected[0] : 0ull);
  /* 1 ms of slack: two clocks read at slightly different moments. */
  if (interval_ms && n > 1)
    CHECKF(min_gap >= interval_ms - 1.0, "%s: two progress calls %.1f ms apart (interval %d ms)",
           what, min_gap, interval_ms);
  if (n && p->capture.calls)
    CHECKF(p->at[n - 1] <= p->capture.at_ms, "%s: a progress call after the final one", what);
  printf("  progress %-22s %2d calls, closest %5.1f ms apart, last %llu of %llu bytes\n", what,
         p->calls, n > 1 ? min_gap : 0.0, n ? (unsigned long long)p->received[n - 1] : 0ull,
         n ? (unsigned long long)p->expected[n - 1] : 0ull);
}

void test_fault_progress(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  long size = fixture_bytes(env, FIXTURE_MEDIUM_JPG); /* about 70 KB */
  /* All at once: each one drips its body out over a second or two. */
  enum { SIZED, CHUNKED, CANCELLED, SHARED_A, SHARED_B, N };
  struct {
    const char *path, *name;
    int interval_ms;
  } cases[N] = {
      {"/drip/rate=70000/piece=3500/file=medium.jpg", "progress-sized", 200},
      {"/drip/rate=70000/piece=3500/file=medium.jpg/chunked=1", "progress-chunked", 100},
      {"/drip/rate=35000/piece=3500/file=medium.jpg", "progress-cancelled", 100},
      {"/drip/rate=70000/piece=7000/file=medium.jpg", "progress-shared", 100},
      {"/drip/rate=70000/piece=7000/file=medium.jpg", "progress-shared", 100},
  };
  struct progress_probe *probes = calloc(N, sizeof *probes);
  struct test_url urls[N];
  atomic_int done = 0;
  for (int i = 0; i < N; i++) {
    urls[i] = fault_url(env, 0, cases[i].path, cases[i].name);
    pxl_request request;
    request_for(&request, urls[i].url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    request.progress = on_progress;
    request.progress_interval_ms = cases[i].interval_ms;
    probes[i].host = pthread_self();
    probes[i].capture.seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &probes[i], &probes[i].token),
                 PXL_OK);
  }
  /* Cancel one after its second progress call: its final callback is CANCELLED and no
   * progress may follow it. */
  double deadline = now_ms() + 10000.0 * env->slow_factor, cancelled_at = 0;
  while (atomic_load(&done) < N && now_ms() < deadline) {
    pxl_queue_wait(queue, 50);
    pxl_queue_dispatch(queue, 0);
    if (!cancelled_at && probes[CANCELLED].calls >= 2) {
      cancelled_at = now_ms();
      CHECK_STATUS(pxl_cancel(loader, probes[CANCELLED].token), PXL_OK);
    }
  }
  CHECKF(atomic_load(&done) == N, "%d of %d progress loads finished", atomic_load(&done), N);
  drain_for(queue, 400); /* progress that should not come has its chance to */

  CHECK_STATUS(probes[SIZED].capture.status, PXL_OK);
  check_progress("sized", &probes[SIZED], 200, size, 3);
  /* About a second of body at most one call per 200 ms: no more than 1 + 1000/200 calls,
   * give or take the first and last. */
  double span = probes[SIZED].capture.at_ms - (probes[SIZED].calls ? probes[SIZED].at[0] : 0);
  CHECKF(probes[SIZED].calls <= 2 + (int)(span / 200.0), "sized: %d progress calls in %.0f ms",
         probes[SIZED].calls, span);
  CHECK_STATUS(probes[CHUNKED].capture.status, PXL_OK);
  check_progress("chunked (no length)", &probes[CHUNKED], 100, 0, 3);
  CHECK_STATUS(probes[CANCELLED].capture.status, PXL_E_CANCELLED);
  check_progress("cancelled", &probes[CANCELLED], 100, size, 2);
  if (cancelled_at)
    CHECKF(probes[CANCELLED].capture.at_ms - cancelled_at <= 100.0 * env->slow_factor,
           "cancelled: the final callback came %.0f ms after the cancel",
           probes[CANCELLED].capture.at_ms - cancelled_at);
  CHECK_STATUS(probes[SHARED_A].capture.status, PXL_OK);
  CHECK_STATUS(probes[SHARED_B].capture.status, PXL_OK);
  check_progress("shared, first", &probes[SHARED_A], 100, size, 2);
  check_progress("shared, second", &probes[SHARED_B], 100, size, 2);
  CHECK_REQUESTS(env, &urls[SHARED_A], 1);
  for (int i = 0; i < N; i++) capture_reset(&probes[i].capture);
  free(probes);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* The bytes that came just before the server paused are reported during the pause, not
 * when more come: here 10 KB, 5 ms later 10 KB more (inside the engine's 20 ms throttle),
 * then nothing. A preview waits on that report for the scan those last bytes complete. */
void test_fault_progress_before_stall(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url url = fault_url(env, 0, "/stall/after=20000/split=10000/file=medium.jpg", "progress-stall");
  struct progress_probe *probe = calloc(1, sizeof *probe);
  probe->host = pthread_self();
  pxl_request request;
  request_for(&request, url.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.progress = on_progress;
  request.progress_interval_ms = 0;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, probe, &probe->token), PXL_OK);
  double deadline = now_ms() + 3000.0 * env->slow_factor;
  uint64_t received = 0;
  while (received < 20000 && now_ms() < deadline) {
    pxl_queue_wait(queue, 20);
    pxl_queue_dispatch(queue, 0);
    if (probe->calls > 0 && probe->calls <= 256) received = probe->received[probe->calls - 1];
  }
  CHECKF(received == 20000, "during the pause: %llu of the 20000 bytes sent reported (%d calls)",
         (unsigned long long)received, probe->calls);
  CHECK_STATUS(pxl_cancel(loader, probe->token), PXL_OK);
  drain_until(env, queue, &probe->capture.calls, 1, 2000);
  CHECK_STATUS(probe->capture.status, PXL_E_CANCELLED);
  capture_reset(&probe->capture);
  free(probe);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- nginx over TLS and HTTP/2 ---- */

struct tls_log_summary {
  int lines;
  int http2;
  int connections;   /* distinct $connection values */
  long first_connection;
};

/* Lines of the TLS access log whose $request_uri starts with prefix. */
static struct tls_log_summary tls_log_scan(const struct test_env *env, const char *prefix) {
  struct tls_log_summary s = {0, 0, 0, -1};
  long seen[512];
  FILE *f = fopen(env->tls_access_log, "r");
  if (!f) return s;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char uri[768], protocol[32];
    int status;
    long bytes, connection;
    if (sscanf(line, "%767s %d %ld %ld %31s", uri, &status, &bytes, &connection, protocol) != 5 ||
        strncmp(uri, prefix, strlen(prefix)) != 0)
      continue;
    s.lines++;
    s.http2 += strcmp(protocol, "HTTP/2.0") == 0;
    int known = 0;
    for (int i = 0; i < s.connections; i++) known |= seen[i] == connection;
    if (!known && s.connections < 512) seen[s.connections++] = connection;
  }
  fclose(f);
  if (s.connections) s.first_connection = seen[0];
  return s;
}

void test_tls_http2_nginx(const struct test_env *env) {
  CHECKF(env->tls_url && env->tls_access_log && env->ca_file,
         "no --tls-url / --tls-log / --ca-file given: run the tests through Tests/capi/run.sh");
  if (!env->tls_url || !env->tls_access_log || !env->ca_file) return;
  enum { N = 40 };
  pxl_config config;
  pxl_config_init(&config);
  config.ca_file = env->ca_file;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char prefix[128];
  snprintf(prefix, sizeof prefix, "/%s?run=%ld&case=h2-", FIXTURE_GRADIENT_JPG, env->run_id);
  struct capture *got = calloc(N, sizeof *got);
  atomic_int done = 0;
  for (int i = 0; i < N; i++) {
    char url[512];
    snprintf(url, sizeof url, "%s%s%d", env->tls_url, prefix, i);
    pxl_request request;
    request_for(&request, url, 64, 64, PXL_MODE_FILL, PXL_FORMAT_RGBA8);
    got[i].seq = &done;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &got[i], NULL), PXL_OK);
  }
  CHECKF(drain_until(env, queue, &done, N, 20000), "%d of %d https loads", atomic_load(&done), N);
  int ok = 0;
  for (int i = 0; i < N; i++) {
    if (got[i].status == PXL_OK) ok++;
    else if (ok == i) /* the first failure says why */
      CHECKF(0, "https load %d: %d (%s)", i, (int)got[i].status, got[i].message);
    capture_reset(&got[i]);
  }
  CHECK_INT(ok, N);
  struct tls_log_summary s = tls_log_scan(env, prefix);
  for (double until = now_ms() + 2000; s.lines < N && now_ms() < until; sleep_ms(20))
    s = tls_log_scan(env, prefix);
  printf("  %d https loads: %d log lines, %d over HTTP/2.0, %d connection(s)\n", N, s.lines,
         s.http2, s.connections);
  CHECK_INT(s.lines, N);
  CHECK_INT(s.http2, N);
  CHECKF(s.connections == 1, "%d images over HTTP/2 used %d connections, expected 1", N,
         s.connections);
  pxl_loader_free(loader);

  /* The same server without its CA: verification is always on. */
  loader = new_loader(NULL);
  char url[512];
  snprintf(url, sizeof url, "%s/%s?run=%ld&case=h2-untrusted", env->tls_url, FIXTURE_GRADIENT_JPG,
           env->run_id);
  expect(env, loader, queue, url, PXL_E_TLS, 0, 5000);
  char untrusted[128];
  snprintf(untrusted, sizeof untrusted, "/%s?run=%ld&case=h2-untrusted", FIXTURE_GRADIENT_JPG,
           env->run_id);
  sleep_ms(200);
  CHECK_INT(tls_log_scan(env, untrusted).lines, 0);
  free(got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}
