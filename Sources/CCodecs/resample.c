/*
 * The area resampler (see pxl_codecs.h, "Area resampling"), streamed row by row.
 *
 * Arithmetic: exactly the single-precision sums the Swift AreaResampler did before it
 * moved here (taps in double, weights rounded to float, products and sums in float in
 * tap order, +0.5 and truncation), so thumbnails keep their pixels to the bit. What
 * changed is the cost: the four channels of a pixel are one 4-lane vector, the vertical
 * pass is folded into the row stream (each source row is shrunk horizontally once and
 * added to the one or two output rows it covers, which are written out as soon as their
 * last source row has arrived), and there is no crop-sized intermediate buffer at all:
 * a few output-width rows, whatever the source size.
 *
 * No FMA contraction: a fused multiply-add rounds once where the reference rounds twice,
 * which would change pixels on a build with FMA enabled.
 */
#include "pxl_codecs.h"

#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

typedef float v4f __attribute__((vector_size(16)));

/* Source pixels [first, first + count) and their weights, per output pixel. */
typedef struct taps {
  int32_t *first, *count, *offset;
  float *weight;
} taps;

struct pxl_resampler {
  int32_t src_width, src_height, channels, out_width, out_height;
  int premultiply;
  double crop[4];             /* as given: x, y, width, height (pxl_resampler_params) */
  taps cols, rows;
  int32_t first_row, end_row; /* source rows outside [first_row, end_row) do not contribute */
  int32_t first_col, end_col; /* nor do columns outside [first_col, end_col) */
  int32_t ring;               /* accumulators open at once (output rows sharing a source row) */
  int32_t emitted;            /* output rows written so far */
  int32_t *row_lo, *row_hi;   /* per source row in range: output rows [lo, hi] it feeds */
  float *shrunk;              /* one source row shrunk horizontally: out_width * channels */
  float *acc;                 /* ring x out_width * channels */
  uint8_t *scratch;           /* a premultiplied copy of the row (premultiply mode) */
  uint8_t *output;            /* out_width * out_height * channels, handed over by finish */
};

static void taps_free(taps *t) {
  free(t->first);
  free(t->count);
  free(t->offset);
  free(t->weight);
}

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

/* Area taps of `n` outputs covering [start, start + length) of `limit` source pixels. */
static int taps_init(taps *t, int32_t n, double start, double length, int32_t limit) {
  double step = length / (double)n;
  size_t max_taps = (size_t)n * ((size_t)ceil_d(step) + 2);
  t->first = malloc((size_t)n * sizeof *t->first);
  t->count = malloc((size_t)n * sizeof *t->count);
  t->offset = malloc((size_t)n * sizeof *t->offset);
  t->weight = malloc(max_taps * sizeof *t->weight);
  if (!t->first || !t->count || !t->offset || !t->weight) return 0;
  size_t used = 0;
  for (int32_t i = 0; i < n; i++) {
    double lo = start + (double)i * step, hi = lo + step;
    double fl = floor_d(lo);
    int64_t begin = fl < 0 ? 0 : (int64_t)fl;
    if (begin > limit - 1) begin = limit - 1;
    int64_t end = (int64_t)ceil_d(hi);
    if (end < begin + 1) end = begin + 1;
    if (end > limit) end = limit;
    if (used + (size_t)(end - begin) > max_taps) return 0; /* cannot happen: step bounds it */
    double total = 0;
    for (int64_t j = begin; j < end; j++) {
      double a = hi < (double)(j + 1) ? hi : (double)(j + 1);
      double b = lo > (double)j ? lo : (double)j;
      double w = a - b > 0 ? a - b : 0;
      t->weight[used + (size_t)(j - begin)] = (float)w;
      total += w;
    }
    t->first[i] = (int32_t)begin;
    t->offset[i] = (int32_t)used;
    if (total <= 0) {
      /* The window fell between pixel edges at the very border: take the nearest. */
      t->weight[used] = 1;
      t->count[i] = 1;
      used += 1;
    } else {
      for (int64_t k = 0; k < end - begin; k++)
        t->weight[used + (size_t)k] = (float)((double)t->weight[used + (size_t)k] / total);
      t->count[i] = (int32_t)(end - begin);
      used += (size_t)(end - begin);
    }
  }
  return 1;
}

void pxl_resampler_free(pxl_resampler *r) {
  if (r == NULL) return;
  taps_free(&r->cols);
  taps_free(&r->rows);
  free(r->row_lo);
  free(r->row_hi);
  free(r->shrunk);
  free(r->acc);
  free(r->scratch);
  free(r->output);
  free(r);
}

pxl_resampler *pxl_resampler_new(int32_t src_width, int32_t src_height, int32_t channels, double crop_x,
                                 double crop_y, double crop_width, double crop_height, int32_t out_width,
                                 int32_t out_height, int32_t premultiply) {
  if (src_width < 1 || src_height < 1 || out_width < 1 || out_height < 1) return NULL;
  if (channels != 1 && channels != 3 && channels != 4) return NULL;
  if (!(crop_width > 0) || !(crop_height > 0)) return NULL;
  pxl_resampler *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->src_width = src_width;
  r->src_height = src_height;
  r->channels = channels;
  r->out_width = out_width;
  r->out_height = out_height;
  r->premultiply = premultiply && channels == 4;
  r->crop[0] = crop_x, r->crop[1] = crop_y, r->crop[2] = crop_width, r->crop[3] = crop_height;
  if (!taps_init(&r->cols, out_width, crop_x, crop_width, src_width) ||
      !taps_init(&r->rows, out_height, crop_y, crop_height, src_height)) {
    pxl_resampler_free(r);
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
  r->row_lo = malloc(span * sizeof *r->row_lo);
  r->row_hi = malloc(span * sizeof *r->row_hi);
  if (!r->row_lo || !r->row_hi) {
    pxl_resampler_free(r);
    return NULL;
  }
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

  size_t row_floats = (size_t)out_width * (size_t)channels;
  r->shrunk = malloc(row_floats * sizeof(float) + 16);
  r->acc = malloc((size_t)r->ring * row_floats * sizeof(float) + 16);
  r->output = malloc((size_t)out_height * row_floats);
  if (r->premultiply) r->scratch = malloc((size_t)src_width * 4u);
  if (!r->shrunk || !r->acc || !r->output || (r->premultiply && !r->scratch)) {
    pxl_resampler_free(r);
    return NULL;
  }
  return r;
}

static inline v4f load4(const uint8_t *p) {
  v4f v = {(float)p[0], (float)p[1], (float)p[2], (float)p[3]};
  return v;
}

/* The horizontal pass of one source row into r->shrunk. */
static void shrink_row(pxl_resampler *r, const uint8_t *src, int32_t x0) {
  const taps *c = &r->cols;
  float *dst = r->shrunk;
  int32_t n = r->out_width;
  if (r->channels == 4) {
    for (int32_t x = 0; x < n; x++) {
      const uint8_t *p = src + (size_t)(c->first[x] - x0) * 4u;
      const float *w = c->weight + c->offset[x];
      v4f a = {0, 0, 0, 0};
      for (int32_t k = 0, m = c->count[x]; k < m; k++) {
        v4f prod = load4(p + 4 * k) * w[k];
        a = a + prod;
      }
      memcpy(dst + 4 * x, &a, sizeof a);
    }
  } else {
    int32_t ch = r->channels;
    for (int32_t x = 0; x < n; x++) {
      const uint8_t *p = src + (size_t)(c->first[x] - x0) * (size_t)ch;
      const float *w = c->weight + c->offset[x];
      for (int32_t i = 0; i < ch; i++) {
        float a = 0;
        for (int32_t k = 0, m = c->count[x]; k < m; k++) {
          float prod = (float)p[k * ch + i] * w[k];
          a = a + prod;
        }
        dst[x * ch + i] = a;
      }
    }
  }
}

static inline float *accumulator(pxl_resampler *r, int32_t y) {
  return r->acc + (size_t)(y % r->ring) * (size_t)r->out_width * (size_t)r->channels;
}

/* Output row y from its accumulator: +0.5, clamped, truncated. */
static void emit_row(pxl_resampler *r, int32_t y) {
  size_t n = (size_t)r->out_width * (size_t)r->channels;
  const float *a = accumulator(r, y);
  uint8_t *d = r->output + (size_t)y * n;
  for (size_t i = 0; i < n; i++) {
    float v = a[i] + 0.5f;
    d[i] = v >= 255 ? 255 : (v <= 0 ? 0 : (uint8_t)v);
  }
}

/* Premultiplied copy of the columns the taps read of an RGBA/BGRA row that starts at
 * column x0: (c * a + 127) / 255, as PixelOps does. */
static const uint8_t *premultiplied(pxl_resampler *r, const uint8_t *row, int32_t x0) {
  uint8_t *d = r->scratch + (size_t)r->first_col * 4u;
  row += (size_t)(r->first_col - x0) * 4u;
  for (int32_t x = r->first_col; x < r->end_col; x++, row += 4, d += 4) {
    unsigned a = row[3];
    if (a == 255) {
      memcpy(d, row, 4);
    } else {
      d[0] = (uint8_t)((row[0] * a + 127) / 255);
      d[1] = (uint8_t)((row[1] * a + 127) / 255);
      d[2] = (uint8_t)((row[2] * a + 127) / 255);
      d[3] = (uint8_t)a;
    }
  }
  return r->scratch;
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
  if (r->premultiply) {
    row = premultiplied(r, row, x0);
    x0 = 0; /* the scratch row is laid out like a whole source row */
  }
  shrink_row(r, row, x0);
  size_t n = (size_t)r->out_width * (size_t)r->channels;
  const taps *t = &r->rows;
  for (int32_t oy = lo; oy <= hi; oy++) {
    int32_t k = y - t->first[oy];
    float w = t->weight[t->offset[oy] + k];
    float *a = accumulator(r, oy);
    const float *s = r->shrunk;
    if (k == 0) { /* the first source row of this output row: the sum starts at 0 */
      for (size_t i = 0; i < n; i++) {
        float prod = s[i] * w;
        a[i] = 0.0f + prod;
      }
    } else {
      for (size_t i = 0; i < n; i++) {
        float prod = s[i] * w;
        a[i] = a[i] + prod;
      }
    }
    if (k == t->count[oy] - 1) {
      emit_row(r, oy);
      r->emitted++;
    }
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
