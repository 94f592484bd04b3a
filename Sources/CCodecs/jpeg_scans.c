/*
 * Progressive JPEG scans without libjpeg: a bounds-checked walk over the marker segments
 * and scans, and what is built on it (the DC scans as a JPEG of their own, the DC-only
 * baseline transcode of a 1/8 thumbnail, the scan prefixes of previews, the early end of
 * a thumbnail's transfer). jpeg_shim.c decodes what these return through libjpeg.
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* At 1/8 scale libjpeg gives each component the smallest IDCT whose output it need not
 * upsample (jdmaster.c, jpeg_core_output_dimensions): 1x1 for full-resolution components,
 * 2x2 or 4x4 for subsampled ones (4:2:0 chroma: 2x2). The 1x1 IDCT reads the DC
 * coefficient only; the reduced 2x2 and 4x4 ones read AC coefficients too. */
static int needs_ac_at_one_eighth(int h, int v, int max_h, int max_v) {
  int ssize = 1;
  while (ssize < 8 && max_h % (h * ssize * 2) == 0 && max_v % (v * ssize * 2) == 0) ssize *= 2;
  return ssize > 1;
}

/* A walk over a progressive JPEG's marker segments and scans, without decoding: what
 * first-scan thumbnails, previews and the early end of a thumbnail's transfer share.
 * Only a consistent progression is walked (libjpeg's own Ss/Se/Ah/Al and
 * coefficient-state checks, jdphuff.c): on a bogus one the full decode's result depends
 * on every scan's order. Never reads outside [data, data+size). */
typedef struct scan_walk {
  const uint8_t *data;
  size_t size, at;
  int progressive, scans;
  /* The frame's components (id, sampling factors) from SOF2/SOF10. */
  int ncomp, comp_id[4], comp_h[4], comp_v[4], max_h, max_v, width, height;
  /* Each coefficient's successive-approximation state, as libjpeg tracks it: -1 before
   * its first scan, then the Al of its last scan (0: final precision). */
  signed char coef_bits[4][64];
  /* The segment walk_next returned: [segment, end) with fill bytes dropped; for a scan,
   * end is where its entropy-coded data ends (the next marker), and these: */
  size_t segment, end;
  int ss, ah, al, scan_comps, scan_comp[4], scan_table[4];
  size_t scan_data; /* where a scan's entropy-coded data starts */
} scan_walk;

enum { WALK_SEGMENT = 1, WALK_SCAN = 2, WALK_END = 0, WALK_STOP = -1 };

static void walk_start(scan_walk *w, const uint8_t *data, size_t size) {
  memset(w, 0, sizeof *w);
  memset(w->coef_bits, -1, sizeof w->coef_bits);
  w->data = data;
  w->size = size;
  w->at = 2;
  w->max_h = w->max_v = 1;
}

/* The next marker segment (WALK_SEGMENT) or complete scan (WALK_SCAN), WALK_END at EOI,
 * or WALK_STOP: truncated, not progressive, or not understood. */
static int walk_next(scan_walk *w) {
  const uint8_t *data = w->data;
  size_t size = w->size, at = w->at;
  if (w->at == 2 && (size < 4 || data[0] != 0xFF || data[1] != 0xD8)) return WALK_STOP;
  /* A marker: 0xFF, any fill 0xFFs, then its code. */
  if (at >= size || data[at] != 0xFF) return WALK_STOP;
  while (at < size && data[at] == 0xFF) at++;
  if (at >= size) return WALK_STOP;
  uint8_t code = data[at++];
  if (code == 0xD9) return WALK_END;
  if (code == 0x00 || code == 0x01 || (code >= 0xD0 && code <= 0xD8)) return WALK_STOP;
  if (at + 2 > size) return WALK_STOP;
  size_t length = pxl_be16(data + at);
  if (length < 2 || at + length > size) return WALK_STOP;
  w->segment = at - 2; /* from the marker's last 0xFF */
  const uint8_t *body = data + at + 2;
  w->end = at + length;
  int is_frame = code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC;
  if (is_frame) {
    /* One frame, progressive (SOF2, SOF10): P, Y, X, Nf, Nf x (C, H/V, Tq). Other frame
     * types (baseline, lossless, hierarchical) have no scans to tell apart. */
    if (w->progressive || (code != 0xC2 && code != 0xCA) || length < 8) return WALK_STOP;
    w->height = (int)pxl_be16(body + 1);
    w->width = (int)pxl_be16(body + 3);
    w->ncomp = body[5];
    if (w->ncomp < 1 || w->ncomp > 4 || length != 8 + 3 * (size_t)w->ncomp) return WALK_STOP;
    for (int i = 0; i < w->ncomp; i++) {
      w->comp_id[i] = body[6 + 3 * i];
      w->comp_h[i] = body[7 + 3 * i] >> 4;
      w->comp_v[i] = body[7 + 3 * i] & 15;
      if (w->comp_h[i] < 1 || w->comp_h[i] > 4 || w->comp_v[i] < 1 || w->comp_v[i] > 4) return WALK_STOP;
      if (w->comp_h[i] > w->max_h) w->max_h = w->comp_h[i];
      if (w->comp_v[i] > w->max_v) w->max_v = w->comp_v[i];
    }
    w->progressive = 1;
  }
  if (code != 0xDA) {
    w->at = w->end;
    return WALK_SEGMENT;
  }
  /* SOS: Ns, Ns x (Cs, Td/Ta), Ss, Se, Ah/Al; then entropy-coded data up to the next
   * marker that is neither a stuffed 0xFF00 nor a restart marker. */
  if (!w->progressive || length < 6) return WALK_STOP;
  size_t ns = body[0];
  if (ns < 1 || ns > 4 || length != 6 + 2 * ns) return WALK_STOP;
  int ss = body[1 + 2 * ns], se = body[2 + 2 * ns], ah = body[3 + 2 * ns] >> 4, al = body[3 + 2 * ns] & 15;
  if (w->scans >= PXL_JPEG_MAX_SCANS) return WALK_STOP;
  if (ss == 0 ? se != 0 : (se < ss || se > 63 || ns != 1)) return WALK_STOP;
  if ((ah != 0 && al != ah - 1) || al > 13) return WALK_STOP;
  size_t data_end = w->end;
  for (;;) {
    const uint8_t *ff = memchr(data + data_end, 0xFF, size - data_end);
    if (ff == NULL) return WALK_STOP; /* the scan's end has not arrived */
    data_end = (size_t)(ff - data);
    size_t next = data_end + 1;
    while (next < size && data[next] == 0xFF) next++;
    if (next >= size) return WALK_STOP;
    if (data[next] == 0x00 || (data[next] >= 0xD0 && data[next] <= 0xD7)) {
      data_end = next + 1;
      continue;
    }
    break; /* data_end: the 0xFF (first of any fill) of the next marker */
  }
  /* Complete: its coefficients take their new state. */
  w->ss = ss;
  w->scan_comps = (int)ns;
  for (size_t j = 0; j < ns; j++) {
    int c = 0;
    while (c < w->ncomp && w->comp_id[c] != body[1 + 2 * j]) c++;
    if (c == w->ncomp) return WALK_STOP;
    if (ss > 0 && w->coef_bits[c][0] < 0) return WALK_STOP; /* AC before DC */
    for (int k = ss; k <= se; k++) {
      if (ah != (w->coef_bits[c][k] < 0 ? 0 : w->coef_bits[c][k])) return WALK_STOP;
      w->coef_bits[c][k] = (signed char)al;
    }
    w->scan_comp[j] = c;
    w->scan_table[j] = body[2 + 2 * j] >> 4; /* its DC Huffman table */
  }
  w->ah = ah;
  w->al = al;
  w->scan_data = w->end;
  w->scans++;
  w->end = data_end;
  w->at = data_end;
  return WALK_SCAN;
}

/* Whether a 1/8 decode reads the AC coefficients of the walk's component c. */
static int walk_needs_ac(const scan_walk *w, int c) {
  return needs_ac_at_one_eighth(w->comp_h[c], w->comp_v[c], w->max_h, w->max_v);
}

/* Whether the scans walked so far hold every coefficient a 1/8 decode reads at its final
 * precision. */
static int walk_has_first_scans(const scan_walk *w) {
  for (int c = 0; c < w->ncomp; c++) {
    int last = walk_needs_ac(w, c) ? 63 : 0;
    for (int k = 0; k <= last; k++)
      if (w->coef_bits[c][k] != 0) return 0;
  }
  return w->ncomp > 0;
}

size_t pxl_jpeg_dc_scans(const uint8_t *data, size_t size, uint8_t **out) {
  *out = NULL;
  if (data == NULL || size < 4) return 0;
  uint8_t *copy = malloc(size); /* the kept scans are a part; never more than size */
  if (copy == NULL) return 0;
  size_t used = 0;
  int step;
  copy[used++] = 0xFF;
  copy[used++] = 0xD8;
  scan_walk w;
  walk_start(&w, data, size);
  while ((step = walk_next(&w)) > 0) {
    /* DC scans, first pass and refinements: always kept. An AC scan (one component)
     * when that component's IDCT reads AC coefficients. */
    int keep = step == WALK_SEGMENT || w.ss == 0 || walk_needs_ac(&w, w.scan_comp[0]);
    if (keep) {
      memcpy(copy + used, data + w.segment, w.end - w.segment);
      used += w.end - w.segment;
    }
  }
  /* Incomplete needed coefficients (a file cut short): libjpeg's own decode, whose block
   * smoothing estimates what is missing, as djpeg shows it. With all of them there, the
   * copy is decoded without smoothing, as the whole file would be (smoothing runs only
   * while coefficients are missing; libjpeg-turbo 2.1+ then smooths even DC), also when
   * the AC scans it does not need never came (a thumbnail's transfer ended early). */
  if (step != WALK_END || !walk_has_first_scans(&w)) {
    free(copy);
    return 0;
  }
  copy[used++] = 0xFF;
  copy[used++] = 0xD9;
  *out = copy;
  return used;
}

/* ---- DC-only thumbnails as a baseline JPEG ----
 *
 * When no component's 1/8 IDCT reads AC coefficients (4:4:4, 4:2:2, grayscale: only
 * 4:2:0-style vertical subsampling makes libjpeg pick a 2x2 IDCT), a 1/8 thumbnail is a
 * function of the DC coefficients alone. Decoding the DC scans here (Huffman only: a
 * DC coefficient is a category and its bits, a refinement one bit) and writing them as
 * a baseline JPEG whose AC is empty lets libjpeg decode the thumbnail without the
 * whole-image coefficient buffer a progressive file needs (tens of MB to fault in for a
 * camera photo, most of the first-scan decode's time), through the same IDCT,
 * upsampling and colour conversion: the same pixels. Anything unexpected (a marker
 * inside a scan's data, a value out of range, an odd layout) gives up, and the caller
 * takes the progressive path. */

typedef struct dc_table {
  int present;
  /* Canonical Huffman decoding (JPEG Annex F.2.2.3): per code length, the first code,
   * how many, and where their symbols start in vals. */
  int32_t mincode[17], maxcode[18], valptr[17];
  uint8_t vals[256];
  /* 8-bit lookahead: length (0: longer) and symbol of the code starting with those bits. */
  uint8_t look_len[256], look_sym[256];
} dc_table;

static int dc_table_parse(dc_table *t, const uint8_t *counts, const uint8_t *symbols, int total) {
  memset(t, 0, sizeof *t);
  if (total > 256) return 0;
  memcpy(t->vals, symbols, (size_t)total);
  int32_t code = 0, k = 0;
  for (int len = 1; len <= 16; len++) {
    t->valptr[len] = k;
    t->mincode[len] = code;
    code += counts[len - 1];
    k += counts[len - 1];
    t->maxcode[len] = counts[len - 1] ? code - 1 : -1;
    if (code > (1 << len)) return 0; /* over-subscribed */
    code <<= 1;
  }
  t->maxcode[17] = 0x7fffffff;
  /* The lookahead table, for codes of up to 8 bits. */
  code = 0;
  k = 0;
  for (int len = 1; len <= 8; len++) {
    for (int i = 0; i < counts[len - 1]; i++, k++, code++) {
      int fill = 1 << (8 - len);
      for (int j = 0; j < fill; j++) {
        t->look_len[(code << (8 - len)) | j] = (uint8_t)len;
        t->look_sym[(code << (8 - len)) | j] = symbols[k];
      }
    }
    code <<= 1;
  }
  t->present = 1;
  return 1;
}

typedef struct bit_reader {
  const uint8_t *data;
  size_t at, end;
  uint32_t acc; /* bits, most significant first */
  int count;
  int failed;   /* a marker, or the end, inside the data: give up */
} bit_reader;

/* Stops at the end of the data or at a marker (a restart, or the scan's end): bits_get
 * then fails if it needs bits beyond it. */
static inline void bits_fill(bit_reader *b) {
  while (b->count <= 24) {
    if (b->at >= b->end) return;
    uint8_t byte = b->data[b->at];
    if (byte == 0xFF) {
      if (b->at + 1 >= b->end || b->data[b->at + 1] != 0x00) return;
      b->at += 2;
    } else {
      b->at++;
    }
    b->acc |= (uint32_t)byte << (24 - b->count);
    b->count += 8;
  }
}

static inline int bits_get(bit_reader *b, int n) {
  if (n == 0) return 0;
  if (b->count < n) bits_fill(b);
  if (b->count < n) {
    b->failed = 1;
    return 0;
  }
  int v = (int)(b->acc >> (32 - n));
  b->acc <<= n;
  b->count -= n;
  return v;
}

static inline int huff_decode(bit_reader *b, const dc_table *t) {
  if (b->count < 16) bits_fill(b);
  if (b->count >= 8) {
    int look = (int)(b->acc >> 24);
    if (t->look_len[look]) {
      int len = t->look_len[look];
      b->acc <<= len;
      b->count -= len;
      return t->look_sym[look];
    }
  }
  int32_t code = 0;
  for (int len = 1; len <= 16; len++) {
    code = (code << 1) | bits_get(b, 1);
    if (b->failed) return -1;
    if (t->maxcode[len] >= 0 && code <= t->maxcode[len] && code >= t->mincode[len])
      return t->vals[t->valptr[len] + code - t->mincode[len]];
  }
  b->failed = 1;
  return -1;
}

/* At a restart marker: byte-align, step over RSTn, which must be next. */
static void bits_restart(bit_reader *b) {
  /* Whole bytes still in the accumulator were read past the marker's position only if
   * the fill crossed it, and bits_fill never does: drop the partial byte's bits. */
  b->acc = 0;
  b->count = 0;
  if (b->at + 1 >= b->end || b->data[b->at] != 0xFF || b->data[b->at + 1] < 0xD0 || b->data[b->at + 1] > 0xD7) {
    b->failed = 1;
    return;
  }
  b->at += 2;
}

typedef struct bit_writer {
  uint8_t *out;
  size_t used, cap;
  uint64_t acc; /* pending bits, the oldest highest, `count` of them */
  int count;
  int failed;
} bit_writer;

static int grow(bit_writer *w, size_t need) {
  if (w->used + need <= w->cap) return 1;
  size_t cap = w->cap * 2 + need + 4096;
  uint8_t *grown = realloc(w->out, cap);
  if (!grown) {
    w->failed = 1;
    return 0;
  }
  w->out = grown;
  w->cap = cap;
  return 1;
}

static void put_byte(bit_writer *w, uint8_t byte) {
  if (grow(w, 1)) w->out[w->used++] = byte;
}

/* Appends n <= 32 bits, 0xFF bytes stuffed with 0x00 as entropy-coded data requires. */
static void put_bits(bit_writer *w, uint32_t bits, int n) {
  w->acc = (w->acc << n) | (bits & (n == 32 ? 0xFFFFFFFFu : (1u << n) - 1));
  w->count += n;
  if (w->count < 8 || !grow(w, 10)) return;
  while (w->count >= 8) {
    uint8_t byte = (uint8_t)(w->acc >> (w->count - 8));
    w->out[w->used++] = byte;
    if (byte == 0xFF) w->out[w->used++] = 0x00;
    w->count -= 8;
  }
}

static void put_raw(bit_writer *w, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) put_byte(w, bytes[i]);
}

/* The DC table written: JPEG's example luminance DC table (Annex K.3), categories 0-11. */
static const uint8_t dc_counts[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t dc_symbols[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

size_t pxl_jpeg_dc_baseline(const uint8_t *data, size_t size, uint8_t **out) {
  *out = NULL;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  dc_table tables[4];
  memset(tables, 0, sizeof tables);
  int32_t *dc[4] = {NULL, NULL, NULL, NULL};
  int blocks_w[4] = {0}, blocks_h[4] = {0}, mcus_w = 0, mcus_h = 0, restart = 0, ok = 0, step, scans = 0;
  const uint8_t *sof = NULL; /* the frame's segment, rewritten as SOF0 */
  size_t sof_len = 0;
  /* The segments libjpeg reads to pick the colour space and the quantisation: kept. */
  bit_writer o = {0};
  put_byte(&o, 0xFF);
  put_byte(&o, 0xD8);
  while ((step = walk_next(&w)) > 0) {
    const uint8_t *seg = data + w.segment;
    size_t seg_len = w.end - w.segment;
    if (step == WALK_SEGMENT) {
      uint8_t code = seg[1];
      /* A table redefined between scans would apply only to the scans after it. */
      if (code == 0xDB && scans > 0) goto done;
      if (code == 0xDB || code == 0xE0 || code == 0xEE) put_raw(&o, seg, seg_len); /* DQT, JFIF, Adobe */
      if (code == 0xDD) {
        if (seg_len != 6) goto done;
        restart = (int)pxl_be16(seg + 4);
      }
      if (code == 0xC4) {
        /* DHT: Tc/Th, 16 counts, symbols; repeated. Only DC tables matter here. */
        size_t at = 4;
        while (at < seg_len) {
          if (at + 17 > seg_len) goto done;
          int tc = seg[at] >> 4, th = seg[at] & 15, total = 0;
          for (int i = 0; i < 16; i++) total += seg[at + 1 + i];
          if (th > 3 || at + 17 + (size_t)total > seg_len) goto done;
          if (tc == 0 && !dc_table_parse(&tables[th], seg + at + 1, seg + at + 17, total)) goto done;
          at += 17 + (size_t)total;
        }
      }
      if (code == 0xC2 || code == 0xCA) {
        if (seg[4] != 8 || code == 0xCA) goto done; /* 8-bit, Huffman-coded only */
        sof = seg;
        sof_len = seg_len;
        for (int c = 0; c < w.ncomp; c++)
          if (walk_needs_ac(&w, c)) goto done; /* its 1/8 IDCT reads AC: not DC-only */
        mcus_w = (w.width + 8 * w.max_h - 1) / (8 * w.max_h);
        mcus_h = (w.height + 8 * w.max_v - 1) / (8 * w.max_v);
        if (w.width == 0 || w.height == 0) goto done;
        for (int c = 0; c < w.ncomp; c++) {
          blocks_w[c] = mcus_w * w.comp_h[c];
          blocks_h[c] = mcus_h * w.comp_v[c];
          dc[c] = calloc((size_t)blocks_w[c] * (size_t)blocks_h[c], sizeof(int32_t));
          if (!dc[c]) goto done;
        }
      }
      continue;
    }
    scans++;
    if (w.ss != 0) continue; /* AC scans: not needed */
    /* A DC scan: first pass (Ah 0) or refinement. */
    bit_reader b = {data, w.scan_data, w.end, 0, 0, 0};
    int32_t pred[4] = {0, 0, 0, 0};
    for (int j = 0; j < w.scan_comps; j++)
      if (w.ah == 0 && !tables[w.scan_table[j]].present) goto done;
    long units, per_row;
    int single = w.scan_comps == 1;
    if (single) {
      /* Non-interleaved: the component's own blocks, row by row (libjpeg's
       * downsampled size: ceil(width * h / max_h), in blocks). */
      int c = w.scan_comp[0];
      int cw = ((w.width * w.comp_h[c] + w.max_h - 1) / w.max_h + 7) / 8;
      int ch = ((w.height * w.comp_v[c] + w.max_v - 1) / w.max_v + 7) / 8;
      per_row = cw;
      units = (long)cw * ch;
    } else {
      per_row = mcus_w;
      units = (long)mcus_w * mcus_h;
    }
    /* Locals, not the walker's fields: the stores into dc[] could alias those. */
    const int ah = w.ah, al = w.al, ncomps = w.scan_comps;
    int comp[4], hs[4], vs[4], stride[4];
    const dc_table *table[4];
    for (int j = 0; j < ncomps; j++) {
      comp[j] = w.scan_comp[j];
      hs[j] = single ? 1 : w.comp_h[comp[j]];
      vs[j] = single ? 1 : w.comp_v[comp[j]];
      stride[j] = blocks_w[comp[j]];
      table[j] = &tables[w.scan_table[j]];
    }
    long row = 0, col = 0;
    for (long u = 0; u < units; u++) {
      if (restart && u > 0 && u % restart == 0) {
        bits_restart(&b);
        memset(pred, 0, sizeof pred);
      }
      for (int j = 0; j < ncomps; j++) {
        int32_t *base = dc[comp[j]] + (row * vs[j]) * stride[j] + col * hs[j];
        for (int v = 0; v < vs[j]; v++) {
          for (int h = 0; h < hs[j]; h++) {
            int32_t *coef = base + v * stride[j] + h;
            if (ah == 0) {
              int t = huff_decode(&b, table[j]);
              if (t < 0 || t > 11) goto done;
              int diff = bits_get(&b, t);
              if (t && diff < (1 << (t - 1))) diff -= (1 << t) - 1; /* JPEG's EXTEND */
              pred[j] += diff;
              if (pred[j] < -32768 || pred[j] > 32767) goto done; /* no real DC; and no overflow */
              *coef = (int32_t)((uint32_t)pred[j] << al);
            } else if (bits_get(&b, 1)) {
              *coef |= 1 << al;
            }
          }
        }
      }
      if (b.failed) goto done;
      if (++col == per_row) {
        col = 0;
        row++;
      }
    }
  }
  if (step != WALK_END || !sof || !walk_has_first_scans(&w)) goto done;
  {
    /* SOF0: precision 8, the frame's size and components (ids, sampling, tables). */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xC0);
    put_raw(&o, sof + 2, sof_len - 2);
    /* DHT: DC table 0 (categories 0-11), AC table 0 with one code, "0", for EOB. */
    uint8_t dht[] = {0xFF, 0xC4, 0, 2 + 17 + 12 + 17 + 1, 0x00};
    put_raw(&o, dht, sizeof dht);
    put_raw(&o, dc_counts, 16);
    put_raw(&o, dc_symbols, 12);
    uint8_t ac[18] = {0x10, 1};
    put_raw(&o, ac, sizeof ac); /* Tc 1 Th 0, one code of length 1, then its symbol 0x00 */
    /* SOS: every component, tables 0/0, Ss 0, Se 63, Ah/Al 0. */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xDA);
    put_byte(&o, 0);
    put_byte(&o, (uint8_t)(6 + 2 * w.ncomp));
    put_byte(&o, (uint8_t)w.ncomp);
    for (int c = 0; c < w.ncomp; c++) {
      put_byte(&o, (uint8_t)w.comp_id[c]);
      put_byte(&o, 0x00);
    }
    put_byte(&o, 0);
    put_byte(&o, 63);
    put_byte(&o, 0);
    /* The DC table's codes (canonical, from dc_counts). */
    uint16_t codes[12];
    uint8_t lengths[12];
    int code = 0, k = 0;
    for (int len = 1; len <= 16; len++, code <<= 1)
      for (int i = 0; i < dc_counts[len - 1]; i++, k++, code++) {
        codes[k] = (uint16_t)code;
        lengths[k] = (uint8_t)len;
      }
    int32_t pred[4] = {0, 0, 0, 0};
    for (int my = 0; my < mcus_h; my++)
      for (int mx = 0; mx < mcus_w; mx++)
        for (int c = 0; c < w.ncomp; c++)
          for (int v = 0; v < w.comp_v[c]; v++)
            for (int h = 0; h < w.comp_h[c]; h++) {
              int32_t value = dc[c][(long)(my * w.comp_v[c] + v) * blocks_w[c] + mx * w.comp_h[c] + h];
              int32_t diff = value - pred[c];
              pred[c] = value;
              uint32_t magnitude = (uint32_t)(diff < 0 ? -diff : diff);
              int t = magnitude ? 32 - __builtin_clz(magnitude) : 0;
              if (t > 11) goto done;
              /* The category's code, its t bits (negative: diff - 1), then EOB ("0"). */
              uint32_t extra = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << t) - 1);
              put_bits(&o, ((uint32_t)codes[t] << (t + 1)) | (extra << 1), lengths[t] + t + 1);
            }
    if (o.count) put_bits(&o, 0xFF, 8 - o.count); /* pad with ones */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xD9);
    ok = !o.failed;
  }
done:
  for (int c = 0; c < 4; c++) free(dc[c]);
  if (!ok) {
    free(o.out);
    return 0;
  }
  *out = o.out;
  return o.used;
}

size_t pxl_jpeg_progressive_prefix(const uint8_t *data, size_t size, int32_t *scans) {
  *scans = 0;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  size_t complete = 0;
  int step;
  while ((step = walk_next(&w)) > 0) {
    if (step == WALK_SCAN) complete = w.end;
  }
  if (!w.progressive || w.scans == 0) return 0;
  *scans = w.scans;
  return complete;
}

size_t pxl_jpeg_first_scans_end(const uint8_t *data, size_t size, int32_t *width, int32_t *height) {
  *width = *height = 0;
  if (data == NULL) return 0;
  scan_walk w;
  walk_start(&w, data, size);
  int step;
  while ((step = walk_next(&w)) > 0) {
    if (step == WALK_SCAN && walk_has_first_scans(&w)) {
      /* The frame's size, for the caller to check that 1/8 covers what it wants. */
      *width = w.width;
      *height = w.height;
      return w.end;
    }
  }
  return 0;
}
