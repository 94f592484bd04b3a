/*
 * tool_writeout.c: what fetch prints per URL on stdout, one line each in the order
 * given,
 *
 *   STATUS WxH SOURCE MS URL[  (message, HTTP n)][  (not written)]
 *
 * and what hash prints: the BlurHash, or the ThumbHash in base64. --metrics' JSON is
 * tool_writeout_json.c's; the summary line is tool_operate.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>

#include "tool_writeout.h"

/* The enum's own names: see tool_writeout.h. */
const char *status_name(pxl_status status) {
  static const char *const names[] = {
      "OK", "INVALID_ARGUMENT", "MALFORMED_URL", "SCHEME_NOT_ALLOWED", "DNS", "CONNECT",
      "TLS", "TIMEOUT", "HTTP", "BODY_TOO_LARGE", "NOT_AN_IMAGE", "CORRUPT_IMAGE",
      "TOO_MANY_PIXELS", "CANCELLED", "LOADER_CLOSED", "NETWORK", "UNSUPPORTED_IMAGE",
      "NO_MEMORY", "NOT_FOUND", "IO", "TOO_MANY_REDIRECTS", "NOT_CACHED", "UNSUPPORTED", "DECODER_FAILED"};
  if ((unsigned)status < sizeof names / sizeof names[0]) return names[status];
  return pxl_status_string(status);
}

/* The library says where a result came from, file:// included (PXL_SOURCE_FILE): the
 * column never reads a scheme from the URL's text. */
static const char *source_name(pxl_source source) {
  switch (source) {
    case PXL_SOURCE_MEMORY: return "memory";
    case PXL_SOURCE_NETWORK: return "network";
    case PXL_SOURCE_FILE: return "file";
    case PXL_SOURCE_DISK: return "disk";
    case PXL_SOURCE_REVALIDATED: return "revalidated";
    case PXL_SOURCE_DATA: return "data";
    case PXL_SOURCE_FETCHER: return "fetcher";
    default: return "none";
  }
}

/* hash: the BlurHash text, or the ThumbHash in standard base64 with padding. */
void print_hash(const struct job *job, int32_t kind) {
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

void print_job(const struct job *job) {
  char size[32] = "-";
  if (job->status == PXL_OK) snprintf(size, sizeof size, "%dx%d", job->width, job->height);
  printf("%-18s %-10s %-7s %8.1f ms  %s", job->incomplete ? "OK incomplete" : status_name(job->status), size,
         source_name(job->source), job->ms, job->url);
  if (job->status != PXL_OK) {
    printf("  (%s", job->message ? job->message : pxl_status_string(job->status));
    if (job->http_status) printf(", HTTP %d", job->http_status);
    printf(")");
  }
  if (job->write_failed) printf("  (not written)");
  printf("\n");
}
