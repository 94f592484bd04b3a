/*
 * Sources/CWorker: the library's side of the decode worker (worker/worker_client.c) for
 * the Swift decode stage, in plain C types (no pixload.h types, which Swift sees through
 * CPixload). One pxlw_worker is used by one thread at a time (the pool hands it out).
 */
#ifndef PXL_WORKER_GLUE_H
#define PXL_WORKER_GLUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pxlw_header {
  int32_t image_width, image_height; /* the image's size, as its header says */
  int32_t width, height;             /* what the worker drew */
  int32_t frame_count, loop_count, orientation, has_alpha;
  int32_t cicp_primaries, cicp_transfer, cicp_matrix;
  uint32_t icc_size, codec_flags;
} pxlw_header;

/* Spawns a worker for the modules in module_dir (only: "heif", "" none, NULL all; builtins:
 * pixload-decode-builtins.so for the built-in formats, or NULL) and waits for its HELLO.
 * NULL on failure, with message. */
void *pxlw_spawn(const char *executable, const char *module_dir, const char *only, const char *builtins,
                 uint64_t max_pixels, uint64_t max_input_bytes, int timeout_ms, char *message, size_t cap);
uint32_t pxlw_layers(void *worker);
void pxlw_layers_string(uint32_t layers, char *buf, size_t cap);
int pxlw_alive(void *worker);
void pxlw_free(void *worker);

/* Decodes through the worker. Returns a result (free with pxlw_result_free) and sets
 * *status (a pxl_status: 0 ok, 23 PXL_E_DECODER_FAILED, or a codec's) and message. On
 * success the header and the sealed, read-only pixels are the result's. *worker_ended: the
 * worker cannot decode again. resample (out_width, out_height, layout, premultiply) and crop
 * (x, y, width, height in the drawn canvas), or NULL: the worker resamples what it drew and
 * the result's pixels are the resampler's output (pxl_worker_resample).
 * step: PXLW_ONCE, a conversation of its own (flags PXLW_HEADER_ONLY: no pixels); or one
 * image's conversation in steps (worker_client.h, pxl_worker_open): PXLW_OPEN (data, codec,
 * flags: the header, the conversation left open), PXLW_SIZE (the target: the size the
 * codec draws for it), PXLW_DRAW (draw at exactly target_width x target_height: the
 * pixels; the end); pxlw_end ends an open one without pixels. */
#define PXLW_ONCE 0
#define PXLW_OPEN 1
#define PXLW_SIZE 2
#define PXLW_DRAW 3
#define PXLW_KEEP_ORIENTATION 0x1u
#define PXLW_HEADER_ONLY 0x2u
#define PXLW_PARTIAL 0x4u /* a prefix of a file still arriving (PXL_CODEC_PARTIAL) */
void *pxlw_decode(void *worker, int step, const uint8_t *data, size_t size, const char *codec, int32_t target_width,
                  int32_t target_height, uint32_t flags, const int32_t *resample, const double *crop, int timeout_ms,
                  int32_t *status, char *message, size_t cap, int *worker_ended, pxlw_header *header);
void pxlw_end(void *worker);
const uint8_t *pxlw_result_pixels(const void *result);
size_t pxlw_result_stride(const void *result);
const uint8_t *pxlw_result_icc(const void *result);
/* The result's sealed pixel memfd and its size (pixels, then the ICC profile), for
 * pxlw_map_private; -1 when it has none. */
int pxlw_result_memfd(const void *result);
size_t pxlw_result_map_size(const void *result);
double pxlw_result_wall_ms(const void *result);
uint64_t pxlw_result_cpu_ns(const void *result);
/* The version the worker's codec reports (its HEADER: the module's library as it runs). */
const char *pxlw_result_codec_version(const void *result);
void pxlw_result_free(void *result);

/* A built-in format's shim in the worker (worker_client.h, pxl_worker_native): the answer
 * as plain fields. */
typedef struct pxlw_native {
  int32_t status;        /* the conversation: 0, or a pxl_status (23: PXL_E_DECODER_FAILED) */
  int32_t worker_ended;  /* the worker cannot serve again */
  int32_t codec_status;  /* the shim's pxl_codec_status */
  int32_t width, height, has_alpha, orientation, frame_count, loop_count; /* INFO */
  int32_t color_status, srgb, has_chrm, chrm[8], gamma, cicp_primaries, cicp_transfer, cicp_matrix;
  int32_t out_width, out_height, out_stride, out_channels, out_has_alpha, out_warnings, out_incomplete; /* DECODE */
  uint32_t icc_size;
  uint64_t cpu_ns;
  const uint8_t *bytes;  /* sealed, read-only: pixels (out_stride * out_height), then the ICC profile */
  char message[320];
  int32_t memfd;         /* the sealed memfd bytes is mapped from (-1: none), for pxlw_map_private */
  uint64_t map_size;     /* its size: the pixels, then the ICC profile */
} pxlw_native;

#define PXLW_NATIVE_INFO 1
#define PXLW_NATIVE_DECODE 2
#define PXLW_NATIVE_REGION 3
#define PXLW_NATIVE_RESAMPLE 4
/* flags: an INFO that succeeds leaves the conversation open (pxlw_end ends it); a call
 * continues it (the worker kept the bytes; a RESAMPLE's output crosses in one exchange). */
#define PXLW_NATIVE_STAY 0x1u
#define PXLW_NATIVE_CONTINUE 0x2u

/* Returns what owns out->bytes (pxlw_native_free), NULL when out of memory. region: x, y,
 * width, height (REGION, RESAMPLE of a JPEG crop), else NULL; resample (6) and crop (4):
 * the resampler's parameters (RESAMPLE), else NULL. data_memfd: NULL, or a sealed memfd
 * of the same bytes kept from an earlier call (-1: make one and leave it there; the
 * caller closes it with pxlw_close). */
void *pxlw_native_call(void *worker, const uint8_t *data, size_t size, const char *format, uint32_t op, uint32_t flags,
                       int32_t layout,
                       int32_t scale, uint64_t max_pixels, const int32_t *region, const int32_t *resample,
                       const double *crop, int *data_memfd, int timeout_ms, pxlw_native *out);
void pxlw_close(int fd);
/* A sealed pixel memfd (pxlw_result_memfd, pxlw_native.memfd) mapped privately,
 * copy-on-write (worker_client.h, pxl_worker_map_private): the caller keeps it past the
 * result's free and releases it with munmap(size). NULL when it cannot (then copy). */
void *pxlw_map_private(int memfd, size_t size);
void pxlw_native_free(void *result);

/* An animation's frames in the worker (worker_client.h, pxl_worker_frames_open): codec (a
 * module's id) or format (a built-in format's frame reader), keep_orientation, max_pixels.
 * Returns what owns the canvas mapping (pxlw_result_free; the canvas is
 * pxlw_result_pixels, 4 * width bytes a row, then the ICC profile: pxlw_result_icc), with
 * *status, message, *worker_ended and the header; *first_duration_ms: frame 0's duration
 * (-1 unknown). The worker is the animation's until pxlw_frames_close. */
void *pxlw_frames_open(void *worker, const uint8_t *data, size_t size, const char *codec, const char *format,
                       int keep_orientation, uint64_t max_pixels, int timeout_ms, int32_t *status, char *message,
                       size_t cap, int *worker_ended, pxlw_header *header, int32_t *first_duration_ms);
/* The next frame into the canvas: *status 0 and *end (1: no more), *index, *duration_ms,
 * *incomplete; or
 * a failure (*status, message, *worker_ended). */
void pxlw_frame_next(void *worker, int timeout_ms, int32_t *status, char *message, size_t cap, int *worker_ended,
                     int32_t *end, int32_t *index, int32_t *duration_ms, int32_t *incomplete);
void pxlw_frames_close(void *worker);

/* A codec module's manifest (pixload.h, "Codec modules"), read from the module's file
 * without loading it (worker/manifest.c): NULL when it has none that passes the checks.
 * Never freed by the library (its codecs keep it for the loader's life): pxlw_manifest_free. */
void *pxlw_manifest_read(const char *path);
void pxlw_manifest_free(void *manifest);
int pxlw_manifest_codec_count(const void *manifest);
const char *pxlw_manifest_id(const void *manifest, int codec);
const char *pxlw_manifest_version(const void *manifest, int codec);
uint32_t pxlw_manifest_flags(const void *manifest, int codec);
int pxlw_manifest_chooses_size(const void *manifest, int codec);
/* 1 when the codec's sniff rules take the first bytes of a file. */
int pxlw_manifest_sniff(const void *manifest, int codec, const uint8_t *data, size_t size);

#endif
