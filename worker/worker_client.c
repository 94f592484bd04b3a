/*
 * worker/worker_client.c: the library's side of the decode worker (worker_client.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker_client.h"
#include "wire.h"

/* The largest ICC profile accepted (PXL_ICC_MAX_BYTES, Sources/CCodecs/include/pxl_codecs.h). */
#define ICC_MAX_BYTES (4u << 20)

struct pxl_worker {
  pid_t pid;
  int sock;
  int pidfd;        /* readable once the worker has exited: waits with a deadline */
  int alive;
  uint32_t serial;
  uint64_t max_pixels;
  uint64_t max_input_bytes;
  pxl_worker_msg_hello hello;
  int frames_open;  /* an animation is open in the worker (FRAMES_OPEN answered DONE) */
  /* A conversation left open (protocol 4): its serial (0: none), whether it is a built-in
   * format's (NATIVE) or a module's, and a module's last HEADER. */
  uint32_t open;
  int open_native;
  pxl_worker_msg_header open_header;
  /* The kept memfds (protocol 5, pxl_worker_protocol.h): the data memfd and the size the
   * worker has mapped of it (0: it has none), and the output memfd, mapped here read-only
   * for the worker's life, and its size (0: none). */
  int data_fd;
  size_t data_cap;
  int out_fd;
  const uint8_t *out_map;
  size_t out_cap, out_map_size; /* (out_cap 0 with out_map: sent again next time) */
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

const pxl_worker_msg_hello *pxl_worker_hello_of(const pxl_worker *w) { return &w->hello; }
pid_t pxl_worker_pid(const pxl_worker *w) { return w->pid; }
int pxl_worker_alive(const pxl_worker *w) { return w && w->alive; }

void pxl_worker_layers_string(uint32_t layers, char *buf, size_t cap) {
  static const struct { uint32_t bit; const char *name; } names[] = {
      {PXL_WORKER_LAYER_NO_NEW_PRIVS, "no_new_privs"}, {PXL_WORKER_LAYER_NAMESPACES, "namespaces"},
      {PXL_WORKER_LAYER_LANDLOCK, "landlock"},         {PXL_WORKER_LAYER_SECCOMP, "seccomp"},
      {PXL_WORKER_LAYER_RLIMITS, "rlimits"},           {PXL_WORKER_LAYER_FDS_CLOSED, "fds_closed"}};
  size_t used = 0;
  if (cap) buf[0] = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((layers & names[i].bit) && used < cap) {
      int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", names[i].name);
      if (n > 0) used += (size_t)n;
    }
}

/* ---- ending a worker ---- */

/* Waits for the worker to exit, at most ms (-1: no limit); then reaps it. 1: reaped. */
static int reap(pxl_worker *w, int ms, int *status) {
  if (w->pidfd >= 0) {
    struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
    int n;
    do n = poll(&p, 1, ms);
    while (n < 0 && errno == EINTR);
    if (n == 0) return 0;
  } else if (ms >= 0) {
    /* No pidfd (Linux < 5.3): poll the pid. */
    double end = now_ms() + ms;
    for (;;) {
      pid_t r = waitpid(w->pid, status, WNOHANG);
      if (r == w->pid) return 1;
      if (r < 0 || now_ms() >= end) return r < 0;
      usleep(1000);
    }
  }
  pid_t r;
  do r = waitpid(w->pid, status, 0);
  while (r < 0 && errno == EINTR);
  return 1;
}

/* The worker is done for: closes our side, kills it unless it already exited, reaps it,
 * and fills end, exit_code, signal and (unless already set) message. */
static void finish(pxl_worker *w, pxl_worker_result *r, pxl_worker_end why, int grace_ms) {
  int status = 0;
  if (!w->alive) return;
  w->alive = 0;
  if (!reap(w, grace_ms, &status)) {
    kill(w->pid, SIGKILL);
    reap(w, -1, &status);
  } else if (why == PXL_WORKER_TIMED_OUT || why == PXL_WORKER_PROTOCOL) {
    why = PXL_WORKER_EXITED; /* it ended on its own first */
  }
  close(w->sock);
  if (w->pidfd >= 0) close(w->pidfd);
  w->sock = w->pidfd = -1;
  if (!r) return;
  r->status = PXL_WORKER_E_DECODER_FAILED;
  if (why == PXL_WORKER_TIMED_OUT || why == PXL_WORKER_PROTOCOL) {
    r->end = why;
    r->signal = SIGKILL;
    return;
  }
  if (WIFSIGNALED(status)) {
    r->end = PXL_WORKER_SIGNALLED;
    r->signal = WTERMSIG(status);
    if (!r->message[0])
      snprintf(r->message, sizeof r->message, "decoder killed by %s%s", sigabbrev_np(r->signal) ? "SIG" : "signal ",
               sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?");
    if (r->signal == SIGSYS) strncat(r->message, ": a forbidden system call", sizeof r->message - strlen(r->message) - 1);
  } else {
    r->end = PXL_WORKER_EXITED;
    r->exit_code = WEXITSTATUS(status);
    if (!r->message[0]) snprintf(r->message, sizeof r->message, "decoder exited (%d)", r->exit_code);
  }
}

void pxl_worker_free(pxl_worker *w) {
  if (!w) return;
  if (w->alive) {
    /* Closing the socket ends its loop; a worker that does not notice is killed. */
    shutdown(w->sock, SHUT_RDWR);
    finish(w, NULL, PXL_WORKER_EXITED, 100);
  }
  if (w->data_fd >= 0) close(w->data_fd);
  if (w->out_map) munmap((void *)w->out_map, w->out_map_size);
  if (w->out_fd >= 0) close(w->out_fd);
  free(w);
}

/* Receives the next message within the deadline. Returns its length; 0 when the worker
 * closed its socket or died, -2 on timeout, -1 on an error (a message too long, ...). */
static ssize_t receive(pxl_worker *w, void *buf, size_t cap, double deadline) {
  for (;;) {
    int left = (int)(deadline - now_ms());
    if (left <= 0) return -2;
    struct pollfd p = {.fd = w->sock, .events = POLLIN};
    int n = poll(&p, 1, left);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return -2;
    if (n < 0) return -1;
    /* No descriptors from the worker: any that come are closed unread. */
    ssize_t got = pxl_wire_recv(w->sock, buf, cap, NULL);
    if (got < 0 && errno == ECONNRESET) return 0;
    return got;
  }
}

/* ---- spawning ---- */

static char *env_entry(const char *name) {
  const char *v = getenv(name);
  if (!v) return NULL;
  size_t n = strlen(name) + strlen(v) + 2;
  char *e = malloc(n);
  if (e) snprintf(e, n, "%s=%s", name, v);
  return e;
}

pxl_status pxl_worker_spawn(const pxl_worker_options *o, int timeout_ms, pxl_worker **out, char *message, size_t cap) {
  *out = NULL;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(message, cap, "socketpair: %s", strerror(errno));
    return PXL_E_IO;
  }
  /* dup2 onto the same number would leave FD_CLOEXEC set: keep the child's end off 3. */
  if (sv[1] == PXL_WORKER_SOCKET_FD) {
    int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, PXL_WORKER_SOCKET_FD + 1);
    close(sv[1]);
    sv[1] = moved;
  }
  char pixels[32], input[32];
  snprintf(pixels, sizeof pixels, "%llu", (unsigned long long)o->max_pixels);
  snprintf(input, sizeof input, "%llu", (unsigned long long)(o->max_input_bytes ? o->max_input_bytes : 256ull << 20));
  const char *argv[20];
  int a = 0;
  argv[a++] = "pixload-decode-worker";
  argv[a++] = "--modules", argv[a++] = o->module_dir;
  argv[a++] = "--max-pixels", argv[a++] = pixels;
  argv[a++] = "--max-input-bytes", argv[a++] = input;
  if (o->only) argv[a++] = "--only", argv[a++] = o->only;
  if (o->builtins) argv[a++] = "--builtins", argv[a++] = o->builtins;
  if (o->keep_stderr) argv[a++] = "--stderr";
  if (o->debug_seccomp) argv[a++] = "--debug-seccomp";
  argv[a] = NULL;
  /* The environment the worker needs (fontconfig's user directories), nothing more: no
   * LD_PRELOAD, no proxies, no tokens of the host's. */
  char *envp[4] = {env_entry("HOME"), env_entry("XDG_CACHE_HOME"), env_entry("XDG_DATA_HOME"), NULL};
  for (int i = 0, j = 0; i < 3; i++) envp[j] = envp[i], j += envp[i] != NULL, envp[j] = NULL;

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], PXL_WORKER_SOCKET_FD);
  /* Only the socket crosses, whatever the host left without O_CLOEXEC. */
  posix_spawn_file_actions_addclosefrom_np(&fa, PXL_WORKER_SOCKET_FD + 1);
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  int rc = posix_spawn(&pid, o->executable, &fa, &attr, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  for (int i = 0; envp[i]; i++) free(envp[i]);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    snprintf(message, cap, "cannot start %s: %s", o->executable, strerror(rc));
    return PXL_E_IO;
  }
  pxl_worker *w = calloc(1, sizeof *w);
  w->pid = pid;
  w->sock = sv[0];
  w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  w->data_fd = w->out_fd = -1;
  w->alive = 1;
  w->max_pixels = o->max_pixels;
  w->max_input_bytes = o->max_input_bytes ? o->max_input_bytes : 256ull << 20;

  union {
    pxl_worker_msg_hello hello;
    pxl_worker_msg_error error;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  ssize_t n = receive(w, &in, sizeof in, now_ms() + timeout_ms);
  if (n > 0 && pxl_wire_valid(&in, n, PXL_WORKER_HELLO, sizeof in.hello)) {
    w->hello = in.hello;
    w->hello.codecs[sizeof w->hello.codecs - 1] = 0;
    *out = w;
    return PXL_OK;
  }
  pxl_worker_result r;
  memset(&r, 0, sizeof r);
  if (n > 0 && pxl_wire_valid(&in, n, PXL_WORKER_ERROR, sizeof in.error)) {
    in.error.message[sizeof in.error.message - 1] = 0;
    snprintf(r.message, sizeof r.message, "decode worker: %s", in.error.message);
  }
  finish(w, &r, n == -2 ? PXL_WORKER_TIMED_OUT : PXL_WORKER_PROTOCOL, n == 0 ? 1000 : 0);
  if (!r.message[0] || r.end == PXL_WORKER_TIMED_OUT)
    snprintf(r.message, sizeof r.message, "decode worker did not start (%s)", r.end == PXL_WORKER_TIMED_OUT ? "no hello in time" : "no hello");
  snprintf(message, cap, "%s", r.message);
  free(w);
  return PXL_WORKER_E_DECODER_FAILED;
}

/* ---- decoding ---- */

static int sealed_data(const uint8_t *data, size_t size) {
  int fd = memfd_create("pixload-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return close(fd), -1;
    done += (size_t)n;
  }
  /* Sealed whole: the worker cannot change the bytes under a decoder that maps them. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) return close(fd), -1;
  return fd;
}

/* The last status pixload.h defines: raise it when the header appends one. */
#define LAST_DEFINED_STATUS PXL_E_DECODER_FAILED

/* A codec's own failure keeps its status; another failure status the header defines is a
 * corrupt image; a status it does not define (a newer header's, a mistake, or PXL_OK
 * reported as a failure) is PXL_E_IO, as the library counts any extension's (pixload.h,
 * "Extensions"; hostFailureStatus in-process). */
static pxl_status codec_status(int32_t s) {
  switch (s) {
  case PXL_E_CORRUPT_IMAGE: case PXL_E_UNSUPPORTED_IMAGE: case PXL_E_NOT_AN_IMAGE: case PXL_E_CANCELLED:
  case PXL_E_IO: case PXL_E_TOO_MANY_PIXELS:
    return (pxl_status)s;
  case PXL_E_NO_MEMORY: return PXL_WORKER_E_DECODER_FAILED; /* RLIMIT_AS: "decoder exceeded N MiB" */
  default: return s > PXL_OK && s <= LAST_DEFINED_STATUS ? PXL_E_CORRUPT_IMAGE : PXL_E_IO;
  }
}

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

static int header_sane(const pxl_worker_msg_header *h) {
  return h->image_width >= 1 && h->image_height >= 1 && h->width >= 1 && h->height >= 1 && h->frame_count >= 1 &&
         h->orientation >= 1 && h->orientation <= 8 && h->icc_size <= ICC_MAX_BYTES &&
         terminated(h->codec, sizeof h->codec) && terminated(h->codec_version, sizeof h->codec_version);
}

/* After DONE: seals the pixel buffer against writing by anyone (which fails, EBUSY, while
 * the worker still maps it writable: then the worker is finished) and maps it read-only.
 * The mapping, or NULL with fd closed and r's status and message set. */
static void *seal_and_map(pxl_worker *w, int fd, size_t size, pxl_worker_result *r) {
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    close(fd);
    snprintf(r->message, sizeof r->message, "decoder kept its pixel buffer mapped (%s)", strerror(errno));
    finish(w, r, PXL_WORKER_PROTOCOL, 0);
    return NULL;
  }
  void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map != MAP_FAILED) return map;
  close(fd);
  r->status = PXL_E_NO_MEMORY;
  snprintf(r->message, sizeof r->message, "cannot map the pixels: %s", strerror(errno));
  return NULL;
}

/* The answer to DECODE or PIXELS: the expected type, or ERROR. 1: expected; 0: ERROR
 * (result filled, worker alive); -1: the worker is finished (result filled). */
static int answer(pxl_worker *w, void *buf, size_t cap, uint16_t type, size_t size, double deadline, int timeout_ms,
                  pxl_worker_result *r) {
  ssize_t n = receive(w, buf, cap, deadline);
  if (n == -2) {
    snprintf(r->message, sizeof r->message, "decoder timed out after %d ms", timeout_ms);
    finish(w, r, PXL_WORKER_TIMED_OUT, 0);
    return -1;
  }
  if (n < 0) {
    snprintf(r->message, sizeof r->message, "decoder sent a message that fails the checks (%s)", strerror(errno));
    finish(w, r, PXL_WORKER_PROTOCOL, 0);
    return -1;
  }
  if (n == 0) {
    /* Closed or reset: it died (or is dying). Give it its deadline to be reaped. */
    int left = (int)(deadline - now_ms());
    finish(w, r, PXL_WORKER_PROTOCOL, left > 0 ? left : 0);
    if (r->end == PXL_WORKER_PROTOCOL) snprintf(r->message, sizeof r->message, "decoder closed its socket");
    return -1;
  }
  const pxl_worker_msg_head *head = buf;
  if (pxl_wire_valid(buf, n, PXL_WORKER_ERROR, sizeof(pxl_worker_msg_error)) && head->serial == w->serial) {
    pxl_worker_msg_error *e = buf;
    e->message[sizeof e->message - 1] = 0;
    r->status = codec_status(e->status);
    snprintf(r->message, sizeof r->message, "%s", e->message);
    return 0;
  }
  if (pxl_wire_valid(buf, n, type, size) && head->serial == w->serial) return 1;
  snprintf(r->message, sizeof r->message, "decoder answered out of turn (type %u, %zd bytes)", head->type, n);
  finish(w, r, PXL_WORKER_PROTOCOL, 0);
  return -1;
}

/* What answers a request for a header, then PIXELS. */
typedef union header_or_done {
  pxl_worker_msg_header header;
  pxl_worker_msg_done done;
  pxl_worker_msg_error error;
  char bytes[PXL_WORKER_MSG_MAX];
} header_or_done;

/* Sends req (size bytes) with data_fd, which it closes, and waits for HEADER: as answer()
 * says (1: HEADER in *in). */
static int send_for_header(pxl_worker *w, const void *req, size_t size, int data_fd, header_or_done *in,
                           double deadline, int timeout_ms, pxl_worker_result *r) {
  int sent = pxl_wire_send(w->sock, req, size, data_fd);
  close(data_fd);
  if (sent != 0) {
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return -1;
  }
  return answer(w, in, sizeof *in, PXL_WORKER_HEADER, sizeof in->header, deadline, timeout_ms, r);
}

/* Sends PIXELS (the memfd fd of size bytes, rows of stride) and waits for DONE into in:
 * 1, or what answer() says (fd then closed; -1: the worker is finished). */
static int pixels_then_done(pxl_worker *w, int fd, size_t stride, size_t size, void *in, size_t cap, double deadline,
                            int timeout_ms, pxl_worker_result *r) {
  pxl_worker_msg_pixels px;
  memset(&px, 0, sizeof px);
  pxl_wire_head(&px.head, PXL_WORKER_PIXELS, sizeof px, w->serial);
  px.stride = stride;
  px.size = size;
  if (pxl_wire_send(w->sock, &px, sizeof px, fd) != 0) {
    close(fd);
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return -1;
  }
  int got = answer(w, in, cap, PXL_WORKER_DONE, sizeof(pxl_worker_msg_done), deadline, timeout_ms, r);
  if (got <= 0) close(fd);
  return got;
}

/* A memfd of size bytes, its size sealed before the worker has it (a worker that shrank it
 * would fault our mapping: SIGBUS in the host). -1 on failure. */
static int sized_memfd(size_t size) {
  int fd = memfd_create("pixload-pixels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A kept memfd's size for need bytes: whole 256 KiB, at least twice the last (so that a
 * run of growing images grows it a few times), at most PXL_WORKER_KEPT_MAX. */
static size_t kept_size(size_t need, size_t last) {
  size_t size = (need + (256u << 10) - 1) & ~(size_t)((256u << 10) - 1);
  if (size < 2 * last) size = 2 * last;
  return size > PXL_WORKER_KEPT_MAX ? need : size;
}

/* The bytes written into the kept data memfd (made, or grown, when too small). 0 and
 * *send: the descriptor to send with the request (the worker maps it afresh), or -1 when
 * the worker's mapping holds the bytes already; -1 when it cannot (the memfd dropped). */
static int kept_data(pxl_worker *w, const uint8_t *data, size_t size, int *send) {
  *send = -1;
  if (size > w->data_cap) {
    /* Not MFD_ALLOW_SEALING: the worker cannot seal it against our writes. */
    if (w->data_fd < 0) w->data_fd = memfd_create("pixload-data", MFD_CLOEXEC);
    size_t cap = kept_size(size, w->data_cap);
    if (w->data_fd < 0 || ftruncate(w->data_fd, (off_t)cap) != 0) goto fail;
    w->data_cap = cap;
    *send = w->data_fd;
  }
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(w->data_fd, data + done, size - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) goto fail;
    done += (size_t)n;
  }
  return 0;
fail:
  if (w->data_fd >= 0) close(w->data_fd);
  w->data_fd = -1;
  w->data_cap = 0;
  return -1;
}

/* The kept output memfd, at least need bytes (a new one, size-sealed, when too small).
 * 0 and *send (as kept_data's), or -1. */
static int kept_output(pxl_worker *w, size_t need, int *send) {
  *send = -1;
  if (need <= w->out_cap) return 0;
  if (w->out_map) munmap((void *)w->out_map, w->out_map_size);
  if (w->out_fd >= 0) close(w->out_fd);
  w->out_map = NULL;
  size_t cap = kept_size(need, w->out_cap);
  w->out_cap = 0;
  w->out_fd = sized_memfd(cap);
  if (w->out_fd < 0) return -1;
  void *map = mmap(NULL, cap, PROT_READ, MAP_SHARED, w->out_fd, 0);
  if (map == MAP_FAILED) {
    close(w->out_fd);
    w->out_fd = -1;
    return -1;
  }
  w->out_map = map;
  w->out_map_size = w->out_cap = cap;
  *send = w->out_fd;
  return 0;
}

/* Ends the conversation left open, if any: CANCEL, which the worker does not answer. */
void pxl_worker_close(pxl_worker *w) {
  if (!w || !w->open) return;
  pxl_worker_msg_cancel c;
  pxl_wire_head(&c.head, PXL_WORKER_CANCEL, sizeof c, w->open);
  w->open = 0;
  if (w->alive && pxl_wire_send(w->sock, &c, sizeof c, -1) != 0) finish(w, NULL, PXL_WORKER_PROTOCOL, 0);
}

/* A result that has not started: the worker can take no request (ended), or the data
 * cannot be sent. 1 when it can go on. */
static int can_start(pxl_worker *w, size_t size, pxl_worker_result *r) {
  memset(r, 0, sizeof *r);
  r->memfd = -1;
  r->status = PXL_WORKER_E_DECODER_FAILED;
  if (!w->alive) {
    snprintf(r->message, sizeof r->message, "decoder already ended");
    r->end = PXL_WORKER_EXITED;
    return 0;
  }
  if (size == 0 || size > w->max_input_bytes) {
    r->status = size ? PXL_E_BODY_TOO_LARGE : PXL_E_NOT_AN_IMAGE;
    snprintf(r->message, sizeof r->message, "%zu bytes: more than the worker maps (%llu)", size,
             (unsigned long long)w->max_input_bytes);
    if (!size) snprintf(r->message, sizeof r->message, "no data");
    r->end = PXL_WORKER_ALIVE;
    return 0;
  }
  return 1;
}

/* HEADER, the answer to DECODE or SIZE, checked (a conversation's later HEADER must say
 * what its first said of the image). 1: r->header; else r says why. */
static int receive_header(pxl_worker *w, double deadline, int timeout_ms, const pxl_worker_msg_header *first,
                          pxl_worker_result *r) {
  union {
    pxl_worker_msg_header header;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  if (answer(w, &in, sizeof in, PXL_WORKER_HEADER, sizeof in.header, deadline, timeout_ms, r) <= 0) return 0;
  pxl_worker_msg_header h = in.header;
  if (!header_sane(&h) ||
      (first && (h.image_width != first->image_width || h.image_height != first->image_height ||
                 h.icc_size != first->icc_size || h.codec_flags != first->codec_flags ||
                 h.orientation != first->orientation || h.has_alpha != first->has_alpha))) {
    snprintf(r->message, sizeof r->message, "decoder sent a header that fails the checks");
    finish(w, r, PXL_WORKER_PROTOCOL, 0);
    return 0;
  }
  r->header = h;
  return 1;
}

/* DECODE's and DRAW's drawing: rs (NULL: the canvas whole). */
static pxl_worker_drawing drawing_of(const pxl_worker_resample *rs) {
  pxl_worker_drawing d;
  memset(&d, 0, sizeof d);
  if (rs) {
    d.mode = PXL_WORKER_DECODE_RESAMPLE;
    d.out_width = rs->out_width;
    d.out_height = rs->out_height;
    d.layout = rs->layout;
    d.premultiply = rs->premultiply;
    memcpy(d.crop, rs->crop, sizeof d.crop);
  }
  return d;
}

/* DECODE with the data memfd, to the checked HEADER: the conversation's start. 1: it is
 * open (w->open) with r->header; else r says why. */
static int start_conversation(pxl_worker *w, const uint8_t *data, size_t size, const char *codec,
                              int32_t target_width, int32_t target_height, uint32_t flags,
                              const pxl_worker_resample *rs, double deadline, int timeout_ms, pxl_worker_result *r) {
  pxl_worker_close(w);
  if (!can_start(w, size, r)) return 0;
  /* The bytes into the kept data memfd (protocol 5); larger ones, or when it fails, a
   * sealed memfd of their own. */
  int data_fd = -1, kept = size <= PXL_WORKER_KEPT_MAX && kept_data(w, data, size, &data_fd) == 0;
  if (!kept) data_fd = sealed_data(data, size);
  if (data_fd < 0 && !kept) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the data's memfd: %s", strerror(errno));
    return 0;
  }
  pxl_worker_msg_decode req;
  memset(&req, 0, sizeof req);
  pxl_wire_head(&req.head, PXL_WORKER_DECODE, sizeof req, ++w->serial);
  if (!w->serial) req.head.serial = ++w->serial; /* (0 is no conversation) */
  req.data_size = size;
  req.target_width = target_width;
  req.target_height = target_height;
  req.flags = (flags & (PXL_WORKER_KEEP_ORIENTATION | PXL_WORKER_PARTIAL)) | (kept ? PXL_WORKER_KEPT_DATA : 0);
  snprintf(req.codec, sizeof req.codec, "%s", codec ? codec : "");
  req.drawing = drawing_of(rs);
  int sent = pxl_wire_send(w->sock, &req, sizeof req, data_fd);
  if (!kept) close(data_fd);
  if (sent != 0) {
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return 0;
  }
  if (!receive_header(w, deadline, timeout_ms, NULL, r)) {
    if (kept) w->data_cap = 0; /* (the worker may not hold it now: sent again next time) */
    return 0;
  }
  w->open = w->serial;
  w->open_native = 0;
  w->open_header = r->header;
  return 1;
}

/* The pixels of the open conversation at width x height (what the worker's HEADER said it
 * draws, or a size the caller asks it to draw exactly): the library's max_pixels check,
 * the sealed memfd, PIXELS (draw NULL: DECODE's fields) or DRAW with it, DONE. The
 * conversation's end. */
static void receive_pixels(pxl_worker *w, int32_t width, int32_t height, pxl_worker_msg_draw *draw,
                           const pxl_worker_resample *rs, double start, double deadline, int timeout_ms,
                           pxl_worker_result *r) {
  w->open = 0;
  const pxl_worker_msg_header *h = &r->header;
  /* max_pixels on what will be drawn, before any buffer exists (the worker's word is no
   * more than a claim; this is the library's check). */
  if (width < 1 || height < 1 || (uint64_t)width * (uint64_t)height > w->max_pixels) {
    pxl_worker_msg_cancel c;
    pxl_wire_head(&c.head, PXL_WORKER_CANCEL, sizeof c, w->serial);
    if (pxl_wire_send(w->sock, &c, sizeof c, -1) != 0) finish(w, NULL, PXL_WORKER_PROTOCOL, 0);
    r->status = PXL_E_TOO_MANY_PIXELS;
    snprintf(r->message, sizeof r->message, "%d x %d exceeds max_pixels (%llu)", width, height,
             (unsigned long long)w->max_pixels);
    return;
  }
  /* What crosses back: the canvas (rows x 4 * width), or the resampler's output. */
  size_t channels = rs ? (rs->layout == 2 ? 3 : 4) : 0;
  size_t rows = rs ? (size_t)rs->out_height : (size_t)height;
  size_t stride = rs ? (size_t)rs->out_width * channels : (size_t)width * 4, map_size = stride * rows + h->icc_size;
  /* A DRAW's thumbnail into the kept output memfd (protocol 5), copied out after DONE. */
  int fd = -1, kept = draw && rs && map_size <= PXL_WORKER_KEPT_MAX && kept_output(w, map_size, &fd) == 0;
  /* Else a memfd of its own, its size sealed before the worker has it: a worker that shrank
   * it would fault our mapping (SIGBUS in the host). */
  if (!kept) fd = sized_memfd(map_size);
  if (fd < 0 && !kept) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the pixel memfd: %s", strerror(errno));
    finish(w, NULL, PXL_WORKER_PROTOCOL, 0); /* it waits for PIXELS: start afresh */
    return;
  }
  int sent;
  if (draw) {
    pxl_wire_head(&draw->head, PXL_WORKER_DRAW, sizeof *draw, w->serial);
    if (kept) draw->flags |= PXL_WORKER_KEPT_OUTPUT;
    draw->stride = stride;
    draw->size = map_size;
    sent = pxl_wire_send(w->sock, draw, sizeof *draw, fd);
  } else {
    pxl_worker_msg_pixels px;
    memset(&px, 0, sizeof px);
    pxl_wire_head(&px.head, PXL_WORKER_PIXELS, sizeof px, w->serial);
    px.stride = stride;
    px.size = map_size;
    sent = pxl_wire_send(w->sock, &px, sizeof px, fd);
  }
  if (sent != 0) {
    if (!kept) close(fd);
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return;
  }
  union {
    pxl_worker_msg_done done;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  if (answer(w, &in, sizeof in, PXL_WORKER_DONE, sizeof in.done, deadline, timeout_ms, r) <= 0) {
    if (!kept) close(fd);
    else w->out_cap = 0; /* (the worker may not hold it now: sent again next time) */
    return;
  }
  if (kept) {
    /* Copied out now (the worker can still write the kept memfd, and the caller uses the
     * result after the worker went back to its pool): pixel values, then the ICC profile,
     * which the caller parses from this copy. */
    r->copied = malloc(map_size);
    if (!r->copied) {
      r->status = PXL_E_NO_MEMORY;
      snprintf(r->message, sizeof r->message, "out of memory for a %zu-byte thumbnail", map_size);
      return;
    }
    memcpy(r->copied, w->out_map, map_size);
  }
  void *map = kept ? r->copied : seal_and_map(w, fd, map_size, r);
  if (!map) return;
  r->status = PXL_OK;
  r->end = PXL_WORKER_ALIVE;
  r->header.width = width;
  r->header.height = height;
  r->pixels = map;
  r->stride = stride;
  r->icc = h->icc_size ? (const uint8_t *)map + stride * rows : NULL;
  r->memfd = kept ? -1 : fd;
  r->map_size = kept ? 0 : map_size;
  r->wall_ms = now_ms() - start;
  r->worker_cpu_ns = in.done.cpu_ns;
}

void pxl_worker_decode(pxl_worker *w, const uint8_t *data, size_t size, const char *codec, int32_t target_width,
                       int32_t target_height, int timeout_ms, pxl_worker_result *r) {
  pxl_worker_decode_flags(w, data, size, codec, target_width, target_height, 0, timeout_ms, r);
}

void pxl_worker_decode_flags(pxl_worker *w, const uint8_t *data, size_t size, const char *codec, int32_t target_width,
                             int32_t target_height, uint32_t flags, int timeout_ms, pxl_worker_result *r) {
  pxl_worker_decode_resampled(w, data, size, codec, target_width, target_height, flags, NULL, timeout_ms, r);
}

void pxl_worker_decode_resampled(pxl_worker *w, const uint8_t *data, size_t size, const char *codec,
                                 int32_t target_width, int32_t target_height, uint32_t flags,
                                 const pxl_worker_resample *rs, int timeout_ms, pxl_worker_result *r) {
  double start = now_ms(), deadline = start + timeout_ms;
  if (!start_conversation(w, data, size, codec, target_width, target_height, flags, rs, deadline, timeout_ms, r)) return;
  if (flags & PXL_WORKER_CLIENT_HEADER_ONLY) {
    /* The header (and choose_size's answer) is all the caller wants: no pixel buffer. */
    pxl_worker_close(w);
    r->status = w->alive ? PXL_OK : PXL_WORKER_E_DECODER_FAILED;
    r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_PROTOCOL;
    r->wall_ms = now_ms() - start;
    return;
  }
  receive_pixels(w, r->header.width, r->header.height, NULL, rs, start, deadline, timeout_ms, r);
}

void pxl_worker_open(pxl_worker *w, const uint8_t *data, size_t size, const char *codec, uint32_t flags,
                     int timeout_ms, pxl_worker_result *r) {
  double start = now_ms();
  if (start_conversation(w, data, size, codec, 0, 0, flags, NULL, start + timeout_ms, timeout_ms, r)) {
    r->status = PXL_OK;
    r->end = PXL_WORKER_ALIVE;
    r->wall_ms = now_ms() - start;
  }
}

/* The open conversation, or r says there is none. */
static int conversation_open(pxl_worker *w, pxl_worker_result *r) {
  memset(r, 0, sizeof *r);
  r->memfd = -1;
  if (w->alive && w->open && !w->open_native) return 1;
  r->status = w->alive ? PXL_E_INVALID_ARGUMENT : PXL_WORKER_E_DECODER_FAILED;
  r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_EXITED;
  snprintf(r->message, sizeof r->message, "no conversation open with the decoder");
  return 0;
}

void pxl_worker_size(pxl_worker *w, int32_t target_width, int32_t target_height, int timeout_ms,
                     pxl_worker_result *r) {
  if (!conversation_open(w, r)) return;
  double start = now_ms();
  r->status = PXL_WORKER_E_DECODER_FAILED;
  pxl_worker_msg_size q;
  memset(&q, 0, sizeof q);
  pxl_wire_head(&q.head, PXL_WORKER_SIZE, sizeof q, w->open);
  q.target_width = target_width;
  q.target_height = target_height;
  if (pxl_wire_send(w->sock, &q, sizeof q, -1) != 0) {
    w->open = 0;
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return;
  }
  if (!receive_header(w, start + timeout_ms, timeout_ms, &w->open_header, r)) {
    w->open = 0; /* (an ERROR ends it too) */
    return;
  }
  w->open_header = r->header;
  r->status = PXL_OK;
  r->end = PXL_WORKER_ALIVE;
  r->wall_ms = now_ms() - start;
}

void pxl_worker_draw(pxl_worker *w, int32_t width, int32_t height, uint32_t flags, const pxl_worker_resample *rs,
                     int timeout_ms, pxl_worker_result *r) {
  if (!conversation_open(w, r)) return;
  double start = now_ms();
  r->status = PXL_WORKER_E_DECODER_FAILED;
  r->header = w->open_header;
  pxl_worker_msg_draw d;
  memset(&d, 0, sizeof d);
  d.target_width = width;
  d.target_height = height;
  d.flags = flags & (PXL_WORKER_KEEP_ORIENTATION | PXL_WORKER_PARTIAL);
  d.drawing = drawing_of(rs);
  receive_pixels(w, width, height, &d, rs, start, start + timeout_ms, timeout_ms, r);
}

void pxl_worker_result_release(pxl_worker_result *r) {
  if (!r) return;
  if (r->pixels && !r->copied) munmap((void *)r->pixels, r->map_size);
  free(r->copied);
  r->copied = NULL;
  if (r->memfd >= 0) close(r->memfd);
  r->pixels = r->icc = NULL;
  r->memfd = -1;
}

void *pxl_worker_map_private(int memfd, size_t size) {
  const int sealed = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
  int seals = memfd >= 0 && size > 0 ? fcntl(memfd, F_GET_SEALS) : -1;
  if (seals < 0 || (seals & sealed) != sealed) return NULL;
  struct stat st;
  if (fstat(memfd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size < size) return NULL;
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, memfd, 0);
  return map == MAP_FAILED ? NULL : map;
}

/* ---- the built-in formats (PXL_ISOLATION_ALL) ---- */

static int native_answer_sane(const pxl_worker_msg_native_result *a, const pxl_worker_msg_native *q) {
  uint32_t op = q->op;
  uint64_t max_pixels = q->max_pixels;
  if (!terminated(a->message, sizeof a->message) || a->icc_size > ICC_MAX_BYTES) return 0;
  if (a->status != 0) return a->bytes == 0; /* a failure carries nothing */
  if (op == PXL_WORKER_NATIVE_INFO)
    return a->width >= 1 && a->height >= 1 && a->bytes == a->icc_size && a->out_width == 0 && a->out_height == 0;
  int64_t w = a->out_width, h = a->out_height, c = a->out_channels, stride = a->out_stride;
  if (op == PXL_WORKER_NATIVE_RESAMPLE) {
    const int32_t *p = q->resample;
    return w >= 1 && h >= 1 && c == p[2] && (uint64_t)p[3] * (uint64_t)p[4] <= max_pixels &&
           (a->bytes == a->icc_size ||
            (stride == (int64_t)p[3] * c && a->bytes == (uint64_t)stride * (uint64_t)p[4] + a->icc_size));
  }
  if (op == PXL_WORKER_NATIVE_REGION)
    return w >= (int64_t)q->region_x + q->region_width && h >= (int64_t)q->region_y + q->region_height &&
           (c == 1 || c == 3 || c == 4) && stride == (int64_t)q->region_width * c &&
           a->bytes == (uint64_t)stride * (uint64_t)q->region_height + a->icc_size;
  return w >= 1 && h >= 1 && (c == 1 || c == 3 || c == 4) && (uint64_t)w * (uint64_t)h <= max_pixels &&
         stride >= w * c && stride <= w * c + 64 && a->bytes == (uint64_t)stride * (uint64_t)h + a->icc_size;
}

void pxl_worker_native(pxl_worker *w, const uint8_t *data, size_t size, const char *format, uint32_t op,
                       uint32_t flags, int32_t layout, int32_t scale, uint64_t max_pixels, const int32_t region[4],
                       const int32_t resample[6], const double crop[4], int *data_memfd, int timeout_ms,
                       pxl_worker_native_result *r) {
  memset(r, 0, sizeof *r);
  r->memfd = -1;
  r->status = PXL_WORKER_E_DECODER_FAILED;
  /* finish() and answer() fill a pxl_worker_result: this one carries their verdict. */
  pxl_worker_result verdict;
  memset(&verdict, 0, sizeof verdict);
  verdict.memfd = -1;
  if (!w->alive || size == 0 || size > w->max_input_bytes) {
    r->status = !w->alive ? PXL_WORKER_E_DECODER_FAILED : size ? PXL_E_BODY_TOO_LARGE : PXL_E_NOT_AN_IMAGE;
    r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_EXITED;
    snprintf(r->message, sizeof r->message, "%s", !w->alive ? "decoder already ended" : size ? "more than the worker maps" : "no data");
    return;
  }
  double start = now_ms(), deadline = start + timeout_ms;
  /* In the conversation an INFO left open: no data memfd (the worker kept the bytes); a
   * RESAMPLE brings its output memfd, sized here. Else a new conversation. */
  int within = (flags & PXL_WORKER_CLIENT_CONTINUE) && w->open && w->open_native;
  if ((flags & PXL_WORKER_CLIENT_CONTINUE) && !within) {
    r->status = PXL_E_INVALID_ARGUMENT;
    r->end = PXL_WORKER_ALIVE;
    snprintf(r->message, sizeof r->message, "no conversation open with the decoder");
    return;
  }
  if (!within) pxl_worker_close(w);
  int fd = -1, kept = 0;
  size_t output_size = 0;
  if (within && op == PXL_WORKER_NATIVE_RESAMPLE) {
    /* The resampler's output: the library's own parameters, checked as its answer would be. */
    int32_t c = resample ? resample[2] : 0;
    if (!resample || resample[3] < 1 || resample[4] < 1 || (c != 1 && c != 3 && c != 4) ||
        (uint64_t)resample[3] * (uint64_t)resample[4] > max_pixels) {
      r->status = PXL_E_INVALID_ARGUMENT;
      r->end = PXL_WORKER_ALIVE;
      snprintf(r->message, sizeof r->message, "resampler parameters out of range");
      pxl_worker_close(w);
      return;
    }
    output_size = (size_t)resample[3] * (size_t)resample[4] * (size_t)c;
    /* A thumbnail's output: into the kept output memfd (copied out by the caller). */
    kept = output_size <= PXL_WORKER_KEPT_MAX && kept_output(w, output_size, &fd) == 0;
    if (!kept) fd = sized_memfd(output_size);
  } else if (!within && data_memfd && *data_memfd >= 0) {
    fd = *data_memfd;
  } else if (!within) {
    /* The bytes into the kept data memfd; larger ones, or when it fails, a sealed one. */
    kept = size <= PXL_WORKER_KEPT_MAX && kept_data(w, data, size, &fd) == 0;
    if (!kept) fd = sealed_data(data, size);
  }
  if ((!within || output_size) && fd < 0 && !kept) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the %s memfd: %s", within ? "output" : "data's", strerror(errno));
    r->end = PXL_WORKER_ALIVE;
    pxl_worker_close(w);
    return;
  }
  if (!within && data_memfd && !kept) *data_memfd = fd; /* the caller's now, for its next conversation */
  pxl_worker_msg_native req;
  memset(&req, 0, sizeof req);
  if (!within && !++w->serial) ++w->serial; /* (0 is no conversation) */
  pxl_wire_head(&req.head, PXL_WORKER_NATIVE, sizeof req, w->serial);
  w->open = 0;
  req.data_size = size;
  req.max_pixels = max_pixels;
  req.op = op;
  req.flags = (flags & PXL_WORKER_NATIVE_STAY) |
              (!output_size ? (kept ? PXL_WORKER_NATIVE_KEPT_DATA : 0)
                            : kept ? PXL_WORKER_NATIVE_KEPT_OUTPUT : PXL_WORKER_NATIVE_OUTPUT);
  req.layout = layout;
  req.scale = scale;
  snprintf(req.format, sizeof req.format, "%s", format);
  if (region) req.region_x = region[0], req.region_y = region[1], req.region_width = region[2], req.region_height = region[3];
  if (resample) memcpy(req.resample, resample, sizeof req.resample);
  if (crop) memcpy(req.crop, crop, sizeof req.crop);
  int sent = pxl_wire_send(w->sock, &req, sizeof req, fd);
  if (!within && !data_memfd && !kept) close(fd);
  union {
    pxl_worker_msg_native_result result;
    pxl_worker_msg_done done;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  int got = sent == 0 ? answer(w, &in, sizeof in, PXL_WORKER_NATIVE_RESULT, sizeof in.result, deadline, timeout_ms,
                               &verdict)
                      : (finish(w, &verdict, PXL_WORKER_PROTOCOL, 100), -1);
  if (got == 1 && !native_answer_sane(&in.result, &req)) {
    snprintf(verdict.message, sizeof verdict.message, "decoder sent an answer that fails the checks");
    finish(w, &verdict, PXL_WORKER_PROTOCOL, 0);
    got = -1;
  }
  if (got == 1 && output_size && in.result.bytes != 0 && in.result.bytes != output_size) {
    snprintf(verdict.message, sizeof verdict.message, "decoder wrote %llu bytes of a %zu-byte output",
             (unsigned long long)in.result.bytes, output_size);
    finish(w, &verdict, PXL_WORKER_PROTOCOL, 0);
    got = -1;
  }
  if (got != 1 && output_size && !kept) close(fd);
  if (kept && (got != 1 || in.result.status != 0)) {
    /* The worker may not hold the kept memfd now: send it again next time. */
    if (output_size) w->out_cap = 0;
    else w->data_cap = 0;
  }
  if (got != 1) {
    /* (An ERROR: the worker could not even start the operation.) */
    r->status = verdict.status;
    r->end = w->alive ? PXL_WORKER_ALIVE : verdict.end;
    r->exit_code = verdict.exit_code;
    r->signal = verdict.signal;
    snprintf(r->message, sizeof r->message, "%s", verdict.message);
    return;
  }
  r->answer = in.result;
  r->end = PXL_WORKER_ALIVE;
  /* An INFO asked to stay that succeeded: the worker waits for this conversation's next. */
  if ((flags & PXL_WORKER_NATIVE_STAY) && op == PXL_WORKER_NATIVE_INFO && in.result.status == 0) {
    w->open = w->serial;
    w->open_native = 1;
  }
  if (output_size && kept) {
    /* In the kept output memfd, which the worker can still write: the caller copies the
     * pixels out before its next request (and reads them only as pixel values). */
    r->bytes = in.result.bytes ? w->out_map : NULL;
    r->status = PXL_OK;
    r->wall_ms = now_ms() - start;
    return;
  }
  void *map = NULL;
  size_t map_size = output_size;
  if (output_size) {
    /* Written into the memfd that went with the request: sealed against writing and mapped. */
    if (in.result.bytes == 0) {
      close(fd);
      goto done;
    }
    if (!(map = seal_and_map(w, fd, map_size, &verdict))) goto failed;
    goto mapped;
  }
  if (in.result.bytes == 0) goto done;
  map_size = (size_t)in.result.bytes;
  fd = sized_memfd(map_size); /* (the data memfd is closed or the caller's) */
  if (fd < 0) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the pixel memfd: %s", strerror(errno));
    finish(w, NULL, PXL_WORKER_PROTOCOL, 0); /* it waits for PIXELS: start afresh */
    r->end = PXL_WORKER_PROTOCOL;
    return;
  }
  if (pixels_then_done(w, fd, (size_t)in.result.out_stride, map_size, &in, sizeof in, deadline, timeout_ms,
                       &verdict) != 1 ||
      !(map = seal_and_map(w, fd, map_size, &verdict)))
    goto failed;
mapped:
  r->bytes = map;
  r->memfd = fd;
  r->map_size = map_size;
done:
  r->status = PXL_OK;
  r->wall_ms = now_ms() - start;
  return;
failed:
  r->status = verdict.status ? verdict.status : PXL_WORKER_E_DECODER_FAILED;
  r->end = w->alive ? PXL_WORKER_ALIVE : verdict.end;
  r->exit_code = verdict.exit_code;
  r->signal = verdict.signal;
  snprintf(r->message, sizeof r->message, "%s", verdict.message);
}

void pxl_worker_native_release(pxl_worker_native_result *r) {
  if (!r) return;
  if (r->bytes && r->map_size) munmap((void *)r->bytes, r->map_size); /* (0: the kept output's) */
  if (r->memfd >= 0) close(r->memfd);
  r->bytes = NULL;
  r->memfd = -1;
}

/* ---- an animation's frames (FRAMES_OPEN, FRAME_NEXT, FRAMES_CLOSE) ---- */

void pxl_worker_frames_open(pxl_worker *w, const uint8_t *data, size_t size, const char *codec, const char *format,
                            uint32_t flags, uint64_t max_pixels, int timeout_ms, pxl_worker_result *r) {
  if (w->alive) {
    pxl_worker_close(w); /* an image's conversation left open ends first */
    w->frames_open = 0;
  }
  if (!can_start(w, size, r)) return;
  if (max_pixels == 0 || max_pixels > w->max_pixels) max_pixels = w->max_pixels;
  double start = now_ms(), deadline = start + timeout_ms;
  int data_fd = sealed_data(data, size);
  if (data_fd < 0) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the data's memfd: %s", strerror(errno));
    r->end = PXL_WORKER_ALIVE;
    return;
  }
  pxl_worker_msg_frames_open req;
  memset(&req, 0, sizeof req);
  pxl_wire_head(&req.head, PXL_WORKER_FRAMES_OPEN, sizeof req, ++w->serial);
  req.data_size = size;
  req.max_pixels = max_pixels;
  req.flags = flags & PXL_WORKER_KEEP_ORIENTATION;
  snprintf(req.codec, sizeof req.codec, "%s", codec ? codec : "");
  snprintf(req.format, sizeof req.format, "%s", format ? format : "");
  header_or_done in;
  int got = send_for_header(w, &req, sizeof req, data_fd, &in, deadline, timeout_ms, r);
  if (got <= 0) {
    if (got == 0) r->end = PXL_WORKER_ALIVE;
    return;
  }
  pxl_worker_msg_header h = in.header;
  /* The canvas is the header's size: the frames are drawn whole, never at another size. */
  if (!header_sane(&h) || h.width != h.image_width || h.height != h.image_height ||
      (format && *format && h.icc_size != 0)) {
    snprintf(r->message, sizeof r->message, "decoder sent a header that fails the checks");
    finish(w, r, PXL_WORKER_PROTOCOL, 0);
    return;
  }
  r->header = h;
  if ((uint64_t)h.width * (uint64_t)h.height > max_pixels) {
    pxl_worker_msg_cancel c;
    pxl_wire_head(&c.head, PXL_WORKER_CANCEL, sizeof c, w->serial);
    if (pxl_wire_send(w->sock, &c, sizeof c, -1) != 0) finish(w, NULL, PXL_WORKER_PROTOCOL, 0);
    r->status = PXL_E_TOO_MANY_PIXELS;
    r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_PROTOCOL;
    snprintf(r->message, sizeof r->message, "%d x %d exceeds max_pixels (%llu)", h.width, h.height,
             (unsigned long long)max_pixels);
    return;
  }
  size_t stride = (size_t)h.width * 4, map_size = stride * (size_t)h.height + h.icc_size;
  int fd = sized_memfd(map_size);
  if (fd < 0) {
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot make the canvas's memfd: %s", strerror(errno));
    finish(w, NULL, PXL_WORKER_PROTOCOL, 0); /* it waits for PIXELS: start afresh */
    r->end = PXL_WORKER_PROTOCOL;
    return;
  }
  got = pixels_then_done(w, fd, stride, map_size, &in, sizeof in, deadline, timeout_ms, r);
  if (got <= 0) return;
  /* Read-only here; the worker keeps drawing into it, so it is not sealed against writing. */
  void *map = mmap(NULL, map_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    close(fd);
    r->status = PXL_E_NO_MEMORY;
    snprintf(r->message, sizeof r->message, "cannot map the canvas: %s", strerror(errno));
    w->frames_open = 1;
    pxl_worker_frames_close(w);
    r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_PROTOCOL;
    return;
  }
  w->frames_open = 1;
  r->status = PXL_OK;
  r->end = PXL_WORKER_ALIVE;
  r->pixels = map;
  r->stride = stride;
  r->icc = h.icc_size ? (const uint8_t *)map + stride * (size_t)h.height : NULL;
  r->memfd = fd;
  r->map_size = map_size;
  r->wall_ms = now_ms() - start;
  r->worker_cpu_ns = in.done.cpu_ns;
}

pxl_status pxl_worker_frame_next(pxl_worker *w, int timeout_ms, pxl_worker_msg_frame *frame, pxl_worker_result *r) {
  memset(r, 0, sizeof *r);
  memset(frame, 0, sizeof *frame);
  r->memfd = -1;
  r->status = PXL_WORKER_E_DECODER_FAILED;
  if (!w->alive || !w->frames_open) {
    snprintf(r->message, sizeof r->message, "%s", w->alive ? "no animation open in the decoder" : "decoder already ended");
    r->end = w->alive ? PXL_WORKER_ALIVE : PXL_WORKER_EXITED;
    if (w->alive) r->status = PXL_E_INVALID_ARGUMENT;
    return r->status;
  }
  double start = now_ms(), deadline = start + timeout_ms;
  pxl_worker_msg_frame_next req;
  pxl_wire_head(&req.head, PXL_WORKER_FRAME_NEXT, sizeof req, ++w->serial);
  if (pxl_wire_send(w->sock, &req, sizeof req, -1) != 0) {
    finish(w, r, PXL_WORKER_PROTOCOL, 100);
    return r->status;
  }
  union {
    pxl_worker_msg_frame frame;
    pxl_worker_msg_error error;
    char bytes[PXL_WORKER_MSG_MAX];
  } in;
  int got = answer(w, &in, sizeof in, PXL_WORKER_FRAME, sizeof in.frame, deadline, timeout_ms, r);
  if (got <= 0) {
    w->frames_open = 0; /* an ERROR closed the worker's state */
    if (got == 0) r->end = PXL_WORKER_ALIVE;
    return r->status;
  }
  if ((in.frame.end != 0 && in.frame.end != 1) || in.frame.index < 0) {
    snprintf(r->message, sizeof r->message, "decoder sent a frame that fails the checks");
    finish(w, r, PXL_WORKER_PROTOCOL, 0);
    w->frames_open = 0;
    return r->status;
  }
  *frame = in.frame;
  r->status = PXL_OK;
  r->end = PXL_WORKER_ALIVE;
  r->wall_ms = now_ms() - start;
  r->worker_cpu_ns = in.frame.cpu_ns;
  return PXL_OK;
}

void pxl_worker_frames_close(pxl_worker *w) {
  if (!w || !w->alive || !w->frames_open) return;
  w->frames_open = 0;
  pxl_worker_msg_frames_close c;
  pxl_wire_head(&c.head, PXL_WORKER_FRAMES_CLOSE, sizeof c, ++w->serial);
  if (pxl_wire_send(w->sock, &c, sizeof c, -1) != 0) finish(w, NULL, PXL_WORKER_PROTOCOL, 0);
}
