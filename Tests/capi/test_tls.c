/*
 * test_tls.c: HTTPS that never downgrades, trusts only what it is told, and resumes its
 * sessions (issue 32), against the fault server and nginx with the throwaway CA that
 * mkcerts.sh makes at test time; and the proxy setting.
 *
 *   test_tls_odd_https_spelling        https:/host and https:///host are https everywhere
 *   test_tls_redirect_chain            http -> https -> http refused; relative Locations
 *   test_tls_redirect_credentials      the request's headers stay with their host
 *   test_tls_ca_file_replaces_system_store  in a mount namespace whose system CA
 *                                      directory trusts the server's CA, ca_file = another
 *                                      CA is refused
 *   test_tls_ca_path_and_bad_trust_files
 *   test_tls_min_version
 *   test_tls_session_resumption        handshakes counted at the server (nginx's
 *                                      $ssl_session_reused) and in pxl_stats
 *   test_proxy_setting                 the environment's proxy, "" and a proxy URL
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

/* TLS loads: the test CA, no retries (a refusal is final anyway). */
static void tls_config(const struct test_env *env, pxl_config *config) {
  pxl_config_init(config);
  config->max_retries = 0;
  config->ca_file = env->ca_file;
}

/* Loads url (original size) and returns its status; *http and message (if not NULL) get
 * the HTTP status and the message. */
static pxl_status load_status(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                              const char *url, const char *const *headers, int *http, char *message,
                              size_t size) {
  pxl_request request;
  request_for(&request, url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.headers = headers;
  struct capture got = {0};
  pxl_status s = load_and_wait(env, loader, queue, &request, &got);
  CHECKF(s == PXL_OK, "pxl_load(%s): %s", url, pxl_status_string(s));
  pxl_status status = s == PXL_OK ? got.status : s;
  if (http) *http = got.http_status;
  if (message) snprintf(message, size, "%s", got.message);
  capture_reset(&got);
  return status;
}

static void expect_status(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                          const char *url, pxl_status want, int want_http) {
  int http = 0;
  char message[256];
  pxl_status got = load_status(env, loader, queue, url, NULL, &http, message, sizeof message);
  CHECKF(got == want, "%s: %s (%s), expected %s", url, pxl_status_string(got), message,
         pxl_status_string(want));
  if (want_http >= 0) CHECKF(http == want_http, "%s: HTTP %d, expected %d", url, http, want_http);
}

/* Percent-encodes text for a path segment of the fault server (every byte but
 * unreserved ones). */
static void encode(const char *text, char *out, size_t size) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)text; *p && n + 4 < size; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("-._~", *p))
      out[n++] = (char)*p;
    else
      n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
  }
  out[n] = '\0';
}

/* ---- 1: https:/host ---- */

void test_tls_odd_https_spelling(const struct test_env *env) {
  if (!env->fault_tls_url || !env->ca_file) {
    CHECKF(0, "no --fault-tls-url / --ca-file given");
    return;
  }
  pxl_config config;
  tls_config(env, &config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct fault_stats *stats = malloc(sizeof *stats);
  static const char *const prefixes[] = {"https:/", "https:///", "HTTPS://"};
  for (int i = 0; i < 3; i++) {
    char name[32], url[1024];
    snprintf(name, sizeof name, "odd-https-%d", i);
    /* /to-http answers 302 to plain http: refused, as for "https://". */
    struct test_url u = fault_url(env, 1, "/to-http", name);
    snprintf(url, sizeof url, "%s%s", prefixes[i], u.url + strlen("https://"));
    expect_status(env, loader, queue, url, PXL_E_SCHEME_NOT_ALLOWED, 302);
    fault_stats(env, "query", fault_query(&u), stats);
    CHECKF(stats->requests == 1 && stats->record[0].tls == 1,
           "%s: %d requests (the first over TLS: %d); the http target must never be asked for",
           url, stats->requests, stats->requests ? stats->record[0].tls : -1);
  }
  free(stats);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- 2: redirects, hop by hop ---- */

void test_tls_redirect_chain(const struct test_env *env) {
  if (!env->fault_tls_url || !env->fault_url || !env->ca_file) {
    CHECKF(0, "no --fault-url / --fault-tls-url / --ca-file given");
    return;
  }
  pxl_config config;
  tls_config(env, &config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct fault_stats *stats = malloc(sizeof *stats);
  char target[256], encoded[768], path[900];

  /* http -> https (/to-http) -> http: the chain reached https, so the last hop is refused. */
  snprintf(target, sizeof target, "%s/to-http", env->fault_tls_url);
  encode(target, encoded, sizeof encoded);
  snprintf(path, sizeof path, "/go/to=%s", encoded);
  struct test_url down = fault_url(env, 0, path, "chain-http-https-http");
  expect_status(env, loader, queue, down.url, PXL_E_SCHEME_NOT_ALLOWED, 302);
  fault_stats(env, "query", fault_query(&down), stats);
  CHECKF(stats->requests == 2 && stats->record[0].tls == 0 && stats->record[1].tls == 1,
         "http -> https -> http: %d requests (want 2: http, then https; never the last http)",
         stats->requests);

  /* http -> https -> a relative Location there: resolved against the https URL, followed. */
  snprintf(target, sizeof target, "%s/go/to=%%2F" "image", env->fault_tls_url);
  encode(target, encoded, sizeof encoded);
  snprintf(path, sizeof path, "/go/to=%s", encoded);
  struct test_url up = fault_url(env, 0, path, "chain-http-https-relative");
  expect_status(env, loader, queue, up.url, PXL_OK, 200);
  fault_stats(env, "query", fault_query(&up), stats);
  CHECKF(stats->requests == 3 && stats->record[1].tls == 1 && stats->record[2].tls == 1 &&
             strcmp(stats->record[2].path, "/image") == 0,
         "http -> https -> relative /image: %d requests, the last %s over tls=%d", stats->requests,
         stats->requests >= 3 ? stats->record[2].path : "-", stats->requests >= 3 ? stats->record[2].tls : -1);

  /* A relative Location with a path of its own ("../image" from /go/x/...). */
  struct test_url dots = fault_url(env, 0, "/go/to=..%2F..%2Fimage/x", "chain-dot-dot");
  expect_status(env, loader, queue, dots.url, PXL_OK, 200);

  /* A loop is said to be one. */
  struct test_url loop = fault_url(env, 0, "/loop/a", "chain-loop");
  char message[256];
  int http = 0;
  pxl_status s = load_status(env, loader, queue, loop.url, NULL, &http, message, sizeof message);
  CHECKF(s == PXL_E_TOO_MANY_REDIRECTS && strstr(message, "redirect loop") != NULL,
         "a loop: %s '%s'", pxl_status_string(s), message);
  fault_stats(env, "query", fault_query(&loop), stats);
  CHECKF(stats->requests == 2, "a loop /loop/a -> /loop/b -> /loop/a: %d requests (want 2)",
         stats->requests);
  free(stats);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

void test_tls_redirect_credentials(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  static const char *const loader_headers[] = {"X-Loader: 1", "Cookie: loader=1", NULL};
  static const char *const request_headers[] = {"Authorization: Bearer secret", "X-Request: 2", NULL};
  pxl_config config;
  pxl_config_init(&config);
  config.max_retries = 0;
  config.headers = loader_headers;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct fault_stats *stats = malloc(sizeof *stats);
  int port = 0;
  sscanf(env->fault_url, "http://127.0.0.1:%d", &port);
  char target[128], encoded[384], path[512], value[128];

  /* To "localhost": the same server under another host name. */
  snprintf(target, sizeof target, "http://localhost:%d/image", port);
  encode(target, encoded, sizeof encoded);
  snprintf(path, sizeof path, "/go/to=%s", encoded);
  struct test_url other = fault_url(env, 0, path, "credentials-other-host");
  CHECK_STATUS(load_status(env, loader, queue, other.url, request_headers, NULL, NULL, 0), PXL_OK);
  fault_stats(env, "query", fault_query(&other), stats);
  CHECK_INT(stats->requests, 2);
  if (stats->requests == 2) {
    CHECK(fault_header(&stats->record[0], "Authorization", value, sizeof value) && strcmp(value, "Bearer secret") == 0);
    CHECK(fault_header(&stats->record[0], "X-Request", value, sizeof value));
    CHECK(fault_header(&stats->record[0], "Cookie", value, sizeof value));
    CHECKF(!fault_header(&stats->record[1], "Authorization", value, sizeof value),
           "Authorization went to another host: %s", value);
    CHECKF(!fault_header(&stats->record[1], "X-Request", value, sizeof value),
           "a request header went to another host: %s", value);
    CHECKF(!fault_header(&stats->record[1], "Cookie", value, sizeof value),
           "the loader's Cookie went to another host: %s", value);
    CHECK(fault_header(&stats->record[1], "X-Loader", value, sizeof value) && strcmp(value, "1") == 0);
    CHECK(fault_header(&stats->record[1], "Host", value, sizeof value) && strncmp(value, "localhost:", 10) == 0);
  }

  /* The same host: everything goes. */
  struct test_url same = fault_url(env, 0, "/go/to=%2Fimage", "credentials-same-host");
  CHECK_STATUS(load_status(env, loader, queue, same.url, request_headers, NULL, NULL, 0), PXL_OK);
  fault_stats(env, "query", fault_query(&same), stats);
  CHECK_INT(stats->requests, 2);
  if (stats->requests == 2) {
    CHECK(fault_header(&stats->record[1], "Authorization", value, sizeof value) && strcmp(value, "Bearer secret") == 0);
    CHECK(fault_header(&stats->record[1], "X-Request", value, sizeof value));
    CHECK(fault_header(&stats->record[1], "Cookie", value, sizeof value));
  }
  free(stats);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- 3: the trust store ---- */

int tls_ca_probe_main(int argc, char **argv) {
  if (argc != 4) return 127;
  pxl_config config;
  pxl_config_init(&config);
  config.max_retries = 0;
  if (strcmp(argv[3], "-") != 0) config.ca_file = argv[3];
  pxl_loader *loader = NULL;
  pxl_status s = pxl_loader_new(&config, &loader);
  if (s != PXL_OK) return 100 + (int)s;
  pxl_queue *queue = NULL;
  if (pxl_queue_new(&queue) != PXL_OK) return 126;
  struct test_env env = {.slow_factor = 1};
  pxl_request request;
  request_for(&request, argv[2], 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture got = {0};
  s = load_and_wait(&env, loader, queue, &request, &got);
  int status = s == PXL_OK ? (int)got.status : 100 + (int)s;
  fprintf(stderr, "  probe (ca_file %s): %s %s\n", argv[3], pxl_status_string((pxl_status)status), got.message);
  capture_reset(&got);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  return status;
}

/* Runs "--ca-probe url ca_file" in a new mount namespace whose /etc/ssl/certs (libcurl's
 * built-in CA directory and bundle on Debian) is ca_dir. Returns its exit status, or -1
 * when no mount namespace can be made here (then *why says so). */
static int probe_in_namespace(const struct test_env *env, const char *url, const char *ca_file,
                              const char **why) {
  pid_t pid = fork();
  if (pid < 0) {
    *why = "fork failed";
    return -1;
  }
  if (pid == 0) {
    /* As root a mount namespace; otherwise a user namespace that owns one. */
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) _exit(200);
    /* Private first: the bind must never propagate to the machine's namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(201);
    if (mount(env->ca_dir, "/etc/ssl/certs", NULL, MS_BIND, NULL) != 0) _exit(202);
    execl(env->self, env->self, "--ca-probe", url, ca_file, (char *)NULL);
    _exit(203);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    *why = "the probe crashed";
    return -1;
  }
  int code = WEXITSTATUS(status);
  if (code >= 200) {
    *why = code == 200 ? "unshare(CLONE_NEWNS) refused" : code == 201 ? "mount --make-rprivate refused"
           : code == 202 ? "bind mount over /etc/ssl/certs refused" : "exec of the probe failed";
    return -1;
  }
  return code;
}

void test_tls_ca_file_replaces_system_store(const struct test_env *env) {
  if (!env->fault_tls_url || !env->ca_dir || !env->other_ca_file || !env->self) {
    CHECKF(0, "no --fault-tls-url / --ca-dir / --other-ca-file given");
    return;
  }
  struct test_url u = fault_url(env, 1, "/image", "system-store");
  const char *why = "";
  /* The namespace's system store trusts the test CA: with no ca_file the load works (what
   * makes the next check mean something). */
  int system = probe_in_namespace(env, u.url, "-", &why);
  if (system < 0) {
    printf("  skipped: no mount namespace for a stand-in system store here (%s)\n", why);
    return;
  }
  CHECKF(system == PXL_OK, "with the test CA in the system store and no ca_file: %s",
         pxl_status_string((pxl_status)system));
  /* ca_file names another CA: only it is trusted, the system store not at all. */
  int other = probe_in_namespace(env, u.url, env->other_ca_file, &why);
  CHECKF(other == PXL_E_TLS,
         "ca_file = an unrelated CA, the server's CA only in the system store: %s (want TLS)",
         other < 0 ? why : pxl_status_string((pxl_status)other));
  int own = probe_in_namespace(env, u.url, env->ca_file, &why);
  CHECKF(own == PXL_OK, "ca_file = the server's CA: %s", own < 0 ? why : pxl_status_string((pxl_status)own));
}

struct log_lines {
  pthread_mutex_t lock;
  int count;
  char first[512];
};

static void keep_log(int32_t level, const char *message, void *user_data) {
  (void)level;
  struct log_lines *log = user_data;
  pthread_mutex_lock(&log->lock);
  if (log->count++ == 0) snprintf(log->first, sizeof log->first, "%s", message);
  pthread_mutex_unlock(&log->lock);
}

/* pxl_loader_new with config refuses with INVALID_ARGUMENT and one log line naming name. */
static void expect_refused(pxl_config *config, const char *name) {
  struct log_lines log = {.lock = PTHREAD_MUTEX_INITIALIZER};
  config->log = keep_log;
  config->log_user_data = &log;
  pxl_loader *loader = (pxl_loader *)1;
  CHECK_STATUS(pxl_loader_new(config, &loader), PXL_E_INVALID_ARGUMENT);
  CHECK(loader == NULL);
  CHECKF(log.count == 1 && strstr(log.first, name) != NULL, "%d log lines, the first: '%s' (want one naming %s)",
         log.count, log.first, name);
  config->log = NULL;
}

void test_tls_ca_path_and_bad_trust_files(const struct test_env *env) {
  if (!env->fault_tls_url || !env->ca_dir || !env->other_ca_file) {
    CHECKF(0, "no --fault-tls-url / --ca-dir / --other-ca-file given");
    return;
  }
  pxl_config config;
  pxl_config_init(&config);
  CHECK(config.ca_path == NULL && config.proxy == NULL && config.tls_min_version == PXL_TLS_1_2);
  config.max_retries = 0;
  pxl_queue *queue = new_queue();

  /* A hashed directory alone; and with an unrelated ca_file, both are trusted. */
  config.ca_path = env->ca_dir;
  pxl_loader *loader = new_loader(&config);
  struct test_url u = fault_url(env, 1, "/image", "ca-path");
  expect_status(env, loader, queue, u.url, PXL_OK, 200);
  pxl_loader_free(loader);
  config.ca_file = env->other_ca_file;
  loader = new_loader(&config);
  u = fault_url(env, 1, "/image", "ca-path-and-other-file");
  expect_status(env, loader, queue, u.url, PXL_OK, 200);
  pxl_loader_free(loader);

  /* Files that cannot be used fail the loader, naming them. */
  pxl_config_init(&config);
  config.ca_file = "/nonexistent/pixload-test-ca.pem";
  expect_refused(&config, "/nonexistent/pixload-test-ca.pem");
  config.ca_file = env->ca_dir;  /* a directory */
  expect_refused(&config, env->ca_dir);
  pxl_config_init(&config);
  config.ca_path = "/nonexistent/pixload-test-certs";
  expect_refused(&config, "/nonexistent/pixload-test-certs");
  pxl_queue_free(queue);
}

void test_tls_min_version(const struct test_env *env) {
  if (!env->tls_reconnect_url || !env->tls_reconnect_log || !env->ca_file) {
    CHECKF(0, "no --tls-reconnect-url / --tls-reconnect-log / --ca-file given");
    return;
  }
  pxl_config config;
  pxl_config_init(&config);
  CHECK_INT(config.tls_min_version, PXL_TLS_1_2);
  pxl_loader *loader = NULL;
  static const int32_t invalid[] = {0, 10, 11, 14, 0x0303};
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
    config.tls_min_version = invalid[i];
    CHECKF(pxl_loader_new(&config, &loader) == PXL_E_INVALID_ARGUMENT && loader == NULL,
           "tls_min_version %d accepted", invalid[i]);
  }
  tls_config(env, &config);
  config.tls_min_version = PXL_TLS_1_3;
  loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char url[1024], uri[256];
  snprintf(uri, sizeof uri, "/%s?run=%ld&case=tls13", FIXTURE_GRADIENT_JPG, env->run_id);
  snprintf(url, sizeof url, "%s%s", env->tls_reconnect_url, uri);
  expect_status(env, loader, queue, url, PXL_OK, 200);
  /* The HTTP/2 server speaks TLS 1.2 only (scripts/nginx.sh): refused at 1.3, not at 1.2. */
  if (env->tls_url) {
    snprintf(url, sizeof url, "%s/%s?run=%ld&case=tls12-refused", env->tls_url, FIXTURE_GRADIENT_JPG, env->run_id);
    expect_status(env, loader, queue, url, PXL_E_TLS, 0);
    pxl_loader_free(loader);
    config.tls_min_version = PXL_TLS_1_2;
    loader = new_loader(&config);
    snprintf(url, sizeof url, "%s/%s?run=%ld&case=tls12", env->tls_url, FIXTURE_GRADIENT_JPG, env->run_id);
    expect_status(env, loader, queue, url, PXL_OK, 200);
  } else {
    CHECKF(0, "no --tls-url given");
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

/* ---- 4: session resumption, counted at the server ---- */

void test_tls_session_resumption(const struct test_env *env) {
  if (!env->tls_reconnect_url || !env->tls_reconnect_log || !env->ca_file) {
    CHECKF(0, "no --tls-reconnect-url / --tls-reconnect-log / --ca-file given");
    return;
  }
  enum { LOADS = 5 };
  pxl_config config;
  tls_config(env, &config);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char url[1536], uri[LOADS][256];
  /* One after another: nginx closes each connection after its one request, so each load
   * is a new connection and a new handshake. */
  for (int i = 0; i < LOADS; i++) {
    snprintf(uri[i], sizeof uri[i], "/%s?run=%ld&case=resume-%d", FIXTURE_GRADIENT_JPG, env->run_id, i);
    snprintf(url, sizeof url, "%s%s", env->tls_reconnect_url, uri[i]);
    expect_status(env, loader, queue, url, PXL_OK, 200);
  }
  pxl_stats stats;
  stats.struct_size = sizeof stats;
  CHECK_STATUS(pxl_loader_get_stats(loader, &stats), PXL_OK);
  pxl_loader_free(loader);
  pxl_queue_free(queue);

  /* What the server saw: "$request_uri $status $connection $ssl_session_reused $protocol". */
  int seen[LOADS] = {0}, resumed = 0, full = 0;
  long connections[LOADS] = {0};
  char reused_at[LOADS] = {0};
  double deadline = now_ms() + 2000.0 * env->slow_factor;
  int lines = 0;
  while (lines < LOADS && now_ms() < deadline) {
    FILE *log = fopen(env->tls_reconnect_log, "r");
    lines = 0;
    char line[512];
    while (log && fgets(line, sizeof line, log)) {
      char got_uri[256], reused[8], protocol[16];
      int status = 0;
      long connection = 0;
      if (sscanf(line, "%255s %d %ld %7s %15s", got_uri, &status, &connection, reused, protocol) != 5) continue;
      for (int i = 0; i < LOADS; i++) {
        if (strcmp(got_uri, uri[i]) != 0 || seen[i]) continue;
        seen[i] = 1;
        connections[i] = connection;
        reused_at[i] = reused[0];
        lines++;
      }
    }
    if (log) fclose(log);
    if (lines < LOADS) {
      memset(seen, 0, sizeof seen);
      sleep_ms(20);
    }
  }
  CHECKF(lines == LOADS, "the reconnecting server logged %d of %d loads", lines, LOADS);
  int distinct = 0;
  for (int i = 0; i < LOADS; i++) {
    int again = 0;
    for (int j = 0; j < i; j++) again |= connections[j] == connections[i];
    distinct += !again;
    resumed += reused_at[i] == 'r';
    full += reused_at[i] == '.';
  }
  printf("  %d loads over %d connections: %d full handshakes, %d resumed (server); "
         "pxl_stats: tls_handshakes %llu, tls_resumed %llu\n",
         LOADS, distinct, full, resumed, (unsigned long long)stats.tls_handshakes,
         (unsigned long long)stats.tls_resumed);
  CHECKF(distinct == LOADS, "%d connections for %d loads: the server should close each", distinct, LOADS);
  CHECKF(reused_at[0] == '.', "the first connection resumed ('%c'): nothing to resume yet", reused_at[0]);
  CHECKF(resumed > 0, "no reconnection resumed its TLS session (%d full handshakes)", full);
  CHECKF(resumed == LOADS - 1, "%d of %d reconnections resumed", resumed, LOADS - 1);
  CHECKF(stats.tls_handshakes == (uint64_t)LOADS && stats.tls_resumed == (uint64_t)resumed,
         "pxl_stats: %llu handshakes, %llu resumed; the server saw %d and %d",
         (unsigned long long)stats.tls_handshakes, (unsigned long long)stats.tls_resumed, LOADS, resumed);
}

/* ---- proxies ---- */

/* setenv/unsetenv of name to value (NULL: unset), returning the old value (malloc'd). */
static char *swap_env(const char *name, const char *value) {
  const char *old = getenv(name);
  char *saved = old ? strdup(old) : NULL;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  return saved;
}

void test_proxy_setting(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  /* The environment names a proxy that refuses connections, and no exceptions. No loader
   * runs while it changes (tests run one at a time, each frees its loaders). */
  static const char *const names[] = {"http_proxy", "no_proxy", "NO_PROXY", "ALL_PROXY", "all_proxy"};
  char *saved[5];
  char refused[64];
  snprintf(refused, sizeof refused, "http://127.0.0.1:%d", env->refused_port);
  for (int i = 0; i < 5; i++) saved[i] = swap_env(names[i], i == 0 ? refused : NULL);

  pxl_queue *queue = new_queue();
  struct test_url direct = test_url(env, "/" FIXTURE_GRADIENT_JPG, "proxy-env");
  pxl_config config;
  pxl_config_init(&config);
  config.max_retries = 0;
  pxl_loader *loader = new_loader(&config);
  expect_status(env, loader, queue, direct.url, PXL_E_CONNECT, -1);  /* it went to the proxy */
  pxl_loader_free(loader);

  config.proxy = "";  /* no proxy, whatever the environment says */
  loader = new_loader(&config);
  struct test_url none = test_url(env, "/" FIXTURE_GRADIENT_JPG, "proxy-none");
  expect_status(env, loader, queue, none.url, PXL_OK, 200);
  CHECK_INT(log_wait_count(env, none.uri, 1, 2000), 1);
  pxl_loader_free(loader);

  /* The fault server as the proxy: it gets the absolute URL and answers for any host. */
  config.proxy = env->fault_url;
  loader = new_loader(&config);
  char url[512];
  snprintf(url, sizeof url, "http://pixload-proxy-test.invalid/image?run=%ld&case=proxy-url", env->run_id);
  expect_status(env, loader, queue, url, PXL_OK, 200);
  pxl_loader_free(loader);
  struct fault_stats *stats = malloc(sizeof *stats);
  char query[128], host[128] = "";
  snprintf(query, sizeof query, "run=%ld&case=proxy-url", env->run_id);
  fault_stats(env, "query", query, stats);
  CHECKF(stats->requests == 1 && fault_header(&stats->record[0], "Host", host, sizeof host) &&
             strcmp(host, "pixload-proxy-test.invalid") == 0,
         "through the proxy: %d requests, Host '%s'", stats->requests, host);
  free(stats);

  for (int i = 0; i < 5; i++) {
    free(swap_env(names[i], saved[i]));
    free(saved[i]);
  }
  pxl_queue_free(queue);
}
