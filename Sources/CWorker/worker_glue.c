/* Sources/CWorker/worker_glue.c: worker/worker_client.c compiled into the library, behind
 * pxl_worker_glue.h. The client's source stays in worker/ beside the worker it talks to
 * (and Tests/worker tests it there); this file only includes it. */
#include "../../worker/worker_client.c"
#include "../../worker/manifest.c"

#include "pxl_worker_glue.h"

void *pxlw_spawn(const char *executable, const char *module_dir, const char *only, const char *builtins,
                 uint64_t max_pixels, uint64_t max_input_bytes, int timeout_ms, char *message, size_t cap) {
  pxl_worker_options o;
  memset(&o, 0, sizeof o);
  o.executable = executable;
  o.module_dir = module_dir;
  o.only = only;
  o.builtins = builtins;
  o.max_pixels = max_pixels;
  o.max_input_bytes = max_input_bytes;
  o.keep_stderr = getenv("PIXLOAD_WORKER_STDERR") != NULL;
  pxl_worker *w = NULL;
  if (pxl_worker_spawn(&o, timeout_ms, &w, message, cap) != PXL_OK) return NULL;
  return w;
}

uint32_t pxlw_layers(void *worker) { return pxl_worker_hello_of(worker)->layers; }
void pxlw_layers_string(uint32_t layers, char *buf, size_t cap) { pxl_worker_layers_string(layers, buf, cap); }
int pxlw_alive(void *worker) { return pxl_worker_alive(worker); }
void pxlw_free(void *worker) { pxl_worker_free(worker); }

void *pxlw_decode(void *worker, int step, const uint8_t *data, size_t size, const char *codec, int32_t target_width,
                  int32_t target_height, uint32_t flags, const int32_t *resample, const double *crop, int timeout_ms,
                  int32_t *status, char *message, size_t cap, int *worker_ended, pxlw_header *header) {
  pxl_worker_result *r = calloc(1, sizeof *r);
  if (!r) {
    *status = PXL_E_NO_MEMORY;
    snprintf(message, cap, "out of memory");
    *worker_ended = 0;
    return NULL;
  }
  pxl_worker_resample rs;
  if (resample) {
    rs.out_width = resample[0], rs.out_height = resample[1], rs.layout = resample[2], rs.premultiply = resample[3];
    memcpy(rs.crop, crop, sizeof rs.crop);
  }
  uint32_t sent = (flags & PXLW_KEEP_ORIENTATION ? PXL_WORKER_KEEP_ORIENTATION : 0) |
                  (flags & PXLW_PARTIAL ? PXL_WORKER_PARTIAL : 0);
  switch (step) {
  case PXLW_OPEN: pxl_worker_open(worker, data, size, codec, sent, timeout_ms, r); break;
  case PXLW_SIZE: pxl_worker_size(worker, target_width, target_height, timeout_ms, r); break;
  case PXLW_DRAW: pxl_worker_draw(worker, target_width, target_height, sent, resample ? &rs : NULL, timeout_ms, r); break;
  default:
    pxl_worker_decode_resampled(worker, data, size, codec, target_width, target_height,
                                sent | (flags & PXLW_HEADER_ONLY ? PXL_WORKER_CLIENT_HEADER_ONLY : 0),
                                resample ? &rs : NULL, timeout_ms, r);
  }
  *status = (int32_t)r->status;
  snprintf(message, cap, "%s", r->message);
  *worker_ended = !pxl_worker_alive(worker);
  const pxl_worker_msg_header *h = &r->header;
  pxlw_header out = {h->image_width, h->image_height, h->width, h->height, h->frame_count, h->loop_count,
                     h->orientation, h->has_alpha, h->cicp_primaries, h->cicp_transfer, h->cicp_matrix,
                     h->icc_size, h->codec_flags};
  *header = out;
  return r;
}

void pxlw_end(void *worker) { pxl_worker_close(worker); }

const uint8_t *pxlw_result_pixels(const void *result) { return ((const pxl_worker_result *)result)->pixels; }
size_t pxlw_result_stride(const void *result) { return ((const pxl_worker_result *)result)->stride; }
const uint8_t *pxlw_result_icc(const void *result) { return ((const pxl_worker_result *)result)->icc; }
int pxlw_result_memfd(const void *result) {
  const pxl_worker_result *r = result;
  return r->pixels ? r->memfd : -1;
}
size_t pxlw_result_map_size(const void *result) { return ((const pxl_worker_result *)result)->map_size; }
double pxlw_result_wall_ms(const void *result) { return ((const pxl_worker_result *)result)->wall_ms; }
uint64_t pxlw_result_cpu_ns(const void *result) { return ((const pxl_worker_result *)result)->worker_cpu_ns; }
const char *pxlw_result_codec_version(const void *result) {
  return ((const pxl_worker_result *)result)->header.codec_version;
}

void pxlw_result_free(void *result) {
  if (!result) return;
  pxl_worker_result_release(result);
  free(result);
}

void *pxlw_native_call(void *worker, const uint8_t *data, size_t size, const char *format, uint32_t op, uint32_t flags,
                       int32_t layout,
                       int32_t scale, uint64_t max_pixels, const int32_t *region, const int32_t *resample,
                       const double *crop, int *data_memfd, int timeout_ms, pxlw_native *out) {
  memset(out, 0, sizeof *out);
  out->memfd = -1;
  pxl_worker_native_result *r = calloc(1, sizeof *r);
  if (!r) {
    out->status = PXL_E_NO_MEMORY;
    snprintf(out->message, sizeof out->message, "out of memory");
    return NULL;
  }
  pxl_worker_native(worker, data, size, format, op,
                    (flags & PXLW_NATIVE_STAY ? PXL_WORKER_NATIVE_STAY : 0) |
                        (flags & PXLW_NATIVE_CONTINUE ? PXL_WORKER_CLIENT_CONTINUE : 0),
                    layout, scale, max_pixels, region, resample, crop, data_memfd, timeout_ms, r);
  const pxl_worker_msg_native_result *a = &r->answer;
  out->status = (int32_t)r->status;
  out->worker_ended = !pxl_worker_alive(worker);
  out->codec_status = a->status;
  out->width = a->width, out->height = a->height, out->has_alpha = a->has_alpha, out->orientation = a->orientation;
  out->frame_count = a->frame_count, out->loop_count = a->loop_count;
  out->color_status = a->color_status, out->srgb = a->srgb, out->has_chrm = a->has_chrm, out->gamma = a->gamma;
  memcpy(out->chrm, a->chrm, sizeof out->chrm);
  out->cicp_primaries = a->cicp_primaries, out->cicp_transfer = a->cicp_transfer, out->cicp_matrix = a->cicp_matrix;
  out->out_width = a->out_width, out->out_height = a->out_height, out->out_stride = a->out_stride;
  out->out_channels = a->out_channels, out->out_has_alpha = a->out_has_alpha, out->out_warnings = a->out_warnings;
  out->out_incomplete = a->out_incomplete;
  out->icc_size = a->icc_size;
  out->cpu_ns = a->cpu_ns;
  out->bytes = r->bytes;
  out->memfd = r->bytes ? r->memfd : -1;
  out->map_size = r->bytes ? r->map_size : 0;
  snprintf(out->message, sizeof out->message, "%s", r->status == PXL_OK ? a->message : r->message);
  return r;
}

void pxlw_close(int fd) {
  if (fd >= 0) close(fd);
}

void *pxlw_map_private(int memfd, size_t size) { return pxl_worker_map_private(memfd, size); }

void pxlw_native_free(void *result) {
  if (!result) return;
  pxl_worker_native_release(result);
  free(result);
}

static pxlw_header glue_header(const pxl_worker_msg_header *h) {
  pxlw_header out = {h->image_width, h->image_height, h->width, h->height, h->frame_count, h->loop_count,
                     h->orientation, h->has_alpha, h->cicp_primaries, h->cicp_transfer, h->cicp_matrix,
                     h->icc_size, h->codec_flags};
  return out;
}

void *pxlw_frames_open(void *worker, const uint8_t *data, size_t size, const char *codec, const char *format,
                       int keep_orientation, uint64_t max_pixels, int timeout_ms, int32_t *status, char *message,
                       size_t cap, int *worker_ended, pxlw_header *header, int32_t *first_duration_ms) {
  pxl_worker_result *r = calloc(1, sizeof *r);
  if (!r) {
    *status = PXL_E_NO_MEMORY;
    snprintf(message, cap, "out of memory");
    *worker_ended = 0;
    return NULL;
  }
  pxl_worker_frames_open(worker, data, size, codec, format, keep_orientation ? PXL_WORKER_KEEP_ORIENTATION : 0,
                         max_pixels, timeout_ms, r);
  *status = (int32_t)r->status;
  snprintf(message, cap, "%s", r->message);
  *worker_ended = !pxl_worker_alive(worker);
  *header = glue_header(&r->header);
  *first_duration_ms = r->header.first_duration_ms;
  return r;
}

void pxlw_frame_next(void *worker, int timeout_ms, int32_t *status, char *message, size_t cap, int *worker_ended,
                     int32_t *end, int32_t *index, int32_t *duration_ms, int32_t *incomplete) {
  pxl_worker_result r;
  pxl_worker_msg_frame f;
  *status = (int32_t)pxl_worker_frame_next(worker, timeout_ms, &f, &r);
  snprintf(message, cap, "%s", r.message);
  *worker_ended = !pxl_worker_alive(worker);
  *end = f.end;
  *index = f.index;
  *duration_ms = f.duration_ms;
  *incomplete = f.incomplete;
}

void pxlw_frames_close(void *worker) { pxl_worker_frames_close(worker); }

void *pxlw_manifest_read(const char *path) {
  pxl_codec_manifest *m = malloc(sizeof *m);
  if (m && pxl_manifest_read(path, m)) return m;
  free(m);
  return NULL;
}
void pxlw_manifest_free(void *manifest) { free(manifest); }
int pxlw_manifest_codec_count(const void *m) { return (int)((const pxl_codec_manifest *)m)->codec_count; }
const char *pxlw_manifest_id(const void *m, int i) { return ((const pxl_codec_manifest *)m)->codecs[i].id; }
const char *pxlw_manifest_version(const void *m, int i) { return ((const pxl_codec_manifest *)m)->codecs[i].version; }
uint32_t pxlw_manifest_flags(const void *m, int i) { return ((const pxl_codec_manifest *)m)->codecs[i].flags; }
int pxlw_manifest_chooses_size(const void *m, int i) {
  return ((const pxl_codec_manifest *)m)->codecs[i].has_choose_size != 0;
}
int pxlw_manifest_sniff(const void *m, int i, const uint8_t *data, size_t size) {
  return pxl_manifest_sniff(&((const pxl_codec_manifest *)m)->codecs[i], data, size);
}
