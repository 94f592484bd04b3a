/*
 * The area resampler (see pxl_codecs.h, "Area resampling"), streamed row by row, in
 * fixed point with runtime CPU dispatch.
 *
 * Arithmetic (every path computes the same integers, so they agree to the bit):
 * - taps in double, as coverage of [lo, hi) over the source pixels, normalised, then
 *   quantised to 1/2^14 by rounding their running sum (so the weights of one output sum
 *   to exactly 2^14 and no weight is off by more than 2^-14);
 * - horizontal pass: sum of pixel * weight in int32, rounded to 8.7 fixed point
 *   ((sum + 64) >> 7, at most 255 * 128, an int16);
 * - vertical pass: sum of those * row weight in int32 (at most 255 * 2^21), rounded to
 *   the byte ((acc + 2^20) >> 21).
 * The result is within 1 level of the exact area average (Tests/codecs/resample_test.c
 * checks it against a double-precision reference on every path).
 *
 * Streaming: each source row is shrunk horizontally once (premultiplied on the fly when
 * asked, no premultiplied copy of the row) and added to the one or two output rows it
 * covers; an output row is written to the output, as bytes, by the addition of its last
 * source row (no separate pass), and there is no crop-sized buffer: a few output-width
 * rows, whatever the source size. Everything but the output is one allocation.
 *
 * Paths: x86-64 has SSE2 (the baseline) and AVX2 (chosen at run time with
 * __builtin_cpu_supports); elsewhere the portable scalar one. PXL_RESAMPLE_PATH=scalar,
 * sse2 or avx2 in the environment (read once) or pxl_resampler_force_path (tests) picks
 * one, never one the CPU lacks.
 */
#include "pxl_codecs.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PXL_RESAMPLE_X86 1
#include <immintrin.h>
#endif

enum { W_BITS = 14, H_SHIFT = 7, V_SHIFT = 2 * W_BITS - H_SHIFT }; /* weights 1/2^14; 8.7; 2^21 */
enum { PAD = 16 };                                                 /* values a SIMD step may run past n */

/* Source pixels [first, first + count) and their weights, per output pixel. */
typedef struct taps {
  int32_t *first, *count, *offset;
  int16_t *weight;
} taps;

struct pxl_resampler;
typedef void (*shrink_fn)(struct pxl_resampler *r, const uint8_t *src, int32_t x0);
/* mode: 0 the first source row of an output row, 1 a middle one, 2 the last, 3 the only one. */
typedef void (*vertical_fn)(const int16_t *s, int32_t *acc, uint8_t *out, size_t n, int16_t w, int mode);

struct pxl_resampler {
  int32_t src_width, src_height, channels, out_width, out_height;
  int premultiply;
  int path;
  double crop[4];             /* as given: x, y, width, height (pxl_resampler_params) */
  taps cols, rows;
  int32_t first_row, end_row; /* source rows outside [first_row, end_row) do not contribute */
  int32_t first_col, end_col; /* nor do columns outside [first_col, end_col) */
  int32_t ring;               /* accumulators open at once (output rows sharing a source row) */
  int32_t emitted;            /* output rows written so far */
  int32_t *row_lo, *row_hi;   /* per source row in range: output rows [lo, hi] it feeds */
  size_t values, stride;      /* out_width * channels, and that rounded up to PAD */
  int16_t *shrunk;            /* one source row shrunk horizontally, 8.7 fixed point */
  /* The 4-channel SIMD paths' uniform taps: every output pixel reads `uk` (2, 4 or 8)
   * pixels from ustart[x], zero weights where its own taps do not reach (0: not used).
   * uw: per two output pixels, per pair of taps, 8 int32 = [x's pair x4 | x+1's x4]. */
  int32_t uk;
  int32_t *ustart;
  int32_t *uw;
  /* One channel (a gray thumbnail): uk1 set, every output pixel reads 8 pixels from
   * ustart[x] with 8 int16 weights at (int16_t *)uw + 8x, zeros where its taps end. */
  int32_t uk1;
  int32_t *acc;               /* ring x stride */
  uint8_t *output;            /* out_width * out_height * channels, handed over by finish */
  shrink_fn shrink;
  vertical_fn vertical;
};

/* floor and ceil for the coordinates here (|v| < 2^31), exact, without libm (the shim
 * is also built by plain cc lines that link only libjpeg and libpng). */
static double floor_d(double v) {
  double t = (double)(int64_t)v;
  return t > v ? t - 1 : t;
}

static double ceil_d(double v) {
  double t = (double)(int64_t)v;
  return t < v ? t + 1 : t;
}

static size_t max_taps(int32_t n, double length) {
  return (size_t)n * ((size_t)ceil_d(length / (double)n) + 2);
}

/* Area taps of `n` outputs covering [start, start + length) of `limit` source pixels,
 * into arrays sized by max_taps. */
static int taps_init(taps *t, int32_t n, double start, double length, int32_t limit) {
  double step = length / (double)n;
  size_t cap = max_taps(n, length), used = 0;
  double w[64], *wide = NULL; /* one output's weights in double */
  for (int32_t i = 0; i < n; i++) {
    double lo = start + (double)i * step, hi = lo + step;
    double fl = floor_d(lo);
    int64_t begin = fl < 0 ? 0 : (int64_t)fl;
    if (begin > limit - 1) begin = limit - 1;
    int64_t end = (int64_t)ceil_d(hi);
    if (end < begin + 1) end = begin + 1;
    if (end > limit) end = limit;
    size_t count = (size_t)(end - begin);
    if (used + count > cap) { /* cannot happen: step bounds it */
      free(wide);
      return 0;
    }
    double *d = w;
    if (count > sizeof w / sizeof w[0]) {
      free(wide);
      wide = malloc(count * sizeof *wide);
      if (wide == NULL) return 0;
      d = wide;
    }
    double total = 0;
    for (int64_t j = begin; j < end; j++) {
      double a = hi < (double)(j + 1) ? hi : (double)(j + 1);
      double b = lo > (double)j ? lo : (double)j;
      d[j - begin] = a - b > 0 ? a - b : 0;
      total += d[j - begin];
    }
    t->first[i] = (int32_t)begin;
    t->offset[i] = (int32_t)used;
    if (total <= 0) {
      /* The window fell between pixel edges at the very border: take the nearest. */
      t->weight[used] = 1 << W_BITS;
      t->count[i] = 1;
      used += 1;
    } else {
      /* Quantised by rounding the running sum: they add up to exactly 2^14. */
      double run = 0;
      int32_t before = 0;
      for (size_t k = 0; k < count; k++) {
        run += d[k];
        int32_t after = k + 1 == count ? 1 << W_BITS : (int32_t)(run / total * (1 << W_BITS) + 0.5);
        t->weight[used + k] = (int16_t)(after - before);
        before = after;
      }
      t->count[i] = (int32_t)count;
      used += count;
    }
  }
  free(wide);
  return 1;
}

/* ---- the portable path ---------------------------------------------------------- */

static inline int32_t h_round(int32_t sum) { return (sum + (1 << (H_SHIFT - 1))) >> H_SHIFT; }

static inline uint8_t premul(unsigned c, unsigned a) { return (uint8_t)((c * a + 127) / 255); }

static void shrink_scalar(struct pxl_resampler *r, const uint8_t *src, int32_t x0) {
  const taps *c = &r->cols;
  int16_t *dst = r->shrunk;
  int32_t ch = r->channels, n = r->out_width;
  for (int32_t x = 0; x < n; x++) {
    const uint8_t *p = src + (size_t)(c->first[x] - x0) * (size_t)ch;
    const int16_t *w = c->weight + c->offset[x];
    int32_t m = c->count[x];
    if (ch == 4) { /* four sums side by side: the compiler keeps them in registers */
      int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      if (r->premultiply) {
        for (int32_t k = 0; k < m; k++, p += 4) {
          unsigned a = p[3];
          s0 += premul(p[0], a) * w[k];
          s1 += premul(p[1], a) * w[k];
          s2 += premul(p[2], a) * w[k];
          s3 += (int32_t)a * w[k];
        }
      } else {
        for (int32_t k = 0; k < m; k++, p += 4) {
          s0 += p[0] * w[k];
          s1 += p[1] * w[k];
          s2 += p[2] * w[k];
          s3 += p[3] * w[k];
        }
      }
      dst[4 * x] = (int16_t)h_round(s0);
      dst[4 * x + 1] = (int16_t)h_round(s1);
      dst[4 * x + 2] = (int16_t)h_round(s2);
      dst[4 * x + 3] = (int16_t)h_round(s3);
    } else if (ch == 3) {
      int32_t s0 = 0, s1 = 0, s2 = 0;
      for (int32_t k = 0; k < m; k++, p += 3) {
        s0 += p[0] * w[k];
        s1 += p[1] * w[k];
        s2 += p[2] * w[k];
      }
      dst[3 * x] = (int16_t)h_round(s0);
      dst[3 * x + 1] = (int16_t)h_round(s1);
      dst[3 * x + 2] = (int16_t)h_round(s2);
    } else {
      int32_t s0 = 0;
      for (int32_t k = 0; k < m; k++) s0 += p[k] * w[k];
      dst[x] = (int16_t)h_round(s0);
    }
  }
}

static inline uint8_t v_round(int32_t acc) {
  int32_t v = (acc + (1 << (V_SHIFT - 1))) >> V_SHIFT;
  return (uint8_t)(v > 255 ? 255 : v < 0 ? 0 : v);
}

static void vertical_scalar(const int16_t *s, int32_t *acc, uint8_t *out, size_t n, int16_t w, int mode) {
  switch (mode) {
  case 0:
    for (size_t i = 0; i < n; i++) acc[i] = s[i] * w;
    break;
  case 1:
    for (size_t i = 0; i < n; i++) acc[i] += s[i] * w;
    break;
  case 2:
    for (size_t i = 0; i < n; i++) out[i] = v_round(acc[i] + s[i] * w);
    break;
  default:
    for (size_t i = 0; i < n; i++) out[i] = v_round(s[i] * w);
    break;
  }
}

#ifdef PXL_RESAMPLE_X86
/* ---- x86-64: SSE2 and AVX2 ------------------------------------------------------ */

/* Premultiplies int16 lanes [r g b a r g b a]: (c * a + 127) / 255 as round(c * a / 255)
 * = (t + (t >> 8)) >> 8 with t = c * a + 128 (exact for c, a <= 255; unsigned 16-bit). */
static inline __m128i premul_epi16(__m128i v) {
  __m128i a = _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, 0xFF), 0xFF);
  a = _mm_or_si128(_mm_and_si128(a, _mm_set_epi16(0, -1, -1, -1, 0, -1, -1, -1)),
                   _mm_set_epi16(255, 0, 0, 0, 255, 0, 0, 0)); /* alpha times 255 stays alpha */
  __m128i t = _mm_add_epi16(_mm_mullo_epi16(v, a), _mm_set1_epi16(128));
  return _mm_srli_epi16(_mm_add_epi16(t, _mm_srli_epi16(t, 8)), 8);
}

/* One output pixel of 4 (or 3, read as 4) channels: int32 sums of its taps, 2 per madd.
 * `pair(p)` loads the bytes of two neighbouring pixels [c0 c1 c2 c3 | c0 c1 c2 c3]. */
static inline __attribute__((always_inline)) __m128i taps4(const uint8_t *p, const int16_t *w, int32_t m,
                                                          int32_t step, int pre) {
  const __m128i zero = _mm_setzero_si128();
  __m128i sum = zero;
  int32_t k = 0;
  for (; k + 1 < m; k += 2, p += 2 * step) {
    int32_t a, b, wp;
    memcpy(&a, p, 4);
    memcpy(&b, p + step, 4);
    memcpy(&wp, w + k, 4);
    __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)), zero);
    if (pre) v = premul_epi16(v);
    v = _mm_unpacklo_epi16(v, _mm_srli_si128(v, 8)); /* [c0 c0' c1 c1' ...] */
    sum = _mm_add_epi32(sum, _mm_madd_epi16(v, _mm_set1_epi32(wp)));
  }
  if (k < m) {
    int32_t a;
    memcpy(&a, p, 4);
    __m128i v = _mm_unpacklo_epi8(_mm_cvtsi32_si128(a), zero);
    if (pre) v = premul_epi16(v);
    v = _mm_unpacklo_epi16(v, zero);
    sum = _mm_add_epi32(sum, _mm_madd_epi16(v, _mm_set1_epi32((uint16_t)w[k])));
  }
  return _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(1 << (H_SHIFT - 1))), H_SHIFT);
}

/* The horizontal pass of a 4-channel row, two output pixels per store. */
static inline __attribute__((always_inline)) void shrink4(const taps *c, int16_t *dst, int32_t n, const uint8_t *src,
                                                           int32_t x0, int pre) {
  int32_t x = 0;
  for (; x + 1 < n; x += 2) {
    __m128i a = taps4(src + (size_t)(c->first[x] - x0) * 4u, c->weight + c->offset[x], c->count[x], 4, pre);
    __m128i b = taps4(src + (size_t)(c->first[x + 1] - x0) * 4u, c->weight + c->offset[x + 1], c->count[x + 1], 4,
                      pre);
    _mm_storeu_si128((__m128i *)(dst + 4 * x), _mm_packs_epi32(a, b));
  }
  if (x < n) {
    __m128i a = taps4(src + (size_t)(c->first[x] - x0) * 4u, c->weight + c->offset[x], c->count[x], 4, pre);
    _mm_storel_epi64((__m128i *)(dst + 4 * x), _mm_packs_epi32(a, a));
  }
}

/* Interleaves the two pixels of int16 lanes [c0 c1 c2 c3 | c0' c1' c2' c3'] for a madd. */
static inline __m128i pair_epi16(__m128i v) { return _mm_unpacklo_epi16(v, _mm_srli_si128(v, 8)); }

/* One output pixel of the uniform taps: k pixels from p, weights w (4 int32 per pair of
 * taps, 8 apart). */
static inline __attribute__((always_inline)) __m128i utaps4(const uint8_t *p, const int32_t *w, int32_t k, int pre) {
  const __m128i zero = _mm_setzero_si128();
  __m128i sum;
  if (k == 2) {
    __m128i v = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)p), zero);
    if (pre) v = premul_epi16(v);
    sum = _mm_madd_epi16(pair_epi16(v), _mm_loadu_si128((const __m128i *)w));
  } else {
    sum = zero;
    for (int32_t q = 0; q < k / 4; q++) {
      __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * q));
      __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);
      if (pre) {
        lo = premul_epi16(lo);
        hi = premul_epi16(hi);
      }
      sum = _mm_add_epi32(sum, _mm_madd_epi16(pair_epi16(lo), _mm_loadu_si128((const __m128i *)(w + 16 * q))));
      sum = _mm_add_epi32(sum, _mm_madd_epi16(pair_epi16(hi), _mm_loadu_si128((const __m128i *)(w + 16 * q + 8))));
    }
  }
  return _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(1 << (H_SHIFT - 1))), H_SHIFT);
}

static inline __attribute__((always_inline)) void ushrink_sse2(const struct pxl_resampler *r, const uint8_t *src,
                                                                int32_t x0, int32_t k, int pre) {
  int16_t *dst = r->shrunk;
  int32_t n = r->out_width;
  size_t group = (size_t)(k / 2) * 8;
  for (int32_t x = 0; x < n; x += 2) {
    const int32_t *w = r->uw + (size_t)(x / 2) * group;
    __m128i a = utaps4(src + (size_t)(r->ustart[x] - x0) * 4u, w, k, pre);
    if (x + 1 < n) {
      __m128i b = utaps4(src + (size_t)(r->ustart[x + 1] - x0) * 4u, w + 4, k, pre);
      _mm_storeu_si128((__m128i *)(dst + 4 * x), _mm_packs_epi32(a, b));
    } else {
      _mm_storel_epi64((__m128i *)(dst + 4 * x), _mm_packs_epi32(a, a));
    }
  }
}

static void ushrink_dispatch_sse2(const struct pxl_resampler *r, const uint8_t *src, int32_t x0) {
  int pre = r->premultiply;
  switch (r->uk) {
  case 2: pre ? ushrink_sse2(r, src, x0, 2, 1) : ushrink_sse2(r, src, x0, 2, 0); break;
  case 4: pre ? ushrink_sse2(r, src, x0, 4, 1) : ushrink_sse2(r, src, x0, 4, 0); break;
  default: pre ? ushrink_sse2(r, src, x0, 8, 1) : ushrink_sse2(r, src, x0, 8, 0); break;
  }
}

/* AVX2: two output pixels at once, one per 128-bit lane. */
__attribute__((target("avx2"))) static inline __m256i premul_epi16_avx2(__m256i v) {
  __m256i a = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(v, 0xFF), 0xFF);
  a = _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi64x(0x0000FFFFFFFFFFFFll)),
                      _mm256_set1_epi64x(0x00FF000000000000ll));
  __m256i t = _mm256_add_epi16(_mm256_mullo_epi16(v, a), _mm256_set1_epi16(128));
  return _mm256_srli_epi16(_mm256_add_epi16(t, _mm256_srli_epi16(t, 8)), 8);
}

__attribute__((target("avx2"))) static inline __m256i two_lanes(__m128i a, __m128i b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

__attribute__((target("avx2"))) static inline __m256i pair_epi16_avx2(__m256i v) {
  return _mm256_unpacklo_epi16(v, _mm256_srli_si256(v, 8));
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
ushrink_avx2(const struct pxl_resampler *r, const uint8_t *src, int32_t x0, int32_t k, int pre) {
  const __m256i zero = _mm256_setzero_si256();
  int16_t *dst = r->shrunk;
  int32_t n = r->out_width, x = 0;
  size_t group = (size_t)(k / 2) * 8;
  for (; x + 1 < n; x += 2) {
    const int32_t *w = r->uw + (size_t)(x / 2) * group;
    const uint8_t *pa = src + (size_t)(r->ustart[x] - x0) * 4u, *pb = src + (size_t)(r->ustart[x + 1] - x0) * 4u;
    __m256i sum;
    if (k == 2) {
      __m256i v = _mm256_unpacklo_epi8(two_lanes(_mm_loadl_epi64((const __m128i *)pa),
                                                 _mm_loadl_epi64((const __m128i *)pb)), zero);
      if (pre) v = premul_epi16_avx2(v);
      sum = _mm256_madd_epi16(pair_epi16_avx2(v), _mm256_loadu_si256((const __m256i *)w));
    } else {
      sum = zero;
      for (int32_t q = 0; q < k / 4; q++) {
        __m256i v = two_lanes(_mm_loadu_si128((const __m128i *)(pa + 16 * q)),
                              _mm_loadu_si128((const __m128i *)(pb + 16 * q)));
        __m256i lo = _mm256_unpacklo_epi8(v, zero), hi = _mm256_unpackhi_epi8(v, zero);
        if (pre) {
          lo = premul_epi16_avx2(lo);
          hi = premul_epi16_avx2(hi);
        }
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pair_epi16_avx2(lo),
                                                      _mm256_loadu_si256((const __m256i *)(w + 16 * q))));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pair_epi16_avx2(hi),
                                                      _mm256_loadu_si256((const __m256i *)(w + 16 * q + 8))));
      }
    }
    sum = _mm256_srai_epi32(_mm256_add_epi32(sum, _mm256_set1_epi32(1 << (H_SHIFT - 1))), H_SHIFT);
    _mm_storeu_si128((__m128i *)(dst + 4 * x),
                     _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1)));
  }
  if (x < n) {
    __m128i a = utaps4(src + (size_t)(r->ustart[x] - x0) * 4u, r->uw + (size_t)(x / 2) * group, k, pre);
    _mm_storel_epi64((__m128i *)(dst + 4 * x), _mm_packs_epi32(a, a));
  }
}

__attribute__((target("avx2"))) static void ushrink_dispatch_avx2(const struct pxl_resampler *r, const uint8_t *src,
                                                                  int32_t x0) {
  int pre = r->premultiply;
  switch (r->uk) {
  case 2: pre ? ushrink_avx2(r, src, x0, 2, 1) : ushrink_avx2(r, src, x0, 2, 0); break;
  case 4: pre ? ushrink_avx2(r, src, x0, 4, 1) : ushrink_avx2(r, src, x0, 4, 0); break;
  default: pre ? ushrink_avx2(r, src, x0, 8, 1) : ushrink_avx2(r, src, x0, 8, 0); break;
  }
}

static inline __attribute__((always_inline)) void shrink_x86(struct pxl_resampler *r, const uint8_t *src,
                                                              int32_t x0) {
  const taps *c = &r->cols;
  int16_t *dst = r->shrunk;
  int32_t n = r->out_width;
  if (r->channels == 4) {
    if (r->premultiply) shrink4(c, dst, n, src, x0, 1);
    else shrink4(c, dst, n, src, x0, 0);
  } else if (r->channels == 3) {
    /* A pixel is read as 4 bytes (the fourth is ignored): not for the last column there
     * is, whose taps go the scalar way. The stores overlap by one value, into PAD. */
    for (int32_t x = 0; x < n; x++) {
      int32_t first = c->first[x], m = c->count[x];
      const uint8_t *p = src + (size_t)(first - x0) * 3u;
      const int16_t *w = c->weight + c->offset[x];
      if (first + m < r->end_col) {
        __m128i a = taps4(p, w, m, 3, 0);
        _mm_storel_epi64((__m128i *)(dst + 3 * x), _mm_packs_epi32(a, a));
      } else {
        for (int32_t i = 0; i < 3; i++) {
          int32_t s = 0;
          for (int32_t k = 0; k < m; k++) s += p[k * 3 + i] * w[k];
          dst[x * 3 + i] = (int16_t)h_round(s);
        }
      }
    }
  } else if (r->uk1) {
    /* Eight pixels times eight weights (zero past the taps) in one madd: the same
     * integer sum as the scalar loop. */
    const int16_t *w8 = (const int16_t *)(const void *)r->uw;
    const __m128i zero = _mm_setzero_si128();
    for (int32_t x = 0; x < n; x++) {
      __m128i p = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(src + (r->ustart[x] - x0))), zero);
      __m128i s = _mm_madd_epi16(p, _mm_loadu_si128((const __m128i *)(w8 + 8 * (size_t)x)));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
      dst[x] = (int16_t)h_round(_mm_cvtsi128_si32(s));
    }
  } else {
    shrink_scalar(r, src, x0);
  }
}

static void shrink_sse2(struct pxl_resampler *r, const uint8_t *src, int32_t x0) {
  if (r->uk) ushrink_dispatch_sse2(r, src, x0);
  else shrink_x86(r, src, x0);
}

__attribute__((target("avx2"))) static void shrink_avx2(struct pxl_resampler *r, const uint8_t *src, int32_t x0) {
  if (r->uk) ushrink_dispatch_avx2(r, src, x0);
  else shrink_x86(r, src, x0);
}

/* The first `count` (8 or 16 in a whole step, fewer at the end) bytes of v to out. */
static inline void store_bytes(uint8_t *out, __m128i v, size_t count) {
  if (count == 16) {
    _mm_storeu_si128((__m128i *)out, v);
  } else if (count == 8) {
    _mm_storel_epi64((__m128i *)out, v);
  } else {
    uint8_t bounce[16];
    _mm_storeu_si128((__m128i *)bounce, v);
    memcpy(out, bounce, count);
  }
}

/* 8 values per step; s and acc are padded to a multiple of PAD, out is not (the last
 * partial step goes through store_bytes' bounce buffer). */
static void vertical_sse2(const int16_t *s, int32_t *acc, uint8_t *out, size_t n, int16_t w, int mode) {
  const __m128i wv = _mm_set1_epi16(w), half = _mm_set1_epi32(1 << (V_SHIFT - 1));
  for (size_t i = 0; i < n; i += 8) {
    __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i lo = _mm_mullo_epi16(v, wv), hi = _mm_mulhi_epi16(v, wv);
    __m128i p0 = _mm_unpacklo_epi16(lo, hi), p1 = _mm_unpackhi_epi16(lo, hi);
    __m128i *a = (__m128i *)(acc + i);
    if (mode == 1 || mode == 2) {
      p0 = _mm_add_epi32(p0, _mm_loadu_si128(a));
      p1 = _mm_add_epi32(p1, _mm_loadu_si128(a + 1));
    }
    if (mode < 2) {
      _mm_storeu_si128(a, p0);
      _mm_storeu_si128(a + 1, p1);
      continue;
    }
    p0 = _mm_srai_epi32(_mm_add_epi32(p0, half), V_SHIFT);
    p1 = _mm_srai_epi32(_mm_add_epi32(p1, half), V_SHIFT);
    __m128i packed = _mm_packs_epi32(p0, p1);
    store_bytes(out + i, _mm_packus_epi16(packed, packed), n - i < 8 ? n - i : 8);
  }
}

/* 16 values per step. The accumulators hold them in the order the in-lane unpacks give
 * ([0-3 8-11] [4-7 12-15]): the packs undo it. */
__attribute__((target("avx2"))) static void vertical_avx2(const int16_t *s, int32_t *acc, uint8_t *out, size_t n,
                                                          int16_t w, int mode) {
  const __m256i wv = _mm256_set1_epi16(w), half = _mm256_set1_epi32(1 << (V_SHIFT - 1));
  for (size_t i = 0; i < n; i += 16) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));
    __m256i lo = _mm256_mullo_epi16(v, wv), hi = _mm256_mulhi_epi16(v, wv);
    __m256i p0 = _mm256_unpacklo_epi16(lo, hi), p1 = _mm256_unpackhi_epi16(lo, hi);
    __m256i *a = (__m256i *)(acc + i);
    if (mode == 1 || mode == 2) {
      p0 = _mm256_add_epi32(p0, _mm256_loadu_si256(a));
      p1 = _mm256_add_epi32(p1, _mm256_loadu_si256(a + 1));
    }
    if (mode < 2) {
      _mm256_storeu_si256(a, p0);
      _mm256_storeu_si256(a + 1, p1);
      continue;
    }
    p0 = _mm256_srai_epi32(_mm256_add_epi32(p0, half), V_SHIFT);
    p1 = _mm256_srai_epi32(_mm256_add_epi32(p1, half), V_SHIFT);
    __m256i packed = _mm256_packs_epi32(p0, p1);                      /* 0-7 | 8-15 */
    packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(packed, packed), 0x08); /* bytes 0-15 */
    store_bytes(out + i, _mm256_castsi256_si128(packed), n - i < 16 ? n - i : 16);
  }
}
#endif

/* ---- dispatch ------------------------------------------------------------------- */

static int forced_path = -1; /* set by tests before any resampler is made */

static int best_path(void) {
#ifdef PXL_RESAMPLE_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? PXL_RESAMPLE_AVX2 : PXL_RESAMPLE_SSE2;
#else
  return PXL_RESAMPLE_SCALAR;
#endif
}

static int env_path(void) {
  const char *v = getenv("PXL_RESAMPLE_PATH");
  if (v == NULL) return -1;
  if (strcmp(v, "scalar") == 0) return PXL_RESAMPLE_SCALAR;
  if (strcmp(v, "sse2") == 0) return PXL_RESAMPLE_SSE2;
  if (strcmp(v, "avx2") == 0) return PXL_RESAMPLE_AVX2;
  return -1;
}

static int chosen_path(void) {
  static int cached = -1; /* racing first calls compute the same value */
  int forced = __atomic_load_n(&forced_path, __ATOMIC_RELAXED);
  if (forced >= 0) return forced;
  int path = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (path < 0) {
    int best = best_path(), wanted = env_path();
    path = wanted >= 0 && wanted <= best ? wanted : best;
    __atomic_store_n(&cached, path, __ATOMIC_RELAXED);
  }
  return path;
}

int pxl_resampler_force_path(int32_t path) {
  if (path < 0) {
    __atomic_store_n(&forced_path, -1, __ATOMIC_RELAXED);
    return chosen_path();
  }
  if (path > best_path()) return -1;
  __atomic_store_n(&forced_path, path, __ATOMIC_RELAXED);
  return path;
}

int32_t pxl_resampler_path(const pxl_resampler *r) { return r->path; }

/* ---- the resampler -------------------------------------------------------------- */

/* The uniform taps (see uk): padded to 2, 4 or 8 so a SIMD step reads a fixed number of
 * pixels with no branch on the count, every read inside [first_col, end_col) (an output
 * near the right edge starts further left, its extra weights in front). Sums are the
 * same integers: the padding's weights are 0. */
static void uniform_taps(pxl_resampler *r) {
  const taps *c = &r->cols;
  int32_t most = 1;
  for (int32_t x = 0; x < r->out_width; x++)
    if (c->count[x] > most) most = c->count[x];
  int32_t k = most <= 2 ? 2 : most <= 4 ? 4 : 8;
  r->uk = 0;
  r->uk1 = 0;
  if (r->channels == 1 && most <= 8 && r->end_col - r->first_col >= 8) {
    int16_t *w8 = (int16_t *)(void *)r->uw; /* 16 bytes an output pixel: uw holds 64 */
    r->uk1 = 1;
    for (int32_t x = 0; x < r->out_width; x++) {
      int32_t first = c->first[x], start = first < r->end_col - 8 ? first : r->end_col - 8;
      r->ustart[x] = start;
      for (int32_t j = 0; j < 8; j++) {
        int32_t t = start + j - first;
        w8[8 * (size_t)x + (size_t)j] = t >= 0 && t < c->count[x] ? c->weight[c->offset[x] + t] : 0;
      }
    }
    return;
  }
  if (r->channels != 4 || most > 8 || r->end_col - r->first_col < k) return;
  r->uk = k;
  for (int32_t x = 0; x < r->out_width; x++) {
    int32_t first = c->first[x], start = first < r->end_col - k ? first : r->end_col - k;
    r->ustart[x] = start;
    for (int32_t pair = 0; pair < k / 2; pair++) {
      uint32_t wp = 0;
      for (int32_t h = 0; h < 2; h++) {
        int32_t j = start + 2 * pair + h - first;
        int16_t w = j >= 0 && j < c->count[x] ? c->weight[c->offset[x] + j] : 0;
        wp |= (uint32_t)(uint16_t)w << (16 * h);
      }
      int32_t *slot = r->uw + ((size_t)(x / 2) * (size_t)(k / 2) + (size_t)pair) * 8 + (size_t)(x % 2) * 4;
      for (int32_t i = 0; i < 4; i++) slot[i] = (int32_t)wp;
    }
  }
}

void pxl_resampler_free(pxl_resampler *r) {
  if (r == NULL) return;
  free(r->output);
  free(r); /* the struct, taps, maps and rows are one block */
}

static size_t align32(size_t v) { return (v + 31) & ~(size_t)31; }

pxl_resampler *pxl_resampler_new(int32_t src_width, int32_t src_height, int32_t channels, double crop_x,
                                 double crop_y, double crop_width, double crop_height, int32_t out_width,
                                 int32_t out_height, int32_t premultiply) {
  if (src_width < 1 || src_height < 1 || out_width < 1 || out_height < 1) return NULL;
  if (channels != 1 && channels != 3 && channels != 4) return NULL;
  if (!(crop_width > 0) || !(crop_height > 0)) return NULL;
  /* Only shrinking keeps the weights' error small; a wider source than 2^24 is not a
   * bitmap anyone decodes. */
  if (crop_width > 16777216.0 || crop_height > 16777216.0) return NULL;
  size_t values = (size_t)out_width * (size_t)channels;
  size_t stride = (values + PAD - 1) / PAD * PAD;
  size_t col_taps = max_taps(out_width, crop_width), row_taps = max_taps(out_height, crop_height);
  size_t span_cap = (size_t)src_height; /* source rows in range, at most */

  /* One block: the struct, then each array 32-byte aligned. The ring's size is known
   * only after the row taps, so the accumulators get out_height rows at most. */
  size_t at = align32(sizeof(pxl_resampler));
  size_t o_cols = at;
  at = align32(at + 3 * (size_t)out_width * sizeof(int32_t));
  size_t o_colw = at;
  at = align32(at + col_taps * sizeof(int16_t));
  size_t o_rows = at;
  at = align32(at + 3 * (size_t)out_height * sizeof(int32_t));
  size_t o_roww = at;
  at = align32(at + row_taps * sizeof(int16_t));
  size_t o_map = at;
  at = align32(at + 2 * span_cap * sizeof(int32_t));
  size_t o_shrunk = at;
  at = align32(at + (stride + PAD) * sizeof(int16_t));
  size_t o_ustart = at;
  at = align32(at + (size_t)out_width * sizeof(int32_t));
  size_t o_uw = at;
  at = align32(at + ((size_t)out_width + 1) / 2 * 4 * 8 * sizeof(int32_t));
  size_t o_acc = at;
  /* ring <= out_height; and <= the rows one source row feeds, bounded below */
  char *block = malloc(at);
  if (block == NULL) return NULL;
  pxl_resampler *r = (pxl_resampler *)block;
  memset(r, 0, sizeof *r);
  r->src_width = src_width;
  r->src_height = src_height;
  r->channels = channels;
  r->out_width = out_width;
  r->out_height = out_height;
  r->premultiply = premultiply && channels == 4;
  r->values = values;
  r->stride = stride;
  int32_t *ci = (int32_t *)(block + o_cols), *ri = (int32_t *)(block + o_rows);
  r->cols = (taps){ci, ci + out_width, ci + 2 * (size_t)out_width, (int16_t *)(block + o_colw)};
  r->rows = (taps){ri, ri + out_height, ri + 2 * (size_t)out_height, (int16_t *)(block + o_roww)};
  r->crop[0] = crop_x, r->crop[1] = crop_y, r->crop[2] = crop_width, r->crop[3] = crop_height;
  if (!taps_init(&r->cols, out_width, crop_x, crop_width, src_width) ||
      !taps_init(&r->rows, out_height, crop_y, crop_height, src_height)) {
    free(block);
    return NULL;
  }
  /* Which output rows each source row feeds, and how many are open at once. Taps are
   * monotone (first and first + count never decrease), so the rows one source row feeds
   * are a contiguous range. */
  const taps *t = &r->rows;
  int32_t first = t->first[0], end = first;
  for (int32_t y = 0; y < out_height; y++)
    if (t->first[y] + t->count[y] > end) end = t->first[y] + t->count[y];
  r->first_row = first;
  r->end_row = end;
  r->first_col = r->cols.first[0];
  r->end_col = r->first_col;
  for (int32_t x = 0; x < out_width; x++)
    if (r->cols.first[x] + r->cols.count[x] > r->end_col) r->end_col = r->cols.first[x] + r->cols.count[x];
  size_t span = (size_t)(end - first);
  r->row_lo = (int32_t *)(block + o_map);
  r->row_hi = r->row_lo + span_cap;
  for (size_t j = 0; j < span; j++) {
    r->row_lo[j] = INT32_MAX;
    r->row_hi[j] = -1;
  }
  int monotone = 1;
  for (int32_t y = 0; y < out_height; y++) {
    if (y > 0 && (t->first[y] < t->first[y - 1] ||
                  t->first[y] + t->count[y] < t->first[y - 1] + t->count[y - 1]))
      monotone = 0;
    for (int32_t k = 0; k < t->count[y]; k++) {
      size_t j = (size_t)(t->first[y] + k - first);
      if (y < r->row_lo[j]) r->row_lo[j] = y;
      if (y > r->row_hi[j]) r->row_hi[j] = y;
    }
  }
  int32_t ring = 1;
  for (size_t j = 0; j < span; j++)
    if (r->row_hi[j] >= r->row_lo[j] && r->row_hi[j] - r->row_lo[j] + 1 > ring) ring = r->row_hi[j] - r->row_lo[j] + 1;
  r->ring = monotone ? ring : out_height; /* not monotone: no ring, one accumulator per row */

  /* Now the accumulators: grow the block to hold them. */
  size_t total = o_acc + (size_t)r->ring * stride * sizeof(int32_t);
  char *grown = realloc(block, total);
  if (grown == NULL) {
    free(block);
    return NULL;
  }
  if (grown != block) { /* re-point every array into the moved block */
    r = (pxl_resampler *)grown;
    ci = (int32_t *)(grown + o_cols);
    ri = (int32_t *)(grown + o_rows);
    r->cols = (taps){ci, ci + out_width, ci + 2 * (size_t)out_width, (int16_t *)(grown + o_colw)};
    r->rows = (taps){ri, ri + out_height, ri + 2 * (size_t)out_height, (int16_t *)(grown + o_roww)};
    r->row_lo = (int32_t *)(grown + o_map);
    r->row_hi = r->row_lo + span_cap;
  }
  r->ustart = (int32_t *)(grown + o_ustart);
  r->uw = (int32_t *)(grown + o_uw);
  uniform_taps(r);
  r->shrunk = (int16_t *)(grown + o_shrunk);
  memset(r->shrunk, 0, (stride + PAD) * sizeof(int16_t)); /* the padding is read, never used */
  r->acc = (int32_t *)(grown + o_acc);
  r->output = malloc((size_t)out_height * values);
  if (r->output == NULL) {
    free(grown);
    return NULL;
  }
  r->path = chosen_path();
  switch (r->path) {
#ifdef PXL_RESAMPLE_X86
  case PXL_RESAMPLE_AVX2:
    r->shrink = shrink_avx2;
    r->vertical = vertical_avx2;
    break;
  case PXL_RESAMPLE_SSE2:
    r->shrink = shrink_sse2;
    r->vertical = vertical_sse2;
    break;
#endif
  default:
    r->path = PXL_RESAMPLE_SCALAR;
    r->shrink = shrink_scalar;
    r->vertical = vertical_scalar;
  }
  return r;
}

void pxl_resampler_region(const pxl_resampler *r, int32_t *x, int32_t *y, int32_t *width, int32_t *height) {
  *x = r->first_col;
  *y = r->first_row;
  *width = r->end_col - r->first_col;
  *height = r->end_row - r->first_row;
}

int pxl_resampler_add_row(void *resampler, int32_t y, const uint8_t *row) {
  return pxl_resampler_add_row_at(resampler, y, 0, row);
}

int pxl_resampler_add_row_at(void *resampler, int32_t y, int32_t x0, const uint8_t *row) {
  pxl_resampler *r = resampler;
  if (y < r->first_row || y >= r->end_row) return 0;
  if (x0 < 0 || x0 > r->first_col) return 1; /* the row does not hold the columns the taps read */
  size_t j = (size_t)(y - r->first_row);
  int32_t lo = r->row_lo[j], hi = r->row_hi[j];
  if (hi < lo) return 0;
  r->shrink(r, row, x0);
  const taps *t = &r->rows;
  for (int32_t oy = lo; oy <= hi; oy++) {
    int32_t k = y - t->first[oy], last = t->count[oy] - 1;
    int mode = k == 0 ? (last == 0 ? 3 : 0) : (k == last ? 2 : 1);
    int32_t *acc = r->acc + (size_t)(oy % r->ring) * r->stride;
    r->vertical(r->shrunk, acc, r->output + (size_t)oy * r->values, r->values, t->weight[t->offset[oy] + k], mode);
    if (k == last) r->emitted++;
  }
  return 0;
}

uint8_t *pxl_resampler_finish(pxl_resampler *r) {
  /* Every output row was written when its last source row arrived. A decoder that
   * delivers every row makes that true; anything else is refused, never half-written. */
  if (r == NULL || r->emitted != r->out_height) return NULL;
  uint8_t *out = r->output;
  r->output = NULL;
  return out;
}

void pxl_resampler_params(const pxl_resampler *r, int32_t params[6], double crop[4]) {
  params[0] = r->src_width, params[1] = r->src_height, params[2] = r->channels;
  params[3] = r->out_width, params[4] = r->out_height, params[5] = r->premultiply;
  memcpy(crop, r->crop, sizeof r->crop);
}

int pxl_resampler_adopt(pxl_resampler *r, uint8_t *output) {
  if (r == NULL || output == NULL || r->emitted != 0) return 1;
  free(r->output);
  r->output = output;
  r->emitted = r->out_height;
  return 0;
}
