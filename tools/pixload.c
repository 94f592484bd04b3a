/*
 * pixload: the command-line client of libpixload, written against pixload.h only.
 *
 *   pixload version
 *   pixload fetch [options] URL...
 *   pixload hash --blurhash|--thumbhash [options] URL...
 *
 * fetch loads every URL through one loader and one queue, all at once, drains the
 * queue on this thread, and prints one line per URL in the order given:
 *
 *   STATUS WxH SOURCE MS URL[  (message, HTTP n)]
 *
 * SOURCE is memory, disk, revalidated, network, file (a file:// URL, which the library
 * reports as PXL_SOURCE_NETWORK), data (a data: URI, --allow-data) or none.
 * MS is the time from the start of the run (just before the first pxl_load) to that
 * URL's callback. A closing summary line follows:
 *
 *   N loaded, N failed, X.X images/s, Y.YYY ms CPU/image
 *
 * images/s is loaded images per wall-clock second from the first pxl_load to the last
 * callback; CPU is user + system time of the whole process (the library's network and
 * decode threads included, from getrusage) over the same span, divided by the number of
 * URLs. Output files are written inside the callbacks, so with --out or --out-dir both
 * figures include PNG encoding; benchmarks use --quiet without output.
 *
 * --out-dir creates its directory, parents included. While more than PROGRESS_MIN_URLS
 * load and stderr is a terminal, one line there counts what has finished.
 *
 * fetch --metrics prints one JSON object per URL instead (the request's pxl_metrics; see
 * print_metrics), and the summary on stderr, so that stdout pipes into jq. hash prints one
 * placeholder per URL: the BlurHash (4x3 components) or the ThumbHash in base64.
 *
 * Exit status: 0 if every URL loaded (and was written), 1 otherwise, 2 on a usage error.
 * The manual: docs/pixload.1 (`man pixload` once installed).
 *
 * Build: gcc -std=c11 -O2 -I include tools/pixload.c -L DIR -lpixload -lpng -o pixload
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <png.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pixload.h"

static const char usage_text[] =
    "usage: pixload version\n"
    "       pixload fetch [options] URL...\n"
    "       pixload hash --blurhash|--thumbhash [options] URL...\n"
    "\n"
    "fetch options:\n"
    "  --size WxH            target size (default: the original size)\n"
    "  --mode fit|fill       how the image meets the target (default fit)\n"
    "  --format F            rgba8 | rgba8-premul | bgra8-premul | rgb8 | gray8 (default rgba8)\n"
    "  --no-orientation      do not apply EXIF orientation\n"
    "  --no-color-management keep the decoded values (default: embedded profiles to sRGB)\n"
    "  --allow-file          allow file:// URLs\n"
    "  --allow-data          allow data: URIs (base64 or percent-encoded)\n"
    "  --memory-cache-mb N   memory cache budget in MiB (0 disables; default 64)\n"
    "  --concurrency N       transfers at once over all hosts (default 8)\n"
    "  --per-host N          transfers at once per host (default 6)\n"
    "  --header LINE         send LINE ('Name: value') with every request; repeatable\n"
    "  --ca-file FILE        trust only the CAs in FILE (PEM) for https, not the system's\n"
    "  --ca-path DIR         trust only the CAs in DIR (hashed names, openssl rehash),\n"
    "                        with those of --ca-file if given\n"
    "  --proxy URL           transfers go through the proxy URL; '' for none (default:\n"
    "                        http_proxy, https_proxy, ALL_PROXY, no_proxy)\n"
    "  --timeout-ms N        whole-transfer timeout in ms (default 30000)\n"
    "  --retries N           further attempts after a transient failure (default 2)\n"
    "  --cache-dir DIR       disk cache directory (default $XDG_CACHE_HOME/pixload,\n"
    "                        else ~/.cache/pixload)\n"
    "  --disk-cache-mb N     disk cache budget in MiB (default 256)\n"
    "  --no-disk-cache       no disk cache\n"
    "  --variant-max-side N  keep decoded thumbnails up to NxN in the disk cache\n"
    "                        (default 256; 0: only the downloaded bytes)\n"
    "  --cache-only          offline: memory and disk only; a miss fails (not in the cache)\n"
    "  --reload              ignore what the caches hold (they are still written)\n"
    "  --urls FILE           read more URLs from FILE, one a line ('#' starts a comment)\n"
    "  --out FILE            write the image (one URL only): PNG if FILE ends in .png,\n"
    "                        else the raw pixels, rows packed (width x bytes per pixel)\n"
    "  --out-dir DIR         write DIR/NNNN-NAME.png per URL (NNNN: its position,\n"
    "                        NAME: the URL's last path component without extension);\n"
    "                        DIR and its parents are created when missing\n"
    "  --animate             every frame of an animated image (GIF); with --out-dir,\n"
    "                        frame N > 0 goes to DIR/NNNN-NAME.fNNN.png beside frame 0\n"
    "  --process SPEC        processors applied in order, comma-separated: circle,\n"
    "                        circle:BORDER_W:#RRGGBBAA, round:R or round:TL/TR/BR/BL\n"
    "                        (optionally :BORDER_W:#RRGGBBAA), blur:SIGMA (<= 250),\n"
    "                        crop:X:Y:W:H, rotate:90|180|270, flip:h|v, gray,\n"
    "                        tint:#RRGGBBAA (e.g. --process round:12,blur:4)\n"
    "  --quiet               print only the summary line (and no progress line)\n"
    "  --metrics             one JSON object per URL on stdout (what it cost: tier,\n"
    "                        joined, *_us times, *_bytes sizes) instead of the text\n"
    "                        line; the summary goes to stderr\n"
    "\n"
    "hash prints one line per URL: --blurhash its BlurHash (4x3 components), or\n"
    "--thumbhash its ThumbHash in base64; it takes fetch's options (not --out*).\n"
    "\n"
    "One line per URL, in the order given: STATUS WxH SOURCE MS URL, where SOURCE is\n"
    "memory, disk, revalidated, network, file (file:// URLs), data (data: URIs) or\n"
    "none; then a summary.\n"
    "STATUS \"OK incomplete\": the file ended early and its decoder filled in the rest\n"
    "(a cut JPEG or GIF; a cut PNG, WebP or AVIF fails with CORRUPT_IMAGE).\n"
    "With more than 20 URLs and stderr a terminal, a progress line is shown there.\n"
    "Premultiplied formats are un-premultiplied when written as PNG (PNG alpha is\n"
    "straight), and written as they are in raw files.\n"
    "\n"
    "Exit status: 0 if every URL loaded (and was written), 1 otherwise, 2 on a usage\n"
    "error. More in man pixload.\n";

static int usage_error(const char *fmt, const char *arg) {
  if (fmt) {
    fprintf(stderr, "pixload: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
  }
  fputs(usage_text, stderr);
  return 2;
}

/* The enum's own names, so the output can be grepped and matched to pixload.h. */
static const char *status_name(pxl_status status) {
  static const char *const names[] = {
      "OK", "INVALID_ARGUMENT", "MALFORMED_URL", "SCHEME_NOT_ALLOWED", "DNS", "CONNECT",
      "TLS", "TIMEOUT", "HTTP", "BODY_TOO_LARGE", "NOT_AN_IMAGE", "CORRUPT_IMAGE",
      "TOO_MANY_PIXELS", "CANCELLED", "LOADER_CLOSED", "NETWORK", "UNSUPPORTED_IMAGE",
      "NO_MEMORY", "NOT_FOUND", "IO", "TOO_MANY_REDIRECTS", "NOT_CACHED", "UNSUPPORTED"};
  if ((unsigned)status < sizeof names / sizeof names[0]) return names[status];
  return pxl_status_string(status);
}

/* file:// loads come back as PXL_SOURCE_NETWORK ("downloaded or read from a file"); a
 * user reading the column wants to know no server was involved. */
static int is_file_url(const char *url) { return strncasecmp(url, "file:", 5) == 0; }

static const char *source_name(pxl_source source, const char *url) {
  switch (source) {
    case PXL_SOURCE_MEMORY: return "memory";
    case PXL_SOURCE_NETWORK: return is_file_url(url) ? "file" : "network";
    case PXL_SOURCE_DISK: return "disk";
    case PXL_SOURCE_REVALIDATED: return "revalidated";
    case PXL_SOURCE_DATA: return "data";
    case PXL_SOURCE_FETCHER: return "fetcher";
    default: return "none";
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

/* ---- writing images ---- */

/* Straight alpha from premultiplied: PNG stores straight alpha. */
static uint8_t unpremultiply(uint8_t c, uint8_t a) {
  if (a == 0) return 0;
  unsigned v = ((unsigned)c * 255u + a / 2u) / a;
  return (uint8_t)(v > 255u ? 255u : v);
}

/* One row of one frame of image as PNG samples (RGBA, RGB or gray) in out. */
static void png_row(const pxl_image *image, int frame, int y, uint8_t *out) {
  const uint8_t *in = pxl_image_frame_pixels(image, frame) + (size_t)y * (size_t)pxl_image_stride(image);
  int width = pxl_image_width(image);
  switch (pxl_image_format(image)) {
    case PXL_FORMAT_RGBA8_PREMUL:
      for (int x = 0; x < width; x++, in += 4, out += 4) {
        out[0] = unpremultiply(in[0], in[3]);
        out[1] = unpremultiply(in[1], in[3]);
        out[2] = unpremultiply(in[2], in[3]);
        out[3] = in[3];
      }
      break;
    case PXL_FORMAT_BGRA8_PREMUL:
      for (int x = 0; x < width; x++, in += 4, out += 4) {
        out[0] = unpremultiply(in[2], in[3]);
        out[1] = unpremultiply(in[1], in[3]);
        out[2] = unpremultiply(in[0], in[3]);
        out[3] = in[3];
      }
      break;
    default: /* RGBA8, RGB8 and GRAY8 are already PNG's sample layout */
      memcpy(out, in, (size_t)width * (size_t)pxl_format_bytes_per_pixel(pxl_image_format(image)));
      break;
  }
}

static int png_color_type(pxl_format format) {
  switch (format) {
    case PXL_FORMAT_RGB8: return PNG_COLOR_TYPE_RGB;
    case PXL_FORMAT_GRAY8: return PNG_COLOR_TYPE_GRAY;
    default: return PNG_COLOR_TYPE_RGBA;
  }
}

/* Returns NULL on success, else what went wrong. */
static const char *write_png(const char *path, const pxl_image *image, int frame) {
  FILE *f = fopen(path, "wb");
  if (!f) return strerror(errno);
  int width = pxl_image_width(image);
  uint8_t *row = malloc((size_t)width * 4);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!row || !info) {
    png_destroy_write_struct(&png, NULL);
    free(row);
    fclose(f);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
    return "libpng failed to write";
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)pxl_image_height(image), 8,
               png_color_type(pxl_image_format(image)), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < pxl_image_height(image); y++) {
    png_row(image, frame, y, row);
    png_write_row(png, row);
  }
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  free(row);
  return fclose(f) == 0 ? NULL : strerror(errno);
}

/* Rows packed tightly: a reader needs only width, height and format, not the stride. */
static const char *write_raw(const char *path, const pxl_image *image) {
  FILE *f = fopen(path, "wb");
  if (!f) return strerror(errno);
  size_t row_bytes = (size_t)pxl_image_width(image) *
                     (size_t)pxl_format_bytes_per_pixel(pxl_image_format(image));
  for (int y = 0; y < pxl_image_height(image); y++) {
    const uint8_t *row = pxl_image_pixels(image) + (size_t)y * (size_t)pxl_image_stride(image);
    if (fwrite(row, 1, row_bytes, f) != row_bytes) {
      fclose(f);
      return strerror(errno);
    }
  }
  return fclose(f) == 0 ? NULL : strerror(errno);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* DIR/NNNN-NAME.png: NAME from the URL's last path component, without query, fragment
 * or extension, reduced to characters that are safe in a file name. The index makes
 * names unique when several URLs end alike (.../a/1.jpg, .../b/1.jpg). */
static char *output_name(const char *dir, size_t index, const char *url) {
  const char *end = url + strcspn(url, "?#");
  const char *start = end;
  while (start > url && start[-1] != '/') start--;
  const char *dot = end;
  for (const char *p = start; p < end; p++) {
    if (*p == '.') dot = p;
  }
  char name[128];
  size_t n = 0;
  for (const char *p = start; p < dot && n < sizeof name - 1; p++) {
    char c = *p;
    int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
    name[n++] = safe ? c : '_';
  }
  name[n] = '\0';
  size_t size = strlen(dir) + n + 32;
  char *path = malloc(size);
  if (path) snprintf(path, size, "%s/%04zu-%s.png", dir, index, n ? name : "image");
  return path;
}

/* mkdir -p: DIR and its missing parents, with the umask's permissions. Returns NULL on
 * success, else what went wrong. */
static const char *make_dirs(const char *dir) {
  if (!*dir) return "empty directory name";
  char *path = strdup(dir);
  if (!path) return "out of memory";
  const char *error = NULL;
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char end = *p;
    *p = '\0';
    struct stat st;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) error = strerror(errno);
    else if (stat(path, &st) != 0) error = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) error = "not a directory";
    *p = end;
    if (error || end == '\0') break;
  }
  free(path);
  return error;
}

/* ---- progress: one line on a terminal's stderr, rewritten in place ---- */

enum { PROGRESS_MIN_URLS = 20 };

static int progress_on;    /* this run shows the line */
static int progress_shown; /* the line is on the screen, unfinished */

static void progress_clear(void) {
  if (progress_shown) fputs("\r\033[K", stderr);
  progress_shown = 0;
}

static void progress_update(size_t finished, size_t failed, size_t total, int last) {
  if (!progress_on) return;
  fprintf(stderr, "\r\033[Kpixload: %zu of %zu done, %zu failed", finished, total, failed);
  progress_shown = 1;
  if (last) {
    fputc('\n', stderr);
    progress_shown = 0;
  }
  fflush(stderr);
}

/* ---- fetch ---- */

struct job {
  struct run *run;
  size_t index;
  const char *url;
  int finished;
  pxl_status status;
  int32_t http_status;
  pxl_source source;
  int32_t width, height;
  int incomplete; /* pxl_result.incomplete: printed "OK incomplete" */
  double ms;
  char *message; /* NULL when empty */
  int write_failed;
  pxl_metrics metrics; /* --metrics */
  int has_metrics;
  uint8_t hash[PXL_PLACEHOLDER_MAX_BYTES + 1]; /* hash */
  size_t hash_length;
};

struct run {
  double start_ms;
  size_t finished;
  size_t failed; /* of those finished: not loaded, or not written */
  const char *out_file; /* --out */
  const char *out_dir;  /* --out-dir */
  int32_t hash_kind;    /* hash: a pxl_placeholder_kind */
};

static void finish_job(struct job *job, pxl_status status, const char *message) {
  job->finished = 1;
  job->status = status;
  job->ms = now_ms() - job->run->start_ms;
  job->message = message && message[0] ? strdup(message) : NULL;
  job->run->finished++;
  if (status != PXL_OK) job->run->failed++;
}

static void on_loaded(pxl_token token, const pxl_result *result, void *user_data) {
  (void)token;
  struct job *job = user_data;
  finish_job(job, result->status, result->message);
  job->http_status = result->http_status;
  job->source = result->source;
  job->metrics.struct_size = sizeof job->metrics;
  job->has_metrics = pxl_result_metrics(result, &job->metrics) == PXL_OK;
  const pxl_image *image = result->image; /* borrowed: used only inside this callback */
  if (!image) return;
  job->width = pxl_image_width(image);
  job->height = pxl_image_height(image);
  job->incomplete = result->struct_size >= offsetof(pxl_result, incomplete) + sizeof result->incomplete &&
                    result->incomplete;

  struct run *run = job->run;
  if (run->hash_kind) {
    pxl_status s = pxl_placeholder_encode(run->hash_kind, image, 4, 3, job->hash, sizeof job->hash,
                                          &job->hash_length);
    if (s != PXL_OK) {
      progress_clear();
      fprintf(stderr, "pixload: cannot encode %s: %s\n", job->url, pxl_status_string(s));
      job->write_failed = 1;
      run->failed++;
    }
    return;
  }
  char *path = NULL;
  if (run->out_file) path = strdup(run->out_file);
  else if (run->out_dir) path = output_name(run->out_dir, job->index, job->url);
  else return;
  const char *error = !path ? "out of memory"
                      : ends_with(path, ".png") ? write_png(path, image, 0)
                                                : write_raw(path, image);
  /* --animate --out-dir: every further frame as NNNN-NAME.fNNN.png (frame 0 is the
   * usual NNNN-NAME.png), so a person can step through them. */
  for (int frame = 1; !error && run->out_dir && frame < pxl_image_frame_count(image); frame++) {
    size_t size = strlen(path) + 16;
    char *frame_path = malloc(size);
    if (!frame_path) { error = "out of memory"; break; }
    snprintf(frame_path, size, "%.*s.f%03d.png", (int)(strlen(path) - 4), path, frame);
    error = write_png(frame_path, image, frame);
    free(frame_path);
  }
  if (error) {
    progress_clear();
    fprintf(stderr, "pixload: cannot write %s: %s\n", path ? path : "output", error);
    job->write_failed = 1;
    run->failed++;
  }
  free(path);
}

struct fetch_options {
  pxl_config config;
  pxl_request request; /* url filled per job */
  const char *out_file;
  const char *out_dir;
  int quiet;
  int metrics;       /* --metrics */
  int32_t hash_kind; /* hash: --blurhash or --thumbhash */
  char **urls;
  size_t url_count;
  size_t url_capacity;
  const char **headers; /* --header lines (pointing into argv), NULL-terminated */
  size_t header_count;
  pxl_processor processors[PXL_MAX_PROCESSORS]; /* --process, pointed to by request */
};

/* The library never writes to stderr; a command-line client does, for its user. */
static void print_log(int32_t level, const char *message, void *user_data) {
  (void)user_data;
  progress_clear();
  fprintf(stderr, "%s%s\n", level == PXL_LOG_ERROR ? "error: " : "", message);
}

static int add_url(struct fetch_options *o, const char *url) {
  if (o->url_count == o->url_capacity) {
    size_t capacity = o->url_capacity ? o->url_capacity * 2 : 64;
    char **grown = realloc(o->urls, capacity * sizeof *grown);
    if (!grown) return -1;
    o->urls = grown;
    o->url_capacity = capacity;
  }
  if (!(o->urls[o->url_count] = strdup(url))) return -1;
  o->url_count++;
  return 0;
}

/* A header line as pxl_config.headers wants it: "Name: value", a name without spaces,
 * nothing that would end the line early. */
static int valid_header(const char *line) {
  const char *colon = strchr(line, ':');
  if (!colon || colon == line || strpbrk(line, "\r\n")) return 0;
  for (const char *p = line; p < colon; p++) {
    if (*p <= ' ' || *p >= 127) return 0;
  }
  return 1;
}

static int add_header(struct fetch_options *o, const char *line) {
  const char **grown = realloc(o->headers, (o->header_count + 2) * sizeof *grown);
  if (!grown) return -1;
  o->headers = grown;
  o->headers[o->header_count++] = line;
  o->headers[o->header_count] = NULL;
  return 0;
}

static int read_url_file(struct fetch_options *o, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "pixload: %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int rc = 0;
  while (getline(&line, &cap, f) >= 0) {
    char *s = line + strspn(line, " \t");
    s[strcspn(s, " \t\r\n")] = '\0';
    if (!*s || *s == '#') continue;
    if (add_url(o, s) != 0) {
      rc = -1;
      break;
    }
  }
  free(line);
  fclose(f);
  return rc;
}

static int parse_int(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_format(const char *s, int32_t *out) {
  static const struct { const char *name; pxl_format format; } formats[] = {
      {"rgba8", PXL_FORMAT_RGBA8}, {"rgba8-premul", PXL_FORMAT_RGBA8_PREMUL},
      {"bgra8-premul", PXL_FORMAT_BGRA8_PREMUL}, {"rgb8", PXL_FORMAT_RGB8},
      {"gray8", PXL_FORMAT_GRAY8}};
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    if (strcmp(s, formats[i].name) == 0) {
      *out = formats[i].format;
      return 0;
    }
  }
  return -1;
}

/* A non-negative finite number that is all of text (up to end), or -1. */
static double spec_number(const char *text, const char *end) {
  char buf[64], *stop;
  size_t n = (size_t)(end - text);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, text, n);
  buf[n] = 0;
  double v = strtod(buf, &stop);
  return *stop == 0 && v >= 0 && v < 1e7 ? v : -1;
}

/* "#RRGGBBAA" (exactly) into 0xRRGGBBAA; 0 on success. */
static int spec_color(const char *text, const char *end, uint32_t *out) {
  if (end - text != 9 || text[0] != '#') return -1;
  uint32_t v = 0;
  for (const char *p = text + 1; p < end; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
          : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return 0;
}

/* One --process step, "kind[:arg]..." (text up to end), into *p; 0 on success. The
 * grammar is in usage_text and man pixload. */
static int parse_step(const char *text, const char *end, pxl_processor *p) {
  const char *field[6];
  const char *field_end[6];
  int count = 0;
  for (const char *f = text; count < 6;) {
    const char *colon = memchr(f, ':', (size_t)(end - f));
    field[count] = f;
    field_end[count++] = colon ? colon : end;
    if (!colon) break;
    f = colon + 1;
    if (count == 6) return -1;
  }
#define IS(i, word) (field_end[i] - field[i] == (long)strlen(word) && !strncmp(field[i], word, strlen(word)))
  memset(p, 0, sizeof *p);
  if ((IS(0, "circle") || IS(0, "round")) && (count == 1 || count == 2 || count == 3 || count == 4)) {
    int round = IS(0, "round"), first_border = round ? 2 : 1;
    p->kind = round ? PXL_PROCESS_ROUND : PXL_PROCESS_CIRCLE;
    if (round) {
      if (count < 2) return -1;
      const char *r = field[1];
      double *radius[4] = {&p->radius_tl, &p->radius_tr, &p->radius_br, &p->radius_bl};
      for (int i = 0; i < 4; i++) {
        const char *slash = memchr(r, '/', (size_t)(field_end[1] - r));
        const char *stop = slash ? slash : field_end[1];
        if ((*radius[i] = spec_number(r, stop)) < 0) return -1;
        if (!slash) {
          if (i == 3) break;
          if (i != 0) return -1; /* one radius or four */
          p->radius_tr = p->radius_br = p->radius_bl = p->radius_tl;
          break;
        }
        if (i == 3) return -1;
        r = slash + 1;
      }
    }
    if (count == first_border + 2) {
      if ((p->border_width = spec_number(field[first_border], field_end[first_border])) < 0) return -1;
      if (spec_color(field[first_border + 1], field_end[first_border + 1], &p->color)) return -1;
    } else if (count != first_border) {
      return -1;
    }
    return 0;
  }
  if (IS(0, "blur") && count == 2) {
    p->kind = PXL_PROCESS_BLUR;
    p->sigma = spec_number(field[1], field_end[1]);
    return p->sigma < 0 || p->sigma > PXL_MAX_BLUR_SIGMA ? -1 : 0;
  }
  if (IS(0, "crop") && count == 5) {
    double v[4];
    for (int i = 0; i < 4; i++) {
      if ((v[i] = spec_number(field[i + 1], field_end[i + 1])) < 0 || v[i] != (int32_t)v[i]) return -1;
    }
    p->kind = PXL_PROCESS_CROP;
    p->x = (int32_t)v[0], p->y = (int32_t)v[1], p->width = (int32_t)v[2], p->height = (int32_t)v[3];
    return p->width > 0 && p->height > 0 ? 0 : -1;
  }
  if (IS(0, "rotate") && count == 2) {
    p->kind = PXL_PROCESS_ROTATE;
    p->degrees = IS(1, "90") ? 90 : IS(1, "180") ? 180 : IS(1, "270") ? 270 : 0;
    return p->degrees ? 0 : -1;
  }
  if (IS(0, "flip") && count == 2 && (IS(1, "h") || IS(1, "v"))) {
    p->kind = PXL_PROCESS_FLIP;
    p->vertical = IS(1, "v");
    return 0;
  }
  if (IS(0, "gray") && count == 1) {
    p->kind = PXL_PROCESS_GRAY;
    return 0;
  }
  if (IS(0, "tint") && count == 2) {
    p->kind = PXL_PROCESS_TINT;
    return spec_color(field[1], field_end[1], &p->color);
  }
#undef IS
  return -1;
}

/* --process SPEC: comma-separated steps into o->processors; 0 on success. */
static int parse_process(const char *spec, struct fetch_options *o) {
  size_t count = 0;
  const char *step = spec;
  for (;;) {
    const char *comma = strchr(step, ',');
    const char *end = comma ? comma : step + strlen(step);
    if (count == PXL_MAX_PROCESSORS || parse_step(step, end, &o->processors[count])) return -1;
    count++;
    if (!comma) break;
    step = comma + 1;
  }
  o->request.processors = o->processors;
  o->request.processor_count = count;
  return 0;
}

/* Returns 0, or the exit status of a usage error (2). */
static int parse_fetch_options(int argc, char **argv, struct fetch_options *o) {
  enum { OPT_SIZE = 256, OPT_MODE, OPT_FORMAT, OPT_NO_ORIENTATION, OPT_ALLOW_FILE, OPT_ALLOW_DATA,
         OPT_MEMORY_CACHE, OPT_CONCURRENCY, OPT_PER_HOST, OPT_URLS, OPT_OUT, OPT_OUT_DIR,
         OPT_QUIET, OPT_HELP, OPT_HEADER, OPT_TIMEOUT_MS, OPT_RETRIES, OPT_CACHE_DIR,
         OPT_DISK_CACHE_MB, OPT_NO_DISK_CACHE, OPT_CACHE_ONLY, OPT_RELOAD, OPT_VARIANT_MAX_SIDE,
         OPT_ANIMATE, OPT_NO_COLOR_MANAGEMENT, OPT_PROCESS, OPT_CA_FILE, OPT_CA_PATH, OPT_PROXY, OPT_METRICS,
         OPT_BLURHASH, OPT_THUMBHASH };
  static const struct option long_options[] = {
      {"size", required_argument, NULL, OPT_SIZE},
      {"mode", required_argument, NULL, OPT_MODE},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"no-orientation", no_argument, NULL, OPT_NO_ORIENTATION},
      {"no-color-management", no_argument, NULL, OPT_NO_COLOR_MANAGEMENT},
      {"allow-file", no_argument, NULL, OPT_ALLOW_FILE},
      {"allow-data", no_argument, NULL, OPT_ALLOW_DATA},
      {"memory-cache-mb", required_argument, NULL, OPT_MEMORY_CACHE},
      {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
      {"per-host", required_argument, NULL, OPT_PER_HOST},
      {"urls", required_argument, NULL, OPT_URLS},
      {"out", required_argument, NULL, OPT_OUT},
      {"out-dir", required_argument, NULL, OPT_OUT_DIR},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {"help", no_argument, NULL, OPT_HELP},
      {"header", required_argument, NULL, OPT_HEADER},
      {"timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS},
      {"retries", required_argument, NULL, OPT_RETRIES},
      {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
      {"disk-cache-mb", required_argument, NULL, OPT_DISK_CACHE_MB},
      {"no-disk-cache", no_argument, NULL, OPT_NO_DISK_CACHE},
      {"variant-max-side", required_argument, NULL, OPT_VARIANT_MAX_SIDE},
      {"cache-only", no_argument, NULL, OPT_CACHE_ONLY},
      {"reload", no_argument, NULL, OPT_RELOAD},
      {"animate", no_argument, NULL, OPT_ANIMATE},
      {"process", required_argument, NULL, OPT_PROCESS},
      {"ca-file", required_argument, NULL, OPT_CA_FILE},
      {"ca-path", required_argument, NULL, OPT_CA_PATH},
      {"proxy", required_argument, NULL, OPT_PROXY},
      {"metrics", no_argument, NULL, OPT_METRICS},
      {"blurhash", no_argument, NULL, OPT_BLURHASH},
      {"thumbhash", no_argument, NULL, OPT_THUMBHASH},
      {NULL, 0, NULL, 0}};
  pxl_config_init(&o->config);
  pxl_request_init(&o->request);
  /* A command-line user expects a second run to come from disk: the client turns the
   * disk cache on (the library's default is off). */
  o->config.disk_cache_bytes = (uint64_t)256 << 20;
  o->config.log = print_log;
  opterr = 0; /* usage_error reports instead */
  int opt;
  long n;
  while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    switch (opt) {
      case OPT_SIZE: {
        long w, h;
        char buf[64], *x;
        snprintf(buf, sizeof buf, "%s", optarg);
        if (!(x = strchr(buf, 'x'))) return usage_error("--size wants WxH, not '%s'", optarg);
        *x = '\0';
        if (parse_int(buf, 1, INT32_MAX, &w) || parse_int(x + 1, 1, INT32_MAX, &h))
          return usage_error("--size wants WxH with W and H > 0, not '%s'", optarg);
        o->request.width = (int32_t)w;
        o->request.height = (int32_t)h;
        break;
      }
      case OPT_MODE:
        if (strcmp(optarg, "fit") == 0) o->request.mode = PXL_MODE_FIT;
        else if (strcmp(optarg, "fill") == 0) o->request.mode = PXL_MODE_FILL;
        else return usage_error("--mode wants fit or fill, not '%s'", optarg);
        break;
      case OPT_FORMAT:
        if (parse_format(optarg, &o->request.format)) return usage_error("unknown --format '%s'", optarg);
        break;
      case OPT_NO_ORIENTATION: o->request.flags |= PXL_FLAG_IGNORE_ORIENTATION; break;
      case OPT_NO_COLOR_MANAGEMENT: o->request.flags |= PXL_FLAG_NO_COLOR_MANAGEMENT; break;
      case OPT_ALLOW_FILE: o->config.allowed_schemes |= PXL_SCHEME_FILE; break;
      case OPT_ALLOW_DATA: o->config.allowed_schemes |= PXL_SCHEME_DATA; break;
      case OPT_MEMORY_CACHE:
        if (parse_int(optarg, 0, 1L << 30, &n)) return usage_error("bad --memory-cache-mb '%s'", optarg);
        o->config.memory_cache_bytes = (uint64_t)n << 20;
        break;
      case OPT_CONCURRENCY:
        if (parse_int(optarg, 1, 10000, &n)) return usage_error("bad --concurrency '%s'", optarg);
        o->config.max_concurrent_downloads = (int32_t)n;
        break;
      case OPT_PER_HOST:
        if (parse_int(optarg, 1, 10000, &n)) return usage_error("bad --per-host '%s'", optarg);
        o->config.max_downloads_per_host = (int32_t)n;
        break;
      case OPT_URLS:
        if (read_url_file(o, optarg) != 0) return 2;
        break;
      case OPT_HEADER:
        if (!valid_header(optarg)) return usage_error("--header wants 'Name: value', not '%s'", optarg);
        if (add_header(o, optarg) != 0) return usage_error("%s", "out of memory");
        o->config.headers = o->headers;
        break;
      case OPT_TIMEOUT_MS:
        if (parse_int(optarg, 1, INT32_MAX, &n)) return usage_error("bad --timeout-ms '%s'", optarg);
        o->config.timeout_ms = (int32_t)n;
        break;
      case OPT_RETRIES:
        if (parse_int(optarg, 0, 100, &n)) return usage_error("bad --retries '%s'", optarg);
        o->config.max_retries = (int32_t)n;
        break;
      case OPT_CACHE_DIR: o->config.disk_cache_dir = optarg; break;
      case OPT_DISK_CACHE_MB:
        if (parse_int(optarg, 0, 1L << 30, &n)) return usage_error("bad --disk-cache-mb '%s'", optarg);
        o->config.disk_cache_bytes = (uint64_t)n << 20;
        break;
      case OPT_NO_DISK_CACHE: o->config.disk_cache_bytes = 0; break;
      case OPT_VARIANT_MAX_SIDE:
        if (parse_int(optarg, 0, 1L << 30, &n)) return usage_error("bad --variant-max-side '%s'", optarg);
        o->config.disk_variant_max_side = n;
        break;
      case OPT_CACHE_ONLY: o->request.flags |= PXL_FLAG_CACHE_ONLY; break;
      case OPT_RELOAD: o->request.flags |= PXL_FLAG_RELOAD; break;
      case OPT_ANIMATE: o->request.flags |= PXL_FLAG_ANIMATE; break;
      case OPT_PROCESS:
        if (parse_process(optarg, o)) return usage_error("malformed --process '%s' (see man pixload)", optarg);
        break;
      /* Checked by pxl_loader_new, whose log line names a file it cannot read. */
      case OPT_CA_FILE: o->config.ca_file = optarg; break;
      case OPT_CA_PATH: o->config.ca_path = optarg; break;
      case OPT_PROXY: o->config.proxy = optarg; break;
      case OPT_OUT: o->out_file = optarg; break;
      case OPT_OUT_DIR: o->out_dir = optarg; break;
      case OPT_QUIET: o->quiet = 1; break;
      case OPT_METRICS: o->metrics = 1; break;
      case OPT_BLURHASH: o->hash_kind = PXL_PLACEHOLDER_BLURHASH; break;
      case OPT_THUMBHASH: o->hash_kind = PXL_PLACEHOLDER_THUMBHASH; break;
      case OPT_HELP: fputs(usage_text, stdout); exit(0);
      default:
        return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
    }
  }
  for (int i = optind; i < argc; i++) {
    if (add_url(o, argv[i]) != 0) return usage_error("%s", "out of memory");
  }
  if (o->url_count == 0) return usage_error("%s", "at least one URL is needed");
  if (o->out_file && o->out_dir) return usage_error("%s", "--out and --out-dir exclude each other");
  if (o->out_file && o->url_count != 1) return usage_error("%s", "--out takes exactly one URL; use --out-dir");
  return 0;
}

/* A JSON string: the URL as given, escaped. */
static void print_json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') printf("\\%c", *p);
    else if (*p < 0x20) printf("\\u%04x", *p);
    else putchar(*p);
  }
  putchar('"');
}

static const char *tier_name(int32_t tier) {
  static const char *const names[] = {"none", "memory", "disk_variant", "disk", "revalidated",
                                      "network", "file", "data", "fetcher"};
  return tier >= 0 && (size_t)tier < sizeof names / sizeof names[0] ? names[tier] : "none";
}

/* --metrics: one object per URL, one line each (jq reads the stream). Times end in _us,
 * sizes in _bytes; total_us is from the run's start to the callback. No header value
 * appears (neither the request's nor the response's). */
static void print_metrics(const struct job *job) {
  const pxl_metrics *m = &job->metrics;
  pxl_metrics none = {0};
  if (!job->has_metrics) m = &none;
  printf("{\"url\":");
  print_json_string(job->url);
  printf(",\"status\":\"%s\",\"http_status\":%d,\"tier\":\"%s\",\"joined\":%s", status_name(job->status),
         job->http_status, tier_name(m->tier), m->joined ? "true" : "false");
  printf(",\"width\":%d,\"height\":%d", job->status == PXL_OK ? job->width : 0,
         job->status == PXL_OK ? job->height : 0);
  printf(",\"http_version\":\"%s\",\"redirects\":%d,\"connection_reused\":%s",
         m->http_version == 10 ? "1.0" : m->http_version == 11 ? "1.1" : m->http_version == 20 ? "2"
         : m->http_version == 30 ? "3" : "", m->redirects, m->connection_reused ? "true" : "false");
  printf(",\"slot_wait_us\":%llu,\"dns_us\":%llu,\"connect_us\":%llu,\"tls_us\":%llu,"
         "\"first_byte_us\":%llu,\"transfer_us\":%llu,\"disk_read_us\":%llu,\"decode_us\":%llu,"
         "\"process_us\":%llu,\"queue_wait_us\":%llu,\"total_us\":%llu",
         (unsigned long long)m->slot_wait_us, (unsigned long long)m->dns_us,
         (unsigned long long)m->connect_us, (unsigned long long)m->tls_us,
         (unsigned long long)m->first_byte_us, (unsigned long long)m->transfer_us,
         (unsigned long long)m->disk_read_us, (unsigned long long)m->decode_us,
         (unsigned long long)m->process_us, (unsigned long long)m->queue_wait_us,
         (unsigned long long)(job->ms * 1000.0));
  printf(",\"received_bytes\":%llu,\"decoded_bytes\":%llu,\"delivered_bytes\":%llu",
         (unsigned long long)m->bytes_received, (unsigned long long)m->decoded_bytes,
         (unsigned long long)m->delivered_bytes);
  if (job->status != PXL_OK) {
    printf(",\"error\":");
    print_json_string(job->message ? job->message : pxl_status_string(job->status));
  }
  printf("}\n");
}

/* hash: the BlurHash text, or the ThumbHash in standard base64 with padding. */
static void print_hash(const struct job *job, int32_t kind) {
  if (kind == PXL_PLACEHOLDER_BLURHASH) {
    printf("%.*s\n", (int)job->hash_length, (const char *)job->hash);
    return;
  }
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < job->hash_length; i += 3) {
    uint32_t v = (uint32_t)job->hash[i] << 16;
    if (i + 1 < job->hash_length) v |= (uint32_t)job->hash[i + 1] << 8;
    if (i + 2 < job->hash_length) v |= job->hash[i + 2];
    putchar(alphabet[v >> 18]);
    putchar(alphabet[(v >> 12) & 63]);
    putchar(i + 1 < job->hash_length ? alphabet[(v >> 6) & 63] : '=');
    putchar(i + 2 < job->hash_length ? alphabet[v & 63] : '=');
  }
  putchar('\n');
}

static void print_job(const struct job *job) {
  char size[32] = "-";
  if (job->status == PXL_OK) snprintf(size, sizeof size, "%dx%d", job->width, job->height);
  printf("%-18s %-10s %-7s %8.1f ms  %s", job->incomplete ? "OK incomplete" : status_name(job->status), size,
         source_name(job->source, job->url), job->ms, job->url);
  if (job->status != PXL_OK) {
    printf("  (%s", job->message ? job->message : pxl_status_string(job->status));
    if (job->http_status) printf(", HTTP %d", job->http_status);
    printf(")");
  }
  if (job->write_failed) printf("  (not written)");
  printf("\n");
}

static int fetch(int argc, char **argv, int hash) {
  struct fetch_options o = {0};
  int rc = parse_fetch_options(argc, argv, &o);
  if (rc) goto out_options;
  if (!hash && o.hash_kind) {
    rc = usage_error("%s", "--blurhash and --thumbhash are hash's options");
    goto out_options;
  }
  if (hash && (!o.hash_kind || o.out_file || o.out_dir || o.metrics)) {
    rc = usage_error("%s", "hash wants --blurhash or --thumbhash, and no --out, --out-dir or --metrics");
    goto out_options;
  }
  /* The encoders read at most 100x100: a smaller decode costs less (a ThumbHash keeps the
   * aspect ratio of what it reads). */
  if (hash && o.request.width == 0 && o.request.height == 0) o.request.width = o.request.height = 100;

  if (o.out_dir) {
    const char *error = make_dirs(o.out_dir);
    if (error) {
      fprintf(stderr, "pixload: cannot create %s: %s\n", o.out_dir, error);
      rc = 1;
      goto out_options;
    }
  }

  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  pxl_status s = pxl_loader_new(&o.config, &loader);
  if (s != PXL_OK) {
    fprintf(stderr, "pixload: cannot create a loader: %s\n", pxl_status_string(s));
    rc = 1;
    goto out_options;
  }
  if ((s = pxl_queue_new(&queue)) != PXL_OK) {
    fprintf(stderr, "pixload: cannot create a queue: %s\n", pxl_status_string(s));
    pxl_loader_free(loader);
    rc = 1;
    goto out_options;
  }

  struct job *jobs = calloc(o.url_count, sizeof *jobs);
  if (!jobs) {
    fprintf(stderr, "pixload: out of memory\n");
    rc = 1;
    goto out_handles;
  }
  struct run run = {0, 0, 0, o.out_file, o.out_dir, o.hash_kind};
  progress_on = !o.quiet && o.url_count > PROGRESS_MIN_URLS && isatty(STDERR_FILENO);
  double cpu_start = cpu_ms();
  run.start_ms = now_ms();
  for (size_t i = 0; i < o.url_count; i++) {
    jobs[i] = (struct job){.run = &run, .index = i, .url = o.urls[i]};
    pxl_request request = o.request;
    request.url = o.urls[i];
    s = pxl_load(loader, &request, queue, on_loaded, &jobs[i], NULL);
    /* A refused load never calls back (rule 1): it is finished now. */
    if (s != PXL_OK) finish_job(&jobs[i], s, pxl_status_string(s));
  }
  /* The host loop: sleep until completions are pending, then run their callbacks here.
   * The timeout only bounds each sleep; the loader's own timeouts end every request. */
  double shown_ms = 0;
  while (run.finished < o.url_count) {
    pxl_queue_wait(queue, 1000);
    pxl_queue_dispatch(queue, 0);
    /* At most ten redraws a second: a terminal is slower than a warm cache. */
    if (progress_on && now_ms() - shown_ms >= 100) {
      progress_update(run.finished, run.failed, o.url_count, 0);
      shown_ms = now_ms();
    }
  }
  progress_update(run.finished, run.failed, o.url_count, 1);
  double wall_ms = 0, cpu = cpu_ms() - cpu_start;
  size_t loaded = 0;
  for (size_t i = 0; i < o.url_count; i++) {
    if (jobs[i].ms > wall_ms) wall_ms = jobs[i].ms;
    if (jobs[i].status == PXL_OK && !jobs[i].write_failed) loaded++;
    if (hash) {
      if (jobs[i].status == PXL_OK && !jobs[i].write_failed) print_hash(&jobs[i], o.hash_kind);
      else if (jobs[i].status != PXL_OK)
        fprintf(stderr, "pixload: %s: %s\n", jobs[i].url,
                jobs[i].message ? jobs[i].message : pxl_status_string(jobs[i].status));
    } else if (o.metrics) {
      print_metrics(&jobs[i]);
    } else if (!o.quiet) {
      print_job(&jobs[i]);
    }
  }
  if (!hash) fprintf(o.metrics ? stderr : stdout, "%zu loaded, %zu failed, %.1f images/s, %.3f ms CPU/image\n", loaded,
         o.url_count - loaded, wall_ms > 0 ? (double)loaded * 1000.0 / wall_ms : 0.0,
         cpu / (double)o.url_count);
  rc = loaded == o.url_count ? 0 : 1;
  for (size_t i = 0; i < o.url_count; i++) free(jobs[i].message);
  free(jobs);
out_handles:
  pxl_loader_free(loader);
  pxl_queue_free(queue);
out_options:
  for (size_t i = 0; i < o.url_count; i++) free(o.urls[i]);
  free(o.urls);
  free(o.headers);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage_error(NULL, NULL);
  if (strcmp(argv[1], "version") == 0 && argc == 2) {
    printf("%s\n", pxl_version());
    /* The formats a default loader decodes: the built-in ones and the codec modules found. */
    pxl_loader *loader = NULL;
    if (pxl_loader_new(NULL, &loader) == PXL_OK) {
      char formats[512];
      pxl_loader_formats(loader, formats, sizeof formats);
      printf("formats: %s\n", formats);
      pxl_loader_free(loader);
    }
    return 0;
  }
  if (strcmp(argv[1], "fetch") == 0) return fetch(argc - 1, argv + 1, 0);
  if (strcmp(argv[1], "hash") == 0) return fetch(argc - 1, argv + 1, 1);
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(usage_text, stdout);
    return 0;
  }
  return usage_error("unknown command '%s'", argv[1]);
}
