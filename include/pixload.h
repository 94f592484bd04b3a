/*
 * pixload.h: asynchronous image loading and caching for table- and grid-style UIs.
 *
 * THIS FILE IS THE API. Whatever is not declared and documented here is not part of
 * pixload's interface and may change or disappear in any release.
 *
 * Overview
 * --------
 * A pxl_loader downloads images (libcurl: http and https, file:// when allowed), decodes
 * and caches them on threads of its own. It decodes five formats, told apart by their
 * magic bytes, never by URL or Content-Type: JPEG (libjpeg-turbo), PNG (libpng, with
 * libdeflate for the image data of plain 8-bit files), WebP (libwebp), GIF (giflib) and
 * AVIF (libavif). An image arrives in the size, fit (pxl_mode), pixel format (pxl_format)
 * and EXIF orientation its request asks for, never scaled up. An animated GIF, WebP or
 * AVIF sequence gives its first frame, or with PXL_FLAG_ANIMATE every frame ("Animated
 * images"). Embedded colour is converted to sRGB (lcms2): ICC profiles, PNG cHRM/gAMA,
 * AVIF nclx; PXL_FLAG_NO_COLOR_MANAGEMENT keeps the decoded values. A progressive JPEG
 * gives previews as its scans arrive (pxl_request.preview, pxl_table_config.previews),
 * and a small thumbnail of one is decoded from its first scans ("Thumbnails of
 * progressive JPEGs").
 *
 * Decoded images are kept in a memory cache (pxl_lookup reads it synchronously). An
 * optional disk cache (pxl_config.disk_cache_bytes) keeps the downloaded bytes, fresh or
 * revalidated as HTTP says, and beside them decoded variants: thumbnails up to
 * pxl_config.disk_variant_max_side, delivered by a later loader or another process with
 * no decode. A pxl_table ("Tables") takes a scrolling list's visible rows and makes the
 * requests itself: priorities, prefetch, cancellation of rows that left.
 *
 * A pxl_queue belongs to the host: every callback of a request runs on the thread that
 * calls pxl_queue_dispatch() on the request's queue, never on a library thread. The
 * queue exposes a file descriptor (pxl_queue_fd) that is readable while completions are
 * pending (or a wakeup is unconsumed), so any event loop (GLib, libuv, asyncio, epoll,
 * poll; level- or edge-triggered) can wait on it.
 *
 * Where this header describes how work is scheduled (priorities, tables, retries), the
 * numbers that are tuning choices rather than promises live in docs/tuning.md.
 *
 * Rules every request obeys
 * -------------------------
 *  1. A call that fails returns an error status and never invokes its callback.
 *  2. A call that succeeds (pxl_load returning PXL_OK) invokes its callback exactly once,
 *     on the thread draining its queue: with an image, with an error, or with
 *     PXL_E_CANCELLED. The callback is the place to free user_data.
 *  3. pxl_cancel() may be called from any thread, at any time, any number of times. If
 *     the callback has not started when pxl_cancel() returns, it reports PXL_E_CANCELLED,
 *     never an image, even if the image was already decoded and queued.
 *  4. Cancelling one of several requests for the same work leaves the others untouched;
 *     shared downloads and decodes stop only when their last requester cancels.
 *  5. Duplicate requests are merged: one download per cache key, one decode per (cache
 *     key, size, mode, format, orientation, PXL_FLAG_ANIMATE, PXL_FLAG_NO_COLOR_MANAGEMENT;
 *     since 0.5.0 the processor chain, merged per prefix: see "Processors"). Merged work runs at the
 *     highest priority among its requesters, and starts as soon as any requester wants
 *     it now (a request without a start delay that joins a held download starts it).
 *     Requests whose per-request header lines differ (credentials: Authorization,
 *     Cookie) are never merged and never share a memory or disk cache entry, unless the
 *     caller gives them the same explicit cache_key. Only requests with the same cache
 *     flags (PXL_FLAG_RELOAD, PXL_FLAG_CACHE_ONLY) are merged: a request never fails,
 *     nor skips the network, because of a flag of another requester.
 *  6. pxl_set_priority() changes the priority of waiting work at once.
 *  7. pxl_lookup() is synchronous and only reads the memory cache.
 *  8. Disk and network work never happen on the host's thread.
 *  9. Freeing a loader or a queue with requests in flight is legal: they end CANCELLED.
 *
 * Threads
 * -------
 * A pxl_loader may be used from any thread. A pxl_image is immutable and may be read
 * from any thread. A pxl_queue is drained by one thread at a time; pxl_queue_fd,
 * pxl_queue_wakeup and pxl_queue_pending may be called from any thread.
 *
 * Structs that grow
 * -----------------
 * Every struct passed in (pxl_config, pxl_request, pxl_table_config) starts with
 * struct_size and has an *_init() function that fills the defaults; new fields are only
 * ever added at the end. The library accepts any struct_size from the first released
 * size of that struct (PXL_*_SIZE_0_1 below) up: fields the caller's struct does not
 * have take their defaults, so a program built against an older header keeps working.
 * A struct_size larger than this library's struct (a program built against a newer
 * header) is accepted only when every byte past the library's struct is zero (the newer
 * fields are all left at "off"); otherwise the call fails with PXL_E_INVALID_ARGUMENT,
 * never silently ignoring a setting. Structs filled by the library (pxl_stats,
 * pxl_table_stats) work the other way round: the caller sets struct_size to its
 * sizeof, the library fills the fields both know, zeroes the rest of the caller's struct
 * and sets struct_size to the bytes it filled. pxl_result.struct_size is the library's.
 *
 * Since 0.2.0 the table callbacks (pxl_table_request_fn, pxl_table_row_fn) take user_data
 * last, like every other callback: source written for 0.1.0 that uses tables must swap
 * its callbacks' parameters when rebuilt. Programs built against 0.1.0 run unchanged:
 * their pxl_table_new is still there (see pxl_table_create).
 *
 * Bindings that reach the library by symbol (ctypes, Rust) call the *_init_size and
 * pxl_table_create functions: the names without them are 0.1.0's symbols, kept for
 * programs built against 0.1.0, and C programs reach the new ones through macros.
 *
 * Logging
 * -------
 * The library never writes to stdout or stderr. What it has to say (a disk cache
 * directory it cannot use, a corrupt cache entry it dropped) goes to the log callback
 * of pxl_config, if one is installed; without one it is silent.
 *
 * Memory
 * ------
 * Every *_new has a matching *_free; every destructor accepts NULL. Strings passed in are
 * copied before the call returns. Strings and images handed to a callback are borrowed
 * for the duration of that callback only: call pxl_image_retain() to keep an image.
 *
 * Extensions
 * ----------
 * A host extends a loader with codecs (pxl_loader_add_codec), custom processors
 * (pxl_loader_add_processor), fetchers (pxl_loader_add_fetcher) and a request hook
 * (pxl_config.request_hook); their callbacks run on the library's threads, as each
 * section says. Rules they all share:
 *  - Who frees user_data when a registration fails depends on the kind, as 0.5.0 set it
 *    (a 0.5.0 program runs against this library unchanged, so the rule cannot move):
 *    . codecs: pxl_loader_add_codec hands user_data over, also when it fails: a call that
 *      returns anything but PXL_OK has called destroy(user_data), when there is one,
 *      exactly once before it returns (on the calling thread); only a NULL pxl_codec
 *      pointer leaves nothing to call.
 *    . processors and fetchers: a pxl_loader_add_processor or pxl_loader_add_fetcher that
 *      returns anything but PXL_OK has not called destroy and never will: user_data is
 *      still the host's to free (a 0.5.0 host does, after the failure).
 *    After PXL_OK destroy runs exactly once, when the registration ends, for all three.
 *    (The request hook has no destroy: its user_data lives as long as the loader.)
 *  - A status an extension hands back that this header does not define (a newer
 *    header's, or a mistake) counts as PXL_E_IO, with the extension's message: from a
 *    codec function, a custom processor, pxl_fetch_finish and pxl_hook_fail alike.
 *
 * Limits
 * ------
 * A queue nobody drains does not grow without limit: once the images waiting in it for
 * pxl_queue_dispatch() hold 64 MiB of pixels, decodes whose every requester's queue is
 * that full wait (with their encoded bytes) instead of adding more; they resume once
 * dispatching has brought the queue well below that. No result is dropped. The images
 * being decoded at that moment (at most one per decode thread) may still arrive, so the
 * bound is 64 MiB plus that many images. A waiting request costs a few KiB of memory.
 * Out of file descriptors, pxl_loader_new and pxl_queue_new fail with PXL_E_IO, and
 * loads already accepted end with an error (PXL_E_CONNECT), each with its one callback.
 * When no thread can be started, pxl_loader_new fails with PXL_E_NO_MEMORY.
 * A disk cache that cannot write (a full disk) keeps serving loads from the network and
 * logs the failure now and then, not once per image (through the log callback).
 */
#ifndef PIXLOAD_H
#define PIXLOAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(PXL_NO_VISIBILITY)
#define PXL_API __attribute__((visibility("default")))
#else
#define PXL_API
#endif

/* ---------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------- */

/* The version of this header, MAJOR.MINOR.PATCH; PXL_VERSION_STRING spells it. */
#define PXL_VERSION_MAJOR 0
#define PXL_VERSION_MINOR 6
#define PXL_VERSION_PATCH 0
/* 0xMMmmpp. Before 1.0 a minor release may change the ABI (0.2.0 did, keeping 0.1.0's
 * symbols): a binding checks MAJOR and MINOR for equality; a C program compares with >=
 * to test for a feature at compile time. */
#define PXL_VERSION_NUM ((PXL_VERSION_MAJOR << 16) | (PXL_VERSION_MINOR << 8) | PXL_VERSION_PATCH)
#define PXL_VERSION_STRING "0.6.0"

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH". Static storage;
 * never NULL. Any thread. Since 0.1.0. */
PXL_API const char *pxl_version(void);

/* PXL_VERSION_NUM of the library actually loaded. Any thread. Since 0.1.0. */
PXL_API uint32_t pxl_version_num(void);

/* ---------------------------------------------------------------------------------
 * Status codes. Append-only: new codes are added last, none is ever removed or
 * renumbered.
 * ------------------------------------------------------------------------------- */

/* What a call, or a request's callback, reports: PXL_OK or the reason it failed. */
typedef enum pxl_status {
  PXL_OK = 0,                    /*  0: success */
  PXL_E_INVALID_ARGUMENT = 1,    /*  1: a NULL handle, a bad struct_size, a value out of range */
  PXL_E_MALFORMED_URL = 2,       /*  2: the URL cannot be parsed */
  PXL_E_SCHEME_NOT_ALLOWED = 3,  /*  3: the URL's scheme is not in the config's allow-list */
  PXL_E_DNS = 4,                 /*  4: the host name could not be resolved */
  PXL_E_CONNECT = 5,             /*  5: the connection was refused or failed */
  PXL_E_TLS = 6,                 /*  6: TLS handshake or certificate verification failed */
  PXL_E_TIMEOUT = 7,             /*  7: connect, total or stalled-transfer timeout */
  PXL_E_HTTP = 8,                /*  8: the server answered with a non-2xx status (see http_status) */
  PXL_E_BODY_TOO_LARGE = 9,      /*  9: the body exceeds max_body_bytes */
  PXL_E_NOT_AN_IMAGE = 10,       /* 10: the body is no format pixload decodes (by its magic bytes) */
  PXL_E_CORRUPT_IMAGE = 11,      /* 11: the decoder could not decode the image */
  PXL_E_TOO_MANY_PIXELS = 12,    /* 12: declared width x height exceeds max_pixels */
  PXL_E_CANCELLED = 13,          /* 13: pxl_cancel, or the queue or loader was freed */
  PXL_E_LOADER_CLOSED = 14,      /* 14: the loader is shutting down */
  PXL_E_NETWORK = 15,            /* 15: any other transfer failure (reset, truncated body, ...) */
  PXL_E_UNSUPPORTED_IMAGE = 16,  /* 16: a valid image of a kind not supported (12-bit JPEG, ...) */
  PXL_E_NO_MEMORY = 17,          /* 17: an allocation failed */
  PXL_E_NOT_FOUND = 18,          /* 18: unknown token, or a memory-cache miss in pxl_lookup */
  PXL_E_IO = 19,                 /* 19: a local file could not be read; an extension
                                    failed with a status not defined here ("Extensions") */
  PXL_E_TOO_MANY_REDIRECTS = 20, /* 20: more redirects than max_redirects, or a loop */
  PXL_E_NOT_CACHED = 21,         /* 21: PXL_FLAG_CACHE_ONLY and neither cache has the image */
  PXL_E_UNSUPPORTED = 22,        /* 22: a library the loader needs lacks a required feature
                                    (a libcurl too old for a safety option); since 0.2.0:
                                    pxl_loader_new may return it to 0.1.0 programs too */
  PXL_E_DECODER_FAILED = 23      /* 23: since 0.6.0: the confined decode worker crashed, was
                                    killed by its sandbox, ran out of its memory or time, or
                                    broke the protocol ("Isolation"); the message says which.
                                    Nothing is cached; the next request gets a fresh worker */
} pxl_status;

/* A short English description of a status ("cancelled"). Static storage; never NULL,
 * also for unknown values. Any thread. Since 0.1.0. */
PXL_API const char *pxl_status_string(pxl_status status);

/* ---------------------------------------------------------------------------------
 * Pixel formats and sizing
 * ------------------------------------------------------------------------------- */

/* The layout of an image's pixels (pxl_request.format, pxl_image_format()): 8 bits per
 * channel, rows pxl_image_stride() bytes apart. */
typedef enum pxl_format {
  PXL_FORMAT_RGBA8 = 0,          /* 4 bytes R,G,B,A; straight (non-premultiplied) alpha */
  PXL_FORMAT_RGBA8_PREMUL = 1,   /* 4 bytes R,G,B,A; colour premultiplied by alpha */
  PXL_FORMAT_BGRA8_PREMUL = 2,   /* 4 bytes B,G,R,A premultiplied: Cairo ARGB32 and Skia
                                    N32 on little-endian machines */
  PXL_FORMAT_RGB8 = 3,           /* 3 bytes R,G,B; alpha dropped */
  PXL_FORMAT_GRAY8 = 4           /* 1 byte luma; alpha dropped */
} pxl_format;

/* Bytes per pixel of a format, 0 for an unknown value. Any thread. Since 0.1.0. */
PXL_API int32_t pxl_format_bytes_per_pixel(pxl_format format);

/* How an image is fitted to its target size (pxl_request.width and height). Sizes are
 * those after EXIF orientation. Images are never scaled up: a source smaller than the
 * target keeps its size (FIT) or is cropped to the target's aspect ratio at its own
 * resolution (FILL). Fractional sizes round to the nearest pixel, halves up, at least 1:
 * 640x480 fitted into 150x150 is 150x113. A target side of 0 is unconstrained: 150x0 FIT
 * is "150 wide, height to match"; 0x0 is the original size; FILL with a 0 side acts as
 * FIT. */
typedef enum pxl_mode {
  PXL_MODE_FIT = 0,   /* scale to fit inside the target, keeping the aspect ratio */
  PXL_MODE_FILL = 1   /* scale to cover the target, then crop the centre to exactly it */
} pxl_mode;

/* Request priorities: any int32_t, higher runs first. These are suggestions. Requests of
 * priority PXL_PRIORITY_NORMAL or more are foreground, lower ones (prefetches) background.
 * Waiting for a connection, a foreground request starts before any background one, except
 * that while foreground requests wait, a fixed share of starts goes to a background
 * request that has waited long, if there is one. A foreground request waiting while
 * background transfers hold the connections it could use stops one of them that has
 * received little of its body and had not waited long; that one waits again, keeping its
 * age, and starts again from its first byte. Within each of the two, the highest priority
 * starts first and, among equals, the newest (the row that just became visible), except
 * that one that has waited long starts before any of its own kind that has not, oldest
 * first, whatever its priority: a steady stream of new requests cannot keep an old one
 * waiting for ever, and a backlog of old prefetches takes no more than that fixed share
 * of starts from visible rows. Downloaded images of equal priority waiting for a decoder
 * go smallest file first (a screen of thumbnails is not held up behind one large PNG),
 * except that one that has waited long goes first, oldest first, on some of the decoder
 * threads (never all). */
#define PXL_PRIORITY_PREFETCH (-100)
#define PXL_PRIORITY_NORMAL 0
#define PXL_PRIORITY_VISIBLE 100

/* Request flags (pxl_request.flags). */
#define PXL_FLAG_IGNORE_ORIENTATION 0x1u  /* do not apply EXIF orientation */
#define PXL_FLAG_SKIP_MEMORY_CACHE 0x2u   /* neither read nor write the memory cache */
#define PXL_FLAG_RELOAD 0x4u              /* ignore what the caches hold (they are still
                                             written): a forced refresh */
#define PXL_FLAG_CACHE_ONLY 0x8u          /* memory, then disk, never the network (offline);
                                             a miss fails with PXL_E_NOT_CACHED */
#define PXL_FLAG_ANIMATE 0x10u            /* every frame of an animated image (GIF, WebP,
                                             AVIF image sequence): see "Animated images"
                                             below. Without it an animation gives its first
                                             frame. Since 0.4.0. To show an animation,
                                             prefer a player ("Animation players", 0.6.0):
                                             bounded memory, first frame at once */
#define PXL_FLAG_NO_COLOR_MANAGEMENT 0x20u /* Since 0.4.0. Keep the decoded values: by default
                                             an embedded colour profile (JPEG APP2 ICC, PNG
                                             iCCP or cHRM/gAMA, WebP ICCP, AVIF ICC or nclx) is
                                             converted to sRGB, relative colorimetric (untagged
                                             and sRGB files are left as they are). A profile
                                             that cannot be used (unreadable, CMYK, HDR PQ/HLG)
                                             leaves the decoded values and logs a warning. A
                                             PNG without iCCP or sRGB has its gAMA applied,
                                             with or without cHRM, as browsers do (1/2.2 with
                                             sRGB's cHRM or none is sRGB); this flag applies
                                             neither. The two are different variants: cached
                                             and merged separately. */
/* Requests are merged only with requests of the same cache flags and headers (rule 5). */

/* Schemes (pxl_config.allowed_schemes). */
#define PXL_SCHEME_HTTP 0x1u
#define PXL_SCHEME_HTTPS 0x2u
#define PXL_SCHEME_FILE 0x4u              /* file:// URLs; off by default */
#define PXL_SCHEME_DATA 0x8u              /* Since 0.5.0. data: URIs (below); off by
                                             default */
/* data: URIs (RFC 2397, "data:[<media type>][;base64],<data>") are read as browsers read
 * them: the fetch standard's data: URL processor with its forgiving base64. What follows
 * a "#" is the fragment, not data. The data is percent-decoded; a "%" not followed by two
 * hex digits stays as it is ("%ZZ"). It is then base64 when the media type ends with
 * ";base64" (any case; spaces may stand before "base64", ASCII whitespace around the
 * media type is ignored): ASCII whitespace in it is ignored (spaces, or escaped tabs, line
 * breaks and form feeds: a raw control character makes the URL malformed), "=" padding
 * is optional (one or two, only at the end of a length that is a multiple of 4), the
 * alphabet is the standard one ("+" and "/", not "-" and "_"), and a length that leaves
 * one character over is invalid. Otherwise the media type is ignored: the bytes are
 * sniffed as any response's. Decoded on the library's fetch thread, never written to
 * the disk cache; a body that decodes to more than max_body_bytes is refused
 * (PXL_E_BODY_TOO_LARGE) before any decoding (its size is counted from the text, where
 * whitespace and "=", raw or escaped, count for nothing); invalid base64 or a URI without a comma is PXL_E_MALFORMED_URL. The URI
 * (fragment included) is the cache key, as any URL. A scheme with a fetcher
 * (pxl_loader_add_fetcher) needs no bit. */

/* Where a result came from (pxl_result.source). */
typedef enum pxl_source {
  PXL_SOURCE_NONE = 0,     /* no image (an error or a cancellation) */
  PXL_SOURCE_MEMORY = 1,   /* the memory cache; no download, no decode */
  PXL_SOURCE_NETWORK = 2,  /* downloaded and decoded */
  PXL_SOURCE_DISK = 3,     /* the disk cache: decoded from its encoded bytes, or a decoded
                              thumbnail it kept (pxl_config.disk_variant_max_side) */
  PXL_SOURCE_REVALIDATED = 4, /* the disk cache after the server answered 304 Not Modified */
  PXL_SOURCE_FETCHER = 5,  /* Since 0.5.0. A host's fetcher (pxl_loader_add_fetcher) gave
                              the bytes; decoded */
  PXL_SOURCE_DATA = 6,     /* Since 0.5.0. A data: URI's bytes (PXL_SCHEME_DATA); decoded */
  PXL_SOURCE_FILE = 7      /* Since 0.6.0. Read from a file:// URL (PXL_SCHEME_FILE) and
                              decoded; the memory cache's hit of that URL is MEMORY (the
                              disk cache keeps no file:// images). Before 0.6.0 these were
                              PXL_SOURCE_NETWORK. */
} pxl_source;

/* ---------------------------------------------------------------------------------
 * Images: immutable, reference-counted pixels.
 * ------------------------------------------------------------------------------- */

/* A decoded image: its pixels, sizes and frames. Handed to callbacks borrowed; kept with
 * pxl_image_retain(). */
typedef struct pxl_image pxl_image;

/* Adds a reference and returns image. NULL gives NULL. Any thread. Since 0.1.0. */
PXL_API pxl_image *pxl_image_retain(pxl_image *image);

/* Drops a reference; the pixels are freed with the last one. The memory cache holds its
 * own reference, so a cache trim never frees pixels the host still holds. NULL is a
 * no-op. Any thread. Since 0.1.0. */
PXL_API void pxl_image_release(pxl_image *image);

/* Accessors; 0 or NULL for a NULL image. Any thread. Since 0.1.0.
 * pixels: the first row; row y starts at pixels + y * stride; valid while a reference is
 * held. stride: bytes per row, >= width * pxl_format_bytes_per_pixel(format).
 * original_width/height: the source image's size after EXIF orientation, before any
 * scaling. */
PXL_API int32_t pxl_image_width(const pxl_image *image);
PXL_API int32_t pxl_image_height(const pxl_image *image);
PXL_API int32_t pxl_image_stride(const pxl_image *image);
PXL_API pxl_format pxl_image_format(const pxl_image *image);
PXL_API const uint8_t *pxl_image_pixels(const pxl_image *image);
PXL_API int32_t pxl_image_original_width(const pxl_image *image);
PXL_API int32_t pxl_image_original_height(const pxl_image *image);
/* Bytes the pixel buffer occupies (stride * height); 0 for NULL. Any thread. */
PXL_API size_t pxl_image_byte_count(const pxl_image *image);

/* Animated images. A request with PXL_FLAG_ANIMATE for an animated source gives an image
 * holding every frame, each composited as the format says (disposal and blending
 * applied) and brought to the requested size, mode, format and orientation exactly as a
 * still is (frame 0 is the image's own pixels, identical to what the same request
 * without the flag gives). Every frame has the image's width, height, stride and format.
 * Without the flag, or for a still source, the image has one frame. An animated and a
 * still request for one URL are different variants: each has its own memory-cache entry
 * and its own merged decode (rule 5); animated results are not kept as decoded variants
 * on disk (pxl_config.disk_variant_max_side), only their source is.
 *
 * Memory bound: the frames of one image take at most PXL_ANIMATION_MAX_BYTES together
 * (frame bytes times frame count, in the requested size and format). An animation over
 * it is delivered as its first frame alone: pxl_image_frame_count is then 1 while
 * pxl_image_source_frame_count gives the source's count, which is how to tell. Ask for a
 * smaller size to animate it. The memory cache counts every frame's bytes, and keeps an
 * image only while all its frames take at most a tenth of its budget (as for stills).
 * Since 0.4.0. */
#define PXL_ANIMATION_MAX_BYTES (128u << 20)

/* Frames in the image: >= 1 (1 for a still image); 0 for NULL. Any thread. Since 0.4.0. */
PXL_API int32_t pxl_image_frame_count(const pxl_image *image);
/* Frames of the source it was decoded from (1 for a still source): more than
 * pxl_image_frame_count when PXL_FLAG_ANIMATE was not given or the animation was over
 * PXL_ANIMATION_MAX_BYTES. 0 for NULL. Any thread. Since 0.4.0. */
PXL_API int32_t pxl_image_source_frame_count(const pxl_image *image);
/* How often the animation plays: 0 = forever (also for a still image), n = n times in
 * all (a GIF's NETSCAPE2.0 repeat count r plays r + 1 times; a GIF without it, once).
 * 0 for NULL. Any thread. Since 0.4.0. */
PXL_API int32_t pxl_image_loop_count(const pxl_image *image);
/* How long frame index (0 .. frame_count - 1) shows, in milliseconds, as the file says
 * it (0 allowed: browsers show 0 and 10 ms as 100 ms; that choice is the player's).
 * -1 for NULL or an index out of range. Any thread. Since 0.4.0. */
PXL_API int32_t pxl_image_frame_duration_ms(const pxl_image *image, int32_t index);
/* Frame index's pixels, laid out as pxl_image_pixels (same size, stride, format); frame
 * 0 is pxl_image_pixels. NULL for NULL or an index out of range. Valid while a reference
 * is held. Any thread. Since 0.4.0. */
PXL_API const uint8_t *pxl_image_frame_pixels(const pxl_image *image, int32_t index);

/* Images whose data ended early
 * -----------------------------
 * One rule for every format. An image whose data ends before its last pixel (a file cut
 * short on the server or on disk; also a JPEG scan's or a GIF frame's compressed data
 * that stops early) is delivered only where its decoder fills in the rest, and is then
 * marked incomplete (pxl_result.incomplete, pxl_image_incomplete):
 *  - JPEG: libjpeg's "Premature end of JPEG file" or "premature end of data segment";
 *    the missing blocks are libjpeg's (gray, or a progressive file's earlier scans). A
 *    file that lacks only its final EOI marker counts too: libjpeg cannot tell it from
 *    a cut.
 *  - GIF: the file, or a shown frame's LZW data, ends before the frame's last row; the
 *    rows after are transparent. An animated result (PXL_FLAG_ANIMATE, two frames or
 *    more) is also incomplete when the file ends between frames (frames may be
 *    missing; one that lacks only its trailer byte counts too). A still result reads
 *    only the first frame: data missing after it does not mark it.
 *  - PNG, WebP, AVIF: libpng, libwebp and libavif refuse such data; the request fails
 *    with PXL_E_CORRUPT_IMAGE.
 * Data that is wrong rather than short (an invalid LZW code, a bad palette index, a
 * corrupt Huffman code) does not mark an image incomplete.
 * An incomplete image is never stored as a disk-cache variant (pxl_config
 * .disk_variant_max_side): every later load decodes it again from the original. It is
 * kept in the memory cache and served from it like any other image: a memory hit does
 * not go back to the network for a complete copy (the bytes were the server's whole
 * answer, and asking again would most likely get them again). Any later decode of the
 * same variant replaces it there: a complete one as soon as one arrives (a
 * PXL_FLAG_RELOAD load, or a load after it left the memory cache and the server's
 * image changed). Progressive previews (pxl_request.preview) are built from complete
 * scans and are never incomplete; neither is a thumbnail whose transfer the loader
 * ended early (its pixels are the whole file's). */

/* 1 when the image's data ended early and the decoder filled in the rest (see above),
 * else 0; 0 for NULL. Any thread. Since 0.5.0. */
PXL_API int32_t pxl_image_incomplete(const pxl_image *image);

/* What the accessors above give, in one call: for bindings that pay per foreign call
 * (Python's ctypes reads an image's ten fields at ten times the cost of one). A growable
 * struct: set struct_size to sizeof(pxl_image_info) first. Since 0.6.0. */
typedef struct pxl_image_info {
  size_t struct_size;          /* set by the caller; on return, the bytes filled */
  int32_t width;               /* pxl_image_width */
  int32_t height;              /* pxl_image_height */
  int32_t stride;              /* pxl_image_stride */
  int32_t format;              /* pxl_format: pxl_image_format */
  const uint8_t *pixels;       /* pxl_image_pixels: valid while a reference is held */
  int32_t original_width;      /* pxl_image_original_width */
  int32_t original_height;     /* pxl_image_original_height */
  int32_t frame_count;         /* pxl_image_frame_count */
  int32_t source_frame_count;  /* pxl_image_source_frame_count */
  int32_t loop_count;          /* pxl_image_loop_count */
  int32_t incomplete;          /* pxl_image_incomplete */
} pxl_image_info;

/* Fills *info (set info->struct_size first, at least up to incomplete) with the
 * accessors' values. Returns PXL_OK, or PXL_E_INVALID_ARGUMENT for a NULL image or info
 * or a bad struct_size (nothing written). Any thread. Since 0.6.0. */
PXL_API pxl_status pxl_image_get_info(const pxl_image *image, pxl_image_info *info);

/* ---------------------------------------------------------------------------------
 * Completion queues
 * ------------------------------------------------------------------------------- */

/* Holds a request's results until the host runs its callbacks with pxl_queue_dispatch(),
 * woken through pxl_queue_fd(). */
typedef struct pxl_queue pxl_queue;

/* Creates a queue. *out receives it (or NULL on failure). Returns PXL_OK,
 * PXL_E_INVALID_ARGUMENT (out is NULL) or PXL_E_NO_MEMORY / PXL_E_IO (no eventfd).
 * Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_queue_new(pxl_queue **out);

/* Frees a queue. Every request of this queue that has not had its callback yet is
 * cancelled and its callback runs with PXL_E_CANCELLED on the calling thread before this
 * returns; no callback of this queue runs after it returns. Must not be called from
 * inside one of this queue's callbacks, nor while another thread is dispatching it.
 * NULL is a no-op. Since 0.1.0. */
PXL_API void pxl_queue_free(pxl_queue *queue);

/* A file descriptor (an eventfd) that is readable exactly while a completion is pending
 * or a pxl_queue_wakeup() is unconsumed. pxl_queue_dispatch() consumes the wakeup, so
 * after a dispatch that leaves nothing pending the fd is not readable: a level-triggered
 * loop does not spin. Owned by the queue: do not read, write or close it. Wait for
 * readability, then call pxl_queue_dispatch(). -1 for NULL. Any thread. Since 0.1.0. */
PXL_API int pxl_queue_fd(const pxl_queue *queue);

/* Runs up to max pending callbacks (all pending when max <= 0) on the calling thread and
 * returns how many ran. Never blocks. Consumes an unconsumed wakeup, also when it runs 0
 * callbacks; a wakeup issued while its callbacks run stays unconsumed. Callbacks may call any pixload function, including
 * pxl_load, pxl_cancel and pxl_queue_dispatch on another queue, but not pxl_queue_free
 * on this queue. Returns 0 for NULL. Since 0.1.0. */
PXL_API int32_t pxl_queue_dispatch(pxl_queue *queue, int32_t max);

/* Blocks until a completion is pending, pxl_queue_wakeup() is called, or timeout_ms
 * passes (a negative timeout waits forever). Returns at once for an unconsumed wakeup
 * issued before the call; returns for a wakeup issued during the call even if a
 * pxl_queue_dispatch() on another thread consumed it first. Consumes the wakeup. Returns
 * the number of pending completions (0 after a timeout or a wakeup with nothing pending).
 * Runs no callback. May run on one thread while another dispatches. Since 0.1.0. */
PXL_API int32_t pxl_queue_wait(pxl_queue *queue, int32_t timeout_ms);

/* Makes a pxl_queue_wait() in progress (or the next one) return early, and the queue's
 * fd readable until pxl_queue_dispatch() or pxl_queue_wait() consumes the wakeup. Wakeups
 * do not add up: one consumption takes any number issued before it. Any thread, also
 * from a callback; not from a signal handler. Since 0.1.0. */
PXL_API void pxl_queue_wakeup(pxl_queue *queue);

/* Number of completions waiting to be dispatched. Any thread. Since 0.1.0. */
PXL_API int32_t pxl_queue_pending(const pxl_queue *queue);

/* ---------------------------------------------------------------------------------
 * Loader configuration
 * ------------------------------------------------------------------------------- */

/* Log levels (pxl_log_callback's level). */
#define PXL_LOG_ERROR 0   /* something failed that the library worked around */
#define PXL_LOG_WARNING 1 /* degraded: a disk cache turned off, an entry dropped */
#define PXL_LOG_INFO 2

/* Receives the library's diagnostics: a level (PXL_LOG_*), one line of English without a
 * trailing newline (borrowed for the call) and pxl_config.log_user_data. Runs on a
 * library thread, possibly several at once, or on the thread calling pxl_loader_new or
 * pxl_disk_cache_clear (which may open the disk cache): it must be thread-safe, return
 * quickly, take no lock the host may hold while calling pixload, and call no pixload
 * function. Never called after pxl_loader_free() returns. */
typedef void (*pxl_log_callback)(int32_t level, const char *message, void *user_data);

/* One question to the request hook (pxl_config.request_hook), answered with
 * pxl_hook_answer() or pxl_hook_fail(): see "Request hook". Since 0.5.0. */
typedef struct pxl_hook_call pxl_hook_call;

/* The request hook: asked for headers before a network transfer of url, with the
 * header_count "Name: value" lines the transfer sends so far (all borrowed for the call),
 * status 0, or 401 / 403 when the transfer just got that response, and the call to
 * answer. Runs on the loader's network thread and must return at once: see "Request hook".
 * Since 0.5.0. */
typedef void (*pxl_request_hook_fn)(const char *url, const char *const *headers, size_t header_count,
                                    int32_t status, pxl_hook_call *call, void *user_data);

/* A loader's settings for pxl_loader_new(): pxl_config_init() fills the defaults given
 * with each field. */
typedef struct pxl_config {
  size_t struct_size;             /* sizeof(pxl_config); set by pxl_config_init */
  uint64_t memory_cache_bytes;    /* decoded-image cache budget; default 64 MiB; 0 disables */
  int32_t max_concurrent_downloads; /* transfers at once over all hosts; default 8 */
  int32_t max_downloads_per_host; /* transfers at once per host; default 6 */
  int32_t decode_threads;         /* 0 (default): one per CPU core */
  int32_t connect_timeout_ms;     /* default 10000; 0: libcurl's own (300 s) */
  int32_t timeout_ms;             /* whole transfer; default 30000; 0: no limit */
  uint64_t max_body_bytes;        /* larger bodies fail with PXL_E_BODY_TOO_LARGE; default 32 MiB */
  uint64_t max_pixels;            /* larger declared images fail with PXL_E_TOO_MANY_PIXELS
                                     before any pixel buffer exists; default 100,000,000 */
  uint32_t allowed_schemes;       /* PXL_SCHEME_* bits; default HTTP | HTTPS */
  const char *user_agent;         /* NULL (default): "pixload/<version>"; copied */
  int32_t stall_timeout_ms;       /* fail with PXL_E_TIMEOUT when a transfer receives no body
                                     bytes for this long (counted from its start, then from
                                     the last bytes); default 10000; 0 disables */
  int32_t max_redirects;          /* redirects followed per transfer; default 5; more, or a
                                     redirect back to a URL the transfer already asked for
                                     (a loop), is PXL_E_TOO_MANY_REDIRECTS. Every hop is
                                     checked: a redirect never leaves http(s) (nor the
                                     schemes of allowed_schemes), and once a transfer is on
                                     https (its URL, or any hop) it never goes to http
                                     (PXL_E_SCHEME_NOT_ALLOWED). A relative Location is
                                     resolved against the URL that answered with it. 301,
                                     302, 303, 307 and 308 are followed, all with a GET.
                                     The request's own headers (pxl_request.headers), and the
                                     Authorization, Cookie and Proxy-Authorization lines of
                                     headers below, go only to the URL's host and port (or
                                     that host's https on 443 for an http URL on 80); the
                                     other lines of headers go to every hop. */
  int32_t max_retries;            /* further attempts after a transient failure (connection
                                     refused or reset, a truncated body, HTTP 5xx, HTTP 429);
                                     never after another 4xx, a timeout, a TLS or DNS
                                     failure; default 2; 0 disables */
  int32_t retry_base_delay_ms;    /* backoff before the first retry, doubled for each later
                                     one, with random jitter; default 250 */
  int32_t retry_max_delay_ms;     /* cap on every backoff and on a server's Retry-After
                                     (seconds or an HTTP date); default 10000 */
  const char *ca_file;            /* PEM file of the CAs that verify https servers: with it
                                     (or ca_path, 0.5.0) only those CAs are trusted, never
                                     the system's store (before 0.5.0 the file was added to
                                     libcurl's built-in CA directory). NULL (default, with
                                     ca_path NULL): the system's. A file that does not exist
                                     or cannot be read fails pxl_loader_new with
                                     PXL_E_INVALID_ARGUMENT and a log line naming it.
                                     Verification is always on. */
  const char *const *headers;     /* NULL-terminated list of "Name: value" header lines sent
                                     with every request (authorization, for example); NULL
                                     (default) for none; copied. A line without a colon or
                                     with a CR or LF, or more than 256 lines, is
                                     PXL_E_INVALID_ARGUMENT. */
  int32_t cancel_storm_limit;     /* running transfers cancelled per second beyond which new
                                     transfers wait until the rate falls (a fling through
                                     thousands of rows opens a few connections, not
                                     thousands); default 16; 0 disables. Loading without
                                     cancelling is never held back. */
  uint64_t disk_cache_bytes;      /* disk cache of downloaded (encoded) bytes, and of decoded
                                     thumbnails (disk_variant_max_side); default 0: none.
                                     Entries are verified on every read; a bad one is deleted
                                     and fetched again. The total stays within this (plus
                                     one entry) after every write, least recently used
                                     first out, also when several processes share the
                                     directory. */
  int32_t ignore_http_freshness;  /* 0 (default): Cache-Control max-age / no-cache and Expires
                                     decide when a stored copy is stale; a stale one is
                                     revalidated (If-None-Match / If-Modified-Since; a 304
                                     reuses the bytes) or fetched again. A response that
                                     says nothing stays fresh until evicted. no-store is
                                     never written. 1: every stored copy is fresh until
                                     evicted, as most image loaders do. */
  int32_t memory_cache_count;     /* at most this many decoded images in memory; default 1000.
                                     An image over a tenth of memory_cache_bytes is never
                                     kept (one full-size photo must not flush a screenful
                                     of thumbnails). */
  const char *disk_cache_dir;     /* NULL (default): $XDG_CACHE_HOME/pixload, else
                                     ~/.cache/pixload; created 0700, files 0600; copied. A
                                     directory that cannot be created or written makes the
                                     loader memory-only, with one line to the log callback. */
  int64_t disk_cache_max_age_s;   /* a disk entry not used for this many seconds is dropped
                                     (when next read, at start-up and at every eviction);
                                     default 604800 (7 days); 0: no age limit. */
  /* Since 0.2.0. */
  pxl_log_callback log;           /* NULL (default): the library is silent */
  void *log_user_data;            /* passed to log */
  int32_t log_level;              /* the most verbose level passed to log; default
                                     PXL_LOG_WARNING. Levels past PXL_LOG_INFO (a newer
                                     header's) count as PXL_LOG_INFO, below 0 as
                                     PXL_LOG_ERROR. */
  /* Since 0.3.0. */
  int64_t disk_variant_max_side;  /* decoded thumbnails whose width and height are both at most
                                     this are also kept in the disk cache, beside the encoded
                                     bytes they were made from, so that a later start (a fresh
                                     loader, another process) delivers them with no decode;
                                     default 256 (a 256x256 RGBA thumbnail costs 256 KiB of
                                     disk); 0: off. Only requests with a target size (not 0x0)
                                     whose non-zero sides are at most this look for one, and
                                     only http(s) responses that the disk cache keeps are
                                     stored (never no-store). A stored thumbnail is an entry
                                     like any other: counted in disk_cache_bytes, evicted
                                     least recently used first, verified on every read (a
                                     damaged one is dropped, logged and made again), written
                                     atomically, shared between processes; it is raw pixels
                                     in the request's format, so it reads back in well under
                                     a millisecond. It needs not its original: it is served
                                     while the original's response, as it was when the
                                     thumbnail was made, says it is fresh (with
                                     ignore_http_freshness: until evicted; with
                                     PXL_FLAG_CACHE_ONLY: also when stale). A stale one is
                                     not revalidated on its own: the request loads the
                                     original as without it (a conditional request with the
                                     original's validators, or a full one if the original was
                                     evicted) and the thumbnail is made and stored anew. One
                                     made from other bytes than the original now stored (a
                                     reload, a changed image) is dropped when read.
                                     pxl_cache_remove() removes a key's thumbnails too. */
  const char *codec_modules;      /* Since 0.5.0. Which codec modules pxl_loader_new loads
                                     ("Codec modules"): NULL (default) every one found; ""
                                     none; "heif,jxl" exactly those (each must load).
                                     Copied */
  const char *ca_path;            /* Since 0.5.0. A directory of PEM CA certificates named by their subject
                                     hash (as `openssl rehash DIR` or c_rehash names them):
                                     trusted with ca_file, if any, and like it, instead of
                                     the system's store. NULL (default): none. A directory
                                     that does not exist or cannot be read fails
                                     pxl_loader_new like a bad ca_file. Copied. */
  const char *proxy;              /* NULL (default): the proxy the environment names, as
                                     libcurl reads it: http_proxy for http URLs, https_proxy
                                     (or HTTPS_PROXY) for https ones, else ALL_PROXY (or
                                     all_proxy), except for the hosts in no_proxy (or
                                     NO_PROXY); HTTP_PROXY in capitals is ignored. "": no
                                     proxy, whatever the environment says. Else the proxy's
                                     URL ("http://proxy.example:3128", "socks5h://..."),
                                     used for every transfer. Copied. */
  int32_t tls_min_version;        /* the oldest TLS version an https server may speak:
                                     PXL_TLS_1_2 (default) or PXL_TLS_1_3; any other value
                                     is PXL_E_INVALID_ARGUMENT. An older server fails with
                                     PXL_E_TLS. */
  pxl_request_hook_fn request_hook; /* Since 0.5.0. NULL (default): none. Asked before each
                                     http(s) transfer for headers to add or replace (a
                                     token): see "Request hook". */
  void *request_hook_user_data;   /* passed to request_hook; must stay valid until
                                     pxl_loader_free() returns */
  int32_t hook_timeout_ms;        /* a hook call not answered for this long fails its
                                     request with PXL_E_TIMEOUT (so does timeout_ms, when
                                     shorter and not 0); default 30000; 0: only timeout_ms
                                     bounds it */
  /* Since 0.6.0 (past 0.5.0's sizeof: no field in its tail padding). */
  int64_t decode_timeout_ms;      /* an isolated decode not done in this much wall-clock time
                                     is killed and fails with PXL_E_DECODER_FAILED
                                     ("Isolation"); default 10000; 0: no limit */
  int32_t isolation;              /* which codecs decode in a confined worker process
                                     ("Isolation"): PXL_ISOLATION_MODULES (default, 0),
                                     PXL_ISOLATION_NONE, or PXL_ISOLATION_ALL, each
                                     optionally | PXL_ISOLATION_REQUIRED */
  uint32_t animation_ring_frames; /* Since 0.6.0. Frames an animation player holds (the one
                                     shown and those decoded ahead): "Animation players";
                                     0 (default): 3; at least 2 are used */
  uint64_t animation_ring_bytes;  /* Since 0.6.0. Most frame bytes a player holds; 0
                                     (default): no byte budget beyond the frame count;
                                     otherwise the ring holds the frames that fit, at least
                                     the one shown and the next */
} pxl_config;

/* pxl_config.isolation values (Since 0.6.0); see "Isolation". */
#define PXL_ISOLATION_MODULES 0      /* every codec module loaded from a file (HEIC, JPEG XL,
                                        SVG, ...) decodes in the worker; built-in formats and
                                        pxl_loader_add_codec's codecs in the host */
#define PXL_ISOLATION_NONE 1         /* everything decodes in the host's process (0.5.0's way) */
#define PXL_ISOLATION_ALL 2          /* the built-in formats (JPEG, PNG, WebP, GIF, AVIF)
                                        too, in workers of their own */
#define PXL_ISOLATION_REQUIRED 0x100 /* a bit: an isolated format whose worker runs without
                                        one of its layers (or cannot start) fails with
                                        PXL_E_DECODER_FAILED rather than decode */

/* pxl_config.tls_min_version values. Since 0.5.0. */
#define PXL_TLS_1_2 12
#define PXL_TLS_1_3 13

/* The sizes of the structs in 0.1.0 (up to the end of their last field): the smallest
 * struct_size the library accepts. A new version's fields start at or after the previous
 * version's sizeof(), never in its tail padding, so that a setting is never lost in
 * bytes an older library treats as padding (test_abi.c checks it for 0.2.0's). */
#define PXL_CONFIG_SIZE_0_1 (offsetof(pxl_config, disk_cache_max_age_s) + sizeof(int64_t))
#define PXL_REQUEST_SIZE_0_1 (offsetof(pxl_request, progress_interval_ms) + sizeof(int32_t))
#define PXL_TABLE_CONFIG_SIZE_0_1 (offsetof(pxl_table_config, prefetch_priority) + sizeof(int32_t))
#define PXL_STATS_SIZE_0_1 (offsetof(pxl_stats, disk_bytes) + sizeof(uint64_t))
/* 0.2.0's pxl_config ends at log_level; 0.3.0's fields start past its sizeof(). */
#define PXL_CONFIG_SIZE_0_2 (offsetof(pxl_config, log_level) + sizeof(int32_t))
#define PXL_TABLE_STATS_SIZE_0_1 (offsetof(pxl_table_stats, failed) + sizeof(uint64_t))

/* Fills the first size bytes of *config (size: the caller's sizeof(pxl_config)) with the
 * defaults above and sets struct_size to size; bytes past this library's struct are
 * zeroed, so that a program built against a newer header passes them back as "off".
 * Writes nothing past size. Returns PXL_OK, or PXL_E_INVALID_ARGUMENT for NULL or a size
 * below PXL_CONFIG_SIZE_0_1 (then nothing is written). Any thread. Since 0.2.0. */
PXL_API pxl_status pxl_config_init_size(pxl_config *config, size_t size);

/* Programs built against this header: pxl_config_init(&config) fills the whole struct
 * they have (the macro passes its size). The function of the same name is 0.1.0's: it
 * fills only the fields 0.1.0 had, so a 0.1.0 program's smaller struct is never written
 * past its end. NULL is a no-op. Any thread. Since 0.1.0. */
PXL_API void pxl_config_init(pxl_config *config);
#define pxl_config_init(config) pxl_config_init_size((config), sizeof *(config))

/* ---------------------------------------------------------------------------------
 * Loader
 * ------------------------------------------------------------------------------- */

/* Downloads, decodes and caches images on threads of its own. */
typedef struct pxl_loader pxl_loader;

/* Creates a loader with its network thread and decode threads. config may be NULL for
 * the defaults; otherwise it must have been filled by pxl_config_init (struct_size).
 * On success *out receives the loader; on failure it is set to NULL (when out is not
 * NULL). Returns PXL_OK, PXL_E_INVALID_ARGUMENT (NULL out, bad struct_size, a negative
 * value, a transfer limit, max_pixels or max_body_bytes of 0, decode_threads over 256,
 * max_retries over 100, unknown scheme bits, a malformed header line), PXL_E_NO_MEMORY
 * (an allocation failed, or a thread could not be started: `ulimit -u`, a cgroup pids
 * limit), PXL_E_IO (no file descriptor) or
 * PXL_E_UNSUPPORTED (the libcurl in use cannot set an option the safety rules rely on:
 * scheme allow-lists, limits, TLS verification; the loader never runs without them). A
 * failure leaves no thread of the loader running; past argument checks, what failed
 * (which option, which libcurl version) is also told to config->log, at PXL_LOG_ERROR.
 * Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_loader_new(const pxl_config *config, pxl_loader **out);

/* Frees a loader: cancels every request still in flight (each still gets exactly one
 * callback, PXL_E_CANCELLED, delivered through its queue at that queue's next dispatch
 * or free), stops and joins the library's threads, and frees the caches. Images the host
 * retained stay valid. Must not be called from a callback of this loader's requests.
 * NULL is a no-op. Queues and loader may be freed in any order. Any thread other than
 * the loader's callbacks'. Since 0.1.0. */
PXL_API void pxl_loader_free(pxl_loader *loader);

/* ---------------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------------- */

/* One accepted request; never 0. Unique within its loader. */
typedef uint64_t pxl_token;

/* Download progress of a request: bytes received so far and the expected total (0 when
 * the server did not say). Runs on the thread draining the request's queue. */
typedef void (*pxl_progress_callback)(pxl_token token, uint64_t received, uint64_t expected,
                                      void *user_data);

/* A preview of a request's image while its progressive JPEG downloads: the scans received
 * so far decoded in the request's size, mode, format and orientation, blurry at first.
 * Since 0.5.0 also for a format whose registered codec decodes prefixes
 * (PXL_CODEC_PROGRESSIVE: JPEG XL through libpixload-jxl, whose passes libjxl flushes).
 * Runs on the thread draining the request's queue, with the request's user_data; image is
 * borrowed for the call (pxl_image_retain keeps it). Since 0.3.0. */
typedef void (*pxl_preview_callback)(pxl_token token, pxl_image *image, void *user_data);

/* Thumbnails of progressive JPEGs. A thumbnail small enough to be made from the 1/8-scale
 * decode (the image at least 8 times the target in both directions, after a FILL crop)
 * is decoded from the file's first scans: every DC coefficient (and, for subsampled
 * chroma, the chroma scans libjpeg's 1/8 decode reads), skipping the rest, with pixels
 * identical to decoding the whole file. Its transfer also ends early, as soon as those
 * scans have arrived, when: every request sharing the download wants such a thumbnail,
 * the loader has no disk cache (which would store the whole file) and the download is not
 * revalidating a stored copy (previews do not keep it going: the final image is ready as
 * soon as a preview would be). A request for the same
 * URL that arrives after that starts a transfer of its own. The bytes not downloaded are
 * counted in pxl_stats.bytes_saved. */
typedef struct pxl_request {
  size_t struct_size;    /* sizeof(pxl_request); set by pxl_request_init */
  const char *url;       /* required; http(s)://... or file://... when allowed (data:, or a
                            fetcher's scheme, since 0.5.0); copied */
  const char *cache_key; /* NULL (default): the URL, or with per-request headers the URL
                            and a fingerprint of those header lines, so that one user's
                            image is never served for another's credentials. Requests with
                            equal keys share one download and one cache entry (signed or
                            tokenised URLs; a caller's key also merges requests with other
                            headers: the download is sent with the headers of the request
                            that started it). pxl_cache_remove() takes this key. */
  int32_t width;         /* target size, >= 0 (see pxl_mode); 0 and 0 (default): the
                            original size */
  int32_t height;        /* target height, >= 0 (see width) */
  int32_t mode;          /* pxl_mode; default PXL_MODE_FIT */
  int32_t format;        /* pxl_format; default PXL_FORMAT_RGBA8 */
  int32_t priority;      /* default PXL_PRIORITY_NORMAL; higher runs first */
  uint32_t flags;        /* PXL_FLAG_* bits; default 0 (EXIF orientation applied);
                            unknown bits are PXL_E_INVALID_ARGUMENT */
  const char *const *headers; /* NULL-terminated "Name: value" lines added to the loader's
                            for this request (checked as pxl_config.headers); NULL (default)
                            for none; copied. Part of the default cache key (see
                            cache_key). */
  pxl_progress_callback progress; /* optional, NULL (default): download progress, called on
                            the queue's thread with the request's user_data, never after its
                            final callback. Shared transfers report to every requester. */
  int32_t progress_interval_ms; /* at most one progress call per request per interval;
                            default 100 */
  /* Since 0.3.0. */
  pxl_preview_callback preview; /* optional, NULL (default): previews of a progressive JPEG
                            as its scans arrive, zero or more calls before the final one,
                            each from more scans (sharper) than the last. Like progress:
                            never after the final callback, and none starts once pxl_cancel
                            (or the request's end) has been called; one that began on the
                            queue's thread before a pxl_cancel on another thread may still be
                            running when it returns. Baseline JPEGs and PNGs give none (their
                            rows arrive top to bottom; a half-drawn row is not a preview);
                            neither does an answer from the memory or disk cache. Requests
                            merged into one download each get their previews. Each costs a
                            decode of the scans so far, on a decoder thread. Since
                            0.5.0 a PXL_CODEC_PROGRESSIVE codec's format (JPEG XL) gets
                            previews too, from the bytes so far, once its codec draws
                            something from them. */
  int32_t preview_interval_ms; /* at most one preview per request per interval; default 250;
                            0: one per scan received */
  /* Since 0.5.0. */
  const struct pxl_processor *processors; /* the processor chain (see "Processors"):
                            processor_count steps applied in order; NULL (default) for none;
                            copied. Part of the memory and disk cache keys. */
  size_t processor_count; /* steps in processors, at most PXL_MAX_PROCESSORS; default 0 */
  /* Since 0.5.0 (placeholders). */
  int32_t placeholder_kind; /* pxl_placeholder_kind; default PXL_PLACEHOLDER_NONE. Read by
                            tables only: a row whose request carries one gets it drawn at
                            once (see pxl_table_row_fn); pxl_load ignores it (one callback
                            per request: its host decodes the hash itself) */
  const void *placeholder;  /* the hash: a BlurHash's text (not NUL-terminated) or a
                            ThumbHash's raw bytes; copied; default NULL. A malformed one
                            does not fail the request (see pxl_table_row_fn) */
  size_t placeholder_length; /* its bytes; default 0 */
} pxl_request;

/* Fills *request with the defaults above (url NULL) as pxl_config_init_size does: size
 * is the caller's sizeof(pxl_request), at least PXL_REQUEST_SIZE_0_1. Any thread.
 * Since 0.2.0. */
PXL_API pxl_status pxl_request_init_size(pxl_request *request, size_t size);

/* As pxl_config_init: the macro fills the caller's whole struct; the function is
 * 0.1.0's. NULL is a no-op. Any thread. Since 0.1.0. */
PXL_API void pxl_request_init(pxl_request *request);
#define pxl_request_init(request) pxl_request_init_size((request), sizeof *(request))

/* What a callback receives. Borrowed: valid only during the callback. */
typedef struct pxl_result {
  size_t struct_size;    /* sizeof(pxl_result) of the library; fields may be added: read
                            only fields that end within it */
  pxl_status status;     /* PXL_OK with an image; otherwise an error or PXL_E_CANCELLED */
  pxl_image *image;      /* the image when status is PXL_OK, else NULL. Borrowed:
                            pxl_image_retain() it to keep it past the callback. */
  int32_t http_status;   /* the last HTTP status seen, 0 if none (file://, no response) */
  pxl_source source;     /* where the image came from */
  const char *message;   /* never NULL: "" on success, else what went wrong, in English */
  /* Since 0.3.0 (check struct_size before reading). */
  int32_t preview;       /* 1: a table row's preview (pxl_table_config.previews): the row is
                            still loading and its final call follows; 0 otherwise.
                            Since 0.5.0 also PXL_PREVIEW_PLACEHOLDER (2): a table row's
                            placeholder (see pxl_table_row_fn), its final call follows too */
  /* Since 0.5.0 (check struct_size before reading). */
  int32_t incomplete;    /* 1: the image's data ended early and its decoder filled in the
                            rest ("Images whose data ended early"); as
                            pxl_image_incomplete(image). 0 otherwise and on failure */
} pxl_result;

/* pxl_result.preview of a table row's placeholder. Since 0.5.0. */
#define PXL_PREVIEW_PLACEHOLDER 2

/* Called exactly once per accepted request, on the thread draining its queue. */
typedef void (*pxl_callback)(pxl_token token, const pxl_result *result, void *user_data);

/* Starts loading request->url. On PXL_OK, *token_out (if not NULL) receives the token and
 * callback will run exactly once on a thread dispatching queue. A memory-cache hit
 * completes without touching disk or network, but still through the queue. Returns
 * PXL_E_INVALID_ARGUMENT (NULL loader, request, url, queue or callback; bad struct_size,
 * size, mode or format), PXL_E_MALFORMED_URL, PXL_E_SCHEME_NOT_ALLOWED or
 * PXL_E_LOADER_CLOSED, and then never calls callback. Never blocks on disk or network.
 * Any thread, also from inside a callback. Since 0.1.0. */
PXL_API pxl_status pxl_load(pxl_loader *loader, const pxl_request *request, pxl_queue *queue,
                            pxl_callback callback, void *user_data, pxl_token *token_out);

/* Cancels a request. If its callback has not started when this returns, the callback
 * reports PXL_E_CANCELLED. Work shared with other requests continues for them; an image
 * that finished decoding as the request was cancelled may still enter the memory cache.
 * Returns PXL_OK if this call cancelled the request; PXL_E_NOT_FOUND if the token is
 * unknown, already cancelled, or its callback already ran or started (cancelling is
 * idempotent); PXL_E_INVALID_ARGUMENT for a NULL loader. Any thread, also from inside a
 * callback. Since 0.1.0. */
PXL_API pxl_status pxl_cancel(pxl_loader *loader, pxl_token token);

/* Changes the priority of a request that is still waiting or running; the shared work
 * is re-ranked at the highest priority among its requesters. Returns PXL_OK,
 * PXL_E_NOT_FOUND (unknown or finished token) or PXL_E_INVALID_ARGUMENT (NULL loader).
 * Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_set_priority(pxl_loader *loader, pxl_token token, int32_t priority);

/* Synchronous memory-cache lookup for the image request would produce (same URL or
 * cache key, size, mode, format, orientation, animation and colour-management flags, and
 * since 0.5.0 processor chain). Never touches disk or network,
 * never blocks on other requests. On PXL_OK *image_out holds a new reference (release
 * it); otherwise it is set to NULL (when image_out is not NULL) and the result is
 * PXL_E_NOT_FOUND, or PXL_E_INVALID_ARGUMENT for a NULL loader, image_out or an invalid
 * request (as pxl_load checks it). Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_lookup(pxl_loader *loader, const pxl_request *request,
                              pxl_image **image_out);

/* Drops memory-cache entries, least recently used first, until the cache holds at most
 * max_bytes. Images the host still holds stay valid. NULL is a no-op. Any thread.
 * Since 0.1.0. */
PXL_API void pxl_memory_cache_trim(pxl_loader *loader, uint64_t max_bytes);

/* Bytes (of pixels) and entries currently held by the memory cache; 0 for NULL. Any
 * thread. Since 0.1.0. */
PXL_API uint64_t pxl_memory_cache_bytes(pxl_loader *loader);
PXL_API int32_t pxl_memory_cache_count(pxl_loader *loader);

/* Bytes the disk cache's entries occupy as this loader last saw the directory; 0 without
 * a disk cache or for NULL. Reads no file (safe on the host's thread). Any thread.
 * Since 0.1.0. */
PXL_API uint64_t pxl_disk_cache_bytes(pxl_loader *loader);

/* Deletes every disk-cache entry (of the directory, also other processes' ones). Blocks
 * on the disk: call it off the UI thread. No-op without a disk cache or for NULL. Any
 * thread. Since 0.1.0. */
PXL_API void pxl_disk_cache_clear(pxl_loader *loader);

/* Forgets one cache key (a URL, or a request's cache_key): every decoded size of it in
 * memory at once, and its disk entry and the decoded thumbnails kept on disk beside it on
 * a disk thread shortly after. A URL also drops
 * the memory entries of requests for it with per-request headers and no cache_key, but
 * not their disk entries (their keys hold a fingerprint of the headers): give such
 * requests a cache_key to remove them from disk. Returns PXL_OK or
 * PXL_E_INVALID_ARGUMENT. Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_cache_remove(pxl_loader *loader, const char *cache_key);

/* A snapshot of what a loader did so far. */
typedef struct pxl_stats {
  size_t struct_size;        /* set by the caller to sizeof(pxl_stats); on return, the bytes
                                the library filled */
  uint64_t requests;         /* accepted loads, prefetches and tables' included */
  uint64_t memory_hits;      /* answered by the memory cache */
  uint64_t disk_hits;        /* answered by the disk cache (fresh entries) */
  uint64_t network_fetches;  /* transfers that brought a body: over http(s), or read from
                                a file:// URL (PXL_SOURCE_NETWORK and PXL_SOURCE_FILE; a
                                0.1.0 program counts its file:// loads here); data: and
                                fetcher loads are none (see pxl_metrics.tier) */
  uint64_t revalidated;      /* stale disk entries the server confirmed (HTTP 304) */
  uint64_t coalesced;        /* requests that joined a download or decode under way */
  uint64_t cancelled;        /* pxl_cancel (and table, cancel-all) calls that cancelled */
  uint64_t failed;           /* requests that ended with an error other than CANCELLED */
  uint64_t bytes_downloaded; /* body bytes those transfers received */
  uint64_t memory_bytes;     /* pixel bytes in the memory cache now */
  uint64_t memory_count;     /* images in the memory cache now */
  uint64_t disk_bytes;       /* as pxl_disk_cache_bytes */
  /* Since 0.3.0. */
  uint64_t bytes_saved;      /* body bytes not downloaded because a thumbnail's transfer
                                ended early (see "Thumbnails of progressive JPEGs") */
  /* Since 0.3.0. */
  uint64_t variant_hits;     /* of disk_hits: answered by a decoded thumbnail kept on disk
                                (pxl_config.disk_variant_max_side), with no decode */
  uint64_t variants_stored;  /* decoded thumbnails this loader wrote to the disk cache */
  uint64_t variant_bytes_stored; /* their bytes on disk (pixels and a small header) */
  /* Since 0.5.0. */
  uint64_t tls_handshakes;   /* TLS handshakes of the https connections this loader opened
                                (a reused connection makes none) */
  uint64_t tls_resumed;      /* of those, the ones that resumed a session an earlier
                                connection to the server got, instead of a full handshake
                                (the loader shares its TLS sessions between transfers);
                                counted with libcurl on OpenSSL, 0 with other TLS backends */
} pxl_stats;

/* Fills *stats: set stats->struct_size to sizeof(pxl_stats) first (any size from
 * PXL_STATS_SIZE_0_1 up; see "Structs that grow"). Returns PXL_OK, or
 * PXL_E_INVALID_ARGUMENT for a NULL loader or stats or a struct_size below
 * PXL_STATS_SIZE_0_1. Reads no file. Any thread. Since 0.2.0. */
PXL_API pxl_status pxl_loader_get_stats(pxl_loader *loader, pxl_stats *stats);

/* The 0.1.0 name of pxl_loader_get_stats, kept for programs built against 0.1.0. Any
 * thread. Since 0.1.0. */
PXL_API pxl_status pxl_get_stats(pxl_loader *loader, pxl_stats *stats);

/* Cancels every request whose callbacks go to queue, or every request of the loader
 * (prefetches and tables' requests included) when queue is NULL. Each gets its CANCELLED
 * callback as pxl_cancel says. Returns how many were cancelled; 0 for a NULL loader. Any
 * thread. Since 0.1.0. */
PXL_API int32_t pxl_cancel_all(pxl_loader *loader, pxl_queue *queue);

/* Warms the memory cache: loads requests[0..count) like pxl_load, merged with any other
 * request for the same work, but calls nobody. tokens_out (may be NULL) receives one
 * token per request, 0 where that request was refused; pxl_cancel cancels one. The
 * elements are requests[0].struct_size bytes apart (sizeof(pxl_request) of the caller's
 * header, as pxl_request_init sets it); an element whose struct_size differs is refused
 * with PXL_E_INVALID_ARGUMENT. Returns
 * PXL_OK when every request was accepted, else the first refusal's status (the others are
 * still accepted). Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_prefetch(pxl_loader *loader, const pxl_request *requests, size_t count,
                                pxl_token *tokens_out);

/* A view slot (a reused cell) now shows request: the C equivalent of cancelling in
 * prepareForReuse. *slot holds the token of the slot's current load (0 for none; keep it
 * per slot, starting at 0). The previous load is cancelled (its callback reports
 * CANCELLED, never an image). Then, when the memory cache holds the image, *image_now
 * receives a new reference to draw at once, *slot becomes 0, and no request is made (the
 * callback is not called for it). Otherwise *image_now is NULL, the request is loaded as
 * pxl_load does and *slot receives its token. Returns pxl_load's statuses; on an error
 * *slot is 0 and nothing was started. Any thread (one call at a time per slot), also from
 * inside a callback. Since 0.1.0. */
PXL_API pxl_status pxl_bind(pxl_loader *loader, const pxl_request *request, pxl_queue *queue,
                            pxl_callback callback, void *user_data, pxl_token *slot,
                            pxl_image **image_now);

/* ---------------------------------------------------------------------------------
 * Animation players: frames decoded on demand, into a small ring. Since 0.6.0.
 *
 * Which to choose: PXL_FLAG_ANIMATE gives one image holding every frame (all decoded
 * before the callback, at most PXL_ANIMATION_MAX_BYTES of frames, else the first frame
 * alone): for a host that wants every frame at once (exporting, a short sticker it keeps).
 * A player (pxl_animation_load) is for showing an animation: frame 0 arrives as fast as
 * the still image does (it is the still result of the same request, same pixels, same
 * latency), later frames are decoded on the loader's decode threads just ahead of the
 * playhead into a ring of pxl_config.animation_ring_frames frames (default 3, the one
 * shown counts) and at most animation_ring_bytes, whatever the animation's length; a
 * host that falls behind has frames skipped, not queued.
 *
 * Loading: the request goes through the pipeline as pxl_load's (caches, merging,
 * cancellation; PXL_FLAG_ANIMATE in it is ignored). Its result is kept in the memory
 * cache with the encoded bytes (counted in pxl_memory_cache_bytes), so players of the same
 * request share one download, one cache entry and one copy of the bytes, each with its
 * own playhead; the disk cache keeps the encoded bytes as for any request, never decoded
 * frames. Every frame is rendered as frame 0 is: the request's size, mode, format,
 * colour management, orientation and processors.
 *
 * Decoding: GIF, WebP and AVIF sequences, and codecs registered with
 * pxl_loader_add_codec that have pxl_codec.open_frames (and next_frame, close_frames),
 * decode one frame at a time from saved state (memory: the ring and the decoder's state,
 * about a canvas); looping starts the decoder over. Other registered codecs decode every
 * frame at once through decode_frames when the player needs its second frame, within
 * PXL_ANIMATION_MAX_BYTES (over it, or without decode_frames, the animation shows frame 0
 * alone and ENDS), and the player then copies frames from that into the ring. An
 * isolated format ("Isolation": the codec modules, and under PXL_ISOLATION_ALL every
 * format, GIF, WebP and AVIF too) decodes its frames in a decode worker that the player
 * holds while its decoder's state lives (released with the ring, at the end, at
 * pxl_animation_free): one frame at a time, each within decode_timeout_ms, the same
 * pixels as in-process (a module's codec with decode_frames only is decoded whole once
 * in the worker, which then hands over one frame at a time). The host never decodes an
 * isolated format's frames itself; a worker that dies mid-animation ends the player with
 * PXL_ANIMATION_FAILED and PXL_E_DECODER_FAILED.
 *
 * Time: the host's monotonic clock in milliseconds, passed to pxl_animation_frame_at.
 * The first call after LOADED starts the playhead (frame 0 is due then); a frame is due
 * when the durations of the frames before it (over every loop) have passed, a duration of
 * 10 ms or less counting as 100 ms as browsers play them (pxl_animation_frame.duration_ms
 * still reports the file's). pxl_animation_pause freezes the playhead at the last
 * frame_at's time; pxl_animation_resume continues it from there.
 *
 * Events: after each pxl_animation_frame_at, exactly one of FRAME_READY (for the frame
 * after the one returned: when it is decoded, or at once if it already is; once per
 * frame), ENDED or FAILED follows on the queue unless the playback already ended. A host
 * can drive the player from them alone: at LOADED call frame_at, at each FRAME_READY wait
 * until due_ms and call frame_at again. ENDED is sent once, when frame_at returns the last
 * frame of the last loop (pxl_animation_frame.ended = 1, next_due_ms -1); that frame
 * stays shown. A still source ENDS at its first frame_at.
 * ------------------------------------------------------------------------------- */

/* A player of one animated request: made by pxl_animation_load, freed by
 * pxl_animation_free. Since 0.6.0. */
typedef struct pxl_animation pxl_animation;

/* pxl_animation_event.kind. Since 0.6.0. */
typedef enum pxl_animation_event_kind {
  PXL_ANIMATION_LOADED = 1,      /* the load ended: status PXL_OK and image = frame 0, or the
                                    load's error (then no other event follows) */
  PXL_ANIMATION_FRAME_READY = 2, /* the frame after the one last returned by frame_at is
                                    decoded: index, due_ms */
  PXL_ANIMATION_ENDED = 3,       /* the loop count is played out (the last frame stays shown) */
  PXL_ANIMATION_FAILED = 4       /* a later frame failed to decode: status, message; playback
                                    stops at the last good frame */
} pxl_animation_event_kind;

/* What a pxl_animation_fn gets; valid during the call. struct_size is the library's
 * sizeof: fields may be added at the end (check it before reading them). */
typedef struct pxl_animation_event {
  size_t struct_size;      /* the library's sizeof(pxl_animation_event) */
  int32_t kind;            /* pxl_animation_event_kind */
  pxl_status status;       /* PXL_OK, or the error of LOADED / FAILED */
  const char *message;     /* NULL or a message, valid during the callback */
  pxl_image *image;        /* LOADED with PXL_OK: frame 0 (borrowed; pxl_image_retain to keep) */
  int32_t index;           /* FRAME_READY: the frame's index */
  int64_t due_ms;          /* FRAME_READY: when it is due, on the host's clock given to frame_at */
  int32_t frame_count;     /* the source's frames (LOADED onwards) */
  int32_t loop_count;      /* 0 forever, n plays in all (as pxl_image_loop_count) */
} pxl_animation_event;

/* Runs on the queue's thread (pxl_queue_dispatch). May call any pxl_animation function
 * on its own player, pxl_animation_free included (no event follows then). */
typedef void (*pxl_animation_fn)(pxl_animation *animation, const pxl_animation_event *event, void *user_data);

/* What pxl_animation_frame_at says of the frame it returned. The caller sets struct_size
 * to its sizeof (0 is taken as this header's sizeof); the library fills the fields both
 * know, as it fills pxl_stats ("Structs that grow"); a struct_size below the end of
 * `ended` leaves it untouched. */
typedef struct pxl_animation_frame {
  size_t struct_size;     /* set by the caller (above); on return, the bytes filled */
  int32_t index;          /* the frame returned */
  int32_t duration_ms;    /* as the file says it; -1 for frame 0 at the first call when
                             it is not known yet (a registered codec's frames: its decoder
                             has not reached it; GIF, WebP and AVIF always know it) */
  int64_t due_ms;         /* when it was due */
  int64_t next_due_ms;    /* when the next frame is due (estimated when duration_ms is -1;
                             FRAME_READY's due_ms is exact); -1 when the animation has
                             ended (or failed and no decoded frame is left) */
  int32_t skipped;        /* frames passed over since the previous call (the host fell behind) */
  int32_t ended;          /* 1: the loop count is played out: this is the last frame */
} pxl_animation_frame;

/* A player's counters (pxl_animation_stats_get fills them as pxl_stats is filled:
 * "Structs that grow"). */
typedef struct pxl_animation_stats {
  size_t struct_size;       /* set by the caller to sizeof(pxl_animation_stats) */
  uint64_t frames_decoded;  /* frames the decoder went through, frame 0 of each loop included */
  uint64_t frames_skipped;  /* frames never shown: not rendered (the decoder knew they were
                               late) or dropped from the ring by a late frame_at */
  uint64_t frames_shown;    /* frame_at calls that returned a frame not returned before */
  uint64_t ring_bytes;      /* frame bytes held now (the frame shown and those decoded ahead) */
  uint64_t peak_ring_bytes; /* most frame bytes held at once */
  int32_t loops_played;     /* loops the playhead completed */
} pxl_animation_stats;

/* Loads request (as pxl_load: same pipeline, caches, merging, cancellation) and makes a
 * player: fn gets LOADED on queue as fast as a still's callback would, then FRAME_READY /
 * ENDED / FAILED. Returns PXL_OK (*out: the player, free it with pxl_animation_free),
 * PXL_E_INVALID_ARGUMENT (NULL loader, request, queue, fn or out; an invalid request, as
 * pxl_load checks it) or PXL_E_LOADER_CLOSED. Any thread. Since 0.6.0. */
PXL_API pxl_status pxl_animation_load(pxl_loader *loader, const pxl_request *request, pxl_queue *queue,
                                      pxl_animation_fn fn, void *user_data, pxl_animation **out);

/* The frame to show at now_ms (the host's monotonic clock in ms; the first call after
 * LOADED starts the playhead: frame 0 is due then). A new reference (pxl_image_release
 * it) or NULL before LOADED (or after a failed load); frames due before now that were
 * never shown are skipped (decoded, not rendered where the decoder knows in time). frame
 * (may be NULL) describes it. Decodes ahead into the ring. Any thread. Since 0.6.0. */
PXL_API pxl_image *pxl_animation_frame_at(pxl_animation *animation, int64_t now_ms, pxl_animation_frame *frame);

/* Stops decoding; the playhead stays frozen where the last frame_at put it (frame_at
 * keeps returning that frame). After one second paused the player releases the frames
 * decoded ahead and the decoder's state (ring_bytes: the frame shown); resumed, it makes
 * the decoder again and walks it from frame 0 of the shown frame's loop up to that frame
 * (decoded, not rendered: GIF and WebP frames build on earlier ones), then decodes ahead
 * as before, so the first frames after such a resume may come late. NULL is a no-op. Any
 * thread. Since 0.6.0. */
PXL_API void pxl_animation_pause(pxl_animation *animation);

/* The playhead continues from where it was, now_ms being that moment; decoding starts
 * again. No-op unless paused. NULL is a no-op. Any thread. Since 0.6.0. */
PXL_API void pxl_animation_resume(pxl_animation *animation, int64_t now_ms);

/* Fills *stats (struct_size set by the caller). Returns PXL_OK or PXL_E_INVALID_ARGUMENT
 * (NULL, a struct_size below the first field's end). Any thread. Since 0.6.0. */
PXL_API pxl_status pxl_animation_stats_get(const pxl_animation *animation, pxl_animation_stats *stats);

/* Cancels the load and the decoding and frees the player (frames the host holds stay
 * valid). No callback runs after it returns: one running on another thread is waited for.
 * Free a loader's players before the loader: a player outliving it decodes nothing more,
 * and one playing a registered codec's frames (pxl_codec.open_frames) keeps the codec's
 * state until this call, which then runs close_frames (and destroy, when the codec is
 * gone). NULL is a no-op. Any thread, also from inside the player's own callback.
 * Since 0.6.0. */
PXL_API void pxl_animation_free(pxl_animation *animation);

/* ---------------------------------------------------------------------------------
 * Tables: tell the library what is on screen, and it does the rest.
 *
 * A pxl_table belongs to one loader and one queue. The host says which rows are visible
 * and which way the user scrolls (pxl_table_set_visible, typically once per frame while
 * scrolling); the table then keeps the visible rows loading at high priority, prefetches
 * rows ahead in the scroll direction at low priority into the memory cache, lets a few
 * rows behind finish, and cancels every other request it made. It times the calls: rows
 * a fling sweeps past faster than their images could arrive get no request, and once a
 * fling slows down the rows where it will stop start loading before they are on screen.
 * Prefetching reaches as far as the scroll gets within the time loads have lately taken:
 * a few rows ahead on a fast network, the whole prefetch window on a slow one. A row's
 * result reaches the host only while that row is visible: an image never lands in a slot
 * that now shows another row. Prefetches call nobody. Tables sharing a loader never touch
 * each other's requests.
 * ------------------------------------------------------------------------------- */

/* The images of a scrolling list, loaded as the section above says. */
typedef struct pxl_table pxl_table;

/* Fills *request (already set up by pxl_request_init) for row and returns 1, or returns 0
 * to leave the row without an image. request->url and any strings it points to need only
 * live until this returns. Called from inside pxl_table_set_visible and
 * pxl_table_set_row_count, on the caller's thread; it must not call pxl_table_*.
 * user_data is pxl_table_new's (the last parameter since 0.2.0). request->struct_size
 * is the library's: code built against a newer header sets only fields that end within
 * it, and does not call pxl_request_init on it. */
typedef int (*pxl_table_request_fn)(int64_t row, pxl_request *request, void *user_data);

/* A visible row's result: result->status PXL_OK with an image (borrowed, as in
 * pxl_callback), or an error. Runs on the thread draining the table's queue, or inside
 * pxl_table_set_visible for rows the memory cache already holds (no placeholder flash)
 * and rows whose request was refused.
 * Never for a row that is not visible at that moment; never CANCELLED.
 * Since 0.5.0: a row whose request carries a placeholder (pxl_request.placeholder_kind)
 * and that is not in the memory cache first gets it, decoded, inside the
 * pxl_table_set_visible (or pxl_table_set_row_count) call that makes it visible, with
 * result->preview PXL_PREVIEW_PLACEHOLDER (source PXL_SOURCE_NONE, the image RGBA8
 * straight, 32 pixels on its longer side with the request's width/height ratio when it
 * gives both, else the hash's own); never after the row's image. A malformed hash gives
 * no call (the loader's log says why). Tables made through 0.1.0's pxl_table_new get
 * none. */
typedef void (*pxl_table_row_fn)(int64_t row, const pxl_result *result, void *user_data);

/* A table's settings for pxl_table_new(): pxl_table_config_init() fills the defaults given
 * with each field. */
typedef struct pxl_table_config {
  size_t struct_size;        /* sizeof(pxl_table_config); set by pxl_table_config_init */
  int32_t prefetch_rows;     /* at most this many rows ahead in the scroll direction
                                (half each way when still); default 8 */
  int32_t keep_rows;         /* rows just behind that keep loading; default 2 */
  int32_t visible_priority;  /* default PXL_PRIORITY_VISIBLE; while scrolling, the
                                row about to leave gets this + rows on screen - 1, the
                                one just entering this, so the screen loads in the order
                                its rows leave */
  int32_t prefetch_priority; /* default PXL_PRIORITY_PREFETCH */
  /* Since 0.3.0. */
  int32_t previews;          /* 1 (default): a visible row whose image is a progressive JPEG
                                (or, since 0.5.0, a format whose codec decodes prefixes:
                                JPEG XL) gets previews as its scans arrive, through row_fn with
                                result->preview 1, then its final call; never after the final
                                call, never for a row that left the screen. 0: none. Tables
                                made through 0.1.0's pxl_table_new symbol get none. */
} pxl_table_config;

/* Fills *config with the defaults above as pxl_config_init_size does: size is the
 * caller's sizeof(pxl_table_config), at least PXL_TABLE_CONFIG_SIZE_0_1. Any thread.
 * Since 0.2.0. */
PXL_API pxl_status pxl_table_config_init_size(pxl_table_config *config, size_t size);

/* As pxl_config_init: the macro fills the caller's whole struct; the function is
 * 0.1.0's. NULL is a no-op. Any thread. Since 0.1.0. */
PXL_API void pxl_table_config_init(pxl_table_config *config);
#define pxl_table_config_init(config) pxl_table_config_init_size((config), sizeof *(config))

/* Creates a table of row_count rows (none visible yet). config may be NULL for the
 * defaults. Returns PXL_OK or PXL_E_INVALID_ARGUMENT (NULL loader, queue, request_fn,
 * row_fn or out; bad struct_size; negative values). Any thread. Since 0.2.0; C programs
 * call it as pxl_table_new (the macro below), bindings by this name. */
PXL_API pxl_status pxl_table_create(pxl_loader *loader, pxl_queue *queue, const pxl_table_config *config,
                                    int64_t row_count, pxl_table_request_fn request_fn,
                                    pxl_table_row_fn row_fn, void *user_data, pxl_table **out);

/* 0.1.0's table callbacks took user_data first. */
typedef int (*pxl_table_request_fn_0_1)(void *user_data, int64_t row, pxl_request *request);
typedef void (*pxl_table_row_fn_0_1)(void *user_data, int64_t row, const pxl_result *result);

/* The symbol pxl_table_new is 0.1.0's: it takes callbacks with user_data first, so that
 * programs built against 0.1.0 keep working; otherwise as pxl_table_create. Programs
 * built against this header reach pxl_table_create through the macro. Any thread.
 * Since 0.1.0. */
PXL_API pxl_status pxl_table_new(pxl_loader *loader, pxl_queue *queue, const pxl_table_config *config,
                                 int64_t row_count, pxl_table_request_fn_0_1 request_fn,
                                 pxl_table_row_fn_0_1 row_fn, void *user_data, pxl_table **out);
#define pxl_table_new pxl_table_create

/* How a table loads, besides the rules below. It times pxl_table_set_visible calls to
 * know the scroll's speed and, once a fling slows down (kinetic scrolling slows
 * exponentially), where it will stop; and it times its visible rows' loads.
 *  - A visible row that will leave the screen before its image could arrive and be seen
 *    (within the time visible rows have lately taken to load, within fixed bounds), or
 *    any row during a move of a screen or more between two calls, is passed by: its
 *    transfer waits until the row leaves, when it is cancelled, so rows flung past cost
 *    no connection and no bytes; a row still on screen when the scroll stops or slows
 *    starts loading at once. A move of several screens from rest is a jump (a scrollbar
 *    drag, "go to the end"): its rows load at once.
 *  - Prefetching reaches the rows the scroll brings on screen within the time loads have
 *    lately taken (at most prefetch_rows, and no more than the network has lately been
 *    delivering). Rows a slowing fling will stop on are requested before they are on
 *    screen and ranked just below the visible rows.
 *  - While scrolling, the visible row that leaves first ranks highest (visible_priority).
 *  - Rows behind are kept (keep_rows) only where visible rows have lately loaded quickly,
 *    and never behind a fast or slowing fling.
 *  - The screen first: while a visible row is still loading, prefetches wait (each call
 *    holds them a while longer), so the visible rows get the connections, the bandwidth,
 *    the server and the decoders; they start when the last visible row has its result. */
/* Rows first .. first + count - 1 are visible (0 <= count <= 65536, else
 * PXL_E_INVALID_ARGUMENT); direction > 0 scrolls towards higher rows, < 0 towards lower
 * ones, 0 is still (prefetch looks both ways). Rows outside 0 .. row_count - 1 are
 * ignored (and loaded if pxl_table_set_row_count later makes them exist). A row that left
 * the screen and comes back is delivered again. A request refused for a visible row is
 * reported through row_fn with its status and message, as a delivered row is (once while
 * it stays visible, again when it comes back): a request pxl_load would refuse (NULL url,
 * bad struct_size, size, mode, format, flags, headers, processors or placeholder:
 * PXL_E_INVALID_ARGUMENT, the message saying what), a malformed URL, a scheme not
 * allowed. May call request_fn, and row_fn for cached and refused rows, before it
 * returns. The host's thread; one call at a time per table.
 * Since 0.1.0. */
PXL_API pxl_status pxl_table_set_visible(pxl_table *table, int64_t first, int32_t count,
                                         int32_t direction);

/* Changes the number of rows (rows were appended or removed); keeps the visible range.
 * Returns PXL_OK or PXL_E_INVALID_ARGUMENT (NULL table, negative count). May call
 * request_fn and row_fn as pxl_table_set_visible does. The host's thread, like
 * pxl_table_set_visible; never at the same time as another pxl_table_* call on this
 * table. Since 0.1.0. */
PXL_API pxl_status pxl_table_set_row_count(pxl_table *table, int64_t row_count);

/* Cancels every request of this table and forgets which rows were shown; the next
 * pxl_table_set_visible starts anew (a reload). Requests cancelled by other means
 * (pxl_cancel_all on the table's queue or loader) are also forgotten, once their
 * cancellations have been dispatched: call pxl_table_set_visible again after that to load
 * the rows on screen. NULL is a no-op. The host's thread, like pxl_table_set_visible.
 * Since 0.1.0. */
PXL_API void pxl_table_cancel_all(pxl_table *table);

/* What a table did so far. */
typedef struct pxl_table_stats {
  size_t struct_size;    /* set by the caller to sizeof(pxl_table_stats); on return, the
                            bytes the library filled */
  uint64_t started;      /* loads started, prefetches included */
  uint64_t cancelled;    /* of those, cancelled because their rows left every window */
  uint64_t memory_hits;  /* rows that became visible with their image already in memory */
  uint64_t delivered;    /* row callbacks with an image */
  uint64_t failed;       /* row callbacks with an error */
  /* Since 0.6.0. */
  uint64_t animation_frames_decoded; /* frames decoded by the animation players tied to
                                        rows (pxl_table_bind_animation) while tied: it
                                        stays still while their rows are out of view */
} pxl_table_stats;

/* Fills *stats as pxl_loader_get_stats does (struct_size from PXL_TABLE_STATS_SIZE_0_1
 * up). Returns PXL_OK or PXL_E_INVALID_ARGUMENT. Any thread. Since 0.1.0. */
PXL_API pxl_status pxl_table_get_stats(pxl_table *table, pxl_table_stats *stats);

/* Ties an animation player ("Animation players") to a row: whenever
 * pxl_table_set_visible leaves the row out of the visible rows, the player is paused (no
 * decoding; pxl_animation_pause: its ring released after a second), and when the row is visible again it resumes, its
 * playhead continuing at the next pxl_animation_frame_at from where it stopped. So at most
 * the visible rows' players decode frames. The state applies at once (a row out of view
 * pauses now). One player a row: tying another unties the first; row -1 unties the
 * player (left as it is). The table keeps no reference: pxl_animation_free unties it, and
 * pxl_table_free unties every player. Frames its tied players decode are counted in
 * pxl_table_stats.animation_frames_decoded. Returns PXL_OK or PXL_E_INVALID_ARGUMENT (NULL
 * table or animation, row below -1). Any thread. Since 0.6.0. */
PXL_API pxl_status pxl_table_bind_animation(pxl_table *table, int64_t row, pxl_animation *animation);

/* Cancels the table's requests and frees it; no row_fn call runs after this returns
 * (call it on the queue's thread, or while no other thread dispatches the queue). NULL is
 * a no-op. Tables and their loader may be freed in any order. Since 0.1.0. */
PXL_API void pxl_table_free(pxl_table *table);

/* ---------------------------------------------------------------------------------
 * Codecs
 *
 * A format pixload does not decode itself joins a loader as a codec: a few functions
 * over bytes in and pixels out. The built-in formats are sniffed first, then the
 * registered codecs in the order they were added; the first whose sniff takes the bytes
 * decodes them. Their pixels then go the way every decoded image goes: max_pixels and
 * the animation bound on the declared size before any buffer exists, orientation,
 * colour management (the ICC profile or nclx/CICP the codec reports), resize to the
 * request (pxl_mode, never up), both caches. The codec never sees the loader: it gets
 * the whole encoded file, a buffer the library allocated, and answers with a status, so
 * the same functions could run in a separate, sandboxed process.
 *
 * The three formats pixload ships apart from its core (HEIC, JPEG XL, SVG) are modules
 * built on this interface ("Codec modules" below). A file of one of them when its module
 * is not loaded fails with PXL_E_UNSUPPORTED_IMAGE, the message naming the package that
 * brings it ("HEIC image, and no HEIC codec is loaded (install libpixload-heif)").
 *
 * Every codec function may run on any decode thread, several at once (on different
 * files): it must be thread-safe. Since 0.5.0.
 * ------------------------------------------------------------------------------- */

/* Bits of pxl_codec.flags. */
#define PXL_CODEC_PREMULTIPLIED 0x1u  /* decode writes premultiplied alpha (else straight) */
#define PXL_CODEC_PROGRESSIVE 0x2u    /* decode accepts a prefix of the file (PXL_CODEC_PARTIAL)
                                          and draws what it has: previews while downloading */
#define PXL_CODEC_SCALABLE 0x4u       /* decode draws at any size, also above the header's (a
                                          vector format): a request larger than the header's
                                          size is drawn at the size it asks (FIT or FILL on
                                          the header's aspect), within max_pixels, where a
                                          raster image is never enlarged */

/* Bits of pxl_codec_header.flags and pxl_codec_target.flags, set by the library. */
#define PXL_CODEC_KEEP_ORIENTATION 0x1u /* the request has PXL_FLAG_IGNORE_ORIENTATION: a
                                            codec that orients while decoding (HEIF irot/imir)
                                            must not; one that reports an EXIF orientation
                                            does nothing special (the library skips it) */
#define PXL_CODEC_PARTIAL 0x2u          /* the data is a prefix of a file still arriving
                                            (PXL_CODEC_PROGRESSIVE only): draw what it holds,
                                            or return PXL_E_NOT_FOUND when it holds nothing yet */

/* What read_header reports. The library zeroes it, sets struct_size and flags and the
 * defaults (frame_count 1, orientation 1, has_alpha 1); the codec sets what it knows. */
typedef struct pxl_codec_header {
  size_t struct_size;       /* set by the library: the fields it knows */
  uint32_t flags;           /* in: PXL_CODEC_KEEP_ORIENTATION */
  int32_t width;            /* the image's size in the orientation decode writes, >= 1 */
  int32_t height;            /* the image's height, >= 1 */
  int32_t frame_count;      /* frames of an animation (>= 1); more than 1 needs decode_frames */
  int32_t loop_count;       /* how often an animation plays; 0: forever */
  int32_t orientation;      /* EXIF 1..8 the library applies to the decoded pixels (unless the
                               request says PXL_FLAG_IGNORE_ORIENTATION); 1: none */
  int32_t has_alpha;        /* 0: every pixel opaque (lets the library skip alpha work) */
  size_t icc_size;          /* bytes of an embedded ICC profile; read_icc then gives them */
  int32_t cicp_primaries;   /* ITU-T H.273 colour primaries, transfer and matrix (nclx), */
  int32_t cicp_transfer;    /* when there is no ICC profile; 0: not given */
  int32_t cicp_matrix;       /* (matrix) */
} pxl_codec_header;

/* decode_frames: called by the codec as target->frame_done(target->library,
 * duration_ms) after drawing each frame (the whole canvas) into target->pixels; a
 * non-zero return says stop (the library has enough, or is over its bound): return
 * PXL_OK then. */
typedef int32_t (*pxl_codec_frame_done_fn)(void *library, int32_t duration_ms);

/* Where decode and decode_frames write: a buffer of height rows of stride bytes, RGBA8,
 * allocated by the library and zeroed. Valid only during the call. */
typedef struct pxl_codec_target {
  size_t struct_size;       /* set by the library */
  uint32_t flags;           /* in: PXL_CODEC_KEEP_ORIENTATION, PXL_CODEC_PARTIAL */
  int32_t width;            /* in: the size to draw: the header's, or what choose_size chose */
  int32_t height;            /* in: the height to draw */
  uint8_t *pixels;          /* in: the buffer */
  size_t stride;            /* in: bytes per row (>= 4 * width) */
  const volatile int32_t *cancel; /* in: non-zero once nobody wants the result (every request
                               waiting on this decode was cancelled, or the loader is
                               being freed): a long decode may poll it, with an atomic
                               load as pxl_processor_frame.cancelled says, and return
                               PXL_E_CANCELLED */
  pxl_codec_frame_done_fn frame_done; /* in (decode_frames): call it after each frame */
  void *library;            /* in: frame_done's first argument; do not touch */
} pxl_codec_target;

/* The functions of a codec (pxl_codec below says which are required and what each does). */
typedef int32_t (*pxl_codec_sniff_fn)(const uint8_t *data, size_t size, void *user_data);
typedef pxl_status (*pxl_codec_read_header_fn)(const uint8_t *data, size_t size, pxl_codec_header *header,
                                               char *message, size_t message_cap, void *user_data);
typedef pxl_status (*pxl_codec_read_icc_fn)(const uint8_t *data, size_t size, uint8_t *icc, size_t icc_size,
                                            void *user_data);
typedef pxl_status (*pxl_codec_choose_size_fn)(const uint8_t *data, size_t size, uint32_t flags, int32_t *width,
                                               int32_t *height, void *user_data);
typedef pxl_status (*pxl_codec_decode_fn)(const uint8_t *data, size_t size, pxl_codec_target *target, char *message,
                                          size_t message_cap, void *user_data);
typedef void (*pxl_codec_destroy_fn)(void *user_data);
/* Since 0.6.0: frames one at a time (pxl_codec.open_frames below). */
typedef pxl_status (*pxl_codec_open_frames_fn)(const uint8_t *data, size_t size, void **state, char *message,
                                               size_t message_cap, void *user_data);
typedef pxl_status (*pxl_codec_next_frame_fn)(void *state, pxl_codec_target *target, int32_t *duration_ms,
                                              char *message, size_t message_cap, void *user_data);
typedef void (*pxl_codec_close_frames_fn)(void *state, void *user_data);

/* A codec, as pxl_loader_add_codec() takes it. Initialise with pxl_codec_init(). Every
 * function gets the codec's user_data last. A function returns PXL_OK, or
 * PXL_E_CORRUPT_IMAGE (the request fails with that status and "<id>: <message>"),
 * PXL_E_UNSUPPORTED_IMAGE (a valid file of a kind the codec cannot decode),
 * PXL_E_NO_MEMORY or PXL_E_CANCELLED; message (message_cap bytes, NUL-terminate it)
 * says what went wrong. A status not defined here counts as PXL_E_IO ("Extensions"), and
 * PXL_E_IO stays itself; any other status not named here counts as PXL_E_CORRUPT_IMAGE. */
typedef struct pxl_codec {
  size_t struct_size;       /* set by pxl_codec_init */
  const char *id;           /* short name, [a-z0-9_-], 1..31 characters ("qoi"); copied. Also
                               the name pxl_loader_formats() lists and that removes it */
  const char *version;      /* required, as id: the decoder's version ("1.2.0", a module
                               "0.5.0 libheif 1.15.1"); copied. Recorded with each
                               thumbnail it decodes into the disk cache: one made by
                               another version, or by a codec no longer registered, is
                               dropped when read, so a new decoder never serves a
                               thumbnail the old one made. Thumbnails of other formats do
                               not depend on the codecs registered */
  uint32_t flags;           /* PXL_CODEC_* bits above */
  void *user_data;           /* passed last to every function */
  /* Required. Whether the file is this codec's, from its first size bytes (at most
   * PXL_CODEC_SNIFF_BYTES, less for a short file): 1 takes it, 0 leaves it to the next
   * codec. Must be cheap and must not keep the pointer. */
  pxl_codec_sniff_fn sniff;  /* required (above) */
  /* Required. The header: size, frames, orientation, alpha, colour. Cheap: no pixels. */
  pxl_codec_read_header_fn read_header;  /* required (above) */
  /* Optional (needed when read_header sets icc_size): copies the ICC profile, icc_size
   * bytes, into icc. */
  pxl_codec_read_icc_fn read_icc;  /* optional (above) */
  /* Optional: the library would like the whole image at *width x *height (never more than
   * the header's size, or for PXL_CODEC_SCALABLE the size the request enlarges it to); the codec sets the size it will draw instead: exactly that (a
   * vector format), something larger that is cheaper than the full size (an embedded
   * thumbnail), or the header's size. The library resamples whatever it gets. Without it
   * decode always draws the header's size. */
  pxl_codec_choose_size_fn choose_size;  /* optional (above) */
  /* Required. Draws the first (or only) frame, whole, at target->width x height. */
  pxl_codec_decode_fn decode;  /* required (above) */
  /* Optional: every frame of an animation in order, each composited on the canvas (the
   * header's size) and handed over with target->frame_done. Without it an animation
   * gives its first frame (decode). */
  pxl_codec_decode_fn decode_frames;  /* optional (above) */
  /* Optional: called once, with user_data, after the codec's last call: when it was
   * removed and no decode uses it any more, or when its loader is freed (before
   * pxl_loader_free returns), or when pxl_loader_add_codec fails. */
  pxl_codec_destroy_fn destroy;  /* optional (above) */
  /* Since 0.6.0 (past 0.5.0's sizeof). Optional, the three together (one or two alone are
   * ignored): an animation's frames one at a time, from state the codec keeps between
   * calls, for animation players ("Animation players"), which then hold the codec's
   * state and one canvas instead of every frame (without them a player decodes every
   * frame at once through decode_frames). open_frames parses data (valid until
   * close_frames) and sets *state. next_frame draws the next frame, composited, into
   * target (the header's size; the same buffer on every call of one state, holding what
   * the previous call drew), sets *duration_ms and returns PXL_OK, or PXL_E_NOT_FOUND
   * after the last frame, or an error (the player then stops: PXL_ANIMATION_FAILED).
   * close_frames frees the state; a new loop opens again. Each frame must be what
   * decode_frames hands over for it. A state is used by one thread at a time, maybe a
   * different one each call; an isolated codec's ("Isolation") run in its worker. */
  pxl_codec_open_frames_fn open_frames;    /* optional (above) */
  pxl_codec_next_frame_fn next_frame;      /* optional (above) */
  pxl_codec_close_frames_fn close_frames;  /* optional (above) */
} pxl_codec;

/* The most leading bytes sniff is given. */
#define PXL_CODEC_SNIFF_BYTES 4096

/* Fills *codec with zeros and struct_size = size. Returns PXL_OK or
 * PXL_E_INVALID_ARGUMENT (NULL, a size below pxl_codec's first). Since 0.5.0. */
PXL_API pxl_status pxl_codec_init_size(pxl_codec *codec, size_t size);
#define pxl_codec_init(codec) pxl_codec_init_size((codec), sizeof *(codec))

/* Registers a codec with a loader, after the built-in formats and the codecs added
 * before. The struct and its strings are copied. Returns PXL_OK, PXL_E_INVALID_ARGUMENT
 * (NULL, a bad struct_size, a NULL id or version or required function, an id not of the
 * form above or already registered) or PXL_E_LOADER_CLOSED. On every failure
 * destroy(user_data) has been called, as 0.5.0 did (unlike processors and fetchers:
 * "Extensions"), and the reason goes to pxl_config.log (PXL_LOG_ERROR).
 * Requests made from now on may use it (a decode already under way does not).
 * Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_loader_add_codec(pxl_loader *loader, const pxl_codec *codec);

/* Unregisters the codec named id: requests made from now on no longer use it; decodes
 * under way finish with it, and destroy(user_data) runs after the last of them (on the
 * thread that ends it, possibly this one). Returns PXL_OK, PXL_E_INVALID_ARGUMENT or
 * PXL_E_NOT_FOUND. Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_loader_remove_codec(pxl_loader *loader, const char *id);

/* The short names of the formats the loader decodes, space separated, built-in first
 * ("jpeg png webp gif avif"), then each registered codec's id in order ("... heic jxl
 * svg qoi"), written to buffer (NUL-terminated, truncated to capacity). Returns the
 * length of the whole list (as snprintf): call with capacity 0 to size the buffer.
 * Any thread. Since 0.5.0. */
PXL_API size_t pxl_loader_formats(pxl_loader *loader, char *buffer, size_t capacity);

/* ---------------------------------------------------------------------------------
 * Isolation
 *
 * Since 0.6.0, the codec modules (HEIC, JPEG XL, SVG and every libpixload-*.so loaded
 * from a file: the large C and C++ libraries behind them) decode a stranger's bytes in a
 * separate, confined process, pixload-decode-worker, shipped beside the modules in
 * LIBDIR/pixload/. pxl_config.isolation chooses: PXL_ISOLATION_MODULES (the default),
 * PXL_ISOLATION_NONE (in the host, as 0.5.0 did), PXL_ISOLATION_ALL (the built-in formats
 * too). A codec a host registers with pxl_loader_add_codec decodes in the host's process
 * under every setting; the built-in formats (JPEG, PNG, WebP, GIF, AVIF) do unless
 * PXL_ISOLATION_ALL.
 *
 * Under PXL_ISOLATION_ALL the built-in formats decode in workers of their own (a pool
 * beside the modules', which loads LIBDIR/pixload/pixload-decode-builtins.so: the
 * library's own JPEG, PNG, WebP, GIF and AVIF code and libjpeg-turbo, libpng, libwebp,
 * giflib, libavif), called with the arguments the host would use: the same pixels, sizes,
 * statuses and "ended early" as PXL_ISOLATION_NONE, with the colour information (ICC,
 * PNG's gamma and chromaticities, AVIF's CICP) and EXIF orientation read there too; the
 * resize, colour conversion and orientation run in the host on what comes back. The host
 * still sniffs (magic bytes) and, for a progressive JPEG's previews, finds its scan
 * boundaries with the library's own marker scanner. Not yet in workers under ALL:
 * animations (an animated GIF, WebP or AVIF gives its first frame; PXL_FLAG_ANIMATE is
 * ignored for them). Without the worker or that file, pxl_loader_new fails with
 * PXL_E_UNSUPPORTED under PXL_ISOLATION_ALL | PXL_ISOLATION_REQUIRED; without
 * PXL_ISOLATION_REQUIRED the built-in formats decode in the host, with a warning.
 *
 * The loader keeps a pool of warm workers per module, at most decode_threads of each,
 * started with posix_spawn (never a fork of the host), replaced after 200 decodes and
 * after any failure, and ended by pxl_loader_free. Nothing starts before the first image
 * of an isolated format (a loader that never decodes one starts no process and no
 * thread); that image's decode starts its worker (about 5-8 ms), and from then a thread
 * of the loader starts workers ahead of need: as many as the most decodes of the format
 * seen at once, plus a spare, replacing a retired or failed one before the next image asks
 * for it. A worker locks itself before it reads a byte. The layers, what each stops, and what it
 * does not:
 *
 *   spawned, not forked; every descriptor but its socket closed; an environment of HOME
 *     and XDG_* only: stops the decoder reaching the host's memory, threads, open files,
 *     sockets and tokens.
 *   no_new_privs, not dumpable: stops gaining privileges (setuid, file capabilities),
 *     core files, ptrace by the user's other processes.
 *   namespaces (user, network, IPC, mount; where the kernel allows unprivileged ones):
 *     stop reaching any network even with a socket, and System V IPC. Not a PID
 *     namespace (seccomp and landlock cover signals and /proc).
 *   landlock: stops opening any file outside the modules' and fonts' directories, and
 *     every write, creation, removal, rename or execution; TCP connect and signals outside
 *     the worker (newer kernels). Does not stop stat() anywhere (which files exist).
 *   seccomp (an allow-list): stops sockets, connect, execve, fork, ptrace, signals to other
 *     processes, files opened for writing, executable memory, mount, bpf and the kernel's
 *     rarer calls; a forbidden call kills the worker with SIGSYS. Does not stop what the
 *     allowed calls can do, nor a kernel bug in one of them.
 *   rlimits: an address space from max_pixels plus headroom (a decoder that allocates
 *     without bound gets NULL, then fails), no core files, no file writes.
 *   the library's checks: every message of the worker checked; its header against
 *     max_pixels before the host sizes the pixel buffer (a memfd, sealed against shrinking
 *     before the worker gets it and against writing once it is done); a decode not done
 *     in decode_timeout_ms is killed. Pixels that are wrong but well-formed are not
 *     stopped: they are a stranger's pixels, as before.
 *
 * Where a layer is missing (an old kernel, a container without user namespaces), the
 * worker runs with the others and the log says once which are missing; with
 * PXL_ISOLATION_REQUIRED such a decode fails with PXL_E_DECODER_FAILED instead.
 *
 * A worker that crashes, is killed by seccomp, runs out of its memory or its time, or
 * breaks the protocol fails the decode with PXL_E_DECODER_FAILED and a message naming
 * what happened ("decoder killed by SIGSYS: a forbidden system call", "decoder exceeded
 * 1024 MiB", "decoder timed out after 10000 ms"); every request merged on that decode gets
 * it, nothing is cached, and the next request gets a fresh worker. The host goes on.
 *
 * A module with a manifest (pixload.h, "Codec modules": the shipped three have one) is
 * not loaded in the host at all under isolation, nor its libraries (libheif, libjxl,
 * librsvg): the library reads the manifest from the module's file and sniffs with its
 * declarative rules; only the workers load the module. A module without one is loaded in
 * the host for its sniff, as before, and decodes in the workers.
 *
 * Isolated too: animations (PXL_FLAG_ANIMATE and animation players get every frame from a
 * worker, one frame at a time: "Animation players") and previews (a progressive JPEG's
 * complete scans, their boundaries found in the host, under PXL_ISOLATION_ALL, and the
 * prefix a PXL_CODEC_PROGRESSIVE module draws: JPEG XL's passes, PXL_CODEC_PARTIAL). A thumbnail (a request smaller than
 * what the codec draws, in any format but PXL_FORMAT_GRAY8) is area-resampled in the worker
 * with the library's own resampler and parameters, so that only it crosses, then colour
 * converted, premultiplied and oriented in the host: the same pixels as in-process. A
 * whole-image result (256 KiB or more) that no step rewrites whole (no colour profile to
 * convert, no alpha to premultiply, no EXIF orientation to apply, an RGBA layout for a
 * module's) is not copied in the host: the sealed buffer, mapped privately (copy-on-write),
 * is the image's pixels, and pxl_image_pixels points into that mapping, valid and
 * unchanged until the image's last release as any image's pixels. Otherwise the pixels
 * that cross are copied once from the sealed buffer (a thumbnail's: the thumbnail).
 * ------------------------------------------------------------------------------- */

/* Writes the confining layers the loader's decode workers run with, as words separated
 * by spaces, of "namespaces landlock seccomp rlimits" (pixload version prints them), into
 * buffer as pxl_loader_formats does (NUL-terminated, truncated to capacity - 1; buffer may
 * be NULL with capacity 0); returns the text's length. Starts a worker if none runs yet.
 * "none" when nothing is isolated (PXL_ISOLATION_NONE, no codec module loaded) or no
 * worker starts; "" for a NULL loader. Any thread. Since 0.6.0. */
PXL_API size_t pxl_loader_isolation(pxl_loader *loader, char *buffer, size_t capacity);

/* ---------------------------------------------------------------------------------
 * Codec modules
 *
 * A codec module is a shared object named libpixload-<name>.so exporting
 *
 *     pxl_status pxl_codec_module_register(pxl_loader *loader);
 *
 * which adds its codecs with pxl_loader_add_codec() (a module's version says its own
 * and its decoding library's versions). pxl_loader_new loads the modules it finds, in
 * the order of their file names, from the first of:
 *   - pxl_config.codec_modules: NULL (the default) searches as below; "" loads none;
 *     otherwise a comma-separated list of module names ("heif,jxl") loaded from the
 *     directories below, each of which must be found;
 *   - the environment variable PIXLOAD_CODEC_PATH (a colon-separated list of
 *     directories; read with secure_getenv, so not in setuid programs);
 *   - the directory pixload/codecs beside the library itself ($libdir/pixload/codecs).
 * A module that cannot be loaded or registered is skipped and logged (PXL_LOG_WARNING);
 * a listed one that cannot fails pxl_loader_new with PXL_E_UNSUPPORTED. Modules are
 * loaded once per process and never unloaded. pixload ships libpixload-heif (HEIC/HEIF,
 * libheif), libpixload-jxl (JPEG XL, libjxl) and libpixload-svg (SVG, librsvg).
 * ------------------------------------------------------------------------------- */

/* What a module exports. Since 0.5.0. */
typedef pxl_status (*pxl_codec_module_register_fn)(pxl_loader *loader);

/* A module's manifest (Since 0.6.0, optional): what its codecs are, read from the module's
 * file without loading it. Exported as a data object named pxl_codec_module_manifest:
 *
 *     PXL_MODULE_MANIFEST const pxl_codec_manifest pxl_codec_module_manifest = {...};
 *
 * Under isolation (PXL_ISOLATION_MODULES) the library reads it from the file's ELF
 * symbol table, never running the module's code nor loading its libraries: the host
 * sniffs with the rules here, and only the decode workers load the module (with its
 * pxl_codec_module_register). The ids, flags and choose_size must be those the module
 * registers; the version is what the module's codec would report, as the module was
 * built (a decoding library upgraded under it without a rebuild keeps the built one in
 * cache keys; the library logs it, once per loader's codec, when its worker reports
 * another version). A module without a manifest, a manifest of another magic or a smaller
 * struct_size, or isolation NONE: the module is loaded in the host as in 0.5.0. Plain
 * data only (no pointers: they would need relocations the file does not hold). */
#define PXL_CODEC_MANIFEST_MAGIC 0x4d4c5850u /* "PXLM" */
#define PXL_CODEC_MANIFEST_CODECS 4          /* codecs per manifest, at most */
#define PXL_CODEC_MANIFEST_RULES 12          /* sniff rules per codec, at most */

/* A sniff rule: the codec takes the first PXL_CODEC_SNIFF_BYTES of a file when any one of
 * its rules matches. */
typedef enum pxl_codec_sniff_kind {
  PXL_SNIFF_BYTES = 1,     /* bytes[0..length) at offset */
  PXL_SNIFF_FTYP_BRAND = 2, /* an ISO-BMFF file (a box of at least 16 bytes at 0 whose type is
                               "ftyp") whose major brand (offset 8) or a compatible brand
                               (from offset 16, within the box) is bytes[0..4) */
  PXL_SNIFF_XML_ROOT = 3   /* an XML text whose root element is named bytes[0..length)
                               (followed by whitespace, '>' or '/'), after a UTF-8
                               byte-order mark, whitespace, "<?xml ... ?>", comments and a
                               DOCTYPE (with its internal subset) */
} pxl_codec_sniff_kind;

/* One sniff rule of a manifest's codec. Since 0.6.0. */
typedef struct pxl_codec_sniff_rule {
  uint32_t kind;      /* pxl_codec_sniff_kind; 0: none (ignored) */
  uint32_t offset;    /* PXL_SNIFF_BYTES: where the bytes are, < PXL_CODEC_SNIFF_BYTES */
  uint32_t length;    /* bytes used, 1..16 (4 for a brand) */
  uint8_t bytes[16];  /* the bytes, the brand or the element name (length used) */
} pxl_codec_sniff_rule;

/* One codec of a manifest: what its pxl_codec would say. Since 0.6.0. */
typedef struct pxl_codec_manifest_codec {
  char id[32];        /* pxl_codec.id, NUL-terminated */
  char version[64];   /* pxl_codec.version, NUL-terminated */
  uint32_t flags;     /* pxl_codec.flags */
  uint32_t has_choose_size; /* 1 when pxl_codec.choose_size is set */
  uint32_t rule_count;      /* rules used, 1..PXL_CODEC_MANIFEST_RULES */
  pxl_codec_sniff_rule rules[PXL_CODEC_MANIFEST_RULES]; /* any one matching takes the file */
} pxl_codec_manifest_codec;

/* The manifest a module exports as pxl_codec_module_manifest. Since 0.6.0. */
typedef struct pxl_codec_manifest {
  uint32_t magic;       /* PXL_CODEC_MANIFEST_MAGIC */
  uint32_t struct_size; /* sizeof(pxl_codec_manifest) */
  uint32_t codec_count; /* 1..PXL_CODEC_MANIFEST_CODECS, in the order they register */
  uint32_t reserved;    /* 0 */
  pxl_codec_manifest_codec codecs[PXL_CODEC_MANIFEST_CODECS]; /* codec_count used */
} pxl_codec_manifest;

/* How a module declares its manifest: exported, and kept by the linker. */
#define PXL_MODULE_MANIFEST __attribute__((visibility("default"), used))

/* ---------------------------------------------------------------------------------
 * Processors (Since 0.5.0)
 *
 * A request's processor chain (pxl_request.processors) changes its pixels after the
 * resize (pxl_mode) and EXIF orientation: each step in order, on the decoder threads, on
 * premultiplied RGBA8, then the conversion into the requested pxl_format (pixels outside
 * a circle or corner are transparent: in RGB8 and GRAY8, which have no alpha, they are
 * black). Steps may change the size: CIRCLE gives the centred min(w, h) square, ROTATE by
 * 90 or 270 swaps the sides, CROP gives its rectangle, a custom processor what it asks
 * for (at most max_pixels). The image's original_width/height stay the source's.
 *
 * Every parameter, and a custom processor's id and version, is part of the request's
 * memory-cache key (pxl_lookup with the same chain finds it) and of its decoded variant
 * on disk (pxl_config.disk_variant_max_side; it follows its original's freshness). The
 * memory cache holds final results only. Requests for one URL, size, mode and flags whose
 * chains share a prefix share the work of that prefix: [round 12] and [round 12, blur 4]
 * requested together decode once and round once. Animated images (PXL_FLAG_ANIMATE) are
 * processed frame by frame and stay animated; previews pass through the chain.
 *
 * Shapes: edges are anti-aliased by exact pixel coverage (an edge pixel keeps the
 * fraction of its area inside the shape, within 1/32; pixels wholly inside keep their
 * values); a radius over half the shorter side is clamped to it, however large (INFINITY
 * included: the shorter sides become half circles); a border is drawn inside the shape,
 * over the image, its width clamped the same way (so a border that wide fills the shape).
 *
 * A step wrong whatever the image (a negative or NaN radius or border width, a negative
 * crop origin, a crop size of 0, a sigma over PXL_MAX_BLUR_SIGMA, a rotation other than
 * 90/180/270, an unknown kind, an unregistered custom id, more than PXL_MAX_PROCESSORS
 * steps) fails pxl_load, pxl_lookup, pxl_prefetch and tables with PXL_E_INVALID_ARGUMENT
 * before any work; the message naming the step goes to pxl_config.log (PXL_LOG_ERROR):
 * once per call of pxl_load, pxl_lookup or pxl_prefetch, and for a table once per row while
 * the row stays refused for that reason (not on every pxl_table_set_visible that reaches
 * it again); a table's row_fn gets it as the row's result->message. A crop outside the image as
 * it turns out is that request's result: PXL_E_INVALID_ARGUMENT with a message.
 * ------------------------------------------------------------------------------- */

#define PXL_MAX_PROCESSORS 16   /* steps in one chain */
#define PXL_MAX_BLUR_SIGMA 250  /* the largest blur sigma, in pixels */

/* What one step of a chain does (pxl_processor.kind). */
typedef enum pxl_processor_kind {
  PXL_PROCESS_CIRCLE = 1, /* the centred min(w, h) square cut to its disc; optional border */
  PXL_PROCESS_ROUND = 2,  /* rounded corners: radius_tl, radius_tr, radius_br, radius_bl
                             (output pixels; the same value four times for one radius);
                             optional border */
  PXL_PROCESS_BLUR = 3,   /* Gaussian blur of sigma output pixels (0: none), edges extended;
                             its cost does not grow with sigma */
  PXL_PROCESS_CROP = 4,   /* the rectangle x, y, width, height of the image as it is at this
                             step */
  PXL_PROCESS_ROTATE = 5, /* clockwise by degrees: 90, 180 or 270 */
  PXL_PROCESS_FLIP = 6,   /* vertical 0: mirror left-right; 1: top-bottom */
  PXL_PROCESS_GRAY = 7,   /* luma with PXL_FORMAT_GRAY8's weights (BT.601); alpha kept */
  PXL_PROCESS_TINT = 8,   /* color composited source-atop: covers the pixels, keeps alpha */
  PXL_PROCESS_CUSTOM = 9  /* the processor registered under id (pxl_loader_add_processor) */
} pxl_processor_kind;

/* One step of a chain. Fixed layout (later versions add kinds, not fields): fields a kind
 * does not use are ignored; zero the struct first (memset or `= {0}`). */
typedef struct pxl_processor {
  int32_t kind;          /* pxl_processor_kind */
  uint32_t color;        /* 0xRRGGBBAA, straight alpha: the border (CIRCLE, ROUND; used when
                            border_width > 0) or the tint (TINT) */
  double radius_tl;      /* ROUND: corner radii, >= 0 (clamped): top-left, */
  double radius_tr;      /* top-right, */
  double radius_br;      /* bottom-right, */
  double radius_bl;      /* bottom-left */
  double border_width;   /* CIRCLE, ROUND: >= 0 (clamped as a radius); 0 for none */
  double sigma;          /* BLUR: 0 ... PXL_MAX_BLUR_SIGMA */
  int32_t x;             /* CROP: origin, >= 0 */
  int32_t y;                 /* CROP: origin, >= 0 */
  int32_t width;         /* CROP: size, > 0 */
  int32_t height;            /* CROP: size, > 0 */
  int32_t degrees;       /* ROTATE: 90, 180 or 270 */
  int32_t vertical;      /* FLIP: 0 or 1 */
  const char *id;        /* CUSTOM: a registered id; copied */
} pxl_processor;

/* One frame handed to a custom processor, on a decoder thread. */
typedef struct pxl_processor_frame {
  size_t struct_size;            /* sizeof(pxl_processor_frame) of the library */
  uint8_t *pixels;               /* premultiplied RGBA8, the frame's own copy: change it in
                                    place, or write the buffer pxl_processor_frame_resize
                                    gives (this field then points to it) */
  int32_t width;                 /* of pixels */
  int32_t height;            /* of pixels */
  int32_t stride;                /* width * 4 */
  int32_t frame_index;           /* 0 for a still image */
  int32_t frame_count;           /* 1 for a still image */
  const uint8_t *input;          /* the input pixels, readable until the call returns, also
                                    after a resize (input_width x input_height) */
  int32_t input_width;       /* of input */
  int32_t input_height;      /* of input */
  const volatile int32_t *cancelled; /* becomes non-zero when no request needs the result
                                    any more (cancelled, unregistered, loader freed): poll
                                    it in long work, with an atomic load (another thread
                                    raises it: __atomic_load_n(frame->cancelled,
                                    __ATOMIC_ACQUIRE), or C11's atomic_load_explicit), and
                                    return PXL_E_CANCELLED */
  void *internal;                /* the library's */
} pxl_processor_frame;

/* A custom processor: processes frame in place (or into a resized output) and returns
 * PXL_OK, or any other status, which becomes the result of the requests that need this
 * step (one not defined here as PXL_E_IO: "Extensions"), with message (NUL-terminated,
 * at most message_size bytes) when the callback writes one. May run on several decoder threads at once, for different images: it must
 * be thread safe. It must not call back into the loader. */
typedef pxl_status (*pxl_processor_callback)(pxl_processor_frame *frame, char *message, size_t message_size,
                                             void *user_data);

/* Called once with a custom processor's user_data when its registration is retired;
 * never when pxl_loader_add_processor fails ("Extensions"). */
typedef void (*pxl_processor_destroy_fn)(void *user_data);

/* Gives the frame a new, zeroed output buffer of width x height (premultiplied RGBA8,
 * stride width * 4): frame->pixels, width, height and stride describe it; the input stays
 * at frame->input. Returns the buffer, or NULL (width or height < 1, more than the
 * loader's max_pixels, out of memory: the frame is unchanged). Only inside the callback,
 * on its frame. Since 0.5.0. */
PXL_API uint8_t *pxl_processor_frame_resize(pxl_processor_frame *frame, int32_t width, int32_t height);

/* Registers a custom processor under id (1 to 256 bytes, any text; copied), named by
 * requests with PXL_PROCESS_CUSTOM. version is part of the cache keys: register a new
 * version when its output changes. Registering an id again replaces the registration
 * (the old one is retired as by pxl_loader_remove_processor). destroy (optional) is
 * called with user_data exactly once, when the registration is retired and no call of it
 * is running: never while or after a callback runs, and at the latest inside
 * pxl_loader_free. Returns PXL_OK, PXL_E_INVALID_ARGUMENT (NULL loader, id or process; a
 * bad id) or PXL_E_LOADER_CLOSED. On failure destroy is not called: user_data stays the
 * caller's to free, as 0.5.0 promised ("Extensions"). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_loader_add_processor(pxl_loader *loader, const char *id, uint32_t version,
                                            pxl_processor_callback process, void *user_data,
                                            pxl_processor_destroy_fn destroy);

/* Retires the processor id: later requests naming it fail with PXL_E_INVALID_ARGUMENT;
 * accepted requests that have not run it yet end with PXL_E_CANCELLED, a call under way
 * sees frame->cancelled raised; destroy runs once no call is running (maybe on a decoder
 * thread). Returns PXL_OK, PXL_E_NOT_FOUND or PXL_E_INVALID_ARGUMENT. Any thread, not from
 * the processor's own callback. Since 0.5.0. */
PXL_API pxl_status pxl_loader_remove_processor(pxl_loader *loader, const char *id);

/* ---------------------------------------------------------------------------------
 * Request metrics (Since 0.5.0): what each request cost, stage by stage.
 *
 * Every final result (pxl_callback, and a table's row_fn for a row's result) has a
 * pxl_metrics, read with pxl_result_metrics() inside that callback. A request that failed
 * or was cancelled has what was measured up to then; 0 is "not reached" or "not
 * measured". Requests merged into shared work (joined) report that work's figures. Times
 * are microseconds; the network's are libcurl's (CURLINFO_*_TIME_T) as phases, one after
 * the other. Filling them costs a few clock reads per request; nothing is copied unless
 * the host asks.
 * ------------------------------------------------------------------------------- */

/* Which tier answered (pxl_metrics.tier). pxl_result.source keeps its meaning; this one
 * tells disk variants, disk originals, files and 304s apart. Since 0.5.0. */
typedef enum pxl_tier {
  PXL_TIER_NONE = 0,         /* none answered (an error before any did, a cancel) */
  PXL_TIER_MEMORY = 1,       /* the memory cache */
  PXL_TIER_DISK_VARIANT = 2, /* a decoded thumbnail the disk cache kept: no decode */
  PXL_TIER_DISK = 3,         /* the disk cache's encoded original, decoded */
  PXL_TIER_REVALIDATED = 4,  /* the disk cache's original after a 304 Not Modified */
  PXL_TIER_NETWORK = 5,      /* downloaded over http(s) */
  PXL_TIER_FILE = 6,         /* read from a file:// URL */
  PXL_TIER_DATA = 7,         /* a data: URL (PXL_SCHEME_DATA) */
  PXL_TIER_FETCHER = 8       /* a host fetcher (pxl_loader_add_fetcher) */
} pxl_tier;

/* What one request cost. Filled by pxl_result_metrics; a growable struct (fields are added
 * at the end): set struct_size to sizeof(pxl_metrics) first. Since 0.5.0. */
typedef struct pxl_metrics {
  size_t struct_size;          /* set by the caller; on return, the bytes filled */
  int32_t tier;                /* pxl_tier */
  int32_t joined;              /* 1: it joined a download or decode another request started */
  uint64_t slot_wait_us;       /* waiting for a network slot (overall, per host), after any
                                  start delay, over all attempts */
  uint64_t dns_us;             /* name lookup */
  uint64_t connect_us;         /* TCP connect */
  uint64_t tls_us;             /* TLS handshake */
  uint64_t first_byte_us;      /* from the request sent to the response's first byte */
  uint64_t transfer_us;        /* from the first byte to the last */
  uint64_t disk_read_us;       /* the disk cache's lookups, from asking to the answer */
  uint64_t decode_us;          /* decoding (on a decoder thread); for a JPEG or PNG decoded
                                  as it arrived, only what ran after its last byte (the rest
                                  ran during transfer_us) */
  uint64_t process_us;         /* processors (0 without any) */
  uint64_t queue_wait_us;      /* from the result posted to its queue to the callback */
  uint64_t bytes_received;     /* body bytes its transfer received, as
                                  pxl_stats.bytes_downloaded counts them (http(s) and
                                  file://); 0 for a 304, a data: URL and a fetcher */
  int32_t http_status;         /* the last HTTP status seen, 0 if none */
  int32_t http_version;        /* 10, 11, 20, 30 for HTTP/1.0, 1.1, 2, 3; 0 if none */
  int32_t redirects;           /* redirects followed */
  int32_t connection_reused;   /* 1: the transfer reused an open connection */
  uint64_t decoded_bytes;      /* pixel bytes this request's decode produced (0: none ran) */
  uint64_t delivered_bytes;    /* pixel bytes of the image delivered (0: none) */
  /* Since 0.6.0 (check struct_size before reading). */
  uint64_t worker_us;          /* of decode_us: waiting on the decode worker, starting one
                                  included ("Isolation") */
  int32_t isolated;            /* 1: its decode ran in a confined worker (also when the
                                  worker failed: PXL_E_DECODER_FAILED) */
  /* Since 0.6.0 (check struct_size before reading). */
  uint64_t other_us;           /* every microsecond from intake to the callback that is in
                                  no other stage field: intake and memory-cache lookups, a
                                  start delay, retry backoffs and the attempts before the
                                  last, hand-offs between threads (waiting for a decode
                                  thread included), storing the download on disk, posting
                                  the result */
  uint64_t total_us;           /* from intake (pxl_load; for a table's row, when the
                                  table started its load) to the callback; always exactly slot_wait_us +
                                  dns_us + connect_us + tls_us + first_byte_us + transfer_us
                                  + disk_read_us + decode_us + process_us + queue_wait_us +
                                  other_us (worker_us is part of decode_us). A joined
                                  request counts from the intake of the request that started
                                  the work it reports; where the stages' clocks (libcurl's)
                                  overlap, the stages' sum with other_us 0 */
  uint64_t after_last_byte_us; /* from the transfer's last byte to the callback starting:
                                  what decoding (a JPEG, PNG or still WebP is decoded as
                                  it arrives, in the host's process),
                                  processing and delivery left for after the download; 0
                                  without a transfer (a cache hit, data:, a fetcher) */
} pxl_metrics;

/* The size of a 0.5.0 pxl_metrics (up to delivered_bytes): the smallest struct_size taken. */
#define PXL_METRICS_SIZE_0_5 (offsetof(pxl_metrics, delivered_bytes) + sizeof(uint64_t))

/* Copies the metrics of the request whose final callback received result into *metrics
 * (set metrics->struct_size first; from PXL_METRICS_SIZE_0_5 up). Valid only inside that
 * callback, on its thread, with the result pointer it was given (not a copy). Returns
 * PXL_OK; PXL_E_NOT_FOUND for a result that has none (a preview or placeholder, a copy,
 * a callback that returned); PXL_E_INVALID_ARGUMENT for NULL or a bad struct_size. Since
 * 0.5.0. */
PXL_API pxl_status pxl_result_metrics(const pxl_result *result, pxl_metrics *metrics);

/* ---------------------------------------------------------------------------------
 * Placeholders (Since 0.5.0): BlurHash and ThumbHash, the tiny images a server sends
 * with an image's URL to draw before it arrives. Synchronous, on the caller's thread,
 * any thread: a 32x32 decode takes microseconds.
 * ------------------------------------------------------------------------------- */

/* What a placeholder's bytes are (pxl_request.placeholder_kind, pxl_placeholder_decode). */
typedef enum pxl_placeholder_kind {
  PXL_PLACEHOLDER_NONE = 0,  /* no placeholder */
  PXL_PLACEHOLDER_BLURHASH = 1,  /* bytes: the BlurHash text (ASCII, base 83) */
  PXL_PLACEHOLDER_THUMBHASH = 2  /* bytes: the ThumbHash's raw bytes (not base64) */
} pxl_placeholder_kind;

/* The largest placeholder decoded, each way; and the most bytes an encoding takes (a
 * BlurHash of 9x9 components is 166 characters). Since 0.5.0. */
#define PXL_PLACEHOLDER_MAX_SIDE 256
#define PXL_PLACEHOLDER_MAX_BYTES 166

/* Decodes a placeholder into a new width x height PXL_FORMAT_RGBA8 (straight alpha) image
 * (1..PXL_PLACEHOLDER_MAX_SIDE each way) in *image_out (release it). Returns PXL_OK;
 * PXL_E_CORRUPT_IMAGE for a malformed hash (a wrong length, however long; characters
 * outside base 83; values out of range); PXL_E_INVALID_ARGUMENT for an unknown kind, NULL
 * bytes or image_out, or a size out of range. *image_out is NULL on an error. Any thread.
 * Since 0.5.0. */
PXL_API pxl_status pxl_placeholder_decode(int32_t kind, const void *bytes, size_t length,
                                          int32_t width, int32_t height, pxl_image **image_out);

/* The width / height ratio the hash records, to pick a decode size: a ThumbHash's
 * (approximate, as its reference gives it); 1 for a BlurHash, which records none. Returns
 * PXL_OK, PXL_E_CORRUPT_IMAGE or PXL_E_INVALID_ARGUMENT as pxl_placeholder_decode. Any
 * thread. Since 0.5.0. */
PXL_API pxl_status pxl_placeholder_aspect_ratio(int32_t kind, const void *bytes, size_t length,
                                                double *ratio_out);

/* Encodes an image (any format; its first frame; read from a copy scaled to fit 100x100)
 * into out (capacity bytes; PXL_PLACEHOLDER_MAX_BYTES + 1 always suffice): a BlurHash of
 * components_x x components_y (1..9 each; 4 and 3 are usual), NUL-terminated text, or a
 * ThumbHash's raw bytes (components ignored). *length_out receives the bytes written (no
 * NUL). Returns PXL_OK, or PXL_E_INVALID_ARGUMENT (NULL, unknown kind, components out of
 * range, capacity too small). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_placeholder_encode(int32_t kind, const pxl_image *image, int32_t components_x,
                                          int32_t components_y, uint8_t *out, size_t capacity,
                                          size_t *length_out);

/* ---------------------------------------------------------------------------------
 * Fetchers: the host's own schemes. Since 0.5.0.
 *
 * A fetcher serves the URLs of one scheme ("app:", "db://...") from the host's own
 * storage: a database blob, an archive member, an encrypted file. Such a request goes
 * through the loader as any other: merged by cache key (one start per key however many
 * requests want it), ranked by priority, kept in the memory cache, in the disk cache when
 * the fetcher allows it, with progress, previews and tables. The URL is handed to the
 * fetcher as the host wrote it (its scheme lower-cased), and is the cache key as for
 * http, so a URL should name its bytes.
 *
 * Threads and order. start and cancel run on the loader's fetch thread (one thread for
 * all of a loader's fetchers), one at a time: start must return at once, handing blocking
 * work (SQLite, a file) to a thread of the host's. The host answers through the
 * pxl_fetch handle with pxl_fetch_write() and pxl_fetch_finish(), from any thread,
 * inside start or later. cancel is called at most once per handle and never before that
 * handle's start returned; destroy is called once, on the fetch thread, after the
 * fetcher's last start or cancel (after pxl_loader_remove_fetcher, or during
 * pxl_loader_free; never after a failed pxl_loader_add_fetcher). No fetcher
 * callback runs after pxl_loader_free() returns. Callbacks may call pxl_fetch_write and
 * pxl_fetch_finish but must not call pxl_loader_free.
 *
 * Ownership. Each start hands the host one pxl_fetch; it stays valid until the host
 * passes it to pxl_fetch_finish() (exactly once: that call releases it), also after the
 * request ended or the loader was freed. A fetch ends when the host finishes it, or
 * earlier: its last request was cancelled, timeout_ms passed since start (PXL_E_TIMEOUT),
 * the bytes went over max_body_bytes (PXL_E_BODY_TOO_LARGE), a thumbnail had all it
 * needed, the fetcher was removed or the loader freed (its requests end PXL_E_CANCELLED).
 * An early end calls cancel, telling the host to stop; from then on pxl_fetch_write and
 * pxl_fetch_finish do nothing and return PXL_E_CANCELLED (the handle must still be
 * finished to be released). cancel names the handle start was given, and may come after
 * the host finished it (the two can cross). A host that never answers loses only its
 * handle: timeout_ms (when not 0) ends the request.
 *
 * Misuse. A handle once finished is refused, also when a race of the host's makes the
 * call, and nothing happens: pxl_fetch_write or pxl_fetch_finish with it returns
 * PXL_E_INVALID_ARGUMENT. A handle is a checked number, not an address: it never names a
 * later fetch, and using a finished one reads no freed memory.
 * ------------------------------------------------------------------------------- */

/* One fetch a fetcher was asked for: a handle for pxl_fetch_write and pxl_fetch_finish. */
typedef struct pxl_fetch pxl_fetch;

/* Starts fetching url (borrowed for the call); must not block. Fetch thread. */
typedef void (*pxl_fetch_start_fn)(const char *url, pxl_fetch *fetch, void *user_data);
/* Tells the host to stop a fetch it was given (it must still finish the handle). */
typedef void (*pxl_fetch_cancel_fn)(pxl_fetch *fetch, void *user_data);
/* The fetcher is gone: free user_data. */
typedef void (*pxl_fetch_destroy_fn)(void *user_data);

/* A fetcher, for pxl_loader_add_fetcher() (copied). A struct that grows: fill it with
 * pxl_fetcher_init() first. */
typedef struct pxl_fetcher {
  size_t struct_size;           /* sizeof(pxl_fetcher); set by pxl_fetcher_init */
  pxl_fetch_start_fn start;     /* required */
  pxl_fetch_cancel_fn cancel;   /* NULL: the host is not told (its late answers are ignored) */
  pxl_fetch_destroy_fn destroy; /* NULL: nothing to free */
  void *user_data;              /* passed to the three callbacks */
  int32_t max_concurrent;       /* fetches started and not yet ended at once; default 8; more
                                   wait, highest priority first, then oldest */
  int32_t disk_cache;           /* 0 (default): its bytes are never written to the disk cache
                                   (memory cache only); 1: they are, as an http response's */
  int64_t disk_max_age_s;       /* with disk_cache: a stored copy is fresh this many seconds,
                                   then fetched again (as max-age; pxl_config's
                                   ignore_http_freshness keeps it until evicted); default 0:
                                   fresh until evicted */
} pxl_fetcher;

/* The size of a 0.5.0 pxl_fetcher (up to disk_max_age_s): the smallest struct_size taken. */
#define PXL_FETCHER_SIZE_0_5 (offsetof(pxl_fetcher, disk_max_age_s) + sizeof(int64_t))

/* Fills the first size bytes of *fetcher with the defaults above (NULL callbacks) and
 * sets struct_size, as pxl_config_init_size does. PXL_OK or PXL_E_INVALID_ARGUMENT (NULL,
 * a size below PXL_FETCHER_SIZE_0_5). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_fetcher_init_size(pxl_fetcher *fetcher, size_t size);
#define pxl_fetcher_init(fetcher) pxl_fetcher_init_size((fetcher), sizeof *(fetcher))

/* Serves URLs whose scheme is scheme (letters, digits, "+", "-", "."; any case) with
 * *fetcher; the scheme allow-list (pxl_config.allowed_schemes) lets them in. Returns
 * PXL_OK; PXL_E_INVALID_ARGUMENT for NULL arguments, a bad struct_size, no start, a
 * max_concurrent below 1, a negative disk_max_age_s, a malformed scheme, a scheme the
 * loader serves itself (http, https, file, data, or any scheme libcurl knows, such as ftp)
 * or one that has a fetcher already; PXL_E_LOADER_CLOSED; PXL_E_NO_MEMORY (the fetch
 * thread could not start). On failure destroy is not called: user_data stays the
 * caller's to free, as 0.5.0 promised ("Extensions"). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_loader_add_fetcher(pxl_loader *loader, const char *scheme, const pxl_fetcher *fetcher);

/* Removes the fetcher of scheme: its requests not yet answered end PXL_E_CANCELLED, the
 * fetches it started get cancel, then destroy runs, on the fetch thread (soon after this
 * returns, which does not wait for it); new requests of the scheme are refused
 * (PXL_E_SCHEME_NOT_ALLOWED). PXL_OK, PXL_E_INVALID_ARGUMENT (NULL) or PXL_E_NOT_FOUND
 * (no fetcher for scheme). Any thread, fetcher callbacks included. Since 0.5.0. */
PXL_API pxl_status pxl_loader_remove_fetcher(pxl_loader *loader, const char *scheme);

/* Appends len bytes (copied) to the fetch's body. Returns PXL_OK; PXL_E_CANCELLED when
 * the fetch has ended (the bytes are ignored: stop fetching); PXL_E_BODY_TOO_LARGE when
 * these bytes took it over max_body_bytes (the request fails so, and cancel is called);
 * PXL_E_INVALID_ARGUMENT for a NULL fetch, NULL data with len > 0, or a fetch already
 * finished (misuse: the bytes are ignored). A write racing its own fetch's finish on
 * another thread returns what comes first. Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_fetch_write(pxl_fetch *fetch, const void *data, size_t len);

/* Ends the fetch and releases the handle (never use it again): status PXL_OK delivers the
 * bytes written (to be decoded, sniffed as any response); any other status fails the
 * fetch's requests with it (an unknown number as PXL_E_IO) and message (NULL: the
 * status's text; copied). Returns PXL_OK; PXL_E_CANCELLED when the fetch had already
 * ended (the handle is released, nothing else happens); PXL_E_INVALID_ARGUMENT for NULL
 * or a fetch already finished (misuse: nothing happens; of finishes racing on several
 * threads the first counts). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_fetch_finish(pxl_fetch *fetch, pxl_status status, const char *message);

/* ---------------------------------------------------------------------------------
 * Request hook: tokens. Since 0.5.0.
 *
 * pxl_config.request_hook is the loader's authentication: it is asked before each
 * network transfer of an http(s) URL (the first attempt, every retry, every redirect hop
 * with that hop's URL) for "Name: value" lines to add to the transfer's headers, each
 * replacing any line of the same name (an "Authorization: Bearer ..." for example). It
 * is asked after the request's cache key was computed: what it adds is never part of a
 * cache key, so a refreshed token keeps serving the images the old one cached
 * (pxl_request.headers, in contrast, are part of the key's credential fingerprint). A
 * redirect hop to another host gets no request headers and none of the loader's
 * credential headers, but the hook is asked for it with its URL, and decides. When a
 * response is 401 or 403 the hook is asked once more, with that status and the headers
 * that got it, and the transfer is retried once with the answer (a later 401 or 403
 * fails it with PXL_E_HTTP): a host refreshes an expired token there.
 *
 * Threads. The hook runs on the loader's network thread and must return at once: it
 * either answers inside the call, or keeps the call and answers later from any thread
 * (after a refresh on its own thread). While a call waits, its transfer holds no
 * connection slot: other transfers run. A hook may call pxl_hook_answer and pxl_hook_fail
 * (any call's), but must not block, nor call pxl_loader_free. No hook call is made after
 * pxl_loader_free() returns.
 *
 * Ownership. Every call must be answered exactly once, with pxl_hook_answer() or
 * pxl_hook_fail(): that releases it. It stays valid until then, also after its request
 * was cancelled, it timed out, or the loader was freed; such a late answer does nothing
 * (PXL_E_CANCELLED). A call not answered within hook_timeout_ms (or timeout_ms, when
 * shorter and not 0) fails its request with PXL_E_TIMEOUT. A loader freed while calls
 * wait ends their requests PXL_E_CANCELLED, as any request still running.
 *
 * Misuse. A call once answered is refused, also when a race of the host's makes the
 * second answer, and nothing happens: pxl_hook_answer or pxl_hook_fail with it returns
 * PXL_E_INVALID_ARGUMENT (of answers racing on several threads the first counts). A call
 * is a checked number, not an address: it never names a later call, and answering one
 * already answered reads no freed memory.
 *
 * One refresh for many requests. When the token expires, many transfers get a 401 at
 * once, and each asks the hook with status 401. The host refreshes once: the first such
 * call starts the refresh (on the host's thread) and is kept, later calls are kept too
 * while it runs, and when the new token arrives the host answers every kept call with
 * it. A call whose headers already carry a newer token than the one that got the 401 is
 * answered at once with the current token. Calls with status 0 are answered at once
 * with the current token, or kept while a refresh runs.
 *
 * Secrets. The values of hook headers never appear in log lines, error messages or
 * metrics.
 * ------------------------------------------------------------------------------- */

/* Answers a hook call: the transfer goes on with the count lines of headers (copied; NULL
 * with count 0: none), each "Name: value" replacing the transfer's lines of that name or
 * added. Releases call (never use it again). Returns PXL_OK; PXL_E_CANCELLED when the call
 * no longer waits (its request was cancelled or timed out, the loader was freed): nothing
 * happens; PXL_E_INVALID_ARGUMENT for a NULL call or one already answered (misuse: nothing
 * happens), and for NULL headers with count > 0, more than 256 lines or a line without a
 * colon or with CR or LF (the request then fails with PXL_E_INVALID_ARGUMENT, and call is
 * released all the same). Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_hook_answer(pxl_hook_call *call, const char *const *headers, size_t count);

/* Answers a hook call by failing its request with status (PXL_OK or an unknown number
 * count as PXL_E_IO) and message (NULL: the status's text; copied; it must not hold the
 * secret). Releases call. Returns PXL_OK; PXL_E_CANCELLED when the call no longer waits;
 * PXL_E_INVALID_ARGUMENT for NULL or a call already answered (misuse: nothing happens).
 * Any thread. Since 0.5.0. */
PXL_API pxl_status pxl_hook_fail(pxl_hook_call *call, pxl_status status, const char *message);

#ifdef __cplusplus
}
#endif

#endif /* PIXLOAD_H */
