/*
 * bench/cancel_all.c: how long pxl_cancel_all takes for N queued requests
 * (`make bench-cancel`; BENCH_CANCEL_COUNTS, default "5000 20000 50000").
 *
 * The loader may run one transfer at a time, to a local socket that accepts the
 * connection (the kernel's backlog does) and never answers: that transfer holds the only
 * slot, so every other request waits in the engine's list when pxl_cancel_all runs. Each
 * URL differs, so no two requests share a download; with --shared every request asks
 * for the same image, so all N share one download and one decode. Reports wall and CPU
 * time of the pxl_cancel_all call alone (the min of RUNS rounds) and the time per
 * request; linear cancelling keeps the per-request figure flat as N grows.
 *
 *   cancel_all RUNS [--shared] N...
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"

static double seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void ignore_result(pxl_token token, const pxl_result *result, void *user) {
  (void)token, (void)result;
  ++*(long *)user;
}

/* A listening socket nobody accepts from: connects succeed, requests never get an answer. */
static int silent_listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    perror("cancel_all: listener");
    exit(1);
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

/* One round: queue `count` loads, cancel them all; returns wall and CPU seconds of the
 * cancel. */
static void round_of(int port, int count, int shared, double *wall, double *cpu) {
  pxl_config config;
  pxl_config_init(&config);
  config.max_concurrent_downloads = 1;
  config.max_retries = 0;
  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  if (pxl_loader_new(&config, &loader) != PXL_OK || pxl_queue_new(&queue) != PXL_OK) {
    fprintf(stderr, "cancel_all: cannot create a loader or queue\n");
    exit(1);
  }
  long callbacks = 0;
  char url[128];
  for (int i = 0; i < count; i++) {
    snprintf(url, sizeof url, "http://127.0.0.1:%d/img/%d.jpg", port, shared ? 0 : i);
    pxl_request request;
    pxl_request_init(&request);
    request.url = url;
    request.width = request.height = 64;
    request.priority = i % 3 - 1;
    if (pxl_load(loader, &request, queue, ignore_result, &callbacks, NULL) != PXL_OK) {
      fprintf(stderr, "cancel_all: pxl_load failed\n");
      exit(1);
    }
  }
  /* Let the engine start its one transfer, so the rest are waiting, not just posted. */
  nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
  double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
  int cancelled = pxl_cancel_all(loader, NULL);
  *cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  *wall = seconds(CLOCK_MONOTONIC) - wall0;
  if (cancelled != count) {
    fprintf(stderr, "cancel_all: cancelled %d of %d\n", cancelled, count);
    exit(1);
  }
  while (callbacks < count) pxl_queue_dispatch(queue, 0);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s RUNS [--shared] N...\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[1]);
  int first = 2, shared = 0;
  if (strcmp(argv[2], "--shared") == 0) first = 3, shared = 1;
  int port;
  int listener = silent_listener(&port);
  printf("%-8s %12s %12s %16s  %s\n", "N", "wall ms", "CPU ms", "CPU us/request",
         shared ? "(one shared URL)" : "(distinct URLs)");
  for (int a = first; a < argc; a++) {
    int count = atoi(argv[a]);
    double best_wall = 1e9, best_cpu = 1e9;
    for (int r = 0; r < runs; r++) {
      double wall, cpu;
      round_of(port, count, shared, &wall, &cpu);
      if (wall < best_wall) best_wall = wall;
      if (cpu < best_cpu) best_cpu = cpu;
    }
    printf("%-8d %12.1f %12.1f %16.2f\n", count, best_wall * 1e3, best_cpu * 1e3, best_cpu * 1e6 / count);
    fflush(stdout);
  }
  close(listener);
  return 0;
}
