/*
 * bench/stream_decode.c: what is left after the last byte of a slow download. A JPEG (or
 * any file the library decodes: a WebP made by cwebp from the same photo, say) is
 * served from a server thread in this process at RATE bytes/s (pieces every 10 ms, with
 * Content-Length); pixload loads it (memory cache skipped, no disk cache) as a 150x150 FILL
 * thumbnail and at full size, REPS times each, interleaved. Per request it prints the
 * time from the server's last send() to the callback (measured here, so a library without
 * the metric is measured the same way: run it against an older libpixload for "before"),
 * pixload's own after_last_byte_us when the library has it, and decode_us; then the
 * medians, and the full-size decode from memory (a file: URL's decode_us) for the ratio;
 * also the whole process's CPU time per request (server thread included).
 *
 *   stream_decode FILE RATE REPS
 */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"

/* The whole process's CPU time (the server thread's pacing is the same for every build). */
static double cpu_ms(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint8_t *body;
static size_t body_size;
static long rate;
static int listener;
static _Atomic uint64_t last_sent_ns;

/* Serves every connection it accepts, one at a time: the body at `rate`. */
static void *serve(void *unused) {
  (void)unused;
  for (;;) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) return NULL;
    char request[4096];
    size_t got = 0;
    while (got < sizeof request - 1) {
      ssize_t n = read(fd, request + got, sizeof request - 1 - got);
      if (n <= 0) break;
      got += (size_t)n;
      request[got] = 0;
      if (strstr(request, "\r\n\r\n") != NULL) break;
    }
    char head[256];
    int head_size = snprintf(head, sizeof head,
                             "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n", body_size);
    if (write(fd, head, (size_t)head_size) != head_size) {
      close(fd);
      continue;
    }
    size_t piece = (size_t)(rate / 100);
    uint64_t start = now_ns();
    for (size_t at = 0; at < body_size; at += piece) {
      size_t n = body_size - at < piece ? body_size - at : piece;
      uint64_t due = start + (uint64_t)((double)at / (double)rate * 1e9);
      uint64_t t = now_ns();
      if (due > t) {
        struct timespec wait = {(time_t)((due - t) / 1000000000u), (long)((due - t) % 1000000000u)};
        nanosleep(&wait, NULL);
      }
      if (write(fd, body + at, n) != (ssize_t)n) break;
    }
    last_sent_ns = now_ns();
    shutdown(fd, SHUT_WR);
    close(fd);
  }
}

typedef struct outcome {
  int done;
  pxl_status status;
  uint64_t callback_ns;
  int has_metric;
  uint64_t after_last_byte_us, decode_us;
} outcome;

static void on_result(pxl_token token, const pxl_result *result, void *user) {
  (void)token;
  outcome *o = user;
  o->callback_ns = now_ns();
  o->status = result->status;
  pxl_metrics m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  if (pxl_result_metrics(result, &m) == PXL_OK) {
    o->decode_us = m.decode_us;
    o->has_metric = m.struct_size >= offsetof(pxl_metrics, after_last_byte_us) + sizeof(uint64_t);
    if (o->has_metric) o->after_last_byte_us = m.after_last_byte_us;
  }
  o->done = 1;
}

static outcome load(pxl_loader *loader, pxl_queue *queue, const char *url, int side) {
  outcome o;
  memset(&o, 0, sizeof o);
  pxl_request request;
  pxl_request_init(&request);
  request.url = url;
  request.width = side;
  request.height = side;
  request.mode = PXL_MODE_FILL;
  request.flags = PXL_FLAG_SKIP_MEMORY_CACHE;
  pxl_status status = pxl_load(loader, &request, queue, on_result, &o, NULL);
  if (status != PXL_OK) {
    fprintf(stderr, "stream_decode: pxl_load %s: %s\n", url, pxl_status_string(status));
    exit(1);
  }
  while (!o.done) {
    pxl_queue_wait(queue, 60000);
    pxl_queue_dispatch(queue, 0);
  }
  if (o.status != PXL_OK) {
    fprintf(stderr, "stream_decode: %s: %s\n", url, pxl_status_string(o.status));
    exit(1);
  }
  return o;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: stream_decode FILE RATE REPS\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) return 1;
  fseek(f, 0, SEEK_END);
  body_size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  body = malloc(body_size);
  if (fread(body, 1, body_size, f) != body_size) return 1;
  fclose(f);
  char path[4096];
  if (realpath(argv[1], path) == NULL) return 1;
  rate = atol(argv[2]);
  int reps = atoi(argv[3]);
  if (rate < 100 || reps < 1 || reps > 64) return 2;

  listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof address;
  if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 8) != 0 ||
      getsockname(listener, (struct sockaddr *)&address, &length) != 0)
    return 1;
  pthread_t server;
  pthread_create(&server, NULL, serve, NULL);

  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes |= PXL_SCHEME_FILE; /* the decode from memory */
  pxl_loader *loader = NULL;
  if (pxl_loader_new(&config, &loader) != PXL_OK) return 1;
  pxl_queue *queue = NULL;
  if (pxl_queue_new(&queue) != PXL_OK) return 1;

  static const int sides[2] = {150, 0};
  static const char *names[2] = {"150x150 thumbnail", "full size"};
  double outside[2][64], metric[2][64], decode[2][64], cpu[2][64], memory[64];
  int has_metric = 1;
  printf("%s: %zu bytes at %ld bytes/s, %d rounds; libpixload %s\n", argv[1], body_size, rate, reps,
         pxl_version());
  for (int r = 0; r < reps; r++) {
    for (int s = 0; s < 2; s++) {
      char url[128];
      snprintf(url, sizeof url, "http://127.0.0.1:%d/photo.jpg?r=%d&s=%d", ntohs(address.sin_port), r, s);
      double cpu_before = cpu_ms();
      outcome o = load(loader, queue, url, sides[s]);
      cpu[s][r] = cpu_ms() - cpu_before;
      outside[s][r] = (double)(o.callback_ns - last_sent_ns) / 1000.0;
      metric[s][r] = (double)o.after_last_byte_us;
      decode[s][r] = (double)o.decode_us;
      has_metric &= o.has_metric;
      printf("  %-18s round %d: last byte sent to callback %8.0f us, after_last_byte_us %8.0f, decode_us %8.0f, "
             "process CPU %6.1f ms\n", names[s], r, outside[s][r], o.has_metric ? metric[s][r] : -1.0, decode[s][r],
             cpu[s][r]);
    }
    char url[4200];
    snprintf(url, sizeof url, "file://%s", path);
    memory[r] = (double)load(loader, queue, url, 0).decode_us;
  }
  double full_memory = median(memory, reps);
  printf("medians:\n");
  for (int s = 0; s < 2; s++) {
    printf("  %-18s last byte sent to callback %8.0f us", names[s], median(outside[s], reps));
    if (has_metric) printf(", after_last_byte_us %8.0f", median(metric[s], reps));
    printf(", decode_us %8.0f, process CPU %6.1f ms\n", median(decode[s], reps), median(cpu[s], reps));
  }
  printf("  full-size decode from memory (file:, decode_us) %8.0f us\n", full_memory);
  printf("  full size after the last byte / decode from memory: %.3f\n", median(outside[1], reps) / full_memory);
  pxl_loader_free(loader);
  pxl_queue_free(queue);
  return 0;
}
