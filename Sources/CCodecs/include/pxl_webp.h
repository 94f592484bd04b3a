/*
 * pxl_webp.h: WebP through libwebp (webp_shim.c), the per-format functions of the
 * interface block in pxl_codecs.h ("WebP (webp_shim.c, libwebp), GIF ... and AVIF"), under
 * the contract at the top of that file. A header of its own so that the WebP, GIF and AVIF
 * work does not collide in pxl_codecs.h.
 *
 * Decode settings (what the conformance md5s are made with, by dwebp's defaults): fancy
 * upsampling on, no dithering, no colour management, straight alpha. A still image goes
 * through WebPDecode; an animation's first frame (the still paths) and its frames
 * (decode_frames) through WebPAnimDecoder, which applies disposal and blending on a
 * transparent canvas. GRAY is converted from RGB with the BT.601 integer formula of
 * pxl_codecs.h (the one png_shim.c uses). Truncated or malformed containers are refused
 * by WebPDemux before any decoding; max_pixels is checked on the canvas size before any
 * pixel buffer exists (for an animation, only the canvas: every frame lies inside it).
 * Since 0.4.0.
 */
#ifndef PXL_WEBP_H
#define PXL_WEBP_H

#include "pxl_codecs.h"

#ifdef __cplusplus
extern "C" {
#endif

pxl_codec_status pxl_webp_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                    size_t message_cap);
pxl_codec_status pxl_webp_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                 pxl_codec_output *out);
pxl_codec_status pxl_webp_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                      pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out);
pxl_codec_status pxl_webp_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                        pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out);
typedef struct pxl_webp_frames pxl_webp_frames;
pxl_webp_frames *pxl_webp_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                      pxl_codec_status *status, char *message, size_t message_cap);
pxl_codec_status pxl_webp_frames_next(pxl_webp_frames *reader, pxl_codec_frame *frame);
void pxl_webp_frames_close(pxl_webp_frames *reader);
int32_t pxl_webp_first_duration(const uint8_t *data, size_t size);
pxl_codec_status pxl_webp_color(const uint8_t *data, size_t size, pxl_codec_color *color);

/* A still WebP decoded by libwebp's own scaler (WebPDecoderConfig use_scaling, after
 * use_cropping of [crop_x, crop_x + crop_width) x [crop_y, crop_y + crop_height) when
 * crop_width > 0) to exactly out_width x out_height, into the layout: a thumbnail without
 * the full-size bitmap, and without the RGB conversion of the pixels it drops. libwebp
 * averages in premultiplied space when the image has alpha. An animation is refused
 * (PXL_CODEC_UNSUPPORTED: its frames need compositing at full size first), as is a crop
 * outside the image. max_pixels is checked on the stored size and on the output size.
 * ImageDecoder does not use it: measured by `make bench-decode` (bench/webp_scaling.c, 60
 * lossy photos, 150x150 fill), cropping and scaling straight to the target takes 4.6 ms
 * against 6.1 ms for the full decode + area resampler, and scaling to twice the target
 * then resampling 5.7 ms, but both land further from the exact area average of the source
 * image (PSNR 40.7 and 42.1 dB against 42.6; libwebp rescales the YUV planes before the
 * chroma upsampling and snaps the crop to even pixels). On lossless files the direct path
 * is 11 % faster at about the same distance (45.96 against 45.90 dB, mean 0.52 against
 * 0.50 levels): not worth a second thumbnail path. Kept for that benchmark. */
pxl_codec_status pxl_webp_decode_scaled(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                        int32_t crop_x, int32_t crop_y, int32_t crop_width, int32_t crop_height,
                                        int32_t out_width, int32_t out_height, pxl_codec_output *out);

/* Decoding while the bytes arrive (pxl_codecs.h, "A JPEG decode fed as its bytes arrive",
 * and the PNG stream after it): a still WebP through libwebp's incremental decoder, with
 * the pixels, status and output of pxl_webp_decode (row_fn NULL) or pxl_webp_decode_rows
 * (rows reach row_fn as libwebp finishes them). It gives the whole decode's result only
 * for a file that decodes cleanly and whose info (pxl_webp_read_info) and colour
 * (pxl_webp_color) from all its bytes equal those from its first planned_size bytes
 * (pxl_webp_header_info / _header_color: what the caller planned from, e.g. an EXIF
 * orientation after the image data differs); anything else is DECLINED (at the latest at
 * at_end), as is an animation, a file over max_pixels (before any buffer) or one whose
 * buffer cannot be had; the caller decodes the whole body then. Rows may have reached
 * row_fn by then: a caller that declines starts its rows afresh. *cancel (may be NULL):
 * the next feed fails with PXL_CODEC_CORRUPT, "cancelled". The stream keeps its own copy
 * of the bytes. */
typedef struct pxl_webp_stream pxl_webp_stream;
pxl_webp_stream *pxl_webp_stream_new(int32_t layout, uint64_t max_pixels, size_t planned_size,
                                     pxl_codec_row_fn row_fn, void *user, const int32_t *cancel);
pxl_codec_status pxl_webp_stream_feed(pxl_webp_stream *s, const uint8_t *data, size_t size, int at_end, int *state,
                                      pxl_codec_output *out);
void pxl_webp_stream_free(pxl_webp_stream *s);
/* Streams made and not yet freed, in this process (tests). */
int64_t pxl_webp_streams_live(void);
/* The end of a still WebP's header: the container's chunks before the image (VP8X, ICCP,
 * ALPH, ...) and the first bytes of its bitstream, all a plan reads; 0 while they have not
 * arrived; -1 for an animation or bytes the demuxer refuses (decoded whole). */
int64_t pxl_webp_header_end(const uint8_t *data, size_t size);
/* pxl_webp_read_info and pxl_webp_color on such a header (bytes that may end inside the
 * image data): what they would say of the whole file if nothing after it changes them. */
pxl_codec_status pxl_webp_header_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                      size_t message_cap);
pxl_codec_status pxl_webp_header_color(const uint8_t *data, size_t size, pxl_codec_color *color);

#ifdef __cplusplus
}
#endif

#endif /* PXL_WEBP_H */
