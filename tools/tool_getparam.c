/*
 * tool_getparam.c: fetch's and hash's options (getopt_long) into a pxl_config, a
 * pxl_request and the client's own settings; the URLs from the command line and
 * --urls files; --header lines. The --process grammar is tool_process.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_getparam.h"
#include "tool_help.h"
#include "tool_process.h"
#include "tool_progress.h"

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

/* Returns 0, or the exit status of a usage error (2). */
int parse_fetch_options(int argc, char **argv, struct fetch_options *o) {
  enum { OPT_SIZE = 256, OPT_MODE, OPT_FORMAT, OPT_NO_ORIENTATION, OPT_ALLOW_FILE, OPT_ALLOW_DATA,
         OPT_MEMORY_CACHE, OPT_CONCURRENCY, OPT_PER_HOST, OPT_URLS, OPT_OUT, OPT_OUT_DIR,
         OPT_QUIET, OPT_HELP, OPT_HEADER, OPT_TIMEOUT_MS, OPT_RETRIES, OPT_CACHE_DIR,
         OPT_DISK_CACHE_MB, OPT_NO_DISK_CACHE, OPT_ISOLATION, OPT_DECODE_TIMEOUT_MS, OPT_DECODE_THREADS, OPT_CACHE_ONLY, OPT_RELOAD, OPT_VARIANT_MAX_SIDE,
         OPT_ANIMATE, OPT_NO_COLOR_MANAGEMENT, OPT_PROCESS, OPT_CA_FILE, OPT_CA_PATH, OPT_PROXY, OPT_METRICS,
         OPT_BLURHASH, OPT_THUMBHASH, OPT_FRAMES };
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
      {"isolation", required_argument, NULL, OPT_ISOLATION},
      {"decode-timeout-ms", required_argument, NULL, OPT_DECODE_TIMEOUT_MS},
      {"decode-threads", required_argument, NULL, OPT_DECODE_THREADS},
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
      {"frames", required_argument, NULL, OPT_FRAMES},
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
        o->memory_cache_set = 1;
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
      case OPT_ISOLATION:
        if (strcmp(optarg, "none") == 0) o->config.isolation = PXL_ISOLATION_NONE;
        else if (strcmp(optarg, "modules") == 0) o->config.isolation = PXL_ISOLATION_MODULES;
        else if (strcmp(optarg, "all") == 0) o->config.isolation = PXL_ISOLATION_ALL;
        else return usage_error("--isolation wants none, modules or all, not '%s'", optarg);
        break;
      case OPT_DECODE_TIMEOUT_MS:
        if (parse_int(optarg, 0, INT32_MAX, &n)) return usage_error("bad --decode-timeout-ms '%s'", optarg);
        o->config.decode_timeout_ms = n;
        break;
      case OPT_DECODE_THREADS:
        if (parse_int(optarg, 1, 256, &n)) return usage_error("bad --decode-threads '%s'", optarg);
        o->config.decode_threads = (int32_t)n;
        break;
      case OPT_VARIANT_MAX_SIDE:
        if (parse_int(optarg, 0, 1L << 30, &n)) return usage_error("bad --variant-max-side '%s'", optarg);
        o->config.disk_variant_max_side = n;
        break;
      case OPT_CACHE_ONLY: o->request.flags |= PXL_FLAG_CACHE_ONLY; break;
      case OPT_RELOAD: o->request.flags |= PXL_FLAG_RELOAD; break;
      case OPT_ANIMATE: o->request.flags |= PXL_FLAG_ANIMATE; break;
      case OPT_PROCESS:
        if (parse_process(optarg, o->processors, &o->request.processor_count))
          return usage_error("malformed --process '%s' (see man pixload)", optarg);
        o->request.processors = o->processors;
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
      case OPT_FRAMES:
        if (parse_int(optarg, 1, INT32_MAX, &n)) return usage_error("--frames wants a number > 0, not '%s'", optarg);
        o->frames = n;
        break;
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


static int compare_urls(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void fetch_memory_cache_default(struct fetch_options *o) {
  if (o->memory_cache_set) return;
  int repeated = 0;
  if (o->url_count > 1) {
    char **sorted = malloc(o->url_count * sizeof *sorted);
    if (!sorted) return; /* keep the library's default: a cache costs only memory */
    memcpy(sorted, o->urls, o->url_count * sizeof *sorted);
    qsort(sorted, o->url_count, sizeof *sorted, compare_urls);
    for (size_t i = 1; i < o->url_count && !repeated; i++) repeated = strcmp(sorted[i - 1], sorted[i]) == 0;
    free(sorted);
  }
  if (!repeated) o->config.memory_cache_bytes = 0;
}

void fetch_options_free(struct fetch_options *o) {
  for (size_t i = 0; i < o->url_count; i++) free(o->urls[i]);
  free(o->urls);
  free(o->headers);
}
