/*
 * worker/worker_client.h: the library's side of the decode worker, in C: spawn a worker,
 * read its HELLO, decode one image through it under a wall-clock limit, and say how it
 * ended. The library's decode stage calls these (Sources/CWorker, IsolatedCodec.swift);
 * so does Tests/worker/test_worker.c. Nothing here trusts the worker: every answer is checked (sizes against
 * max_pixels, strings terminated, messages in turn), a worker that fails a check is
 * killed, and the pixels come back in a memfd the worker can no longer change.
 *
 * A pxl_worker is used by one thread at a time (the pool hands one to each decode).
 */
#ifndef PXL_WORKER_CLIENT_H
#define PXL_WORKER_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pixload.h"
#include "pxl_worker_protocol.h"

/* The status a failed worker gives its decode (issue 39). */
#define PXL_WORKER_E_DECODER_FAILED PXL_E_DECODER_FAILED

typedef struct pxl_worker pxl_worker;

typedef struct pxl_worker_options {
  const char *executable;    /* pixload-decode-worker's path */
  const char *module_dir;    /* the codec modules' directory */
  const char *only;          /* module names ("heif,jxl"), NULL: all in module_dir */
  uint64_t max_pixels;       /* pxl_config.max_pixels: RLIMIT_AS and the header check */
  uint64_t max_input_bytes;  /* the largest encoded file the worker maps */
  const char *builtins;      /* pixload-decode-builtins.so: the built-in formats (ALL), or NULL */
  int keep_stderr;           /* the worker keeps fd 2 (debugging) */
  int debug_seccomp;         /* a forbidden call is named on stderr (debugging) */
} pxl_worker_options;

/* How a worker ended. */
typedef enum pxl_worker_end {
  PXL_WORKER_ALIVE = 0,      /* still running: the decode ended normally */
  PXL_WORKER_EXITED = 1,     /* exited (code); a broken conversation or socket closed */
  PXL_WORKER_SIGNALLED = 2,  /* killed by signal (SIGSYS: a forbidden system call) */
  PXL_WORKER_TIMED_OUT = 3,  /* over the wall-clock limit: killed by us */
  PXL_WORKER_PROTOCOL = 4    /* answered something that failed a check: killed by us */
} pxl_worker_end;

typedef struct pxl_worker_result {
  pxl_status status;         /* PXL_OK, a codec's status, or PXL_WORKER_E_DECODER_FAILED */
  char message[PXL_WORKER_MESSAGE_CAP + 64]; /* what happened, for the request's message */
  pxl_worker_end end;        /* how the worker ended (ALIVE: it can decode again) */
  int exit_code, signal;
  pxl_worker_msg_header header;  /* the worker's header, as checked */
  const uint8_t *pixels;     /* sealed, mapped read-only: height rows of stride bytes */
  size_t stride;
  const uint8_t *icc;        /* header.icc_size bytes after the pixels, or NULL */
  int memfd;                 /* the sealed pixel memfd (-1: none) */
  size_t map_size;
  double wall_ms;            /* DECODE sent to DONE received */
  uint64_t worker_cpu_ns;    /* the worker's CPU time for it, as it reports */
  void *copied;              /* a thumbnail (and its ICC profile) copied out of the kept
                                output memfd (protocol 5): pixels and icc point into it,
                                memfd is -1; freed by pxl_worker_result_release */
} pxl_worker_result;

/* Spawns a worker and waits (timeout_ms) for its HELLO. Returns PXL_OK and *out, or a
 * failure with message. The worker is not a fork of this process: posix_spawn, only its
 * socket inherited, signals at their defaults, an environment of HOME and XDG_* only. */
pxl_status pxl_worker_spawn(const pxl_worker_options *options, int timeout_ms, pxl_worker **out, char *message,
                            size_t cap);

/* HELLO as checked; the worker's pid. */
const pxl_worker_msg_hello *pxl_worker_hello_of(const pxl_worker *worker);
pid_t pxl_worker_pid(const pxl_worker *worker);
int pxl_worker_alive(const pxl_worker *worker);

/* The layers in HELLO as words ("no_new_privs namespaces landlock seccomp rlimits
 * fds_closed"), into buf. */
void pxl_worker_layers_string(uint32_t layers, char *buf, size_t cap);

/* Decodes data (size bytes; copied into a sealed memfd) with codec (NULL or "": sniffed),
 * at most timeout_ms of wall clock from DECODE to DONE. target 0 x 0: full size. The result
 * holds the sealed pixels until pxl_worker_result_release. A worker that dies, overruns or
 * breaks the protocol is killed and reaped, the result says how (end, signal), and the
 * worker can decode no more (pxl_worker_alive 0): spawn a fresh one. */
void pxl_worker_decode(pxl_worker *worker, const uint8_t *data, size_t size, const char *codec, int32_t target_width,
                       int32_t target_height, int timeout_ms, pxl_worker_result *result);

/* A flag of pxl_worker_decode_flags, not sent: stop at the worker's HEADER (the image's
 * size, and the size it would draw for the target), answer CANCEL, return PXL_OK and the
 * header without pixels. */
#define PXL_WORKER_CLIENT_HEADER_ONLY 0x10000u

/* pxl_worker_decode with DECODE's flags (PXL_WORKER_KEEP_ORIENTATION,
 * PXL_WORKER_CLIENT_HEADER_ONLY). */
void pxl_worker_decode_flags(pxl_worker *worker, const uint8_t *data, size_t size, const char *codec,
                             int32_t target_width, int32_t target_height, uint32_t flags, int timeout_ms,
                             pxl_worker_result *result);

/* A thumbnail the library would area-resample (DECODE's mode PXL_WORKER_DECODE_RESAMPLE):
 * the worker draws at target_width x target_height, resamples with these parameters
 * (pxl_worker_protocol.h), and only the output crosses: result.pixels then holds
 * out_height rows of stride (out_width * the layout's channels) bytes. */
typedef struct pxl_worker_resample {
  int32_t out_width, out_height;
  int32_t layout;      /* PXL_CODEC_RGBA (0), PXL_CODEC_BGRA (1) or PXL_CODEC_RGB (2) */
  int32_t premultiply;
  double crop[4];      /* in the drawn canvas's pixels */
} pxl_worker_resample;

/* pxl_worker_decode_flags, resampled in the worker when resample is not NULL. */
void pxl_worker_decode_resampled(pxl_worker *worker, const uint8_t *data, size_t size, const char *codec,
                                 int32_t target_width, int32_t target_height, uint32_t flags,
                                 const pxl_worker_resample *resample, int timeout_ms, pxl_worker_result *result);

void pxl_worker_result_release(pxl_worker_result *result);

/* A sealed pixel memfd (a result's or a native result's memfd) mapped again, privately:
 * MAP_PRIVATE, readable and writable, so a write copies the page it touches and never
 * reaches the memfd. For the library to keep as an image's pixels after the result is
 * released (the mapping holds the memfd's pages; munmap(size) frees them). Refuses a memfd
 * that is not sealed against writing, shrinking and growing (so neither the worker nor
 * anyone else can change or cut what the mapping reads). NULL when it cannot. */
void *pxl_worker_map_private(int memfd, size_t size);
/* One image's conversation (protocol 4), for a caller that needs the header before it
 * knows what to ask: pxl_worker_open sends the data and returns the header (the image's
 * size in width and height too) with the conversation left open; pxl_worker_size asks
 * choose_size's answer for a target (header.width and height); pxl_worker_draw has the
 * worker draw at exactly width x height (the header's size, a size answered, or a scalable
 * codec's larger size), resampled when resample is not NULL, and ends it; pxl_worker_end
 * ends it without pixels (any new conversation ends the one open). flags:
 * PXL_WORKER_KEEP_ORIENTATION, PXL_WORKER_PARTIAL. */
void pxl_worker_open(pxl_worker *worker, const uint8_t *data, size_t size, const char *codec, uint32_t flags,
                     int timeout_ms, pxl_worker_result *result);
void pxl_worker_size(pxl_worker *worker, int32_t target_width, int32_t target_height, int timeout_ms,
                     pxl_worker_result *result);
void pxl_worker_draw(pxl_worker *worker, int32_t width, int32_t height, uint32_t flags,
                     const pxl_worker_resample *resample, int timeout_ms, pxl_worker_result *result);
void pxl_worker_close(pxl_worker *worker);

/* A built-in format's shim run in the worker (PXL_ISOLATION_ALL; the worker spawned with
 * options.builtins): NATIVE, then, when bytes follow, a sealed memfd of exactly their size
 * (pxl_worker_protocol.h). */
typedef struct pxl_worker_native_result {
  pxl_status status;         /* PXL_OK: the conversation went through (answer.status says
                                how the shim did); else PXL_WORKER_E_DECODER_FAILED, ... */
  char message[PXL_WORKER_MESSAGE_CAP + 64];
  pxl_worker_end end;
  int exit_code, signal;
  pxl_worker_msg_native_result answer; /* checked: sizes against max_pixels, the message terminated */
  const uint8_t *bytes;      /* sealed, mapped read-only: the pixels (answer.out_stride *
                                out_height), then the ICC profile (answer.icc_size); or NULL */
  int memfd;
  size_t map_size;
  double wall_ms;
} pxl_worker_native_result;

/* A flag of pxl_worker_native, not sent: the request continues the conversation an INFO
 * with PXL_WORKER_NATIVE_STAY left open (no data memfd: the worker kept the bytes; a
 * RESAMPLE's output comes back in a memfd sent with it, sized from resample[]). */
#define PXL_WORKER_CLIENT_CONTINUE 0x10000u

/* op PXL_WORKER_NATIVE_INFO, _DECODE, _REGION (region: x, y, width, height; else NULL)
 * or _RESAMPLE (resample and crop: the resampler's parameters; region too for a JPEG crop)
 * of format ("jpeg", ...) over data; max_pixels: the shim's argument, and the bound the
 * answer's pixels are checked against. data_memfd: NULL, or the sealed memfd of data kept
 * by the caller from an earlier conversation about the same bytes (-1: none yet; the one
 * made now is left there, the caller's to close), so that INFO and the decode after it
 * copy the bytes once. flags: PXL_WORKER_NATIVE_STAY (an INFO that succeeds leaves the
 * conversation open: pxl_worker_close ends it), PXL_WORKER_CLIENT_CONTINUE. */
void pxl_worker_native(pxl_worker *worker, const uint8_t *data, size_t size, const char *format, uint32_t op,
                       uint32_t flags, int32_t layout, int32_t scale, uint64_t max_pixels, const int32_t region[4],
                       const int32_t resample[6], const double crop[4], int *data_memfd, int timeout_ms,
                       pxl_worker_native_result *result);

void pxl_worker_native_release(pxl_worker_native_result *result);

/* An animation's frames through the worker (FRAMES_OPEN, pxl_worker_protocol.h): codec (a
 * module's id; NULL or "": sniffed) or format (a built-in format's frame reader: "gif",
 * "webp", "avif"; NULL for a module), flags PXL_WORKER_KEEP_ORIENTATION. On PXL_OK the
 * result holds the header (width x height: the canvas; first_duration_ms) and the canvas,
 * mapped read-only (pixels, stride 4 * width, then the ICC profile: icc) until
 * pxl_worker_result_release; it is not sealed against writing (the worker draws each
 * frame into it): copy a frame out before asking for the next. The worker is the
 * animation's until pxl_worker_frames_close. timeout_ms bounds each conversation. */
void pxl_worker_frames_open(pxl_worker *worker, const uint8_t *data, size_t size, const char *codec,
                            const char *format, uint32_t flags, uint64_t max_pixels, int timeout_ms,
                            pxl_worker_result *result);

/* The next frame into the canvas: PXL_OK and *frame (frame->end 1: no more frames), or a
 * failure in result (status, message, end; PXL_WORKER_E_DECODER_FAILED when the worker
 * died, timed out or broke the protocol: it is then ended). */
pxl_status pxl_worker_frame_next(pxl_worker *worker, int timeout_ms, pxl_worker_msg_frame *frame,
                                 pxl_worker_result *result);

/* Ends the worker's animation (FRAMES_CLOSE, no answer); the worker can decode again. */
void pxl_worker_frames_close(pxl_worker *worker);

/* Closes the socket (the worker exits), kills it if it lingers, reaps it. NULL is fine. */
void pxl_worker_free(pxl_worker *worker);

#endif
