/*
 * tool_writeout_json.c: fetch --metrics, one JSON object per URL on stdout, one line
 * each, so that stdout pipes into jq: the request's pxl_metrics (pxl_result_metrics),
 * its status and size. The summary goes to stderr then (tool_operate.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tool_writeout.h"
#include "tool_writeout_json.h"

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
 * sizes in _bytes; total_us is the library's (intake to callback, the stage fields and
 * other_us add up to it), elapsed_us is from the run's start to the callback. No header
 * value appears (neither the request's nor the response's). */
void print_metrics(const struct job *job) {
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
         "\"process_us\":%llu,\"queue_wait_us\":%llu,\"elapsed_us\":%llu",
         (unsigned long long)m->slot_wait_us, (unsigned long long)m->dns_us,
         (unsigned long long)m->connect_us, (unsigned long long)m->tls_us,
         (unsigned long long)m->first_byte_us, (unsigned long long)m->transfer_us,
         (unsigned long long)m->disk_read_us, (unsigned long long)m->decode_us,
         (unsigned long long)m->process_us, (unsigned long long)m->queue_wait_us,
         (unsigned long long)(job->ms * 1000.0));
  printf(",\"received_bytes\":%llu,\"decoded_bytes\":%llu,\"delivered_bytes\":%llu",
         (unsigned long long)m->bytes_received, (unsigned long long)m->decoded_bytes,
         (unsigned long long)m->delivered_bytes);
  if (m->struct_size >= offsetof(pxl_metrics, isolated) + sizeof(int32_t))
    printf(",\"isolated\":%s,\"worker_us\":%llu", m->isolated ? "true" : "false", (unsigned long long)m->worker_us);
  if (m->struct_size >= offsetof(pxl_metrics, total_us) + sizeof(uint64_t))
    printf(",\"other_us\":%llu,\"total_us\":%llu", (unsigned long long)m->other_us,
           (unsigned long long)m->total_us);
  if (m->struct_size >= offsetof(pxl_metrics, after_last_byte_us) + sizeof(uint64_t))
    printf(",\"after_last_byte_us\":%llu", (unsigned long long)m->after_last_byte_us);
  if (job->status != PXL_OK) {
    printf(",\"error\":");
    print_json_string(job->message ? job->message : pxl_status_string(job->status));
  }
  printf("}\n");
}
