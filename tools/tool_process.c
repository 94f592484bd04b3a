/*
 * tool_process.c: the --process grammar, comma-separated steps into pxl_processor
 * structs: circle, circle:BORDER_W:#RRGGBBAA, round:R or round:TL/TR/BR/BL (optionally
 * :BORDER_W:#RRGGBBAA), blur:SIGMA, crop:X:Y:W:H, rotate:90|180|270, flip:h|v, gray,
 * tint:#RRGGBBAA. The same grammar is in usage_text (tool_help.c) and man pixload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tool_process.h"

/* A non-negative finite number that is all of text (up to end), or -1. */
static double spec_number(const char *text, const char *end) {
  char buf[64], *stop;
  size_t n = (size_t)(end - text);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, text, n);
  buf[n] = 0;
  double v = strtod(buf, &stop);
  return *stop == 0 && v >= 0 && v < 1e7 ? v : -1;
}

/* "#RRGGBBAA" (exactly) into 0xRRGGBBAA; 0 on success. */
static int spec_color(const char *text, const char *end, uint32_t *out) {
  if (end - text != 9 || text[0] != '#') return -1;
  uint32_t v = 0;
  for (const char *p = text + 1; p < end; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
          : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return 0;
}

/* One --process step, "kind[:arg]..." (text up to end), into *p; 0 on success. The
 * grammar is in usage_text and man pixload. */
static int parse_step(const char *text, const char *end, pxl_processor *p) {
  const char *field[6];
  const char *field_end[6];
  int count = 0;
  for (const char *f = text; count < 6;) {
    const char *colon = memchr(f, ':', (size_t)(end - f));
    field[count] = f;
    field_end[count++] = colon ? colon : end;
    if (!colon) break;
    f = colon + 1;
    if (count == 6) return -1;
  }
#define IS(i, word) (field_end[i] - field[i] == (long)strlen(word) && !strncmp(field[i], word, strlen(word)))
  memset(p, 0, sizeof *p);
  if ((IS(0, "circle") || IS(0, "round")) && (count == 1 || count == 2 || count == 3 || count == 4)) {
    int round = IS(0, "round"), first_border = round ? 2 : 1;
    p->kind = round ? PXL_PROCESS_ROUND : PXL_PROCESS_CIRCLE;
    if (round) {
      if (count < 2) return -1;
      const char *r = field[1];
      double *radius[4] = {&p->radius_tl, &p->radius_tr, &p->radius_br, &p->radius_bl};
      for (int i = 0; i < 4; i++) {
        const char *slash = memchr(r, '/', (size_t)(field_end[1] - r));
        const char *stop = slash ? slash : field_end[1];
        if ((*radius[i] = spec_number(r, stop)) < 0) return -1;
        if (!slash) {
          if (i == 3) break;
          if (i != 0) return -1; /* one radius or four */
          p->radius_tr = p->radius_br = p->radius_bl = p->radius_tl;
          break;
        }
        if (i == 3) return -1;
        r = slash + 1;
      }
    }
    if (count == first_border + 2) {
      if ((p->border_width = spec_number(field[first_border], field_end[first_border])) < 0) return -1;
      if (spec_color(field[first_border + 1], field_end[first_border + 1], &p->color)) return -1;
    } else if (count != first_border) {
      return -1;
    }
    return 0;
  }
  if (IS(0, "blur") && count == 2) {
    p->kind = PXL_PROCESS_BLUR;
    p->sigma = spec_number(field[1], field_end[1]);
    return p->sigma < 0 || p->sigma > PXL_MAX_BLUR_SIGMA ? -1 : 0;
  }
  if (IS(0, "crop") && count == 5) {
    double v[4];
    for (int i = 0; i < 4; i++) {
      if ((v[i] = spec_number(field[i + 1], field_end[i + 1])) < 0 || v[i] != (int32_t)v[i]) return -1;
    }
    p->kind = PXL_PROCESS_CROP;
    p->x = (int32_t)v[0], p->y = (int32_t)v[1], p->width = (int32_t)v[2], p->height = (int32_t)v[3];
    return p->width > 0 && p->height > 0 ? 0 : -1;
  }
  if (IS(0, "rotate") && count == 2) {
    p->kind = PXL_PROCESS_ROTATE;
    p->degrees = IS(1, "90") ? 90 : IS(1, "180") ? 180 : IS(1, "270") ? 270 : 0;
    return p->degrees ? 0 : -1;
  }
  if (IS(0, "flip") && count == 2 && (IS(1, "h") || IS(1, "v"))) {
    p->kind = PXL_PROCESS_FLIP;
    p->vertical = IS(1, "v");
    return 0;
  }
  if (IS(0, "gray") && count == 1) {
    p->kind = PXL_PROCESS_GRAY;
    return 0;
  }
  if (IS(0, "tint") && count == 2) {
    p->kind = PXL_PROCESS_TINT;
    return spec_color(field[1], field_end[1], &p->color);
  }
#undef IS
  return -1;
}

int parse_process(const char *spec, pxl_processor *processors, size_t *count) {
  size_t n = 0;
  const char *step = spec;
  for (;;) {
    const char *comma = strchr(step, ',');
    const char *end = comma ? comma : step + strlen(step);
    if (n == PXL_MAX_PROCESSORS || parse_step(step, end, &processors[n])) return -1;
    n++;
    if (!comma) break;
    step = comma + 1;
  }
  *count = n;
  return 0;
}
