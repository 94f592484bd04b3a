/*
 * Tests/e2e/exhaust.c: resource-exhaustion cases, driven by Tests/e2e/exhaustion.sh.
 * Against the public header only. Each mode prints "name: value" measurements, then
 * "PASS what" or "FAIL what" lines, which the script counts.
 *
 *   exhaust queued N                   N loads queued behind a server that never answers:
 *                                      RSS per queued request; then every one CANCELLED
 *                                      exactly once when the loader is freed
 *   exhaust undrained NGINX_URL N      N full-size images for a queue nobody drains (memory
 *                                      cache off): the undrained results stay bounded, then
 *                                      draining delivers all N exactly once
 *   exhaust loads NGINX_URL N DIR      N loads with a disk cache in DIR (0 bytes: none);
 *                                      every callback arrives within 60 s; statuses counted
 *                                      (used under a full disk and a low `ulimit -n`)
 *   exhaust threads FIXTURE_DIR DIR    under Tests/e2e/thread_limit.c (LD_PRELOAD), which
 *                                      fails pthread_create after n successes: for n = 0,
 *                                      1, 2, ... pxl_loader_new (disk cache in DIR) fails
 *                                      with PXL_E_NO_MEMORY and *out NULL, leaving no
 *                                      thread or fd behind, until n threads are enough;
 *                                      then a loader loads a file:// image
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"

static int failures;
#define VERDICT(ok, ...)                                                                                \
  do {                                                                                                  \
    printf("%s ", (ok) ? "PASS" : "FAIL");                                                              \
    printf(__VA_ARGS__);                                                                                \
    printf("\n");                                                                                       \
    if (!(ok)) failures++;                                                                              \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}
static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}
static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct tally {
  atomic_int calls_total;
  atomic_int by_status[32];
  atomic_int duplicate;
};
struct one {
  atomic_int calls;
  struct tally *tally;
};
static void on_result(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct one *o = user_data;
  if (atomic_fetch_add(&o->calls, 1) != 0) atomic_fetch_add(&o->tally->duplicate, 1);
  int s = (int)result->status;
  atomic_fetch_add(&o->tally->by_status[s >= 0 && s < 32 ? s : 31], 1);
  atomic_fetch_add(&o->tally->calls_total, 1);
}

static void print_statuses(struct tally *t) {
  printf("statuses:");
  for (int i = 0; i < 32; i++)
    if (atomic_load(&t->by_status[i])) printf(" %s=%d", pxl_status_string((pxl_status)i), atomic_load(&t->by_status[i]));
  printf("\n");
}

/* Drains q until want callbacks arrived or timeout_ms passed. */
static void drain_until(pxl_queue *q, struct tally *t, int want, int timeout_ms) {
  double deadline = now_ms() + timeout_ms;
  while (atomic_load(&t->calls_total) < want && now_ms() < deadline) {
    pxl_queue_wait(q, 50);
    pxl_queue_dispatch(q, 0);
  }
}

/* A listening socket nobody accepts on: connections complete in the kernel's backlog, and
 * no byte ever comes back. */
static int silent_server(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 512) != 0) return -1;
  socklen_t len = sizeof addr;
  getsockname(fd, (struct sockaddr *)&addr, &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

static int mode_queued(int n) {
  int port;
  int listener = silent_server(&port);
  if (listener < 0) { VERDICT(0, "queued: cannot listen"); return 1; }
  pxl_loader *loader = NULL;
  pxl_queue *q = NULL;
  pxl_config cfg;
  pxl_config_init(&cfg);
  if (pxl_loader_new(&cfg, &loader) != PXL_OK || pxl_queue_new(&q) != PXL_OK) { VERDICT(0, "queued: setup"); return 1; }
  struct tally t = {0};
  struct one *ones = calloc((size_t)n, sizeof *ones);
  char url[128];
  /* Warm-up: the first requests grow the library's tables and libcurl's state. */
  pxl_request req;
  pxl_request_init(&req);
  req.url = url;
  req.width = 150;
  req.height = 150;
  sleep_ms(200);
  long before = rss_kb();
  double started = now_ms();
  int accepted = 0;
  for (int i = 0; i < n; i++) {
    snprintf(url, sizeof url, "http://127.0.0.1:%d/image-%d.jpg", port, i);
    ones[i].tally = &t;
    if (pxl_load(loader, &req, q, on_result, &ones[i], NULL) == PXL_OK) accepted++;
  }
  double issue_ms = now_ms() - started;
  sleep_ms(300);
  long after = rss_kb();
  double per = (after - before) * 1024.0 / n;
  printf("queued requests: %d (accepted %d) in %.0f ms\n", n, accepted, issue_ms);
  printf("RSS before %ld KiB, after %ld KiB: %.0f bytes per queued request\n", before, after, per);
  VERDICT(accepted == n, "queued: all %d accepted", n);
  VERDICT(per < 4096, "queued: memory per queued request %.0f B < 4096 B", per);
  VERDICT(pxl_queue_pending(q) == 0, "queued: nothing completed early (%d pending)", pxl_queue_pending(q));
  double free_started = now_ms();
  pxl_loader_free(loader);
  printf("pxl_loader_free with %d in flight: %.0f ms\n", n, now_ms() - free_started);
  drain_until(q, &t, n, 30000);
  VERDICT(atomic_load(&t.calls_total) == n && atomic_load(&t.by_status[PXL_E_CANCELLED]) == n && !atomic_load(&t.duplicate),
          "queued: %d CANCELLED callbacks of %d, %d duplicates", atomic_load(&t.by_status[PXL_E_CANCELLED]), n,
          atomic_load(&t.duplicate));
  pxl_queue_free(q);
  close(listener);
  free(ones);
  return failures;
}

static int mode_undrained(const char *base, int n) {
  pxl_loader *loader = NULL;
  pxl_queue *q = NULL;
  pxl_config cfg;
  pxl_config_init(&cfg);
  cfg.memory_cache_bytes = 0; /* the queue is the only holder of the pixels */
  if (pxl_loader_new(&cfg, &loader) != PXL_OK || pxl_queue_new(&q) != PXL_OK) { VERDICT(0, "undrained: setup"); return 1; }
  struct tally t = {0};
  struct one *ones = calloc((size_t)n, sizeof *ones);
  char url[256];
  pxl_request req;
  pxl_request_init(&req);
  req.url = url; /* full size: 640x480 RGBA, 1,228,800 bytes each */
  long before = rss_kb();
  for (int i = 0; i < n; i++) {
    snprintf(url, sizeof url, "%s/gradient.jpg?undrained=%d", base, i);
    ones[i].tally = &t;
    pxl_load(loader, &req, q, on_result, &ones[i], NULL);
  }
  /* Nobody drains: wait until the pending count has not moved for 2 s. */
  int last = -1;
  double still_since = now_ms(), started = now_ms();
  long peak = 0;
  while (now_ms() - still_since < 2000 && now_ms() - started < 60000) {
    sleep_ms(100);
    int pending = pxl_queue_pending(q);
    long r = rss_kb();
    if (r > peak) peak = r;
    if (pending != last) {
      last = pending;
      still_since = now_ms();
    }
  }
  long image = 640L * 480 * 4;
  printf("undrained: %d requested, %d results waiting (%ld MiB of pixels), RSS grew %ld MiB (peak %ld KiB)\n", n, last,
         last * image >> 20, (peak - before) >> 10, peak);
  printf("undrained: unbounded this would be %ld MiB of pixels\n", n * image >> 20);
  /* The bound: 64 MiB, plus what was decoding when it was reached (a few images). */
  VERDICT(last > 0 && last * image <= (64L << 20) + 8 * image, "undrained: waiting results hold <= 64 MiB + 8 images (%ld MiB)",
          last * image >> 20);
  VERDICT(peak - before < 200 * 1024, "undrained: RSS growth %ld MiB < 200 MiB", (peak - before) >> 10);
  /* Now the host drains: every request completes, with its image, exactly once. */
  drain_until(q, &t, n, 60000);
  print_statuses(&t);
  VERDICT(atomic_load(&t.calls_total) == n && atomic_load(&t.by_status[PXL_OK]) == n && !atomic_load(&t.duplicate),
          "undrained: after draining %d of %d callbacks, %d OK, %d duplicates", atomic_load(&t.calls_total), n,
          atomic_load(&t.by_status[PXL_OK]), atomic_load(&t.duplicate));
  pxl_queue_free(q);
  pxl_loader_free(loader);
  free(ones);
  return failures;
}

/* The library's log lines, one per line on stderr, which exhaustion.sh counts. */
static void log_to_stderr(int32_t level, const char *message, void *user_data) {
  (void)level, (void)user_data;
  fprintf(stderr, "%s\n", message);
}

static int mode_loads(const char *base, int n, const char *dir) {
  pxl_loader *loader = NULL;
  pxl_queue *q = NULL;
  pxl_config cfg;
  pxl_config_init(&cfg);
  cfg.log = log_to_stderr;
  if (strcmp(dir, "-") != 0) {
    cfg.disk_cache_bytes = 64 << 20;
    cfg.disk_cache_dir = dir;
  }
  cfg.timeout_ms = 20000;
  pxl_status st = pxl_queue_new(&q);
  printf("pxl_queue_new: %s\n", pxl_status_string(st));
  if (st != PXL_OK) {
    /* A clear status is the contract here; a crash or hang would not be. */
    VERDICT(st == PXL_E_IO || st == PXL_E_NO_MEMORY, "loads: queue refused with a clear status (%s)", pxl_status_string(st));
    return failures;
  }
  st = pxl_loader_new(&cfg, &loader);
  printf("pxl_loader_new: %s\n", pxl_status_string(st));
  if (st != PXL_OK) {
    VERDICT(loader == NULL && (st == PXL_E_IO || st == PXL_E_NO_MEMORY), "loads: loader refused with a clear status (%s)",
            pxl_status_string(st));
    pxl_queue_free(q);
    return failures;
  }
  struct tally t = {0};
  struct one *ones = calloc((size_t)n, sizeof *ones);
  char url[256];
  pxl_request req;
  pxl_request_init(&req);
  req.url = url;
  req.width = 150;
  req.height = 150;
  int accepted = 0;
  for (int i = 0; i < n; i++) {
    snprintf(url, sizeof url, "%s/%s?loads=%d", base, i % 3 ? "gradient.jpg" : "alpha.png", i);
    ones[i].tally = &t;
    if (pxl_load(loader, &req, q, on_result, &ones[i], NULL) == PXL_OK) accepted++;
  }
  double started = now_ms();
  drain_until(q, &t, accepted, 60000);
  printf("loads: %d accepted, %d callbacks in %.0f ms\n", accepted, atomic_load(&t.calls_total), now_ms() - started);
  print_statuses(&t);
  int ok = atomic_load(&t.by_status[PXL_OK]);
  printf("loads ok: %d\n", ok);
  VERDICT(atomic_load(&t.calls_total) == accepted && !atomic_load(&t.duplicate), "loads: every accepted request called back once (%d of %d)",
          atomic_load(&t.calls_total), accepted);
  pxl_loader_free(loader);
  pxl_queue_free(q);
  free(ones);
  return failures;
}

/* Entries in a /proc/self directory (threads: "task", descriptors: "fd"). */
static int proc_entries(const char *name) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/%s", name);
  DIR *dir = opendir(path);
  if (!dir) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(dir));)
    if (e->d_name[0] != '.') n++;
  closedir(dir);
  return n - (strcmp(name, "fd") == 0); /* the directory's own descriptor */
}

/* The thread count once it is back to want: a thread that pthread_join returned for may
 * still be listed for a moment while the kernel finishes its exit. A thread left running
 * stays, and the count does not come back within the second. */
static int threads_settled(int want) {
  double deadline = now_ms() + 1000;
  int n;
  while ((n = proc_entries("task")) != want && now_ms() < deadline) sleep_ms(1);
  return n;
}

static int mode_threads(const char *fixture_dir, const char *cache_dir) {
  void (*set_budget)(long) = (void (*)(long))dlsym(RTLD_DEFAULT, "pxl_test_thread_budget");
  if (!set_budget) {
    VERDICT(0, "threads: run with LD_PRELOAD=thread_limit.so (no pxl_test_thread_budget)");
    return failures;
  }
  pxl_config cfg;
  pxl_config_init(&cfg);
  cfg.decode_threads = 2;
  cfg.disk_cache_bytes = 16 << 20; /* its threads too */
  cfg.disk_cache_dir = cache_dir;
  cfg.allowed_schemes |= PXL_SCHEME_FILE;
  /* One loader first: what the first one initialises once (libcurl, the runtime) is not
   * a leak of a later failure. */
  pxl_loader *loader = NULL;
  if (pxl_loader_new(&cfg, &loader) != PXL_OK) { VERDICT(0, "threads: a first loader"); return failures; }
  pxl_loader_free(loader);
  int threads = proc_entries("task"), fds = proc_entries("fd");
  printf("threads: %d threads and %d descriptors before\n", threads, fds);
  int refusals = 0, started = -1;
  for (long n = 0; n <= 64 && started < 0; n++) {
    set_budget(n);
    loader = (pxl_loader *)&cfg; /* not NULL: a failure must clear it */
    pxl_status st = pxl_loader_new(&cfg, &loader);
    set_budget(-1);
    if (st == PXL_OK) {
      started = (int)n;
      break;
    }
    refusals++;
    VERDICT(st == PXL_E_NO_MEMORY && loader == NULL, "threads: %ld threads allowed: pxl_loader_new %s, out %s", n,
            pxl_status_string(st), loader ? "not NULL" : "NULL");
    int now_threads = threads_settled(threads), now_fds = proc_entries("fd");
    VERDICT(now_threads == threads && now_fds == fds, "threads: %ld threads allowed: %d threads, %d descriptors after (%d, %d before)",
            n, now_threads, now_fds, threads, fds);
  }
  printf("threads: %d refusals; a loader starts with %d threads\n", refusals, started);
  VERDICT(started > 1 && refusals == started, "threads: refused while threads ran out, started with %d allowed", started);
  if (started < 0) return failures;
  pxl_loader_free(loader);
  /* Threads are back: a loader works as if nothing happened. */
  pxl_queue *q = NULL;
  if (pxl_loader_new(&cfg, &loader) != PXL_OK || pxl_queue_new(&q) != PXL_OK) { VERDICT(0, "threads: setup after"); return failures; }
  char url[1024];
  snprintf(url, sizeof url, "file://%s/gradient.jpg", fixture_dir);
  pxl_request req;
  pxl_request_init(&req);
  req.url = url;
  req.width = 64;
  req.height = 48;
  struct tally t = {0};
  struct one o = {.tally = &t};
  pxl_status st = pxl_load(loader, &req, q, on_result, &o, NULL);
  drain_until(q, &t, 1, 30000);
  VERDICT(st == PXL_OK && atomic_load(&t.by_status[PXL_OK]) == 1, "threads: afterwards a loader loads an image (%s, %d OK)",
          pxl_status_string(st), atomic_load(&t.by_status[PXL_OK]));
  pxl_loader_free(loader);
  pxl_queue_free(q);
  return failures;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Under `ulimit -f` a write past the limit fails with EFBIG instead of killing us. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc >= 3 && strcmp(argv[1], "queued") == 0) return mode_queued(atoi(argv[2])) ? 1 : 0;
  if (argc >= 4 && strcmp(argv[1], "undrained") == 0) return mode_undrained(argv[2], atoi(argv[3])) ? 1 : 0;
  if (argc >= 5 && strcmp(argv[1], "loads") == 0) return mode_loads(argv[2], atoi(argv[3]), argv[4]) ? 1 : 0;
  if (argc >= 4 && strcmp(argv[1], "threads") == 0) return mode_threads(argv[2], argv[3]) ? 1 : 0;
  fprintf(stderr, "usage: exhaust queued N | undrained NGINX_URL N | loads NGINX_URL N DIR|- | threads FIXTURE_DIR DIR\n");
  return 2;
}
