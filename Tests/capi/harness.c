/*
 * harness.c: the test runner and the helpers declared in harness.h.
 *
 *   capi_tests BASE_URL ACCESS_LOG FIXTURE_DIR [TEST_NAME...]
 *
 * With TEST_NAMEs only those tests run. PXL_TEST_SLOW_FACTOR=N multiplies every
 * deadline (run.sh sets it under valgrind).
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The only mutable globals: the tally (atomic: a check may run on a helper thread of a
 * test) and the running test's name for failure messages. */
static atomic_int g_passed;
static atomic_int g_failed;
static const char *g_current_test = "";

void check_at(const char *file, int line, int ok, const char *fmt, ...) {
  if (ok) {
    atomic_fetch_add(&g_passed, 1);
    return;
  }
  atomic_fetch_add(&g_failed, 1);
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL %s (%s:%d): %s\n", g_current_test, file, line, text);
}

void check_status_at(const char *file, int line, const char *expr, pxl_status got,
                     pxl_status want) {
  check_at(file, line, got == want, "%s is %d (%s), expected %d (%s)", expr, (int)got,
           pxl_status_string(got), (int)want, pxl_status_string(want));
}

void check_int_at(const char *file, int line, const char *expr, long long got, long long want) {
  check_at(file, line, got == want, "%s is %lld, expected %lld", expr, got, want);
}

double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

struct test_url test_url(const struct test_env *env, const char *path, const char *case_name) {
  struct test_url u;
  snprintf(u.uri, sizeof u.uri, "%s?run=%ld&case=%s", path, env->run_id, case_name);
  snprintf(u.url, sizeof u.url, "%s%s", env->base_url, u.uri);
  return u;
}

void file_url(const struct test_env *env, const char *name, char *out, size_t size) {
  snprintf(out, size, "file://%s/%s", env->fixture_dir, name);
}

/* Calls visit(line_index, uri, bytes, connection, context) for each log line; stops
 * when visit returns nonzero. */
static void log_scan(const struct test_env *env,
                     int (*visit)(int index, const char *uri, long bytes, long connection,
                                  void *context),
                     void *context) {
  FILE *f = fopen(env->access_log, "r");
  if (!f) return;
  char line[1024];
  int index = 0;
  while (fgets(line, sizeof line, f)) {
    char uri[768];
    int status;
    long bytes, connection;
    if (sscanf(line, "%767s %d %ld %ld", uri, &status, &bytes, &connection) != 4) continue;
    if (visit(index++, uri, bytes, connection, context)) break;
  }
  fclose(f);
}

struct log_query {
  const char *uri;
  int count;
  int first;
  long first_bytes;
  long first_connection;
};

static int log_visit(int index, const char *uri, long bytes, long connection, void *context) {
  struct log_query *q = context;
  if (strcmp(uri, q->uri) != 0) return 0;
  if (q->count++ == 0) {
    q->first = index;
    q->first_bytes = bytes;
    q->first_connection = connection;
  }
  return 0;
}

static struct log_query log_query(const struct test_env *env, const char *uri) {
  struct log_query q = {uri, 0, -1, -1, -1};
  log_scan(env, log_visit, &q);
  return q;
}

int log_count(const struct test_env *env, const char *uri) { return log_query(env, uri).count; }
long log_bytes(const struct test_env *env, const char *uri) {
  return log_query(env, uri).first_bytes;
}
long log_connection(const struct test_env *env, const char *uri) {
  return log_query(env, uri).first_connection;
}
int log_position(const struct test_env *env, const char *uri) {
  return log_query(env, uri).first;
}

int log_wait_count(const struct test_env *env, const char *uri, int min, int timeout_ms) {
  double deadline = now_ms() + (double)timeout_ms * env->slow_factor;
  int n;
  while ((n = log_count(env, uri)) < min && now_ms() < deadline) sleep_ms(20);
  return n;
}

void capture_callback(pxl_token token, const pxl_result *result, void *user_data) {
  struct capture *c = user_data;
  int call = atomic_fetch_add(&c->calls, 1) + 1;
  CHECKF(call == 1, "token %llu: callback call number %d", (unsigned long long)token, call);
  CHECK(result != NULL);
  if (!result) return;
  CHECK(result->struct_size >= sizeof(pxl_result));
  CHECK(result->message != NULL);
  CHECKF((result->status == PXL_OK) == (result->image != NULL),
         "status %d with image %p", (int)result->status, (void *)result->image);
  CHECKF((result->source == PXL_SOURCE_NONE) == (result->image == NULL),
         "source %d with image %p", (int)result->source, (void *)result->image);
  if (result->status == PXL_OK && result->message) CHECKF(result->message[0] == '\0',
         "success with message \"%s\"", result->message);
  if (result->status != PXL_OK && result->message) CHECKF(result->message[0] != '\0',
         "status %d with an empty message", (int)result->status);
  if (call != 1) return;
  c->token = token;
  c->status = result->status;
  c->http_status = result->http_status;
  c->source = result->source;
  snprintf(c->message, sizeof c->message, "%s", result->message ? result->message : "(null)");
  c->image = pxl_image_retain(result->image);
  c->at_ms = now_ms();
  if (c->seq) c->order = atomic_fetch_add(c->seq, 1) + 1;
  if (c->phase_source) c->phase = atomic_load(c->phase_source);
}

void capture_reset(struct capture *capture) {
  pxl_image_release(capture->image);
  memset(capture, 0, sizeof *capture);
}

int drain_until(const struct test_env *env, pxl_queue *queue, const atomic_int *count,
                int target, int timeout_ms) {
  double deadline = now_ms() + (double)timeout_ms * env->slow_factor;
  while (atomic_load(count) < target) {
    double left = deadline - now_ms();
    if (left <= 0) return 0;
    pxl_queue_wait(queue, (int32_t)(left < 100 ? left + 1 : 100));
    pxl_queue_dispatch(queue, 0);
  }
  return 1;
}

int drain_for(pxl_queue *queue, int ms) {
  double deadline = now_ms() + ms;
  int ran = 0;
  for (double left; (left = deadline - now_ms()) > 0;) {
    pxl_queue_wait(queue, (int32_t)left + 1);
    ran += pxl_queue_dispatch(queue, 0);
  }
  return ran;
}

pxl_loader *new_loader(const pxl_config *config) {
  pxl_loader *loader = NULL;
  pxl_status s = pxl_loader_new(config, &loader);
  if (s != PXL_OK || !loader) {
    fprintf(stderr, "FATAL %s: pxl_loader_new: %d (%s)\n", g_current_test, (int)s,
            pxl_status_string(s));
    exit(1);
  }
  return loader;
}

pxl_queue *new_queue(void) {
  pxl_queue *queue = NULL;
  pxl_status s = pxl_queue_new(&queue);
  if (s != PXL_OK || !queue) {
    fprintf(stderr, "FATAL %s: pxl_queue_new: %d (%s)\n", g_current_test, (int)s,
            pxl_status_string(s));
    exit(1);
  }
  return queue;
}

void request_for(pxl_request *request, const char *url, int32_t width, int32_t height,
                 pxl_mode mode, pxl_format format) {
  pxl_request_init(request);
  request->url = url;
  request->width = width;
  request->height = height;
  request->mode = mode;
  request->format = format;
}

pxl_status load_and_wait(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                         const pxl_request *request, struct capture *capture) {
  pxl_token token = 0;
  pxl_status s = pxl_load(loader, request, queue, capture_callback, capture, &token);
  if (s != PXL_OK) return s;
  CHECKF(token != 0, "pxl_load gave token 0 for %s", request->url);
  CHECKF(drain_until(env, queue, &capture->calls, 1, 30000), "no callback for %s",
         request->url);
  CHECK(capture->token == token);
  return s;
}

const uint8_t *pixel_at(const pxl_image *image, int x, int y) {
  return pxl_image_pixels(image) + (size_t)y * (size_t)pxl_image_stride(image) +
         (size_t)x * (size_t)pxl_format_bytes_per_pixel(pxl_image_format(image));
}

/* A port that nothing listens on: bound by the kernel's choice, then closed. */
static int find_refused_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    perror("find_refused_port");
    exit(1);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

struct test_entry {
  const char *name;
  void (*run)(const struct test_env *);
};

#define TEST_ENTRY(name) {#name, name},
static const struct test_entry k_tests[] = {TEST_LIST(TEST_ENTRY)};
#undef TEST_ENTRY

static int selected(const char *name, int argc, char **argv) {
  if (argc <= 4) return 1;
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], name) == 0) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s BASE_URL ACCESS_LOG FIXTURE_DIR [TEST_NAME...]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct test_env env = {argv[1], argv[2], argv[3], find_refused_port(), (long)getpid(), 1};
  const char *slow = getenv("PXL_TEST_SLOW_FACTOR");
  if (slow && atoi(slow) > 1) env.slow_factor = atoi(slow);

  for (size_t i = 0; i < sizeof k_tests / sizeof k_tests[0]; i++) {
    if (!selected(k_tests[i].name, argc, argv)) continue;
    g_current_test = k_tests[i].name;
    int failed_before = atomic_load(&g_failed);
    double start = now_ms();
    k_tests[i].run(&env);
    int failed = atomic_load(&g_failed) - failed_before;
    printf("%-34s %s (%.0f ms)\n", k_tests[i].name, failed ? "FAILED" : "ok", now_ms() - start);
  }
  printf("%d passed, %d failed\n", atomic_load(&g_passed), atomic_load(&g_failed));
  return atomic_load(&g_failed) ? 1 : 0;
}
