/* Internal to CCodecs: jpeg_progressive.c, libjpeg's progressive Huffman decoding
 * replaced by one that finds a refinement scan's nonzero coefficients from per-block masks
 * (see there for why and how it stays libjpeg's to the bit). */
#ifndef PXL_JPEG_PROGRESSIVE_H
#define PXL_JPEG_PROGRESSIVE_H

struct jpeg_decompress_struct;

/* Called from the progress monitor: during jpeg_start_decompress of a progressive
 * Huffman-coded file, before the first scan's data, puts this decoder in place of
 * libjpeg's and returns its state, which the caller frees with free() after
 * jpeg_destroy_decompress. NULL at every other call, for other files, when disabled, or
 * when its memory (1/16 of libjpeg's coefficient buffer) is not there: libjpeg's own
 * decoder then does the work. */
void *pxl_jpeg_progressive_install(struct jpeg_decompress_struct *cinfo);

/* Which progressive decoder decodes from now on use: 1 (the default) this one, with the
 * CPU's BMI2 and POPCNT where it has them; 2 this one without them; 0 libjpeg's own
 * (tests compare them, benchmarks time them). */
void pxl_jpeg_progressive_mode(int mode);

#endif
