/*
 * Progressive JPEG entropy decoding for libjpeg, where a thumbnail spends its time.
 *
 * At the scales thumbnails use (1/2, 1/4) libjpeg's inverse DCT is cheap and a progressive
 * file's cost is its entropy decoding, above all the AC refinement scans (T.81 G.1.2.3):
 * every coefficient of the band that was already nonzero gets one correction bit, and to
 * find them libjpeg walks the band one coefficient at a time, for every block, also for
 * the blocks of an end-of-band run. In the web photo set a progressive JPEG cost 3.5x a
 * baseline one, a fifth of all the CPU in its refinement scans alone.
 *
 * This decoder replaces libjpeg's progressive Huffman decoder (jdphuff.c) inside libjpeg's
 * own pipeline: libjpeg still reads the markers, keeps the whole-image coefficient buffer,
 * does block smoothing, the IDCT, upsampling and colour conversion, and it still does
 * every bit of input reading (jpeg_fill_bit_buffer, jpeg_huff_decode and the derived
 * tables are libjpeg's exported functions). What is new is a 64-bit mask per block of
 * which coefficients (bit k: zigzag position k) are nonzero, kept as the scans write
 * them, so a refinement scan finds the nonzero coefficients of a band and the zero run a
 * symbol skips with a few bit operations instead of a walk; with BMI2 a refinement's
 * correction bits are spread onto their coefficients with pdep and applied once per
 * block. A first AC scan reads a short code and its extra bits in one lookup of a table
 * made from libjpeg's (build_ac_first_fast). Everything else follows
 * jdphuff.c step by step, including what it does with damaged data (the zero bits it
 * supplies past a marker, its warnings, backing up to the MCU's start when a suspending
 * source runs dry), so the coefficients, and the pixels, are libjpeg's to the bit
 * (Tests/codecs/jpeg_progressive_test.c compares the two on every path).
 *
 * It is installed from the progress monitor (pxl_jpeg_progressive_install), which
 * jpeg_start_decompress calls after creating its modules and starting the first scan and
 * before it decodes any of that scan's data. Interfaces used: jpegint.h's entropy-decoder
 * and marker-reader objects, and the bit reader's state and table layouts and exported
 * functions of jdhuff.h, as libjpeg-turbo 2.x has them (Debian 12 and 13 ship 2.1.5). Built
 * against another libjpeg (3.x reorders the entropy-decoder object and adds precisions),
 * pxl_jpeg_progressive_install declines and libjpeg's own decoder does the work.
 */
#define JPEG_INTERNALS
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* with JPEG_INTERNALS: jpegint.h and jerror.h too */

#include "pxl_jpeg_progressive.h"

#if defined(LIBJPEG_TURBO_VERSION_NUMBER) && LIBJPEG_TURBO_VERSION_NUMBER >= 2000000 && \
    LIBJPEG_TURBO_VERSION_NUMBER < 3000000 && SIZE_MAX == UINT64_MAX && BITS_IN_JSAMPLE == 8
#define PXL_OWN_PROGRESSIVE 1
#else
#define PXL_OWN_PROGRESSIVE 0
#endif

static int decoder_mode = 1;

#ifdef PXL_JPEG_PROGRESSIVE_CHECK
long pxl_jpeg_progressive_installs; /* the test's evidence that this decoder ran */
#endif

void pxl_jpeg_progressive_mode(int mode) { __atomic_store_n(&decoder_mode, mode, __ATOMIC_RELAXED); }

#if PXL_OWN_PROGRESSIVE

/* ---- libjpeg's bit reader (jdhuff.h, not installed): layouts and exported functions ---- */

#define HUFF_LOOKAHEAD 8

typedef struct {
  JLONG maxcode[18];
  JLONG valoffset[18];
  JHUFF_TBL *pub;
  int lookup[1 << HUFF_LOOKAHEAD];
} d_derived_tbl;

typedef size_t bit_buf_type; /* 64-bit builds: BIT_BUF_SIZE 64 (see PXL_OWN_PROGRESSIVE) */

typedef struct {
  const JOCTET *next_input_byte;
  size_t bytes_in_buffer;
  bit_buf_type get_buffer;
  int bits_left;
  j_decompress_ptr cinfo;
} bitread_working_state;

extern void jpeg_make_d_derived_tbl(j_decompress_ptr cinfo, boolean isDC, int tblno, d_derived_tbl **pdtbl);
extern boolean jpeg_fill_bit_buffer(bitread_working_state *state, bit_buf_type get_buffer, int bits_left, int nbits);
extern int jpeg_huff_decode(bitread_working_state *state, bit_buf_type get_buffer, int bits_left,
                            d_derived_tbl *htbl, int min_bits);

/* The bit reader's working state lives in locals (get_buffer, bits_left) and br; these
 * are jdhuff.h's macros, written out for this file. */
#define LOAD_BITS(e)                                        \
  br.cinfo = cinfo;                                         \
  br.next_input_byte = cinfo->src->next_input_byte;         \
  br.bytes_in_buffer = cinfo->src->bytes_in_buffer;         \
  get_buffer = (e)->get_buffer;                             \
  bits_left = (e)->bits_left

#define SAVE_BITS(e)                                        \
  cinfo->src->next_input_byte = br.next_input_byte;         \
  cinfo->src->bytes_in_buffer = br.bytes_in_buffer;         \
  (e)->get_buffer = get_buffer;                             \
  (e)->bits_left = bits_left

/* The locals of an MCU routine's bit reader, loaded from the kept state. */
#define BIT_READER(e)      \
  bit_buf_type get_buffer; \
  int bits_left;           \
  bitread_working_state br; \
  LOAD_BITS(e)

/* libjpeg's refill, asked for nbits (0: as many as it can), the locals updated. */
#define FILL_BITS(nbits, fail)                                         \
  do {                                                                 \
    if (!jpeg_fill_bit_buffer(&br, get_buffer, bits_left, (nbits))) { \
      fail;                                                            \
    }                                                                  \
    get_buffer = br.get_buffer;                                        \
    bits_left = br.bits_left;                                          \
  } while (0)

#define NEED_BITS(nbits, fail)                       \
  do {                                               \
    if (bits_left < (nbits)) FILL_BITS(nbits, fail); \
  } while (0)

#define GET_BITS(nbits) (((int)(get_buffer >> (bits_left -= (nbits)))) & ((1 << (nbits)) - 1))

/* One Huffman symbol into result (jdhuff.h's HUFF_DECODE). */
#define HUFF_DECODE(result, tbl, fail)                                                   \
  do {                                                                                   \
    int nb_, look_, slow_ = 0;                                                           \
    if (bits_left < HUFF_LOOKAHEAD) {                                                    \
      FILL_BITS(0, fail);                                                                \
      if (bits_left < HUFF_LOOKAHEAD) {                                                  \
        nb_ = 1;                                                                         \
        slow_ = 1;                                                                       \
      }                                                                                  \
    }                                                                                    \
    if (!slow_) {                                                                        \
      look_ = (int)(get_buffer >> (bits_left - HUFF_LOOKAHEAD)) & ((1 << HUFF_LOOKAHEAD) - 1); \
      if ((nb_ = ((tbl)->lookup[look_] >> HUFF_LOOKAHEAD)) <= HUFF_LOOKAHEAD) {          \
        bits_left -= nb_;                                                                \
        (result) = (tbl)->lookup[look_] & ((1 << HUFF_LOOKAHEAD) - 1);                   \
      } else {                                                                           \
        slow_ = 1;                                                                       \
      }                                                                                  \
    }                                                                                    \
    if (slow_) {                                                                         \
      if (((result) = jpeg_huff_decode(&br, get_buffer, bits_left, (tbl), nb_)) < 0) {   \
        fail;                                                                            \
      }                                                                                  \
      get_buffer = br.get_buffer;                                                        \
      bits_left = br.bits_left;                                                          \
    }                                                                                    \
  } while (0)

/* T.81 F.12: the sign extension of an s-bit magnitude category. */
#define HUFF_EXTEND(x, s) ((x) < (1 << ((s) - 1)) ? (x) + (int)(((unsigned)-1 << (s)) + 1) : (x))

/* ---- the decoder ---------------------------------------------------------------------- */

#define FAST_AC_BITS 10

typedef struct own_phuff {
  struct jpeg_entropy_decoder pub; /* first: libjpeg knows only this part */
  /* Kept across MCUs; a suspended MCU leaves them as they were at its start. */
  bit_buf_type get_buffer;
  int bits_left;
  unsigned int eobrun;
  int last_dc_val[MAX_COMPS_IN_SCAN];
  unsigned int restarts_to_go;
  d_derived_tbl *derived_tbls[NUM_HUFF_TBLS];
  d_derived_tbl *ac_tbl; /* an AC scan's one table */
  /* A first AC scan's symbols and their extra bits read together (build_ac_first_fast). */
  int32_t ac_first_fast[1 << FAST_AC_BITS];
  boolean (*ac_refine)(j_decompress_ptr cinfo, JBLOCKROW *MCU_data); /* the version for this CPU */
  /* Per component, per block in raster order: bit k set when the coefficient at zigzag
   * position k (1..63) is nonzero. The coefficient buffer starts zeroed (libjpeg
   * pre-zeroes it for a progressive file) and only this decoder writes it. */
  uint64_t *nonzero[MAX_COMPONENTS];
  size_t blocks[MAX_COMPONENTS];
  /* An AC scan has one component and one block per MCU, in raster order over the
   * component's blocks (jdinput.c per_scan_setup, jdcoefct.c consume_data): the next
   * MCU's block is scan_masks[block]. */
  uint64_t *scan_masks;
  size_t scan_blocks, block;
} own_phuff;

static void own_start_pass(j_decompress_ptr cinfo);

/* The zigzag-position mask of a block read from its coefficients: the masks' definition,
 * used where no kept mask applies (and to check the kept ones in test builds). */
static uint64_t mask_of_block(const JCOEF *block) {
  uint64_t m = 0;
  for (int k = 1; k < DCTSIZE2; k++)
    if (block[jpeg_natural_order[k]] != 0) m |= (uint64_t)1 << k;
  return m;
}

/* The mask bit of zigzag position k; past 63 (damaged data: k + run overshoots the band)
 * the coefficient written is jpeg_natural_order[k] = 63's. */
static inline uint64_t zigzag_bit(int k) { return (uint64_t)1 << (k > 63 ? 63 : k); }

/* A first AC scan's coefficient at zigzag position k, and its mask bit: set, or clear
 * when the shifted value is 0 as a JCOEF (an overflow only damaged data makes). */
static inline void put_first(JCOEF *block, uint64_t *nz, int k, int value, int Al) {
  JCOEF v = (JCOEF)LEFT_SHIFT(value, Al);
  block[jpeg_natural_order[k]] = v;
  *nz = v != 0 ? *nz | zigzag_bit(k) : *nz & ~zigzag_bit(k);
}

/* The kept mask of the current MCU's block, or NULL (then the caller reads it from the
 * block). */
static uint64_t *current_mask(own_phuff *e) {
  if (e->block >= e->scan_blocks) {
#ifdef PXL_JPEG_PROGRESSIVE_CHECK
    fprintf(stderr, "jpeg_progressive: block %zu of a scan of %zu\n", e->block, e->scan_blocks);
    abort();
#endif
    return NULL;
  }
  return &e->scan_masks[e->block];
}

/* Test builds: a kept mask against its block, where they must agree (a refinement MCU's
 * start, and after any MCU; not at the start of a first AC scan's MCU decoded again
 * after a suspension, which may find what the first attempt wrote). */
#ifdef PXL_JPEG_PROGRESSIVE_CHECK
static void check_mask(const own_phuff *e, const uint64_t *kept, const JCOEF *block) {
  if (kept != NULL && *kept != mask_of_block(block)) {
    fprintf(stderr, "jpeg_progressive: block %zu: kept mask %016llx, block %016llx\n", e->block,
            (unsigned long long)*kept, (unsigned long long)mask_of_block(block));
    abort();
  }
}
#else
#define check_mask(e, kept, block) ((void)0)
#endif

static boolean decode_dc_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
static boolean decode_ac_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
static boolean decode_dc_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);
static boolean decode_ac_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data);

/* A scan's Huffman table, derived by libjpeg, which also fails the decode for a
 * selector (0-15 in the SOS) past its 4 tables or a table never defined. */
static d_derived_tbl *make_table(j_decompress_ptr cinfo, own_phuff *e, boolean is_dc, int tbl) {
  d_derived_tbl *none = NULL;
  d_derived_tbl **slot = tbl >= 0 && tbl < NUM_HUFF_TBLS ? &e->derived_tbls[tbl] : &none;
  jpeg_make_d_derived_tbl(cinfo, is_dc, tbl, slot);
  return *slot;
}

/* For a first AC scan: indexed by the next FAST_AC_BITS bits, a coefficient whose
 * Huffman code (up to libjpeg's 8-bit lookahead) and extra bits fit in them, as
 * value << 16 | run << 8 | bits used; 0 for everything else (end of band, ZRL, longer
 * codes), which takes the symbol-by-symbol path. Made from libjpeg's own lookahead table,
 * so it reads what HUFF_DECODE then GET_BITS would, and used only when the buffer holds
 * FAST_AC_BITS bits, where neither of them would have refilled it. */
static void build_ac_first_fast(own_phuff *e) {
  const d_derived_tbl *tbl = e->ac_tbl;
  for (int i = 0; i < (1 << FAST_AC_BITS); i++) {
    int entry = tbl->lookup[i >> (FAST_AC_BITS - HUFF_LOOKAHEAD)];
    int nb = entry >> HUFF_LOOKAHEAD, sym = entry & ((1 << HUFF_LOOKAHEAD) - 1);
    int r = sym >> 4, size = sym & 15;
    int32_t fast = 0;
    if (nb <= HUFF_LOOKAHEAD && size != 0 && nb + size <= FAST_AC_BITS) {
      int extra = (i >> (FAST_AC_BITS - nb - size)) & ((1 << size) - 1);
      int v = HUFF_EXTEND(extra, size);
      fast = (int32_t)((uint32_t)(v & 0xFFFF) << 16) | r << 8 | (nb + size);
    }
    e->ac_first_fast[i] = fast;
  }
}

/* What every scan starts with once its parameters are checked: the MCU routine, the
 * tables, a fresh bit reader and predictions, and the masks of its component (jdphuff.c
 * start_pass_phuff_decoder, after its checks). */
static void scan_setup(j_decompress_ptr cinfo, own_phuff *e) {
  int is_dc = cinfo->Ss == 0;
  if (cinfo->Ah == 0)
    e->pub.decode_mcu = is_dc ? decode_dc_first : decode_ac_first;
  else
    e->pub.decode_mcu = is_dc ? decode_dc_refine : e->ac_refine;
  for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
    jpeg_component_info *comp = cinfo->cur_comp_info[ci];
    if (is_dc) {
      if (cinfo->Ah == 0) make_table(cinfo, e, TRUE, comp->dc_tbl_no); /* DC refinement needs no table */
    } else {
      e->ac_tbl = make_table(cinfo, e, FALSE, comp->ac_tbl_no);
    }
    e->last_dc_val[ci] = 0;
  }
  e->bits_left = 0;
  e->get_buffer = 0;
  e->pub.insufficient_data = FALSE;
  e->eobrun = 0;
  e->restarts_to_go = cinfo->restart_interval;
  e->block = 0;
  e->scan_masks = NULL;
  e->scan_blocks = 0;
  if (!is_dc) { /* one component: libjpeg's checks and own_start_pass's refuse more */
    int c = cinfo->cur_comp_info[0]->component_index;
    e->scan_masks = e->nonzero[c];
    e->scan_blocks = e->blocks[c];
    if (cinfo->Ah == 0) build_ac_first_fast(e);
  }
}

/* Every scan after the first: libjpeg's checks of the scan's parameters and its record
 * of the progression (cinfo->coef_bits, which block smoothing reads), with its errors
 * and warnings, then scan_setup. */
static void own_start_pass(j_decompress_ptr cinfo) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  int is_dc = cinfo->Ss == 0;
  boolean bad = FALSE;
  if (is_dc) {
    if (cinfo->Se != 0) bad = TRUE;
  } else {
    if (cinfo->Ss > cinfo->Se || cinfo->Se >= DCTSIZE2) bad = TRUE;
    if (cinfo->comps_in_scan != 1) bad = TRUE; /* AC scans may have only one component */
  }
  if (cinfo->Ah != 0 && cinfo->Al != cinfo->Ah - 1) bad = TRUE;
  if (cinfo->Al > 13) bad = TRUE;
  if (bad) ERREXIT4(cinfo, JERR_BAD_PROGRESSION, cinfo->Ss, cinfo->Se, cinfo->Ah, cinfo->Al);
  for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
    int cindex = cinfo->cur_comp_info[ci]->component_index;
    int *coef_bit_ptr = &cinfo->coef_bits[cindex][0];
    int *prev_coef_bit_ptr = &cinfo->coef_bits[cindex + cinfo->num_components][0];
    if (!is_dc && coef_bit_ptr[0] < 0) /* AC without prior DC scan */
      WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, cindex, 0);
    for (int coefi = MIN(cinfo->Ss, 1); coefi <= MAX(cinfo->Se, 9); coefi++)
      prev_coef_bit_ptr[coefi] = cinfo->input_scan_number > 1 ? coef_bit_ptr[coefi] : 0;
    for (int coefi = cinfo->Ss; coefi <= cinfo->Se; coefi++) {
      int expected = coef_bit_ptr[coefi] < 0 ? 0 : coef_bit_ptr[coefi];
      if (cinfo->Ah != expected) WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, cindex, coefi);
      coef_bit_ptr[coefi] = cinfo->Al;
    }
  }
  scan_setup(cinfo, e);
}

/* At a restart interval's end: past the RSTn marker, predictions and the EOB run reset
 * (jdphuff.c process_restart). FALSE: the source must suspend. */
static boolean process_restart(j_decompress_ptr cinfo) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  cinfo->marker->discarded_bytes += e->bits_left / 8;
  e->bits_left = 0;
  if (!(*cinfo->marker->read_restart_marker)(cinfo)) return FALSE;
  for (int ci = 0; ci < cinfo->comps_in_scan; ci++) e->last_dc_val[ci] = 0;
  e->eobrun = 0;
  e->restarts_to_go = cinfo->restart_interval;
  /* Unless the restart left us at a marker, the next segment has data again. */
  if (cinfo->unread_marker == 0) e->pub.insufficient_data = FALSE;
  return TRUE;
}

/* Before an MCU: the restart marker when the interval is over (FALSE: suspend). */
static inline boolean restart_if_due(j_decompress_ptr cinfo, own_phuff *e) {
  return !cinfo->restart_interval || e->restarts_to_go != 0 || process_restart(cinfo);
}

/* The MCU routines. Each returns FALSE when the source must suspend, having changed no
 * kept state (the MCU is decoded again from its start with more data), else TRUE. Once a
 * segment's data has run out (insufficient_data), an MCU is left as it is. */

static boolean decode_dc_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  if (!restart_if_due(cinfo, e)) return FALSE;
  if (!e->pub.insufficient_data) {
    BIT_READER(e);
    int last_dc_val[MAX_COMPS_IN_SCAN];
    memcpy(last_dc_val, e->last_dc_val, sizeof last_dc_val);
    for (int blkn = 0; blkn < cinfo->blocks_in_MCU; blkn++) {
      int ci = cinfo->MCU_membership[blkn];
      d_derived_tbl *tbl = e->derived_tbls[cinfo->cur_comp_info[ci]->dc_tbl_no];
      int s, r;
      HUFF_DECODE(s, tbl, return FALSE);
      if (s) {
        NEED_BITS(s, return FALSE);
        r = GET_BITS(s);
        s = HUFF_EXTEND(r, s);
      }
      if ((last_dc_val[ci] >= 0 && s > INT_MAX - last_dc_val[ci]) ||
          (last_dc_val[ci] < 0 && s < INT_MIN - last_dc_val[ci]))
        ERREXIT(cinfo, JERR_BAD_DCT_COEF);
      s += last_dc_val[ci];
      last_dc_val[ci] = s;
      MCU_data[blkn][0][0] = (JCOEF)LEFT_SHIFT(s, cinfo->Al);
    }
    SAVE_BITS(e);
    memcpy(e->last_dc_val, last_dc_val, sizeof last_dc_val);
  }
  if (cinfo->restart_interval) e->restarts_to_go--;
  return TRUE;
}

static boolean decode_ac_first(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  if (!restart_if_due(cinfo, e)) return FALSE;
  if (!e->pub.insufficient_data) {
    unsigned int eobrun = e->eobrun;
    if (eobrun > 0) {
      eobrun--; /* a block of the band's zero run: nothing to do */
    } else {
      BIT_READER(e);
      JCOEF *block = MCU_data[0][0];
      uint64_t *kept = current_mask(e);
      uint64_t nz = kept != NULL ? *kept : 0;
      int Se = cinfo->Se, Al = cinfo->Al;
      d_derived_tbl *tbl = e->ac_tbl;
      for (int k = cinfo->Ss; k <= Se; k++) {
        int s, r;
        if (bits_left >= FAST_AC_BITS) {
          int32_t fast = e->ac_first_fast[(get_buffer >> (bits_left - FAST_AC_BITS)) & ((1 << FAST_AC_BITS) - 1)];
          if (fast != 0) {
            bits_left -= fast & 0xFF;
            k += (fast >> 8) & 0xFF;
            put_first(block, &nz, k, fast >> 16, Al);
            continue;
          }
        }
        HUFF_DECODE(s, tbl, return FALSE);
        r = s >> 4;
        s &= 15;
        if (s) {
          k += r; /* at most 78: jpeg_natural_order has 16 entries past 63, all 63 */
          NEED_BITS(s, return FALSE);
          r = GET_BITS(s);
          put_first(block, &nz, k, HUFF_EXTEND(r, s), Al);
        } else if (r == 15) {
          k += 15; /* ZRL: 15 zeros, and the loop's step is the 16th */
        } else {
          eobrun = 1u << r; /* EOBr: 2^r + r more bits blocks end here */
          if (r) {
            NEED_BITS(r, return FALSE);
            r = GET_BITS(r);
            eobrun += (unsigned int)r;
          }
          eobrun--; /* this block is one of them */
          break;
        }
      }
      SAVE_BITS(e);
      if (kept != NULL) *kept = nz;
      check_mask(e, kept, block);
    }
    e->eobrun = eobrun;
  }
  if (cinfo->restart_interval) e->restarts_to_go--;
  e->block++;
  return TRUE;
}

static boolean decode_dc_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  if (!restart_if_due(cinfo, e)) return FALSE;
  /* As libjpeg: no insufficient_data check, reading zeros changes nothing. */
  BIT_READER(e);
  int p1 = 1 << cinfo->Al;
  for (int blkn = 0; blkn < cinfo->blocks_in_MCU; blkn++) {
    NEED_BITS(1, return FALSE);
    if (GET_BITS(1)) MCU_data[blkn][0][0] |= (JCOEF)p1; /* |=: repeating it after a suspension is harmless */
  }
  SAVE_BITS(e);
  if (cinfo->restart_interval) e->restarts_to_go--;
  return TRUE;
}

/* The correction bits of the already-nonzero coefficients at the set bits of `which`
 * (zigzag positions, in order): a 1 adds p1 to the magnitude, once (a coefficient whose
 * p1 bit is set already had it, before a suspension). Up to 16 bits are taken at a time
 * and applied without a branch per bit, but the buffer is refilled only when it is empty,
 * as libjpeg's one bit at a time does: how far the reader has read at any point (what a
 * damaged scan's "extraneous bytes" count, or a warning, depends on) stays libjpeg's.
 * NEXT_CORRECTION_BITS takes the next such bits (n of them) for the set bits of left. */
#define NEXT_CORRECTION_BITS(left, n, bits, fail) \
  NEED_BITS(1, fail);                             \
  n = __builtin_popcountll(left);                 \
  if (n > 16) n = 16;                             \
  if (n > bits_left) n = bits_left;               \
  bits = GET_BITS(n)

#define CORRECT(which, fail)                                                            \
  do {                                                                                  \
    uint64_t left_ = (which);                                                           \
    while (left_ != 0) {                                                                \
      int n_, bits_;                                                                    \
      NEXT_CORRECTION_BITS(left_, n_, bits_, fail);                                     \
      for (int i_ = n_ - 1; i_ >= 0; i_--) {                                            \
        JCOEF *c_ = &block[jpeg_natural_order[__builtin_ctzll(left_)]];                 \
        left_ &= left_ - 1;                                                             \
        int v_ = *c_;                                                                   \
        int add_ = ((bits_ >> i_) & 1) & ((v_ & p1) == 0);                              \
        *c_ = (JCOEF)(v_ + ((v_ >= 0 ? p1 : m1) & -add_));                              \
      }                                                                                 \
    }                                                                                   \
  } while (0)

/* The position of the (r+1)-th set bit of zeros (r < 16), or 64 when it has fewer. */
static inline __attribute__((always_inline)) int nth_zero_plain(uint64_t zeros, int r) {
  for (int i = 0; i < r && zeros != 0; i++) zeros &= zeros - 1;
  return zeros != 0 ? __builtin_ctzll(zeros) : 64;
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("bmi2"))) static inline int nth_zero_bmi2(uint64_t zeros, int r) {
  uint64_t bit = _pdep_u64((uint64_t)1 << r, zeros);
  return bit != 0 ? __builtin_ctzll(bit) : 64;
}

/* bits (its low n) spread over the lowest n set bits of which, the first bit read (the
 * highest of the n) on the lowest; and which without those n bits. */
static const uint8_t reversed_byte[256] = {
#define R2(n) n, n + 2 * 64, n + 1 * 64, n + 3 * 64
#define R4(n) R2(n), R2(n + 2 * 16), R2(n + 1 * 16), R2(n + 3 * 16)
#define R6(n) R4(n), R4(n + 2 * 4), R4(n + 1 * 4), R4(n + 3 * 4)
    R6(0), R6(2), R6(1), R6(3)
#undef R2
#undef R4
#undef R6
};

__attribute__((target("bmi2"))) static inline uint64_t spread_bits(unsigned bits, int n, uint64_t which) {
  unsigned first_lowest = ((unsigned)reversed_byte[bits & 0xFF] << 8 | reversed_byte[(bits >> 8) & 0xFF]) >> (16 - n);
  return _pdep_u64(first_lowest, which);
}

__attribute__((target("bmi2"))) static inline uint64_t drop_lowest_bits(uint64_t which, int n) {
  return which & ~_pdep_u64(((uint64_t)1 << n) - 1, which);
}

/* CORRECT with BMI2: the 1 bits are only collected, as zigzag positions in `later`, and
 * applied once the MCU is decoded (apply_corrections), with no loop per coefficient
 * while decoding. A suspended MCU then leaves the block as it found it. */
#define CORRECT_LATER(which, later, fail)                                               \
  do {                                                                                  \
    uint64_t left_ = (which);                                                           \
    while (left_ != 0) {                                                                \
      int n_, bits_;                                                                    \
      NEXT_CORRECTION_BITS(left_, n_, bits_, fail);                                     \
      (later) |= spread_bits((unsigned)bits_, n_, left_);                               \
      left_ = drop_lowest_bits(left_, n_);                                              \
    }                                                                                   \
  } while (0)
#endif

/* In ac_refine: the corrections of `which`, collected (BMI2) or applied at once. */
#if defined(__x86_64__)
#define CORRECT_BAND(which)                               \
  do {                                                    \
    if (use_bmi2)                                         \
      CORRECT_LATER(which, later, goto undoit);           \
    else                                                  \
      CORRECT(which, goto undoit);                        \
  } while (0)
#else
#define CORRECT_BAND(which) CORRECT(which, goto undoit)
#endif

/* The corrections CORRECT_LATER collected: as CORRECT applies them. */
static inline __attribute__((always_inline)) void apply_corrections(JCOEF *block, uint64_t later, int p1, int m1) {
  while (later != 0) {
    JCOEF *c = &block[jpeg_natural_order[__builtin_ctzll(later)]];
    later &= later - 1;
    int v = *c;
    if ((v & p1) == 0) *c = (JCOEF)(v >= 0 ? v + p1 : v + m1);
  }
}

static inline __attribute__((always_inline)) boolean ac_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data,
                                                                 int use_bmi2) {
  own_phuff *e = (own_phuff *)cinfo->entropy;
  if (!restart_if_due(cinfo, e)) return FALSE;
  if (!e->pub.insufficient_data) {
    BIT_READER(e);
    unsigned int eobrun = e->eobrun;
    JCOEF *block = MCU_data[0][0];
    uint64_t *kept = current_mask(e);
    check_mask(e, kept, block);
    uint64_t nz = kept != NULL ? *kept : mask_of_block(block);
    int Se = cinfo->Se;
    int p1 = 1 << cinfo->Al;                  /* 1 in the bit position being coded */
    int m1 = (int)((unsigned)-1 << cinfo->Al); /* -1 in the bit position being coded */
    uint64_t band_end = Se == 63 ? ~(uint64_t)0 : ((uint64_t)1 << (Se + 1)) - 1; /* positions <= Se */
    d_derived_tbl *tbl = e->ac_tbl;
    /* Newly nonzero coefficients, undone if the MCU must suspend (corrections need not
     * be: see CORRECT). */
    int num_newnz = 0;
    int newnz_pos[DCTSIZE2];
    uint64_t later = 0; /* with BMI2: the corrections to apply (CORRECT_LATER) */
    int k = cinfo->Ss;
    if (eobrun == 0) {
      for (; k <= Se; k++) {
        int s, r;
        HUFF_DECODE(s, tbl, goto undoit);
        r = s >> 4;
        s &= 15;
        if (s) {
          if (s != 1) WARNMS(cinfo, JWRN_HUFF_BAD_CODE); /* a new coefficient's size is always 1 */
          NEED_BITS(1, goto undoit);
          s = GET_BITS(1) ? p1 : m1;
        } else if (r != 15) {
          eobrun = 1u << r; /* EOBr: 2^r + r more bits blocks; the rest of this one below */
          if (r) {
            NEED_BITS(r, goto undoit);
            r = GET_BITS(r);
            eobrun += (unsigned int)r;
          }
          break;
        } /* else ZRL: s = 0, r = 15 */
        /* Past the already-nonzero coefficients and r still-zero ones, to the zero
         * coefficient after them (or past the band's end); each nonzero one passed gets
         * its correction bit. */
        uint64_t from = ~(uint64_t)0 << k;
        uint64_t zeros = ~nz & band_end & from;
        int t;
#if defined(__x86_64__)
        if (use_bmi2)
          t = nth_zero_bmi2(zeros, r);
        else
#endif
          t = nth_zero_plain(zeros, r);
        if (t == 64) t = Se + 1;
        uint64_t before_t = t >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << t) - 1;
        CORRECT_BAND(nz & from & before_t);
        k = t;
        if (s) {
          /* Past the band (damaged data) this is libjpeg's jpeg_natural_order[Se + 1]. */
          int pos = jpeg_natural_order[k];
          block[pos] = (JCOEF)s;
          newnz_pos[num_newnz++] = pos;
          nz |= zigzag_bit(k);
        }
      }
    }
    if (eobrun > 0) {
      /* The rest of the band after the end of band: corrections only. */
      if (k <= Se) CORRECT_BAND(nz & band_end & (~(uint64_t)0 << k));
      eobrun--;
    }
    apply_corrections(block, later, p1, m1);
    SAVE_BITS(e);
    e->eobrun = eobrun;
    if (kept != NULL) *kept = nz;
    check_mask(e, kept, block);
    goto done;
  undoit:
    while (num_newnz > 0) block[newnz_pos[--num_newnz]] = 0;
    return FALSE;
  }
done:
  if (cinfo->restart_interval) e->restarts_to_go--;
  e->block++;
  return TRUE;
}

static boolean decode_ac_refine(j_decompress_ptr cinfo, JBLOCKROW *MCU_data) {
  return ac_refine(cinfo, MCU_data, 0);
}

#if defined(__x86_64__)
/* Whether the CPU has BMI2 and POPCNT (as resample.c and color.c ask: after
 * __builtin_cpu_init, which a call before the library's constructors would need). */
static int has_bmi2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
}

/* With BMI2 (pdep) and POPCNT, chosen at run time. */
__attribute__((target("bmi2,popcnt"))) static boolean decode_ac_refine_bmi2(j_decompress_ptr cinfo,
                                                                            JBLOCKROW *MCU_data) {
  return ac_refine(cinfo, MCU_data, 1);
}
#endif

void *pxl_jpeg_progressive_install(j_decompress_ptr cinfo) {
  int mode = __atomic_load_n(&decoder_mode, __ATOMIC_RELAXED);
  if (mode == 0) return NULL;
  /* Only at the one moment described above, and only for what this decoder is. */
  if (!cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8) return NULL;
  if (cinfo->global_state != DSTATE_PRELOAD || cinfo->input_scan_number != 1 || cinfo->input_iMCU_row != 0)
    return NULL;
  if (cinfo->entropy == NULL || cinfo->entropy->start_pass == own_start_pass) return NULL;
  if (cinfo->num_components < 1 || cinfo->num_components > MAX_COMPONENTS) return NULL;
  size_t blocks[MAX_COMPONENTS], total = 0;
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    blocks[ci] = (size_t)cinfo->comp_info[ci].width_in_blocks * cinfo->comp_info[ci].height_in_blocks;
    total += blocks[ci];
  }
  /* calloc: the masks of the zeroed coefficient buffer; pages are touched as scans come. */
  own_phuff *e = calloc(1, sizeof *e + total * sizeof(uint64_t));
  if (e == NULL) return NULL; /* libjpeg's own decoder then */
  uint64_t *masks = (uint64_t *)(e + 1);
  for (int ci = 0; ci < cinfo->num_components; ci++) {
    e->nonzero[ci] = masks;
    e->blocks[ci] = blocks[ci];
    masks += blocks[ci];
  }
  e->pub.start_pass = own_start_pass;
  e->ac_refine = decode_ac_refine;
#if defined(__x86_64__)
  if (mode == 1 && has_bmi2()) e->ac_refine = decode_ac_refine_bmi2;
#endif
  cinfo->entropy = &e->pub;
  /* The first scan is started: libjpeg's start_pass has checked it and recorded it in the
   * progression; doing that again would warn about a bogus progression. */
  scan_setup(cinfo, e);
#ifdef PXL_JPEG_PROGRESSIVE_CHECK
  __atomic_add_fetch(&pxl_jpeg_progressive_installs, 1, __ATOMIC_RELAXED);
#endif
  return e;
}

#else /* not libjpeg-turbo 2.x on a 64-bit build: libjpeg's own decoder */

void *pxl_jpeg_progressive_install(j_decompress_ptr cinfo) {
  (void)cinfo;
  return NULL;
}

#endif
