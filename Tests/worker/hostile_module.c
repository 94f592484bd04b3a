/*
 * Tests/worker/hostile_module.c: a codec module that misbehaves on purpose, test-only,
 * built on the public module interface (pixload.h, "Codec modules") like libpixload-heif.
 * It takes files that start with "HOSTILE:" and does what the rest of the first line says,
 * in decode, where a real decoder's exploited bug would run:
 *
 *   ok              draws a 4x4 gradient (the module works when it behaves)
 *   thread          draws it on a thread of its own (libjxl and libde265 decode on threads)
 *   cpus            what a decoding library sizing a thread pool would see, in its pixels as
 *                   four uint32: sysconf(_SC_NPROCESSORS_ONLN), get_nprocs() (what
 *                   std::thread::hardware_concurrency returns), the CPUs sched_getaffinity
 *                   allows, and how many of a pool of max(8, that count) threads started
 *                   and were alive at once
 *   segv            writes through a null pointer
 *   spin            never returns
 *   alloc16g        allocates 16 GiB in 256 MiB blocks and touches every page
 *   overflow        writes 64 MiB past the end of its pixel buffer
 *   huge            read_header claims 100000 x 100000 (the library must refuse it)
 *   read PATH       opens PATH and copies what it reads into its pixels
 *   connect PORT    connects to 127.0.0.1:PORT and says hello
 *   exec PATH       runs /bin/sh -c "echo pwned > PATH"
 *   fork            forks; the child exits at once
 *   killparent      sends SIGUSR1 to its parent (seccomp does not look at the signal: SIGKILL
 *                   would be refused the same way, and a failure here would not end the test)
 *   write PATH      creates PATH and writes into it
 *   status N        fails with status N (any number: one pixload.h does not define too)
 *   animate         a 4-frame animation, read one frame at a time (open_frames) or all at
 *                   once (decode_frames): frame i is the gradient shifted by 40 * i
 *   animsegv        the same, but next_frame writes through a null pointer at frame 2
 *
 * Whatever a case achieves, it returns PXL_OK, so a case that is not stopped shows up as a
 * successful decode; where a call fails it answers PXL_E_IO with the call's error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pixload.h"

#define EXPORT __attribute__((visibility("default")))
#define MAGIC "HOSTILE:"

static int32_t sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  return size >= 8 && memcmp(data, MAGIC, 8) == 0;
}

/* The case and its argument, from the first line. */
static void parse(const uint8_t *data, size_t size, char *what, char *arg) {
  char line[512];
  size_t n = size - 8 < sizeof line - 1 ? size - 8 : sizeof line - 1;
  memcpy(line, data + 8, n);
  line[n] = 0;
  line[strcspn(line, "\n")] = 0;
  what[0] = arg[0] = 0;
  sscanf(line, "%63s %447[^\n]", what, arg);
}

static pxl_status header(const uint8_t *data, size_t size, pxl_codec_header *h, char *message, size_t cap, void *ud) {
  (void)message, (void)cap, (void)ud;
  char what[64], arg[448];
  parse(data, size, what, arg);
  h->width = h->height = strcmp(what, "huge") == 0 ? 100000 : 4;
  if (strncmp(what, "anim", 4) == 0) h->frame_count = 4;
  return PXL_OK;
}

static pxl_status fail(char *message, size_t cap, const char *what) {
  snprintf(message, cap, "%s: %s", what, strerror(errno));
  return PXL_E_IO;
}

static void gradient(pxl_codec_target *t) {
  for (int32_t y = 0; y < t->height; y++)
    for (int32_t x = 0; x < t->width; x++) {
      uint8_t *p = t->pixels + (size_t)y * t->stride + (size_t)x * 4;
      p[0] = (uint8_t)(x * 60), p[1] = (uint8_t)(y * 60), p[2] = 128, p[3] = 255;
    }
}

static void *draw_thread(void *t) {
  gradient(t);
  return NULL;
}

static void anim_frame(pxl_codec_target *t, int i);

/* cpus: a pool's threads meet at a barrier, so each counts only if all were alive at once. */
static pthread_barrier_t pool_barrier;
static void *pool_thread(void *unused) {
  (void)unused;
  pthread_barrier_wait(&pool_barrier);
  return NULL;
}

static uint32_t pool_started(uint32_t n) {
  pthread_t threads[64];
  if (n > 64) n = 64;
  if (pthread_barrier_init(&pool_barrier, NULL, n + 1) != 0) return 0;
  uint32_t started = 0;
  for (; started < n; started++)
    if (pthread_create(&threads[started], NULL, pool_thread, NULL) != 0) break;
  /* One missing: the barrier would never open. Report what started, and leak the waiters
   * (a refused thread already fails the test; the worker is not reused for it). */
  if (started < n) return started;
  pthread_barrier_wait(&pool_barrier);
  for (uint32_t i = 0; i < n; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&pool_barrier);
  return started;
}

static pxl_status decode(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap, void *ud) {
  (void)ud;
  char what[64], arg[448];
  parse(data, size, what, arg);
  size_t bytes = t->stride * (size_t)t->height;

  if (strcmp(what, "ok") == 0 || strcmp(what, "huge") == 0) {
    gradient(t);
  } else if (strncmp(what, "anim", 4) == 0) {
    anim_frame(t, 0);
  } else if (strcmp(what, "thread") == 0) {
    pthread_t thread;
    int e = pthread_create(&thread, NULL, draw_thread, t);
    if (e) return errno = e, fail(message, cap, "pthread_create");
    pthread_join(thread, NULL);
  } else if (strcmp(what, "cpus") == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    uint32_t allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 0;
    uint32_t seen[4] = {(uint32_t)sysconf(_SC_NPROCESSORS_ONLN), (uint32_t)get_nprocs(), allowed, 0};
    seen[3] = pool_started(allowed > 8 ? allowed : 8);
    memset(t->pixels, 0, bytes);
    memcpy(t->pixels, seen, sizeof seen);
  } else if (strcmp(what, "segv") == 0) {
    *(volatile int *)(uintptr_t)0 = 1;
  } else if (strcmp(what, "spin") == 0) {
    for (volatile unsigned long i = 0;; i++) {
    }
  } else if (strcmp(what, "alloc16g") == 0) {
    const size_t block = (size_t)256 << 20;
    for (size_t total = 0; total < ((size_t)16 << 30); total += block) {
      volatile uint8_t *p = malloc(block);
      if (!p) {
        snprintf(message, cap, "allocation refused after %zu MiB", total >> 20);
        return PXL_E_NO_MEMORY;
      }
      for (size_t i = 0; i < block; i += 4096) p[i] = 1;
    }
  } else if (strcmp(what, "overflow") == 0) {
    memset(t->pixels, 0xab, bytes + ((size_t)64 << 20));
  } else if (strcmp(what, "read") == 0) {
    int fd = open(arg, O_RDONLY);
    if (fd < 0) return fail(message, cap, "open");
    ssize_t n = read(fd, t->pixels, bytes);
    close(fd);
    if (n < 0) return fail(message, cap, "read");
  } else if (strcmp(what, "connect") == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return fail(message, cap, "socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(arg))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) return close(s), fail(message, cap, "connect");
    if (write(s, "leak", 4) < 0) {
    }
    close(s);
  } else if (strcmp(what, "exec") == 0) {
    char command[600];
    snprintf(command, sizeof command, "echo pwned > %s", arg);
    execl("/bin/sh", "sh", "-c", command, (char *)NULL);
    return fail(message, cap, "execl");
  } else if (strcmp(what, "fork") == 0) {
    pid_t pid = fork();
    if (pid < 0) return fail(message, cap, "fork");
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
  } else if (strcmp(what, "killparent") == 0) {
    if (kill(getppid(), SIGUSR1) != 0) return fail(message, cap, "kill");
  } else if (strcmp(what, "status") == 0) {
    snprintf(message, cap, "hostile status %s", arg);
    return (pxl_status)atoi(arg);
  } else if (strcmp(what, "write") == 0) {
    int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return fail(message, cap, "open");
    if (write(fd, "pwned\n", 6) < 0) {
    }
    close(fd);
  } else {
    snprintf(message, cap, "no such case: %s", what);
    return PXL_E_CORRUPT_IMAGE;
  }
  return PXL_OK;
}

/* animate, animsegv: frame i of 4, 50 ms each. */
static void anim_frame(pxl_codec_target *t, int i) {
  for (int32_t y = 0; y < t->height; y++)
    for (int32_t x = 0; x < t->width; x++) {
      uint8_t *p = t->pixels + (size_t)y * t->stride + (size_t)x * 4;
      p[0] = (uint8_t)(x * 60 + 40 * i), p[1] = (uint8_t)(y * 60), p[2] = (uint8_t)(40 * i), p[3] = 255;
    }
}

typedef struct anim_state {
  int next, crash_at;
} anim_state;

static pxl_status open_frames(const uint8_t *data, size_t size, void **state, char *message, size_t cap, void *ud) {
  (void)ud;
  char what[64], arg[448];
  parse(data, size, what, arg);
  if (strncmp(what, "anim", 4) != 0) return snprintf(message, cap, "not an animation"), PXL_E_UNSUPPORTED_IMAGE;
  anim_state *s = calloc(1, sizeof *s);
  if (!s) return PXL_E_NO_MEMORY;
  s->crash_at = strcmp(what, "animsegv") == 0 ? 2 : -1;
  *state = s;
  return PXL_OK;
}

static pxl_status next_frame(void *state, pxl_codec_target *t, int32_t *duration_ms, char *message, size_t cap,
                             void *ud) {
  (void)message, (void)cap, (void)ud;
  anim_state *s = state;
  if (s->next >= 4) return PXL_E_NOT_FOUND;
  if (s->next == s->crash_at) *(volatile int *)(uintptr_t)0 = 1;
  anim_frame(t, s->next++);
  *duration_ms = 50;
  return PXL_OK;
}

static void close_frames(void *state, void *ud) {
  (void)ud;
  free(state);
}

static pxl_status decode_frames(const uint8_t *data, size_t size, pxl_codec_target *t, char *message, size_t cap,
                                void *ud) {
  void *state = NULL;
  pxl_status status = open_frames(data, size, &state, message, cap, ud);
  if (status != PXL_OK) return decode(data, size, t, message, cap, ud);
  int32_t duration = 0;
  while ((status = next_frame(state, t, &duration, message, cap, ud)) == PXL_OK)
    if (t->frame_done(t->library, duration)) break;
  close_frames(state, ud);
  return status == PXL_E_NOT_FOUND ? PXL_OK : status;
}

EXPORT pxl_status pxl_codec_module_register(pxl_loader *loader) {
  pxl_codec c;
  pxl_codec_init(&c);
  c.id = "hostile";
  c.version = "1";
  c.sniff = sniff;
  c.read_header = header;
  c.decode = decode;
  c.decode_frames = decode_frames;
  c.open_frames = open_frames;
  c.next_frame = next_frame;
  c.close_frames = close_frames;
  return pxl_loader_add_codec(loader, &c);
}
