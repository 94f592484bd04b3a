/*
 * Progressive JPEG scans without libjpeg: a bounds-checked walk over the marker segments
 * and scans, and what is built on it (the DC scans as a JPEG of their own, the DC-only
 * baseline transcode of a 1/8 thumbnail, the scan prefixes of previews, the early end of
 * a thumbnail's transfer). jpeg_shim.c decodes what these return through libjpeg.
 */
#include "pxl_codecs.h"
#include "pxl_exif.h"

#include <pthread.h>
#include <stdatomic.h>
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
  int ss, se, ah, al, scan_comps, scan_comp[4], scan_table[4], scan_ac_table[4];
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
  w->se = se;
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
    w->scan_ac_table[j] = body[2 + 2 * j] & 15;
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
 * takes the progressive path. 4:2:0 chroma, whose 1/8 IDCT reads AC coefficients, gets
 * them decoded and written too (below). */

/* LOOK_BITS-bit lookahead: most codes resolve with one table read. */
#define LOOK_BITS 10

typedef struct dc_table {
  int present;
  /* Canonical Huffman decoding (JPEG Annex F.2.2.3): per code length, the first code,
   * how many, and where their symbols start in vals. */
  int32_t mincode[17], maxcode[18], valptr[17];
  uint8_t vals[256];
  /* The length (0: longer) and symbol of the code the next LOOK_BITS bits start with. */
  uint8_t look_len[1 << LOOK_BITS], look_sym[1 << LOOK_BITS];
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
  /* The lookahead table, for codes of up to LOOK_BITS bits. */
  code = 0;
  k = 0;
  for (int len = 1; len <= LOOK_BITS; len++) {
    for (int i = 0; i < counts[len - 1]; i++, k++, code++) {
      int fill = 1 << (LOOK_BITS - len);
      memset(t->look_len + (code << (LOOK_BITS - len)), len, (size_t)fill);
      memset(t->look_sym + (code << (LOOK_BITS - len)), symbols[k], (size_t)fill);
    }
    code <<= 1;
  }
  t->present = 1;
  return 1;
}

typedef struct bit_reader {
  const uint8_t *data;
  size_t at, end;
  uint64_t acc; /* bits, most significant first */
  int count;
  int failed;   /* a marker, or the end, inside the data: give up */
} bit_reader;

/* Stops at the end of the data or at a marker (a restart, or the scan's end): bits_get
 * then fails if it needs bits beyond it. Six bytes at once when none is 0xFF. */
static inline __attribute__((always_inline)) void bits_fill(bit_reader *b) {
  if (b->count <= 16 && b->at + 8 <= b->end) {
    uint64_t word;
    memcpy(&word, b->data + b->at, 8);
    word = __builtin_bswap64(word) >> 16; /* the next six bytes, first highest */
    uint64_t inverted = ~word & 0xFFFFFFFFFFFFull; /* a zero byte where word had 0xFF */
    if (((inverted - 0x010101010101ull) & ~inverted & 0x808080808080ull) == 0) {
      b->acc |= word << (16 - b->count);
      b->count += 48;
      b->at += 6;
      return;
    }
  }
  while (b->count <= 56) {
    if (b->at >= b->end) return;
    uint8_t byte = b->data[b->at];
    if (byte == 0xFF) {
      if (b->at + 1 >= b->end || b->data[b->at + 1] != 0x00) return;
      b->at += 2;
    } else {
      b->at++;
    }
    b->acc |= (uint64_t)byte << (56 - b->count);
    b->count += 8;
  }
}

static inline __attribute__((always_inline)) int bits_get(bit_reader *b, int n) {
  if (n == 0) return 0;
  if (b->count < n) bits_fill(b);
  if (b->count < n) {
    b->failed = 1;
    return 0;
  }
  int v = (int)(b->acc >> (64 - n));
  b->acc <<= n;
  b->count -= n;
  return v;
}

static inline __attribute__((always_inline)) int huff_decode(bit_reader *b, const dc_table *t) {
  if (b->count < 16) bits_fill(b);
  if (b->count >= LOOK_BITS) {
    int look = (int)(b->acc >> (64 - LOOK_BITS));
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
  uint64_t acc; /* pending bits, the oldest highest, `count` of them (< 32 between calls) */
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

/* Appends n <= 32 bits, 0xFF bytes stuffed with 0x00 as entropy-coded data requires;
 * whole bytes go out once 32 bits are pending. */
static inline __attribute__((always_inline)) void put_bits(bit_writer *w, uint32_t bits, int n) {
  w->acc = (w->acc << n) | (bits & (n == 32 ? 0xFFFFFFFFu : (1u << n) - 1));
  w->count += n;
  if (w->count < 32 || !grow(w, 16)) return;
  /* The oldest 32 bits at once when none of their bytes is 0xFF. */
  uint32_t word = (uint32_t)(w->acc >> (w->count - 32)), inverted = ~word;
  if (((inverted - 0x01010101u) & ~inverted & 0x80808080u) == 0) {
    word = __builtin_bswap32(word);
    memcpy(w->out + w->used, &word, 4);
    w->used += 4;
    w->count -= 32;
    return;
  }
  while (w->count >= 8) {
    uint8_t byte = (uint8_t)(w->acc >> (w->count - 8));
    w->out[w->used++] = byte;
    if (byte == 0xFF) w->out[w->used++] = 0x00;
    w->count -= 8;
  }
}

/* The pending whole bytes out, then the last partial one padded with ones. */
static void put_flush(bit_writer *w) {
  if (w->count >= 8 && grow(w, 16)) {
    while (w->count >= 8) {
      uint8_t byte = (uint8_t)(w->acc >> (w->count - 8));
      w->out[w->used++] = byte;
      if (byte == 0xFF) w->out[w->used++] = 0x00;
      w->count -= 8;
    }
  }
  if (w->count) put_bits(w, 0xFF, 8 - w->count);
  if (w->count && grow(w, 2)) {
    uint8_t byte = (uint8_t)(w->acc >> (w->count - 8));
    w->out[w->used++] = byte;
    if (byte == 0xFF) w->out[w->used++] = 0x00;
    w->count = 0;
  }
}

static void put_raw(bit_writer *w, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) put_byte(w, bytes[i]);
}

/* The DC table written: JPEG's example luminance DC table (Annex K.3), categories 0-11. */
static const uint8_t dc_counts[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t dc_symbols[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* ---- 4:2:0: the chroma's AC coefficients in the baseline too ----
 *
 * With 4:2:0-style chroma (half the luma's sampling both ways) libjpeg's 1/8 decode gives
 * the chroma a 2x2 IDCT, which reads AC coefficients, and a progressive file's decode
 * keeps every coefficient of every component (the luma's too, for its DC alone) in a
 * whole-image buffer: about 36 MB for a 12 MP photo. Here the chroma's AC scans are
 * decoded as well (progressive Huffman, first passes and refinements: jdphuff.c's
 * rules), only the 25 coefficients jpeg_idct_2x2 reads are kept, and the baseline JPEG
 * written carries them for the chroma blocks, beside the luma's DC. libjpeg then runs the
 * same 2x2 IDCT on the same coefficients (the others, zero here, it never reads), the
 * same upsampling and colour conversion, one MCU row at a time: the same pixels. */

/* Zigzag position -> natural (row-major) position. */
static const uint8_t natural_order[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* jpeg_idct_2x2 reads rows and columns 0, 1, 3, 5 and 7: 25 coefficients, kept in these
 * slots (zigzag position -> slot, -1 for the 39 it never reads). */
static int8_t idct2_slot[64];
static uint64_t idct2_mask; /* bit k: zigzag position k has a slot */
static void idct2_slots_init(void) {
  static const int used[8] = {1, 1, 0, 1, 0, 1, 0, 1};
  int8_t by_natural[64];
  int slot = 0;
  for (int pos = 0; pos < 64; pos++) by_natural[pos] = (int8_t)(used[pos / 8] && used[pos % 8] ? slot++ : -1);
  for (int k = 0; k < 64; k++) {
    idct2_slot[k] = by_natural[natural_order[k]];
    if (idct2_slot[k] >= 0) idct2_mask |= 1ull << k;
  }
}

/* A chroma block while its scans arrive: which coefficients are nonzero (refinement
 * scans depend on that for all 64; bit k: zigzag position k) and the values of the 25
 * the IDCT reads (by slot). */
typedef struct ac_block {
  uint64_t nonzero;
  int16_t coef[25];
} ac_block;

static inline __attribute__((always_inline)) void ac_set(ac_block *b, int k, int16_t value) {
  if (value) b->nonzero |= 1ull << k;
  if (idct2_slot[k] >= 0) b->coef[(int)idct2_slot[k]] = value;
}

/* A correction bit for the nonzero coefficient at zigzag k (jdphuff.c's refinement). */
static inline __attribute__((always_inline)) void ac_refine(bit_reader *b, ac_block *blk, int k, int p1) {
  if (!bits_get(b, 1) || idct2_slot[k] < 0) return;
  int16_t *c = &blk->coef[(int)idct2_slot[k]];
  if ((*c & p1) == 0) *c = (int16_t)(*c >= 0 ? *c + p1 : *c - p1);
}

/* One block of an AC scan, first pass (Ah 0) or refinement: jdphuff.c's decode_mcu_AC_first
 * and decode_mcu_AC_refine. Returns 0 on anything libjpeg would warn about. */
static int ac_decode_block(bit_reader *b, const dc_table *t, ac_block *blk, int ss, int se, int ah, int al,
                           int *eobrun) {
  if (ah == 0) {
    if (*eobrun > 0) {
      (*eobrun)--;
      return 1;
    }
    for (int k = ss; k <= se; k++) {
      int rs = huff_decode(b, t);
      if (rs < 0) return 0;
      int r = rs >> 4, s = rs & 15;
      if (s) {
        k += r;
        if (k > se) return 0;
        int v = bits_get(b, s);
        v -= -(int)((unsigned)(v - (1 << (s - 1))) >> 31) & ((1 << s) - 1); /* EXTEND */
        ac_set(blk, k, (int16_t)(uint16_t)((unsigned)v << al));
      } else if (r == 15) {
        k += 15;
      } else {
        *eobrun = 1 << r;
        if (r) *eobrun += bits_get(b, r);
        (*eobrun)--;
        break;
      }
    }
    return !b->failed;
  }
  const int p1 = 1 << al, m1 = -(1 << al);
  int k = ss;
  if (*eobrun == 0) {
    for (; k <= se; k++) {
      int rs = huff_decode(b, t);
      if (rs < 0) return 0;
      int r = rs >> 4, s = rs & 15;
      if (s) {
        if (s != 1) return 0;
        s = bits_get(b, 1) ? p1 : m1;
      } else if (r != 15) {
        *eobrun = 1 << r;
        if (r) *eobrun += bits_get(b, r);
        break;
      }
      /* Correction bits for the nonzero coefficients on the way; r zeros skipped. */
      do {
        if ((blk->nonzero >> k) & 1) {
          ac_refine(b, blk, k, p1);
        } else if (--r < 0) {
          break;
        }
        k++;
      } while (k <= se);
      if (s) {
        if (k > se) return 0;
        ac_set(blk, k, (int16_t)s);
      }
      if (b->failed) return 0;
    }
  }
  if (*eobrun > 0) {
    /* The rest of the band: a correction bit per nonzero coefficient, in zigzag order. */
    uint64_t band = k > se ? 0 : (~0ull << k) & (se == 63 ? ~0ull : (1ull << (se + 1)) - 1);
    for (uint64_t m = blk->nonzero & band; m; m &= m - 1) ac_refine(b, blk, __builtin_ctzll(m), p1);
    (*eobrun)--;
  }
  return !b->failed;
}

/* The transcode's working memory (8 MB for a 12 MP 4:2:0 photo), kept for the next one:
 * fresh pages for it each time cost more than all the decoding (glibc hands memory this
 * size back to the kernel when freed). One block is kept, taken and returned atomically;
 * a decode that finds none allocates its own. Over SCRATCH_KEEP_MAX nothing is kept and
 * the memory comes from calloc, whose untouched pages cost nothing: a header declaring a
 * huge frame whose scans never come costs only address space, as before. */
#define SCRATCH_KEEP_MAX ((size_t)32 << 20)
typedef struct scratch {
  size_t cap;
  _Alignas(16) uint8_t bytes[];
} scratch;
static _Atomic(scratch *) scratch_kept;

/* cap zeroed bytes, or NULL. */
static scratch *scratch_get(size_t cap) {
  scratch *s = NULL;
  if (cap > SIZE_MAX - sizeof *s) return NULL;
  if (cap > SCRATCH_KEEP_MAX) {
    if ((s = calloc(1, sizeof *s + cap)) != NULL) s->cap = cap;
    return s;
  }
  s = atomic_exchange(&scratch_kept, NULL);
  if (s != NULL && s->cap < cap) {
    free(s);
    s = NULL;
  }
  if (s == NULL) {
    if ((s = malloc(sizeof *s + cap)) == NULL) return NULL;
    s->cap = cap;
  }
  memset(s->bytes, 0, cap);
  return s;
}

static void scratch_put(scratch *s) {
  if (s == NULL) return;
  if (s->cap > SCRATCH_KEEP_MAX) {
    free(s);
    return;
  }
  free(atomic_exchange(&scratch_kept, s));
}

void pxl_jpeg_dc_baseline_release(void) { free(atomic_exchange(&scratch_kept, NULL)); }

size_t pxl_jpeg_dc_baseline(const uint8_t *data, size_t size, uint8_t **out) {
  *out = NULL;
  if (data == NULL) return 0;
  static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
  pthread_once(&slots_once, idct2_slots_init);
  scan_walk w;
  walk_start(&w, data, size);
  dc_table tables[4], ac_tables[4];
  memset(tables, 0, sizeof tables);
  memset(ac_tables, 0, sizeof ac_tables);
  int32_t *dc[4] = {NULL, NULL, NULL, NULL};
  ac_block *acb[4] = {NULL, NULL, NULL, NULL}; /* chroma with a 2x2 IDCT at 1/8 */
  int blocks_w[4] = {0}, blocks_h[4] = {0}, mcus_w = 0, mcus_h = 0, restart = 0, ok = 0, step, scans = 0;
  scratch *work = NULL;
  int chroma_ac = 0; /* some component has a 2x2 IDCT: its AC coefficients are written too */
  const uint8_t *sof = NULL; /* the frame's segment, rewritten as SOF0 */
  size_t sof_len = 0;
  /* The segments libjpeg reads to pick the colour space and the quantisation: kept. */
  bit_writer o = {0};
  grow(&o, size / 2); /* about what a 4:2:0 photo's copy takes */
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
        /* DHT: Tc/Th, 16 counts, symbols; repeated. */
        size_t at = 4;
        while (at < seg_len) {
          if (at + 17 > seg_len) goto done;
          int tc = seg[at] >> 4, th = seg[at] & 15, total = 0;
          for (int i = 0; i < 16; i++) total += seg[at + 1 + i];
          if (th > 3 || tc > 1 || at + 17 + (size_t)total > seg_len) goto done;
          if (!dc_table_parse(tc == 0 ? &tables[th] : &ac_tables[th], seg + at + 1, seg + at + 17, total)) goto done;
          at += 17 + (size_t)total;
        }
      }
      if (code == 0xC2 || code == 0xCA) {
        if (seg[4] != 8 || code == 0xCA) goto done; /* 8-bit, Huffman-coded only */
        sof = seg;
        sof_len = seg_len;
        mcus_w = (w.width + 8 * w.max_h - 1) / (8 * w.max_h);
        mcus_h = (w.height + 8 * w.max_v - 1) / (8 * w.max_v);
        if (w.width == 0 || w.height == 0) goto done;
        /* One zeroed allocation for every component's DC and the chroma's AC. */
        size_t total = 0, dc_at[4], ac_at[4];
        for (int c = 0; c < w.ncomp; c++) {
          blocks_w[c] = mcus_w * w.comp_h[c];
          blocks_h[c] = mcus_h * w.comp_v[c];
          size_t blocks = (size_t)blocks_w[c] * (size_t)blocks_h[c];
          dc_at[c] = total;
          total += (blocks * sizeof(int32_t) + 63) & ~(size_t)63;
          ac_at[c] = 0;
          if (!walk_needs_ac(&w, c)) continue;
          /* Only half the luma's sampling both ways (a 2x2 IDCT, one sample per luma
           * block); any other layout that reads AC at 1/8 takes libjpeg's own decode. */
          if (2 * w.comp_h[c] != w.max_h || 2 * w.comp_v[c] != w.max_v) goto done;
          ac_at[c] = total;
          total += blocks * sizeof(ac_block);
          chroma_ac = 1;
        }
        for (int c = 0; c < w.ncomp; c++) /* the others then keep their IDCT only at full resolution */
          if (chroma_ac && walk_needs_ac(&w, c) == 0 && (w.comp_h[c] != w.max_h || w.comp_v[c] != w.max_v)) goto done;
        if (!(work = scratch_get(total))) goto done;
        for (int c = 0; c < w.ncomp; c++) {
          dc[c] = (int32_t *)(void *)(work->bytes + dc_at[c]);
          if (ac_at[c]) acb[c] = (ac_block *)(void *)(work->bytes + ac_at[c]);
        }
      }
      continue;
    }
    scans++;
    if (w.ss != 0 && (w.scan_comps != 1 || !acb[w.scan_comp[0]])) continue; /* AC no IDCT reads */
    /* A DC scan (first pass, Ah 0, or refinement), or a chroma AC scan. */
    bit_reader b = {data, w.scan_data, w.end, 0, 0, 0};
    int32_t pred[4] = {0, 0, 0, 0};
    int eobrun = 0;
    for (int j = 0; j < w.scan_comps; j++) {
      if (w.ss == 0 && w.ah == 0 && !tables[w.scan_table[j]].present) goto done;
      if (w.ss != 0 && !ac_tables[w.scan_ac_table[j]].present) goto done;
    }
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
    const int ah = w.ah, al = w.al, ss = w.ss, se = w.se, ncomps = w.scan_comps;
    int comp[4], hs[4], vs[4], stride[4];
    const dc_table *table[4];
    for (int j = 0; j < ncomps; j++) {
      comp[j] = w.scan_comp[j];
      hs[j] = single ? 1 : w.comp_h[comp[j]];
      vs[j] = single ? 1 : w.comp_v[comp[j]];
      stride[j] = blocks_w[comp[j]];
      table[j] = ss ? &ac_tables[w.scan_ac_table[j]] : &tables[w.scan_table[j]];
    }
    /* A DC scan's MCU as a list of blocks: each one's place in the scan's component list
     * and its offset from the MCU's corner in that component's array. */
    int nblocks = 0, block_j[10];
    long block_at[10], corner[4] = {0, 0, 0, 0};
    for (int j = 0; j < ncomps && !ss; j++)
      for (int v = 0; v < vs[j]; v++)
        for (int h = 0; h < hs[j]; h++) {
          if (nblocks == 10) goto done; /* more than JPEG allows in an MCU */
          block_j[nblocks] = j;
          block_at[nblocks++] = (long)v * stride[j] + h;
        }
    int32_t *base[4];
    for (int j = 0; j < ncomps; j++) base[j] = dc[comp[j]];
    long col = 0;
    ac_block *blk = ss ? acb[comp[0]] : NULL;
    for (long u = 0; u < units; u++) {
      if (restart && u > 0 && u % restart == 0) {
        bits_restart(&b);
        memset(pred, 0, sizeof pred);
        eobrun = 0;
      }
      if (ss) {
        if (!ac_decode_block(&b, table[0], blk + col, ss, se, ah, al, &eobrun)) goto done;
      } else if (ah == 0) {
        for (int i = 0; i < nblocks; i++) {
          int j = block_j[i];
          int t = huff_decode(&b, table[j]);
          if ((unsigned)t > 11) goto done;
          int diff = bits_get(&b, t);
          /* JPEG's EXTEND without a branch: a value below 2^(t-1) is negative. */
          diff -= -(int)((unsigned)(diff - (1 << t >> 1)) >> 31) & ((1 << t) - 1);
          pred[j] += diff;
          if (pred[j] < -32768 || pred[j] > 32767) goto done; /* no real DC; and no overflow */
          base[j][corner[j] + block_at[i]] = (int32_t)((uint32_t)pred[j] << al);
        }
      } else {
        for (int i = 0; i < nblocks; i++) {
          int j = block_j[i];
          base[j][corner[j] + block_at[i]] |= bits_get(&b, 1) << al;
        }
      }
      if (b.failed) goto done;
      /* The next MCU (or block): right, or down to the next row's start. */
      if (++col == per_row) {
        col = 0;
        if (ss) blk += stride[0];
        for (int j = 0; j < ncomps; j++) corner[j] += (long)vs[j] * stride[j] - (long)(per_row - 1) * hs[j];
      } else {
        for (int j = 0; j < ncomps; j++) corner[j] += hs[j];
      }
    }
  }
  if (step != WALK_END || !sof || !walk_has_first_scans(&w)) goto done;
  {
    /* SOF0: precision 8, the frame's size, components (ids, sampling, tables) as they were. */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xC0);
    put_raw(&o, sof + 2, sof_len - 2);
    /* DHT: DC table 0 (categories 0-11); AC table 0 with one code, "0", for EOB; with
     * chroma AC, AC table 1: every run/size symbol (runs 0-15, sizes 1-15, EOB, ZRL), all
     * 8 bits long, the code of the i-th symbol being i. */
    uint8_t dht[] = {0xFF, 0xC4, 0, 0, 0x00};
    size_t dht_len = 2 + 17 + 12 + 17 + 1 + (chroma_ac ? 17 + 242 : 0);
    dht[2] = (uint8_t)(dht_len >> 8);
    dht[3] = (uint8_t)dht_len;
    put_raw(&o, dht, sizeof dht);
    put_raw(&o, dc_counts, 16);
    put_raw(&o, dc_symbols, 12);
    uint8_t ac[18] = {0x10, 1};
    put_raw(&o, ac, sizeof ac); /* Tc 1 Th 0, one code of length 1, then its symbol 0x00 */
    uint8_t ac_code[256]; /* symbol -> its 8-bit code */
    if (chroma_ac) {
      uint8_t counts[17] = {0x11, 0, 0, 0, 0, 0, 0, 0, 242};
      put_raw(&o, counts, sizeof counts);
      int i = 0;
      for (int symbol = 0; symbol < 256; symbol++) {
        if ((symbol & 15) == 0 && symbol != 0x00 && symbol != 0xF0) continue;
        ac_code[symbol] = (uint8_t)i++;
        put_byte(&o, (uint8_t)symbol);
      }
    }
    /* SOS: every component, DC table 0, AC table 0 (1 for chroma with AC), Ss 0, Se 63,
     * Ah/Al 0. */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xDA);
    put_byte(&o, 0);
    put_byte(&o, (uint8_t)(6 + 2 * w.ncomp));
    put_byte(&o, (uint8_t)w.ncomp);
    for (int c = 0; c < w.ncomp; c++) {
      put_byte(&o, (uint8_t)w.comp_id[c]);
      put_byte(&o, acb[c] ? 0x01 : 0x00);
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
              long at = (long)(my * w.comp_v[c] + v) * blocks_w[c] + mx * w.comp_h[c] + h;
              int32_t value = dc[c][at];
              int32_t diff = value - pred[c];
              pred[c] = value;
              uint32_t magnitude = (uint32_t)(diff < 0 ? -diff : diff);
              int t = magnitude ? 32 - __builtin_clz(magnitude) : 0;
              if (t > 11) goto done;
              uint32_t extra = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << t) - 1);
              if (!acb[c]) {
                /* The category's code, its t bits (negative: diff - 1), then EOB ("0"). */
                put_bits(&o, ((uint32_t)codes[t] << (t + 1)) | (extra << 1), lengths[t] + t + 1);
                continue;
              }
              put_bits(&o, ((uint32_t)codes[t] << t) | extra, lengths[t] + t);
              /* The AC coefficients the 2x2 IDCT reads, in zigzag order: zero runs (ZRL
               * per 16), run/size symbol, the value's bits; EOB unless the last is 63. */
              const ac_block *blk = &acb[c][at];
              int run = 0, last = 0;
              for (uint64_t m = blk->nonzero & idct2_mask & ~1ull; m; m &= m - 1) {
                int kz = __builtin_ctzll(m);
                int32_t coef = blk->coef[(int)idct2_slot[kz]]; /* nonzero: refinements only add */
                run = kz - last - 1;
                last = kz;
                for (; run >= 16; run -= 16) put_bits(&o, ac_code[0xF0], 8);
                uint32_t mag = (uint32_t)(coef < 0 ? -coef : coef);
                int size_bits = 32 - __builtin_clz(mag);
                if (size_bits > 15) goto done;
                uint32_t bits = (uint32_t)(coef < 0 ? coef - 1 : coef) & ((1u << size_bits) - 1);
                put_bits(&o, ((uint32_t)ac_code[(run << 4) | size_bits] << size_bits) | bits, 8 + size_bits);
              }
              if (last != 63) put_bits(&o, ac_code[0x00], 8);
            }
    put_flush(&o); /* pad with ones */
    put_byte(&o, 0xFF);
    put_byte(&o, 0xD9);
    ok = !o.failed;
  }
done:
  scratch_put(work);
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
