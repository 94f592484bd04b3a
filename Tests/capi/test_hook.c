/*
 * The request hook (pixload.h, "Request hook"): a token flow against the fault server's
 * /auth route, which answers 401 until the request's bearer token is the current one.
 * The host side here is a token service as a real app would write it: the hook answers
 * at once with the token it holds, and on a 401 keeps the call while one refresh runs on
 * the service's own thread (a real round trip to the server, which issues the new token
 * and makes the old one stale), then answers every kept call with the new token.
 */
#define _GNU_SOURCE /* mkdtemp, memmem */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"

#define MAX_KEPT 256

struct token_service {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  const struct test_env *env;
  const char *realm;
  char token[64];         /* the token the host holds */
  int generation;         /* tokens issued so far */
  int refreshing;
  int stop;
  pxl_hook_call *kept[MAX_KEPT];
  int kept_count;
  pthread_t thread;
  atomic_int calls, auth_calls, refreshes, bad_answers;
  char urls[8][400];      /* the URLs of the first calls, in order */
  int statuses[8];
  int url_count;
};

/* The bearer token in headers (the one that got a 401), "" when none. */
static void sent_token(const char *const *headers, size_t count, char *out, size_t size) {
  out[0] = '\0';
  for (size_t i = 0; i < count; i++)
    if (strncasecmp(headers[i], "Authorization: Bearer ", 22) == 0) snprintf(out, size, "%s", headers[i] + 22);
}

static void answer_with(struct token_service *t, pxl_hook_call *call, const char *token) {
  char line[128];
  snprintf(line, sizeof line, "Authorization: Bearer %s", token);
  const char *lines[] = {line};
  if (pxl_hook_answer(call, lines, 1) != PXL_OK) atomic_fetch_add(&t->bad_answers, 1);
}

static void token_hook(const char *url, const char *const *headers, size_t count, int32_t status,
                       pxl_hook_call *call, void *user_data) {
  struct token_service *t = user_data;
  atomic_fetch_add(&t->calls, 1);
  char token[64] = "";
  int keep = 0;
  pthread_mutex_lock(&t->mutex);
  if (t->url_count < 8) {
    t->statuses[t->url_count] = status;
    snprintf(t->urls[t->url_count++], sizeof t->urls[0], "%s", url);
  }
  if (status == 401 || status == 403) {
    atomic_fetch_add(&t->auth_calls, 1);
    char refused[64];
    sent_token(headers, count, refused, sizeof refused);
    /* Refused with the token we hold: it expired, refresh (once for everyone). Refused
     * with an older one: a refresh already replaced it, answer with ours. */
    if (t->refreshing || strcmp(refused, t->token) == 0) {
      keep = 1;
      if (!t->refreshing) {
        t->refreshing = 1;
        atomic_fetch_add(&t->refreshes, 1);
        pthread_cond_signal(&t->cond);
      }
    }
  } else if (t->refreshing) {
    keep = 1;
  }
  if (keep) {
    if (t->kept_count < MAX_KEPT) t->kept[t->kept_count++] = call;
    else keep = 0; /* never happens with the test's numbers; answered below rather than lost */
  }
  snprintf(token, sizeof token, "%s", t->token);
  pthread_mutex_unlock(&t->mutex);
  if (!keep) answer_with(t, call, token);
}

/* The service's thread: one refresh at a time, each a request to the auth server. */
static void *refresh_thread(void *arg) {
  struct token_service *t = arg;
  pthread_mutex_lock(&t->mutex);
  for (;;) {
    while (!t->stop && !t->refreshing) pthread_cond_wait(&t->cond, &t->mutex);
    if (t->stop) break;
    char token[64];
    snprintf(token, sizeof token, "%s-secret-%d", t->realm, ++t->generation);
    pthread_mutex_unlock(&t->mutex);
    int issued = fault_set_token(t->env, t->realm, token);
    pthread_mutex_lock(&t->mutex);
    if (issued) snprintf(t->token, sizeof t->token, "%s", token);
    pxl_hook_call *kept[MAX_KEPT];
    int n = t->kept_count;
    memcpy(kept, t->kept, sizeof kept[0] * (size_t)n);
    t->kept_count = 0;
    t->refreshing = 0;
    pthread_mutex_unlock(&t->mutex);
    for (int i = 0; i < n; i++) answer_with(t, kept[i], token);
    pthread_mutex_lock(&t->mutex);
  }
  pthread_mutex_unlock(&t->mutex);
  return NULL;
}

/* A service holding token, which the server also takes (unless token is NULL). */
static void service_start(const struct test_env *env, struct token_service *t, const char *realm, const char *token) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mutex, NULL);
  pthread_cond_init(&t->cond, NULL);
  t->env = env;
  t->realm = realm;
  if (token) {
    snprintf(t->token, sizeof t->token, "%s", token);
    CHECK(fault_set_token(env, realm, token));
  }
  CHECK(pthread_create(&t->thread, NULL, refresh_thread, t) == 0);
}

static void service_stop(struct token_service *t) {
  pthread_mutex_lock(&t->mutex);
  t->stop = 1;
  pthread_cond_signal(&t->cond);
  pthread_mutex_unlock(&t->mutex);
  pthread_join(t->thread, NULL);
  pthread_mutex_destroy(&t->mutex);
  pthread_cond_destroy(&t->cond);
}

/* ---- secrets: every log line and every request's metrics, searched for "secret" ---- */

struct secrets_seen {
  atomic_int log_lines, in_log, in_metrics, in_messages, metrics_read;
};

static void secret_log(int32_t level, const char *message, void *user_data) {
  (void)level;
  struct secrets_seen *s = user_data;
  atomic_fetch_add(&s->log_lines, 1);
  if (strstr(message, "secret")) atomic_fetch_add(&s->in_log, 1);
}

struct watched {
  struct capture capture;
  struct secrets_seen *secrets;
};

static void watched_callback(pxl_token token, const pxl_result *result, void *user_data) {
  struct watched *w = user_data;
  pxl_metrics metrics;
  memset(&metrics, 0, sizeof metrics);
  metrics.struct_size = sizeof metrics;
  if (pxl_result_metrics(result, &metrics) == PXL_OK) {
    atomic_fetch_add(&w->secrets->metrics_read, 1);
    if (memmem(&metrics, sizeof metrics, "secret", 6)) atomic_fetch_add(&w->secrets->in_metrics, 1);
  }
  if (result->message && strstr(result->message, "secret")) atomic_fetch_add(&w->secrets->in_messages, 1);
  capture_callback(token, result, &w->capture);
}

static pxl_config hook_config(struct token_service *t, struct secrets_seen *secrets) {
  pxl_config config;
  pxl_config_init(&config);
  config.request_hook = token_hook;
  config.request_hook_user_data = t;
  config.log = secret_log;
  config.log_user_data = secrets;
  config.log_level = PXL_LOG_INFO;
  return config;
}

/* The token flow. An image loads with the token the host holds (and is cached in memory
 * and on disk). The server then rotates its token; 50 requests of new images all get a
 * 401, their hook calls see one refresh on the service's thread, and all succeed with the
 * new token. The first image, cached under the old token, is still served from memory and,
 * in a second loader on the same directory, from disk: no request reaches the server for
 * it. The token never shows in a log line, an error message or the metrics. */
void test_hook_token_refresh(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  char directory[] = "/tmp/pxl-hook.XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char realm[32];
  snprintf(realm, sizeof realm, "r%ld", env->run_id);
  struct token_service t;
  service_start(env, &t, realm, "first-secret");
  struct secrets_seen secrets;
  memset(&secrets, 0, sizeof secrets);
  pxl_config config = hook_config(&t, &secrets);
  CHECK_INT(config.hook_timeout_ms, 30000);
  config.disk_cache_bytes = 64 << 20;
  config.disk_cache_dir = directory;
  config.max_retries = 0;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();

  char path[64];
  snprintf(path, sizeof path, "/auth/realm=%s", realm);
  struct test_url first = fault_url(env, 0, path, "hook-first");
  pxl_request request;
  request_for(&request, first.url, 64, 64, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture c;
  memset(&c, 0, sizeof c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_NETWORK);
  CHECK_INT(atomic_load(&t.calls), 1);
  CHECK_INT(atomic_load(&t.refreshes), 0);
  capture_reset(&c);
  struct fault_stats stats;
  CHECK(fault_stats(env, "uri", first.uri, &stats) && stats.requests == 1);
  char sent[128] = "";
  CHECK(stats.count == 1 && fault_header(&stats.record[0], "Authorization", sent, sizeof sent));
  CHECKF(strcmp(sent, "Bearer first-secret") == 0, "Authorization: '%s'", sent);

  /* The server's token moves on: the host's is stale. */
  CHECK(fault_set_token(env, realm, "rotated-elsewhere"));
  enum { N = 50 };
  static struct watched w[N];
  static struct test_url urls[N];
  pxl_token tokens[N];
  for (int i = 0; i < N; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].secrets = &secrets;
    char name[32];
    snprintf(name, sizeof name, "hook-many-%d", i);
    urls[i] = fault_url(env, 0, path, name);
    request_for(&request, urls[i].url, 32, 32, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    CHECK_STATUS(pxl_load(loader, &request, queue, watched_callback, &w[i], &tokens[i]), PXL_OK);
  }
  for (int i = 0; i < N; i++) CHECK(drain_until(env, queue, &w[i].capture.calls, 1, 30000));
  int ok = 0;
  for (int i = 0; i < N; i++) ok += w[i].capture.status == PXL_OK;
  CHECK_INT(ok, N);
  CHECK_INT(atomic_load(&t.refreshes), 1);
  CHECKF(atomic_load(&t.auth_calls) >= 1 && atomic_load(&t.auth_calls) <= N, "%d calls after a 401",
         atomic_load(&t.auth_calls));
  CHECK_INT(atomic_load(&t.bad_answers), 0);
  CHECK_INT(atomic_load(&secrets.metrics_read), N);
  char want[96];
  snprintf(want, sizeof want, "Bearer %s-secret-1", realm);
  /* Each image reached the server at most twice (the old token, then the new one), and
   * its last request carried the new token. */
  for (int i = 0; i < N; i++) {
    CHECK(fault_stats(env, "uri", urls[i].uri, &stats));
    CHECKF(stats.requests >= 1 && stats.requests <= 2, "%s: %d requests", urls[i].uri, stats.requests);
    sent[0] = '\0';
    if (stats.count > 0) fault_header(&stats.record[stats.count - 1], "Authorization", sent, sizeof sent);
    CHECKF(strcmp(sent, want) == 0, "%s: last Authorization '%s' (want '%s')", urls[i].uri, sent, want);
    capture_reset(&w[i].capture);
  }

  /* Cached under the old token: served from memory, then from disk, never asked for. */
  request_for(&request, first.url, 64, 64, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_MEMORY);
  capture_reset(&c);
  pxl_loader_free(loader);
  int calls_before = atomic_load(&t.calls);
  loader = new_loader(&config);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(c.source, PXL_SOURCE_DISK);
  capture_reset(&c);
  CHECK(fault_stats(env, "uri", first.uri, &stats) && stats.requests == 1);
  CHECK_INT(atomic_load(&t.calls), calls_before); /* no transfer, no hook call */
  pxl_loader_free(loader);

  CHECK_INT(atomic_load(&secrets.in_log), 0);
  CHECK_INT(atomic_load(&secrets.in_metrics), 0);
  CHECK_INT(atomic_load(&secrets.in_messages), 0);
  pxl_queue_free(queue);
  service_stop(&t);
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  CHECK(system(command) == 0);
}

/* Every redirect hop asks the hook, with that hop's URL: a /go/to= redirect to /auth. */
void test_hook_redirect_hops(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  char realm[32];
  snprintf(realm, sizeof realm, "h%ld", env->run_id);
  struct token_service t;
  service_start(env, &t, realm, "hop-secret");
  struct secrets_seen secrets;
  memset(&secrets, 0, sizeof secrets);
  pxl_config config = hook_config(&t, &secrets);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  char path[128];
  snprintf(path, sizeof path, "/go/to=%%2Fauth%%2Frealm%%3D%s", realm);
  struct test_url u = fault_url(env, 0, path, "hook-hops");
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  struct capture c;
  memset(&c, 0, sizeof c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, &c), PXL_OK);
  CHECK_STATUS(c.status, PXL_OK);
  capture_reset(&c);
  CHECK_INT(atomic_load(&t.calls), 2);
  char second[400];
  snprintf(second, sizeof second, "%s/auth/realm=%s?%s", env->fault_url, realm, fault_query(&u));
  CHECKF(t.url_count == 2 && strcmp(t.urls[0], u.url) == 0 && strcmp(t.urls[1], second) == 0,
         "hook saw '%s' then '%s' (want '%s' then '%s')", t.urls[0], t.urls[1], u.url, second);
  CHECK(t.statuses[0] == 0 && t.statuses[1] == 0);
  struct fault_stats stats;
  char query[300];
  snprintf(query, sizeof query, "%s", fault_query(&u));
  CHECK(fault_stats(env, "query", query, &stats) && stats.requests == 2);
  for (int i = 0; i < stats.count; i++) {
    char sent[128] = "";
    fault_header(&stats.record[i], "Authorization", sent, sizeof sent);
    CHECKF(strcmp(sent, "Bearer hop-secret") == 0, "hop %d (%s): Authorization '%s'", i, stats.record[i].path, sent);
  }
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  service_stop(&t);
}

/* ---- hooks that answer by a fixed rule ---- */

struct rule_hook {
  pxl_status fail_with;   /* not PXL_OK: pxl_hook_fail with it */
  const char *header;     /* else this line (NULL: none) */
  const char *after_401;  /* and this one when asked after a 401 or 403 (NULL: header) */
  atomic_int calls, statuses[2]; /* statuses: [0] 401s, [1] 403s */
};

static void rule_hook_fn(const char *url, const char *const *headers, size_t count, int32_t status,
                         pxl_hook_call *call, void *user_data) {
  (void)url;
  (void)headers;
  (void)count;
  struct rule_hook *r = user_data;
  atomic_fetch_add(&r->calls, 1);
  if (status == 401) atomic_fetch_add(&r->statuses[0], 1);
  if (status == 403) atomic_fetch_add(&r->statuses[1], 1);
  if (r->fail_with != PXL_OK) {
    pxl_hook_fail(call, r->fail_with, "no account signed in");
    return;
  }
  const char *line = status && r->after_401 ? r->after_401 : r->header;
  pxl_hook_answer(call, line ? &line : NULL, line ? 1 : 0);
}

static pxl_loader *rule_loader(struct rule_hook *r) {
  pxl_config config;
  pxl_config_init(&config);
  config.request_hook = rule_hook_fn;
  config.request_hook_user_data = r;
  config.max_retries = 0;
  return new_loader(&config);
}

static void load_fault(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, const char *path,
                       const char *name, struct capture *c, struct test_url *u) {
  *u = fault_url(env, 0, path, name);
  pxl_request request;
  request_for(&request, u->url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  memset(c, 0, sizeof *c);
  CHECK_STATUS(load_and_wait(env, loader, queue, &request, c), PXL_OK);
}

/* A hook that fails ends its requests with its status and message, before any request
 * reaches the server. A 403 asks the hook again with 403 and the request is retried once
 * with the answer; a second refusal fails it (PXL_E_HTTP 401), the message free of the
 * token. An invalid answer fails the request with PXL_E_INVALID_ARGUMENT. */
void test_hook_failures(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  pxl_queue *queue = new_queue();
  char realm[32], path[96];
  snprintf(realm, sizeof realm, "f%ld", env->run_id);
  CHECK(fault_set_token(env, realm, "good-secret"));
  struct capture c;
  struct test_url u;
  struct fault_stats stats;

  struct rule_hook failing = {.fail_with = PXL_E_NOT_FOUND};
  pxl_loader *loader = rule_loader(&failing);
  snprintf(path, sizeof path, "/auth/realm=%s", realm);
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "hook-fail-%d", i);
    load_fault(env, loader, queue, path, name, &c, &u);
    CHECK_STATUS(c.status, PXL_E_NOT_FOUND);
    CHECKF(strstr(c.message, "no account signed in") != NULL, "message '%s'", c.message);
    CHECK(fault_stats(env, "uri", u.uri, &stats) && stats.requests == 0);
    capture_reset(&c);
  }
  CHECK_INT(atomic_load(&failing.calls), 3);
  pxl_loader_free(loader);

  /* A status this library does not know counts as PXL_E_IO (pixload.h, "Extensions"). */
  struct rule_hook odd = {.fail_with = (pxl_status)1234};
  loader = rule_loader(&odd);
  load_fault(env, loader, queue, path, "hook-fail-unknown", &c, &u);
  CHECK_STATUS(c.status, PXL_E_IO);
  CHECKF(strstr(c.message, "no account signed in") != NULL, "message '%s'", c.message);
  capture_reset(&c);
  pxl_loader_free(loader);

  struct rule_hook refreshing = {.header = "Authorization: Bearer stale-secret",
                                 .after_401 = "Authorization: Bearer good-secret"};
  loader = rule_loader(&refreshing);
  snprintf(path, sizeof path, "/auth/realm=%s/code=403", realm);
  load_fault(env, loader, queue, path, "hook-403", &c, &u);
  CHECK_STATUS(c.status, PXL_OK);
  CHECK_INT(atomic_load(&refreshing.calls), 2);
  CHECK_INT(atomic_load(&refreshing.statuses[1]), 1);
  CHECK(fault_stats(env, "uri", u.uri, &stats) && stats.requests == 2);
  capture_reset(&c);
  pxl_loader_free(loader);

  struct rule_hook stale = {.header = "Authorization: Bearer stale-secret"};
  loader = rule_loader(&stale);
  snprintf(path, sizeof path, "/auth/realm=%s", realm);
  load_fault(env, loader, queue, path, "hook-401-twice", &c, &u);
  CHECK_STATUS(c.status, PXL_E_HTTP);
  CHECK_INT(c.http_status, 401);
  CHECKF(strstr(c.message, "secret") == NULL, "message '%s'", c.message);
  CHECK_INT(atomic_load(&stale.calls), 2);
  CHECK_INT(atomic_load(&stale.statuses[0]), 1);
  CHECK(fault_stats(env, "uri", u.uri, &stats) && stats.requests == 2);
  capture_reset(&c);
  pxl_loader_free(loader);

  struct rule_hook invalid = {.header = "no colon here secret"};
  loader = rule_loader(&invalid);
  load_fault(env, loader, queue, path, "hook-invalid", &c, &u);
  CHECK_STATUS(c.status, PXL_E_INVALID_ARGUMENT);
  CHECKF(strstr(c.message, "secret") == NULL, "message '%s'", c.message);
  CHECK(fault_stats(env, "uri", u.uri, &stats) && stats.requests == 0);
  capture_reset(&c);
  pxl_loader_free(loader);

  /* A CR LF pair inside a line (one grapheme to Swift) is refused as a lone CR or LF is:
   * in a hook's answer, and in a request's own headers. */
  struct rule_hook crlf = {.header = "X-A: 1\r\nX-Injected: 1"};
  loader = rule_loader(&crlf);
  load_fault(env, loader, queue, path, "hook-crlf", &c, &u);
  CHECK_STATUS(c.status, PXL_E_INVALID_ARGUMENT);
  CHECK(fault_stats(env, "uri", u.uri, &stats) && stats.requests == 0);
  capture_reset(&c);
  const char *injected[] = {"X-A: 1\r\nX-Injected: 1", NULL};
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  request.headers = injected;
  pxl_token token;
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, &token), PXL_E_INVALID_ARGUMENT);
  pxl_loader_free(loader);

  CHECK_STATUS(pxl_hook_answer(NULL, NULL, 0), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_hook_fail(NULL, PXL_E_IO, NULL), PXL_E_INVALID_ARGUMENT);
  pxl_config config;
  pxl_config_init(&config);
  config.hook_timeout_ms = -1;
  pxl_loader *refused = (pxl_loader *)1;
  CHECK_STATUS(pxl_loader_new(&config, &refused), PXL_E_INVALID_ARGUMENT);
  pxl_queue_free(queue);
}

/* ---- a hook that keeps every call and answers only when the test says ---- */

struct keeper {
  pthread_mutex_t mutex;
  pxl_hook_call *calls[16];
  char urls[16][400];
  atomic_int count;
};

static void keeper_hook(const char *url, const char *const *headers, size_t count, int32_t status,
                        pxl_hook_call *call, void *user_data) {
  (void)headers;
  (void)count;
  (void)status;
  struct keeper *k = user_data;
  pthread_mutex_lock(&k->mutex);
  int i = atomic_load(&k->count);
  if (i < 16) {
    k->calls[i] = call;
    snprintf(k->urls[i], sizeof k->urls[i], "%s", url);
    atomic_fetch_add(&k->count, 1);
  }
  pthread_mutex_unlock(&k->mutex);
  /* "fast" URLs are answered at once: the others wait for the test. */
  if (strstr(url, "fast")) {
    pthread_mutex_lock(&k->mutex);
    k->calls[i] = NULL;
    pthread_mutex_unlock(&k->mutex);
    pxl_hook_answer(call, NULL, 0);
  }
}

static void wait_count(atomic_int *value, int target) {
  for (int waited = 0; atomic_load(value) < target && waited < 5000; waited += 5) sleep_ms(5);
}

/* A hook that never answers: the request ends in PXL_E_TIMEOUT after hook_timeout_ms, or
 * after timeout_ms when that is shorter; the late answer does nothing. A call waiting
 * holds no connection slot: with one slot, another request loads meanwhile. An answer
 * after its request was cancelled does nothing. */
void test_hook_misbehaving(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  for (int round = 0; round < 2; round++) {
    struct keeper k = {.mutex = PTHREAD_MUTEX_INITIALIZER};
    pxl_config config;
    pxl_config_init(&config);
    config.request_hook = keeper_hook;
    config.request_hook_user_data = &k;
    config.max_concurrent_downloads = 1;
    if (round == 0) {
      config.hook_timeout_ms = 400;
    } else {
      config.timeout_ms = 400; /* shorter than the hook's 30 s */
    }
    pxl_loader *loader = new_loader(&config);
    pxl_queue *queue = new_queue();
    struct test_url slow = fault_url(env, 0, "/image", round == 0 ? "hook-never" : "hook-never-timeout");
    pxl_request request;
    request_for(&request, slow.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture never;
    memset(&never, 0, sizeof never);
    pxl_token token;
    double started = now_ms();
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &never, &token), PXL_OK);
    wait_count(&k.count, 1);
    /* The only slot is free: another request loads while the first waits for its hook. */
    struct test_url fast = fault_url(env, 0, "/image", "hook-fast");
    request_for(&request, fast.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture other;
    memset(&other, 0, sizeof other);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &other), PXL_OK);
    CHECK_STATUS(other.status, PXL_OK);
    CHECK_INT(never.calls, 0);
    capture_reset(&other);
    CHECK(drain_until(env, queue, &never.calls, 1, 5000));
    double waited = now_ms() - started;
    CHECK_STATUS(never.status, PXL_E_TIMEOUT);
    CHECKF(waited >= 350 && waited < 3000 * env->slow_factor, "timed out after %.0f ms (want about 400)", waited);
    struct fault_stats stats;
    CHECK(fault_stats(env, "uri", slow.uri, &stats) && stats.requests == 0);
    const char *line = "Authorization: Bearer late-secret";
    CHECK_STATUS(pxl_hook_answer(k.calls[0], &line, 1), PXL_E_CANCELLED);
    CHECK(drain_for(queue, 100) == 0);

    /* Cancelled while its call waits: the answer finds nothing to do. */
    struct test_url cancelled = fault_url(env, 0, "/image", round == 0 ? "hook-cancelled" : "hook-cancelled-2");
    request_for(&request, cancelled.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture c;
    memset(&c, 0, sizeof c);
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c, &token), PXL_OK);
    wait_count(&k.count, 3);
    CHECK_INT(atomic_load(&k.count), 3);
    CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
    CHECK(drain_until(env, queue, &c.calls, 1, 5000));
    CHECK_STATUS(c.status, PXL_E_CANCELLED);
    CHECK_STATUS(pxl_hook_answer(k.calls[2], &line, 1), PXL_E_CANCELLED);
    CHECK(drain_for(queue, 100) == 0);
    CHECK(fault_stats(env, "uri", cancelled.uri, &stats) && stats.requests == 0);
    pxl_loader_free(loader);
    pxl_queue_free(queue);
    pthread_mutex_destroy(&k.mutex);
  }
}

/* A loader freed while its hook holds calls: their requests end PXL_E_CANCELLED, and the
 * calls stay valid until answered (doing nothing then). */
void test_hook_loader_freed(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  struct keeper k = {.mutex = PTHREAD_MUTEX_INITIALIZER};
  pxl_config config;
  pxl_config_init(&config);
  config.request_hook = keeper_hook;
  config.request_hook_user_data = &k;
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  struct capture c[3];
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "hook-freed-%d", i);
    struct test_url u = fault_url(env, 0, "/image", name);
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    memset(&c[i], 0, sizeof c[i]);
    pxl_token token;
    CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, &c[i], &token), PXL_OK);
  }
  wait_count(&k.count, 3);
  CHECK_INT(atomic_load(&k.count), 3);
  pxl_loader_free(loader);
  for (int i = 0; i < 3; i++) CHECK(drain_until(env, queue, &c[i].calls, 1, 5000));
  for (int i = 0; i < 3; i++) CHECK_STATUS(c[i].status, PXL_E_CANCELLED);
  CHECK_STATUS(pxl_hook_answer(k.calls[0], NULL, 0), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_hook_fail(k.calls[1], PXL_E_IO, "too late"), PXL_E_CANCELLED);
  const char *line = "X-Late: 1";
  CHECK_STATUS(pxl_hook_answer(k.calls[2], &line, 1), PXL_E_CANCELLED);
  pxl_queue_free(queue);
  pthread_mutex_destroy(&k.mutex);
}

/* ---- misuse: a call answered twice, a stale call, answers racing the request's end ---- */

/* A hook that answers "fast" URLs at once and keeps the latest other call. */
struct latest_call {
  _Atomic(pxl_hook_call *) call;
  atomic_int count;
};

static void latest_hook(const char *url, const char *const *headers, size_t count, int32_t status,
                        pxl_hook_call *call, void *user_data) {
  (void)headers;
  (void)count;
  (void)status;
  struct latest_call *l = user_data;
  if (strstr(url, "fast")) {
    pxl_hook_answer(call, NULL, 0);
  } else {
    atomic_store(&l->call, call);
  }
  atomic_fetch_add(&l->count, 1);
}

static void latest_config(pxl_config *config, struct latest_call *l) {
  pxl_config_init(config);
  config->request_hook = latest_hook;
  config->request_hook_user_data = l;
}

/* Loads case_name through the fault server and returns the call its hook kept. */
static pxl_hook_call *kept_call(const struct test_env *env, pxl_loader *loader, pxl_queue *queue, struct latest_call *l,
                                const char *case_name, struct capture *c, pxl_token *token) {
  struct test_url u = fault_url(env, 0, "/image", case_name);
  pxl_request request;
  request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
  memset(c, 0, sizeof *c);
  int before = atomic_load(&l->count);
  atomic_store(&l->call, NULL);
  CHECK_STATUS(pxl_load(loader, &request, queue, capture_callback, c, token), PXL_OK);
  wait_count(&l->count, before + 1);
  pxl_hook_call *call = atomic_load(&l->call);
  CHECKF(call != NULL, "no hook call for %s", case_name);
  return call;
}

/* A call answered (or failed) once is refused afterwards with PXL_E_INVALID_ARGUMENT and
 * nothing happens, also a late call's second answer after its first got PXL_E_CANCELLED
 * and a call whose slot later calls took over: a stale call never answers another. */
void test_hook_answered_twice(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  struct latest_call l = {0};
  pxl_config config;
  latest_config(&config, &l);
  pxl_loader *loader = new_loader(&config);
  pxl_queue *queue = new_queue();
  const char *line = "X-Twice: 1";
  struct capture c;
  pxl_token token;

  pxl_hook_call *answered = kept_call(env, loader, queue, &l, "hook-twice-answered", &c, &token);
  CHECK_STATUS(pxl_hook_answer(answered, &line, 1), PXL_OK);
  CHECK_STATUS(pxl_hook_answer(answered, &line, 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_hook_fail(answered, PXL_E_IO, "twice"), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_OK);
  capture_reset(&c);

  pxl_hook_call *failed = kept_call(env, loader, queue, &l, "hook-twice-failed", &c, &token);
  CHECK_STATUS(pxl_hook_fail(failed, PXL_E_NOT_FOUND, "no token"), PXL_OK);
  CHECK_STATUS(pxl_hook_answer(failed, NULL, 0), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_hook_fail(failed, PXL_E_IO, "twice"), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_NOT_FOUND);

  /* A bad answer fails the request and uses the call up. */
  pxl_hook_call *bad = kept_call(env, loader, queue, &l, "hook-twice-bad", &c, &token);
  const char *broken = "no colon";
  CHECK_STATUS(pxl_hook_answer(bad, &broken, 1), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_hook_answer(bad, NULL, 0), PXL_E_INVALID_ARGUMENT);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_INVALID_ARGUMENT);

  /* Cancelled: the first answer is late (CANCELLED), the second misuse. */
  pxl_hook_call *late = kept_call(env, loader, queue, &l, "hook-twice-cancelled", &c, &token);
  CHECK_STATUS(pxl_cancel(loader, token), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_E_CANCELLED);
  CHECK_STATUS(pxl_hook_fail(late, PXL_E_IO, "late"), PXL_E_CANCELLED);
  CHECK_STATUS(pxl_hook_fail(late, PXL_E_IO, "late"), PXL_E_INVALID_ARGUMENT);

  /* Later calls reuse what the answered ones held; a stale call answers none of them. */
  pxl_hook_call *stale = kept_call(env, loader, queue, &l, "hook-twice-stale", &c, &token);
  CHECK_STATUS(pxl_hook_answer(stale, NULL, 0), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  capture_reset(&c);
  for (int i = 0; i < 20; i++) {
    char name[48];
    snprintf(name, sizeof name, "hook-twice-fast-%d", i);
    struct test_url u = fault_url(env, 0, "/image", name);
    pxl_request request;
    request_for(&request, u.url, 0, 0, PXL_MODE_FIT, PXL_FORMAT_RGBA8);
    struct capture fast;
    memset(&fast, 0, sizeof fast);
    CHECK_STATUS(load_and_wait(env, loader, queue, &request, &fast), PXL_OK);
    CHECK_STATUS(fast.status, PXL_OK);
    capture_reset(&fast);
  }
  pxl_hook_call *held = kept_call(env, loader, queue, &l, "hook-twice-held", &c, &token);
  CHECK(held != stale);
  CHECK_STATUS(pxl_hook_fail(stale, PXL_E_IO, "stale"), PXL_E_INVALID_ARGUMENT);
  CHECK_STATUS(pxl_hook_answer(stale, NULL, 0), PXL_E_INVALID_ARGUMENT);
  CHECK_INT(drain_for(queue, 100), 0); /* the held request still waits for its own call */
  CHECK_STATUS(pxl_hook_answer(held, NULL, 0), PXL_OK);
  CHECK(drain_until(env, queue, &c.calls, 1, 5000));
  CHECK_STATUS(c.status, PXL_OK);
  capture_reset(&c);

  CHECK_STATUS(pxl_hook_answer(NULL, NULL, 0), PXL_E_INVALID_ARGUMENT);
  pxl_loader_free(loader);
  /* After the loader: a call answered before stays refused. */
  CHECK_STATUS(pxl_hook_answer(held, NULL, 0), PXL_E_INVALID_ARGUMENT);
  pxl_queue_free(queue);
}

struct answer_racer {
  pxl_hook_call *call;
  int fail;
  atomic_int *go;
  pxl_status status;
};

static void *race_answer(void *arg) {
  struct answer_racer *r = arg;
  while (!atomic_load(r->go)) sched_yield();
  r->status = r->fail ? pxl_hook_fail(r->call, PXL_E_IO, "raced") : pxl_hook_answer(r->call, NULL, 0);
  return NULL;
}

/* Starts two threads answering call at once (one answers, one fails), lets them go with
 * end (a cancel, a loader free) on this thread, and checks that the first answer counted
 * (PXL_OK, or PXL_E_CANCELLED when the end came first) and the other was refused. */
static void race_two_answers(pxl_hook_call *call, void (*end)(void *), void *arg) {
  atomic_int go = 0;
  struct answer_racer racers[2] = {{call, 0, &go, 0}, {call, 1, &go, 0}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, race_answer, &racers[i]);
  atomic_store(&go, 1);
  end(arg);
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  int refused = 0, counted = 0;
  for (int i = 0; i < 2; i++) {
    if (racers[i].status == PXL_E_INVALID_ARGUMENT) refused++;
    if (racers[i].status == PXL_OK || racers[i].status == PXL_E_CANCELLED) counted++;
  }
  CHECKF(refused == 1 && counted == 1, "answers returned %s and %s", pxl_status_string(racers[0].status),
         pxl_status_string(racers[1].status));
  CHECK_STATUS(pxl_hook_answer(call, NULL, 0), PXL_E_INVALID_ARGUMENT);
}

struct cancel_arg {
  pxl_loader *loader;
  pxl_token token;
};

static void cancel_end(void *arg) {
  struct cancel_arg *a = arg;
  pxl_cancel(a->loader, a->token);
}

static void free_end(void *arg) { pxl_loader_free(arg); }

/* Two host threads answer one call while the request is cancelled, or its loader freed:
 * the first answer counts, the other is refused, and the request ends exactly once. */
void test_hook_answer_races(const struct test_env *env) {
  if (!env->fault_url) {
    CHECKF(0, "no --fault-url given");
    return;
  }
  struct latest_call l = {0};
  pxl_config config;
  latest_config(&config, &l);
  pxl_queue *queue = new_queue();
  pxl_loader *loader = new_loader(&config);
  for (int round = 0; round < 30; round++) {
    char name[48];
    snprintf(name, sizeof name, "hook-race-cancel-%d", round);
    struct capture c;
    struct cancel_arg a = {loader, 0};
    pxl_hook_call *call = kept_call(env, loader, queue, &l, name, &c, &a.token);
    race_two_answers(call, cancel_end, &a);
    CHECK(drain_until(env, queue, &c.calls, 1, 5000));
    CHECKF(c.status == PXL_OK || c.status == PXL_E_CANCELLED || c.status == PXL_E_IO, "round %d: %s", round,
           pxl_status_string(c.status));
    CHECK_INT(drain_for(queue, 20), 0);
    CHECK_INT(atomic_load(&c.calls), 1);
    capture_reset(&c);
  }
  pxl_loader_free(loader);
  for (int round = 0; round < 6; round++) {
    char name[48];
    snprintf(name, sizeof name, "hook-race-free-%d", round);
    loader = new_loader(&config);
    struct capture c;
    pxl_token token;
    pxl_hook_call *call = kept_call(env, loader, queue, &l, name, &c, &token);
    race_two_answers(call, free_end, loader);
    CHECK(drain_until(env, queue, &c.calls, 1, 5000));
    CHECK_INT(drain_for(queue, 20), 0);
    CHECK_INT(atomic_load(&c.calls), 1);
    capture_reset(&c);
  }
  pxl_queue_free(queue);
}
