/*
 * test_errors.c: every way a load can fail, and rule 1: a call that fails never
 * invokes its callback.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

/* Loads url and checks that it fails with want (and HTTP status want_http). */
static void expect_failure(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                           const char *url, pxl_status want, int32_t want_http,
                           int timeout_ms) {
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  pxl_token token = 0;
  pxl_status s = pxl_load(loader, &request, queue, capture_callback, &got, &token);
  CHECK_STATUS(s, PXL_OK);
  if (s != PXL_OK) return;
  CHECKF(drain_until(env, queue, &got.calls, 1, timeout_ms), "no callback for %s", url);
  CHECKF(got.status == want, "%s: status %d (%s: %s), expected %d (%s)", url, (int)got.status,
         pxl_status_string(got.status), got.message, (int)want, pxl_status_string(want));
  CHECKF(got.http_status == want_http, "%s: http_status %d, expected %d", url,
         (int)got.http_status, (int)want_http);
  CHECK(got.image == NULL);
  CHECK_INT(got.source, PXL_SOURCE_NONE);
  capture_reset(&got);
}

/* Calls pxl_load expecting it to refuse with want; the callback must never run. */
static void expect_refused(pxl_loader *loader, const pxl_request *request, pxl_queue *queue,
                           pxl_callback callback, struct capture *never, pxl_status want,
                           const char *what) {
  pxl_token token = 0;
  pxl_status s = pxl_load(loader, request, queue, callback, never, &token);
  CHECKF(s == want, "pxl_load with %s returned %d (%s), expected %d (%s)", what, (int)s,
         pxl_status_string(s), (int)want, pxl_status_string(want));
}

void test_http_errors(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url missing = test_url(env, "/no-such-image.jpg", "404");
  expect_failure(env, loader, queue, missing.url, PXL_E_HTTP, 404, 10000);
  /* 4xx is never retried. */
  CHECK_INT(log_wait_count(env, missing.uri, 1, 2000), 1);
  sleep_ms(300);
  CHECK_INT(log_count(env, missing.uri), 1);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_connection_refused(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/x.jpg", env->refused_port);
  /* Connection errors are retried with backoff, so allow time for the retries. */
  expect_failure(env, loader, queue, url, PXL_E_CONNECT, 0, 60000);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_bad_bodies(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url html = test_url(env, "/" FIXTURE_NOT_AN_IMAGE, "html");
  expect_failure(env, loader, queue, html.url, PXL_E_NOT_AN_IMAGE, 200, 10000);
  struct test_url corrupt = test_url(env, "/" FIXTURE_CORRUPT_JPG, "corrupt");
  expect_failure(env, loader, queue, corrupt.url, PXL_E_CORRUPT_IMAGE, 200, 10000);
  /* A failure is not cached: asking again asks the server again. */
  expect_failure(env, loader, queue, corrupt.url, PXL_E_CORRUPT_IMAGE, 200, 10000);
  CHECK_INT(log_wait_count(env, corrupt.uri, 2, 2000), 2);
  CHECK_INT(pxl_memory_cache_count(loader), 0);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_limits(const struct test_env *env) {
  pxl_config config;
  pxl_config_init(&config);
  config.max_body_bytes = 10000; /* the gradient is about 17 KB */
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct test_url big = test_url(env, "/" FIXTURE_GRADIENT_JPG, "body-limit");
  expect_failure(env, loader, queue, big.url, PXL_E_BODY_TOO_LARGE, 200, 10000);
  pxl_loader_free(loader);

  pxl_config_init(&config);
  config.max_pixels = 640 * 480 - 1;
  loader = new_loader(&config);
  struct test_url many = test_url(env, "/" FIXTURE_GRADIENT_JPG, "pixel-limit");
  expect_failure(env, loader, queue, many.url, PXL_E_TOO_MANY_PIXELS, 200, 10000);
  /* The limit is on the source, not the thumbnail asked for. */
  pxl_request request;
  request_for(&request, many.url, 64, 64, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECK_STATUS(got.status, PXL_E_TOO_MANY_PIXELS);
  capture_reset(&got);
  pxl_loader_free(loader);

  pxl_config_init(&config);
  config.max_pixels = 640 * 480; /* the limit itself is allowed */
  loader = new_loader(&config);
  request.width = request.height = 0;
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECK_STATUS(got.status, PXL_OK);
  capture_reset(&got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_schemes_and_file_urls(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  char url[1024];
  file_url(env, FIXTURE_GRADIENT_JPG, url, sizeof url);
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture never = {0};
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_SCHEME_NOT_ALLOWED,
                 "file:// by default");
  request.url = "ftp://127.0.0.1/x.jpg";
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_SCHEME_NOT_ALLOWED,
                 "ftp://");
  request.url = "FILE:///etc/hostname"; /* schemes are case-insensitive (RFC 3986) */
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_SCHEME_NOT_ALLOWED,
                 "FILE://");
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&never.calls), 0);
  CHECK_INT(pxl_queue_pending(queue), 0);
  pxl_loader_free(loader);

  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes = PXL_SCHEME_FILE;
  loader = new_loader(&config);
  request.url = url;
  struct capture got = {0};
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &got), PXL_OK);
  CHECKF(got.status == PXL_OK, "file:// load: %d %s", (int)got.status, got.message);
  CHECK_INT(got.source, PXL_SOURCE_FILE);
  CHECK_INT(got.http_status, 0);
  if (got.image) {
    CHECK_INT(pxl_image_width(got.image), 640);
    CHECK_INT(pxl_image_height(got.image), 480);
  }
  capture_reset(&got);

  char missing[1024];
  file_url(env, "no-such-file.jpg", missing, sizeof missing);
  expect_failure(env, loader, queue, missing, PXL_E_IO, 0, 10000);

  /* The allow-list is the whole list: with only file://, http:// is refused. */
  struct test_url http = test_url(env, "/" FIXTURE_GRADIENT_JPG, "http-not-allowed");
  request.url = http.url;
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_SCHEME_NOT_ALLOWED,
                 "http:// when only file:// is allowed");
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&never.calls), 0);
  CHECK_INT(log_count(env, http.uri), 0);
  capture_reset(&never);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_malformed_urls(const struct test_env *env) {
  (void)env;
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct capture never = {0};
  pxl_request request;
  request_for(&request, "http://[::1/x.jpg", 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_MALFORMED_URL,
                 "an unclosed IPv6 bracket");
  request.url = "http://";
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_MALFORMED_URL,
                 "no host");
  request.url = "http://127.0.0.1:99999/x.jpg";
  expect_refused(loader, &request, queue, capture_callback, &never, PXL_E_MALFORMED_URL,
                 "port 99999");
  /* No scheme at all, or nothing: refused, whichever status explains it. */
  static const char *const junk[] = {"", "not a url", "/relative/path.jpg"};
  for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
    request.url = junk[i];
    pxl_status s = pxl_load(loader, &request, queue, capture_callback, &never, NULL);
    CHECKF(s == PXL_E_MALFORMED_URL || s == PXL_E_SCHEME_NOT_ALLOWED ||
               s == PXL_E_INVALID_ARGUMENT,
           "pxl_load(\"%s\") returned %d (%s)", junk[i], (int)s, pxl_status_string(s));
  }
  drain_for(queue, 200);
  CHECK_INT(atomic_load(&never.calls), 0);
  capture_reset(&never);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_invalid_arguments(const struct test_env *env) {
  pxl_loader *loader = new_loader(NULL);
  pxl_queue *queue = new_queue();
  struct test_url u = test_url(env, "/" FIXTURE_GRADIENT_JPG, "invalid");
  struct capture never = {0};
  pxl_request good;
  request_for(&good, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  pxl_request r;

  expect_refused(NULL, &good, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "NULL loader");
  expect_refused(loader, NULL, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "NULL request");
  expect_refused(loader, &good, NULL, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "NULL queue");
  expect_refused(loader, &good, queue, NULL, &never, PXL_E_INVALID_ARGUMENT, "NULL callback");
  r = good;
  r.url = NULL;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "NULL url");
  r = good;
  r.struct_size = 0;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "struct_size 0");
  r = good;
  r.struct_size = 8;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "struct_size 8");
  r = good;
  r.width = -1;
  r.height = 100;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "width -1");
  /* A 0 side is "unconstrained" (pxl_request's comment); a negative one is an error. */
  r = good;
  r.width = 150;
  r.height = -5;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "150x-5");
  r = good;
  r.mode = 7;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "mode 7");
  r = good;
  r.format = 5;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "format 5");
  r = good;
  r.format = -1;
  expect_refused(loader, &r, queue, capture_callback, &never, PXL_E_INVALID_ARGUMENT, "format -1");

  /* None of those may have reached the server or the queue. */
  drain_for(queue, 300);
  CHECK_INT(atomic_load(&never.calls), 0);
  CHECK_INT(log_count(env, u.uri), 0);
  capture_reset(&never); /* if a callback came anyway, drop what it retained */

  /* Constructors. */
  CHECK_STATUS(pxl_queue_new(NULL), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_loader_new(NULL, NULL), PXL_E_INVALID_ARGUMENT);
  pxl_config config;
  pxl_config_init(&config);
  config.struct_size = 0;
  pxl_loader *bad = NULL;
  CHECK_STATUS(pxl_loader_new(&config, &bad), PXL_E_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  pxl_config_init(&config);
  config.max_concurrent_downloads = -1;
  bad = NULL;
  CHECK_STATUS(pxl_loader_new(&config, &bad), PXL_E_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  pxl_loader_free(bad);

  /* Other calls on bad handles fail rather than crash. The header names no status for a
   * NULL loader in pxl_cancel and pxl_set_priority; anything but PXL_OK will do. */
  pxl_image *image = (pxl_image *)&config;
  CHECK(pxl_lookup(NULL, &good, &image) != PXL_OK);
  CHECK(pxl_lookup(loader, NULL, &image) != PXL_OK);
  CHECK(pxl_lookup(loader, &good, NULL) != PXL_OK);
  CHECK(pxl_cancel(NULL, 1) != PXL_OK);
  CHECK(pxl_set_priority(NULL, 1, 0) != PXL_OK);
  CHECK_STATUS(pxl_cancel(loader, 0), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_cancel(loader, 0xdeadbeefull), PXL_E_NOT_FOUND);
  CHECK_STATUS(pxl_set_priority(loader, 0xdeadbeefull, 5), PXL_E_NOT_FOUND);

  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* pxl_loader_new checks that libcurl can set every option the safety rules rely on
 * (scheme allow-lists, limits, TLS verification, the CA file): this machine's libcurl
 * can, with every scheme set, none, and a CA file; PXL_E_UNSUPPORTED has its text. */
void test_loader_new_probes_libcurl(const struct test_env *env) {
  static const uint32_t schemes[] = {PXL_SCHEME_HTTP | PXL_SCHEME_HTTPS | PXL_SCHEME_FILE, 0, PXL_SCHEME_FILE};
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    pxl_config config;
    pxl_config_init(&config);
    config.allowed_schemes = schemes[i];
    config.ca_file = env->ca_file;
    pxl_loader *loader = NULL;
    CHECK_STATUS(pxl_loader_new(&config, &loader), PXL_OK);
    CHECK(loader != NULL);
    pxl_loader_free(loader);
  }
  CHECK(strcmp(pxl_status_string(PXL_E_UNSUPPORTED), "a library the loader needs lacks a required feature") == 0);
}
