/*
 * pxl_codecs.h: the only door from Swift into libjpeg-turbo and libpng.
 *
 * Why this exists: both libraries report errors by longjmp(). A longjmp that unwinds
 * Swift frames is undefined behaviour (it skips Swift's retain/release and defer
 * bookkeeping), so every call into either library happens inside these C functions,
 * which own the setjmp point and turn a longjmp into a returned status. Swift never
 * calls libjpeg or libpng directly.
 *
 * Contract shared by every function below
 *  - Never crashes, never reads outside [data, data + size), never leaks, and always
 *    terminates on hostile input (see the limits documented per format).
 *  - Re-entrant and thread-safe: no global state; any number of decodes may run in
 *    parallel on different threads.
 *  - Messages are always NUL-terminated (when a buffer of capacity >= 1 is given).
 *  - Memory is bounded by max_pixels, which is checked on the declared size before any
 *    pixel buffer exists. Choose it knowing that a file of a few hundred bytes can
 *    declare that many pixels: the output takes width*height*channels bytes, and a
 *    progressive (multi-scan) JPEG also needs libjpeg's whole-image coefficient buffer,
 *    2 bytes per sample of every component (up to 6 bytes per pixel for 4:4:4). PNG
 *    needs the output plus a few rows, and libpng's per-chunk limit (8 MB).
 *  - Warnings the libraries recover from ("Premature end of JPEG file", CRC errors in
 *    ancillary PNG chunks, "iCCP: known incorrect sRGB profile", ...) are not errors:
 *    the decode succeeds and they are counted in pxl_codec_output.warnings.
 *
 * Decode settings (these are what the conformance corpus md5s were made with):
 *  - JPEG: JDCT_ISLOW, fancy upsampling on, libjpeg DCT scaling for 1/2, 1/4, 1/8.
 *    CMYK and YCCK are decoded as JCS_CMYK and converted like Pillow: every 4-component
 *    JPEG is treated as Adobe-inverted CMYK (Pillow's "CMYK;I"), then
 *    R = (255-K) - (255-K)*C/255 with Pillow's rounding (cmyk_to_layout, jpeg_shim.c).
 *  - PNG: palette/low-bit gray/tRNS expanded, gray -> RGB for the colour layouts,
 *    alpha 0xff where the source has none, 16-bit reduced with png_set_strip_16 (high
 *    byte), NO gamma correction, no background compositing, Adam7 deinterlaced.
 *  - GRAY layout: JPEG uses libjpeg's own luma (the Y channel for YCbCr sources,
 *    libjpeg's BT.601 rgb->gray for RGB sources). PNG colour sources are converted by
 *    the shim with exactly the same BT.601 integer formula libjpeg uses,
 *    Y = (19595 R + 38470 G + 7471 B + 32768) >> 16, on the stored (gamma-encoded)
 *    values, so JPEG and PNG agree; png_set_rgb_to_gray_fixed is deliberately not used
 *    because it converts through linear light whenever the file has a non-unity gAMA
 *    (up to 94 levels off on PngSuite's g03n2c08), i.e. it would gamma-correct.
 *  - No EXIF rotation is applied; orientation is reported so the caller can apply it.
 */
#ifndef PXL_CODECS_H
#define PXL_CODECS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pxl_codec_status {
  PXL_CODEC_OK = 0,
  PXL_CODEC_CORRUPT = 1,          /* the data cannot be decoded */
  PXL_CODEC_TOO_MANY_PIXELS = 2,  /* declared width*height > max_pixels: refused before ANY pixel buffer (and before jpeg_start_decompress).
                                     Also: a PNG dimension over 1,000,000 (libpng's default per-dimension limit, kept because
                                     libpng's row buffers grow with width), and a JPEG over libjpeg's 65500 px limit whose
                                     width*height exceeds max_pixels. */
  PXL_CODEC_UNSUPPORTED = 3,      /* valid but unsupported: 12-bit / 16-bit-precision JPEG, lossless JPEG, ...
                                     Also returned for invalid arguments (unknown layout, scale_denom not 1/2/4/8). */
  PXL_CODEC_NO_MEMORY = 4,
  PXL_CODEC_DECODER_FAILED = 5    /* never a shim's: the decode worker that ran it crashed, was killed or timed out
                                     (PXL_ISOLATION_ALL, IsolatedBuiltIns.swift); the message says how */
} pxl_codec_status;

typedef enum pxl_codec_layout {
  PXL_CODEC_RGBA = 0,  /* R,G,B,A straight alpha (0xff where the source has no alpha) */
  PXL_CODEC_BGRA = 1,  /* B,G,R,A straight alpha */
  PXL_CODEC_RGB = 2,
  PXL_CODEC_GRAY = 3   /* luma */
} pxl_codec_layout;

typedef struct pxl_codec_info {
  int32_t width, height;     /* declared, as stored (before orientation) */
  int32_t has_alpha;         /* 1 if pixels may have alpha < 255 (PNG alpha channel or tRNS) */
  int32_t orientation;       /* EXIF orientation 1..8 from JPEG APP1 "Exif\0\0" or PNG eXIf; 1 if absent or invalid */
  int32_t frame_count;       /* frames of an animation (WebP ANIM, GIF, AVIF image sequence); 1 for a still image */
  int32_t loop_count;        /* how often an animation plays: 0 = forever (also for stills) */
  int32_t gray;              /* 1: the file holds luma only (a JPEG of one component), so a GRAY decode loses
                                nothing an RGB one has (R = G = B = the luma, alpha 255); 0: unknown or colour */
} pxl_codec_info;

typedef struct pxl_codec_output {
  uint8_t *pixels;           /* malloc'd by the shim on success, freed by the caller with free(); NULL on failure */
  int32_t width, height, stride, channels;
  int32_t has_alpha;
  int32_t warnings;          /* number of warnings the library recovered from (not errors) */
  char message[256];         /* on failure: what was wrong, e.g. "JPEG: Bogus Huffman table definition"; on success: the last warning or "" */
  int32_t incomplete;        /* on success, 1: the image's data ended before its last pixel and the decoder filled the
                                rest (JPEG: libjpeg's "Premature end of JPEG file" or "premature end of data segment",
                                its missing blocks gray or smoothed; GIF: the file or a shown frame's LZW data ended,
                                the rest of the frame transparent, for an animation also a file that ends between
                                frames). PNG, WebP and AVIF never set it: their decoders refuse data that ends early
                                (PXL_CODEC_CORRUPT). Always a warning too. */
} pxl_codec_output;

/* The most progressive-JPEG scans a decode accepts. Each scan re-walks the whole
 * coefficient buffer, so a small hostile file with thousands of scans would take
 * minutes; real encoders emit about 10. Same guard and value libjpeg-turbo's own fuzzers
 * use (TJPARAM_SCANLIMIT). Exceeding it fails with PXL_CODEC_CORRUPT. */
#define PXL_JPEG_MAX_SCANS 500

/* Parses only the header (and EXIF) — cheap. On failure *info is zeroed except
 * orientation = 1. message/message_cap: optional (NULL/0), filled on failure and, on
 * success, with the last warning or "". */
pxl_codec_status pxl_jpeg_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap);

/* Full decode at 1/scale_denom (1,2,4,8) using libjpeg DCT scaling, straight into the
 * layout. max_pixels is checked on the declared (unscaled) size. Output width/height are
 * libjpeg's scaled sizes (ceil(declared / scale_denom)). On any failure *out holds
 * pixels = NULL and a message; on success the caller owns out->pixels. A progressive
 * Huffman-coded file's scans are entropy-decoded by jpeg_progressive.c inside libjpeg
 * (every JPEG entry point here, streaming included): libjpeg's coefficients, warnings and
 * errors, found faster. */
pxl_codec_status pxl_jpeg_decode(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom, uint64_t max_pixels, pxl_codec_output *out);

/* First-scan thumbnails. At 1/8 scale libjpeg's 1x1 inverse DCT reads only each block's
 * DC coefficient, and a progressive JPEG sends every DC coefficient (its first pass and
 * refinements) in scans of their own. So a progressive JPEG at scale_denom 8 is decoded
 * from a copy holding only its DC scans: the AC scans' entropy-coded data, where nearly
 * all the time goes, is skipped by a marker scan instead of being decoded. The pixels are
 * identical to the full decode's (block smoothing is off on that path; it would only
 * invent AC coefficients the 1x1 IDCT ignores). Any file the marker scan does not
 * understand (truncated, no EOI, odd markers) takes the full decode, with its warnings.
 * PXL_JPEG_ALL_SCANS forces the full decode (tests and benchmarks compare the two). */
#define PXL_JPEG_ALL_SCANS 0x1
pxl_codec_status pxl_jpeg_decode_with_options(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                              uint64_t max_pixels, uint32_t options, pxl_codec_output *out);

/* The DC scans of a progressive JPEG as a JPEG of its own (every marker segment but the
 * AC scans, then EOI), in a malloc'd buffer the caller frees. Returns its size, or 0 when
 * the file is not understood (not progressive, no EOI, a malformed segment) or lacks
 * some coefficient a 1/8 decode reads (then libjpeg's decode of the whole file, with its
 * block smoothing of what is missing, is the answer). Never reads outside [data, data+size). */
size_t pxl_jpeg_dc_scans(const uint8_t *data, size_t size, uint8_t **out);

/* Previews of a progressive JPEG still downloading: the length of the longest prefix of
 * [data, data+size) that ends just after a complete scan (the marker after its
 * entropy-coded data has arrived), and that prefix's scan count in *scans. Decoding the
 * prefix with an EOI appended gives what libjpeg's buffered-image mode shows at that scan
 * boundary. Returns 0 (and *scans 0) for a baseline JPEG, no complete scan yet, or
 * anything not understood. Never reads outside the buffer. */
size_t pxl_jpeg_progressive_prefix(const uint8_t *data, size_t size, int32_t *scans);

/* The 1/8 thumbnail of a progressive Huffman-coded JPEG as a baseline JPEG in a malloc'd
 * buffer the caller frees: the DC coefficients of every component whose 1/8 IDCT is 1x1
 * (4:4:4, 4:2:2, grayscale, luma), AC empty, and for 4:2:0-style chroma (a 2x2 IDCT) also
 * the AC coefficients that IDCT reads. Its size, or 0 when that does not apply (another
 * layout, arithmetic coding, a missing coefficient) or anything is unexpected. Decoded at
 * 1/8 it gives the progressive file's pixels without libjpeg's whole-image coefficient
 * buffer. */
size_t pxl_jpeg_dc_baseline(const uint8_t *data, size_t size, uint8_t **out);

/* pxl_jpeg_dc_baseline keeps its working memory (up to 32 MB) for the next decode; this
 * frees it. A loader's close calls it, so a host that is done loading holds none. */
void pxl_jpeg_dc_baseline_release(void);

/* The early end of a thumbnail's transfer: in a prefix of a progressive JPEG, the end of
 * the first complete scan after which every coefficient a 1/8 decode reads (see
 * pxl_jpeg_dc_scans) has its final precision, with the frame's size; 0 while more is
 * needed, and for anything else. The prefix up to there plus EOI decodes at 1/8 to the
 * same pixels as the whole file. */
size_t pxl_jpeg_first_scans_end(const uint8_t *data, size_t size, int32_t *width, int32_t *height);

/* Same as pxl_jpeg_read_info for PNG. orientation comes from an eXIf chunk placed before
 * IDAT (the only place the cheap header parse looks). */
pxl_codec_status pxl_png_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap);

/* Full-size decode of any PNG (all colour types, bit depths 1..16, palette+tRNS,
 * gray+alpha, Adam7) into the layout. The whole file is validated, including the chunks
 * after the image data up to IEND (a truncated tail is an error, as in libpng's
 * default reader). */
pxl_codec_status pxl_png_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels, pxl_codec_output *out);

/* pxl_png_decode with options. The image data of a clean 8-bit, non-interlaced PNG
 * without tRNS or palette (IDATs then IEND, nothing odd) is inflated by libdeflate and
 * unfiltered in SSE2 lanes (png_fast.c), about twice as fast as libpng's rows; every other
 * file, and any of those with anything unexpected, is libpng's. The pixels are the same.
 * PXL_PNG_LIBPNG_ONLY decodes every file with libpng; PXL_PNG_FAST_PATH_ONLY fails with
 * PXL_CODEC_UNSUPPORTED where the fast path does not apply (tests and benchmarks compare
 * the two). */
#define PXL_PNG_LIBPNG_ONLY 0x1
#define PXL_PNG_FAST_PATH_ONLY 0x2
pxl_codec_status pxl_png_decode_with_options(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                             uint32_t options, pxl_codec_output *out);

/* Receives one decoded row (y from 0 to height - 1, in order), width * channels bytes in
 * the layout, valid only during the call. Returns 0 to go on, non-zero to stop the decode
 * (which then fails as PXL_CODEC_CORRUPT, "stopped by the caller"). */
typedef int (*pxl_codec_row_fn)(void *user, int32_t y, const uint8_t *row);

/* pxl_png_decode, but each row goes to row_fn instead of into a bitmap: for a
 * non-interlaced image only one row exists at a time (a thumbnail never builds the
 * full-size bitmap). An interlaced image is decoded whole first (Adam7 needs every pass)
 * and then handed over row by row. On success out->pixels is NULL and the other fields
 * are set as by pxl_png_decode. */
pxl_codec_status pxl_png_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out);

/* pxl_jpeg_decode, but each row goes to row_fn instead of into a bitmap (as
 * pxl_png_decode_rows): only a few rows of the (DCT-scaled) image exist at a time, so a
 * thumbnail never allocates the scaled bitmap either. y runs over the scaled rows. On
 * success out->pixels is NULL and the other fields are set as by pxl_jpeg_decode. A
 * non-zero return from row_fn fails the decode as PXL_CODEC_CORRUPT. */
pxl_codec_status pxl_jpeg_decode_rows(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                      uint64_t max_pixels, pxl_codec_row_fn row_fn, void *user,
                                      pxl_codec_output *out);

/* Receives one decoded row of a region decode: columns [x0, x0 + its width) of row y. */
typedef int (*pxl_codec_region_row_fn)(void *user, int32_t y, int32_t x0, const uint8_t *row);

/* pxl_jpeg_decode_rows for a thumbnail that needs only the region [x, x + width) x
 * [y, y + height) of the (scaled) image: columns and rows far from it are not built
 * (libjpeg's jpeg_crop_scanline and jpeg_skip_scanlines), while every byte of the file is
 * still read and checked as by a whole decode. Rows are handed over in increasing y,
 * each starting at column x0 (an iMCU boundary at or left of x); the rows and columns of
 * the region are exactly those pxl_jpeg_decode builds (a margin around it is decoded for
 * that, and handed over too). out describes the whole scaled image, as pxl_jpeg_decode's. */
pxl_codec_status pxl_jpeg_decode_region(const uint8_t *data, size_t size, int32_t layout, int32_t scale_denom,
                                        uint64_t max_pixels, int32_t x, int32_t y, int32_t width, int32_t height,
                                        pxl_codec_region_row_fn row_fn, void *user, pxl_codec_output *out);

/* A JPEG decode fed as its bytes arrive (a download), with the pixels and status of the
 * whole decode of the same bytes: pxl_jpeg_decode when row_fn and region_fn are NULL,
 * else pxl_jpeg_decode_rows (row_fn) or pxl_jpeg_decode_region (region_fn and the
 * region), except that a region's rows above and below its margin are handed over too.
 * Each pxl_jpeg_stream_feed appends `size` bytes (at_end: the last) and decodes as far
 * as they go; *state then says whether it needs more (MORE), is over (DONE: out as the
 * whole decode fills it, out->pixels the caller's), or declined the file before any row
 * (DECLINED: a progressive JPEG at 1/8, cheaper decoded whole from its DC scans; an
 * arithmetic-coded one, whose decoder cannot suspend). A status
 * other than PXL_CODEC_OK ends it (out->message says why). *cancel (may be NULL), when
 * non-zero, stops it between strips of rows (PXL_CODEC_CORRUPT, "cancelled"). NULL from
 * _new: bad arguments or no memory. Free with pxl_jpeg_stream_free on every path. */
typedef struct pxl_jpeg_stream pxl_jpeg_stream;
enum { PXL_STREAM_MORE = 0, PXL_STREAM_DONE = 1, PXL_STREAM_DECLINED = 2 };
pxl_jpeg_stream *pxl_jpeg_stream_new(int32_t layout, int32_t scale_denom, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, pxl_codec_region_row_fn region_fn, void *user,
                                     int32_t x, int32_t y, int32_t width, int32_t height, const int32_t *cancel);
pxl_codec_status pxl_jpeg_stream_feed(pxl_jpeg_stream *s, const uint8_t *data, size_t size, int at_end,
                                      int *state, pxl_codec_output *out);
void pxl_jpeg_stream_free(pxl_jpeg_stream *s);
/* Streams made and not yet freed, in this process (tests: a cancelled decode's state is
 * freed). */
int64_t pxl_jpeg_streams_live(void);
/* The offset just past a JPEG's first SOS segment (its header, all a decode's plan
 * reads); 0 while the bytes end before it; -1 when the markers are not a plain sequence
 * of segments (such a file is decoded whole). */
int64_t pxl_jpeg_header_end(const uint8_t *data, size_t size);

/* The same for PNG, through libpng's progressive reader (rows only, no region): the
 * whole decode's result for a non-interlaced file that decodes cleanly to IEND with no
 * warning; anything else is DECLINED (at the latest when at_end comes without IEND), and
 * the caller decodes the whole body, which says what the file is. Rows may have reached
 * row_fn by then: a caller that declines starts its rows afresh. */
typedef struct pxl_png_stream pxl_png_stream;
pxl_png_stream *pxl_png_stream_new(int32_t layout, uint64_t max_pixels, pxl_codec_row_fn row_fn, void *user,
                                   const int32_t *cancel);
pxl_codec_status pxl_png_stream_feed(pxl_png_stream *s, const uint8_t *data, size_t size, int at_end, int *state,
                                     pxl_codec_output *out);
void pxl_png_stream_free(pxl_png_stream *s);
/* Just past a PNG's first IDAT chunk header; 0 while it has not arrived; -1
 * for a file the whole decode's chunk walk refuses. */
int64_t pxl_png_header_end(const uint8_t *data, size_t size);

/*
 * WebP (webp_shim.c, libwebp), GIF (gif_shim.c, giflib) and AVIF (avif_shim.c, libavif).
 * Every format X below provides the same functions, under the contract at the top of this
 * file (no library error path crosses into Swift; limits checked on the declared size
 * before any pixel buffer exists; straight alpha; never reads outside the buffer):
 *
 *   pxl_codec_status pxl_X_read_info(data, size, pxl_codec_info *info, char *message, size_t cap);
 *       The canvas size, has_alpha, orientation (AVIF irot/imir as the equivalent EXIF
 *       1..8; WebP's EXIF chunk; 1 otherwise), frame_count and loop_count.
 *   pxl_codec_status pxl_X_decode(data, size, int32_t layout, uint64_t max_pixels, pxl_codec_output *out);
 *       The first frame, composited on the full canvas (disposal and blending applied, as
 *       the reference decoder shows it), into the layout, as pxl_png_decode.
 *   pxl_codec_status pxl_X_decode_rows(data, size, int32_t layout, uint64_t max_pixels,
 *                                      pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out);
 *       The first frame's rows, in order, to row_fn (a thumbnail goes through the area
 *       resampler as PNG's does), as pxl_png_decode_rows.
 *   pxl_codec_status pxl_X_decode_frames(data, size, uint64_t max_pixels,
 *                                        pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out);
 *       Every frame of an animation in order (a still image: one frame), each composited
 *       on the canvas as RGBA, straight alpha. frame_fn returning non-zero stops the
 *       decode, which then succeeds with the frames given so far (the caller's memory
 *       bound). out describes the canvas; out->pixels stays NULL.
 *   pxl_codec_status pxl_X_color(data, size, pxl_codec_color *color);
 *       The colour information the file carries (see pxl_codec_color), for colour
 *       management; PXL_CODEC_OK with nothing set when it carries none.
 * JPEG and PNG provide pxl_jpeg_color and pxl_png_color too.
 */

/* Receives one composited frame: canvas width x height RGBA (stride bytes per row), valid
 * only during the call; duration in milliseconds as the file says it (0 allowed). */
typedef int (*pxl_codec_frame_fn)(void *user, int32_t index, const uint8_t *rgba, int32_t stride,
                                  int32_t duration_ms);

/* The colour information of a file. icc is malloc'd (free with pxl_codec_color_free). */
typedef struct pxl_codec_color {
  uint8_t *icc;              /* embedded ICC profile (JPEG APP2 chunks joined in order, PNG iCCP inflated,
                                WebP ICCP, AVIF colr 'prof'), or NULL */
  size_t icc_size;
  int32_t srgb;              /* 1: the file says sRGB outright (PNG sRGB chunk, nclx primaries 1 + transfer 13) */
  int32_t has_chrm;          /* PNG cHRM: chrm = white x, y, red x, y, green x, y, blue x, y in 1/100000 */
  int32_t chrm[8];
  int32_t gamma;             /* PNG gAMA in 1/100000 (45455 for sRGB-like); 0 if absent */
  int32_t cicp_primaries;    /* AVIF nclx (ITU-T H.273) colour primaries, transfer, matrix; 0 when absent */
  int32_t cicp_transfer;
  int32_t cicp_matrix;
} pxl_codec_color;
void pxl_codec_color_free(pxl_codec_color *color);

/*
 * Frame readers: an animation's composited frames one call at a time, for players that
 * decode frames on demand (pixload.h, "Animation players"). Each frame's pixels are those
 * pxl_X_decode_frames hands to its frame_fn for the same index.
 *
 *   pxl_X_frames *pxl_X_frames_open(data, size, max_pixels, pxl_codec_status *status, char *message, size_t cap);
 *       Parses the container and makes the decoder's state (for GIF: the canvas, a saved
 *       canvas for "restore to previous", giflib's reader); NULL with *status and the
 *       message on failure (as decode_frames fails before its first frame). The data must
 *       stay valid until close.
 *   pxl_codec_status pxl_X_frames_next(pxl_X_frames *reader, pxl_codec_frame *frame);
 *       The next frame: PXL_CODEC_OK with frame->rgba the canvas (valid until the next
 *       call or close), or PXL_CODEC_OK with frame->rgba NULL after the last frame (also
 *       where decode_frames ends with a warning); any other status: that frame failed
 *       (frame->message), and every later call ends. Starting over is closing and
 *       opening again.
 *   void pxl_X_frames_close(pxl_X_frames *reader);   NULL accepted.
 *   int32_t pxl_X_first_duration(data, size);
 *       The first frame's duration in ms without decoding any pixels (the container's
 *       records up to the first frame only), 0 for a still; -1 when it cannot be read.
 */
typedef struct pxl_codec_frame {
  const uint8_t *rgba;       /* the canvas, RGBA straight alpha; NULL: no more frames */
  int32_t stride, index, duration_ms;
  int32_t incomplete;        /* GIF: the data ended early (as pxl_codec_output.incomplete) */
  char message[256];         /* on failure: what was wrong; else the last warning or "" */
} pxl_codec_frame;

typedef struct pxl_gif_frames pxl_gif_frames;
pxl_gif_frames *pxl_gif_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                    pxl_codec_status *status, char *message, size_t message_cap);
pxl_codec_status pxl_gif_frames_next(pxl_gif_frames *reader, pxl_codec_frame *frame);
void pxl_gif_frames_close(pxl_gif_frames *reader);
int32_t pxl_gif_first_duration(const uint8_t *data, size_t size);

/* GIF (gif_shim.c, giflib 5.2): the functions above for format X = gif. gif_shim.c's
 * header comment says how frames are composited (transparent canvas, "background"
 * disposal clears to transparent), how truncated and corrupt frames end a decode, and
 * its limits on frame count and LZW work. */
pxl_codec_status pxl_gif_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message, size_t message_cap);
pxl_codec_status pxl_gif_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels, pxl_codec_output *out);
pxl_codec_status pxl_gif_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                     pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out);
pxl_codec_status pxl_gif_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                       pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out);
pxl_codec_status pxl_gif_color(const uint8_t *data, size_t size, pxl_codec_color *color);

/* The colour information of a JPEG (APP2 "ICC_PROFILE\0" chunks, joined by sequence
 * number; all of them must be there, numbered 1..count once each, or the profile is
 * ignored; at most PXL_ICC_MAX_BYTES) and of a PNG (iCCP as libpng inflates and checks
 * it, sRGB, cHRM, gAMA, all before IDAT). Only header bytes are read, no pixels; a file
 * with none of these pays a walk over its marker/chunk headers. PXL_CODEC_CORRUPT (with
 * nothing set) when the headers cannot be walked. */
#define PXL_ICC_MAX_BYTES ((size_t)4 << 20)
pxl_codec_status pxl_jpeg_color(const uint8_t *data, size_t size, pxl_codec_color *color);
pxl_codec_status pxl_png_color(const uint8_t *data, size_t size, pxl_codec_color *color);

/*
 * Colour management (color.c, lcms2): pixels described by a pxl_codec_color to sRGB,
 * relative colorimetric, 8 bits per channel, alpha untouched.
 *  - Which source: the ICC profile if any; else `srgb`; else nclx primaries + transfer;
 *    else PNG cHRM and gAMA (cHRM alone: the sRGB curve; gAMA alone: sRGB's primaries),
 *    as browsers apply them.
 *  - Nothing to do (get returns NULL, message ""): no colour information; sRGB said
 *    outright; nclx 1/13 (2, unspecified, counts as 1 and 13); an ICC profile, or
 *    cHRM/gAMA, whose colorants and curves are within tolerance of sRGB (color.c);
 *    PNG gAMA 45000..46000 (1/2.2, what encoders write beside or instead of sRGB) with
 *    sRGB's cHRM (within 0.005) or none;
 *    CMYK ICC profiles (the JPEG shim has already turned CMYK into RGB, as Pillow does,
 *    and the profile describes ink values no longer at hand: not applied).
 *  - Unusable (get returns NULL and says why in message, "colour profile not applied:
 *    ..."): an ICC profile lcms2 cannot read or convert, or of another colour space (Lab,
 *    ...), or a device link; unknown nclx codes; the HDR transfers PQ (16) and HLG (18),
 *    which would need tone mapping to SDR that pixload does not do. The decode still
 *    succeeds with the decoded values; the caller reports the message as a warning.
 *  - Otherwise a transform, reference-counted: release it. Transforms are made once per
 *    distinct source (an ICC profile's bytes, the numbers of the others) and kept in a
 *    small process-wide cache (16 sources, 4 MB of profiles); any number of threads may
 *    get and apply them at once.
 * apply converts width x height pixels in place, in the layout (RGBA/BGRA with
 * premultiplied alpha when premultiplied != 0). An RGB profile cannot convert GRAY pixels:
 * decode RGB and use apply_gray, which converts rgb in place and then writes the
 * BT.601 luma of the converted pixels to gray (the GRAY layout's formula; of the
 * unconverted ones when it fails, so gray is always written). is_gray: a
 * gray profile, which converts every layout (each colour channel alike). Both return 1,
 * or 0 with a message when the transform for that layout cannot be built.
 */
typedef struct pxl_color_transform pxl_color_transform;
pxl_color_transform *pxl_color_transform_get(const pxl_codec_color *color, char *message, size_t cap);
int32_t pxl_color_transform_is_gray(const pxl_color_transform *transform);
int pxl_color_transform_apply(pxl_color_transform *transform, uint8_t *pixels, int32_t width, int32_t height,
                              int32_t stride, int32_t layout, int32_t premultiplied, char *message, size_t cap);
int pxl_color_transform_apply_gray(pxl_color_transform *transform, uint8_t *rgb, int32_t width, int32_t height,
                                   uint8_t *gray, char *message, size_t cap);
void pxl_color_transform_release(pxl_color_transform *transform);
/* EXIF orientation (1-8; anything else: as stored) applied: a new malloc'd, tightly packed
 * buffer of the pixels turned upright (width and height trade places for 5-8), or NULL
 * without memory or on bad arguments (channels 1-4). */
uint8_t *pxl_orient(const uint8_t *src, int32_t width, int32_t height, int32_t channels, int32_t orientation);
/* count luma values as pixels of 3 (RGB) or 4 (RGBA/BGRA) bytes: R = G = B = Y, alpha 255,
 * as libjpeg converts a gray JPEG to those layouts. A new malloc'd buffer, or NULL. */
uint8_t *pxl_gray_expand(const uint8_t *gray, int32_t count, int32_t channels);

/* For tests: conversions built so far in this process (a matrix/TRC source's tables count
 * one; a gray profile's table one; a LUT-based ICC profile one lcms2 transform per layout
 * used), and emptying the cache. */
uint64_t pxl_color_transforms_built(void);
/* The matrix/TRC conversion's code path, for tests: 0 scalar, 1 AVX2 (x86-64 CPUs that have
 * it; the default there), both giving the same pixels; -1 back to the default. Returns the
 * path now used, or -1 if the CPU lacks the one asked for. */
int pxl_color_force_path(int32_t path);
void pxl_color_cache_clear(void);

/*
 * Area resampling: each output pixel is the coverage-weighted mean of the source pixels
 * under it, over a crop with fractional edges (resample.c says how it is computed).
 * Streamed: feed source rows in increasing y with pxl_resampler_add_row (which is a
 * pxl_codec_row_fn, so it can be given to the *_decode_rows functions directly); each
 * output row is finished as soon as its last source row has arrived, and memory is a
 * few output-width rows plus the output, whatever the source size.
 *
 * premultiply (4 channels, alpha last): each row is premultiplied ((c*a + 127) / 255)
 * before it is averaged, so transparent pixels do not darken their neighbours; the
 * output is then premultiplied too.
 *
 * One resampler is used by one thread at a time. new returns NULL on bad arguments or
 * without memory; finish hands over the malloc'd, tightly packed output (free() it), or
 * returns NULL if not every output row has been completed (a source that stopped early);
 * free accepts NULL and frees whatever finish did not hand over.
 */
typedef struct pxl_resampler pxl_resampler;
pxl_resampler *pxl_resampler_new(int32_t src_width, int32_t src_height, int32_t channels, double crop_x,
                                 double crop_y, double crop_width, double crop_height, int32_t out_width,
                                 int32_t out_height, int32_t premultiply);
int pxl_resampler_add_row(void *resampler, int32_t y, const uint8_t *row);
uint8_t *pxl_resampler_finish(pxl_resampler *resampler);
/* The source region the resampler reads (every tap falls inside it). */
void pxl_resampler_region(const pxl_resampler *resampler, int32_t *x, int32_t *y, int32_t *width, int32_t *height);
/* pxl_resampler_add_row for a row that starts at source column x0 (a pxl_codec_region_row_fn);
 * x0 must not exceed the region's x, and the row must reach the region's right edge. */
int pxl_resampler_add_row_at(void *resampler, int32_t y, int32_t x0, const uint8_t *row);

void pxl_resampler_free(pxl_resampler *resampler);
/* The arithmetic's code path (all compute the same pixels): x86-64 has SSE2 and, where
 * the CPU has it, AVX2; elsewhere scalar. Chosen when a resampler is made: the best the
 * CPU has, or PXL_RESAMPLE_PATH=scalar|sse2|avx2 from the environment. For tests:
 * force_path makes later resamplers use `path` (-1: back to the choice above) and
 * returns it, or -1 if the CPU lacks it; pxl_resampler_path says which one r uses. */
enum { PXL_RESAMPLE_SCALAR = 0, PXL_RESAMPLE_SSE2 = 1, PXL_RESAMPLE_AVX2 = 2 };
int pxl_resampler_force_path(int32_t path);
int32_t pxl_resampler_path(const pxl_resampler *resampler);
/* What it was made with (PXL_ISOLATION_ALL: the same resampler is made in the decode
 * worker): params = src_width, src_height, channels, out_width, out_height, premultiply;
 * crop = x, y, width, height. */
void pxl_resampler_params(const pxl_resampler *resampler, int32_t params[6], double crop[4]);
/* Takes output (malloc'd, out_width * out_height * channels: a resampler made with the
 * same parameters finished it, in the worker) as its result, for pxl_resampler_finish;
 * only before any row was added. 0: taken. */
int pxl_resampler_adopt(pxl_resampler *resampler, uint8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* PXL_CODECS_H */
