/*
 * harness.c: the test runner and the helpers declared in harness.h.
 *
 *   capi_tests BASE_URL ACCESS_LOG FIXTURE_DIR [--option=VALUE...] [TEST_NAME...]
 *
 * With TEST_NAMEs only those tests run. PXL_TEST_SLOW_FACTOR=N multiplies every
 * deadline (run.sh sets it under valgrind). Options (see struct test_env): --fault-url,
 * --fault-tls-url, --ca-file, --other-ca-file, --tls-url, --tls-log.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
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

long fixture_bytes(const struct test_env *env, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
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

/* ---- the fault server ---- */

struct test_url fault_url(const struct test_env *env, int tls, const char *path,
                          const char *case_name) {
  struct test_url u;
  const char *base = tls ? env->fault_tls_url : env->fault_url;
  CHECKF(base != NULL, "no %s given: run the tests through Tests/capi/run.sh",
         tls ? "--fault-tls-url" : "--fault-url");
  snprintf(u.uri, sizeof u.uri, "%s?run=%ld&case=%s", path, env->run_id, case_name);
  snprintf(u.url, sizeof u.url, "%s%s", base ? base : "http://fault-server-not-given.invalid",
           u.uri);
  return u;
}

const char *fault_query(const struct test_url *u) {
  const char *q = strchr(u->uri, '?');
  return q ? q + 1 : "";
}

/* The body of GET target from the fault server's http port, malloc'd; NULL on failure. */
static char *fault_get(const struct test_env *env, const char *target) {
  int port = 0;
  if (!env->fault_url || sscanf(env->fault_url, "http://127.0.0.1:%d", &port) != 1) return NULL;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return NULL;
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {5, 0}; /* the server answers at once; never hang a test on it */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char request[2048];
  int n = snprintf(request, sizeof request,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || n >= (int)sizeof request ||
      write(fd, request, (size_t)n) != n) {
    close(fd);
    return NULL;
  }
  size_t size = 0, cap = 65536;
  char *buf = malloc(cap + 1);
  long body_at = -1, length = -1;
  while (buf) {
    if (size == cap) {
      char *grown = realloc(buf, (cap *= 2) + 1);
      if (!grown) break;
      buf = grown;
    }
    ssize_t got = read(fd, buf + size, cap - size);
    if (got <= 0) break;
    size += (size_t)got;
    buf[size] = '\0';
    if (body_at < 0) {
      char *end = strstr(buf, "\r\n\r\n");
      if (!end) continue;
      body_at = end + 4 - buf;
      char *cl = strstr(buf, "Content-Length: ");
      if (cl && cl < end) length = atol(cl + 16);
    }
    if (length >= 0 && (long)size - body_at >= length) break;
  }
  close(fd);
  if (!buf || body_at < 0 || length < 0 || (long)size - body_at < length) {
    free(buf);
    return NULL;
  }
  memmove(buf, buf + body_at, (size_t)length);
  buf[length] = '\0';
  return buf;
}

/* "PATH?KEY=VALUE" into target, VALUE percent-encoded. */
static void fault_control_target(char *target, size_t size, const char *path, const char *key,
                                 const char *value) {
  size_t n = (size_t)snprintf(target, size, "%s?%s=", path, key);
  for (const unsigned char *p = (const unsigned char *)value; *p && n + 4 < size; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        *p == '-' || *p == '_' || *p == '.')
      target[n++] = (char)*p;
    else
      n += (size_t)snprintf(target + n, size - n, "%%%02X", *p);
  }
  target[n] = '\0';
}

int fault_release(const struct test_env *env, const char *uri) {
  char target[1400];
  fault_control_target(target, sizeof target, "/__release", "uri", uri);
  char *body = fault_get(env, target);
  int count = 0;
  if (!body || sscanf(body, "released %d", &count) != 1) CHECKF(0, "the fault server did not answer %s", target);
  free(body);
  return count;
}

int fault_set_token(const struct test_env *env, const char *realm, const char *token) {
  char target[1400];
  fault_control_target(target, sizeof target, "/__token", "token", token);
  size_t n = strlen(target);
  snprintf(target + n, sizeof target - n, "&realm=%s", realm); /* realms are plain words */
  char *body = fault_get(env, target);
  int ok = body && strncmp(body, "token set", 9) == 0;
  if (!ok) CHECKF(0, "the fault server did not answer %s", target);
  free(body);
  return ok;
}

int fault_stats(const struct test_env *env, const char *by, const char *value,
                struct fault_stats *stats) {
  memset(stats, 0, sizeof *stats);
  char target[1400];
  fault_control_target(target, sizeof target, "/__stats", by, value);
  char *body = fault_get(env, target);
  if (!body) {
    CHECKF(0, "the fault server did not answer %s", target);
    return 0;
  }
  char *save = NULL;
  for (char *line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int i;
    int used = 0;
    if (sscanf(line, "requests %d", &stats->requests) == 1) continue;
    if (sscanf(line, "connections %d", &stats->connections) == 1) continue;
    if (sscanf(line, "accepted %d", &stats->accepted) == 1) continue;
    if (sscanf(line, "tls_handshake_failures %d", &stats->tls_handshake_failures) == 1) continue;
    if (sscanf(line, "request %d %n", &i, &used) == 1 && i >= 0 && i < FAULT_MAX_RECORDS) {
      struct fault_record *r = &stats->record[i];
      if (sscanf(line + used, "conn=%ld tls=%d at_ms=%lf status=%d bytes=%ld complete=%d "
                 "closed=%d path=%159s", &r->conn, &r->tls, &r->at_ms, &r->status, &r->bytes,
                 &r->complete, &r->closed, r->path) == 8 && i >= stats->count)
        stats->count = i + 1;
      continue;
    }
    if (sscanf(line, "header %d %n", &i, &used) == 1 && i >= 0 && i < FAULT_MAX_RECORDS) {
      struct fault_record *r = &stats->record[i];
      size_t have = strlen(r->headers);
      snprintf(r->headers + have, sizeof r->headers - have, "%s\n", line + used);
    }
  }
  free(body);
  stats->ok = 1;
  return 1;
}

int fault_wait_requests(const struct test_env *env, const char *by, const char *value, int min,
                        int timeout_ms) {
  double deadline = now_ms() + (double)timeout_ms * env->slow_factor;
  struct fault_stats *stats = malloc(sizeof *stats);
  int n = -1;
  while (stats) {
    if (!fault_stats(env, by, value, stats)) break;
    n = stats->requests;
    if (n >= min || now_ms() >= deadline) break;
    sleep_ms(20);
  }
  free(stats);
  return n;
}

int fault_header(const struct fault_record *record, const char *name, char *out, size_t size) {
  size_t len = strlen(name);
  for (const char *line = record->headers; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    if ((size_t)(end - line) > len + 1 && strncasecmp(line, name, len) == 0 && line[len] == ':') {
      const char *v = line + len + 1;
      while (*v == ' ') v++;
      snprintf(out, size, "%.*s", (int)(end - v), v);
      return 1;
    }
    line = *end ? end + 1 : end;
  }
  return 0;
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
  CHECKF(result->incomplete == pxl_image_incomplete(result->image), "incomplete %d, pxl_image_incomplete %d",
         (int)result->incomplete, (int)pxl_image_incomplete(result->image));
  if (call != 1) return;
  c->incomplete = result->incomplete;
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

void metered_callback(pxl_token token, const pxl_result *result, void *user_data) {
  struct metered *m = user_data;
  m->metrics.struct_size = sizeof m->metrics;
  if (pxl_result_metrics(result, &m->metrics) != PXL_OK) m->metrics.isolated = -1;
  capture_callback(token, result, &m->capture);
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

void write_fixture(const struct test_env *env, const char *name, const uint8_t *bytes, size_t size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", env->fixture_dir, name);
  FILE *f = fopen(path, "wb");
  CHECKF(f != NULL, "cannot write %s", path);
  if (!f) return;
  fwrite(bytes, 1, size, f);
  fclose(f);
}

void disk_cache_config(pxl_config *config, const char *directory) {
  pxl_config_init(config);
  config->disk_cache_bytes = 8 << 20;
  config->disk_cache_dir = directory;
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
  int any = 0;
  for (int i = 4; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0) continue;
    any = 1;
    if (strcmp(argv[i], name) == 0) return 1;
  }
  return !any;
}

/* --name=value options; anything else after FIXTURE_DIR is a test name. */
static void parse_options(struct test_env *env, int argc, char **argv) {
  static const struct {
    const char *name;
    size_t offset;
  } options[] = {
      {"--fault-url=", offsetof(struct test_env, fault_url)},
      {"--fault-tls-url=", offsetof(struct test_env, fault_tls_url)},
      {"--ca-file=", offsetof(struct test_env, ca_file)},
      {"--other-ca-file=", offsetof(struct test_env, other_ca_file)},
      {"--tls-url=", offsetof(struct test_env, tls_url)},
      {"--tls-log=", offsetof(struct test_env, tls_access_log)},
      {"--tls-reconnect-url=", offsetof(struct test_env, tls_reconnect_url)},
      {"--tls-reconnect-log=", offsetof(struct test_env, tls_reconnect_log)},
      {"--ca-dir=", offsetof(struct test_env, ca_dir)},
  };
  for (int i = 4; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) != 0) continue;
    size_t k = 0;
    for (; k < sizeof options / sizeof options[0]; k++) {
      size_t n = strlen(options[k].name);
      if (strncmp(argv[i], options[k].name, n) == 0) {
        *(const char **)((char *)env + options[k].offset) = argv[i] + n;
        break;
      }
    }
    if (k == sizeof options / sizeof options[0]) {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      exit(2);
    }
  }
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--ca-probe") == 0) return tls_ca_probe_main(argc, argv);
  if (argc < 4) {
    fprintf(stderr, "usage: %s BASE_URL ACCESS_LOG FIXTURE_DIR [--option=VALUE...] [TEST_NAME...]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct test_env env = {.base_url = argv[1], .access_log = argv[2], .fixture_dir = argv[3],
                         .refused_port = find_refused_port(), .run_id = (long)getpid(),
                         .slow_factor = 1, .self = argv[0]};
  parse_options(&env, argc, argv);
  const char *slow = getenv("PXL_TEST_SLOW_FACTOR");
  if (slow && atoi(slow) > 1) env.slow_factor = atoi(slow);
  /* A name that is no test (a file's name, a typo) is an error, not an empty run that
   * ends in "0 passed, 0 failed" and a success. */
  for (int i = 4; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0) continue;
    size_t k = 0;
    while (k < sizeof k_tests / sizeof k_tests[0] && strcmp(k_tests[k].name, argv[i]) != 0) k++;
    if (k == sizeof k_tests / sizeof k_tests[0]) {
      fprintf(stderr, "no test named %s\n", argv[i]);
      return 2;
    }
  }

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
