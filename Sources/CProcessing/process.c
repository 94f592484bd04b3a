/* The built-in processors (pxl_process.h). Premultiplied RGBA8 throughout, so scaling a
 * pixel by its coverage, blurring and compositing are plain per-channel arithmetic. */
#include "pxl_process.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Exact coverage of a pixel by a rounded rectangle -------------------------------- */

/* The integral of sqrt(r^2 - t^2) from a to b (0 <= a <= b <= r): with sa, sb the
 * square roots at a and b, (b sb - a sa + r^2 (asin(b/r) - asin(a/r))) / 2, the
 * difference of the arcsines taken as one (asin(x) - asin(y) = asin(x sqrt(1 - y^2) -
 * y sqrt(1 - x^2)) for x, y in [0, 1]): one asin a pixel instead of two. */
static double arc_band(double a, double b, double r) {
  double r2 = r * r;
  double ta = r2 - a * a, tb = r2 - b * b;
  double sa = sqrt(ta > 0 ? ta : 0), sb = sqrt(tb > 0 ? tb : 0);
  double x = (b * sa - a * sb) / r2;
  return 0.5 * (b * sb - a * sa + r2 * asin(x > 1 ? 1 : x < 0 ? 0 : x));
}

/* The area of [u0, u1] x [v0, v1] (all within [0, r]) inside the disc u^2 + v^2 <= r^2. */
static double quarter_disc_area(double u0, double u1, double v0, double v1, double r) {
  double ua = v1 < r ? sqrt(r * r - v1 * v1) : 0; /* up to ua the arc is above v1 */
  double ub = v0 < r ? sqrt(r * r - v0 * v0) : 0; /* from ub on it is below v0 */
  double area = 0;
  double full = (ua < u1 ? ua : u1) - u0;
  if (full > 0) area += (v1 - v0) * full;
  double a = u0 > ua ? u0 : ua, b = u1 < ub ? u1 : ub;
  if (b > a) area += arc_band(a, b, r) - v0 * (b - a);
  return area;
}

/* The area of the pixel, in a corner's coordinates (u, v: distances from the corner's
 * centre towards the corner, pixel [u0, u1] x [v0, v1]), outside the corner's arc but
 * inside its r x r square. */
static double corner_cut(double u0, double u1, double v0, double v1, double r) {
  if (r <= 0) return 0;
  if (u0 < 0) u0 = 0;
  if (v0 < 0) v0 = 0;
  if (u1 > r) u1 = r;
  if (v1 > r) v1 = r;
  if (u1 <= u0 || v1 <= v0) return 0;
  if (u1 * u1 + v1 * v1 <= r * r) return 0;                    /* wholly inside the arc */
  double rect = (u1 - u0) * (v1 - v0);
  if (u0 * u0 + v0 * v0 >= r * r) return rect;                 /* wholly outside */
  return rect - quarter_disc_area(u0, u1, v0, v1, r);
}

double pxl_process_coverage(double x0, double y0, double left, double top, double right, double bottom,
                            const double radii[4]) {
  double x1 = x0 + 1, y1 = y0 + 1;
  double w = (x1 < right ? x1 : right) - (x0 > left ? x0 : left);
  double h = (y1 < bottom ? y1 : bottom) - (y0 > top ? y0 : top);
  if (w <= 0 || h <= 0) return 0;
  double area = w * h;
  double r;
  /* Top-left: centre (left + r, top + r); u grows leftwards, v upwards. */
  if ((r = radii[0]) > 0) area -= corner_cut(left + r - x1, left + r - x0, top + r - y1, top + r - y0, r);
  if ((r = radii[1]) > 0) area -= corner_cut(x0 - (right - r), x1 - (right - r), top + r - y1, top + r - y0, r);
  if ((r = radii[2]) > 0)
    area -= corner_cut(x0 - (right - r), x1 - (right - r), y0 - (bottom - r), y1 - (bottom - r), r);
  if ((r = radii[3]) > 0) area -= corner_cut(left + r - x1, left + r - x0, y0 - (bottom - r), y1 - (bottom - r), r);
  return area < 0 ? 0 : area > 1 ? 1 : area;
}

static inline uint8_t scale8(uint8_t v, double c) { return (uint8_t)(v * c + 0.5); }

/* ---- Coverage a pixel row at a time ------------------------------------------------------ */

/* The antiderivative of sqrt(r^2 - t^2) on [0, r]: (t sqrt(r^2 - t^2) + r^2 asin(t / r)) / 2. */
static double arc_primitive(double t, double r) {
  double q = t / r, d = r * r - t * t;
  return 0.5 * (t * sqrt(d > 0 ? d : 0) + r * r * asin(q > 1 ? 1 : q));
}

/* The top-left corner's arc across pixel row j of its square, in the corner's coordinates
 * (u, v: distances from the arc's centre (r, r) towards the corner, as corner_cut's; pixel
 * column i spans u in [r - i - 1, r - i]): the row is the band v0 <= v <= v1 of the square,
 * the arc s(u) = sqrt(r^2 - u^2) is above the band up to u = ta and below it from u = tb. */
typedef struct {
  double r, v0, v1, ta, tb;
  double arc_at_ta;  /* arc_primitive(ta, r) */
  double inside_all; /* arc_row_inside(r): the band's area under the arc */
} arc_row;

/* The row's band and where the arc crosses it (no arcsine: enough to size the spans). */
static void arc_row_band(arc_row *arc, double r, int32_t j) {
  double v0 = r - (j + 1), v1 = r - j;
  arc->r = r;
  arc->v0 = v0 = v0 < 0 ? 0 : v0;
  arc->v1 = v1;
  arc->ta = sqrt(r * r - v1 * v1);
  arc->tb = sqrt(r * r - v0 * v0);
}

/* The band and the constants of its running integral. */
static void arc_row_make(arc_row *arc, double r, int32_t j) {
  arc_row_band(arc, r, j);
  arc->arc_at_ta = arc_primitive(arc->ta, r);
  arc->inside_all = (arc->v1 - arc->v0) * arc->ta + arc_primitive(arc->tb, r) - arc->arc_at_ta -
                    arc->v0 * (arc->tb - arc->ta);
}

/* The band's area under the arc between u = 0 and u (in [0, r]): the running integral
 * whose differences are the pixels' coverage, one arcsine a pixel boundary, shared by the
 * two pixels either side of it. */
static double arc_row_inside(const arc_row *arc, double u) {
  double band = arc->v1 - arc->v0;
  if (u <= arc->ta) return band * u;
  if (u >= arc->tb) return arc->inside_all;
  return band * arc->ta + arc_primitive(u, arc->r) - arc->arc_at_ta - arc->v0 * (u - arc->ta);
}

/* Where column i's left edge (x = i) falls in u, clamped to the square. */
static inline double arc_row_u(const arc_row *arc, int32_t i) {
  double u = arc->r - i;
  return u < 0 ? 0 : u > arc->r ? arc->r : u;
}

/* What a corner of radius r cuts off the pixels of its r x r square, in the square's own
 * pixels (column i, row j, counted from the image's corner inwards). On the pixel grid
 * the four corners of one radius are mirror images of each other (the image's sides are
 * whole pixels), so this is computed once per radius and read at every corner of it. */
typedef struct {
  double r;
  int32_t rows;  /* ceil(r): the rows (and columns) the square reaches */
  int32_t *out;  /* row j's columns [0, out[j]) are wholly outside the shape */
  int32_t *in;   /* from in[j] on they are untouched by the arc */
  size_t *first; /* the arc crosses [out[j], in[j]): cut[first[j] + i - out[j]] is pixel i's area outside it */
  float *cut;
} corner_profile;

static void corner_profile_free(corner_profile *profile) {
  free(profile->out);
  free(profile->cut);
}

/* Fills `profile` for radius r (> 0), one arc_row per row of the square with its running
 * integral along the row: one arcsine a pixel boundary. Returns -1 when out of memory. */
static int corner_profile_make(corner_profile *profile, double r) {
  const double eps = 1e-9; /* spans a hair wide: a boundary on a pixel edge is computed, never guessed */
  int32_t rows = (int32_t)ceil(r);
  *profile = (corner_profile){.r = r, .rows = rows};
  profile->out = malloc((size_t)rows * (2 * sizeof(int32_t) + sizeof(size_t)));
  if (!profile->out) return -1;
  profile->in = profile->out + rows;
  profile->first = (size_t *)(void *)(profile->in + rows);
  size_t total = 0;
  for (int32_t j = 0; j < rows; j++) {
    arc_row arc;
    arc_row_band(&arc, r, j);
    /* Beyond tb from the arc's centre the row is outside, within ta untouched. */
    double out = floor(r - arc.tb - eps), in = ceil(r - arc.ta + eps);
    profile->out[j] = out < 0 ? 0 : (int32_t)out;
    profile->in[j] = in > rows ? rows : in < profile->out[j] ? profile->out[j] : (int32_t)in;
    profile->first[j] = total;
    total += (size_t)(profile->in[j] - profile->out[j]);
  }
  profile->cut = malloc((total ? total : 1) * sizeof(float));
  if (!profile->cut) {
    free(profile->out);
    return -1;
  }
  for (int32_t j = 0; j < rows; j++) {
    arc_row arc;
    arc_row_make(&arc, r, j);
    float *cut = profile->cut + profile->first[j];
    double u = arc_row_u(&arc, profile->out[j]), inside = arc_row_inside(&arc, u);
    for (int32_t i = profile->out[j]; i < profile->in[j]; i++) {
      double nextU = arc_row_u(&arc, i + 1), nextInside = arc_row_inside(&arc, nextU);
      *cut++ = (float)((arc.v1 - arc.v0) * (u - nextU) - (inside - nextInside));
      u = nextU;
      inside = nextInside;
    }
  }
  return 0;
}

/* One corner's part in an image row: its profile's row j, at the left or right side. */
typedef struct {
  const corner_profile *profile;
  int32_t j;
  int left;
} corner_in_row;

/* The area corner `c` cuts off the row's pixel x (1: wholly outside the shape). */
static inline double corner_cut_at(const corner_in_row *c, int32_t x, int32_t width) {
  const corner_profile *p = c->profile;
  int32_t i = c->left ? x : width - 1 - x;
  if (i < p->out[c->j]) return 1;
  if (i >= p->in[c->j]) return 0;
  return p->cut[p->first[c->j] + (size_t)(i - p->out[c->j])];
}

/* Scales the row's pixels [from, to) by their coverage: 1 less what each of the row's
 * corners cuts off (the corners' squares do not overlap, so their cuts add up). */
static void cover_span(uint8_t *row, int32_t from, int32_t to, const corner_in_row *corners, int count,
                       int32_t width) {
  for (int32_t x = from; x < to; x++) {
    double co = 1;
    for (int k = 0; k < count; k++) co -= corner_cut_at(&corners[k], x, width);
    if (co >= 1) continue;
    if (co < 0) co = 0;
    uint8_t *p = row + (size_t)x * 4;
    for (int ch = 0; ch < 4; ch++) p[ch] = scale8(p[ch], co);
  }
}

/* Without a border: per row, the spans wholly outside (cleared), wholly inside (kept)
 * and crossed by an arc (scaled by exact coverage from the corners' profiles). */
static int round_no_border(uint8_t *pixels, int32_t width, int32_t height, const double radii[4]) {
  corner_profile profiles[4];
  const corner_profile *of[4] = {NULL, NULL, NULL, NULL}; /* each corner's profile, shared by equal radii */
  int made = 0;
  for (int corner = 0; corner < 4; corner++) {
    if (!(radii[corner] > 0)) continue;
    for (int k = 0; k < made && !of[corner]; k++)
      if (profiles[k].r == radii[corner]) of[corner] = &profiles[k];
    if (of[corner]) continue;
    if (corner_profile_make(&profiles[made], radii[corner]) != 0) {
      while (made > 0) corner_profile_free(&profiles[--made]);
      return -1;
    }
    of[corner] = &profiles[made++];
  }
  for (int32_t y = 0; y < height; y++) {
    uint8_t *row = pixels + (size_t)y * width * 4;
    /* [0, a) outside, [a, b) crossed, [b, c) inside, [c, d) crossed, [d, W) outside. */
    int32_t a = 0, b = 0, c = width, d = width;
    corner_in_row left[2], right[2], all[4];
    int leftCount = 0, rightCount = 0, count = 0;
    for (int corner = 0; corner < 4; corner++) {
      const corner_profile *p = of[corner];
      int32_t j = corner < 2 ? y : height - 1 - y;
      if (!p || j >= p->rows) continue;
      corner_in_row in = {p, j, corner == 0 || corner == 3};
      all[count++] = in;
      if (in.left) {
        left[leftCount++] = in;
        if (p->out[j] > a) a = p->out[j];
        if (p->in[j] > b) b = p->in[j];
      } else {
        right[rightCount++] = in;
        if (width - p->out[j] < d) d = width - p->out[j];
        if (width - p->in[j] < c) c = width - p->in[j];
      }
    }
    if (count == 0) continue;
    if (a > 0) memset(row, 0, (size_t)a * 4);
    if (d < width) memset(row + (size_t)d * 4, 0, (size_t)(width - d) * 4);
    if (b > c) { /* the two sides' spans meet: every corner's cut, all the way across */
      cover_span(row, a, d, all, count, width);
      continue;
    }
    cover_span(row, a, b, left, leftCount, width);
    cover_span(row, c, d, right, rightCount, width);
  }
  while (made > 0) corner_profile_free(&profiles[--made]);
  return 0;
}

int pxl_process_round(uint8_t *pixels, int32_t width, int32_t height, const double radii[4], double border,
                      const uint8_t border_color[4]) {
  if (width <= 0 || height <= 0) return 0;
  if (border <= 0) return round_no_border(pixels, width, height, radii);
  double inner[4];
  for (int i = 0; i < 4; i++) inner[i] = radii[i] > border ? radii[i] - border : 0;
  int edge = (int)ceil(border);
  double bw = (double)width, bh = (double)height;
  double ba = border_color[3] / 255.0;
  for (int32_t y = 0; y < height; y++) {
    uint8_t *row = pixels + (size_t)y * width * 4;
    /* The columns this row needs: the band of each side (border, and the corners' squares
     * the row crosses); the whole row inside the top and bottom border. */
    int32_t left = edge, right = edge;
    if (y < radii[0]) left = left > (int)ceil(radii[0]) ? left : (int)ceil(radii[0]);
    if (y + 1 > bh - radii[3]) left = left > (int)ceil(radii[3]) ? left : (int)ceil(radii[3]);
    if (y < radii[1]) right = right > (int)ceil(radii[1]) ? right : (int)ceil(radii[1]);
    if (y + 1 > bh - radii[2]) right = right > (int)ceil(radii[2]) ? right : (int)ceil(radii[2]);
    int32_t rightStart = width - right;
    if (y < edge || y >= height - edge || left >= rightStart) {
      left = width;
      rightStart = width;
    }
    for (int32_t x = 0; x < width; x++) {
      if (x == left && rightStart > left) {
        x = rightStart;
        if (x >= width) break;
      }
      double co = pxl_process_coverage(x, y, 0, 0, bw, bh, radii);
      double ci = border > 0 ? pxl_process_coverage(x, y, border, border, bw - border, bh - border, inner) : co;
      if (co >= 1 && ci >= 1) continue;
      uint8_t *p = row + (size_t)x * 4;
      if (border <= 0) {
        if (co <= 0) {
          memset(p, 0, 4);
        } else {
          for (int c = 0; c < 4; c++) p[c] = scale8(p[c], co);
        }
        continue;
      }
      double ring = co - ci;
      if (ring < 0) ring = 0;
      for (int c = 0; c < 4; c++) {
        double v = p[c] * ci + (border_color[c] + p[c] * (1 - ba)) * ring;
        p[c] = (uint8_t)(v > 255 ? 255 : v + 0.5);
      }
    }
  }
  return 0;
}

/* ---- Blur ------------------------------------------------------------------------------ */

/* Extended box filters (Gwosdek, Grewenig, Bruhn and Weickert, "Theoretical foundations of
 * Gaussian convolution by extended box filtering", 2011): a box of radius r whose two
 * outer taps weigh alpha in [0, 1), chosen so that n passes have exactly the variance
 * sigma^2. Pillow's GaussianBlur is the same construction. */
typedef struct {
  int radius;
  float alpha; /* the outer taps' weight */
  float scale; /* 1 / (2r + 1 + 2 alpha) */
} ext_box;

static ext_box ext_box_for(double sigma, int passes) {
  double v = sigma * sigma / passes;
  int r = (int)floor((sqrt(12 * v + 1) - 1) / 2);
  if (r < 0) r = 0;
  while ((r + 1) * (r + 2) / 3.0 <= v) r++; /* rounding: the largest r whose plain box fits */
  while (r > 0 && r * (r + 1) / 3.0 > v) r--;
  double alpha = (2 * r + 1) * (v - r * (r + 1) / 3.0) / (2 * ((r + 1) * (r + 1) - v));
  ext_box box = {r, (float)alpha, (float)(1 / (2 * r + 1 + 2 * alpha))};
  return box;
}

/* One extended box pass over `count` samples `step` floats apart (4 channels each), edges
 * extended: a running sum, so its cost does not depend on the radius. */
static void box_pass(const float *in, float *out, int32_t count, size_t step, ext_box box) {
  int radius = box.radius;
  float sum[4];
  const float *first = in, *last = in + (size_t)(count - 1) * step;
#define AT(i) ((i) < 0 ? first : (i) >= count ? last : in + (size_t)(i) * step)
  for (int c = 0; c < 4; c++) sum[c] = first[c] * (radius + 1);
  for (int k = 1; k <= radius; k++) {
    const float *p = AT(k);
    for (int c = 0; c < 4; c++) sum[c] += p[c];
  }
  for (int32_t i = 0; i < count; i++) {
    float *o = out + (size_t)i * step;
    const float *lo = AT(i - radius - 1), *hi = AT(i + radius + 1), *drop = AT(i - radius);
    for (int c = 0; c < 4; c++) {
      o[c] = (sum[c] + box.alpha * (lo[c] + hi[c])) * box.scale;
      sum[c] += hi[c] - drop[c];
    }
  }
#undef AT
}

/* The same down the rows of a strip of `floats` floats per row, all columns at once: a
 * running sum per column (what vectorises). */
static void box_pass_rows(const float *in, float *out, int32_t rows, size_t floats, ext_box box, float *sum) {
  int radius = box.radius;
  const float *first = in, *last = in + (size_t)(rows - 1) * floats;
#define ROW(i) ((i) < 0 ? first : (i) >= rows ? last : in + (size_t)(i) * floats)
  for (size_t i = 0; i < floats; i++) sum[i] = first[i] * (radius + 1);
  for (int k = 1; k <= radius; k++) {
    const float *p = ROW(k);
    for (size_t i = 0; i < floats; i++) sum[i] += p[i];
  }
  for (int32_t y = 0; y < rows; y++) {
    float *o = out + (size_t)y * floats;
    const float *lo = ROW(y - radius - 1), *hi = ROW(y + radius + 1), *drop = ROW(y - radius);
    for (size_t i = 0; i < floats; i++) {
      o[i] = (sum[i] + box.alpha * (lo[i] + hi[i])) * box.scale;
      sum[i] += hi[i] - drop[i];
    }
  }
#undef ROW
}

/* One direct convolution pass with a normalised kernel of radius `radius`, edges extended,
 * over `count` samples `step` floats apart, `width` floats each. */
static void kernel_pass(const float *in, float *out, int32_t count, size_t step, size_t width, const float *kernel,
                        int radius) {
  for (int32_t i = 0; i < count; i++) {
    float *o = out + (size_t)i * step;
    for (size_t c = 0; c < width; c++) o[c] = 0;
    for (int k = -radius; k <= radius; k++) {
      int32_t j = i + k;
      j = j < 0 ? 0 : j >= count ? count - 1 : j;
      const float *p = in + (size_t)j * step;
      float w = kernel[k + radius];
      for (size_t c = 0; c < width; c++) o[c] += p[c] * w;
    }
  }
}

#define PASSES 3
#define STRIP 64 /* columns per vertical strip: a strip of every row fits in cache */
#define DIRECT_BELOW 2.0

int pxl_process_blur(uint8_t *pixels, int32_t width, int32_t height, double sigma) {
  if (!(sigma > 0) || width <= 0 || height <= 0) return 0;
  int direct = sigma < DIRECT_BELOW;
  ext_box box = {0, 0, 1};
  float kernel[2 * 6 + 1];
  int kradius = 0;
  if (direct) {
    kradius = (int)ceil(3 * sigma);
    float total = 0;
    for (int k = -kradius; k <= kradius; k++) total += kernel[k + kradius] = (float)exp(-(k * k) / (2 * sigma * sigma));
    for (int k = 0; k <= 2 * kradius; k++) kernel[k] /= total;
  } else {
    box = ext_box_for(sigma, PASSES);
  }
  size_t rowFloats = (size_t)width * 4;
  size_t strip = (size_t)height * 4 * STRIP;
  size_t scratch = rowFloats > strip ? rowFloats : strip;
  float *image = malloc(rowFloats * height * sizeof(float));
  float *a = malloc(scratch * sizeof(float));
  float *b = malloc(scratch * sizeof(float));
  float *sum = malloc(rowFloats * sizeof(float) + 4 * STRIP * sizeof(float));
  if (!image || !a || !b || !sum) {
    free(image), free(a), free(b), free(sum);
    return -1;
  }
  /* Rows: into floats, the passes, into the float image. */
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *src = pixels + (size_t)y * rowFloats;
    for (size_t i = 0; i < rowFloats; i++) a[i] = src[i];
    float *dst = image + (size_t)y * rowFloats;
    if (direct) {
      kernel_pass(a, dst, width, 4, 4, kernel, kradius);
    } else {
      float *in = a, *out = b;
      for (int pass = 0; pass < PASSES; pass++) {
        if (pass == PASSES - 1) out = dst;
        box_pass(in, out, width, 4, box);
        float *t = in;
        in = out;
        out = t;
      }
    }
  }
  /* Columns, a strip at a time: the strip's rows copied out, then the passes down it. */
  for (int32_t x0 = 0; x0 < width; x0 += STRIP) {
    int32_t cols = width - x0 < STRIP ? width - x0 : STRIP;
    size_t floats = (size_t)cols * 4;
    for (int32_t y = 0; y < height; y++) {
      memcpy(a + y * floats, image + (size_t)y * rowFloats + (size_t)x0 * 4, floats * sizeof(float));
    }
    float *result = b;
    if (direct) {
      kernel_pass(a, b, height, floats, floats, kernel, kradius);
    } else {
      float *in = a, *out = b;
      for (int pass = 0; pass < PASSES; pass++) {
        box_pass_rows(in, out, height, floats, box, sum);
        result = out;
        float *t = in;
        in = out;
        out = t;
      }
    }
    for (int32_t y = 0; y < height; y++) {
      uint8_t *dst = pixels + (size_t)y * rowFloats + (size_t)x0 * 4;
      const float *s = result + y * floats;
      for (size_t i = 0; i < floats; i += 4) {
        float alpha = s[i + 3] + 0.5f;
        uint8_t al = (uint8_t)(alpha < 0 ? 0 : alpha > 255 ? 255 : alpha);
        for (int c = 0; c < 3; c++) {
          float v = s[i + c] + 0.5f;
          uint8_t u = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
          dst[i + c] = u > al ? al : u; /* premultiplied: never above alpha */
        }
        dst[i + 3] = al;
      }
    }
  }
  free(image), free(a), free(b), free(sum);
  return 0;
}

/* ---- Geometry and colour ----------------------------------------------------------------- */

void pxl_process_crop(const uint8_t *src, int32_t src_width, int32_t x, int32_t y, int32_t w, int32_t h,
                      uint8_t *dst) {
  for (int32_t row = 0; row < h; row++) {
    memcpy(dst + (size_t)row * w * 4, src + ((size_t)(y + row) * src_width + x) * 4, (size_t)w * 4);
  }
}

void pxl_process_rotate(const uint8_t *src, int32_t width, int32_t height, int32_t quarter_turns, uint8_t *dst) {
  const uint32_t *s = (const uint32_t *)src;
  uint32_t *d = (uint32_t *)dst;
  for (int32_t y = 0; y < height; y++) {
    for (int32_t x = 0; x < width; x++) {
      uint32_t p = s[(size_t)y * width + x];
      switch (quarter_turns) {
      case 1: d[(size_t)x * height + (height - 1 - y)] = p; break;
      case 2: d[(size_t)(height - 1 - y) * width + (width - 1 - x)] = p; break;
      default: d[(size_t)(width - 1 - x) * height + y] = p; break;
      }
    }
  }
}

void pxl_process_flip(uint8_t *pixels, int32_t width, int32_t height, int32_t vertical) {
  uint32_t *p = (uint32_t *)pixels;
  if (vertical) {
    for (int32_t y = 0; y < height / 2; y++) {
      uint32_t *top = p + (size_t)y * width, *bottom = p + (size_t)(height - 1 - y) * width;
      for (int32_t x = 0; x < width; x++) {
        uint32_t t = top[x];
        top[x] = bottom[x];
        bottom[x] = t;
      }
    }
    return;
  }
  for (int32_t y = 0; y < height; y++) {
    uint32_t *row = p + (size_t)y * width;
    for (int32_t x = 0; x < width / 2; x++) {
      uint32_t t = row[x];
      row[x] = row[width - 1 - x];
      row[width - 1 - x] = t;
    }
  }
}

/* libjpeg's BT.601 integer luma, as the shims' GRAY layout. Linear, so it applies to
 * premultiplied values as they are. */
static inline uint8_t luma(uint32_t r, uint32_t g, uint32_t b) {
  return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

void pxl_process_gray(uint8_t *pixels, size_t count) {
  for (size_t i = 0; i < count; i++, pixels += 4) {
    uint8_t y = luma(pixels[0], pixels[1], pixels[2]);
    pixels[0] = pixels[1] = pixels[2] = y;
  }
}

void pxl_process_tint(uint8_t *pixels, size_t count, const uint8_t color[4]) {
  uint32_t ca = color[3];
  for (size_t i = 0; i < count; i++, pixels += 4) {
    uint32_t a = pixels[3];
    /* source-atop, premultiplied: colour * dst alpha + dst * (1 - colour alpha). */
    for (int c = 0; c < 3; c++) {
      uint32_t v = (color[c] * ca * a + 127 * 255) / (255 * 255) + (pixels[c] * (255 - ca) + 127) / 255;
      pixels[c] = (uint8_t)(v > a ? a : v);
    }
  }
}

/* A premultiplied pixel's colour made straight into rgb (which may be p): c * 255 / a,
 * rounded. The division is a multiply by 2^32 / a rounded up, exact for every numerator
 * below 2^16 (its error, under a / 2^32 a unit, never crosses an integer): one division
 * a pixel instead of three. */
static inline void straight_color(const uint8_t *p, uint8_t *rgb) {
  uint32_t a = p[3];
  if (a == 255 || a == 0) { /* the same straight (a transparent pixel is all 0) */
    rgb[0] = p[0], rgb[1] = p[1], rgb[2] = p[2];
    return;
  }
  uint64_t reciprocal = (uint64_t)(0xFFFFFFFFu / a) + 1;
  for (int c = 0; c < 3; c++) {
    uint32_t v = (uint32_t)(((uint64_t)(p[c] * 255u + a / 2) * reciprocal) >> 32);
    rgb[c] = (uint8_t)(v > 255 ? 255 : v);
  }
}

/* Straight RGBA8 from premultiplied, in place. Opaque and transparent pixels are the same
 * in both (a transparent one is all 0), and a thumbnail is mostly runs of one or the
 * other, so eight pixels are tested at once (their alpha bytes in four 64-bit words,
 * whatever the byte order) and only a block holding a translucent pixel is visited. */
static void unpremultiply_in_place(uint8_t *pixels, size_t count) {
  static const uint8_t alpha_bytes[8] = {0, 0, 0, 255, 0, 0, 0, 255};
  uint64_t mask;
  memcpy(&mask, alpha_bytes, 8);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t w[4];
    memcpy(w, pixels + i * 4, 32);
    uint64_t all = w[0] & w[1] & w[2] & w[3] & mask, any = (w[0] | w[1] | w[2] | w[3]) & mask;
    if (all == mask || any == 0) continue; /* all opaque, or all transparent */
    for (uint8_t *p = pixels + i * 4, *end = p + 32; p < end; p += 4) straight_color(p, p);
  }
  for (uint8_t *p = pixels + i * 4; i < count; i++, p += 4) straight_color(p, p);
}

void pxl_process_convert(const uint8_t *src, size_t count, int32_t format, uint8_t *dst) {
  /* One loop per format (the switch outside). */
  switch (format) {
  case 0:
    /* A copy, then only the translucent pixels made straight: faster than every pixel
     * through straight_color. */
    if (dst != src) memcpy(dst, src, count * 4);
    unpremultiply_in_place(dst, count);
    break;
  case 2:
    for (size_t i = 0; i < count; i++, src += 4, dst += 4) {
      uint8_t r = src[0], b = src[2];
      dst[0] = b, dst[1] = src[1], dst[2] = r, dst[3] = src[3];
    }
    break;
  case 3:
    for (size_t i = 0; i < count; i++, src += 4, dst += 3) straight_color(src, dst);
    break;
  case 4:
    for (size_t i = 0; i < count; i++, src += 4) {
      uint8_t rgb[3];
      straight_color(src, rgb);
      *dst++ = luma(rgb[0], rgb[1], rgb[2]);
    }
    break;
  default:
    if (dst != src) memcpy(dst, src, count * 4);
    break;
  }
}
