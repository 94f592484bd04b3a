/*
 * pxl_avif.h: AVIF (avif_shim.c, libavif 0.11), the functions of the per-format
 * interface described in pxl_codecs.h ("WebP ..., GIF ... and AVIF ..."), under the
 * contract at the top of that file. avif_shim.c's opening comment gives the decoder
 * settings and which pixels come out (avifdec's PNG output with -d 8).
 *
 * AVIF specifics:
 *  - orientation: irot/imir as the EXIF orientation (1..8) showing the stored pixels the
 *    same way; the pixels are never turned (libavif 0.11 does not apply them either).
 *  - frame_count: the frames of an image sequence (avis), 1 for a still.
 *  - loop_count: always 0 (forever): libavif 0.11 does not read the repetition count.
 *  - decode_frames: every frame covers the canvas; duration_ms is the frame's duration
 *    rounded to milliseconds, 0 for a still image. A frame that fails to decode (a
 *    truncated sequence) fails the call, after the frames before it were handed over.
 *  - sequences may declare at most 100,000 frames (avif_shim.c: PXL_AVIF_MAX_FRAMES);
 *    more fail as PXL_CODEC_CORRUPT ("Exceeded avifDecoder's imageCountLimit").
 *  - libavif's own limits (16384 x 16384 pixels, 32768 per side) report
 *    PXL_CODEC_TOO_MANY_PIXELS, whatever max_pixels allows.
 *  - color: the colr 'prof' ICC profile, and the CICP of the colr 'nclx' box or, when
 *    there is none, of the AV1 sequence header (2 = unspecified); srgb when primaries 1
 *    and transfer 13.
 */
#ifndef PXL_AVIF_H
#define PXL_AVIF_H

#include "pxl_codecs.h"

#ifdef __cplusplus
extern "C" {
#endif

pxl_codec_status pxl_avif_read_info(const uint8_t *data, size_t size, pxl_codec_info *info, char *message,
                                    size_t message_cap);
pxl_codec_status pxl_avif_decode(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                 pxl_codec_output *out);
pxl_codec_status pxl_avif_decode_rows(const uint8_t *data, size_t size, int32_t layout, uint64_t max_pixels,
                                      pxl_codec_row_fn row_fn, void *user, pxl_codec_output *out);
pxl_codec_status pxl_avif_decode_frames(const uint8_t *data, size_t size, uint64_t max_pixels,
                                        pxl_codec_frame_fn frame_fn, void *user, pxl_codec_output *out);
typedef struct pxl_avif_frames pxl_avif_frames;
pxl_avif_frames *pxl_avif_frames_open(const uint8_t *data, size_t size, uint64_t max_pixels,
                                      pxl_codec_status *status, char *message, size_t message_cap);
pxl_codec_status pxl_avif_frames_next(pxl_avif_frames *reader, pxl_codec_frame *frame);
void pxl_avif_frames_close(pxl_avif_frames *reader);
int32_t pxl_avif_first_duration(const uint8_t *data, size_t size);
pxl_codec_status pxl_avif_color(const uint8_t *data, size_t size, pxl_codec_color *color);

#ifdef __cplusplus
}
#endif

#endif /* PXL_AVIF_H */
