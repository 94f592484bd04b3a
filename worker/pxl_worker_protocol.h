/*
 * worker/pxl_worker_protocol.h: the wire protocol between pixload and its decode worker
 * (pixload-decode-worker, worker/README.md). Shared by the worker and the library's side
 * (worker/worker_client.c, which the Swift decode stage calls through Sources/CWorker).
 *
 * One AF_UNIX SOCK_SEQPACKET socket: every message is one datagram, a fixed-size struct
 * that starts with pxl_worker_msg_head. Message boundaries are kept by the socket, so a
 * reader gets a whole message or nothing; each side checks the head (magic, version, type)
 * and that the datagram's length is exactly the struct's size before reading a field, and
 * NUL-terminates every string itself. File descriptors travel with SCM_RIGHTS, at most one
 * per message, only on DECODE (the encoded bytes) and PIXELS (the pixel buffer): the
 * library never accepts a descriptor from the worker.
 *
 * A conversation:
 *   worker  -> HELLO      once, after the worker has locked itself, before it reads a byte
 *   library -> DECODE     + memfd of the encoded bytes (sealed: F_SEAL_WRITE|SHRINK|GROW)
 *   worker  -> HEADER     what it will draw (or ERROR: not an image, corrupt, ...)
 *   library -> PIXELS     + memfd of stride * height + icc_size bytes (sealed SHRINK|GROW:
 *                           the worker cannot cut it short under the library's mapping;
 *                           a RESAMPLE decode: the resampler's output's size, not the canvas's),
 *              or CANCEL  (too many pixels for the library's max_pixels, ...)
 *   worker  -> DONE       the pixels, then the ICC profile, are in the memfd and the
 *                           worker has unmapped it (or ERROR)
 *   the library adds F_SEAL_WRITE (which fails while the worker still maps the buffer
 *   writable) and maps the buffer read-only as the image's pixels.
 * A built-in format's conversation (PXL_ISOLATION_ALL: the CCodecs shims linked into the
 * worker, called with the arguments the library's decode stage would call them with):
 *   library -> NATIVE     + memfd of the encoded bytes: an operation (INFO: the header and
 *                           the colour information; DECODE: the first frame, whole, in a
 *                           layout at 1/scale), the format, its arguments
 *   worker  -> NATIVE_RESULT  the shim's status, message and answer, and how many bytes
 *                           follow (the pixels, height rows of stride, then the ICC profile)
 *   library -> PIXELS     + memfd of exactly that size (sealed SHRINK|GROW), after checking
 *                           the answer against max_pixels and what INFO said; or CANCEL
 *   worker  -> DONE       as above.
 * With no bytes to follow (a failure, or INFO without a profile) NATIVE_RESULT ends it.
 * An animation's frames, one at a time (protocol version 4: an animation player's, and
 * PXL_FLAG_ANIMATE's, isolated; a module's codec, or under PXL_ISOLATION_ALL a built-in
 * format's frame reader, pxl_codecs.h "Frame readers"):
 *   library -> FRAMES_OPEN  + memfd of the encoded bytes: the codec (a module's id, "":
 *                           the first whose sniff takes it) or the built-in format, the
 *                           flags and max_pixels
 *   worker  -> HEADER       the canvas (image_width x image_height = width x height), the
 *                           frame and loop counts, codec_flags (PXL_CODEC_PREMULTIPLIED),
 *                           icc_size, first_duration_ms (built-ins; -1 unknown)  | or ERROR
 *   library -> PIXELS       + memfd of 4 * width * height + icc_size bytes (size-sealed), once
 *                           for the whole animation, after its max_pixels check | or CANCEL
 *   worker  -> DONE         the ICC profile is written after the canvas     | or ERROR
 *   then, per frame:
 *   library -> FRAME_NEXT
 *   worker  -> FRAME        the next composited frame (straight RGBA, or premultiplied
 *                           as codec_flags says) is in the canvas; or FRAME with end 1
 *                           after the last frame; or ERROR (that frame failed: the state
 *                           is closed)
 *   library -> FRAMES_CLOSE (no answer) ends the state; the worker unmaps the canvas.
 * The library copies each frame out of the canvas before it asks for the next, so a worker
 * writing into it later changes nothing it uses. A new FRAMES_OPEN closes a state still
 * open. A module's codec with open_frames is read frame by frame; one with decode_frames
 * only is decoded once at FRAMES_OPEN (its frames kept in the worker, within
 * PXL_WORKER_FRAMES_MAX_BYTES) and served one by one.
 *
 * One conversation per image (protocol 4): the serial of the DECODE or NATIVE that brought
 * the data memfd names the conversation, and the worker keeps the bytes mapped (and, for a
 * module, the header it read) until the conversation ends, so that the library's header,
 * choose_size and pixels for one image are one data memfd and one parse:
 *   after HEADER, instead of PIXELS or CANCEL:
 *   library -> SIZE       choose_size for another target (the size the library computes
 *                           from the header): answered by HEADER with that size
 *   library -> DRAW       + the pixel memfd, sized for what DRAW asks (the target, the mode,
 *                           PARTIAL): answered by DONE or ERROR, which end the conversation
 *   after a NATIVE INFO sent with PXL_WORKER_NATIVE_STAY, once its answer is complete:
 *   library -> NATIVE     without a descriptor (the bytes kept), or with
 *                           PXL_WORKER_NATIVE_OUTPUT and the output memfd, already sized
 *                           for RESAMPLE's output (out_width * out_height * channels): the
 *                           worker writes it and answers NATIVE_RESULT alone (bytes: what it
 *                           wrote, that size or 0 when no row came). A decode ends the
 *                           conversation, as does CANCEL from the library (no answer).
 * Kept memfds (protocol 5; the thumbnail path, where the host copies the output out in any
 * case): a NATIVE with PXL_WORKER_NATIVE_KEPT_DATA (a DECODE with PXL_WORKER_KEPT_DATA) finds its bytes at the start of a data
 * memfd the worker keeps mapped across images: the library writes each image's bytes into
 * it (pwrite) and sends the descriptor again only when it grew (the worker then maps it
 * afresh), so an image costs no memfd_create, seals, SCM_RIGHTS or mmap. It is not sealed:
 * the worker could change it, but the library never reads it back (it writes from its own
 * copy). A RESAMPLE with PXL_WORKER_NATIVE_KEPT_OUTPUT (a DRAW in mode RESAMPLE with
 * PXL_WORKER_KEPT_OUTPUT: its output, then the ICC profile) writes into a kept output memfd
 * (size-sealed, so the worker cannot cut it under the library's mapping), mapped on both
 * sides for the worker's life, its pages staying populated; the library copies the
 * thumbnail (and a DRAW's ICC profile) out after NATIVE_RESULT or DONE and reads it only as
 * pixel values (the profile is parsed from the copy). Both are at most PXL_WORKER_KEPT_MAX;
 * a worker keeps one of each, for the built-in formats and the modules alike. An INFO's
 * ICC profile, full-size decodes (sealed, mapped as the image) and an animation's
 * conversation keep memfds of their own.
 * The worker answers nothing else; a worker that dies, answers out of turn, or with a
 * message that fails a check is killed and its decode fails (PXL_E_DECODER_FAILED).
 *
 * Everything here is host byte order: both ends run on one machine.
 */
#ifndef PXL_WORKER_PROTOCOL_H
#define PXL_WORKER_PROTOCOL_H

#include <stdint.h>

#define PXL_WORKER_MAGIC 0x574c5850u /* "PXLW" */
/* Bump on any change to a struct below: the library refuses a worker of another version
 * (the worker ships with the library, so this only catches a mixed install). */
#define PXL_WORKER_PROTOCOL_VERSION 5u

/* The fd the worker's socket has in the worker (the spawn dup2s it there). */
#define PXL_WORKER_SOCKET_FD 3

enum pxl_worker_msg_type {
  PXL_WORKER_HELLO = 1,  /* worker -> library */
  PXL_WORKER_DECODE = 2, /* library -> worker, with the data memfd */
  PXL_WORKER_HEADER = 3, /* worker -> library */
  PXL_WORKER_PIXELS = 4, /* library -> worker, with the pixel memfd */
  PXL_WORKER_CANCEL = 5, /* library -> worker: no pixels for this decode */
  PXL_WORKER_DONE = 6,   /* worker -> library */
  PXL_WORKER_ERROR = 7,  /* worker -> library: the decode failed, with a status */
  PXL_WORKER_NATIVE = 8, /* library -> worker, with the data memfd: a built-in format's shim */
  PXL_WORKER_NATIVE_RESULT = 9, /* worker -> library */
  PXL_WORKER_FRAMES_OPEN = 10,  /* library -> worker, with the data memfd: an animation's frames */
  PXL_WORKER_FRAME_NEXT = 11,   /* library -> worker */
  PXL_WORKER_FRAME = 12,        /* worker -> library */
  PXL_WORKER_FRAMES_CLOSE = 13, /* library -> worker */
  /* Within a conversation (protocol 4; numbered apart from other additions): */
  PXL_WORKER_SIZE = 16, /* library -> worker: choose_size for a target, answered by HEADER */
  PXL_WORKER_DRAW = 17  /* library -> worker, with the pixel memfd: draw, answered by DONE */
};

/* The confinement layers in force, HELLO's layers (worker/README.md says what each stops
 * and what it does not). */
#define PXL_WORKER_LAYER_NO_NEW_PRIVS 0x01u
#define PXL_WORKER_LAYER_NAMESPACES 0x02u /* user + network + IPC + mount (not PID) */
#define PXL_WORKER_LAYER_LANDLOCK 0x04u
#define PXL_WORKER_LAYER_SECCOMP 0x08u
#define PXL_WORKER_LAYER_RLIMITS 0x10u    /* RLIMIT_AS from max_pixels, no core, no file size */
#define PXL_WORKER_LAYER_FDS_CLOSED 0x20u /* every fd but the socket closed */

#define PXL_WORKER_ID_CAP 32       /* a codec id, NUL-terminated (pxl_codec.id: 1..31) */
#define PXL_WORKER_VERSION_CAP 64  /* a codec version, NUL-terminated (truncated) */
#define PXL_WORKER_CODECS_CAP 256  /* HELLO's codec list: ids, space separated */
#define PXL_WORKER_MESSAGE_CAP 256 /* an error message (CCodec's messageCapacity) */

typedef struct pxl_worker_msg_head {
  uint32_t magic;   /* PXL_WORKER_MAGIC */
  uint16_t version; /* PXL_WORKER_PROTOCOL_VERSION */
  uint16_t type;    /* enum pxl_worker_msg_type */
  uint32_t size;    /* the whole message's size in bytes: sizeof its struct */
  uint32_t serial;  /* DECODE's serial, echoed by each answer to it (0 in HELLO) */
} pxl_worker_msg_head;

typedef struct pxl_worker_msg_hello {
  pxl_worker_msg_head head;
  uint32_t layers;       /* PXL_WORKER_LAYER_* in force */
  uint32_t landlock_abi; /* the ABI the worker's rules use (0: none) */
  int32_t pid;           /* the worker's pid, as the library's namespace sees it */
  uint32_t codec_count;
  uint64_t as_limit;     /* RLIMIT_AS in bytes (0: none) */
  char codecs[PXL_WORKER_CODECS_CAP]; /* the codecs' ids in the order they sniff */
} pxl_worker_msg_hello;

/* DECODE and DRAW flags */
#define PXL_WORKER_KEEP_ORIENTATION 0x1u /* pxl_codec_target's PXL_CODEC_KEEP_ORIENTATION */
#define PXL_WORKER_PARTIAL 0x2u          /* the bytes are a prefix of a file still arriving:
                                            pxl_codec_target's PXL_CODEC_PARTIAL (a
                                            PXL_CODEC_PROGRESSIVE codec's preview) */
#define PXL_WORKER_KEPT_DATA 0x4u        /* (protocol 5) DECODE: the bytes are in the kept data
                                            memfd (as PXL_WORKER_NATIVE_KEPT_DATA) */
#define PXL_WORKER_KEPT_OUTPUT 0x8u      /* (protocol 5) DRAW, RESAMPLE only: into the kept
                                            output memfd (as PXL_WORKER_NATIVE_KEPT_OUTPUT),
                                            the output then the ICC profile */

/* What the worker does to what it draws before it crosses (DECODE's and DRAW's): mode
 * PXL_WORKER_DECODE_WHOLE, or _RESAMPLE: what the library's decode stage
 * (FrameCollector.render) would do to the canvas: its rows unpremultiplied (a
 * PXL_CODEC_PREMULTIPLIED codec's, with alpha), converted to the layout, then
 * pxl_resampler_new(width, height, channels of the layout, crop, out_width, out_height,
 * premultiply) (Sources/CCodecs/resample.c). The PIXELS memfd then holds out_height rows of
 * out_width * channels bytes, then the ICC profile. */
typedef struct pxl_worker_drawing {
  uint32_t mode;         /* PXL_WORKER_DECODE_WHOLE or _RESAMPLE */
  int32_t out_width, out_height;
  int32_t layout;        /* pxl_codec_layout: PXL_CODEC_RGBA, PXL_CODEC_BGRA or PXL_CODEC_RGB */
  int32_t premultiply;   /* 4 channels averaged premultiplied (the output premultiplied) */
  uint32_t reserved;
  double crop[4];        /* x, y, width, height in the canvas's pixels */
} pxl_worker_drawing;

typedef struct pxl_worker_msg_decode {
  pxl_worker_msg_head head;
  uint64_t data_size;    /* bytes of encoded data at the start of the memfd (<= its size) */
  int32_t target_width;  /* the size the library would like (choose_size), 0: full size; */
  int32_t target_height; /*   computed by the library from the request's size and mode */
  uint32_t flags;        /* PXL_WORKER_KEEP_ORIENTATION, PXL_WORKER_PARTIAL */
  uint32_t reserved;
  char codec[PXL_WORKER_ID_CAP]; /* the codec to use; "" : the first whose sniff takes it */
  pxl_worker_drawing drawing;    /* for PIXELS (DRAW brings its own) */
} pxl_worker_msg_decode;

/* DECODE modes */
#define PXL_WORKER_DECODE_WHOLE 0u
#define PXL_WORKER_DECODE_RESAMPLE 1u

typedef struct pxl_worker_msg_header {
  pxl_worker_msg_head head;
  int32_t image_width;   /* the header's size (pxl_codec_header) */
  int32_t image_height;
  int32_t width;         /* the size decode will draw (choose_size's answer, or the header's) */
  int32_t height;
  int32_t frame_count, loop_count, orientation, has_alpha;
  int32_t cicp_primaries, cicp_transfer, cicp_matrix;
  uint32_t icc_size;     /* bytes of ICC profile the worker writes after the pixels */
  uint32_t codec_flags;  /* pxl_codec.flags (PXL_CODEC_PREMULTIPLIED, ...) */
  int32_t first_duration_ms; /* FRAMES_OPEN's answer: frame 0's duration, -1 unknown; else 0 */
  char codec[PXL_WORKER_ID_CAP];
  char codec_version[PXL_WORKER_VERSION_CAP];
} pxl_worker_msg_header;

/* SIZE: choose_size (or a scalable codec's larger size) for this target, as DECODE's. */
typedef struct pxl_worker_msg_size {
  pxl_worker_msg_head head;
  int32_t target_width, target_height;
} pxl_worker_msg_size;

/* DRAW: DECODE's drawing fields again, now that the library knows them (its plan needs the
 * header), and PIXELS' buffer: draw at the size the worker answers for target (HEADER or
 * SIZE: the library sizes the memfd from that answer), in mode, into the memfd that comes
 * with it (stride * rows + icc_size: the canvas's height, or RESAMPLE's out_height). */
typedef struct pxl_worker_msg_draw {
  pxl_worker_msg_head head;
  int32_t target_width, target_height;
  uint32_t flags;        /* PXL_WORKER_KEEP_ORIENTATION (as DECODE's), PXL_WORKER_PARTIAL */
  uint32_t reserved;
  pxl_worker_drawing drawing;
  uint64_t stride;       /* PIXELS' */
  uint64_t size;
} pxl_worker_msg_draw;

typedef struct pxl_worker_msg_pixels {
  pxl_worker_msg_head head;
  uint64_t stride;       /* bytes per row, >= 4 * width */
  uint64_t size;         /* the memfd's size: stride * height + icc_size */
} pxl_worker_msg_pixels;

typedef struct pxl_worker_msg_cancel {
  pxl_worker_msg_head head;
} pxl_worker_msg_cancel;

typedef struct pxl_worker_msg_done {
  pxl_worker_msg_head head;
  uint64_t cpu_ns;       /* the worker's CPU time for this decode (its threads too) */
} pxl_worker_msg_done;

typedef struct pxl_worker_msg_error {
  pxl_worker_msg_head head;
  int32_t status;        /* a pxl_status: a codec's answer (PXL_E_CORRUPT_IMAGE, ...) */
  uint32_t reserved;
  char message[PXL_WORKER_MESSAGE_CAP];
} pxl_worker_msg_error;

/* NATIVE operations */
#define PXL_WORKER_NATIVE_INFO 1u   /* pxl_<format>_read_info, then pxl_<format>_color */
#define PXL_WORKER_NATIVE_DECODE 2u /* pxl_<format>_decode (layout, scale, max_pixels) */
#define PXL_WORKER_NATIVE_REGION 3u /* pxl_jpeg_decode_region: the region's rows only, each
                                       region_width pixels from column region_x */
#define PXL_WORKER_NATIVE_RESAMPLE 4u /* pxl_<format>_decode_rows (pxl_jpeg_decode_region when
                                         region_width > 0) into the area resampler made with
                                         resample[] and crop[]: only its output crosses */

/* NATIVE flags */
#define PXL_WORKER_NATIVE_STAY 0x1u   /* INFO: keep the bytes for a NATIVE that follows in this
                                         conversation (without a data memfd), or CANCEL */
#define PXL_WORKER_NATIVE_OUTPUT 0x2u /* RESAMPLE in a conversation: the descriptor is the
                                         output memfd, sized for the resampler's output */
#define PXL_WORKER_NATIVE_KEPT_DATA 0x4u /* (protocol 5) a conversation's first NATIVE: the
                                         bytes are at the start of the worker's kept data
                                         memfd; a descriptor with it replaces that memfd */
#define PXL_WORKER_NATIVE_KEPT_OUTPUT 0x8u /* (protocol 5) RESAMPLE in a conversation: write
                                         the output at the start of the worker's kept output
                                         memfd (at least that size); a descriptor with it
                                         replaces that memfd */

/* The most either kept memfd holds (protocol 5): larger data or output takes a memfd of
 * its own, as before (the kept mappings stay within RLIMIT_AS's slack). */
#define PXL_WORKER_KEPT_MAX (16ull << 20)

typedef struct pxl_worker_msg_native {
  pxl_worker_msg_head head;
  uint64_t data_size;    /* bytes of encoded data at the start of the memfd (<= its size) */
  uint64_t max_pixels;   /* the shim's max_pixels argument */
  uint32_t op;           /* PXL_WORKER_NATIVE_* */
  int32_t layout;        /* pxl_codec_layout (DECODE) */
  int32_t scale;         /* DCT scale denominator 1, 2, 4, 8 (DECODE; JPEG only) */
  uint32_t flags;        /* PXL_WORKER_NATIVE_STAY, PXL_WORKER_NATIVE_OUTPUT */
  char format[PXL_WORKER_ID_CAP]; /* "jpeg", "png", "webp", "gif", "avif" */
  int32_t region_x, region_y, region_width, region_height; /* REGION, in the 1/scale image */
  /* RESAMPLE: pxl_resampler_new's src_width, src_height, channels, out_width, out_height,
   * premultiply, and its crop x, y, width, height */
  int32_t resample[6];
  double crop[4];
} pxl_worker_msg_native;

typedef struct pxl_worker_msg_native_result {
  pxl_worker_msg_head head;
  int32_t status;        /* pxl_codec_status */
  /* INFO: pxl_codec_info, and pxl_codec_color without its profile */
  int32_t width, height, has_alpha, orientation, frame_count, loop_count;
  int32_t color_status;  /* pxl_<format>_color's status (non-zero: no colour information) */
  int32_t srgb, has_chrm, chrm[8], gamma, cicp_primaries, cicp_transfer, cicp_matrix;
  /* DECODE: pxl_codec_output (REGION: out_width x out_height is the whole 1/scale image,
   * out_stride region_width * out_channels, and the bytes hold region_height rows;
   * RESAMPLE: the same, the bytes the resampler's output, stride out_width * channels) */
  int32_t out_width, out_height, out_stride, out_channels, out_has_alpha, out_warnings, out_incomplete;
  uint32_t icc_size;     /* bytes of ICC profile after the pixels */
  uint64_t bytes;        /* what follows in the PIXELS memfd: out_stride * out_height + icc_size */
  uint64_t cpu_ns;       /* the worker's CPU time for the operation */
  char message[PXL_WORKER_MESSAGE_CAP]; /* pxl_codec_output.message (or read_info's) */
} pxl_worker_msg_native_result;

typedef struct pxl_worker_msg_frames_open {
  pxl_worker_msg_head head;
  uint64_t data_size;    /* bytes of encoded data at the start of the memfd (<= its size) */
  uint64_t max_pixels;   /* the library's max_pixels (the readers' argument) */
  uint32_t flags;        /* PXL_WORKER_KEEP_ORIENTATION */
  uint32_t reserved;
  char codec[PXL_WORKER_ID_CAP];  /* a module's codec ("": sniff), when format is "" */
  char format[PXL_WORKER_ID_CAP]; /* a built-in format ("gif", "webp", "avif"), or "" */
} pxl_worker_msg_frames_open;

typedef struct pxl_worker_msg_frame_next {
  pxl_worker_msg_head head;
} pxl_worker_msg_frame_next;

typedef struct pxl_worker_msg_frame {
  pxl_worker_msg_head head;
  int32_t end;           /* 1: no more frames (nothing drawn) */
  int32_t index;         /* the frame's index in the loop, from 0 */
  int32_t duration_ms;   /* as the file says */
  int32_t incomplete;    /* the data ended early (GIF: pxl_codec_frame.incomplete) */
  uint64_t cpu_ns;       /* the worker's CPU time for this frame */
} pxl_worker_msg_frame;

typedef struct pxl_worker_msg_frames_close {
  pxl_worker_msg_head head;
} pxl_worker_msg_frames_close;

/* A decode_frames-only codec's frames kept in the worker at most (PXL_ANIMATION_MAX_BYTES:
 * an animation over it plays its first frame alone, as in-process). */
#define PXL_WORKER_FRAMES_MAX_BYTES (128ull << 20)

/* The largest message either side receives. */
#define PXL_WORKER_MSG_MAX 512

#endif
