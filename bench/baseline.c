/*
 * bench/baseline.c: the "bare C" baseline pixload is measured against.
 *
 *   baseline [--size WxH] [--concurrency N] [--no-decode] URL_LIST_FILE
 *
 * Downloads every URL of the list (one per line) and decodes it to RGBA8, the way a
 * competent C programmer would without pixload: one thread drives libcurl's multi
 * interface (keep-alive, at most N transfers at once, default 8) and two worker
 * threads decode (libjpeg-turbo, libpng) from a simple queue. No cache.
 *
 * With --size WxH each image ends as exactly WxH in "fill" mode (pixload's
 * PXL_MODE_FILL): JPEGs are DCT-scaled by the largest 1/1, 1/2, 1/4, 1/8 that still
 * covers the target, then everything is box-averaged (area average) and centre
 * cropped. Like pixload, it never scales up: a smaller source is only cropped to the
 * target's aspect ratio.
 *
 * With --no-decode it only downloads (the bodies are dropped, no decoder thread runs):
 * the cost of the network path alone, which bench/network.sh sets pixload against.
 *
 * Prints: baseline: N images, X.X images/s, Y.YYY ms CPU/image (user+sys, getrusage
 * RUSAGE_SELF), wall Z.ZZ s. Any failure is reported and makes the exit status 1.
 *
 * Build: gcc -O2 bench/baseline.c -lcurl -ljpeg -lpng -lpthread
 */
#include <curl/curl.h>
#include <jpeglib.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define DECODE_THREADS 2

static int target_w, target_h; /* 0, 0: full size */
static int no_decode;          /* --no-decode: download only */

/* ---- one image's bytes, handed from the network thread to a decoder ---- */

typedef struct job {
  struct job *next;
  char *url;
  unsigned char *data;
  size_t len, cap;
} job;

static job *queue_head, *queue_tail;
static int queue_closed;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static int decoded_ok, decode_failed; /* under queue_lock */

static void queue_push(job *j) {
  pthread_mutex_lock(&queue_lock);
  j->next = NULL;
  if (queue_tail) queue_tail->next = j; else queue_head = j;
  queue_tail = j;
  pthread_cond_signal(&queue_cond);
  pthread_mutex_unlock(&queue_lock);
}

static job *queue_pop(void) { /* NULL once closed and drained */
  pthread_mutex_lock(&queue_lock);
  while (!queue_head && !queue_closed) pthread_cond_wait(&queue_cond, &queue_lock);
  job *j = queue_head;
  if (j) {
    queue_head = j->next;
    if (!queue_head) queue_tail = NULL;
  }
  pthread_mutex_unlock(&queue_lock);
  return j;
}

/* ---- resampling: box average of a centre crop, "fill" semantics ---- */

/* src: sw x sh RGBA. Returns a malloc'd tw x th RGBA image, or NULL. */
static unsigned char *fill_box(const unsigned char *src, int sw, int sh, int tw, int th,
                               int *out_w, int *out_h) {
  /* The crop of the source with the target's aspect ratio, as large as possible. */
  int cw = sw, ch = sh;
  if ((int64_t)sw * th > (int64_t)sh * tw) cw = (int)((int64_t)sh * tw / th);
  else ch = (int)((int64_t)sw * th / tw);
  if (cw < 1) cw = 1;
  if (ch < 1) ch = 1;
  /* Never scale up: a crop smaller than the target stays at its own resolution. */
  int ow = cw < tw ? cw : tw, oh = ch < th ? ch : th;
  int x0 = (sw - cw) / 2, y0 = (sh - ch) / 2;

  unsigned char *dst = malloc((size_t)ow * oh * 4);
  uint32_t *acc = malloc((size_t)ow * 4 * sizeof *acc);
  int *xs = malloc((size_t)(ow + 1) * sizeof *xs); /* source column span of each output column */
  if (!dst || !acc || !xs) { free(dst); free(acc); free(xs); return NULL; }
  for (int x = 0; x <= ow; x++) xs[x] = x0 + (int)((int64_t)x * cw / ow);

  for (int y = 0; y < oh; y++) {
    int ya = y0 + (int)((int64_t)y * ch / oh), yb = y0 + (int)((int64_t)(y + 1) * ch / oh);
    memset(acc, 0, (size_t)ow * 4 * sizeof *acc);
    for (int sy = ya; sy < yb; sy++) { /* every source pixel is read exactly once */
      const unsigned char *row = src + (size_t)sy * sw * 4;
      uint32_t *a = acc;
      for (int x = 0; x < ow; x++, a += 4) {
        for (const unsigned char *p = row + xs[x] * 4, *e = row + xs[x + 1] * 4; p < e; p += 4) {
          a[0] += p[0]; a[1] += p[1]; a[2] += p[2]; a[3] += p[3];
        }
      }
    }
    unsigned char *d = dst + (size_t)y * ow * 4;
    for (int x = 0; x < ow; x++) {
      uint32_t n = (uint32_t)(xs[x + 1] - xs[x]) * (uint32_t)(yb - ya), *a = acc + x * 4;
      for (int c = 0; c < 4; c++) d[x * 4 + c] = (unsigned char)((a[c] + n / 2) / n);
    }
  }
  free(acc);
  free(xs);
  *out_w = ow;
  *out_h = oh;
  return dst;
}

/* ---- decoders ---- */

typedef struct {
  struct jpeg_error_mgr mgr;
  jmp_buf jmp;
  char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_error_exit(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  e->mgr.format_message(cinfo, e->msg);
  longjmp(e->jmp, 1);
}

static void jpeg_quiet(j_common_ptr cinfo, int level) { (void)cinfo; (void)level; }

/* Returns malloc'd RGBA pixels (*w x *h) or NULL with *why set. */
static unsigned char *decode_jpeg(const unsigned char *data, size_t len, int *w, int *h,
                                  const char **why) {
  static __thread char msg[JMSG_LENGTH_MAX];
  struct jpeg_decompress_struct cinfo;
  jpeg_err err;
  unsigned char *volatile pixels = NULL;

  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jmp)) {
    strcpy(msg, err.msg);
    *why = msg;
    jpeg_destroy_decompress(&cinfo);
    free(pixels);
    return NULL;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)len);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_EXT_RGBA;
  if (target_w) {
    /* The largest DCT reduction whose output still covers the target. */
    int denom = 8;
    while (denom > 1 && ((int)((cinfo.image_width + denom - 1) / denom) < target_w ||
                         (int)((cinfo.image_height + denom - 1) / denom) < target_h))
      denom /= 2;
    cinfo.scale_num = 1;
    cinfo.scale_denom = denom;
  }
  jpeg_start_decompress(&cinfo);
  size_t stride = (size_t)cinfo.output_width * 4;
  pixels = malloc(stride * cinfo.output_height);
  if (!pixels) {
    *why = "out of memory";
    jpeg_destroy_decompress(&cinfo);
    return NULL;
  }
  JSAMPROW rows[16]; /* libjpeg fills at most rec_outbuf_height (<= 4) rows a call */
  while (cinfo.output_scanline < cinfo.output_height) {
    JDIMENSION y = cinfo.output_scanline, n = cinfo.output_height - y;
    if (n > 16) n = 16;
    for (JDIMENSION i = 0; i < n; i++) rows[i] = pixels + stride * (y + i);
    jpeg_read_scanlines(&cinfo, rows, n);
  }
  jpeg_finish_decompress(&cinfo);
  *w = (int)cinfo.output_width;
  *h = (int)cinfo.output_height;
  jpeg_destroy_decompress(&cinfo);
  return pixels;
}

static unsigned char *decode_png(const unsigned char *data, size_t len, int *w, int *h,
                                 const char **why) {
  static __thread char msg[64];
  png_image img; /* libpng's simplified API: any PNG in, 8-bit RGBA out */
  unsigned char *pixels = NULL;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, data, len)) goto fail;
  img.format = PNG_FORMAT_RGBA;
  pixels = malloc(PNG_IMAGE_SIZE(img));
  if (!pixels) { png_image_free(&img); *why = "out of memory"; return NULL; }
  if (!png_image_finish_read(&img, NULL, pixels, 0, NULL)) { free(pixels); goto fail; }
  *w = (int)img.width;
  *h = (int)img.height;
  return pixels;
fail:
  snprintf(msg, sizeof msg, "%s", img.message);
  png_image_free(&img);
  *why = msg;
  return NULL;
}

static void *decode_thread(void *arg) {
  (void)arg;
  job *j;
  while ((j = queue_pop())) {
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const char *why = "not a JPEG or PNG";
    unsigned char *px = NULL;
    int w = 0, h = 0;
    if (j->len >= 3 && j->data[0] == 0xFF && j->data[1] == 0xD8 && j->data[2] == 0xFF)
      px = decode_jpeg(j->data, j->len, &w, &h, &why);
    else if (j->len >= 8 && !memcmp(j->data, png_sig, 8))
      px = decode_png(j->data, j->len, &w, &h, &why);
    if (px && target_w) {
      unsigned char *small = fill_box(px, w, h, target_w, target_h, &w, &h);
      free(px);
      px = small;
      if (!px) why = "out of memory";
    }
    pthread_mutex_lock(&queue_lock);
    if (px) decoded_ok++; else decode_failed++;
    pthread_mutex_unlock(&queue_lock);
    if (!px) fprintf(stderr, "baseline: decode failed: %s: %s\n", j->url, why);
    free(px);
    free(j->data);
    free(j->url);
    free(j);
  }
  return NULL;
}

/* ---- network ---- */

static size_t on_body(char *ptr, size_t size, size_t n, void *userdata) {
  job *j = userdata;
  size_t add = size * n;
  if (j->len + add > j->cap) {
    size_t cap = j->cap ? j->cap : 256 * 1024;
    while (cap < j->len + add) cap *= 2;
    unsigned char *p = realloc(j->data, cap);
    if (!p) return 0; /* makes curl fail the transfer */
    j->data = p;
    j->cap = cap;
  }
  memcpy(j->data + j->len, ptr, add);
  j->len += add;
  return add;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void usage(void) {
  fprintf(stderr, "usage: baseline [--size WxH] [--concurrency N] [--no-decode] URL_LIST_FILE\n");
  exit(2);
}

int main(int argc, char **argv) {
  int concurrency = 8;
  const char *list = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      if (sscanf(argv[++i], "%dx%d", &target_w, &target_h) != 2 || target_w < 1 || target_h < 1)
        usage();
    } else if (!strcmp(argv[i], "--concurrency") && i + 1 < argc) {
      if ((concurrency = atoi(argv[++i])) < 1) usage();
    } else if (!strcmp(argv[i], "--no-decode")) {
      no_decode = 1;
    } else if (argv[i][0] != '-' && !list) {
      list = argv[i];
    } else {
      usage();
    }
  }
  if (!list) usage();

  FILE *f = fopen(list, "r");
  if (!f) { perror(list); return 2; }
  char **urls = NULL, line[8192];
  int n_urls = 0, cap = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    if (n_urls == cap) urls = realloc(urls, (size_t)(cap = cap ? cap * 2 : 256) * sizeof *urls);
    urls[n_urls++] = strdup(line);
  }
  fclose(f);
  if (!n_urls) { fprintf(stderr, "baseline: no URLs in %s\n", list); return 2; }

  double t0 = now(), cpu0 = cpu_seconds();

  pthread_t threads[DECODE_THREADS];
  int n_threads = no_decode ? 0 : DECODE_THREADS;
  for (int i = 0; i < n_threads; i++) pthread_create(&threads[i], NULL, decode_thread, NULL);

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)concurrency); /* keep them all alive */

  /* N easy handles, reused: each one keeps its settings; the connections live in the
   * multi handle's pool and are reused across transfers (HTTP keep-alive). */
  CURL **idle = malloc((size_t)concurrency * sizeof *idle);
  int n_idle = 0;
  for (int i = 0; i < concurrency; i++) {
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
    idle[n_idle++] = e;
  }

  int next = 0, running = 0, net_failed = 0;
  while (next < n_urls || running > 0) {
    while (n_idle > 0 && next < n_urls) { /* keep N transfers in flight */
      CURL *e = idle[--n_idle];
      job *j = calloc(1, sizeof *j);
      j->url = urls[next++];
      curl_easy_setopt(e, CURLOPT_URL, j->url);
      curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
      curl_easy_setopt(e, CURLOPT_PRIVATE, j);
      curl_multi_add_handle(multi, e);
      running++;
    }
    int still;
    curl_multi_perform(multi, &still);
    CURLMsg *m;
    int left, finished = 0;
    while ((m = curl_multi_info_read(multi, &left))) {
      if (m->msg != CURLMSG_DONE) continue;
      CURL *e = m->easy_handle;
      CURLcode rc = m->data.result;
      char *priv;
      long status = 0;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, &priv);
      job *j = (job *)priv;
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
      curl_multi_remove_handle(multi, e);
      idle[n_idle++] = e;
      running--;
      finished++;
      if (rc == CURLE_OK && status == 200 && no_decode) {
        decoded_ok++; /* no decoder threads: this thread alone counts */
        free(j->data);
        free(j->url);
        free(j);
      } else if (rc == CURLE_OK && status == 200) {
        queue_push(j); /* a decoder frees it */
      } else {
        if (rc == CURLE_OK)
          fprintf(stderr, "baseline: download failed: %s: HTTP %ld\n", j->url, status);
        else
          fprintf(stderr, "baseline: download failed: %s: %s\n", j->url, curl_easy_strerror(rc));
        net_failed++;
        free(j->data);
        free(j->url);
        free(j);
      }
    }
    /* Sleep on the sockets, unless a slot just freed up: refill it first. */
    if (!finished && running > 0) curl_multi_poll(multi, NULL, 0, 1000, NULL);
  }

  pthread_mutex_lock(&queue_lock);
  queue_closed = 1;
  pthread_cond_broadcast(&queue_cond);
  pthread_mutex_unlock(&queue_lock);
  for (int i = 0; i < n_threads; i++) pthread_join(threads[i], NULL);

  double wall = now() - t0, cpu = cpu_seconds() - cpu0;

  for (int i = 0; i < concurrency; i++) curl_easy_cleanup(idle[i]);
  free(idle);
  curl_multi_cleanup(multi);
  curl_global_cleanup();
  free(urls); /* the strings went with their jobs */

  int failed = net_failed + decode_failed;
  if (failed || decoded_ok != n_urls) {
    fprintf(stderr, "baseline: FAILED: %d of %d images failed\n", failed, n_urls);
    return 1;
  }
  printf("baseline: %d images%s, %.1f images/s, %.3f ms CPU/image (user+sys, getrusage "
         "RUSAGE_SELF), wall %.2f s\n",
         decoded_ok, no_decode ? " (download only)" : "", decoded_ok / wall,
         cpu * 1000.0 / decoded_ok, wall);
  return 0;
}
