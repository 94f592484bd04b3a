/*
 * Tests/worker/test_worker.c (`make test-worker`): the decode worker (worker/README.md)
 * against a hostile codec module (hostile_module.c), through the library's side of it
 * (worker/worker_client.c).
 *
 *   test_worker WORKER MODULE_DIR LYING_WORKER [FILE...]
 *
 * MODULE_DIR holds libpixload-hostile.so, libpixload-qoi.so (the QOI test codec as a
 * module, Tests/fuzz/qoi/module) and the shipped modules (heif, jxl, svg) as `make
 * test-worker` builds them: linked against libpixload.so.0 as they ship, a NEEDED the
 * worker answers itself (its soname). Each hostile case must end as a decoder failure or
 * a refusal, this process must survive it, and the next image (a QOI file made now) must
 * decode, pixel for pixel as the same codec decodes it here. At the end: the secret file
 * was never read, the loopback listener saw no connection, no file was written, no signal
 * reached this process. Then each FILE, and an SVG with text made now (fonts through
 * landlock), decodes in the worker exactly as the same module decodes it in this process
 * (worker/codecs.c loads the modules here too). Prints the layers in force, each case's
 * outcome, the worker's start to its first decode (median of 20, with every module and
 * with QOI's alone), and "N passed, N failed" last.
 *
 * LYING_WORKER (lying_worker.c) breaks the protocol in each of its ways: the library's side
 * must refuse every lie (kill the worker, or refuse the image) and take no descriptor.
 * pxl_worker_map_private (an image's pixels mapped from the sealed memfd) maps a private
 * copy-on-write view and refuses a memfd that is not sealed against writes and resizing.
 *
 * Degraded: in a child whose own seccomp filter refuses unshare (EPERM) and landlock
 * (ENOSYS), as a container or an old kernel would, the worker starts with the other layers,
 * says so in HELLO, and decodes; and the secret is then readable, which is what landlock
 * stops and nothing else does.
 *
 * Controls, last: the same hostile cases in a child of this test without the worker (the
 * module loaded in-process, as PXL_ISOLATION_NONE would) must succeed in what they try:
 * the segfault kills the child, the secret comes back, the listener sees the connection,
 * the files are written, the signal arrives. So every check above can fail.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../worker/codecs.h"
#include "../../worker/manifest.h"
#include "../../worker/worker_client.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../capi/qoi_codec.h"
#pragma GCC diagnostic pop

static int passed, failed;
static volatile sig_atomic_t signals_received;

static void check(int ok, const char *what) {
  if (ok) passed++;
  else {
    failed++;
    printf("FAIL: %s\n", what);
  }
  fflush(stdout);
}

/* The statuses a worker's decode can end with (the test does not link libpixload). */
static const char *status_name(int s) {
  switch (s) {
  case PXL_OK: return "OK";
  case PXL_E_NOT_AN_IMAGE: return "NOT_AN_IMAGE";
  case PXL_E_CORRUPT_IMAGE: return "CORRUPT_IMAGE";
  case PXL_E_TOO_MANY_PIXELS: return "TOO_MANY_PIXELS";
  case PXL_E_UNSUPPORTED_IMAGE: return "UNSUPPORTED_IMAGE";
  case PXL_E_NO_MEMORY: return "NO_MEMORY";
  case PXL_E_IO: return "IO";
  case PXL_WORKER_E_DECODER_FAILED: return "DECODER_FAILED";
  default: return "other";
  }
}

static const char *end_name(pxl_worker_end e) {
  static const char *names[] = {"worker alive", "worker exited", "worker killed", "killed: timeout", "killed: protocol"};
  return names[e];
}

static void on_usr1(int sig) {
  (void)sig;
  signals_received++;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static pxl_worker_options options;
static pxl_worker *worker;

static void ensure_worker(void) {
  if (pxl_worker_alive(worker)) return;
  pxl_worker_free(worker);
  worker = NULL;
  char message[256];
  if (pxl_worker_spawn(&options, 5000, &worker, message, sizeof message) != PXL_OK) {
    printf("FAIL: cannot start the worker: %s\n", message);
    printf("%d passed, %d failed\n", passed, failed + 1);
    exit(1);
  }
}

/* ---- the good image: a QOI file made now, and its pixels from the same codec here ---- */

static uint8_t *qoi_file;
static size_t qoi_size;
static uint8_t expected[24 * 16 * 4];
enum { QW = 24, QH = 16 };

static void make_qoi(void) {
  uint8_t rgba[QW * QH * 4];
  for (int y = 0; y < QH; y++)
    for (int x = 0; x < QW; x++) {
      uint8_t *p = rgba + (y * QW + x) * 4;
      p[0] = (uint8_t)(x * 10), p[1] = (uint8_t)(y * 15), p[2] = (uint8_t)(x ^ y), p[3] = 255;
    }
  qoi_file = qoi_encode(rgba, QW, QH, &qoi_size);
  /* What the codec draws in-process: the reference for the worker's pixels. */
  static struct qoi_state state = {.frame_count = 1};
  pxl_codec c = qoi_codec(&state, "reference");
  static const volatile int32_t no = 0;
  pxl_codec_target t = {.struct_size = sizeof t, .width = QW, .height = QH, .pixels = expected, .stride = QW * 4, .cancel = &no};
  char message[256];
  if (c.decode(qoi_file, qoi_size, &t, message, sizeof message, c.user_data) != PXL_OK) {
    printf("FAIL: the reference decode: %s\n", message);
    exit(1);
  }
}

/* Decodes the QOI file through the worker; 1 when its pixels are the reference's. */
static int good_decode(double *ms) {
  ensure_worker();
  pxl_worker_result r;
  double start = now_ms();
  pxl_worker_decode(worker, qoi_file, qoi_size, NULL, 0, 0, 5000, &r);
  if (ms) *ms = now_ms() - start;
  int ok = r.status == PXL_OK && r.header.width == QW && r.header.height == QH && strcmp(r.header.codec, "qoi") == 0;
  for (int y = 0; ok && y < QH; y++) ok = memcmp(r.pixels + y * r.stride, expected + y * QW * 4, QW * 4) == 0;
  if (!ok) printf("  good decode: status %d: %s\n", r.status, r.message);
  pxl_worker_result_release(&r);
  return ok;
}

/* pxl_worker_map_private (the library maps a decode's sealed memfd again as the image's
 * pixels): a private copy of the sealed pixels whose writes never reach the memfd; refused
 * for a memfd the worker could still write or resize, and for more bytes than it holds. */
static void map_private_checks(void) {
  ensure_worker();
  pxl_worker_result r;
  pxl_worker_decode(worker, qoi_file, qoi_size, NULL, 0, 0, 5000, &r);
  check(r.status == PXL_OK && r.memfd >= 0, "map_private: a decode to map");
  if (r.status == PXL_OK && r.memfd >= 0) {
    uint8_t *m = pxl_worker_map_private(r.memfd, r.map_size);
    check(m && memcmp(m, r.pixels, r.map_size) == 0, "map_private: the sealed pixels, mapped again");
    if (m) {
      uint8_t flipped = (uint8_t)~expected[0];
      m[0] = flipped;
      check(r.pixels[0] == expected[0] && m[0] == flipped,
            "map_private: a write copies the page, the memfd keeps its pixels");
      munmap(m, r.map_size);
    }
    check(pxl_worker_map_private(r.memfd, r.map_size + 4096) == NULL, "map_private: not past the memfd's end");
  }
  pxl_worker_result_release(&r);
  int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  check(fd >= 0 && ftruncate(fd, 4096) == 0, "map_private: a memfd");
  check(pxl_worker_map_private(fd, 4096) == NULL, "map_private: an unsealed memfd is refused");
  /* As the worker has it while it draws: its size sealed, not yet its contents. */
  check(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0 && pxl_worker_map_private(fd, 4096) == NULL,
        "map_private: a memfd still writable is refused");
  check(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0, "map_private: sealed");
  void *m = pxl_worker_map_private(fd, 4096);
  check(m != NULL, "map_private: a sealed memfd maps");
  if (m) munmap(m, 4096);
  close(fd);
}

/* The kept memfds (protocol 5): a large image's bytes grow the worker's data memfd, a
 * small one after it reads only its own bytes from the grown memfd (stale bytes behind
 * them), and a thumbnail drawn into the kept output memfd (copied out: no memfd in the
 * result) is the same as one drawn into a memfd of its own, across output sizes that
 * replace the kept memfd and one that fits in it again. */
static void kept_memfd_checks(void) {
  enum { BW = 400, BH = 300 };
  uint8_t *rgba = malloc((size_t)BW * BH * 4), *reference = malloc((size_t)BW * BH * 4);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < (size_t)BW * BH * 4; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    rgba[i] = (uint8_t)x;
  }
  size_t big_size;
  uint8_t *big = qoi_encode(rgba, BW, BH, &big_size);
  static struct qoi_state state = {.frame_count = 1};
  pxl_codec c = qoi_codec(&state, "reference");
  static const volatile int32_t no = 0;
  pxl_codec_target t = {.struct_size = sizeof t, .width = BW, .height = BH, .pixels = reference, .stride = BW * 4, .cancel = &no};
  char message[256];
  check(big_size > (256u << 10) && c.decode(big, big_size, &t, message, sizeof message, c.user_data) == PXL_OK,
        "kept: a QOI file over the kept data memfd's first size, decoded here");
  ensure_worker();
  for (int round = 0; round < 2; round++) {
    pxl_worker_result r;
    pxl_worker_decode(worker, big, big_size, NULL, 0, 0, 5000, &r);
    int ok = r.status == PXL_OK && r.header.width == BW && r.header.height == BH;
    for (int y = 0; ok && y < BH; y++) ok = memcmp(r.pixels + y * r.stride, reference + (size_t)y * BW * 4, BW * 4) == 0;
    pxl_worker_result_release(&r);
    check(ok, round ? "kept: the large file again, after a small one" : "kept: the large file grows the data memfd");
    check(good_decode(NULL), "kept: a small file after a large one, in the grown data memfd");
  }
  /* Thumbnails: the kept output memfd (DRAW) against a memfd of their own (DECODE). */
  const int sizes[][2] = {{40, 30}, {200, 150}, {40, 30}};
  for (int i = 0; i < 3; i++) {
    pxl_worker_resample rs = {sizes[i][0], sizes[i][1], 0, 0, {0, 0, BW, BH}};
    size_t bytes = (size_t)rs.out_width * rs.out_height * 4;
    pxl_worker_result kept, own;
    pxl_worker_open(worker, big, big_size, NULL, 0, 5000, &kept);
    if (kept.status == PXL_OK) pxl_worker_draw(worker, BW, BH, 0, &rs, 5000, &kept);
    pxl_worker_decode_resampled(worker, big, big_size, NULL, 0, 0, 0, &rs, 5000, &own);
    char what[96];
    snprintf(what, sizeof what, "kept: a %dx%d thumbnail in the kept output memfd, copied out", rs.out_width, rs.out_height);
    check(kept.status == PXL_OK && kept.memfd < 0 && kept.copied && kept.pixels == kept.copied, what);
    snprintf(what, sizeof what, "kept: the %dx%d thumbnail is the one drawn into a memfd of its own", rs.out_width, rs.out_height);
    check(kept.status == PXL_OK && own.status == PXL_OK && own.memfd >= 0 && memcmp(kept.pixels, own.pixels, bytes) == 0,
          what);
    pxl_worker_result_release(&kept);
    pxl_worker_result_release(&own);
  }
  check(good_decode(NULL), "kept: the worker decodes on after them");
  free(big);
  free(rgba);
  free(reference);
}

/* Decodes path in this process (the module loaded here) and in the worker: 1 when both
 * give the same status and, decoded, the same pixels. */
static int same_in_worker(const char *path, int text) {
  FILE *f = fopen(path, "rb");
  if (!f) return check(0, path), 0;
  static uint8_t data[8 << 20];
  size_t size = fread(data, 1, sizeof data, f);
  fclose(f);
  const pxl_codec *c = pxl_worker_codec_sniff(data, size);
  char what[400], message[256] = "";
  if (!c) {
    snprintf(what, sizeof what, "a module here takes %s", path);
    return check(0, what), 0;
  }
  pxl_codec_header h = {.struct_size = sizeof h, .frame_count = 1, .orientation = 1, .has_alpha = 1};
  pxl_status here = c->read_header(data, size, &h, message, sizeof message, c->user_data);
  uint8_t *pixels = NULL;
  if (here == PXL_OK && (uint64_t)h.width * h.height <= options.max_pixels) {
    static const volatile int32_t no = 0;
    pixels = calloc((size_t)h.width * h.height, 4);
    pxl_codec_target t = {.struct_size = sizeof t, .width = h.width, .height = h.height, .pixels = pixels,
                          .stride = (size_t)h.width * 4, .cancel = &no};
    here = c->decode(data, size, &t, message, sizeof message, c->user_data);
  }
  ensure_worker();
  pxl_worker_result r;
  pxl_worker_decode(worker, data, size, NULL, 0, 0, 10000, &r);
  int same = r.status == here && (here != PXL_OK || (r.header.width == h.width && r.header.height == h.height &&
                                                     memcmp(r.pixels, pixels, (size_t)h.width * h.height * 4) == 0));
  /* Text drew something: not every pixel of the row through the text is the background. */
  if (same && text && here == PXL_OK) {
    int drawn = 0;
    for (int x = 0; x < h.width; x++) drawn += pixels[((size_t)(h.height * 2 / 3) * h.width + x) * 4] != pixels[0];
    same = drawn > 0;
  }
  snprintf(what, sizeof what, "%s (%s) decodes in the worker as in-process (here %s, worker %s: %s)", path, c->id,
           status_name(here), status_name(r.status), r.message);
  check(same, what);
  pxl_worker_result_release(&r);
  free(pixels);
  return same;
}

/* Each shipped module's manifest (pixload.h, "Codec modules"), read from its file as the
 * library reads it, says what its register adds (id, version, flags, choose_size), and its
 * rules take exactly what the module's own sniff takes: every file given, every prefix of
 * their first 64 bytes, and near misses; a module without a manifest (the hostile one,
 * built as before) has none. */
static void manifests_agree(const char *module_dir, const char **paths, int n) {
  static const char *modules[] = {"heif", "jxl", "svg"};
  static const char *near[] = {"<?xml version='1.0'?><!-- c --><!DOCTYPE svg [ <!ENTITY a 'b'> ]>\n<svg>",
                               "\xef\xbb\xbf <svg/>", "<svgx>", "<svg", "<html><svg>", "<!-- <svg> -->",
                               "\xff\x0a", "\xff\x0b", "\0\0\0\x0c" "JXL \r\n\x87\n", "\0\0\0\x0c" "JXL \r\n\x87\x0b",
                               "\0\0\0\x18" "ftypmif1\0\0\0\0heic", "\0\0\0\x10" "ftypavif\0\0\0\0heic",
                               "\0\0\0\x14" "ftypavif\0\0\0\0heic", "\0\0\0\x0c" "ftypheic\0\0\0\0"};
  static const size_t near_size[] = {0, 0, 0, 0, 0, 0, 2, 2, 12, 12, 24, 20, 20, 16};
  char what[800], path[600];
  int rules_checked = 0;
  for (size_t m = 0; m < sizeof modules / sizeof modules[0]; m++) {
    pxl_codec_manifest manifest;
    snprintf(path, sizeof path, "%s/libpixload-%s.so", module_dir, modules[m]);
    snprintf(what, sizeof what, "%s has a manifest the library reads", path);
    int has = pxl_manifest_read(path, &manifest);
    check(has, what);
    if (!has) continue;
    for (uint32_t c = 0; c < manifest.codec_count; c++) {
      const pxl_codec_manifest_codec *mc = &manifest.codecs[c];
      const pxl_codec *codec = pxl_worker_codec_named(mc->id);
      snprintf(what, sizeof what, "%s's manifest codec %s is registered with its version, flags and choose_size",
               modules[m], mc->id);
      int same = codec && strcmp(codec->version, mc->version) == 0 && codec->flags == mc->flags &&
                 (codec->choose_size != NULL) == (mc->has_choose_size != 0);
      check(same, what);
      if (!same) continue;
      int disagree = 0;
      static uint8_t data[PXL_CODEC_SNIFF_BYTES];
      for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) continue;
        size_t size = fread(data, 1, sizeof data, f);
        fclose(f);
        for (size_t len = 0; len <= size; len = len < 64 ? len + 1 : (len == size ? size + 1 : size)) {
          rules_checked++;
          if (pxl_manifest_sniff(mc, data, len) != (codec->sniff(data, len, codec->user_data) != 0)) {
            if (!disagree++) fprintf(stderr, "  %s: manifest and sniff differ on %s at %zu bytes\n", mc->id, paths[i], len);
          }
        }
      }
      for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
        size_t len = near_size[i] ? near_size[i] : strlen(near[i]);
        rules_checked++;
        if (pxl_manifest_sniff(mc, (const uint8_t *)near[i], len) != (codec->sniff((const uint8_t *)near[i], len,
                                                                                   codec->user_data) != 0)) {
          if (!disagree++) fprintf(stderr, "  %s: manifest and sniff differ on near miss %zu\n", mc->id, i);
        }
      }
      snprintf(what, sizeof what, "%s's manifest rules take what its sniff takes", mc->id);
      check(disagree == 0, what);
    }
  }
  snprintf(path, sizeof path, "%s/libpixload-hostile.so", module_dir);
  pxl_codec_manifest none;
  check(!pxl_manifest_read(path, &none), "a module without a manifest (built before them) has none: it is loaded");
  check(!pxl_manifest_read("/nonexistent/libpixload-x.so", &none), "no file, no manifest");
  printf("manifests: %d sniffs compared with the modules' own\n", rules_checked);
}

/* Runs the hostile case input in a forked child of this test, the module loaded there
 * (no worker, no confinement). Returns the child's wait status; *pixels gets the first
 * bytes its decode wrote when it returned. */
static int unconfined(const char *module_dir, const char *input, char *pixels, size_t cap) {
  int out[2];
  if (pipe(out) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    char message[256];
    if (pxl_worker_codecs_load(module_dir, "hostile", message, sizeof message) < 0) _exit(3);
    const pxl_codec *c = pxl_worker_codec_named("hostile");
    static uint8_t buffer[4 * 4 * 4];
    static const volatile int32_t no = 0;
    pxl_codec_target t = {.struct_size = sizeof t, .width = 4, .height = 4, .pixels = buffer, .stride = 16, .cancel = &no};
    pxl_status s = c->decode((const uint8_t *)input, strlen(input), &t, message, sizeof message, c->user_data);
    if (write(out[1], buffer, sizeof buffer) < 0) _exit(4);
    _exit(s == PXL_OK ? 0 : 1);
  }
  close(out[1]);
  memset(pixels, 0, cap);
  ssize_t n = read(out[0], pixels, cap - 1);
  (void)n;
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++) n += fcntl(fd, F_GETFD) >= 0;
  return n;
}

/* The library's side against a worker that lies (lying_worker.c). */
static void lying_worker(const char *liar) {
  struct {
    const char *mode;
    pxl_status status;   /* PXL_OK: the honest 4 x 4 of 0x5a */
    pxl_worker_end end;
  } cases[] = {
      {"silent", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_TIMED_OUT},
      {"zero-size", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"over-max", PXL_E_TOO_MANY_PIXELS, PXL_WORKER_ALIVE},
      {"icc-huge", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"wrong-serial", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"oversized", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"garbage", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"keep-mapping", PXL_WORKER_E_DECODER_FAILED, PXL_WORKER_PROTOCOL},
      {"shrink", PXL_OK, PXL_WORKER_ALIVE},
      {"send-fd", PXL_OK, PXL_WORKER_ALIVE},
  };
  pxl_worker_options o = {.executable = liar, .max_pixels = options.max_pixels};
  pxl_worker *w;
  char message[256], what[300];
  o.module_dir = "bad-hello";
  check(pxl_worker_spawn(&o, 2000, &w, message, sizeof message) == PXL_WORKER_E_DECODER_FAILED,
        "liar bad-hello: a HELLO one byte short starts no worker");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    o.module_dir = cases[i].mode;
    int fds = open_fds();
    if (pxl_worker_spawn(&o, 2000, &w, message, sizeof message) != PXL_OK) {
      snprintf(what, sizeof what, "liar %s: starts (%s)", cases[i].mode, message);
      check(0, what);
      continue;
    }
    pxl_worker_result r;
    pxl_worker_decode(w, (const uint8_t *)"x", 1, NULL, 0, 0, 500, &r);
    int ok = r.status == cases[i].status && r.end == cases[i].end;
    if (ok && r.status == PXL_OK) {
      ok = r.header.width == 4 && r.header.height == 4;
      for (int k = 0; ok && k < 64; k++) ok = r.pixels[k] == 0x5a;
    }
    printf("  liar %-13s %-15s %-16s %s\n", cases[i].mode, status_name(r.status), end_name(r.end), r.message);
    snprintf(what, sizeof what, "liar %s: %s, %s", cases[i].mode, status_name(cases[i].status), end_name(cases[i].end));
    check(ok, what);
    pxl_worker_result_release(&r);
    pxl_worker_free(w);
    snprintf(what, sizeof what, "liar %s: no descriptor left behind", cases[i].mode);
    check(open_fds() == fds, what);
  }
}

/* Protocol 4's conversation against a liar: a HEADER answering SIZE must say what the
 * first said of the image; one that does not kills the worker. */
static void lying_conversation(const char *liar) {
  pxl_worker_options o = {.executable = liar, .max_pixels = options.max_pixels, .module_dir = "size-lies"};
  pxl_worker *w;
  char message[256];
  int fds = open_fds();
  if (pxl_worker_spawn(&o, 2000, &w, message, sizeof message) != PXL_OK) {
    check(0, "liar size-lies: starts");
    return;
  }
  pxl_worker_result r;
  pxl_worker_open(w, (const uint8_t *)"x", 1, NULL, 0, 500, &r);
  check(r.status == PXL_OK && r.header.image_width == 4 && pxl_worker_alive(w), "liar size-lies: the conversation opens");
  pxl_worker_size(w, 2, 2, 500, &r);
  printf("  liar %-13s %-15s %-16s %s\n", "size-lies", status_name(r.status), end_name(r.end), r.message);
  check(r.status == PXL_WORKER_E_DECODER_FAILED && r.end == PXL_WORKER_PROTOCOL && !pxl_worker_alive(w),
        "liar size-lies: a SIZE answer of another image kills the worker");
  pxl_worker_free(w);
  check(open_fds() == fds, "liar size-lies: no descriptor left behind");
}

/* In a child without user namespaces and landlock (see the file's comment): 0 when the
 * worker reports exactly the other layers, decodes the QOI file, and reads the secret. */
static int degraded(const char *secret, const char *secret_text, char *report, size_t cap) {
  int out[2];
  if (pipe(out) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
    seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0);
    seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(c) != 0) _exit(10);
    pxl_worker_free(worker);
    worker = NULL;
    ensure_worker();
    char line[256], layers[128];
    pxl_worker_layers_string(pxl_worker_hello_of(worker)->layers, layers, sizeof layers);
    int result = strcmp(layers, "no_new_privs seccomp rlimits fds_closed") == 0 ? 0 : 1;
    if (!good_decode(NULL)) result |= 2;
    char input[400];
    snprintf(input, sizeof input, "HOSTILE:read %s", secret);
    pxl_worker_result r;
    pxl_worker_decode(worker, (const uint8_t *)input, strlen(input), NULL, 0, 0, 5000, &r);
    int read = r.status == PXL_OK && memmem(r.pixels, r.map_size, secret_text, strlen(secret_text)) != NULL;
    if (!read) result |= 4;
    pxl_worker_result_release(&r);
    snprintf(line, sizeof line, "layers in force: %s; the secret %s", layers, read ? "is read" : "is not read");
    if (write(out[1], line, strlen(line)) < 0) result |= 8;
    _exit(result);
  }
  close(out[1]);
  memset(report, 0, cap);
  ssize_t n = read(out[0], report, cap - 1);
  (void)n;
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

/* A locked worker's decoder sizes its thread pools as it would unconfined: landlock denies
 * /sys/devices/system/cpu/online and /proc/stat, where glibc's get_nprocs and sysconf
 * (_SC_NPROCESSORS_ONLN) look first (std::thread::hardware_concurrency is get_nprocs), so
 * the count comes from their fallback, sched_getaffinity, which seccomp must keep allowing
 * (refused, glibc answers a constant 2: hence a second worker started on one CPU, where 2
 * is wrong); and a pool of max(8, CPUs) threads must start under seccomp's clone rule and
 * RLIMIT_AS. A worker inherits this process's affinity: that is the count expected. A
 * decoder told "1 CPU" decodes alone, and isolation would cost wall time, not CPU. */
static void cpu_count_check(const cpu_set_t *run_on) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || sched_setaffinity(0, sizeof *run_on, run_on) != 0) {
    check(0, "cpus: set this process's affinity");
    return;
  }
  uint32_t cpus = (uint32_t)CPU_COUNT(run_on);
  pxl_worker_free(worker);
  worker = NULL;
  ensure_worker(); /* started on run_on's CPUs */
  sched_setaffinity(0, sizeof mine, &mine);
  const char *input = "HOSTILE:cpus";
  pxl_worker_result r;
  pxl_worker_decode(worker, (const uint8_t *)input, strlen(input), NULL, 0, 0, 5000, &r);
  uint32_t seen[4] = {0};
  if (r.status == PXL_OK && r.map_size >= sizeof seen) memcpy(seen, r.pixels, sizeof seen);
  printf("a worker started on %u of %d CPUs (get_nprocs here %d, sysconf %ld); in it, locked: sysconf %u, "
         "get_nprocs %u, sched_getaffinity %u, pool threads alive at once %u (%s)\n", cpus, CPU_COUNT(&mine),
         get_nprocs(), sysconf(_SC_NPROCESSORS_ONLN), seen[0], seen[1], seen[2], seen[3],
         r.status == PXL_OK ? "decoded" : r.message);
  char what[160];
  snprintf(what, sizeof what, "cpus decodes in a locked worker started on %u CPUs", cpus);
  check(r.status == PXL_OK, what);
  snprintf(what, sizeof what, "%u CPUs: the locked worker's sched_getaffinity counts them", cpus);
  check(seen[2] == cpus, what);
  snprintf(what, sizeof what, "%u CPUs: sysconf(_SC_NPROCESSORS_ONLN) and get_nprocs in the locked worker too", cpus);
  check(seen[0] == cpus && seen[1] == cpus, what);
  snprintf(what, sizeof what, "%u CPUs: a pool of max(8, CPUs) threads lives at once in the locked worker", cpus);
  check(seen[3] == (cpus > 8 ? cpus : 8), what);
  pxl_worker_result_release(&r);
  /* A refused thread leaves the pool's others waiting; and this worker is pinned. */
  pxl_worker_free(worker);
  worker = NULL;
}

/* The machine's CPUs (those this process may use), then one of them (any machine has 1). */
static void cpu_count_checks(void) {
  cpu_set_t all, one;
  CPU_ZERO(&all);
  CPU_ZERO(&one);
  if (sched_getaffinity(0, sizeof all, &all) != 0) {
    check(0, "cpus: sched_getaffinity in the test");
    return;
  }
  cpu_count_check(&all);
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &all)) {
      CPU_SET(i, &one);
      break;
    }
  cpu_count_check(&one);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s WORKER MODULE_DIR LYING_WORKER [FILE...]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGUSR1, on_usr1);
  options = (pxl_worker_options){.executable = argv[1], .module_dir = argv[2], .max_pixels = 16u << 20,
                                 .keep_stderr = getenv("WORKER_STDERR") != NULL,
                                 .debug_seccomp = getenv("WORKER_DEBUG_SECCOMP") != NULL};
  make_qoi();

  /* The things a hostile decoder must not reach: a secret, a listener, a path to write. */
  char dir[] = "/tmp/pixload-worker-test-XXXXXX";
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  char secret[300], written[300], shell_written[300];
  snprintf(secret, sizeof secret, "%s/secret", dir);
  snprintf(written, sizeof written, "%s/written", dir);
  snprintf(shell_written, sizeof shell_written, "%s/by-shell", dir);
  const char *secret_text = "TOP-SECRET-6f1c2a";
  FILE *f = fopen(secret, "w");
  fputs(secret_text, f);
  fclose(f);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof addr;
  if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 4) ||
      getsockname(listener, (struct sockaddr *)&addr, &alen))
    return perror("listener"), 1;
  int port = ntohs(addr.sin_port);

  /* Start to first decode, and to HELLO, median of 20 fresh workers: with every module of
   * MODULE_DIR (libheif, libjxl and librsvg loaded: what a worker costs), then with QOI's
   * alone (the worker's own cost). */
  for (int round = 0; round < 2; round++) {
    options.only = round ? "qoi" : NULL;
    double hello[20], first[20];
    for (int i = 0; i < 20; i++) {
      pxl_worker_free(worker);
      worker = NULL;
      double start = now_ms();
      ensure_worker();
      hello[i] = now_ms() - start;
      double ms;
      check(good_decode(&ms), "a fresh worker decodes the QOI file");
      first[i] = hello[i] + ms;
    }
    qsort(hello, 20, sizeof hello[0], cmp_double);
    qsort(first, 20, sizeof first[0], cmp_double);
    printf("worker start (%s): to hello median %.2f ms (min %.2f, max %.2f); to first decode done median %.2f ms "
           "(min %.2f, max %.2f)\n", round ? "qoi module only" : "every module", hello[10], hello[0], hello[19],
           first[10], first[0], first[19]);
  }
  options.only = NULL;
  pxl_worker_free(worker);
  worker = NULL;
  ensure_worker();
  char layers[128];
  const pxl_worker_msg_hello *h = pxl_worker_hello_of(worker);
  pxl_worker_layers_string(h->layers, layers, sizeof layers);
  printf("layers in force: %s (landlock ABI %u, RLIMIT_AS %llu MiB); codecs: %s\n", layers, h->landlock_abi,
         (unsigned long long)(h->as_limit >> 20), h->codecs);
  double warm[50];
  for (int i = 0; i < 50; i++) good_decode(&warm[i]);
  qsort(warm, 50, sizeof warm[0], cmp_double);
  printf("a warm worker's decode of a 24x16 QOI, round trip: median %.3f ms\n", warm[25]);

  /* Every layer this machine offers: the outcomes below depend on them. */
  uint32_t want = PXL_WORKER_LAYER_NO_NEW_PRIVS | PXL_WORKER_LAYER_LANDLOCK | PXL_WORKER_LAYER_SECCOMP |
                  PXL_WORKER_LAYER_RLIMITS | PXL_WORKER_LAYER_FDS_CLOSED;
  check((h->layers & want) == want, "no_new_privs, landlock, seccomp, rlimits and closed fds in force");

  struct {
    const char *input;
    int timeout_ms;
  } cases[] = {
      {"ok", 5000},        {"thread", 5000}, {"segv", 5000},    {"spin", 1000},      {"alloc16g", 10000},
      {"overflow", 5000},  {"huge", 5000},   {"read %s", 5000}, {"connect %d", 5000}, {"exec %s", 5000},
      {"fork", 5000},      {"killparent", 5000}, {"write %s", 5000}, {"status 9999", 5000},
      {"status -7", 5000}, {"status 7", 5000},
  };
  printf("%-12s | %-15s | %-16s | %s\n", "case", "status", "worker", "message");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char input[600] = "HOSTILE:", name[64];
    const char *fmt = cases[i].input;
    if (strstr(fmt, "%d")) snprintf(input + 8, sizeof input - 8, fmt, port);
    else if (strncmp(fmt, "read", 4) == 0) snprintf(input + 8, sizeof input - 8, fmt, secret);
    else if (strncmp(fmt, "exec", 4) == 0) snprintf(input + 8, sizeof input - 8, fmt, shell_written);
    else if (strncmp(fmt, "write", 5) == 0) snprintf(input + 8, sizeof input - 8, fmt, written);
    else snprintf(input + 8, sizeof input - 8, "%s", fmt);
    sscanf(fmt, "%63s", name);
    ensure_worker();
    pxl_worker_result r;
    double start = now_ms();
    pxl_worker_decode(worker, (const uint8_t *)input, strlen(input), NULL, 0, 0, cases[i].timeout_ms, &r);
    double ms = now_ms() - start;
    printf("%-12s | %-15s | %-16s | %s (%.0f ms)\n", name, status_name(r.status), end_name(r.end), r.message, ms);
    int good = strcmp(name, "ok") == 0 || strcmp(name, "thread") == 0;
    char what[160];
    snprintf(what, sizeof what, good ? "%s decodes" : "%s ends as a decoder failure or a refusal", name);
    check(good ? r.status == PXL_OK : r.status != PXL_OK, what);
    if (r.status == PXL_OK && strcmp(name, "read") == 0)
      check(memmem(r.pixels, r.map_size, secret_text, strlen(secret_text)) == NULL, "the secret is not in the pixels");
    if (strcmp(name, "spin") == 0) check(r.end == PXL_WORKER_TIMED_OUT, "spin is killed at its time limit");
    if (strcmp(name, "segv") == 0) check(r.end == PXL_WORKER_SIGNALLED && r.signal == SIGSEGV, "segv dies of SIGSEGV");
    if (strcmp(name, "huge") == 0) check(r.status == PXL_E_TOO_MANY_PIXELS && pxl_worker_alive(worker),
                                         "a header over max_pixels is refused before any buffer");
    if (strcmp(name, "alloc16g") == 0) check(strstr(r.message, "decoder exceeded") != NULL, "alloc16g meets RLIMIT_AS");
    if (strcmp(name, "status") == 0) {
      /* A status pixload.h does not define counts as PXL_E_IO, as any extension's does in
       * the library ("Extensions"); a defined one not a codec's (PXL_E_TIMEOUT) stays a
       * corrupt image. The worker lives on, and the message is the module's. */
      pxl_status want = strcmp(input, "HOSTILE:status 7") == 0 ? PXL_E_CORRUPT_IMAGE : PXL_E_IO;
      snprintf(what, sizeof what, "%s is %s, the worker alive, the module's message", input + 8, status_name(want));
      check(r.status == want && pxl_worker_alive(worker) && strstr(r.message, "hostile status") != NULL, what);
    }
    pxl_worker_result_release(&r);
    snprintf(what, sizeof what, "the next image decodes after %s", name);
    check(good_decode(NULL), what);
  }

  cpu_count_checks();

  lying_worker(argv[3]);
  map_private_checks();
  kept_memfd_checks();
  lying_conversation(argv[3]);

  /* What must not have happened. */
  int conn = accept(listener, NULL, NULL);
  check(conn < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "the listener saw no connection");
  struct stat st;
  check(stat(written, &st) != 0 && errno == ENOENT, "no file was written");
  check(stat(shell_written, &st) != 0 && errno == ENOENT, "no shell ran");
  check(signals_received == 0, "no signal reached the test process");

  /* Real modules: the same pixels in the worker as in this process. */
  char svg[300];
  snprintf(svg, sizeof svg, "%s/text.svg", dir);
  f = fopen(svg, "w");
  fputs("<svg xmlns='http://www.w3.org/2000/svg' width='160' height='48'><rect width='160' height='48' fill='#2a6'/>"
        "<text x='6' y='34' font-family='sans-serif' font-size='28' fill='white'>Hello</text></svg>\n", f);
  fclose(f);
  char message[256];
  if (pxl_worker_codecs_load(argv[2], "heif,jxl,svg", message, sizeof message) < 0) {
    check(0, message);
  } else {
    int matched = 0, files = 0;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int n = 0;
    paths[n++] = svg;
    for (int i = 4; i < argc; i++) paths[n++] = argv[i];
    for (int i = 0; i < n; i++, files++) matched += same_in_worker(paths[i], i == 0);
    printf("real modules: %d of %d files decode in the worker exactly as in-process\n", matched, files);
    manifests_agree(argv[2], paths, n);
    free(paths);
  }

  char report[300];
  int degraded_result = degraded(secret, secret_text, report, sizeof report);
  printf("without user namespaces and landlock: %s\n", report);
  check(degraded_result == 0, "without user namespaces and landlock: the worker reports the other layers, decodes, "
                              "and the secret is readable (landlock's part)");

  /* Controls: unconfined, each case does what it tries, and each detector sees it. */
  char input[600], got[128];
  int st_child = unconfined(argv[2], "HOSTILE:segv", got, sizeof got);
  check(WIFSIGNALED(st_child) && WTERMSIG(st_child) == SIGSEGV, "control: unconfined, segv kills its process");
  snprintf(input, sizeof input, "HOSTILE:read %s", secret);
  unconfined(argv[2], input, got, sizeof got);
  check(strstr(got, secret_text) != NULL, "control: unconfined, the secret is read");
  snprintf(input, sizeof input, "HOSTILE:connect %d", port);
  unconfined(argv[2], input, got, sizeof got);
  conn = accept(listener, NULL, NULL);
  check(conn >= 0, "control: unconfined, the listener sees the connection");
  if (conn >= 0) close(conn);
  snprintf(input, sizeof input, "HOSTILE:write %s", written);
  unconfined(argv[2], input, got, sizeof got);
  check(stat(written, &st) == 0, "control: unconfined, the file is written");
  snprintf(input, sizeof input, "HOSTILE:exec %s", shell_written);
  unconfined(argv[2], input, got, sizeof got);
  check(stat(shell_written, &st) == 0, "control: unconfined, /bin/sh runs");
  st_child = unconfined(argv[2], "HOSTILE:fork", got, sizeof got);
  check(WIFEXITED(st_child) && WEXITSTATUS(st_child) == 0, "control: unconfined, fork succeeds");
  /* The child's parent is this test: the signal arrives here. */
  unconfined(argv[2], "HOSTILE:killparent", got, sizeof got);
  check(signals_received == 1, "control: unconfined, the signal reaches the test");

  pxl_worker_free(worker);
  unlink(svg);
  unlink(secret);
  unlink(written);
  unlink(shell_written);
  rmdir(dir);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
