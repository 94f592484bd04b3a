/*
 * The image data of the common PNG, decoded without libpng's row machinery.
 *
 * Why: on web-size photo PNGs libpng spends most of its time in zlib's inflate and in a
 * byte-at-a-time Paeth filter (Debian builds libpng without its SSE2 filters), about
 * 12 ms for a 944x944 RGB photo, as long as ten JPEG thumbnails. libdeflate inflates a
 * whole buffer about twice as fast as zlib, and the filters below work a pixel at a
 * time in SSE2 lanes, as libpng's own optional intel filters do, and runs of Paeth rows
 * (most of a photo) four or eight rows at a time, a pixel of each.
 *
 * Scope: what png_shim.c has already validated with libpng up to the first IDAT (the
 * signature, IHDR, every chunk before the image data and their warnings) stays libpng's;
 * this only replaces reading the image data, and only for the clean, common case: 8-bit,
 * not interlaced, gray / gray+alpha / RGB / RGBA without tRNS, consecutive IDATs with good
 * CRCs, a zlib stream that inflates to exactly the image with nothing left over, valid
 * filter bytes, and IEND (length 0, good CRC) right after the last IDAT. Anything else
 * (including a chunk between the IDATs and IEND, which libpng's png_read_end would look
 * at) returns "not handled" before a row is handed over, and png_shim.c decodes the file
 * with libpng as before, with libpng's messages and warnings. The pixels are the same as
 * libpng's transformations give (conformance.c checks both paths against the corpus).
 */
#include "pxl_png_fast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The inflated image data is held whole (libdeflate inflates from and into whole
 * buffers); larger images take libpng's streaming path, which keeps a few rows. */
#define PXL_PNG_FAST_MAX_RAW (64u << 20)

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The CRC stored after a chunk's data equals the CRC of its type and data (libdeflate's
 * CRC-32 is zlib's, computed with carry-less multiplies: several times faster). */
static int chunk_crc_ok(const uint8_t *chunk, uint32_t len) {
  uint32_t crc = libdeflate_crc32(0, chunk + 4, (size_t)len + 4);
  return crc == be32(chunk + 8 + len);
}

/* ---- unfiltering (PNG spec 9.2); prev is the previous unfiltered row or zeros ---- */

static void unfilter_sub(uint8_t *row, size_t n, int bpp) {
  for (size_t x = (size_t)bpp; x < n; x++) row[x] = (uint8_t)(row[x] + row[x - (size_t)bpp]);
}

static void unfilter_up(uint8_t *row, const uint8_t *prev, size_t n) {
  for (size_t x = 0; x < n; x++) row[x] = (uint8_t)(row[x] + prev[x]);
}

static void unfilter_avg(uint8_t *row, const uint8_t *prev, size_t n, int bpp) {
  size_t x = 0;
  for (; x < (size_t)bpp && x < n; x++) row[x] = (uint8_t)(row[x] + (prev[x] >> 1));
  for (; x < n; x++) row[x] = (uint8_t)(row[x] + ((row[x - (size_t)bpp] + prev[x]) >> 1));
}

static uint8_t paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

static void unfilter_paeth_scalar(uint8_t *row, const uint8_t *prev, size_t n, int bpp) {
  size_t x = 0;
  for (; x < (size_t)bpp && x < n; x++) row[x] = (uint8_t)(row[x] + prev[x]);
  for (; x < n; x++)
    row[x] = (uint8_t)(row[x] + paeth(row[x - (size_t)bpp], prev[x], prev[x - (size_t)bpp]));
}

#if defined(__SSE2__)
/* One pixel (3 or 4 bytes) per step in 16-bit lanes: the method of libpng's
 * intel/filter_sse2_intrinsics.c. Same result as the scalar filters, byte for byte. */
/* Always inlined into callers with a constant bpp, so the 3- and 4-byte copies are
 * single moves instead of byte loops. */
#define PXL_INLINE static inline __attribute__((always_inline))

/* A pixel is read and written as 4 bytes even when it has 3 (one move instead of a byte
 * loop): the 4th lane of what is added is kept zero, so the byte after a 3-byte pixel is
 * written back unchanged, and every row has at least one byte after it (the next row's
 * filter byte, or the slack at the end of the buffer). */
PXL_INLINE __m128i load_px(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)v), _mm_setzero_si128());
}

PXL_INLINE void store_px(uint8_t *p, __m128i v) {
  uint32_t w = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(v, v));
  memcpy(p, &w, 4);
}

PXL_INLINE __m128i lanes_of(int bpp) {
  return bpp == 3 ? _mm_setr_epi16(0xff, 0xff, 0xff, 0, 0, 0, 0, 0) : _mm_setr_epi16(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);
}

PXL_INLINE __m128i abs16(__m128i v) { return _mm_max_epi16(v, _mm_sub_epi16(_mm_setzero_si128(), v)); }

PXL_INLINE __m128i select16(__m128i mask, __m128i yes, __m128i no) {
  return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}

/* One Paeth pixel at x: a is the left pixel's result, c the pixel above-left; both move on. */
PXL_INLINE void paeth_step(uint8_t *row, const uint8_t *prev, size_t x, __m128i *a, __m128i *c, __m128i lanes) {
  __m128i b = _mm_and_si128(load_px(prev + x), lanes), d = load_px(row + x);
  __m128i pa = _mm_sub_epi16(b, *c);    /* p - a = b - c */
  __m128i pb = _mm_sub_epi16(*a, *c);   /* p - b = a - c */
  __m128i pc = _mm_add_epi16(pa, pb);   /* p - c */
  pa = abs16(pa); pb = abs16(pb); pc = abs16(pc);
  __m128i smallest = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
  __m128i nearest = select16(_mm_cmpeq_epi16(smallest, pa), *a,
                             select16(_mm_cmpeq_epi16(smallest, pb), b, *c));
  d = _mm_and_si128(_mm_add_epi16(d, nearest), _mm_set1_epi16(0xff));
  store_px(row + x, d);
  *a = _mm_and_si128(d, lanes);
  *c = b;
}

PXL_INLINE void unfilter_paeth_px(uint8_t *row, const uint8_t *prev, size_t n, int bpp) {
  __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128(), lanes = lanes_of(bpp);
  for (size_t x = 0; x < n; x += (size_t)bpp) paeth_step(row, prev, x, &a, &c, lanes);
}

/* Two Paeth rows at once: each pixel depends on the one to its left, so one row is a
 * chain of dependent steps the CPU cannot overlap; the next row's pixel x - 1 needs only
 * this row's pixels x - 1 and x - 2, so it runs one step behind, as a second chain. */
PXL_INLINE void unfilter_paeth2_px(uint8_t *row0, const uint8_t *prev0, uint8_t *row1, size_t n, int bpp) {
  __m128i a0 = _mm_setzero_si128(), c0 = _mm_setzero_si128(), lanes = lanes_of(bpp);
  __m128i a1 = _mm_setzero_si128(), c1 = _mm_setzero_si128();
  paeth_step(row0, prev0, 0, &a0, &c0, lanes);
  for (size_t x = (size_t)bpp; x < n; x += (size_t)bpp) {
    paeth_step(row0, prev0, x, &a0, &c0, lanes);
    paeth_step(row1, row0, x - (size_t)bpp, &a1, &c1, lanes);
  }
  paeth_step(row1, row0, n - (size_t)bpp, &a1, &c1, lanes);
}

PXL_INLINE void unfilter_sub_px(uint8_t *row, size_t n, int bpp) {
  __m128i a = _mm_setzero_si128(), lanes = lanes_of(bpp), mask = _mm_set1_epi16(0xff);
  for (size_t x = 0; x < n; x += (size_t)bpp) {
    __m128i d = _mm_and_si128(_mm_add_epi16(load_px(row + x), a), mask);
    store_px(row + x, d);
    a = _mm_and_si128(d, lanes);
  }
}

PXL_INLINE void unfilter_avg_px(uint8_t *row, const uint8_t *prev, size_t n, int bpp) {
  __m128i a = _mm_setzero_si128(), lanes = lanes_of(bpp), mask = _mm_set1_epi16(0xff);
  for (size_t x = 0; x < n; x += (size_t)bpp) {
    __m128i avg = _mm_srli_epi16(_mm_add_epi16(a, _mm_and_si128(load_px(prev + x), lanes)), 1);
    __m128i d = _mm_and_si128(_mm_add_epi16(load_px(row + x), avg), mask);
    store_px(row + x, d);
    a = _mm_and_si128(d, lanes);
  }
}

/* ---- runs of Paeth rows, four to a register, in bytes ----
 * Row k + 1's pixel x needs row k's pixels x and x - 1, so row k runs k pixels behind
 * row 0 and one step does a pixel of each of four rows, one per 32-bit slot: slot k's
 * a is its own last result, b (above) the last result of slot k - 1 (shifted up one
 * slot; slot 0's from prev), c (above-left) the b of the step before. One dependent
 * chain, four pixels per link, where unfilter_paeth2_px makes two chains of one pixel;
 * eight rows make two such chains side by side (photos are nearly all Paeth rows).
 * 944 x 944 all Paeth on the dev box: 0.9 ns a pixel, RGB or RGBA (AVX2, below: 0.6
 * and 0.5); two 16-bit chains took 6.3 (RGB: each 4-byte store overlapped the next
 * pixel's load) and 3.0 (RGBA). */

/* Paeth in unsigned bytes, 16 lanes, the same choice as paeth(): with pa = |b - c| and
 * pb = |a - c|, pc = |(a - c) + (b - c)| is pa + pb when a - c and b - c have the same
 * sign (then pc is never the smallest) and |pa - pb| otherwise, so no lane needs 9 bits:
 * a when pa <= pb and, in the second case, pa <= pb - pa; else b when the signs agree or
 * pb <= pa - pb; else c. Saturating differences stand for the comparisons. */
#define PXL_PAETH_BYTES(V, P, S)                                                            \
  {                                                                                          \
    V max_ac = P##_max_epu8(a, c), max_bc = P##_max_epu8(b, c);                              \
    V pb = P##_sub_epi8(max_ac, P##_min_epu8(a, c));                                         \
    V pa = P##_sub_epi8(max_bc, P##_min_epu8(b, c));                                         \
    V signs_differ = P##_xor_##S(P##_cmpeq_epi8(max_ac, a), P##_cmpeq_epi8(max_bc, b));      \
    V pb_minus_pa = P##_subs_epu8(pb, pa), pa_minus_pb = P##_subs_epu8(pa, pb);              \
    V pa_le_pb = P##_cmpeq_epi8(pa_minus_pb, P##_setzero_##S());                             \
    V pa_le_pc = P##_cmpeq_epi8(P##_min_epu8(pa, pb_minus_pa), pa); /* when signs differ */  \
    V pb_le_pc = P##_cmpeq_epi8(P##_min_epu8(pb, pa_minus_pb), pb); /* when signs differ */  \
    V take_a = P##_andnot_##S(P##_andnot_##S(pa_le_pc, signs_differ), pa_le_pb);            \
    V take_c = P##_andnot_##S(pb_le_pc, signs_differ);                                       \
    V b_or_c = P##_xor_##S(b, P##_and_##S(P##_xor_##S(b, c), take_c));                       \
    return P##_or_##S(P##_and_##S(take_a, a), P##_andnot_##S(take_a, b_or_c));              \
  }

PXL_INLINE __m128i paeth_bytes(__m128i a, __m128i b, __m128i c) PXL_PAETH_BYTES(__m128i, _mm, si128)

PXL_INLINE __m128i load32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return _mm_cvtsi32_si128((int)v);
}

PXL_INLINE void store32(uint8_t *p, __m128i v) {
  uint32_t w = (uint32_t)_mm_cvtsi128_si32(v);
  memcpy(p, &w, 4);
}

/* Slot k's pixel at step s is at at[k] + s * bpp (at[k] = row k - k pixels); slots
 * 4j..4j+3 are register j's. */
PXL_INLINE __m128i gather4(uint8_t *const *at, size_t o) {
  return _mm_unpacklo_epi64(_mm_unpacklo_epi32(load32(at[0] + o), load32(at[1] + o)),
                            _mm_unpacklo_epi32(load32(at[2] + o), load32(at[3] + o)));
}

PXL_INLINE void scatter4(uint8_t *const *at, size_t o, __m128i v) {
  store32(at[0] + o, v);
  store32(at[1] + o, _mm_shuffle_epi32(v, 1));
  store32(at[2] + o, _mm_shuffle_epi32(v, 2));
  store32(at[3] + o, _mm_shuffle_epi32(v, 3));
}

/* Slot 4j's b: the last result of the slot before it (register j - 1's top), else prev's. */
PXL_INLINE __m128i above(const __m128i *a, int j, __m128i up) {
  return _mm_or_si128(_mm_slli_si128(a[j], 4), j == 0 ? up : _mm_srli_si128(a[j - 1], 12));
}

/* A step where some slot has no pixel (the first and last 4 * regs - 1, or all of a
 * narrow image; regs up to 4): those slots read nothing, write nothing and leave 0 (the a and c a row
 * starts with). A 3-byte pixel moves as 4 bytes; its 4th byte (the next pixel's, or the
 * next row's filter byte) is masked off for the sums and written back as it was. */
PXL_INLINE void paeth_rows_edge_step(uint8_t *const *at, const uint8_t *prev, size_t s, size_t npx, int bpp, int regs,
                                     __m128i *a, __m128i *c) {
  uint32_t d[16] = {0}, valid[16] = {0}, up = 0, pixel = bpp == 3 ? 0xffffffu : 0xffffffffu;
  for (size_t k = 0; k < 4 * (size_t)regs; k++) {
    if (s < k || s - k >= npx) continue;
    valid[k] = 0xffffffffu;
    memcpy(&d[k], at[k] + s * (size_t)bpp, 4);
  }
  if (s < npx) memcpy(&up, prev + s * (size_t)bpp, 4);
  __m128i mask = _mm_set1_epi32((int)pixel), b[4];
  for (int j = 0; j < regs; j++) b[j] = above(a, j, _mm_cvtsi32_si128((int)(up & pixel)));
  for (int j = 0; j < regs; j++) {
    __m128i dv = _mm_loadu_si128((const __m128i *)(const void *)(d + 4 * j));
    __m128i keep = _mm_loadu_si128((const __m128i *)(const void *)(valid + 4 * j));
    __m128i r = _mm_and_si128(_mm_add_epi8(_mm_and_si128(dv, mask), paeth_bytes(a[j], b[j], c[j])), keep);
    _mm_storeu_si128((__m128i *)(void *)(d + 4 * j), _mm_or_si128(r, _mm_andnot_si128(mask, dv)));
    a[j] = r;
    c[j] = b[j];
  }
  for (size_t k = 0; k < 4 * (size_t)regs; k++)
    if (valid[k]) memcpy(at[k] + s * (size_t)bpp, &d[k], 4);
}

/* Rows row, row + stride, ... (4 * regs of them, stride apart), all Paeth; prev is the
 * row above the first. Two registers make two chains, each step's links side by side. */
PXL_INLINE void unfilter_paeth_rows_px(uint8_t *row, const uint8_t *prev, size_t stride, size_t n, int bpp, int regs) {
  size_t npx = n / (size_t)bpp, slots = 4 * (size_t)regs, s = 0;
  uint8_t *at[8];
  for (size_t k = 0; k < slots; k++) at[k] = row + k * (stride - (size_t)bpp);
  __m128i a[2] = {_mm_setzero_si128(), _mm_setzero_si128()}, c[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
  __m128i mask = _mm_set1_epi32(bpp == 3 ? 0xffffff : -1);
  for (; s < slots - 1 && s < npx + slots - 1; s++) paeth_rows_edge_step(at, prev, s, npx, bpp, regs, a, c);
  if (npx > slots - 1) {
    /* Each step's pixels are read before the previous step's are written: a 4-byte store
     * that overlaps the next 3-byte pixel's load would otherwise make the load wait for it.
     * Named registers, not arrays: compilers kept the arrays in memory. */
    __m128i a0 = a[0], a1 = a[1], c0 = c[0], c1 = c[1], d1 = _mm_setzero_si128();
    __m128i d0 = gather4(at, s * (size_t)bpp);
    if (regs == 2) d1 = gather4(at + 4, s * (size_t)bpp);
    for (; s < npx; s++) {
      size_t o = s * (size_t)bpp;
      __m128i up = load32(prev + o), b1 = _mm_setzero_si128(), r1 = _mm_setzero_si128();
      if (bpp == 3) up = _mm_and_si128(up, mask);
      __m128i b0 = _mm_or_si128(_mm_slli_si128(a0, 4), up);
      if (regs == 2) b1 = _mm_or_si128(_mm_slli_si128(a1, 4), _mm_srli_si128(a0, 12));
      __m128i r0 = _mm_add_epi8(bpp == 3 ? _mm_and_si128(d0, mask) : d0, paeth_bytes(a0, b0, c0));
      if (regs == 2) r1 = _mm_add_epi8(bpp == 3 ? _mm_and_si128(d1, mask) : d1, paeth_bytes(a1, b1, c1));
      __m128i out0 = bpp == 3 ? _mm_or_si128(r0, _mm_andnot_si128(mask, d0)) : r0;
      __m128i out1 = bpp == 3 ? _mm_or_si128(r1, _mm_andnot_si128(mask, d1)) : r1;
      a0 = r0; a1 = r1; c0 = b0; c1 = b1;
      /* The last step's slot 0 reads the next row's start: unused. */
      d0 = gather4(at, o + (size_t)bpp);
      if (regs == 2) d1 = gather4(at + 4, o + (size_t)bpp);
      scatter4(at, o, out0);
      if (regs == 2) scatter4(at + 4, o, out1);
    }
    a[0] = a0; a[1] = a1; c[0] = c0; c[1] = c1;
  }
  for (; s < npx + slots - 1; s++) paeth_rows_edge_step(at, prev, s, npx, bpp, regs, a, c);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PXL_PNG_AVX2 1
#include <immintrin.h>
#define PXL_AVX2 __attribute__((target("avx2")))

/* AVX2, chosen at run time (as resample.c does): sixteen rows, two chains of eight slots
 * in 256-bit registers. Moving the slots up one crosses the 128-bit halves: the 4 bytes
 * that come in at slot 0 (above, 16 bytes up from slot 4) are put in place by an insert
 * or a permute of the halves, then one alignr per half. */
PXL_AVX2 PXL_INLINE __m256i paeth_bytes256(__m256i a, __m256i b, __m256i c) PXL_PAETH_BYTES(__m256i, _mm256, si256)

PXL_AVX2 PXL_INLINE __m256i gather8(uint8_t *const *at, size_t o) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(gather4(at, o)), gather4(at + 4, o), 1);
}

PXL_AVX2 PXL_INLINE void scatter8(uint8_t *const *at, size_t o, __m256i v) {
  scatter4(at, o, _mm256_castsi256_si128(v));
  scatter4(at + 4, o, _mm256_extracti128_si256(v, 1));
}

PXL_AVX2 PXL_INLINE __m256i join(__m128i lo, __m128i hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

PXL_AVX2 PXL_INLINE void unfilter_paeth16_avx2_px(uint8_t *row, const uint8_t *prev, size_t stride, size_t n, int bpp) {
  size_t npx = n / (size_t)bpp, s = 0;
  uint8_t *at[16];
  for (size_t k = 0; k < 16; k++) at[k] = row + k * (stride - (size_t)bpp);
  __m128i a[4], c[4];
  for (int j = 0; j < 4; j++) a[j] = c[j] = _mm_setzero_si128();
  for (; s < 15 && s < npx + 15; s++) paeth_rows_edge_step(at, prev, s, npx, bpp, 4, a, c);
  if (npx > 15) {
    __m256i a0 = join(a[0], a[1]), a1 = join(a[2], a[3]), c0 = join(c[0], c[1]), c1 = join(c[2], c[3]);
    __m256i mask = _mm256_set1_epi32(bpp == 3 ? 0xffffff : -1);
    __m256i d0 = gather8(at, s * (size_t)bpp), d1 = gather8(at + 8, s * (size_t)bpp);
    for (; s < npx; s++) {
      size_t o = s * (size_t)bpp;
      __m128i up = load32(prev + o);
      if (bpp == 3) up = _mm_and_si128(up, _mm256_castsi256_si128(mask));
      __m256i above0 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_slli_si128(up, 12)),
                                               _mm256_castsi256_si128(a0), 1);
      __m256i b0 = _mm256_alignr_epi8(a0, above0, 12);
      __m256i b1 = _mm256_alignr_epi8(a1, _mm256_permute2x128_si256(a0, a1, 0x21), 12);
      __m256i r0 = _mm256_add_epi8(bpp == 3 ? _mm256_and_si256(d0, mask) : d0, paeth_bytes256(a0, b0, c0));
      __m256i r1 = _mm256_add_epi8(bpp == 3 ? _mm256_and_si256(d1, mask) : d1, paeth_bytes256(a1, b1, c1));
      __m256i out0 = bpp == 3 ? _mm256_or_si256(r0, _mm256_andnot_si256(mask, d0)) : r0;
      __m256i out1 = bpp == 3 ? _mm256_or_si256(r1, _mm256_andnot_si256(mask, d1)) : r1;
      a0 = r0; a1 = r1; c0 = b0; c1 = b1;
      d0 = gather8(at, o + (size_t)bpp);
      d1 = gather8(at + 8, o + (size_t)bpp);
      scatter8(at, o, out0);
      scatter8(at + 8, o, out1);
    }
    a[0] = _mm256_castsi256_si128(a0); a[1] = _mm256_extracti128_si256(a0, 1);
    a[2] = _mm256_castsi256_si128(a1); a[3] = _mm256_extracti128_si256(a1, 1);
    c[0] = _mm256_castsi256_si128(c0); c[1] = _mm256_extracti128_si256(c0, 1);
    c[2] = _mm256_castsi256_si128(c1); c[3] = _mm256_extracti128_si256(c1, 1);
  }
  for (; s < npx + 15; s++) paeth_rows_edge_step(at, prev, s, npx, bpp, 4, a, c);
}

PXL_AVX2 static void unfilter_paeth16_avx2(uint8_t *row, const uint8_t *prev, size_t n, int bpp) {
  if (bpp == 3) unfilter_paeth16_avx2_px(row, prev, n + 1, n, 3);
  else unfilter_paeth16_avx2_px(row, prev, n + 1, n, 4);
}

static int paeth_path = -1; /* set by the test: 0 SSE2 only, 1 AVX2 too (only where the CPU has it) */

static int paeth_avx2(void) {
  if (paeth_path >= 0) return paeth_path;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#endif

#define PXL_PER_BPP(call) do { if (bpp == 3) call(3); else call(4); } while (0)
#define PXL_PAETH(k) unfilter_paeth_px(row, prev, n, k)
#define PXL_SUB(k) unfilter_sub_px(row, n, k)
#define PXL_AVG(k) unfilter_avg_px(row, prev, n, k)
#define PXL_PAETH2(k) unfilter_paeth2_px(row, prev, next, n, k)

#define PXL_PAETH8(k) unfilter_paeth_rows_px(row, prev, n + 1, n, k, 2)
#define PXL_PAETH4(k) unfilter_paeth_rows_px(row, prev, n + 1, n, k, 1)

/* Of the Paeth rows row, row + n + 1, ... (run of them, the filter bytes between them
 * included), unfilters the first sixteen, eight, four or two here and returns how many;
 * 0: none. */
static uint32_t unfilter_paeth_run(uint8_t *row, const uint8_t *prev, size_t n, int bpp, uint32_t run) {
  if (bpp < 3 || run < 2) return 0;
#ifdef PXL_PNG_AVX2
  if (run >= 16 && paeth_avx2()) {
    unfilter_paeth16_avx2(row, prev, n, bpp);
    return 16;
  }
#endif
  if (run >= 8) {
    PXL_PER_BPP(PXL_PAETH8);
    return 8;
  }
  if (run >= 4) {
    PXL_PER_BPP(PXL_PAETH4);
    return 4;
  }
  uint8_t *next = row + n + 1;
  PXL_PER_BPP(PXL_PAETH2);
  return 2;
}
#else
static uint32_t unfilter_paeth_run(uint8_t *row, const uint8_t *prev, size_t n, int bpp, uint32_t run) {
  (void)row; (void)prev; (void)n; (void)bpp; (void)run;
  return 0;
}
#endif

/* 0 on success, -1 for an invalid filter type (never reached: checked beforehand). */
static int unfilter(uint8_t *row, const uint8_t *prev, size_t n, int bpp, int type) {
  switch (type) {
    case 0: return 0;
    case 2: unfilter_up(row, prev, n); return 0;
#if defined(__SSE2__)
    /* The pixel loops read and write whole pixels: n is a multiple of bpp here. */
    case 1: if (bpp >= 3) PXL_PER_BPP(PXL_SUB); else unfilter_sub(row, n, bpp); return 0;
    case 3: if (bpp >= 3) PXL_PER_BPP(PXL_AVG); else unfilter_avg(row, prev, n, bpp); return 0;
    case 4: if (bpp >= 3) PXL_PER_BPP(PXL_PAETH); else unfilter_paeth_scalar(row, prev, n, bpp); return 0;
#else
    case 1: unfilter_sub(row, n, bpp); return 0;
    case 3: unfilter_avg(row, prev, n, bpp); return 0;
    case 4: unfilter_paeth_scalar(row, prev, n, bpp); return 0;
#endif
    default: return -1;
  }
}

/* ---- the layouts, exactly as png_shim.c's libpng transformations make them ---- */

/* One unfiltered source row (src_channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) into the
 * layout: gray replicated to RGB (png_set_gray_to_rgb), alpha 0xff added where there is
 * none (png_set_add_alpha), alpha dropped (png_set_strip_alpha), B and R swapped
 * (png_set_bgr), GRAY from colour by the BT.601 formula png_shim.c's rgb_to_gray uses. */
static void convert_row(const uint8_t *s, uint8_t *d, uint32_t w, int src_channels, int32_t layout) {
  /* The two cases of nearly every thumbnail, as loops of their own. */
  if (layout == PXL_CODEC_RGBA && src_channels == 4) {
    memcpy(d, s, (size_t)w * 4);
    return;
  }
  if (layout == PXL_CODEC_RGBA && src_channels == 3) {
    for (uint32_t x = 0; x < w; x++, s += 3, d += 4) {
      d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = 0xff;
    }
    return;
  }
  int bgr = layout == PXL_CODEC_BGRA;
  for (uint32_t x = 0; x < w; x++, s += src_channels) {
    uint8_t r, g, b, a;
    if (src_channels <= 2) { r = g = b = s[0]; a = src_channels == 2 ? s[1] : 0xff; }
    else { r = s[0]; g = s[1]; b = s[2]; a = src_channels == 4 ? s[3] : 0xff; }
    switch (layout) {
      case PXL_CODEC_RGBA:
      case PXL_CODEC_BGRA:
        d[0] = bgr ? b : r; d[1] = g; d[2] = bgr ? r : b; d[3] = a;
        d += 4;
        break;
      case PXL_CODEC_RGB:
        d[0] = r; d[1] = g; d[2] = b;
        d += 3;
        break;
      default: /* GRAY */
        *d++ = src_channels <= 2 ? r : (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
        break;
    }
  }
}

pxl_png_fast_result pxl_png_fast_image_data(const uint8_t *data, size_t size, size_t idat_data, uint32_t w, uint32_t h,
                                            int color_type, int32_t layout, int32_t channels, pxl_codec_row_fn row_fn,
                                            void *user, uint8_t **pixels_out, char *error, size_t error_cap) {
  *pixels_out = NULL;
  int src_channels = color_type == 0 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : color_type == 6 ? 4 : 0;
  if (src_channels == 0 || w == 0 || h == 0) return PXL_PNG_FAST_NOT_HANDLED;
  size_t rowbytes = (size_t)w * (size_t)src_channels;
  uint64_t raw_size = (uint64_t)(rowbytes + 1) * h;
  if (raw_size > PXL_PNG_FAST_MAX_RAW) return PXL_PNG_FAST_NOT_HANDLED;

  /* The IDAT chunks from the one whose data libpng reached, then IEND. */
  if (idat_data < 8 || idat_data > size || memcmp(data + idat_data - 4, "IDAT", 4) != 0)
    return PXL_PNG_FAST_NOT_HANDLED;
  size_t pos = idat_data - 8, idat_bytes = 0, idat_chunks = 0;
  while (size - pos >= 12 && memcmp(data + pos + 4, "IDAT", 4) == 0) {
    uint32_t len = be32(data + pos);
    if ((uint64_t)len + 12 > size - pos || !chunk_crc_ok(data + pos, len)) return PXL_PNG_FAST_NOT_HANDLED;
    idat_bytes += len;
    idat_chunks++;
    pos += (size_t)len + 12;
  }
  static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
  if (size - pos < 12 || memcmp(data + pos, iend, 12) != 0) return PXL_PNG_FAST_NOT_HANDLED;

  /* One contiguous zlib stream: the chunk's data in place, or the chunks' data joined. */
  const uint8_t *stream = data + idat_data;
  uint8_t *joined = NULL;
  if (idat_chunks > 1) {
    joined = malloc(idat_bytes ? idat_bytes : 1);
    if (joined == NULL) return PXL_PNG_FAST_NOT_HANDLED;
    size_t at = 0;
    for (size_t p = idat_data - 8; p < pos;) {
      uint32_t len = be32(data + p);
      memcpy(joined + at, data + p + 8, len);
      at += len;
      p += (size_t)len + 12;
    }
    stream = joined;
  }
  uint8_t *raw = malloc((size_t)raw_size + 4); /* + the 4-byte pixel moves' slack */
  struct libdeflate_decompressor *inflater = libdeflate_alloc_decompressor();
  size_t used_in = 0, used_out = 0;
  enum libdeflate_result inflated = LIBDEFLATE_BAD_DATA;
  if (raw != NULL && inflater != NULL)
    inflated = libdeflate_zlib_decompress_ex(inflater, stream, idat_bytes, raw, (size_t)raw_size, &used_in, &used_out);
  libdeflate_free_decompressor(inflater);
  free(joined);
  /* Short, long, trailing data or a bad checksum: libpng says what is wrong, in its words. */
  int ok = inflated == LIBDEFLATE_SUCCESS && used_in == idat_bytes && used_out == raw_size;
  for (uint32_t y = 0; ok && y < h; y++) ok = raw[(size_t)y * (rowbytes + 1)] <= 4;
  if (!ok) {
    free(raw);
    return PXL_PNG_FAST_NOT_HANDLED;
  }

  /* From here on the file is known good: unfilter and convert every row. */
  size_t stride = (size_t)w * (size_t)channels;
  uint8_t *out = NULL, *line = NULL;
  if (row_fn == NULL) out = malloc((size_t)h * stride);
  else line = malloc(stride);
  uint8_t *zeros = calloc(rowbytes + 4, 1);
  if ((row_fn == NULL ? out : line) == NULL || zeros == NULL) {
    free(raw); free(out); free(line); free(zeros);
    snprintf(error, error_cap, "out of memory");
    return PXL_PNG_FAST_NO_MEMORY;
  }
  const uint8_t *prev = zeros;
  pxl_png_fast_result result = PXL_PNG_FAST_OK;
  int64_t unfiltered = -1;  /* the last row unfiltered (runs of Paeth rows go together) */
  for (uint32_t y = 0; y < h; y++) {
    uint8_t *row = raw + (size_t)y * (rowbytes + 1);
    if ((int64_t)y > unfiltered) {
      uint32_t run = 0, done = 0;
      while (run < 16 && y + run < h && row[(size_t)run * (rowbytes + 1)] == 4) run++;
      if (run >= 2) done = unfilter_paeth_run(row + 1, prev, rowbytes, src_channels, run);
      if (done == 0) {
        (void)unfilter(row + 1, prev, rowbytes, src_channels, row[0]);
        done = 1;
      }
      unfiltered = (int64_t)y + done - 1;
    }
    uint8_t *dst = row_fn == NULL ? out + (size_t)y * stride : line;
    convert_row(row + 1, dst, w, src_channels, layout);
    if (row_fn != NULL && row_fn(user, (int32_t)y, dst) != 0) {
      snprintf(error, error_cap, "stopped by the caller");
      result = PXL_PNG_FAST_STOPPED;
      break;
    }
    prev = row + 1;
  }
  free(raw); free(line); free(zeros);
  if (result == PXL_PNG_FAST_OK) *pixels_out = out;
  else free(out);
  return result;
}
